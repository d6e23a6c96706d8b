"""GangScheduling's Permit, kube v1.36's `TestGangSchedulingFlow` Permit rows (its PreEnqueue rows are
`groups.waiting_reason`'s, tests/engine/test_gang.py), plus the timeouts and Unreserve."""

from __future__ import annotations

from typing import Any

from placer.engine.cluster import ClusterState
from placer.engine.framework import PermitCode
from placer.engine.kinds import document_kind, upsert_object
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile, compile_profile
from placer.engine.runtime import Scheduler, permit_message
from placer.plugins.gang_scheduling import GangScheduling
from placer.testing import cluster_of, node, pod, pod_info

Obj = dict[str, Any]
PROFILE = compile_profile("gang", {"schedulerName": "placer", "filters": [
    {"name": "NodeResourcesFit"}, {"name": "GangScheduling"}]})


def upstream(name: str, min_count: int | None) -> Obj:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns1"}, "spec": {"schedulingPolicy": policy}}


def coscheduling(name: str, min_member: int, timeout: int | None = None) -> Obj:
    spec: Obj = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns1"}, "spec": spec}


def member(name: str, group: str | None = None, label: str | None = None) -> PodInfo:
    raw = pod(name, "100m", namespace="ns1", uid=name,
              labels={"scheduling.x-k8s.io/pod-group": label} if label else None)
    if group is not None:
        raw["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod_info(raw)


def setup(*groups: Obj) -> tuple[Scheduler, ClusterState]:
    cluster = cluster_of([node("n1", cpu="8")])
    for obj in groups:
        kind = document_kind(obj)
        assert kind is not None
        upsert_object(cluster.catalog, kind, obj)
    return Scheduler(), cluster


def place(scheduler: Scheduler, cluster: ClusterState, pod: PodInfo, profile: Profile = PROFILE) -> PermitCode:
    decision = scheduler.schedule(pod, profile, cluster)
    assert decision.node == "n1"
    scheduler.assume(pod, decision, profile, cluster)
    return scheduler.permit(pod, decision, profile, cluster).code


PG1, PG2, PG3 = upstream("pg1", 3), upstream("pg2", 4), upstream("pg3", None)


def test_a_pod_of_no_group_and_a_basic_groups_pod_are_allowed_at_once() -> None:
    scheduler, cluster = setup(PG1, PG2, PG3)
    assert place(scheduler, cluster, member("non-gang")) is PermitCode.ALLOW
    assert place(scheduler, cluster, member("basic-pod", "pg3")) is PermitCode.ALLOW
    assert len(scheduler.waiting) == 0


def test_a_gang_pod_waits_at_permit_until_the_quorum() -> None:
    """kube: "gang pod passes PreEnqueue, but waits at Permit" (2 of minCount 3 assumed)."""
    scheduler, cluster = setup(PG1, PG2)
    assert place(scheduler, cluster, member("p2", "pg1")) is PermitCode.WAIT
    assert place(scheduler, cluster, member("p4", "pg2")) is PermitCode.WAIT
    assert place(scheduler, cluster, member("p1", "pg1")) is PermitCode.WAIT
    held = scheduler.waiting.get("ns1/p1")
    assert held is not None and held.pending == {"GangScheduling": 300.0}
    assert cluster.is_assumed("ns1/p1")  # its room is held meanwhile


def test_the_final_gang_pod_allows_every_waiting_pod_of_its_gang() -> None:
    """kube: "final gang pod arrives at Permit and allows all waiting pods from a gang": p1, p2, p3
    go; p4 and p5 (another gang, short of its 4) still wait."""
    scheduler, cluster = setup(PG1, PG2)
    for name, group in (("p2", "pg1"), ("p4", "pg2"), ("p5", "pg2"), ("p1", "pg1")):
        assert place(scheduler, cluster, member(name, group)) is PermitCode.WAIT
    assert place(scheduler, cluster, member("p3", "pg1")) is PermitCode.ALLOW
    allowed = {w.pod.name for w in scheduler.waiting if w.outcome is not None and w.outcome.allowed}
    assert allowed == {"p1", "p2"}
    assert {w.pod.name for w in scheduler.waiting.waiting_on("GangScheduling")} == {"p4", "p5"}


def test_a_bound_member_counts_towards_the_quorum() -> None:
    scheduler, cluster = setup(upstream("pg1", 2))
    bound = pod("p0", "100m", namespace="ns1", node_name="n1", uid="p0")
    bound["spec"]["schedulingGroup"] = {"podGroupName": "pg1"}
    cluster.add_pod(pod_info(bound))
    assert place(scheduler, cluster, member("p1", "pg1")) is PermitCode.ALLOW


def test_a_rejected_member_rejects_the_rest_of_its_gang() -> None:
    """Unreserve of one member (its bind failed, it timed out): the others held are rejected, never
    left as a partial gang; another gang's pods stay held."""
    scheduler, cluster = setup(PG1, PG2)
    pods = [member("p1", "pg1"), member("p2", "pg1"), member("p4", "pg2")]
    for p in pods:
        assert place(scheduler, cluster, p) is PermitCode.WAIT
    first = scheduler.waiting.get("ns1/p1")
    assert first is not None and first.time_out()
    assert first.outcome is not None
    assert permit_message(first.outcome) == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 5m0s at plugin GangScheduling.")
    decision = scheduler.schedule(pods[0], PROFILE, cluster)
    decision.permit = first.outcome
    scheduler.unpermit(pods[0], decision, PROFILE, cluster)
    second = scheduler.waiting.get("ns1/p2")
    assert second is not None and second.outcome is not None and not second.outcome.allowed
    assert permit_message(second.outcome) == (
        "0/1 nodes are available: 1 waiting for minCount pods from a gang to be scheduled.")
    other = scheduler.waiting.get("ns1/p4")
    assert other is not None and other.outcome is None


def test_scheduler_plugins_groups_wait_their_schedule_timeout() -> None:
    scheduler, cluster = setup(coscheduling("mpi", 3, timeout=20), coscheduling("ray", 2))
    assert place(scheduler, cluster, member("a", label="mpi")) is PermitCode.WAIT
    assert place(scheduler, cluster, member("b", label="ray")) is PermitCode.WAIT
    assert scheduler.waiting.get("ns1/a").pending == {"GangScheduling": 20.0}  # type: ignore[union-attr]
    assert scheduler.waiting.get("ns1/b").pending == {"GangScheduling": 60.0}  # type: ignore[union-attr]
    assert place(scheduler, cluster, member("c", label="ray")) is PermitCode.ALLOW
    assert scheduler.waiting.get("ns1/b").outcome.allowed  # type: ignore[union-attr]


def test_a_pod_whose_group_is_gone_is_rejected() -> None:
    scheduler, cluster = setup()
    decision = scheduler.schedule(member("p1", "pg1"), PROFILE, cluster)
    scheduler.assume(member("p1", "pg1"), decision, PROFILE, cluster)
    permit = scheduler.permit(member("p1", "pg1"), decision, PROFILE, cluster)
    assert permit.code is PermitCode.REJECT
    assert permit_message(permit) == "0/1 nodes are available: 1 failed to get podGroup ns1/pg1."


def test_the_timeout_is_an_arg() -> None:
    profile = compile_profile("gang", {"schedulerName": "placer", "filters": [
        {"name": "GangScheduling", "args": {"permitTimeoutSeconds": 30}}]})
    scheduler, cluster = setup(PG1)
    assert place(scheduler, cluster, member("p1", "pg1"), profile) is PermitCode.WAIT
    assert scheduler.waiting.get("ns1/p1").pending == {"GangScheduling": 30.0}  # type: ignore[union-attr]
    assert isinstance(GangScheduling.Args(), GangScheduling.Args)
