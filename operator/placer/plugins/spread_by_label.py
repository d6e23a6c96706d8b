"""SpreadByLabel — spread pods that share a label value across topology domains (Placer's own).

Score: for a pod with `labelKey=v` (e.g. `tenant=blue`), counts the bound and assumed pods
with `labelKey=v` in each node's topology domain (the nodes sharing the node's `topologyKey`
label; a node without that label is a domain of its own); fewer is better. Counts map onto
0..100 across the feasible nodes (fewest 100, most 0; all alike: 0). A pod without `labelKey`
scores 0 everywhere. Counts are kept incrementally, so this costs no scan of pods per cycle.

Args::

    labelKey: tenant                          # required
    topologyKey: kubernetes.io/hostname       # the default; e.g. topology.kubernetes.io/zone

Example profile (spread tenants)::

    spec:
      schedulerName: tenant-spread-scheduler
      scores:
        - name: SpreadByLabel
          weight: 2
          args: {labelKey: tenant}
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, UNSIGNABLE, PluginArgs, ScorePlugin, StaticCache, minmax_normalize
from placer.engine.matching import label_counts
from placer.engine.objects import PodInfo


class SpreadByLabelArgs(PluginArgs):
    labelKey: str = Field(min_length=1)
    topologyKey: str = Field(default="kubernetes.io/hostname", min_length=1)


class SpreadByLabel(ScorePlugin[SpreadByLabelArgs]):
    name: ClassVar[str] = "SpreadByLabel"
    Args: ClassVar[type[PluginArgs]] = SpreadByLabelArgs

    def __init__(self, args: SpreadByLabelArgs) -> None:
        super().__init__(args)
        self._domains: StaticCache[np.ndarray] = StaticCache(limit=1)

    def _domain_ids(self, cluster: ClusterState) -> np.ndarray:
        ids = self._domains.get(cluster, None)
        if ids is None:
            column = cluster.label_column(self.args.topologyKey)
            known: dict[str, int] = {}
            ids = np.empty(cluster.size, dtype=np.int64)
            for slot, value in enumerate(column):
                if value is None:
                    ids[slot] = len(known) + slot + cluster.size  # a domain of its own
                else:
                    ids[slot] = known.setdefault(value, len(known))
            _, ids = np.unique(ids, return_inverse=True)
            self._domains.put(None, ids)
        return ids

    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods it does not score)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod without its label: a labelled pod's score counts pods over whole domains."""
        return UNSIGNABLE if self.args.labelKey in pod.labels else None

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return self.args.labelKey in pod.labels

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        counts = label_counts(cluster, self.args.labelKey, pod.labels[self.args.labelKey])
        domains = self._domain_ids(cluster)
        per_domain = np.bincount(domains, weights=counts, minlength=int(domains.max(initial=0)) + 1)
        return -per_domain[domains[slots]].astype(np.int64)

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return minmax_normalize(raw)
