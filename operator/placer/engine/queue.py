"""The scheduling queue: priority order, backoff for pods that failed, prompt retries on change.

Pure and clock-injected, so its timing is tested without sleeping. Pods wait in one of three
places, as in kube-scheduler:

- *active*: ready now, popped highest `spec.priority` first, then oldest, then by name;
- *waiting*: failed an attempt, ready again after a backoff of 1 s doubling to 10 s; a cluster
  change that may help (`wake(event)`) makes a waiting pod ready as soon as it has waited the
  initial backoff since its last attempt, so a labelled node is used promptly without letting
  a busy cluster hot-loop a pod. Which changes may help a pod is what the filters that rejected
  it listed (`FilterPlugin.events`): a pod short of cpu is not retried because a pod was added
  somewhere, one waiting for an anti-affinity peer to leave is, when it leaves;
- *in flight*: popped and being decided or bound; updates to it are kept for its next attempt.

Because the longest backoff is 10 s, a waiting pod is retried at least that often even when
nothing wakes it: that is the periodic flush.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from placer.engine.objects import PodInfo

__all__ = ["QueuedPod", "SchedulingQueue", "queue_order"]


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
        """The next pod to schedule, or None when none is ready now."""
        self._promote()
        while self._active:
            _, ticket, key = heapq.heappop(self._active)
            entry = self._entries.get(key)
            if entry is not None and entry.state == "active" and entry.ticket == ticket:
                entry.state = "in_flight"
                entry.attempts += 1
                entry.last_attempt = self._clock()
                return entry.pod
        return None

    def take(self, key: str) -> PodInfo | None:
        """Take a queued pod out of turn, as `pop` would (kube's pod group cycle takes every pending
        pod of the group at once): in flight, one attempt more; None when it is not queued, or is
        in flight already."""
        entry = self._entries.get(key)
        if entry is None or entry.state == "in_flight":
            return None
        if entry.state == "waiting":
            self._uninterest(entry)
        entry.state = "in_flight"
        entry.ticket = next(self._tickets)  # its heap entries are stale now
        entry.attempts += 1
        entry.last_attempt = self._clock()
        return entry.pod

    def backoff(self, key: str, wake_on: frozenset[str] = frozenset(), from_now: bool = False) -> float | None:
        """After a failed attempt: wait 1 s doubling to 10 s, or until one of the `wake_on` events
        (empty: any event); returns the delay. Counted from the attempt, or `from_now` for a failure
        found long after it (volumes not bound in time): that pod must not be retried at once."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if from_now:
            entry.last_attempt = self._clock()
        delay = min(self.initial_backoff * 2 ** max(entry.attempts - 1, 0), self.max_backoff)
        self._uninterest(entry)
        entry.wake_on = wake_on
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

    def wake(self, event: str | None = None) -> None:
        """A change that may help waiting pods: retry each once the initial backoff has passed.

        With an `event` (a `ClusterEvent`), only the pods it may help; None wakes every pod.
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
            self._uninterest(entry)  # woken once per backoff: a stream of events costs nothing more
            soonest = entry.last_attempt + self.initial_backoff
            if soonest < entry.ready_at:
                entry.ready_at = soonest
                entry.ticket = next(self._tickets)
                heapq.heappush(self._waiting, (entry.ready_at, entry.ticket, key))

    def wake_pod(self, key: str) -> None:
        """The pod itself changed in a way that may help it (kube's queueing hint for its own update,
        e.g. its generated ResourceClaim recorded): retried once the initial backoff has passed."""
        entry = self._entries.get(key)
        if entry is None or entry.state != "waiting":
            return
        soonest = entry.last_attempt + self.initial_backoff
        if soonest < entry.ready_at:
            self._uninterest(entry)
            entry.wake_on = frozenset()
            entry.ready_at = soonest
            entry.ticket = next(self._tickets)
            heapq.heappush(self._waiting, (entry.ready_at, entry.ticket, key))

    def next_ready_in(self) -> float | None:
        """Seconds until a waiting pod becomes ready (0 if one is ready); None if none waits."""
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
        entry.ticket = next(self._tickets)
        heapq.heappush(self._active, (queue_order(entry.pod), entry.ticket, entry.pod.key))

    def _promote(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, ticket, key = heapq.heappop(self._waiting)
            entry = self._entries.get(key)
            if entry is not None and entry.state == "waiting" and entry.ticket == ticket:
                self._push_active(entry)
