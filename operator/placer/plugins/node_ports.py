"""NodePorts — host ports a pod asks for must be free on the node, as kube-scheduler's plugin.

What it does: rejects nodes where a pod already bound or assumed there uses the same
`hostPort` and protocol on an overlapping `hostIP` (`0.0.0.0` overlaps every address).
Reason: "node(s) didn't have free ports for the requested pod ports".

Only nodes that have pods with host ports are examined, so pods without host ports (nearly
all) cost nothing.

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      filters: [{name: NodePorts}]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.framework import ClusterEvent, EvictionTerms, FilterPlugin, NoArgs
from placer.engine.objects import PodInfo

WILDCARD = "0.0.0.0"


def ports_conflict(wanted: Iterable[tuple[str, str, int]], used: Iterable[tuple[str, str, int]]) -> bool:
    used = list(used)
    for ip, protocol, port in wanted:
        for used_ip, used_protocol, used_port in used:
            if port == used_port and protocol == used_protocol and (
                ip == used_ip or WILDCARD in (ip, used_ip)
            ):
                return True
    return False


class NodePorts(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodePorts"
    reason: ClassVar[str] = "node(s) didn't have free ports for the requested pod ports"
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE, ClusterEvent.POD_DELETE})
    resolvable: ClassVar[bool] = True  # evicting the holder frees the port

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.host_ports  # against the ports of each node's own pods (BATCH_NODE)

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not pod.host_ports:
            return None
        mask = np.ones(cluster.size, dtype=bool)
        for slot, used in cluster.node_ports.items():
            if ports_conflict(pod.host_ports, used):
                mask[slot] = False
        return mask

    def fits_without(self, pod: PodInfo, cluster: ClusterState, slot: int, removed: Sequence[PodRecord]) -> bool:
        if not pod.host_ports:
            return True
        used = Counter(cluster.node_ports.get(slot, ()))
        for record in removed:
            used.subtract(record.pod.host_ports)
        return not ports_conflict(pod.host_ports, +used)

    def eviction_terms(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> EvictionTerms | None:
        """`fits_without` as arithmetic: on each node, how many of the ports its pods hold conflict
        with the pod's; evicting a pod frees those of its own. Only the nodes holding ports are
        visited (pods with host ports are few)."""
        if not pod.host_ports:
            return None
        wanted = pod.host_ports
        position = np.full(cluster.size, -1, dtype=np.int64)
        position[slots] = np.arange(len(slots))
        shortfall = np.zeros((len(slots), 1), dtype=np.int64)
        for slot, used in cluster.node_ports.items():
            if slot < cluster.size and position[slot] >= 0:
                shortfall[position[slot], 0] = sum(
                    count for port, count in used.items() if ports_conflict(wanted, [port])
                )

        def frees(victim: PodInfo) -> tuple[int]:
            return (sum(1 for port in victim.host_ports if ports_conflict(wanted, [port])),)

        def frees_below(priority: int) -> np.ndarray:
            freed = np.zeros((len(slots), 1), dtype=np.int64)
            for slot in cluster.node_ports:
                if slot < cluster.size and position[slot] >= 0:
                    freed[position[slot], 0] = sum(
                        frees(record.pod)[0] for record in cluster.pods_on(cluster.names[slot])
                        if record.pod.priority < priority
                    )
            return freed

        return EvictionTerms(shortfall, frees, frees_below)
