"""Carrying out a PostFilter result: kube-scheduler's preemption executor (`prepareCandidate`) and
its nominator, for the operator (`placer simulate` evicts at once). Generic over the PostFilter
plugin: the engine's `Preemption` (a node, its victims, the nominations it displaces) is what any
plugin returns, and its writes are `Write`s carried out by `placer.controller.binding.effects`, as the
binding cycle's are.

When no node fits a pod and a PostFilter plugin finds a node where evicting lower-priority pods
makes room (`Decision.preemption`), the scheduling cycle (`SchedulingLoop.cycle`):

1. nominates the pod to that node in the cluster at once (`ClusterState.nominate`), so the very
   next decision already holds the node's room for it against pods of its priority or lower, and
   drops the nominations of lower-priority pods to that node (`Preemption.displaced`) — their
   `status.nominatedNodeName` is cleared on the server, as kube's `ClearNominatedNodeName`;
2. backs the pod off until a victim is gone (Pod/Delete is among the events that wake it) and posts
   its FailedScheduling event (kube's FitError, without a preemption sentence: preemption worked);
3. starts a task, off the scheduling loop and holding no bind slot, which writes in this order:
   - the preemptor's `status.nominatedNodeName` together with its `PodScheduled=False` condition
     (one strategic merge patch of pods/status, as kube's `updatePod`: a separate condition write
     with the resourceVersion as precondition would lose the race against it);
   - for each victim, concurrently: the `DisruptionTarget` condition (status "True", reason
     `PreemptionByScheduler`, message "<schedulerName>: preempting to accommodate a higher
     priority pod", kube's), then a DELETE with the victim's UID as precondition (the pod's own
     grace period applies: it holds its room until it is gone), then an events.k8s.io/v1 Event
     `Preempted` (Normal, action `Preempting`) "Preempted by NS/NAME on node NODE" on the victim,
     `related` to the preemptor. A victim still waiting on Permit is not deleted: its wait ends
     (kube's `Preempt`: it goes back to the queue) and the event says `(in kube-scheduler memory).`

A victim already gone (404, or 409: its UID precondition failed, a pod of that name was
re-created) is fine. A write that fails for good (after the client's retries) leaves the
nomination in place: the preemptor is retried with its backoff and preempts again if it still
has to. Before each victim the task checks that it still leads and that the preemptor is still
nominated to that node (not deleted, bound, or displaced by a higher-priority pod meanwhile);
otherwise the remaining victims are spared. Deleting victims is the one write Placer makes to pods
it does not schedule.

While the task runs, the preemptor is not decided again (kube's async preemption does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from placer.controller.binding.effects import Effects, Written
from placer.controller.binding.reporting import Reporter
from placer.controller.informers.nominations import Nominations
from placer.controller.metrics import Metrics
from placer.engine.cluster import ClusterState
from placer.engine.framework import STRATEGIC_MERGE_PATCH, ClusterEvent, ObjectRef, Preemption, Write
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Decision, Scheduler

__all__ = ["DISRUPTION_TARGET", "VICTIM_GONE", "Preemptions", "keeps_nomination", "pod_ref"]

logger = logging.getLogger("placer.preemption")

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# what wakes a preemptor: one of its victims gone (every filter preemption may help lists it too)
VICTIM_GONE = frozenset({ClusterEvent.POD_DELETE})


def keeps_nomination(decision: Decision) -> bool:
    """Whether an unschedulable decision leaves the pod's nomination (if any) in place: unless the
    PostFilter plugin's failure clears it (kube clears it when preemption finds no candidate, and
    leaves it when the pod may not preempt now: `PostFilterPlugin.clears_nomination`)."""
    return not decision.clears_nomination


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ref(pod: PodInfo) -> ObjectRef:
    return ObjectRef("v1", "Pod", "pods", pod.name, pod.namespace)


def _status_write(pod: PodInfo, status: dict[str, Any]) -> Write:
    """A strategic merge patch of pods/status that fails (422: metadata.uid is immutable) on a pod
    re-created under that name; a 404 (gone) is an answer, not an error."""
    return Write(pod_ref(pod), {"status": status}, STRATEGIC_MERGE_PATCH, subresource="status", uid=pod.uid,
                 tolerate=frozenset({404}))


class Preemptions:
    """The preemptions being carried out, and the writes of pods' `status.nominatedNodeName` (a
    preemptor's, one cleared, and a pod's expected node before PreBind: `expect`)."""

    def __init__(
        self, scheduler: Scheduler, cluster: ClusterState, queue: SchedulingQueue, *, effects: Effects,
        reporter: Reporter, nominations: Nominations, metrics: Metrics, wakeup: asyncio.Event,
        is_leader: Callable[[], bool],
    ) -> None:
        self.scheduler = scheduler
        self.cluster = cluster
        self.queue = queue
        self.effects = effects
        self.reporter = reporter
        self.nominations = nominations
        self.metrics = metrics
        self.wakeup = wakeup
        self.is_leader = is_leader
        self._running: dict[str, asyncio.Task[None]] = {}  # preemptor key -> its task
        self._clears: set[asyncio.Task[None]] = set()  # nominatedNodeName clears of other pods
        self._locks: dict[str, asyncio.Lock] = {}  # pod key -> one nominatedNodeName write at a time
        self._held_back: set[str] = set()  # preemptors popped while their preemption was under way

    def running(self, key: str) -> bool:
        """Whether the preemption of this pod is still being carried out."""
        return key in self._running

    def hold_back(self, key: str) -> None:
        """The pod was popped while its preemption is under way: it waits (a victim gone wakes it),
        and is retried when the task ends."""
        self._held_back.add(key)
        self.queue.backoff(key, VICTIM_GONE)

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return [*self._running.values(), *self._clears]

    # ----------------------------------------------------------------- from the scheduling cycle

    def begin(self, pod: PodInfo, profile: Profile, decision: Decision, message: str) -> None:
        """Nominate the pod, displace lower-priority nominations, and start the task that writes."""
        preemption = decision.preemption
        assert preemption is not None
        cluster = self.cluster
        cluster.nominate(pod, preemption.node)
        for key in preemption.displaced:
            held = cluster.nominated.get(key)
            if held is not None and cluster.unnominate(key):
                logger.debug("nomination of %s to %s displaced by %s", key, held.node, pod.key)
                self.clear(held.pod)
        self.metrics.preemptions.inc(profile=profile.name)
        logger.info("preempting %s on %s for %s", ", ".join(v.key for v in preemption.victims) or "nothing",
                    preemption.node, pod.key)
        release = self._claim(pod.key)
        task = asyncio.create_task(self._carry_out(pod, profile, preemption, message, release))
        self._running[pod.key] = task

        def done(_: asyncio.Task[None]) -> None:
            release()  # (a task cancelled before it ran never reached its own release)
            if self._running.get(pod.key) is task:
                del self._running[pod.key]
                if pod.key in self._held_back:
                    self._held_back.discard(pod.key)
                    self.queue.retry_now(pod.key)
                    self.wakeup.set()

        task.add_done_callback(done)

    async def expect(self, pod: PodInfo, node: str) -> None:
        """kube's NominatedNodeNameForExpectation (on since v1.35): a pod whose binding cycle has
        PreBind work (or waits on Permit) is nominated to its node first, so that others (the
        cluster autoscaler) know where it is about to go; best effort, awaited before PreBind."""
        release = self._claim(pod.key)
        async with self._writing(pod.key, release):
            if self.is_leader():
                await self._write(_status_write(pod, {"nominatedNodeName": node}), pod)

    def clear(self, pod: PodInfo, condition: tuple[str, str] | None = None) -> None:
        """Clear a pod's `status.nominatedNodeName` on the server (its nomination was dropped: it
        was displaced, preemption found nothing, or its binding failed), unless nominated again by
        the time the write goes out; with `condition` (message, reason), its PodScheduled=False
        condition in the same patch (kube's `updatePod` after a failed binding cycle: a separate
        condition write would race with this one on the pod's resourceVersion)."""
        release = self._claim(pod.key)
        task = asyncio.create_task(self._clear(pod, release, condition))
        self._clears.add(task)
        task.add_done_callback(self._clears.discard)
        task.add_done_callback(lambda _: release())

    # ----------------------------------------------------------------- one write at a time per pod

    def _claim(self, key: str) -> Callable[[], None]:
        """Count a write of this pod's nomination as under way (synchronously: the watch's copies
        stop being followed at once); returns its release, which may be called more than once."""
        writes = self.nominations.writes
        writes[key] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            writes[key] -= 1
            if writes[key] <= 0:  # nobody else holds or waits on the lock: each claimed first
                del writes[key]
                self._locks.pop(key, None)

        return release

    @contextlib.asynccontextmanager
    async def _writing(self, key: str, release: Callable[[], None]) -> AsyncIterator[None]:
        """One write of a pod's nominatedNodeName at a time, each with the value current then."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            release()

    def _nominated(self, key: str, node: str) -> bool:
        held = self.cluster.nominated.get(key)
        return self.is_leader() and held is not None and held.node == node

    async def _write(self, write: Write, pod: PodInfo) -> Written:
        result = await self.effects.write(write, pod.key)
        if not result.ok and result.answered and result.status not in write.tolerate:
            logger.warning("%s of %s: HTTP %d %s", write.call, pod.key, result.status, result.message)
        return result

    # ----------------------------------------------------------------- the task

    async def _carry_out(
        self, pod: PodInfo, profile: Profile, preemption: Preemption, message: str, release: Callable[[], None]
    ) -> None:
        node = preemption.node
        async with self._writing(pod.key, release):
            go = await self._nominate(pod, node, message)
        if not go:
            self.metrics.preemption_victims.inc(len(preemption.victims), result="abandoned")
            return
        results = await asyncio.gather(
            *(self._evict(victim, pod, profile, node) for victim in preemption.victims)
        )
        if "failed" in results:
            logger.warning("preemption for %s on %s incomplete: its nomination stays, it tries again later",
                           pod.key, node)

    async def _nominate(self, pod: PodInfo, node: str, message: str) -> bool:
        """The preemptor's nominatedNodeName and PodScheduled condition; False when the preemption
        is off (the pod is gone, bound, or displaced; or leadership lost)."""
        if not self._nominated(pod.key, node):
            return False
        condition, entry = self.reporter.condition_entry(pod, message)
        result = await self._write(_status_write(pod, {"nominatedNodeName": node, "conditions": [entry]}), pod)
        if result.ok:
            self.reporter.condition_written(pod.key, condition)
        elif result.status == 404:
            logger.info("preemptor %s is gone: its victims are spared", pod.key)
            self.nominations.unnominate(pod.key)
            return False
        return True  # (unwritten, the nomination holds the room here all the same)

    async def _evict(self, victim: PodInfo, preemptor: PodInfo, profile: Profile, node: str) -> str:
        result = await self._evict_one(victim, preemptor, profile, node)
        self.metrics.preemption_victims.inc(result=result)
        return result

    async def _evict_one(self, victim: PodInfo, preemptor: PodInfo, profile: Profile, node: str) -> str:
        """kube's `PreemptPod`: the DisruptionTarget condition, the DELETE, the event (or, for a
        victim waiting on Permit, the end of its wait)."""
        if not self._nominated(preemptor.key, node):
            return "abandoned"
        waiting = self.scheduler.waiting.get(victim.key)
        if waiting is not None and waiting.preempt("", "preempted"):
            self.reporter.preempted(victim, preemptor, node, profile.scheduler_name, in_memory=True)
            return "deleted"  # (from the node: it goes back to the queue)
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{profile.scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": _now(),
        }
        result = await self._write(_status_write(victim, {"conditions": [condition]}), victim)
        if not result.ok:
            return "gone" if result.status == 404 else "failed"
        delete = Write(pod_ref(victim), delete=True, uid=victim.uid, tolerate=frozenset({404, 409}))
        result = await self._write(delete, victim)
        if not result.ok and result.status not in (404, 409):  # (409: the UID precondition, re-created)
            return "failed"
        self.reporter.preempted(victim, preemptor, node, profile.scheduler_name)
        return "deleted" if result.ok else "gone"

    async def _clear(self, pod: PodInfo, release: Callable[[], None], condition: tuple[str, str] | None) -> None:
        async with self._writing(pod.key, release):
            if not self.is_leader():
                return
            status: dict[str, Any] = {}
            if pod.key not in self.cluster.nominated:  # (else nominated again: that preemption writes its node)
                status["nominatedNodeName"] = None
            written = None
            if condition is not None:
                written, entry = self.reporter.condition_entry(pod, *condition)
                status["conditions"] = [entry]
            if not status:
                return
            result = await self._write(_status_write(pod, status), pod)
            if result.ok and written is not None:
                self.reporter.condition_written(pod.key, written)
