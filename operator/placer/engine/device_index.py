"""What DynamicResources keeps between pods, per cluster: the devices of the ResourceSlices in
columns, which of them other claims hold, and which match a request — so that a pod asking for a
device is filtered over a thousand nodes with a few numpy operations, not a thousand searches.

- The device table lists every device of the *simple* pools: one generation only, complete,
  no duplicate device names, no shared counters (almost every pool). Each device is reachable
  from one node (a node-local slice or device) or from the nodes a selector / `allNodes` admits.
  Nodes that a pool outside the table reaches are *complex*: the plugin runs the full allocator
  (`placer.engine.allocator`) there instead — so do pools with devices with binding conditions
  (the allocator takes their pools last). Shared devices (`allowMultipleAllocations`) and request
  policies are in the table: `room(request)` says, per pod, which devices have capacity left for
  the request (what allocated and in-flight shares consume summed per device, below).
- `in_use`: devices allocated to a claim (its `status.allocation`, admin access aside) or assumed
  by this scheduler (an in-flight allocation), kept in step with the catalog's ResourceClaims
  (`Catalog.observe`) rather than rebuilt per pod. `state` is the allocator's view of the same
  (kube's `AllocatedState`): the devices held whole, and the shares of devices with
  `allowMultipleAllocations` with the capacity they consume per device, summed as claims change —
  an in-flight share (this scheduler's assumption) counts until it lands or is undone, so a
  device's capacity is never handed out twice.
- `states(selectors)`: per device of the table, whether a chain of CEL selectors (a class's then a
  request's) matches (1), does not (0) or fails at run time (2), computed once per chain and slice
  generation; `matcher` answers the same per device for the allocator, from one cache.
- `pools_for(node)`: kube's `GatherPools` for a node, cached until slices or nodes change; a pool
  that reaches many nodes (network-attached slices) is one object shared by their lists.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from placer.engine.allocator import AllocatedState, DeviceID, Pool, default_matcher, gather_pools, request_fits
from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState
from placer.engine.devices import Device, DeviceToleration, ResourceClaimInfo, SliceInfo, SubRequest
from placer.engine.dra_cel import CelError
from placer.engine.node_selectors import term_mask
from placer.engine.objects import NodeSelectorTerm

__all__ = ["CLAIM", "CLASS", "SLICE", "DeviceIndex", "claim_devices", "claim_shares", "device_index"]

CLAIM, SLICE, CLASS = "ResourceClaim", "ResourceSlice", "DeviceClass"
NO, YES, ERROR = 0, 1, 2


def claim_devices(claim: ResourceClaimInfo | None) -> list[DeviceID]:
    """The devices a claim holds exclusively (kube's `foreachAllocatedDevice`: admin access and
    shares aside)."""
    if claim is None or claim.allocation is None:
        return []
    return [(r.driver, r.pool, r.device) for r in claim.allocation.results
            if r.admin_access is not True and r.share_id is None]


Share = tuple[DeviceID, str, tuple[tuple[str, Fraction], ...] | None]  # device, share ID, consumed capacity


def claim_shares(claim: ResourceClaimInfo | None) -> list[Share]:
    """The shares a claim holds (results with a `shareID`, admin access aside), with what each
    consumes (None: no `consumedCapacity`)."""
    if claim is None or claim.allocation is None:
        return []
    return [(r.id, r.share_id, None if r.consumed_capacity is None else
             tuple(sorted((name, q.value) for name, q in r.consumed_capacity.items())))
            for r in claim.allocation.results if r.admin_access is not True and r.share_id is not None]


@dataclass(frozen=True, slots=True)
class _Reach:
    """Where a device of the table is reachable from: one node, or the nodes a selector admits."""

    node: str | None
    all_nodes: bool = False
    selector: tuple[NodeSelectorTerm, ...] | None = None


class DeviceIndex:
    def __init__(self, catalog: Catalog) -> None:
        self._catalog = weakref.ref(catalog)
        self.allocated: Counter[DeviceID] = Counter()
        # device -> its shares held (share ID -> how many claims show it) and what they consume
        self.shares: dict[DeviceID, Counter[str]] = {}
        self.capacity: dict[DeviceID, dict[str, Fraction]] = {}  # kube's AggregatedCapacity
        self._with_capacity: Counter[DeviceID] = Counter()  # shares of each device with consumedCapacity
        self.state = AllocatedState(self.allocated, self.shares, self.capacity)
        for _, _, claim in catalog.items(CLAIM):
            self.allocated.update(claim_devices(claim))
            self._share(claim_shares(claim), 1)
        catalog.observe(CLAIM, self._claim_changed)
        self._slices_version = -1
        self._classes_version = -1
        self._static: tuple[int, int] = (-1, -1)
        self.slices: list[SliceInfo] = []
        self.devices: list[Device] = []
        self.slice_of: list[SliceInfo] = []  # each device's slice
        self.ids: list[DeviceID] = []
        self.gids: dict[DeviceID, list[int]] = {}
        self.in_use = np.zeros(0, dtype=bool)
        self.tainted = np.zeros(0, dtype=bool)
        self._reach: list[_Reach] = []
        self._complex: list[_Reach] = []  # where the slices outside the table reach
        self._states: dict[tuple[str | None, ...], np.ndarray] = {}
        self._tolerated: dict[tuple[DeviceToleration, ...], np.ndarray] = {}
        self._sensitive = np.zeros(0, dtype=np.int64)  # devices a request's share may not fit: shared, or a policy
        self._having: dict[frozenset[str], np.ndarray] = {}  # capacity names -> the devices that have them all
        self._matches: dict[tuple[str, int], Any] = {}  # (expression, id(device)) -> bool or CelError
        self._bases: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._pools: dict[str, list[Pool]] = {}
        self._built: dict[tuple[Any, ...], Pool] = {}  # a pool of slices reaching many nodes, built once
        self._by_node: dict[str, list[SliceInfo]] = {}  # node-local slices by node
        self._floating: list[SliceInfo] = []  # slices reaching nodes by selector, allNodes or per device
        self._by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
        self.local_slot = np.zeros(0, dtype=np.int64)
        self.shared: list[tuple[int, np.ndarray]] = []  # (gid, node mask) of devices not node-local
        self.complex_nodes = np.zeros(0, dtype=bool)
        self._local = np.zeros(0, dtype=np.int64)  # the node-local devices, and their slots
        self._local_slots = np.zeros(0, dtype=np.int64)

    # -------------------------------------------------------------- claims

    def _share(self, shares: list[Share], sign: int) -> None:
        """Count shares in (sign 1) or out (-1)."""
        for device_id, share_id, consumed in shares:
            held = self.shares.setdefault(device_id, Counter())
            held[share_id] += sign
            if held[share_id] <= 0:
                del held[share_id]
            if not held:
                del self.shares[device_id]
            if consumed is None:
                continue
            self._with_capacity[device_id] += sign
            total = self.capacity.setdefault(device_id, {})
            for capacity, value in consumed:
                total[capacity] = total.get(capacity, Fraction(0)) + sign * value
            if self._with_capacity[device_id] <= 0:
                del self._with_capacity[device_id], self.capacity[device_id]

    def _claim_changed(self, namespace: str, name: str, old: Any, new: Any) -> None:
        shared_before, shared_after = claim_shares(old), claim_shares(new)
        if shared_before != shared_after:
            self._share(shared_before, -1)
            self._share(shared_after, 1)
        before, after = claim_devices(old), claim_devices(new)
        if before == after:
            return
        self.allocated.subtract(before)
        self.allocated.update(after)
        for device_id in (*before, *after):
            held = self.allocated[device_id] > 0
            if not held:
                del self.allocated[device_id]
            for gid in self.gids.get(device_id, ()):
                self.in_use[gid] = held

    # -------------------------------------------------------------- slices

    def refresh(self, cluster: ClusterState) -> None:
        """Bring the table up to date with the catalog's slices and classes and the cluster's nodes."""
        catalog = cluster.catalog
        if catalog.version(SLICE) != self._slices_version:
            self._slices_version = catalog.version(SLICE)
            self._build(catalog)
            self._static = (-1, -1)
        if catalog.version(CLASS) != self._classes_version:
            self._classes_version = catalog.version(CLASS)
            self._states.clear()
        static = (id(cluster), cluster.static_version)
        if static != self._static:
            self._static = static
            self._pools.clear()
            self._built.clear()
            self._place(cluster)

    def _build(self, catalog: Catalog) -> None:
        self.slices = sorted((s for _, _, s in catalog.items(SLICE)), key=lambda s: (s.driver, s.pool, s.name))
        by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
        self._by_node, self._floating = {}, []
        for slice_ in self.slices:
            by_pool.setdefault((slice_.driver, slice_.pool), []).append(slice_)
            if slice_.node_name and not slice_.shared_counters:
                self._by_node.setdefault(slice_.node_name, []).append(slice_)
            else:
                self._floating.append(slice_)
        self._by_pool = by_pool
        self.devices, self.ids, self._reach, self._complex, self.slice_of = [], [], [], [], []
        self.gids = {}
        for pool_slices in by_pool.values():
            if self._simple(pool_slices):
                for slice_ in pool_slices:
                    for device in slice_.devices:
                        gid = len(self.devices)
                        self.devices.append(device)
                        self.slice_of.append(slice_)
                        device_id = (slice_.driver, slice_.pool, device.name)
                        self.ids.append(device_id)
                        self.gids.setdefault(device_id, []).append(gid)
                        if slice_.per_device:
                            self._reach.append(_Reach(device.node_name, device.all_nodes, device.node_selector))
                        else:
                            self._reach.append(_Reach(slice_.node_name, slice_.all_nodes, slice_.node_selector))
            else:
                for slice_ in pool_slices:
                    if slice_.per_device:
                        self._complex.extend(_Reach(d.node_name, d.all_nodes, d.node_selector) for d in slice_.devices)
                    elif slice_.shared_counters:
                        self._complex.append(_Reach(None, True))
                    else:
                        self._complex.append(_Reach(slice_.node_name, slice_.all_nodes, slice_.node_selector))
        size = len(self.devices)
        self.in_use = np.fromiter((self.allocated[i] > 0 for i in self.ids), dtype=bool, count=size)
        self.tainted = np.fromiter((bool(d.taints) for d in self.devices), dtype=bool, count=size)
        self._sensitive = np.fromiter(
            (gid for gid, d in enumerate(self.devices)
             if d.allow_multiple_allocations or any(c.policy is not None for c in d.capacities.values())),
            dtype=np.int64)
        self._having.clear()
        self._states.clear()
        self._tolerated.clear()
        self._matches.clear()
        self._bases.clear()

    @staticmethod
    def _simple(pool_slices: list[SliceInfo]) -> bool:
        generation, count = pool_slices[0].generation, pool_slices[0].slice_count
        if len(pool_slices) != count or any(s.generation != generation or s.slice_count != count for s in pool_slices):
            return False
        names: set[str] = set()
        for slice_ in pool_slices:
            if slice_.shared_counters:
                return False
            if not (slice_.node_name or slice_.all_nodes or slice_.node_selector is not None or slice_.per_device):
                return False  # an unknown kind of node selection: the allocator skips it
            for device in slice_.devices:
                if device.name in names or device.consumes_counters or not _plain(device):
                    return False
                names.add(device.name)
        return True

    def _mask(self, cluster: ClusterState, reach: _Reach) -> np.ndarray:
        if reach.node:
            mask = np.zeros(cluster.size, dtype=bool)
            slot = cluster.index.get(reach.node)
            if slot is not None:
                mask[slot] = True
            return mask
        if reach.all_nodes:
            return np.ones(cluster.size, dtype=bool)
        if reach.selector is not None:
            mask = np.zeros(cluster.size, dtype=bool)
            for term in reach.selector:
                mask |= term_mask(cluster, term)
            return mask
        return np.zeros(cluster.size, dtype=bool)

    def usable(
        self, selectors: tuple[str | None, ...], tolerations: tuple[DeviceToleration, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """For a chain of selectors and a request's tolerations: which devices it may take if free
        (matching, tolerated), and which fail its selectors at run time."""
        key = (selectors, tolerations)
        base = self._bases.get(key)
        if base is None:
            states = self.states(selectors)
            base = self._bases[key] = ((states == YES) & self.tolerated(tolerations), states == ERROR)
        return base

    def room(self, request: SubRequest) -> np.ndarray | None:
        """Per device of the table, whether a share (or the whole device) for `request` fits its
        capacity now (`allocator.request_fits` over what allocated and in-flight shares consume);
        None when every device does (a request asking no capacity, no shared device or policy)."""
        if request.capacity:
            names = frozenset(request.capacity)
            having = self._having.get(names)
            if having is None:
                having = self._having[names] = np.fromiter(
                    (gid for gid, d in enumerate(self.devices) if names <= d.capacities.keys()), dtype=np.int64)
            check = having
            room = np.zeros(len(self.devices), dtype=bool)
        elif self._sensitive.size:
            check = self._sensitive
            room = np.ones(len(self.devices), dtype=bool)
        else:
            return None
        for gid in check.tolist():
            room[gid] = request_fits(request.capacity, self.devices[gid], self.capacity.get(self.ids[gid]))
        return room

    def _place(self, cluster: ClusterState) -> None:
        index = cluster.index
        self.local_slot = np.fromiter(
            (index.get(reach.node, -1) if reach.node else -1 for reach in self._reach),
            dtype=np.int64, count=len(self._reach),
        )
        self.shared = [(gid, self._mask(cluster, reach)) for gid, reach in enumerate(self._reach) if not reach.node]
        self._local = np.flatnonzero(self.local_slot >= 0)
        self._local_slots = self.local_slot[self._local]
        complex_nodes = np.zeros(cluster.size, dtype=bool)
        for reach in self._complex:
            complex_nodes |= self._mask(cluster, reach)
        self.complex_nodes = complex_nodes

    def pools_for(self, cluster: ClusterState, node_name: str) -> list[Pool]:
        pools = self._pools.get(node_name)
        if pools is None:
            node = cluster.node(node_name)
            labels: Mapping[str, str] = node.labels if node is not None else {}
            candidates = [*self._by_node.get(node_name, ()), *self._floating]
            pools = self._pools[node_name] = gather_pools(
                candidates, node_name, labels, lambda driver, pool: self._by_pool.get((driver, pool), ()),
                self._built,
            )
        return pools

    def device(self, driver: str, pool: str, name: str) -> Device | None:
        """A device as its pool's newest slices list it (None: not published)."""
        slices = self._by_pool.get((driver, pool), ())
        newest = max((s.generation for s in slices), default=None)
        for slice_ in slices:
            if slice_.generation == newest:
                for device in slice_.devices:
                    if device.name == name:
                        return device
        return None

    def reaching(self, slot: int, candidates: np.ndarray) -> np.ndarray:
        """The `candidates` (a bool mask over the table) reachable from the node in `slot`, in order."""
        mine = candidates & (self.local_slot == slot)
        for gid, mask in self.shared:
            if candidates[gid] and mask[slot]:
                mine[gid] = True
        return np.flatnonzero(mine)

    # -------------------------------------------------------------- selectors

    def matcher(self, expression: str, device: Device) -> bool:
        """The allocator's selector check, cached per device (CelError as `default_matcher`)."""
        key = (expression, id(device))
        known = self._matches.get(key)
        if known is None:
            try:
                known = default_matcher(expression, device)
            except CelError as error:
                known = error
            self._matches[key] = known
        if isinstance(known, CelError):
            raise known
        return known

    def states(self, selectors: tuple[str | None, ...]) -> np.ndarray:
        """Per device of the table: a chain of selectors matches (YES), not (NO), or fails (ERROR),
        evaluated in order and stopping at the first that does not match, as kube's allocator."""
        states = self._states.get(selectors)
        if states is None:
            states = np.full(len(self.devices), YES, dtype=np.int8)
            for expression in selectors:
                for gid in np.flatnonzero(states == YES):
                    device = self.devices[gid]
                    if expression is None:
                        states[gid] = ERROR
                        continue
                    try:
                        states[gid] = YES if self.matcher(expression, device) else NO
                    except CelError:
                        states[gid] = ERROR
            self._states[selectors] = states
        return states

    def tolerated(self, tolerations: tuple[DeviceToleration, ...]) -> np.ndarray:
        """Per device: no NoSchedule/NoExecute taint left untolerated by these tolerations."""
        result = self._tolerated.get(tolerations)
        if result is None:
            result = np.ones(len(self.devices), dtype=bool)
            for gid in np.flatnonzero(self.tainted):
                for taint in self.devices[gid].taints:
                    if taint.effect in ("NoSchedule", "NoExecute") and not any(
                        t.tolerates(taint) for t in tolerations
                    ):
                        result[gid] = False
                        break
            self._tolerated[tolerations] = result
        return result

    def per_node(self, cluster: ClusterState, candidates: np.ndarray) -> np.ndarray:
        """How many of the `candidates` (a bool mask over the table) each node slot can reach."""
        counts = np.bincount(self._local_slots[candidates[self._local]], minlength=cluster.size)[: cluster.size]
        for gid, mask in self.shared:
            if candidates[gid]:
                counts += mask
        return counts


def _plain(device: Device) -> bool:
    """A device the table may hold: nothing to prepare (pools with binding conditions come last in
    the allocator's order, which the table does not keep)."""
    return not device.binding_conditions


_INDEXES: weakref.WeakKeyDictionary[Catalog, DeviceIndex] = weakref.WeakKeyDictionary()


def device_index(cluster: ClusterState) -> DeviceIndex:
    """The cluster's index, created on first use and refreshed."""
    index = _INDEXES.get(cluster.catalog)
    if index is None:
        index = _INDEXES[cluster.catalog] = DeviceIndex(cluster.catalog)
    index.refresh(cluster)
    return index
