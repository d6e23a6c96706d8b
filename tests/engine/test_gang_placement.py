"""A gang inside one topology domain: kube v1.36's placement algorithm (TopologyPlacementGenerator,
PodGroupPodsCount, NodeResourcesFit's placement score) in `placer.engine.gang` / `engine.placement`.

The issue's scenario: racks of 4, 6 and 2 cpu, pods of 1 cpu — a gang of 5 with topology key
`rack` goes whole into the 6-cpu rack, a sixth pod stays there, a gang of 7 that no rack fits binds
none until a rack grows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from placer.engine.cluster import ClusterState
from placer.engine.framework import Placement, PlacementAssignment
from placer.engine.gang import MEMBER_UNSCHEDULABLE, GroupDecision, Outcome, decide_group
from placer.engine.groups import POD_GROUP_KIND, GroupRef, group_of, lookup
from placer.engine.kinds import document_kind, upsert_object
from placer.engine.objects import ObjectError
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.placement import NOT_ELIGIBLE, WAP_NOT_SUPPORTED, FitPlacementScore, placements_unavailable
from placer.engine.profile import Profile, compile_profile
from placer.engine.runtime import Scheduler
from placer.testing import cluster_of, node, pod

Obj = dict[str, Any]
RACK = "example.com/rack"
FILTERS = [{"name": "NodeResourcesFit"}, {"name": "GangScheduling"}, {"name": "TopologyPlacementGenerator"}]
SCORES = [{"name": "NodeResourcesFit", "weight": 1}, {"name": "PodGroupPodsCount", "weight": 1}]
TAS = compile_profile("tas", {"schedulerName": "placer", "filters": FILTERS, "scores": SCORES, "postFilters": []})
TAS_PREEMPT = compile_profile("tas-p", {"schedulerName": "placer", "filters": FILTERS, "scores": SCORES,
                                        "postFilters": [{"name": "DynamicResources"}, {"name": "DefaultPreemption"}]})
BEST_FIT = compile_profile("bf", {"schedulerName": "placer", "scores": SCORES, "postFilters": [], "filters": [
    *FILTERS[:2], {"name": "TopologyPlacementGenerator", "args": {"placement": "BestFit"}}]})
NO_GATE = compile_profile("plain", {"schedulerName": "placer", "filters": FILTERS[:2], "postFilters": []})


def group(name: str, min_count: int, key: str | None = RACK) -> Obj:
    spec: Obj = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def member(name: str, group_name: str, cpu: str = "1", **kwargs: Any) -> Obj:
    obj = pod(name, cpu, **kwargs)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group_name}
    return obj


def racks(extra: tuple[Obj, ...] = ()) -> list[Obj]:
    """rack-a: 4 cpu (2 nodes), rack-b: 6 cpu (3 nodes), rack-c: 2 cpu (1 node)."""
    layout = {"rack-a": ["a1", "a2"], "rack-b": ["b1", "b2", "b3"], "rack-c": ["c1"]}
    return [node(name, cpu="2", labels={RACK: rack}) for rack, names in layout.items() for name in names] + list(extra)


def state(nodes: list[Obj], *groups: Obj, bound: list[Obj] = ()) -> ClusterState:  # type: ignore[assignment]
    cluster = cluster_of(nodes, bound)
    for obj in groups:
        kind = document_kind(obj)
        assert kind is not None
        upsert_object(cluster.catalog, kind, obj)
    return cluster


def decide(cluster: ClusterState, pods: list[Obj], profile: Profile = TAS) -> GroupDecision:
    infos = [parse_pod(p) for p in pods]
    ref = group_of(infos[0])
    assert ref is not None
    return decide_group(Scheduler(), profile, cluster, ref, infos)


def rack_of(cluster: ClusterState, node_name: str | None) -> str | None:
    found = cluster.node(node_name) if node_name else None
    return None if found is None else found.labels[RACK]


def test_gang_of_five_goes_whole_into_the_six_cpu_rack_and_a_sixth_pod_stays_there() -> None:
    cluster = state(racks(), group("train", 5))
    pods = [member(f"w{i}", "train") for i in range(5)]
    decision = decide(cluster, pods)
    assert decision.outcome is Outcome.PLACED and decision.placement == "rack-b"
    assert {rack_of(cluster, d.node) for d in decision.decisions} == {"rack-b"}
    assert [(t.name, t.nodes, t.placed, t.fits) for t in decision.placements] == [
        ("rack-a", 2, 4, False), ("rack-b", 3, 5, True), ("rack-c", 1, 2, False)]
    assert decision.placements[1].chosen and decision.placements[0].misses == {
        "default/w4": "0/2 nodes are available: 2 Insufficient cpu."}
    assert cluster.pods["default/w0"].assumed  # the winner's pods are left assumed, to be bound

    sixth = decide(cluster, [member("w5", "train")])
    assert sixth.outcome is Outcome.PLACED and rack_of(cluster, sixth.decisions[0].node) == "rack-b"
    assert [t.name for t in sixth.placements] == ["rack-b"]  # the scheduled pods pin the domain


def test_a_profile_naming_no_placement_plugin_still_keeps_a_topology_gang_in_one_rack() -> None:
    """The server serves schedulingConstraints only with the gate on, and kube's defaults then
    include the placement plugins: a group carrying a key is placed by rack in any profile."""
    for profile in (NO_GATE, compile_profile("default", {"schedulerName": "placer"})):
        cluster = state(racks(), group("train", 5))
        decision = decide(cluster, [member(f"w{i}", "train") for i in range(5)], profile)
        assert decision.outcome is Outcome.PLACED and decision.placement == "rack-b"
        assert {rack_of(cluster, d.node) for d in decision.decisions} == {"rack-b"}
    # a group without a key, in a profile without the generator: kube's default algorithm, as before
    cluster = state(racks(), group("plain", 5, key=None))
    decision = decide(cluster, [member(f"w{i}", "plain") for i in range(5)], NO_GATE)
    assert decision.outcome is Outcome.PLACED and not decision.placements
    assert len({rack_of(cluster, d.node) for d in decision.decisions}) > 1


def test_gang_no_rack_fits_binds_none_then_all_in_the_rack_that_grows() -> None:
    cluster = state(racks(), group("big", 7))
    pods = [member(f"p{i}", "big") for i in range(7)]
    decision = decide(cluster, pods)
    assert decision.outcome is Outcome.UNSCHEDULABLE and decision.placement is None
    assert decision.message == placements_unavailable(3) == (
        "0/3 placements are available, first placement status: pod group is unschedulable")
    assert not cluster.pods  # nothing held
    # each pod reads what it got in the first placement (rack-a: 4 fitted, 3 did not)
    messages = [d.message for d in decision.decisions]
    assert messages.count(MEMBER_UNSCHEDULABLE) == 4
    assert messages.count("0/2 nodes are available: 2 Insufficient cpu.") == 3
    assert decision.condition == ("False", "Unschedulable", decision.message)

    cluster.upsert_node(parse_node(node("c2", cpu="6", labels={RACK: "rack-c"})))
    again = decide(cluster, pods)
    assert again.outcome is Outcome.PLACED and again.placement == "rack-c"
    assert {rack_of(cluster, d.node) for d in again.decisions} == {"rack-c"}
    assert len([d for d in again.decisions if d.node]) == 7


def test_with_preemption_in_the_profile_kube_refuses_to_preempt_for_a_topology_group() -> None:
    cluster = state(racks(), group("big", 7))
    decision = decide(cluster, [member(f"p{i}", "big") for i in range(7)], TAS_PREEMPT)
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message == f"{placements_unavailable(3)}, {WAP_NOT_SUPPORTED}"
    # kube-scheduler v1.36.2's own FailedScheduling note for such a pod, measured (no final period)
    unfit = [d for d in decision.decisions if d.message != MEMBER_UNSCHEDULABLE]
    assert unfit and all(d.post_filter_message == f"no new claims to deallocate, {NOT_ELIGIBLE}" for d in unfit)
    assert unfit[0].full_message == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: not eligible due to placement-based pod group scheduling limitation")


def test_no_node_with_the_key_no_feasible_placements() -> None:
    cluster = state(racks(), group("g", 2, key="example.com/block"))
    decision = decide(cluster, [member("x", "g"), member("y", "g")])
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert [d.message for d in decision.decisions] == ["no feasible placements found"] * 2


def test_a_group_without_a_key_is_one_placement_of_every_node() -> None:
    cluster = state(racks(), group("g", 7, key=None))
    decision = decide(cluster, [member(f"p{i}", "g") for i in range(7)])
    assert decision.outcome is Outcome.PLACED and [t.name for t in decision.placements] == [""]
    too_big = state(racks(), group("h", 13, key=None))
    failed = decide(too_big, [member(f"q{i}", "h") for i in range(13)])
    assert failed.message == "0/1 placements are available, first placement status: pod group is unschedulable"


def test_scheduled_pods_in_two_domains_cannot_be_decided() -> None:
    bound = [member("s1", "g", node_name="a1"), member("s2", "g", node_name="b1")]
    cluster = state(racks(), group("g", 2), bound=bound)
    decision = decide(cluster, [member("x", "g")])
    assert decision.outcome is Outcome.ERROR
    assert decision.message == ("cannot determine domain for already scheduled pods: "
                                "more than 1 domain found for pod group: rack-a, rack-b")
    assert decision.condition == ("False", "SchedulerError", decision.message)  # kube's submit of an Error


def test_pod_group_pods_count_prefers_the_placement_taking_more_pods() -> None:
    # minCount 2, 4 pods: rack-a (4 cpu) takes all 4, rack-c (2 cpu) only 2
    cluster = state(racks(), group("g", 2))
    decision = decide(cluster, [member(f"p{i}", "g") for i in range(4)])
    scored = {t.name: t.scores for t in decision.placements if t.fits}
    assert scored["rack-a"]["PodGroupPodsCount"] == 100 and scored["rack-c"]["PodGroupPodsCount"] == 50
    assert decision.placement == "rack-a"


def test_node_resources_fit_placement_score_is_most_allocated_over_the_domain() -> None:
    # a gang of 2 fits every rack: kube's NodeResourcesFit placement score prefers the fullest
    cluster = state(racks(), group("g", 2))
    decision = decide(cluster, [member("x", "g"), member("y", "g")])
    fit = {t.name: t.scores["NodeResourcesFit"] for t in decision.placements}
    assert fit["rack-c"] > fit["rack-a"] > fit["rack-b"]
    assert decision.placement == "rack-c"


def test_best_fit_takes_the_tightest_domain_where_default_takes_the_fullest_ratio() -> None:
    # rack-x: 4 cpu empty; rack-y: 16 cpu with 8 used. A gang of 2 x 1 cpu: kube's MostAllocated
    # ratio prefers rack-y (10/16 > 2/4); BestFit leaves 2 cpu in rack-x against 6 in rack-y.
    nodes = [node("x1", cpu="4", memory="8Gi", labels={RACK: "rack-x"}),
             node("y1", cpu="16", memory="8Gi", labels={RACK: "rack-y"})]
    bound = [pod("busy", "8", node_name="y1")]
    pods = [member("p", "g"), member("q", "g")]
    default = decide(state(nodes, group("g", 2), bound=bound), pods)
    best = decide(state(nodes, group("g", 2), bound=bound), pods, BEST_FIT)
    assert default.placement == "rack-y" and best.placement == "rack-x"
    assert best.placements[0].leftover is not None and best.placements[0].leftover < best.placements[1].leftover


def test_scheduler_plugins_group_reads_the_annotation() -> None:
    obj = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
           "metadata": {"name": "cg", "namespace": "default", "annotations": {"placer.dev/topology-key": RACK}},
           "spec": {"minMember": 5}}
    cluster = state(racks(), obj)
    pods = [pod(f"c{i}", "1", labels={"scheduling.x-k8s.io/pod-group": "cg"}) for i in range(5)]
    decision = decide(cluster, pods)
    assert decision.outcome is Outcome.PLACED and decision.placement == "rack-b"


@pytest.mark.parametrize(("constraints", "path", "message"), [
    ({"topology": [{"key": "a"}, {"key": "b"}]}, "spec.schedulingConstraints.topology",
     "Too many: 2: must have at most 1 item"),
    ({"topology": [{}]}, "spec.schedulingConstraints.topology[0].key", "Required value"),
])
def test_invalid_topology_is_rejected_as_the_api_server_does(constraints: Obj, path: str, message: str) -> None:
    obj = group("bad", 2)
    obj["spec"]["schedulingConstraints"] = constraints
    kind = document_kind(obj)
    assert kind is not None
    with pytest.raises(ObjectError) as raised:
        kind.parse(obj)
    assert (raised.value.path, raised.value.message) == (path, message)


def test_the_parsed_key() -> None:
    cluster = state(racks(), group("g", 2), group("h", 2, key=None))
    g = lookup(cluster.catalog, GroupRef(POD_GROUP_KIND, "default", "g"))
    h = lookup(cluster.catalog, GroupRef(POD_GROUP_KIND, "default", "h"))
    assert g is not None and (g.topology_key, g.constrained) == (RACK, True)
    assert h is not None and (h.topology_key, h.constrained) == ("", False)


def test_a_podgroup_with_constraints_shows_the_gate_on_for_every_group() -> None:
    """The API server keeps schedulingConstraints only with the gate on: once one PodGroup carries
    it, a group without a key is decided as kube-scheduler with the gate on decides it — one
    placement of every node — in any profile (kube v1.36.2's message, measured)."""
    default = compile_profile("default", {"schedulerName": "placer"})
    pods = [member(f"q{i}", "plain") for i in range(13)]  # 13 cpu on 12
    alone = decide(state(racks(), group("plain", 13, key=None)), pods, default)
    assert alone.message == "pod group is unschedulable, No preemption victims found for incoming preemptor"
    beside = decide(state(racks(), group("plain", 13, key=None), group("other", 2)), pods, default)
    assert beside.message == ("0/1 placements are available, first placement status: pod group is unschedulable, "
                              "No preemption victims found for incoming preemptor")
    assert [t.name for t in beside.placements] == [""]


@pytest.mark.parametrize(("weights", "nodes", "expected"), [
    ((1, 1), 2, 25),  # cpu 3000m / 10000m = 30, memory 2000 / 10000 = 20: (30 + 20) / 2
    ((4, 1), 2, 28),  # (4 * 30 + 20) / 5
    ((1, 1), 3, 25),  # node3 is outside the placement: not counted
])
def test_fit_placement_score_kube_rows(weights: tuple[int, int], nodes: int, expected: int) -> None:
    """kube v1.36's `TestScorePlacement_Resources` rows: MostAllocated over the placement's nodes."""
    cluster = cluster_of([node(f"node{i}", cpu="5000m", memory="5000") for i in range(1, nodes + 1)])
    mask = np.zeros(cluster.size, dtype=bool)
    mask[[cluster.index["node1"], cluster.index["node2"]]] = True
    proposed = ((parse_pod(pod("foo", "1000m", "0")), "node1"), (parse_pod(pod("bar", "2000m", "2000")), "node2"))
    scorer = FitPlacementScore([("cpu", weights[0]), ("memory", weights[1])])
    assert scorer.score_placement(None, cluster, PlacementAssignment(Placement("p", mask), proposed, 0)) == expected
