"""NodeDeclaredFeatures — a pod that needs a node feature goes only to nodes that declare it, as
kube-scheduler v1.36's plugin of the same name (beta, in its default profile).

What it does: works out from the pod's spec which node features it needs
(`placer.engine.node_features`, kube's `component-helpers/nodedeclaredfeatures`):

- `hostNetwork: true` with `hostUsers: false` needs `UserNamespacesHostNetworkSupport`;
- a container or init container with a `restartPolicyRules` entry whose `action` is
  `RestartAllContainers` needs `RestartAllContainersOnContainerExits`.

A node fits when its `status.declaredFeatures` lists every one of them. A node without that field
declares nothing (nodes older than v1.35, or with the kubelet's gate off), so a pod that needs a
feature fits none of them; a pod that needs none (nearly all) is not constrained at all. Reason:
"node(s) didn't match Pod's required features" — kube's UnschedulableAndUnresolvable, so preemption
never evicts pods for it. A pod it rejected is retried when a node is added or changes (a kubelet
upgraded or restarted with the feature on).

Args: none.

Example profile (the default profile has it as its last filter)::

    spec:
      schedulerName: my-scheduler
      filters: [{name: NodeAffinity}, {name: NodeDeclaredFeatures}]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, ClusterEvent, FilterPlugin, NoArgs, StaticCache
from placer.engine.node_features import DEFAULT_FRAMEWORK, FeatureFramework
from placer.engine.objects import PodInfo

__all__ = ["REASON", "NodeDeclaredFeatures"]

REASON = "node(s) didn't match Pod's required features"


class NodeDeclaredFeatures(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodeDeclaredFeatures"
    reason: ClassVar[str] = REASON
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE})

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        # pods needing the same features share one mask until a node changes
        self._masks: StaticCache[np.ndarray] = StaticCache()
        #: the registry nodes' declared features are read against (kube's ndfFramework)
        self.features: FeatureFramework = DEFAULT_FRAMEWORK

    batch_reach: ClassVar[str] = BATCH_NONE  # the nodes' declared features

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.required_features

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        required = pod.required_features
        if not required:  # kube's PreFilter Skip
            return None
        mask = self._masks.get(cluster, required)
        if mask is None:
            mask = np.fromiter(
                (
                    node is not None and self.features.match_node(required, node.declared_features).is_match
                    for node in cluster.nodes[: cluster.size]
                ),
                dtype=bool,
                count=cluster.size,
            )
            self._masks.put(required, mask)
        return mask
