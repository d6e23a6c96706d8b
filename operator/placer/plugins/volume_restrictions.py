"""VolumeRestrictions — volumes that pods may not share, as kube-scheduler's plugin of that name.

What it does, per node, in kube's order:

1. inline disks: a node is rejected when a pod counted there (bound or assumed) mounts the same
   disk as one of the incoming pod's in a way that conflicts — the same GCE persistent disk unless
   both mount it read-only, the same AWS EBS volume always, the same Ceph RBD image (pool and image)
   through a common monitor unless both are read-only, the same iSCSI IQN unless both are read-only
   (kube's `isVolumeConflict`). Reason: "node(s) had no available disk";
2. `ReadWriteOncePod` claims: when a claim the pod mounts has that access mode and another counted
   pod, on any node, already uses it, every node is rejected (modern kube's Filter, Unschedulable,
   so preemption may evict that pod where it runs). Reason (kube v1.36): "node(s) unavailable due to
   PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod".

Pod-level (kube's PreFilter): a claim the pod mounts (`persistentVolumeClaim` volumes) that does not
exist — `persistentvolumeclaim "NAME" not found`.

The disks in use per node and the pods using each claim are kept incrementally as pods are counted
and uncounted on nodes (PodTrackers): no cycle scans the pods, and a pod without inline disks or
claims costs nothing. Preemption's question (would the pod fit on this node with these pods gone?) is
answered from the same trackers, on that node alone.

Args: none.

Example profile (the default profile has it as a filter)::

    spec:
      schedulerName: my-scheduler
      filters: [{name: NodePorts}, {name: VolumeRestrictions}]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from placer.engine.cluster import ClusterState, PodRecord, PodTracker
from placer.engine.framework import BATCH_NONE, UNSIGNABLE, ClusterEvent, CycleMemo, FilterPlugin, NoArgs
from placer.engine.objects import PodInfo
from placer.engine.storage import ClaimInfo
from placer.engine.volumes import AWS_EBS, GCE_PD, ISCSI, RBD, InlineDisk

__all__ = ["ClaimUsers", "DisksInUse", "VolumeRestrictions"]

CLAIM = "PersistentVolumeClaim"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
DISK_CONFLICT = "node(s) had no available disk"
READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
# the inline disks kube checks for conflicts (kube's `needsRestrictionsCheck`)
CHECKED_PLUGINS = frozenset({GCE_PD, AWS_EBS, RBD, ISCSI})


class DisksInUse(PodTracker):
    """Per slot, the conflict-checked inline disks of the pods counted there, indexed by disk (plugin
    and id) so that a pod's disks are checked against the few slots that hold the same disk."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        # (plugin, id) -> slot -> how many of the pods there mount each variant of that disk
        self._by_disk: dict[tuple[str, str], dict[int, Counter[InlineDisk]]] = {}
        self._by_slot: dict[int, Counter[InlineDisk]] = {}

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        for disk in pod.volumes.disks:
            if disk.plugin in CHECKED_PLUGINS:
                self._bump(disk, slot, sign)

    def _bump(self, disk: InlineDisk, slot: int, sign: int) -> None:
        key = (disk.plugin, disk.id)
        slots = self._by_disk.setdefault(key, {})
        held = slots.setdefault(slot, Counter())
        held[disk] += sign
        if held[disk] <= 0:
            del held[disk]
            if not held:
                del slots[slot]
                if not slots:
                    del self._by_disk[key]
        on_slot = self._by_slot.setdefault(slot, Counter())
        on_slot[disk] += sign
        if on_slot[disk] <= 0:
            del on_slot[disk]
            if not on_slot:
                del self._by_slot[slot]

    def held(self, slot: int, disk: InlineDisk) -> Counter[InlineDisk]:
        """How many of the pods counted on `slot` mount each variant of `disk` (same plugin and id)."""
        return self._by_disk.get((disk.plugin, disk.id), {}).get(slot, Counter())

    def conflicting_slots(self, disks: tuple[InlineDisk, ...]) -> list[int]:
        """The slots where a counted pod's disk conflicts with one of `disks`."""
        found: list[int] = []
        for disk in disks:
            if disk.plugin not in CHECKED_PLUGINS:
                continue
            for slot, held in self._by_disk.get((disk.plugin, disk.id), {}).items():
                if any(disk.conflicts(other) for other in held):
                    found.append(slot)
        return found

    def clear_slot(self, slot: int) -> None:
        for disk, count in list(self._by_slot.get(slot, Counter()).items()):
            self._bump(disk, slot, -count)


class ClaimUsers(PodTracker):
    """Which counted pods (bound or assumed, on any node) use each claim `namespace/name` — kube's
    `StorageInfos().IsPVCUsedByPods` — kept as pods come and go."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._users: dict[str, Counter[str]] = {}  # claim key -> pod key -> references
        self._by_slot: dict[int, Counter[tuple[str, str]]] = {}  # slot -> (claim key, pod key) -> references

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        for ref in pod.volumes.claims:
            if not ref.ephemeral:  # kube counts `persistentVolumeClaim` volumes only
                self._bump(f"{pod.namespace}/{ref.name}", pod.key, slot, sign)

    def _bump(self, claim: str, pod: str, slot: int, sign: int) -> None:
        users = self._users.setdefault(claim, Counter())
        users[pod] += sign
        if users[pod] <= 0:
            del users[pod]
            if not users:
                del self._users[claim]
        on_slot = self._by_slot.setdefault(slot, Counter())
        on_slot[claim, pod] += sign
        if on_slot[claim, pod] <= 0:
            del on_slot[claim, pod]
            if not on_slot:
                del self._by_slot[slot]

    def users(self, claim: str) -> Counter[str]:
        """The counted pods (keys) using the claim, with how many times each mounts it."""
        return self._users.get(claim, Counter())

    def used_by_others(self, claim: str, pod: str) -> bool:
        """Whether a counted pod other than `pod` (a pod key) uses the claim."""
        users = self._users.get(claim)
        return bool(users) and (len(users) > 1 or pod not in users)

    def clear_slot(self, slot: int) -> None:
        for (claim, pod), count in list(self._by_slot.get(slot, Counter()).items()):
            self._bump(claim, pod, slot, -count)


class VolumeRestrictions(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "VolumeRestrictions"
    reason: ClassVar[str] = DISK_CONFLICT
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.POD_DELETE, ClusterEvent.NODE_ADD, CLAIM})
    resolvable: ClassVar[bool] = True  # both reasons are kube's Unschedulable: evicting a pod may help

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        # per pod and cycle: (pod-level reason, its ReadWriteOncePod claim keys)
        self._claims: CycleMemo[tuple[str | None, tuple[str, ...]]] = CycleMemo()

    def _pod_claims(self, pod: PodInfo, cluster: ClusterState) -> tuple[str | None, tuple[str, ...]]:
        """kube's `readWriteOncePodPVCsForPod`: a missing claim, or the pod's ReadWriteOncePod claims."""
        found = self._claims.get(pod, cluster)
        if found is not None:
            return found
        keys: list[str] = []
        reason: str | None = None
        for ref in pod.volumes.claims:
            if ref.ephemeral:
                continue
            claim: ClaimInfo | None = cluster.catalog.get(CLAIM, ref.name, pod.namespace)
            if claim is None:
                reason = f'persistentvolumeclaim "{ref.name}" not found'
                break
            if READ_WRITE_ONCE_POD in claim.access_modes:
                keys.append(claim.key)
        return self._claims.put(pod, cluster, (reason, () if reason is not None else tuple(dict.fromkeys(keys))))

    def _rwop_conflict(self, pod: PodInfo, cluster: ClusterState) -> bool:
        keys = self._pod_claims(pod, cluster)[1]
        if not keys:
            return False
        users = cluster.tracker(ClaimUsers)
        return any(users.used_by_others(key, pod.key) for key in keys)

    def _disk_conflicts(self, pod: PodInfo, cluster: ClusterState) -> list[int]:
        if not pod.volumes.disks:
            return []
        return cluster.tracker(DisksInUse).conflicting_slots(pod.volumes.disks)

    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods it does not constrain)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod without volumes, which it does not constrain: the volumes' state (claims,
        volumes, attachments) moves with every such pod placed."""
        return None if not pod.volumes.any else UNSIGNABLE

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | None:
        if not pod.volumes.claims:
            return None
        return self._pod_claims(pod, cluster)[0]

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        volumes = pod.volumes
        if not volumes.disks and not volumes.claims:
            return None
        if volumes.claims and self._pod_claims(pod, cluster)[0] is not None:
            return np.zeros(cluster.size, dtype=bool)  # the PreFilter's error, on every node
        if self._rwop_conflict(pod, cluster):
            return np.zeros(cluster.size, dtype=bool)
        conflicts = self._disk_conflicts(pod, cluster)
        if not conflicts:
            return None
        mask = np.ones(cluster.size, dtype=bool)
        mask[conflicts] = False
        return mask

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        if pod.volumes.claims and (reason := self._pod_claims(pod, cluster)[0]) is not None:
            return Counter({reason: len(rejected)})
        on_disk = np.isin(rejected, self._disk_conflicts(pod, cluster))
        counts: Counter[str] = Counter()
        if on_disk.any():
            counts[DISK_CONFLICT] = int(on_disk.sum())
        if (~on_disk).any():  # the rest were rejected for a ReadWriteOncePod claim in use
            counts[READ_WRITE_ONCE_POD_CONFLICT] = int((~on_disk).sum())
        return counts

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        missing = bool(pod.volumes.claims) and self._pod_claims(pod, cluster)[0] is not None
        return np.full(len(rejected), not missing, dtype=bool)

    def fits_without(self, pod: PodInfo, cluster: ClusterState, slot: int, removed: Sequence[PodRecord]) -> bool:
        """Node-local, from the trackers (kube's RemovePod on the PreFilter state): the ReadWriteOncePod
        claims are free once every other pod using them is among `removed`, and a disk once the
        pods of `slot` still mounting it do not conflict."""
        volumes = pod.volumes
        if not volumes.disks and not volumes.claims:
            return True
        reason, keys = self._pod_claims(pod, cluster) if volumes.claims else (None, ())
        if reason is not None:
            return False  # a missing claim: no eviction brings it
        gone = [record.pod for record in removed if cluster.index.get(record.node) == slot]
        if keys:
            leaving = {other.key for other in gone} | {pod.key}
            users = cluster.tracker(ClaimUsers)
            if any(not set(users.users(key)) <= leaving for key in keys):
                return False
        if volumes.disks:
            disks = cluster.tracker(DisksInUse)
            for disk in volumes.disks:
                if disk.plugin not in CHECKED_PLUGINS:
                    continue
                held = Counter(disks.held(slot, disk))
                if not held:
                    continue
                for other in gone:
                    held.subtract(d for d in other.volumes.disks if d.plugin == disk.plugin and d.id == disk.id)
                if any(count > 0 and disk.conflicts(other) for other, count in held.items()):
                    return False
        return True
