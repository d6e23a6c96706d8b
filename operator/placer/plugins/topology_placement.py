"""TopologyPlacementGenerator — a pod group placed inside one topology domain (a rack, a block), as
kube-scheduler v1.36's plugin of that name (`topologyaware`, the TopologyAwareWorkloadScheduling
gate; its PlacementGenerate point).

For a PodGroup with `spec.schedulingConstraints.topology: [{key: K}]` (scheduler-plugins'
PodGroup: the annotation `placer.dev/topology-key: K`), the placements are the domains of the node
label K: one per value, with every node carrying it (nodes without K are in none). Once any pod of
the group is scheduled (bound or assumed), only the domain those pods are in: the group's scheduled
pods pin it. A group without a key gets one placement of every node.

The group is then tried in each placement on its own (`placer.engine.placement`), and the best
kept (PlacementScore plugins: `PodGroupPodsCount`, NodeResourcesFit's MostAllocated); none fits:
`0/3 placements are available, first placement status: pod group is unschedulable`; no node has
the label: `no feasible placements found`. Scheduled pods in two domains, or on a node without the
label, cannot be decided (kube's errors, `cannot determine domain for already scheduled pods: ...`).

Listing it in a profile is what kube's gate does: the placement algorithm runs for every group of
the profile's pods (a group without a key is tried once, on all nodes, and reads `0/1 placements
are available, ...` when it does not fit), DefaultPreemption does not preempt for a pod of a group
with scheduling constraints, and workload-aware preemption not for a group with a topology key.

Filter: none (it admits every node): a placement plugin is listed in a profile's `filters`, as
GangScheduling is.

Args (beyond kube): `placement` — `Default` (kube's choice: the highest placement score, ties to
the smallest domain name, where kube draws at random) or `BestFit`: the placement that places the
most of the group, then leaves the least room (free cpu and memory, each as a share of the
cluster's, summed), so that the next large gang still finds a whole domain.

Example profile::

    spec:
      schedulerName: placer
      filters:
        - name: NodeResourcesFit
        - name: GangScheduling
        - name: TopologyPlacementGenerator
          args: {placement: BestFit}
      scores:
        - name: NodeResourcesFit
        - name: PodGroupPodsCount
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    FilterPlugin,
    Placement,
    PlacementError,
    PlacementGeneratePlugin,
    PluginArgs,
)
from placer.engine.groups import COSCHEDULING_KIND, POD_GROUP_KIND, GroupRef, PodGroupInfo, group_of, scheduled_members
from placer.engine.objects import PodInfo

__all__ = ["TopologyPlacementGenerator", "TopologyPlacementGeneratorArgs"]

DOMAIN_ERROR = "cannot determine domain for already scheduled pods: "


class TopologyPlacementGeneratorArgs(PluginArgs):
    placement: Literal["Default", "BestFit"] = "Default"


class TopologyPlacementGenerator(FilterPlugin[TopologyPlacementGeneratorArgs],
                                 PlacementGeneratePlugin[TopologyPlacementGeneratorArgs]):
    name: ClassVar[str] = "TopologyPlacementGenerator"
    Args: ClassVar[type[PluginArgs]] = TopologyPlacementGeneratorArgs

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return None  # no Filter answer of its own (a group's placements are never batched)

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def generate_placements(self, group: Any, cluster: ClusterState, parent: Placement) -> list[Placement]:
        """kube's `GeneratePlacements`: the domains of the group's topology key within `parent`
        (sorted by name), only the scheduled pods' one once any is scheduled."""
        info: PodGroupInfo = group
        key = info.topology_key
        if not key:
            return [parent]
        required = self._scheduled_domain(info, cluster, key)
        values = cluster.label_column(key)
        usable = cluster.present[: cluster.size].copy()
        if parent.nodes is not None:
            usable &= parent.nodes[: cluster.size]
        domains: dict[str, list[int]] = {}
        for slot in np.flatnonzero(usable):
            value = values[slot]
            if value is not None and (required is None or value == required):
                domains.setdefault(value, []).append(int(slot))
        placements = []
        for value in sorted(domains):
            mask = np.zeros(cluster.size, dtype=bool)
            mask[domains[value]] = True
            placements.append(Placement(value, mask))
        return placements

    @staticmethod
    def _scheduled_domain(group: PodGroupInfo, cluster: ClusterState, key: str) -> str | None:
        """The one domain the group's scheduled pods are in (None when none is scheduled)."""
        ref = GroupRef(POD_GROUP_KIND if group.upstream else COSCHEDULING_KIND, group.namespace, group.name)
        if scheduled_members(cluster, ref) == 0:
            return None
        domain: str | None = None
        members = [record for record in cluster.pods.values() if group_of(record.pod) == ref]
        for record in sorted(members, key=lambda r: r.pod.key):
            node = cluster.node(record.node)
            if node is None:
                raise PlacementError(f'{DOMAIN_ERROR}getting node for pod {record.pod.key}: '
                                     f'nodeinfo not found for node name "{record.node}"')
            value = node.labels.get(key)
            if value is None:
                raise PlacementError(f"{DOMAIN_ERROR}no topology domain found for pod {record.pod.key}")
            if domain is not None and domain != value:
                raise PlacementError(f"{DOMAIN_ERROR}more than 1 domain found for pod group: {domain}, {value}")
            domain = value
        return domain
