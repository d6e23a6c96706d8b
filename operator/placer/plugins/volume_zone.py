"""VolumeZone — a bound claim's volume must be in the node's zone, as kube-scheduler's plugin.

What it does: for each PersistentVolumeClaim the pod mounts (`persistentVolumeClaim` volumes; kube
leaves generic ephemeral volumes to VolumeBinding) that is bound to a volume, the volume's zone and
region labels (`topology.kubernetes.io/zone`, `topology.kubernetes.io/region` and their
`failure-domain.beta.kubernetes.io/...` forms) must be matched by the node's value of the same
label. A value may list several zones joined by `__` (kube's `LabelZonesToSet`; a list with an
empty entry is ignored). A volume labelled with a beta key also accepts the node's GA label when
the node lacks the beta one (not the other way round, as kube). A node with none of the four labels
passes (a single-zone cluster). Reason: "node(s) had no available volume zone".

Claims of a WaitForFirstConsumer class not bound yet are skipped: they get their zone when
VolumeBinding picks the node. Pod-level (kube's PreFilter, UnschedulableAndUnresolvable), the pod fits
nowhere: a claim that does not exist — `persistentvolumeclaim "NAME" not found`; a bound claim whose
volume does not exist — `persistentvolume "NAME" not found`; an unbound claim without a class —
"PersistentVolumeClaim had no pv name and storageClass name"; whose class does not exist —
`storageclasses.storage.k8s.io "NAME" not found`; whose class has no `volumeBindingMode` (the API
server always sets one) — `VolumeBindingMode not set for StorageClass "NAME"`; of any other class
(Immediate) — "PersistentVolume had no name". (In the default profile VolumeBinding, which comes
first, already rejects such a pod for its unbound immediate claim.)

The node mask of a set of volume topologies is computed once from the label columns and cached until
a node changes; what a pod's claims resolve to is read afresh each cycle, so a relabelled or rebound
volume counts at once.

Args: none.

Example profile (the default profile has it as a filter)::

    spec:
      schedulerName: stateful-scheduler
      filters: [{name: VolumeBinding}, {name: VolumeZone}]
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import numpy as np

from placer.engine.cluster import REGION_LABELS, ZONE_LABELS, ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    UNSIGNABLE,
    ClusterEvent,
    CycleMemo,
    FilterPlugin,
    NoArgs,
    StaticCache,
)
from placer.engine.objects import PodInfo
from placer.engine.storage import ClaimInfo, StorageClassInfo, VolumeInfo

__all__ = ["VolumeZone", "label_zones"]

CLAIM = "PersistentVolumeClaim"
VOLUME = "PersistentVolume"
CLASS = "StorageClass"

GA_ZONE, BETA_ZONE = ZONE_LABELS
GA_REGION, BETA_REGION = REGION_LABELS
# kube's `topologyLabels`, in its order
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, GA_ZONE, GA_REGION)
GA_OF = {BETA_ZONE: GA_ZONE, BETA_REGION: GA_REGION}
MULTI_ZONE_DELIMITER = "__"

# one volume label the node must match: (label key, the zones it allows)
Topology = tuple[str, frozenset[str]]


def label_zones(value: str) -> frozenset[str] | None:
    """kube's `volumehelpers.LabelZonesToSet`: `a__b` is {a, b}, entries trimmed; None (the label is
    ignored) when an entry is empty."""
    zones = [zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)]
    if any(not zone for zone in zones):
        return None
    return frozenset(zones)


def volume_topologies(volume: VolumeInfo) -> list[Topology]:
    """kube's `getPVTopologies`: the zone/region labels of a volume."""
    found: list[Topology] = []
    for key in TOPOLOGY_LABELS:
        value = volume.labels.get(key)
        if value is not None and (zones := label_zones(value)) is not None:
            found.append((key, zones))
    return found


class VolumeZone(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "VolumeZone"
    reason: ClassVar[str] = "node(s) had no available volume zone"
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE, VOLUME, CLAIM, CLASS})

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        # per pod and cycle: (pod-level reason, the volumes' topologies)
        self._memo: CycleMemo[tuple[str | None, tuple[Topology, ...]]] = CycleMemo()
        self._masks: StaticCache[np.ndarray] = StaticCache()

    def _topologies(self, pod: PodInfo, cluster: ClusterState) -> tuple[str | None, tuple[Topology, ...]]:
        """kube's `getPVbyPod`, memoised for the cycle."""
        found = self._memo.get(pod, cluster)
        if found is not None:
            return found
        catalog = cluster.catalog
        topologies: list[Topology] = []
        reason: str | None = None
        for ref in pod.volumes.claims:
            if ref.ephemeral:
                continue  # kube reads `persistentVolumeClaim` volumes only
            claim: ClaimInfo | None = catalog.get(CLAIM, ref.name, pod.namespace)
            if claim is None:
                reason = f'persistentvolumeclaim "{ref.name}" not found'
                break
            if not claim.volume_name:
                reason = self._unbound(claim, cluster)
                if reason is None:
                    continue  # WaitForFirstConsumer: the zone comes with the node
                break
            volume: VolumeInfo | None = catalog.get(VOLUME, claim.volume_name)
            if volume is None:
                reason = f'persistentvolume "{claim.volume_name}" not found'
                break
            topologies.extend(volume_topologies(volume))
        result = (reason, () if reason is not None else tuple(topologies))
        return self._memo.put(pod, cluster, result)

    @staticmethod
    def _unbound(claim: ClaimInfo, cluster: ClusterState) -> str | None:
        """kube's `getPVbyPod` on a claim without a volume: None for a WaitForFirstConsumer class."""
        if not claim.storage_class:
            return "PersistentVolumeClaim had no pv name and storageClass name"
        storage_class: StorageClassInfo | None = cluster.catalog.get(CLASS, claim.storage_class)
        if storage_class is None:
            return f'storageclasses.storage.k8s.io "{claim.storage_class}" not found'
        if not storage_class.binding_mode:
            return f'VolumeBindingMode not set for StorageClass "{claim.storage_class}"'
        if storage_class.delays_binding:
            return None
        return "PersistentVolume had no name"

    def _mask(self, cluster: ClusterState, topologies: tuple[Topology, ...]) -> np.ndarray:
        """The nodes that match every topology (kube's Filter), cached until a node changes."""
        key = tuple(sorted(set(topologies), key=lambda t: (t[0], sorted(t[1]))))
        mask = self._masks.get(cluster, key)
        if mask is not None:
            return mask
        labelled = np.zeros(cluster.size, dtype=bool)
        for label in TOPOLOGY_LABELS:
            labelled |= np.not_equal(cluster.label_column(label), None)
        mask = np.ones(cluster.size, dtype=bool)
        for label, zones in key:
            values = cluster.label_column(label)
            ga = GA_OF.get(label)
            if ga is not None:  # a beta label of the volume also reads the node's GA label
                values = np.where(np.equal(values, None), cluster.label_column(ga), values)
            found = np.zeros(cluster.size, dtype=bool)
            for zone in zones:
                found |= np.equal(values, zone)
            mask &= found
        mask |= ~labelled  # a node without any zone label passes
        return self._masks.put(key, mask)

    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods it does not constrain)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod without volumes, which it does not constrain: the volumes' state (claims,
        volumes, attachments) moves with every such pod placed."""
        return None if not pod.volumes.any else UNSIGNABLE

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | None:
        if not pod.volumes.claims:
            return None
        return self._topologies(pod, cluster)[0]

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not pod.volumes.claims:
            return None
        reason, topologies = self._topologies(pod, cluster)
        if reason is not None:  # kube's Filter gives the PreFilter's error on every node
            return np.zeros(cluster.size, dtype=bool)
        if not topologies:
            return None
        return self._mask(cluster, topologies)

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        reason = self._topologies(pod, cluster)[0]
        return Counter({reason or self.reason: len(rejected)})
