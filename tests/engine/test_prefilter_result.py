"""PreFilterResult (kube's): a PreFilter naming the only nodes worth evaluating. kube v1.36's
schedule_one_test rows with fake PreFilter plugins, NodeAffinity's node names through a whole
cycle (the message, preemption candidates, the rotating start index), and `placer explain`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import ClassVar

import numpy as np
import pytest
from placer.engine.cluster import ClusterState
from placer.engine.explain import explain
from placer.engine.framework import FilterPlugin, NoArgs, PreFilterResult
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_pod
from placer.engine.profile import Profile
from placer.engine.runtime import Scheduler, narrowing_conflict
from placer.testing import cluster_of, decide, make_profile, node, pod


def fake(name: str, names: Iterable[str] | None = None, fails: Iterable[str] = ()) -> FilterPlugin:
    """kube's FakePreFilterPlugin (a node set, or nil) with FakeFilterPlugin's failing nodes."""
    node_names = None if names is None else frozenset(names)
    failing = frozenset(fails)

    class Fake(FilterPlugin[NoArgs]):
        reason: ClassVar[str] = "injecting failure for pod test-prefilter"

        def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> PreFilterResult | None:
            return None if node_names is None else PreFilterResult(node_names)

        def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
            if not failing:
                return None
            return np.array([name not in failing for name in cluster.names[: cluster.size]], dtype=bool)

    Fake.name = name
    return Fake(NoArgs())


def profile(*filters: FilterPlugin) -> Profile:
    return Profile("p", "placer", 0, filters, ())


NODES = ("node1", "node2", "node3")


def test_prefilter_plugin_returning_node() -> None:
    cluster = cluster_of([node(n) for n in NODES])
    plugins = fake("FakePreFilter1"), fake("FakePreFilter2", ["node2"]), fake("FakePreFilter3", ["node1", "node2"])
    decision = decide(profile(*plugins), pod("test-prefilter"), cluster)
    assert decision.node == "node2"
    assert decision.feasible == 1


def test_prefilter_plugin_returning_non_intersecting_nodes() -> None:
    cluster = cluster_of([node(n) for n in NODES])
    plugins = fake("FakePreFilter1"), fake("FakePreFilter2", ["node2"]), fake("FakePreFilter3", ["node1"])
    decision = decide(profile(*plugins), pod("test-prefilter"), cluster)
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: node(s) didn't satisfy plugin(s) [FakePreFilter2 FakePreFilter3] simultaneously."
    )
    assert set(decision.rejected_by) == {"FakePreFilter2", "FakePreFilter3"}


def test_prefilter_plugin_returning_empty_node_set() -> None:
    cluster = cluster_of([node("node1")])
    decision = decide(profile(fake("FakePreFilter1"), fake("FakePreFilter2", [])), pod("test-prefilter"), cluster)
    assert decision.message == "0/1 nodes are available: node(s) didn't satisfy plugin FakePreFilter2."
    assert decision.rejected_by == ("FakePreFilter2",)


def test_some_nodes_are_filtered_out_by_prefilter_and_others_by_filter() -> None:
    cluster = cluster_of([node("node1"), node("node2")])
    plugins = fake("FakePreFilter", ["node2"]), fake("FakeFilter", fails=["node2"])
    decision = decide(profile(*plugins), pod("test-prefilter"), cluster)
    assert decision.message == (
        "0/2 nodes are available: 1 injecting failure for pod test-prefilter, "
        "1 node(s) didn't satisfy plugin(s) [FakePreFilter]."
    )
    assert set(decision.rejected_by) == {"FakePreFilter", "FakeFilter"}


def test_node_failing_a_filter_outside_the_set_gets_the_prefilter_reason() -> None:
    # the filter would reject node1 too, but node1 is never put to it
    cluster = cluster_of([node("node1"), node("node2")])
    plugins = fake("FakePreFilter", ["node2"]), fake("FakeFilter", fails=["node1", "node2"])
    decision = decide(profile(*plugins), pod("p"), cluster)
    assert decision.reasons == {"injecting failure for pod test-prefilter": 1,
                                "node(s) didn't satisfy plugin(s) [FakePreFilter]": 1}


def test_no_score_plugin_prefilter_plugin_returning_two_nodes() -> None:
    cluster = cluster_of([node(n) for n in NODES])
    decision = decide(profile(fake("FakePreFilter", ["node1", "node2"])), pod("test-prefilter"), cluster)
    assert decision.node in {"node1", "node2"}
    assert decision.feasible == 2


def test_prefilter_plugin_returned_an_invalid_node() -> None:
    cluster = cluster_of([node("1"), node("2")])
    plugins = fake("FakePreFilter", ["invalid-node"]), fake("TrueFilter")
    decision = decide(profile(*plugins), pod("test-prefilter"), cluster)
    assert decision.message == "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [FakePreFilter]."
    assert decision.rejected_by == ("FakePreFilter",)


def test_a_rejection_of_the_pod_wins_over_node_sets() -> None:
    class Missing(FilterPlugin[NoArgs]):
        name: ClassVar[str] = "Missing"

        def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | None:
            return 'persistentvolumeclaim "x" not found'

        def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
            return None

    cluster = cluster_of([node("node1")])
    decision = decide(profile(fake("FakePreFilter", ["node1"]), Missing(NoArgs())), pod("p"), cluster)
    assert decision.message == '0/1 nodes are available: persistentvolumeclaim "x" not found.'
    assert decision.rejected_by == ("Missing",)


def test_conflict_wording() -> None:
    assert narrowing_conflict([fake("B", []), fake("A", []), fake("B", [])]) == (
        "node(s) didn't satisfy plugin(s) [A B] simultaneously"
    )
    assert narrowing_conflict([fake("A", [])]) == "node(s) didn't satisfy plugin A"


def name_in(*names: str) -> dict:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}]}}


def test_preemption_tries_only_the_named_nodes() -> None:
    nodes = [node(f"n{i}", cpu="1") for i in range(1, 5)]
    victims = [pod(f"low{i}", cpu="1", node_name=f"n{i}", priority=0) for i in range(1, 5)]
    cluster = cluster_of(nodes, victims)
    decision = decide(make_profile(), pod("high", cpu="1", priority=100, affinity=name_in("n3")), cluster)
    assert decision.node is None
    assert decision.preemption is not None and decision.preemption.node == "n3"
    assert [v.name for v in decision.preemption.victims] == ["low3"]
    assert decision.message == (
        "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    # the named node holds a pod that may not be evicted: the others are not helpful either
    cluster = cluster_of(nodes, [*victims[:2], pod("top", cpu="1", node_name="n3", priority=1000), victims[3]])
    decision = decide(make_profile(), pod("high", cpu="1", priority=100, affinity=name_in("n3")), cluster)
    assert decision.preemption is None
    assert decision.full_message == (
        "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "no new claims to deallocate, preemption: 0/4 nodes are available: 1 No preemption victims found for "
        "incoming pod, 3 Preemption is not helpful for scheduling."
    )


def test_nominated_node_outside_the_set_is_still_tried_first() -> None:
    # kube evaluates the nominated node before the PreFilterResult's nodes; it fits: it is taken
    cluster = cluster_of([node(n) for n in NODES])
    nominated = dataclasses.replace(parse_pod(pod("p")), nominated_node="node3")
    decision = decide(profile(fake("FakePreFilter", ["node1"])), nominated, cluster)
    assert decision.node == "node3"
    # it does not fit: its own reason, the set's nodes evaluated, the rest left out
    decision = decide(profile(fake("FakePreFilter", ["node1"]), fake("FakeFilter", fails=NODES)), nominated, cluster)
    assert decision.reasons == {"injecting failure for pod test-prefilter": 2,
                                "node(s) didn't satisfy plugin(s) [FakePreFilter]": 1}


def test_start_index_rotates_within_the_named_nodes() -> None:
    cluster = cluster_of([node(f"n{i:03}") for i in range(200)])
    named = [f"n{i:03}" for i in range(0, 200, 2)] + ["gone"]  # 100 nodes: more than enough to find
    plugins = (fake("FakePreFilter", named),)
    narrowing = Profile("p", "placer", 10, plugins, ())
    scheduler = Scheduler()
    scheduler.next_start_index = 150  # 150 % 100 named nodes: the 51st of them first
    first = scheduler.schedule(parse_pod(pod("p")), narrowing, cluster)
    # nodes_to_find(10%, 100 nodes) = 100: every named node examined, none of the others
    assert first.feasible == 100
    assert scheduler.next_start_index == (150 + 100) % 200


def test_explain_reports_the_nodes_left_out() -> None:
    cluster = cluster_of([node("node1", cpu="1"), node("node2"), node("node3")])
    wanted = parse_pod(pod("p", cpu="2", affinity=name_in("node1")))
    explanation = explain(wanted, make_profile(), cluster)
    left_out = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    assert explanation.rejected["node2"][0] == left_out
    assert explanation.rejected["node3"][0] == left_out
    assert explanation.rejected["node1"] == ["Insufficient cpu"]
    assert explanation.message == "0/3 nodes are available: 1 Insufficient cpu, 2 " + left_out + "."


@pytest.mark.parametrize("names", [["node1"], ["node1", "node2", "node3"]])
def test_a_pod_without_node_names_and_with_all_of_them_place_alike(names: list[str]) -> None:
    cluster = cluster_of([node(n, cpu="4") for n in NODES], [pod("x", cpu="3", node_name="node2")])
    plain = decide(make_profile(), pod("p", cpu="1"), cluster)
    named = decide(make_profile(), pod("p", cpu="1", affinity=name_in(*names)), cluster)
    assert named.node == (plain.node if len(names) == 3 else "node1")
