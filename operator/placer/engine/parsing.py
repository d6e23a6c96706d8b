"""Pods and nodes parsed from Kubernetes JSON into the engine's records (`placer.engine.objects`).

Parsing does all per-object work up front (requests summed the way kube-scheduler sums them,
selectors and tolerations validated, images normalised), so that a scheduling cycle only
compares prepared values. A structurally broken object (not a mapping, no name) raises
`ObjectError`; a pod whose spec is merely invalid (a bad quantity, an unknown operator) is
still returned, with `error` set, so that it fails scheduling with that reason instead of
crashing anything.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from functools import lru_cache
from operator import attrgetter
from typing import Any

import orjson

from placer.engine.fields import FieldError, is_mapping, mapping, section, sequence
from placer.engine.node_features import required_features
from placer.engine.objects import (
    DEFAULT_REQUESTS,
    FIELD_OPERATORS,
    SELECTOR_OPERATORS,
    SUPPORTED_EFFECTS,
    TAINT_EFFECTS,
    ExtendedContainer,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectError,
    PodInfo,
    Taint,
    Toleration,
    go_int,
    is_scalar_resource,
)
from placer.engine.pod_claims import parse_pod_claims
from placer.engine.quantity import QuantityError, to_milli, to_units
from placer.engine.relations import parse_controller, parse_pod_affinity, parse_spread_constraints
from placer.engine.volumes import parse_pod_volumes

__all__ = [
    "PodSource",
    "is_supported_pod_level_resource",
    "object_meta",
    "parse_node",
    "parse_node_metrics",
    "parse_node_selector_terms",
    "parse_pod",
    "parse_timestamp",
    "pod_key",
]


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


def _container_resources(container: Mapping[str, Any], path: str) -> tuple[dict[str, int], dict[str, int]]:
    """(requests, limits) of a container; a missing request defaults to its limit, as the API
    server's defaulting does (hand-written pods get the same)."""
    resources = mapping(container.get("resources"), f"{path}.resources")
    requests = _resource_list(resources.get("requests"), f"{path}.resources.requests")
    raw_limits = resources.get("limits")
    if raw_limits is None:
        return requests, {}
    limits = _resource_list(raw_limits, f"{path}.resources.limits")
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests, limits


def _add(total: dict[str, int], extra: Mapping[str, int]) -> None:
    for name, amount in extra.items():
        total[name] = total.get(name, 0) + amount


def _maximise(total: dict[str, int], other: Mapping[str, int]) -> None:
    """kube's maxResourceList: a resource `total` lacks is taken over, even at zero."""
    for name, amount in other.items():
        if name not in total or amount > total[name]:
            total[name] = amount


def is_supported_pod_level_resource(name: str) -> bool:
    """kube's `IsSupportedPodLevelResource`: cpu, memory and huge pages may be set at pod level."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


# A container's status as an in-place resize reads it: (status.resources.requests — what runs —,
# status.allocatedResources — what the node granted), for statuses that report `resources`.
ContainerStatus = tuple[dict[str, int], dict[str, int]]


@dataclass(slots=True)
class _Containers:
    """A pod's containers as the request formulas read them (names for their statuses)."""

    regular: list[tuple[str, dict[str, int]]]
    init: list[tuple[str, dict[str, int], bool]]  # (name, requests, restartable: a sidecar)
    overhead: dict[str, int]
    pod_level: dict[str, int]  # the pod-level requests kube counts (supported resources only)
    statuses: dict[str, ContainerStatus] | None = None  # by container name
    pod_status: ContainerStatus | None = None  # status.resources / status.allocatedResources
    infeasible: bool = False  # a PodResizePending condition with reason Infeasible


def _effective(spec: Mapping[str, int], status: ContainerStatus, infeasible: bool) -> dict[str, int]:
    """kube's `determineEffectiveRequests`: per resource the largest of the spec, what runs and what
    is allocated; while a resize is Infeasible, of what runs and what is allocated alone."""
    actuated, allocated = status
    result = {} if infeasible else dict(spec)
    _maximise(result, actuated)
    _maximise(result, allocated)
    return result


def _aggregate(pod: _Containers, use_status: bool, non_missing: Mapping[str, int] | None) -> dict[str, int]:
    """kube's `AggregateContainerRequests` (KEP-753): containers and sidecars add up; each init
    container needs its requests plus the sidecars started before it; the pod needs the larger.
    With `use_status`, a container (or sidecar) whose status reports resources counts its effective
    requests; `non_missing` fills each container's missing requests (NonMissingContainerRequests)."""
    statuses = pod.statuses if use_status else None
    total: dict[str, int] = {}
    for name, requests in pod.regular:
        if statuses is not None and name in statuses:
            requests = _effective(requests, statuses[name], pod.infeasible)
        if non_missing:
            requests = {**non_missing, **requests}
        _add(total, requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for name, requests, restartable in pod.init:
        if restartable and statuses is not None and name in statuses:
            requests = _effective(requests, statuses[name], pod.infeasible)
        if non_missing:
            requests = {**non_missing, **requests}
        if restartable:
            _add(total, requests)
            _add(sidecars, requests)
            _maximise(init_peak, sidecars)
        else:
            running = dict(requests)
            _add(running, sidecars)
            _maximise(init_peak, running)
    _maximise(total, init_peak)
    return total


def _pod_requests(pod: _Containers, use_status: bool, non_missing: Mapping[str, int] | None = None) -> dict[str, int]:
    """kube's `resourcehelper.PodRequests` as v1.36's scheduler calls it (PodLevelResources and
    InPlacePodLevelResourcesVerticalScaling on): the containers' total, pod-level requests in place
    of it for the resources they set, then overhead."""
    total = _aggregate(pod, use_status, non_missing)
    if pod.pod_level:
        effective = None
        if use_status and pod.pod_status is not None:
            effective = _effective(pod.pod_level, pod.pod_status, pod.infeasible)
        for name, amount in pod.pod_level.items():
            total[name] = amount if effective is None else effective.get(name, 0)
    _add(total, pod.overhead)
    total.pop("pods", None)
    return total


def _default_pod_level(
    raw: Any, regular: list[tuple[str, dict[str, int]]], init: list[tuple[str, dict[str, int], bool]],
    limits: tuple[list[dict[str, int]], list[tuple[dict[str, int], bool]]],
) -> dict[str, int]:
    """`spec.resources` as the API server leaves it (v1.36 `defaultHugePagePodLimits`,
    `defaultPodRequests`): with pod-level limits, a missing pod-level request is the containers'
    total for cpu and memory where they request it, else the pod-level limit. Returns the pod-level
    requests kube counts (supported resources only); {} when there are none."""
    resources = mapping(raw, "spec.resources")
    requests = _resource_list(resources.get("requests"), "spec.resources.requests")
    pod_limits = _resource_list(resources.get("limits"), "spec.resources.limits")
    if pod_limits or requests:
        container_limits = _aggregate(
            _Containers([("", c) for c in limits[0]], [("", c, r) for c, r in limits[1]], {}, {}), False, None
        )
        for name, amount in container_limits.items():
            if name.startswith("hugepages-") and name not in requests:
                pod_limits.setdefault(name, amount)
    if pod_limits:
        container_requests = _aggregate(_Containers(regular, init, {}, {}), False, None)
        for name, amount in container_requests.items():
            if name in ("cpu", "memory"):
                requests.setdefault(name, amount)
        for name, amount in pod_limits.items():
            if is_supported_pod_level_resource(name):
                requests.setdefault(name, amount)
    return {name: amount for name, amount in requests.items() if is_supported_pod_level_resource(name)}


def _container_name(container: Mapping[str, Any]) -> str:
    name = container.get("name")
    return name if isinstance(name, str) else ""


def _status_resources(raw: Any, path: str) -> ContainerStatus | None:
    """(resources.requests, allocatedResources) of a container status, None without `resources`."""
    status = mapping(raw, path)
    resources = status.get("resources")
    if resources is None:
        return None
    actuated = _resource_list(mapping(resources, f"{path}.resources").get("requests"), f"{path}.resources.requests")
    return actuated, _resource_list(status.get("allocatedResources"), f"{path}.allocatedResources")


def _resize_status(pod: _Containers, status: Mapping[str, Any]) -> None:
    """Read what an in-place resize needs from the pod's status (kube's UseStatusResources)."""
    statuses: dict[str, ContainerStatus] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        raw_statuses = status.get(key)
        if raw_statuses is None:
            continue
        for i, raw in enumerate(sequence(raw_statuses, f"status.{key}")):
            item = mapping(raw, f"status.{key}[{i}]")
            found = _status_resources(item, f"status.{key}[{i}]")
            name = item.get("name")
            if found is not None and isinstance(name, str):
                statuses[name] = found
    pod_status = _status_resources(status, "status") if pod.pod_level else None
    if not statuses and pod_status is None:
        return
    for condition in sequence(status.get("conditions"), "status.conditions"):
        if is_mapping(condition) and condition.get("type") == "PodResizePending":
            pod.infeasible = condition.get("reason") == "Infeasible"  # kube reads the first one
            break
    if not pod.infeasible:
        # the usual running pod: its status repeats its spec, which then stands alone (and the
        # requests are computed once, as for a pod without status)
        specs = dict(pod.regular)
        specs.update((name, requests) for name, requests, restartable in pod.init if restartable)
        statuses = {name: found for name, found in statuses.items()
                    if name in specs and _effective(specs[name], found, False) != specs[name]}
        if pod_status is not None and _effective(pod.pod_level, pod_status, False) == pod.pod_level:
            pod_status = None
    pod.statuses = statuses or None
    pod.pod_status = pod_status


def _set_requests(pod: PodInfo, shape: _Containers) -> None:
    """The pod's requests as each of kube-scheduler's callers of PodRequests computes them."""
    plain = shape.statuses is None and shape.pod_status is None
    if plain and len(shape.regular) == 1 and not shape.init and not shape.overhead and not shape.pod_level:
        # the usual pod, one container and nothing else: its (fresh) requests dict as it is
        requests = shape.regular[0][1]
        requests.pop("pods", None)
        spec_requests = None
        nonzero = {**DEFAULT_REQUESTS, **requests}
        score = nonzero
    else:
        requests = _pod_requests(shape, use_status=True)
        spec_requests = None
        if not plain:
            spec_requests = _pod_requests(shape, use_status=False)
            if spec_requests == requests:
                spec_requests = None
        # kube's getNonMissingContainerRequests: with pod-level requests, the defaults fill only a
        # resource neither the pod level nor any container sets
        non_missing = (
            {name: amount for name, amount in DEFAULT_REQUESTS.items() if name not in requests}
            if shape.pod_level
            else DEFAULT_REQUESTS
        )
        nonzero = _pod_requests(shape, True, non_missing) if non_missing else requests
        # resource_allocation.go fills every missing container request, pod-level requests or not
        score = _pod_requests(shape, True, DEFAULT_REQUESTS) if shape.pod_level else nonzero
    for totals in (requests, spec_requests or {}):
        for name, amount in totals.items():
            if amount > MAX_AMOUNT:
                raise FieldError("spec", f"the pod's total {name} request is too large: must be less than 2^63")
    pod.requests = requests
    pod.spec_requests = spec_requests
    pod.nonzero_cpu = nonzero.get("cpu", 0)
    pod.nonzero_memory = nonzero.get("memory", 0)
    pod.score_cpu = score.get("cpu", 0)
    pod.score_memory = score.get("memory", 0)


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


# tolerations parsed, by (key, operator, value, effect): pods repeat a few (the API server gives every
# pod the same two NoExecute ones), each parsed once and shared (it is immutable)
_TOLERATIONS: dict[tuple[Any, ...], Toleration] = {}
_TOLERATIONS_KEPT = 4096


def _toleration(raw: Any, path: str) -> Toleration:
    item = mapping(raw, path)
    key = item.get("key") or ""
    operator = item.get("operator") or "Equal"
    value = item.get("value") or ""
    effect = item.get("effect") or ""
    fields = (key, operator, value, effect)
    try:
        known = _TOLERATIONS.get(fields)  # (only valid ones, all strings, are kept)
    except TypeError:  # an unhashable value, refused below
        known = None
    if known is not None:
        return known
    if not isinstance(key, str) or not isinstance(value, str):
        raise FieldError(path, "key and value must be strings")
    if operator not in ("Equal", "Exists", "Gt", "Lt"):
        raise FieldError(f"{path}.operator", f'Unsupported value: "{operator}": supported values: "Equal", "Exists"')
    if operator == "Exists" and value:
        raise FieldError(f"{path}.operator", "Invalid value: value must be empty when `operator` is 'Exists'")
    if not key and operator != "Exists":
        raise FieldError(f"{path}.operator", "Invalid value: operator must be Exists when `key` is empty")
    if effect and effect not in TAINT_EFFECTS:
        raise FieldError(f"{path}.effect", f'Unsupported value: "{effect}": {SUPPORTED_EFFECTS}')
    toleration = Toleration(key, operator, value, effect)
    if len(_TOLERATIONS) < _TOLERATIONS_KEPT:
        _TOLERATIONS[fields] = toleration
    return toleration


def _image_volumes(spec: Mapping[str, Any]) -> list[str]:
    """The images of `image` volumes (`spec.volumes[].image.reference`), normalised: kube's
    ImageLocality counts them with the containers' (v1.36)."""
    images = []
    for i, raw in enumerate(sequence(spec.get("volumes"), "spec.volumes")):
        source = mapping(raw, f"spec.volumes[{i}]").get("image")
        if source is not None:
            reference = mapping(source, f"spec.volumes[{i}].image").get("reference")
            if isinstance(reference, str) and reference:
                images.append(_normalized_image(reference))
    return images


def _strings(value: Any, path: str) -> list[str]:
    items = sequence(value, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise FieldError(f"{path}[{i}]", f"must be a string, not {type(item).__name__}")
    return items


def _normalized_image(name: str) -> str:
    """kube's ImageLocality normalisation: an image without a tag means `:latest`."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def parse_timestamp(value: Any) -> float:
    if not isinstance(value, str) or not value:
        return 0.0
    return _timestamp(value)


@lru_cache(maxsize=1024)  # pods created in the same second share their creationTimestamp
def _timestamp(value: str) -> float:
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


def preempted_by_scheduler(status: Mapping[str, Any]) -> bool:
    """kube's podTerminatingByPreemption, its condition: the pod's first DisruptionTarget condition
    is True with reason PreemptionByScheduler (malformed conditions: not)."""
    conditions = status.get("conditions")
    if type(conditions) is not list:
        return False
    for condition in conditions:
        if type(condition) is dict and condition.get("type") == "DisruptionTarget":
            return condition.get("status") == "True" and condition.get("reason") == "PreemptionByScheduler"
    return False


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
        preempted=preempted_by_scheduler(status),
        resource_version=str(meta.get("resourceVersion") or ""),
        start_time=parse_timestamp(status.get("startTime")),
        nominated_node=str(status.get("nominatedNodeName") or ""),
    )
    try:
        _fill_pod(pod, meta, spec, status)
        if spec.get("resourceClaims"):
            pod.resource_claims = parse_pod_claims(spec["resourceClaims"], status.get("resourceClaimStatuses"))
    except FieldError as error:
        pod.error = f"invalid pod {pod.key}: {error}"
    return pod


# status fields that make `parse_pod` read more of the status (an in-place resize): no shortcut
_RESIZE_STATUS = frozenset(("containerStatuses", "initContainerStatuses", "resources", "allocatedResources"))
_POD_FIELDS = attrgetter(*(f.name for f in dataclass_fields(PodInfo) if f.init))


def _read(spec: dict[str, Any], meta: dict[str, Any], status: dict[str, Any]) -> str | None:
    """What `parse_pod` reads of a pod besides its identity (namespace, name, uid, resourceVersion)
    and labels, when no in-place resize is under way, as JSON (None if orjson cannot encode it):
    equal texts are equal inputs, types included (`0` is not `false`), for objects decoded from JSON
    (NaN, which orjson writes as null, is not JSON: the API server never sends it). A `str`:
    orjson's bytes keep a buffer of a few kilobytes each."""
    try:
        return orjson.dumps((
            spec, meta.get("creationTimestamp"), meta.get("deletionTimestamp"), meta.get("ownerReferences"),
            status.get("phase"), status.get("startTime"), status.get("nominatedNodeName"),
            status.get("resourceClaimStatuses"), preempted_by_scheduler(status),
        )).decode()
    except orjson.JSONEncodeError:
        return None


@dataclass(slots=True, eq=False)
class PodSource:
    """A pending pod as parsed (`pod`) and what `parse_pod` read of its object (`read`, as JSON), to
    recognise a later version that differs only by its binding: the MODIFIED event of a pod bound
    to the node it was assumed on then costs an encoding and a comparison instead of a parse. Kept
    as text, not as the decoded object: a few hundred bytes the garbage collector never visits."""

    pod: PodInfo
    read: str

    @staticmethod
    def of(obj: Mapping[str, Any], pod: PodInfo) -> PodSource | None:
        """The source of an unbound pod parsed from `obj` without error; None when a later version
        could not be compared (an odd shape, an in-place resize under way)."""
        if pod.error is not None or pod.node_name:
            return None
        meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        if type(meta) is not dict or type(spec) is not dict or "nodeName" in spec:
            return None
        if status is None:
            status = {}
        elif type(status) is not dict or not _RESIZE_STATUS.isdisjoint(status):
            return None
        read = _read(spec, meta, status)
        return None if read is None else PodSource(pod, read)

    def bound(self, obj: Mapping[str, Any]) -> PodInfo | None:
        """`parse_pod(obj)`, without parsing, when `obj` is this pod's object bound to a node
        (`spec.nodeName` set) with nothing else `parse_pod` reads changed (its resourceVersion,
        status conditions, annotations or managed fields may differ); None otherwise. As after a
        parse, a pod without `spec.priority` is still to be given its PriorityClass's
        (`placer.engine.kinds.resolve_priority`)."""
        pod = self.pod
        meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        if type(meta) is not dict or type(spec) is not dict:
            return None
        node = spec.get("nodeName")
        if not node or type(node) is not str:
            return None
        if status is None:
            status = {}
        elif type(status) is not dict or not _RESIZE_STATUS.isdisjoint(status):
            return None
        labels = meta.get("labels")
        if labels is None:
            labels = {}
        if (
            type(labels) is not dict
            or labels != pod.labels
            or meta.get("name") != pod.name
            or (meta.get("namespace") or "default") != pod.namespace
            or str(meta.get("uid") or "") != pod.uid
        ):
            return None
        rest = dict(spec)
        del rest["nodeName"]
        if _read(rest, meta, status) != self.read:
            return None
        bound = PodInfo(*_POD_FIELDS(pod))
        bound.node_name = node
        bound.resource_version = str(meta.get("resourceVersion") or "")
        if not pod.priority_set:  # as parsed, before its PriorityClass was resolved
            bound.priority = 0
            bound.preemption_policy = rest.get("preemptionPolicy") or ""
        return bound


def _fill_pod(pod: PodInfo, meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    pod.labels = _string_map(meta.get("labels"), "metadata.labels")
    if spec.get("schedulingGroup") is not None:
        pod.pod_group_name = _pod_group_name(spec["schedulingGroup"])
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
    regular: list[tuple[str, dict[str, int]]] = []
    init: list[tuple[str, dict[str, int], bool]] = []
    limits: tuple[list[dict[str, int]], list[tuple[dict[str, int], bool]]] = ([], [])
    images: list[str] = []
    ports: list[tuple[str, str, int]] = []
    for i, raw in enumerate(init_containers):
        path = f"spec.initContainers[{i}]"
        container = mapping(raw, path)
        restartable = container.get("restartPolicy") == "Always"
        requests, container_limits = _container_resources(container, path)
        init.append((_container_name(container), requests, restartable))
        limits[1].append((container_limits, restartable))
        if isinstance(container.get("image"), str):
            images.append(_normalized_image(container["image"]))
        if restartable:  # a sidecar holds its host ports for the pod's whole life, as kube counts them
            ports.extend(_host_ports(container, path))
    extended: list[ExtendedContainer] = []
    for i, (name, requests, restartable) in enumerate(init):
        _note_extended(extended, i, name, init_containers[i], requests, restartable)
    for i, raw in enumerate(containers):
        path = f"spec.containers[{i}]"
        container = mapping(raw, path)
        requests, container_limits = _container_resources(container, path)
        regular.append((_container_name(container), requests))
        _note_extended(extended, len(init) + i, regular[-1][0], container, requests, True)
        limits[0].append(container_limits)
        if isinstance(container.get("image"), str):
            images.append(_normalized_image(container["image"]))
        ports.extend(_host_ports(container, path))
    overhead = _resource_list(spec.get("overhead"), "spec.overhead")
    raw_pod_level = spec.get("resources")
    pod_level = {} if raw_pod_level is None else _default_pod_level(raw_pod_level, regular, init, limits)
    shape = _Containers(regular, init, overhead, pod_level)
    if status:
        _resize_status(shape, status)
    _set_requests(pod, shape)
    images.extend(_image_volumes(spec))
    pod.images = tuple(images)
    pod.required_features = required_features(spec)
    pod.container_count = len(containers) + len(init_containers)
    pod.extended_containers = tuple(extended)
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


def _note_extended(out: list[ExtendedContainer], index: int, name: str, container: Any,
                   requests: Mapping[str, int], long_lived: bool) -> None:
    extended = {k: v for k, v in requests.items() if "/" in k and v > 0}
    if extended:
        raw = (container.get("resources") or {}).get("requests") or {}
        out.append(ExtendedContainer(index, name, tuple(sorted(str(k) for k in raw)), extended, long_lived))


def _pod_group_name(raw: Any) -> str:
    """`spec.schedulingGroup.podGroupName` (v1.36, GenericWorkload): the PodGroup of the pod's
    namespace it belongs to, "" when unset."""
    name = mapping(raw, "spec.schedulingGroup").get("podGroupName")
    if name is None:
        return ""
    if not isinstance(name, str) or not name:
        raise FieldError("spec.schedulingGroup.podGroupName", f"Invalid value: {name!r}: must be a PodGroup name")
    return name


def _node_ready(status: Mapping[str, Any]) -> str:
    """The Ready condition's status ("True", "False", "Unknown"), "" when the node has none."""
    for condition in status.get("conditions") or []:
        if is_mapping(condition) and condition.get("type") == "Ready":
            return str(condition.get("status") or "")
    return ""


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
        declared_features = frozenset(_strings(status.get("declaredFeatures"), "status.declaredFeatures"))
        ready = _node_ready(status)
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return NodeInfo(
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        labels=labels,
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready == "True",
        unreachable=ready == "Unknown",
        allocatable=allocatable,
        images=tuple(images),
        annotations=annotations,
        declared_features=declared_features,
    )


def parse_node_metrics(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """A metrics.k8s.io NodeMetrics: (node name, usage with cpu in millicores)."""
    meta = _metadata(obj, "NodeMetrics")
    try:
        usage = _resource_list(obj.get("usage"), "usage")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return meta["name"], usage
