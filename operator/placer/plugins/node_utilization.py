"""NodeUtilization — avoid nodes that are busy right now, by real usage (Placer's own).

Reads `metrics.k8s.io` NodeMetrics (the operator polls them; the simulator takes them from the
cluster file). Usage is a fraction of the node's allocatable.

Filter: rejects nodes whose cpu usage is above `cpuThreshold` — "node(s) had CPU usage above
threshold" — or memory usage above `memoryThreshold` — "node(s) had memory usage above
threshold". A threshold left unset is not checked; a node without metrics passes.

Score: the weighted mean usage over `resources`; lower is better, mapped onto 0..100 across
the feasible nodes that have metrics (least busy 100, busiest 0). A node without metrics
scores 0. With no metrics at all every node passes and scores alike, and the profile's status
says so.

Args::

    cpuThreshold: 0.8            # fraction of allocatable, 0 < x <= 1
    memoryThreshold: 0.85
    resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]   # the default

Example profile (avoid busy nodes)::

    spec:
      schedulerName: avoid-busy-scheduler
      filters:
        - name: NodeResourcesFit
        - name: NodeUtilization
          args: {cpuThreshold: 0.8, memoryThreshold: 0.85}
      scores:
        - name: NodeUtilization
          weight: 3
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from placer.engine.cluster import CPU, MEMORY, ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    ClusterEvent,
    FilterPlugin,
    PluginArgs,
    ScorePlugin,
    StaticCache,
    minmax_normalize,
)
from placer.engine.objects import PodInfo

NO_METRICS_WARNING = "NodeUtilization: no NodeMetrics are available; every node passes and scores alike"
REASONS = ("node(s) had CPU usage above threshold", "node(s) had memory usage above threshold")


class UsageResource(PluginArgs):
    name: Literal["cpu", "memory"]
    weight: int = Field(default=1, ge=1, le=100)


class NodeUtilizationArgs(PluginArgs):
    cpuThreshold: float | None = Field(default=None, gt=0, le=1)
    memoryThreshold: float | None = Field(default=None, gt=0, le=1)
    resources: tuple[UsageResource, ...] = Field(
        default=(UsageResource(name="cpu"), UsageResource(name="memory")), min_length=1
    )


def usage_fractions(cluster: ClusterState) -> np.ndarray:
    """(size, 2) usage / allocatable for cpu and memory; 0 where unknown."""
    n = cluster.size
    allocatable = cluster.allocatable[:n, [CPU, MEMORY]].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        fractions = np.where(allocatable > 0, cluster.usage[:n] / allocatable, 0.0)
    return np.where(cluster.has_metrics[:n, None], fractions, 0.0)


class NodeUtilization(FilterPlugin[NodeUtilizationArgs], ScorePlugin[NodeUtilizationArgs]):
    name: ClassVar[str] = "NodeUtilization"
    Args: ClassVar[type[PluginArgs]] = NodeUtilizationArgs
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE, ClusterEvent.NODE_METRICS})

    def __init__(self, args: NodeUtilizationArgs) -> None:
        super().__init__(args)
        self._cache: StaticCache[np.ndarray] = StaticCache(limit=2)

    def warnings(self, cluster: ClusterState) -> list[str]:
        return [] if cluster.any_metrics else [NO_METRICS_WARNING]

    def _over(self, cluster: ClusterState) -> np.ndarray:
        """(size, 2): over the cpu threshold, over the memory threshold."""
        over = self._cache.get(cluster, "over")
        if over is None:
            fractions = usage_fractions(cluster)
            thresholds = (self.args.cpuThreshold, self.args.memoryThreshold)
            over = np.zeros((cluster.size, 2), dtype=bool)
            for i, threshold in enumerate(thresholds):
                if threshold is not None:
                    over[:, i] = fractions[:, i] > threshold
            self._cache.put("over", over)
        return over

    batch_reach: ClassVar[str] = BATCH_NONE  # the nodes' measured usage (a node change)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return None  # the same for every pod

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if self.args.cpuThreshold is None and self.args.memoryThreshold is None:
            return None
        return ~self._over(cluster).any(axis=1)

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        over = self._over(cluster)[rejected]
        return Counter({reason: int(over[:, i].sum()) for i, reason in enumerate(REASONS) if over[:, i].any()})

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        busy = self._cache.get(cluster, "busy")
        if busy is None:
            fractions = usage_fractions(cluster)
            column = {"cpu": 0, "memory": 1}
            weights = sum(r.weight for r in self.args.resources)
            busy = sum(fractions[:, column[r.name]] * r.weight for r in self.args.resources) / weights
            busy = np.where(cluster.has_metrics[: cluster.size], busy, np.nan)
            self._cache.put("busy", busy)
        return busy[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        known = ~np.isnan(raw)
        scores = np.zeros(raw.shape, dtype=np.int64)
        if known.any():
            scores[known] = minmax_normalize(-raw[known])
        return scores
