"""The pod strategy of a v1.36 API server beyond what ``store.py`` does for every pod: pod-level
resources (defaulting, validation), scheduling gates (the ``SchedulingGated`` condition, removal
only, no binding while gated) and in-place resize (the ``pods/resize`` subresource).

References, in k8s.io/kubernetes v1.36: ``pkg/registry/core/pod/strategy.go``
(``applySchedulingGatedCondition``, ``dropNonResizeUpdates``), ``pkg/apis/core/v1/defaults.go``
(``defaultPodRequests``), ``pkg/apis/core/validation/validation.go`` (``validatePodResourceConsistency``,
``validateOnlyDeletedSchedulingGates``, ``ValidatePodResize``) and ``pkg/registry/core/pod/storage``
(the binding's refusal). Messages are the real ones. Everything here works on owned dicts and
copies sub-trees before writing into them: stored objects are shared snapshots.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from .capacity import parse_quantity
from .resources import Obj
from .versions import Features

GATED_REASON = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
SUPPORTED_POD_LEVEL = ("cpu", "memory")  # and hugepages-*
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def is_pod_level(name: str) -> bool:
    """``IsSupportedPodLevelResource``: cpu, memory and hugepages-*."""
    return name in SUPPORTED_POD_LEVEL or name.startswith("hugepages-")


def _requests(container: Obj) -> dict[str, Any]:
    return dict(((container.get("resources") or {}).get("requests")) or {})


def aggregate_container_requests(spec: Obj) -> dict[str, Fraction]:
    """``AggregateContainerRequests`` of the spec (sidecars counted as kube does)."""
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        for name, value in _requests(container).items():
            total[name] = total.get(name, Fraction(0)) + parse_quantity(value)
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        reqs = {k: parse_quantity(v) for k, v in _requests(container).items()}
        if container.get("restartPolicy") == "Always":
            for name, value in reqs.items():
                total[name] = total.get(name, Fraction(0)) + value
                sidecars[name] = sidecars.get(name, Fraction(0)) + value
            step = dict(sidecars)
        else:
            step = {k: reqs.get(k, Fraction(0)) + sidecars.get(k, Fraction(0))
                    for k in set(reqs) | set(sidecars)}
        for name, value in step.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    return total


def format_quantity(value: Fraction, binary: bool = False) -> str:
    """A quantity as ``resource.Quantity.String()`` prints a sum: ``2``, ``1500m``, ``384Mi``."""
    if binary and value.denominator == 1 and value:
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                               ("Mi", 2**20), ("Ki", 2**10)):
            if value % factor == 0:
                return f"{value // factor}{suffix}"
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{float(value):g}"


def _binary(*values: Any) -> bool:
    return any(str(v).endswith("i") for v in values)


# --- create ------------------------------------------------------------------------------------

def default_pod_requests(pod: Obj) -> None:
    """``defaultPodRequests``: once pod-level limits are set, pod-level requests default to the
    containers' aggregate (cpu, memory) and then to the pod-level limits."""
    spec = pod.get("spec") or {}
    resources = spec.get("resources")
    if not isinstance(resources, dict) or not resources.get("limits"):
        return
    requests = dict(resources.get("requests") or {})
    binary = {k: _binary(v) for k, v in (resources.get("limits") or {}).items()}
    for name, total in aggregate_container_requests(spec).items():
        if name not in requests and name in SUPPORTED_POD_LEVEL:
            requests[name] = format_quantity(total, binary.get(name, name == "memory"))
    for name, limit in resources["limits"].items():
        if name not in requests and is_pod_level(name):
            requests[name] = limit
    if requests:
        pod["spec"] = {**spec, "resources": {**resources, "requests": requests}}


def apply_scheduling_gated_condition(pod: Obj, now: str) -> None:
    """``applySchedulingGatedCondition``: a new pod with gates and no PodScheduled condition gets
    ``PodScheduled=False, reason=SchedulingGated``."""
    if not (pod.get("spec") or {}).get("schedulingGates"):
        return
    status = dict(pod.get("status") or {})
    conditions = list(status.get("conditions") or [])
    if any(c.get("type") == "PodScheduled" for c in conditions):
        return
    conditions.append({"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                       "lastTransitionTime": now, "reason": GATED_REASON,
                       "message": GATED_MESSAGE})
    status["conditions"] = conditions
    pod["status"] = status


def validate_pod(pod: Obj, features: Features) -> list[str]:
    """The v1.36 checks of a pod's gates and pod-level resources (create and update)."""
    spec = pod.get("spec") or {}
    errors: list[str] = []
    if "PodSchedulingReadiness" in features:
        errors += _validate_gates(spec.get("schedulingGates"))
    if "PodLevelResources" in features and isinstance(spec.get("resources"), dict):
        errors += _validate_pod_resources(spec)
    return errors


def validate_create(pod: Obj, features: Features) -> list[str]:
    """``ValidatePodCreate``'s part here: :func:`validate_pod`, and no nodeName while gated."""
    spec = pod.get("spec") or {}
    errors = validate_pod(pod, features)
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errors.append("spec.nodeName: Forbidden: cannot be set until all schedulingGates have "
                      "been cleared")
    return errors


def _validate_gates(gates: Any) -> list[str]:
    if gates is None:
        return []
    if not isinstance(gates, list):
        return [f"spec.schedulingGates: Invalid value: {_show(gates)}: must be a list"]
    errors: list[str] = []
    seen: set[str] = set()
    for index, gate in enumerate(gates):
        name = gate.get("name") if isinstance(gate, dict) else None
        path = f"spec.schedulingGates[{index}]"
        if not isinstance(name, str) or not _qualified(name):
            errors.append(f"{path}: Invalid value: {_show(name or '')}: name part must consist of "
                          "alphanumeric characters, '-', '_' or '.', and must start and end with "
                          "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                          "'123-abc', regex used for validation is "
                          "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
            continue
        if name in seen:
            errors.append(f'{path}: Duplicate value: "{name}"')
        seen.add(name)
    return errors


def _qualified(name: str) -> bool:
    """``ValidateQualifiedName``: an optional DNS-subdomain prefix and a name of up to 63."""
    prefix, _, short = name.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(short) <= 63 and bool(_QUALIFIED_NAME.match(short))


def _validate_pod_resources(spec: Obj) -> list[str]:
    """``validatePodResources``: supported names, requests <= limits, and the consistency with
    the containers (aggregate requests <= pod requests, each container limit <= pod limit)."""
    resources = spec["resources"]
    errors: list[str] = []
    if resources.get("claims") is not None:
        errors.append("spec.resources.claims: Forbidden: claims may not be set for Resources at "
                      "pod-level")
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    for kind, values in (("limits", limits), ("requests", requests)):
        for name in values:
            if not is_pod_level(name):
                errors.append(f'spec.resources.{kind}[{name}]: Unsupported value: "{name}": '
                              'supported values: "cpu", "hugepages-", "memory"')
    if errors:
        return errors
    try:
        parsed_limits = {k: parse_quantity(v) for k, v in limits.items()}
        parsed_requests = {k: parse_quantity(v) for k, v in requests.items()}
    except ValueError as err:
        return [f"spec.resources: Invalid value: {err}"]
    for name, value in parsed_requests.items():
        limit = parsed_limits.get(name)
        if limit is not None and value > limit:
            errors.append(f"spec.resources.requests: Invalid value: {_show(str(requests[name]))}: "
                          f"must be less than or equal to {name} limit of {limits[name]}")
    for name, total in sorted(aggregate_container_requests(spec).items()):
        if name in parsed_requests and total > parsed_requests[name]:
            errors.append(f"spec.resources.requests[{name}]: Invalid value: "
                          f"{_show(str(requests[name]))}: must be greater than or equal to "
                          f"aggregate container requests of "
                          f"{format_quantity(total, name == 'memory' or _binary(requests[name]))}")
    for index, container in enumerate(spec.get("containers") or []):
        for name, value in (((container.get("resources") or {}).get("limits")) or {}).items():
            if name in parsed_limits and parse_quantity(value) > parsed_limits[name]:
                errors.append(f"spec.resources.containers[{index}][{name}].limits: Invalid value: "
                              f'"{value}": must be less than or equal to pod limits of '
                              f"{limits[name]}")
    return errors


# --- update ------------------------------------------------------------------------------------

def validate_gate_update(old: Obj, new: Obj) -> list[str]:
    """``validateOnlyDeletedSchedulingGates``: gates may be removed, never added."""
    new_gates = (new.get("spec") or {}).get("schedulingGates") or []
    if not new_gates:
        return []
    old_names = {g.get("name") for g in (old.get("spec") or {}).get("schedulingGates") or []
                 if isinstance(g, dict)}
    return [f"spec.schedulingGates[{index}].name: Forbidden: only deletion is allowed, but found "
            f"new scheduling gate '{gate.get('name')}'"
            for index, gate in enumerate(new_gates)
            if isinstance(gate, dict) and gate.get("name") not in old_names]


def gated_mutable(old: Obj, new: Obj) -> tuple[Obj, list[str]]:
    """While a pod is gated, ``spec.nodeSelector`` may gain entries and the node affinity may
    change (kube also checks that required terms only narrow; here any change passes). Returns
    the new spec with both set back to the old ones, for the immutability comparison, and the
    nodeSelector errors."""
    ospec, nspec = old.get("spec") or {}, dict(new.get("spec") or {})
    if not ospec.get("schedulingGates"):
        return nspec, []
    errors: list[str] = []
    old_sel, new_sel = ospec.get("nodeSelector") or {}, nspec.get("nodeSelector") or {}
    if any(k not in new_sel or new_sel[k] != v for k, v in old_sel.items()):
        errors.append(f"spec.nodeSelector: Invalid value: {new_sel!r}: only additions to "
                      "spec.nodeSelector are allowed (no mutations or deletions)")
    if "nodeSelector" in ospec:
        nspec["nodeSelector"] = ospec["nodeSelector"]
    else:
        nspec.pop("nodeSelector", None)
    oaff, naff = ospec.get("affinity"), nspec.get("affinity")
    old_na = (oaff or {}).get("nodeAffinity")
    if old_na != (naff or {}).get("nodeAffinity"):
        if naff is None:
            nspec["affinity"] = {"nodeAffinity": old_na}
        elif oaff is None and not naff.get("podAffinity") and not naff.get("podAntiAffinity"):
            nspec.pop("affinity", None)
        else:
            naff = dict(naff)
            if old_na is None:
                naff.pop("nodeAffinity", None)
            else:
                naff["nodeAffinity"] = old_na
            nspec["affinity"] = naff
    return nspec, errors


# --- resize ------------------------------------------------------------------------------------

def resize_candidate(old: Obj, cand: Obj, features: Features) -> Obj:
    """``dropNonResizeUpdates``: the old pod with only the containers' resources and resize
    policies (and the pod-level resources) taken from the request; a change of the container
    list is kept as is for validation to refuse."""
    ospec, cspec = old.get("spec") or {}, cand.get("spec") or {}
    new = dict(old)
    spec = dict(ospec)
    for field in ("containers", "initContainers"):
        olds, news = ospec.get(field) or [], cspec.get(field) or []
        if len(olds) != len(news) or any(o.get("name") != n.get("name") for o, n in zip(olds, news, strict=False)):
            return {**old, "spec": cspec}
        if field == "initContainers" and not news:
            continue
        merged = []
        for o, n in zip(olds, news, strict=True):
            c = dict(o)
            for key in ("resources", "resizePolicy"):
                if key in n:
                    c[key] = n[key]
                else:
                    c.pop(key, None)
            merged.append(c)
        if field in ospec or merged:
            spec[field] = merged
    if "InPlacePodLevelResourcesVerticalScaling" in features:
        if "resources" in cspec:
            spec["resources"] = cspec["resources"]
        else:
            spec.pop("resources", None)
    new["spec"] = spec
    return new


def qos_class(spec: Obj) -> str:
    """``GetPodQOS`` from the spec (pod-level resources, when set, decide for cpu and memory)."""
    pod_res = spec.get("resources") if isinstance(spec.get("resources"), dict) else None
    if pod_res and any(is_pod_level(k) for k in {**(pod_res.get("requests") or {}),
                                                 **(pod_res.get("limits") or {})}):
        req = {k: parse_quantity(v) for k, v in (pod_res.get("requests") or {}).items()
               if k in SUPPORTED_POD_LEVEL}
        lim = {k: parse_quantity(v) for k, v in (pod_res.get("limits") or {}).items()
               if k in SUPPORTED_POD_LEVEL}
        if not any(req.values()) and not any(lim.values()):
            return "BestEffort"
        guaranteed = all(k in lim and lim[k] == req.get(k, lim[k]) for k in SUPPORTED_POD_LEVEL)
        return "Guaranteed" if guaranteed else "Burstable"
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = container.get("resources") or {}
        creq = {k: parse_quantity(v) for k, v in (res.get("requests") or {}).items()
                if k in SUPPORTED_POD_LEVEL and parse_quantity(v) != 0}
        clim = {k: parse_quantity(v) for k, v in (res.get("limits") or {}).items()
                if k in SUPPORTED_POD_LEVEL and parse_quantity(v) != 0}
        for k, v in creq.items():
            requests[k] = requests.get(k, Fraction(0)) + v
        for k, v in clim.items():
            limits[k] = limits.get(k, Fraction(0)) + v
        if set(clim) != set(SUPPORTED_POD_LEVEL):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(requests.get(k, limits[k]) == limits[k] for k in limits):
        return "Guaranteed"
    return "Burstable"


def validate_resize(old: Obj, new: Obj, features: Features) -> list[str]:
    """``ValidatePodResize``: same containers, no requests or limits removed, only cpu and memory
    changed, the QoS class kept, no resize of a pod-level-resources pod unless its feature is on."""
    ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
    errors: list[str] = []
    if qos_class(ospec) != qos_class(nspec):
        errors.append(f"spec: Invalid value: {_show(qos_class(nspec))}: Pod QOS Class may not "
                      "change as a result of resizing")

    def pod_level(spec: Obj) -> bool:
        res = spec.get("resources")
        return isinstance(res, dict) and bool({**(res.get("requests") or {}),
                                               **(res.get("limits") or {})})

    if (pod_level(ospec) or pod_level(nspec)) and (
            "InPlacePodLevelResourcesVerticalScaling" not in features):
        return [": Forbidden: resize of pods with pod-level resources is forbidden when "
                "InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled"]
    if pod_level(ospec) and not isinstance(nspec.get("resources"), dict):
        errors.append("spec.resources: Forbidden: pod-level resources cannot be removed")
    for field, label in (("containers", "containers"), ("initContainers", "initContainers")):
        olds, news = ospec.get(field) or [], nspec.get(field) or []
        if len(olds) != len(news):
            return [*errors, f"spec.{field}: Forbidden: {label} may not be added or removed "
                             "on resize"]
        for index, (o, n) in enumerate(zip(olds, news, strict=True)):
            if o.get("name") != n.get("name"):
                return [*errors, f"spec.{field}[{index}].name: Forbidden: {label} may not "
                                 "be renamed or reordered on resize"]
    for index, (o, n) in enumerate(zip(ospec.get("containers") or [],
                                                 nspec.get("containers") or [], strict=True)):
        ores, nres = o.get("resources") or {}, n.get("resources") or {}
        for kind in ("requests", "limits"):
            if set(ores.get(kind) or {}) - set(nres.get(kind) or {}):
                errors.append(f"spec.containers[{index}].resources.{kind}: Forbidden: resource "
                              f"{kind} cannot be removed")
        for kind in ("requests", "limits"):
            others_old = {k: v for k, v in (ores.get(kind) or {}).items() if k not in SUPPORTED_POD_LEVEL}
            others_new = {k: v for k, v in (nres.get(kind) or {}).items() if k not in SUPPORTED_POD_LEVEL}
            if others_old != others_new:
                errors.append("spec: Forbidden: only cpu and memory resources are mutable")
                return errors
    return errors
