"""Leader election against a fake Lease store, on looptime's fake clock (nothing sleeps for real)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from placer.controller.lifecycle.leader import LeaderElector
from placer.controller.transport.client import ApiError

from tests.controller.helpers import FakeLeaseStore

pytestmark = pytest.mark.looptime


def elector(store: FakeLeaseStore, identity: str, log: list[str] | None = None) -> LeaderElector:
    log = log if log is not None else []
    return LeaderElector(
        store, namespace="ns", name="placer", identity=identity,
        lease_duration=15, renew_deadline=10, retry_period=2,
        on_started_leading=lambda: log.append(f"{identity} started"),
        on_stopped_leading=lambda: log.append(f"{identity} stopped"),
    )


@pytest.fixture
async def spawn() -> AsyncIterator[Callable[[LeaderElector], asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []

    def start(candidate: LeaderElector) -> asyncio.Task[None]:
        task = asyncio.create_task(candidate.run())
        tasks.append(task)
        return task

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_acquires_a_missing_lease_and_renews_it(spawn) -> None:
    store = FakeLeaseStore()
    log: list[str] = []
    a = elector(store, "a", log)
    spawn(a)
    await asyncio.sleep(0.1)
    assert a.is_leader and store.holder() == "a" and log == ["a started"]
    lease = store.leases["ns", "placer"]
    assert lease["spec"]["leaseDurationSeconds"] == 15 and lease["spec"]["leaseTransitions"] == 0
    first_renew = lease["spec"]["renewTime"]
    await asyncio.sleep(60)
    assert a.is_leader and log == ["a started"]
    assert store.leases["ns", "placer"]["spec"]["renewTime"] != first_renew


async def test_a_follower_waits_while_the_leader_renews(spawn) -> None:
    store = FakeLeaseStore()
    a, b = elector(store, "a"), elector(store, "b")
    spawn(a)
    await asyncio.sleep(0.1)
    spawn(b)
    await asyncio.sleep(120)
    assert a.is_leader and not b.is_leader and store.holder() == "a"


async def test_takes_over_an_expired_lease(spawn) -> None:
    store = FakeLeaseStore()
    # a lease left behind by a crashed leader: nobody renews it any more
    await store.create_lease("ns", {"metadata": {"name": "placer", "namespace": "ns"}, "spec": {
        "holderIdentity": "crashed", "leaseDurationSeconds": 15, "renewTime": "2025-01-01T00:00:00.000000Z",
        "leaseTransitions": 3}})
    b = elector(store, "b")
    spawn(b)
    await asyncio.sleep(10)
    assert not b.is_leader  # seen unchanged for less than its duration
    await asyncio.sleep(10)
    assert b.is_leader and store.holder() == "b"
    assert store.leases["ns", "placer"]["spec"]["leaseTransitions"] == 4


async def test_stops_leading_when_it_cannot_renew_within_the_deadline(spawn, looptime) -> None:
    store = FakeLeaseStore()
    log: list[str] = []
    a = elector(store, "a", log)
    spawn(a)
    await asyncio.sleep(1)
    assert a.is_leader
    store.fail = ApiError(500, "etcd is down")
    lost_at = None
    for _ in range(200):
        await asyncio.sleep(0.1)
        if not a.is_leader:
            lost_at = float(looptime)
            break
    assert lost_at is not None and lost_at <= 1 + 2 + 10 + 0.2  # the last renewal + the renew deadline
    await asyncio.sleep(1)
    assert log == ["a started", "a stopped"]
    store.fail = None
    await asyncio.sleep(10)
    assert a.is_leader and log == ["a started", "a stopped", "a started"]


async def test_is_leader_turns_false_by_the_clock_while_a_renewal_hangs(spawn) -> None:
    store = FakeLeaseStore()
    a = elector(store, "a")
    spawn(a)
    await asyncio.sleep(1)
    hang = asyncio.Event()
    original = store.update_lease

    async def hanging(namespace: str, name: str, lease: dict) -> dict:
        await hang.wait()
        return await original(namespace, name, lease)

    store.update_lease = hanging  # type: ignore[method-assign]
    await asyncio.sleep(10.5)
    assert not a.is_leader
    hang.set()


async def test_release_lets_a_follower_take_over_at_once(spawn) -> None:
    store = FakeLeaseStore()
    log: list[str] = []
    a, b = elector(store, "a", log), elector(store, "b", log)
    task_a = spawn(a)
    await asyncio.sleep(0.1)
    spawn(b)
    await asyncio.sleep(5)
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
    await a.release()
    assert not a.is_leader
    spec = store.leases["ns", "placer"]["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    await asyncio.sleep(2.5)  # one retry period, not a whole lease duration
    assert b.is_leader and store.holder() == "b"
    assert log == ["a started", "a stopped", "b started"]


async def test_of_two_racing_candidates_only_one_wins() -> None:
    store = FakeLeaseStore()
    await store.create_lease("ns", {"metadata": {"name": "placer", "namespace": "ns"},
                                    "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}})
    original = store.get_lease

    async def slow_get(namespace: str, name: str) -> dict | None:
        lease = await original(namespace, name)
        await asyncio.sleep(0.01)  # both read the same resourceVersion before either writes
        return lease

    store.get_lease = slow_get  # type: ignore[method-assign]
    a, b = elector(store, "a"), elector(store, "b")
    results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert store.holder() == ("a" if results[0] else "b")


async def test_release_without_leadership_writes_nothing() -> None:
    store = FakeLeaseStore()
    b = elector(store, "b")
    await b.release()
    assert store.calls == 0


def test_invalid_timings_are_rejected() -> None:
    with pytest.raises(ValueError):
        LeaderElector(FakeLeaseStore(), namespace="ns", name="n", identity="i",
                      lease_duration=10, renew_deadline=10, retry_period=2)
