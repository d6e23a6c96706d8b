"""The scheduling loop against a fake API: assume before bind, forget on failure, no double binds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import placer.controller.scheduling.loop as loop_module
import pytest
from placer.controller.scheduling.loop import SchedulingLoop
from placer.controller.state import SchedulerState
from placer.controller.transport.client import BindOutcome, BindResult

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state, until

Running = tuple[SchedulerState, FakeKube, SchedulingLoop]


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    kube = FakeKube()
    state = unit_state(kube, max_binds_in_flight=4, initial_backoff=0.05, max_backoff=0.2)
    loop = state.loop
    task = asyncio.create_task(loop.run())
    workers = [asyncio.create_task(state.reporter.worker()) for _ in range(2)]
    state.profile_feed.upsert(profile("default", "placer"))
    state.may_schedule.set()
    yield state, kube, loop
    for job in (task, *workers):
        job.cancel()
    await asyncio.gather(task, *workers, return_exceptions=True)


async def test_assumes_before_binding_and_keeps_the_assumption_until_the_watch(running: Running) -> None:
    state, kube, _ = running
    seen: list[bool] = []

    def bind(key: str, node_name: str) -> BindOutcome:
        seen.append(state.cluster.is_assumed(key))
        return BindOutcome(BindResult.BOUND)

    kube.bind_result = bind
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("p1"))
    await until(lambda: kube.binds)
    assert seen == [True]
    await until(lambda: "default/p1" not in state.queue)
    assert state.cluster.is_assumed("default/p1")
    state.cache.observe_pod(pod("p1", node_name="n1"))  # the watch confirms
    assert not state.cluster.is_assumed("default/p1") and "default/p1" in state.cluster.pods
    await until(lambda: kube.events)
    assert kube.events[0]["reason"] == "Scheduled"


async def test_a_failed_bind_is_forgotten_and_retried(running: Running) -> None:
    state, kube, _ = running
    outcomes = iter([BindOutcome(BindResult.FAILED, "HTTP 500"), BindOutcome(BindResult.BOUND)])
    kube.bind_result = lambda key, node_name: next(outcomes)
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("p1"))
    await until(lambda: len(kube.binds) == 2)
    assert state.metrics.bindings.get(result="failed") == 1
    await until(lambda: state.metrics.bindings.get(result="bound") == 1)
    assert state.cluster.is_assumed("default/p1")  # the second attempt's assumption
    requested = int(state.cluster.requested[state.cluster.index["n1"], 0])
    assert requested == 100  # counted once, not twice


@pytest.mark.parametrize("result", [BindResult.CONFLICT, BindResult.GONE])
async def test_conflict_and_gone_drop_the_pod(running: Running, result: BindResult) -> None:
    state, kube, _ = running
    kube.bind_result = lambda key, node_name: BindOutcome(result, "already assigned")
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("p1"))
    await until(lambda: state.metrics.bindings.get(result=result.value) == 1)
    await asyncio.sleep(0.3)  # longer than the backoff: it must not come back
    assert kube.binds == [("default/p1", "n1")]
    assert "default/p1" not in state.queue and not state.cluster.is_assumed("default/p1")
    assert int(state.cluster.requested[state.cluster.index["n1"], 0]) == 0


async def test_no_double_bind_while_events_lag(running: Running) -> None:
    state, kube, _ = running
    release = asyncio.Event()

    async def slow(key: str, node_name: str) -> BindOutcome:
        await release.wait()
        return BindOutcome(BindResult.BOUND)

    kube.bind_result = slow
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("p1", rv=1))
    await until(lambda: kube.binds)
    state.cache.observe_pod(pod("p1", rv=2))  # e.g. a label change while the bind is in flight
    release.set()
    await until(lambda: "default/p1" not in state.queue)
    state.cache.observe_pod(pod("p1", rv=3))  # bound, but the watch still shows it unbound
    state.cache.observe_pod(pod("p1", rv=2))  # and a stale copy
    await asyncio.sleep(0.3)
    assert kube.binds == [("default/p1", "n1")]


async def test_a_node_is_never_overcommitted_while_the_watch_lags(running: Running) -> None:
    state, kube, _ = running
    state.cache.observe_node(node("n1", cpu="2"))
    for index in range(6):
        state.cache.observe_pod(pod(f"p{index}", cpu="1"))
    await until(lambda: len(kube.binds) == 2)
    await asyncio.sleep(0.3)  # no watch event ever confirms them: still only two fit
    assert len(kube.binds) == 2
    state.cache.observe_node(node("n2", cpu="2"))  # a new node wakes the waiting pods
    await until(lambda: len(kube.binds) == 4)
    assert sorted(n for _, n in kube.binds) == ["n1", "n1", "n2", "n2"]


async def test_binds_in_flight_are_bounded(running: Running) -> None:
    state, kube, loop = running
    release = asyncio.Event()

    async def slow(key: str, node_name: str) -> BindOutcome:
        await release.wait()
        return BindOutcome(BindResult.BOUND)

    kube.bind_result = slow
    state.cache.observe_node(node("n1", cpu="64"))
    for index in range(10):
        state.cache.observe_pod(pod(f"p{index}"))
    await until(lambda: len(kube.binds) == 4)
    await asyncio.sleep(0.1)
    assert len(kube.binds) == 4 and loop.binds_in_flight == 4
    release.set()
    await until(lambda: len(kube.binds) == 10)
    assert kube.max_in_flight == 4


async def test_unschedulable_backs_off_and_reports(running: Running) -> None:
    state, kube, _ = running
    state.cache.observe_node(node("n1", cpu="1"))
    state.cache.observe_pod(pod("big", cpu="2"))
    await until(lambda: kube.conditions and kube.events)
    assert kube.binds == []
    assert kube.events[0]["reason"] == "FailedScheduling"
    # the whole FitError, with the PostFilters' sentence when the profile has them (kube v1.36's words)
    note = kube.events[0]["note"]
    assert note in ("0/1 nodes are available: 1 Insufficient cpu.",
                    "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes "
                    "are available: 1 Preemption is not helpful for scheduling.")  # kube v1.36: 2 cpu never fit in 1
    assert kube.conditions[0][1]["status"]["conditions"][0]["message"] == note
    entry = state.queue.entry("default/big")
    assert entry is not None and entry.state in ("waiting", "in_flight", "active")
    assert state.metrics.attempts.get(result="unschedulable", profile="default") >= 1
    await asyncio.sleep(0.5)  # retried with backoff, yet one condition and one event
    assert state.metrics.attempts.get(result="unschedulable", profile="default") >= 2
    assert len(kube.conditions) == 1 and len(kube.events) == 1


async def test_a_malformed_pod_fails_without_crashing(running: Running) -> None:
    state, kube, _ = running
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("bad", cpu="lots"))
    state.cache.observe_pod(pod("good"))
    await until(lambda: kube.binds and kube.conditions)
    assert kube.binds == [("default/good", "n1")]
    assert "lots" in kube.conditions[0][1]["status"]["conditions"][0]["message"]
    assert state.metrics.attempts.get(result="error", profile="default") >= 1


async def test_pods_of_other_schedulers_are_left_alone(running: Running) -> None:
    state, kube, _ = running
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("theirs", scheduler="default-scheduler"))
    await asyncio.sleep(0.1)
    assert kube.binds == [] and "default/theirs" not in state.queue
    assert "default/theirs" in state.cache.pending["default-scheduler"]
    state.profile_feed.upsert(profile("late", "default-scheduler"))  # a profile takes the name over
    await until(lambda: kube.binds == [("default/theirs", "n1")])


async def test_nothing_is_scheduled_while_not_allowed(running: Running) -> None:
    state, kube, _ = running
    state.may_schedule.clear()
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("p1"))
    await asyncio.sleep(0.1)
    assert kube.binds == []
    state.may_schedule.set()
    await until(lambda: kube.binds)


async def test_a_profile_reload_applies_from_the_next_cycle(running: Running) -> None:
    state, kube, _ = running
    state.cache.observe_node(node("a"))
    state.cache.observe_node(node("b"))
    prefer = [{"name": "PreferNode", "weight": 100, "args": {"nodes": ["a"]}}]
    state.profile_feed.upsert(profile("default", "placer", generation=2, scores=prefer))
    state.cache.observe_pod(pod("p1"))
    await until(lambda: len(kube.binds) == 1)
    prefer = [{"name": "PreferNode", "weight": 100, "args": {"nodes": ["b"]}}]
    state.profile_feed.upsert(profile("default", "placer", generation=3, scores=prefer))
    state.cache.observe_pod(pod("p2"))
    await until(lambda: len(kube.binds) == 2)
    assert kube.binds == [("default/p1", "a"), ("default/p2", "b")]


async def test_pods_are_decided_back_to_back_once_binds_are_answered(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, kube, loop = running
    monkeypatch.setattr(loop_module, "YIELD_EVERY", 60.0)  # no yield for time: only for work, slots, answers
    decided: list[int] = []  # at each bind: how many pods are decided (assumed) so far

    def bind(key: str, node_name: str) -> BindOutcome:
        decided.append(sum(record.assumed for record in state.cluster.pods.values()))
        return BindOutcome(BindResult.BOUND)

    kube.bind_result = bind
    state.cache.observe_node(node("n1", cpu="8"))
    state.cache.observe_pod(pod("p0"))  # no bind answered yet: it goes out before anything else is decided
    await until(lambda: loop.binding.answering)
    for index in range(1, 4):
        state.cache.observe_pod(pod(f"p{index}"))
    await until(lambda: len(decided) == 4)
    assert decided == [1, 4, 4, 4]  # then decided back to back, their binds sent together
    monkeypatch.setattr(loop_module, "YIELD_EVERY", 0.0)  # a yield after every pod, as before a first answer
    for index in range(4, 7):
        state.cache.observe_pod(pod(f"p{index}"))
    await until(lambda: len(decided) == 7)
    assert decided[4:] == [5, 6, 7]
