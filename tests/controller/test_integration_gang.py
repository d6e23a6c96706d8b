"""Gang scheduling end to end: the real operator, in-process, over real HTTP against the emulator
playing a v1.36 API server with the `GenericWorkload` and `GangScheduling` gates on (its
`scheduling.k8s.io/v1alpha2` PodGroups), and scheduler-plugins' PodGroup CRD where a test installs
it. Every assertion is on what the API server holds: bindings, events, pod and PodGroup status.

Scenarios (issue 18's): quorum, a late PodGroup, not enough room (never a partial bind, then all
bound once room appears), extras beyond minCount, two competing gangs (one whole, the other none),
a basic policy group, the scheduler-plugins flavour (installed before and after the operator
started), and the group's condition."""

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
from tests.kubeemu.resources import scheduler_plugins_podgroup_crd

Obj = dict[str, Any]
NS = "default"
GANG_FILTERS = [{"name": "NodeResourcesFit"}, {"name": "GangScheduling"}]


@pytest_asyncio.fixture
async def kube_emulator() -> AsyncIterator[KubeEmulator]:
    """A v1.36 API server with gang scheduling switched on (overrides the plain emulator)."""
    async with KubeEmulator(gang_scheduling=True) as emu:
        yield emu


def podgroup(emu: KubeEmulator, name: str, min_count: int | None) -> Obj:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return emu.create("scheduling.k8s.io/v1alpha2/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS}, "spec": {"schedulingPolicy": policy}})


def member(emu: KubeEmulator, name: str, group: str, cpu: str = "1", scheduler: str = "gang") -> None:
    emu.add_pod(name, NS, cpu=cpu, scheduler_name=scheduler, spec={"schedulingGroup": {"podGroupName": group}})


def profile(emu: KubeEmulator, name: str = "gang", filters: list[Obj] | None = None) -> None:
    spec: Obj = {"schedulerName": name}
    if filters is not None:
        spec["filters"] = filters
    emu.create("sp", {"metadata": {"name": name}, "spec": spec})


def condition(emu: KubeEmulator, name: str, kind: str = "scheduling.k8s.io/v1alpha2/podgroups") -> Obj | None:
    found = emu.get(kind, name, NS) or {}
    return next((c for c in (found.get("status") or {}).get("conditions") or []
                 if c["type"] == "PodGroupScheduled"), None)


def pod_condition(emu: KubeEmulator, name: str) -> Obj | None:
    found = emu.get("pods", name, NS) or {}
    return next((c for c in (found.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)


def bound(emu: KubeEmulator, names: list[str]) -> list[str]:
    return [name for name in names if bound_node(emu, name) is not None]


async def settle(seconds: float = 1.5) -> None:
    """Time for the operator to act (and, where nothing must happen, to have had every chance to)."""
    await asyncio.sleep(seconds)


async def test_quorum_then_bound_together_and_the_group_scheduled(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    for i in range(3):
        emu.add_node(f"n{i}", cpu="2")
    profile(emu, filters=GANG_FILTERS)
    podgroup(emu, "mnist", 3)
    member(emu, "w0", "mnist")
    member(emu, "w1", "mnist")
    await launch()
    await settle()
    # short of minCount: the pods wait — not attempted, no event, no condition
    assert bound(emu, ["w0", "w1"]) == []
    assert events_about(emu, "w0") == [] and pod_condition(emu, "w0") is None
    assert condition(emu, "mnist") is None
    member(emu, "w2", "mnist")
    await until(lambda: len(bound(emu, ["w0", "w1", "w2"])) == 3, timeout=10)
    assert_sound(emu, ["w0", "w1", "w2"])
    scheduled = await until(lambda: condition(emu, "mnist"), timeout=10)
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
    # a v1.36.2 server sets no metadata.generation on PodGroups: no observedGeneration either
    assert "observedGeneration" not in scheduled


async def test_a_late_podgroup(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="8")
    profile(emu)
    for i in range(2):
        member(emu, f"late{i}", "late")
    operator = await launch()
    await settle()
    assert bound(emu, ["late0", "late1"]) == [] and events_about(emu, "late0") == []
    assert operator.state is not None and "default/late0" in operator.state.groups.held
    podgroup(emu, "late", 2)
    await until(lambda: len(bound(emu, ["late0", "late1"])) == 2, timeout=10)
    assert_sound(emu, ["late0", "late1"])


async def test_not_enough_room_binds_none_then_all_once_room_appears(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="2")
    profile(emu, filters=GANG_FILTERS)
    podgroup(emu, "big", 3)
    names = ["b0", "b1", "b2"]
    for name in names:
        member(emu, name, "big")
    await launch()
    await until(lambda: all(events_about(emu, n, "FailedScheduling") for n in names), timeout=10)
    assert bound(emu, names) == []  # never a partial gang
    notes = {n: events_about(emu, n, "FailedScheduling")[0]["note"] for n in names}
    fitted = ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, "
              "one or more plugins asked to wait and no plugin rejected pod")
    alone = ("0/1 nodes are available: 1 Insufficient cpu. "
             "preemption: No preemption victims found for incoming preemptor")
    assert sorted(notes.values()) == sorted([fitted, fitted, alone])
    await until(lambda: pod_condition(emu, "b0") is not None, timeout=10)
    assert pod_condition(emu, "b0")["reason"] == "Unschedulable"  # type: ignore[index]
    unschedulable = await until(lambda: condition(emu, "big"), timeout=10)
    assert (unschedulable["status"], unschedulable["reason"]) == ("False", "Unschedulable")
    assert unschedulable["message"] == (
        "pod group is unschedulable, No preemption victims found for incoming preemptor")
    await settle(1.0)
    assert bound(emu, names) == []
    emu.add_node("n2", cpu="2")
    await until(lambda: len(bound(emu, names)) == 3, timeout=15)
    assert_sound(emu, names)
    await until(lambda: (condition(emu, "big") or {}).get("status") == "True", timeout=10)


async def test_extras_beyond_min_count_stay_pending_while_the_rest_bind(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="3")
    profile(emu)
    podgroup(emu, "ray", 2)
    names = ["r0", "r1", "r2", "r3"]
    for name in names:
        member(emu, name, "ray")
    await launch()
    await until(lambda: len(bound(emu, names)) == 3, timeout=10)
    left = [n for n in names if bound_node(emu, n) is None]
    assert len(left) == 1
    failed = await until(lambda: events_about(emu, left[0], "FailedScheduling"), timeout=10)
    assert failed[0]["note"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert_sound(emu, [n for n in names if n not in left])
    assert (await until(lambda: condition(emu, "ray"), timeout=10))["status"] == "True"


async def test_two_competing_gangs_one_whole_the_other_none(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="2")
    emu.add_node("n2", cpu="2")
    profile(emu, filters=GANG_FILTERS)
    podgroup(emu, "a", 3)
    podgroup(emu, "b", 3)
    gangs = {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}
    for group, names in gangs.items():
        for name in names:
            member(emu, name, group)
    await launch()
    await until(lambda: any(len(bound(emu, names)) == 3 for names in gangs.values()), timeout=10)
    await settle()
    counts = sorted(len(bound(emu, names)) for names in gangs.values())
    assert counts == [0, 3]
    loser = next(g for g, names in gangs.items() if not bound(emu, names))
    await until(lambda: all(events_about(emu, n, "FailedScheduling") for n in gangs[loser]), timeout=10)
    assert (await until(lambda: condition(emu, loser), timeout=10))["status"] == "False"
    assert_sound(emu)


async def test_a_basic_group_is_scheduled_pod_by_pod_once_it_exists(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="2")
    profile(emu, filters=GANG_FILTERS)
    names = ["s0", "s1", "s2"]
    for name in names:
        member(emu, name, "spark")
    await launch()
    await settle()
    assert bound(emu, names) == [] and events_about(emu, "s0") == []
    podgroup(emu, "spark", None)
    await until(lambda: len(bound(emu, names)) == 2, timeout=10)
    left = next(n for n in names if bound_node(emu, n) is None)
    failed = await until(lambda: events_about(emu, left, "FailedScheduling"), timeout=10)
    assert failed[0]["note"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert (await until(lambda: condition(emu, "spark"), timeout=10))["status"] == "True"


def coscheduling_group(emu: KubeEmulator, name: str, min_member: int) -> Obj:
    return emu.create("scheduling.x-k8s.io/v1alpha1/podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 30}})


def labelled(emu: KubeEmulator, name: str, group: str, cpu: str = "1") -> None:
    emu.add_pod(name, NS, cpu=cpu, scheduler_name="gang", labels={"scheduling.x-k8s.io/pod-group": group})


async def test_the_scheduler_plugins_flavour(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.create("crd", scheduler_plugins_podgroup_crd())
    emu.add_node("n1", cpu="2")
    profile(emu, filters=GANG_FILTERS)
    coscheduling_group(emu, "mpi", 3)
    names = ["m0", "m1", "m2"]
    for name in names:
        labelled(emu, name, "mpi")
    await launch()
    # 2 cpus for 3 pods of a gang of 3: none bound
    await until(lambda: all(events_about(emu, n, "FailedScheduling") for n in names), timeout=10)
    assert bound(emu, names) == []
    emu.add_node("n2", cpu="2")
    await until(lambda: len(bound(emu, names)) == 3, timeout=15)
    assert_sound(emu, names)
    stored = emu.get("scheduling.x-k8s.io/v1alpha1/podgroups", "mpi", NS)
    assert "status" not in stored or not (stored["status"] or {}).get("conditions")  # its phase is not ours


async def test_no_podgroup_api_then_a_crd_installed_later(tmp_path: Path) -> None:
    """No scheduling.k8s.io PodGroups (the gates off) and no CRD: the operator runs, other pods bind,
    group pods wait; the CRD installed later is found by the next discovery."""
    async with KubeEmulator() as emu:
        emu.add_node("n1", cpu="4")
        profile(emu)
        labelled(emu, "m0", "mpi")
        labelled(emu, "m1", "mpi")
        emu.add_pod("solo", NS, cpu="1", scheduler_name="gang")
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        operator = await OperatorThread(operator_options(kubeconfig, group_discovery_interval=0.5)).start()
        try:
            await until(lambda: bound_node(emu, "solo") == "n1", timeout=10)
            state = operator.state
            assert state is not None
            assert state.group_kinds.kinds == ()
            await settle(1.0)
            assert bound(emu, ["m0", "m1"]) == [] and events_about(emu, "m0") == []
            emu.create("crd", scheduler_plugins_podgroup_crd())
            coscheduling_group(emu, "mpi", 2)
            await until(lambda: len(bound(emu, ["m0", "m1"])) == 2, timeout=15)
            assert [k.api_version for k in state.group_kinds.kinds] == ["scheduling.x-k8s.io/v1alpha1"]
            assert_sound(emu, ["solo", "m0", "m1"])
        finally:
            await operator.stop()


async def test_a_deleted_podgroup_makes_new_pods_wait(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="8")
    profile(emu)
    podgroup(emu, "g", 1)
    member(emu, "g0", "g")
    await launch()
    await until(lambda: bound_node(emu, "g0") == "n1", timeout=10)
    emu.delete("scheduling.k8s.io/v1alpha2/podgroups", "g", NS)
    # the server keeps it for its podgroup-protection finalizer: play that controller
    assert emu.get("scheduling.k8s.io/v1alpha2/podgroups", "g", NS)["metadata"]["finalizers"] == [
        "scheduling.k8s.io/podgroup-protection"]
    emu.patch("scheduling.k8s.io/v1alpha2/podgroups", "g", {"metadata": {"finalizers": None}}, NS)
    assert emu.get("scheduling.k8s.io/v1alpha2/podgroups", "g", NS) is None
    await settle(1.0)
    member(emu, "g1", "g")
    await settle()
    assert bound_node(emu, "g1") is None and events_about(emu, "g1") == []
    podgroup(emu, "g", 1)
    await until(lambda: bound_node(emu, "g1") == "n1", timeout=10)


async def test_a_gang_preempts_as_a_whole(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="2")
    emu.add_node("n2", cpu="2")
    for name, node in (("low0", "n1"), ("low1", "n1"), ("low2", "n2")):
        emu.add_pod(name, NS, cpu="1", node_name=node, priority=0)
    profile(emu)
    podgroup(emu, "train", 3)
    names = ["t0", "t1", "t2"]
    for name in names:
        emu.add_pod(name, NS, cpu="1", scheduler_name="gang", priority=100,
                    spec={"schedulingGroup": {"podGroupName": "train"}})
    await launch()
    await until(lambda: len(bound(emu, names)) == 3, timeout=15)
    evicted = [n for n in ("low0", "low1", "low2") if emu.get("pods", n, NS) is None]
    assert len(evicted) == 2  # room for three pods, for the whole gang: no more
    assert all(events_about(emu, n, "Preempted") for n in evicted)
    assert_sound(emu, names)
