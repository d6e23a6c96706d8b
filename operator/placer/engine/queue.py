"""The scheduling queue: priority order, backoff for pods that failed, prompt retries on change.

Pure and clock-injected, so its timing is tested without sleeping. Pods wait in one of three
places, as in kube-scheduler:

- *active*: ready now, popped highest `spec.priority` first, then oldest, then by name;
- *waiting*: failed an attempt, ready again after a backoff of 1 s doubling to 10 s (kube's
  unschedulable pods);
- *moved*: waiting, but a change that may help it came (kube's backoffQ): popped as soon as no
  active pod is ready (kube's SchedulerPopFromBackoffQ, on by default since v1.33), else ready
  once it has waited the initial backoff since its last attempt, so a busy cluster does not
  hot-loop it. Only a pod the filters rejected is popped early: one that failed otherwise (an
  error, a preemptor whose victims' deletions may not have been seen yet, a gang member) keeps
  that floor, as before;
- *in flight*: popped and being decided or bound; updates to it are kept for its next attempt.

Which changes move a waiting pod is kube's queueing hints: a cluster change (`wake(event, old,
new)`) is offered to the pod only if one of the filters that rejected it lists the event
(`FilterPlugin.events`, kube's EventsToRegister), and moves it only if one of those answers yes
(`FilterPlugin.queueing_hint`, kube's QueueingHintFn): a pod short of cpu is not retried because a
pod was added somewhere, one waiting for an anti-affinity peer to leave is, when it leaves. The
pod's own update (`wake_pod`, with kube's `PodSchedulingPropertiesChange` events from
`pod_update_events`: a toleration added, its labels or requests changed) is asked of the same
plugins. Each waiting pod is moved at most once per attempt: a stream of events costs nothing more.

Because the longest backoff is 10 s, a waiting pod is retried at least that often even when
nothing wakes it: that is the periodic flush.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placer.engine.framework import ClusterEvent
from placer.engine.objects import PodInfo

if TYPE_CHECKING:
    from placer.engine.framework import FilterPlugin

__all__ = ["QueuedPod", "SchedulingQueue", "pod_update_events", "queue_order"]


def pod_update_events(old: PodInfo, new: PodInfo) -> tuple[str, ...]:
    """kube's `PodSchedulingPropertiesChange` for a pending pod's own update: what changed that a
    plugin's hint may care about (labels, requests lowered or dropped, tolerations, generated
    claims); () for anything else (kube's plain Pod/Update, which no plugin registers)."""
    events: list[str] = []
    if old.labels != new.labels:
        events.append(ClusterEvent.POD_LABEL)
    if any(amount > new.requests.get(name, -1) for name, amount in old.requests.items()):
        events.append(ClusterEvent.POD_SCALE_DOWN)
    if len(old.tolerations) != len(new.tolerations):  # (kube compares the count: only additions are allowed)
        events.append(ClusterEvent.POD_TOLERATION)
    if old.resource_claims != new.resource_claims:
        events.append(ClusterEvent.POD_GENERATED_CLAIM)
    return tuple(events)


def queue_order(pod: PodInfo) -> tuple[int, float, str]:
    """Higher priority first, then older, then namespace/name."""
    return (-pod.priority, pod.created, pod.key)


@dataclass(slots=True)
class QueuedPod:
    pod: PodInfo
    attempts: int = 0
    last_attempt: float = float("-inf")
    ready_at: float = float("-inf")
    ticket: int = 0  # invalidates stale heap entries
    state: str = "active"  # active | waiting | in_flight
    wake_on: frozenset[str] = frozenset()  # events that may help it (empty: any)
    #: the filters that rejected it (kube's unschedulable plugins): asked whether an event helps
    rejectors: tuple[FilterPlugin[Any], ...] = ()
    #: the events of `wake_on` no rejector registered (a victim gone, its group changed)
    extra: frozenset[str] = frozenset()
    #: waiting, but an event may have helped (kube's backoffQ): popped when no active pod is ready
    moved: bool = False


class SchedulingQueue:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
    ) -> None:
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._entries: dict[str, QueuedPod] = {}
        self._active: list[tuple[tuple[int, float, str], int, str]] = []
        self._waiting: list[tuple[float, int, str]] = []
        # moved pods, earliest backoff end then queue order (kube's backoffQ with PopFromBackoffQ)
        self._moved: list[tuple[float, tuple[int, float, str], int, str]] = []
        self._tickets = itertools.count()
        # event -> keys of the waiting pods it may help ("" : pods any event may help), so a wake
        # costs the pods it wakes, not the whole queue
        self._interested: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def counts(self) -> dict[str, int]:
        """Pods per place, for the `placer_pending_pods{queue}` gauge."""
        counts = {"active": 0, "backoff": 0, "in_flight": 0}
        names = {"active": "active", "waiting": "backoff", "in_flight": "in_flight"}
        for entry in self._entries.values():
            counts[names[entry.state]] += 1
        return counts

    def entry(self, key: str) -> QueuedPod | None:
        return self._entries.get(key)

    def add(self, pod: PodInfo) -> None:
        """A pending pod, new or updated; an update keeps its place and backoff."""
        entry = self._entries.get(pod.key)
        if entry is None:
            entry = self._entries[pod.key] = QueuedPod(pod)
            self._push_active(entry)
            return
        if entry.pod is pod:  # queued again as it is (e.g. every pending pod at a new term)
            return
        order_changed = queue_order(entry.pod) != queue_order(pod)
        entry.pod = pod
        if entry.state == "active" and order_changed:
            self._push_active(entry)

    def remove(self, key: str) -> None:
        """The pod is gone, bound, or no longer ours; stale heap entries are skipped later."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._uninterest(entry)

    def pop(self) -> PodInfo | None:
        """The next pod to schedule, or None when none is ready now: an active pod, else a moved
        one still backing off (kube's SchedulerPopFromBackoffQ: the scheduler has nothing else to do)."""
        self._promote()
        while self._active:
            _, ticket, key = heapq.heappop(self._active)
            entry = self._entries.get(key)
            if entry is not None and entry.state == "active" and entry.ticket == ticket:
                return self._fly(entry)
        while self._moved:
            _, _, ticket, key = heapq.heappop(self._moved)
            entry = self._entries.get(key)
            if entry is not None and entry.state == "waiting" and entry.moved and entry.ticket == ticket:
                return self._fly(entry)
        return None

    def _fly(self, entry: QueuedPod) -> PodInfo:
        entry.state = "in_flight"
        entry.moved = False
        entry.attempts += 1
        entry.last_attempt = self._clock()
        return entry.pod

    def take(self, key: str) -> PodInfo | None:
        """Take a queued pod out of turn, as `pop` would (kube's pod group cycle takes every pending
        pod of the group at once): in flight, one attempt more; None when it is not queued, or is
        in flight already."""
        entry = self._entries.get(key)
        if entry is None or entry.state == "in_flight":
            return None
        if entry.state == "waiting":
            self._uninterest(entry)
        entry.ticket = next(self._tickets)  # its heap entries are stale now
        return self._fly(entry)

    def backoff(
        self, key: str, wake_on: frozenset[str] = frozenset(), from_now: bool = False,
        rejectors: tuple[FilterPlugin[Any], ...] = (),
    ) -> float | None:
        """After a failed attempt: wait 1 s doubling to 10 s, or until one of the `wake_on` events
        (empty: any event) that one of the `rejectors` (the filters that rejected it) says may help;
        returns the delay. Counted from the attempt, or `from_now` for a failure found long after
        it (volumes not bound in time): that pod must not be retried at once."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if from_now:
            entry.last_attempt = self._clock()
        delay = min(self.initial_backoff * 2 ** max(entry.attempts - 1, 0), self.max_backoff)
        self._uninterest(entry)
        entry.wake_on = wake_on
        entry.rejectors = rejectors
        entry.extra = wake_on.difference(*(plugin.events for plugin in rejectors)) if rejectors else frozenset()
        entry.moved = False
        entry.state = "waiting"
        entry.ready_at = entry.last_attempt + delay
        entry.ticket = next(self._tickets)
        heapq.heappush(self._waiting, (entry.ready_at, entry.ticket, key))
        for event in wake_on or ("",):
            self._interested.setdefault(event, set()).add(key)
        return delay

    def _uninterest(self, entry: QueuedPod) -> None:
        key = entry.pod.key
        for event in entry.wake_on or ("",):
            keys = self._interested.get(event)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._interested[event]

    def retry_now(self, key: str) -> None:
        """Back to active without backoff (e.g. the node it was bound to vanished)."""
        entry = self._entries.get(key)
        if entry is not None:
            self._push_active(entry)

    def wake(self, event: str | None = None, old: Any = None, new: Any = None) -> None:
        """A cluster change that may help waiting pods (kube's MoveAllToActiveOrBackoffQueue): each
        pod whose rejectors' hints say it may is moved (`_move`).

        With an `event` (a `ClusterEvent`, with the object before and after when known), only the
        pods it may help; None moves every waiting pod.
        """
        if event is None:
            keys: set[str] = {key for key, entry in self._entries.items() if entry.state == "waiting"}
        elif not self._interested:  # no pod waits for any event (as after every pod bound at once)
            return
        else:
            keys = set()
            for wanted in (event, event.partition("/")[0], ""):
                keys |= self._interested.get(wanted, set())
        for key in keys:
            entry = self._entries[key]
            if event is None or self._worth(entry, event, old, new, cluster_wide=True):
                self._move(entry)

    def wake_pod(self, key: str, events: tuple[str, ...] | None = None, old: PodInfo | None = None) -> None:
        """The pod itself changed (kube's `Update` of an unschedulable pod): moved if one of its
        rejectors registered one of `events` (`pod_update_events`) and its hint says yes; None: the
        change helps whatever rejected it (e.g. its generated ResourceClaim recorded)."""
        entry = self._entries.get(key)
        if entry is None or entry.state != "waiting" or entry.moved:
            return
        if events is None or any(self._worth(entry, event, old, entry.pod) for event in events):
            self._move(entry)

    @staticmethod
    def _worth(entry: QueuedPod, event: str, old: Any, new: Any, cluster_wide: bool = False) -> bool:
        """kube's isPodWorthRequeuing: asked of the rejectors that registered the event. A pod with
        no rejectors (it failed on an error) is worth it; so is a cluster event it waits for for
        another reason (a victim gone, its group changed); a hint that raises says yes, as kube's."""
        if not entry.rejectors:
            return cluster_wide or not entry.wake_on
        kind = event.partition("/")[0]
        extra = entry.extra
        if cluster_wide and extra and (event in extra or kind in extra):
            return True
        asked = False
        for plugin in entry.rejectors:
            events = plugin.events
            if event not in events and kind not in events:
                continue
            asked = True
            try:
                if plugin.queueing_hint(entry.pod, event, old, new):
                    return True
            except Exception:
                return True
        return cluster_wide and not asked

    def _move(self, entry: QueuedPod) -> None:
        """kube's requeuePodWithQueueingStrategy (queueAfterBackoff): active if its backoff is over,
        else moved, ready once it has waited the initial backoff since its last attempt."""
        self._uninterest(entry)  # moved once per attempt: a stream of events costs nothing more
        entry.wake_on = frozenset()
        soonest = entry.last_attempt + self.initial_backoff
        if min(soonest, entry.ready_at) <= self._clock():
            self._push_active(entry)
            return
        entry.ready_at = min(soonest, entry.ready_at)
        entry.ticket = next(self._tickets)
        heapq.heappush(self._waiting, (entry.ready_at, entry.ticket, entry.pod.key))
        if entry.rejectors:  # (a preemptor awaiting its victims, a gang member, an error: the floor only)
            entry.moved = True
            heapq.heappush(self._moved, (entry.ready_at, queue_order(entry.pod), entry.ticket, entry.pod.key))

    def next_ready_in(self) -> float | None:
        """Seconds until a waiting pod becomes ready (0 if one is ready or moved); None if none waits."""
        while self._moved:
            _, _, ticket, key = self._moved[0]
            entry = self._entries.get(key)
            if entry is not None and entry.state == "waiting" and entry.moved and entry.ticket == ticket:
                return 0.0
            heapq.heappop(self._moved)
        while self._waiting:
            ready_at, ticket, key = self._waiting[0]
            entry = self._entries.get(key)
            if entry is not None and entry.state == "waiting" and entry.ticket == ticket:
                return max(ready_at - self._clock(), 0.0)
            heapq.heappop(self._waiting)
        return None

    def _push_active(self, entry: QueuedPod) -> None:
        if entry.state == "waiting":
            self._uninterest(entry)
        entry.state = "active"
        entry.moved = False
        entry.ticket = next(self._tickets)
        heapq.heappush(self._active, (queue_order(entry.pod), entry.ticket, entry.pod.key))

    def _promote(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, ticket, key = heapq.heappop(self._waiting)
            entry = self._entries.get(key)
            if entry is not None and entry.state == "waiting" and entry.ticket == ticket:
                self._push_active(entry)
