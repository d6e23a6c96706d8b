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
from placer.engine.framework import ClusterEvent, FilterPlugin, NoArgs
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
