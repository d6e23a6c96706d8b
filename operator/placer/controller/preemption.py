"""Carrying out a preemption the engine decided: kube-scheduler's `prepareCandidate` and its
nominator, for the operator (`placer simulate` evicts at once; see DefaultPreemption).

When no node fits a pod and DefaultPreemption finds a node where evicting lower-priority pods makes
room (`Decision.preemption`), the scheduling cycle (`SchedulingLoop.cycle`):

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
     `related` to the preemptor.

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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from placer.controller.kube import ApiError, Reply
from placer.controller.state import SchedulerState
from placer.engine.framework import ClusterEvent, Preemption
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.runtime import Decision
from placer.plugins.default_preemption import NEVER, TERMINATING

__all__ = ["DISRUPTION_TARGET", "VICTIM_GONE", "Preemptions", "keeps_nomination"]

logger = logging.getLogger("placer.preemption")

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# The PostFilter outcomes that leave a pod's nomination as it is (kube's ModeNoop: the pod may not
# preempt now). Any other failure of preemption clears it, as kube's `Preempt` does when it finds
# no candidate ("Specify nominatedNodeName to clear the pod's nominatedNodeName status").
_KEEPS = frozenset({f"preemption: {NEVER}", f"preemption: {TERMINATING}"})
# what wakes a preemptor: one of its victims gone (every filter preemption may help lists it too)
VICTIM_GONE = frozenset({ClusterEvent.POD_DELETE})


def keeps_nomination(decision: Decision) -> bool:
    """Whether an unschedulable decision leaves the pod's nomination (if any) in place."""
    return decision.post_filter_message is None or decision.post_filter_message in _KEEPS


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_uid(patch: dict[str, Any], uid: str) -> dict[str, Any]:
    """A status patch that fails (422: metadata.uid is immutable) on a pod re-created under that name."""
    if uid:
        patch["metadata"] = {"uid": uid}
    return patch


class Preemptions:
    """The preemptions being carried out, and the writes of pods' `status.nominatedNodeName`."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state
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
        self.state.queue.backoff(key, VICTIM_GONE)

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return [*self._running.values(), *self._clears]

    # ----------------------------------------------------------------- from the scheduling cycle

    def begin(self, pod: PodInfo, profile: Profile, decision: Decision, message: str) -> None:
        """Nominate the pod, displace lower-priority nominations, and start the task that writes."""
        preemption = decision.preemption
        assert preemption is not None
        cluster = self.state.cluster
        cluster.nominate(pod, preemption.node)
        for key in preemption.displaced:
            held = cluster.nominated.get(key)
            if held is not None and cluster.unnominate(key):
                logger.debug("nomination of %s to %s displaced by %s", key, held[1], pod.key)
                self.clear(held[0])
        self.state.metrics.preemptions.inc(profile=profile.name)
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
                    self.state.queue.retry_now(pod.key)
                    self.state.wakeup.set()

        task.add_done_callback(done)

    def clear(self, pod: PodInfo) -> None:
        """Clear a pod's `status.nominatedNodeName` on the server (its nomination was dropped: it
        was displaced, preemption found nothing, or its bind failed), unless nominated again by the
        time the write goes out."""
        release = self._claim(pod.key)
        task = asyncio.create_task(self._clear(pod, release))
        self._clears.add(task)
        task.add_done_callback(self._clears.discard)
        task.add_done_callback(lambda _: release())

    # ----------------------------------------------------------------- one write at a time per pod

    def _claim(self, key: str) -> Callable[[], None]:
        """Count a write of this pod's nomination as under way (synchronously: the watch's copies
        stop being followed at once); returns its release, which may be called more than once."""
        writes = self.state.nomination_writes
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
        held = self.state.cluster.nominated.get(key)
        return self.state.is_leader() and held is not None and held[1] == node

    async def _call(self, what: str, pod: PodInfo, call: Awaitable[Reply]) -> Reply | None:
        """One API call; None when it got no answer at all (after the client's retries)."""
        try:
            return await call
        except ApiError as error:
            self.state.metrics.api_errors.inc(call=what)
            logger.warning("%s of %s: %s", what, pod.key, error)
            return None

    def _refused(self, what: str, pod: PodInfo, reply: Reply) -> None:
        self.state.metrics.api_errors.inc(call=what)
        logger.warning("%s of %s: HTTP %d %s", what, pod.key, reply.status, reply.message())

    # ----------------------------------------------------------------- the task

    async def _carry_out(
        self, pod: PodInfo, profile: Profile, preemption: Preemption, message: str, release: Callable[[], None]
    ) -> None:
        node = preemption.node
        async with self._writing(pod.key, release):
            go = await self._nominate(pod, node, message)
        if not go:
            self.state.metrics.preemption_victims.inc(len(preemption.victims), result="abandoned")
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
        state = self.state
        if not self._nominated(pod.key, node):
            return False
        assert state.kube is not None
        condition, entry = state.reporter.condition_entry(pod, message)
        patch = _with_uid({"status": {"nominatedNodeName": node, "conditions": [entry]}}, pod.uid)
        reply = await self._call("patch_pod_status", pod, state.kube.patch_pod_status(pod.namespace, pod.name, patch))
        if reply is None:
            return True  # the nomination holds the room here all the same
        if reply.ok:
            state.reporter.condition_written(pod.key, condition)
            return True
        if reply.status == 404:
            logger.info("preemptor %s is gone: its victims are spared", pod.key)
            state.unnominate(pod.key)
            return False
        self._refused("patch_pod_status", pod, reply)
        return True

    async def _evict(self, victim: PodInfo, preemptor: PodInfo, profile: Profile, node: str) -> str:
        result = await self._evict_one(victim, preemptor, profile, node)
        self.state.metrics.preemption_victims.inc(result=result)
        return result

    async def _evict_one(self, victim: PodInfo, preemptor: PodInfo, profile: Profile, node: str) -> str:
        """kube's `PreemptPod`: the DisruptionTarget condition, the DELETE, the event."""
        state = self.state
        if not self._nominated(preemptor.key, node):
            return "abandoned"
        assert state.kube is not None
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{profile.scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": _now(),
        }
        patch = _with_uid({"status": {"conditions": [condition]}}, victim.uid)
        reply = await self._call(
            "patch_pod_status", victim, state.kube.patch_pod_status(victim.namespace, victim.name, patch)
        )
        if reply is None:
            return "failed"
        if reply.status == 404:
            return "gone"
        if not reply.ok:
            self._refused("patch_pod_status", victim, reply)
            return "failed"
        reply = await self._call("delete_pod", victim, state.kube.delete_pod(victim.namespace, victim.name, victim.uid))
        if reply is None:
            return "failed"
        if reply.ok:
            result = "deleted"
        elif reply.status in (404, 409):  # gone already (409: the UID precondition, re-created since)
            result = "gone"
        else:
            self._refused("delete_pod", victim, reply)
            return "failed"
        state.reporter.preempted(victim, preemptor, node, profile.scheduler_name)
        return result

    async def _clear(self, pod: PodInfo, release: Callable[[], None]) -> None:
        state = self.state
        async with self._writing(pod.key, release):
            if not state.is_leader() or pod.key in state.cluster.nominated:
                return  # nominated again meanwhile: that preemption writes its own node
            assert state.kube is not None
            patch = _with_uid({"status": {"nominatedNodeName": None}}, pod.uid)
            call = state.kube.patch_pod_status(pod.namespace, pod.name, patch)
            reply = await self._call("patch_pod_status", pod, call)
            if reply is not None and not reply.ok and reply.status != 404:
                self._refused("patch_pod_status", pod, reply)

