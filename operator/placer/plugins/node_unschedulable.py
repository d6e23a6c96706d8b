"""NodeUnschedulable — keep pods off cordoned nodes.

What it does: rejects nodes with `spec.unschedulable: true` (`kubectl cordon`) unless the pod
tolerates the taint `node.kubernetes.io/unschedulable:NoSchedule`, as kube-scheduler's plugin
of the same name. Reason: "node(s) were unschedulable".

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      filters:
        - name: NodeUnschedulable
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, ClusterEvent, FilterPlugin, NoArgs
from placer.engine.objects import NodeInfo, PodInfo, Taint

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodeUnschedulable"
    reason: ClassVar[str] = "node(s) were unschedulable"
    # kube's EventsToRegister: a node added or uncordoned, the pod's own tolerations
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE, ClusterEvent.POD_TOLERATION}
    )

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.tolerations

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        return ~cluster.unschedulable[: cluster.size]

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's hints: the pod now tolerates the unschedulable taint, or a node is added
        schedulable or uncordoned (`spec.unschedulable` true -> false)."""
        if event == ClusterEvent.POD_TOLERATION:
            return any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations)
        if not isinstance(new, NodeInfo):
            return True
        return not new.unschedulable and not (isinstance(old, NodeInfo) and not old.unschedulable)
