"""Crash safety: a leader killed (no cleanup at all) while binds are in flight, a fresh instance
taking over, and what the emulator holds afterwards: every pod bound exactly once, no node over
its allocatable, including the pods the dead leader bound moments before it died (the bind landed,
its answer never came back) while the new leader's watch lags behind."""

from __future__ import annotations

import pytest

from tests.controller.helpers import Launch, SlowBindReplies, assert_sound, bound_node, crash, until
from tests.kubeemu import KubeEmulator

LEASE = {"leader_elect": True, "lease_duration": 1.0, "renew_deadline": 0.75, "retry_period": 0.2,
         "release_on_exit": False}
NODES, PER_NODE, PODS = 4, 20, 60


def holder(emu: KubeEmulator) -> str:
    lease = emu.get("coordination.k8s.io/v1/leases", "placer", "placer-system") or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


@pytest.mark.parametrize("restart", ["takeover", "restart"])
async def test_a_leader_killed_mid_bind_leaves_nothing_double_bound(
    kube_emulator: KubeEmulator, launch: Launch, restart: str
) -> None:
    """takeover: a warm follower takes over once the dead leader's Lease expires; restart: the
    only instance is killed and a fresh one starts (no leader election). Every watch lags 2 s
    behind, so the follower has heard of few of the dead leader's binds when it takes over."""
    emu = kube_emulator
    # 20 pods fill a node: one too many on a node shows in audit_capacity
    for index in range(NODES):
        emu.add_node(f"n{index}", cpu=str(PER_NODE // 2), memory="64Gi")
    # packing: a node believed emptier than it is gets more pods at once (spreading would hide it)
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer", "scores": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}})
    names = [f"p-{index:02d}" for index in range(PODS)]
    for name in names:
        emu.add_pod(name, scheduler_name="placer", cpu="500m")
    emu.watch_delay = 2.0  # every watch lags: what the leader binds, others hear of 2 s later
    # binds are slow to land, and slower to be answered: many in flight, some landed unanswered
    emu.inject("POST", r"/binding$", delay=0.1, count=None)
    SlowBindReplies(emu, 0.4)
    first = await launch(identity="first", max_binds_in_flight=16,
                         **(LEASE if restart == "takeover" else {"leader_elect": False}))
    if restart == "takeover":
        await until(lambda: holder(emu) == "first")
        second = await launch(identity="second", **LEASE)
    await until(lambda: len(emu.bindings) >= 20, timeout=10)
    await crash(first)  # binds it sent may still land after this (the server got them)
    assert len(emu.bindings) < len(names)  # it died with work left
    # first in the queue of whoever comes next: where they go shows what it believes is free
    urgent = [f"urgent-{index}" for index in range(5)]
    for name in urgent:
        emu.add_pod(name, scheduler_name="placer", cpu="500m", priority=1000)
    names += urgent
    if restart == "restart":
        second = await launch(identity="second", leader_elect=False)
    await until(lambda: all(bound_node(emu, name) for name in names), timeout=20)
    state = second.state
    assert state is not None
    await until(lambda: state.metrics.bindings.get(result="bound") > 0)  # the answers come late, too
    emu.watch_delay = 0.0
    assert_sound(emu, names)
