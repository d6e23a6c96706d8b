"""What the pods of each priority hold on each node, kept as columns: preemption's dry run asks what
evicting every pod below a priority would free on thousands of nodes, and reads it here in a few
array operations instead of visiting every pod of every node (`RoomByPriority.below`).

A `PodTracker`: created on a cluster's first preemption (`cluster.tracker(RoomByPriority)`) and
kept in step with every pod counted or uncounted since, so a cluster that never preempts pays
nothing for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.engine.cluster import ClusterState, PodTracker
from placer.engine.objects import PodInfo

__all__ = ["RoomByPriority"]


#: a priority, the slots of its pods, and per resource (name, slots, amounts) of their requests
_Sums = tuple[int, np.ndarray, list[tuple[str, np.ndarray, np.ndarray]]]


class _Level:
    """One priority's pods: how many on each slot, and the sum of each resource they request."""

    __slots__ = ("count", "requests")

    def __init__(self, capacity: int) -> None:
        self.count = np.zeros(capacity, dtype=np.int64)
        self.requests: dict[str, np.ndarray] = {}

    def column(self, resource: str) -> np.ndarray:
        column = self.requests.get(resource)
        if column is None:
            column = self.requests[resource] = np.zeros(len(self.count), dtype=np.int64)
        return column

    def grow(self, capacity: int) -> None:
        def widen(array: np.ndarray) -> np.ndarray:
            grown = np.zeros(capacity, dtype=np.int64)
            grown[: len(array)] = array
            return grown

        self.count = widen(self.count)
        self.requests = {name: widen(column) for name, column in self.requests.items()}


class RoomByPriority(PodTracker):
    """Per priority level and node slot: the pods counted there and their requests (as the node's
    `requested` row counts them)."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._levels: dict[int, _Level] = {}
        self._summed_for: object = None  # the last `account_many` list, and its sums
        self._summed: list[_Sums] = []

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        level = self._levels.get(pod.priority)
        if level is None:
            level = self._levels[pod.priority] = _Level(self.cluster.capacity)
        level.count[slot] += sign
        for resource, amount in pod.requests.items():
            if amount:
                level.column(resource)[slot] += sign * amount

    def account_many(self, counted: Sequence[tuple[int, PodInfo]], sign: int, slots: np.ndarray) -> None:
        if counted is not self._summed_for:  # (the same list comes back cycle after cycle)
            self._summed_for, self._summed = counted, self._sum(counted)
        for priority, slots, columns in self._summed:
            level = self._levels.get(priority)
            if level is None:
                level = self._levels[priority] = _Level(self.cluster.capacity)
            np.add.at(level.count, slots, sign)
            for resource, where, amounts in columns:
                np.add.at(level.column(resource), where, sign * amounts)

    @staticmethod
    def _sum(counted: Sequence[tuple[int, PodInfo]]) -> list[_Sums]:
        """Per priority: the slots of its pods, and per resource where and how much they request."""
        by_priority: dict[int, list[tuple[int, PodInfo]]] = {}
        for item in counted:
            by_priority.setdefault(item[1].priority, []).append(item)
        summed = []
        for priority, items in by_priority.items():
            requests: dict[str, tuple[list[int], list[int]]] = {}
            for slot, pod in items:
                for resource, amount in pod.requests.items():
                    if amount:
                        where, how_much = requests.setdefault(resource, ([], []))
                        where.append(slot)
                        how_much.append(amount)
            columns = [(resource, np.asarray(where, dtype=np.intp), np.asarray(how_much, dtype=np.int64))
                       for resource, (where, how_much) in requests.items()]
            summed.append((priority, np.asarray([slot for slot, _ in items], dtype=np.intp), columns))
        return summed

    def clear_slot(self, slot: int) -> None:
        for level in self._levels.values():
            level.count[slot] = 0
            for column in level.requests.values():
                column[slot] = 0

    def grow(self, capacity: int) -> None:
        for level in self._levels.values():
            level.grow(capacity)

    def count_below(self, priority: int, slots: np.ndarray) -> np.ndarray:
        """Per slot of `slots`: how many pods of a priority lower than `priority` are counted there."""
        total = np.zeros(len(slots), dtype=np.int64)
        for value, level in self._levels.items():
            if value < priority:
                total += level.count[slots]
        return total

    def requested_below(self, priority: int, resource: str, slots: np.ndarray) -> np.ndarray:
        """Per slot of `slots`: what the pods of a priority lower than `priority` request of `resource`."""
        total = np.zeros(len(slots), dtype=np.int64)
        for value, level in self._levels.items():
            if value < priority:
                column = level.requests.get(resource)
                if column is not None:
                    total += column[slots]
        return total
