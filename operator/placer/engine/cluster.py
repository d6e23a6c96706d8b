"""The cluster as the engine sees it: a columnar node table plus per-node accounting of pods.

Every node occupies a slot; per-node facts live in numpy columns indexed by slot, so a filter
or score over the whole cluster is a handful of vector operations rather than a Python loop
over nodes. Pods bound to a node (and pods the scheduler has *assumed* onto one, before the API
server confirms the binding) add their requests to that node's row; this is what keeps a node
from ever being overcommitted, including while watch events lag behind binds.

A cycle costs the number of numpy calls more than the number of nodes, so the layout serves the
calls the default profile makes: the slot x resource tables are stored column by column (a
filter reads one resource over every slot, a score two resources' rows of its candidates in one
gather), the candidates' cpu and memory allocatable is gathered once per cycle for the plugins
that score with it (`cpu_memory_allocatable`), and topology domains of one node each
(`kubernetes.io/hostname`) are read straight from per-node counts (`TopologyDomains.occupied`,
`weighted`) instead of summed per domain and spread back.

Nothing here does I/O: the simulator and the operator feed it the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter, deque
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from placer.engine.catalog import Catalog
from placer.engine.objects import NodeInfo, PodInfo, Taint

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "ClusterState",
    "PodRecord",
    "PodSums",
    "PodTracker",
    "SlotColumns",
    "TopologyDomains",
    "Withheld",
]

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = 0, 1, 2, 3
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
_POD_LOG = 1024  # pod changes remembered (`ClusterState.pod_changes_since`)
_SUMMED = 8  # pods counted in or out at once from which their columns are summed as arrays
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


@dataclass(slots=True)
class PodRecord:
    """A pod that holds resources on a node: bound (confirmed) or assumed (bind in flight)."""

    pod: PodInfo
    node: str
    assumed: bool


@dataclass(frozen=True, slots=True)
class PodSums:
    """Many pods counted on nodes at once, as arrays (`ClusterState.with_pods`: the pods nominated
    to nodes, counted into a cycle and out of it): what trackers get in `PodTracker.account_many`."""

    key: tuple[int, ...]  # the node table's static version, then the records' ids
    records: tuple[PodRecord, ...]
    counted: list[tuple[int, PodInfo]]  # (slot, pod) of the records whose node is in the table: the rows
    slots: np.ndarray  # per row: its slot
    priorities: np.ndarray  # per row: its pod's priority
    cells: np.ndarray  # (slot, column, amount, row) of every request of the rows' pods
    nonzero: np.ndarray  # per row: (nonzero cpu, nonzero memory)
    ported: list[tuple[int, PodInfo]]  # the rows whose pod has host ports
    rows: dict[int, int]  # id(record) -> its row


_NO_SUMS = PodSums((), (), [], np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64),
                   np.zeros((0, 4), dtype=np.int64), np.zeros((0, 2), dtype=np.int64), [], {})


@dataclass(slots=True)
class Withheld:
    """Room a node's kubelet counts as taken that no pod in the watch explains yet: after a kubelet
    refused a pod for lack of it (`placer.engine.kubelet_admission`), counted in the node's
    `requested` (and its host ports) as if a pod held it, until pods arriving on the node in the
    watch explain it (`explain`) or it is released."""

    amounts: dict[str, int]  # resource -> amount (cpu in millicores, "pods" a count)
    ports: tuple[tuple[str, str, int], ...] = ()
    serial: int = 0  # which withholding this is (a release names the one it meant)

    def explain(self, pod: PodInfo) -> bool:
        """A pod arrived on the node (the watch shows it bound there): what it holds is part of what
        the kubelet counted. True when nothing is left unexplained."""
        for name in self.amounts:
            self.amounts[name] -= 1 if name == "pods" else pod.requests.get(name, 0)
        self.amounts = {name: amount for name, amount in self.amounts.items() if amount > 0}
        if self.ports and pod.host_ports:
            self.ports = tuple(port for port in self.ports if port not in pod.host_ports)
        return not self.amounts and not self.ports


class SlotColumns:
    """Named per-slot counters (int32 columns), grown and cleared with the node table."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._columns: dict[Hashable, np.ndarray] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._columns

    def __len__(self) -> int:
        return len(self._columns)

    def get(self, key: Hashable) -> np.ndarray | None:
        return self._columns.get(key)

    def column(self, key: Hashable) -> np.ndarray:
        """The column of `key`, created (zeros) on first use."""
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = np.zeros(self._capacity, dtype=np.int32)
        return column

    def drop(self, key: Hashable) -> None:
        self._columns.pop(key, None)

    def items(self) -> Iterator[tuple[Hashable, np.ndarray]]:
        return iter(self._columns.items())

    def clear_slot(self, slot: int) -> None:
        for column in self._columns.values():
            column[slot] = 0

    def grow(self, capacity: int) -> None:
        for key, column in self._columns.items():
            grown = np.zeros(capacity, dtype=np.int32)
            grown[: self._capacity] = column
            self._columns[key] = grown
        self._capacity = capacity


class PodTracker:
    """Per-node state a plugin derives from the pods counted on nodes (bound and assumed), kept in
    step incrementally: the cluster calls `account` with +1/-1 whenever it counts or uncounts a pod
    on a node slot, so a cycle reads a ready answer instead of scanning every pod.

    Get one with `cluster.tracker(MyTracker)`: created on first use (and fed every pod counted so
    far), then updated by the cluster for as long as it lives.
    """

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        raise NotImplementedError

    def account_many(self, sums: PodSums, sign: int) -> None:
        """`account` of many pods at once (the pods nominated to nodes, counted in and out of a
        cycle); a tracker whose state is columns may add `sums`' arrays instead."""
        for slot, pod in sums.counted:
            self.account(pod, slot, sign)

    def clear_slot(self, slot: int) -> None:
        """The node of this slot is gone (its pods are counted again if it comes back)."""

    def grow(self, capacity: int) -> None:
        """The node table grew to `capacity` slots."""


TrackerT = TypeVar("TrackerT", bound=PodTracker)


@dataclass(frozen=True, slots=True)
class TopologyDomains:
    """The nodes' values of one topology label, as small integers: kube's topology pairs, vectorised."""

    ids: np.ndarray  # per slot in [0, size): the domain's index, -1 where the node lacks the label
    values: tuple[str, ...]  # domain index -> label value
    has: np.ndarray = field(default=None)  # type: ignore[assignment]  # per slot: ids >= 0
    #: every domain is one node (`kubernetes.io/hostname`): a domain's total is its node's value
    unique: bool = False

    def __post_init__(self) -> None:
        if self.has is None:
            object.__setattr__(self, "has", self.ids >= 0)

    @property
    def dense(self) -> bool:
        """One node per domain and every slot a node with the label: per slot is per domain."""
        return self.unique and len(self.values) == len(self.ids)

    @property
    def count(self) -> int:
        return len(self.values)

    def occupied(self, per_slot: np.ndarray) -> np.ndarray:
        """Per slot, whether its domain's total of `per_slot` is above 0 (False for nodes without
        the label): `spread(totals(per_slot) > 0, missing=False)`, directly when domains are nodes."""
        if self.unique:
            occupied = per_slot[: len(self.ids)] > 0
            return occupied if self.dense else occupied & self.has
        return self.spread(self.totals(per_slot) > 0, missing=False)

    def weighted(self, per_slot: np.ndarray, weight: int) -> np.ndarray | None:
        """Per slot, `weight` times its domain's total of `per_slot` (0 for nodes without the label):
        `spread(weight * totals(per_slot), missing=0)`; None when every domain's total is 0."""
        if self.unique:
            totals = per_slot[: len(self.ids)]
            if not self.dense:
                totals = np.where(self.has, totals, 0)
            if not totals.any():
                return None
            return np.multiply(totals, weight, dtype=np.int64)
        totals = self.totals(per_slot)
        if not totals.any():
            return None
        return self.spread(weight * totals, missing=0)

    def totals(self, per_slot: np.ndarray) -> np.ndarray:
        """Per domain, the sum of a per-slot column over the nodes of that domain."""
        has = self.has
        return np.bincount(self.ids[has], weights=per_slot[: len(self.ids)][has], minlength=self.count).astype(
            np.int64
        )

    def spread(self, per_domain: np.ndarray, missing: int = 0) -> np.ndarray:
        """Per slot, its domain's value of a per-domain array (`missing` for nodes without the label)."""
        if not self.count:
            return np.full(len(self.ids), missing, dtype=per_domain.dtype)
        values = per_domain[np.maximum(self.ids, 0)]
        return np.where(self.has, values, missing)


def _zone_key(labels: dict[str, str]) -> str:
    """kube's `utilnode.GetZoneKey`: region and zone together name a zone."""
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def _same_room(a: PodInfo, b: PodInfo) -> bool:
    """Whether two versions of a pod count the same on a node's totals (`ClusterState._account`)."""
    return (
        a.requests == b.requests
        and a.nonzero_cpu == b.nonzero_cpu
        and a.nonzero_memory == b.nonzero_memory
        and a.host_ports == b.host_ports
    )


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
        # slot x resource tables, stored column by column (Fortran order): a filter reads one
        # resource over every slot, a score the candidates' rows of two resources (`.T[:2].take`)
        self.allocatable = np.zeros((cap, len(self.resources)), dtype=np.int64, order="F")
        self.requested = np.zeros((cap, len(self.resources)), dtype=np.int64, order="F")
        # cpu and memory as kube-scheduler's NonZeroRequested, for scoring
        self.nonzero_requested = np.zeros((cap, 2), dtype=np.int64, order="F")
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
        self._trackers: dict[type[PodTracker], PodTracker] = {}
        self._domains: dict[str, TopologyDomains] = {}
        self._domains_version = -1
        # namespaces, services, workloads, ...: every other kind plugins read
        self.catalog = Catalog()
        # pods nominated to a node by preemption, waiting for their victims to go: key -> the pod
        # where it is nominated (a record kept from one cycle to the next: `with_pods` sums it once)
        self.nominated: dict[str, PodRecord] = {}
        # what nodes' kubelets count that the watch does not show yet (a kubelet refused a pod for
        # it: `placer.engine.kubelet_admission`), and the nodes held whole after a refusal that no
        # amount explains, until their Node object changes or the hold is released
        self.withheld: dict[str, Withheld] = {}
        self.held: dict[str, int] = {}  # node -> serial of the hold
        self._withheld_serial = 0
        self._zones: dict[str, list[int]] = {}
        self._scan_order: np.ndarray | None = None
        self._name_rank: np.ndarray | None = None
        # the last `cpu_memory_allocatable` answer: (slots asked, static_version, block, all above 0)
        self._allocatable_block: tuple[np.ndarray, int, np.ndarray, bool] | None = None
        self.static_version = 0  # bumps when anything a static filter reads changes
        self.version = 0  # bumps on every change
        # every pod counted or uncounted moves `version` once and is logged here, (slot or None,
        # pod), the latest last: a batched cycle (placer.engine.runtime) reads what changed since
        # the pod whose work it reuses (`pod_changes_since`)
        self.pod_changes = 0
        self._pod_log: deque[tuple[int | None, PodInfo]] = deque(maxlen=_POD_LOG)
        self._summed: PodSums | None = None  # `with_pods`' last arrays

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
            self.held.pop(node.name, None)  # the node changed: the kubelet's view and ours meet again
            self._set_static(slot, node, keep_zone)
            if node.name in self.withheld and (old is None or old.allocatable != node.allocatable):
                self._set_withheld(node.name, None)  # what the kubelet left free was of another allocatable
        else:
            slot = self._allocate_slot(node.name)
            self.nodes[slot] = node
            self._set_static(slot, node)
            for key in self.pods_by_node.get(node.name, ()):
                self._account(self.pods[key], +1)
            withheld = self.withheld.get(node.name)
            if withheld is not None:
                self._apply_withheld(slot, withheld, +1)
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
        for tracker in self._trackers.values():
            tracker.clear_slot(slot)
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
            order = "F" if array.ndim > 1 and array.flags.f_contiguous else "C"  # the tables stay by column
            grown = (
                np.full(shape, fill, dtype=array.dtype, order=order)
                if fill is not None
                else np.empty(shape, dtype=array.dtype, order=order)
            )
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
        for tracker in self._trackers.values():
            tracker.grow(new)
        self._capacity = new

    @property
    def capacity(self) -> int:
        """Slots allocated in every column (trackers size their columns by it)."""
        return self._capacity

    def resource_column(self, name: str) -> int:
        """The column of a resource, adding one for an extended resource seen the first time."""
        column = self.resource_index.get(name)
        if column is None:
            column = len(self.resources)
            self.resources.append(name)
            self.resource_index[name] = column
            zeros = np.zeros((self._capacity, 1), dtype=np.int64)
            self.allocatable = np.asfortranarray(np.hstack([self.allocatable, zeros]))
            self.requested = np.asfortranarray(np.hstack([self.requested, zeros]))
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
        self.unschedulable[slot] = node.unschedulable or node.name in self.held
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

    def domains(self, key: str) -> TopologyDomains:
        """The topology domains of label `key` over the node slots; cached until a node changes."""
        if self._domains_version != self.static_version:
            self._domains.clear()
            self._domains_version = self.static_version
        domains = self._domains.get(key)
        if domains is None:
            column = self.label_column(key)
            index: dict[str, int] = {}
            ids = np.fromiter(
                (-1 if value is None else index.setdefault(value, len(index)) for value in column),
                dtype=np.int64,
                count=len(column),
            )
            has = ids >= 0
            unique = len(index) == int(np.count_nonzero(has))
            domains = self._domains[key] = TopologyDomains(ids, tuple(index), has, unique)
        return domains

    def cpu_memory_allocatable(self, slots: np.ndarray) -> tuple[np.ndarray, bool]:
        """The cpu and memory allocatable of `slots` as a (2 x slots) block (read only), and whether
        all of it is above 0. The last answer is kept until a node changes: a cycle's score plugins
        ask it for the same candidates."""
        kept = self._allocatable_block
        if kept is not None and kept[0] is slots and kept[1] == self.static_version:
            return kept[2], kept[3]
        block = self.allocatable.T[:2].take(slots, axis=1)
        positive = not block.size or int(block.min()) > 0
        self._allocatable_block = (slots, self.static_version, block, positive)
        return block, positive

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
        key = pod.key
        record = self.pods.get(key)
        if record is not None and record.node == pod.node_name and _same_room(record.pod, pod):
            # e.g. our assumption confirmed: the node's totals stay, only the record and what the
            # trackers derive from the pod are renewed (in the order remove_pod and _record take)
            slot = self.index.get(record.node)
            del self.pods[key]
            if slot is not None:
                for tracker in self._trackers.values():
                    tracker.account(record.pod, slot, -1)
            self.pods[key] = PodRecord(pod, pod.node_name, assumed=False)
            if slot is not None:
                for tracker in self._trackers.values():
                    tracker.account(pod, slot, +1)
            self._logged(slot, pod)
            return
        if self.withheld and (record is None or record.node != pod.node_name):
            self._explain(pod)  # a pod the watch shows arriving on its node
        self._record(PodRecord(pod, pod.node_name, assumed=False))

    def assume(self, pod: PodInfo, node_name: str) -> None:
        """Count a pod on a node before the API server has confirmed its binding."""
        self._record(PodRecord(pod, node_name, assumed=True))

    def forget(self, key: str, pod: PodInfo | None = None) -> None:
        """Undo an assumption whose binding failed; a confirmed pod is left alone, and so is another
        pod of that name (`pod` given: a pod re-created meanwhile, of another uid, assumed since)."""
        record = self.pods.get(key)
        if record is None or not record.assumed:
            return
        if pod is not None and pod.uid and record.pod.uid and record.pod.uid != pod.uid:
            return
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
        self._logged(self.index.get(record.node), record.pod)
        return True

    def _logged(self, slot: int | None, pod: PodInfo) -> None:
        """A pod counted or uncounted (on `slot`, or on no node there is): one version more."""
        self._pod_log.append((slot, pod))
        self.pod_changes += 1
        self.version += 1

    def pod_changes_since(self, version: int, changes: int) -> list[tuple[int | None, PodInfo]] | None:
        """The pods counted or uncounted since the cluster was at `version` with `pod_changes` at
        `changes`, as (slot or None, pod), oldest first; None when anything else changed since (a
        node, metrics, a nomination) or too much to remember."""
        count = self.pod_changes - changes
        if count < 0 or self.version - version != count or count > len(self._pod_log):
            return None
        if not count:
            return []
        log = self._pod_log
        return [log[i] for i in range(len(log) - count, len(log))]

    # ----------------------------------------------------------------- what the kubelets count

    def withhold(
        self, node_name: str, amounts: dict[str, int], ports: Sequence[tuple[str, str, int]] = ()
    ) -> int:
        """Count `amounts` (and `ports`) as taken on a node until explained or released: a kubelet's
        view that the watch has not caught up with. Each resource given replaces what was withheld of
        it; ports add up. Returns the withholding's serial (for `release_withheld`)."""
        old = self.withheld.get(node_name)
        if old is not None:
            amounts = {**old.amounts, **amounts}
            ports = (*old.ports, *(port for port in ports if port not in old.ports))
        amounts = {name: amount for name, amount in amounts.items() if amount > 0}
        self._withheld_serial += 1
        withheld = Withheld(amounts, tuple(ports), self._withheld_serial)
        self._set_withheld(node_name, withheld if amounts or ports else None)
        return withheld.serial

    def release_withheld(self, node_name: str, serial: int | None = None) -> bool:
        """Stop counting what is withheld on a node (only the withholding `serial`, when given: a
        later one replaced it meanwhile). True when something was released."""
        withheld = self.withheld.get(node_name)
        if withheld is None or (serial is not None and withheld.serial != serial):
            return False
        self._set_withheld(node_name, None)
        return True

    def hold_node(self, node_name: str) -> int:
        """Keep pods off a node (as if cordoned: NodeUnschedulable) until its Node object changes or
        the hold is released: its kubelet refuses pods for a reason no amount explains."""
        self._withheld_serial += 1
        self.held[node_name] = self._withheld_serial
        self._restatic(node_name)
        return self._withheld_serial

    def release_node(self, node_name: str, serial: int | None = None) -> bool:
        if node_name not in self.held or (serial is not None and self.held[node_name] != serial):
            return False
        del self.held[node_name]
        self._restatic(node_name)
        return True

    def _restatic(self, node_name: str) -> None:
        slot = self.index.get(node_name)
        node = None if slot is None else self.nodes[slot]
        if slot is not None and node is not None:
            self.unschedulable[slot] = node.unschedulable or node_name in self.held
        self.static_version += 1
        self.version += 1

    def _set_withheld(self, node_name: str, withheld: Withheld | None) -> None:
        slot = self.index.get(node_name)
        old = self.withheld.pop(node_name, None)
        if old is not None and slot is not None:
            self._apply_withheld(slot, old, -1)
        if withheld is not None:
            self.withheld[node_name] = withheld
            if slot is not None:
                self._apply_withheld(slot, withheld, +1)
        self.version += 1

    def _explain(self, pod: PodInfo) -> None:
        withheld = self.withheld.get(pod.node_name)
        if withheld is None:
            return
        slot = self.index.get(pod.node_name)
        if slot is not None:
            self._apply_withheld(slot, withheld, -1)
        if withheld.explain(pod):
            del self.withheld[pod.node_name]
        elif slot is not None:
            self._apply_withheld(slot, withheld, +1)

    def _apply_withheld(self, slot: int, withheld: Withheld, sign: int) -> None:
        for name, amount in withheld.amounts.items():
            column = self.resource_column(name)
            self.requested[slot, column] += sign * amount
            if column in (CPU, MEMORY):
                self.nonzero_requested[slot, column] += sign * amount
        if withheld.ports:
            self._count_ports(slot, withheld.ports, sign)

    def own_requested(self, node_name: str, resource: str) -> int:
        """What the pods counted on a node request of a resource ("pods": how many), without what
        is withheld there."""
        slot = self.index.get(node_name)
        column = self.resource_index.get(resource)
        if slot is None or column is None:
            return 0
        withheld = self.withheld.get(node_name)
        return int(self.requested[slot, column]) - (withheld.amounts.get(resource, 0) if withheld else 0)

    # ----------------------------------------------------------------- what-ifs

    @contextlib.contextmanager
    def without(self, records: Sequence[PodRecord]) -> Iterator[None]:
        """The cluster as if these pods were gone (preemption's question), then as it was."""
        for record in records:
            self.remove_pod(record.pod.key)
        try:
            yield
        finally:
            for record in records:
                self._record(record)

    @contextlib.contextmanager
    def with_pods(self, records: Sequence[PodRecord]) -> Iterator[None]:
        """The cluster as if these pods ran where their records say (pods nominated to a node),
        then as it was; a pod already counted is left as it is."""
        pods = self.pods
        added = [record for record in records if record.pod.key not in pods]
        if len(added) < _SUMMED or not (summed := self._summed_for(added)).records:
            for record in added:
                self._record(record)
            try:
                yield
            finally:
                for record in added:
                    self.remove_pod(record.pod.key)
            return
        changes = self.pod_changes
        self._count_summed(summed, +1)
        try:
            yield
        finally:
            if self.pod_changes == changes or all(pods.get(record.pod.key) is record for record in added):
                self._count_summed(summed, -1)
            else:  # (something inside counted another pod of such a name: as remove_pod would)
                for record in added:
                    self.remove_pod(record.pod.key)

    def nominate(self, pod: PodInfo, node: str) -> None:
        """Hold `node`'s room for a pod whose victims are being evicted (kube's nominated pods)."""
        self.nominated[pod.key] = PodRecord(pod, node, assumed=True)
        self.version += 1

    def unnominate(self, key: str) -> bool:
        if self.nominated.pop(key, None) is None:
            return False
        self.version += 1
        return True

    def nominated_against(self, pod: PodInfo) -> list[PodRecord]:
        """The pods nominated to nodes that count against `pod`: those of its priority or higher,
        other than itself, not counted on a node already (kube's `addNominatedPods`)."""
        pods, priority = self.pods, pod.priority
        return [
            record for key, record in self.nominated.items()
            if record.pod.priority >= priority and key not in pods and key != pod.key
        ]

    def pods_on(self, node_name: str) -> Iterable[PodRecord]:
        return (self.pods[key] for key in self.pods_by_node.get(node_name, ()))

    def _record(self, record: PodRecord) -> None:
        key = record.pod.key
        if key in self.pods:
            self.remove_pod(key)
        self.pods[key] = record
        self.pods_by_node.setdefault(record.node, set()).add(key)
        self._account(record, +1)
        self._logged(self.index.get(record.node), record.pod)

    def _summed_for(self, records: list[PodRecord]) -> PodSums:
        """The columns `records` add, as arrays. The last answer is kept: the same records again
        (the pods nominated to nodes, cycle after cycle) take it as it is; others take its rows of
        the records they share with it (a nomination more or less between two cycles) and sum only
        the records new to it. Until the node table changes its slots."""
        key = (self.static_version, *map(id, records))  # (the memo holds the records: ids stay theirs)
        memo = self._summed
        if memo is not None and memo.key == key:
            return memo
        if len({record.pod.key for record in records}) != len(records):  # two of a name: one at a time
            return dataclasses.replace(_NO_SUMS, key=key)
        if memo is None or memo.key[0] != self.static_version:
            memo = _NO_SUMS
        known = memo.rows
        found = [known.get(id(record), -1) for record in records]
        kept = [row for row in found if row >= 0]
        fresh = [(slot, record) for record, row in zip(records, found, strict=True)
                 if row < 0 and (slot := self.index.get(record.node)) is not None]
        new_cells = [(slot, self.resource_column(name), amount, len(kept) + i)  # (may widen the table)
                     for i, (slot, record) in enumerate(fresh) for name, amount in record.pod.requests.items()]
        taken = np.array(kept, dtype=np.intp)
        renumber = np.full(len(memo.slots), -1, dtype=np.int64)
        renumber[taken] = np.arange(len(kept))
        cells = memo.cells[renumber[memo.cells[:, 3]] >= 0] if len(memo.cells) else memo.cells
        cells = np.vstack((cells, np.array(new_cells, dtype=np.int64).reshape(len(new_cells), 4)))
        cells[: len(cells) - len(new_cells), 3] = renumber[cells[: len(cells) - len(new_cells), 3]]
        counted = [memo.counted[row] for row in kept] + [(slot, record.pod) for slot, record in fresh]
        rows = [record for record, row in zip(records, found, strict=True) if row >= 0]
        rows += [record for _, record in fresh]
        self._summed = PodSums(
            key=key,
            records=tuple(records),
            counted=counted,
            slots=np.concatenate((memo.slots[taken], np.array([slot for slot, _ in fresh], dtype=np.intp))),
            priorities=np.concatenate((memo.priorities[taken],
                                       np.array([record.pod.priority for _, record in fresh], dtype=np.int64))),
            cells=cells,
            nonzero=np.vstack((memo.nonzero[taken], np.array(
                [(record.pod.nonzero_cpu, record.pod.nonzero_memory) for _, record in fresh],
                dtype=np.int64).reshape(len(fresh), 2))),
            ported=[(slot, pod) for slot, pod in counted if pod.host_ports],
            rows={id(record): row for row, record in enumerate(rows)},
        )
        return self._summed

    def _count_summed(self, summed: PodSums, sign: int) -> None:
        """Count (+1) or uncount (-1) records none (or all) of which are counted, their columns
        summed as arrays. One version more and no pod change logged (`pod_changes_since` then
        answers None: what was counted here is no longer counted, or will not be for long)."""
        pods, by_node = self.pods, self.pods_by_node
        if sign > 0:
            for record in summed.records:
                key = record.pod.key
                pods[key] = record
                by_node.setdefault(record.node, set()).add(key)
        else:
            for record in summed.records:
                key = record.pod.key
                del pods[key]
                members = by_node[record.node]
                members.discard(key)
                if not members:
                    del by_node[record.node]
        table = summed.cells
        np.add.at(self.requested, (table[:, 0], table[:, 1]), sign * table[:, 2])
        np.add.at(self.requested[:, PODS], summed.slots, sign)
        np.add.at(self.nonzero_requested[:, 0], summed.slots, sign * summed.nonzero[:, 0])
        np.add.at(self.nonzero_requested[:, 1], summed.slots, sign * summed.nonzero[:, 1])
        for slot, pod in summed.ported:
            self._count_ports(slot, pod.host_ports, sign)
        for tracker in self._trackers.values():
            tracker.account_many(summed, sign)
        self.version += 1

    def _account(self, record: PodRecord, sign: int) -> None:
        slot = self.index.get(record.node)
        if slot is not None:  # (else applied when the node arrives)
            self._account_slot(slot, record.pod, sign)

    def _account_slot(self, slot: int, pod: PodInfo, sign: int) -> None:
        for name, amount in pod.requests.items():
            column = self.resource_column(name)  # may widen the table: look it up first
            self.requested[slot, column] += sign * amount
        self.requested[slot, PODS] += sign
        self.nonzero_requested[slot, 0] += sign * pod.nonzero_cpu
        self.nonzero_requested[slot, 1] += sign * pod.nonzero_memory
        if pod.host_ports:
            self._count_ports(slot, pod.host_ports, sign)
        for tracker in self._trackers.values():
            tracker.account(pod, slot, sign)

    def _count_ports(self, slot: int, held: Sequence[tuple[str, str, int]], sign: int) -> None:
        """Host ports (a pod's, or what a kubelet counts there) taken (+1) or freed (-1) on a node."""
        ports = self.node_ports.setdefault(slot, Counter())
        ports.update({port: sign for port in held})
        if not +ports:
            del self.node_ports[slot]
        else:
            self.node_ports[slot] = +ports

    def tracker(self, kind: type[TrackerT]) -> TrackerT:
        """The cluster's instance of a PodTracker, created and fed every counted pod on first use."""
        tracker = self._trackers.get(kind)
        if tracker is None:
            tracker = kind(self)
            for record in self.pods.values():
                slot = self.index.get(record.node)
                if slot is not None:
                    tracker.account(record.pod, slot, +1)
            self._trackers[kind] = tracker
        return tracker  # type: ignore[return-value]

    # ----------------------------------------------------------------- checks

    def overcommitted(self) -> list[str]:
        """Nodes whose pods request more than allocatable (should always be empty)."""
        n = self.size
        over = (self.requested[:n] > self.allocatable[:n]) & self.present[:n, None]
        return sorted(self.names[slot] for slot in np.flatnonzero(over.any(axis=1)))
