"""TaintToleration — respect node taints, as kube-scheduler's plugin of the same name.

Filter: rejects a node carrying a `NoSchedule` or `NoExecute` taint the pod does not tolerate.
Reason: "node(s) had untolerated taint(s)" (kube v1.36 no longer names the taint in it), kube's
UnschedulableAndUnresolvable: preemption never evicts pods for it. Tolerations with the numeric
operators `Gt`/`Lt` tolerate nothing, as in kube-scheduler v1.36 with its alpha
TaintTolerationComparisonOperators gate off (the default).

Score: counts the node's `PreferNoSchedule` taints that the pod's tolerations (those with
effect `PreferNoSchedule` or no effect) do not tolerate; fewer is better. Normalised as
kube-scheduler does: `100 - 100 * count / max(count)`, so with no such taints anywhere every
node scores 100.

Nodes with the same taints share one evaluation, so a cluster with thousands of nodes but a
handful of distinct taint sets costs a handful of checks per pod; pods with the same tolerations
share the result until a node changes.

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      filters: [{name: TaintToleration}]
      scores: [{name: TaintToleration, weight: 3}]
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    ClusterEvent,
    FilterPlugin,
    NoArgs,
    ScorePlugin,
    StaticCache,
    default_normalize,
)
from placer.engine.objects import NodeInfo, PodInfo, Taint, Toleration

HARD_EFFECTS = ("NoSchedule", "NoExecute")


def first_untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect in HARD_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def intolerable_preferences(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> int:
    soft = [t for t in tolerations if t.effect in ("", "PreferNoSchedule")]
    return sum(
        1
        for taint in taints
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in soft)
    )



def tolerated_nodes(pod: PodInfo, cluster: ClusterState, cache: StaticCache[np.ndarray]) -> np.ndarray | None:
    """Per node slot, whether the pod tolerates every NoSchedule/NoExecute taint there (None: no
    node has a taint); kept in `cache` per tolerations until a node changes. TaintToleration's
    filter, and PodTopologySpread's `nodeTaintsPolicy: Honor`."""
    groups = cluster.taint_groups
    if len(groups) == 1 and not groups[0]:
        return None
    mask = cache.get(cluster, pod.tolerations)
    if mask is None:
        tolerated = np.fromiter(
            (first_untolerated(taints, pod.tolerations) is None for taints in groups),
            dtype=bool,
            count=len(groups),
        )
        mask = cache.put(pod.tolerations, tolerated[cluster.taint_group[: cluster.size]])
    return mask

class TaintToleration(FilterPlugin[NoArgs], ScorePlugin[NoArgs]):
    name: ClassVar[str] = "TaintToleration"
    reason: ClassVar[str] = "node(s) had untolerated taint(s)"
    # kube's EventsToRegister: a node added or its taints changed, the pod's own tolerations
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE, ClusterEvent.POD_TOLERATION}
    )

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        # per tolerations, until a node changes: the filter's mask, and the score's count per slot
        # (None: no node has a PreferNoSchedule taint they leave untolerated)
        self._masks: StaticCache[np.ndarray] = StaticCache()
        self._counts: StaticCache[tuple[np.ndarray | None]] = StaticCache()

    batch_reach: ClassVar[str] = BATCH_NONE  # node taints against the pod's tolerations

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.tolerations

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return tolerated_nodes(pod, cluster, self._masks)

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's isSchedulableAfterPodTolerationChange (the pod's own new toleration) and
        isSchedulableAfterNodeChange: a node whose taints the pod did not tolerate and now does."""
        if event == ClusterEvent.POD_TOLERATION or not isinstance(new, NodeInfo):
            return True
        if isinstance(old, NodeInfo) and first_untolerated(old.taints, pod.tolerations) is None:
            return False  # tolerated before: this change is not what it waits for
        return first_untolerated(new.taints, pod.tolerations) is None

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        cached = self._counts.get(cluster, pod.tolerations)
        if cached is None:
            per_group = np.fromiter(
                (intolerable_preferences(taints, pod.tolerations) for taints in cluster.taint_groups),
                dtype=np.int64,
                count=len(cluster.taint_groups),
            )
            counts = per_group[cluster.taint_group[: cluster.size]] if per_group.any() else None
            cached = self._counts.put(pod.tolerations, (counts,))
        counts = cached[0]
        return np.zeros(slots.size, dtype=np.int64) if counts is None else counts[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return default_normalize(raw, reverse=True)
