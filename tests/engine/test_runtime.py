"""The scheduling cycle: weights and totals, the tie-break, kube-scheduler's FitError message,
percentageOfNodesToScore with the rotating start index, and skipped score plugins."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import numpy as np
import pytest
from placer.engine.cluster import ClusterState
from placer.engine.framework import FilterPlugin, NoArgs
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_pod
from placer.engine.profile import Profile
from placer.engine.runtime import Scheduler, fit_error_message, nodes_to_find
from placer.testing import cluster_of, decide, make_profile, node, pod


def test_totals_are_weighted_sums_and_the_best_wins() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi"), node("b", cpu="8", memory="8Gi")],
                         [pod("x", cpu="1", memory="2Gi", node_name="a")])
    profile = make_profile(scores=[
        {"name": "NodeResourcesFit", "weight": 2, "args": {"scoringStrategy": {"type": "MostAllocated"}}},
        {"name": "PreferNode", "weight": 1, "args": {"nodes": ["b"]}},
    ])
    decision = decide(profile, pod("p", cpu="1", memory="1Gi"), cluster)
    # MostAllocated: a 43, b 12 (see node_resources_fit_test); PreferNode: a 0, b 100
    # totals: a 2*43 = 86, b 2*12 + 100 = 124
    assert decision.node == "b"
    assert [s.as_dict() for s in decision.top] == [
        {"node": "b", "total": 124, "plugins": {"NodeResourcesFit": 12, "PreferNode": 100}},
        {"node": "a", "total": 86, "plugins": {"NodeResourcesFit": 43, "PreferNode": 0}},
    ]
    assert decision.feasible == 2
    assert decision.message is None


def test_default_profile_scores_every_default_plugin() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi")])
    decision = decide(make_profile(), pod("p", cpu="1", memory="1Gi"), cluster)
    # TaintToleration 100 (no taints) x3, NodeAffinity skipped 0 x2, PodTopologySpread (no constraints,
    # no service or workload for defaults), InterPodAffinity (no terms) and DynamicResources (no claims)
    # skipped 0 x2, LeastAllocated (75 + 87) / 2 = 81, BalancedAllocation (v1.36) .25 / .125 -> 93 with the pod,
    # 100 without: 50 + (50 + 93 - 100) // 2 = 71, ImageLocality 0
    assert decision.top[0].plugins == {"TaintToleration": 100, "NodeAffinity": 0, "PodTopologySpread": 0,
                                       "InterPodAffinity": 0, "DynamicResources": 0, "NodeResourcesFit": 81,
                                       "NodeResourcesBalancedAllocation": 71, "ImageLocality": 0}
    assert decision.top[0].total == 300 + 0 + 81 + 71 + 0


def test_equal_totals_go_to_the_smaller_node_name() -> None:
    names = ["node-c", "node-a", "node-b", "node-10", "node-9"]
    cluster = cluster_of([node(n) for n in names])
    decision = decide(make_profile(), pod("p"), cluster, top=5)
    assert decision.node == "node-10"  # smallest as a string
    assert [s.node for s in decision.top] == ["node-10", "node-9", "node-a", "node-b", "node-c"]
    assert len({s.total for s in decision.top}) == 1


def test_top_limits_the_listed_scores_not_the_choice() -> None:
    cluster = cluster_of([node("a", cpu="1"), node("b", cpu="2"), node("c", cpu="3"), node("d", cpu="4")])
    decision = decide(make_profile(scores=[{"name": "NodeResourcesFit"}]), pod("p", cpu="500m"), cluster, top=2)
    assert decision.node == "d"
    assert [s.node for s in decision.top] == ["d", "c"]
    assert decision.feasible == 4
    assert decide(make_profile(), pod("p"), cluster, top=0).top == []


def test_failure_message_counts_reasons_per_node_from_the_first_failing_filter() -> None:
    nodes = [node("cordoned", cpu="1", unschedulable=True)] + [node(f"n{i}", cpu="1") for i in range(4)]
    cluster = cluster_of(nodes)
    decision = decide(make_profile(), pod("p", cpu="2"), cluster)
    # the cordoned node also lacks cpu, but NodeUnschedulable comes first and gives its only reason
    assert decision.reasons == {"node(s) were unschedulable": 1, "Insufficient cpu": 4}
    assert decision.message == "0/5 nodes are available: 1 node(s) were unschedulable, 4 Insufficient cpu."
    assert decision.node is None
    assert decision.top == []


def test_failure_message_pairs_are_sorted_as_strings() -> None:
    nodes = [node(f"n{i:02}", cpu="1") for i in range(10)] + [node("x", unschedulable=True),
                                                             node("y", ready=False)]
    decision = decide(make_profile(), pod("p", cpu="2", memory="9Gi"), cluster_of(nodes))
    # sorted as strings, not by count: "1 node(s) ..." before "10 ..." (" " < "0"), "10 a" before "2 b"
    assert decision.message == (
        "0/12 nodes are available: 1 node(s) were not ready, 1 node(s) were unschedulable, "
        "10 Insufficient cpu, 10 Insufficient memory."
    )
    assert fit_error_message(12, Counter({"b": 2, "a": 10, "c": 1})) == "0/12 nodes are available: 1 c, 10 a, 2 b."


def test_no_nodes_at_all() -> None:
    decision = decide(make_profile(), pod("p"), cluster_of([]))
    assert decision.node is None
    assert decision.message == "no nodes available to schedule pods"


def test_a_pod_that_fits_nowhere_because_of_several_filters() -> None:
    cluster = cluster_of([
        node("tainted", taints=["dedicated=gpu:NoSchedule"]),
        node("notready", ready=False),
        node("small", cpu="1"),
        node("other-zone", labels={"zone": "b"}),
    ])
    wants = pod("p", cpu="2", node_selector={"zone": "a"})
    decision = decide(make_profile(), wants, cluster)
    assert decision.message == (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were not ready, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )


def test_skipped_score_plugin_scores_zero_everywhere() -> None:
    cluster = cluster_of([node("a", labels={"zone": "a"}), node("b")])
    profile = make_profile(scores=[{"name": "NodeAffinity", "weight": 50}, {"name": "SpreadByLabel", "weight": 7,
                                                                             "args": {"labelKey": "tenant"}}])
    decision = decide(profile, pod("p"), cluster)
    assert [(s.node, s.total, s.plugins) for s in decision.top] == [
        ("a", 0, {"NodeAffinity": 0, "SpreadByLabel": 0}),
        ("b", 0, {"NodeAffinity": 0, "SpreadByLabel": 0}),
    ]


def test_no_filters_and_no_scores() -> None:
    cluster = cluster_of([node("b", ready=False), node("a", cpu="1")])
    decision = decide(make_profile(filters=[], scores=[]), pod("p", cpu="64"), cluster)
    assert decision.node == "a"
    assert [(s.node, s.total, s.plugins) for s in decision.top] == [("a", 0, {}), ("b", 0, {})]


def test_schedule_changes_nothing_in_the_cluster() -> None:
    cluster = cluster_of([node("a")])
    version = cluster.version
    decide(make_profile(), pod("p", cpu="1"), cluster)
    assert cluster.version == version
    assert cluster.pods == {}


# ----------------------------------------------------------------- percentageOfNodesToScore


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 1, 1),
        (0, 99, 99),  # fewer than 100 nodes: all
        (0, 100, 100),  # 50% of 100 = 50, but at least 100
        (0, 200, 100),  # 49% = 98 -> 100
        (0, 250, 120),  # 48%
        (0, 1000, 420),  # 50 - 1000/125 = 42%
        (0, 5000, 500),  # 10%
        (0, 5625, 281),  # 5%: 50 - 45
        (0, 6000, 300),  # 50 - 48 = 2% -> at least 5%
        (0, 10000, 500),
        (10, 500, 100),  # 50 -> at least 100
        (30, 1000, 300),
        (100, 1000, 1000),
        (1, 99, 99),
        (50, 5000, 2500),
    ],
)
def test_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert nodes_to_find(percentage, nodes) == expected


def big_cluster(count: int, unschedulable: int = 0) -> object:
    return cluster_of([node(f"n{i:03}", unschedulable=i < unschedulable) for i in range(count)])


def test_only_enough_feasible_nodes_are_scored_and_the_start_index_rotates() -> None:
    cluster = big_cluster(200)
    profile = make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[])
    scheduler = Scheduler()
    first = scheduler.schedule(parse_pod(pod("p1")), profile, cluster, top=1000)
    # 200 nodes, adaptive: 49% = 98 -> 100 nodes, n000..n099 in node-tree order
    assert first.feasible == 100
    assert {s.node for s in first.top} == {f"n{i:03}" for i in range(100)}
    assert scheduler.next_start_index == 100
    second = scheduler.schedule(parse_pod(pod("p2")), profile, cluster, top=1000)
    assert {s.node for s in second.top} == {f"n{i:03}" for i in range(100, 200)}
    assert second.node == "n100"
    assert scheduler.next_start_index == 0


def test_rotating_start_index_counts_infeasible_nodes_examined() -> None:
    cluster = big_cluster(200, unschedulable=10)  # n000..n009 are cordoned
    profile = make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[])
    scheduler = Scheduler()
    first = scheduler.schedule(parse_pod(pod("p1")), profile, cluster, top=1000)
    # n010..n109 are the first 100 feasible; kube stops at the 101st (n110) having processed 110 nodes
    assert {s.node for s in first.top} == {f"n{i:03}" for i in range(10, 110)}
    assert scheduler.next_start_index == 110
    second = scheduler.schedule(parse_pod(pod("p2")), profile, cluster, top=1000)
    # from n110: n110..n199 (90), then n000..n009 cordoned, then n010..n019 (10); stops at n020
    assert {s.node for s in second.top} == {f"n{i:03}" for i in [*range(110, 200), *range(10, 20)]}
    assert scheduler.next_start_index == (110 + 110) % 200


def test_when_fewer_nodes_are_feasible_all_are_examined() -> None:
    cluster = big_cluster(200, unschedulable=150)
    profile = make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[])
    scheduler = Scheduler()
    scheduler.next_start_index = 30
    decision = scheduler.schedule(parse_pod(pod("p")), profile, cluster)
    assert decision.feasible == 50
    assert scheduler.next_start_index == 30  # advanced by all 200


def test_percentage_from_the_profile() -> None:
    cluster = big_cluster(400)
    profile = make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[], percentage=50)
    scheduler = Scheduler()
    decision = scheduler.schedule(parse_pod(pod("p")), profile, cluster)
    assert decision.feasible == 200
    assert scheduler.next_start_index == 200
    everything = make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[], percentage=100)
    assert Scheduler().schedule(parse_pod(pod("p")), everything, cluster).feasible == 400


def test_unschedulable_pod_examines_every_node_for_the_message() -> None:
    cluster = big_cluster(150)
    profile = make_profile(filters=[{"name": "NodeResourcesFit"}], scores=[])
    decision = Scheduler().schedule(parse_pod(pod("p", cpu="5")), profile, cluster)
    assert decision.message == "0/150 nodes are available: 150 Insufficient cpu."


def test_an_unschedulable_cycle_asks_each_filter_once_and_none_after_no_node_is_left() -> None:
    """The failure's reasons reuse the masks the cycle's filter pass found (a filter asked twice is
    work done twice), and the filters after the one that left no node are not asked: they could
    reject no node more. The message is the same."""
    calls: list[str] = []

    def counting(name: str, fails: frozenset[str]) -> FilterPlugin:
        class Counting(FilterPlugin[NoArgs]):
            reason: ClassVar[str] = f"rejected by {name}"

            def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
                calls.append(name)
                return np.array([n not in fails for n in cluster.names[: cluster.size]], dtype=bool)

        Counting.name = name
        return Counting(NoArgs())

    filters = (counting("first", frozenset({"a"})), counting("second", frozenset({"b"})),
               counting("third", frozenset({"a", "b"})))
    decision = decide(Profile("p", "placer", 0, filters, ()), pod("p"), cluster_of([node("a"), node("b")]))
    assert decision.message == "0/2 nodes are available: 1 rejected by first, 1 rejected by second."
    assert calls == ["first", "second"]
