"""The device allocator of Dynamic Resource Allocation, for one node: kube v1.36's
`dynamic-resource-allocation/structured` — the `incubating` implementation, which kube's
`NewAllocator` picks when consumable capacity or binding conditions are on (both are, by default,
in v1.36) — ported rule for rule.

`gather_pools` finds the resource pools a node can reach: the ResourceSlices whose `nodeName`,
`nodeSelector` or `allNodes` admit it (or, with `perDeviceNodeSelection`, one of whose devices
does), only the newest generation of each pool, a pool *incomplete* while not all of its
`resourceSliceCount` slices are there and *invalid* when two of its devices share a name (kube's
`GatherPools`). Pools are taken in (driver, pool) order — those with a device that has binding
conditions after all the others, so that a device needing no preparation is preferred — and slices
by name.

`Allocator.allocate` then finds, for a pod's unallocated claims, one device per required device
(`exactly.count`, or every matching device with `allocationMode: All`, or the first
`firstAvailable` alternative that can be satisfied), by exhaustive search with backtracking, as
kube: a device must be free (not allocated to another claim, nor already picked for this pod —
except with `adminAccess`, or for a device with `allowMultipleAllocations`), match its
DeviceClass's and its request's CEL selectors, have its NoSchedule/NoExecute taints tolerated by
the request, leave enough of its pool's shared counters (partitionable devices), have the capacity
the request asks for (`capacity.requests`, rounded by the capacity's `requestPolicy`) left over what
allocated and in-flight shares consume, and keep every `matchAttribute` and `distinctAttribute`
constraint of its claim. Within one request the devices are taken in pool order (combinations, not
permutations: one request never takes a shared device twice). The first full solution wins; each
claim's result lists its devices — a share of a device with `allowMultipleAllocations` with what it
consumes (`consumedCapacity`) and a share ID (filled in by `with_share_ids` when the allocation is
reserved), a device with binding conditions with them copied — and the node selector the allocation
implies (a node-local device, or one with `bindsToNode`, pins the claim to the node).

Errors: `AllocationError` is what kube reports as an error aborting the scheduling attempt (a CEL
runtime error, a missing class, an `All` request over an incomplete pool, ...), with kube's
message; `None` from `allocate` means the claims do not fit on this node; `InvalidPools` (kube's
`ErrFailedAllocationOnNode`) that they do not fit and some reachable pool was invalid.

Where kube's code leaves a rejected candidate's shared counters, constraint entries or claim marks
taken for the rest of the search (a counter set consumed by a candidate whose taint then rejects
it, a shared device's counters never given back when the search backtracks), Placer gives them back:
the same allocations wherever nothing needs backtracking over such a candidate (every one of kube's
test rows), and no devices refused for what a discarded candidate took.

Not modelled: list-type attributes (DRAListTypeAttributes, alpha in v1.36: kube's `incubating`
allocator does not have them either).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from placer.engine.devices import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    CapacityPolicy,
    CapacityRange,
    Device,
    DeviceCapacity,
    DeviceClassInfo,
    DeviceToleration,
    ResourceClaimInfo,
    SliceInfo,
    SubRequest,
    node_selector_json,
    selector_matches,
)
from placer.engine.dra_cel import CelError, compile_selector, evaluate
from placer.engine.objects import NodeSelectorRequirement, NodeSelectorTerm
from placer.engine.quantity import BINARY_SI, Quantity

__all__ = [
    "AllocatedDevice",
    "AllocatedState",
    "AllocationError",
    "AllocationResult",
    "Allocator",
    "DeviceID",
    "InvalidPools",
    "Pool",
    "consumed_capacity",
    "gather_pools",
    "node_matches",
    "node_selector_of",
    "request_fits",
    "single_request_result",
]

DeviceID = tuple[str, str, str]  # (driver, pool, device)


class AllocationError(Exception):
    """An error that aborts scheduling the pod (kube's Filter returning an error status)."""


class InvalidPools(Exception):
    """The claims do not fit and invalid pools were encountered (kube's ErrFailedAllocationOnNode)."""

    def __init__(self) -> None:
        super().__init__("invalid resource pools were encountered")


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """kube's `AllocatedState`: what other claims hold, allocated or in flight — the devices held
    whole, the devices some share is taken of, and per device the capacity those shares consume."""

    devices: Container[DeviceID] = frozenset()
    shared: Container[DeviceID] = frozenset()
    capacity: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)

    def holds(self, device_id: DeviceID) -> bool:
        """kube's `IsDeviceAllocated`: held whole or in part (its counters are taken)."""
        return device_id in self.devices or device_id in self.shared or device_id in self.capacity


def node_matches(
    node_name: str, labels: Mapping[str, str], name_to_match: str | None, all_nodes: bool,
    selector: tuple[NodeSelectorTerm, ...] | None,
) -> bool:
    """kube's `NodeMatches`."""
    if name_to_match:
        return node_name == name_to_match
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node_name, labels)
    return False


# ------------------------------------------------------------------------------------ pools


@dataclass
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[SliceInfo] = field(default_factory=list)  # device slices targeting the node
    other_slices: list[SliceInfo] = field(default_factory=list)  # the rest (their counters count)
    counter_sets: dict[str, Mapping[str, Fraction]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}"

    @property
    def binding_conditions(self) -> bool:
        """kube's `poolHasBindingConditions`: some device it offers the node must be prepared."""
        return any(device.binding_conditions for slice_ in self.slices for device in slice_.devices)


def _targets(slice_: SliceInfo, node_name: str, labels: Mapping[str, str]) -> bool | None:
    """Whether a slice is relevant for the node (None: a slice of an unknown kind of selection)."""
    if slice_.shared_counters:
        return True
    if slice_.node_name or slice_.all_nodes or slice_.node_selector is not None:
        return node_matches(node_name, labels, slice_.node_name, slice_.all_nodes, slice_.node_selector)
    if slice_.per_device:
        return any(
            node_matches(node_name, labels, d.node_name, d.all_nodes, d.node_selector) for d in slice_.devices
        )
    return None


def gather_pools(
    slices: Iterable[SliceInfo], node_name: str, labels: Mapping[str, str],
    pool_slices: Callable[[str, str], Iterable[SliceInfo]] | None = None,
    built: dict[tuple[Any, ...], Pool] | None = None,
) -> list[Pool]:
    """kube's `GatherPools` for one node (see the module docstring). `slices` are all of them, or
    those that may reach the node when `pool_slices(driver, pool)` gives a pool's every slice.
    `built`: pools already built for other nodes from the same slices, shared rather than built
    again (a caller keeping every node's pools: network-attached slices reach many nodes)."""
    everything = list(slices)
    by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
    for slice_ in everything:
        if not _targets(slice_, node_name, labels):
            continue
        key = (slice_.driver, slice_.pool)
        current = by_pool.get(key)
        if current is None or slice_.generation > current[0].generation:
            by_pool[key] = [slice_]
        elif slice_.generation == current[0].generation:
            current.append(slice_)
    pools: list[Pool] = []
    for (driver, pool_name), chosen in sorted(by_pool.items()):
        chosen.sort(key=lambda s: s.name)
        generation, count = chosen[0].generation, chosen[0].slice_count
        if len(chosen) == count:
            pools.append(_shared_pool(built, driver, pool_name, chosen, None))
            continue
        if pool_slices is not None:
            same_pool = list(pool_slices(driver, pool_name))
        else:
            same_pool = [s for s in everything if s.driver == driver and s.pool == pool_name]
        if any(s.generation > generation for s in same_pool):
            continue  # obsolete: the driver is replacing this generation
        all_of_generation = sorted((s for s in same_pool if s.generation == generation), key=lambda s: s.name)
        if len(all_of_generation) != count:
            pools.append(Pool(driver, pool_name, incomplete=True))
            continue
        pools.append(_shared_pool(built, driver, pool_name, chosen, all_of_generation))
    # pools whose devices need preparing (binding conditions) last, each part in (driver, pool) order
    return [p for p in pools if not p.binding_conditions] + [p for p in pools if p.binding_conditions]


def _shared_pool(
    built: dict[tuple[Any, ...], Pool] | None, driver: str, name: str, slices: list[SliceInfo],
    all_slices: list[SliceInfo] | None,
) -> Pool:
    """`_build_pool`, once per set of slices when `built` keeps them (slices are immutable records:
    a changed slice is another object, and the caller drops `built` when slices change)."""
    if built is None:
        return _build_pool(driver, name, slices, all_slices)
    key = (driver, name, tuple(map(id, slices)), None if all_slices is None else tuple(map(id, all_slices)))
    pool = built.get(key)
    if pool is None:
        pool = built[key] = _build_pool(driver, name, slices, all_slices)
    return pool


def _build_pool(driver: str, name: str, slices: list[SliceInfo], all_slices: list[SliceInfo] | None) -> Pool:
    device_slices = [s for s in slices if not s.shared_counters]
    counter_slices = [s for s in slices if s.shared_counters]
    seen: set[str] = set()
    for slice_ in device_slices:
        for device in slice_.devices:
            if device.name in seen:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate device name {device.name}")
            seen.add(device.name)
    counter_sets: dict[str, Mapping[str, Fraction]] = {}
    for slice_ in counter_slices:
        for set_name, counters in slice_.shared_counters.items():
            if set_name in counter_sets:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate counter set name {set_name}")
            counter_sets[set_name] = counters
    problem = _counter_problem(counter_sets, slices)
    names = {s.name for s in slices}
    others = [s for s in (all_slices or []) if s.name not in names]
    problem = problem or _counter_problem(counter_sets, others)
    if problem:
        return Pool(driver, name, invalid=True, invalid_reason=problem)
    return Pool(driver, name, slices=device_slices, other_slices=others, counter_sets=counter_sets)


def _counter_problem(counter_sets: Mapping[str, Mapping[str, Fraction]], slices: Iterable[SliceInfo]) -> str:
    for slice_ in slices:
        for device in slice_.devices:
            for set_name, counters in device.consumes_counters:
                if set_name not in counter_sets:
                    return f"counter set {set_name} not found"
                for counter in counters:
                    if counter not in counter_sets[set_name]:
                        return f"counter {counter} not found in counter set {set_name}"
    return ""


# ------------------------------------------------------------------------------------ capacity


def _value(quantity: Quantity) -> int:
    """apimachinery's `Quantity.Value()`: rounded up to a whole number."""
    return math.ceil(quantity.value)


def _round_up_range(requested: Quantity, bounds: CapacityRange) -> Quantity:
    """kube's `roundUpRange`: at least `min`, then up to the next step above it."""
    assert bounds.min is not None
    if requested.value < bounds.min.value:
        return bounds.min
    if bounds.step is None:
        return requested
    step, low = _value(bounds.step), _value(bounds.min)
    steps, rest = divmod(_value(requested) - low, step)
    return Quantity(Fraction(low + step * (steps + (1 if rest else 0))), BINARY_SI)


def consumed_capacity(requested: Quantity | None, capacity: DeviceCapacity) -> Quantity:
    """kube's `calculateConsumedCapacity`: what a share takes of one capacity — the request, rounded
    up by the capacity's policy; without a request, the policy's default, else the whole capacity."""
    policy = capacity.policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range)
    if policy.valid_values is not None:
        return next((v for v in policy.valid_values if requested.value <= v.value), requested)
    return requested


def _violates(consumed: Quantity, policy: CapacityPolicy | None) -> bool:
    """kube's `violatesPolicy`: the default is always fine; else within the range and on a step,
    or one of the valid values."""
    if policy is None:
        return False
    if policy.default is not None and consumed.value == policy.default.value:
        return False
    bounds = policy.valid_range
    if bounds is not None:
        if bounds.max is not None and consumed.value > bounds.max.value:
            return True
        if bounds.step is not None:
            low = _value(bounds.min) if bounds.min is not None else 0
            return (_value(consumed) - low) % _value(bounds.step) != 0
        return False
    if policy.valid_values:
        return all(consumed.value != v.value for v in policy.valid_values)
    return False


def request_fits(
    requests: Mapping[str, Quantity], device: Device, allocated: Mapping[str, Fraction] | None,
    allocating: Mapping[str, Fraction] | None = None,
) -> bool:
    """kube's `CmpRequestOverCapacity`: every capacity the request names exists on the device, and
    each of the device's capacities has room for what the request consumes of it (policy kept) over
    what `allocated` (other claims' shares) and `allocating` (this search's shares) take."""
    capacities = device.capacities
    if any(name not in capacities for name in requests):
        return False
    for name, capacity in capacities.items():
        consumed = consumed_capacity(requests.get(name), capacity)
        if _violates(consumed, capacity.policy):
            return False
        total = consumed.value
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > capacity.value.value:
            return False
    return True


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str  # the request's name, or "request/subrequest"
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    #: a share of a device with allowMultipleAllocations: its ID ("" until `with_share_ids`)
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def id(self) -> DeviceID:
        return self.driver, self.pool, self.device

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool,
                               "device": self.device}
        if self.admin_access is not None:
            out["adminAccess"] = self.admin_access
        if self.tolerations:
            out["tolerations"] = [t.as_json() for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id:
            out["shareID"] = self.share_id
        if self.consumed_capacity is not None:
            out["consumedCapacity"] = {name: str(q) for name, q in sorted(self.consumed_capacity.items())}
        return out


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """One claim's allocation (kube's `AllocationResult`), and `status.allocation` as the API writes it."""

    devices: tuple[AllocatedDevice, ...]
    config: tuple[dict[str, Any], ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None

    def with_share_ids(self, new_id: Callable[[], str]) -> AllocationResult:
        """The same allocation with a fresh share ID for each share (kube generates one per share
        as it allocates; Placer does when the allocation is reserved, not on every node it tries)."""
        if not any(d.share_id == "" for d in self.devices):
            return self
        return replace(self, devices=tuple(replace(d, share_id=new_id()) if d.share_id == "" else d
                                           for d in self.devices))

    def as_json(self) -> dict[str, Any]:
        devices: dict[str, Any] = {"results": [d.as_json() for d in self.devices]}
        if self.config:
            devices["config"] = [dict(c) for c in self.config]
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = node_selector_json(self.node_selector)
        return out


# ------------------------------------------------------------------------------------ the search


@dataclass
class _Candidate:
    id: DeviceID
    device: Device
    slice: SliceInfo
    pool: Pool


@dataclass
class _RequestData:
    request: SubRequest
    parent: str | None  # the parent request's name for a firstAvailable alternative
    klass: DeviceClassInfo | None = None
    num_devices: int = 0
    selected_sub: int = 0
    all_devices: list[_Candidate] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


@dataclass
class _Result:
    request: str
    parent: str | None
    id: DeviceID
    device: Device
    slice: SliceInfo
    admin_access: bool | None
    shared: bool = False
    consumed: dict[str, Quantity] | None = None


def _lookup_attribute(device: Device, device_id: DeviceID, name: str) -> tuple[str, Any] | None:
    """kube's `lookupAttribute`: the fully qualified name, or the bare id in the driver's domain."""
    if name in device.attributes:
        return device.attributes[name]
    domain, slash, ident = name.partition("/")
    if not slash or domain != device_id[0]:
        return None
    return device.attributes.get(ident)


class _Constraint(ABC):
    """A claim constraint over the devices of the requests it names (all, when it names none)."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def _applies(self, request: str, sub: str | None) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (sub is not None and f"{request}/{sub}" in self.requests)

    @abstractmethod
    def add(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> bool:
        """Whether the device keeps the constraint; if so it counts from now on."""

    @abstractmethod
    def remove(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> None:
        """Undo one successful `add` with the same arguments."""


class _MatchAttribute(_Constraint):
    """kube's `matchAttributeConstraint`: every device of the named requests has the attribute, with
    one value."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.count = 0

    def add(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> bool:
        if not self._applies(request, sub):
            return True
        value = _lookup_attribute(device, device_id, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        if value[0] not in ("int", "bool", "string", "version") or self.value is None or value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> None:
        if self._applies(request, sub):
            self.count -= 1


class _DistinctAttribute(_Constraint):
    """kube's `distinctAttributeConstraint`: the devices of the named requests have the attribute,
    each with another value. As kube keeps them, the values are remembered per request name (the
    parent's, for an alternative): a request's next device is compared with the latest value of
    each request, and replaces its own."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: dict[str, tuple[str, Any]] = {}
        self.count = 0

    def add(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> bool:
        if not self._applies(request, sub):
            return True
        value = _lookup_attribute(device, device_id, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.values[request], self.count = value, 1
            return True
        if value[0] not in ("int", "bool", "string", "version"):
            return False
        if any(kind == value[0] and stored == value[1] for kind, stored in self.values.values()):
            return False
        self.values[request] = value
        self.count += 1
        return True

    def remove(self, request: str, sub: str | None, device: Device, device_id: DeviceID) -> None:
        if self._applies(request, sub):
            self.values.pop(request, None)
            self.count -= 1


def _taint_prevents(device: Device, request: SubRequest) -> bool:
    for taint in device.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in request.tolerations):
            return True
    return False


class _Stop(Exception):
    """The search cannot succeed (kube's errStop)."""


class _MaxSize(Exception):
    """The claim would get more than 32 devices (kube's errAllocationResultMaxSizeExceeded)."""


def _klog(claim: ResourceClaimInfo) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


# A device's match against a request's selectors is static: an evaluator caches it across pods.
Matcher = Callable[[str, Device], bool]


def default_matcher(expression: str, device: Device) -> bool:
    """Evaluate one selector on one device; CelError on a compile or runtime error."""
    compiled = compile_selector(expression)
    if compiled.program is None:
        raise CelError("\0compile\0" + (compiled.error or ""))
    if device.error is not None:
        raise CelError(device.error)
    return evaluate(compiled, device.cel)


class Allocator:
    """Allocates claims on one node at a time, from the cluster's slices and classes (kube's
    `structured.Allocator`); `allocated` is what other claims hold, allocated or in flight
    (`AllocatedState`, or just the devices held whole), `matcher` evaluates selectors (cached by the
    caller: a device's match never changes)."""

    def __init__(
        self,
        classes: Callable[[str], DeviceClassInfo | None],
        allocated: AllocatedState | Container[DeviceID],
        matcher: Matcher = default_matcher,
    ) -> None:
        self.classes = classes
        self.state = allocated if isinstance(allocated, AllocatedState) else AllocatedState(allocated)
        self.matcher = matcher
        self.invocations = 0  # kube's Stats.NumAllocateOneInvocations: steps of the search, all calls

    def allocate(
        self, node_name: str, labels: Mapping[str, str], pools: list[Pool], claims: Sequence[ResourceClaimInfo]
    ) -> list[AllocationResult] | None:
        """One result per claim, or None when they cannot all be allocated on this node.
        AllocationError / InvalidPools as kube's errors (see the module docstring)."""
        return _Search(self, node_name, labels, pools, list(claims)).run()


_START = (0, 0, 0)  # kube's null deviceLocation: every device is a candidate


class _Search:
    def __init__(
        self, owner: Allocator, node_name: str, labels: Mapping[str, str], pools: list[Pool],
        claims: list[ResourceClaimInfo],
    ) -> None:
        self.owner = owner
        self.state = owner.state
        self.node_name, self.labels = node_name, labels
        self.pools = pools
        self.claims = claims
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[_Constraint]] = []
        self.matches: dict[tuple[DeviceID, tuple[int, int, int]], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.consumed: dict[str, dict[str, dict[str, Fraction]]] = {}  # pool -> counter set -> counter
        self.available: dict[str, dict[str, dict[str, Fraction]]] = {}
        # shares being allocated: device -> how many, and what they consume (kube's allocatingCapacity)
        self.shares: dict[DeviceID, int] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}

    # -------------------------------------------------------------- setup

    def run(self) -> list[AllocationResult] | None:
        for claim_index, claim in enumerate(self.claims):
            min_devices = 0
            for request_index, request in enumerate(claim.requests):
                if request.first_available:
                    smallest = None
                    for sub_index, sub in enumerate(request.first_available):
                        data = self._validate(claim, sub, request.name, (claim_index, request_index, sub_index))
                        self.request_data[(claim_index, request_index, sub_index)] = data
                        smallest = data.num_devices if smallest is None else min(smallest, data.num_devices)
                    min_devices += smallest or 0
                elif request.exactly is not None:
                    data = self._validate(claim, request.exactly, None, (claim_index, request_index, 0))
                    self.request_data[(claim_index, request_index, 0)] = data
                    min_devices += data.num_devices
                else:
                    raise AllocationError(
                        f"claim {_klog(claim)}, request {request.name}: missing device class name "
                        "(unsupported request type?)"
                    )
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {_klog(claim)}: number of requested devices {min_devices} exceeds the claim "
                    f"limit of {ALLOCATION_RESULTS_MAX_SIZE}"
                )
            constraints: list[_Constraint] = []
            for i, constraint in enumerate(claim.constraints):
                if constraint is not None and constraint.match_attribute is not None:
                    constraints.append(_MatchAttribute(constraint.requests, constraint.match_attribute))
                elif constraint is not None and constraint.distinct_attribute is not None:
                    constraints.append(_DistinctAttribute(constraint.requests, constraint.distinct_attribute))
                else:
                    raise AllocationError(
                        f"claim {_klog(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
            self.constraints.append(constraints)
        try:
            done = self._allocate_one(0, 0, 0, 0, False, _START)
        except _Stop:
            return None
        except _MaxSize:
            raise AllocationError("allocation max size exceeded") from None  # as kube returns it
        if not done:
            if any(pool.invalid for pool in self.pools):
                raise InvalidPools
            return None
        return [self._result(claim_index, claim) for claim_index, claim in enumerate(self.claims)]

    def _validate(
        self, claim: ResourceClaimInfo, request: SubRequest, parent: str | None, key: tuple[int, int, int]
    ) -> _RequestData:
        data = _RequestData(request, parent)
        name = request.name
        for i, selector in enumerate(request.selectors):
            if selector is None:
                raise AllocationError(
                    f"claim {_klog(claim)}, request {name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)"
                )
        if not request.device_class:
            raise AllocationError(
                f"claim {_klog(claim)}, request {name}: missing device class name (unsupported request type?)"
            )
        klass = self.owner.classes(request.device_class)
        if klass is None:
            raise AllocationError(
                f"claim {_klog(claim)}, request {name}: could not retrieve device class {request.device_class}: "
                f'deviceclass.resource.k8s.io "{request.device_class}" not found'
            )
        data.klass = klass
        if request.mode == EXACT_COUNT:
            data.num_devices = request.count
        elif request.mode == ALL:
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {_klog(claim)}, request {name}: asks for all devices, but resource pool "
                        f"{pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"claim {_klog(claim)}, request {name}: asks for all devices, but resource pool "
                        f"{pool.id} is currently invalid"
                    )
                for slice_ in pool.slices:
                    for device in slice_.devices:
                        device_id = (slice_.driver, slice_.pool, device.name)
                        if self._selectable(key, data, slice_, device) and self._fits(request, device_id, device):
                            data.all_devices.append(_Candidate(device_id, device, slice_, pool))
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(f"claim {_klog(claim)}, request {name}: unsupported count mode {request.mode}")
        return data

    # -------------------------------------------------------------- search

    def _allocate_one(self, c: int, r: int, s: int, d: int, within_sub: bool, start: tuple[int, int, int]) -> bool:
        """kube's `allocateOne`; `start` (pool, slice, device) is where the next device of the same
        request is looked for: after the one taken before it."""
        self.owner.invocations += 1
        if c >= len(self.claims):
            return True
        claim = self.claims[c]
        if r >= len(claim.requests):
            try:
                return self._allocate_one(c + 1, 0, 0, 0, False, _START)
            except _MaxSize:
                return False
        key = (c, r, s)
        data = self.request_data[key]
        if not within_sub and data.parent is not None:
            all_exceeded = True
            sub = 0
            while (c, r, sub) in self.request_data:
                try:
                    success = self._allocate_one(c, r, sub, d, True, _START)
                except _MaxSize:
                    sub += 1
                    continue
                all_exceeded = False
                if success:
                    self.request_data[(c, r, 0)].selected_sub = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSize
            return False
        request = data.request
        if request.mode == ALL and not data.all_devices:
            return False
        if d >= data.num_devices:
            return self._allocate_one(c, r + 1, 0, 0, False, _START)
        if len(self.results[c]) + data.num_devices - d > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSize
        admin = request.admin_access is True
        if request.mode == ALL:
            candidate = data.all_devices[d]
            undo = self._allocate_device(c, key, candidate, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(c, r, s, d + 1, within_sub, _START)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done
        first_pool, first_slice, first_device = start
        for p in range(first_pool, len(self.pools)):
            pool = self.pools[p]
            if pool.incomplete or pool.invalid:
                continue
            for si in range(first_slice if p == first_pool else 0, len(pool.slices)):
                slice_ = pool.slices[si]
                devices = slice_.devices
                for di in range(first_device if (p == first_pool and si == first_slice) else 0, len(devices)):
                    device = devices[di]
                    device_id = (pool.driver, pool.pool, device.name)
                    if admin and c in self.allocating.get(device_id, ()):
                        continue
                    if not admin and self._in_use(device_id):
                        continue
                    if not self._selectable(key, data, slice_, device):
                        continue
                    if not self._fits(request, device_id, device):
                        continue
                    undo = self._allocate_device(c, key, _Candidate(device_id, device, slice_, pool), must=False)
                    if undo is None:
                        continue
                    try:
                        done = self._allocate_one(c, r, s, d + 1, within_sub, (p, si, di + 1))
                    except BaseException:
                        undo()
                        raise
                    if done:
                        return True
                    undo()
        return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.state.devices or bool(self.allocating.get(device_id))

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """kube's `deviceCapacityInUse`: shares of it are allocated (with capacity) or being allocated."""
        return device_id in self.state.capacity or self.shares.get(device_id, 0) > 0

    def _fits(self, request: SubRequest, device_id: DeviceID, device: Device) -> bool:
        """The request's capacity (`request_fits`) over what other claims' shares and this search's take."""
        if not request.capacity and not device.capacities:
            return True
        return request_fits(request.capacity, device, self.state.capacity.get(device_id),
                            self.allocating_capacity.get(device_id))

    def _selectable(self, key: tuple[int, int, int], data: _RequestData, slice_: SliceInfo, device: Device) -> bool:
        device_id = (slice_.driver, slice_.pool, device.name)
        known = self.matches.get((device_id, key))
        if known is not None:
            return known
        result = (
            (data.klass is None or self._selectors_match(key, device, data.klass, data.klass.selectors))
            and self._selectors_match(key, device, None, data.request.selectors)
            and (not slice_.per_device or node_matches(
                self.node_name, self.labels, device.node_name, device.all_nodes, device.node_selector
            ))
        )
        self.matches[(device_id, key)] = result
        return result

    def _selectors_match(
        self, key: tuple[int, int, int], device: Device, klass: DeviceClassInfo | None, selectors: Sequence[str | None]
    ) -> bool:
        for i, expression in enumerate(selectors):
            where = f"class {klass.name}" if klass is not None else f"claim {_klog(self.claims[key[0]])}"
            if expression is None:
                raise AllocationError(f"{where}: selector #{i}: CEL expression empty (unsupported selector type?)")
            try:
                matched = self.owner.matcher(expression, device)
            except CelError as error:
                message = str(error)
                if message.startswith("\0compile\0"):
                    raise AllocationError(f"{where}: selector #{i}: CEL compile error: {message[9:]}") from None
                raise AllocationError(f"{where}: selector #{i}: CEL runtime error: {message}") from None
            if not matched:
                return False
        return True

    def _allocate_device(
        self, c: int, key: tuple[int, int, int], candidate: _Candidate, must: bool
    ) -> Callable[[], None] | None:
        """kube's `allocateDevice`: the rollback when the candidate is taken, None when it cannot be."""
        claim = self.claims[c]
        data = self.request_data[key]
        request = data.request
        admin = request.admin_access is True
        device = candidate.device
        multiple = device.allow_multiple_allocations
        if not multiple and admin and c in self.allocating.get(candidate.id, ()):
            return None
        if not admin and self._in_use(candidate.id):
            return None
        # a shared device's counters are taken by its first share only
        counters = bool(device.consumes_counters) and not (multiple and self._capacity_in_use(candidate.id))
        if counters and not self._take_counters(candidate):
            return None
        base, sub = (data.parent, request.name) if data.parent else (request.name, None)
        if _taint_prevents(device, request):
            if counters:
                self._release_counters(candidate)
            return None
        constraints = self.constraints[c]
        for i, constraint in enumerate(constraints):
            if not constraint.add(base, sub, device, candidate.id):
                if must:
                    raise AllocationError(
                        f"claim {_klog(claim)}, request {request.name}: cannot add device "
                        f"{'/'.join(candidate.id)} because a claim constraint would not be satisfied"
                    )
                for earlier in constraints[:i]:
                    earlier.remove(base, sub, device, candidate.id)
                if counters:
                    self._release_counters(candidate)
                return None
        if not self._fits(request, candidate.id, device):  # (an `All` device after this claim's shares)
            for constraint in constraints:
                constraint.remove(base, sub, device, candidate.id)
            if counters:
                self._release_counters(candidate)
            return None
        consumed: dict[str, Quantity] | None = None
        if multiple:
            consumed = {name: consumed_capacity(request.capacity.get(name), capacity)
                        for name, capacity in device.capacities.items()}
            self.shares[candidate.id] = self.shares.get(candidate.id, 0) + 1
            taking = self.allocating_capacity.setdefault(candidate.id, {})
            for name, quantity in consumed.items():
                taking[name] = taking.get(name, Fraction(0)) + quantity.value
        else:
            self.allocating.setdefault(candidate.id, set()).add(c)
        results = self.results[c]
        results.append(_Result(request.name, data.parent, candidate.id, device, candidate.slice,
                               True if admin else None, multiple, consumed or None))
        count = len(results) - 1

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(base, sub, device, candidate.id)
            if multiple:
                self.shares[candidate.id] -= 1
                taking = self.allocating_capacity[candidate.id]
                for name, quantity in (consumed or {}).items():
                    taking[name] -= quantity.value
                if not self.shares[candidate.id]:
                    del self.shares[candidate.id], self.allocating_capacity[candidate.id]
            else:
                self.allocating[candidate.id].discard(c)
            if counters:
                self._release_counters(candidate)
            del results[count:]

        return undo

    # -------------------------------------------------------------- counters (partitionable devices)

    def _available_counters(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        available = self.available.get(pool.pool)
        if available is None:
            available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            for slice_ in (*pool.slices, *pool.other_slices):
                for device in slice_.devices:
                    if not self.state.holds((slice_.driver, slice_.pool, device.name)):
                        continue
                    for set_name, counters in device.consumes_counters:
                        for counter, value in counters.items():
                            if counter in available.get(set_name, {}):
                                available[set_name][counter] -= value
            self.available[pool.pool] = available
        return available

    def _take_counters(self, candidate: _Candidate) -> bool:
        available = self._available_counters(candidate.pool)
        consumed = self.consumed.setdefault(candidate.pool.pool, {})
        for set_name, counters in candidate.device.consumes_counters:
            into = consumed.setdefault(set_name, {})
            for counter, value in counters.items():
                into[counter] = into.get(counter, Fraction(0)) + value
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for counter, value in counters.items():
                if value < used.get(counter, 0):
                    self._release_counters(candidate)
                    return False
        return True

    def _release_counters(self, candidate: _Candidate) -> None:
        consumed = self.consumed.get(candidate.pool.pool, {})
        for set_name, counters in candidate.device.consumes_counters:
            for counter, value in counters.items():
                consumed[set_name][counter] -= value

    # -------------------------------------------------------------- results

    def _result(self, claim_index: int, claim: ResourceClaimInfo) -> AllocationResult:
        devices = []
        for result in self.results[claim_index]:
            request = self._lookup_request(claim, result)
            devices.append(AllocatedDevice(
                f"{result.parent}/{result.request}" if result.parent else result.request,
                result.id[0], result.id[1], result.id[2], result.admin_access,
                request.tolerations if request is not None else (),
                "" if result.shared else None, result.consumed,
                result.device.binding_conditions, result.device.binding_failure_conditions,
            ))
        config: list[dict[str, Any]] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        for request_index in range(len(claim.requests)):
            data = self.request_data[(claim_index, request_index, 0)]
            if data.parent is not None:
                data = self.request_data[(claim_index, request_index, data.selected_sub)]
            klass = data.klass
            if klass is None:
                continue
            if klass.name in class_ranges:
                start, end = class_ranges[klass.name]
                for i in range(start, end):
                    config[i]["requests"].append(data.name)
                continue
            start = len(config)
            for entry in klass.config:
                config.append({"source": "FromClass", "requests": [data.name],
                               **{k: v for k, v in entry.items() if k != "requests"}})
            class_ranges[klass.name] = (start, len(config))
        for entry in claim.config:
            requests = list(entry.get("requests") or [])
            body = {k: v for k, v in entry.items() if k != "requests"}
            if not requests:
                config.append({"source": "FromClaim", **body})
                continue
            for request_index, request in enumerate(claim.requests):
                if request.name in requests:
                    config.append({"source": "FromClaim", "requests": requests, **body})
                    continue
                data = self.request_data[(claim_index, request_index, 0)]
                if data.parent is None:
                    continue
                chosen = request.first_available[data.selected_sub]
                if f"{request.name}/{chosen.name}" in requests:
                    config.append({"source": "FromClaim", "requests": requests, **body})
        return AllocationResult(tuple(devices), tuple(config), self._node_selector(claim_index))

    @staticmethod
    def _lookup_request(claim: ResourceClaimInfo, result: _Result) -> SubRequest | None:
        name = result.parent or result.request
        for request in claim.requests:
            if request.name != name:
                continue
            if result.parent is None:
                return request.exactly
            return next((sub for sub in request.first_available if sub.name == result.request), None)
        return None

    def _node_selector(self, claim_index: int) -> tuple[NodeSelectorTerm, ...] | None:
        return node_selector_of(self.claims[claim_index], [(r.device, r.slice) for r in self.results[claim_index]],
                                self.node_name)


def node_selector_of(
    claim: ResourceClaimInfo, devices: Sequence[tuple[Device, SliceInfo]], node_name: str
) -> tuple[NodeSelectorTerm, ...] | None:
    """kube's `createNodeSelector`: a node-local device, or one that binds to its node
    (`bindsToNode`), pins the claim to `node_name`; otherwise the union of the slices' (or devices')
    single-term selectors; None when available everywhere."""
    expressions: list[NodeSelectorRequirement] = []
    fields: list[NodeSelectorRequirement] = []
    for device, slice_ in devices:
        if slice_.per_device:
            name, selector = device.node_name, device.node_selector
        else:
            name, selector = slice_.node_name, slice_.node_selector
        if name or device.binds_to_node:
            return (NodeSelectorTerm((), (NodeSelectorRequirement("metadata.name", "In", (node_name,)),)),)
        if selector is not None and len(selector) == 1:
            for into, items in ((fields, selector[0].fields), (expressions, selector[0].expressions)):
                for requirement in items:
                    if not any(_same_requirement(requirement, existing) for existing in into):
                        into.append(requirement)
        elif selector is not None and len(selector) > 1:
            raise AllocationError(
                f"create NodeSelector for claim {claim.name}: unsupported "
                f"ResourceSlice.NodeSelector with {len(selector)} terms"
            )
    if expressions or fields:
        return (NodeSelectorTerm(tuple(expressions), tuple(fields)),)
    return None


def single_request_result(
    claim: ResourceClaimInfo, request: SubRequest, klass: DeviceClassInfo,
    devices: Sequence[tuple[DeviceID, Device, SliceInfo]], node_name: str,
) -> AllocationResult:
    """The result the search gives a claim of one `exactly` request when it picks `devices` (the
    first free matching ones with room for it, in order, none with binding conditions): what a
    caller that found them by counting builds directly."""
    config: list[dict[str, Any]] = [
        {"source": "FromClass", "requests": [request.name], **{k: v for k, v in entry.items() if k != "requests"}}
        for entry in klass.config
    ]
    for entry in claim.config:
        requests = list(entry.get("requests") or [])
        body = {k: v for k, v in entry.items() if k != "requests"}
        if not requests:
            config.append({"source": "FromClaim", **body})
        elif request.name in requests:
            config.append({"source": "FromClaim", "requests": requests, **body})
    results = []
    for device_id, device, _ in devices:
        share, consumed = None, None
        if device.allow_multiple_allocations:  # a share: what it consumes of each capacity
            share = ""
            consumed = {name: consumed_capacity(request.capacity.get(name), capacity)
                        for name, capacity in device.capacities.items()} or None
        results.append(AllocatedDevice(request.name, *device_id, None, request.tolerations, share, consumed))
    return AllocationResult(
        tuple(results),
        tuple(config),
        node_selector_of(claim, [(device, slice_) for _, device, slice_ in devices], node_name),
    )


def _same_requirement(a: NodeSelectorRequirement, b: NodeSelectorRequirement) -> bool:
    return a.key == b.key and a.operator == b.operator and set(a.values) == set(b.values)
