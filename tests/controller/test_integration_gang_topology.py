"""A gang inside one rack, end to end: the real operator, in-process, over real HTTP against the
emulator playing a v1.36 API server with `GenericWorkload`, `GangScheduling` and
`TopologyAwareWorkloadScheduling` on (it keeps `spec.schedulingConstraints`). Every assertion is on
what the API server holds: bindings, events, PodGroup status.

The issue's scenario: racks of 4, 6 and 2 cpu, pods of 1 cpu — a gang of 5 with topology key
`rack` is bound whole in the 6-cpu rack, a sixth pod of the group stays in that rack, a gang of 7
that no rack fits binds none, then all 7 in the rack that grows. With the gate off the server drops
the field and the gang is placed as before, wherever its pods fit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from tests.controller.helpers import (
    Launch,
    OperatorThread,
    assert_sound,
    bound_node,
    events_about,
    operator_options,
    until,
)
from tests.kubeemu import KubeEmulator

Obj = dict[str, Any]
NS = "default"
RACK = "example.com/rack"
GATES = ("TopologyAwareWorkloadScheduling", "WorkloadAwarePreemption")


@pytest_asyncio.fixture
async def kube_emulator() -> AsyncIterator[KubeEmulator]:
    """A v1.36 API server with the gang and topology gates on (overrides the plain emulator)."""
    async with KubeEmulator(gang_scheduling=True, workload_gates=GATES) as emu:
        yield emu


def racks(emu: KubeEmulator) -> None:
    """rack-a: 4 cpu (a1, a2), rack-b: 6 cpu (b1, b2, b3), rack-c: 2 cpu (c1)."""
    for rack, names in {"rack-a": ["a1", "a2"], "rack-b": ["b1", "b2", "b3"], "rack-c": ["c1"]}.items():
        for name in names:
            emu.add_node(name, cpu="2", labels={RACK: rack})


def podgroup(emu: KubeEmulator, name: str, min_count: int) -> Obj:
    return emu.create("scheduling.k8s.io/v1alpha2/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                 "schedulingConstraints": {"topology": [{"key": RACK}]}}})


def member(emu: KubeEmulator, name: str, group: str) -> None:
    emu.add_pod(name, NS, cpu="1", scheduler_name="gang", spec={"schedulingGroup": {"podGroupName": group}})


def rack_of(emu: KubeEmulator, pod: str) -> str | None:
    node = bound_node(emu, pod)
    found = emu.get("nodes", node) if node else None
    return None if found is None else found["metadata"]["labels"].get(RACK)


def condition(emu: KubeEmulator, name: str) -> Obj | None:
    found = emu.get("scheduling.k8s.io/v1alpha2/podgroups", name, NS) or {}
    return next((c for c in (found.get("status") or {}).get("conditions") or []
                 if c["type"] == "PodGroupScheduled"), None)


async def test_a_gang_in_one_rack_a_sixth_pod_there_and_a_gang_no_rack_fits(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    racks(emu)
    emu.create("sp", {"metadata": {"name": "gang"}, "spec": {"schedulerName": "gang"}})  # the defaults
    stored = podgroup(emu, "train", 5)
    assert stored["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}  # the gate keeps it
    train = [f"w{i}" for i in range(5)]
    for name in train:
        member(emu, name, "train")
    await launch()
    await until(lambda: all(bound_node(emu, n) for n in train), timeout=15)
    assert {rack_of(emu, n) for n in train} == {"rack-b"}
    assert_sound(emu, train)
    scheduled = await until(lambda: condition(emu, "train"), timeout=10)
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")

    member(emu, "w5", "train")  # rack-a is empty, but the group's pods pin rack-b
    await until(lambda: bound_node(emu, "w5"), timeout=10)
    assert rack_of(emu, "w5") == "rack-b"

    podgroup(emu, "big", 7)
    big = [f"p{i}" for i in range(7)]
    for name in big:
        member(emu, name, "big")
    await until(lambda: all(events_about(emu, n, "FailedScheduling") for n in big), timeout=15)
    assert [n for n in big if bound_node(emu, n)] == []  # no rack holds 7: none bound
    failed = await until(lambda: condition(emu, "big"), timeout=10)
    assert (failed["status"], failed["reason"]) == ("False", "Unschedulable")
    assert failed["message"] == ("0/3 placements are available, first placement status: pod group is unschedulable, "
                                 "workload aware preemption is not supported for pod groups with scheduling "
                                 "constraints")
    await asyncio.sleep(1.0)
    assert [n for n in big if bound_node(emu, n)] == []
    emu.add_node("c2", cpu="6", labels={RACK: "rack-c"})  # rack-c grows to 8 cpu
    await until(lambda: all(bound_node(emu, n) for n in big), timeout=15)
    assert {rack_of(emu, n) for n in big} == {"rack-c"}
    assert_sound(emu, [*train, "w5", *big])


async def test_with_the_gate_off_the_field_is_dropped_and_the_gang_spreads(tmp_path: Path) -> None:
    async with KubeEmulator(gang_scheduling=True) as emu:
        racks(emu)
        emu.create("sp", {"metadata": {"name": "gang"}, "spec": {"schedulerName": "gang"}})
        stored = podgroup(emu, "train", 5)
        assert "schedulingConstraints" not in stored["spec"]
        train = [f"w{i}" for i in range(5)]
        for name in train:
            member(emu, name, "train")
        operator = await OperatorThread(operator_options(emu.write_kubeconfig(tmp_path / "kubeconfig"))).start()
        try:
            await until(lambda: all(bound_node(emu, n) for n in train), timeout=15)
            assert len({rack_of(emu, n) for n in train}) > 1
        finally:
            await operator.stop()
