"""Several operators over time or side by side: restarts, leader election, takeover, a new term's LISTs."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from tests.controller.helpers import OperatorThread, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]

# short but consistent with client-go's rules (retry < renew deadline < lease duration)
LEASE = {"leader_elect": True, "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.25}


def holder(emu: KubeEmulator) -> str:
    lease = emu.get("coordination.k8s.io/v1/leases", "placer", "placer-system") or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def bound_to(emu: KubeEmulator, name: str) -> str | None:
    pod = emu.get("pods", name) or {}
    return (pod.get("spec") or {}).get("nodeName")


def reporters(emu: KubeEmulator, reason: str = "Scheduled") -> Counter[str]:
    return Counter(e["reportingInstance"] for e in emu.list("events.k8s.io/v1/events") if e["reason"] == reason)


def setup_cluster(emu: KubeEmulator, cpu: str = "2") -> None:
    emu.add_node("n1", cpu=cpu)
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


async def test_a_restart_binds_the_pods_left_pending_once(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    setup_cluster(emu)
    for index in range(2):
        emu.add_pod(f"early-{index}", scheduler_name="placer", cpu="500m")
    first = await launch(identity="first")
    await until(lambda: all(bound_to(emu, f"early-{i}") for i in range(2)))
    await first.stop()
    for index in range(3):  # only two more fit: the new operator must count the first two
        emu.add_pod(f"late-{index}", scheduler_name="placer", cpu="500m")
    await launch(identity="second")
    await until(lambda: sum(1 for i in range(3) if bound_to(emu, f"late-{i}")) == 2
                and reporters(emu, "FailedScheduling")["placer-second"] == 1)
    await asyncio.sleep(0.3)
    assert emu.audit_capacity() == [] and emu.double_bindings() == []
    assert all(count == 1 for count in emu.bind_attempts.values())
    assert reporters(emu) == Counter({"placer-first": 2, "placer-second": 2})


async def test_only_the_leader_binds_and_a_follower_takes_over_after_a_crash(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    setup_cluster(emu, cpu="16")
    a = await launch(identity="op-a", release_on_exit=False, **LEASE)
    await until(lambda: holder(emu) == "op-a")
    b = await launch(identity="op-b", **LEASE)
    for index in range(5):
        emu.add_pod(f"a-{index}", scheduler_name="placer")
    await until(lambda: all(bound_to(emu, f"a-{i}") for i in range(5)) and reporters(emu)["placer-op-a"] == 5)
    assert a.state is not None and b.state is not None
    assert a.state.metrics.leader.get() == 1 and b.state.metrics.leader.get() == 0
    assert b.state.metrics.bindings.values == {} and b.state.metrics.attempts.values == {}
    # the follower's caches are warm all the same
    await until(lambda: b.state is not None and all(f"default/a-{i}" in b.state.cluster.pods for i in range(5)))

    await a.kill()  # no cleanup: the Lease is left to expire
    killed = time.monotonic()
    assert holder(emu) == "op-a"
    for index in range(5):
        emu.add_pod(f"b-{index}", scheduler_name="placer")
    await until(lambda: holder(emu) == "op-b", timeout=10)
    took = time.monotonic() - killed
    assert 1.0 < took < 2.0 + 2.0  # it waited for the lease to expire, and not much longer
    await until(lambda: all(bound_to(emu, f"b-{i}") for i in range(5)))
    await until(lambda: reporters(emu)["placer-op-b"] == 5)
    assert reporters(emu) == Counter({"placer-op-a": 5, "placer-op-b": 5})
    assert emu.double_bindings() == [] and emu.audit_capacity() == []
    lease = emu.get("coordination.k8s.io/v1/leases", "placer", "placer-system")
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1


async def test_a_graceful_stop_hands_the_lease_over_at_once(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    setup_cluster(emu)
    a = await launch(identity="op-a", **{**LEASE, "lease_duration": 15.0, "renew_deadline": 10.0})
    await until(lambda: holder(emu) == "op-a")
    await launch(identity="op-b", **{**LEASE, "lease_duration": 15.0, "renew_deadline": 10.0})
    await asyncio.sleep(0.5)
    stopped = time.monotonic()
    await a.stop()
    await until(lambda: holder(emu) == "op-b", timeout=5)
    assert time.monotonic() - stopped < 3.0  # far less than the 15 s lease
    emu.add_pod("p1", scheduler_name="placer")
    await until(lambda: bound_to(emu, "p1"))
    await until(lambda: reporters(emu)["placer-op-b"] == 1)


async def test_a_new_leader_counts_binds_it_has_not_seen_yet(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    """Binds the old leader made just before it died reach the new one's watch late; the LISTs of its
    new term count them, so the node is not overcommitted."""
    emu = kube_emulator
    setup_cluster(emu, cpu="2")
    # a leader that is about to die: it holds a fresh lease and will never renew it
    emu.create("coordination.k8s.io/v1/leases", {
        "metadata": {"name": "placer", "namespace": "placer-system"},
        "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 2, "leaseTransitions": 0,
                 "renewTime": "2025-01-01T00:00:00.000000Z"}})
    for index in range(3):
        emu.add_pod(f"old-{index}", scheduler_name="placer", cpu="500m")
    b = await launch(identity="op-b", **LEASE)
    await until(lambda: b.state is not None and b.state.synced and all(
        f"default/old-{i}" in b.state.cache.pending.get("placer", {}) for i in range(3)))
    emu.watch_delay = 30.0  # from now on, b's watch shows nothing for a long while
    for index in range(3):
        emu.bind("default", f"old-{index}", "n1")  # the ghost's last binds: 1.5 of 2 cpu
    for index in range(2):  # only one of these fits
        emu.add_pod(f"new-{index}", scheduler_name="placer", cpu="500m")
    await until(lambda: holder(emu) == "op-b", timeout=10)

    def decided() -> int:
        bound = sum(1 for i in range(2) if bound_to(emu, f"new-{i}"))
        failed = sum(1 for e in emu.list("events.k8s.io/v1/events")
                     if e["reason"] == "FailedScheduling" and e["regarding"]["name"].startswith("new-"))
        return bound + failed

    await until(lambda: decided() >= 2)
    assert emu.audit_capacity() == [] and emu.double_bindings() == []
    assert sum(1 for i in range(2) if bound_to(emu, f"new-{i}")) == 1
    assert not any(emu.bind_attempts.get(f"default/old-{i}") for i in range(3))  # never tried
    emu.watch_delay = 0.0
