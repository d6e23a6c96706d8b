"""The scheduling loop, as kube-scheduler's `scheduleOne`: pop, schedule, (post-filter), reserve,
permit, bind.

One task pops the queue and runs each pod's scheduling cycle (`cycle`):

1. **schedule** — the profile taken once (an immutable object, so a reload never mixes two versions
   in a cycle), the vectorised engine decides (`Scheduler.schedule`);
2. **post-filter** — no node fits: the PostFilter result is carried out
   (`placer.controller.scheduling.preemption`: the pod nominated to a node, its victims evicted by a task), or
   the pod is reported unschedulable and backs off until an event that may help;
3. **reserve** — kube's assume and Reserve together (`Scheduler.assume`): the pod counted on its node
   *before* the bind is sent, so the next decision already sees it, and what its plugins found there
   held (e.g. the volumes VolumeBinding chose); assuming drops the pod's nomination;
4. **permit** — the Permit plugins allow the pod, reject it, or make it wait (`Scheduler.permit`);
5. **bind** — the binding cycle (`placer.controller.binding.cycle`): WaitOnPermit, PreBind, Bind, PostBind
   in a task of its own.

Binds run at most `max_binds_in_flight` at a time: the loop waits for a free slot before deciding
(so decisions are made on the freshest state) and a pod bound at once takes it; a binding cycle that
waits (on Permit or a PreBind) holds no slot and takes one to bind. A bind that got no answer at all
pauses the loop until the API server answers again (`ApiHealth.probe_forever`), so an
outage costs a ping with backoff, not a bind per pending pod. Only the leader runs the loop.

While binds are being answered, the loop decides pods back to back for up to `YIELD_EVERY` (2 ms)
before it lets the other tasks run (the binds it started go out together, the watch events that
came meanwhile are filed); before the first bind is answered, and after one got no answer, it
yields after every pod. Its per-pod bookkeeping skips what the profile has nothing for (Permit,
PostBind: the default profile has neither) and counts its metrics through series resolved once.

Shadow profiles' decisions (`placer.controller.profiles.shadow`) are taken by this loop too, never before an
active pod that is ready: in its idle time, and between active pods only within `shadow_busy_share`
of the time. They hold no bind slot and write nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from placer.controller.binding.cycle import BindingCycles
from placer.controller.binding.group_status import GroupStatusWriter
from placer.controller.binding.reporting import Reporter
from placer.controller.informers.groups import GroupMembers
from placer.controller.informers.nominations import Nominations
from placer.controller.metrics import CounterSeries, HistogramSeries, Metrics
from placer.controller.profiles.shadow import ShadowWork
from placer.controller.scheduling.group_cycle import GroupCycle
from placer.controller.scheduling.preemption import VICTIM_GONE, Preemptions, keeps_nomination
from placer.controller.signals import WatchedEvents
from placer.engine.cluster import ClusterState
from placer.engine.framework import ALLOW, ClusterEvent, FilterPlugin, PermitCode
from placer.engine.groups import group_of
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Decision, Scheduler

__all__ = ["SchedulingLoop", "rejectors_of"]

logger = logging.getLogger("placer.loop")

# seconds: the longest the loop decides pods back to back before it lets the other tasks run (the
# binds it started go out, watch events are filed), once binds are being answered (before, and after
# a bind got no answer, it yields after every pod: an unreachable API server is noticed at the first
# bind); it also yields whenever it waits for a bind slot or for work. Yielding after every pod cost
# an event-loop turn per pod, a fifth of Placer's CPU on the emulator's benchmark.
YIELD_EVERY = 0.002


def rejectors_of(profile: Profile, decision: Decision) -> tuple[FilterPlugin[Any], ...]:
    """The profile's filters that rejected the pod (kube's unschedulable plugins): the queue asks
    their queueing hints whether a change may help it."""
    names = decision.rejected_by
    return tuple(plugin for plugin in profile.filters if plugin.name in names) if names else ()


class SchedulingLoop:
    def __init__(
        self,
        scheduler: Scheduler,
        cluster: ClusterState,
        queue: SchedulingQueue,
        *,
        active: Callable[[str], Profile | None],
        binding: BindingCycles,
        preemptions: Preemptions,
        shadow: ShadowWork,
        members: GroupMembers,
        group_status: GroupStatusWriter,
        gated: Collection[str],
        nominations: Nominations,
        reporter: Reporter,
        metrics: Metrics,
        may_schedule: asyncio.Event,
        api_up: asyncio.Event,
        wakeup: asyncio.Event,
        changes: WatchedEvents,
        is_leader: Callable[[], bool],
        slots: asyncio.Semaphore,
        stopping: asyncio.Event,
    ) -> None:
        self.scheduler = scheduler
        self.cluster = cluster
        self.queue = queue
        self.active = active  # the profile that owns a schedulerName now
        self.binding = binding
        self.preemptions = preemptions
        self.shadow = shadow  # shadow profiles' decisions: in idle time, and a small share of the busy time
        self.nominations = nominations
        self.reporter = reporter
        self.metrics = metrics
        self.may_schedule = may_schedule  # leading, every informer synced
        self.api_up = api_up  # cleared while the API server does not answer
        self.wakeup = wakeup
        self.changes = changes
        self.is_leader = is_leader
        self._slots = slots  # the binds in flight (`Options.max_binds_in_flight`), shared with `binding`
        self._stopping = stopping
        self.debug = logger.isEnabledFor(logging.DEBUG)
        self.groups = GroupCycle(  # a pod of a group: its whole group decided together
            scheduler, cluster, queue, members=members, group_status=group_status, gated=gated, active=active,
            nominations=nominations, reporter=reporter, preemptions=preemptions, binding=binding,
            permit=self.permit, observe=self._observe, debug=self.debug,
        )
        # (profile name, result) -> the attempts' counter and duration series, labels resolved once
        self._series: dict[tuple[str, str], tuple[CounterSeries, HistogramSeries]] = {}

    @property
    def binds_in_flight(self) -> int:
        return self.binding.binds_in_flight

    async def run(self) -> None:
        queue = self.queue
        clock = time.monotonic
        yielded = clock()
        while not self._stopping.is_set():  # `drain` ends it: the operator is stopping
            if not self.may_schedule.is_set():
                await self.may_schedule.wait()
                continue
            if not self.is_leader():  # lost by the clock; the elector is about to say so
                await asyncio.sleep(0.05)
                continue
            if not self.api_up.is_set():  # the API server does not answer: no bind could land
                await self.api_up.wait()
                continue
            await self._slots.acquire()
            self.wakeup.clear()
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
            if clock() - yielded >= YIELD_EVERY or not self.binding.answering:
                await asyncio.sleep(0)  # let the binds go out and the watch handlers run
                yielded = clock()
            self.shadow.busy()  # then a shadow decision, if its share of the time allows

    async def _idle(self) -> None:
        delay = self.queue.next_ready_in()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self.wakeup.wait()

    # ----------------------------------------------------------------- one pod: kube's scheduleOne

    def cycle(self, pod: PodInfo) -> bool:
        """One scheduling cycle; True when its binding cycle took the bind slot."""
        profile = self._profile(pod)
        if profile is None:
            return False
        ref = group_of(pod)
        if ref is not None:
            return self.groups.run(pod, ref, profile)
        decision = self._schedule(pod, profile)
        if decision is None:
            return False
        if decision.node is None:
            self._post_filter(pod, profile, decision)
            return False
        if not self._reserve(pod, profile, decision) or not self.permit(pod, profile, decision):
            return False
        return self.binding.start(pod, decision, profile)

    def _profile(self, pod: PodInfo) -> Profile | None:
        """The profile that decides for the pod now, taken once for the whole cycle; None when the
        pod is not to be decided now."""
        key = pod.key
        profile = self.active(pod.scheduler_name)
        if profile is None or key in self.cluster.pods or not self.is_leader():
            if profile is None or key in self.cluster.pods:
                self.queue.remove(key)
            else:
                self.queue.retry_now(key)  # not leading any more: leave it for the next term
            return None
        if self.preemptions.running(key):  # its victims are being evicted: not decided again meanwhile
            self.preemptions.hold_back(key)
            return None
        return profile

    def _schedule(self, pod: PodInfo, profile: Profile) -> Decision | None:
        started = time.perf_counter()
        try:
            decision = self.scheduler.schedule(pod, profile, self.cluster, top=3 if self.debug else 0)
        except Exception:
            logger.exception("scheduling %s failed", pod.key)
            self._observe(profile, "error", started)
            self.queue.backoff(pod.key)
            return None
        if decision.node is None:
            self._observe(profile, "error" if pod.error else "unschedulable", started)
        else:
            self._observe(profile, "scheduled", started)
        return decision

    def _post_filter(self, pod: PodInfo, profile: Profile, decision: Decision) -> None:
        """No node fits: carry out the PostFilter result, or report the pod unschedulable."""
        key = pod.key
        message = decision.full_message or "unschedulable"
        if decision.post_filter_writes:  # (a claim freed for the next attempt: DynamicResources)
            self.binding.post_filter_writes(pod, decision.post_filter_writes)
        if decision.preemption is not None:
            # kube's prepareCandidate: nominated at once, victims evicted by a task; retried as soon
            # as a victim is gone
            # (no rejectors: not tried again before the initial backoff, by when its victims' deletions
            # have been seen, or it would preempt them again)
            self.queue.backoff(key, (decision.wake_on | VICTIM_GONE) if decision.wake_on else frozenset())
            self.preemptions.begin(pod, profile, decision, message)
            self.reporter.failed(pod, profile.scheduler_name, message, condition=False)  # the task writes it
        else:
            if not keeps_nomination(decision):  # the PostFilter found nothing: the nomination goes
                had = self.nominations.unnominate(key)
                if had or pod.nominated_node:
                    self.preemptions.clear(pod)
            self.queue.backoff(key, decision.wake_on, rejectors=rejectors_of(profile, decision))
            self.reporter.failed(pod, profile.scheduler_name, message)
        if self.debug:
            logger.debug("pod %s unschedulable (profile %s): %s", key, profile.name, message)

    def _reserve(self, pod: PodInfo, profile: Profile, decision: Decision) -> bool:
        """kube's assume and Reserve: counted on its node, what its plugins found there held."""
        node = decision.node
        self.nominations.unnominate(pod.key, now_on=node)  # kube's assume drops the pod's nomination
        try:
            self.scheduler.assume(pod, decision, profile, self.cluster)
        except Exception:
            logger.exception("reserving %s on %s failed", pod.key, node)
            self.scheduler.forget(pod, decision, profile, self.cluster)
            self.queue.backoff(pod.key)
            return False
        self.queue.wake(ClusterEvent.POD_ADD, None, pod)  # e.g. a pod with affinity to this one may go now
        if self.debug:
            top = ", ".join(f"{s.node}={s.total}" for s in decision.top)
            logger.debug("pod %s -> %s (profile %s generation %d; top %s)", pod.key, node, profile.name,
                         profile.generation, top)
        return True

    def permit(self, pod: PodInfo, profile: Profile, decision: Decision) -> bool:
        """kube's RunPermitPlugins: False when the pod was rejected (or a plugin broke); the group
        cycle runs it for each placed member too."""
        if not self.binding.points(profile).permits:  # (the default profile has none)
            decision.permit = ALLOW
            return True
        try:
            permit = self.scheduler.permit(pod, decision, profile, self.cluster)
        except Exception:
            logger.exception("Permit of %s on %s failed", pod.key, decision.node)
            self.scheduler.unpermit(pod, decision, profile, self.cluster)
            self.scheduler.forget(pod, decision, profile, self.cluster)
            self.queue.backoff(pod.key)
            return False
        if permit.code is PermitCode.REJECT:
            self.binding.rejected(pod, decision, profile)
            return False
        return True

    def _observe(self, profile: Profile, result: str, started: float) -> None:
        series = self._series.get((profile.name, result))
        if series is None:
            metrics = self.metrics
            series = self._series[profile.name, result] = (
                metrics.attempts.labels(result=result, profile=profile.name),
                metrics.attempt_duration.labels(result=result, profile=profile.name),
            )
        series[0].inc()
        series[1].observe(time.perf_counter() - started)

    async def drain(self, timeout: float) -> None:
        """Let the binds in flight finish (bounded), e.g. before the Lease is released; binding cycles
        that wait (on Permit or a PreBind) stop waiting, undo their writes and leave their pods to
        the next leader."""
        self._stopping.set()
        self.changes.fire()
        tasks = [*self.binding.tasks, *self.preemptions.tasks, *self.groups.group_status.tasks]
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*tasks, return_exceptions=True)
