"""NodeVolumeLimits — CSI volumes per driver within the node's limit, as kube-scheduler's CSILimits.

What it does: a node's `CSINode` says, per CSI driver, how many volumes the node can attach
(`spec.drivers[].allocatable.count`). The unique volumes in use there per driver — those of every
pod counted on the node, bound or assumed, a volume shared by several pods counted once — plus the
incoming pod's volumes not already in use there must not exceed it. Reason: "node(s) exceed max
volume count". A node without a CSINode, or whose CSINode gives no count for a driver, has no limit
for it.

A volume counts under (driver, handle), as kube's `filterAttachableVolumes`:

- a claim (`persistentVolumeClaim`, or a generic ephemeral volume's claim) bound to a CSI volume: its
  `spec.csi` driver and `volumeHandle`; bound to an in-tree GCE PD, AWS EBS, Azure Disk or Cinder
  volume: the CSI driver it migrates to and its disk id (migration of these is always on in modern
  kube wherever the node has a CSINode); bound to another kind of volume: not counted;
- a claim not bound yet, or bound to a volume that does not exist: its StorageClass's provisioner
  (an in-tree one translated to its CSI driver), with a handle unique to the claim
  (`getCSIDriverInfoFromSC`); no class, or a class that does not exist: not counted;
- an inline GCE PD, AWS EBS, Azure Disk or Cinder volume: its CSI driver and disk id.

(An EBS id written `aws://<zone>/<vol-id>` is the bare `<vol-id>`, as kube translates it.)

Inline CSI volumes (`spec.volumes[].csi`) are not counted, nor are other inline volumes: kube skips
pods that have no claim and no migratable inline disk. A claim of the incoming pod that does not
exist rejects every node with kube's `looking up PVC NS/NAME: persistentvolumeclaim "NAME" not
found`; a generic ephemeral volume's claim not owned by the pod with `PVC NS/NAME was not created
for pod NS/POD (pod is not owner)`. A claim of a pod already placed that cannot be resolved is not
counted.

The volumes in use per node are kept incrementally as pods are counted and uncounted (a PodTracker),
resolved when the pod is counted. A claim may bind after its pod was counted (or the claim, its
volume or its class arrive after it): the pods with such claims are resolved again once claims,
volumes or classes have changed (once per change, not per cycle). A claim bound to a volume that
exists stays counted as it is while its pod is: Kubernetes changes neither a claim's `volumeName`
nor a volume's source, and deletes neither while a pod uses them. Preemption's question (would the
pod fit on this node with these pods gone?) is answered from the same tracker, on that node alone.

VolumeAttachments (kube v1.33+): a `storage.k8s.io/v1` VolumeAttachment on the node — its
`attacher` set and its source a PersistentVolume that exists with a `spec.csi` source — counts
its volume, (attacher, the PV's `volumeHandle`), under the attacher, unless a pod counted there
uses that volume (counted once). As in kube, the incoming pod's volume still counts as new when only
an attachment holds it on the node (kube removes from the new volumes those of the node's pods
alone). A volume detached (its VolumeAttachment deleted) wakes the pods this filter rejected.

Not modelled: limits in the Node's allocatable (`attachable-volumes-*`, no longer published for CSI
drivers).

Args: none.

Example profile (the default profile has it as a filter)::

    spec:
      schedulerName: my-scheduler
      filters: [{name: NodeResourcesFit}, {name: NodeVolumeLimits}]
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

import numpy as np

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState, PodRecord, PodTracker, SlotColumns
from placer.engine.framework import BATCH_NONE, UNSIGNABLE, ClusterEvent, CycleMemo, FilterPlugin, NoArgs
from placer.engine.objects import PodInfo
from placer.engine.storage import (
    CSI_DRIVER_OF,
    ClaimInfo,
    CsiNodeInfo,
    StorageClassInfo,
    VolumeAttachmentInfo,
    VolumeInfo,
)
from placer.engine.volumes import AWS_EBS

__all__ = ["NodeVolumeLimits", "VolumesInUse", "attached_volumes", "pod_volumes"]

CLAIM = "PersistentVolumeClaim"
VOLUME = "PersistentVolume"
CLASS = "StorageClass"
CSI_NODE = "CSINode"
ATTACHMENT = "VolumeAttachment"
REASON = "node(s) exceed max volume count"
NO_LIMIT = -1

# a volume as attach limits count it: (CSI driver, volume handle)
Volume = tuple[str, str]


class ResolveError(Exception):
    """A claim of the incoming pod that cannot be read: it fits no node."""


def _claim_handle(claim: ClaimInfo) -> str:
    # kube uses a random prefix so that it never collides with a real handle; a NUL does the same
    return f"\x00claim/{claim.namespace}/{claim.name}"


def _from_class(catalog: Catalog, claim: ClaimInfo) -> Volume | None:
    """kube's `getCSIDriverInfoFromSC`: a claim not bound (yet) counts under its class's provisioner."""
    if not claim.storage_class:
        return None
    storage_class: StorageClassInfo | None = catalog.get(CLASS, claim.storage_class)
    if storage_class is None or not storage_class.provisioner:
        return None
    driver = CSI_DRIVER_OF.get(storage_class.provisioner, storage_class.provisioner)
    return driver, _claim_handle(claim)


def _disk_handle(plugin: str, disk_id: str) -> str:
    """The handle an in-tree disk id translates to (kube's csi-translation-lib): an EBS id written
    `aws://<zone>/<vol-id>` is the bare `<vol-id>`; other ids are kept."""
    if plugin == AWS_EBS and disk_id.startswith("aws://"):
        return urlsplit(disk_id).path.strip("/")
    return disk_id


def pod_volumes(pod: PodInfo, cluster: ClusterState, incoming: bool = False) -> tuple[set[Volume], bool]:
    """The attachable volumes of a pod (kube's `filterAttachableVolumes`), and whether they are
    settled: every claim bound to a volume that exists (Kubernetes changes neither a claim's
    `volumeName` nor a volume's source, and deletes neither while a pod uses it). For the `incoming`
    pod a claim that cannot be read raises ResolveError; for a pod already placed it is not counted."""
    catalog = cluster.catalog
    found: set[Volume] = set()
    settled = True
    for ref in pod.volumes.claims:
        claim: ClaimInfo | None = catalog.get(CLAIM, ref.name, pod.namespace)
        if claim is None:
            if incoming:
                raise ResolveError(
                    f'looking up PVC {pod.namespace}/{ref.name}: persistentvolumeclaim "{ref.name}" not found'
                )
            settled = False
            continue
        if ref.ephemeral and claim.owner_uid != pod.uid:
            if incoming:
                raise ResolveError(
                    f"PVC {pod.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
                    "(pod is not owner)"
                )
            settled = False
            continue
        volume: VolumeInfo | None = catalog.get(VOLUME, claim.volume_name) if claim.volume_name else None
        if volume is None:
            settled = False
            resolved = _from_class(catalog, claim)
            if resolved is not None:
                found.add(resolved)
        elif volume.csi_driver and volume.csi_handle:
            found.add((volume.csi_driver, _disk_handle(volume.in_tree, volume.csi_handle)))
    for disk in pod.volumes.disks:
        driver = CSI_DRIVER_OF.get(disk.plugin)
        if driver is not None:
            found.add((driver, _disk_handle(disk.plugin, disk.id)))
    return found, settled


def _relevant(pod: PodInfo) -> bool:
    """kube's PreFilter: only claims and migratable inline disks can count."""
    volumes = pod.volumes
    return bool(volumes.claims) or any(disk.plugin in CSI_DRIVER_OF for disk in volumes.disks)


class VolumesInUse(PodTracker):
    """Per slot, the unique volumes in use per driver by the pods counted there.

    `counts(driver)` is a column of distinct volumes per slot; `slots_using(volume)` the slots where a
    volume is in use. Each pod's volumes are resolved when it is counted and remembered, so that
    uncounting it removes exactly what it added. Those not settled yet (a claim not bound, or naming a
    volume or a class not there yet, or missing) are resolved again by `refresh` once claims, volumes
    or classes have changed; settled ones stay as they are while the pod is counted."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._columns = SlotColumns(cluster.capacity)
        self._users: dict[Volume, Counter[int]] = {}  # volume -> slot -> pods using it there
        # pod key -> (pod, slot, its volumes), for every counted pod that may have any
        self._pods: dict[str, tuple[PodInfo, int, frozenset[Volume]]] = {}
        self._unsettled: set[str] = set()  # the pods whose volumes `refresh` resolves again
        self._slot_pods: dict[int, set[str]] = {}
        self._stamp = self._catalog_stamp()

    def _catalog_stamp(self) -> tuple[int, int, int, int]:
        catalog = self.cluster.catalog
        return (id(catalog), catalog.version(CLAIM), catalog.version(VOLUME), catalog.version(CLASS))

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        if not _relevant(pod):
            return
        if sign > 0:
            if pod.key in self._pods:  # counted again without being uncounted: replace it
                self._uncount(pod.key)
            volumes, settled = pod_volumes(pod, self.cluster)
            held = frozenset(volumes)
            self._pods[pod.key] = (pod, slot, held)
            if not settled:
                self._unsettled.add(pod.key)
            self._slot_pods.setdefault(slot, set()).add(pod.key)
            self._apply(held, slot, +1)
        elif pod.key in self._pods:
            self._uncount(pod.key)

    def _uncount(self, key: str) -> None:
        _, slot, held = self._pods.pop(key)
        self._unsettled.discard(key)
        keys = self._slot_pods.get(slot)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._slot_pods[slot]
        self._apply(held, slot, -1)

    def _apply(self, volumes: frozenset[Volume], slot: int, sign: int) -> None:
        for volume in volumes:
            users = self._users.setdefault(volume, Counter())
            before = users[slot]
            users[slot] = before + sign
            if before == 0 and sign > 0:
                self._columns.column(volume[0])[slot] += 1
            elif users[slot] <= 0:
                del users[slot]
                if not users:
                    del self._users[volume]
                self._columns.column(volume[0])[slot] -= 1

    def refresh(self) -> None:
        """Resolve the unsettled pods' volumes again if claims, volumes or classes changed since."""
        stamp = self._catalog_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        for key in list(self._unsettled):
            pod, slot, old = self._pods[key]
            volumes, settled = pod_volumes(pod, self.cluster)
            if settled:
                self._unsettled.discard(key)
            new = frozenset(volumes)
            if new != old:
                self._apply(old, slot, -1)
                self._apply(new, slot, +1)
                self._pods[key] = (pod, slot, new)

    def counts(self, driver: str) -> np.ndarray | None:
        """Per slot in [0, cluster.size), the distinct volumes of `driver` in use (None: none anywhere)."""
        column = self._columns.get(driver)
        return None if column is None else column[: self.cluster.size]

    def slots_using(self, volume: Volume) -> Counter[int]:
        return self._users.get(volume, Counter())

    def held_by(self, key: str) -> tuple[int, frozenset[Volume]] | None:
        """The slot and the volumes of a counted pod (None: it holds none)."""
        entry = self._pods.get(key)
        return None if entry is None else (entry[1], entry[2])

    def clear_slot(self, slot: int) -> None:
        for key in list(self._slot_pods.get(slot, ())):
            self._uncount(key)

    def grow(self, capacity: int) -> None:
        self._columns.grow(capacity)


class _Limits:
    """Per driver, the nodes' limits, for one cluster, one version of the CSINodes and one set of
    nodes in their slots (a node's labels or metrics changing does not invalidate them)."""

    def __init__(self) -> None:
        self._cluster: weakref.ref[ClusterState] | None = None
        self._csi_version = -1
        self._static_version = -1
        self._names: np.ndarray = np.empty(0, dtype=object)
        self._drivers: dict[str, np.ndarray | None] = {}

    def valid_for(self, cluster: ClusterState) -> dict[str, np.ndarray | None]:
        owner = self._cluster() if self._cluster is not None else None
        version = cluster.catalog.version(CSI_NODE)
        if owner is cluster and version == self._csi_version and cluster.static_version == self._static_version:
            return self._drivers
        names = cluster.names[: cluster.size]
        if owner is not cluster or version != self._csi_version or not np.array_equal(names, self._names):
            self._drivers = {}
            self._names = names.copy()
            self._cluster = weakref.ref(cluster)
            self._csi_version = version
        self._static_version = cluster.static_version
        return self._drivers


# attacher -> slot -> the volumes VolumeAttachments attach to that node
Attached = dict[str, dict[int, frozenset[Volume]]]


def attached_volumes(cluster: ClusterState) -> Attached:
    """kube's `getNodeVolumeAttachmentInfo` for every node: per attacher and node slot, the volumes
    of the VolumeAttachments there — those with an attacher and a PersistentVolume source that
    exists and is a CSI volume (`spec.csi`; an in-tree source is skipped, as kube does), each
    (attacher, volumeHandle)."""
    catalog = cluster.catalog
    found: dict[str, dict[int, set[Volume]]] = {}
    for _, _, attachment in catalog.items(ATTACHMENT):
        assert isinstance(attachment, VolumeAttachmentInfo)
        slot = cluster.index.get(attachment.node_name)
        if slot is None or not attachment.attacher or not attachment.volume:
            continue
        volume: VolumeInfo | None = catalog.get(VOLUME, attachment.volume)
        if volume is None or volume.in_tree or not volume.csi_driver:
            continue
        found.setdefault(attachment.attacher, {}).setdefault(slot, set()).add(
            (attachment.attacher, volume.csi_handle))
    return {driver: {slot: frozenset(v) for slot, v in slots.items()} for driver, slots in found.items()}


class _Attachments:
    """`attached_volumes`, kept for one cluster until VolumeAttachments, volumes or nodes change."""

    def __init__(self) -> None:
        self._key: tuple[weakref.ref[ClusterState], int, int, int] | None = None
        self._value: Attached = {}

    def valid_for(self, cluster: ClusterState) -> Attached:
        catalog = cluster.catalog
        if not catalog.count(ATTACHMENT):
            return {}
        key = (weakref.ref(cluster), catalog.version(ATTACHMENT), catalog.version(VOLUME), cluster.static_version)
        if self._key is None or self._key[0]() is not cluster or self._key[1:] != key[1:]:
            self._key, self._value = key, attached_volumes(cluster)
        return self._value


@dataclass(slots=True)
class _Cycle:
    """One pod's evaluation: a reason every node gets, or the nodes over a limit."""

    error: str | None = None
    mask: np.ndarray | None = None  # None: every node fits
    new: dict[str, list[Volume]] = field(default_factory=dict)


class NodeVolumeLimits(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "NodeVolumeLimits"
    reason: ClassVar[str] = REASON
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.POD_DELETE, ClusterEvent.NODE_ADD, CSI_NODE, CLAIM, VOLUME, ATTACHMENT}
    )
    resolvable: ClassVar[bool] = True  # evicting pods frees their volumes

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        self._memo: CycleMemo[_Cycle] = CycleMemo()
        self._limits = _Limits()
        self._attachments = _Attachments()

    def _limit(self, cluster: ClusterState, driver: str) -> np.ndarray | None:
        """Per slot, the node's CSINode count for `driver` (NO_LIMIT where none); None when no node
        has one. Cached until a CSINode changes or a node comes or goes."""
        cache = self._limits.valid_for(cluster)
        if driver in cache:
            return cache[driver]
        limits = np.full(cluster.size, NO_LIMIT, dtype=np.int64)
        any_limit = False
        if cluster.catalog.count(CSI_NODE):
            for slot, name in enumerate(cluster.names[: cluster.size]):
                if name is None:
                    continue
                csi_node: CsiNodeInfo | None = cluster.catalog.get(CSI_NODE, name)
                count = None if csi_node is None else csi_node.limits.get(driver)
                if count is not None:
                    limits[slot] = count
                    any_limit = True
        cache[driver] = limits if any_limit else None
        return cache[driver]

    def _evaluate(self, pod: PodInfo, cluster: ClusterState) -> _Cycle:
        cycle = self._memo.get(pod, cluster)
        if cycle is not None:
            return cycle
        cycle = _Cycle()
        try:
            wanted = pod_volumes(pod, cluster, incoming=True)[0]
        except ResolveError as error:
            cycle.error = str(error)
            return self._memo.put(pod, cluster, cycle)
        for volume in sorted(wanted):
            cycle.new.setdefault(volume[0], []).append(volume)
        in_use: VolumesInUse | None = None
        over = np.zeros(cluster.size, dtype=bool)
        attached = self._attachments.valid_for(cluster)
        for driver, volumes in cycle.new.items():
            limits = self._limit(cluster, driver)
            if limits is None:
                continue
            if in_use is None:
                in_use = cluster.tracker(VolumesInUse)
                in_use.refresh()
            counts = in_use.counts(driver)
            total = np.full(cluster.size, len(volumes), dtype=np.int64)
            for volume in volumes:  # a volume already in use on a node adds nothing there
                slots = list(in_use.slots_using(volume))
                if slots:
                    total[slots] -= 1
            if counts is not None:
                total += counts
            for slot, held in attached.get(driver, {}).items():  # attached, no pod there uses it
                total[slot] += sum(1 for volume in held if not in_use.slots_using(volume)[slot])
            over |= (limits != NO_LIMIT) & (total > limits)
        if in_use is not None:
            cycle.mask = ~over
        return self._memo.put(pod, cluster, cycle)

    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods it does not constrain)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod without volumes, which it does not constrain: the volumes' state (claims,
        volumes, attachments) moves with every such pod placed."""
        return None if not pod.volumes.any else UNSIGNABLE

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not _relevant(pod):
            return None
        cycle = self._evaluate(pod, cluster)
        if cycle.error is not None:
            return np.zeros(cluster.size, dtype=bool)
        return cycle.mask

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        error = self._evaluate(pod, cluster).error
        return Counter({error or REASON: len(rejected)})

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        return np.full(len(rejected), self._evaluate(pod, cluster).error is None, dtype=bool)

    def fits_without(self, pod: PodInfo, cluster: ClusterState, slot: int, removed: Sequence[PodRecord]) -> bool:
        """Node-local, from the tracker: the volumes in use on `slot` less those only the `removed` pods
        hold there, plus the pod's volumes not in use there after that, within the node's limits."""
        if not _relevant(pod):
            return True
        cycle = self._evaluate(pod, cluster)
        if cycle.error is not None:
            return False  # a claim of the pod that cannot be read: no eviction helps
        if cycle.mask is None:
            return True  # no limit for its drivers anywhere
        in_use = cluster.tracker(VolumesInUse)  # refreshed by _evaluate
        freed: Counter[Volume] = Counter()  # volume -> removed pods holding it on `slot`
        for record in removed:
            held = in_use.held_by(record.pod.key)
            if held is not None and held[0] == slot:
                freed.update(held[1])

        def stays(volume: Volume) -> bool:
            return in_use.slots_using(volume)[slot] > freed[volume]

        attached = self._attachments.valid_for(cluster)
        for driver, volumes in cycle.new.items():
            limits = self._limit(cluster, driver)
            if limits is None or limits[slot] == NO_LIMIT:
                continue
            counts = in_use.counts(driver)
            used = 0 if counts is None else int(counts[slot])
            used -= sum(1 for volume in freed if volume[0] == driver and not stays(volume))
            used += sum(1 for volume in attached.get(driver, {}).get(slot, ()) if not stays(volume))
            new = sum(1 for volume in volumes if not stays(volume))
            if used + new > limits[slot]:
                return False
        return True
