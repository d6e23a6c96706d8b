"""Nominations, as kube-scheduler's nominator keeps them: a pending pod of ours with
`status.nominatedNodeName` (a preemptor waiting for its victims to go) holds that node's room
(`ClusterState.nominate`) against pods of its priority or lower, until it is bound, deleted, or its
nomination is cleared. Every new term rebuilds them from the pods' status.

Placer writes nominations itself (`placer.controller.scheduling.preemption`); while such a write of a pod is
on its way (`writes`), the cluster's nomination leads and the watch's copies of that pod do not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from placer.controller.signals import Wake
from placer.engine.cluster import ClusterState
from placer.engine.framework import ClusterEvent
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile

__all__ = ["Nominations"]


class Nominations:
    def __init__(self, cluster: ClusterState, active: Callable[[str], Profile | None], wake: Wake) -> None:
        self.cluster = cluster
        self.active = active  # the profile that owns a schedulerName now
        self.wake = wake
        # pods whose status.nominatedNodeName Placer is writing, with how many writes each
        self.writes: Counter[str] = Counter()

    def follow(self, pod: PodInfo, known: PodInfo | None) -> None:
        """A pending pod's `status.nominatedNodeName`, as kube's nominator follows it: a pod of ours
        (a profile serves its schedulerName) nominated to a node holds that node's room. A change on
        the server is followed (set, moved, cleared); a copy that did not change it keeps what this
        scheduler decided meanwhile (a preemption whose write is on its way, a nomination it
        cleared), and so does any copy while Placer's own write of it is in flight."""
        key = pod.key
        held = self.cluster.nominated.get(key)
        if self.active(pod.scheduler_name) is None:
            self.unnominate(key)
            return
        if key in self.writes or (
            known is not None and known.uid == pod.uid and known.nominated_node == pod.nominated_node
        ):
            if held is not None:
                self.cluster.nominate(pod, held.node)  # the pod's latest version, where memory says
            return
        if pod.nominated_node:
            self.cluster.nominate(pod, pod.nominated_node)
        else:
            self.unnominate(key)

    def unnominate(self, key: str, now_on: str | None = None) -> bool:
        """Drop a pod's nomination; the room it held is free (unless the pod now runs there)."""
        held = self.cluster.nominated.get(key)
        if held is None:
            return False
        self.cluster.unnominate(key)
        if held.node != now_on:
            self.wake(ClusterEvent.POD_DELETE)
        return True

    def rebuild(self, pending: Mapping[str, Mapping[str, PodInfo]], scheduler_names: Iterable[str]) -> None:
        """The nominations as the pods' status says (at the start of a term), from the pending pods
        by schedulerName of the names the profiles own: what a previous term of this process
        decided but never wrote is forgotten, what another leader wrote is taken."""
        for key in list(self.cluster.nominated):
            self.cluster.unnominate(key)
        for name in scheduler_names:
            for key, pod in pending.get(name, {}).items():
                if pod.nominated_node and key not in self.cluster.pods and not pod.deleting:
                    self.cluster.nominate(pod, pod.nominated_node)
