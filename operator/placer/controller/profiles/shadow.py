"""Shadow profiles (API.md §5): decide for another scheduler's pods, never act, and keep score.

A profile with `spec.mode: Shadow` owns no pods (its own schedulerName is never served); it
watches the pods whose `spec.schedulerName` is its `spec.shadowOf` (e.g. `default-scheduler`):

- created (seen pending, unbound, not gated): queued for a decision (`ShadowRecorder.created`);
- decided by the scheduling loop at a lower priority than active work (`ShadowWork`), with the
  shadow's own plugins against the cluster as it is then. Every feasible node is scored (the
  profile's percentageOfNodesToScore is not applied, so whichever node the other scheduler picks
  has a total) and no post-filter runs (a shadow never preempts). The choice kept is the best
  node and every feasible node's total, or the failure message when no node fits;
- bound (the watch shows `spec.nodeName`): compared, once — `same` (Placer's node), `equal`
  (another node of Placer's best total), `different`, or `unschedulable` (Placer found no node);
- deleted before it was bound: forgotten, nothing recorded;
- bound before its decision was taken (active work came first): decided then, against the
  cluster without that pod (`ClusterState.without`: as if it were still pending), and compared
  at once; `placer_shadow_late_decisions_total` counts these.

Nothing here writes to pods, assumes a pod or reserves anything: a decision only reads the
cluster. The counts and the last 100 disagreements go to the profile's `status.shadow` through
the status subresource (`StatusWriter.shadows_forever`, at most once per interval), and
counting resumes from the status the object already shows (at startup and at every new term).
Memory is bounded: a recorder remembers at most `limit` pods (waiting or decided); beyond that
the oldest is forgotten (`placer_shadow_dropped_total`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from placer.controller.metrics import Metrics
from placer.controller.profiles.shadow_recorder import (
    KEPT_DISAGREEMENTS,
    OUTCOMES,
    REMEMBERED,
    Choice,
    Disagreement,
    NodeTable,
    ShadowRecorder,
    agreement,
    decision_profile,
    utc_now,
)
from placer.engine.cluster import ClusterState
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile

__all__ = [
    "KEPT_DISAGREEMENTS",
    "OUTCOMES",
    "Choice",
    "Disagreement",
    "NodeTable",
    "ShadowRecorder",
    "ShadowWork",
    "Shadows",
    "agreement",
    "decision_profile",
]


class Shadows:
    """Every shadow profile's recorder, by profile name and by the scheduler name it shadows."""

    def __init__(self, metrics: Metrics, *, limit: int = REMEMBERED, now: Callable[[], str] = utc_now) -> None:
        self.metrics = metrics
        self.limit = limit
        self._now = now
        self.recorders: dict[str, ShadowRecorder] = {}
        self._by_target: dict[str, list[ShadowRecorder]] = {}
        self._retired: set[str] = set()  # no longer shadows: their status.shadow is to be removed
        self._table: NodeTable | None = None
        self._table_version = -1
        self._turn = 0  # round robin over recorders with pods waiting
        self.changed = asyncio.Event()  # a status is to be written
        metrics.shadow_waiting.source = lambda: [
            ({"profile": name}, len(recorder.waiting)) for name, recorder in self.recorders.items()]

    # ----------------------------------------------------------------- profiles

    def sync(self, profiles: Mapping[str, Profile]) -> list[str]:
        """Follow the registry's shadow profiles (name -> last good compiled version); returns the
        scheduler names newly shadowed, whose pending pods are to be queued."""
        fresh: list[str] = []
        for name in [name for name in self.recorders if name not in profiles]:
            del self.recorders[name]
            self._retired.add(name)  # Active now (or deleted: the write then finds nothing)
            self.changed.set()
        for name, profile in profiles.items():
            recorder = self.recorders.get(name)
            if recorder is None:
                self._retired.discard(name)
                recorder = self.recorders[name] = ShadowRecorder(
                    name, profile, self.metrics, limit=self.limit, now=self._now)
                fresh.append(recorder.target)
            elif recorder.source is not profile and recorder.update(profile):
                fresh.append(recorder.target)
        self._by_target = {}
        for recorder in self.recorders.values():
            self._by_target.setdefault(recorder.target, []).append(recorder)
        if fresh:
            self.changed.set()
        return sorted(set(fresh))

    def observe_status(self, name: str, status: Any) -> None:
        """`status.shadow` as the watch shows it; a recorder that never counted starts from it."""
        recorder = self.recorders.get(name)
        if recorder is None:
            return
        first = recorder.observed is None
        recorder.observed = status if isinstance(status, Mapping) else {}
        if first:
            recorder.resume(recorder.observed)
            if recorder.dirty:
                self.changed.set()

    def start_term(self) -> None:
        """A new term of leadership: count on from what each object shows (another leader may have
        counted meanwhile); every status is checked once."""
        for recorder in self.recorders.values():
            recorder.resume(recorder.observed)
            recorder.dirty = True
        self.changed.set()

    def forget_all(self) -> None:
        for recorder in self.recorders.values():
            recorder.forget_all()

    # ----------------------------------------------------------------- pods

    def watching(self, scheduler_name: str) -> bool:
        return scheduler_name in self._by_target

    def created(self, pod: PodInfo) -> bool:
        """True when some recorder waits to decide it now."""
        queued = False
        for recorder in self._by_target.get(pod.scheduler_name, ()):
            queued = recorder.created(pod) or queued
        return queued

    def bound(self, pod: PodInfo) -> None:
        for recorder in self._by_target.get(pod.scheduler_name, ()):
            if recorder.bound(pod.key, pod.node_name) is not None:
                self.changed.set()

    def deleted(self, key: str) -> None:
        for recorder in self.recorders.values():
            recorder.deleted(key)

    @property
    def waiting(self) -> int:
        return sum(len(recorder.waiting) for recorder in self.recorders.values())

    def decide_next(self, cluster: ClusterState) -> bool:
        """One shadow decision, taking the recorders in turn; False when none has a pod waiting."""
        recorders = [recorder for recorder in self.recorders.values() if recorder.waiting]
        if not recorders:
            return False
        self._turn = (self._turn + 1) % len(recorders)
        recorder = recorders[self._turn]
        late = bool(recorder.late) and next(iter(recorder.waiting)) in recorder.late
        recorder.decide_next(cluster, self._node_table(cluster))
        if late:
            self.changed.set()
        return True

    def _node_table(self, cluster: ClusterState) -> NodeTable:
        """The current names by slot, the same object while they do not change."""
        if self._table is None or self._table_version != cluster.static_version:
            table = NodeTable.of(cluster)
            if self._table is None or table.names != self._table.names:
                self._table = table
            self._table_version = cluster.static_version
        return self._table

    # ----------------------------------------------------------------- status

    def status_patches(self) -> list[tuple[str, dict[str, Any]]]:
        """The `status.shadow` patches to write now (clears the marks; `unwritten` sets one back); a
        profile that is no longer a shadow has its `status.shadow` removed (an empty AGREEMENT)."""
        patches: list[tuple[str, dict[str, Any]]] = [
            (name, {"status": {"shadow": None}}) for name in sorted(self._retired)]
        self._retired.clear()
        for name, recorder in sorted(self.recorders.items()):
            if recorder.dirty:
                recorder.dirty = False
                patches.append((name, {"status": {"shadow": recorder.status()}}))
        return patches

    def unwritten(self, name: str, patch: Mapping[str, Any]) -> None:
        """A write failed: try again at the next interval."""
        recorder = self.recorders.get(name)
        if recorder is not None:
            recorder.dirty = True
        elif (patch.get("status") or {}).get("shadow", {}) is None:
            self._retired.add(name)
        self.changed.set()


class ShadowWork:
    """When the scheduling loop takes shadow decisions: in its idle time, in slices of `time_slice`
    seconds; while active pods are ready, only within `share` of the time (a budget that grows
    with the time passed, up to `burst`, and shrinks by each decision's duration), so shadow
    profiles never hold a bind and cost the active profiles at most about `share` of their time."""

    def __init__(
        self, shadows: Shadows, cluster: ClusterState, *, share: float = 0.05, time_slice: float = 0.002,
        burst: float = 0.002, clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.shadows = shadows
        self.cluster = cluster
        self.share = share
        self.time_slice = time_slice
        self.burst = burst
        self._clock = clock
        self._budget = 0.0
        self._since = clock()

    def idle(self) -> bool:
        """Nothing active is ready: decide for up to one slice; True when anything was decided."""
        started = self._clock()
        decided = False
        while self.shadows.decide_next(self.cluster):
            decided = True
            if self._clock() - started >= self.time_slice:
                break
        self._since = self._clock()
        return decided

    def busy(self) -> None:
        """Between two active pods: one decision if the budget allows."""
        now = self._clock()
        self._budget = min(self.burst, self._budget + self.share * (now - self._since))
        self._since = now
        if self._budget <= 0 or not self.shadows.waiting:
            return
        if self.shadows.decide_next(self.cluster):
            self._since = self._clock()
            self._budget -= self._since - now

