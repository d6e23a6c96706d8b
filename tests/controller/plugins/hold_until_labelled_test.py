"""HoldUntilLabelled in the engine alone: Permit allows a labelled pod, holds another in `waiting`
until its labelled version is seen, and the runtime rejects it when the wait times out."""

from __future__ import annotations

from placer.engine.cluster import ClusterState
from placer.engine.framework import PermitCode
from placer.engine.objects import PodInfo
from placer.engine.profile import compile_profile
from placer.engine.runtime import Scheduler, permit_message
from placer.plugins import REGISTRY
from placer.testing import cluster_of, node, pod, pod_info

from tests.controller.plugins.hold_until_labelled import HoldUntilLabelled

KEY = "placer.dev/release"


def held_pod(name: str, labels: dict[str, str] | None = None) -> PodInfo:
    raw = pod(name, "100m", labels=labels)
    raw["metadata"]["uid"] = f"uid-{name}"
    return pod_info(raw)


def setup(monkeypatch: object, timeout: float = 30.0) -> tuple[Scheduler, ClusterState, object]:
    monkeypatch.setitem(REGISTRY, HoldUntilLabelled.name, HoldUntilLabelled)  # type: ignore[attr-defined]
    profile = compile_profile("held", {"schedulerName": "held", "filters": [
        {"name": "NodeResourcesFit"}, {"name": "HoldUntilLabelled", "args": {"timeoutSeconds": timeout}}]})
    return Scheduler(), cluster_of([node("n1")]), profile


def place(scheduler: Scheduler, cluster: ClusterState, profile: object, pod: PodInfo) -> PermitCode:
    decision = scheduler.schedule(pod, profile, cluster)  # type: ignore[arg-type]
    assert decision.node == "n1"
    scheduler.assume(pod, decision, profile, cluster)  # type: ignore[arg-type]
    return scheduler.permit(pod, decision, profile, cluster).code  # type: ignore[arg-type]


def test_a_labelled_pod_is_allowed_at_once(monkeypatch: object) -> None:
    scheduler, cluster, profile = setup(monkeypatch)
    assert place(scheduler, cluster, profile, held_pod("p", {KEY: "yes"})) is PermitCode.ALLOW
    assert len(scheduler.waiting) == 0


def test_an_unlabelled_pod_waits_until_its_labelled_version_comes(monkeypatch: object) -> None:
    scheduler, cluster, profile = setup(monkeypatch)
    pod = held_pod("p")
    assert place(scheduler, cluster, profile, pod) is PermitCode.WAIT
    held = scheduler.waiting.get(pod.key)
    assert held is not None and held.pending == {"HoldUntilLabelled": 30.0} and not held.done
    assert cluster.is_assumed(pod.key)  # its room is held meanwhile
    scheduler.pod_updated(held_pod("other", {KEY: "x"}), cluster)  # another pod's label: no
    scheduler.pod_updated(held_pod("p", {"app": "web"}), cluster)  # another label: no
    assert not held.done
    scheduler.pod_updated(held_pod("p", {KEY: ""}), cluster)
    assert held.outcome is not None and held.outcome.allowed


def test_a_wait_that_times_out_is_rejected_with_kubes_message(monkeypatch: object) -> None:
    scheduler, cluster, profile = setup(monkeypatch, timeout=0.5)
    pod = held_pod("p")
    assert place(scheduler, cluster, profile, pod) is PermitCode.WAIT
    held = scheduler.waiting.get(pod.key)
    assert held is not None and held.time_out()
    assert held.outcome is not None and not held.outcome.allowed
    assert permit_message(held.outcome) == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 500ms at plugin HoldUntilLabelled.")
    assert scheduler.done_waiting(pod) is held and len(scheduler.waiting) == 0
    scheduler.pod_updated(held_pod("p", {KEY: "late"}), cluster)  # nobody holds it any more
    assert held.outcome.code is PermitCode.REJECT
