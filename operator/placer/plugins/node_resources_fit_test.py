"""NodeResourcesFit: the filter's reasons and the three scoring strategies, against numbers worked
out by hand with kube-scheduler's formulas (least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go, helper/shape_score.go)."""

from __future__ import annotations

import pytest

from placer.engine.cluster import ClusterState
from placer.engine.objects import parse_pod
from placer.engine.profile import ProfileError
from placer.testing import (
    GiB,
    MiB,
    cluster_of,
    container,
    decide,
    filter_result,
    make_plugin,
    make_profile,
    node,
    pod,
    raw_scores,
    scores,
)

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
