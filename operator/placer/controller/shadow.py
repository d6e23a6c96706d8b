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
the status subresource (`SchedulerState.write_shadow_statuses`, at most once per interval), and
counting resumes from the status the object already shows (at startup and at every new term).
Memory is bounded: a recorder remembers at most `limit` pods (waiting or decided); beyond that
the oldest is forgotten (`placer_shadow_dropped_total`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from placer.controller.metrics import Metrics
from placer.engine.cluster import ClusterState
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.runtime import Scheduler

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

OUTCOMES = ("same", "equal", "different", "unschedulable")
COUNTS = ("decisions", *OUTCOMES)
KEPT_DISAGREEMENTS = 100
REMEMBERED = 10_000


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def agreement(agreed: int, decisions: int) -> str:
    """`97.1% of 1,204`: (same + equal) / decisions, rounded down to a tenth so that 100.0% means
    no disagreement at all."""
    if decisions <= 0:
        return "no decisions yet"
    tenths = agreed * 1000 // decisions
    return f"{tenths // 10}.{tenths % 10}% of {decisions:,}"


def decision_profile(profile: Profile) -> Profile:
    """The profile a shadow decides with: every feasible node scored, no post-filter (no preemption)."""
    return dataclasses.replace(profile, percentage_of_nodes_to_score=100, post_filters=())


@dataclass(frozen=True, slots=True, eq=False)
class NodeTable:
    """Node names by slot when choices were made; choices share one while the nodes stay the same."""

    names: tuple[str | None, ...]
    index: dict[str, int]

    @classmethod
    def of(cls, cluster: ClusterState) -> NodeTable:
        names = tuple(cluster.names[: cluster.size])
        return cls(names, {name: slot for slot, name in enumerate(names) if name is not None})


@dataclass(frozen=True, slots=True, eq=False)
class Choice:
    """A shadow decision: the best node (None: no node fits, `message` says why) and every feasible
    node's total by slot of `table` (-1 where the filters rejected the node)."""

    node: str | None
    message: str | None = None
    totals: np.ndarray | None = None
    table: NodeTable | None = None

    def total(self, node: str | None) -> int | None:
        """Placer's total for `node`; None when its filters rejected it (or it was not there)."""
        if node is None or self.totals is None or self.table is None:
            return None
        slot = self.table.index.get(node)
        if slot is None or slot >= self.totals.size or self.totals[slot] < 0:
            return None
        return int(self.totals[slot])


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One entry of `status.shadow.disagreements` (the format `placer explain --shadow` reads)."""

    pod: str
    outcome: str
    bound_to: str
    placer: str | None
    bound_total: int | None
    placer_total: int | None
    message: str | None
    time: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod, "outcome": self.outcome, "boundTo": self.bound_to, "placer": self.placer,
            "boundTotal": self.bound_total, "placerTotal": self.placer_total, "message": self.message,
            "time": self.time,
        }

    @classmethod
    def parse(cls, raw: Any) -> Disagreement | None:
        """An entry as the object shows it; None when it is not one (hand-edited, older format)."""
        if not isinstance(raw, Mapping):
            return None
        pod, outcome, bound_to, when = raw.get("pod"), raw.get("outcome"), raw.get("boundTo"), raw.get("time")
        if not (isinstance(pod, str) and outcome in OUTCOMES and isinstance(bound_to, str) and isinstance(when, str)):
            return None
        placer, message = raw.get("placer"), raw.get("message")
        return cls(pod, outcome, bound_to, placer if isinstance(placer, str) else None,
                   _count(raw.get("boundTotal")), _count(raw.get("placerTotal")),
                   message if isinstance(message, str) else None, when)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ShadowRecorder:
    """One shadow profile: the pods it waits to decide, its choices until they are bound, its counts."""

    def __init__(
        self, name: str, profile: Profile, metrics: Metrics, *, limit: int = REMEMBERED,
        now: Callable[[], str] = _now,
    ) -> None:
        assert profile.shadow_of is not None
        self.name = name
        self.target: str = profile.shadow_of
        self.profile = decision_profile(profile)
        self.source = profile  # the registry's compiled version this one was made from
        self.metrics = metrics
        self.limit = max(limit, 1)
        self._now = now
        self.scheduler = Scheduler()  # its own start index: the active profiles' rotation is untouched
        self.counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.disagreements: deque[Disagreement] = deque(maxlen=KEPT_DISAGREEMENTS)
        self.waiting: OrderedDict[str, PodInfo] = OrderedDict()  # created, not decided yet
        self.late: dict[str, str] = {}  # of those, already bound: key -> node
        self.choices: OrderedDict[str, Choice] = OrderedDict()  # decided, not bound yet
        self.observed: Mapping[str, Any] | None = None  # status.shadow as the object last showed it
        self.dirty = True  # the status is to be written

    # ----------------------------------------------------------------- profile and status

    def update(self, profile: Profile) -> bool:
        """A new compiled version; True when it shadows another scheduler now (memory cleared)."""
        assert profile.shadow_of is not None
        self.source = profile
        self.profile = decision_profile(profile)
        if profile.shadow_of == self.target:
            return False
        self.target = profile.shadow_of
        self.forget_all()
        return True

    def forget_all(self) -> None:
        """Drop every pod in memory (leadership lost, or another scheduler shadowed)."""
        self.waiting.clear()
        self.late.clear()
        self.choices.clear()

    def resume(self, status: Mapping[str, Any] | None) -> None:
        """Count on from what the object shows (a restart, a new term), not from zero."""
        status = status if isinstance(status, Mapping) else {}
        self.counts = {key: _count(status.get(key)) or 0 for key in COUNTS}
        entries = status.get("disagreements")
        parsed = (Disagreement.parse(raw) for raw in entries) if isinstance(entries, list) else ()
        self.disagreements = deque((d for d in parsed if d is not None), maxlen=KEPT_DISAGREEMENTS)
        self.dirty = self.status() != status

    def status(self) -> dict[str, Any]:
        """`status.shadow` (API.md §5)."""
        counts = self.counts
        return {
            **counts,
            "agreement": agreement(counts["same"] + counts["equal"], counts["decisions"]),
            "disagreements": [d.as_dict() for d in self.disagreements],
        }

    # ----------------------------------------------------------------- pods (from the watch)

    def created(self, pod: PodInfo) -> bool:
        """A pending pod of the shadowed scheduler; True when it waits for a decision now."""
        key = pod.key
        if key in self.choices or key in self.late:
            return False
        if key in self.waiting:
            self.waiting[key] = pod  # its latest version, in its place
            return True
        if len(self.waiting) + len(self.choices) >= self.limit:
            self._drop_oldest()
        self.waiting[key] = pod
        return True

    def _drop_oldest(self) -> None:
        """Over the limit: forget the pod decided longest ago (likely one nothing can place), else the
        oldest waiting one."""
        if self.choices:
            self.choices.popitem(last=False)
        else:
            key, _ = self.waiting.popitem(last=False)
            self.late.pop(key, None)
        self.metrics.shadow_dropped.inc(profile=self.name)

    def bound(self, key: str, node: str) -> str | None:
        """The shadowed scheduler bound the pod: its outcome, if it was decided (else it is decided
        later, without the pod, and compared then)."""
        choice = self.choices.pop(key, None)
        if choice is not None:
            return self.record(key, node, choice)
        if key in self.waiting:
            self.late[key] = node
        return None

    def deleted(self, key: str) -> None:
        """Gone before it was bound: nothing to record. (A pod bound first is still decided.)"""
        self.choices.pop(key, None)
        if key not in self.late:
            self.waiting.pop(key, None)

    # ----------------------------------------------------------------- decisions (from the loop)

    def decide_next(self, cluster: ClusterState, table: NodeTable) -> bool:
        """Decide the oldest waiting pod; False when none waits."""
        if not self.waiting:
            return False
        key, pod = self.waiting.popitem(last=False)
        node = self.late.pop(key, None)
        record = cluster.pods.get(key)
        if record is not None:  # bound (or assumed by an active profile) before it was decided
            with cluster.without([record]):
                choice = self.decide(pod, cluster, table)
        else:
            choice = self.decide(pod, cluster, table)
        if node is None:
            self.choices[key] = choice
        else:
            self.metrics.shadow_late.inc(profile=self.name)
            self.record(key, node, choice)
        return True

    def decide(self, pod: PodInfo, cluster: ClusterState, table: NodeTable) -> Choice:
        """The shadow's choice for `pod` on `cluster` as it is; reads, never writes."""
        decision = self.scheduler.schedule(pod, self.profile, cluster, top=0)
        weighed = decision.weighed
        if decision.node is None or weighed is None:
            return Choice(None, decision.full_message or "unschedulable")
        totals = np.full(len(table.names), -1, dtype=np.int32)
        totals[weighed.slots] = weighed.totals
        return Choice(decision.node, None, totals, table)

    def record(self, key: str, node: str, choice: Choice) -> str:
        """Count one comparison; keep it among the disagreements unless Placer agreed."""
        bound_total = choice.total(node)
        if choice.node is None:
            outcome = "unschedulable"
        elif node == choice.node:
            outcome = "same"
        elif bound_total is not None and bound_total == choice.total(choice.node):
            outcome = "equal"
        else:
            outcome = "different"
        self.counts["decisions"] += 1
        self.counts[outcome] += 1
        if outcome in ("different", "unschedulable"):
            self.disagreements.append(Disagreement(
                key, outcome, node, choice.node, bound_total, choice.total(choice.node), choice.message,
                self._now()))
        self.metrics.shadow_decisions.inc(profile=self.name, outcome=outcome)
        self.dirty = True
        return outcome


class Shadows:
    """Every shadow profile's recorder, by profile name and by the scheduler name it shadows."""

    def __init__(self, metrics: Metrics, *, limit: int = REMEMBERED, now: Callable[[], str] = _now) -> None:
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

