"""Preemption end to end: the operator (default profile) against the emulator. A full cluster of
priority-0 pods, a PodDisruptionBudget over some of them, then pods of a priority-1000 class: each
ends bound, the victims are the ones kube's rules pick (PDB-covered pods spared while others
suffice, then the latest started), each victim gets its DisruptionTarget condition before it is
deleted and a Preempted event; nothing is ever overcommitted at any moment sampled (a preemptor is
bound only once its victims are gone). With graceful deletion, victims hold their room while
Terminating; a preemptor deleted while nominated frees the room it held."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tests.controller.helpers import OperatorThread, assert_sound, bound_node, events_about, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
PREEMPTING = "placer: preempting to accommodate a higher priority pod"


def started(seconds: int) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_pod(emu: KubeEmulator, name: str, node: str, start: int, labels: dict[str, str], cpu: str) -> None:
    """A priority-0 pod (admission gives it 0: no class, no global default) running on `node`."""
    emu.create("pods", {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": node, "containers": [
            {"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
        "status": {"phase": "Running", "startTime": started(start)},
    })


def default_profile(emu: KubeEmulator) -> None:
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


@contextlib.asynccontextmanager
async def sampling(emu: KubeEmulator) -> AsyncIterator[list[Any]]:
    """Audit the emulator's capacity every few milliseconds while the block runs; yields the
    violations seen (and asserts it sampled at all)."""
    seen: list[Any] = []
    samples = [0]

    async def sample() -> None:
        while True:
            violations = emu.audit_capacity()
            if violations:
                seen.append(violations)
            samples[0] += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(sample())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert samples[0] > 10


def ordered_condition_then_delete(emu: KubeEmulator, name: str) -> None:
    [patch] = emu.requests_matching("PATCH", rf"/namespaces/default/pods/{name}/status$")
    [delete] = emu.requests_matching("DELETE", rf"/namespaces/default/pods/{name}$")
    assert patch.status == 200 and delete.status == 200
    assert patch.started < delete.started, f"{name}: deleted before its DisruptionTarget condition"


def preempted_event(emu: KubeEmulator, victim: str) -> dict[str, Any]:
    [event] = events_about(emu, victim, "Preempted")
    assert event["type"] == "Normal" and event["action"] == "Preempting"
    assert event["reportingController"] == "placer.dev/scheduler"
    assert event["related"]["kind"] == "Pod"
    return event


async def test_a_full_cluster_preempts_the_pods_kubes_rules_pick_and_spares_the_budgeted_ones(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.pdb_controller = True
    # n1..n6: one `db` pod (under the budget) and three `batch` pods; n7: four `db` pods. 500m each
    # on 2 cpu: every node is full. The db pods started last everywhere (latest start = least
    # important), so only the budget keeps them from being the victims.
    for i in range(1, 8):
        emu.add_node(f"n{i}", cpu="2", memory="8Gi")
    for i in range(1, 7):
        running_pod(emu, f"batch-{i}-0", f"n{i}", i, {"app": "batch"}, "500m")
        running_pod(emu, f"batch-{i}-1", f"n{i}", 100 + i, {"app": "batch"}, "500m")
        running_pod(emu, f"batch-{i}-2", f"n{i}", 1000 + 10 * i, {"app": "batch"}, "500m")
        running_pod(emu, f"db-{i}", f"n{i}", 5000 + i, {"app": "db"}, "500m")
    for j in range(4):
        running_pod(emu, f"db-7-{j}", "n7", 6000 + j, {"app": "db"}, "500m")
    emu.add_pdb("db", selector={"app": "db"}, min_available=10)
    budget = emu.update_pdb_status("db")
    assert budget["status"]["disruptionsAllowed"] == 0 and budget["status"]["expectedPods"] == 10
    emu.add_priority_class("high", 1000)
    default_profile(emu)
    assert emu.audit_capacity() == []
    before = {pod["metadata"]["name"] for pod in emu.list("pods")}

    await launch()
    async with sampling(emu) as violations:
        preemptors = [f"hp-{k}" for k in range(5)]
        for name in preemptors:
            emu.add_pod(name, cpu="500m", memory="64Mi", scheduler_name="placer", priority_class="high")
        assert {emu.get("pods", name)["spec"]["priority"] for name in preemptors} == {1000}
        await until(lambda: all(bound_node(emu, name) for name in preemptors), timeout=30)
    assert violations == []
    assert_sound(emu, preemptors)
    await until(lambda: all(events_about(emu, name, "Scheduled") for name in preemptors), timeout=5)

    # kube's rules, for this shape: a node whose victims violate no budget first; there, the
    # lowest-priority then latest-started pod goes (the db pod is reprieved first, as budgeted). A node
    # already given to a preemptor costs a second victim (or an earlier-started one) and loses to a
    # fresh node: the five nodes whose latest batch pod started last give theirs, n1's is spared.
    gone = before - {pod["metadata"]["name"] for pod in emu.list("pods")}
    assert gone == {f"batch-{i}-2" for i in range(2, 7)}
    assert all(emu.get("pods", name) for name in before if name.startswith("db-"))
    assert sorted(bound_node(emu, name) for name in preemptors) == ["n2", "n3", "n4", "n5", "n6"]
    await until(lambda: all(events_about(emu, victim, "Preempted") for victim in gone))  # (the reporter's writer)
    for victim in sorted(gone):
        ordered_condition_then_delete(emu, victim)
        event = preempted_event(emu, victim)
        preemptor = event["related"]["name"]
        node = f"n{victim.split('-')[1]}"
        assert event["note"] == f"Preempted by default/{preemptor} on node {node}"
        assert bound_node(emu, preemptor) == node
    for name in preemptors:
        pod = emu.get("pods", name)
        # kube-scheduler leaves nominatedNodeName on the bound pod, and so does Placer; a v1.35+ API
        # server clears it on binding (ClearingNominatedNodeNameAfterBinding; v1.24 keeps it)
        assert "nominatedNodeName" not in pod["status"]
        first = events_about(emu, name, "FailedScheduling")[0]
        assert first["note"].startswith("0/7 nodes are available: ") and "preemption:" not in first["note"]


async def test_victims_hold_their_room_while_terminating_and_the_preemptor_binds_after(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.graceful_pod_deletion = True
    emu.add_node("n1", cpu="2", memory="8Gi")
    running_pod(emu, "a", "n1", 0, {}, "1")
    running_pod(emu, "b", "n1", 10, {}, "1")  # the later start: the victim
    emu.add_priority_class("high", 1000)
    default_profile(emu)
    await launch()
    async with sampling(emu) as violations:
        emu.add_pod("hp", cpu="1", memory="64Mi", scheduler_name="placer", priority_class="high")
        await until(lambda: (emu.get("pods", "b") or {}).get("metadata", {}).get("deletionTimestamp"), timeout=10)
        emu.add_pod("low", cpu="1", memory="64Mi", scheduler_name="placer")  # priority 0: may not take it
        victim = emu.get("pods", "b")
        assert victim is not None
        [target] = [c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == ("True", "PreemptionByScheduler", PREEMPTING)
        ordered_condition_then_delete(emu, "b")
        await until(lambda: emu.get("pods", "hp")["status"].get("nominatedNodeName") == "n1", timeout=5)
        await asyncio.sleep(2.5)  # retries meanwhile: b still holds its room
        assert bound_node(emu, "hp") is None and bound_node(emu, "low") is None
        notes = [e["note"] for e in events_about(emu, "hp", "FailedScheduling")]
        assert "preemption:" not in notes[0]
        assert all("preemption: not eligible due to a terminating pod on the nominated node" in note
                   for note in notes[1:])
        assert len(emu.requests_matching("DELETE", r"/pods/")) == 1  # not preempted twice
        emu.finish_deletion("default", "b")
        await until(lambda: bound_node(emu, "hp"), timeout=15)
        await asyncio.sleep(1.5)
    assert violations == []
    assert bound_node(emu, "hp") == "n1"
    assert bound_node(emu, "low") is None  # the room was held for hp
    assert emu.get("pods", "a") is not None
    await until(lambda: events_about(emu, "b", "Preempted"))
    assert preempted_event(emu, "b")["note"] == "Preempted by default/hp on node n1"
    assert_sound(emu, ["hp"])


async def test_a_preemptor_deleted_while_nominated_holds_no_room(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.graceful_pod_deletion = True
    emu.add_node("n1", cpu="2", memory="8Gi")
    running_pod(emu, "a", "n1", 0, {}, "1")
    running_pod(emu, "b", "n1", 10, {}, "1")
    emu.add_priority_class("high", 1000)
    default_profile(emu)
    await launch()
    async with sampling(emu) as violations:
        emu.add_pod("hp", cpu="1", memory="64Mi", scheduler_name="placer", priority_class="high")
        await until(lambda: (emu.get("pods", "hp") or {}).get("status", {}).get("nominatedNodeName"), timeout=10)
        await until(lambda: (emu.get("pods", "b") or {}).get("metadata", {}).get("deletionTimestamp"), timeout=10)
        emu.add_pod("low", cpu="1", memory="64Mi", scheduler_name="placer")
        await until(lambda: events_about(emu, "low", "FailedScheduling"), timeout=10)
        emu.delete("pods", "hp")  # pending: gone at once, and its nomination with it
        emu.finish_deletion("default", "b")
        await until(lambda: bound_node(emu, "low"), timeout=15)
    assert violations == []
    assert bound_node(emu, "low") == "n1"
    assert_sound(emu, ["low"])
