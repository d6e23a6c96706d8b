"""Gang scheduling in the engine: the PodGroup kinds of both APIs (`placer.engine.groups`), who
belongs to which group, kube's GangScheduling PreEnqueue rows (when a group's pods wait), and the
group decision (`placer.engine.gang`): placed whole or not at all, extras beyond minCount, basic
groups, competing gangs, preemption for the gang as a whole, and the group's status condition."""

from __future__ import annotations

from typing import Any

import pytest
from placer.engine.cluster import ClusterState
from placer.engine.gang import (
    GANG_WAITING,
    GROUP_UNSCHEDULABLE,
    MEMBER_UNSCHEDULABLE,
    WAP_ENABLED,
    GroupDecision,
    Outcome,
    condition_update,
    decide_group,
)
from placer.engine.groups import (
    COSCHEDULING_KIND,
    COSCHEDULING_LABEL,
    POD_GROUP_KIND,
    WAIT_FOR_GROUP,
    WAIT_FOR_QUORUM,
    GroupRef,
    PodGroupInfo,
    ScheduledMembers,
    group_kind,
    group_of,
    lookup,
    pending_by_group,
    scheduled_members,
    waiting_reason,
)
from placer.engine.kinds import document_kind, upsert_object
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_pod
from placer.engine.profile import Profile, compile_profile
from placer.engine.runtime import Scheduler
from placer.testing import cluster_of, node, pod

Obj = dict[str, Any]
V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
V1BETA1 = "scheduling.k8s.io/v1beta1"
XK8S = "scheduling.x-k8s.io/v1alpha1"


def pod_group(name: str, min_count: int | None = None, *, namespace: str = "default", api: str = V1ALPHA2,
              status: Obj | None = None, **spec: Any) -> Obj:
    """An upstream PodGroup: a gang of `min_count`, or basic when None."""
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    obj: Obj = {"apiVersion": api, "kind": "PodGroup",
                "metadata": {"name": name, "namespace": namespace, "generation": 2, "uid": f"uid-{name}"},
                "spec": {"schedulingPolicy": policy, **spec}}
    if status is not None:
        obj["status"] = status
    return obj


def coscheduling_group(name: str, min_member: int | None, *, namespace: str = "default", **spec: Any) -> Obj:
    return {"apiVersion": XK8S, "kind": "PodGroup", "metadata": {"name": name, "namespace": namespace},
            "spec": {**({} if min_member is None else {"minMember": min_member}), **spec}}


def member(name: str, group: str, cpu: str = "1", **kwargs: Any) -> Obj:
    """A pod of the upstream PodGroup `group` (spec.schedulingGroup.podGroupName)."""
    obj = pod(name, cpu, **kwargs)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def labelled(name: str, group: str, cpu: str = "1", **kwargs: Any) -> Obj:
    """A pod of the scheduler-plugins PodGroup `group` (its label)."""
    labels = {COSCHEDULING_LABEL: group, **kwargs.pop("labels", {})}
    return pod(name, cpu, labels=labels, **kwargs)


def cluster(nodes: list[Obj], bound: list[Obj] = (), groups: list[Obj] = (), objects: list[Obj] = ()) -> ClusterState:  # type: ignore[assignment]
    state = cluster_of(nodes, bound, objects=objects)
    for obj in groups:
        kind = document_kind(obj)
        assert kind is not None
        upsert_object(state.catalog, kind, obj)
    return state


def nodes(count: int, cpu: str = "4") -> list[Obj]:
    return [node(f"n{i}", cpu=cpu) for i in range(1, count + 1)]


DEFAULT = compile_profile("default", {"schedulerName": "placer"})
NO_PREEMPTION = compile_profile("plain", {"schedulerName": "placer", "postFilters": []})


def decide(state: ClusterState, pods: list[Obj], profile: Profile = DEFAULT, **kwargs: Any) -> GroupDecision:
    infos = [parse_pod(p) for p in pods]
    ref = group_of(infos[0])
    assert ref is not None
    return decide_group(Scheduler(), profile, state, ref, infos, **kwargs)


def nodes_of(decision: GroupDecision) -> dict[str, str | None]:
    return {d.pod.split("/")[1]: d.node for d in decision.decisions}


def messages(decision: GroupDecision) -> dict[str, str | None]:
    return {d.pod.split("/")[1]: d.message for d in decision.decisions}


# ----------------------------------------------------------------- the kinds


def test_upstream_gang_parsed() -> None:
    kind = group_kind(V1ALPHA2, "PodGroup")
    assert kind is not None and kind.name == POD_GROUP_KIND and kind.plural == "podgroups" and kind.namespaced
    group = kind.parse(pod_group("pg", 3, namespace="ns", priority=7, priorityClassName="high",
                                 disruptionMode="PodGroup"))
    assert group == PodGroupInfo("ns", "pg", V1ALPHA2, "gang", 3, "uid-pg", 2, "", priority=7,
                                 priority_class_name="high", disruption_mode="PodGroup")
    assert group.gang and group.quorum == 3 and group.upstream
    assert group.condition_type == "PodGroupScheduled" and not group.scheduled


def test_v1beta1_names_its_condition_initially_scheduled() -> None:
    kind = group_kind(V1BETA1, "PodGroup")
    assert kind is not None and kind.name == POD_GROUP_KIND  # one cache for both versions
    status = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]}
    group = kind.parse(pod_group("pg", 2, api=V1BETA1, status=status, workloadRef={"workloadName": "w"}))
    assert group.condition_type == "PodGroupInitiallyScheduled" and group.scheduled
    # a v1alpha2 condition type on a v1beta1 group is not its condition
    other = {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]}
    assert not kind.parse(pod_group("pg", 2, api=V1BETA1, status=other)).scheduled


def test_v1beta1_disruption_modes_and_preemption_policy() -> None:
    """v1beta1 renamed disruptionMode's values (Single, All) and added the group's preemptionPolicy."""
    beta = group_kind(V1BETA1, "PodGroup")
    assert beta is not None
    whole = beta.parse(pod_group("pg", 2, api=V1BETA1, disruptionMode="All", preemptionPolicy="Never"))
    assert whole.disrupted_whole and whole.preemption_policy == "Never"
    assert not beta.parse(pod_group("pg", 2, api=V1BETA1)).disrupted_whole  # Single by default
    with pytest.raises(ObjectError, match='Unsupported value: "PodGroup": supported values: "Single", "All"'):
        beta.parse(pod_group("pg", 2, api=V1BETA1, disruptionMode="PodGroup"))
    with pytest.raises(ObjectError, match=r"spec\.preemptionPolicy"):
        beta.parse(pod_group("pg", 2, api=V1BETA1, preemptionPolicy="Sometimes"))


def test_basic_policy_has_a_quorum_of_one() -> None:
    group = group_kind(V1ALPHA2, "PodGroup").parse(pod_group("pg"))  # type: ignore[union-attr]
    assert group.policy == "basic" and not group.gang and group.min_count == 0 and group.quorum == 1


def test_scheduler_plugins_group_parsed() -> None:
    kind = group_kind(XK8S, "PodGroup")
    assert kind is not None and kind.name == COSCHEDULING_KIND
    obj = coscheduling_group("ray", 3, namespace="ml", scheduleTimeoutSeconds=30)
    obj["status"] = {"phase": "Scheduling"}
    group = kind.parse(obj)
    assert (group.key, group.policy, group.min_count, group.schedule_timeout, group.phase) == (
        "ml/ray", "gang", 3, 30, "Scheduling")
    assert group.condition_type is None and not group.upstream  # its status is its controller's
    assert kind.parse(coscheduling_group("ray", None)).min_count == 0


@pytest.mark.parametrize(("spec", "path"), [
    ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}, "spec.schedulingPolicy"),
    ({"schedulingPolicy": {}}, "spec.schedulingPolicy"),
    ({}, "spec.schedulingPolicy"),
    ({"schedulingPolicy": {"gang": {}}}, "spec.schedulingPolicy.gang.minCount"),
    ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount"),
    ({"schedulingPolicy": {"gang": {"minCount": "3"}}}, "spec.schedulingPolicy.gang.minCount"),
    ({"schedulingPolicy": {"gang": 3}}, "spec.schedulingPolicy.gang"),
    ({"schedulingPolicy": "gang"}, "spec.schedulingPolicy"),
    ({"schedulingPolicy": {"basic": {}}, "disruptionMode": "Node"}, "spec.disruptionMode"),
    ({"schedulingPolicy": {"basic": {}}, "priority": True}, "spec.priority"),
])
def test_invalid_upstream_groups_name_the_field(spec: Obj, path: str) -> None:
    obj = {"apiVersion": V1ALPHA2, "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": spec}
    with pytest.raises(ObjectError) as error:
        group_kind(V1ALPHA2, "PodGroup").parse(obj)  # type: ignore[union-attr]
    assert error.value.path == path


@pytest.mark.parametrize(("spec", "path"), [
    ({"minMember": -1}, "spec.minMember"),
    ({"minMember": 1.5}, "spec.minMember"),
    ({"minMember": 2, "scheduleTimeoutSeconds": "10s"}, "spec.scheduleTimeoutSeconds"),
])
def test_invalid_scheduler_plugins_groups_name_the_field(spec: Obj, path: str) -> None:
    obj = {"apiVersion": XK8S, "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": spec}
    with pytest.raises(ObjectError) as error:
        group_kind(XK8S, "PodGroup").parse(obj)  # type: ignore[union-attr]
    assert error.value.path == path


def test_document_kind_tells_the_podgroup_apis_apart() -> None:
    assert document_kind({"apiVersion": V1ALPHA2, "kind": "PodGroup"}).api_version == V1ALPHA2  # type: ignore[union-attr]
    assert document_kind({"apiVersion": XK8S, "kind": "PodGroup"}).name == COSCHEDULING_KIND  # type: ignore[union-attr]
    assert document_kind({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}) is None
    assert document_kind({"apiVersion": "v1", "kind": "Namespace"}).name == "Namespace"  # type: ignore[union-attr]
    assert document_kind({"apiVersion": "v1", "kind": "Secret"}) is None


# ----------------------------------------------------------------- membership


def test_membership_from_the_pod_field_or_the_label() -> None:
    upstream = parse_pod(member("p", "pg", namespace="ns"))
    assert upstream.pod_group_name == "pg"
    assert group_of(upstream) == GroupRef(POD_GROUP_KIND, "ns", "pg")
    plugins = parse_pod(labelled("p", "ray", namespace="ml"))
    assert group_of(plugins) == GroupRef(COSCHEDULING_KIND, "ml", "ray")
    both = member("p", "pg", labels={COSCHEDULING_LABEL: "ray"})
    assert group_of(parse_pod(both)) == GroupRef(POD_GROUP_KIND, "default", "pg")  # the pod's own field first
    assert group_of(parse_pod(pod("p"))) is None
    empty = pod("p")
    empty["spec"]["schedulingGroup"] = {}
    assert group_of(parse_pod(empty)) is None


@pytest.mark.parametrize("raw", [{"podGroupName": 3}, {"podGroupName": ""}, "pg"])
def test_a_malformed_scheduling_group_makes_the_pod_invalid(raw: Any) -> None:
    obj = pod("p")
    obj["spec"]["schedulingGroup"] = raw
    info = parse_pod(obj)
    assert info.error is not None and "spec.schedulingGroup" in info.error


def test_pending_by_group_keeps_queue_order() -> None:
    pods = [parse_pod(p) for p in (member("a", "g1"), pod("solo"), labelled("b", "g2"), member("c", "g1"))]
    groups = pending_by_group(pods)
    assert {ref.name: [p.name for p in members] for ref, members in groups.items()} == {"g1": ["a", "c"], "g2": ["b"]}


def test_scheduled_members_counts_bound_and_assumed_pods() -> None:
    state = cluster(nodes(2), [member("b1", "pg", node_name="n1"), labelled("b2", "pg", node_name="n2"),
                               member("b3", "other", node_name="n2")])
    ref = GroupRef(POD_GROUP_KIND, "default", "pg")
    assert scheduled_members(state, ref) == 1
    assert scheduled_members(state, GroupRef(COSCHEDULING_KIND, "default", "pg")) == 1
    state.assume(parse_pod(member("a", "pg")), "n2")
    assert scheduled_members(state, ref) == 2
    state.forget("default/a")
    state.remove_node("n1")
    assert scheduled_members(state, ref) == 0  # as the node's pods are uncounted
    state.upsert_node(parse_pod_node("n1"))
    assert state.tracker(ScheduledMembers).count(ref) == 1


def parse_pod_node(name: str) -> Any:
    from placer.engine.parsing import parse_node

    return parse_node(node(name))


# ----------------------------------------------------------------- waiting (kube's GangScheduling PreEnqueue)


def test_preenqueue_rows() -> None:
    """kube's TestGangSchedulingFlow, PreEnqueue: a non-gang pod and a basic group's pod go on; a
    gang's pod waits for its group, then for minCount pods of it."""
    state = cluster(nodes(1), groups=[pod_group("pg1", 3, namespace="ns1"), pod_group("pg2", 4, namespace="ns1"),
                                      pod_group("pg3", namespace="ns1")])
    assert group_of(parse_pod(pod("non-gang", namespace="ns1"))) is None
    basic = GroupRef(POD_GROUP_KIND, "ns1", "pg3")
    assert waiting_reason(lookup(state.catalog, basic), basic, 1) is None
    missing = GroupRef(POD_GROUP_KIND, "ns1", "absent")
    assert waiting_reason(lookup(state.catalog, missing), missing, 4) == (
        "waiting for pods's pod group \"absent\" to appear in scheduling queue")
    assert WAIT_FOR_GROUP.format(name="pg1") == 'waiting for pods\'s pod group "pg1" to appear in scheduling queue'
    gang = GroupRef(POD_GROUP_KIND, "ns1", "pg1")
    assert waiting_reason(lookup(state.catalog, gang), gang, 2) == (
        "waiting for minCount pods from a gang to appear in scheduling queue")
    assert waiting_reason(lookup(state.catalog, gang), gang, 3) is None


def test_waiting_pods_are_not_attempted() -> None:
    state = cluster(nodes(2), groups=[pod_group("pg", 3)])
    waiting = decide(state, [member("a", "pg"), member("b", "pg")])
    assert waiting.outcome is Outcome.WAITING and waiting.message == WAIT_FOR_QUORUM
    assert messages(waiting) == {"a": WAIT_FOR_QUORUM, "b": WAIT_FOR_QUORUM}
    assert waiting.condition is None and not state.pods  # nothing assumed, no condition written
    missing = decide(state, [member("a", "late")])
    assert missing.outcome is Outcome.WAITING and missing.message == WAIT_FOR_GROUP.format(name="late")


def test_bound_members_count_toward_the_quorum_wait() -> None:
    state = cluster(nodes(2), [member("b", "pg", node_name="n1")], groups=[pod_group("pg", 3)])
    decision = decide(state, [member("a", "pg"), member("c", "pg")])
    assert decision.outcome is Outcome.PLACED and decision.scheduled_before == 1


def test_scheduler_plugins_groups_wait_for_min_member() -> None:
    state = cluster(nodes(2), groups=[coscheduling_group("ray", 3)])
    assert decide(state, [labelled("a", "ray"), labelled("b", "ray")]).outcome is Outcome.WAITING
    placed = decide(state, [labelled(f"r{i}", "ray") for i in range(3)])
    assert placed.outcome is Outcome.PLACED and all(placed.decisions[i].node for i in range(3))


# ----------------------------------------------------------------- deciding a gang


def test_a_gang_that_fits_is_placed_and_assumed() -> None:
    state = cluster(nodes(3), groups=[pod_group("pg", 3)])
    decision = decide(state, [member(f"p{i}", "pg", cpu="3") for i in range(3)])
    assert decision.outcome is Outcome.PLACED and decision.placed and decision.now_placed
    assert sorted(nodes_of(decision).values()) == ["n1", "n2", "n3"]  # type: ignore[type-var]
    assert all(state.is_assumed(f"default/p{i}") for i in range(3))
    assert decision.condition == ("True", "Scheduled", "")


def test_a_gang_without_room_holds_nothing() -> None:
    """Room for two 3-cpu pods: a gang of three (minCount 3) is not placed, and nothing stays
    assumed; the pods that fitted read kube's gang message, the other its own nodes' reasons."""
    state = cluster(nodes(2), groups=[pod_group("pg", 3)])
    version = state.version
    decision = decide(state, [member(f"p{i}", "pg", cpu="3", created=f"2026-01-01T00:0{i}:00Z") for i in range(3)])
    assert decision.outcome is Outcome.UNSCHEDULABLE and not decision.placed and not decision.now_placed
    assert not state.pods and state.version > version
    assert messages(decision) == {
        "p0": MEMBER_UNSCHEDULABLE,
        "p1": MEMBER_UNSCHEDULABLE,
        "p2": "0/2 nodes are available: 2 Insufficient cpu.",
    }
    kube = f"pod group is unschedulable, {GANG_WAITING}, one or more plugins asked to wait and no plugin rejected pod"
    assert kube == MEMBER_UNSCHEDULABLE
    assert all(d.node is None and not d.top and not d.reservations for d in decision.decisions)
    # DefaultPreemption is on, but there is nothing of lower priority to evict
    assert decision.condition == ("False", "Unschedulable",
                                  f"{GROUP_UNSCHEDULABLE}, No preemption victims found for incoming preemptor")
    assert decision.decisions[2].full_message == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: No preemption victims found for incoming preemptor")


def test_without_preemption_the_group_message_is_kubes() -> None:
    state = cluster(nodes(2), groups=[pod_group("pg", 3)])
    decision = decide(state, [member(f"p{i}", "pg", cpu="3") for i in range(3)], NO_PREEMPTION)
    assert decision.condition == ("False", "Unschedulable", "pod group is unschedulable")
    assert all(d.post_filter_message is None for d in decision.decisions)


def test_pods_beyond_min_count_that_do_not_fit_stay_pending() -> None:
    state = cluster(nodes(3), groups=[pod_group("pg", 2)])
    decision = decide(state, [member(f"p{i}", "pg", cpu="3", created=f"2026-01-01T00:0{i}:00Z") for i in range(4)])
    assert decision.outcome is Outcome.PLACED
    assert [d.node is not None for d in decision.decisions] == [True, True, True, False]
    assert decision.decisions[3].message == "0/3 nodes are available: 3 Insufficient cpu."
    assert decision.decisions[3].preemption is None  # a gang's pod never preempts on its own
    assert len(state.pods) == 3


def test_kube_pod_group_algorithm_rows() -> None:
    """kube's TestPodGroupSchedulingAlgorithm, with real fits: all feasible -> placed; feasible but
    short of minCount -> unschedulable; one unschedulable while the others make the quorum ->
    placed, that one pending with its own status."""
    room = cluster(nodes(3), groups=[pod_group("pg", 3)])
    assert decide(room, [member(f"p{i}", "pg", cpu="2") for i in range(3)]).outcome is Outcome.PLACED
    short = cluster(nodes(3), groups=[pod_group("pg", 4)])
    assert decide(short, [member(f"p{i}", "pg", cpu="3") for i in range(4)]).outcome is Outcome.UNSCHEDULABLE
    one_bad = cluster(nodes(3), groups=[pod_group("pg", 2)])
    pods = [member("p1", "pg"), member("p2", "pg", cpu="64"), member("p3", "pg")]
    decision = decide(one_bad, pods)
    assert decision.outcome is Outcome.PLACED
    assert nodes_of(decision)["p2"] is None and nodes_of(decision)["p1"] and nodes_of(decision)["p3"]


def test_two_competing_gangs_one_whole_the_other_none() -> None:
    """Room for four 3-cpu pods and two gangs of three: pod by pod, the second gang would hold one
    node while it waits; decided as units, the first is placed whole and the second holds nothing."""
    state = cluster(nodes(4), groups=[pod_group("a", 3), pod_group("b", 3)])
    first = decide(state, [member(f"a{i}", "a", cpu="3") for i in range(3)])
    second = decide(state, [member(f"b{i}", "b", cpu="3") for i in range(3)])
    assert first.outcome is Outcome.PLACED and second.outcome is Outcome.UNSCHEDULABLE
    assert sorted(state.pods) == ["default/a0", "default/a1", "default/a2"]


def test_higher_priority_members_are_tried_first() -> None:
    state = cluster(nodes(1), groups=[pod_group("pg")])
    decision = decide(state, [member("low", "pg", cpu="3", created="2026-01-01T00:00:00Z"),
                              member("high", "pg", cpu="3", priority=10, created="2026-01-01T00:05:00Z")])
    assert [p.name for p in decision.pods] == ["high", "low"]
    assert nodes_of(decision) == {"high": "n1", "low": None}


def test_a_basic_group_is_placed_once_one_pod_fits() -> None:
    state = cluster(nodes(1), groups=[pod_group("pg")])
    decision = decide(state, [member(f"p{i}", "pg", cpu="3", created=f"2026-01-01T00:0{i}:00Z") for i in range(3)])
    assert decision.outcome is Outcome.PLACED
    assert nodes_of(decision) == {"p0": "n1", "p1": None, "p2": None}
    assert messages(decision)["p1"] == "0/1 nodes are available: 1 Insufficient cpu."
    none_fit = decide(cluster(nodes(1), groups=[pod_group("pg")]), [member("big", "pg", cpu="8")], NO_PREEMPTION)
    assert none_fit.outcome is Outcome.UNSCHEDULABLE
    assert none_fit.condition == ("False", "Unschedulable", "pod group is unschedulable")


def test_a_gang_already_placed_with_an_extra_that_does_not_fit() -> None:
    """minCount already bound, an extra pod without room: nothing new is placed (kube's group status
    is Unschedulable), but the group stays placed (its condition is never turned back to False)."""
    bound = [member("b0", "pg", cpu="4", node_name="n1"), member("b1", "pg", cpu="4", node_name="n2")]
    state = cluster(nodes(2), bound, groups=[pod_group("pg", 2)])
    decision = decide(state, [member("extra", "pg", cpu="4")], NO_PREEMPTION)
    assert decision.outcome is Outcome.UNSCHEDULABLE and decision.now_placed
    assert messages(decision) == {"extra": "0/2 nodes are available: 2 Insufficient cpu."}
    fits = decide(cluster(nodes(3), [member("b0", "pg", node_name="n1"), member("b1", "pg", node_name="n2")],
                          groups=[pod_group("pg", 2)]), [member("extra", "pg")])
    assert fits.outcome is Outcome.PLACED


def test_pods_naming_different_schedulers_are_an_error() -> None:
    state = cluster(nodes(2), groups=[pod_group("pg", 2)])
    decision = decide(state, [member("a", "pg", created="2026-01-01T00:00:00Z"),
                              member("b", "pg", scheduler="other", created="2026-01-01T00:01:00Z")])
    assert decision.outcome is Outcome.ERROR and decision.condition is None
    assert decision.message == ('all pods in a single pod group should have the same .spec.schedulerName set, '
                                'got: "other" and "placer"')
    assert not state.pods


def test_an_invalid_member_fails_with_its_error() -> None:
    state = cluster(nodes(2), groups=[pod_group("pg", 2)])
    bad = member("bad", "pg")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    decision = decide(state, [member("good", "pg"), bad])
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert messages(decision)["bad"].startswith("invalid pod default/bad: ")  # type: ignore[union-attr]


def test_a_placed_gang_can_be_forgotten_by_the_caller() -> None:
    """PLACED leaves the pods assumed, each decision with what the profile reserved, for the
    operator to bind; a failed binding is undone with Scheduler.forget."""
    state = cluster(nodes(2), groups=[pod_group("pg", 2)])
    infos = [parse_pod(member(f"p{i}", "pg")) for i in range(2)]
    scheduler = Scheduler()
    decision = decide_group(scheduler, DEFAULT, state, group_of(infos[0]), infos)  # type: ignore[arg-type]
    for info, d in zip(decision.pods, decision.decisions, strict=True):
        scheduler.forget(info, d, DEFAULT, state)
    assert not state.pods


# ----------------------------------------------------------------- preemption for the gang as a whole


def running(name: str, node_name: str, cpu: str = "2", *, priority: int = 0, started: str = "2026-01-01T00:00:00Z",
            **kwargs: Any) -> Obj:
    obj = pod(name, cpu, node_name=node_name, priority=priority, **kwargs)
    obj["status"]["startTime"] = started
    return obj


def test_a_gang_preempts_as_a_whole() -> None:
    """Three 4-cpu nodes full of priority-0 pods, a fourth with a priority-1000 pod: a gang of three
    4-cpu pods (priority 100) evicts exactly what three whole nodes need; nothing is assumed."""
    bound = [running(f"f{i}", f"n{(i // 2) + 1}", started=f"2026-01-01T00:0{i}:00Z") for i in range(6)]
    bound += [running("vip", "n4", priority=1000), running("f6", "n4")]
    state = cluster(nodes(4), bound, groups=[pod_group("pg", 3, priority=100)])
    before = dict(state.pods)
    decision = decide(state, [member(f"g{i}", "pg", cpu="4", priority=100, created=f"2026-01-01T01:0{i}:00Z")
                              for i in range(3)])
    assert decision.outcome is Outcome.PREEMPTING and not decision.placed
    assert sorted(v.name for v in decision.victims) == [f"f{i}" for i in range(6)]
    assert state.pods == before  # the caller evicts, then the pods go where their decisions say
    assert nodes_of(decision) == {"g0": "n1", "g1": "n2", "g2": "n3"}
    for d in decision.decisions:
        assert d.preemption is not None and d.preemption.node == d.node
        assert {v.node_name for v in d.preemption.victims} == {d.node}
        assert d.message == "0/4 nodes are available: 4 Insufficient cpu."
    assert decision.condition == ("False", "Unschedulable", GROUP_UNSCHEDULABLE)


def test_gang_preemption_names_the_victims_where_they_are() -> None:
    """One pod fits as things are, the other only once the victim on n2 is gone: the first is a
    plain placement, the second carries the preemption and why it did not fit before."""
    state = cluster(nodes(2), [running("low", "n2", cpu="4")], [pod_group("pg", 2)])
    decision = decide(state, [member("g0", "pg", cpu="4", priority=10, created="2026-01-01T01:00:00Z"),
                              member("g1", "pg", cpu="4", priority=10, created="2026-01-01T01:01:00Z")])
    assert decision.outcome is Outcome.PREEMPTING and [v.name for v in decision.victims] == ["low"]
    first, second = decision.decisions
    assert (first.node, first.message, first.preemption) == ("n1", None, None)
    assert second.node == "n2" and second.message == "0/2 nodes are available: 2 Insufficient cpu."
    assert second.preemption is not None and [v.name for v in second.preemption.victims] == ["low"]


def test_gang_preemption_spares_budget_protected_victims_first() -> None:
    """Two priority-0 pods on the one node, room for the gang's pod once either is gone: kube
    gives back the victims whose PodDisruptionBudget would break first, so the protected one stays
    even though it started later (without the budget, the earlier one is spared)."""
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep"},
              "spec": {"selector": {"matchLabels": {"app": "keep"}}}, "status": {"disruptionsAllowed": 0}}
    bound = [running("early", "n1", started="2026-01-01T00:00:00Z"),
             running("protected", "n1", started="2026-01-01T00:10:00Z", labels={"app": "keep"})]
    gang = [member("g", "pg", cpu="2", priority=5)]
    with_budget = decide(cluster(nodes(1), bound, [pod_group("pg", 1)], objects=[budget]), gang)
    assert [v.name for v in with_budget.victims] == ["early"]
    without = decide(cluster(nodes(1), bound, [pod_group("pg", 1)]), gang)
    assert [v.name for v in without.victims] == ["protected"]


def test_gang_preemption_takes_a_podgroup_victim_whole() -> None:
    """A running gang whose PodGroup says disruptionMode PodGroup is preempted whole, even where one
    of its pods would do; with disruptionMode Pod only the pod in the way goes."""
    bound = [running("v0", "n1", cpu="4", labels={}), running("v1", "n2", cpu="4")]
    for obj in bound:
        obj["spec"]["schedulingGroup"] = {"podGroupName": "victims"}
    incoming = [member("g", "pg", cpu="4", priority=10)]
    whole = cluster(nodes(2), bound, [pod_group("pg", 1), pod_group("victims", 2, disruptionMode="PodGroup")])
    assert sorted(v.name for v in decide(whole, incoming).victims) == ["v0", "v1"]
    single = cluster(nodes(2), bound, [pod_group("pg", 1), pod_group("victims", 2)])
    assert [v.name for v in decide(single, incoming).victims] == ["v1"]


def test_gang_preemption_needs_lower_priority_victims() -> None:
    bound = [running("same", "n1", cpu="4", priority=10)]
    # the PodGroup's priority served (WorkloadAwarePreemption on): the pod's own PostFilter is kube's
    # DefaultPreemption declining for a pod of a group (its nomination kept); the group says why
    state = cluster(nodes(1), bound, [pod_group("pg", 1, priority=10)])
    decision = decide(state, [member("g", "pg", cpu="4", priority=10)])
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message == f"{GROUP_UNSCHEDULABLE}, No preemption victims found for incoming preemptor"
    assert decision.decisions[0].post_filter_message == WAP_ENABLED
    assert WAP_ENABLED == "preemption: not eligible due to workload aware preemption enabled"
    assert not decision.decisions[0].clears_nomination
    # not served (the gate off): the group's reason on each pod, as before
    gate_off = decide(cluster(nodes(1), bound, [pod_group("pg", 1)]), [member("g", "pg", cpu="4", priority=10)])
    assert gate_off.decisions[0].post_filter_message == "preemption: No preemption victims found for incoming preemptor"


def test_gang_priority_from_its_priority_class_else_its_lowest_pod() -> None:
    bound = [running("low", "n1", cpu="4", priority=5)]
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "hi"}, "value": 50}
    by_class = cluster(nodes(1), bound, [pod_group("pg", 2, priorityClassName="hi")], objects=[pc])
    pods = [member("g0", "pg", cpu="2", priority=1), member("g1", "pg", cpu="2", priority=100)]
    assert decide(by_class, pods).outcome is Outcome.PREEMPTING
    by_pods = cluster(nodes(1), bound, [pod_group("pg", 2)])
    assert decide(by_pods, pods).outcome is Outcome.UNSCHEDULABLE  # its lowest pod (1) is below the victim (5)


def test_gang_preemption_never_and_not_helpful() -> None:
    bound = [running("low", "n1", cpu="4")]
    never = member("g", "pg", cpu="4", priority=10)
    never["spec"]["preemptionPolicy"] = "Never"
    decision = decide(cluster(nodes(1), bound, [pod_group("pg", 1)]), [never])
    assert decision.decisions[0].post_filter_message == "preemption: not eligible due to preemptionPolicy=Never."
    assert not decision.decisions[0].clears_nomination
    group_never = decide(cluster(nodes(1), bound, [pod_group("pg", 1, api=V1BETA1, preemptionPolicy="Never")]),
                         [member("g", "pg", cpu="4", priority=10)])
    assert group_never.message == f"{GROUP_UNSCHEDULABLE}, not eligible due to preemptionPolicy=Never."
    huge = decide(cluster(nodes(2), bound, [pod_group("pg", 2)]),
                  [member("g0", "pg", cpu="4", priority=10), member("g1", "pg", cpu="8", priority=10)])
    assert huge.outcome is Outcome.UNSCHEDULABLE
    assert huge.message == f"{GROUP_UNSCHEDULABLE}, Preemption is not helpful for scheduling"
    assert not huge.victims


def test_no_preemption_without_default_preemption() -> None:
    bound = [running("low", "n1", cpu="4")]
    decision = decide(cluster(nodes(1), bound, [pod_group("pg", 1)]), [member("g", "pg", cpu="4", priority=10)],
                      NO_PREEMPTION)
    assert decision.outcome is Outcome.UNSCHEDULABLE and not decision.victims


# ----------------------------------------------------------------- the group's status condition


def group_info(obj: Obj) -> PodGroupInfo:
    kind = document_kind(obj)
    assert kind is not None
    return kind.parse(obj)  # type: ignore[no-any-return]


def outcome(state: str, message: str = "") -> GroupDecision:
    result = GroupDecision(GroupRef(POD_GROUP_KIND, "default", "pg"), None, Outcome[state])
    result.message = message
    return result


def test_condition_written_when_placed() -> None:
    group = group_info(pod_group("pg", 2))
    assert condition_update(group, outcome("PLACED"), "2026-01-01T00:00:00Z") == [{
        "type": "PodGroupScheduled", "status": "True", "reason": "Scheduled", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}]
    beta = group_info(pod_group("pg", 2, api=V1BETA1))
    assert condition_update(beta, outcome("PLACED"), "t")[0]["type"] == "PodGroupInitiallyScheduled"  # type: ignore[index]


def test_condition_never_goes_back_to_false() -> None:
    status = {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
                              "lastTransitionTime": "t0", "observedGeneration": 2}]}
    group = group_info(pod_group("pg", 2, status=status))
    assert condition_update(group, outcome("UNSCHEDULABLE", GROUP_UNSCHEDULABLE), "t1") is None
    assert condition_update(group, outcome("PLACED"), "t1") is None  # unchanged


def test_condition_false_then_true_moves_the_transition_time() -> None:
    status = {"conditions": [
        {"type": "Other", "status": "True", "reason": "X", "lastTransitionTime": "t"},
        {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable", "message": GROUP_UNSCHEDULABLE,
         "lastTransitionTime": "t0", "observedGeneration": 2},
    ]}
    group = group_info(pod_group("pg", 2, status=status))
    assert condition_update(group, outcome("UNSCHEDULABLE", GROUP_UNSCHEDULABLE), "t1") is None
    changed = condition_update(group, outcome("UNSCHEDULABLE", "pod group is unschedulable, x"), "t1")
    assert changed is not None and changed[1]["lastTransitionTime"] == "t0" and changed[0]["type"] == "Other"
    placed = condition_update(group, outcome("PLACED"), "t2")
    assert placed is not None and placed[1]["status"] == "True" and placed[1]["lastTransitionTime"] == "t2"


def test_no_condition_for_waiting_errors_or_scheduler_plugins_groups() -> None:
    group = group_info(pod_group("pg", 2))
    assert condition_update(group, outcome("WAITING"), "t") is None
    assert condition_update(group, outcome("ERROR", "x"), "t") is None
    assert condition_update(group_info(coscheduling_group("ray", 2)), outcome("PLACED"), "t") is None


def test_pod_info_default_has_no_group() -> None:
    assert PodInfo("ns", "p").pod_group_name == ""
