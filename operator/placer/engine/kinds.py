"""The kinds kept in the `Catalog` beside nodes and pods, and how each is parsed.

Each value is immutable and carries its `namespace` ("" for cluster-scoped kinds) and `name`.
`KINDS` is the registry: the operator watches every kind in it (RBAC: get, list, watch) and
`placer simulate` accepts every kind in it in `--cluster` files.

- Namespace: its labels, for inter-pod affinity's `namespaceSelector`.
- Service, ReplicaSet, StatefulSet: their selectors, for PodTopologySpread's system default
  constraints (kube's `helper.DefaultSelector`).
- PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, VolumeAttachment: for the volume
  plugins (`placer.engine.storage`).
- DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate (`resource.k8s.io/v1`): Dynamic
  Resource Allocation (`placer.engine.devices`), for DynamicResources.
- PodDisruptionBudget: which pods preemption would rather spare; PriorityClass: the priority of a
  pod that names one but carries no `spec.priority` (a hand-written pod; the API server's admission
  fills it in), as `resolve_priority` does.

PodGroups (gang scheduling, `placer.engine.groups.GROUP_KINDS`) are catalog kinds too, but not in
`KINDS`: which upstream version to watch is the API server's to say (discovery), and two APIs name
their kind PodGroup; `document_kind` finds them in `--cluster` files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from placer.engine.catalog import Catalog, Kind
from placer.engine.devices import (
    parse_claim_template,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from placer.engine.fields import FieldError, section
from placer.engine.groups import group_kind
from placer.engine.labels import LabelSelector, parse_label_selector
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import object_meta
from placer.engine.storage import (
    parse_claim,
    parse_csinode,
    parse_storage_class,
    parse_volume,
    parse_volume_attachment,
)

__all__ = [
    "KINDS",
    "KINDS_BY_NAME",
    "DisruptionBudget",
    "NamespaceInfo",
    "PriorityClassInfo",
    "ServiceInfo",
    "WorkloadInfo",
    "delete_object",
    "document_kind",
    "resolve_priority",
    "upsert_object",
]


def _string_map(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ObjectError(path, "must be a map of strings")
    return {str(k): v for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    namespace: str = ""


def parse_namespace(obj: Mapping[str, Any]) -> NamespaceInfo:
    _, name, meta = object_meta(obj, "Namespace", namespaced=False)
    return NamespaceInfo(name, _string_map(meta.get("labels"), "metadata.labels"))


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    namespace: str
    name: str
    selector: dict[str, str] | None  # None: a service without a selector selects no pods


def parse_service(obj: Mapping[str, Any]) -> ServiceInfo:
    namespace, name, _ = object_meta(obj, "Service", namespaced=True)
    spec = section(obj, "spec")
    raw = spec.get("selector")
    return ServiceInfo(namespace, name, None if raw is None else _string_map(raw, "spec.selector"))


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """A ReplicaSet or StatefulSet: what its pods' default spreading selects."""

    namespace: str
    name: str
    selector: LabelSelector


def _workload(kind: str) -> Any:
    def parse(obj: Mapping[str, Any]) -> WorkloadInfo:
        namespace, name, _ = object_meta(obj, kind, namespaced=True)
        spec = section(obj, "spec")
        try:
            selector = parse_label_selector(spec.get("selector"), "spec.selector")
        except FieldError as error:
            raise ObjectError(error.path, error.message) from None
        return WorkloadInfo(namespace, name, selector)

    return parse


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget as preemption reads it (kube's `filterPodsWithPDBViolation`)."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()  # status.disruptedPods: pods already being evicted


def parse_pdb(obj: Mapping[str, Any]) -> DisruptionBudget:
    namespace, name, _ = object_meta(obj, "PodDisruptionBudget", namespaced=True)
    spec, status = section(obj, "spec"), section(obj, "status")
    try:
        selector = parse_label_selector(spec.get("selector"), "spec.selector")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    allowed = status.get("disruptionsAllowed") or 0
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise ObjectError("status.disruptionsAllowed", f"must be an integer, not {allowed!r}")
    disrupted = status.get("disruptedPods")
    return DisruptionBudget(
        namespace, name, selector, allowed, frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset()
    )


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    name: str
    value: int = 0
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"
    namespace: str = ""


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClassInfo:
    _, name, _ = object_meta(obj, "PriorityClass", namespaced=False)
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectError("value", f"Required value: an integer, not {value!r}")
    return PriorityClassInfo(
        name, value, obj.get("globalDefault") is True, str(obj.get("preemptionPolicy") or "PreemptLowerPriority")
    )


def resolve_priority(pod: PodInfo, catalog: Catalog) -> None:
    """What the API server's Priority admission does for a pod without `spec.priority`: the value of
    its `priorityClassName`, else of the `globalDefault` class, else 0; and the class's
    `preemptionPolicy` when the pod sets none. A named class that does not exist is the pod's error
    (the API server would have refused the pod)."""
    if pod.priority_set or pod.error is not None:
        return
    chosen: PriorityClassInfo | None = None
    if pod.priority_class_name:
        chosen = catalog.get("PriorityClass", pod.priority_class_name)
        if chosen is None:
            pod.error = f"invalid pod {pod.key}: no PriorityClass with name {pod.priority_class_name} was found"
            return
    else:
        defaults = [value for _, _, value in catalog.items("PriorityClass") if value.global_default]
        chosen = min(defaults, key=lambda c: c.value) if defaults else None
    if chosen is not None:
        pod.priority = chosen.value
        if not pod.preemption_policy:
            pod.preemption_policy = chosen.preemption_policy


KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "v1", "namespaces", False, parse_namespace),
    Kind("Service", "v1", "services", True, parse_service),
    Kind("ReplicaSet", "apps/v1", "replicasets", True, _workload("ReplicaSet")),
    Kind("StatefulSet", "apps/v1", "statefulsets", True, _workload("StatefulSet")),
    Kind("PersistentVolumeClaim", "v1", "persistentvolumeclaims", True, parse_claim),
    Kind("PersistentVolume", "v1", "persistentvolumes", False, parse_volume),
    Kind("StorageClass", "storage.k8s.io/v1", "storageclasses", False, parse_storage_class),
    Kind("CSINode", "storage.k8s.io/v1", "csinodes", False, parse_csinode),
    Kind("VolumeAttachment", "storage.k8s.io/v1", "volumeattachments", False, parse_volume_attachment),
    Kind("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True, parse_pdb),
    Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False, parse_priority_class),
    Kind("DeviceClass", "resource.k8s.io/v1", "deviceclasses", False, parse_device_class),
    Kind("ResourceSlice", "resource.k8s.io/v1", "resourceslices", False, parse_resource_slice),
    Kind("ResourceClaim", "resource.k8s.io/v1", "resourceclaims", True, parse_resource_claim),
    Kind("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates", True, parse_claim_template),
)
KINDS_BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}


def document_kind(obj: Mapping[str, Any]) -> Kind | None:
    """The catalog kind of a document (a `--cluster` file's): by its kind, and for a PodGroup by its
    apiVersion too (`placer.engine.groups.GROUP_KINDS`: two APIs share the name); None when unknown."""
    kind = obj.get("kind")
    if kind == "PodGroup":
        return group_kind(obj.get("apiVersion"), kind)
    return KINDS_BY_NAME.get(kind) if isinstance(kind, str) else None


def upsert_object(catalog: Catalog, kind: Kind, raw: Mapping[str, Any]) -> bool:
    """Parse and file one object; True when the catalog changed. ObjectError when unusable."""
    value = kind.parse(raw)
    return catalog.put(kind.name, value.namespace, value.name, value)


def delete_object(catalog: Catalog, kind: Kind, raw: Mapping[str, Any]) -> bool:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return False
    namespace = (meta.get("namespace") or "default") if kind.namespaced else ""
    return catalog.remove(kind.name, namespace, meta["name"]) is not None
