"""What the pods of each priority hold on each node, kept as columns: preemption's dry run asks what
evicting every pod below a priority would free on thousands of nodes, and reads it here in a few
array operations instead of visiting every pod of every node (`RoomByPriority.below`).

A `PodTracker`: created on a cluster's first preemption (`cluster.tracker(RoomByPriority)`) and
kept in step with every pod counted or uncounted since, so a cluster that never preempts pays
nothing for it.
"""

from __future__ import annotations

import numpy as np

from placer.engine.cluster import ClusterState, PodSums, PodTracker
from placer.engine.objects import PodInfo

__all__ = ["RoomByPriority"]


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

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        level = self._levels.get(pod.priority)
        if level is None:
            level = self._levels[pod.priority] = _Level(self.cluster.capacity)
        level.count[slot] += sign
        for resource, amount in pod.requests.items():
            if amount:
                level.column(resource)[slot] += sign * amount

    def account_many(self, sums: PodSums, sign: int) -> None:
        resources = self.cluster.resources
        cells = sums.cells[sums.cells[:, 2] != 0]
        for priority in np.unique(sums.priorities).tolist():
            level = self._levels.get(priority)
            if level is None:
                level = self._levels[priority] = _Level(self.cluster.capacity)
            rows = sums.priorities == priority
            np.add.at(level.count, sums.slots[rows], sign)
            mine = cells[rows[cells[:, 3]]]
            for column in np.unique(mine[:, 1]).tolist():
                part = mine[mine[:, 1] == column]
                np.add.at(level.column(resources[column]), part[:, 0], sign * part[:, 2])

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
