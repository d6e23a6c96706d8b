"""Placer as the cluster's scheduler takes kube-scheduler's own Lease (`kube-system/kube-scheduler`):
while kube-scheduler holds and renews it, Placer schedules nothing (its caches warm); when
kube-scheduler stops and releases it (client-go's ReleaseOnCancel: empty holder, 1 s), Placer takes
over at its next retry and binds the pods left pending; and back: Placer releases it on exit. The
test plays kube-scheduler's client-go elector on the Lease."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from placer.controller.lifecycle.leader import micro_time

from tests.controller.helpers import OperatorThread, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
LEASES = "coordination.k8s.io/v1/leases"
KUBE_SCHEDULER = "control-plane-1_0b6d3c4e-1a2b-4c3d-9e8f-123456789abc"  # hostname_uuid, as kube-scheduler's
AS_CLUSTER_SCHEDULER = {"leader_elect": True, "lease_namespace": "kube-system", "lease_name": "kube-scheduler",
                        "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.25}


def lease(emu: KubeEmulator) -> dict[str, Any]:
    return emu.get(LEASES, "kube-scheduler", "kube-system") or {}


def holder(emu: KubeEmulator) -> str:
    return str((lease(emu).get("spec") or {}).get("holderIdentity") or "")


def bound_to(emu: KubeEmulator, name: str) -> str | None:
    return ((emu.get("pods", name) or {}).get("spec") or {}).get("nodeName")


async def kube_scheduler_renews(emu: KubeEmulator, stop: asyncio.Event) -> None:
    """kube-scheduler leading: it renews every retry period (2 s in kube; faster here)."""
    now = micro_time()
    emu.create(LEASES, {"metadata": {"name": "kube-scheduler", "namespace": "kube-system"}, "spec": {
        "holderIdentity": KUBE_SCHEDULER, "leaseDurationSeconds": 15, "acquireTime": now, "renewTime": now,
        "leaseTransitions": 0}})
    while not stop.is_set():
        await asyncio.sleep(0.2)
        emu.patch(LEASES, "kube-scheduler", {"spec": {"renewTime": micro_time()}}, "kube-system")


def kube_scheduler_releases(emu: KubeEmulator) -> None:
    """client-go's release() on SIGTERM (ReleaseOnCancel): holder emptied, duration 1 s."""
    now = micro_time()
    emu.patch(LEASES, "kube-scheduler", {"spec": {"holderIdentity": "", "leaseDurationSeconds": 1,
                                                  "renewTime": now, "acquireTime": now}}, "kube-system")


async def test_placer_takes_kube_schedulers_lease_when_it_is_released_and_gives_it_back(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("n1", cpu="8")
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "default-scheduler"}})
    stop = asyncio.Event()
    renewing = asyncio.create_task(kube_scheduler_renews(emu, stop))
    try:
        await until(lambda: holder(emu) == KUBE_SCHEDULER)
        placer = await launch(identity="placer-1", **AS_CLUSTER_SCHEDULER)
        await until(lambda: placer.state is not None and placer.state.synced, timeout=10)
        emu.add_pod("before", scheduler_name="default-scheduler")
        await asyncio.sleep(1.5)  # several of Placer's retries: the Lease is kube-scheduler's
        assert bound_to(emu, "before") is None and holder(emu) == KUBE_SCHEDULER
        assert placer.state is not None and placer.state.metrics.leader.get() == 0
        stop.set()
        await renewing
        kube_scheduler_releases(emu)
        released = time.monotonic()
        emu.add_pod("during", scheduler_name="default-scheduler")
        await until(lambda: bound_to(emu, "before") and bound_to(emu, "during"), timeout=5)
        took = time.monotonic() - released
        assert holder(emu) == "placer-1"
        assert took < 2.0, f"pods bound {took:.2f} s after the release"
        assert (lease(emu)["spec"]["leaseTransitions"], lease(emu)["spec"]["leaseDurationSeconds"]) == (1, 2)
        # back to kube-scheduler: Placer stopping releases the Lease for it to take at once
        await placer.stop()
        assert holder(emu) == "" and lease(emu)["spec"]["leaseDurationSeconds"] == 1
    finally:
        stop.set()
        await renewing
    assert emu.double_bindings() == []
