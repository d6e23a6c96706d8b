"""DefaultPreemption, after kube-scheduler's `defaultpreemption/default_preemption_test.go` and
`preemption/preemption_test.go` (TestPostFilter, TestDryRunPreemption, TestSelectBestCandidate,
TestPodEligibleToPreemptOthers, TestPreempt), re-expressed as whole scheduling cycles: the pod fits
nowhere, and the decision carries the nomination (`Decision.preemption`) or kube's ` preemption: ...`
sentence (`Decision.post_filter_message`).

kube's resources: small 100m, medium 200m, large 300m, very large 500m, on nodes of 500m; its
priorities: neg -100, low 0, mid 100, high 1000, very high 10000. kube starts the candidate search
at a random offset and breaks full ties at random; Placer starts at the first node in node-tree
order and breaks ties by that order, so where kube's tables accept any of several nodes these tests
name the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import DEFAULT_FILTERS, Profile, ProfileError, compile_profile
from placer.engine.runtime import Decision, Scheduler
from placer.plugins.default_preemption import (
    DefaultPreemption,
    DefaultPreemptionArgs,
    split_by_budgets,
)
from placer.testing import affinity_term, cluster_of, decide, node, pod, spread_constraint

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL, MEDIUM, LARGE, VERY_LARGE = "100m", "200m", "300m", "500m"

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"

FIT = [{"name": "NodeResourcesFit"}]

Obj = dict[str, Any]


# ----------------------------------------------------------------------------- builders


def epoch(n: int) -> str:
    """kube's epochTime<n>: later n, later start."""
    return f"2025-01-01T00:00:{n:02}Z"


def kpod(
    name: str,
    priority: int | None = None,
    cpu: str | None = None,
    node_name: str | None = None,
    *,
    start: int | None = None,
    policy: str | None = None,
    nominated: str | None = None,
    class_name: str | None = None,
    preempted: bool = False,
    **extra: Any,
) -> Obj:
    """A pod with kube's test knobs: `start` (status.startTime, as epoch(n)), `policy`
    (spec.preemptionPolicy), `nominated` (status.nominatedNodeName), `class_name`, `preempted`
    (kube's DisruptionTarget condition of a scheduler's victim)."""
    obj = pod(name, cpu, priority=priority, node_name=node_name, **extra)
    if preempted:
        obj["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler"}]
    if start is not None:
        obj["status"]["startTime"] = epoch(start)
    if policy is not None:
        obj["spec"]["preemptionPolicy"] = policy
    if nominated is not None:
        obj["status"]["nominatedNodeName"] = nominated
    if class_name is not None:
        obj["spec"]["priorityClassName"] = class_name
    return obj


def knode(name: str, cpu: str = VERY_LARGE, **extra: Any) -> Obj:
    return node(name, cpu=cpu, **extra)


def pdb(
    name: str,
    match_labels: Mapping[str, str] | None,
    allowed: int = 0,
    *,
    disrupted: Sequence[str] = (),
    namespace: str = "default",
    selector: Mapping[str, Any] | None = None,
) -> Obj:
    """A policy/v1 PodDisruptionBudget with its status (`disruptionsAllowed`, `disruptedPods`)."""
    spec: Obj = {}
    if selector is not None:
        spec["selector"] = dict(selector)
    elif match_labels is not None:
        spec["selector"] = {"matchLabels": dict(match_labels)}
    status: Obj = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = dict.fromkeys(disrupted, epoch(0))
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}


def priority_class(name: str, value: int, *, global_default: bool = False, policy: str | None = None) -> Obj:
    obj: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value}
    if global_default:
        obj["globalDefault"] = True
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def profile(
    filters: Sequence[Mapping[str, Any]] | None = FIT,
    *,
    args: Mapping[str, Any] | None = None,
    post: Sequence[Mapping[str, Any]] | None = None,
) -> Profile:
    """A profile with these filters (None: the defaults), no scores, and DefaultPreemption alone
    with `args` (or the `post` list as written)."""
    spec: Obj = {"schedulerName": "placer", "scores": []}
    if filters is not None:
        spec["filters"] = [dict(f) for f in filters]
    if post is not None:
        spec["postFilters"] = [dict(p) for p in post]
    else:  # DefaultPreemption alone: its own sentence, without DynamicResources' before it
        spec["postFilters"] = [{"name": "DefaultPreemption", "args": dict(args or {})}]
    return compile_profile("test", spec)


def run(
    preemptor: Obj,
    nodes: Sequence[Obj],
    pods: Sequence[Obj] = (),
    *,
    objects: Sequence[Obj] = (),
    filters: Sequence[Mapping[str, Any]] | None = FIT,
    args: Mapping[str, Any] | None = None,
) -> Decision:
    decision = decide(profile(filters, args=args), preemptor, cluster_of(nodes, pods, objects=objects))
    assert decision.node is None, "the preemptor must fit nowhere for preemption to run"
    return decision


def nominated(decision: Decision) -> tuple[str, list[str]]:
    """(node, victims' names, most important first)."""
    assert decision.preemption is not None, decision.full_message
    assert decision.post_filter_message is None
    return decision.preemption.node, [v.name for v in decision.preemption.victims]


def refused(decision: Decision) -> str:
    assert decision.preemption is None, decision.preemption
    assert decision.post_filter_message is not None
    return decision.post_filter_message


# ----------------------------------------------------------------------------- TestPostFilter


def test_higher_priority_pod_preempts_on_the_only_node() -> None:
    decision = run(kpod("p", HIGH), [node("node1", pods="1")], [kpod("p1", None, node_name="node1")])
    assert nominated(decision) == ("node1", ["p1"])


def test_tied_priority_finds_no_victims() -> None:
    decision = run(kpod("p"), [node("node1", pods="1")], [kpod("p1", None, node_name="node1")])
    assert refused(decision) == f"preemption: 0/1 nodes are available: 1 {NO_VICTIMS}."
    assert decision.message == "0/1 nodes are available: 1 Too many pods."
    # kube's FitError with the PostFilter's sentence, which ends in a period of its own
    assert decision.full_message == (
        f"0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 {NO_VICTIMS}."
    )


def test_victims_on_the_node_with_lower_priority_pods_only() -> None:
    decision = run(
        kpod("p", MID),
        [node("node1", pods="1"), node("node2", pods="1")],
        [kpod("p1", HIGH, node_name="node1"), kpod("p2", LOW, node_name="node2")],
    )
    assert nominated(decision) == ("node2", ["p2"])


def test_pdb_violations_outweigh_priority() -> None:
    """kube's "pod can be made schedulable on minHighestPriority node": node1's low victim is covered
    by a budget with no disruption left; node2's mid one is not, so node2 wins."""
    decision = run(
        kpod("p", VERY_HIGH),
        [node("node1", pods="1"), node("node2", pods="1")],
        [
            kpod("p1", LOW, node_name="node1", labels={"pdb": "violating"}),
            kpod("p2", MID, node_name="node2", labels={"pdb": "non-violating"}),
        ],
        objects=[pdb("violating", {"pdb": "violating"}, 0), pdb("non-violating", {"pdb": "non-violating"}, 2**31 - 1)],
    )
    assert nominated(decision) == ("node2", ["p2"])


def test_not_enough_room_after_evicting_every_lower_pod() -> None:
    """kube's "no candidate nodes found with mixed reasons": a higher-priority pod keeps node2 full
    whatever goes; node1 and node3 hold only pods of the preemptor's priority."""
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode("node1", pods="1"), knode("node2"), knode("node3", pods="1")],
        [
            kpod("p1", HIGH, node_name="node1"),
            kpod("p2.1", HIGH, LARGE, node_name="node2"),
            kpod("p2.2", LOW, MEDIUM, node_name="node2"),
            kpod("p3", HIGH, node_name="node3"),
        ],
    )
    assert refused(decision) == f"preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 {NO_VICTIMS}."


def test_unresolvable_nodes_are_not_tried() -> None:
    """kube's "2 UnschedulableAndUnresolvable nodes and 2 nodes don't have enough CPU resource":
    a tainted and an unschedulable node are not helpful; the two others stay short of cpu."""
    pods = [kpod(f"hi{i}", HIGH, LARGE, node_name=f"node{i}") for i in (1, 2)]
    pods += [kpod(f"lo{i}", LOW, MEDIUM, node_name=f"node{i}") for i in (1, 2, 3, 4)]
    decision = run(
        kpod("p", MID, LARGE),
        [knode("node1"), knode("node2"), knode("node3", taints=["dedicated=gpu:NoSchedule"]),
         knode("node4", unschedulable=True)],
        pods,
        filters=None,
    )
    assert refused(decision) == f"preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 {NOT_HELPFUL}."


def test_node_affinity_taints_and_unschedulable_are_not_helpful() -> None:
    """Nodes full of lower-priority pods, each rejected by a filter no eviction can satisfy."""
    lows = [kpod(f"lo-{n}", LOW, "4", node_name=n) for n in ("cordoned", "tainted", "elsewhere")]
    decision = run(
        kpod("p", HIGH, "1", node_selector={"disk": "ssd"}),
        [
            node("cordoned", labels={"disk": "ssd"}, unschedulable=True),
            node("tainted", labels={"disk": "ssd"}, taints=["dedicated=gpu:NoSchedule"]),
            node("elsewhere"),
        ],
        lows,
        filters=None,
    )
    assert refused(decision) == f"preemption: 0/3 nodes are available: 3 {NOT_HELPFUL}."
    assert decision.full_message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated "
        "taint(s), 1 node(s) were unschedulable. "
        f"preemption: 0/3 nodes are available: 3 {NOT_HELPFUL}."
    )


def test_a_pod_rejected_before_any_node_is_not_helped() -> None:
    """A PreFilter rejection (a missing claim) is every node's status, unresolvable: kube's message."""
    decision = run(
        kpod("p", HIGH, "1", claims=["data"]),
        [node("a", cpu="1"), node("b", cpu="1")],
        [kpod("low", LOW, "1", node_name="a")],
        filters=[{"name": "NodeResourcesFit"}, {"name": "VolumeBinding"}],
    )
    assert decision.message == '0/2 nodes are available: persistentvolumeclaim "data" not found.'
    assert refused(decision) == f"preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."


def test_unresolvable_filter_after_a_resolvable_one_still_counts() -> None:
    """A node a resolvable filter rejected first is a candidate, but kube's SelectVictimsOnNode runs
    every filter there: a taint later in the profile keeps the pod off it, whatever is evicted."""
    decision = run(
        kpod("p", HIGH, "1"),
        [node("a", cpu="1", taints=["x=y:NoSchedule"])],
        [kpod("low", LOW, "1", node_name="a")],
        filters=[{"name": "NodeResourcesFit"}, {"name": "TaintToleration"}],
    )
    assert decision.message == "0/1 nodes are available: 1 Insufficient cpu."
    assert refused(decision) == "preemption: 0/1 nodes are available: 1 node(s) had untolerated taint(s)."


# ----------------------------------------------------------------------------- TestDryRunPreemption (victims)


def test_each_node_would_give_one_victim_the_first_wins() -> None:
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode("node1"), knode("node2")],
        [kpod("p1", MID, LARGE, node_name="node1"), kpod("p2", MID, LARGE, node_name="node2")],
    )
    assert nominated(decision) == ("node1", ["p1"])


def test_higher_priority_pods_are_never_victims() -> None:
    decision = run(
        kpod("p", LOW, LARGE),
        [knode("node1"), knode("node2")],
        [kpod("p1", MID, LARGE, node_name="node1"), kpod("p2", MID, LARGE, node_name="node2")],
    )
    assert refused(decision) == f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}."


def test_medium_priority_pod_is_preempted_the_small_low_one_stays() -> None:
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode("node1")],
        [kpod("p1.1", LOW, SMALL, node_name="node1"), kpod("p1.2", MID, LARGE, node_name="node1")],
    )
    assert nominated(decision) == ("node1", ["p1.2"])


def test_mixed_priority_pods_are_preempted() -> None:
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode("node1"), knode("node2")],
        [
            kpod("p1.1", MID, SMALL, node_name="node1"),
            kpod("p1.2", LOW, SMALL, node_name="node1"),
            kpod("p1.3", MID, MEDIUM, node_name="node1"),
            kpod("p1.4", HIGH, SMALL, node_name="node1"),
            kpod("p2", HIGH, VERY_LARGE, node_name="node2"),
        ],
    )
    # the most important victims first
    assert nominated(decision) == ("node1", ["p1.3", "p1.2"])


def test_equal_priorities_the_earlier_started_is_reprieved_first() -> None:
    """kube's "pick later StartTime one when priorities are equal": p1.2 (started earlier) is tried
    first and kept; p1.1 goes."""
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode("node1"), knode("node2")],
        [
            kpod("p1.1", LOW, SMALL, node_name="node1", start=5),
            kpod("p1.2", LOW, SMALL, node_name="node1", start=4),
            kpod("p1.3", MID, MEDIUM, node_name="node1", start=3),
            kpod("p1.4", HIGH, SMALL, node_name="node1", start=2),
            kpod("p2", HIGH, VERY_LARGE, node_name="node2", start=1),
        ],
    )
    assert nominated(decision) == ("node1", ["p1.3", "p1.1"])


def test_pod_with_anti_affinity_against_the_preemptor_is_preempted() -> None:
    """kube's "pod with anti-affinity is preempted": the low pod's required anti-affinity rejects the
    preemptor (resolvable); only it goes, the others have room enough."""
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [
        affinity_term(match_expressions=[{"key": "foo", "operator": "Exists"}])]}
    decision = run(
        kpod("p", HIGH, SMALL, labels={"foo": ""}),
        [knode("node1"), knode("node2")],
        [
            kpod("p1.1", LOW, SMALL, node_name="node1", labels={"foo": ""}, pod_anti_affinity=anti),
            kpod("p1.2", MID, SMALL, node_name="node1"),
            kpod("p1.3", HIGH, SMALL, node_name="node1"),
            kpod("p2", HIGH, VERY_LARGE, node_name="node2"),
        ],
        filters=[{"name": "NodeResourcesFit"}, {"name": "InterPodAffinity"}],
    )
    assert decision.reasons == {"node(s) didn't satisfy existing pods anti-affinity rules": 1, "Insufficient cpu": 1}
    assert nominated(decision) == ("node1", ["p1.1"])


def test_preemptors_own_anti_affinity_is_resolvable() -> None:
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(match_labels={"app": "web"})]}
    decision = run(
        kpod("p", HIGH, pod_anti_affinity=anti),
        [node("a"), node("b")],
        [kpod("web-a", LOW, node_name="a", labels={"app": "web"}),
         kpod("web-b", HIGH, node_name="b", labels={"app": "web"})],
        filters=[{"name": "InterPodAffinity"}],
    )
    assert decision.reasons == {"node(s) didn't match pod anti-affinity rules": 2}
    assert nominated(decision) == ("a", ["web-a"])


def test_unmatched_pod_affinity_is_not_helpful() -> None:
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(match_labels={"app": "db"})]}
    decision = run(
        kpod("p", HIGH, pod_affinity=affinity),
        [node("a"), node("b")],
        [kpod("web", LOW, node_name="a", labels={"app": "web"}), kpod("db", HIGH, node_name="x", labels={"app": "db"})],
        filters=[{"name": "InterPodAffinity"}],
    )
    assert decision.reasons == {"node(s) didn't match pod affinity rules": 2}
    assert refused(decision) == f"preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."


def test_affinity_to_a_lower_priority_pod_is_not_kept_by_preemption() -> None:
    """kube removes every lower pod first and does not look further ("we have decided not to support
    this case"): node a, full, holds the preemptor's only affinity peer, a lower-priority pod."""
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(match_labels={"app": "db"})]}
    decision = run(
        kpod("p", HIGH, "1", pod_affinity=affinity),
        [node("a", cpu="1"), node("b", cpu="1")],
        [kpod("db", LOW, "1", node_name="a", labels={"app": "db"})],
        filters=[{"name": "NodeResourcesFit"}, {"name": "InterPodAffinity"}],
    )
    assert decision.reasons == {"Insufficient cpu": 1, "node(s) didn't match pod affinity rules": 1}
    assert refused(decision) == (
        f"preemption: 0/2 nodes are available: 1 {NOT_HELPFUL}, 1 node(s) didn't match pod affinity rules."
    )


def spread_case(pods: Sequence[Obj]) -> Decision:
    zone = "topology.kubernetes.io/zone"
    exists = [{"key": "foo", "operator": "Exists"}]
    constraints = [
        {**spread_constraint(1, zone), "labelSelector": {"matchExpressions": exists}},
        {**spread_constraint(1, "kubernetes.io/hostname"), "labelSelector": {"matchExpressions": exists}},
    ]
    return run(
        kpod("p", HIGH, labels={"foo": ""}, spread=constraints),
        [node("node-a", labels={zone: "zone1"}), node("node-b", labels={zone: "zone1"}),
         node("node-x", labels={zone: "zone2"})],
        pods,
        filters=[{"name": "PodTopologySpread"}],
    )


def test_preemption_resolves_a_spread_skew() -> None:
    """kube's DryRunPreemption case: node-a (evict pod-a2; pod-a1, mid, is re-added) and node-b
    (evict pod-b1) both do; they tie in every criterion, and node-a comes first."""
    decision = spread_case([
        kpod("pod-a1", MID, node_name="node-a", labels={"foo": ""}),
        kpod("pod-a2", LOW, node_name="node-a", labels={"foo": ""}),
        kpod("pod-b1", LOW, node_name="node-b", labels={"foo": ""}),
        kpod("pod-x1", HIGH, node_name="node-x", labels={"foo": ""}),
        kpod("pod-x2", HIGH, node_name="node-x", labels={"foo": ""}),
    ])
    assert nominated(decision) == ("node-a", ["pod-a2"])


def test_preemption_for_topology_spread_constraints() -> None:
    """kube's TestPreempt case: only node-b has a lower-priority pod."""
    decision = spread_case([
        kpod("p-a1", HIGH, node_name="node-a", labels={"foo": ""}),
        kpod("p-a2", HIGH, node_name="node-a", labels={"foo": ""}),
        kpod("p-b1", LOW, node_name="node-b", labels={"foo": ""}),
        kpod("p-x1", HIGH, node_name="node-x", labels={"foo": ""}),
        kpod("p-x2", HIGH, node_name="node-x", labels={"foo": ""}),
    ])
    assert nominated(decision) == ("node-b", ["p-b1"])


def test_spread_missing_label_is_not_helpful_skew_is() -> None:
    """Zone z1 holds 3 web pods (node a), z2 2 (node b, full of higher pods): a is rejected for the
    skew (resolvable: evicting its low pod leaves 2 + 1 - 2 = 1), `nolabel` for lacking the zone
    label (not helpful, though its pod is low)."""
    zone = "topology.kubernetes.io/zone"
    constraint = spread_constraint(1, zone, match_labels={"app": "web"})

    def web(name: str, priority: int, where: str, cpu: str | None = None) -> Obj:
        return kpod(name, priority, cpu, node_name=where, labels={"app": "web"})

    nodes = [node("a", labels={zone: "z1"}), node("b", cpu="1", labels={zone: "z2"}), node("nolabel")]
    pods = [web("w2", HIGH, "a"), web("w3", HIGH, "a"), web("w4", HIGH, "b", "500m"), web("w5", HIGH, "b", "500m"),
            web("w6", LOW, "nolabel")]
    filters = [{"name": "NodeResourcesFit"}, {"name": "PodTopologySpread"}]
    preemptor = kpod("p", MID, "100m", labels={"app": "web"}, spread=[constraint])
    decision = run(preemptor, nodes, [web("w1", LOW, "a"), *pods], filters=filters)
    assert decision.reasons == {
        "Insufficient cpu": 1,
        "node(s) didn't match pod topology spread constraints": 1,
        "node(s) didn't match pod topology spread constraints (missing required label)": 1,
    }
    assert nominated(decision) == ("a", ["w1"])

    decision = run(preemptor, nodes, [web("w1", HIGH, "a"), *pods], filters=filters)
    assert refused(decision) == f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}."


def test_host_port_holder_is_preempted() -> None:
    decision = run(
        kpod("p", HIGH, host_ports=[8080]),
        [node("a"), node("b")],
        [kpod("old", LOW, node_name="a", host_ports=[8080]), kpod("other", LOW, node_name="a", host_ports=[9090]),
         kpod("keeper", HIGH, node_name="b", host_ports=[8080])],
        filters=[{"name": "NodePorts"}],
    )
    assert decision.reasons == {"node(s) didn't have free ports for the requested pod ports": 2}
    assert nominated(decision) == ("a", ["old"])


# ----------------------------------------------------------------------------- PodDisruptionBudgets


def budget_case(objects: Sequence[Obj], *pods: str) -> Decision:
    return run(
        kpod("p", HIGH, VERY_LARGE),
        [knode("node1")],
        [kpod(name, MID, MEDIUM, node_name="node1", labels={"app": "foo"}) for name in pods],
        objects=objects,
    )


def test_budget_violating_pod_is_spared_while_others_suffice() -> None:
    """Without a budget the more important pod (a) is re-added first and v goes; v's exhausted budget
    has v tried first, so a goes instead."""
    pods = [kpod("v", 1, "400m", node_name="n", labels={"app": "v"}), kpod("a", 5, "400m", node_name="n")]
    without = run(kpod("p", 10, "400m"), [node("n", cpu="800m")], pods)
    assert nominated(without) == ("n", ["v"])
    with_budget = run(kpod("p", 10, "400m"), [node("n", cpu="800m")], pods, objects=[pdb("v", {"app": "v"}, 0)])
    assert nominated(with_budget) == ("n", ["a"])
    # a budget with a disruption left: v no longer violates it, and goes again
    allowed = run(kpod("p", 10, "400m"), [node("n", cpu="800m")], pods, objects=[pdb("v", {"app": "v"}, 1)])
    assert nominated(allowed) == ("n", ["v"])


def test_budgets_match_by_namespace_and_selector() -> None:
    pods = [kpod("v", 1, "400m", node_name="n", labels={"app": "v"}), kpod("a", 5, "400m", node_name="n")]
    for budget in (
        pdb("other-ns", {"app": "v"}, 0, namespace="other"),
        pdb("other-app", {"app": "w"}, 0),
        pdb("empty-selector", None, 0, selector={}),  # kube-scheduler: an empty selector matches nothing
        pdb("no-selector", None, 0),
    ):
        decision = run(kpod("p", 10, "400m"), [node("n", cpu="800m")], pods, objects=[budget])
        assert nominated(decision) == ("n", ["v"]), budget["metadata"]["name"]
    # a pod without labels matches no budget, not even one selecting pods without an `app` label
    bare = [kpod("v", 1, "400m", node_name="n"), kpod("a", 5, "400m", node_name="n", labels={"app": "keep"})]
    no_app = pdb("no-app", None, 0, selector={"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})
    decision = run(kpod("p", 10, "400m"), [node("n", cpu="800m")], bare, objects=[no_app])
    assert nominated(decision) == ("n", ["v"])


def test_the_victim_order_kept_per_node_follows_its_pods_and_the_budgets() -> None:
    """The dry run keeps each node's lower pods in put-back order between preemptors
    (`VictimOrder`): a budget that appears, a pod that leaves and one that arrives all count."""
    cluster = cluster_of([node("n", cpu="800m")], [kpod("v", 1, "400m", node_name="n", labels={"app": "v"}),
                                                   kpod("a", 5, "400m", node_name="n")])
    fit = profile()
    assert nominated(decide(fit, kpod("p", 10, "400m"), cluster)) == ("n", ["v"])
    upsert_object(cluster.catalog, KINDS_BY_NAME["PodDisruptionBudget"], pdb("v", {"app": "v"}, 0))
    assert nominated(decide(fit, kpod("p", 10, "400m"), cluster)) == ("n", ["a"])
    cluster.remove_pod("default/a")
    cluster.add_pod(parse_pod(kpod("b", 0, "400m", node_name="n")))
    assert nominated(decide(fit, kpod("p", 10, "400m"), cluster)) == ("n", ["b"])
    # another priority, other pods below it: y alone for q, x and y for p
    cluster = cluster_of([node("n", cpu="1")],
                         [kpod("x", 5, "600m", node_name="n"), kpod("y", 0, "400m", node_name="n")])
    assert nominated(decide(fit, kpod("q", 3, "400m"), cluster)) == ("n", ["y"])
    assert nominated(decide(fit, kpod("p", 10, "600m"), cluster)) == ("n", ["x"])
    # the same pods, the node larger: its outcome (kept for the same shortfall) is weighed again
    pods = [kpod("x", 5, "500m", node_name="n", memory="6Gi"), kpod("y", 0, "500m", node_name="n", memory="1Gi")]
    cluster = cluster_of([node("n", cpu="1")], pods)
    assert nominated(decide(fit, kpod("p", 10, "1"), cluster)) == ("n", ["x", "y"])
    cluster.upsert_node(parse_node(node("n", cpu="1500m")))
    assert nominated(decide(fit, kpod("p", 10, "1"), cluster)) == ("n", ["y"])
    # and a preemptor asking for memory too: what each pod frees is counted again (y frees too little)
    assert nominated(decide(fit, kpod("p", 10, "1", memory="4Gi"), cluster)) == ("n", ["x"])


def records(cluster: ClusterState, *names: str) -> list[Any]:
    return [cluster.pods[f"default/{name}"] for name in names]


@pytest.mark.parametrize(
    ("allowed", "disrupted", "violating"),
    [
        (1, (), ["p1.2"]),  # kube's "preemption with violation of same pdb"
        (1, ("p2",), ["p1.2"]),  # "... the victim doesn't belong to DisruptedPods"
        (1, ("p1.2",), []),  # "... the victim belongs to DisruptedPods"
        (0, (), ["p1.1", "p1.2"]),
        (2, (), []),
    ],
)
def test_split_by_budgets(allowed: int, disrupted: tuple[str, ...], violating: list[str]) -> None:
    cluster = cluster_of(
        [knode("node1")],
        [kpod(name, MID, MEDIUM, node_name="node1", labels={"app": "foo"}) for name in ("p1.1", "p1.2")],
        objects=[pdb("budget", {"app": "foo"}, allowed, disrupted=disrupted)],
    )
    budgets = [b for _, _, b in cluster.catalog.items("PodDisruptionBudget")]
    bad, fine = split_by_budgets(records(cluster, "p1.1", "p1.2"), budgets)
    assert [r.pod.name for r in bad] == violating
    assert [r.pod.name for r in fine] == [name for name in ("p1.1", "p1.2") if name not in violating]


def test_disrupted_pod_counts_as_not_violating_even_when_others_do() -> None:
    """kube's "the victim which belongs to DisruptedPods is treated as 'nonViolating'": of three
    pods under a budget allowing one, p1.3 (already being disrupted) does not count; p1.1 spends the
    one allowed disruption; p1.2 violates."""
    cluster = cluster_of(
        [knode("node1")],
        [kpod(name, MID, MEDIUM, node_name="node1", labels={"app": "foo"}) for name in ("p1.1", "p1.2", "p1.3")],
        objects=[pdb("budget", {"app": "foo"}, 1, disrupted=["p1.3"])],
    )
    budgets = [b for _, _, b in cluster.catalog.items("PodDisruptionBudget")]
    bad, fine = split_by_budgets(records(cluster, "p1.1", "p1.2", "p1.3"), budgets)
    assert [r.pod.name for r in bad] == ["p1.2"]
    assert [r.pod.name for r in fine] == ["p1.1", "p1.3"]


def test_violations_are_counted_per_node() -> None:
    """Every node needs both its pods gone. node1's two (mid) share a budget allowing one disruption:
    one violation; node2's (low) are under a budget allowing none: two; node3's (high) violate
    nothing. Fewest violations first: node3, whatever its priorities; without node3, node1."""
    nodes = [knode("node1"), knode("node2"), knode("node3")]
    pods = [
        *(kpod(n, MID, MEDIUM, node_name="node1", labels={"app": "one"}) for n in ("p1.1", "p1.2")),
        *(kpod(n, LOW, MEDIUM, node_name="node2", labels={"app": "none"}) for n in ("p2.1", "p2.2")),
        *(kpod(n, HIGH, MEDIUM, node_name="node3") for n in ("p3.1", "p3.2")),
    ]
    budgets = [pdb("one", {"app": "one"}, 1), pdb("none", {"app": "none"}, 0)]
    decision = run(kpod("p", VERY_HIGH, VERY_LARGE), nodes, pods, objects=budgets)
    assert nominated(decision) == ("node3", ["p3.1", "p3.2"])
    decision = run(kpod("p", VERY_HIGH, VERY_LARGE), nodes[:2], pods[:4], objects=budgets)
    assert nominated(decision) == ("node1", ["p1.1", "p1.2"])


def test_search_looks_past_the_wanted_count_for_a_node_violating_no_budget() -> None:
    """kube's "preemption looks past numCandidates until a non-PDB violating node is found": 40% of 5
    nodes or at least 2, but node1 and node2 would break a budget: the search goes on to node3."""
    pods = [
        kpod(f"p{i}", MID, LARGE, node_name=f"node{i}", labels={"app": "foo"} if i in (1, 2, 5) else None)
        for i in range(1, 6)
    ]
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode(f"node{i}") for i in range(1, 6)],
        pods,
        objects=[pdb("budget", {"app": "foo"}, 0)],
        args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2},
    )
    assert nominated(decision) == ("node3", ["p3"])


# ----------------------------------------------------------------------------- TestSelectBestCandidate


BEST_CASES: dict[str, tuple[list[tuple[str, int, str, int]], str]] = {
    # (name, priority, cpu, start) on node<name's first digit>
    "node with min highest priority pod is picked": (
        [("p1.1", MID, MEDIUM, 0), ("p1.2", MID, LARGE, 0), ("p2.1", MID, MEDIUM, 0), ("p2.2", LOW, MEDIUM, 0),
         ("p3.1", LOW, MEDIUM, 0), ("p3.2", LOW, MEDIUM, 0)],
        "node3",
    ),
    "when highest priorities are the same, minimum sum of priorities is picked": (
        [("p1.1", MID, MEDIUM, 0), ("p1.2", MID, LARGE, 0), ("p2.1", MID, LARGE, 0), ("p2.2", LOW, MEDIUM, 0),
         ("p3.1", MID, MEDIUM, 0), ("p3.2", MID, MEDIUM, 0)],
        "node2",
    ),
    "when highest priority and sum are the same, minimum number of pods is picked": (
        [("p1.1", MID, SMALL, 0), ("p1.2", NEG, SMALL, 0), ("p1.3", MID, SMALL, 0), ("p1.4", NEG, SMALL, 0),
         ("p2.1", MID, LARGE, 0), ("p2.2", NEG, MEDIUM, 0), ("p3.1", MID, MEDIUM, 0), ("p3.2", NEG, SMALL, 0),
         ("p3.3", LOW, SMALL, 0)],
        "node2",
    ),
    "sum of adjusted priorities is considered": (
        [("p1.1", MID, SMALL, 0), ("p1.2", NEG, SMALL, 0), ("p1.3", NEG, SMALL, 0), ("p2.1", MID, LARGE, 0),
         ("p2.2", NEG, MEDIUM, 0), ("p3.1", MID, MEDIUM, 0), ("p3.2", NEG, SMALL, 0), ("p3.3", LOW, SMALL, 0)],
        "node2",
    ),
    "non-overlapping lowest high priority, sum priorities, and number of pods": (
        [("p1.1", MID, SMALL, 0), ("p1.2", LOW, SMALL, 0), ("p1.3", LOW, SMALL, 0), ("p2.1", HIGH, LARGE, 0),
         ("p3.1", MID, MEDIUM, 0), ("p3.2", LOW, SMALL, 0), ("p3.3", LOW, SMALL, 0), ("p3.4", LOW, MEDIUM, 0),
         ("p4.1", MID, MEDIUM, 0), ("p4.2", MID, SMALL, 0), ("p4.3", MID, SMALL, 0), ("p4.4", NEG, SMALL, 0)],
        "node1",
    ),
    "same priority, same number of victims, different start time for each node's pod": (
        [("p1.1", MID, MEDIUM, 2), ("p1.2", MID, MEDIUM, 2), ("p2.1", MID, MEDIUM, 3), ("p2.2", MID, MEDIUM, 3),
         ("p3.1", MID, MEDIUM, 1), ("p3.2", MID, MEDIUM, 1)],
        "node2",
    ),
    "same priority, same number of victims, different start time for all pods": (
        [("p1.1", MID, MEDIUM, 4), ("p1.2", MID, MEDIUM, 2), ("p2.1", MID, MEDIUM, 5), ("p2.2", MID, MEDIUM, 1),
         ("p3.1", MID, MEDIUM, 3), ("p3.2", MID, MEDIUM, 6)],
        "node3",
    ),
    "different priority, same number of victims, different start time for all pods": (
        [("p1.1", LOW, MEDIUM, 4), ("p1.2", MID, MEDIUM, 2), ("p2.1", MID, MEDIUM, 6), ("p2.2", LOW, MEDIUM, 1),
         ("p3.1", LOW, MEDIUM, 3), ("p3.2", MID, MEDIUM, 5)],
        "node2",
    ),
}


@pytest.mark.parametrize("case", sorted(BEST_CASES))
def test_select_best_candidate(case: str) -> None:
    table, expected = BEST_CASES[case]
    preemptor = VERY_HIGH if case.startswith("non-overlapping") else HIGH
    names = sorted({f"node{name[1]}" for name, *_ in table})
    decision = run(
        kpod("p", preemptor, VERY_LARGE),
        [knode(n) for n in names],
        [kpod(name, prio, cpu, f"node{name[1]}", start=start) for name, prio, cpu, start in table],
    )
    chosen, victims = nominated(decision)
    assert chosen == expected
    # the chosen node's victims are all of its pods (none can stay with a 500m preemptor)
    assert sorted(victims) == sorted(name for name, *_ in table if f"node{name[1]}" == expected)


def test_fewest_victims_when_highest_and_sum_tie() -> None:
    """node2's victims (5 and int32's minimum) have node1's highest priority and, adjusted by 2**31
    each, its sum: the count decides, before node2's later start could."""
    decision = run(
        kpod("p", 10, "1"),
        [node("node1", cpu="1"), node("node2", cpu="1")],
        [kpod("a", 5, "1", node_name="node1", start=1),
         kpod("b", 5, "500m", node_name="node2", start=2), kpod("c", -(2**31), "500m", node_name="node2", start=2)],
    )
    assert nominated(decision) == ("node1", ["a"])


def test_full_tie_goes_to_the_first_node_in_node_order() -> None:
    decision = run(
        kpod("p", HIGH, LARGE),
        [knode("node2"), knode("node1")],
        [kpod("p1", MID, LARGE, node_name="node1", start=0), kpod("p2", MID, LARGE, node_name="node2", start=0)],
    )
    assert nominated(decision) == ("node2", ["p2"])


def test_basic_preemption_logic() -> None:
    """kube's TestPreempt "basic preemption logic": node1's two low pods over node3's one mid."""
    decision = run(
        kpod("p", HIGH, VERY_LARGE, policy="PreemptLowerPriority"),
        [knode("node1"), knode("node2"), knode("node3")],
        [kpod("p1.1", LOW, SMALL, node_name="node1"), kpod("p1.2", LOW, SMALL, node_name="node1"),
         kpod("p2.1", HIGH, LARGE, node_name="node2"), kpod("p3.1", MID, MEDIUM, node_name="node3")],
    )
    node_name, victims = nominated(decision)
    assert (node_name, sorted(victims)) == ("node1", ["p1.1", "p1.2"])


# ----------------------------------------------------------------------------- candidates: how many


def test_min_candidate_nodes_stop_the_search_early() -> None:
    """Five nodes; node4 holds only a low victim (the best), the others a mid one. The default args
    (at least 100 candidates) examine all five; 40% / 1 wants 2, found on node1 and node2: node4 is
    never examined."""
    nodes = [knode(f"node{i}") for i in range(1, 6)]
    pods = [kpod(f"p{i}", LOW if i == 4 else MID, LARGE, node_name=f"node{i}") for i in range(1, 6)]
    assert nominated(run(kpod("p", HIGH, LARGE), nodes, pods)) == ("node4", ["p4"])
    limited = run(kpod("p", HIGH, LARGE), nodes, pods,
                  args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1})
    assert nominated(limited) == ("node1", ["p1"])
    # 60% of 5 = 3 candidates: still not node4
    three = run(kpod("p", HIGH, LARGE), nodes, pods,
                args={"minCandidateNodesPercentage": 60, "minCandidateNodesAbsolute": 0})
    assert nominated(three) == ("node1", ["p1"])
    # 80% = 4: node4 is the fourth
    four = run(kpod("p", HIGH, LARGE), nodes, pods,
               args={"minCandidateNodesPercentage": 80, "minCandidateNodesAbsolute": 0})
    assert nominated(four) == ("node4", ["p4"])
    # the absolute count wins over a smaller percentage
    absolute = run(kpod("p", HIGH, LARGE), nodes, pods,
                   args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 4})
    assert nominated(absolute) == ("node4", ["p4"])


def test_every_cycle_starts_the_search_at_the_first_node() -> None:
    """kube's "preemption offset across multiple scheduling cycles and wrap around": kube starts each
    dry run at a random offset (its test seeds it: node5+node1, node2+node3, node4+node5); Placer at
    the first candidate in node-tree order every time, whatever the cycles before, so three
    preemptors in a row (nothing evicted between them) find node1 and node2, and all tie: node1."""
    nodes = [knode(f"node{i}") for i in range(1, 6)]
    pods = [kpod(f"p{i}", MID, LARGE, node_name=f"node{i}") for i in range(1, 6)]
    cluster = cluster_of(nodes, pods)
    limited = profile(args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1})
    scheduler = Scheduler()
    for name in ("tp1", "tp2", "tp3"):
        decision = scheduler.schedule(parse_pod(kpod(name, HIGH, LARGE)), limited, cluster)
        assert nominated(decision) == ("node1", ["p1"]), name


def test_nodes_without_victims_do_not_count_as_candidates() -> None:
    """kube's "some nodes are not possible candidates": node2 and node5 hold pods above the
    preemptor; the 2 wanted candidates are node1 and node3, and node4 (the best) is never examined."""
    nodes = [knode(f"node{i}") for i in range(1, 6)]
    prios = {1: MID, 2: VERY_HIGH, 3: MID, 4: LOW, 5: VERY_HIGH}
    pods = [kpod(f"p{i}", prios[i], LARGE, node_name=f"node{i}") for i in range(1, 6)]
    args = {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}
    assert nominated(run(kpod("p", HIGH, LARGE), nodes, pods, args=args)) == ("node1", ["p1"])
    # node1's pod as important as the preemptor: node3 and node4 are the two
    pods[0] = kpod("p1", HIGH, LARGE, node_name="node1")
    assert nominated(run(kpod("p", HIGH, LARGE), nodes, pods, args=args)) == ("node4", ["p4"])


@pytest.mark.parametrize(
    ("percentage", "absolute", "potential", "wanted"),
    [
        (10, 100, 5, 5),  # never more than the nodes there are
        (10, 100, 1000, 100),
        (10, 100, 5000, 500),
        (40, 1, 5, 2),
        (0, 3, 10, 3),
        (50, 0, 7, 3),  # rounded down
        (100, 0, 7, 7),
    ],
)
def test_number_of_candidates(percentage: int, absolute: int, potential: int, wanted: int) -> None:
    plugin = DefaultPreemption(DefaultPreemptionArgs(
        minCandidateNodesPercentage=percentage, minCandidateNodesAbsolute=absolute))
    assert plugin._wanted(potential) == wanted


# ----------------------------------------------------------------------------- args and profiles


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "cannot both be zero"),
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage"),
        ({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute"),
        ({"minCandidateNodesAbsolute": "5"}, "minCandidateNodesAbsolute"),
        ({"minCandidateNodes": 5}, "minCandidateNodes"),
    ],
)
def test_invalid_args_are_profile_errors(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ProfileError) as error:
        profile(args=args)
    message = str(error.value)
    assert message.startswith('profile "test": postFilters[0] DefaultPreemption: ')
    assert field in message


@pytest.mark.parametrize(
    "args",
    [{}, {"minCandidateNodesPercentage": 0}, {"minCandidateNodesAbsolute": 0}, {"minCandidateNodesPercentage": 100}],
)
def test_valid_args(args: dict[str, Any]) -> None:
    (plugin,) = profile(args=args).post_filters
    assert isinstance(plugin, DefaultPreemption)


def test_defaults_are_kubes() -> None:
    claims, plugin = compile_profile("test", {"schedulerName": "placer"}).post_filters
    assert claims.name == "DynamicResources"  # kube v1.36: an idle claim is freed before a pod is evicted
    assert isinstance(plugin, DefaultPreemption)
    assert (plugin.args.minCandidateNodesPercentage, plugin.args.minCandidateNodesAbsolute) == (10, 100)


def test_wrong_sections_are_profile_errors() -> None:
    with pytest.raises(ProfileError, match="is not a postFilter plugin"):
        profile(post=[{"name": "NodeResourcesFit"}])
    with pytest.raises(ProfileError, match="is not a filter plugin"):
        profile(filters=[{"name": "DefaultPreemption"}])
    with pytest.raises(ProfileError, match="Duplicate"):
        profile(post=[{"name": "DefaultPreemption"}, {"name": "DefaultPreemption"}])


def test_empty_post_filters_disable_preemption() -> None:
    nodes, pods = [node("node1", pods="1")], [kpod("p1", LOW, node_name="node1")]
    decision = decide(profile(post=[]), kpod("p", HIGH), cluster_of(nodes, pods))
    assert decision.node is None
    assert decision.preemption is None and decision.post_filter_message is None
    assert decision.full_message == decision.message == "0/1 nodes are available: 1 Too many pods."


# ----------------------------------------------------------------------------- eligibility


def test_preemption_policy_never() -> None:
    decision = run(kpod("p", HIGH, policy="Never"), [node("node1", pods="1")], [kpod("p1", LOW, node_name="node1")])
    assert refused(decision) == "preemption: not eligible due to preemptionPolicy=Never."
    assert decision.full_message == (
        "0/1 nodes are available: 1 Too many pods. preemption: not eligible due to preemptionPolicy=Never."
    )


def test_preemption_policy_never_from_the_priority_class() -> None:
    from placer.engine.kinds import resolve_priority

    cluster = cluster_of([node("node1", pods="1")], [kpod("p1", LOW, node_name="node1")],
                         objects=[priority_class("batch", HIGH, policy="Never"), priority_class("urgent", HIGH)])
    for name, preempts in (("batch", False), ("urgent", True)):
        info = parse_pod(kpod("p", class_name=name))
        resolve_priority(info, cluster.catalog)
        decision = Scheduler().schedule(info, profile(), cluster)
        assert (decision.preemption is not None) is preempts, name


TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."


def test_terminating_lower_pod_on_the_nominated_node_waits() -> None:
    pods = [kpod("p1", LOW, "1", node_name="node1", deleting=True, preempted=True)]
    nodes = [node("node1", cpu="1"), node("node2", cpu="1")]
    pods.append(kpod("p2", LOW, "1", node_name="node2"))
    decision = run(kpod("p", HIGH, "1", nominated="node1"), nodes, pods)
    assert refused(decision) == TERMINATING
    # without a nomination the same pod preempts (the terminating pod may even be its victim)
    decision = run(kpod("p", HIGH, "1"), nodes, pods)
    assert nominated(decision) == ("node1", ["p1"])
    # a nomination held in the cluster counts as status.nominatedNodeName does
    cluster = cluster_of(nodes, pods)
    cluster.nominate(parse_pod(kpod("p", HIGH, "1")), "node1")
    decision = decide(profile(), kpod("p", HIGH, "1"), cluster)
    assert refused(decision) == TERMINATING


def test_terminating_pod_of_higher_priority_does_not_block() -> None:
    pods = [kpod("p1", VERY_HIGH, "500m", node_name="node1", deleting=True, preempted=True),
            kpod("p2", LOW, "500m", node_name="node1")]
    decision = run(kpod("p", HIGH, "500m", nominated="node1"), [node("node1", cpu="1")], pods)
    assert nominated(decision) == ("node1", ["p2"])


def test_nominated_node_rejected_unresolvably_does_not_block() -> None:
    """kube: "If the pod's nominated node is considered as UnschedulableAndUnresolvable by the
    filters, then the pod should be considered for preempting again"."""
    pods = [kpod("p1", LOW, "1", node_name="node1", deleting=True, preempted=True),
            kpod("p2", LOW, "1", node_name="node2")]
    nodes = [node("node1", cpu="1", unschedulable=True), node("node2", cpu="1")]
    decision = run(kpod("p", HIGH, "1", nominated="node1"), nodes, pods, filters=None)
    assert nominated(decision) == ("node2", ["p2"])


@pytest.mark.parametrize(
    ("condition", "blocks"),
    [
        (None, False),  # kube's "non-victim Pods terminating"
        ({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}, True),
        ({"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}, False),
        ({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}, False),
        ({"type": "Ready", "status": "True", "reason": "PreemptionByScheduler"}, False),
    ],
)
def test_only_a_preemption_victim_terminating_blocks(condition: Obj | None, blocks: bool) -> None:
    """kube v1.36's podTerminatingByPreemption (TestPodEligibleToPreemptOthers): a terminating pod
    on the nominated node holds the preemptor back only if it is a scheduler's victim (its first
    DisruptionTarget condition True, reason PreemptionByScheduler); any other terminating pod, the
    preemptor preempts again (the terminating pod may well be its victim)."""
    terminating = kpod("p1", LOW, "1", node_name="node1", deleting=True)
    if condition is not None:
        terminating["status"]["conditions"] = [condition]
    nodes = [node("node1", cpu="1"), node("node2", cpu="1")]
    pods = [terminating, kpod("p2", LOW, "1", node_name="node2")]
    decision = run(kpod("p", HIGH, "1", nominated="node1"), nodes, pods)
    if blocks:
        assert refused(decision) == TERMINATING
    else:
        assert nominated(decision) == ("node1", ["p1"])


def test_a_pod_without_nomination_is_eligible_whatever_terminates() -> None:
    """kube's "Pod without nominated node": no nomination, nothing to wait for."""
    pods = [kpod("p1", LOW, "1", node_name="node1", deleting=True, preempted=True)]
    assert nominated(run(kpod("p", HIGH, "1"), [node("node1", cpu="1")], pods)) == ("node1", ["p1"])


# ----------------------------------------------------------------------------- nominations


def test_nominated_pod_holds_its_room_against_lower_and_equal_priority() -> None:
    cluster = cluster_of([node("a", cpu="2")])
    cluster.nominate(parse_pod(kpod("held", 5, "2")), "a")
    for priority in (3, 5):
        decision = decide(profile(post=[]), kpod("q", priority, "1"), cluster)
        assert decision.node is None, priority
        assert decision.message == "0/1 nodes are available: 1 Insufficient cpu."
    assert decide(profile(post=[]), kpod("q", 6, "1"), cluster).node == "a"
    # the nominated pod itself is not held against itself
    assert decide(profile(post=[]), kpod("held", 5, "2"), cluster).node == "a"


def make_scored_profile() -> Profile:
    return compile_profile("scored", {"schedulerName": "placer", "filters": FIT,
                                      "scores": [{"name": "NodeResourcesFit"}]})


def test_nominated_pod_goes_to_its_nominated_node() -> None:
    nodes = [node("big", cpu="8"), node("small", cpu="2")]
    scored = make_scored_profile()
    assert decide(scored, kpod("p", 5, "1"), cluster_of(nodes)).node == "big"
    assert decide(scored, kpod("p", 5, "1", nominated="small"), cluster_of(nodes)).node == "small"
    cluster = cluster_of(nodes)
    cluster.nominate(parse_pod(kpod("p", 5, "1")), "small")
    assert decide(scored, kpod("p", 5, "1"), cluster).node == "small"
    # a nominated node that no longer fits: scheduled as any other pod
    assert decide(scored, kpod("p", 5, "4", nominated="small"), cluster_of(nodes)).node == "big"


def test_no_preemption_on_a_node_nominated_to_an_equal_or_higher_pod() -> None:
    cluster = cluster_of([node("a", cpu="2")], [kpod("low", LOW, "1", node_name="a")])
    cluster.nominate(parse_pod(kpod("held", 10, "1")), "a")
    decision = decide(profile(), kpod("p", 10, "2"), cluster)
    assert decision.node is None
    # `held` (as important as p) counts on a: evicting `low` leaves 1 cpu for a pod of 2
    assert refused(decision) == "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    # a higher pod ignores the nomination: it preempts `low` and displaces `held`
    decision = decide(profile(), kpod("p", 11, "2"), cluster)
    assert decision.node is None
    assert nominated(decision) == ("a", ["low"])
    assert decision.preemption is not None and decision.preemption.displaced == ("default/held",)


def test_lower_nominated_pods_are_displaced_only_from_the_chosen_node() -> None:
    cluster = cluster_of([node("a", cpu="1"), node("b", cpu="1")],
                         [kpod("low-a", MID, "1", node_name="a"), kpod("low-b", LOW, "1", node_name="b")])
    cluster.nominate(parse_pod(kpod("held-a", LOW, "1")), "a")
    cluster.nominate(parse_pod(kpod("held-b", LOW, "1")), "b")
    decision = decide(profile(), kpod("p", HIGH, "1"), cluster)
    assert nominated(decision) == ("b", ["low-b"])
    assert decision.preemption is not None and decision.preemption.displaced == ("default/held-b",)


def test_only_lower_nominated_pods_are_displaced() -> None:
    """On b: `equal` (the preemptor's priority) holds 1 of 3 cpu, `lower` does not count; evicting
    `low` makes room. Only `lower` loses its nomination."""
    cluster = cluster_of([node("b", cpu="3")], [kpod("low", LOW, "1", node_name="b"),
                                                 kpod("high", VERY_HIGH, "1", node_name="b")])
    cluster.nominate(parse_pod(kpod("lower", MID, "1")), "b")
    cluster.nominate(parse_pod(kpod("equal", HIGH, "1")), "b")
    decision = decide(profile(), kpod("p", HIGH, "1"), cluster)
    assert nominated(decision) == ("b", ["low"])
    assert decision.preemption is not None and decision.preemption.displaced == ("default/lower",)


def test_decision_changes_nothing_in_the_cluster() -> None:
    cluster = cluster_of([knode("node1")], [kpod("p1", MID, LARGE, node_name="node1")])
    cluster.nominate(parse_pod(kpod("held", VERY_HIGH, SMALL)), "node1")
    before = (sorted(cluster.pods), cluster.requested[: cluster.size].tolist(), dict(cluster.nominated))
    decision = decide(profile(), kpod("p", HIGH, MEDIUM), cluster)
    assert nominated(decision) == ("node1", ["p1"])
    assert (sorted(cluster.pods), cluster.requested[: cluster.size].tolist(), dict(cluster.nominated)) == before


def test_full_ties_between_pods_are_broken_by_name() -> None:
    """kube's order among pods of equal priority and start is arbitrary; Placer's is by namespace/name
    (the later names go), not by the iteration order of a set, which moves with string hashing."""
    for prefix in ("a", "bb", "c-", "dd-", "e3"):
        names = [f"{prefix}{i}" for i in range(8)]
        decision = run(kpod("p", HIGH, "1"), [node("n", cpu="8")], [kpod(n, LOW, "1", node_name="n") for n in names])
        assert nominated(decision) == ("n", [names[-1]]), prefix
    decision = run(kpod("p", HIGH, "3"), [node("n", cpu="4")],
                   [kpod(n, LOW, "1", node_name="n") for n in ("w", "x", "y", "z")])
    assert nominated(decision) == ("n", ["x", "y", "z"])


# ----------------------------------------------------------------------------- property

APPS = ("x", "y")
ANTI_X = {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(match_labels={"app": "x"})]}


@st.composite
def random_pod(
    draw: st.DrawFn, name: str, node_name: str | None, priorities: Sequence[int] = (0, 1, 2, 3),
    cpus: tuple[int, int] = (1, 12),
) -> Obj:
    extra: Obj = {}
    if draw(st.integers(0, 3)) == 0:
        extra["host_ports"] = [8080]
    if draw(st.integers(0, 4)) == 0:
        extra["pod_anti_affinity"] = ANTI_X
    app = draw(st.sampled_from((None, *APPS)))
    return kpod(name, draw(st.sampled_from(priorities)), f"{draw(st.integers(*cpus)) * 100}m", node_name,
                start=draw(st.integers(0, 5)), labels={"app": app} if app else None, **extra)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], Obj, list[Obj]]:
    count = draw(st.integers(1, 4))
    nodes = [node(f"n{i}", cpu=f"{draw(st.integers(5, 20)) * 100}m", pods=str(draw(st.integers(2, 6))))
             for i in range(count)]
    used = {f"n{i}": [0, 0] for i in range(count)}
    limits = {n["metadata"]["name"]: (int(n["status"]["allocatable"]["cpu"][:-1]),
                                      int(n["status"]["allocatable"]["pods"])) for n in nodes}
    bound = []
    for i in range(draw(st.integers(2, 16))):
        target = f"n{draw(st.integers(0, count - 1))}"
        obj = draw(random_pod(f"b{i}", target))
        cpu = int(obj["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1])
        if used[target][0] + cpu <= limits[target][0] and used[target][1] < limits[target][1]:
            used[target][0] += cpu
            used[target][1] += 1
            bound.append(obj)
    budgets = [pdb("budget-x", {"app": "x"}, draw(st.integers(0, 2)))] if draw(st.booleans()) else []
    return nodes, bound, draw(random_pod("preemptor", None, (0, 1, 2, 3, 3, 3))), budgets


ENGINE = compile_profile("default", {"schedulerName": "placer"})
NO_PREEMPTION = compile_profile("plain", {"schedulerName": "placer", "postFilters": []})


def fits_on(preemptor: Obj, cluster: ClusterState, node_name: str) -> bool:
    """Whether the engine's filters (the default profile's) let the preemptor onto `node_name`."""
    decision = Scheduler().schedule(parse_pod(preemptor), NO_PREEMPTION, cluster, top=cluster.node_count)
    return decision.node is not None and node_name in {score.node for score in decision.top}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_preemption_victims_make_room_and_are_needed(scenario: tuple[list[Obj], list[Obj], Obj, list[Obj]]) -> None:
    """Random small clusters (cpu, pod counts, a host port, required anti-affinity both ways: filters
    where more pods never help), pods of priority 0..3, a random preemptor, maybe a budget. Asserted:

    - a preemption names a node and victims bound there, each of lower priority than the preemptor,
      each once; with them gone the default profile's filters admit the preemptor on that node;
    - with all the victims but any one gone, they do not (every victim was tried for a reprieve and
      failed with at least the other victims gone; with these monotone filters fewer evictions never
      help): minimal in kube's reprieve sense, not a minimum over all subsets;
    - no preemption (the pod being eligible, the default args examining every node) means no node
      admits it even with every lower-priority pod there gone.
    """
    nodes, bound, preemptor_obj, budgets = scenario
    cluster = cluster_of(nodes, bound, objects=budgets)
    preemptor = parse_pod(preemptor_obj)
    decision = Scheduler().schedule(preemptor, ENGINE, cluster)
    event("scheduled" if decision.node else "preempting" if decision.preemption else "refused")
    if decision.node is not None:
        return
    if decision.preemption is None:
        for name in cluster.index:
            lower = [r for r in cluster.pods_on(name) if r.pod.priority < preemptor.priority]
            with cluster.without(lower):
                assert not fits_on(preemptor_obj, cluster, name), name
        return
    chosen = decision.preemption.node
    victims = decision.preemption.victims
    assert victims
    keys = [v.key for v in victims]
    assert len(set(keys)) == len(keys)
    gone = [cluster.pods[key] for key in keys]
    assert all(r.node == chosen for r in gone)
    assert all(v.priority < preemptor.priority for v in victims)
    with cluster.without(gone):
        assert fits_on(preemptor_obj, cluster, chosen)
    for spared in gone:
        with cluster.without([r for r in gone if r is not spared]):
            assert not fits_on(preemptor_obj, cluster, chosen), spared.pod.key


# ----------------------------------------------------------------------------- kube's algorithm, literally


def kube_preemption(preemptor: Obj, cluster: ClusterState, args: DefaultPreemptionArgs) -> tuple[str, list[str]] | None:
    """kube's findCandidates, DryRunPreemption (one node at a time from offset 0, Placer's start),
    SelectVictimsOnNode and pickOneNodeForPreemption as kube's code reads, each fit asked of the whole
    profile's filters with the pods gone (`fits_on`), not of the columns: the oracle the dry run on
    the columns must agree with. (node, victims most important first), or None."""
    info = parse_pod(preemptor)
    _, _, resolvable = Scheduler._failure_reasons(info, NO_PREEMPTION, cluster)
    order = cluster.scan_order()
    candidates = order[resolvable[order]].tolist()
    wanted = DefaultPreemption(args)._wanted(len(candidates))
    budgets = [b for _, _, b in cluster.catalog.items("PodDisruptionBudget")]
    found: list[tuple[int, str, list[Any], int]] = []
    for position, slot in enumerate(candidates):
        name = cluster.names[slot]
        potential = sorted((r for r in cluster.pods_on(name) if r.pod.priority < info.priority),
                           key=lambda r: (-r.pod.priority, r.pod.start_time or float("inf"), r.pod.key))
        if not potential:
            continue
        with cluster.without(potential):
            if not fits_on(preemptor, cluster, name):
                continue
        violating, fine = split_by_budgets(potential, budgets)
        gone = list(potential)
        victims, violations = [], 0
        for group, counts in ((violating, 1), (fine, 0)):
            for record in group:
                gone.remove(record)
                with cluster.without(gone):
                    if fits_on(preemptor, cluster, name):
                        continue
                gone.append(record)
                victims.append(record.pod)
                violations += counts
        if not victims:
            continue
        victims.sort(key=lambda p: (-p.priority, p.start_time or float("inf"), p.key))
        found.append((position, name, victims, violations))
        if sum(1 for *_, v in found if v == 0) and len(found) >= wanted:
            break
    if not found:
        return None

    def earliest(victims: list[Any]) -> float:
        top = max(v.priority for v in victims)
        return min(v.start_time or float("inf") for v in victims if v.priority == top)

    position, name, victims, _ = min(found, key=lambda c: (
        c[3], c[2][0].priority, sum(v.priority + 2**31 for v in c[2]), len(c[2]), -earliest(c[2]), c[0]))
    return name, [v.name for v in victims]


@st.composite
def wide_scenarios(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], Obj, list[Obj], DefaultPreemptionArgs]:
    """Up to 8 nodes in two zones, pods of several priorities (some under a budget), and args small
    enough that the search stops before the last node."""
    zone = "topology.kubernetes.io/zone"
    count = draw(st.integers(1, 8))
    nodes = [node(f"n{i}", cpu=f"{draw(st.integers(5, 20)) * 100}m", pods=str(draw(st.integers(2, 6))),
                  labels={zone: f"z{i % 2}"}) for i in range(count)]
    room = {f"n{i}": [int(n["status"]["allocatable"]["cpu"][:-1]), int(n["status"]["allocatable"]["pods"])]
            for i, n in enumerate(nodes)}
    bound = []
    for i in range(draw(st.integers(4, 32))):
        target = f"n{draw(st.integers(0, count - 1))}"
        obj = draw(random_pod(f"b{i}", target, cpus=(1, 6)))
        cpu = int(obj["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1])
        if cpu <= room[target][0] and room[target][1] > 0:
            room[target][0] -= cpu
            room[target][1] -= 1
            bound.append(obj)
    budgets = [pdb("budget-x", {"app": "x"}, draw(st.integers(0, 2)))] if draw(st.booleans()) else []
    args = DefaultPreemptionArgs(minCandidateNodesPercentage=draw(st.sampled_from((0, 10, 40, 100))),
                                 minCandidateNodesAbsolute=draw(st.sampled_from((1, 2, 3, 100))))
    preemptor = draw(random_pod("preemptor", None, (2, 3, 3, 4), cpus=(4, 12)))
    return nodes, bound, preemptor, budgets, args


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=wide_scenarios())
def test_the_dry_run_on_the_columns_is_kubes(
    scenario: tuple[list[Obj], list[Obj], Obj, list[Obj], DefaultPreemptionArgs],
) -> None:
    """The nominated node and victims are those of kube's algorithm run literally (every fit asked
    of all the default profile's filters with the pods gone): host ports and resources on the
    columns (`EvictionTerms`), anti-affinity node by node, budgets, and the search stopped early."""
    nodes, bound, preemptor_obj, budgets, args = scenario
    cluster = cluster_of(nodes, bound, objects=budgets)
    filters = [{"name": f["name"]} for f in DEFAULT_FILTERS]
    spec = {"schedulerName": "placer", "filters": filters, "scores": [],
            "postFilters": [{"name": "DefaultPreemption", "args": args.model_dump()}]}
    decision = Scheduler().schedule(parse_pod(preemptor_obj), compile_profile("args", spec), cluster)
    if decision.node is not None:
        return
    expected = kube_preemption(preemptor_obj, cluster, args)
    got = None if decision.preemption is None else (
        decision.preemption.node, [v.name for v in decision.preemption.victims])
    event("preempting" if got else "refused")
    assert got == expected
