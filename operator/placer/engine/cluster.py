"""The cluster as the engine sees it: a columnar node table plus per-node accounting of pods.

Every node occupies a slot; per-node facts live in numpy columns indexed by slot, so a filter
or score over the whole cluster is a handful of vector operations rather than a Python loop
over nodes. Pods bound to a node (and pods the scheduler has *assumed* onto one, before the API
server confirms the binding) add their requests to that node's row; this is what keeps a node
from ever being overcommitted, including while watch events lag behind binds.

Nothing here does I/O: the simulator and the operator feed it the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from placer.engine.objects import NodeInfo, PodInfo, Taint

__all__ = ["CPU", "EPHEMERAL_STORAGE", "MEMORY", "PODS", "ClusterState", "PodRecord"]

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = 0, 1, 2, 3
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


@dataclass(slots=True)
class PodRecord:
    """A pod that holds resources on a node: bound (confirmed) or assumed (bind in flight)."""

    pod: PodInfo
    node: str
    assumed: bool


def _zone_key(labels: dict[str, str]) -> str:
    """kube's `utilnode.GetZoneKey`: region and zone together name a zone."""
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    return f"{region}:\x00:{zone}" if region or zone else ""


class ClusterState:
    """Nodes in columns, pods in records; mutate only through the methods below."""

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = max(capacity, 1)
        self.resources: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {name: i for i, name in enumerate(self.resources)}
        self.size = 0  # slots in use, including freed ones below the high-water mark
        self.index: dict[str, int] = {}
        self.nodes: list[NodeInfo | None] = []
        self._free: list[int] = []
        cap = self._capacity
        self.names = np.empty(cap, dtype=object)
        self.present = np.zeros(cap, dtype=bool)
        self.unschedulable = np.zeros(cap, dtype=bool)
        self.ready = np.zeros(cap, dtype=bool)
        self.allocatable = np.zeros((cap, len(self.resources)), dtype=np.int64)
        self.requested = np.zeros((cap, len(self.resources)), dtype=np.int64)
        # cpu and memory as kube-scheduler's NonZeroRequested, for scoring
        self.nonzero_requested = np.zeros((cap, 2), dtype=np.int64)
        self.taint_group = np.zeros(cap, dtype=np.int32)
        self.taint_groups: list[tuple[Taint, ...]] = [()]
        self._taint_group_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.label_columns: dict[str, np.ndarray] = {}
        self.usage = np.zeros((cap, 2), dtype=np.float64)  # NodeMetrics cpu (milli), memory
        self.has_metrics = np.zeros(cap, dtype=bool)
        self._metrics: dict[str, dict[str, int]] = {}
        self.node_images: list[dict[str, int]] = []
        # image name -> {slot: size on that node}; how many nodes hold it is len() of it
        self.image_slots: dict[str, dict[int, int]] = {}
        self.node_ports: dict[int, Counter[tuple[str, str, int]]] = {}
        self.pods: dict[str, PodRecord] = {}
        self.pods_by_node: dict[str, set[str]] = {}
        self._label_counts: dict[str, dict[str, np.ndarray]] = {}
        self._zones: dict[str, list[int]] = {}
        self._scan_order: np.ndarray | None = None
        self._name_rank: np.ndarray | None = None
        self.static_version = 0  # bumps when anything a static filter reads changes
        self.version = 0  # bumps on every change

    # ----------------------------------------------------------------- node table

    @property
    def node_count(self) -> int:
        return len(self.index)

    def upsert_node(self, node: NodeInfo) -> bool:
        """Add or replace a node; return True when anything scheduling reads has changed."""
        slot = self.index.get(node.name)
        if slot is not None:
            old = self.nodes[slot]
            if old == node:
                return False
            # kube's nodeTree moves a node only when its zone changes: keep its place otherwise
            keep_zone = old is not None and _zone_key(old.labels) == _zone_key(node.labels)
            self._unset_static(slot, old, keep_zone)
            self.nodes[slot] = node
            self._set_static(slot, node, keep_zone)
        else:
            slot = self._allocate_slot(node.name)
            self.nodes[slot] = node
            self._set_static(slot, node)
            for key in self.pods_by_node.get(node.name, ()):
                self._account(self.pods[key], +1)
        self.static_version += 1
        self.version += 1
        return True

    def remove_node(self, name: str) -> bool:
        slot = self.index.pop(name, None)
        if slot is None:
            return False
        self._unset_static(slot, self.nodes[slot])
        self.nodes[slot] = None
        self.names[slot] = None
        self.present[slot] = False
        self.requested[slot] = 0
        self.nonzero_requested[slot] = 0
        self.node_ports.pop(slot, None)
        for counts in self._label_counts.values():
            for column in counts.values():
                column[slot] = 0
        self._free.append(slot)
        self._scan_order = None
        self._name_rank = None
        self.static_version += 1
        self.version += 1
        return True

    def node_names(self) -> list[str]:
        return list(self.index)

    def node(self, name: str) -> NodeInfo | None:
        slot = self.index.get(name)
        return None if slot is None else self.nodes[slot]

    def set_node_metrics(self, name: str, usage: dict[str, int] | None) -> None:
        """Record (or with None, drop) a node's measured usage from metrics.k8s.io."""
        if usage is None:
            self._metrics.pop(name, None)
        else:
            self._metrics[name] = usage
        slot = self.index.get(name)
        if slot is not None:
            self._apply_metrics(slot, name)
            self.static_version += 1
            self.version += 1

    @property
    def any_metrics(self) -> bool:
        return bool(self.has_metrics[: self.size].any())

    def _apply_metrics(self, slot: int, name: str) -> None:
        usage = self._metrics.get(name)
        self.has_metrics[slot] = usage is not None
        self.usage[slot] = (usage.get("cpu", 0), usage.get("memory", 0)) if usage else (0, 0)

    def _allocate_slot(self, name: str) -> int:
        if self._free:
            slot = self._free.pop()
        else:
            if self.size == self._capacity:
                self._grow()
            slot = self.size
            self.size += 1
            self.nodes.append(None)
            self.node_images.append({})
        self.index[name] = slot
        self.names[slot] = name
        self.present[slot] = True
        self._scan_order = None
        self._name_rank = None
        return slot

    def _grow(self) -> None:
        old, new = self._capacity, self._capacity * 2

        def widen(array: np.ndarray, fill: object = 0) -> np.ndarray:
            shape = (new, *array.shape[1:])
            grown = np.full(shape, fill, dtype=array.dtype) if fill is not None else np.empty(shape, dtype=array.dtype)
            grown[:old] = array
            return grown

        self.names = widen(self.names, None)
        self.present = widen(self.present)
        self.unschedulable = widen(self.unschedulable)
        self.ready = widen(self.ready)
        self.allocatable = widen(self.allocatable)
        self.requested = widen(self.requested)
        self.nonzero_requested = widen(self.nonzero_requested)
        self.taint_group = widen(self.taint_group)
        self.usage = widen(self.usage)
        self.has_metrics = widen(self.has_metrics)
        self.label_columns = {key: widen(col, None) for key, col in self.label_columns.items()}
        for counts in self._label_counts.values():
            for value in counts:
                counts[value] = widen(counts[value])
        self._capacity = new

    def resource_column(self, name: str) -> int:
        """The column of a resource, adding one for an extended resource seen the first time."""
        column = self.resource_index.get(name)
        if column is None:
            column = len(self.resources)
            self.resources.append(name)
            self.resource_index[name] = column
            zeros = np.zeros((self._capacity, 1), dtype=np.int64)
            self.allocatable = np.hstack([self.allocatable, zeros])
            self.requested = np.hstack([self.requested, zeros])
        return column

    def label_column(self, key: str) -> np.ndarray:
        """Every slot's value of a label (None where absent); created on first use."""
        column = self.label_columns.get(key)
        if column is None:
            column = np.empty(self._capacity, dtype=object)
            for slot, node in enumerate(self.nodes):
                if node is not None:
                    column[slot] = node.labels.get(key)
            self.label_columns[key] = column
        return column[: self.size]

    def _set_static(self, slot: int, node: NodeInfo, keep_zone: bool = False) -> None:
        self.unschedulable[slot] = node.unschedulable
        self.ready[slot] = node.ready
        self.allocatable[slot] = 0
        for name, amount in node.allocatable.items():
            column = self.resource_column(name)  # may widen the table: look it up first
            self.allocatable[slot, column] = amount
        group = self._taint_group_ids.get(node.taints)
        if group is None:
            group = len(self.taint_groups)
            self.taint_groups.append(node.taints)
            self._taint_group_ids[node.taints] = group
        self.taint_group[slot] = group
        for key, column in self.label_columns.items():
            column[slot] = node.labels.get(key)
        images: dict[str, int] = {}
        for names, size in node.images:
            for image in names:
                images[image] = size
        self.node_images[slot] = images
        for image, size in images.items():
            self.image_slots.setdefault(image, {})[slot] = size
        self._apply_metrics(slot, node.name)
        if not keep_zone:
            self._zones.setdefault(_zone_key(node.labels), []).append(slot)
        self._scan_order = None

    def _unset_static(self, slot: int, node: NodeInfo | None, keep_zone: bool = False) -> None:
        for column in self.label_columns.values():
            column[slot] = None
        for image in self.node_images[slot]:
            holders = self.image_slots.get(image)
            if holders is not None:
                holders.pop(slot, None)
                if not holders:
                    del self.image_slots[image]
        self.node_images[slot] = {}
        self.has_metrics[slot] = False
        if node is not None and not keep_zone:
            zone = _zone_key(node.labels)
            members = self._zones.get(zone, [])
            if slot in members:
                members.remove(slot)
            if not members:
                self._zones.pop(zone, None)
        self._scan_order = None

    def scan_order(self) -> np.ndarray:
        """Slots in kube-scheduler's node-tree order: zones interleaved, one node per zone per round."""
        if self._scan_order is None:
            order: list[int] = []
            queues = [list(members) for members in self._zones.values()]
            depth = max((len(q) for q in queues), default=0)
            for i in range(depth):
                order.extend(q[i] for q in queues if i < len(q))
            self._scan_order = np.asarray(order, dtype=np.int64)
        return self._scan_order

    def name_rank(self) -> np.ndarray:
        """For each slot, its node name's rank in sorted order: ties go to the smaller name."""
        if self._name_rank is None:
            rank = np.full(self.size, np.iinfo(np.int64).max, dtype=np.int64)
            ordered = sorted(self.index.items())
            for position, (_, slot) in enumerate(ordered):
                rank[slot] = position
            self._name_rank = rank
        return self._name_rank

    # ----------------------------------------------------------------- pods

    def add_pod(self, pod: PodInfo) -> None:
        """A pod bound to `pod.node_name` (or confirmed after we assumed it there)."""
        if not pod.node_name or pod.terminal:
            self.remove_pod(pod.key)
            return
        self._record(PodRecord(pod, pod.node_name, assumed=False))

    def assume(self, pod: PodInfo, node_name: str) -> None:
        """Count a pod on a node before the API server has confirmed its binding."""
        self._record(PodRecord(pod, node_name, assumed=True))

    def forget(self, key: str) -> None:
        """Undo an assumption whose binding failed; a confirmed pod is left alone."""
        record = self.pods.get(key)
        if record is not None and record.assumed:
            self.remove_pod(key)

    def is_assumed(self, key: str) -> bool:
        record = self.pods.get(key)
        return record is not None and record.assumed

    def remove_pod(self, key: str) -> bool:
        record = self.pods.pop(key, None)
        if record is None:
            return False
        self._account(record, -1)
        members = self.pods_by_node.get(record.node)
        if members is not None:
            members.discard(key)
            if not members:
                del self.pods_by_node[record.node]
        self.version += 1
        return True

    def pods_on(self, node_name: str) -> Iterable[PodRecord]:
        return (self.pods[key] for key in self.pods_by_node.get(node_name, ()))

    def _record(self, record: PodRecord) -> None:
        key = record.pod.key
        if key in self.pods:
            self.remove_pod(key)
        self.pods[key] = record
        self.pods_by_node.setdefault(record.node, set()).add(key)
        self._account(record, +1)
        self.version += 1

    def _account(self, record: PodRecord, sign: int) -> None:
        slot = self.index.get(record.node)
        if slot is None:
            return  # applied when the node arrives
        pod = record.pod
        for name, amount in pod.requests.items():
            column = self.resource_column(name)  # may widen the table: look it up first
            self.requested[slot, column] += sign * amount
        self.requested[slot, PODS] += sign
        self.nonzero_requested[slot, 0] += sign * pod.nonzero_cpu
        self.nonzero_requested[slot, 1] += sign * pod.nonzero_memory
        if pod.host_ports:
            ports = self.node_ports.setdefault(slot, Counter())
            ports.update({port: sign for port in pod.host_ports})
            if not +ports:
                del self.node_ports[slot]
            else:
                self.node_ports[slot] = +ports
        for label_key, counts in self._label_counts.items():
            value = pod.labels.get(label_key)
            if value is not None:
                column = counts.get(value)
                if column is None:
                    column = counts[value] = np.zeros(self._capacity, dtype=np.int64)
                column[slot] += sign

    def label_counts(self, label_key: str, value: str) -> np.ndarray:
        """Per slot, how many pods there carry `label_key=value`; maintained incrementally."""
        counts = self._label_counts.get(label_key)
        if counts is None:
            counts = self._label_counts[label_key] = {}
            for record in self.pods.values():
                slot = self.index.get(record.node)
                label = record.pod.labels.get(label_key)
                if slot is None or label is None:
                    continue
                column = counts.get(label)
                if column is None:
                    column = counts[label] = np.zeros(self._capacity, dtype=np.int64)
                column[slot] += 1
        column = counts.get(value)
        if column is None:
            return np.zeros(self.size, dtype=np.int64)
        return column[: self.size]

    # ----------------------------------------------------------------- checks

    def overcommitted(self) -> list[str]:
        """Nodes whose pods request more than allocatable (should always be empty)."""
        n = self.size
        over = (self.requested[:n] > self.allocatable[:n]) & self.present[:n, None]
        return sorted(self.names[slot] for slot in np.flatnonzero(over.any(axis=1)))
