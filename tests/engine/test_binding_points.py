"""The binding cycle's extension points in the engine (`placer.engine.framework`, `runtime`): which
plugins of a profile run at each point, Permit's verdicts and waits (kube's RunPermitPlugins and
waitingPod), Unreserve's order, PreBind's plans and PostBind's writes, and the data a plugin's
writes are made of (`ObjectRef`, `Write` with its preconditions)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    ALLOW,
    JSON_PATCH,
    STRATEGIC_MERGE_PATCH,
    FilterPlugin,
    NoArgs,
    ObjectRef,
    Permit,
    PermitCode,
    PermitPlugin,
    PostBindPlugin,
    PreBind,
    PreBindPlugin,
    ReservePlugin,
    ScorePlugin,
    WaitingPod,
    WaitingPods,
    Write,
    go_duration,
)
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.runtime import MAX_PERMIT_TIMEOUT, Scheduler, binding_points, permit_message
from placer.testing import cluster_of, node, pod, pod_info

CLAIM = ObjectRef("v1", "PersistentVolumeClaim", "persistentvolumeclaims", "data", "default")
SLICE = ObjectRef("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", "gpu", "team")


class Calls:
    log: ClassVar[list[str]] = []


class Holding(FilterPlugin[NoArgs], ReservePlugin[NoArgs], PreBindPlugin[NoArgs], PostBindPlugin[NoArgs]):
    """Admits every node; reserves, pre-binds (a write) and post-binds, saying so."""

    name: ClassVar[str] = "Holding"

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def reserve(self, pod: PodInfo, cluster: ClusterState, node: str) -> Any:
        Calls.log.append(f"reserve {self.name}")
        return f"{self.name} on {node}"

    def unreserve(self, pod: PodInfo, cluster: ClusterState, reservation: Any) -> None:
        Calls.log.append(f"unreserve {reservation}")

    def pre_bind(self, pod: PodInfo, cluster: ClusterState, node: str, reservation: Any) -> PreBind | None:
        return PreBind((Write(CLAIM, {"metadata": {"annotations": {"node": node}}}),))

    def post_bind(self, pod: PodInfo, cluster: ClusterState, node: str) -> list[Write]:
        return [Write(CLAIM, {"metadata": {"annotations": {"bound": node}}})]


class Second(Holding):
    name: ClassVar[str] = "Second"

    def pre_bind(self, pod: PodInfo, cluster: ClusterState, node: str, reservation: Any) -> PreBind | None:
        return PreBind()  # nothing to do: left out of the plans


class Gate(FilterPlugin[NoArgs], ScorePlugin[NoArgs], PermitPlugin[NoArgs]):
    """Answers Permit as the pod's label `permit` says: allow, reject, or wait N seconds."""

    name: ClassVar[str] = "Gate"

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        return np.zeros(len(slots), dtype=np.int64)

    def permit(self, pod: PodInfo, cluster: ClusterState, node: str, waiting: WaitingPods) -> Permit:
        answer = pod.labels.get(self.name, "allow")
        if answer == "allow":
            return ALLOW
        if answer == "reject":
            return Permit.reject(f"{self.name} says no")
        return Permit.wait(float(answer))

    def unpermit(self, pod: PodInfo, cluster: ClusterState, waiting: WaitingPods) -> None:
        Calls.log.append(f"unpermit {self.name}")


class Later(Gate):
    name: ClassVar[str] = "Later"


def make(filters: tuple[Any, ...], scores: tuple[Any, ...] = ()) -> Profile:
    return Profile("p", "placer", 0, filters, tuple((plugin, 1) for plugin in scores))


def placed(profile: Profile, labels: dict[str, str] | None = None) -> tuple[Scheduler, Any, PodInfo, ClusterState]:
    Calls.log.clear()
    cluster = cluster_of([node("n1")])
    scheduler = Scheduler()
    info = pod_info(pod("p", "100m", labels=labels))
    decision = scheduler.schedule(info, profile, cluster)
    assert decision.node == "n1"
    scheduler.assume(info, decision, profile, cluster)
    return scheduler, decision, info, cluster


def test_the_points_are_found_once_per_profile_in_profile_order() -> None:
    holding, second, gate = Holding(NoArgs()), Second(NoArgs()), Gate(NoArgs())
    profile = make((holding, second, gate), scores=(Gate(NoArgs()),))
    points = binding_points(profile)
    assert points.reserves == (holding, second) and points.pre_binds == (holding, second)
    assert points.permits == (gate,)  # the score list's Gate is the same plugin: its first instance counts
    assert binding_points(profile) is points


def test_reserve_in_order_unreserve_in_reverse() -> None:
    profile = make((Holding(NoArgs()), Second(NoArgs())))
    _, decision, info, cluster = placed(profile)
    assert decision.reservations == {"Holding": "Holding on n1", "Second": "Second on n1"}
    Scheduler.forget(info, decision, profile, cluster)
    assert Calls.log == ["reserve Holding", "reserve Second", "unreserve Second on n1", "unreserve Holding on n1"]
    assert decision.reservations == {} and not cluster.is_assumed(info.key)


@pytest.mark.parametrize(("labels", "code"), [
    ({}, PermitCode.ALLOW),
    ({"Gate": "reject", "Later": "5"}, PermitCode.REJECT),
    ({"Gate": "5", "Later": "reject"}, PermitCode.REJECT),  # a later rejection wins over a wait
    ({"Gate": "5", "Later": "9"}, PermitCode.WAIT),
])
def test_permit_first_rejection_wins_else_every_wait_holds_the_pod(labels: dict[str, str], code: PermitCode) -> None:
    profile = make((Gate(NoArgs()), Later(NoArgs())))
    scheduler, decision, info, cluster = placed(profile, labels)
    verdict = scheduler.permit(info, decision, profile, cluster)
    assert verdict.code is code and decision.permit is verdict
    held = scheduler.waiting.get(info.key)
    if code is PermitCode.REJECT:
        assert verdict.plugin == ("Gate" if labels["Gate"] == "reject" else "Later") and held is None
        assert permit_message(verdict) == f"0/1 nodes are available: 1 {verdict.plugin} says no."
    elif code is PermitCode.WAIT:
        assert held is not None and held.pending == {"Gate": 5.0, "Later": 9.0}
        held.allow("Gate")
        assert not held.done
        held.allow("Later")
        assert held.outcome is not None and held.outcome.allowed
    else:
        assert held is None


def test_a_wait_is_capped_at_15_minutes_and_times_out_on_the_earliest_plugin() -> None:
    profile = make((Gate(NoArgs()), Later(NoArgs())))
    scheduler, decision, info, cluster = placed(profile, {"Gate": "3600", "Later": "90"})
    scheduler.permit(info, decision, profile, cluster)
    held = scheduler.waiting.get(info.key)
    assert held is not None and held.pending == {"Gate": MAX_PERMIT_TIMEOUT, "Later": 90.0}
    assert held.deadline(100.0) == 190.0
    woken: list[bool] = []
    held.on_done = lambda: woken.append(True)
    assert held.time_out() and woken == [True]
    assert held.outcome is not None and held.outcome.message == (
        "rejected due to timeout after waiting 1m30s at plugin Later")
    assert not held.reject("Gate", "too late")  # decided once
    scheduler.unpermit(info, decision, profile, cluster)
    assert len(scheduler.waiting) == 0 and Calls.log == ["unpermit Later", "unpermit Gate"]


def test_a_deleted_or_preempted_waiting_pod_is_rejected() -> None:
    waiting = WaitingPods()
    gone, victim = WaitingPod(pod_info(pod("a")), "n1", {"Gate": 5}), WaitingPod(pod_info(pod("b")), "n1", {"Gate": 5})
    waiting.add(gone)
    waiting.add(victim)
    scheduler = Scheduler()
    scheduler.waiting = waiting
    scheduler.pod_deleted("default/a")
    assert gone.outcome is not None and gone.outcome.message == "removed" and not gone.outcome.error
    assert victim.preempt("DefaultPreemption", "preempted")
    assert victim.outcome is not None and permit_message(victim.outcome) == "waiting on permit for pod: preempted"
    assert [w.pod.key for w in waiting.waiting_on("Gate")] == []


def test_pre_bind_plans_skip_plugins_with_nothing_to_do_and_post_bind_collects_writes() -> None:
    profile = make((Holding(NoArgs()), Second(NoArgs())))
    scheduler, decision, info, cluster = placed(profile)
    [(plugin, plan)] = scheduler.pre_bind(info, decision, profile, cluster)
    assert plugin.name == "Holding" and plan.writes[0].patch == {"metadata": {"annotations": {"node": "n1"}}}
    writes = scheduler.post_bind(info, decision, profile, cluster)
    assert [(p.name, w.patch) for p, w in writes] == [
        ("Holding", {"metadata": {"annotations": {"bound": "n1"}}}),
        ("Second", {"metadata": {"annotations": {"bound": "n1"}}}),
    ]


def test_object_paths() -> None:
    assert CLAIM.path() == "/api/v1/namespaces/default/persistentvolumeclaims/data"
    assert SLICE.path("status") == "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/gpu/status"
    assert ObjectRef("v1", "PersistentVolume", "persistentvolumes", "pv1").path() == "/api/v1/persistentvolumes/pv1"
    assert str(SLICE) == "ResourceClaim team/gpu"


def test_writes_carry_their_preconditions() -> None:
    merge = Write(CLAIM, {"metadata": {"annotations": {"a": "b"}}}, resource_version="7", uid="u1")
    assert merge.body() == {"metadata": {"annotations": {"a": "b"}, "resourceVersion": "7", "uid": "u1"}}
    assert merge.patch == {"metadata": {"annotations": {"a": "b"}}}  # the plugin's patch is left alone
    assert merge.call == "patch_persistentvolumeclaim"
    status = Write(SLICE, {"status": {"reservedFor": []}}, subresource="status", resource_version="9")
    assert status.body() == {"status": {"reservedFor": []}, "metadata": {"resourceVersion": "9"}}
    assert status.call == "patch_resourceclaim_status"
    finalizer = Write(SLICE, [{"op": "add", "path": "/metadata/finalizers/-", "value": "x"}], JSON_PATCH,
                      resource_version="9", uid="u2")
    assert finalizer.body() == [
        {"op": "test", "path": "/metadata/uid", "value": "u2"},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "9"},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "x"},
    ]
    pod_status = Write(ObjectRef("v1", "Pod", "pods", "p", "default"), {"status": {}}, STRATEGIC_MERGE_PATCH,
                       subresource="status", uid="u3")
    assert pod_status.body() == {"status": {}, "metadata": {"uid": "u3"}} and pod_status.call == "patch_pod_status"
    delete = Write(ObjectRef("v1", "Pod", "pods", "p", "default"), delete=True, uid="u3")
    assert delete.body() == {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "u3"}}
    assert delete.call == "delete_pod"
    assert Write(CLAIM, {"a": 1}).body() == {"a": 1}
    created = Write(SLICE, {"metadata": {"name": "gpu"}, "spec": {}}, create=True)
    assert created.body() == {"metadata": {"name": "gpu"}, "spec": {}}  # the whole object, as POSTed
    assert created.call == "create_resourceclaim"
    assert SLICE.collection_path() == "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims"


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.5, "500ms"), (1.5, "1.5s"), (10, "10s"), (90, "1m30s"), (900, "15m0s"), (7200, "2h0m0s"),
    (0.0015, "1.5ms"), (2e-6, "2µs"),
])
def test_durations_print_as_go_prints_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
