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

from placer.engine.quantity import QuantityError, to_milli, to_units

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
    "parse_node",
    "parse_node_metrics",
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


class _SpecError(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
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


def pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _SpecError(path, f"must be an object, not {type(value).__name__}")
    return value


def _sequence(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _SpecError(path, f"must be a list, not {type(value).__name__}")
    return value


def _string_map(value: Any, path: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, item in _mapping(value, path).items():
        if not isinstance(item, str):
            raise _SpecError(f"{path}.{key}", f"must be a string, not {type(item).__name__}")
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
        raise _SpecError(path, str(error)) from None
    if amount > MAX_AMOUNT:
        unit = " millicores" if name == "cpu" else ""
        raise _SpecError(path, f"Invalid value: {quantity!r}: must be less than 2^63{unit}")
    return amount


def _resource_list(value: Any, path: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for name, quantity in _mapping(value, path).items():
        if name in ("cpu", "memory", "ephemeral-storage", "pods") or is_scalar_resource(name):
            amount = _resource_amount(name, quantity, f"{path}.{name}")
            if amount < 0:
                raise _SpecError(f"{path}.{name}", "must be greater than or equal to 0")
            result[name] = amount
    return result


def _container_requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    resources = _mapping(container.get("resources"), f"{path}.resources")
    requests = _resource_list(resources.get("requests"), f"{path}.resources.requests")
    # The API server defaults a missing request to its limit; do the same for hand-written pods.
    for name, amount in _resource_list(resources.get("limits"), f"{path}.resources.limits").items():
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


def _with_defaults(requests: dict[str, int]) -> dict[str, int]:
    result = dict(requests)
    result.setdefault("cpu", DEFAULT_MILLI_CPU_REQUEST)
    result.setdefault("memory", DEFAULT_MEMORY_REQUEST)
    return result


def _requirement(raw: Any, path: str, operators: tuple[str, ...]) -> NodeSelectorRequirement:
    item = _mapping(raw, path)
    key = item.get("key")
    if not isinstance(key, str) or not key:
        raise _SpecError(f"{path}.key", "Required value")
    operator = item.get("operator")
    if operator not in operators:
        raise _SpecError(
            f"{path}.operator",
            f'Unsupported value: "{operator}": supported values: '
            + ", ".join(f'"{op}"' for op in operators),
        )
    values = tuple(str(v) for v in _sequence(item.get("values"), f"{path}.values"))
    if operator in ("In", "NotIn") and not values:
        raise _SpecError(f"{path}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
    if operator in ("Exists", "DoesNotExist") and values:
        raise _SpecError(
            f"{path}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise _SpecError(
                f"{path}.values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        if go_int(values[0]) is None:
            raise _SpecError(f"{path}.values[0]", f'Invalid value: "{values[0]}": must be an integer') from None
    if path.rsplit(".", 1)[-1].startswith("matchFields") and key != "metadata.name":
        raise _SpecError(f"{path}.key", f'Invalid value: "{key}": must be metadata.name')
    return NodeSelectorRequirement(key, operator, values)


def _term(raw: Any, path: str) -> NodeSelectorTerm:
    item = _mapping(raw, path)
    expressions = tuple(
        _requirement(req, f"{path}.matchExpressions[{i}]", SELECTOR_OPERATORS)
        for i, req in enumerate(_sequence(item.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    fields = tuple(
        _requirement(req, f"{path}.matchFields[{i}]", FIELD_OPERATORS)
        for i, req in enumerate(_sequence(item.get("matchFields"), f"{path}.matchFields"))
    )
    return NodeSelectorTerm(expressions, fields)


def _node_affinity(spec: Mapping[str, Any]) -> tuple[
    tuple[NodeSelectorTerm, ...] | None, tuple[tuple[int, NodeSelectorTerm], ...]
]:
    path = "spec.affinity.nodeAffinity"
    affinity = _mapping(_mapping(spec.get("affinity"), "spec.affinity").get("nodeAffinity"), path)
    required: tuple[NodeSelectorTerm, ...] | None = None
    req_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    raw_required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        terms = _sequence(_mapping(raw_required, req_path).get("nodeSelectorTerms"), f"{req_path}.nodeSelectorTerms")
        required = tuple(_term(t, f"{req_path}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    preferred: list[tuple[int, NodeSelectorTerm]] = []
    pref_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(_sequence(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)):
        item = _mapping(raw, f"{pref_path}[{i}]")
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise _SpecError(f"{pref_path}[{i}].weight", f"Invalid value: {weight!r}: must be in the range 1-100")
        preferred.append((weight, _term(item.get("preference"), f"{pref_path}[{i}].preference")))
    return required, tuple(preferred)


def _toleration(raw: Any, path: str) -> Toleration:
    item = _mapping(raw, path)
    key = item.get("key") or ""
    operator = item.get("operator") or "Equal"
    value = item.get("value") or ""
    effect = item.get("effect") or ""
    if not isinstance(key, str) or not isinstance(value, str):
        raise _SpecError(path, "key and value must be strings")
    if operator not in ("Equal", "Exists"):
        raise _SpecError(f"{path}.operator", f'Unsupported value: "{operator}": supported values: "Equal", "Exists"')
    if operator == "Exists" and value:
        raise _SpecError(f"{path}.operator", "Invalid value: value must be empty when `operator` is 'Exists'")
    if not key and operator != "Exists":
        raise _SpecError(f"{path}.operator", "Invalid value: operator must be Exists when `key` is empty")
    if effect and effect not in TAINT_EFFECTS:
        raise _SpecError(f"{path}.effect", f'Unsupported value: "{effect}": {SUPPORTED_EFFECTS}')
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
    if not isinstance(obj, Mapping):
        raise ObjectError("", f"a {kind} must be an object, not {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
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
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
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
    )
    try:
        _fill_pod(pod, meta, spec)
    except _SpecError as error:
        pod.error = f"invalid pod {pod.key}: {error}"
    return pod


def _fill_pod(pod: PodInfo, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    pod.labels = _string_map(meta.get("labels"), "metadata.labels")
    priority = spec.get("priority")
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise _SpecError("spec.priority", f"must be an integer, not {priority!r}")
        pod.priority = priority
    containers = _sequence(spec.get("containers"), "spec.containers")
    init_containers = _sequence(spec.get("initContainers"), "spec.initContainers")
    container_requests: list[dict[str, int]] = []
    container_nonzero: list[dict[str, int]] = []
    images: list[str] = []
    ports: list[tuple[str, str, int]] = []
    init_requests: list[tuple[dict[str, int], bool]] = []
    for i, raw in enumerate(init_containers):
        path = f"spec.initContainers[{i}]"
        container = _mapping(raw, path)
        init_requests.append((_container_requests(container, path), container.get("restartPolicy") == "Always"))
        if isinstance(container.get("image"), str):
            images.append(_normalized_image(container["image"]))
    for i, raw in enumerate(containers):
        path = f"spec.containers[{i}]"
        container = _mapping(raw, path)
        requests = _container_requests(container, path)
        container_requests.append(requests)
        container_nonzero.append(_with_defaults(requests))
        if isinstance(container.get("image"), str):
            images.append(_normalized_image(container["image"]))
        for j, raw_port in enumerate(_sequence(container.get("ports"), f"{path}.ports")):
            port = _mapping(raw_port, f"{path}.ports[{j}]")
            host_port = port.get("hostPort") or 0
            if isinstance(host_port, bool) or not isinstance(host_port, int) or not 0 <= host_port <= 65535:
                raise _SpecError(
                    f"{path}.ports[{j}].hostPort", f"Invalid value: {host_port!r}: must be between 1 and 65535"
                )
            if host_port:
                ports.append((str(port.get("hostIP") or "0.0.0.0"), str(port.get("protocol") or "TCP"), host_port))
    overhead = _resource_list(spec.get("overhead"), "spec.overhead")
    pod.requests = _pod_requests(container_requests, init_requests, overhead)
    pod.requests.pop("pods", None)
    for name, amount in pod.requests.items():
        if amount > MAX_AMOUNT:
            raise _SpecError("spec", f"the pod's total {name} request is too large: must be less than 2^63")
    # kube applies the 100m/200Mi defaults to init containers and sidecars too (NonMissingContainerRequests)
    init_nonzero = [(_with_defaults(requests), restartable) for requests, restartable in init_requests]
    nonzero = _pod_requests(container_nonzero, init_nonzero, overhead)
    pod.nonzero_cpu = nonzero.get("cpu", 0)
    pod.nonzero_memory = nonzero.get("memory", 0)
    pod.images = tuple(images)
    pod.container_count = len(containers) + len(init_containers)
    pod.host_ports = tuple(ports)
    pod.tolerations = tuple(
        _toleration(t, f"spec.tolerations[{i}]")
        for i, t in enumerate(_sequence(spec.get("tolerations"), "spec.tolerations"))
    )
    pod.node_selector = _string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    pod.required_terms, pod.preferred_terms = _node_affinity(spec)


def _node_ready(status: Mapping[str, Any]) -> bool:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    """Build a NodeInfo; raise ObjectError naming the field when the node is unusable."""
    meta = _metadata(obj, "Node")
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    try:
        labels = _string_map(meta.get("labels"), "metadata.labels")
        # Real nodes always report allocatable; hand-written ones may give only capacity.
        raw_allocatable = status.get("allocatable")
        if raw_allocatable is None:
            raw_allocatable = status.get("capacity")
        allocatable = _resource_list(raw_allocatable, "status.allocatable")
        taints = []
        for i, raw in enumerate(_sequence(spec.get("taints"), "spec.taints")):
            item = _mapping(raw, f"spec.taints[{i}]")
            key = item.get("key")
            if not isinstance(key, str) or not key:
                raise _SpecError(f"spec.taints[{i}].key", "Required value")
            effect = item.get("effect")
            if effect not in TAINT_EFFECTS:
                raise _SpecError(f"spec.taints[{i}].effect", f'Unsupported value: "{effect}": {SUPPORTED_EFFECTS}')
            taints.append(Taint(key, str(item.get("value") or ""), effect))
        images = []
        for i, raw in enumerate(_sequence(status.get("images"), "status.images")):
            item = _mapping(raw, f"status.images[{i}]")
            names = tuple(str(n) for n in _sequence(item.get("names"), f"status.images[{i}].names"))
            size = item.get("sizeBytes") or 0
            if isinstance(size, bool) or not isinstance(size, int):
                raise _SpecError(f"status.images[{i}].sizeBytes", "must be an integer")
            images.append((names, size))
    except _SpecError as error:
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
    )


def parse_node_metrics(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """A metrics.k8s.io NodeMetrics: (node name, usage with cpu in millicores)."""
    meta = _metadata(obj, "NodeMetrics")
    try:
        usage = _resource_list(obj.get("usage"), "usage")
    except _SpecError as error:
        raise ObjectError(error.path, error.message) from None
    return meta["name"], usage
