"""NodeReady — keep pods off nodes that are not Ready, unless they tolerate what kube would taint.

What it does: rejects nodes whose `Ready` condition is not `True` (False, Unknown, or missing).
kube-scheduler relies on the node lifecycle controller's taints for this
(`node.kubernetes.io/not-ready:NoSchedule` for Ready False, `node.kubernetes.io/unreachable:NoSchedule`
for Unknown); Placer checks the condition itself, so a NotReady node is avoided even before the node
controller taints it. A pod that tolerates the taint its node's condition stands for passes, as
kube-scheduler's TaintToleration lets it: a CNI or other node agent whose DaemonSet tolerates
everything (`operator: Exists`) goes to a node that is not Ready yet and makes it Ready, as it must
when Placer is the cluster's only scheduler. A node without a Ready condition counts as not ready.
(DaemonSet pods tolerate `not-ready`/`unreachable` with effect NoExecute only: as in kube-scheduler,
that does not admit them to a NotReady node.) Reason: "node(s) were not ready".

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      filters:
        - name: NodeReady
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, FilterPlugin, NoArgs
from placer.engine.objects import PodInfo, Taint

NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
UNREACHABLE_TAINT = Taint("node.kubernetes.io/unreachable", "", "NoSchedule")


class NodeReady(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodeReady"
    reason: ClassVar[str] = "node(s) were not ready"

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return _tolerated(pod)  # the node's readiness, against the condition taints the pod tolerates

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        ready = cluster.ready[: cluster.size]
        if not pod.tolerations:
            return ready
        not_ready, unreachable = _tolerated(pod)
        if not_ready and unreachable:
            return None
        if not (not_ready or unreachable):
            return ready
        passes = ready.copy()
        nodes = cluster.nodes
        for slot in np.flatnonzero(~ready):
            node = nodes[slot]
            if node is not None:
                passes[slot] = unreachable if node.unreachable else not_ready
        return passes


def _tolerated(pod: PodInfo) -> tuple[bool, bool]:
    """Whether the pod tolerates the not-ready and the unreachable NoSchedule taint."""
    tolerations = pod.tolerations
    if not tolerations:
        return False, False
    return (any(t.tolerates(NOT_READY_TAINT) for t in tolerations),
            any(t.tolerates(UNREACHABLE_TAINT) for t in tolerations))
