"""NodeResourcesBalancedAllocation as kube-scheduler v1.36 computes it (balanced_allocation.go):
fractions of allocatable (requested, not the 100m/200Mi defaults), capped at 1; 2 resources:
std = |f1 - f2| / 2; more: the population standard deviation; a balance (1 - std) * 100 truncated,
taken with the pod and without it: score 50 + (50 + with - without) / 2 (kubernetes#135573).
First by hand, then kube's own table (balanced_allocation_test.go) row by row."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from placer.engine.profile import ProfileError
from placer.plugins.node_resources_balanced_allocation import balance, balance_of_two
from placer.testing import cluster_of, container, decide, make_plugin, make_profile, node, pod, pod_info, scores

BALANCED = make_plugin("NodeResourcesBalancedAllocation")
GI_BYTES = 1024**3
THREE = make_plugin(
    "NodeResourcesBalancedAllocation",
    {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}]},
)


def v136(with_pod: int, without_pod: int) -> int:
    """kube v1.36's balancedResourceScorer from the two balances (Go int64 arithmetic)."""
    return 50 + (50 + with_pod - without_pod) // 2


def test_two_resources() -> None:
    cluster = cluster_of(
        [node("a", cpu="4", memory="8Gi"), node("b", cpu="4", memory="8Gi")],
        [pod("x", cpu="1", memory="3Gi", node_name="b")],
    )
    # a: with the pod cpu .25, memory .125 -> std .0625 -> 93; without: 0, 0 -> 100
    # b: with: .5, .5 -> 100; without: .25, .375 -> std .0625 -> 93 (the pod evens b out)
    assert (v136(93, 100), v136(100, 93)) == (71, 78)
    assert scores(BALANCED, pod("p", cpu="1", memory="1Gi"), cluster) == {"a": 71, "b": 78}


def test_fraction_capped_at_one() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi")])
    # with: cpu 8/4 -> 1, memory .125: std .4375 -> 56; without: 100
    assert scores(BALANCED, pod("p", cpu="8", memory="1Gi"), cluster) == {"a": v136(56, 100)} == {"a": 53}


def test_uses_requests_not_the_nonzero_defaults() -> None:
    # the bound best-effort pod adds nothing, and the incoming pod's missing memory is 0, not 200Mi
    cluster = cluster_of([node("a", cpu="4", memory="8Gi")], [pod("besteffort", node_name="a")])
    # with: cpu .25, memory 0 -> std .125 -> 87; without: 100
    assert scores(BALANCED, pod("p", cpu="1"), cluster) == {"a": v136(87, 100)} == {"a": 68}


def test_three_resources_population_std() -> None:
    cluster = cluster_of([node("g", cpu="4", memory="8Gi", allocatable={"nvidia.com/gpu": "4"})])
    fractions = [0.25, 0.125, 0.5]
    mean = sum(fractions) / 3
    std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / 3)  # 0.1559...
    assert int((1 - std) * 100) == 84
    wants_gpu = pod("p", cpu="1", memory="1Gi", requests={"nvidia.com/gpu": "2"})
    assert scores(THREE, wants_gpu, cluster) == {"g": v136(84, 100)} == {"g": 67}


def test_extended_resource_not_requested_is_left_out() -> None:
    cluster = cluster_of([node("g", cpu="4", memory="8Gi", allocatable={"nvidia.com/gpu": "4"})])
    # only cpu .25 and memory .125 count: 93 with the pod, 100 without, as with two resources
    assert scores(THREE, pod("p", cpu="1", memory="1Gi"), cluster) == {"g": 71}


def test_resource_the_node_lacks_is_left_out() -> None:
    cluster = cluster_of([node("plain", cpu="4", memory="8Gi"), node("g", cpu="4", memory="8Gi",
                                                                     allocatable={"nvidia.com/gpu": "4"})])
    # plain has no gpu: cpu .25 and memory .125 -> 93 (71); g: .25 .125 .5 -> 84 (67)
    wants_gpu = pod("p", cpu="1", memory="1Gi", requests={"nvidia.com/gpu": "2"})
    assert scores(THREE, wants_gpu, cluster) == {"g": 67, "plain": 71}


def test_a_pod_that_keeps_the_balance_scores_75() -> None:
    # the pod fills cpu and memory by the same fraction: the balance does not move, whatever it was
    cluster = cluster_of(
        [node("even", cpu="4", memory="4Gi"), node("skewed", cpu="4", memory="4Gi")],
        [pod("x", cpu="2", memory="2Gi", node_name="even"), pod("y", cpu="3", memory="1Gi", node_name="skewed")],
    )
    assert scores(BALANCED, pod("p", cpu="1", memory="1Gi"), cluster) == {"even": 75, "skewed": 75}


def test_pod_level_requests_are_what_the_pod_and_the_bound_pods_weigh() -> None:
    # a bound pod with pod-level requests holds 2 cpu / 1Gi although its container asks for less;
    # the incoming pod weighs its pod-level 1 cpu / 3Gi, not its container's 100m
    bound = pod("x", cpu="100m", memory="100Mi", node_name="a")
    bound["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "1Gi"}}
    incoming = pod("p", cpu="100m")
    incoming["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "3Gi"}}
    cluster = cluster_of([node("a", cpu="4", memory="4Gi")], [bound])
    # with: cpu 3/4, memory 4/4 -> std .125 -> 87; without: .5, .25 -> std .125 -> 87: 75
    assert scores(BALANCED, incoming, cluster) == {"a": 75}


def test_best_effort_pod_is_skipped_and_scores_zero() -> None:
    cluster = cluster_of([node("a"), node("b", cpu="2")])
    best_effort = pod("p")
    assert BALANCED.pre_score(pod_info(best_effort), cluster) is False
    profile = make_profile(scores=[{"name": "NodeResourcesBalancedAllocation", "weight": 5}])
    decision = decide(profile, best_effort, cluster)
    assert [(s.node, s.total, s.plugins) for s in decision.top] == [
        ("a", 0, {"NodeResourcesBalancedAllocation": 0}),
        ("b", 0, {"NodeResourcesBalancedAllocation": 0}),
    ]


def test_pod_requesting_only_an_unlisted_resource_is_best_effort_here() -> None:
    cluster = cluster_of([node("g", allocatable={"nvidia.com/gpu": "4"})])
    assert scores(BALANCED, pod("p", requests={"nvidia.com/gpu": "1"}), cluster) == {"g": 0}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resources": [{"name": "cpu", "weight": 2}]}, "args.resources[0].weight: Input should be 1"),
        ({"resources": []}, "args.resources"),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "duplicate resource name(s) cpu"),
        ({"resources": [{"name": ""}]}, "args.resources[0].name"),
        ({"scoringStrategy": {}}, "args.scoringStrategy"),
    ],
)
def test_bad_args(args: dict, field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(scores=[{"name": "NodeResourcesBalancedAllocation", "args": args}], name="bal")
    assert str(caught.value).startswith('profile "bal": scores[0] NodeResourcesBalancedAllocation: ')
    assert field in str(caught.value)


def test_not_a_filter() -> None:
    with pytest.raises(ProfileError, match="NodeResourcesBalancedAllocation is not a filter plugin"):
        make_profile(filters=[{"name": "NodeResourcesBalancedAllocation"}])


# ----------------------------------------------- kube v1.36 balanced_allocation_test.go, row by row
# makeNode(name, milliCPU, memory, extended) and st.MakePod().Req(a).Req(b) (one container per Req)
# as Placer's objects; the rows that need DRA-backed extended resources (a DeviceClass and
# ResourceSlices: DRAExtendedResource) are not ported: Placer's scores count such a resource against
# node allocatable only (the filter side is modelled: NodeResourcesFit, DynamicResources).


def kube_node(name: str, milli_cpu: int, memory: int, extended: dict[str, int] | None = None) -> dict[str, Any]:
    return node(name, cpu=f"{milli_cpu}m", memory=str(memory), pods=None,
                allocatable={k: str(v) for k, v in (extended or {}).items()})


def kube_pod(name: str, *requests: dict[str, str], node_name: str | None = None) -> dict[str, Any]:
    containers = [container(f"c{i}", requests=r) for i, r in enumerate(requests)]
    return pod(name, containers=containers, node_name=node_name)


def cpu_mem(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


CPU_MEMORY_GPU = [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}]

KUBE_ROWS = [
    ("nothing scheduled, resources requested, differently sized nodes",
     kube_pod("p", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")),
     [kube_node("node1", 4000, 10000), kube_node("node2", 6000, 10000)], [], None,
     {"node1": 68, "node2": 75}),
    ("resources requested, pods scheduled with resources",
     kube_pod("p", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")),
     [kube_node("node1", 10000, 20000), kube_node("node2", 10000, 20000)],
     [kube_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node_name="node1"),
      kube_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node_name="node2")], None,
     {"node1": 73, "node2": 74}),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     kube_pod("p", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")),
     [kube_node("node1", 10000, 20000), kube_node("node2", 10000, 50000)],
     [kube_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node_name="node1"),
      kube_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node_name="node2")], None,
     {"node1": 73, "node2": 70}),
    ("resources requested, pods scheduled with resources, nodes to reach min/max score",
     kube_pod("p", {"memory": "2000"}, {"memory": "3000"}),
     [kube_node("node1", 3000, 5000), kube_node("node2", 3000, 5000)],
     [kube_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node_name="node1")], None,
     {"node1": 100, "node2": 50}),
    ("requested resources at node capacity",
     kube_pod("p", {"cpu": "1000m"}, {"cpu": "2000m"}),
     [kube_node("node1", 6000, 10000), kube_node("node2", 6000, 10000)],
     [kube_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node_name="node1"),
      kube_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node_name="node2")], None,
     {"node1": 62, "node2": 62}),
    ("scalar resource is included in the score computation if pod requests the scalar resource",
     kube_pod("p", {"cpu": "0", "memory": "0", "nvidia.com/gpu": "1"}),
     [kube_node("node1", 3500, 40000, {"nvidia.com/gpu": 8}), kube_node("node2", 3500, 40000, {"nvidia.com/gpu": 8})],
     [kube_pod("e1", cpu_mem("1000m", "2000"), {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": "3"},
               node_name="node1"),
      kube_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node_name="node2")], CPU_MEMORY_GPU,
     {"node1": 75, "node2": 76}),
    ("scalar resource is not included in the score computation if pod doesn't request the scalar resource",
     kube_pod("p", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")),
     [kube_node("node1", 3500, 40000, {"nvidia.com/gpu": 8}), kube_node("node2", 3500, 40000)], [], CPU_MEMORY_GPU,
     {"node1": 56, "node2": 56}),
    ("resources requested, pods scheduled with resources if PreScore not called",
     kube_pod("p", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")),
     [kube_node("node1", 10000, 20000), kube_node("node2", 10000, 20000)],
     [kube_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node_name="node1"),
      kube_pod("e2", cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000"), node_name="node2")], None,
     {"node1": 73, "node2": 74}),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "existing", "resources", "expected"), KUBE_ROWS,
                         ids=[row[0] for row in KUBE_ROWS])
def test_kube_balanced_allocation_rows(
    name: str, incoming: dict, nodes: list, existing: list, resources: list | None, expected: dict[str, int]
) -> None:
    plugin = BALANCED if resources is None else make_plugin("NodeResourcesBalancedAllocation",
                                                            {"resources": resources})
    assert scores(plugin, incoming, cluster_of(nodes, existing)) == expected


def test_kube_row_nothing_requested_is_skipped_in_pre_score() -> None:
    # "nothing scheduled, nothing requested, skip in PreScore": st.MakePod() has no containers
    cluster = cluster_of([kube_node("node1", 4000, 10000), kube_node("node2", 4000, 10000)])
    assert BALANCED.pre_score(pod_info(pod("p", containers=[])), cluster) is False


def test_the_two_resource_path_equals_the_general_one() -> None:
    # balance_of_two is the default profile's fast path: it must give balance(with) - balance(without)
    # to the bit, on fractions at and over 1, nodes lacking a resource, and values near a truncation
    rng = np.random.default_rng(7)
    size = 20000
    allocatable_a = rng.integers(0, 64, size) * 1000
    allocatable_b = rng.integers(0, 64, size) * GI_BYTES // 4
    used_a = rng.integers(0, 80, size) * 1000 * rng.integers(0, 2, size)
    used_b = rng.integers(0, 80, size) * GI_BYTES // 8
    amounts = np.asarray([1300, 3 * GI_BYTES // 10])
    with_pod = [(used_a + amounts[0], allocatable_a), (used_b + amounts[1], allocatable_b)]
    without_pod = [(used_a, allocatable_a), (used_b, allocatable_b)]
    general = balance(with_pod) - balance(without_pod)
    fast = balance_of_two(np.column_stack((used_a, used_b)), np.column_stack((allocatable_a, allocatable_b)), amounts)
    assert np.array_equal(fast, general)
    assert set(np.unique(general)) > {0}
