"""NodeAffinity — `spec.nodeSelector` and node affinity, as kube-scheduler's plugin.

Filter: the node must carry every `nodeSelector` label and match at least one term of
`requiredDuringSchedulingIgnoredDuringExecution` (each term: all `matchExpressions` with
operators In, NotIn, Exists, DoesNotExist, Gt, Lt, and all `matchFields` on `metadata.name`).
Reason: "node(s) didn't match Pod's node affinity/selector".

Score: the sum of the weights of the pod's `preferredDuringSchedulingIgnoredDuringExecution`
terms the node matches, normalised as kube-scheduler does (`100 * sum / max(sum)`). A pod
without preferred terms is skipped: it scores 0 on every node.

Pods with the same selector and affinity share one evaluation until node labels change.

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      filters: [{name: NodeAffinity}]
      scores: [{name: NodeAffinity, weight: 2}]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    FilterPlugin,
    NoArgs,
    ScorePlugin,
    StaticCache,
    default_normalize,
)
from placer.engine.objects import PodInfo
from placer.plugins._selectors import term_mask


class NodeAffinity(FilterPlugin[NoArgs], ScorePlugin[NoArgs]):
    name: ClassVar[str] = "NodeAffinity"
    reason: ClassVar[str] = "node(s) didn't match Pod's node affinity/selector"

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        self._masks: StaticCache[np.ndarray] = StaticCache()
        self._preferences: StaticCache[np.ndarray] = StaticCache()

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not pod.node_selector and pod.required_terms is None:
            return None
        key = (tuple(sorted(pod.node_selector.items())), pod.required_terms)
        mask = self._masks.get(cluster, key)
        if mask is None:
            mask = np.ones(cluster.size, dtype=bool)
            for label, value in pod.node_selector.items():
                mask &= np.equal(cluster.label_column(label), value)
            if pod.required_terms is not None:
                matched = np.zeros(cluster.size, dtype=bool)
                for term in pod.required_terms:
                    matched |= term_mask(cluster, term)
                mask &= matched
            self._masks.put(key, mask)
        return mask

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return bool(pod.preferred_terms)

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        weights = self._preferences.get(cluster, pod.preferred_terms)
        if weights is None:
            weights = np.zeros(cluster.size, dtype=np.int64)
            for weight, term in pod.preferred_terms:
                weights += weight * term_mask(cluster, term)
            self._preferences.put(pod.preferred_terms, weights)
        return weights[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return default_normalize(raw)
