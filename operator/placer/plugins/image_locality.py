"""ImageLocality — prefer nodes that already hold the pod's images, as kube-scheduler's plugin.

What it does: for each container (init containers included) and each `image` volume
(`spec.volumes[].image.reference`, which kube v1.36 counts too) whose image is in the node's
`status.images`, adds the image size scaled by the fraction of nodes that hold it (so an image
on every node counts little: it will not be pulled anywhere). The sum is clamped between 23 MB
and 1000 MB per container (image volumes do not raise that bound) and mapped onto 0..100. Images
without a tag count as `:latest`.

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      scores: [{name: ImageLocality, weight: 1}]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, MAX_NODE_SCORE, NoArgs, ScorePlugin, StaticCache
from placer.engine.objects import PodInfo

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def image_priority(sums: np.ndarray, containers: int) -> np.ndarray:
    """kube's `calculatePriority`."""
    max_threshold = MAX_CONTAINER_THRESHOLD * containers
    if max_threshold <= MIN_THRESHOLD:
        return np.zeros(sums.shape, dtype=np.int64)
    clamped = np.clip(sums, MIN_THRESHOLD, max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality(ScorePlugin[NoArgs]):
    name: ClassVar[str] = "ImageLocality"

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        self._scaled: StaticCache[np.ndarray] = StaticCache()
        # per (images, containers), until a node changes: every slot's score (pods of one workload
        # share it; what nodes hold is a node fact, so bound and assumed pods never change it)
        self._scores: StaticCache[np.ndarray] = StaticCache()

    def _scaled_sizes(self, cluster: ClusterState, image: str) -> np.ndarray:
        column = self._scaled.get(cluster, image)
        if column is None:
            column = np.zeros(cluster.size, dtype=np.int64)
            holders = cluster.image_slots.get(image, {})
            if holders:
                spread = len(holders) / cluster.node_count
                for slot, size in holders.items():
                    column[slot] = int(size * spread)
            self._scaled.put(image, column)
        return column

    batch_reach: ClassVar[str] = BATCH_NONE  # the nodes' images

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.images, pod.container_count

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        key = (pod.images, pod.container_count)
        scores = self._scores.get(cluster, key)
        if scores is None:
            sums = np.zeros(cluster.size, dtype=np.int64)
            for image in pod.images:
                if image in cluster.image_slots:
                    sums += self._scaled_sizes(cluster, image)
            scores = self._scores.put(key, image_priority(sums, pod.container_count))
        return scores[slots]
