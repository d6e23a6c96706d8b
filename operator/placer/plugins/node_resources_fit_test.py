"""NodeResourcesFit: the filter's reasons and the three scoring strategies, against numbers worked
out by hand with kube-scheduler's formulas (least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go, helper/shape_score.go)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError
from placer.plugins.node_resources_fit import allocation as allocation_of
from placer.plugins.node_resources_fit import broken_linear, pod_request_for_score
from placer.testing import (
    GiB,
    MiB,
    cluster_of,
    container,
    decide,
    filter_result,
    fits_without_answers,
    make_plugin,
    make_profile,
    node,
    pod,
    raw_scores,
    scores,
)
from placer.testing_devices import allocation, device, device_class, request, resource_claim, resource_slice

FIT = make_plugin("NodeResourcesFit")


def reasons(pod_obj: dict, cluster: ClusterState) -> dict[str, int]:
    """The runtime's reason histogram for a profile with this filter only."""
    decision = decide(make_profile(filters=[{"name": "NodeResourcesFit"}], scores=[]), pod_obj, cluster)
    assert decision.node is None
    return decision.reasons


# ------------------------------------------------------------------------------------- filter


def test_fits_when_requests_are_within_allocatable() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi"), node("b", cpu="1", memory="8Gi")])
    assert filter_result(FIT, pod("p", cpu="2", memory="1Gi"), cluster) == {"a": True, "b": False}


def test_exactly_full_fits_and_one_milli_more_does_not() -> None:
    cluster = cluster_of([node("a", cpu="4")], [pod("bound", cpu="3", node_name="a")])
    assert filter_result(FIT, pod("p", cpu="1"), cluster) == {"a": True}
    assert filter_result(FIT, pod("p", cpu="1001m"), cluster) == {"a": False}
    assert reasons(pod("p", cpu="1001m"), cluster) == {"Insufficient cpu": 1}


def test_insufficient_cpu_and_memory_both_reported_for_one_node() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi"), node("b", cpu="8", memory="4Gi")])
    # a lacks cpu and memory, b lacks memory only: counted per reason
    assert reasons(pod("p", cpu="5", memory="9Gi"), cluster) == {"Insufficient cpu": 1, "Insufficient memory": 2}
    message = decide(make_profile(filters=[{"name": "NodeResourcesFit"}], scores=[]), pod("p", cpu="5", memory="9Gi"),
                     cluster).message
    assert message == "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."


def test_too_many_pods_even_for_a_pod_without_requests() -> None:
    cluster = cluster_of([node("a", pods="1"), node("b", pods="2")], [pod("x", node_name="a"), pod("y", node_name="b")])
    assert filter_result(FIT, pod("p"), cluster) == {"a": False, "b": True}
    cluster.assume(parse_pod(pod("z")), "b")
    assert reasons(pod("p"), cluster) == {"Too many pods": 2}


def test_too_many_pods_and_insufficient_cpu_together() -> None:
    cluster = cluster_of([node("a", cpu="1", pods="1")], [pod("x", cpu="1", node_name="a")])
    assert reasons(pod("p", cpu="500m"), cluster) == {"Too many pods": 1, "Insufficient cpu": 1}


def test_bound_and_assumed_pods_both_count() -> None:
    cluster = cluster_of([node("a", cpu="4")], [pod("bound", cpu="2", node_name="a")])
    cluster.assume(parse_pod(pod("assumed", cpu="1500m")), "a")
    assert filter_result(FIT, pod("p", cpu="500m"), cluster) == {"a": True}
    assert filter_result(FIT, pod("p", cpu="501m"), cluster) == {"a": False}
    cluster.forget("default/assumed")
    assert filter_result(FIT, pod("p", cpu="2"), cluster) == {"a": True}


def test_init_container_peak_and_overhead_count() -> None:
    cluster = cluster_of([node("a", cpu="4")], [pod("bound", cpu="1", node_name="a")])  # 3 cpu free
    with_init = pod("p", containers=[container("c", cpu="1")], init_containers=[container("i", cpu="3500m")])
    assert filter_result(FIT, with_init, cluster) == {"a": False}
    small_init = pod("p", containers=[container("c", cpu="1")], init_containers=[container("i", cpu="3")])
    assert filter_result(FIT, small_init, cluster) == {"a": True}
    with_overhead = pod("p", cpu="2900m", overhead={"cpu": "101m"})
    assert filter_result(FIT, with_overhead, cluster) == {"a": False}


def test_ephemeral_storage() -> None:
    cluster = cluster_of([node("a", allocatable={"ephemeral-storage": "10Gi"}), node("b")])
    wants = pod("p", requests={"ephemeral-storage": "5Gi"})
    assert filter_result(FIT, wants, cluster) == {"a": True, "b": False}
    assert reasons(pod("p", requests={"ephemeral-storage": "11Gi"}), cluster) == {"Insufficient ephemeral-storage": 2}


def test_extended_resources_and_ignored_ones() -> None:
    cluster = cluster_of([node("gpu", allocatable={"nvidia.com/gpu": "1"}), node("plain")])
    wants = pod("p", requests={"nvidia.com/gpu": "1"})
    assert filter_result(FIT, wants, cluster) == {"gpu": True, "plain": False}
    assert reasons(pod("p", requests={"nvidia.com/gpu": "2"}), cluster) == {"Insufficient nvidia.com/gpu": 2}
    ignored = make_plugin("NodeResourcesFit", {"ignoredResources": ["nvidia.com/gpu"]})
    assert filter_result(ignored, pod("p", requests={"nvidia.com/gpu": "2"}), cluster) == {"gpu": True, "plain": True}
    group = make_plugin("NodeResourcesFit", {"ignoredResourceGroups": ["nvidia.com"]})
    assert filter_result(group, pod("p", requests={"nvidia.com/gpu": "2"}), cluster) == {"gpu": True, "plain": True}
    # ignoring a group leaves other groups checked
    assert filter_result(group, pod("p", requests={"example.com/foo": "1"}), cluster) == {"gpu": False, "plain": False}


def test_zero_request_for_a_resource_the_node_lacks_fits() -> None:
    cluster = cluster_of([node("a")])
    assert filter_result(FIT, pod("p", requests={"example.com/foo": "0"}), cluster) == {"a": True}


# ------------------------------------------------------------------------------ LeastAllocated


def test_least_allocated_with_default_requests_for_requestless_pods() -> None:
    # kube counts a container without requests as 100m / 200Mi (NonZeroRequested), both for the
    # pods already on the node and for the incoming pod.
    cluster = cluster_of(
        [node("small", cpu="1", memory="1Gi"), node("big", cpu="2", memory="4Gi")],
        [pod("besteffort", node_name="small")],
    )
    # small: cpu (1000-200)*100/1000 = 80; memory (1Gi-400Mi)*100/1Gi = 60.9 -> 60; (80+60)/2 = 70
    # big:   cpu (2000-100)*100/2000 = 95; memory (4Gi-200Mi)*100/4Gi = 95.1 -> 95; 95
    assert scores(FIT, pod("p"), cluster) == {"big": 95, "small": 70}


def test_least_allocated_resource_weights() -> None:
    plugin = make_plugin(
        "NodeResourcesFit",
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 3},
                                                                      {"name": "memory", "weight": 1}]}},
    )
    cluster = cluster_of([node("small", cpu="1", memory="1Gi")], [pod("besteffort", node_name="small")])
    # (80*3 + 60*1) / 4 = 75
    assert scores(plugin, pod("p"), cluster) == {"small": 75}


def test_least_allocated_over_capacity_scores_zero_for_that_resource() -> None:
    # 100m default on a 50m node: requested > capacity -> 0 for cpu; memory (8Gi-200Mi)/8Gi -> 97
    cluster = cluster_of([node("tiny", cpu="50m", memory="8Gi")])
    assert scores(FIT, pod("p"), cluster) == {"tiny": (0 + 97) // 2}


def test_least_allocated_extended_resource_scored_only_when_requested() -> None:
    plugin = make_plugin(
        "NodeResourcesFit",
        {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 2}]}},
    )
    cluster = cluster_of([node("gpu", cpu="4", allocatable={"nvidia.com/gpu": "4"}), node("plain", cpu="4")])
    # gpu: cpu (4000-2000)*100/4000 = 50, gpu (4-1)*100/4 = 75: (50 + 2*75) / 3 = 66
    # plain: no gpu allocatable, so only cpu counts: 50
    assert scores(plugin, pod("p", cpu="2", requests={"nvidia.com/gpu": "1"}), cluster) == {"gpu": 66, "plain": 50}
    # a pod that does not request the gpu leaves it out everywhere: cpu only
    assert scores(plugin, pod("q", cpu="2"), cluster) == {"gpu": 50, "plain": 50}


# ------------------------------------------------------------------------------- MostAllocated

MOST = make_plugin("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated"}})


def test_most_allocated() -> None:
    cluster = cluster_of(
        [node("a", cpu="4", memory="8Gi"), node("b", cpu="8", memory="8Gi")],
        [pod("x", cpu="1", memory="2Gi", node_name="a")],
    )
    # a: cpu 2000*100/4000 = 50, memory 3Gi*100/8Gi = 37.5 -> 37: (50+37)/2 = 43
    # b: cpu 1000*100/8000 = 12.5 -> 12, memory 1Gi*100/8Gi = 12.5 -> 12: 12
    assert scores(MOST, pod("p", cpu="1", memory="1Gi"), cluster) == {"a": 43, "b": 12}


def test_most_allocated_caps_requested_at_capacity() -> None:
    cluster = cluster_of([node("tiny", cpu="50m", memory="100Mi")])
    assert scores(MOST, pod("p"), cluster) == {"tiny": 100}


# ---------------------------------------------------------------------- RequestedToCapacityRatio


def rtcr(shape: list[tuple[int, int]], resources: list[dict] | None = None) -> object:
    strategy: dict = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in shape]},
    }
    if resources is not None:
        strategy["resources"] = resources
    return make_plugin("NodeResourcesFit", {"scoringStrategy": strategy})


def test_requested_to_capacity_ratio_decreasing_shape_truncates_like_go() -> None:
    plugin = rtcr([(0, 10), (30, 3), (100, 0)])  # scaled: (0,100) (30,30) (100,0)
    cluster = cluster_of([node("a", cpu="1", memory="100Mi")])
    # cpu: utilization 100*100/1000 = 10 -> 100 + (30-100)*(10-0)/30 = 100 + (-700/30 -> -23) = 77
    #      (floor division would give 76)
    # memory: utilization 54Mi*100/100Mi = 54 -> 30 + (0-30)*(54-30)/70 = 30 + (-720/70 -> -10) = 20 (floor: 19)
    # node: math.Round((77+20)/2 = 48.5) = 49 (half away from zero; banker's rounding would give 48)
    assert raw_scores(plugin, pod("p", cpu="100m", memory="54Mi"), cluster) == {"a": 49}
    assert scores(plugin, pod("p", cpu="100m", memory="54Mi"), cluster) == {"a": 49}


def test_requested_to_capacity_ratio_drops_zero_scores_from_the_weights() -> None:
    plugin = rtcr([(0, 10), (30, 3), (100, 0)])
    cluster = cluster_of([node("a", cpu="1", memory="100Mi")])
    # memory fully used: utilization 100 -> score 0, left out of the weighted mean: cpu alone, 77
    assert scores(plugin, pod("p", cpu="100m", memory="100Mi"), cluster) == {"a": 77}


def test_requested_to_capacity_ratio_increasing_shape_uses_default_requests() -> None:
    plugin = rtcr([(0, 0), (100, 10)], resources=[{"name": "cpu", "weight": 1}])
    cluster = cluster_of([node("a", cpu="1"), node("b", cpu="4")], [pod("x", cpu="400m", node_name="a")])
    # request-less pod counts as 100m: a 500/1000 -> 50, b 100/4000 -> 2 (2.5 truncated)
    assert scores(plugin, pod("p"), cluster) == {"a": 50, "b": 2}


def test_requested_to_capacity_ratio_weights_and_flat_ends() -> None:
    plugin = rtcr([(20, 2), (80, 8)], resources=[{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}])
    cluster = cluster_of([node("a", cpu="10", memory="10Gi")])
    # cpu utilization 5 (below the first point) -> 20; memory 90 (above the last point) -> 80
    # (20*1 + 80*3) / 4 = 65
    assert scores(plugin, pod("p", cpu="500m", memory="9Gi"), cluster) == {"a": 65}


# ---------------------------------------------------------------------------------- args


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"scoringStrategy": {"type": "Foo"}}, "args.scoringStrategy.type"),
        ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "requestedToCapacityRatio"),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
                "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}},
            "args.scoringStrategy.requestedToCapacityRatio",
        ),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
                "shape": [{"utilization": 50, "score": 11}]}}},
            "args.scoringStrategy.requestedToCapacityRatio.shape[0].score",
        ),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
                "shape": [{"utilization": 101, "score": 1}]}}},
            "args.scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
        ),
        (
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}},
            "args.scoringStrategy.resources[0].weight",
        ),
        ({"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}}, "duplicate resource name(s) cpu"),
        ({"ignoredResources": "nvidia.com/gpu"}, "args.ignoredResources"),
        ({"scoringStrategy": {"type": "MostAllocated", "shape": []}}, "args.scoringStrategy.shape"),
    ],
)
def test_bad_args_name_profile_plugin_and_field(args: dict, field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(scores=[{"name": "NodeResourcesFit", "args": args}], name="packing")
    message = str(caught.value)
    assert message.startswith('profile "packing": scores[0] NodeResourcesFit: ')
    assert field in message


def test_filter_and_score_take_their_own_args() -> None:
    profile = make_profile(
        filters=[{"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"]}}],
        scores=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
    )
    assert profile.filters[0].args.ignoredResources == ("example.com/foo",)
    assert profile.scores[0][0].args.scoringStrategy.type == "MostAllocated"
    assert profile.scores[0][0].args.ignoredResources == ()


def test_default_strategy_is_least_allocated_on_cpu_and_memory() -> None:
    strategy = FIT.args.scoringStrategy
    assert strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in strategy.resources] == [("cpu", 1), ("memory", 1)]
    assert GiB == 1024 * MiB


# ------------------------------------------------------------- pod-level resources and resize (v1.36)


def with_pod_level(pod_obj: dict, requests: dict[str, str] | None = None,
                   limits: dict[str, str] | None = None) -> dict:
    """The pod with `spec.resources` (pod-level requests and limits)."""
    resources: dict = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    pod_obj["spec"]["resources"] = resources
    return pod_obj


def resizing(pod_obj: dict, allocated: dict[str, str] | None, running: dict[str, str] | None,
             reason: str | None = None) -> dict:
    """The pod's one container's status as an in-place resize leaves it: what the node allocated
    (`allocatedResources`), what runs (`resources.requests`), and a PodResizePending condition."""
    status: dict = {"name": pod_obj["spec"]["containers"][0]["name"]}
    if allocated is not None:
        status["allocatedResources"] = dict(allocated)
    if running is not None:
        status["resources"] = {"requests": dict(running)}
    pod_obj["status"]["containerStatuses"] = [status]
    if reason is not None:
        pod_obj["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": reason}]
    return pod_obj


def test_pod_level_cpu_request_must_fit_although_no_container_requests_any() -> None:
    # the check: 3 cpu at pod level, nothing in the containers, 2 cpu free
    cluster = cluster_of([node("a", cpu="4")], [pod("bound", cpu="2", node_name="a")])
    wants = with_pod_level(pod("p"), {"cpu": "3"})
    assert filter_result(FIT, wants, cluster) == {"a": False}
    assert reasons(wants, cluster) == {"Insufficient cpu": 1}
    assert filter_result(FIT, with_pod_level(pod("p"), {"cpu": "2"}), cluster) == {"a": True}


def test_a_bound_pods_pod_level_request_is_counted_on_its_node() -> None:
    bound = with_pod_level(pod("bound", cpu="100m", node_name="a"), {"cpu": "3"})
    cluster = cluster_of([node("a", cpu="4")], [bound])
    assert cluster.requested[cluster.index["a"], 0] == 3000
    assert filter_result(FIT, pod("p", cpu="1001m"), cluster) == {"a": False}
    assert filter_result(FIT, pod("p", cpu="1"), cluster) == {"a": True}


def test_pod_level_limits_default_the_requests_as_the_api_server_does() -> None:
    # a hand-written pod with pod-level limits only: the API server would default its requests to
    # them (and to the containers' total where the containers request the resource)
    cluster = cluster_of([node("a", cpu="4", memory="4Gi")])
    limited = with_pod_level(pod("p"), limits={"cpu": "5", "memory": "1Gi"})
    assert reasons(limited, cluster) == {"Insufficient cpu": 1}
    from_containers = with_pod_level(pod("p", cpu="1"), limits={"cpu": "5"})
    assert filter_result(FIT, from_containers, cluster) == {"a": True}
    assert parse_pod(from_containers).requests == {"cpu": 1000}


def test_extended_resources_still_come_from_the_containers() -> None:
    cluster = cluster_of([node("gpu", allocatable={"nvidia.com/gpu": "1"})])
    wants = with_pod_level(pod("p", requests={"nvidia.com/gpu": "2"}), {"cpu": "1"})
    assert reasons(wants, cluster) == {"Insufficient nvidia.com/gpu": 1}


def test_a_resize_in_progress_holds_the_largest_of_spec_allocated_and_running() -> None:
    # spec asks 1 cpu (scaled down), the node allocated 3, 2 are running: 3 are held until it settles
    bound = resizing(pod("bound", cpu="1", node_name="a"), allocated={"cpu": "3"}, running={"cpu": "2"})
    cluster = cluster_of([node("a", cpu="4")], [bound])
    assert filter_result(FIT, pod("p", cpu="1"), cluster) == {"a": True}
    assert filter_result(FIT, pod("p", cpu="1001m"), cluster) == {"a": False}
    # scaled up: the spec's 3 cpu are held while 1 runs
    bound = resizing(pod("bound", cpu="3", node_name="a"), allocated={"cpu": "1"}, running={"cpu": "1"})
    assert filter_result(FIT, pod("p", cpu="1001m"), cluster_of([node("a", cpu="4")], [bound])) == {"a": False}


def test_an_infeasible_resize_holds_what_runs_not_the_spec() -> None:
    bound = resizing(pod("bound", cpu="8", node_name="a"), allocated={"cpu": "1"}, running={"cpu": "1"},
                     reason="Infeasible")
    cluster = cluster_of([node("a", cpu="4")], [bound])
    assert filter_result(FIT, pod("p", cpu="3"), cluster) == {"a": True}
    # a Deferred one holds the spec
    bound = resizing(pod("bound", cpu="3", node_name="a"), allocated={"cpu": "1"}, running={"cpu": "1"},
                     reason="Deferred")
    assert filter_result(FIT, pod("p", cpu="1001m"), cluster_of([node("a", cpu="4")], [bound])) == {"a": False}


def test_the_pod_being_placed_is_checked_on_its_spec() -> None:
    # kube's PreFilter reads the spec alone (UseStatusResources is for pods on nodes)
    cluster = cluster_of([node("a", cpu="4")])
    incoming = resizing(pod("p", cpu="1"), allocated={"cpu": "6"}, running={"cpu": "6"})
    assert filter_result(FIT, incoming, cluster) == {"a": True}
    info = parse_pod(incoming)
    assert (info.requests, info.fit_requests) == ({"cpu": 6000}, {"cpu": 1000})


def test_preemption_frees_a_victims_pod_level_or_resized_requests() -> None:
    level = with_pod_level(pod("level", cpu="100m", node_name="a"), {"cpu": "2"})
    resized = resizing(pod("resized", cpu="500m", node_name="a"), allocated={"cpu": "2"}, running={"cpu": "2"})
    cluster = cluster_of([node("a", cpu="4")], [level, resized])
    incoming = parse_pod(pod("p", cpu="2"))
    slot = cluster.index["a"]
    records = {record.pod.name: record for record in cluster.pods_on("a")}
    assert not FIT.fits_without(incoming, cluster, slot, [])
    assert FIT.fits_without(incoming, cluster, slot, [records["level"]])
    assert FIT.fits_without(incoming, cluster, slot, [records["resized"]])
    assert fits_without_answers(FIT, incoming, cluster) == {True, False}


def test_a_node_smaller_than_the_request_is_not_a_preemption_candidate() -> None:
    # kube v1.36's Unresolvable: evicting pods cannot make 8 cpu fit in 4
    cluster = cluster_of([node("small", cpu="4"), node("big", cpu="16")],
                         [pod("x", cpu="4", node_name="small"), pod("y", cpu="12", node_name="big")])
    incoming = parse_pod(pod("p", cpu="8"))
    rejected = np.asarray([cluster.index["small"], cluster.index["big"]])
    assert FIT.resolvable_nodes(incoming, cluster, rejected).tolist() == [False, True]
    # "Too many pods" alone is always resolvable
    full = cluster_of([node("a", pods="1")], [pod("x", node_name="a")])
    assert FIT.resolvable_nodes(parse_pod(pod("p")), full, np.asarray([0])).tolist() == [True]


def test_scores_read_pod_level_requests() -> None:
    # LeastAllocated: the pod-level 2 cpu / 1Gi, not the container's 100m
    cluster = cluster_of([node("a", cpu="4", memory="4Gi")])
    wants = with_pod_level(pod("p", cpu="100m"), {"cpu": "2", "memory": "1Gi"})
    # cpu (4000-2000)*100/4000 = 50, memory (4Gi-1Gi)*100/4Gi = 75: 62
    assert scores(FIT, wants, cluster) == {"a": 62}


def test_score_defaults_with_pod_level_requests_follow_kube() -> None:
    # pod-level cpu only; the containers request no memory: the incoming pod scores 200Mi per
    # container (resource_allocation.go), a bound one holds 200Mi once (getNonMissingContainerRequests)
    two = [container("a"), container("b")]
    info = parse_pod(with_pod_level(pod("p", containers=two), {"cpu": "1"}))
    assert (info.requests, info.score_cpu, info.score_memory) == ({"cpu": 1000}, 1000, 400 * MiB)
    assert (info.nonzero_cpu, info.nonzero_memory) == (1000, 400 * MiB)
    # one container asks memory: a bound pod holds just that, the incoming pod scores 1Gi + 200Mi
    mixed = [container("a", memory="1Gi"), container("b")]
    info = parse_pod(with_pod_level(pod("p", containers=mixed), {"cpu": "1"}))
    assert (info.nonzero_cpu, info.nonzero_memory) == (1000, GiB)
    assert (info.score_cpu, info.score_memory) == (1000, GiB + 200 * MiB)


# ---------------------------------------------------------- kube v1.36 fit_test.go, row by row
# newResourcePod(usage...) is a pod with one container per usage, requesting cpu (milli), memory,
# ephemeral-storage and the scalar resources given (zeros written out, as there);
# makeAllocatableResources(10, 20, 32, 5, 20, 5): cpu 10m, memory 20, pods 32, example.com/aaa 5,
# ephemeral-storage 20, hugepages-2Mi 5. The rows with a DeviceClass naming the resource
# (DRAExtendedResource) are in `test_kube_enough_requests_dra_backed`.

EXT_A, EXT_B = "example.com/aaa", "example.com/bbb"
K8S_A, K8S_B = "kubernetes.io/something", "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
DRA_RESOURCE = "extended.resource.dra.io/something"


def usage(cpu: int = 0, memory: int = 0, storage: int = 0, **scalars: int) -> dict[str, str]:
    """A framework.Resource as container requests; scalar names with '/' or '-' passed via **{...}."""
    return {"cpu": f"{cpu}m", "memory": str(memory), "ephemeral-storage": str(storage),
            **{name: str(amount) for name, amount in scalars.items()}}


def resource_pod(name: str, *containers: dict[str, str], init: tuple[dict[str, str], ...] = (),
                 node_name: str | None = None, overhead: dict[str, str] | None = None) -> dict:
    return pod(name, node_name=node_name, overhead=overhead,
               containers=[container(f"c{i}", requests=r) for i, r in enumerate(containers)],
               init_containers=[container(f"i{i}", requests=r) for i, r in enumerate(init)])


def fit_node(pods: str = "32", **extra: str) -> dict:
    allocatable = {EXT_A: "5", "ephemeral-storage": "20", HUGE_A: "5", **extra}
    return node("node", cpu="10m", memory="20", pods=pods, allocatable=allocatable)


def fit_status(plugin: object, pod_obj: dict, cluster: ClusterState) -> tuple[str, set[str]] | None:
    """kube's Filter status on the one node: None, or (code, reasons)."""
    info = parse_pod(pod_obj)
    assert isinstance(plugin, type(FIT))
    mask = plugin.filter(info, cluster)
    slot = cluster.index["node"]
    if mask is None or mask[slot]:
        return None
    rejected = np.asarray([slot])
    resolvable = plugin.resolvable_nodes(info, cluster, rejected)[0]
    return ("Unschedulable" if resolvable else "UnschedulableAndUnresolvable",
            set(plugin.reason_counts(info, cluster, rejected)))


U, UU = "Unschedulable", "UnschedulableAndUnresolvable"


def ins(resource: str) -> str:
    return f"Insufficient {resource}"


ENOUGH_REQUESTS = [
    # (name, incoming pod, the node's pod, args, want: None or (code, reasons))
    ("no resources requested always fits", pod("p", containers=[]), resource_pod("e", usage(10, 20)), {}, None),
    ("too many resources fails", resource_pod("p", usage(1, 1)), resource_pod("e", usage(10, 20)), {},
     (U, {ins("cpu"), ins("memory")})),
    ("too many resources fails due to init container cpu",
     resource_pod("p", usage(1, 1), init=(usage(3, 1),)), resource_pod("e", usage(8, 19)), {}, (U, {ins("cpu")})),
    ("too many resources fails due to highest init container cpu",
     resource_pod("p", usage(1, 1), init=(usage(3, 1), usage(2, 1))), resource_pod("e", usage(8, 19)), {},
     (U, {ins("cpu")})),
    ("too many resources fails due to init container memory",
     resource_pod("p", usage(1, 1), init=(usage(1, 3),)), resource_pod("e", usage(9, 19)), {}, (U, {ins("memory")})),
    ("too many resources fails due to highest init container memory",
     resource_pod("p", usage(1, 1), init=(usage(1, 3), usage(1, 2))), resource_pod("e", usage(9, 19)), {},
     (U, {ins("memory")})),
    ("init container fits because it's the max, not sum, of containers and init containers",
     resource_pod("p", usage(1, 1), init=(usage(1, 1),)), resource_pod("e", usage(9, 19)), {}, None),
    ("multiple init containers fit because it's the max, not sum, of containers and init containers",
     resource_pod("p", usage(1, 1), init=(usage(1, 1), usage(1, 1))), resource_pod("e", usage(9, 19)), {}, None),
    ("both resources fit", resource_pod("p", usage(1, 1)), resource_pod("e", usage(5, 5)), {}, None),
    ("one resource memory fits", resource_pod("p", usage(2, 1)), resource_pod("e", usage(9, 5)), {},
     (U, {ins("cpu")})),
    ("one resource cpu fits", resource_pod("p", usage(1, 2)), resource_pod("e", usage(5, 19)), {},
     (U, {ins("memory")})),
    ("equal edge case", resource_pod("p", usage(5, 1)), resource_pod("e", usage(5, 19)), {}, None),
    ("equal edge case for init container", resource_pod("p", usage(4, 1), init=(usage(5, 1),)),
     resource_pod("e", usage(5, 19)), {}, None),
    ("extended resource fits", resource_pod("p", usage(**{EXT_A: 1})), resource_pod("e", usage()), {}, None),
    ("extended resource fits for init container", resource_pod("p", usage(), init=(usage(**{EXT_A: 1}),)),
     resource_pod("e", usage()), {}, None),
    ("extended resource capacity enforced", resource_pod("p", usage(1, 1, **{EXT_A: 10})),
     resource_pod("e", usage(**{EXT_A: 0})), {}, (UU, {ins(EXT_A)})),
    ("extended resource capacity enforced for init container",
     resource_pod("p", usage(), init=(usage(1, 1, **{EXT_A: 10}),)), resource_pod("e", usage(**{EXT_A: 0})), {},
     (UU, {ins(EXT_A)})),
    ("extended resource allocatable enforced", resource_pod("p", usage(1, 1, **{EXT_A: 1})),
     resource_pod("e", usage(**{EXT_A: 5})), {}, (U, {ins(EXT_A)})),
    ("extended resource allocatable enforced for init container",
     resource_pod("p", usage(), init=(usage(1, 1, **{EXT_A: 1}),)), resource_pod("e", usage(**{EXT_A: 5})), {},
     (U, {ins(EXT_A)})),
    ("extended resource allocatable enforced for multiple containers",
     resource_pod("p", usage(1, 1, **{EXT_A: 3}), usage(1, 1, **{EXT_A: 3})), resource_pod("e", usage(**{EXT_A: 2})),
     {}, (UU, {ins(EXT_A)})),
    ("extended resource allocatable admits multiple init containers",
     resource_pod("p", usage(), init=(usage(1, 1, **{EXT_A: 3}), usage(1, 1, **{EXT_A: 3}))),
     resource_pod("e", usage(**{EXT_A: 2})), {}, None),
    ("extended resource allocatable enforced for multiple init containers",
     resource_pod("p", usage(), init=(usage(1, 1, **{EXT_A: 6}), usage(1, 1, **{EXT_A: 3}))),
     resource_pod("e", usage(**{EXT_A: 2})), {}, (UU, {ins(EXT_A)})),
    ("extended resource allocatable enforced for unknown resource", resource_pod("p", usage(1, 1, **{EXT_B: 1})),
     resource_pod("e", usage()), {}, (UU, {ins(EXT_B)})),
    ("extended resource allocatable enforced for unknown resource for init container",
     resource_pod("p", usage(), init=(usage(1, 1, **{EXT_B: 1}),)), resource_pod("e", usage()), {},
     (UU, {ins(EXT_B)})),
    ("kubernetes.io resource capacity enforced", resource_pod("p", usage(1, 1, **{K8S_A: 10})),
     resource_pod("e", usage()), {}, (UU, {ins(K8S_A)})),
    ("kubernetes.io resource capacity enforced for init container",
     resource_pod("p", usage(), init=(usage(1, 1, **{K8S_B: 10}),)), resource_pod("e", usage()), {},
     (UU, {ins(K8S_B)})),
    ("hugepages resource capacity enforced", resource_pod("p", usage(1, 1, **{HUGE_A: 10})),
     resource_pod("e", usage(**{HUGE_A: 0})), {}, (UU, {ins(HUGE_A)})),
    ("hugepages resource capacity enforced for init container",
     resource_pod("p", usage(), init=(usage(1, 1, **{HUGE_A: 10}),)), resource_pod("e", usage(**{HUGE_A: 0})), {},
     (UU, {ins(HUGE_A)})),
    ("hugepages resource allocatable enforced for multiple containers",
     resource_pod("p", usage(1, 1, **{HUGE_A: 3}), usage(1, 1, **{HUGE_A: 3})),
     resource_pod("e", usage(**{HUGE_A: 2})), {}, (UU, {ins(HUGE_A)})),
    ("skip checking ignored extended resource", resource_pod("p", usage(1, 1, **{EXT_B: 1})),
     resource_pod("e", usage()), {"ignoredResources": ["example.com/bbb"]}, None),
    ("resources + pod overhead fits", resource_pod("p", usage(1, 1), overhead={"cpu": "3m", "memory": "13"}),
     resource_pod("e", usage(5, 5)), {}, None),
    ("requests + overhead does not fit for memory",
     resource_pod("p", usage(1, 1), overhead={"cpu": "1m", "memory": "15"}), resource_pod("e", usage(5, 5)), {},
     (U, {ins("memory")})),
    ("skip checking ignored extended resource via resource groups",
     resource_pod("p", usage(1, 1, **{EXT_B: 1, K8S_A: 1})), resource_pod("e", usage()),
     {"ignoredResourceGroups": ["example.com"]}, (UU, {ins(K8S_A)})),
    ("skip checking extended resource request with quantity zero via resource groups",
     resource_pod("p", usage(1, 1, **{EXT_A: 0})), resource_pod("e", usage(**{EXT_A: 6})), {}, None),
    ("skip checking resource request with quantity zero", resource_pod("p", usage(**{EXT_A: 1})),
     resource_pod("e", usage(20, 30, **{EXT_A: 1})), {}, None),
    ("both pod-level and container-level resources fit",
     with_pod_level(resource_pod("p", usage(1, 1)), {"cpu": "1m", "memory": "2"}), resource_pod("e", usage(5, 5)),
     {}, None),
    ("pod-level cpu resource not fit", with_pod_level(resource_pod("p", usage(1, 1)), {"cpu": "7m", "memory": "2"}),
     resource_pod("e", usage(5, 5)), {}, (U, {ins("cpu")})),
    ("pod-level memory resource not fit",
     with_pod_level(resource_pod("p", usage(1, 1)), {"cpu": "3m", "memory": "2"}), resource_pod("e", usage(5, 19)),
     {}, (U, {ins("memory")})),
    ("pod-level hugepages resource fit",
     with_pod_level(pod("p", containers=[]), {"cpu": "3m", "memory": "2", HUGE_A: "5"}), None, {}, None),
    ("both pod-level and container-level hugepages resource fit",
     with_pod_level(resource_pod("p", usage(1, 1, **{HUGE_A: 3})), {"cpu": "3m", "memory": "2", HUGE_A: "5"}),
     None, {}, None),
    ("pod-level hugepages resource not fit",
     with_pod_level(pod("p", containers=[]), {"cpu": "3m", "memory": "2", HUGE_A: "10"}), None, {},
     (UU, {ins(HUGE_A)})),
    ("one pod-level cpu resource fits and all init and non-init containers resources fit",
     with_pod_level(resource_pod("p", usage(1, 1), init=(usage(1, 1),)), {"cpu": "3m", "memory": "2"}),
     resource_pod("e", usage(5, 19)), {}, (U, {ins("memory")})),
    # the DRA rows that hold without a DeviceClass for the resource
    ("extended resource backed by device plugin", resource_pod("p", usage(**{EXT_A: 1})), resource_pod("e", usage()),
     {}, None),
    ("extended resource backed by DRA, nil draManager", resource_pod("p", usage(1, 1, **{EXT_A: 1})),
     resource_pod("e", usage()), {}, None),
    ("extended resource backed by DRA not enabled", resource_pod("p", usage(1, 1, **{DRA_RESOURCE: 1})),
     resource_pod("e", usage()), {}, (UU, {ins(DRA_RESOURCE)})),
    ("extended resource NOT backed by DRA", resource_pod("p", usage(1, 1, **{EXT_B: 1})), resource_pod("e", usage()),
     {}, (UU, {ins(EXT_B)})),
    ("extended resource was backed by Device Plugin (Allocatable: 0), global cache",
     resource_pod("p", usage(**{EXT_A: 1})), resource_pod("e", usage(**{EXT_A: 0})), {}, None),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "args", "want"), ENOUGH_REQUESTS,
                         ids=[row[0] for row in ENOUGH_REQUESTS])
def test_kube_enough_requests(name: str, incoming: dict, existing: dict | None, args: dict, want: object) -> None:
    bound = [] if existing is None else [{**existing, "spec": {**existing["spec"], "nodeName": "node"}}]
    cluster = cluster_of([fit_node()], bound)
    assert fit_status(make_plugin("NodeResourcesFit", args), incoming, cluster) == want


DRA_CLASS = device_class("device-class-name", extended=DRA_RESOURCE)  # kube's deviceClassWithExtendResourceName
ENOUGH_REQUESTS_DRA = [
    ("extended resource backed by device plugin", resource_pod("p", usage(**{EXT_A: 1})), resource_pod("e", usage()),
     None),
    ("extended resource backed by DRA", resource_pod("p", usage(1, 1, **{DRA_RESOURCE: 1})),
     resource_pod("e", usage()), None),
    ("extended resource NOT backed by DRA", resource_pod("p", usage(1, 1, **{EXT_B: 1})), resource_pod("e", usage()),
     (UU, {ins(EXT_B)})),
    ("extended resource was backed by Device Plugin (Allocatable: 0)", resource_pod("p", usage(**{DRA_RESOURCE: 1})),
     resource_pod("e", usage(**{DRA_RESOURCE: 0})), None),
    ("extended resource was backed by Device Plugin (Allocatable: 0), global cache",
     resource_pod("p", usage(**{EXT_A: 1})), resource_pod("e", usage(**{EXT_A: 0})), None),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "want"), ENOUGH_REQUESTS_DRA,
                         ids=[row[0] for row in ENOUGH_REQUESTS_DRA])
def test_kube_enough_requests_dra_backed(name: str, incoming: dict, existing: dict, want: object) -> None:
    """kube's rows with DRAExtendedResource on and `deviceClassWithExtendResourceName` (backing
    extended.resource.dra.io/something): that resource is left to DynamicResources on this node,
    whose allocatable lacks it; the others are checked as ever."""
    bound = [{**existing, "spec": {**existing["spec"], "nodeName": "node"}}]
    cluster = cluster_of([fit_node()], bound, objects=[DRA_CLASS])
    assert fit_status(make_plugin("NodeResourcesFit"), incoming, cluster) == want


def test_dra_backed_resource_checked_where_the_node_advertises_it() -> None:
    """A node whose allocatable has the backed resource (a device plugin) checks it as any other:
    "Insufficient", and evicting pods may help only up to what the node has."""
    plugin = make_plugin("NodeResourcesFit")
    cluster = cluster_of([fit_node(**{DRA_RESOURCE: "1"})], objects=[DRA_CLASS])
    two = resource_pod("p", usage(**{DRA_RESOURCE: 2}))
    assert fit_status(plugin, two, cluster) == (UU, {ins(DRA_RESOURCE)})
    assert fit_status(plugin, resource_pod("p", usage(**{DRA_RESOURCE: 1})), cluster) is None
    lacking = cluster_of([fit_node()], objects=[DRA_CLASS])
    assert fit_status(plugin, two, lacking) is None
    assert FIT.fits_without(parse_pod(two), lacking, lacking.index["node"], [])
    assert not FIT.fits_without(parse_pod(two), cluster, cluster.index["node"], [])
    both = cluster_of([fit_node(**{DRA_RESOURCE: "1"}), node("bare", cpu="10m", memory="20", pods="32")],
                      objects=[DRA_CLASS])
    rejected = np.asarray([both.index["node"], both.index["bare"]])
    assert list(FIT.resolvable_nodes(parse_pod(two), both, rejected)) == [False, True]
    # preemption's terms: the backed resource is no shortfall where the node lacks it, one elsewhere
    held = cluster_of([fit_node(**{DRA_RESOURCE: "2"}), node("lacks", cpu="10", memory="20Gi", pods="32")],
                      [{**resource_pod(f"h{i}", usage(**{DRA_RESOURCE: 1})), "spec": {
                          **resource_pod(f"h{i}", usage(**{DRA_RESOURCE: 1}))["spec"], "nodeName": "node",
                          "priority": i}} for i in range(2)]
                      + [pod("l", cpu="1", node_name="lacks")], objects=[DRA_CLASS])
    assert fits_without_answers(FIT, resource_pod("p", usage(**{DRA_RESOURCE: 2})), held) == {True, False}


NOT_ENOUGH_REQUESTS = [
    ("even without specified resources, predicate fails when there's no space for additional pod",
     pod("p", containers=[]), resource_pod("e", usage(10, 20))),
    ("even if both resources fit, predicate fails when there's no space for additional pod",
     resource_pod("p", usage(1, 1)), resource_pod("e", usage(5, 5))),
    ("even for equal edge case, predicate fails when there's no space for additional pod",
     resource_pod("p", usage(5, 1)), resource_pod("e", usage(5, 19))),
    ("even for equal edge case, predicate fails when there's no space for additional pod due to init container",
     resource_pod("p", usage(5, 1), init=(usage(5, 1),)), resource_pod("e", usage(5, 19))),
]


@pytest.mark.parametrize(("name", "incoming", "existing"), NOT_ENOUGH_REQUESTS, ids=[r[0] for r in NOT_ENOUGH_REQUESTS])
def test_kube_not_enough_requests(name: str, incoming: dict, existing: dict) -> None:
    # makeAllocatableResources(10, 20, 1, 0, 0, 0): room for one pod, taken
    node_obj = node("node", cpu="10m", memory="20", pods="1", allocatable={EXT_A: "0", "ephemeral-storage": "0",
                                                                            HUGE_A: "0"})
    cluster = cluster_of([node_obj], [{**existing, "spec": {**existing["spec"], "nodeName": "node"}}])
    assert fit_status(FIT, incoming, cluster) == (U, {"Too many pods"})


STORAGE_REQUESTS = [
    ("empty storage requested, and pod fits", resource_pod("p", usage(1, 1)), resource_pod("e", usage(2, 10)), None),
    ("storage ephemeral local storage request exceeds allocatable", resource_pod("p", usage(storage=25)),
     resource_pod("e", usage(2, 2)), (UU, {ins("ephemeral-storage")})),
    ("ephemeral local storage is sufficient", resource_pod("p", usage(storage=5)),
     resource_pod("e", usage(2, 2, storage=10)), None),
    ("pod fits", resource_pod("p", usage(storage=10)), resource_pod("e", usage(2, 2)), None),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "want"), STORAGE_REQUESTS,
                         ids=[r[0] for r in STORAGE_REQUESTS])
def test_kube_storage_requests(name: str, incoming: dict, existing: dict, want: object) -> None:
    cluster = cluster_of([fit_node()], [{**existing, "spec": {**existing["spec"], "nodeName": "node"}}])
    assert fit_status(FIT, incoming, cluster) == want


@pytest.mark.parametrize(
    ("name", "app_request", "sidecar_request", "want"),
    [
        ("allow pod without restartable init containers if sidecar containers is enabled", None, "absent", None),
        ("allow pod with restartable init containers if sidecar containers is enabled", None, None, None),
        ("allow pod if the total requested resources do not exceed the node's allocatable resources",
         "1m", "1m", None),
        ("not allow pod if the total requested resources do exceed the node's allocatable resources",
         "1m", "2m", (UU, {ins("cpu")})),
    ],
)
def test_kube_restartable_init_containers(name: str, app_request: str | None, sidecar_request: str | None,
                                          want: object) -> None:
    # SidecarContainers is GA: the rows with the feature off are gone from v1.36's behaviour
    regular = container("regular", requests=None if app_request is None else {"cpu": app_request})
    sidecars = [] if sidecar_request == "absent" else [
        container("restartable-init", requests=None if sidecar_request is None else {"cpu": sidecar_request},
                  restart_policy="Always")]
    incoming = pod("p", containers=[regular], init_containers=sidecars)
    cluster = cluster_of([node("node", cpu="2m", memory="0", pods="1")])
    assert fit_status(FIT, incoming, cluster) == want


@pytest.mark.parametrize(
    ("name", "incoming", "node_obj", "fits"),
    [
        ("insufficient resource", pod("p", cpu="2"), node("node", cpu="1", memory=None, pods="32"), False),
        ("sufficient resource", pod("p", cpu="1"), node("node", cpu="2", memory=None, pods="32"), True),
        ("insufficient pod-level resource", with_pod_level(pod("p", containers=[]), {"cpu": "2"}),
         node("node", cpu="1", memory=None, pods="32"), False),
        ("sufficient pod-level resource", with_pod_level(pod("p", containers=[]), {"cpu": "2"}),
         node("node", cpu="2", memory=None, pods="32"), True),
        ("sufficient pod-level resource hugepages", with_pod_level(pod("p", containers=[]), {HUGE_A: "2Mi"}),
         node("node", cpu=None, memory=None, pods="32", allocatable={HUGE_A: "2Mi"}), True),
        ("insufficient pod-level resource hugepages", with_pod_level(pod("p", containers=[]), {HUGE_A: "4Mi"}),
         node("node", cpu=None, memory=None, pods="32", allocatable={HUGE_A: "2Mi"}), False),
    ],
)
def test_kube_is_fit(name: str, incoming: dict, node_obj: dict, fits: bool) -> None:
    assert filter_result(FIT, incoming, cluster_of([node_obj])) == {"node": fits}


# TestFitScore, least_allocated_test.go, most_allocated_test.go, requested_to_capacity_ratio_test.go:
# st.MakePod().Req(r) adds a container requesting r as written ("cpu": "1000" is 1000 cores);
# st.MakeNode().Capacity(c) gives allocatable c and 32 pods.


def req_pod(name: str, *requests: dict[str, str], node_name: str | None = None,
            sidecar: dict[str, str] | None = None) -> dict:
    containers = [container(f"c{i}", requests=r) for i, r in enumerate(requests)]
    inits = [] if sidecar is None else [container("sidecar", requests=sidecar, restart_policy="Always")]
    return pod(name, containers=containers, init_containers=inits, node_name=node_name)


def cap_node(name: str, **capacity: str) -> dict:
    return node(name, cpu=capacity.pop("cpu", None), memory=capacity.pop("memory", None), pods="32",
                allocatable=capacity)


def strategy(kind: str, resources: list[tuple[str, int]] | None = None,
             shape: list[tuple[int, int]] | None = None) -> dict:
    result: dict = {"type": kind}
    if resources is not None:
        result["resources"] = [{"name": n, "weight": w} for n, w in resources]
    if shape is not None:
        result["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": s} for u, s in shape]}
    return {"scoringStrategy": result}


CM = {"cpu": "1000", "memory": "2000"}
TWO_NODES_4_6 = [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="6000", memory="10000")]
EXISTING_2_1 = [req_pod("e1", {"cpu": "2000", "memory": "4000"}, node_name="node1"),
                req_pod("e2", {"cpu": "1000", "memory": "2000"}, node_name="node2")]
EXT = "abc.com/xyz"
EXT_SET = [("cpu", 1), ("memory", 1), (EXT, 1)]
R2C_DOWN = [(0, 10), (100, 0)]

SCORE_ROWS = [
    # fit_test.go TestFitScore (each with and without PreScore in kube: one row here)
    ("fit: RequestedToCapacityRatio case1", req_pod("p", {"cpu": "3000", "memory": "5000"}), TWO_NODES_4_6,
     EXISTING_2_1, strategy("RequestedToCapacityRatio", [("cpu", 1), ("memory", 1)], R2C_DOWN),
     {"node1": 10, "node2": 32}),
    ("fit: RequestedToCapacityRatio case2", req_pod("p", {"cpu": "3000", "memory": "5000"}), TWO_NODES_4_6,
     EXISTING_2_1, strategy("RequestedToCapacityRatio", [("cpu", 1), ("memory", 1)], [(0, 0), (100, 10)]),
     {"node1": 95, "node2": 68}),
    ("fit: MostAllocated", req_pod("p", CM), TWO_NODES_4_6, EXISTING_2_1, strategy("MostAllocated"),
     {"node1": 67, "node2": 36}),
    ("fit: LeastAllocated", req_pod("p", CM), TWO_NODES_4_6, EXISTING_2_1, strategy("LeastAllocated"),
     {"node1": 32, "node2": 63}),
    ("fit: MostAllocated with sidecar container", req_pod("p", CM),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")],
     [req_pod("e1", CM, sidecar=CM, node_name="node1"), req_pod("e2", CM, node_name="node2")],
     strategy("MostAllocated"), {"node1": 67, "node2": 45}),
    ("fit: LeastAllocated with sidecar container", req_pod("p", CM),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")],
     [req_pod("e1", CM, sidecar=CM, node_name="node1"), req_pod("e2", CM, node_name="node2")],
     strategy("LeastAllocated"), {"node1": 32, "node2": 55}),
    # least_allocated_test.go
    ("least: nothing scheduled, nothing requested", pod("p", containers=[]),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")], [],
     strategy("LeastAllocated"), {"node1": 100, "node2": 100}),
    ("least: nothing scheduled, resources requested, differently sized nodes",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}), TWO_NODES_4_6, [], strategy("LeastAllocated"),
     {"node1": 37, "node2": 50}),
    ("least: no resources requested, pods scheduled", pod("p", containers=[]),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")],
     [pod(f"e{i}", containers=[], node_name=n) for i, n in enumerate(["node1", "node1", "node2", "node2"])],
     strategy("LeastAllocated"), {"node1": 100, "node2": 100}),
    ("least: no resources requested, pods scheduled with resources", pod("p", containers=[]),
     [cap_node("node1", cpu="10000", memory="20000"), cap_node("node2", cpu="10000", memory="20000")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e3", {"cpu": "3000", "memory": "0"}, node_name="node2"),
      req_pod("e4", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("LeastAllocated"), {"node1": 70, "node2": 57}),
    ("least: resources requested, pods scheduled with resources",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}),
     [cap_node("node1", cpu="10000", memory="20000"), cap_node("node2", cpu="10000", memory="20000")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("LeastAllocated"), {"node1": 57, "node2": 45}),
    ("least: resources requested, pods scheduled with resources, differently sized nodes",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}),
     [cap_node("node1", cpu="10000", memory="20000"), cap_node("node2", cpu="10000", memory="50000")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("LeastAllocated"), {"node1": 57, "node2": 60}),
    ("least: requested resources exceed node capacity", req_pod("p", {"cpu": "3000", "memory": "0"}),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("LeastAllocated"), {"node1": 50, "node2": 25}),
    ("least: zero node resources, pods scheduled with resources", pod("p", containers=[]),
     [cap_node("node1"), cap_node("node2")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("LeastAllocated"), {"node1": 0, "node2": 0}),
    ("least: different weight on CPU and memory, differently sized nodes",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}), TWO_NODES_4_6, [],
     strategy("LeastAllocated", [("memory", 2), ("cpu", 1)]), {"node1": 41, "node2": 50}),
    ("least: bypass extended resource if the pod does not request",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}),
     [cap_node("node1", cpu="6000", memory="10000"), cap_node("node2", cpu="6000", memory="10000", **{EXT: "4"})],
     [], strategy("LeastAllocated", EXT_SET), {"node1": 50, "node2": 50}),
    ("least: honor extended resource if the pod requests", req_pod("p", {"cpu": "3000", "memory": "5000", EXT: "2"}),
     [cap_node("node1", cpu="6000", memory="10000", **{EXT: "4"}),
      cap_node("node2", cpu="6000", memory="10000", **{EXT: "10"})],
     [], strategy("LeastAllocated", EXT_SET), {"node1": 50, "node2": 60}),
    ("least: if the node doesn't have a resource", req_pod("p", {"cpu": "3000", "memory": "4000"}),
     [cap_node("node1", cpu="6000", memory="10000"), cap_node("node2", cpu="6000", memory="10000", **{EXT: "4"})],
     [], strategy("LeastAllocated", [(EXT, 2), ("cpu", 1), ("memory", 1)]), {"node1": 55, "node2": 55}),
    # most_allocated_test.go
    ("most: nothing scheduled, nothing requested", pod("p", containers=[]),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")], [],
     strategy("MostAllocated"), {"node1": 0, "node2": 0}),
    ("most: nothing scheduled, resources requested, differently sized nodes",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}), TWO_NODES_4_6, [], strategy("MostAllocated"),
     {"node1": 62, "node2": 50}),
    ("most: no resources requested, pods scheduled with resources", pod("p", containers=[]),
     [cap_node("node1", cpu="10000", memory="20000"), cap_node("node2", cpu="10000", memory="20000")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e3", {"cpu": "3000", "memory": "0"}, node_name="node2"),
      req_pod("e4", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("MostAllocated"), {"node1": 30, "node2": 42}),
    ("most: resources requested, pods scheduled with resources",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}),
     [cap_node("node1", cpu="10000", memory="20000"), cap_node("node2", cpu="10000", memory="20000")],
     [req_pod("e1", {"cpu": "3000", "memory": "0"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("MostAllocated"), {"node1": 42, "node2": 55}),
    ("most: resources requested equal node capacity",
     req_pod("p", {"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
     [cap_node("node1", cpu="5000", memory="10000"), cap_node("node2", cpu="10000", memory="9000")], [],
     strategy("MostAllocated"), {"node1": 95, "node2": 75}),
    ("most: different weight on CPU and memory, differently sized nodes",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}), TWO_NODES_4_6, [],
     strategy("MostAllocated", [("memory", 2), ("cpu", 1)]), {"node1": 58, "node2": 50}),
    ("most: no resources requested, pods scheduled, nonzero request for resource", pod("p"),
     [cap_node("node1", cpu="250m", memory="1000Mi"), cap_node("node2", cpu="250m", memory="1000Mi")],
     [pod("e1", node_name="node1"), pod("e2", node_name="node1")], strategy("MostAllocated"),
     {"node1": 80, "node2": 30}),
    ("most: bypass extended resource if the pod does not request",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}),
     [cap_node("node1", cpu="6000", memory="10000"), cap_node("node2", cpu="6000", memory="10000", **{EXT: "4"})],
     [], strategy("MostAllocated", EXT_SET), {"node1": 50, "node2": 50}),
    ("most: honor extended resource if the pod request", req_pod("p", {"cpu": "3000", "memory": "5000", EXT: "2"}),
     [cap_node("node1", cpu="6000", memory="10000", **{EXT: "4"}),
      cap_node("node2", cpu="6000", memory="10000", **{EXT: "10"})],
     [], strategy("MostAllocated", EXT_SET), {"node1": 50, "node2": 40}),
    ("most: if the node doesn't have a resource", req_pod("p", {"cpu": "3000", "memory": "4000"}),
     [cap_node("node1", cpu="6000", memory="10000"), cap_node("node2", cpu="6000", memory="10000", **{EXT: "4"})],
     [], strategy("MostAllocated", [(EXT, 2), ("cpu", 1), ("memory", 1)]), {"node1": 45, "node2": 45}),
    # requested_to_capacity_ratio_test.go
    ("r2c: nothing scheduled, nothing requested", pod("p", containers=[]),
     [cap_node("node1", cpu="4000", memory="10000"), cap_node("node2", cpu="4000", memory="10000")],
     [pod("e1", containers=[], node_name="node1"), pod("e2", containers=[], node_name="node1")],
     strategy("RequestedToCapacityRatio", [("cpu", 1), ("memory", 1)], R2C_DOWN), {"node1": 100, "node2": 100}),
    ("r2c: nothing scheduled, resources requested, differently sized nodes",
     req_pod("p", CM, {"cpu": "2000", "memory": "3000"}), TWO_NODES_4_6,
     [pod("e1", containers=[], node_name="node1"), pod("e2", containers=[], node_name="node1")],
     strategy("RequestedToCapacityRatio", [("cpu", 1), ("memory", 1)], R2C_DOWN), {"node1": 38, "node2": 50}),
    ("r2c: no resources requested, pods scheduled with resources", pod("p", containers=[]), TWO_NODES_4_6,
     [req_pod("e1", {"cpu": "3000", "memory": "5000"}, node_name="node1"),
      req_pod("e2", {"cpu": "3000", "memory": "5000"}, node_name="node2")],
     strategy("RequestedToCapacityRatio", [("cpu", 1), ("memory", 1)], R2C_DOWN), {"node1": 38, "node2": 50}),
]

GIB10 = str(10000 * 1024 * 1024)
FOO = "intel.com/foo"
BAR = "intel.com/bar"


def ext_nodes(first: dict[str, str], second: dict[str, str]) -> list[dict]:
    return [node("node1", cpu="4000m", memory=GIB10, pods="32", allocatable=first),
            node("node2", cpu="4000m", memory=GIB10, pods="32", allocatable=second)]


SINGLE = strategy("RequestedToCapacityRatio", [(FOO, 1)], [(0, 0), (100, 1)])
MULTIPLE = strategy("RequestedToCapacityRatio", [(FOO, 3), (BAR, 5)], [(0, 0), (100, 1)])
SCORE_ROWS += [
    ("bin packing single: nothing scheduled, nothing requested", pod("p", containers=[]),
     ext_nodes({FOO: "8"}, {FOO: "4"}), [], SINGLE, {"node1": 0, "node2": 0}),
    ("bin packing single: pods scheduled with less resources", req_pod("p", {FOO: "2"}),
     ext_nodes({FOO: "8"}, {FOO: "4"}), [], SINGLE, {"node1": 2, "node2": 5}),
    ("bin packing single: on node with existing pod running", req_pod("p", {FOO: "2"}),
     ext_nodes({FOO: "8"}, {FOO: "4"}), [req_pod("e", {FOO: "2"}, node_name="node2")], SINGLE,
     {"node1": 2, "node2": 10}),
    ("bin packing single: pods scheduled with more resources", req_pod("p", {FOO: "4"}),
     ext_nodes({FOO: "8"}, {FOO: "4"}), [], SINGLE, {"node1": 5, "node2": 10}),
    ("bin packing multiple: nothing scheduled, nothing requested", pod("p", containers=[]),
     ext_nodes({FOO: "8", BAR: "4"}, {FOO: "4", BAR: "8"}), [], MULTIPLE, {"node1": 0, "node2": 0}),
    ("bin packing multiple: pods scheduled with less resources", req_pod("p", {FOO: "2", BAR: "2"}),
     ext_nodes({FOO: "8", BAR: "4"}, {FOO: "4", BAR: "8"}), [], MULTIPLE, {"node1": 4, "node2": 3}),
    ("bin packing multiple: on node with existing pod running", req_pod("p", {FOO: "2", BAR: "2"}),
     ext_nodes({FOO: "8", BAR: "4"}, {FOO: "4", BAR: "8"}),
     [req_pod("e", {FOO: "4", BAR: "2"}, node_name="node2")], MULTIPLE, {"node1": 4, "node2": 7}),
    ("bin packing multiple: pods scheduled with more resources", req_pod("p", {FOO: "4", BAR: "2"}),
     ext_nodes({FOO: "8", BAR: "4"}, {FOO: "4", BAR: "8"}), [], MULTIPLE, {"node1": 5, "node2": 5}),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "existing", "args", "expected"), SCORE_ROWS,
                         ids=[row[0] for row in SCORE_ROWS])
def test_kube_score_rows(name: str, incoming: dict, nodes: list, existing: list, args: dict,
                         expected: dict[str, int]) -> None:
    plugin = make_plugin("NodeResourcesFit", args)
    assert scores(plugin, incoming, cluster_of(nodes, existing)) == expected


@pytest.mark.parametrize(("weights", "field"), [([("memory", -1), ("cpu", 1)], "resources[0].weight"),
                                                ([("memory", 1), ("cpu", 0)], "resources[1].weight"),
                                                ([("memory", 1), ("cpu", 101)], "resources[1].weight"),
                                                ([("memory", 101)], "resources[0].weight")])
@pytest.mark.parametrize("kind", ["LeastAllocated", "MostAllocated"])
def test_kube_weight_validation_rows(weights: list[tuple[str, int]], field: str, kind: str) -> None:
    # kube: "resource with negative weight", "... zero weight", "... larger than MaxNodeScore"
    with pytest.raises(ProfileError, match=rf"scoringStrategy\.{re.escape(field)}"):
        make_profile(scores=[{"name": "NodeResourcesFit", "args": strategy(kind, weights)}])


@pytest.mark.parametrize(
    ("points", "assertions"),
    [
        ([(10, 1), (90, 9)], [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9),
                              (99, 9), (100, 9), (110, 9)]),
        ([(0, 2), (40, 10), (100, 0)], [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
        ([(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
    ],
)
def test_kube_broken_linear_function(points: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    utilization = np.asarray([p for p, _ in assertions], dtype=np.int64)
    assert broken_linear(tuple(points), utilization).tolist() == [expected for _, expected in assertions]


@pytest.mark.parametrize(
    ("name", "incoming", "cpu", "memory"),
    [
        # resource_allocation_test.go TestResourceAllocationScorerCalculateRequests
        ("overhead only", pod("p", containers=[], overhead={"cpu": "1", "memory": "1Mi"}), 1000, MiB),
        ("1x requestless container", pod("p", containers=[container("a")]), 100, 200 * MiB),
        ("2x requestless container", pod("p", containers=[container("a"), container("b")]), 200, 400 * MiB),
        ("request container + requestless container",
         pod("p", containers=[container("a", cpu="1", memory="1Mi"), container("b")]), 1100, MiB + 200 * MiB),
        ("container + requestless container + overhead",
         pod("p", containers=[container("a", cpu="1", memory="1Mi"), container("b")],
             overhead={"cpu": "1", "memory": "1Mi"}), 2100, 2 * MiB + 200 * MiB),
        ("init container + container + requestless container + overhead",
         pod("p", containers=[container("a", cpu="1", memory="1Mi"), container("b")],
             init_containers=[container("i", cpu="3")], overhead={"cpu": "1", "memory": "1Mi"}),
         4000, 2 * MiB + 200 * MiB),
        ("requestless init container + small init container + small container",
         pod("p", containers=[container("a", cpu="3m", memory="3")],
             init_containers=[container("i0"), container("i1", cpu="1m", memory="1")]), 100, 200 * MiB),
        ("requestless init container + small init container + small container + requestless container",
         pod("p", containers=[container("a", cpu="3m", memory="3"), container("b")],
             init_containers=[container("i0"), container("i1", cpu="1m", memory="1")]), 103, 3 + 200 * MiB),
    ],
)
def test_kube_score_requests_of_the_incoming_pod(name: str, incoming: dict, cpu: int, memory: int) -> None:
    info = parse_pod(incoming)
    assert (pod_request_for_score(info, "cpu", True), pod_request_for_score(info, "memory", True)) == (cpu, memory)


def test_preemption_sentence_counts_a_too_small_node_as_not_helpful() -> None:
    cluster = cluster_of([node("small", cpu="4"), node("big", cpu="16")],
                         [pod("x", cpu="4", node_name="small", priority=0), pod("y", cpu="12", node_name="big",
                                                                             priority=100)])
    profile = make_profile(filters=[{"name": "NodeResourcesFit"}], scores=[])
    decision = decide(profile, pod("p", cpu="8", priority=10), cluster)
    assert decision.full_message == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    )


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("resources", [
    [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
    [{"name": "memory", "weight": 3}, {"name": "cpu", "weight": 1}],
    [{"name": "cpu", "weight": 2}],
])
def test_cpu_memory_path_equals_the_general_one(strategy: str, resources: list[dict]) -> None:
    # cpu and memory only: one pass over a (resource x node) block; it must give the per-resource
    # loop's integers, on nodes over- and under-committed, empty, and without cpu or memory
    rng = np.random.default_rng(5)
    nodes = [node(f"n{i}", cpu=str(int(rng.integers(0, 9))), memory=f"{int(rng.integers(0, 9))}Gi")
             for i in range(60)]
    bound = [pod(f"b{i}", cpu=f"{int(rng.integers(0, 3000))}m" if rng.random() < 0.8 else None,
                 memory=f"{int(rng.integers(0, 3000))}Mi" if rng.random() < 0.8 else None,
                 node_name=f"n{int(rng.integers(0, 60))}") for i in range(150)]
    cluster = cluster_of(nodes, bound)
    args = {"scoringStrategy": {"type": strategy, "resources": resources}}
    fast, general = make_plugin("NodeResourcesFit", args), make_plugin("NodeResourcesFit", args)
    general._cpu_memory = None  # type: ignore[attr-defined]  # the per-resource loop
    everywhere = np.asarray(sorted(cluster.index.values()), dtype=np.int64)
    with_cpu_and_memory = everywhere[(cluster.allocatable[everywhere, :2] > 0).all(axis=1)]
    assert 0 < len(with_cpu_and_memory) < len(everywhere)
    for incoming in (pod("p", cpu="700m", memory="1Gi"), pod("p"), pod("p", cpu="20")):
        info = parse_pod(incoming)
        for slots in (everywhere, with_cpu_and_memory, with_cpu_and_memory[::-3]):
            assert np.array_equal(fast.score(info, cluster, slots), general.score(info, cluster, slots))


# ------------------------------------- kube v1.36 DRAExtendedResource score rows (on by default)
# fit_test.go TestFitScore "... with Extended resources" (with and without PreScore: one row here),
# balanced_allocation_test.go "include DRA resource on a node ...", and resource_allocation_test.go
# TestCalculateResourceAllocatableRequest: an extended resource no device plugin advertises, backed
# by `deviceClassWithExtendResourceName`, counts the class's devices on the node and those held.

def dra_slice(node_name: str, *names: str) -> dict:
    """st.MakeResourceSlice(node, "test-driver").Device(...): pool named after the node."""
    return resource_slice(f"{node_name}-slice", "test-driver", node=node_name, devices=[device(n) for n in names])


def dra_claim(name: str, device_name: str, share_id: str | None = None, pool: str = "resource-node") -> dict:
    """A claim of the class, allocated `device_name` (kube's st.MakeResourceClaim().Allocation(...))."""
    allocated = allocation([("req-1", "test-driver", pool, device_name)])
    if share_id is not None:
        allocated["devices"]["results"][0]["shareID"] = share_id
    return resource_claim(name, requests=[request("req-1", "device-class-name")], allocated=allocated)


def test_kube_least_allocated_with_dra_backed_extended_resource() -> None:
    # node1 reaches 3 devices of the class, node2 2: (3-1)*100/3 = 66, (2-1)*100/2 = 50
    cluster = cluster_of([cap_node("node1"), cap_node("node2")], objects=[
        DRA_CLASS, dra_slice("node1", "device-1", "device-2", "device-3"), dra_slice("node2", "device-1", "device-2"),
    ])
    plugin = make_plugin("NodeResourcesFit", strategy("LeastAllocated", [(DRA_RESOURCE, 1)]))
    assert scores(plugin, req_pod("p", {DRA_RESOURCE: "1"}), cluster) == {"node1": 66, "node2": 50}
    most = make_plugin("NodeResourcesFit", strategy("MostAllocated", [(DRA_RESOURCE, 1)]))
    assert scores(most, req_pod("p", {DRA_RESOURCE: "1"}), cluster) == {"node1": 33, "node2": 50}
    # without the class nothing backs the resource: not scored anywhere
    bare = cluster_of([cap_node("node1"), cap_node("node2")],
                      objects=[dra_slice("node1", "device-1"), dra_slice("node2", "device-1")])
    assert scores(plugin, req_pod("p", {DRA_RESOURCE: "1"}), bare) == {"node1": 0, "node2": 0}


def test_kube_balanced_allocation_includes_dra_backed_resource() -> None:
    # node1: cpu 3000/3500, memory 0, DRA 0 -> 1/8: 76; node2: no device of the class, 75
    nodes = [node("node1", cpu="3500m", memory="40000", pods="32"),
             node("node2", cpu="3500m", memory="40000", pods="32")]
    bound = [req_pod("e1", {"cpu": "1000m"}, {"cpu": "2000m"}, node_name="node1"),
             req_pod("e2", {"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}, node_name="node2")]
    devices = [f"device-{i}" for i in range(1, 9)]
    cluster = cluster_of(nodes, bound, objects=[DRA_CLASS, dra_slice("node1", *devices)])
    plugin = make_plugin("NodeResourcesBalancedAllocation",
                         {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": DRA_RESOURCE}]})
    assert scores(plugin, req_pod("p", {DRA_RESOURCE: "1"}), cluster) == {"node1": 76, "node2": 75}


PER_DEVICE_CLASS = device_class(
    "device-class-name",
    'device.driver == "test-driver" && device.capacity["test-driver"].memory.compareTo(quantity("8Gi")) >= 0'
    ' && device.attributes["test-driver"].model.startsWith("SOME-")',
    extended=DRA_RESOURCE,
)
PER_DEVICE_SLICE = resource_slice("per-device-slice", "test-driver", pool="per-device-pool", per_device=True, devices=[
    device("device-1", {"model": "SOME-XYZ"}, {"memory": "16Gi"}, node_name="resource-node"),
    device("device-2", {"model": "SOME-ZYX"}, {"memory": "12Gi"}, node_name="other-node"),
    device("device-3", {"model": "SOME-XZY"}, {"memory": "24Gi"}, node_selector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-east-1a"]}]}]}),
])
ALLOCATABLE_REQUEST_ROWS = [
    # (name, node's extended allocatable, resource, objects, allocatable, allocated)
    ("device-plugin-resource-feature-enabled", {DRA_RESOURCE: "4"}, DRA_RESOURCE, [], 4, 0),
    ("DRA-backed-resource-explicit", {}, DRA_RESOURCE, [DRA_CLASS, dra_slice("resource-node", "device-1")], 1, 0),
    ("DRA-backed-resource-implicit", {}, "deviceclass.resource.kubernetes.io/device-class-name",
     [device_class("device-class-name"), dra_slice("resource-node", "device-1")], 1, 0),
    ("DRA-backed-resource-no-slices", {}, DRA_RESOURCE, [DRA_CLASS], 0, 0),
    ("DRA-backed-resource-with-allocated-device", {}, DRA_RESOURCE,
     [DRA_CLASS, dra_slice("resource-node", "device-1", "device-2"), dra_claim("test-claim", "device-1")], 2, 1),
    ("DRA-backed-resource-with-shared-device-allocation", {}, DRA_RESOURCE,
     [DRA_CLASS, dra_slice("resource-node", "device-1", "device-2"),
      dra_claim("test-claim", "device-1", share_id="share-123")], 2, 1),
    ("DRA-backed-resource-multiple-devices-mixed-allocation", {}, DRA_RESOURCE,
     [DRA_CLASS, dra_slice("resource-node", "device-1", "device-2", "device-3"),
      dra_claim("test-claim-1", "device-1"), dra_claim("test-claim-2", "device-2", share_id="share-456")], 3, 2),
    ("DRA-backed-resource-with-per-device-node-selection", {}, DRA_RESOURCE,
     [PER_DEVICE_CLASS, PER_DEVICE_SLICE, dra_claim("test-claim", "device-1", pool="per-device-pool")], 2, 1),
]


@pytest.mark.parametrize(("name", "extended", "resource", "objects", "allocatable", "allocated"),
                         ALLOCATABLE_REQUEST_ROWS, ids=[row[0] for row in ALLOCATABLE_REQUEST_ROWS])
def test_kube_calculate_resource_allocatable_request(name: str, extended: dict[str, str], resource: str,
                                                     objects: list[dict], allocatable: int, allocated: int) -> None:
    # kube asks calculateResourceAllocatableRequest directly; here through `allocation`, for a pod
    # asking one unit (its requested is the node's allocated plus that one)
    node_obj = node("resource-node", cpu=None, memory=None, pods="32", labels={"zone": "us-east-1a"},
                    allocatable=extended)
    cluster = cluster_of([node_obj], objects=objects)
    slots = np.asarray([cluster.index["resource-node"]])
    found = allocation_of(parse_pod(req_pod("p", {resource: "1"})), cluster, slots, resource, nonzero=False)
    assert found is not None
    requested, node_allocatable = found
    assert (int(node_allocatable[0]), int(requested[0]) - 1) == (allocatable, allocated)


def test_dra_backed_score_follows_claims_and_a_failing_selector() -> None:
    """A claim allocated (or freed) after the first score moves the next one; a class whose selector
    fails at run time on a device of the node leaves the node 0 of 0 (kube's scorer gives up there)."""
    cluster = cluster_of([cap_node("node1")], objects=[DRA_CLASS, dra_slice("node1", "device-1", "device-2")])
    plugin = make_plugin("NodeResourcesFit", strategy("MostAllocated", [(DRA_RESOURCE, 1)]))
    incoming = req_pod("p", {DRA_RESOURCE: "1"})
    assert scores(plugin, incoming, cluster) == {"node1": 50}
    claim = dra_claim("held", "device-2", pool="node1")
    upsert_object(cluster.catalog, KINDS_BY_NAME["ResourceClaim"], claim)
    assert scores(plugin, incoming, cluster) == {"node1": 100}
    failing = cluster_of([cap_node("node1")], objects=[
        device_class("device-class-name", 'device.attributes["test-driver"].model == "x"', extended=DRA_RESOURCE),
        dra_slice("node1", "device-1"),
    ])
    assert scores(plugin, incoming, failing) == {"node1": 0}
    slots = np.asarray([0])
    assert allocation_of(parse_pod(incoming), failing, slots, DRA_RESOURCE, nonzero=False) is not None


def test_balanced_two_resources_count_devices_where_no_device_plugin_advertises() -> None:
    # cpu and a backed resource: node1 has 4 devices of the class (no device plugin), node2 a device
    # plugin's 2. node1: with the pod cpu 1/2, devices 1/4 -> 87, without 100: 50 + (50 - 13) / 2 = 68;
    # node2: 1/2 and 1/2 -> 75. Read as "lacking" on node1, it would be 75 there too.
    nodes = [node("node1", cpu="4", memory=None, pods="32"),
             node("node2", cpu="4", memory=None, pods="32", allocatable={DRA_RESOURCE: "2"})]
    cluster = cluster_of(nodes, objects=[DRA_CLASS, dra_slice("node1", *(f"device-{i}" for i in range(4)))])
    plugin = make_plugin("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu"}, {"name": DRA_RESOURCE}]})
    assert scores(plugin, req_pod("p", {"cpu": "2", DRA_RESOURCE: "1"}), cluster) == {"node1": 68, "node2": 75}
