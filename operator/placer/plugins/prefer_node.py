"""PreferNode — prefer named nodes (Placer's own).

Score: nodes listed in `nodes` score 100, every other node 0. With a high weight this steers
pods onto those nodes while they fit, and lets them go elsewhere when they do not.

Args::

    nodes: [node-a, node-b]

Example profile::

    spec:
      schedulerName: prefer-node-scheduler
      scores:
        - name: PreferNode
          weight: 10
          args: {nodes: [node-a]}
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, MAX_NODE_SCORE, PluginArgs, ScorePlugin, StaticCache
from placer.engine.objects import PodInfo


class PreferNodeArgs(PluginArgs):
    nodes: tuple[str, ...] = Field(min_length=1)


class PreferNode(ScorePlugin[PreferNodeArgs]):
    name: ClassVar[str] = "PreferNode"
    Args: ClassVar[type[PluginArgs]] = PreferNodeArgs

    def __init__(self, args: PreferNodeArgs) -> None:
        super().__init__(args)
        self._cache: StaticCache[np.ndarray] = StaticCache(limit=1)

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return None  # its args' nodes: the same for every pod

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        scores = self._cache.get(cluster, None)
        if scores is None:
            scores = np.zeros(cluster.size, dtype=np.int64)
            for name in self.args.nodes:
                slot = cluster.index.get(name)
                if slot is not None:
                    scores[slot] = MAX_NODE_SCORE
            self._cache.put(None, scores)
        return scores[slots]
