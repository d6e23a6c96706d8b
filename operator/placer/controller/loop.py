"""The scheduling loop: one task pops the queue, decides, assumes, and hands the bind off.

Per pod: take the profile once (an immutable object, so a reload never mixes two versions in a
cycle), run the vectorised engine, and on a decision count the pod on its node (`assume`)
*before* the bind is sent, so the next decision already sees it. Binds run as tasks, at most
`max_binds_in_flight` at a time (the loop waits for a free slot before deciding, so decisions
are made on the freshest state). A bound pod stays assumed until its watch event confirms it; a
failed bind is forgotten and requeued with backoff, or dropped on 409 (someone else bound it, or
it is being deleted) and 404 (gone). A bind that got no answer at all pauses the loop until the
API server answers again (`SchedulerState.probe_api_forever`), so an outage costs a ping with
backoff, not a bind per pending pod. Only the leader runs the loop, and every bind checks the
leadership again right before it is sent.

Assuming a pod is kube's assume and Reserve together (`Scheduler.assume`): the pod counted on its
node and what its filters found there held, e.g. the volumes VolumeBinding chose. A pod with volume
bindings to write first goes through kube's PreBind (`placer.controller.prebind`) in a task of its
own, which holds no bind slot while it waits for the PV controller or a provisioner; it takes one to
bind once every claim is bound. Any failure undoes both (`Scheduler.forget`).

A decision with a preemption (`Decision.preemption`) nominates the pod to its node in the cycle
itself and hands the victims to `placer.controller.preemption` (a task, no bind slot); the pod
waits for a victim to go. Assuming a pod drops its nomination (kube's assume), and a failure in
its binding clears it; a failed preemption that found no candidate clears it too.

Shadow profiles' decisions (`placer.controller.shadow`) are taken by this loop too, never before
an active pod that is ready: in its idle time, and between active pods only within
`shadow_busy_share` of the time. They hold no bind slot and write nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from placer.controller.kube import BindOutcome, BindResult
from placer.controller.prebind import PLUGIN as VOLUME_BINDING
from placer.controller.prebind import VolumeBinder, VolumeOutcome, VolumeResult
from placer.controller.preemption import VICTIM_GONE, Preemptions, keeps_nomination
from placer.controller.shadow import ShadowWork
from placer.controller.state import SchedulerState
from placer.engine.framework import ClusterEvent
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.runtime import Decision
from placer.engine.storage import VolumeBindings

__all__ = ["SchedulingLoop"]

logger = logging.getLogger("placer.loop")

# what may let a pod whose volumes could not be bound go now (VolumeBinding's events)
VOLUME_EVENTS = frozenset({ClusterEvent.NODE, "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"})


class SchedulingLoop:
    def __init__(self, state: SchedulerState, max_binds_in_flight: int | None = None) -> None:
        self.state = state
        self.limit = max_binds_in_flight or state.options.max_binds_in_flight
        self._slots = asyncio.Semaphore(self.limit)
        self._binds: set[asyncio.Task[None]] = set()
        self._volume_binds: set[asyncio.Task[None]] = set()  # pods waiting for their volumes (no slot)
        self._stopping = asyncio.Event()
        self.volumes = VolumeBinder(state, self._stopping)
        self.preemptions = Preemptions(state)
        # shadow profiles' decisions: in idle time, and within a small share of the busy time
        self.shadow = ShadowWork(state.shadows, state.cluster, share=state.options.shadow_busy_share)
        state.metrics.volume_binds_waiting.source = lambda: [({}, len(self._volume_binds))]
        self.debug = logger.isEnabledFor(logging.DEBUG)

    @property
    def binds_in_flight(self) -> int:
        return len(self._binds)

    @property
    def volume_binds_waiting(self) -> int:
        return len(self._volume_binds)

    async def run(self) -> None:
        state = self.state
        queue = state.queue
        while not self._stopping.is_set():  # `drain` ends it: the operator is stopping
            if not state.may_schedule.is_set():
                await state.may_schedule.wait()
                continue
            if not state.is_leader():  # lost by the clock; the elector is about to say so
                await asyncio.sleep(0.05)
                continue
            if not state.api_up.is_set():  # the API server does not answer: no bind could land
                await state.api_up.wait()
                continue
            await self._slots.acquire()
            state.wakeup.clear()
            pod = queue.pop()
            if pod is None or self._stopping.is_set():
                if pod is not None:
                    queue.retry_now(pod.key)
                self._slots.release()
                if pod is None and self.shadow.idle():
                    await asyncio.sleep(0)  # then look at the queue again: active pods go first
                    continue
                await self._idle()
                continue
            try:
                started = self.cycle(pod)
            except BaseException:
                self._slots.release()
                raise
            if not started:
                self._slots.release()
            await asyncio.sleep(0)  # let the bind go out and the watch handlers run between pods
            self.shadow.busy()  # then a shadow decision, if its share of the time allows

    async def _idle(self) -> None:
        delay = self.state.queue.next_ready_in()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self.state.wakeup.wait()

    def cycle(self, pod: PodInfo) -> bool:
        """One scheduling cycle; True when a bind task was started (it owns the slot then)."""
        state = self.state
        key = pod.key
        profile = state.profiles.active(pod.scheduler_name)  # taken once for the whole cycle
        if profile is None or key in state.cluster.pods or not state.is_leader():
            if profile is None or key in state.cluster.pods:
                state.queue.remove(key)
            else:
                state.queue.retry_now(key)  # not leading any more: leave it for the next term
            return False
        if self.preemptions.running(key):  # its victims are being evicted: not decided again meanwhile
            self.preemptions.hold_back(key)
            return False
        started = time.perf_counter()
        try:
            decision = state.scheduler.schedule(pod, profile, state.cluster, top=3 if self.debug else 0)
        except Exception:
            logger.exception("scheduling %s failed", key)
            self._observe(profile, "error", started)
            state.queue.backoff(key)
            return False
        node = decision.node
        if node is None:
            message = decision.full_message or "unschedulable"
            self._observe(profile, "error" if pod.error else "unschedulable", started)
            if decision.preemption is not None:
                # kube's prepareCandidate: nominated at once, victims evicted by a task; retried as
                # soon as a victim is gone
                state.queue.backoff(key, (decision.wake_on | VICTIM_GONE) if decision.wake_on else frozenset())
                self.preemptions.begin(pod, profile, decision, message)
                state.reporter.failed(pod, profile.scheduler_name, message, condition=False)  # the task writes it
            else:
                if not keeps_nomination(decision):  # preemption found nothing: the nomination goes
                    self._drop_nomination(pod)
                state.queue.backoff(key, decision.wake_on)
                state.reporter.failed(pod, profile.scheduler_name, message)
            if self.debug:
                logger.debug("pod %s unschedulable (profile %s): %s", key, profile.name, message)
            return False
        self._observe(profile, "scheduled", started)
        state.unnominate(key, now_on=node)  # kube's assume drops the pod's nomination
        try:
            state.scheduler.assume(pod, decision, profile, state.cluster)  # counted, and its reservations held
        except Exception:
            logger.exception("reserving %s on %s failed", key, node)
            self._forget(pod, decision, profile)
            state.queue.backoff(key)
            return False
        state.queue.wake(ClusterEvent.POD_ADD)  # e.g. a pod with affinity to this one may go now
        if self.debug:
            top = ", ".join(f"{s.node}={s.total}" for s in decision.top)
            logger.debug("pod %s -> %s (profile %s generation %d; top %s)", key, node, profile.name,
                         profile.generation, top)
        bindings = decision.reservations.get(VOLUME_BINDING)
        if isinstance(bindings, VolumeBindings) and (bindings.static or bindings.dynamic):
            task = asyncio.create_task(self._bind_volumes(pod, decision, profile, bindings))
            self._volume_binds.add(task)
            task.add_done_callback(self._volume_binds.discard)
            return False  # waiting for the volumes holds no bind slot
        task = asyncio.create_task(self._bind(pod, decision, profile))
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)
        return True

    def _drop_nomination(self, pod: PodInfo) -> None:
        """The pod no longer holds a node's room: in the cluster, and on the server if it says so."""
        had = self.state.unnominate(pod.key)
        if had or pod.nominated_node:
            self.preemptions.clear(pod)

    def _forget(self, pod: PodInfo, decision: Decision, profile: Profile) -> None:
        """Undo `Scheduler.assume`: the pod's room on its node and its reservations."""
        state = self.state
        state.scheduler.forget(pod, decision, profile, state.cluster)

    def _observe(self, profile: Profile, result: str, started: float) -> None:
        metrics = self.state.metrics
        metrics.attempts.inc(result=result, profile=profile.name)
        metrics.attempt_duration.observe(time.perf_counter() - started, result=result, profile=profile.name)

    async def _bind_volumes(
        self, pod: PodInfo, decision: Decision, profile: Profile, bindings: VolumeBindings
    ) -> None:
        """PreBind: write the volume bindings and wait for them (no slot held), then bind the pod."""
        state = self.state
        try:
            try:
                outcome = await self.volumes.bind(pod, bindings)
            except Exception as error:
                logger.exception("binding the volumes of %s failed", pod.key)
                outcome = VolumeOutcome(VolumeResult.FAILED, f'running PreBind plugin "{VOLUME_BINDING}": {error}')
            state.metrics.volume_binds.inc(result=outcome.result.value)
            if outcome.result is VolumeResult.BOUND:
                await self._slots.acquire()  # _bind releases it
        except asyncio.CancelledError:
            self._forget(pod, decision, profile)  # never leave an assumption behind
            raise
        if outcome.result is VolumeResult.BOUND:
            await self._bind(pod, decision, profile)
        else:
            self._volumes_failed(pod, decision, profile, outcome)

    def _volumes_failed(self, pod: PodInfo, decision: Decision, profile: Profile, outcome: VolumeOutcome) -> None:
        state = self.state
        key = pod.key
        self._forget(pod, decision, profile)
        state.queue.wake(ClusterEvent.POD_DELETE)  # what it was assumed to hold is free again
        state.wakeup.set()
        if outcome.result is VolumeResult.GONE:
            state.queue.remove(key)
            logger.debug("volumes of %s not bound: %s", key, outcome.message)
            return
        if outcome.result is VolumeResult.ABANDONED or not state.is_leader():
            state.queue.retry_now(key)  # for the next term (or leader)
            logger.info("volumes of %s not bound: %s", key, outcome.message)
            return
        if not outcome.answered:
            state.api_unreachable(outcome.message)
        if pod.nominated_node:
            self.preemptions.clear(pod)  # as kube after a failed binding cycle: nominated nowhere
        state.queue.backoff(key, VOLUME_EVENTS, from_now=True)
        logger.warning("volumes of %s on %s not bound: %s", key, decision.node, outcome.message)
        state.reporter.failed(pod, profile.scheduler_name, outcome.message, reason="SchedulerError")

    async def _bind(self, pod: PodInfo, decision: Decision, profile: Profile) -> None:
        state = self.state
        key = pod.key
        node = decision.node
        assert node is not None
        try:
            if not state.is_leader():
                outcome = BindOutcome(BindResult.FAILED, "not the leader")
            else:
                assert state.kube is not None
                outcome = await state.kube.bind(pod.namespace, pod.name, pod.uid, node)
        except asyncio.CancelledError:
            self._forget(pod, decision, profile)  # never leave an assumption behind
            raise
        except Exception as error:
            outcome = BindOutcome(BindResult.FAILED, repr(error))
        finally:
            self._slots.release()
        result = outcome.result
        state.metrics.bindings.inc(result=result.value)
        if result is BindResult.BOUND:
            state.queue.remove(key)  # stays assumed until the watch shows it bound
            state.reporter.scheduled(pod, node, profile.scheduler_name)
            return
        self._forget(pod, decision, profile)
        if result in (BindResult.CONFLICT, BindResult.GONE):
            state.queue.remove(key)
            logger.debug("bind of %s dropped (%s): %s", key, result.value, outcome.message)
            return
        if not state.is_leader():
            state.queue.retry_now(key)
            return
        if not outcome.answered:
            state.api_unreachable(outcome.message)
        if pod.nominated_node:
            self.preemptions.clear(pod)  # as kube after a failed bind: nominated nowhere
        state.queue.backoff(key)
        state.queue.wake(ClusterEvent.POD_DELETE)  # what it was assumed to hold is free again
        state.wakeup.set()
        logger.warning("bind of %s to %s failed: %s", key, node, outcome.message)
        state.reporter.failed(pod, profile.scheduler_name, f"Binding rejected: {outcome.message}", condition=False)

    async def drain(self, timeout: float) -> None:
        """Let the binds in flight finish (bounded), e.g. before the Lease is released; pods waiting
        for their volumes stop waiting (undoing their annotations) and are left to the next leader."""
        self._stopping.set()
        self.state.volumes_changed.fire()
        tasks = [*self._binds, *self._volume_binds, *self.preemptions.tasks]
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*tasks, return_exceptions=True)
