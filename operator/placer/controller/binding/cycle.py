"""The binding cycle (kube's `bindingCycle`) of a pod the scheduling cycle placed, reserved and ran
Permit for: WaitOnPermit, PreBind, Bind, PostBind, and on any failure Unreserve. It knows no
plugin: the engine says which have work, and their work is data (`Write`s carried out by
`placer.controller.binding.effects`, a `WaitFor` checked against the watch-fed cluster).

A pod allowed at once with no PreBind work is bound in a task holding the loop's bind slot (the hot
path). Otherwise — first nominated to its node when it has PreBind work or waits on Permit (kube's
NominatedNodeNameForExpectation: `status.nominatedNodeName`, cleared again if the binding fails) —
its task holds no slot while it waits — on Permit, then on each PreBind's writes
and wait (re-checked at its events, when the pod is deleted or bound meanwhile, and once a second,
until its timeout) — and takes one to bind. A failure undoes the PreBind writes that landed (latest
first), the pod's reservations and room (`Scheduler.unpermit`, `Scheduler.forget`) and sends it
back to the queue: unschedulable for a Permit rejection, `running PreBind plugin "<name>": <why>`
(SchedulerError) for a PreBind, quietly when the pod is gone, for the next term when leadership is
lost or the operator stops. A bind with no answer at all pauses the loop (`ApiHealth.unreachable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from placer.controller.binding.effects import Effects
from placer.controller.binding.reporting import Reporter
from placer.controller.metrics import Metrics
from placer.controller.signals import WatchedEvents
from placer.controller.transport import BindOutcome, BindResult
from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BindingPoints,
    ClusterEvent,
    ObjectRef,
    PermitPlugin,
    PreBind,
    PreBindError,
    PreBindPlugin,
    WaitFor,
    Write,
)
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Decision, PluginFailed, Scheduler, binding_points, permit_message

__all__ = ["RECHECK", "BindingCycles", "Failure", "Result"]

logger = logging.getLogger("placer.binding")

RECHECK = 1.0  # seconds: the longest a wait goes without looking (kube polls its cache every second)
# what may end any wait of the binding cycle: the pod deleted, or bound by someone else
POD_EVENTS = frozenset({ClusterEvent.POD_DELETE, ClusterEvent.POD_UPDATE})


class Result(enum.Enum):
    BOUND = "bound"  # (a PreBind's metric: its work is done, the pod may be bound)
    FAILED = "failed"  # a write was rejected, or the wait cannot succeed
    TIMEOUT = "timeout"  # the PreBind's wait did not succeed in time
    GONE = "gone"  # the pod was deleted, or bound by someone else, meanwhile
    ABANDONED = "abandoned"  # leadership lost, or the operator is stopping
    REJECTED = "rejected"  # a Permit plugin rejected the pod (or its wait timed out)


@dataclass(frozen=True, slots=True)
class Failure:
    result: Result
    message: str  # the FailedScheduling note (kube's wording), or why the pod was dropped
    answered: bool = True  # False: a write got no HTTP answer at all (server unreachable)
    wake_on: frozenset[str] = frozenset()  # what may let the pod go (its backoff wake-ups)


def pre_bind_error(plugin: str, message: str) -> str:
    """How kube reports a PreBind failure (its framework wraps the plugin's error)."""
    return f'running PreBind plugin "{plugin}": {message}'


class Binder(Protocol):
    """The bind call (`KubeClient.bind`)."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> BindOutcome: ...


class BindingCycles:
    """The binding cycles in flight, one task each."""

    def __init__(
        self,
        scheduler: Scheduler,
        cluster: ClusterState,
        queue: SchedulingQueue,
        *,
        binder: Binder,
        effects: Effects,
        reporter: Reporter,
        metrics: Metrics,
        changes: WatchedEvents,
        wakeup: asyncio.Event,
        is_leader: Callable[[], bool],
        unreachable: Callable[[str], None],
        pre_bind_timeout: float,
        slots: asyncio.Semaphore,
        stopping: asyncio.Event,
        clear_nomination: Callable[[PodInfo, tuple[str, str] | None], None],
        nominate: Callable[[PodInfo, str], Awaitable[None]] | None = None,
        bound: Callable[[PodInfo], None] = lambda pod: None,
    ) -> None:
        self.scheduler = scheduler
        self.cluster = cluster
        self.queue = queue
        self.binder = binder
        self.effects = effects
        self.reporter = reporter
        self.metrics = metrics
        self.changed = changes  # fired by the informers' events the waits ask for
        self.wakeup = wakeup
        self.is_leader = is_leader
        self.unreachable = unreachable  # a call got no answer: the loop pauses until the server answers
        self.pre_bind_timeout = pre_bind_timeout
        self.slots = slots
        self.stopping = stopping
        self.clear_nomination = clear_nomination
        self.nominate = nominate  # writes a pod's nominatedNodeName (None: never, e.g. in unit tests)
        self.bound = bound  # a pod this operator binds, told as the bind is sent (its refusals are Placer's to report)
        self._expected: set[str] = set()  # pods this binding cycle nominated to their node
        self._binds: set[asyncio.Task[None]] = set()  # binding now, each with a bind slot
        self._waiting: set[asyncio.Task[None]] = set()  # on Permit or PreBind, holding no slot
        self._post: set[asyncio.Task[None]] = set()  # PostBind writes
        self._in_pre_bind: Counter[str] = Counter()  # metric family -> pods in that PreBind now
        for family, (_, gauge) in metrics.pre_binds.items():
            gauge.source = lambda family=family: [({}, self._in_pre_bind[family])]  # type: ignore[misc]
        self._points: tuple[Profile | None, BindingPoints | None] = (None, None)  # the last profile's
        # a bind was answered (bound) since the start, and none got no answer at all since: the loop
        # may decide pods back to back (until then it lets each bind go out before the next decision)
        self.answering = False
        self._bind_results = {result: metrics.bindings.labels(result=result.value) for result in BindResult}

    def points(self, profile: Profile) -> BindingPoints:
        """The profile's Reserve, Permit, PreBind and PostBind plugins; the last profile's are kept at
        hand (pod after pod is of the same profile)."""
        last, points = self._points
        if last is not profile or points is None:
            points = binding_points(profile)
            self._points = (profile, points)
        return points

    @property
    def binds_in_flight(self) -> int:
        return len(self._binds)

    @property
    def waiting(self) -> int:
        """Binding cycles waiting on Permit or PreBind."""
        return len(self._waiting)

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return [*self._binds, *self._waiting, *self._post]

    def _spawn(self, job: Coroutine[Any, Any, None], tasks: set[asyncio.Task[None]]) -> None:
        task = asyncio.create_task(job)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    # ----------------------------------------------------------------- from the scheduling cycle

    def start(self, pod: PodInfo, decision: Decision, profile: Profile, slot: bool = True) -> bool:
        """The binding cycle of a pod reserved and permitted (or waiting on Permit); True when its
        task took the bind slot of the loop's cycle (`slot`: the cycle has one to give — a group
        cycle's first pod does, its others wait for one)."""
        assert decision.permit is not None
        plans: list[tuple[PreBindPlugin[Any], PreBind]] | None = None
        if decision.permit.allowed:
            try:
                plans = self.scheduler.pre_bind(pod, decision, profile, self.cluster)  # kube's PreBindPreFlight
            except PluginFailed as failed:
                self._failed(pod, decision, profile, self._plugin_failure(pod, failed), from_now=False)
                return False
            if not plans and slot:
                self._spawn(self._bind(pod, decision, profile, []), self._binds)
                return True
        self._spawn(self._wait_then_bind(pod, decision, profile, plans), self._waiting)
        return False  # waiting holds no bind slot

    @staticmethod
    def _plugin_failure(pod: PodInfo, failed: PluginFailed) -> Failure:
        logger.error("PreBind %s of %s failed", failed.plugin.name, pod.key, exc_info=failed.error)
        events = failed.plugin.events if isinstance(failed.plugin, PreBindPlugin) else frozenset()
        return Failure(Result.FAILED, pre_bind_error(failed.plugin.name, str(failed.error)), wake_on=events)

    def rejected(self, pod: PodInfo, decision: Decision, profile: Profile) -> None:
        """Permit rejected the pod in the scheduling cycle itself."""
        self._failed(pod, decision, profile, self._permit_failure(decision, profile), from_now=False)

    # ----------------------------------------------------------------- the waits

    async def _wait_then_bind(
        self, pod: PodInfo, decision: Decision, profile: Profile,
        plans: list[tuple[PreBindPlugin[Any], PreBind]] | None,
    ) -> None:
        done: list[Write] = []  # the PreBind writes that landed, for undoing
        try:
            failure = None
            node = decision.node
            if (plans is None or plans) and self.nominate is not None and node is not None:
                # kube's NominatedNodeNameForExpectation: PreBindPreFlight said there is work (or the
                # pod waits on Permit): its nominatedNodeName is written first
                self._expected.add(pod.key)
                if pod.nominated_node != node:
                    await self.nominate(pod, node)
            if plans is None:
                failure = await self._wait_on_permit(pod, decision, profile)
                try:
                    plans = [] if failure is not None else self.scheduler.pre_bind(
                        pod, decision, profile, self.cluster)
                except PluginFailed as failed:
                    plans, failure = [], self._plugin_failure(pod, failed)
            for plugin, plan in plans:
                failure = await self._pre_bind(pod, plugin, plan, done, profile.scheduler_name)
                if failure is not None:
                    break
            if failure is not None:
                self._failed(pod, decision, profile, failure)
                return
            await self.slots.acquire()  # _bind releases it
        except asyncio.CancelledError:
            self._expected.discard(pod.key)
            self._forget(pod, decision, profile)  # never leave an assumption behind
            raise
        await self._bind(pod, decision, profile, done)

    def _abandoned(self) -> Failure | None:
        if self.stopping.is_set():
            return Failure(Result.ABANDONED, "the operator is stopping")
        if not self.is_leader():
            return Failure(Result.ABANDONED, "not the leader any more")
        return None

    def _gone(self, pod: PodInfo) -> Failure | None:
        record = self.cluster.pods.get(pod.key)
        if record is None or (pod.uid and record.pod.uid and record.pod.uid != pod.uid):
            return Failure(Result.GONE, f'pod does not exist any more: pods "{pod.name}" not found')
        if not record.assumed:
            return Failure(Result.GONE, f"pod was bound to {record.node} meanwhile")
        return None

    async def _sleep(self, remaining: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(RECHECK, remaining)):
                await self.changed.wait()

    async def _wait_on_permit(self, pod: PodInfo, decision: Decision, profile: Profile) -> Failure | None:
        """kube's WaitOnPermit: until the plugins holding the pod allow it, one rejects it, or the
        earliest of their timeouts."""
        scheduler = self.scheduler
        waiting = scheduler.waiting.get(pod.key)
        if waiting is None:
            return None
        clock = asyncio.get_running_loop().time
        started = clock()
        waiting.on_done = self.changed.fire
        try:
            with self.changed.wanting(POD_EVENTS):
                while waiting.outcome is None:
                    stop = self._abandoned() or self._gone(pod)
                    if stop is not None:
                        return stop
                    remaining = waiting.deadline(started) - clock()
                    if remaining <= 0:
                        waiting.time_out()
                        break
                    await self._sleep(remaining)
        finally:
            scheduler.done_waiting(pod)
        assert waiting.outcome is not None
        if waiting.outcome.allowed:
            return None
        decision.permit = waiting.outcome
        return self._gone(pod) or self._permit_failure(decision, profile)

    def _permit_failure(self, decision: Decision, profile: Profile) -> Failure:
        permit = decision.permit
        assert permit is not None
        if permit.error:  # e.g. preempted while waiting: retried with backoff, not unschedulable
            return Failure(Result.FAILED, permit_message(permit))
        plugin = binding_points(profile).by_name.get(permit.plugin)
        events = plugin.events if isinstance(plugin, PermitPlugin) else frozenset()
        return Failure(Result.REJECTED, permit_message(permit), wake_on=events)

    async def _pre_bind(
        self, pod: PodInfo, plugin: PreBindPlugin[Any], plan: PreBind, done: list[Write], scheduler_name: str,
    ) -> Failure | None:
        """One plugin's PreBind: its writes, then its wait; on a failure every write that landed is
        undone. Counted in the plugin's metric family, if it has one."""
        family = self.metrics.pre_binds.get(plugin.metric)
        if family is not None:
            self._in_pre_bind[plugin.metric] += 1
        try:
            try:
                failure = await self._writes(pod, plugin, plan, done, scheduler_name)
            except Exception as error:  # a plugin's check broke: the binding fails, the operator goes on
                logger.exception("PreBind %s of %s failed", plugin.name, pod.key)
                failure = Failure(Result.FAILED, pre_bind_error(plugin.name, str(error)), wake_on=plugin.events)
            if failure is not None:
                await self.effects.undo(done, pod.key)
                done.clear()
        finally:
            if family is not None:
                self._in_pre_bind[plugin.metric] -= 1
        if family is not None:
            family[0].inc(result=Result.BOUND.value if failure is None else failure.result.value)
        return failure

    async def _writes(
        self, pod: PodInfo, plugin: PreBindPlugin[Any], plan: PreBind, done: list[Write], scheduler_name: str,
    ) -> Failure | None:
        written: dict[ObjectRef, str] = {}
        for write in plan.writes:
            abandoned = self._abandoned()
            if abandoned is not None:
                return abandoned
            result = await self.effects.write(write, pod.key)
            if not result.ok:
                message = pre_bind_error(plugin.name, result.message)
                return Failure(Result.FAILED, message, answered=result.answered, wake_on=plugin.events)
            written[write.target] = result.resource_version
            done.append(write)
            logger.debug("%s %s written for pod %s", write.call, write.target, pod.key)
        if plan.wait is not None:
            notice = plan.wait.notice
            if notice is not None:  # (e.g. DynamicResources' BindingConditionsPending)
                self.reporter.notice(pod, scheduler_name, notice.reason, notice.action, notice.type, notice.note)
            return await self._wait_for(pod, plugin, plan.wait, written)
        return None

    async def _wait_for(
        self, pod: PodInfo, plugin: PreBindPlugin[Any], wait: WaitFor, written: dict[ObjectRef, str]
    ) -> Failure | None:
        """Until the plugin's condition holds on the cluster the watches feed (never by polling)."""
        clock = asyncio.get_running_loop().time
        deadline = clock() + (self.pre_bind_timeout if wait.timeout is None else wait.timeout)
        with self.changed.wanting(wait.events | POD_EVENTS):
            while True:
                stop = self._abandoned() or self._gone(pod)
                if stop is not None:
                    return stop
                try:
                    if wait.check(self.cluster, written):
                        return None
                except PreBindError as error:
                    return Failure(Result.FAILED, pre_bind_error(plugin.name, str(error)), wake_on=plugin.events)
                remaining = deadline - clock()
                if remaining <= 0:
                    message = pre_bind_error(plugin.name, wait.timeout_message)
                    return Failure(Result.TIMEOUT, message, wake_on=plugin.events)
                await self._sleep(remaining)

    # ----------------------------------------------------------------- failures

    def _forget(self, pod: PodInfo, decision: Decision, profile: Profile) -> None:
        """Unreserve: the Permit plugins' and Reserve plugins' undo, and the pod's room on its node."""
        self.scheduler.unpermit(pod, decision, profile, self.cluster)
        self.scheduler.forget(pod, decision, profile, self.cluster)

    def _failed(
        self, pod: PodInfo, decision: Decision, profile: Profile, failure: Failure, from_now: bool = True
    ) -> None:
        key = pod.key
        expected = key in self._expected
        self._expected.discard(key)
        self._forget(pod, decision, profile)
        self.queue.wake(ClusterEvent.POD_DELETE)  # what it was assumed to hold is free again
        self.wakeup.set()
        if failure.result is Result.GONE:
            self.queue.remove(key)
            logger.debug("binding of %s dropped: %s", key, failure.message)
            return
        if failure.result is Result.ABANDONED or not self.is_leader():
            self.queue.retry_now(key)  # for the next term (or leader)
            logger.info("binding of %s abandoned: %s", key, failure.message)
            return
        if not failure.answered:
            self.unreachable(failure.message)
        reason = "Unschedulable" if failure.result is Result.REJECTED else "SchedulerError"
        nominated = bool(pod.nominated_node or expected)
        if nominated:  # as kube after a failed binding cycle: nominated nowhere, in the condition's patch
            self.clear_nomination(pod, (failure.message, reason))
        self.queue.backoff(key, failure.wake_on, from_now=from_now)
        if failure.result is Result.REJECTED:
            logger.info("pod %s rejected on %s: %s", key, decision.node, failure.message)
        else:
            logger.warning("binding of %s to %s failed: %s", key, decision.node, failure.message)
        self.reporter.failed(pod, profile.scheduler_name, failure.message, condition=not nominated, reason=reason)

    # ----------------------------------------------------------------- Bind, PostBind

    async def _bind(self, pod: PodInfo, decision: Decision, profile: Profile, done: list[Write]) -> None:
        key = pod.key
        node = decision.node
        assert node is not None
        try:
            if not self.is_leader():
                outcome = BindOutcome(BindResult.FAILED, "not the leader")
            else:
                self.bound(pod)  # before the answer: a kubelet may refuse the pod before it arrives here
                outcome = await self.binder.bind(pod.namespace, pod.name, pod.uid, node)
        except asyncio.CancelledError:
            self._expected.discard(key)
            self._forget(pod, decision, profile)  # never leave an assumption behind
            raise
        except Exception as error:
            outcome = BindOutcome(BindResult.FAILED, repr(error))
        finally:
            self.slots.release()
        result = outcome.result
        expected = key in self._expected
        self._expected.discard(key)
        self._bind_results[result].inc()
        if not outcome.answered:
            self.answering = False
        if result is BindResult.BOUND:
            self.answering = True
            self.queue.remove(key)  # stays assumed until the watch shows it bound
            self.reporter.scheduled(pod, node, profile.scheduler_name)
            self._post_bind(pod, decision, profile)
            return
        try:
            if done:
                await self.effects.undo(done, key)
        finally:
            self._forget(pod, decision, profile)  # (cancelled too: never leave an assumption behind)
        if result in (BindResult.CONFLICT, BindResult.GONE):
            self.queue.remove(key)
            logger.debug("bind of %s dropped (%s): %s", key, result.value, outcome.message)
            return
        if not self.is_leader():
            self.queue.retry_now(key)
            return
        if not outcome.answered:
            self.unreachable(outcome.message)
        if pod.nominated_node or expected:
            self.clear_nomination(pod, None)  # as kube after a failed bind: nominated nowhere
        self.queue.backoff(key)
        self.queue.wake(ClusterEvent.POD_DELETE)  # what it was assumed to hold is free again
        self.wakeup.set()
        logger.warning("bind of %s to %s failed: %s", key, node, outcome.message)
        self.reporter.failed(pod, profile.scheduler_name, f"Binding rejected: {outcome.message}", condition=False)

    def _post_bind(self, pod: PodInfo, decision: Decision, profile: Profile) -> None:
        """kube's PostBind: the plugins are told; what they ask to write is written, best effort."""
        if not self.points(profile).post_binds:  # (the default profile has none)
            return
        try:
            writes = self.scheduler.post_bind(pod, decision, profile, self.cluster)
        except Exception:
            logger.exception("PostBind of %s failed", pod.key)
            return
        if writes:
            self._spawn(self._post_bind_writes(pod, writes), self._post)

    async def _post_bind_writes(self, pod: PodInfo, writes: list[tuple[Any, Write]]) -> None:
        for plugin, write in writes:
            result = await self.effects.write(write, pod.key)
            if not result.ok:
                logger.info("PostBind %s of %s: %s: %s", plugin.name, pod.key, write.call, result.message)

    def post_filter_writes(self, pod: PodInfo, writes: tuple[Write, ...]) -> None:
        """What a PostFilter wrote trying (DynamicResources freeing a claim), in order, best effort,
        in a task: the pod is retried when the change comes back through the watch."""
        self._spawn(self._post_filter_writes(pod, writes), self._post)

    async def _post_filter_writes(self, pod: PodInfo, writes: tuple[Write, ...]) -> None:
        for write in writes:
            result = await self.effects.write(write, pod.key)
            if not result.ok:  # (a 409: the claim changed meanwhile; the next attempt looks again)
                logger.info("PostFilter of %s: %s %s: %s", pod.key, write.call, write.target, result.message)
                return
