"""NodeResourcesBalancedAllocation against kube-scheduler's balancedResourceScorer, by hand:
fractions of allocatable (requested, not the 100m/200Mi defaults), capped at 1;
2 resources: std = |f1 - f2| / 2; more: the population standard deviation; score (1 - std) * 100
truncated."""

from __future__ import annotations

import math

import pytest

from placer.engine.profile import ProfileError
from placer.testing import cluster_of, decide, make_plugin, make_profile, node, pod, pod_info, scores

BALANCED = make_plugin("NodeResourcesBalancedAllocation")
THREE = make_plugin(
    "NodeResourcesBalancedAllocation",
    {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}]},
)


def test_two_resources() -> None:
    cluster = cluster_of(
        [node("a", cpu="4", memory="8Gi"), node("b", cpu="4", memory="8Gi")],
        [pod("x", cpu="1", memory="3Gi", node_name="b")],
    )
    # a: cpu 1/4 = .25, memory 1/8 = .125 -> std .0625 -> 93.75 -> 93
    # b: cpu 2/4 = .5, memory 4/8 = .5 -> std 0 -> 100
    assert scores(BALANCED, pod("p", cpu="1", memory="1Gi"), cluster) == {"a": 93, "b": 100}


def test_fraction_capped_at_one() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi")])
    # cpu 8/4 -> 1, memory .125: std .4375 -> 56.25 -> 56
    assert scores(BALANCED, pod("p", cpu="8", memory="1Gi"), cluster) == {"a": 56}


def test_uses_requests_not_the_nonzero_defaults() -> None:
    # the bound best-effort pod adds nothing, and the incoming pod's missing memory is 0, not 200Mi
    cluster = cluster_of([node("a", cpu="4", memory="8Gi")], [pod("besteffort", node_name="a")])
    # cpu .25, memory 0 -> std .125 -> 87.5 -> 87
    assert scores(BALANCED, pod("p", cpu="1"), cluster) == {"a": 87}


def test_three_resources_population_std() -> None:
    cluster = cluster_of([node("g", cpu="4", memory="8Gi", allocatable={"nvidia.com/gpu": "4"})])
    fractions = [0.25, 0.125, 0.5]
    mean = sum(fractions) / 3
    std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / 3)  # 0.1559...
    assert int((1 - std) * 100) == 84
    assert scores(THREE, pod("p", cpu="1", memory="1Gi", requests={"nvidia.com/gpu": "2"}), cluster) == {"g": 84}


def test_extended_resource_not_requested_is_left_out() -> None:
    cluster = cluster_of([node("g", cpu="4", memory="8Gi", allocatable={"nvidia.com/gpu": "4"})])
    # only cpu .25 and memory .125 count: 93, as with two resources
    assert scores(THREE, pod("p", cpu="1", memory="1Gi"), cluster) == {"g": 93}


def test_resource_the_node_lacks_is_left_out() -> None:
    cluster = cluster_of([node("plain", cpu="4", memory="8Gi"), node("g", cpu="4", memory="8Gi",
                                                                     allocatable={"nvidia.com/gpu": "4"})])
    # plain has no gpu: cpu .25 and memory .125 -> 93; g: .25 .125 .5 -> 84
    wants_gpu = pod("p", cpu="1", memory="1Gi", requests={"nvidia.com/gpu": "2"})
    assert scores(THREE, wants_gpu, cluster) == {"g": 84, "plain": 93}


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
