"""Pods and nodes as the engine sees them: parsed once from Kubernetes JSON, immutable after.

Parsing does all per-object work up front (requests summed the way kube-scheduler sums them,
selectors and tolerations validated, images normalised), so that a scheduling cycle only
compares prepared values. A structurally broken object (not a mapping, no name) raises
`ObjectError`; a pod whose spec is merely invalid (a bad quantity, an unknown operator) is
still returned, with `error` set, so that it fails scheduling with that reason instead of
crashing anything.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from placer.engine.fields import FieldError, is_mapping, mapping, section, sequence
from placer.engine.quantity import QuantityError, to_milli, to_units
from placer.engine.relations import (
    NONE,
    ControllerRef,
    PodRelations,
    SpreadConstraint,
    parse_controller,
    parse_pod_affinity,
    parse_spread_constraints,
)
from placer.engine.volumes import NO_VOLUMES, PodVolumes, parse_pod_volumes

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NodeInfo",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectError",
    "PodInfo",
    "Taint",
    "Toleration",
    "object_meta",
    "parse_node",
    "parse_node_metrics",
    "parse_node_selector_terms",
    "parse_pod",
    "pod_key",
]

# kube-scheduler scores a container without cpu/memory requests as if it asked for these.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SUPPORTED_EFFECTS = 'supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"'
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")


_GO_INT = re.compile(r"^[+-]?[0-9]+$")


def go_int(value: str) -> int | None:
    """A label value as Go's `strconv.ParseInt(v, 10, 64)` reads it for Gt/Lt; None if it cannot."""
    if not _GO_INT.match(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


class ObjectError(ValueError):
    """An object the engine cannot use at all; `path` names the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """kube's `Toleration.ToleratesTaint`."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One requirement, validated; matched against node columns in `placer.plugins._selectors`."""

    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...]


@dataclass(slots=True)
class PodInfo:
    """What scheduling needs of a pod; `requests` hold cpu in millicores, the rest in units."""

    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    priority: int = 0
    # spec.priority was given (the API server's admission always sets it; a hand-written pod may
    # name only a PriorityClass, resolved by `placer.engine.kinds.resolve_priority`)
    priority_set: bool = False
    priority_class_name: str = ""
    preemption_policy: str = ""  # PreemptLowerPriority, Never, or "" (unset: its PriorityClass's, else preempts)
    start_time: float = 0.0  # status.startTime (0: not started), for preemption's choice of node
    nominated_node: str = ""  # status.nominatedNodeName
    created: float = 0.0
    phase: str = ""
    deleting: bool = False
    requests: dict[str, int] = field(default_factory=dict)
    # cpu and memory with kube-scheduler's defaults for containers that request none
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    host_ports: tuple[tuple[str, str, int], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    images: tuple[str, ...] = ()
    container_count: int = 0
    # inter-pod (anti-)affinity terms (placer.engine.relations), NONE for pods without any
    relations: PodRelations = NONE
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    controller: ControllerRef | None = None
    # claims, inline disks and inline CSI volumes (placer.engine.volumes), NO_VOLUMES for most pods
    volumes: PodVolumes = NO_VOLUMES
    error: str | None = None
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Succeeded and Failed pods hold no resources, as in kube-scheduler's cache."""
        return self.phase in ("Succeeded", "Failed")


@dataclass(slots=True)
class NodeInfo:
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = False
    allocatable: dict[str, int] = field(default_factory=dict)
    # (names, sizeBytes) for each image in status.images
    images: tuple[tuple[tuple[str, ...], int], ...] = ()
    # metadata.annotations, for plugins that read them (plugin packages): a copy of the object's
    # map, compared with the rest, so an annotation change is a node update as in kube-scheduler
    annotations: dict[str, str] = field(default_factory=dict)


def object_meta(obj: Mapping[str, Any], kind: str, namespaced: bool) -> tuple[str, str, Mapping[str, Any]]:
    """(namespace, name, metadata) of a catalog object, checked as the API server would; the
    namespace is "" for cluster-scoped kinds and defaults to "default" for namespaced ones."""
    if not isinstance(obj, Mapping):
        raise ObjectError("", f"a {kind} must be an object, not {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ObjectError("metadata", f"a {kind} needs metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name", "Required value")
    namespace = (meta.get("namespace") or "default") if namespaced else ""
    if not isinstance(namespace, str):
        raise ObjectError("metadata.namespace", "must be a string")
    return namespace, name, meta


def pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _string_map(value: Any, path: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, item in mapping(value, path).items():
        if not isinstance(item, str):
            raise FieldError(f"{path}.{key}", f"must be a string, not {type(item).__name__}")
        result[str(key)] = item
    return result


def is_scalar_resource(name: str) -> bool:
    """Extended resources and huge pages: what kube's NodeInfo keeps as ScalarResources."""
    return "/" in name or name.startswith("hugepages-")


# The node table keeps amounts in int64 columns (as kube-scheduler keeps them in int64).
MAX_AMOUNT = 2**63 - 1


def _resource_amount(name: str, quantity: Any, path: str) -> int:
    try:
        amount = to_milli(quantity) if name == "cpu" else to_units(quantity)
    except QuantityError as error:
        raise FieldError(path, str(error)) from None
    if amount > MAX_AMOUNT:
        unit = " millicores" if name == "cpu" else ""
        raise FieldError(path, f"Invalid value: {quantity!r}: must be less than 2^63{unit}")
    return amount


def _resource_list(value: Any, path: str) -> dict[str, int]:
    result: dict[str, int] = {}
    if value is None:
        return result
    for name, quantity in mapping(value, path).items():
        if name in ("cpu", "memory", "ephemeral-storage", "pods") or is_scalar_resource(name):
            amount = _resource_amount(name, quantity, f"{path}.{name}")
            if amount < 0:
                raise FieldError(f"{path}.{name}", "must be greater than or equal to 0")
            result[name] = amount
    return result


def _container_requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    resources = mapping(container.get("resources"), f"{path}.resources")
    requests = _resource_list(resources.get("requests"), f"{path}.resources.requests")
    limits = resources.get("limits")
    if limits is None:
        return requests
    # The API server defaults a missing request to its limit; do the same for hand-written pods.
    for name, amount in _resource_list(limits, f"{path}.resources.limits").items():
        requests.setdefault(name, amount)
    return requests


def _add(total: dict[str, int], extra: Mapping[str, int]) -> None:
    for name, amount in extra.items():
        total[name] = total.get(name, 0) + amount


def _maximise(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


def _pod_requests(
    containers: list[dict[str, int]],
    init_containers: list[tuple[dict[str, int], bool]],
    overhead: Mapping[str, int],
) -> dict[str, int]:
    """kube's `resourcehelper.PodRequests`: containers, then init containers (sidecars), overhead."""
    total: dict[str, int] = {}
    for requests in containers:
        _add(total, requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for requests, restartable in init_containers:
        if restartable:
            _add(total, requests)
            _add(sidecars, requests)
            effective = dict(sidecars)
        else:
            effective = dict(requests)
            _add(effective, sidecars)
        _maximise(init_peak, effective)
    _maximise(total, init_peak)
    _add(total, overhead)
    return total


def _host_ports(container: Mapping[str, Any], path: str) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of a container's ports that take a port of the node."""
    ports: list[tuple[str, str, int]] = []
    raw_ports = container.get("ports")
    if raw_ports is None:
        return ports
    for j, raw_port in enumerate(sequence(raw_ports, f"{path}.ports")):
        port = mapping(raw_port, f"{path}.ports[{j}]")
        host_port = port.get("hostPort") or 0
        if isinstance(host_port, bool) or not isinstance(host_port, int) or not 0 <= host_port <= 65535:
            raise FieldError(
                f"{path}.ports[{j}].hostPort", f"Invalid value: {host_port!r}: must be between 1 and 65535"
            )
        if host_port:
            ports.append((str(port.get("hostIP") or "0.0.0.0"), str(port.get("protocol") or "TCP"), host_port))
    return ports


def _with_defaults(requests: dict[str, int]) -> dict[str, int]:
    result = dict(requests)
    result.setdefault("cpu", DEFAULT_MILLI_CPU_REQUEST)
    result.setdefault("memory", DEFAULT_MEMORY_REQUEST)
    return result


def _requirement(raw: Any, path: str, operators: tuple[str, ...]) -> NodeSelectorRequirement:
    item = mapping(raw, path)
    key = item.get("key")
    if not isinstance(key, str) or not key:
        raise FieldError(f"{path}.key", "Required value")
    operator = item.get("operator")
    if operator not in operators:
        raise FieldError(
            f"{path}.operator",
            f'Unsupported value: "{operator}": supported values: '
            + ", ".join(f'"{op}"' for op in operators),
        )
    values = tuple(str(v) for v in sequence(item.get("values"), f"{path}.values"))
    if operator in ("In", "NotIn") and not values:
        raise FieldError(f"{path}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(
            f"{path}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise FieldError(
                f"{path}.values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        if go_int(values[0]) is None:
            raise FieldError(f"{path}.values[0]", f'Invalid value: "{values[0]}": must be an integer') from None
    if path.rsplit(".", 1)[-1].startswith("matchFields") and key != "metadata.name":
        raise FieldError(f"{path}.key", f'Invalid value: "{key}": must be metadata.name')
    return NodeSelectorRequirement(key, operator, values)


def _term(raw: Any, path: str) -> NodeSelectorTerm:
    item = mapping(raw, path)
    expressions = tuple(
        _requirement(req, f"{path}.matchExpressions[{i}]", SELECTOR_OPERATORS)
        for i, req in enumerate(sequence(item.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    fields = tuple(
        _requirement(req, f"{path}.matchFields[{i}]", FIELD_OPERATORS)
        for i, req in enumerate(sequence(item.get("matchFields"), f"{path}.matchFields"))
    )
    return NodeSelectorTerm(expressions, fields)


def parse_node_selector_terms(raw: Any, path: str) -> tuple[NodeSelectorTerm, ...]:
    """A NodeSelector's `nodeSelectorTerms` (a PV's node affinity reads the same way); FieldError."""
    terms = sequence(mapping(raw, path).get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")
    return tuple(_term(t, f"{path}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))


def _node_affinity(spec: Mapping[str, Any]) -> tuple[
    tuple[NodeSelectorTerm, ...] | None, tuple[tuple[int, NodeSelectorTerm], ...]
]:
    path = "spec.affinity.nodeAffinity"
    raw_affinity = spec.get("affinity")
    if raw_affinity is None:
        return None, ()
    affinity = mapping(mapping(raw_affinity, "spec.affinity").get("nodeAffinity"), path)
    required: tuple[NodeSelectorTerm, ...] | None = None
    req_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    raw_required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        required = parse_node_selector_terms(raw_required, req_path)
    preferred: list[tuple[int, NodeSelectorTerm]] = []
    pref_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(sequence(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)):
        item = mapping(raw, f"{pref_path}[{i}]")
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise FieldError(f"{pref_path}[{i}].weight", f"Invalid value: {weight!r}: must be in the range 1-100")
        preferred.append((weight, _term(item.get("preference"), f"{pref_path}[{i}].preference")))
    return required, tuple(preferred)


def _toleration(raw: Any, path: str) -> Toleration:
    item = mapping(raw, path)
    key = item.get("key") or ""
    operator = item.get("operator") or "Equal"
    value = item.get("value") or ""
    effect = item.get("effect") or ""
    if not isinstance(key, str) or not isinstance(value, str):
        raise FieldError(path, "key and value must be strings")
    if operator not in ("Equal", "Exists"):
        raise FieldError(f"{path}.operator", f'Unsupported value: "{operator}": supported values: "Equal", "Exists"')
    if operator == "Exists" and value:
        raise FieldError(f"{path}.operator", "Invalid value: value must be empty when `operator` is 'Exists'")
    if not key and operator != "Exists":
        raise FieldError(f"{path}.operator", "Invalid value: operator must be Exists when `key` is empty")
    if effect and effect not in TAINT_EFFECTS:
        raise FieldError(f"{path}.effect", f'Unsupported value: "{effect}": {SUPPORTED_EFFECTS}')
    return Toleration(key, operator, value, effect)


def _normalized_image(name: str) -> str:
    """kube's ImageLocality normalisation: an image without a tag means `:latest`."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def parse_timestamp(value: Any) -> float:
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _metadata(obj: Any, kind: str) -> Mapping[str, Any]:
    if not is_mapping(obj):
        raise ObjectError("", f"a {kind} must be an object, not {type(obj).__name__}")
    meta = obj.get("metadata")
    if not is_mapping(meta):
        raise ObjectError("metadata", f"a {kind} needs metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name", "Required value")
    return meta


def parse_pod(obj: Mapping[str, Any]) -> PodInfo:
    """Build a PodInfo; raise ObjectError only when the pod has no usable identity."""
    meta = _metadata(obj, "Pod")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ObjectError("metadata.namespace", "must be a string")
    spec = section(obj, "spec")
    status = section(obj, "status")
    scheduler_name = spec.get("schedulerName") or "default-scheduler"
    node_name = spec.get("nodeName") or ""
    pod = PodInfo(
        namespace=namespace,
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        scheduler_name=scheduler_name if isinstance(scheduler_name, str) else "",
        node_name=node_name if isinstance(node_name, str) else "",
        created=parse_timestamp(meta.get("creationTimestamp")),
        phase=str(status.get("phase") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        start_time=parse_timestamp(status.get("startTime")),
        nominated_node=str(status.get("nominatedNodeName") or ""),
    )
    try:
        _fill_pod(pod, meta, spec)
    except FieldError as error:
        pod.error = f"invalid pod {pod.key}: {error}"
    return pod


def _fill_pod(pod: PodInfo, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    pod.labels = _string_map(meta.get("labels"), "metadata.labels")
    priority = spec.get("priority")
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise FieldError("spec.priority", f"must be an integer, not {priority!r}")
        pod.priority = priority
        pod.priority_set = True
    class_name = spec.get("priorityClassName")
    if class_name is not None:
        if not isinstance(class_name, str):
            raise FieldError("spec.priorityClassName", f"must be a string, not {class_name!r}")
        pod.priority_class_name = class_name
    policy = spec.get("preemptionPolicy")
    if policy is not None:
        if policy not in ("PreemptLowerPriority", "Never"):
            supported = 'supported values: "Never", "PreemptLowerPriority"'
            raise FieldError("spec.preemptionPolicy", f'Unsupported value: "{policy}": {supported}')
        pod.preemption_policy = policy
    containers = sequence(spec.get("containers"), "spec.containers")
    init_containers = sequence(spec.get("initContainers"), "spec.initContainers")
    container_requests: list[dict[str, int]] = []
    container_nonzero: list[dict[str, int]] = []
    images: list[str] = []
    ports: list[tuple[str, str, int]] = []
    init_requests: list[tuple[dict[str, int], bool]] = []
    for i, raw in enumerate(init_containers):
        path = f"spec.initContainers[{i}]"
        container = mapping(raw, path)
        restartable = container.get("restartPolicy") == "Always"
        init_requests.append((_container_requests(container, path), restartable))
        if isinstance(container.get("image"), str):
            images.append(_normalized_image(container["image"]))
        if restartable:  # a sidecar holds its host ports for the pod's whole life, as kube counts them
            ports.extend(_host_ports(container, path))
    for i, raw in enumerate(containers):
        path = f"spec.containers[{i}]"
        container = mapping(raw, path)
        requests = _container_requests(container, path)
        container_requests.append(requests)
        container_nonzero.append(_with_defaults(requests))
        if isinstance(container.get("image"), str):
            images.append(_normalized_image(container["image"]))
        ports.extend(_host_ports(container, path))
    overhead = _resource_list(spec.get("overhead"), "spec.overhead")
    # the usual pod, one container and nothing else, sums to that container's (fresh) dicts
    single = len(container_requests) == 1 and not init_requests and not overhead
    pod.requests = container_requests[0] if single else _pod_requests(container_requests, init_requests, overhead)
    pod.requests.pop("pods", None)
    for name, amount in pod.requests.items():
        if amount > MAX_AMOUNT:
            raise FieldError("spec", f"the pod's total {name} request is too large: must be less than 2^63")
    # kube applies the 100m/200Mi defaults to init containers and sidecars too (NonMissingContainerRequests)
    if single:
        nonzero = container_nonzero[0]
    else:
        init_nonzero = [(_with_defaults(requests), restartable) for requests, restartable in init_requests]
        nonzero = _pod_requests(container_nonzero, init_nonzero, overhead)
    pod.nonzero_cpu = nonzero.get("cpu", 0)
    pod.nonzero_memory = nonzero.get("memory", 0)
    pod.images = tuple(images)
    pod.container_count = len(containers) + len(init_containers)
    pod.host_ports = tuple(ports)
    raw_tolerations = spec.get("tolerations")
    if raw_tolerations is not None:
        pod.tolerations = tuple(
            _toleration(t, f"spec.tolerations[{i}]")
            for i, t in enumerate(sequence(raw_tolerations, "spec.tolerations"))
        )
    pod.node_selector = _string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    pod.required_terms, pod.preferred_terms = _node_affinity(spec)
    affinity = mapping(spec.get("affinity"), "spec.affinity")
    if affinity:
        pod.relations = parse_pod_affinity(affinity, pod.namespace, pod.labels)
    if spec.get("topologySpreadConstraints") is not None:
        pod.spread_constraints = parse_spread_constraints(spec["topologySpreadConstraints"], pod.labels)
    if meta.get("ownerReferences"):
        pod.controller = parse_controller(meta)
    if spec.get("volumes"):
        pod.volumes = parse_pod_volumes(spec["volumes"], pod.namespace, pod.name)


def _node_ready(status: Mapping[str, Any]) -> bool:
    for condition in status.get("conditions") or []:
        if is_mapping(condition) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    """Build a NodeInfo; raise ObjectError naming the field when the node is unusable."""
    meta = _metadata(obj, "Node")
    spec = section(obj, "spec")
    status = section(obj, "status")
    try:
        labels = _string_map(meta.get("labels"), "metadata.labels")
        annotations = _string_map(meta.get("annotations"), "metadata.annotations")
        # Real nodes always report allocatable; hand-written ones may give only capacity.
        raw_allocatable = status.get("allocatable")
        if raw_allocatable is None:
            raw_allocatable = status.get("capacity")
        allocatable = _resource_list(raw_allocatable, "status.allocatable")
        taints = []
        for i, raw in enumerate(sequence(spec.get("taints"), "spec.taints")):
            item = mapping(raw, f"spec.taints[{i}]")
            key = item.get("key")
            if not isinstance(key, str) or not key:
                raise FieldError(f"spec.taints[{i}].key", "Required value")
            effect = item.get("effect")
            if effect not in TAINT_EFFECTS:
                raise FieldError(f"spec.taints[{i}].effect", f'Unsupported value: "{effect}": {SUPPORTED_EFFECTS}')
            taints.append(Taint(key, str(item.get("value") or ""), effect))
        images = []
        for i, raw in enumerate(sequence(status.get("images"), "status.images")):
            item = mapping(raw, f"status.images[{i}]")
            names = tuple(str(n) for n in sequence(item.get("names"), f"status.images[{i}].names"))
            size = item.get("sizeBytes") or 0
            if isinstance(size, bool) or not isinstance(size, int):
                raise FieldError(f"status.images[{i}].sizeBytes", "must be an integer")
            images.append((names, size))
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return NodeInfo(
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        labels=labels,
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=_node_ready(status),
        allocatable=allocatable,
        images=tuple(images),
        annotations=annotations,
    )


def parse_node_metrics(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """A metrics.k8s.io NodeMetrics: (node name, usage with cpu in millicores)."""
    meta = _metadata(obj, "NodeMetrics")
    try:
        usage = _resource_list(obj.get("usage"), "usage")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return meta["name"], usage
