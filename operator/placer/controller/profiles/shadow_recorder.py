"""One shadow profile's recorder (`placer.controller.profiles.shadow` tells the whole story): the pods of
the scheduler it shadows, waiting for a decision or decided, each decision compared with the node
that scheduler bound the pod to, and the counts and last disagreements for `status.shadow`."""

from __future__ import annotations

import dataclasses
import datetime as dt
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
    "COUNTS",
    "KEPT_DISAGREEMENTS",
    "OUTCOMES",
    "REMEMBERED",
    "Choice",
    "Disagreement",
    "NodeTable",
    "ShadowRecorder",
    "agreement",
    "decision_profile",
    "utc_now",
]

OUTCOMES = ("same", "equal", "different", "unschedulable")
COUNTS = ("decisions", *OUTCOMES)
KEPT_DISAGREEMENTS = 100
REMEMBERED = 10_000


def utc_now() -> str:
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
        now: Callable[[], str] = utc_now,
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
