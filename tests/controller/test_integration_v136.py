"""The operator against a v1.36 API server (the emulator plays one), over real HTTP: scheduling gates
(the server's `SchedulingGated` condition left alone, a prompt binding once the last gate goes),
pod-level resources (`spec.resources`) and in-place resize (a bound pod counts the largest of its
spec, allocated and running resources), and the same operator against a v1.24 server, which drops
those fields."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.controller.helpers import (
    Launch,
    OperatorThread,
    assert_sound,
    bound_node,
    events_about,
    operator_options,
    until,
    watching,
)
from tests.kubeemu import KubeEmulator

GATED = ("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")


def profile(emu: KubeEmulator, scheduler: str = "placer") -> None:
    """The default profile (NodeResourcesFit and the rest) for `scheduler`."""
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": scheduler}})


def pod_scheduled(emu: KubeEmulator, name: str) -> tuple[str, ...] | None:
    """(type, status, reason, message) of the pod's PodScheduled condition."""
    pod = emu.get("pods", name) or {}
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return tuple(condition.get(k) or "" for k in ("type", "status", "reason", "message"))
    return None


def status_writes(emu: KubeEmulator, name: str) -> int:
    return len(emu.requests_matching("PATCH", rf"/pods/{name}/status$"))


async def test_a_gated_pod_keeps_scheduling_gated_then_is_bound_promptly(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    profile(emu)
    emu.add_pod("gated", scheduler_name="placer", scheduling_gates=["example.com/quota", "example.com/team"])
    assert pod_scheduled(emu, "gated") == GATED
    since = emu.get("pods", "gated")["status"]["conditions"][0]["lastTransitionTime"]
    await launch()
    await until(lambda: watching(emu), timeout=10)
    emu.add_pod("plain", scheduler_name="placer")  # the operator is at work meanwhile
    await until(lambda: bound_node(emu, "plain"), timeout=5)
    await asyncio.sleep(1.5)  # several loop turns, verify passes and backoffs
    # the server's condition is left as it is: no FailedScheduling, no Unschedulable, no bind
    assert pod_scheduled(emu, "gated") == GATED
    assert emu.get("pods", "gated")["status"]["conditions"][0]["lastTransitionTime"] == since
    assert events_about(emu, "gated") == [] and status_writes(emu, "gated") == 0
    assert emu.bind_attempts.get("default/gated", 0) == 0

    emu.remove_scheduling_gates("gated", gates=["example.com/quota"])  # one gate left: still waits
    await asyncio.sleep(1.0)
    assert bound_node(emu, "gated") is None and pod_scheduled(emu, "gated") == GATED
    assert events_about(emu, "gated") == [] and emu.bind_attempts.get("default/gated", 0) == 0

    opened = time.monotonic()
    emu.remove_scheduling_gates("gated")
    await until(lambda: bound_node(emu, "gated"), timeout=5)
    took = time.monotonic() - opened
    assert took < 2.0, f"bound {took:.2f} s after its last gate went"
    assert bound_node(emu, "gated") == "n1"
    assert pod_scheduled(emu, "gated")[:2] == ("PodScheduled", "True")
    await until(lambda: events_about(emu, "gated", "Scheduled"), timeout=5)
    assert [e["note"] for e in events_about(emu, "gated")] == ["Successfully assigned default/gated to n1"]
    assert emu.bind_attempts["default/gated"] == 1
    assert_sound(emu, ["gated", "plain"])


async def test_a_pod_whose_gates_go_but_does_not_fit_is_reported_then(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """Once ungated, a pod is Placer's like any other: the SchedulingGated condition gives way to
    Unschedulable and a FailedScheduling event."""
    emu = kube_emulator
    emu.add_node("n1", cpu="1")
    profile(emu)
    emu.add_pod("big", cpu="2", scheduler_name="placer", scheduling_gates=["wait"])
    await launch()
    await until(lambda: watching(emu), timeout=10)
    await asyncio.sleep(1.0)
    assert pod_scheduled(emu, "big") == GATED and events_about(emu, "big") == []
    emu.remove_scheduling_gates("big")
    await until(lambda: events_about(emu, "big", "FailedScheduling"), timeout=5)
    [event] = events_about(emu, "big", "FailedScheduling")
    assert event["note"].startswith("0/1 nodes are available: 1 Insufficient cpu."), event["note"]
    await until(lambda: (pod_scheduled(emu, "big") or ("",) * 3)[2] == "Unschedulable", timeout=5)
    assert pod_scheduled(emu, "big") == ("PodScheduled", "False", "Unschedulable", event["note"])
    assert bound_node(emu, "big") is None


async def test_a_gated_pod_that_is_deleted_is_forgotten(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="1")
    profile(emu)
    emu.add_pod("gone", cpu="500m", scheduler_name="placer", scheduling_gates=["wait"])
    operator = await launch()
    await until(lambda: watching(emu), timeout=10)
    await until(lambda: operator.state is not None and "default/gone" in operator.state.cache.gated, timeout=5)
    emu.delete("pods", "gone")
    await until(lambda: "default/gone" not in operator.state.cache.gated, timeout=5)
    emu.add_pod("gone", cpu="500m", scheduler_name="placer")  # re-created without gates
    await until(lambda: bound_node(emu, "gone"), timeout=5)
    assert_sound(emu, ["gone"])


async def test_pod_level_requests_keep_a_pod_off_a_node_without_room(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """`spec.resources.requests.cpu: "3"` and no container requests: not on a node with 2 cpu free
    (kube-scheduler v1.36's PodRequests); a bound pod's pod-level request fills its node."""
    emu = kube_emulator
    emu.add_node("small", cpu="2")
    profile(emu)
    emu.add_pod("pl", cpu=None, memory=None, scheduler_name="placer", pod_resources={"requests": {"cpu": "3"}})
    await launch()
    await until(lambda: events_about(emu, "pl", "FailedScheduling"), timeout=10)
    [event] = events_about(emu, "pl", "FailedScheduling")
    assert event["note"].startswith("0/1 nodes are available: 1 Insufficient cpu."), event["note"]
    assert bound_node(emu, "pl") is None
    emu.add_node("large", cpu="4")
    await until(lambda: bound_node(emu, "pl"), timeout=5)
    assert bound_node(emu, "pl") == "large"
    # `large` now holds 3 of its 4 cpu: with `small` cordoned, a 2-cpu pod has nowhere to go
    emu.patch("nodes", "small", {"spec": {"unschedulable": True}})
    emu.add_pod("two", cpu="2", scheduler_name="placer")
    await until(lambda: events_about(emu, "two", "FailedScheduling"), timeout=5)
    assert bound_node(emu, "two") is None
    assert_sound(emu, ["pl"])


async def test_a_resizing_pod_counts_its_larger_request(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """kube v1.36's determineEffectiveRequests: a bound pod whose resize is in progress counts the
    largest of its spec, allocated and running resources; once the kubelet reports the resize done,
    the room it freed is used."""
    emu = kube_emulator
    emu.add_node("n1", cpu="4")
    profile(emu)
    emu.add_pod("running", cpu="3", scheduler_name="placer", node_name="n1")
    # scaled down to 1 cpu: allocated 1, still running with 3 (PodResizeInProgress)
    emu.resize_pod("running", requests={"cpu": "1"}, state="InProgress")
    await launch()
    emu.add_pod("two", cpu="2", scheduler_name="placer")
    await until(lambda: events_about(emu, "two", "FailedScheduling"), timeout=10)
    [event] = events_about(emu, "two", "FailedScheduling")
    assert event["note"].startswith("0/1 nodes are available: 1 Insufficient cpu."), event["note"]
    assert bound_node(emu, "two") is None
    emu.resize_pod("running", requests={"cpu": "1"}, state="Done")  # the kubelet finished
    await until(lambda: bound_node(emu, "two"), timeout=5)
    assert_sound(emu, ["two"])


async def test_a_deferred_resize_counts_the_spec_and_an_infeasible_one_what_runs(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    emu.add_node("a", cpu="4")
    emu.add_node("b", cpu="4")
    profile(emu)
    emu.add_pod("up", cpu="1", scheduler_name="placer", node_name="a")
    emu.resize_pod("up", requests={"cpu": "3"}, state="Deferred")  # counts 3 (the spec)
    emu.add_pod("huge", cpu="1", scheduler_name="placer", node_name="b")
    emu.resize_pod("huge", requests={"cpu": "8"}, state="Infeasible")  # counts 1 (what runs)
    await launch()
    emu.add_pod("two", cpu="2", scheduler_name="placer")
    await until(lambda: bound_node(emu, "two"), timeout=10)
    assert bound_node(emu, "two") == "b"
    emu.add_pod("another", cpu="2", scheduler_name="placer")
    await until(lambda: events_about(emu, "another", "FailedScheduling"), timeout=5)
    assert bound_node(emu, "another") is None


@pytest_asyncio.fixture
async def old_server(tmp_path: Path) -> AsyncIterator[tuple[KubeEmulator, Path]]:
    async with KubeEmulator(kube_version="1.24") as emu:
        yield emu, emu.write_kubeconfig(tmp_path / "kubeconfig-124")


async def test_on_a_v124_server_the_new_fields_are_gone_and_placer_schedules_by_what_is_left(
    old_server: tuple[KubeEmulator, Path]
) -> None:
    """A v1.24 API server drops `spec.resources`, `spec.schedulingGates` and the resize status:
    the pod is scheduled by its container requests and at once, as kube-scheduler v1.24 would."""
    emu, kubeconfig = old_server
    emu.add_node("n1", cpu="2", declared_features=["RestartAllContainersOnContainerExits"])
    profile(emu)
    emu.add_pod("pl", cpu="500m", scheduler_name="placer", pod_resources={"requests": {"cpu": "3"}},
                scheduling_gates=["wait"])
    assert "resources" not in emu.get("pods", "pl")["spec"] and pod_scheduled(emu, "pl") is None
    operator = await OperatorThread(operator_options(kubeconfig)).start()
    try:
        await until(lambda: bound_node(emu, "pl"), timeout=10)
        assert bound_node(emu, "pl") == "n1"
        await until(lambda: events_about(emu, "pl", "Scheduled"), timeout=5)
        assert_sound(emu, ["pl"])
    finally:
        await operator.stop()
