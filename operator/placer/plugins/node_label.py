"""NodeLabel — require, forbid, prefer or avoid node labels (Placer's own; after the NodeLabel
plugin kube-scheduler had until 1.23).

Filter: `required: {key: value}` — the node must carry every label (value `""`: the key must
exist, whatever its value); `forbidden: {key: value}` — the node must carry none of them
(`""`: the key must be absent). Reason: "node(s) didn't have the requested labels".

Score: +1 for each `preferred` label the node carries, -1 for each `avoided` one, mapped onto
0..100 across the feasible nodes (lowest raw value 0, highest 100; all alike: 0).

Args::

    required:  {cpu: "true"}
    forbidden: {node: hello}
    preferred: {disk: ssd}
    avoided:   {spot: ""}

Example profile (require a label, avoid another)::

    spec:
      schedulerName: cpu-scheduler
      filters:
        - name: NodeResourcesFit
        - name: NodeLabel
          args: {required: {cpu: "true"}}
      scores:
        - name: NodeLabel
          weight: 5
          args: {avoided: {node: hello}}
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    FilterPlugin,
    PluginArgs,
    ScorePlugin,
    StaticCache,
    minmax_normalize,
)
from placer.engine.node_selectors import label_equals
from placer.engine.objects import PodInfo


class NodeLabelArgs(PluginArgs):
    required: dict[str, str] = {}
    forbidden: dict[str, str] = {}
    preferred: dict[str, str] = {}
    avoided: dict[str, str] = {}


class NodeLabel(FilterPlugin[NodeLabelArgs], ScorePlugin[NodeLabelArgs]):
    name: ClassVar[str] = "NodeLabel"
    Args: ClassVar[type[PluginArgs]] = NodeLabelArgs
    reason: ClassVar[str] = "node(s) didn't have the requested labels"

    def __init__(self, args: NodeLabelArgs) -> None:
        super().__init__(args)
        self._cache: StaticCache[np.ndarray] = StaticCache(limit=2)

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return None  # node labels against its args: the same for every pod

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not self.args.required and not self.args.forbidden:
            return None
        mask = self._cache.get(cluster, "filter")
        if mask is None:
            mask = np.ones(cluster.size, dtype=bool)
            for key, value in self.args.required.items():
                mask &= label_equals(cluster, key, value)
            for key, value in self.args.forbidden.items():
                mask &= ~label_equals(cluster, key, value)
            self._cache.put("filter", mask)
        return mask

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        raw = self._cache.get(cluster, "score")
        if raw is None:
            raw = np.zeros(cluster.size, dtype=np.int64)
            for key, value in self.args.preferred.items():
                raw += label_equals(cluster, key, value)
            for key, value in self.args.avoided.items():
                raw -= label_equals(cluster, key, value)
            self._cache.put("score", raw)
        return raw[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return minmax_normalize(raw)
