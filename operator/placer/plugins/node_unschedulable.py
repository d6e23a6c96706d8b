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

from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import FilterPlugin, NoArgs
from placer.engine.objects import PodInfo, Taint

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodeUnschedulable"
    reason: ClassVar[str] = "node(s) were unschedulable"

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        return ~cluster.unschedulable[: cluster.size]
