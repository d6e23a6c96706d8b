"""NodeReady — keep pods off nodes that are not Ready.

What it does: rejects nodes whose `Ready` condition is not `True` (False, Unknown, or missing).
kube-scheduler relies on the `node.kubernetes.io/not-ready` taint for this; Placer checks the
condition itself, so a NotReady node is avoided even before the node controller taints it.
Reason: "node(s) were not ready".

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
from placer.engine.objects import PodInfo


class NodeReady(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodeReady"
    reason: ClassVar[str] = "node(s) were not ready"

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return None  # the node's readiness alone

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return cluster.ready[: cluster.size]
