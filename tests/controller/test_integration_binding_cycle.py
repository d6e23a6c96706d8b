"""The binding cycle's plugin points end to end, against the emulator, with plugins that live in the
tests (`tests/controller/plugins/`, registered as any plugin package's) and no change to the
operator for them:

- a Permit (HoldUntilLabelled): a pod held on its node until its label appears (its own update event
  releases it), its room held meanwhile, rejected with kube's message when the wait times out, and
  dropped when deleted while it waits;
- a PreBind (StampNamespace): a write to an object of another kind, a wait until a third party
  answers through the watch, and on a timeout the write taken back (a JSON patch with a
  resourceVersion precondition) and the pod sent back to the queue with kube's PreBind message."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from placer.plugins import REGISTRY

from tests.controller.helpers import OperatorThread, assert_sound, bound_node, events_about, until
from tests.controller.plugins.hold_until_labelled import HoldUntilLabelled
from tests.controller.plugins.stamp_namespace import ACK, STAMP, StampNamespace
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
KEY = "placer.dev/release"
TIMED_OUT = "0/1 nodes are available: 1 rejected due to timeout after waiting 500ms at plugin HoldUntilLabelled."


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, HoldUntilLabelled.name, HoldUntilLabelled)
    monkeypatch.setitem(REGISTRY, StampNamespace.name, StampNamespace)


def held_profile(emu: KubeEmulator, name: str, timeout: float) -> None:
    emu.create("sp", {"metadata": {"name": name}, "spec": {
        "schedulerName": name, "postFilters": [],
        "filters": [{"name": "NodeResourcesFit"}, {"name": "HoldUntilLabelled", "args": {"timeoutSeconds": timeout}}],
    }})


def release(emu: KubeEmulator, name: str) -> None:
    emu.patch("pods", name, {"metadata": {"labels": {KEY: "yes"}}}, "default")


def scheduled_condition(emu: KubeEmulator, name: str) -> dict[str, Any] | None:
    found = emu.get("pods", name, "default") or {}
    return next((c for c in (found.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)


async def test_a_permit_plugin_holds_releases_rejects_and_drops_pods(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="1")
    held_profile(emu, "held", 30)
    held_profile(emu, "brief", 0.5)
    operator = await launch()
    state = operator.state
    assert state is not None
    waiting = state.scheduler.waiting

    # held on its node, not bound, while it has no label; its room is taken meanwhile
    emu.add_pod("a", cpu="600m", scheduler_name="held")
    await until(lambda: "default/a" in waiting, timeout=10)
    assert state.cluster.is_assumed("default/a")
    emu.add_pod("b", cpu="600m", scheduler_name="held", labels={KEY: "yes"})
    await until(lambda: events_about(emu, "b", "FailedScheduling"), timeout=10)
    assert events_about(emu, "b", "FailedScheduling")[0]["note"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert bound_node(emu, "a") is None

    # its own update event (the label) releases it
    release(emu, "a")
    await until(lambda: bound_node(emu, "a") == "n1", timeout=10)
    scheduled = await until(lambda: events_about(emu, "a", "Scheduled"), timeout=10)
    assert [e["note"] for e in scheduled] == ["Successfully assigned default/a to n1"]
    assert "default/a" not in waiting
    emu.delete("pods", "b", "default")

    # a wait that times out: unschedulable with kube's message, its room free; labelled, it goes
    emu.add_pod("c", cpu="300m", scheduler_name="brief")
    await until(lambda: events_about(emu, "c", "FailedScheduling"), timeout=10)
    assert [e["note"] for e in events_about(emu, "c", "FailedScheduling")] == [TIMED_OUT]
    condition = await until(lambda: scheduled_condition(emu, "c"), timeout=10)
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", TIMED_OUT)
    assert not state.cluster.is_assumed("default/c") and "default/c" not in waiting
    release(emu, "c")
    await until(lambda: bound_node(emu, "c") == "n1", timeout=10)

    # deleted while it waits: dropped, its room free, never bound
    emu.add_pod("d", cpu="100m", scheduler_name="held")
    await until(lambda: "default/d" in waiting, timeout=10)
    emu.delete("pods", "d", "default")
    await until(lambda: "default/d" not in waiting and not state.cluster.is_assumed("default/d"), timeout=10)
    await asyncio.sleep(0.3)
    assert not any(record.key == "default/d" for record in emu.bindings)
    assert_sound(emu, ["a", "c"])


def namespace_labels(emu: KubeEmulator, name: str) -> dict[str, str]:
    found = emu.get("namespaces", name) or {}
    return dict((found.get("metadata") or {}).get("labels") or {})


async def test_a_pre_bind_plugin_writes_waits_for_an_answer_and_undoes_on_failure(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("namespaces", {"metadata": {"name": "team"}})
    emu.create("sp", {"metadata": {"name": "stamped"}, "spec": {
        "schedulerName": "stamped",
        "filters": [{"name": "NodeResourcesFit"}, {"name": "StampNamespace", "args": {"timeoutSeconds": 1}}],
    }})
    operator = await launch(initial_backoff=5.0, max_backoff=5.0)
    assert operator.state is not None

    # written, then bound only once the namespace says so
    emu.add_pod("s1", "team", scheduler_name="stamped")
    await until(lambda: namespace_labels(emu, "team").get(STAMP) == "n1", timeout=10)
    await asyncio.sleep(0.2)
    assert bound_node(emu, "s1", "team") is None
    emu.patch("namespaces", "team", {"metadata": {"labels": {ACK: "n1"}}})
    await until(lambda: bound_node(emu, "s1", "team") == "n1", timeout=10)
    assert namespace_labels(emu, "team").get(STAMP) == "n1"  # done: it stays

    # no answer in time: kube's PreBind failure, the stamp taken back, nothing left assumed
    emu.patch("namespaces", "team", {"metadata": {"labels": {ACK: None}}})
    await until(lambda: ACK not in namespace_labels(emu, "team"), timeout=10)
    emu.add_pod("s2", "team", scheduler_name="stamped")
    failed = await until(lambda: events_about(emu, "s2", "FailedScheduling"), timeout=10)
    assert failed[0]["note"] == (
        'running PreBind plugin "StampNamespace": namespace not acknowledged: timed out waiting for the condition')
    assert STAMP not in namespace_labels(emu, "team")
    patches = [r for r in emu.requests if r.method == "PATCH" and r.path == "/api/v1/namespaces/team"]
    assert len(patches) == 3  # s1's stamp; s2's, then its undo
    assert not operator.state.cluster.is_assumed("team/s2") and bound_node(emu, "s2", "team") is None
    assert_sound(emu, ["s1"], namespace="team")
