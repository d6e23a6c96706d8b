"""Dynamic Resource Allocation's kinds (`resource.k8s.io/v1`), as the allocator and the
DynamicResources plugin read them (catalog kinds: see `placer.engine.kinds`).

- `DeviceClassInfo`: a class's CEL selectors and config, and the extended resource it backs
  (`extendedResourceName`; `placer.engine.extended_resources`);
- `SliceInfo`: one ResourceSlice — a driver's devices in a pool (`pool.name`, `generation`,
  `resourceSliceCount`) and the nodes they are reachable from (`nodeName`, `nodeSelector`,
  `allNodes`, or `perDeviceNodeSelection` with each device's own); each `Device` carries its CEL
  `device` variable, built once;
- `ResourceClaimInfo`: a claim's requests (`exactly` or `firstAvailable`), constraints, config, and
  its status (`allocation`, `reservedFor`: pods, or a PodGroup for a group's claim); `pending` marks
  an allocation this scheduler assumed and has not written yet (kube's in-flight allocations),
  `pending_group` and `sharers` the group whose members share it and how many hold it;
- `ClaimTemplateInfo`: a ResourceClaimTemplate (read, and listed; the claims a pod uses are the ones
  the resourceclaim controller created from it, recorded in the pod's status).

Parsing applies the API server's defaults (`allocationMode: ExactCount`, `count: 1`) and rejects
what it would reject with an `ObjectError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from placer.engine.dra_cel import device_variable, parse_semver, semver_value
from placer.engine.fields import FieldError, mapping, section, sequence
from placer.engine.objects import NodeSelectorTerm, ObjectError, go_int
from placer.engine.parsing import object_meta, parse_node_selector_terms, parse_timestamp
from placer.engine.quantity import Quantity, QuantityError, parse_quantity, parse_quantity_with_format
from placer.engine.relations import ControllerRef, parse_controller

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "DELETE_PROTECTION",
    "EXTENDED_RESOURCE_CLAIM",
    "FIRST_AVAILABLE_MAX_SIZE",
    "POD_GROUP_API_GROUP",
    "Allocation",
    "CapacityPolicy",
    "CapacityRange",
    "ClaimTemplateInfo",
    "ConsumerRef",
    "Device",
    "DeviceCapacity",
    "DeviceClassInfo",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceResult",
    "DeviceStatus",
    "DeviceTaint",
    "DeviceToleration",
    "ResourceClaimInfo",
    "SliceInfo",
    "StatusCondition",
    "SubRequest",
    "node_selector_json",
    "parse_claim_template",
    "parse_device_class",
    "parse_resource_claim",
    "parse_resource_slice",
    "selector_matches",
]

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # kube's resourceapi.Finalizer
POD_GROUP_API_GROUP = "scheduling.k8s.io"  # a PodGroup's reservedFor entry: this apiGroup, resource podgroups
EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"  # kube's ExtendedResourceClaimAnnotation
ALLOCATION_RESULTS_MAX_SIZE = 32  # resourceapi.AllocationResultsMaxSize
FIRST_AVAILABLE_MAX_SIZE = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize
EXACT_COUNT, ALL = "ExactCount", "All"
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


def _string(item: Mapping[str, Any], key: str, path: str, required: bool = True) -> str:
    value = item.get(key)
    if value is None or value == "":
        if required:
            raise FieldError(f"{path}.{key}", "Required value")
        return ""
    if not isinstance(value, str):
        raise FieldError(f"{path}.{key}", f"must be a string, not {value!r}")
    return value


def _int(value: Any, path: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(path, f"must be an integer, not {value!r}")
    return value


def _bool(value: Any, path: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise FieldError(path, f"must be a boolean, not {value!r}")
    return value


def _quantity(value: Any, path: str) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as error:
        raise FieldError(path, str(error)) from None


def _formatted(value: Any, path: str) -> Quantity:
    """A quantity with its format (what Placer may write back: a share's consumed capacity)."""
    if value is None:
        raise FieldError(path, "Required value")
    try:
        return parse_quantity_with_format(value)
    except QuantityError as error:
        raise FieldError(path, str(error)) from None


def _strings(value: Any, path: str) -> tuple[str, ...]:
    items = sequence(value, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise FieldError(f"{path}[{i}]", f"must be a string, not {item!r}")
    return tuple(items)


def _node_selector(raw: Any, path: str) -> tuple[NodeSelectorTerm, ...] | None:
    return None if raw is None else parse_node_selector_terms(raw, path)


def selector_matches(terms: tuple[NodeSelectorTerm, ...], name: str, labels: Mapping[str, str]) -> bool:
    """kube's `nodeaffinity.NodeSelector.Match` for one node: the terms are ORed, a term's
    requirements (labels, and `metadata.name` fields) ANDed; an empty term matches nothing."""
    for term in terms:
        if not term.expressions and not term.fields:
            continue
        ok = True
        for requirement, value in [(r, labels.get(r.key)) for r in term.expressions] + [
            (r, name if r.key == "metadata.name" else None) for r in term.fields
        ]:
            operator = requirement.operator
            if operator == "In":
                ok = value is not None and value in requirement.values
            elif operator == "NotIn":
                ok = value is None or value not in requirement.values
            elif operator == "Exists":
                ok = value is not None
            elif operator == "DoesNotExist":
                ok = value is None
            else:  # Gt, Lt
                number = go_int(value) if value is not None else None
                bound = int(requirement.values[0])
                ok = number is not None and (number > bound if operator == "Gt" else number < bound)
            if not ok:
                break
        if ok:
            return True
    return False


def node_selector_json(terms: tuple[NodeSelectorTerm, ...]) -> dict[str, Any]:
    """A NodeSelector as the API writes it."""

    def requirements(items: tuple[Any, ...]) -> list[dict[str, Any]]:
        out = []
        for r in items:
            entry: dict[str, Any] = {"key": r.key, "operator": r.operator}
            if r.values:
                entry["values"] = list(r.values)
            out.append(entry)
        return out

    result = []
    for term in terms:
        entry: dict[str, Any] = {}
        if term.expressions:
            entry["matchExpressions"] = requirements(term.expressions)
        if term.fields:
            entry["matchFields"] = requirements(term.fields)
        result.append(entry)
    return {"nodeSelectorTerms": result}


# ------------------------------------------------------------------------------------ DeviceClass


def _selectors(raw: Any, path: str) -> tuple[str | None, ...]:
    """CEL expressions; None for a selector of a type this version does not know (no `cel`)."""
    out: list[str | None] = []
    for i, item in enumerate(sequence(raw, path)):
        selector = mapping(item, f"{path}[{i}]")
        if selector.get("cel") is None:
            out.append(None)
            continue
        out.append(_string(mapping(selector["cel"], f"{path}[{i}].cel"), "expression", f"{path}[{i}].cel"))
    return tuple(out)


def _configs(raw: Any, path: str) -> tuple[dict[str, Any], ...]:
    return tuple(dict(mapping(item, f"{path}[{i}]")) for i, item in enumerate(sequence(raw, path)))


@dataclass(frozen=True, slots=True, eq=True)
class DeviceClassInfo:
    name: str
    selectors: tuple[str | None, ...] = ()
    config: tuple[dict[str, Any], ...] = ()  # spec.config entries as written
    extended_resource_name: str | None = None
    resource_version: str = ""
    namespace: str = ""
    created: str = ""  # metadata.creationTimestamp (RFC 3339): the newest class wins an extendedResourceName

    __hash__ = object.__hash__


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClassInfo:
    _, name, meta = object_meta(obj, "DeviceClass", namespaced=False)
    spec = section(obj, "spec")
    try:
        extended = spec.get("extendedResourceName")
        if extended is not None and not isinstance(extended, str):
            raise FieldError("spec.extendedResourceName", f"must be a string, not {extended!r}")
        return DeviceClassInfo(
            name=name,
            selectors=_selectors(spec.get("selectors"), "spec.selectors"),
            config=_configs(spec.get("config"), "spec.config"),
            extended_resource_name=extended or None,
            resource_version=str(meta.get("resourceVersion") or ""),
            created=str(meta.get("creationTimestamp") or ""),
        )
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None


# ------------------------------------------------------------------------------------ ResourceSlice


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class CapacityRange:
    """A capacity's `requestPolicy.validRange`: what a share may consume, rounded up by `step`."""

    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's `requestPolicy` (DRAConsumableCapacity): the share taken when a request asks for
    none (`default`), and the values a share may take (`validValues` or `validRange`)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] | None = None
    valid_range: CapacityRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    """One of a device's `capacity` entries: its value (with its format) and its request policy."""

    value: Quantity
    policy: CapacityPolicy | None = None


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    # qualified name as written -> (type, value): ("int", 1), ("bool", True), ("string", "a"),
    # ("version", "1.2.3")
    attributes: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    taints: tuple[DeviceTaint, ...] = ()
    node_name: str | None = None  # per-device node selection (perDeviceNodeSelection slices)
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    consumes_counters: tuple[tuple[str, Mapping[str, Fraction]], ...] = ()  # (counter set, {name: value})
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False  # the allocation is pinned to the node it was made for
    allow_multiple_allocations: bool = False  # shared by several claims, each taking part of its capacity
    capacities: Mapping[str, DeviceCapacity] = field(default_factory=dict)  # capacity with formats and policies
    error: str | None = None  # kube's `attribute NAME: ...` for a value CEL cannot use
    cel: Mapping[str, Any] = field(default_factory=dict)  # the CEL `device` variable

    __hash__ = object.__hash__


def _attribute(raw: Any, path: str) -> tuple[str, Any]:
    item = mapping(raw, path)
    for key, kind in (("int", "int"), ("bool", "bool"), ("string", "string"), ("version", "version")):
        if item.get(key) is not None:
            value = item[key]
            if kind == "int":
                _int(value, f"{path}.int")
            elif kind == "bool":
                _bool(value, f"{path}.bool")
            elif not isinstance(value, str):
                raise FieldError(f"{path}.{key}", f"must be a string, not {value!r}")
            return kind, value
    for key in ("ints", "bools", "strings", "versions"):  # list attributes (alpha): not for CEL here
        if item.get(key) is not None:
            return "list", tuple(sequence(item[key], f"{path}.{key}"))
    return "unknown", None


def _request_policy(raw: Any, path: str) -> CapacityPolicy | None:
    if raw is None:
        return None
    item = mapping(raw, path)
    default = None if item.get("default") is None else _formatted(item["default"], f"{path}.default")
    values = None
    if item.get("validValues") is not None:
        values = tuple(_formatted(v, f"{path}.validValues[{i}]")
                       for i, v in enumerate(sequence(item["validValues"], f"{path}.validValues")))
    valid_range = None
    if item.get("validRange") is not None:
        where = f"{path}.validRange"
        bounds = mapping(item["validRange"], where)
        ends = {key: None if bounds.get(key) is None else _formatted(bounds[key], f"{where}.{key}")
                for key in ("min", "max", "step")}
        if ends["step"] is not None and ends["step"].value <= 0:
            raise FieldError(f"{where}.step", f"Invalid value: \"{ends['step']}\": must be greater than zero")
        valid_range = CapacityRange(ends["min"], ends["max"], ends["step"])
    return CapacityPolicy(default, values, valid_range)


def _cel_value(kind: str, value: Any) -> Any:
    if kind == "version":
        return semver_value(parse_semver(value))
    return value


def _device(raw: Any, path: str, driver: str, per_device: bool) -> Device:
    item = mapping(raw, path)
    name = _string(item, "name", path)
    attributes = {
        str(key): _attribute(value, f"{path}.attributes[{key}]")
        for key, value in mapping(item.get("attributes"), f"{path}.attributes").items()
    }
    capacity = {}
    capacities = {}
    for key, value in mapping(item.get("capacity"), f"{path}.capacity").items():
        where = f"{path}.capacity[{key}]"
        entry = mapping(value, where)
        quantity = _formatted(entry.get("value"), f"{where}.value")
        capacity[str(key)] = quantity.value
        capacities[str(key)] = DeviceCapacity(quantity, _request_policy(entry.get("requestPolicy"),
                                                                        f"{where}.requestPolicy"))
    taints = []
    for i, raw_taint in enumerate(sequence(item.get("taints"), f"{path}.taints")):
        taint = mapping(raw_taint, f"{path}.taints[{i}]")
        effect = _string(taint, "effect", f"{path}.taints[{i}]")
        taints.append(DeviceTaint(_string(taint, "key", f"{path}.taints[{i}]"),
                                  _string(taint, "value", f"{path}.taints[{i}]", required=False), effect))
    counters = []
    for i, raw_consumption in enumerate(sequence(item.get("consumesCounters"), f"{path}.consumesCounters")):
        consumption = mapping(raw_consumption, f"{path}.consumesCounters[{i}]")
        set_name = _string(consumption, "counterSet", f"{path}.consumesCounters[{i}]")
        values = {
            str(k): _quantity(mapping(v, f"{path}.consumesCounters[{i}].counters[{k}]").get("value"),
                              f"{path}.consumesCounters[{i}].counters[{k}].value")
            for k, v in mapping(consumption.get("counters"), f"{path}.consumesCounters[{i}].counters").items()
        }
        counters.append((set_name, values))
    cel_attributes: dict[str, Any] = {}
    error = None
    for key, (kind, value) in attributes.items():
        if kind in ("list", "unknown"):
            error = error or f"attribute {key}: unsupported attribute value"
            continue
        try:
            cel_attributes[key] = _cel_value(kind, value)
        except ValueError as problem:
            error = error or f"attribute {key}: parse semantic version: {problem}"
    multiple = _bool(item.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations") or False
    node_name = _string(item, "nodeName", path, required=False) or None
    node_selector = _node_selector(item.get("nodeSelector"), f"{path}.nodeSelector")
    all_nodes = _bool(item.get("allNodes"), f"{path}.allNodes") or False
    if per_device and node_name is None and node_selector is None and not all_nodes:
        raise FieldError(path, "exactly one of nodeName, nodeSelector or allNodes is required "
                               "when perDeviceNodeSelection is set")
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        taints=tuple(taints),
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        consumes_counters=tuple(counters),
        binding_conditions=_strings(item.get("bindingConditions"), f"{path}.bindingConditions"),
        binding_failure_conditions=_strings(item.get("bindingFailureConditions"), f"{path}.bindingFailureConditions"),
        binds_to_node=_bool(item.get("bindsToNode"), f"{path}.bindsToNode") or False,
        allow_multiple_allocations=multiple,
        capacities=capacities,
        error=error,
        cel=device_variable(driver, cel_attributes, capacity, multiple),
    )


@dataclass(frozen=True, slots=True)
class SliceInfo:
    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str | None = None
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device: bool = False  # perDeviceNodeSelection: each device says where it is reachable
    devices: tuple[Device, ...] = ()
    shared_counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    resource_version: str = ""
    namespace: str = ""

    __hash__ = object.__hash__


def parse_resource_slice(obj: Mapping[str, Any]) -> SliceInfo:
    _, name, meta = object_meta(obj, "ResourceSlice", namespaced=False)
    spec = section(obj, "spec")
    try:
        driver = _string(spec, "driver", "spec")
        pool = mapping(spec.get("pool"), "spec.pool")
        pool_name = _string(pool, "name", "spec.pool")
        per_device = _bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection") or False
        counters: dict[str, dict[str, Fraction]] = {}
        for i, raw in enumerate(sequence(spec.get("sharedCounters"), "spec.sharedCounters")):
            counter_set = mapping(raw, f"spec.sharedCounters[{i}]")
            set_name = _string(counter_set, "name", f"spec.sharedCounters[{i}]")
            counters[set_name] = {
                str(k): _quantity(mapping(v, f"spec.sharedCounters[{i}].counters[{k}]").get("value"),
                                  f"spec.sharedCounters[{i}].counters[{k}].value")
                for k, v in mapping(counter_set.get("counters"), f"spec.sharedCounters[{i}].counters").items()
            }
        devices = tuple(
            _device(raw, f"spec.devices[{i}]", driver, per_device)
            for i, raw in enumerate(sequence(spec.get("devices"), "spec.devices"))
        )
        return SliceInfo(
            name=name,
            driver=driver,
            pool=pool_name,
            generation=_int(pool.get("generation"), "spec.pool.generation"),
            slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1),
            node_name=_string(spec, "nodeName", "spec", required=False) or None,
            node_selector=_node_selector(spec.get("nodeSelector"), "spec.nodeSelector"),
            all_nodes=_bool(spec.get("allNodes"), "spec.allNodes") or False,
            per_device=per_device,
            devices=devices,
            shared_counters=counters,
            resource_version=str(meta.get("resourceVersion") or ""),
        )
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None


# ------------------------------------------------------------------------------------ ResourceClaim


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """kube's `resourceclaim.ToleratesTaint`."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        return out


@dataclass(frozen=True, slots=True)
class SubRequest:
    """An `exactly` request (name: the request's) or one `firstAvailable` alternative."""

    name: str
    device_class: str
    selectors: tuple[str | None, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None  # exactly only
    tolerations: tuple[DeviceToleration, ...] = ()
    #: `capacity.requests` (DRAConsumableCapacity): what to take of a shared device's capacities
    capacity: Mapping[str, Quantity] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: SubRequest | None = None
    first_available: tuple[SubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    share_id: str | None = None  # a share of a device with allowMultipleAllocations
    consumed_capacity: Mapping[str, Quantity] | None = None  # what that share takes of its capacities
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def id(self) -> tuple[str, str, str]:
        return self.driver, self.pool, self.device


@dataclass(frozen=True, slots=True, eq=True)
class Allocation:
    results: tuple[DeviceResult, ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)  # status.allocation as the API writes it
    #: `allocationTimestamp` (seconds since the epoch), which the binding conditions' timeout counts from
    timestamp: float | None = None

    __hash__ = object.__hash__

    @property
    def binding_conditions(self) -> bool:
        """Whether some device of it must be prepared before the pod binds (kube's `hasBindingConditions`)."""
        return any(r.binding_conditions for r in self.results)


@dataclass(frozen=True, slots=True)
class StatusCondition:
    """A `metav1.Condition` of a claim's `status.devices[]`, as a driver reports it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    since: str = ""  # lastTransitionTime


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    """One entry of a claim's `status.devices` (what the driver says about an allocated device)."""

    driver: str
    pool: str
    device: str
    share_id: str | None = None
    conditions: tuple[StatusCondition, ...] = ()

    def condition(self, kind: str) -> StatusCondition | None:
        """apimeta's `FindStatusCondition`."""
        return next((c for c in self.conditions if c.type == kind), None)


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    """One `status.reservedFor` entry (kube's ResourceClaimConsumerReference): a pod
    (`resource: pods`, no apiGroup) or, for a PodGroup's claim, the PodGroup (`apiGroup:
    scheduling.k8s.io`, `resource: podgroups`)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""

    @property
    def pod_group(self) -> bool:
        return self.api_group == POD_GROUP_API_GROUP and self.resource == "podgroups"

    def same(self, other: ConsumerRef) -> bool:
        """kube's `IsReservedForPod`: the same UID; or, for a PodGroup, the same group, resource and
        name (a pod does not know its group's UID)."""
        if self.uid and self.uid == other.uid:
            return True
        return self.pod_group and other.pod_group and self.name == other.name

    def as_json(self) -> dict[str, str]:
        out = {"resource": self.resource, "name": self.name, "uid": self.uid}
        if self.api_group:
            out = {"apiGroup": self.api_group, **out}
        return out


@dataclass(frozen=True, slots=True, eq=True)
class ResourceClaimInfo:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    controller: ControllerRef | None = None
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint | None, ...] = ()  # None: a constraint of an unknown type
    config: tuple[dict[str, Any], ...] = ()  # spec.devices.config entries as written
    allocation: Allocation | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()
    pending: bool = False  # allocated by this scheduler (assumed), not written yet
    status: Mapping[str, Any] = field(default_factory=dict)  # `status` as read (a PreBind's precondition)
    #: annotated `resource.kubernetes.io/extended-resource-claim: "true"`: the claim kube-scheduler
    #: (or Placer) creates for a pod's extended resources backed by a DeviceClass
    extended: bool = False
    #: a pending allocation made by a pod of a group: the group ("KIND:NS/NAME") whose members share
    #: it, and how many of them hold it (kube's in-flight allocation sharers); "" and 0 otherwise
    pending_group: str = ""
    sharers: int = 0
    devices: tuple[DeviceStatus, ...] = ()  # status.devices

    __hash__ = object.__hash__

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def device_status(self, result: DeviceResult) -> DeviceStatus | None:
        """kube's `getAllocatedDeviceStatus`: the status entry of an allocated device (by driver,
        pool and device)."""
        return next((d for d in self.devices
                     if d.driver == result.driver and d.pool == result.pool and d.device == result.device), None)

    def is_reserved_for(self, consumer: ConsumerRef) -> bool:
        """Whether `status.reservedFor` lists the consumer (kube's `IsReservedForPod`)."""
        return any(consumer.same(ref) for ref in self.reserved_for)

    def outlasts(self, server: Any) -> bool:
        """As an assumption in the catalog: an allocation this scheduler made and has not written
        yet holds against the API server's copies of the same claim that show no allocation (the
        finalizer PreBind writes first, or the copy a claim this scheduler creates has before its
        status is written), until the allocation lands, the claim goes or the binding fails
        (Unreserve restores the server's copy) — kube's in-flight allocations."""
        return (self.pending and self.allocation is not None and isinstance(server, ResourceClaimInfo)
                and (server.uid == self.uid or not self.uid) and server.allocation is None
                and not server.deleting)


def _tolerations(raw: Any, path: str) -> tuple[DeviceToleration, ...]:
    out = []
    for i, item in enumerate(sequence(raw, path)):
        toleration = mapping(item, f"{path}[{i}]")
        operator = _string(toleration, "operator", f"{path}[{i}]", required=False) or "Equal"
        if operator not in ("Equal", "Exists"):
            raise FieldError(f"{path}[{i}].operator", f'Unsupported value: "{operator}": '
                                                      'supported values: "Equal", "Exists"')
        out.append(DeviceToleration(
            _string(toleration, "key", f"{path}[{i}]", required=False), operator,
            _string(toleration, "value", f"{path}[{i}]", required=False),
            _string(toleration, "effect", f"{path}[{i}]", required=False),
        ))
    return tuple(out)


def _sub_request(item: Mapping[str, Any], name: str, path: str, exact: bool) -> SubRequest:
    mode = _string(item, "allocationMode", path, required=False) or EXACT_COUNT
    count = _int(item.get("count"), f"{path}.count", 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count <= 0:
        raise FieldError(f"{path}.count", f"Invalid value: {count}: must be greater than zero")
    return SubRequest(
        name=name,
        device_class=_string(item, "deviceClassName", path, required=False),
        selectors=_selectors(item.get("selectors"), f"{path}.selectors"),
        mode=mode,
        count=count,
        admin_access=_bool(item.get("adminAccess"), f"{path}.adminAccess") if exact else None,
        tolerations=_tolerations(item.get("tolerations"), f"{path}.tolerations"),
        capacity=_capacity_requests(item.get("capacity"), f"{path}.capacity"),
    )


def _capacity_requests(raw: Any, path: str) -> Mapping[str, Quantity]:
    if raw is None:
        return {}
    requests = mapping(mapping(raw, path).get("requests"), f"{path}.requests")
    return {str(name): _formatted(value, f"{path}.requests[{name}]") for name, value in requests.items()}


def _allocation(raw: Any, path: str) -> Allocation:
    item = mapping(raw, path)
    results = []
    devices = mapping(item.get("devices"), f"{path}.devices")
    for i, entry in enumerate(sequence(devices.get("results"), f"{path}.devices.results")):
        result = mapping(entry, f"{path}.devices.results[{i}]")
        where = f"{path}.devices.results[{i}]"
        consumed = None
        if result.get("consumedCapacity") is not None:
            consumed = {str(k): _formatted(v, f"{where}.consumedCapacity[{k}]")
                        for k, v in mapping(result["consumedCapacity"], f"{where}.consumedCapacity").items()}
        results.append(DeviceResult(
            _string(result, "request", where), _string(result, "driver", where),
            _string(result, "pool", where), _string(result, "device", where),
            _bool(result.get("adminAccess"), f"{where}.adminAccess"),
            _string(result, "shareID", where, required=False) or None, consumed,
            _strings(result.get("bindingConditions"), f"{where}.bindingConditions"),
            _strings(result.get("bindingFailureConditions"), f"{where}.bindingFailureConditions"),
        ))
    stamp = item.get("allocationTimestamp")
    timestamp = parse_timestamp(stamp) if isinstance(stamp, str) and stamp else None
    return Allocation(tuple(results), _node_selector(item.get("nodeSelector"), f"{path}.nodeSelector"), dict(item),
                      timestamp or None)


def _device_statuses(raw: Any, path: str) -> tuple[DeviceStatus, ...]:
    out = []
    for i, entry in enumerate(sequence(raw, path)):
        where = f"{path}[{i}]"
        item = mapping(entry, where)
        conditions = []
        for j, raw_condition in enumerate(sequence(item.get("conditions"), f"{where}.conditions")):
            condition = mapping(raw_condition, f"{where}.conditions[{j}]")
            conditions.append(StatusCondition(
                str(condition.get("type") or ""), str(condition.get("status") or ""),
                str(condition.get("reason") or ""), str(condition.get("message") or ""),
                str(condition.get("lastTransitionTime") or ""),
            ))
        out.append(DeviceStatus(_string(item, "driver", where), _string(item, "pool", where),
                                _string(item, "device", where), _string(item, "shareID", where, required=False) or None,
                                tuple(conditions)))
    return tuple(out)


def parse_claim_spec(spec: Mapping[str, Any], path: str) -> tuple[
    tuple[DeviceRequest, ...], tuple[DeviceConstraint | None, ...], tuple[dict[str, Any], ...]
]:
    devices = mapping(spec.get("devices"), f"{path}.devices")
    requests = []
    for i, raw in enumerate(sequence(devices.get("requests"), f"{path}.devices.requests")):
        where = f"{path}.devices.requests[{i}]"
        item = mapping(raw, where)
        name = _string(item, "name", where)
        exactly = None
        if item.get("exactly") is not None:
            exactly = _sub_request(mapping(item["exactly"], f"{where}.exactly"), name, f"{where}.exactly", True)
        alternatives = []
        for j, sub in enumerate(sequence(item.get("firstAvailable"), f"{where}.firstAvailable")):
            sub_path = f"{where}.firstAvailable[{j}]"
            sub_item = mapping(sub, sub_path)
            alternatives.append(_sub_request(sub_item, _string(sub_item, "name", sub_path), sub_path, False))
        requests.append(DeviceRequest(name, exactly, tuple(alternatives)))
    constraints: list[DeviceConstraint | None] = []
    for i, raw in enumerate(sequence(devices.get("constraints"), f"{path}.devices.constraints")):
        where = f"{path}.devices.constraints[{i}]"
        item = mapping(raw, where)
        match = _string(item, "matchAttribute", where, required=False) or None
        distinct = _string(item, "distinctAttribute", where, required=False) or None
        if match is None and distinct is None:
            constraints.append(None)
            continue
        constraints.append(DeviceConstraint(_strings(item.get("requests"), f"{where}.requests"), match, distinct))
    return tuple(requests), tuple(constraints), _configs(devices.get("config"), f"{path}.devices.config")


def parse_resource_claim(obj: Mapping[str, Any]) -> ResourceClaimInfo:
    namespace, name, meta = object_meta(obj, "ResourceClaim", namespaced=True)
    spec, status = section(obj, "spec"), section(obj, "status")
    try:
        requests, constraints, config = parse_claim_spec(spec, "spec")
        for i, ref in enumerate(sequence(meta.get("ownerReferences"), "metadata.ownerReferences")):
            mapping(ref, f"metadata.ownerReferences[{i}]")
        controller = parse_controller(meta)
        reserved = []
        for i, raw in enumerate(sequence(status.get("reservedFor"), "status.reservedFor")):
            ref = mapping(raw, f"status.reservedFor[{i}]")
            reserved.append(ConsumerRef(str(ref.get("resource") or ""), str(ref.get("name") or ""),
                                        str(ref.get("uid") or ""), str(ref.get("apiGroup") or "")))
        raw_allocation = status.get("allocation")
        allocation = None if raw_allocation is None else _allocation(raw_allocation, "status.allocation")
        return ResourceClaimInfo(
            namespace=namespace,
            name=name,
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            finalizers=_strings(meta.get("finalizers"), "metadata.finalizers"),
            controller=controller,
            requests=requests,
            constraints=constraints,
            config=config,
            allocation=allocation,
            reserved_for=tuple(reserved),
            status=dict(status),
            devices=_device_statuses(status.get("devices"), "status.devices"),
            extended=(meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM) == "true"
            if isinstance(meta.get("annotations"), Mapping) else False,
        )
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None


@dataclass(frozen=True, slots=True, eq=True)
class ClaimTemplateInfo:
    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint | None, ...] = ()
    resource_version: str = ""

    __hash__ = object.__hash__


def parse_claim_template(obj: Mapping[str, Any]) -> ClaimTemplateInfo:
    namespace, name, meta = object_meta(obj, "ResourceClaimTemplate", namespaced=True)
    spec = section(obj, "spec")
    try:
        requests, constraints, _ = parse_claim_spec(mapping(spec.get("spec"), "spec.spec"), "spec.spec")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return ClaimTemplateInfo(namespace, name, requests, constraints, str(meta.get("resourceVersion") or ""))
