"""Preemption in the operator against a fake API: the nomination held at once, displaced nominations
dropped, the task's writes in kube's order (nominatedNodeName, then per victim the DisruptionTarget
condition before the DELETE, then the Preempted event), victims already gone, failed deletes, and
nominations following the pods' status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from placer.controller.scheduling.loop import SchedulingLoop
from placer.controller.state import SchedulerState
from placer.engine.kinds import KINDS_BY_NAME

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state, until

Manual = tuple[SchedulerState, FakeKube, SchedulingLoop]
PREEMPTING = "placer: preempting to accommodate a higher priority pod"


def running(name: str, node_name: str, cpu: str, start: str, priority: int = 0, **extra: Any) -> dict[str, Any]:
    raw = pod(name, cpu=cpu, node_name=node_name, phase="Running", spec={"priority": priority}, **extra)
    raw["status"]["startTime"] = start
    return raw


def pending(name: str, cpu: str, priority: int, nominated: str = "", **extra: Any) -> dict[str, Any]:
    raw = pod(name, cpu=cpu, spec={"priority": priority, **extra.pop("spec", {})}, **extra)
    if nominated:
        raw["status"]["nominatedNodeName"] = nominated
    return raw


@pytest.fixture
async def manual() -> AsyncIterator[Manual]:
    """A state and a loop whose cycles the test runs itself (`decide`), with reporters running."""
    kube = FakeKube()
    state = unit_state(kube, initial_backoff=0.05, max_backoff=0.2)
    loop = state.loop
    workers = [asyncio.create_task(state.reporter.worker()) for _ in range(2)]
    state.profile_feed.upsert(profile("default", "placer"))
    state.may_schedule.set()
    yield state, kube, loop
    jobs = [*workers, *loop.preemptions.tasks]
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)


async def decide(state: SchedulerState, loop: SchedulingLoop, key: str) -> None:
    """One scheduling cycle of this pod, now (whatever its backoff), as the loop runs it."""
    state.queue.retry_now(key)
    popped = state.queue.pop()
    assert popped is not None and popped.key == key, popped
    await loop._slots.acquire()
    if not loop.cycle(popped):
        loop._slots.release()


async def settle(loop: SchedulingLoop) -> None:
    """Let the preemption tasks finish (and the reporters post what they queued)."""
    async with asyncio.timeout(5):
        await asyncio.gather(*loop.preemptions.tasks)
    await asyncio.sleep(0.05)


def full_node(state: SchedulerState) -> None:
    """n1 (2 cpu) runs a (started first) and b, 1 cpu each, priority 0."""
    state.cache.observe_node(node("n1", cpu="2"))
    state.cache.observe_pod(running("a", "n1", "1", "2025-01-01T00:00:00Z"))
    state.cache.observe_pod(running("b", "n1", "1", "2025-01-01T01:00:00Z"))


def fits(state: SchedulerState, raw: dict[str, Any]) -> str | None:
    """Where the engine would put this pod now (nothing is changed)."""
    state.cache.observe_pod(raw)
    key = f"default/{raw['metadata']['name']}"
    state.queue.remove(key)  # decided here, not by the loop
    selected = state.profiles.active("placer")
    assert selected is not None
    decision = state.scheduler.schedule(state.cache.pending["placer"][key], selected, state.cluster)
    return decision.node


def events(kube: FakeKube, reason: str) -> list[dict[str, Any]]:
    return [event for event in kube.events if event["reason"] == reason]


async def test_the_preemptor_is_nominated_at_once_and_its_victim_evicted_in_order(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    # nominated in the cycle itself: the next decision already holds the room
    assert state.cluster.nominated["default/hp"].node == "n1"
    assert loop.preemptions.running("default/hp")
    await settle(loop)
    # b is the victim (the later start); a is spared
    status, condition, delete = kube.pod_writes
    assert status[:2] == ("status", "default/hp")
    assert status[2]["metadata"] == {"uid": "uid-hp"}
    assert status[2]["status"]["nominatedNodeName"] == "n1"
    [scheduled] = status[2]["status"]["conditions"]
    assert (scheduled["type"], scheduled["status"], scheduled["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert scheduled["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert condition[:2] == ("status", "default/b")
    assert condition[2]["metadata"] == {"uid": "uid-b"}
    [target] = condition[2]["status"]["conditions"]
    assert {k: target[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": PREEMPTING,
    }
    assert target["lastTransitionTime"]
    assert delete == ("delete", "default/b", "uid-b")
    # the events: the preemptor's FailedScheduling without a preemption sentence, Preempted on b
    [failed] = events(kube, "FailedScheduling")
    assert failed["note"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert failed["regarding"]["name"] == "hp"
    [preempted] = events(kube, "Preempted")
    assert preempted["type"] == "Normal" and preempted["action"] == "Preempting"
    assert preempted["note"] == "Preempted by default/hp on node n1"
    assert preempted["regarding"]["name"] == "b" and preempted["regarding"]["uid"] == "uid-b"
    assert preempted["related"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "hp",
                                    "uid": "uid-hp"}
    assert preempted["reportingController"] == "placer.dev/scheduler"
    assert preempted["reportingInstance"] == "placer-test"
    # the reporter wrote no second PodScheduled condition: the task's patch carried it
    assert [key for key, _ in kube.conditions] == ["default/hp", "default/b"]
    assert state.metrics.preemptions.get(profile="default") == 1
    assert state.metrics.preemption_victims.get(result="deleted") == 1
    assert kube.binds == []
    assert not state.nominations.writes and not loop.preemptions._locks  # nothing left behind

    # the victim goes: the preemptor is woken by it and binds to its nominated node
    entry = state.queue.entry("default/hp")
    assert entry is not None and entry.state == "waiting" and "Pod/Delete" in entry.wake_on
    state.cache.pod_deleted(running("b", "n1", "1", ""))
    await decide(state, loop, "default/hp")
    await until(lambda: kube.binds)
    assert kube.binds == [("default/hp", "n1")]
    assert "default/hp" not in state.cluster.nominated  # dropped when assumed


async def test_the_nomination_holds_the_room_against_pods_of_its_priority_or_lower(manual: Manual) -> None:
    state, _, loop = manual
    full_node(state)
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    await settle(loop)
    state.cache.pod_deleted(running("b", "n1", "1", ""))  # the room is free, but held for hp
    assert fits(state, pending("low", "1", 0)) is None
    assert fits(state, pending("equal", "1", 1000)) is None
    assert fits(state, pending("higher", "1", 2000)) == "n1"  # kube: a higher priority ignores it
    # a pending copy without nominatedNodeName (the condition write's echo) keeps it
    state.cache.observe_pod(pending("hp", "1", 1000))
    assert state.cluster.nominated["default/hp"].node == "n1"
    # the preemptor deleted: the room is anyone's
    state.cache.pod_deleted(pending("hp", "1", 1000))
    assert "default/hp" not in state.cluster.nominated
    assert fits(state, pending("low2", "1", 0)) == "n1"


async def test_lower_priority_nominations_to_the_node_are_displaced_and_cleared(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    state.cache.observe_pod(pending("mid", "1", 100))
    await decide(state, loop, "default/mid")
    await settle(loop)
    assert state.cluster.nominated["default/mid"].node == "n1"
    assert kube.deletes == [("default/b", "uid-b")]
    # b still shows (no watch event yet); a pod of higher priority needs the whole node
    state.cache.observe_pod(pending("top", "2", 1000))
    kube.pod_writes.clear()
    await decide(state, loop, "default/top")
    assert "default/mid" not in state.cluster.nominated
    assert state.cluster.nominated["default/top"].node == "n1"
    await settle(loop)
    clears = [w for w in kube.pod_writes if w[1] == "default/mid"]
    assert clears == [("status", "default/mid", {"metadata": {"uid": "uid-mid"},
                                                 "status": {"nominatedNodeName": None}})]
    nominations = [w for w in kube.pod_writes if w[1] == "default/top"]
    assert nominations[0][2]["status"]["nominatedNodeName"] == "n1"
    assert not state.nominations.writes
    assert sorted(key for key, _ in kube.deletes) == ["default/a", "default/b", "default/b"]


async def test_a_victim_already_gone_is_fine(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    kube.delete_status = lambda key: 404
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    await settle(loop)
    assert kube.deletes == [("default/b", "uid-b")]
    assert state.metrics.preemption_victims.get(result="gone") == 1
    assert state.metrics.api_errors.get(call="delete_pod") == 0
    assert len(events(kube, "Preempted")) == 1  # as kube: the event says why it went
    assert state.cluster.nominated["default/hp"].node == "n1"


async def test_a_recreated_victim_is_not_deleted(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    kube.delete_status = lambda key: 409  # the UID precondition: a pod of that name re-created
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    await settle(loop)
    assert state.metrics.preemption_victims.get(result="gone") == 1


async def test_a_failed_delete_leaves_the_nomination_and_the_preemptor_tries_again(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    kube.delete_status = lambda key: 403
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    await settle(loop)
    assert state.metrics.preemption_victims.get(result="failed") == 1
    assert state.metrics.api_errors.get(call="delete_pod") == 1
    assert events(kube, "Preempted") == []
    assert state.cluster.nominated["default/hp"].node == "n1"  # it stays
    # retried: b is still there and not terminating, so it is preempted again
    kube.delete_status = lambda key: 200
    await decide(state, loop, "default/hp")
    await settle(loop)
    assert kube.deletes == [("default/b", "uid-b"), ("default/b", "uid-b")]
    assert state.metrics.preemption_victims.get(result="deleted") == 1
    assert state.metrics.preemptions.get(profile="default") == 2


async def test_a_preemptor_gone_before_its_nomination_is_written_spares_its_victims(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    kube.condition_status = 404
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    await settle(loop)
    assert kube.deletes == []
    assert [w[1] for w in kube.pod_writes] == ["default/hp"]
    assert "default/hp" not in state.cluster.nominated
    assert state.metrics.preemption_victims.get(result="abandoned") == 1


async def test_a_preemptor_deleted_while_its_nomination_is_written_spares_the_victims(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    gate = asyncio.Event()
    original = kube.patch_pod_status

    async def slow(namespace: str, name: str, patch: Any) -> Any:
        if name == "hp":
            await gate.wait()
        return await original(namespace, name, patch)

    kube.patch_pod_status = slow  # type: ignore[method-assign]
    state.cache.observe_pod(pending("hp", "2", 1000))  # needs both a and b gone
    await decide(state, loop, "default/hp")
    await asyncio.sleep(0.01)
    state.cache.pod_deleted(pending("hp", "2", 1000))  # its nomination goes with it
    assert "default/hp" not in state.cluster.nominated
    gate.set()
    await settle(loop)
    assert [w[1] for w in kube.pod_writes] == ["default/hp"]  # no victim touched
    assert state.metrics.preemption_victims.get(result="abandoned") == 2


async def test_the_watch_does_not_undo_a_nomination_being_written(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    gate = asyncio.Event()
    original = kube.patch_pod_status

    async def slow(namespace: str, name: str, patch: Any) -> Any:
        await gate.wait()
        return await original(namespace, name, patch)

    kube.patch_pod_status = slow  # type: ignore[method-assign]
    state.cache.observe_pod(pending("hp", "1", 1000, nominated="n9"))  # an old nomination, elsewhere
    await decide(state, loop, "default/hp")
    assert state.cluster.nominated["default/hp"].node == "n1"
    state.cache.observe_pod(pending("hp", "1", 1000))  # someone clears it on the server meanwhile
    assert state.cluster.nominated["default/hp"].node == "n1"  # our write is on its way: it leads
    gate.set()
    await settle(loop)
    assert not state.nominations.writes
    state.cache.observe_pod(pending("hp", "1", 1000, nominated="n1"))  # the echo of our write
    assert state.cluster.nominated["default/hp"].node == "n1"


async def test_preemption_finding_nothing_clears_the_nomination(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    state.cache.observe_pod(pending("huge", "3", 1000, nominated="n1"))  # more than n1 has at all
    assert state.cluster.nominated["default/huge"].node == "n1"
    await decide(state, loop, "default/huge")
    assert "default/huge" not in state.cluster.nominated
    await settle(loop)
    assert ("status", "default/huge", {"metadata": {"uid": "uid-huge"},
                                       "status": {"nominatedNodeName": None}}) in kube.pod_writes
    [failed] = events(kube, "FailedScheduling")
    assert failed["note"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes")


async def test_a_pod_that_may_not_preempt_keeps_its_nomination(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    state.cache.observe_pod(pending("never", "1", 1000, nominated="n1", spec={"preemptionPolicy": "Never"}))
    await decide(state, loop, "default/never")
    await settle(loop)
    assert state.cluster.nominated["default/never"].node == "n1"
    assert kube.deletes == [] and not [w for w in kube.pod_writes if w[0] == "delete"]


async def test_a_preemptor_is_not_decided_again_while_its_victims_are_evicted(manual: Manual) -> None:
    state, kube, loop = manual
    full_node(state)
    gate = asyncio.Event()
    original = kube.delete_pod

    async def slow(namespace: str, name: str, uid: str) -> Any:
        await gate.wait()
        return await original(namespace, name, uid)

    kube.delete_pod = slow  # type: ignore[method-assign]
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    await asyncio.sleep(0.01)
    await decide(state, loop, "default/hp")  # popped again while the delete hangs: held back
    assert state.metrics.preemptions.get(profile="default") == 1
    gate.set()
    await settle(loop)
    entry = state.queue.entry("default/hp")
    assert entry is not None and entry.state == "active"  # retried once the task is over
    assert kube.deletes == [("default/b", "uid-b")]


async def test_losing_leadership_stops_the_evictions() -> None:
    kube = FakeKube()
    state = unit_state(kube, initial_backoff=0.05)
    lease = SimpleNamespace(is_leader=True)
    state.leader = lease  # type: ignore[assignment]
    loop = state.loop
    state.profile_feed.upsert(profile("default", "placer"))
    full_node(state)
    state.cache.observe_pod(pending("hp", "1", 1000))
    await decide(state, loop, "default/hp")
    lease.is_leader = False
    await asyncio.gather(*loop.preemptions.tasks)
    assert kube.pod_writes == []
    assert state.metrics.preemption_victims.get(result="abandoned") == 1


# ----------------------------------------------------------------- nominations follow the pods


def test_nominations_follow_the_pods_status() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_node(node("n2"))
    nominated = state.cluster.nominated
    # a pending pod seen nominated (by a previous leader) holds its node
    state.cache.observe_pod(pending("a", "1", 10, nominated="n1"))
    assert nominated["default/a"].node == "n1"
    # another copy that does not change it keeps it; a change of node is followed
    state.cache.observe_pod(pending("a", "1", 10, nominated="n1", labels={"x": "y"}))
    assert nominated["default/a"].node == "n1" and nominated["default/a"].pod.labels == {"x": "y"}
    state.cache.observe_pod(pending("a", "1", 10, nominated="n2"))
    assert nominated["default/a"].node == "n2"
    # cleared on the server: dropped
    state.cache.observe_pod(pending("a", "1", 10))
    assert "default/a" not in nominated
    # a nomination made here, whose write has not come back yet, survives copies without one
    a = state.cache.pending["placer"]["default/a"]
    state.cluster.nominate(a, "n1")
    state.cache.observe_pod(pending("a", "1", 10))
    assert nominated["default/a"].node == "n1"
    # bound (anywhere): dropped
    state.cache.observe_pod(pending("a", "1", 10, nominated="n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n2", spec={"priority": 10}))
    assert "default/a" not in nominated
    # deleted, or being deleted: dropped
    state.cache.observe_pod(pending("b", "1", 10, nominated="n1"))
    state.cache.pod_deleted(pending("b", "1", 10))
    assert "default/b" not in nominated
    state.cache.observe_pod(pending("c", "1", 10, nominated="n1"))
    deleting = pending("c", "1", 10, nominated="n1")
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    state.cache.observe_pod(deleting)
    assert "default/c" not in nominated
    # pods of a schedulerName no profile serves are not ours to hold room for...
    state.cache.observe_pod(pending("other", "1", 10, nominated="n1", scheduler="someone-else"))
    assert "default/other" not in nominated
    # ...until a profile serves it; and no longer when it stops
    state.profile_feed.upsert(profile("q", "someone-else"))
    assert nominated["default/other"].node == "n1"
    state.profile_feed.delete(profile("q", "someone-else"))
    assert "default/other" not in nominated


def test_a_new_term_rebuilds_the_nominations_from_the_pods_status() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pending("written", "1", 10, nominated="n1"))
    state.cache.observe_pod(pending("unwritten", "1", 10))
    state.cluster.nominate(state.cache.pending["placer"]["default/unwritten"], "n1")  # never reached the server
    state.nominations.rebuild(state.cache.pending, state.profiles.scheduler_names())
    assert set(state.cluster.nominated) == {"default/written"}


def test_a_nominated_pod_deleted_wakes_the_pods_it_held_room_from() -> None:
    state = unit_state(initial_backoff=0.0)
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pending("held", "1", 10, nominated="n1"))
    state.cache.observe_pod(pending("waiting", "1", 0))
    state.queue.pop()
    state.queue.pop()
    state.queue.backoff("default/waiting", frozenset({"Pod/Delete"}))
    state.queue.backoff("default/held")
    state.cache.pod_deleted(pending("held", "1", 10))
    popped = state.queue.pop()
    assert popped is not None and popped.key == "default/waiting"


# ----------------------------------------------------------------- priority


def priority_class(name: str, value: int, global_default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "resourceVersion": "1"}, "value": value, "globalDefault": global_default}


def test_a_pod_without_spec_priority_takes_its_priority_class_value() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.catalog_feeds[KINDS_BY_NAME["PriorityClass"].plural].upsert(priority_class("high", 1000))
    state.cache.observe_pod(pod("named", spec={"priorityClassName": "high"}))
    state.cache.observe_pod(pod("plain"))
    state.cache.observe_pod(pod("given", spec={"priorityClassName": "high", "priority": 7}))
    pending_pods = state.cache.pending["placer"]
    assert pending_pods["default/named"].priority == 1000
    assert pending_pods["default/plain"].priority == 0
    assert pending_pods["default/given"].priority == 7  # the API server's value stands
    state.catalog_feeds[KINDS_BY_NAME["PriorityClass"].plural].upsert(priority_class("base", 5, global_default=True))
    state.cache.observe_pod(pod("defaulted"))
    assert pending_pods["default/defaulted"].priority == 5
    state.cache.observe_pod(pod("missing", spec={"priorityClassName": "nope"}))
    missing = "invalid pod default/missing: no PriorityClass with name nope was found"
    assert pending_pods["default/missing"].error == missing
    # bound pods too (victims are chosen by priority)
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("bound", node_name="n1", spec={"priorityClassName": "high"}))
    assert state.cluster.pods["default/bound"].pod.priority == 1000


def test_metrics_text_has_the_preemption_counters() -> None:
    state = unit_state()
    state.metrics.preemptions.inc(profile="default")
    state.metrics.preemption_victims.inc(result="deleted")
    text = state.metrics.render()
    assert 'placer_preemptions_total{profile="default"} 1' in text
    assert 'placer_preemption_victims_total{result="deleted"} 1' in text
