"""NodeResourcesFit — requests must fit, and how full a node should be; as kube-scheduler's plugin.

Filter: the pod's requests (containers, init containers and sidecars, overhead; cpu, memory,
ephemeral-storage, extended resources such as `nvidia.com/gpu`; pod-level `spec.resources`
requests in place of the containers' total for cpu, memory and hugepages, as kube v1.36) must fit
in the node's allocatable minus what bound and assumed pods already hold, and the node must have
room for one more pod. A bound pod holds its pod-level requests, and while an in-place resize is
under way the larger of its spec and its status (`allocatedResources`, `resources`) per
resource; an Infeasible resize holds what is allocated and running (`placer.engine.parsing`).
Reasons, several per node if need be: "Insufficient cpu", "Insufficient memory",
"Insufficient nvidia.com/gpu", "Too many pods". A node whose allocatable is below the pod's
request is one preemption cannot help (kube's UnschedulableAndUnresolvable). An extended resource
a DeviceClass backs (`extendedResourceName`, kube v1.36's DRAExtendedResource) is not checked on a
node whose allocatable lacks it: DynamicResources allocates devices of that class there
(`placer.engine.extended_resources`). Scored (a `scoringStrategy.resources` entry naming it), such
a resource counts there the class's devices the node's ResourceSlices list as its allocatable and
those claims hold as its requested (kube's `calculateDRAExtendedResourceAllocatableRequest`,
`dra_totals`): LeastAllocated gives 66 on a node with 3 devices and 50 with 2 for a pod asking one.

Score, by `scoringStrategy.type` (kube-scheduler's formulas; containers without cpu/memory
requests count as 100m / 200Mi here, as there — for a pod with pod-level requests, only for a
resource neither the pod level nor any container sets, on the node's side):

- `LeastAllocated` (default): `(allocatable - requested) * 100 / allocatable` per resource,
  weighted mean — spreads pods.
- `MostAllocated`: `requested * 100 / allocatable` per resource — packs pods.
- `RequestedToCapacityRatio`: a piecewise-linear `shape` of utilization (0..100) to score
  (0..10, scaled to 0..100) — any curve in between.

Args::

    ignoredResources: [example.com/foo]        # extended resources the filter ignores
    ignoredResourceGroups: [example.com]
    scoringStrategy:
      type: LeastAllocated | MostAllocated | RequestedToCapacityRatio
      resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]   # the default
      requestedToCapacityRatio:                                      # required for that type
        shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]

Example profile (bin-packing)::

    spec:
      schedulerName: packing-scheduler
      scores:
        - name: NodeResourcesFit
          weight: 2
          args: {scoringStrategy: {type: MostAllocated}}
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from placer.engine.cluster import CPU, MEMORY, PODS, ClusterState, PodRecord
from placer.engine.extended_resources import backed_requests, dra_totals
from placer.engine.framework import (
    MAX_NODE_SCORE,
    UNSIGNABLE,
    ClusterEvent,
    EvictionTerms,
    FilterPlugin,
    PluginArgs,
    ScorePlugin,
)
from placer.engine.objects import NodeInfo, PodInfo, is_scalar_resource
from placer.engine.priority_room import RoomByPriority

MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


class ResourceSpec(PluginArgs):
    name: str = Field(min_length=1)
    weight: int = Field(default=1, ge=1, le=100)


DEFAULT_RESOURCES = (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))


def unique_resources(resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
    names = [r.name for r in resources]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"resources: duplicate resource name(s) {', '.join(duplicates)}")
    return resources


class UtilizationShapePoint(PluginArgs):
    utilization: int = Field(ge=0, le=MAX_UTILIZATION)
    score: int = Field(ge=0, le=MAX_CUSTOM_PRIORITY_SCORE)


class RequestedToCapacityRatioParam(PluginArgs):
    shape: tuple[UtilizationShapePoint, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _increasing(self) -> RequestedToCapacityRatioParam:
        points = [p.utilization for p in self.shape]
        if any(b <= a for a, b in itertools.pairwise(points)):
            raise ValueError("shape: utilization values must be sorted in increasing order")
        return self


class ScoringStrategy(PluginArgs):
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: tuple[ResourceSpec, ...] = Field(default=DEFAULT_RESOURCES, min_length=1)
    requestedToCapacityRatio: RequestedToCapacityRatioParam | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ScoringStrategy:
        unique_resources(self.resources)
        if self.type == "RequestedToCapacityRatio" and self.requestedToCapacityRatio is None:
            raise ValueError("requestedToCapacityRatio: Required value for type RequestedToCapacityRatio")
        return self


class NodeResourcesFitArgs(PluginArgs):
    scoringStrategy: ScoringStrategy = ScoringStrategy()
    ignoredResources: tuple[str, ...] = ()
    ignoredResourceGroups: tuple[str, ...] = ()


def _trunc_div(numerator: np.ndarray, denominator: np.ndarray | int) -> np.ndarray:
    """Integer division rounding toward zero, as Go's `/` on int64."""
    quotient = np.abs(numerator) // np.abs(denominator)
    return np.where((numerator < 0) ^ (np.asarray(denominator) < 0), -quotient, quotient)


def broken_linear(shape: tuple[tuple[int, int], ...], utilization: np.ndarray) -> np.ndarray:
    """kube's `helper.BuildBrokenLinearFunction`, over a vector of utilizations."""
    result = np.full(utilization.shape, shape[-1][1], dtype=np.int64)
    decided = np.zeros(utilization.shape, dtype=bool)
    for i, (point_utilization, point_score) in enumerate(shape):
        here = ~decided & (utilization <= point_utilization)
        if i == 0:
            result[here] = point_score
        else:
            prev_utilization, prev_score = shape[i - 1]
            step = _trunc_div(
                (point_score - prev_score) * (utilization[here] - prev_utilization),
                point_utilization - prev_utilization,
            )
            result[here] = prev_score + step
        decided |= here
    return result


def pod_request_for_score(pod: PodInfo, resource: str, nonzero: bool) -> int:
    """The incoming pod's request as kube's `calculatePodResourceRequest` reads it: status-aware,
    with 100m / 200Mi for containers missing a cpu / memory request when `nonzero`."""
    if nonzero and resource == "cpu":
        return pod.score_cpu
    if nonzero and resource == "memory":
        return pod.score_memory
    return pod.requests.get(resource, 0)


def allocation(
    pod: PodInfo, cluster: ClusterState, slots: np.ndarray, resource: str, nonzero: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """(requested including the pod, allocatable) on each slot, kube's
    `calculateResourceAllocatableRequest`; None where the resource is not scored at all. An
    extended resource a DeviceClass backs counts, on a node whose allocatable lacks it, the class's
    devices there and those claims hold (kube v1.36's DRAExtendedResource, `dra_totals`)."""
    column = cluster.resource_index.get(resource)
    pod_amount = pod_request_for_score(pod, resource, nonzero)
    if pod_amount == 0 and is_scalar_resource(resource):
        return None
    dra = dra_totals(cluster, resource) if is_scalar_resource(resource) else None
    if column is None:
        if dra is None:
            return None
        return dra[1][slots] + pod_amount, dra[0][slots]
    if nonzero and column in (CPU, MEMORY):
        used = cluster.nonzero_requested[slots, column]
    else:
        used = cluster.requested[slots, column]
    allocatable = cluster.allocatable[slots, column]
    if dra is not None:
        plugin_less = allocatable <= 0
        used = np.where(plugin_less, dra[1][slots], used)
        allocatable = np.where(plugin_less, dra[0][slots], allocatable)
    return used + pod_amount, allocatable


_BASIC = ("cpu", "memory", "ephemeral-storage")  # what a node's allocatable alone must hold (queueing hint)


class NodeResourcesFit(FilterPlugin[NodeResourcesFitArgs], ScorePlugin[NodeResourcesFitArgs]):
    name: ClassVar[str] = "NodeResourcesFit"
    # freed room (a pod gone or shrunk) or a new or larger node may make a rejected pod fit; so may a
    # DeviceClass that comes to back an extended resource (kube's DRAExtendedResource hint)
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.NODE, ClusterEvent.POD_DELETE, ClusterEvent.POD_UPDATE, ClusterEvent.POD_SCALE_DOWN,
         "DeviceClass"}
    )
    resolvable: ClassVar[bool] = True  # evicting pods frees their requests
    Args: ClassVar[type[PluginArgs]] = NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        super().__init__(args)
        strategy = args.scoringStrategy
        self._shape: tuple[tuple[int, int], ...] = ()
        if strategy.requestedToCapacityRatio is not None:
            scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            self._shape = tuple(
                (p.utilization, p.score * scale) for p in strategy.requestedToCapacityRatio.shape
            )
        # LeastAllocated / MostAllocated over cpu and memory only (the default): scored in one pass
        # over a (resources x candidates) block (`_score_cpu_memory`)
        self._cpu_memory: tuple[list[int], np.ndarray, int] | None = None
        names = [spec.name for spec in strategy.resources]
        if strategy.type != "RequestedToCapacityRatio" and set(names) <= {"cpu", "memory"}:
            weights = np.array([[spec.weight] for spec in strategy.resources], dtype=np.int64)
            self._cpu_memory = ([CPU if name == "cpu" else MEMORY for name in names], weights, int(weights.sum()))

    # ------------------------------------------------------------------ filter

    def _ignored(self, resource: str) -> bool:
        if not is_scalar_resource(resource):
            return False
        group = resource.split("/", 1)[0] if "/" in resource else ""
        return resource in self.args.ignoredResources or group in self.args.ignoredResourceGroups

    def _requests(self, pod: PodInfo, cluster: ClusterState) -> tuple[list[int], list[int], list[bool]]:
        """(columns, amounts, backed): `backed` marks a resource a DeviceClass backs, checked only
        on nodes whose allocatable has it (kube's `shouldDelegateResourceToDRA`)."""
        columns, amounts = [], []
        backed = backed_requests(pod, cluster.catalog)
        for resource, amount in pod.fit_requests.items():
            if amount > 0 and not self._ignored(resource):
                columns.append(cluster.resource_column(resource))
                amounts.append(amount)
        return columns, amounts, [cluster.resources[c] in backed for c in columns] if backed else []

    @staticmethod
    def _delegated(
        cluster: ClusterState, rows: np.ndarray | slice, columns: list[int], backed: list[bool]
    ) -> np.ndarray:
        """Per row and column: the resource is left to DynamicResources there (backed, none allocatable)."""
        return (cluster.allocatable[rows][:, columns] <= 0) & np.asarray(backed, dtype=bool)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """The requests it checks and scores, against each node's own pods (BATCH_NODE); a pod asking
        for an extended resource a DeviceClass backs is not signed (kube: "signature disabled when
        dra extended resources are used in the cluster")."""
        if backed_requests(pod, cluster.catalog):
            return UNSIGNABLE
        return pod.fit_requests, pod.requests, pod.score_cpu, pod.score_memory

    def filter_at(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        """`filter` on `slots` only (no DeviceClass backs what the pod asks: it is signed)."""
        columns, amounts, backed = self._requests(pod, cluster)
        if backed:
            return self.filter(pod, cluster)[slots]
        allocatable, requested = cluster.allocatable, cluster.requested
        if len(slots) == 1:  # (the usual: the node the previous pod went to) without array calls
            slot = int(slots[0])
            fits = bool(requested[slot, PODS] < allocatable[slot, PODS]) and all(
                allocatable[slot, column] - requested[slot, column] >= amount
                for column, amount in zip(columns, amounts, strict=True)
            )
            return np.array([fits])
        fits = requested[:, PODS].take(slots) < allocatable[:, PODS].take(slots)
        for column, amount in zip(columns, amounts, strict=True):
            fits &= allocatable[:, column].take(slots) - requested[:, column].take(slots) >= amount
        return fits

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's isSchedulableAfterPodEvent: a placed pod updated helps only when it gave back some
        of what this pod asks for (in-place resize down). kube's isSchedulableAfterNodeChange: a
        node added or updated helps only when the pod would fit it empty (its cpu, memory and
        ephemeral storage; other resources may be backed by devices) and, updated, when its
        allocatable grew in something the pod asks for (or its pod count). The pod's own
        scale-down, a pod gone, a DeviceClass: yes."""
        if isinstance(new, NodeInfo):
            wanted = pod.fit_requests
            if any(new.allocatable.get(name, 0) < wanted.get(name, 0) for name in _BASIC):
                return False
            if not isinstance(old, NodeInfo):
                return True
            return any(new.allocatable.get(name, 0) > old.allocatable.get(name, 0) for name in (*wanted, "pods"))
        if event != ClusterEvent.POD_UPDATE or not isinstance(old, PodInfo) or not isinstance(new, PodInfo):
            return True
        wanted = pod.requests or old.requests
        return any(new.requests.get(name, 0) < old.requests.get(name, 0) for name in wanted)

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        n = cluster.size
        columns, amounts, backed = self._requests(pod, cluster)
        allocatable, requested = cluster.allocatable, cluster.requested
        fits = requested[:n, PODS] < allocatable[:n, PODS]
        if backed:
            free = allocatable[:n, columns] - requested[:n, columns]
            enough = free >= np.asarray(amounts, dtype=np.int64)
            enough |= self._delegated(cluster, slice(0, n), columns, backed)
            fits &= enough.all(axis=1)
        else:  # column by column: a few 1-d operations beat a 2-d block and its row reduction
            for column, amount in zip(columns, amounts, strict=True):
                free = allocatable[:n, column] - requested[:n, column]
                fits &= free >= amount
        return fits

    def fits_without(self, pod: PodInfo, cluster: ClusterState, slot: int, removed: Sequence[PodRecord]) -> bool:
        """The node's row with the removed pods' requests given back: no change to the cluster."""
        if cluster.requested[slot, PODS] - len(removed) >= cluster.allocatable[slot, PODS]:
            return False
        columns, amounts, backed = self._requests(pod, cluster)
        for i, (column, amount) in enumerate(zip(columns, amounts, strict=True)):
            if backed and backed[i] and cluster.allocatable[slot, column] <= 0:
                continue
            name = cluster.resources[column]
            freed = sum(record.pod.requests.get(name, 0) for record in removed)
            if cluster.allocatable[slot, column] - cluster.requested[slot, column] + freed < amount:
                return False
        return True

    def eviction_terms(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> EvictionTerms:
        """`fits_without` as arithmetic: a pod slot, then each resource the pod asks for; evicting a
        pod frees one slot and its requests (a resource left to DynamicResources on a node is no
        shortfall there). What every pod below a priority frees is read from `RoomByPriority`."""
        columns, amounts, backed = self._requests(pod, cluster)
        allocatable, requested = cluster.allocatable, cluster.requested
        shortfall = np.empty((len(slots), 1 + len(columns)), dtype=np.int64)
        shortfall[:, 0] = requested[slots, PODS] + 1 - allocatable[slots, PODS]
        for i, (column, amount) in enumerate(zip(columns, amounts, strict=True)):
            held = allocatable[slots, column]
            need = amount - (held - requested[slots, column])
            if backed and backed[i]:
                need[held <= 0] = 0
            shortfall[:, 1 + i] = need
        names = [cluster.resources[column] for column in columns]

        def frees(victim: PodInfo) -> tuple[int, ...]:
            requests = victim.requests
            return (1, *(requests.get(name, 0) for name in names))

        def frees_below(priority: int) -> np.ndarray:
            room = cluster.tracker(RoomByPriority)
            freed = np.empty_like(shortfall)
            freed[:, 0] = room.count_below(priority, slots)
            for i, name in enumerate(names):
                freed[:, 1 + i] = room.requested_below(priority, name, slots)
            return freed

        return EvictionTerms(shortfall, frees, frees_below, frees_key=(self.name, tuple(names)))

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        """kube v1.36 marks a node Unresolvable where the pod asks more of a resource than the node
        has at all: evicting its pods cannot help there ("Too many pods" always may)."""
        columns, amounts, backed = self._requests(pod, cluster)
        resolvable = np.ones(len(rejected), dtype=bool)
        allocatable = cluster.allocatable
        for i, (column, amount) in enumerate(zip(columns, amounts, strict=True)):
            held = allocatable[:, column].take(rejected)
            too_big = held < amount
            if backed and backed[i]:
                too_big &= held > 0  # left to DynamicResources where the node has none
            resolvable &= ~too_big
        return resolvable

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        counts: Counter[str] = Counter()
        allocatable, requested = cluster.allocatable, cluster.requested
        full = int(np.count_nonzero(requested[:, PODS].take(rejected) >= allocatable[:, PODS].take(rejected)))
        if full:
            counts["Too many pods"] = full
        columns, amounts, backed = self._requests(pod, cluster)
        for i, (column, amount) in enumerate(zip(columns, amounts, strict=True)):
            held = allocatable[:, column].take(rejected)
            short_rows = held - requested[:, column].take(rejected) < amount
            if backed and backed[i]:
                short_rows &= held > 0
            short = int(np.count_nonzero(short_rows))
            if short:
                counts[f"Insufficient {cluster.resources[column]}"] = short
        return counts

    # ------------------------------------------------------------------ score

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        if self._cpu_memory is not None:
            scores = self._score_cpu_memory(pod, cluster, slots)
            if scores is not None:
                return scores
        strategy = self.args.scoringStrategy
        total = np.zeros(len(slots), dtype=np.int64)
        weights = np.zeros(len(slots), dtype=np.int64)
        for spec in strategy.resources:
            found = allocation(pod, cluster, slots, spec.name, nonzero=True)
            if found is None:
                continue
            requested, allocatable = found
            counted = allocatable > 0
            safe = np.where(counted, allocatable, 1)
            if strategy.type == "LeastAllocated":
                score = np.where(requested > allocatable, 0, (allocatable - requested) * MAX_NODE_SCORE // safe)
            elif strategy.type == "MostAllocated":
                score = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
            else:
                utilization = np.where(
                    counted & (requested <= allocatable), requested * MAX_UTILIZATION // safe, MAX_UTILIZATION
                )
                score = broken_linear(self._shape, utilization)
                counted &= score > 0
            total += np.where(counted, score * spec.weight, 0)
            weights += np.where(counted, spec.weight, 0)
        safe_weights = np.where(weights > 0, weights, 1)
        if strategy.type == "RequestedToCapacityRatio":
            # Go's math.Round: half away from zero (all values here are non-negative)
            result = np.floor(total / safe_weights + 0.5).astype(np.int64)
        else:
            result = total // safe_weights
        return np.where(weights > 0, result, 0)

    def _score_cpu_memory(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray | None:
        """`score` for LeastAllocated / MostAllocated over cpu and memory, every resource of a
        (resources x candidates) block at once: the same integers in a third of the numpy calls.
        None when some candidate has no allocatable cpu or memory (not counted there: the general
        path)."""
        assert self._cpu_memory is not None
        columns, weights, weight_sum = self._cpu_memory
        allocatable, positive = cluster.cpu_memory_allocatable(slots)  # (cpu, memory) x candidates
        if not positive:
            return None
        used = cluster.nonzero_requested.T.take(slots, axis=1)
        if columns != [CPU, MEMORY]:
            allocatable, used = allocatable[columns], used[columns]
        amounts = np.array([[pod.score_cpu if column == CPU else pod.score_memory] for column in columns])
        if self.args.scoringStrategy.type == "LeastAllocated":
            # (allocatable - requested) * 100 // allocatable, 0 where the pod's request does not fit
            scores = allocatable - used
            scores -= amounts
            np.maximum(scores, 0, out=scores)
        else:  # MostAllocated: min(requested, allocatable) * 100 // allocatable
            scores = used + amounts
            np.minimum(scores, allocatable, out=scores)
        scores *= MAX_NODE_SCORE
        scores //= allocatable
        if len(columns) == 1:
            return scores[0]
        if weight_sum == len(columns):  # every weight 1
            total = scores[0] + scores[1]
        else:
            scores *= weights
            total = scores.sum(axis=0)
        total //= weight_sum
        return total
