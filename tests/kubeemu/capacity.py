"""Quantity parsing and the capacity audit: no node may hold more requests than it can.

Computed independently of Placer's engine (exact fractions, kube-scheduler's request
formula), so that integration tests check the scheduler against a second opinion.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

Obj = dict[str, Any]

_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def parse_quantity(value: Any) -> Fraction:
    """Parse a Kubernetes quantity (``100m``, ``1.5Gi``, ``2e3``, ``4``) exactly."""
    if isinstance(value, (int, float)):
        return Fraction(value)
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"invalid quantity: {value!r}")
    number, suffix = match.groups()
    if suffix[:1] in ("e", "E"):
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    if suffix not in _SUFFIXES:
        raise ValueError(f"invalid quantity suffix: {value!r}")
    return Fraction(number) * _SUFFIXES[suffix]


def _container_requests(container: Obj) -> dict[str, Fraction]:
    """Requests of one container; limits stand in for absent requests (API defaulting)."""
    res = container.get("resources") or {}
    merged = dict(res.get("limits") or {})
    merged.update(res.get("requests") or {})
    return {k: parse_quantity(v) for k, v in merged.items()}


def _parsed(values: Any) -> dict[str, Fraction]:
    return {k: parse_quantity(v) for k, v in (values or {}).items()}


def _add(into: dict[str, Fraction], more: dict[str, Fraction]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, Fraction(0)) + value


def _max(into: dict[str, Fraction], other: dict[str, Fraction]) -> None:
    for key, value in other.items():
        if value > into.get(key, Fraction(0)):
            into[key] = value


def _resize_infeasible(pod: Obj) -> bool:
    """``IsPodResizeInfeasible``: the first PodResizePending condition says Infeasible."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodResizePending":
            return condition.get("reason") == "Infeasible"
    return False


def _effective(spec: dict[str, Fraction], actual: dict[str, Fraction],
               allocated: dict[str, Fraction], infeasible: bool) -> dict[str, Fraction]:
    """``determineEffectiveRequests``: while a resize is pending or in progress, the largest of
    what the spec asks, what is allocated and what runs; an infeasible resize leaves the spec out."""
    out: dict[str, Fraction] = {}
    for part in ((actual, allocated) if infeasible else (spec, actual, allocated)):
        _max(out, part)
    return out


def pod_requests(pod: Obj) -> dict[str, Fraction]:
    """A pod's effective requests, as kube-scheduler v1.36 computes them (``PodRequests`` of
    component-helpers/resource with the status resources on).

    Regular containers add up; each init container needs its own requests plus the restartable
    (sidecar) init containers started before it; sidecars also add to the running total; the
    pod needs the max of both. A container (or sidecar) whose status reports ``resources`` counts
    the largest of its spec, ``allocatedResources`` and ``resources`` (an ``Infeasible`` resize:
    of the last two). Pod-level requests (cpu, memory, hugepages-*), when set, replace the
    containers' figure for those resources (with the same resize rule against
    ``status.allocatedResources``/``status.resources``). Overhead is added on top; ``pods`` is 1.
    """
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    infeasible = _resize_infeasible(pod)
    statuses = {cs.get("name"): cs for field in ("containerStatuses", "initContainerStatuses")
                for cs in status.get(field) or [] if isinstance(cs, dict)}

    def effective(container: Obj) -> dict[str, Fraction]:
        reqs = _container_requests(container)
        cs = statuses.get(container.get("name"))
        if cs is None or cs.get("resources") is None:
            return reqs
        return _effective(reqs, _parsed((cs.get("resources") or {}).get("requests")),
                          _parsed(cs.get("allocatedResources")), infeasible)

    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        _add(total, effective(container))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        if container.get("restartPolicy") == "Always":
            reqs = effective(container)
            _add(total, reqs)
            _add(sidecars, reqs)
            _max(init_peak, sidecars)
        else:
            step = _container_requests(container)
            _add(step, sidecars)
            _max(init_peak, step)
    _max(total, init_peak)
    pod_level = {k: v for k, v in _parsed((spec.get("resources") or {}).get("requests")).items()
                 if k in ("cpu", "memory") or k.startswith("hugepages-")}
    if pod_level:
        if status.get("resources") is not None:
            found = _effective(pod_level, _parsed((status.get("resources") or {}).get("requests")),
                               _parsed(status.get("allocatedResources")), infeasible)
            pod_level = {k: found.get(k, Fraction(0)) for k in pod_level}
        total.update(pod_level)
    overhead = {k: parse_quantity(v) for k, v in (spec.get("overhead") or {}).items()}
    _add(total, overhead)
    total["pods"] = Fraction(1)
    return {k: v for k, v in total.items() if v > 0}


@dataclasses.dataclass(frozen=True)
class CapacityViolation:
    """One node over its allocatable for one resource."""

    node: str
    resource: str
    requested: Fraction
    allocatable: Fraction
    pods: tuple[str, ...]

    def __str__(self) -> str:
        return (f"node {self.node}: {self.resource} requested {float(self.requested):g} > "
                f"allocatable {float(self.allocatable):g} ({len(self.pods)} pods)")


def audit_capacity(nodes: Iterable[Obj], pods: Iterable[Obj]) -> list[CapacityViolation]:
    """Every (node, resource) whose bound, non-terminal pods request more than allocatable.

    Pods bound to nodes that do not exist are reported against allocatable 0.
    """
    allocatable: dict[str, dict[str, Fraction]] = {}
    for node in nodes:
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        allocatable[node["metadata"]["name"]] = {k: parse_quantity(v) for k, v in alloc.items()}
    used: dict[str, dict[str, Fraction]] = {}
    members: dict[str, list[str]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        _add(used.setdefault(node_name, {}), pod_requests(pod))
        meta = pod["metadata"]
        members.setdefault(node_name, []).append(f"{meta.get('namespace')}/{meta['name']}")
    out: list[CapacityViolation] = []
    for node_name in sorted(used):
        alloc = allocatable.get(node_name, {})
        for resource in sorted(used[node_name]):
            requested = used[node_name][resource]
            limit = alloc.get(resource, Fraction(0))
            if requested > limit:
                out.append(CapacityViolation(node_name, resource, requested, limit,
                                             tuple(sorted(members[node_name]))))
    return out
