"""What the cluster sees of a decision (API.md §3): events and the PodScheduled condition.

Everything is posted by a few workers from a bounded queue, never from the scheduling loop, so a
slow or failing events API cannot slow binds down; when the queue is full, reports are dropped
and counted (`placer_reports_dropped_total`), as client-go's event broadcaster drops them.

- `Scheduled` (Normal, action Binding): `Successfully assigned NS/NAME to NODE`.
- `FailedScheduling` (Warning, action Scheduling), note = the engine's message. A repeat of the
  same failure for the same pod does not create another Event: it bumps the existing Event's
  `series` {count, lastObservedTime}, PATCHed at most every `series_interval` seconds.
- `RejectedByKubelet` (Warning, action Binding) on a pod Placer bound that its node's kubelet
  refused: `Rejected by the kubelet on node NODE: OutOfcpu: Node didn't have enough resource: ...`
  (`placer.controller.informers.kubelet_rejections`, through `notice`).
- `Preempted` (Normal, action Preempting) on a pod deleted to make room for a higher-priority one:
  `Preempted by NS/NAME on node NODE`, `related` = that pod (`placer.controller.scheduling.preemption`).
- What a plugin's PreBind posts about the pod (`notice`: DynamicResources' Normal
  `BindingConditionsPending`, action Scheduling, `waiting for binding conditions for device on node N`).
- Condition `PodScheduled=False, reason=Unschedulable, message=...` (`reason=SchedulerError` when
  the failure came after the decision, e.g. its volumes could not be bound) through pods/status, written
  only when it differs from what the pod already shows (the watch tells us) or what we last wrote,
  with the resourceVersion the decision saw as a precondition (a pod bound meanwhile is left alone).
  A preemptor's condition goes with its nominatedNodeName in the preemption's own patch
  (`condition_entry`, `condition_written`): two writes would race on the precondition.

Events carry `reportingController: placer.dev/scheduler` and `reportingInstance:
<schedulerName>-<identity>`: events.k8s.io/v1 forbids the deprecated `source` field, so the
profile's scheduler name goes where client-go's recorder (which kube-scheduler uses) puts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from placer.controller.lifecycle.leader import micro_time
from placer.controller.metrics import Metrics
from placer.controller.transport import ApiError, Reply
from placer.engine.objects import PodInfo

__all__ = ["REPORTING_CONTROLLER", "Condition", "ReportSink", "Reporter", "pod_scheduled_condition", "scheduled_event"]

logger = logging.getLogger("placer.reporting")

REPORTING_CONTROLLER = "placer.dev/scheduler"
MAX_NOTE = 1024
MAX_INSTANCE = 128
MAX_NAME = 253

Job = Callable[[], Awaitable[None]]


class ReportSink(Protocol):
    """The calls reporting makes (KubeClient has them; tests fake them)."""

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> Reply: ...

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply: ...

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply: ...


@dataclass(frozen=True, slots=True)
class Condition:
    """A PodScheduled condition as written or observed."""

    status: str
    reason: str
    message: str
    last_transition: str = ""

    def same(self, other: Condition | None) -> bool:
        return other is not None and (self.status, self.reason, self.message) == (
            other.status, other.reason, other.message)


def pod_scheduled_condition(raw_pod: Mapping[str, Any]) -> Condition | None:
    """The PodScheduled condition a pod object carries, if any."""
    status = raw_pod.get("status")
    if not isinstance(status, Mapping):
        return None
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return Condition(
                str(condition.get("status") or ""), str(condition.get("reason") or ""),
                str(condition.get("message") or ""), str(condition.get("lastTransitionTime") or ""),
            )
    return None


def _now_seconds() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event_name(pod_name: str, now_ns: int | None = None) -> str:
    """client-go's `<regarding name>.<unix nanos in hex>`, kept within a name's 253 characters."""
    suffix = f".{time.time_ns() if now_ns is None else now_ns:x}"
    return pod_name[: MAX_NAME - len(suffix)] + suffix


_second: tuple[int, str] = (-1, "")  # the last second formatted, as (unix seconds, text)


def _micro_time(now_ns: int) -> str:
    """A MicroTime (RFC 3339 in UTC with microseconds, as `micro_time`) of a `time.time_ns()`; the
    seconds' text is formatted once a second."""
    global _second
    seconds, nanos = divmod(now_ns, 1_000_000_000)
    if _second[0] != seconds:
        _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{_second[1]}.{nanos // 1000:06d}Z"


@dataclass(slots=True)
class _Series:
    """One FailedScheduling Event of one pod, and how often it recurred."""

    name: str
    uid: str
    note: str
    count: int = 1
    last_observed: str = ""
    created: bool = False
    busy: bool = False  # a create or patch of it is queued or running
    sent_at: float = 0.0
    sent_count: int = 1


class Reporter:
    def __init__(
        self,
        sink: ReportSink,
        metrics: Metrics,
        *,
        identity: str,
        limit: int = 10_000,
        series_interval: float = 30.0,
        active: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.metrics = metrics
        self.identity = identity
        self.series_interval = series_interval
        self._active = active
        self._clock = clock
        self._outbox: asyncio.Queue[Job] = asyncio.Queue(maxsize=limit)
        self._series: dict[str, _Series] = {}  # pod key -> its FailedScheduling event
        self._observed: dict[str, Condition] = {}  # pod key -> condition the pod showed last
        self._written: dict[str, Condition] = {}  # pod key -> condition we wrote last
        # pod key -> (namespace, name, resourceVersion, condition) still to write
        self._desired: dict[str, tuple[str, str, str, Condition]] = {}
        self._condition_jobs: set[str] = set()
        self._running = 0
        self._instances: dict[str, str] = {}  # schedulerName -> the events' reportingInstance

    # ----------------------------------------------------------------- from the watch

    def observe_condition(self, key: str, condition: Condition | None) -> None:
        """What an unbound pod shows, so that a restart does not rewrite an unchanged condition."""
        if condition is None:
            self._observed.pop(key, None)
        else:
            self._observed[key] = condition

    def reset(self) -> None:
        """Leadership lost: queued reports are dropped by the workers and every memory goes."""
        self._series.clear()
        self._written.clear()
        self._desired.clear()
        self._condition_jobs.clear()

    def forget(self, key: str) -> None:
        """The pod is bound or gone: drop every memory of it."""
        self._series.pop(key, None)
        self._observed.pop(key, None)
        self._written.pop(key, None)
        self._desired.pop(key, None)

    # ----------------------------------------------------------------- from the loop

    def scheduled(self, pod: PodInfo, node: str, scheduler_name: str) -> None:
        self.forget(pod.key)
        event = scheduled_event(pod, node, self._instance(scheduler_name))
        self._submit(lambda: self._create(pod.namespace, event, None))

    def failed(
        self, pod: PodInfo, scheduler_name: str, message: str, *, condition: bool = True, reason: str = "Unschedulable"
    ) -> None:
        """An unschedulable (or unbindable) pod: one event per distinct message, and the condition
        (`reason` Unschedulable, or kube's SchedulerError for a failure after the decision)."""
        if condition:
            self._want_condition(pod, message, reason)
        key = pod.key
        series = self._series.get(key)
        if series is None or series.note != message or series.uid != pod.uid:
            series = self._series[key] = _Series(_event_name(pod.name), pod.uid, message, busy=True)
            event = self._event(pod, scheduler_name, "FailedScheduling", "Scheduling", "Warning", message, series.name)
            if not self._submit(lambda: self._create(pod.namespace, event, series)):
                self._series.pop(key, None)
            return
        series.count += 1
        series.last_observed = micro_time()
        if series.created and not series.busy and self._clock() - series.sent_at >= self.series_interval:
            series.busy = True
            if not self._submit(lambda: self._patch_series(pod.namespace, series)):
                series.busy = False

    def preempted(
        self, victim: PodInfo, preemptor: PodInfo, node: str, scheduler_name: str, *, in_memory: bool = False
    ) -> None:
        """A victim deleted to make room for `preemptor` on `node` (kube's `Preempted` event); or,
        `in_memory`, one whose wait on Permit was ended instead (it was not bound yet)."""
        note = f"Preempted by {preemptor.namespace}/{preemptor.name} on node {node}"
        if in_memory:
            note += " (in kube-scheduler memory)."
        event = self._event(victim, scheduler_name, "Preempted", "Preempting", "Normal", note, _event_name(victim.name))
        event["related"] = _reference(preemptor, version=False)
        self._submit(lambda: self._create(victim.namespace, event, None))

    def notice(self, pod: PodInfo, scheduler_name: str, reason: str, action: str, kind: str, note: str) -> None:
        """An event a plugin's PreBind asks for (kube's plugins' `EventRecorder().Eventf` of the pod)."""
        event = self._event(pod, scheduler_name, reason, action, kind, note, _event_name(pod.name))
        self._submit(lambda: self._create(pod.namespace, event, None))

    def condition_entry(
        self, pod: PodInfo, message: str, reason: str = "Unschedulable"
    ) -> tuple[Condition, dict[str, Any]]:
        """The PodScheduled=False condition of a failure, as an entry of `status.conditions`, for a
        caller that writes it along with more of the pod's status (a preemptor's nominatedNodeName,
        in one patch as kube's `updatePod`); tell `condition_written` once it is written."""
        current = self._desired.get(pod.key)
        known = current[3] if current else self._written.get(pod.key) or self._observed.get(pod.key)
        since = known.last_transition if known is not None and known.status == "False" else ""
        condition = Condition("False", reason, message, since or _now_seconds())
        return condition, _condition_entry(condition)

    def condition_written(self, key: str, condition: Condition) -> None:
        """Someone else wrote this pod's PodScheduled condition: nothing older is to be written."""
        self._written[key] = condition
        self._desired.pop(key, None)

    def _instance(self, scheduler_name: str) -> str:
        """The events' `reportingInstance` for a profile's schedulerName."""
        instance = self._instances.get(scheduler_name)
        if instance is None:
            instance = self._instances[scheduler_name] = f"{scheduler_name}-{self.identity}"[:MAX_INSTANCE]
        return instance

    def _event(
        self, pod: PodInfo, scheduler_name: str, reason: str, action: str, kind: str, note: str, name: str,
    ) -> dict[str, Any]:
        return _event_body(pod, self._instance(scheduler_name), reason, action, kind, note, name)

    def _want_condition(self, pod: PodInfo, message: str, reason: str = "Unschedulable") -> None:
        key = pod.key
        pending = self._desired.get(key)
        current = pending[3] if pending else self._written.get(key) or self._observed.get(key)
        wanted = Condition("False", reason, message)
        if wanted.same(current):
            return
        since = current.last_transition if current is not None and current.status == "False" else ""
        self._desired[key] = (pod.namespace, pod.name, pod.resource_version,
                              Condition("False", reason, message, since or _now_seconds()))
        if key not in self._condition_jobs:
            self._condition_jobs.add(key)
            if not self._submit(lambda: self._write_conditions(key)):
                self._condition_jobs.discard(key)
                self._desired.pop(key, None)

    # ----------------------------------------------------------------- the workers

    def _submit(self, job: Job) -> bool:
        try:
            self._outbox.put_nowait(job)
        except asyncio.QueueFull:
            self.metrics.reports_dropped.inc()
            return False
        return True

    @property
    def backlog(self) -> int:
        return self._outbox.qsize() + self._running

    async def worker(self) -> None:
        """Run queued reports forever; several of these run side by side."""
        while True:
            job = await self._outbox.get()
            self._running += 1
            try:
                if self._active():
                    await job()
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                self.metrics.api_errors.inc(call="report")
                logger.debug("report failed: %s", error)
            except Exception:
                logger.exception("report failed")
            finally:
                self._running -= 1
                self._outbox.task_done()

    async def drain(self, timeout: float) -> None:
        """Wait (a bounded time) for queued reports to go out, e.g. before shutting down."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._outbox.join()

    async def _create(self, namespace: str, event: dict[str, Any], series: _Series | None) -> None:
        try:
            reply = await self.sink.create_event(namespace, event)
        finally:
            if series is not None:
                series.busy = False
        if not reply.ok and not (reply.status == 409 and reply.resent):  # (409 then: the first attempt landed)
            self.metrics.api_errors.inc(call="create_event")
            logger.debug("event %s/%s: HTTP %d %s", namespace, event["metadata"]["name"], reply.status, reply.message())
            if series is not None and self._series.get(series_key(event)) is series:
                del self._series[series_key(event)]
            return
        if series is not None:
            series.created = True
            series.sent_at = self._clock()

    async def _patch_series(self, namespace: str, series: _Series) -> None:
        count, observed = series.count, series.last_observed or micro_time()
        try:
            reply = await self.sink.patch_event(
                namespace, series.name, {"series": {"count": count, "lastObservedTime": observed}}
            )
        finally:
            series.busy = False
        series.sent_at = self._clock()
        if reply.ok:
            series.sent_count = count
            return
        self.metrics.api_errors.inc(call="patch_event")
        if reply.status == 404:  # the event expired: the next failure creates a fresh one
            for key, known in list(self._series.items()):
                if known is series:
                    del self._series[key]

    async def _write_conditions(self, key: str) -> None:
        try:
            while (item := self._desired.pop(key, None)) is not None:
                namespace, name, version, condition = item
                patch: dict[str, Any] = {"status": {"conditions": [_condition_entry(condition)]}}
                if version:
                    # a precondition: never mark a pod that changed since (e.g. got bound) unschedulable
                    patch["metadata"] = {"resourceVersion": version}
                reply = await self.sink.patch_pod_status(namespace, name, patch)
                if reply.ok:
                    self._written[key] = condition
                elif reply.status == 404:
                    self.forget(key)
                elif reply.status == 409:
                    logger.debug("condition of %s not written: the pod changed meanwhile", key)
                else:
                    self.metrics.api_errors.inc(call="patch_pod_status")
                    logger.debug("condition of %s: HTTP %d %s", key, reply.status, reply.message())
        finally:
            self._condition_jobs.discard(key)


def _condition_entry(condition: Condition) -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastProbeTime": None,
        "lastTransitionTime": condition.last_transition,
    }


def scheduled_event(pod: PodInfo, node: str, instance: str) -> dict[str, Any]:
    """The `Scheduled` event of a pod bound to `node` (kube-scheduler's words), named and timed as
    client-go's recorder does; `instance` is its `reportingInstance`."""
    now = time.time_ns()
    note = f"Successfully assigned {pod.namespace}/{pod.name} to {node}"
    return _event_body(pod, instance, "Scheduled", "Binding", "Normal", note, _event_name(pod.name, now), now)


def _event_body(
    pod: PodInfo, instance: str, reason: str, action: str, kind: str, note: str, name: str, now_ns: int | None = None,
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event regarding `pod`, with every field the API server requires."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": pod.namespace},
        "eventTime": micro_time() if now_ns is None else _micro_time(now_ns),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "note": note[:MAX_NOTE],
        "type": kind,
        "regarding": _reference(pod),
    }


def _reference(pod: PodInfo, version: bool = True) -> dict[str, Any]:
    """An event's `regarding` (or `related`) pod."""
    reference = {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name}
    if pod.uid:
        reference["uid"] = pod.uid
    if version and pod.resource_version:
        reference["resourceVersion"] = pod.resource_version
    return reference


def series_key(event: Mapping[str, Any]) -> str:
    """The pod key an event is about."""
    regarding = event["regarding"]
    return f"{regarding['namespace']}/{regarding['name']}"
