"""Built-in kinds beyond pods: defaulting, initial status, validation, and what updates may change.

Follows the 1.31 registry strategies and validation closely enough for a scheduler's tests, with
the real messages, so that a client sees the 422 a real server would send. Everything here works
on the stored (dict) form and copies a sub-tree before writing into it: stored objects are
shared snapshots.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from .capacity import parse_quantity
from .resources import Obj
from .selectors import selector_matches

NS_NAME_LABEL = "kubernetes.io/metadata.name"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"

# The priority classes every API server creates at start-up, and the limit for all others.
SYSTEM_PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    "system-node-critical": (2_000_001_000, "Used for system critical pods that must not be "
                                            "moved from their current node."),
    "system-cluster-critical": (2_000_000_000, "Used for system critical pods that must run in "
                                               "the cluster, but can be moved to another node "
                                               "if necessary."),
}
HIGHEST_USER_PRIORITY = 1_000_000_000

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
# PersistentVolumeSpec fields that are not a volume source.
PV_SPEC_FIELDS = frozenset({
    "capacity", "accessModes", "claimRef", "persistentVolumeReclaimPolicy", "storageClassName",
    "mountOptions", "volumeMode", "nodeAffinity", "volumeAttributesClassName",
})
STS_MUTABLE_SPEC = frozenset({
    "replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
})
# The kinds this module handles (create and update go through it).
BUILTIN_KINDS = frozenset({
    "Namespace", "Service", "PersistentVolumeClaim", "PersistentVolume", "ReplicaSet",
    "StatefulSet", "StorageClass", "CSINode", "PodDisruptionBudget", "PriorityClass", "PodGroup",
})
#: scheduling.k8s.io/v1alpha2 PodGroup spec fields behind gates other than GenericWorkload and
#: GangScheduling (WorkloadAwarePreemption, TopologyAwareWorkloadScheduling,
#: DRAWorkloadResourceClaims): a v1.36.2 server started with only those two drops them (measured)
PODGROUP_GATED_FIELDS = ("priority", "priorityClassName", "disruptionMode", "schedulingConstraints",
                         "resourceClaims")
#: the gate that serves each of them (`KubeEmulator(workload_gates=...)`: a server started with it)
PODGROUP_FIELD_GATES = {
    "priority": "WorkloadAwarePreemption", "priorityClassName": "WorkloadAwarePreemption",
    "disruptionMode": "WorkloadAwarePreemption", "schedulingConstraints": "TopologyAwareWorkloadScheduling",
    "resourceClaims": "DRAWorkloadResourceClaims",
}
#: what every gated field is once stored: immutable (`+k8s:immutable`)
PODGROUP_IMMUTABLE = ("priority", "priorityClassName", "disruptionMode", "schedulingConstraints", "resourceClaims")
#: the finalizer a v1.36 server puts on every PodGroup (its podgroup-protection controller removes it)
PODGROUP_FINALIZER = "scheduling.k8s.io/podgroup-protection"
_PERCENT = re.compile(r"^[0-9]+%$")

# Status written on create: the strategy resets it, and zero values without omitempty show.
_INITIAL_STATUS: dict[str, Obj] = {
    "Service": {"loadBalancer": {}},
    "PersistentVolumeClaim": {"phase": "Pending"},
    "PersistentVolume": {"phase": "Available"},
    "ReplicaSet": {"replicas": 0},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "PodDisruptionBudget": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                            "expectedPods": 0},
}


def _own(obj: Obj, key: str) -> Obj:
    """``obj[key]`` replaced by a shallow copy that may be written (``obj`` must be owned)."""
    child = dict(obj.get(key) or {})
    obj[key] = child
    return child


def _show(value: Any) -> str:
    """A value as validation messages print it."""
    return repr(value) if not isinstance(value, str) else f'"{value}"'


# --- defaulting (on every write, as decoding applies it) ---------------------------------------

def _default_namespace(obj: Obj) -> None:
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    if labels.get(NS_NAME_LABEL) != meta.get("name"):
        meta["labels"] = {**labels, NS_NAME_LABEL: meta.get("name")}


def _default_service(obj: Obj) -> None:
    spec = _own(obj, "spec")
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec.get("ports"):
        spec["ports"] = [{"protocol": "TCP", **port,
                          "targetPort": port.get("targetPort", port.get("port"))}
                         for port in spec["ports"]]


def _default_pod_template(spec: Obj) -> None:
    template = _own(spec, "template")
    pod_spec = _own(template, "spec")
    pod_spec.setdefault("schedulerName", "default-scheduler")
    pod_spec.setdefault("restartPolicy", "Always")
    pod_spec.setdefault("dnsPolicy", "ClusterFirst")
    pod_spec.setdefault("terminationGracePeriodSeconds", 30)


def _default_replicaset(obj: Obj) -> None:
    spec = _own(obj, "spec")
    spec.setdefault("replicas", 1)
    _default_pod_template(spec)


def _default_statefulset(obj: Obj) -> None:
    spec = _own(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("persistentVolumeClaimRetentionPolicy",
                    {"whenDeleted": "Retain", "whenScaled": "Retain"})
    if spec.get("volumeClaimTemplates"):
        spec["volumeClaimTemplates"] = [
            {**tpl, "spec": {"volumeMode": "Filesystem", **(tpl.get("spec") or {})},
             "status": {"phase": "Pending", **(tpl.get("status") or {})}}
            for tpl in spec["volumeClaimTemplates"]]
    _default_pod_template(spec)


def _default_pvc(obj: Obj) -> None:
    spec = obj.get("spec") or {}
    if "volumeMode" not in spec:
        _own(obj, "spec")["volumeMode"] = "Filesystem"


def _default_pv(obj: Obj) -> None:
    spec = obj.get("spec") or {}
    if "volumeMode" not in spec or "persistentVolumeReclaimPolicy" not in spec:
        spec = _own(obj, "spec")
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")


def _default_storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def _default_priority_class(obj: Obj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _default_pod_group(obj: Obj, gates: frozenset[str] = frozenset()) -> None:
    """What a v1.36.2 server with GenericWorkload and GangScheduling on stores (measured): the
    other gates' fields dropped unless their gate is in `gates`, `disruptionMode: Pod` (the
    default when WorkloadAwarePreemption is on, always so when it is off), `podGroupTemplateRef:
    null` shown, no generation, and `status: {}`."""
    spec = _own(obj, "spec")
    for field in PODGROUP_GATED_FIELDS:
        if PODGROUP_FIELD_GATES[field] not in gates:
            spec.pop(field, None)
    if "WorkloadAwarePreemption" not in gates or not spec.get("disruptionMode"):
        spec["disruptionMode"] = "Pod"
    spec.setdefault("podGroupTemplateRef", None)
    obj.setdefault("status", {})


_DEFAULTS: dict[str, Callable[[Obj], None]] = {
    "Namespace": _default_namespace,
    "Service": _default_service,
    "ReplicaSet": _default_replicaset,
    "StatefulSet": _default_statefulset,
    "PersistentVolumeClaim": _default_pvc,
    "PersistentVolume": _default_pv,
    "StorageClass": _default_storage_class,
    "PriorityClass": _default_priority_class,
}


def apply_defaults(kind: str, obj: Obj, gates: frozenset[str] = frozenset()) -> None:
    """Fill defaults in place (``obj`` and its ``metadata`` must be owned by the caller); `gates`:
    the PodGroup gates the server was started with beyond GenericWorkload and GangScheduling."""
    if kind == "PodGroup":
        _default_pod_group(obj, gates)
        return
    fn = _DEFAULTS.get(kind)
    if fn is not None:
        fn(obj)


def initial_status(kind: str, obj: Obj, http: bool, now: str) -> None:
    """The status a create leaves: reset over HTTP, kept (with the zero fields) in god mode."""
    base = _INITIAL_STATUS.get(kind)
    if base is None:
        return
    given = {} if http else dict(obj.get("status") or {})
    obj["status"] = {**copy.deepcopy(base), **given}
    if kind == "PersistentVolume":
        obj["status"].setdefault("lastPhaseTransitionTime", now)


# --- validation (create and update) ---------------------------------------------------------

def _int_or_percent(errors: list[str], path: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        errors.append(f"{path}: Invalid value: {_show(value)}: must be an integer or percentage")
    elif isinstance(value, int):
        if value < 0:
            errors.append(f"{path}: Invalid value: {value}: must be greater than or equal to 0")
    elif not _PERCENT.match(value):
        errors.append(f"{path}: Invalid value: {_show(value)}: a valid percent string must be a "
                      f"numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used "
                      f"for validation is '[0-9]+%')")
    elif int(value[:-1]) > 100:
        errors.append(f"{path}: Invalid value: {_show(value)}: must not be greater than 100%")


def _access_modes(errors: list[str], modes: Any) -> None:
    if not modes:
        errors.append("spec.accessModes: Required value: at least 1 access mode is required")
        return
    for mode in modes:
        if mode not in ACCESS_MODES:
            supported = ", ".join(f'"{m}"' for m in ACCESS_MODES)
            errors.append(f"spec.accessModes: Unsupported value: {_show(mode)}: supported values: "
                          f"{supported}")


def _quantity(errors: list[str], path: str, value: Any) -> None:
    try:
        parse_quantity(value)
    except (ValueError, TypeError):
        errors.append(f"{path}: Invalid value: {_show(value)}: quantities must match the regular "
                      f"expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def _validate_service(obj: Obj) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    stype = spec.get("type", "ClusterIP")
    if stype not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        errors.append(f'spec.type: Unsupported value: {_show(stype)}: supported values: '
                      f'"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"')
    ports = spec.get("ports") or []
    if not ports and stype != "ExternalName" and spec.get("clusterIP") != "None":
        errors.append("spec.ports: Required value")
    for idx, port in enumerate(ports):
        number = port.get("port")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 65535:
            errors.append(f"spec.ports[{idx}].port: Invalid value: {_show(number)}: must be "
                          f"between 1 and 65535, inclusive")
        if len(ports) > 1 and not port.get("name"):
            errors.append(f"spec.ports[{idx}].name: Required value")
    return errors


def _validate_pvc(obj: Obj) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    _access_modes(errors, spec.get("accessModes"))
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        errors.append("spec.resources[storage]: Required value")
    else:
        _quantity(errors, "spec.resources.requests[storage]", storage)
    return errors


def _validate_pv(obj: Obj) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    storage = (spec.get("capacity") or {}).get("storage")
    if storage is None:
        errors.append("spec.capacity: Required value")
    else:
        _quantity(errors, "spec.capacity[storage]", storage)
    _access_modes(errors, spec.get("accessModes"))
    sources = [k for k in spec if k not in PV_SPEC_FIELDS]
    if not sources:
        errors.append("spec: Required value: must specify a volume type")
    for extra in sources[1:]:
        errors.append(f"spec.{extra}: Forbidden: may not specify more than 1 volume type")
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in (None, "Delete", "Recycle", "Retain"):
        errors.append(f'spec.persistentVolumeReclaimPolicy: Unsupported value: {_show(policy)}: '
                      f'supported values: "Delete", "Recycle", "Retain"')
    claim_ref = spec.get("claimRef")
    if claim_ref is not None and not claim_ref.get("name"):
        errors.append("spec.claimRef.name: Required value")
    return errors


def _validate_workload(obj: Obj) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 0:
        errors.append(f"spec.replicas: Invalid value: {_show(replicas)}: must be greater than or "
                      f"equal to 0")
    selector = spec.get("selector")
    template = spec.get("template") or {}
    if selector is None:
        errors.append("spec.selector: Required value")
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errors.append(f"spec.selector: Invalid value: {_show(selector)}: empty selector is "
                      f"invalid for deployment")
    else:
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not selector_matches(selector, labels):
            errors.append(f"spec.template.metadata.labels: Invalid value: {_show(labels)}: "
                          f"`selector` does not match template `labels`")
    if not (template.get("spec") or {}).get("containers"):
        errors.append("spec.template.spec.containers: Required value")
    return errors


def _validate_storage_class(obj: Obj) -> list[str]:
    errors: list[str] = []
    if not obj.get("provisioner"):
        errors.append("provisioner: Required value")
    mode = obj.get("volumeBindingMode")
    if mode not in (None, "Immediate", "WaitForFirstConsumer"):
        errors.append(f'volumeBindingMode: Unsupported value: {_show(mode)}: supported values: '
                      f'"Immediate", "WaitForFirstConsumer"')
    policy = obj.get("reclaimPolicy")
    if policy not in (None, "Delete", "Retain"):
        errors.append(f'reclaimPolicy: Unsupported value: {_show(policy)}: supported values: '
                      f'"Delete", "Retain"')
    for idx, term in enumerate(obj.get("allowedTopologies") or []):
        for jdx, expr in enumerate(term.get("matchLabelExpressions") or []):
            if not expr.get("values"):
                errors.append(f"allowedTopologies[{idx}].matchLabelExpressions[{jdx}].values: "
                              f"Required value: must specify as least one value")
    return errors


def _validate_pdb(obj: Obj) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errors.append(f"spec: Invalid value: {_show(spec)}: minAvailable and maxUnavailable "
                      f"cannot be both set")
    _int_or_percent(errors, "spec.minAvailable", spec.get("minAvailable"))
    _int_or_percent(errors, "spec.maxUnavailable", spec.get("maxUnavailable"))
    return errors


def _validate_pod_group_gated(spec: Obj) -> list[str]:
    """The gated fields, when served: `disruptionMode` one of Pod, PodGroup; `priority` within
    kube's bounds; `resourceClaims` at most 4, each naming exactly one of a claim and a template."""
    errors: list[str] = []
    mode = spec.get("disruptionMode")
    if mode not in (None, "Pod", "PodGroup"):
        errors.append(f'spec.disruptionMode: Unsupported value: {_show(mode)}: supported values: "Pod", "PodGroup"')
    priority = spec.get("priority")
    if priority is not None and isinstance(priority, int) and priority > HIGHEST_USER_PRIORITY:
        errors.append(f"spec.priority: Invalid value: {priority}: must be less than or equal to "
                      f"{HIGHEST_USER_PRIORITY}")
    claims = spec.get("resourceClaims") or []
    if len(claims) > 4:
        errors.append(f"spec.resourceClaims: Too many: {len(claims)}: must have at most 4 items")
    for i, claim in enumerate(claims):
        chosen = [k for k in ("resourceClaimName", "resourceClaimTemplateName")
                  if isinstance(claim, dict) and claim.get(k) is not None]
        if not chosen:
            errors.append(f'spec.resourceClaims[{i}]: Invalid value: "": must specify one of: '
                          "`resourceClaimName`, `resourceClaimTemplateName`")
        elif len(chosen) > 1:
            errors.append(f'spec.resourceClaims[{i}]: Invalid value: "{{resourceClaimName, '
                          'resourceClaimTemplateName}": must specify exactly one of: `resourceClaimName`, '
                          "`resourceClaimTemplateName`")
    return errors


def _validate_pod_group(obj: Obj) -> list[str]:
    """spec.schedulingPolicy: exactly one of basic and gang, a gang's minCount >= 1 (0, the zero
    value, reads as absent), with v1.36.2's messages."""
    policy = (obj.get("spec") or {}).get("schedulingPolicy")
    if not isinstance(policy, dict):
        policy = {}
    chosen = [key for key in ("basic", "gang") if policy.get(key) is not None]
    if not chosen:
        return ['spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`']
    if len(chosen) > 1:
        return ['spec.schedulingPolicy: Invalid value: "{basic, gang}": must specify exactly one of: '
                '`basic`, `gang`']
    errors = _validate_pod_group_gated(obj.get("spec") or {})
    if errors:
        return errors
    if chosen == ["gang"]:
        count = (policy["gang"] or {}).get("minCount") if isinstance(policy["gang"], dict) else None
        if not count:
            return ["spec.schedulingPolicy.gang.minCount: Required value"]
        if isinstance(count, bool) or not isinstance(count, int):
            return [f"spec.schedulingPolicy.gang.minCount: Invalid value: {_show(count)}: must be an integer"]
        if count < 1:
            return [f"spec.schedulingPolicy.gang.minCount: Invalid value: {count}: must be greater than "
                    f"or equal to 1"]
    return []


def _validate_priority_class(obj: Obj) -> list[str]:
    errors: list[str] = []
    name = obj["metadata"].get("name", "")
    value = obj.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(f"value: Invalid value: {_show(value)}: must be an integer")
    elif name.startswith("system-"):
        known = SYSTEM_PRIORITY_CLASSES.get(name)
        if known is None or known[0] != value or obj.get("globalDefault"):
            why = (f"name {name} is not a known system priority class" if known is None else
                   f"value of {name} PriorityClass must be {known[0]}")
            errors.append(f"metadata.name: Forbidden: priority class names with 'system-' prefix "
                          f"are reserved for system use only. error: {why}")
    elif value > HIGHEST_USER_PRIORITY:
        errors.append(f"value: Forbidden: maximum allowed value of a user defined priority is "
                      f"{HIGHEST_USER_PRIORITY}")
    policy = obj.get("preemptionPolicy")
    if policy not in (None, "PreemptLowerPriority", "Never"):
        errors.append(f'preemptionPolicy: Unsupported value: {_show(policy)}: supported values: '
                      f'"Never", "PreemptLowerPriority"')
    return errors


def _validate_csinode(obj: Obj) -> list[str]:
    errors: list[str] = []
    for idx, driver in enumerate((obj.get("spec") or {}).get("drivers") or []):
        for field in ("name", "nodeID"):
            if not driver.get(field):
                errors.append(f"spec.drivers[{idx}].{field}: Required value")
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None and (not isinstance(count, int) or count < 0):
            errors.append(f"spec.drivers[{idx}].allocatable.count: Invalid value: {_show(count)}: "
                          f"must be greater than or equal to 0")
    return errors


_VALIDATORS: dict[str, Callable[[Obj], list[str]]] = {
    "Service": _validate_service,
    "PersistentVolumeClaim": _validate_pvc,
    "PersistentVolume": _validate_pv,
    "ReplicaSet": _validate_workload,
    "StatefulSet": _validate_workload,
    "StorageClass": _validate_storage_class,
    "PodDisruptionBudget": _validate_pdb,
    "PriorityClass": _validate_priority_class,
    "CSINode": _validate_csinode,
    "PodGroup": _validate_pod_group,
}


def validate(kind: str, obj: Obj) -> list[str]:
    """The validation errors of an object (empty if valid or the kind is not checked here)."""
    fn = _VALIDATORS.get(kind)
    return fn(obj) if fn is not None else []


# --- updates --------------------------------------------------------------------------------

def prepare_update(kind: str, old: Obj, new: Obj, now: str) -> None:
    """What a strategy carries over from the old object (``new`` must be owned)."""
    if kind == "Service":
        ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
        if ospec.get("clusterIP") and not nspec.get("clusterIP"):
            nspec = _own(new, "spec")
            for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if field in ospec:
                    nspec.setdefault(field, ospec[field])
    elif kind == "PersistentVolume":
        ostatus, nstatus = old.get("status") or {}, new.get("status") or {}
        stamp = ostatus.get("lastPhaseTransitionTime")
        if (ostatus.get("phase") != nstatus.get("phase")
                and nstatus.get("lastPhaseTransitionTime") in (None, stamp)):
            _own(new, "status")["lastPhaseTransitionTime"] = now


def _masked(spec: Obj, drop: Callable[[str], bool]) -> Obj:
    return {k: v for k, v in spec.items() if not drop(k)}


def validate_update(kind: str, old: Obj, new: Obj) -> list[str]:
    """Errors for fields a (non-status) update may not change."""
    errors: list[str] = []
    ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
    if kind == "Service":
        if ospec.get("clusterIP") and nspec.get("clusterIP") != ospec.get("clusterIP"):
            errors.append(f"spec.clusterIPs[0]: Invalid value: {_show(nspec.get('clusterIP'))}: "
                          f"may not change once set")
    elif kind == "PersistentVolumeClaim":
        bound = (new.get("status") or {}).get("phase") == "Bound"

        def pvc_drop(key: str) -> bool:
            return (key == "volumeAttributesClassName"
                    or (key == "volumeName" and not ospec.get("volumeName"))
                    or (key == "storageClassName" and ospec.get("storageClassName") is None)
                    or (key == "resources" and bound))
        if _masked(ospec, pvc_drop) != _masked(nspec, pvc_drop):
            errors.append("spec: Forbidden: spec is immutable after creation except "
                          "resources.requests and volumeAttributesClassName for bound claims")
    elif kind == "PersistentVolume":
        def source(spec: Obj) -> Obj:
            return _masked(spec, lambda k: k in PV_SPEC_FIELDS)
        if source(ospec) != source(nspec):
            errors.append("spec.persistentvolumesource: Forbidden: spec.persistentvolumesource "
                          "is immutable after creation")
        if ospec.get("volumeMode") != nspec.get("volumeMode"):
            errors.append(f"spec.volumeMode: Invalid value: {_show(nspec.get('volumeMode'))}: "
                          f"field is immutable")
        if ospec.get("nodeAffinity") is not None and ospec["nodeAffinity"] != nspec.get(
                "nodeAffinity"):
            errors.append("spec.nodeAffinity: Invalid value: field is immutable")
    elif kind in ("ReplicaSet", "StatefulSet"):
        if ospec.get("selector") != nspec.get("selector"):
            errors.append(f"spec.selector: Invalid value: {_show(nspec.get('selector'))}: field "
                          f"is immutable")
        elif kind == "StatefulSet" and (_masked(ospec, STS_MUTABLE_SPEC.__contains__)
                                        != _masked(nspec, STS_MUTABLE_SPEC.__contains__)):
            errors.append("spec: Forbidden: updates to statefulset spec for fields other than "
                          "'replicas', 'ordinals', 'template', 'updateStrategy', "
                          "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                          "forbidden")
    elif kind == "StorageClass":
        for field in ("parameters", "provisioner", "reclaimPolicy"):
            if old.get(field) != new.get(field):
                errors.append(f"{field}: Forbidden: updates to {field} are forbidden.")
        if old.get("volumeBindingMode") != new.get("volumeBindingMode"):
            errors.append(f"volumeBindingMode: Invalid value: "
                          f"{_show(new.get('volumeBindingMode'))}: field is immutable")
    elif kind == "PodGroup":
        for field in ("schedulingPolicy", *PODGROUP_IMMUTABLE):
            if ospec.get(field) != nspec.get(field):
                errors.append(f"spec.{field}: Invalid value: {_show(nspec.get(field))}: field is immutable")
    elif kind == "PriorityClass":
        if old.get("value") != new.get("value"):
            errors.append("value: Forbidden: may not be changed in an update.")
        if old.get("preemptionPolicy") != new.get("preemptionPolicy"):
            errors.append(f"preemptionPolicy: Invalid value: {_show(new.get('preemptionPolicy'))}"
                          f": field is immutable")
    return errors


def node_affinity(terms: dict[str, Any] | None) -> Obj | None:
    """``{key: [values]}`` as a PV's ``nodeAffinity`` (one required term, one In per key)."""
    if not terms:
        return None
    exprs = [{"key": key, "operator": "In",
              "values": [values] if isinstance(values, str) else list(values)}
             for key, values in terms.items()]
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
