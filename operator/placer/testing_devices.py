"""Builders for Dynamic Resource Allocation tests: `resource.k8s.io/v1` objects as Kubernetes-shaped
dicts (DeviceClass, ResourceSlice, ResourceClaim) and pods that name claims, after kube's test
helpers (`st.MakeResourceClaim`, the allocator tests' `class`, `sliceWithDevices`, `request`, ...).

    cluster = cluster_of([node("worker")], objects=[
        device_class("gpu", 'device.driver == "gpu.example.com"'),
        resource_slice("worker-gpus", "gpu.example.com", node="worker", devices=[device("gpu-0")]),
        resource_claim("my-claim", requests=[request("req-1", "gpu")]),
    ])
    pod = claim_pod("my-pod", claims={"gpu": "my-claim"})

Nothing here is used by the scheduler itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from placer.testing import pod as plain_pod

__all__ = [
    "allocation",
    "attribute",
    "capacity_policy",
    "claim_pod",
    "device",
    "device_class",
    "first_available",
    "request",
    "resource_claim",
    "resource_slice",
    "sub_request",
]

Obj = dict[str, Any]
API = "resource.k8s.io/v1"


def _selectors(expressions: Iterable[str | None]) -> list[Obj]:
    return [{} if e is None else {"cel": {"expression": e}} for e in expressions]


def device_class(name: str, *selectors: str | None, config: Sequence[Obj] = (), extended: str | None = None) -> Obj:
    """A DeviceClass with CEL selectors (None: a selector of an unknown type)."""
    spec: Obj = {}
    if selectors:
        spec["selectors"] = _selectors(selectors)
    if config:
        spec["config"] = [dict(c) for c in config]
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def attribute(value: int | bool | str, version: bool = False) -> Obj:
    if version:
        return {"version": value}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def device(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    capacity: Mapping[str, str | Obj] | None = None,
    *,
    taints: Sequence[Obj] = (),
    node_name: str | None = None,
    node_selector: Obj | None = None,
    all_nodes: bool = False,
    consumes: Sequence[tuple[str, Mapping[str, str]]] = (),
    binding_conditions: Sequence[str] = (),
    binding_failure_conditions: Sequence[str] = (),
    binds_to_node: bool | None = None,
    multiple: bool = False,
) -> Obj:
    """A device; `attributes` values are raw attribute objects or plain values (see `attribute`);
    `capacity` values are quantities, or whole `DeviceCapacity` objects (see `capacity_policy`);
    `multiple`: `allowMultipleAllocations` (a device shared by several claims)."""
    out: Obj = {"name": name}
    if attributes:
        out["attributes"] = {k: v if isinstance(v, dict) else attribute(v) for k, v in attributes.items()}
    if capacity:
        out["capacity"] = {k: dict(v) if isinstance(v, Mapping) else {"value": v} for k, v in capacity.items()}
    if multiple:
        out["allowMultipleAllocations"] = True
    if binding_failure_conditions:
        out["bindingFailureConditions"] = list(binding_failure_conditions)
    if binds_to_node is not None:
        out["bindsToNode"] = binds_to_node
    if taints:
        out["taints"] = [dict(t) for t in taints]
    if node_name:
        out["nodeName"] = node_name
    if node_selector is not None:
        out["nodeSelector"] = node_selector
    if all_nodes:
        out["allNodes"] = True
    if consumes:
        out["consumesCounters"] = [
            {"counterSet": s, "counters": {k: {"value": v} for k, v in c.items()}} for s, c in consumes
        ]
    if binding_conditions:
        out["bindingConditions"] = list(binding_conditions)
    return out


def capacity_policy(
    value: str, *, default: str | None = None, valid_values: Sequence[str] | None = None,
    minimum: str | None = None, maximum: str | None = None, step: str | None = None,
) -> Obj:
    """A device's capacity with a `requestPolicy` (a default, and `validValues` or a `validRange`)."""
    policy: Obj = {}
    if default is not None:
        policy["default"] = default
    if valid_values is not None:
        policy["validValues"] = list(valid_values)
    if minimum is not None or maximum is not None or step is not None:
        policy["validRange"] = {k: v for k, v in (("min", minimum), ("max", maximum), ("step", step)) if v is not None}
    return {"value": value, "requestPolicy": policy}


def resource_slice(
    name: str,
    driver: str,
    *,
    node: str | None = None,
    node_selector: Obj | None = None,
    all_nodes: bool = False,
    per_device: bool = False,
    pool: str | None = None,
    generation: int = 1,
    count: int = 1,
    devices: Sequence[Obj] = (),
    counters: Mapping[str, Mapping[str, str]] | None = None,
) -> Obj:
    """A ResourceSlice of `driver`'s devices in `pool` (default: the node's name, as drivers do)."""
    spec: Obj = {
        "driver": driver,
        "pool": {"name": pool or node or name, "generation": generation, "resourceSliceCount": count},
    }
    if node:
        spec["nodeName"] = node
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if all_nodes:
        spec["allNodes"] = True
    if per_device:
        spec["perDeviceNodeSelection"] = True
    if devices:
        spec["devices"] = [dict(d) for d in devices]
    if counters:
        spec["sharedCounters"] = [
            {"name": s, "counters": {k: {"value": v} for k, v in c.items()}} for s, c in counters.items()
        ]
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def request(
    name: str,
    device_class: str,
    count: int | None = None,
    *selectors: str | None,
    mode: str | None = None,
    admin_access: bool | None = None,
    tolerations: Sequence[Obj] = (),
    capacity: Mapping[str, str] | None = None,
) -> Obj:
    """A request for `count` (default 1) devices of a class (`mode="All"`: every matching one);
    `capacity`: what to take of a shared device's capacities (`capacity.requests`)."""
    exactly: Obj = {"deviceClassName": device_class}
    if mode:
        exactly["allocationMode"] = mode
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = _selectors(selectors)
    if admin_access is not None:
        exactly["adminAccess"] = admin_access
    if tolerations:
        exactly["tolerations"] = [dict(t) for t in tolerations]
    if capacity is not None:
        exactly["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": exactly}


def sub_request(
    name: str, device_class: str, count: int | None = None, *selectors: str | None, mode: str | None = None,
    tolerations: Sequence[Obj] = (), capacity: Mapping[str, str] | None = None,
) -> Obj:
    sub = request(name, device_class, count, *selectors, mode=mode, tolerations=tolerations, capacity=capacity)
    return {"name": name, **sub["exactly"]}


def first_available(name: str, *subs: Obj) -> Obj:
    return {"name": name, "firstAvailable": list(subs)}


def allocation(
    results: Sequence[tuple[str, str, str, str]], node: str | None = None, node_selector: Obj | None = None
) -> Obj:
    """`status.allocation`: (request, driver, pool, device) results, pinned to `node` or a selector."""
    out: Obj = {"devices": {"results": [
        {"request": r, "driver": d, "pool": p, "device": dev} for r, d, p, dev in results
    ]}}
    if node:
        out["nodeSelector"] = {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]}
    elif node_selector is not None:
        out["nodeSelector"] = node_selector
    return out


def resource_claim(
    name: str,
    *,
    namespace: str = "default",
    requests: Sequence[Obj] = (),
    constraints: Sequence[Obj] = (),
    config: Sequence[Obj] = (),
    owner: tuple[str, str] | None = None,
    uid: str | None = None,
    allocated: Obj | None = None,
    reserved_for: Sequence[tuple[str, str]] = (),
    deleting: bool = False,
    finalizers: Sequence[str] = (),
    resource_version: str = "1",
) -> Obj:
    """A ResourceClaim; `owner` is the controlling pod's (name, uid) (a template's claim),
    `reserved_for` the pods (name, uid) in `status.reservedFor`."""
    meta: Obj = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                 "resourceVersion": resource_version}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner[0], "uid": owner[1], "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2025-03-10T10:00:00Z"
    if finalizers:
        meta["finalizers"] = list(finalizers)
    devices: Obj = {"requests": [dict(r) for r in requests]}
    if constraints:
        devices["constraints"] = [dict(c) for c in constraints]
    if config:
        devices["config"] = [dict(c) for c in config]
    status: Obj = {}
    if allocated is not None:
        status["allocation"] = allocated
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved_for]
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": meta, "spec": {"devices": devices},
            "status": status}


def claim_pod(
    name: str,
    *,
    claims: Mapping[str, str] | None = None,
    templates: Mapping[str, str] | None = None,
    generated: Mapping[str, str | None] | None = None,
    uid: str | None = None,
    **kwargs: Any,
) -> Obj:
    """A pending pod (`placer.testing.pod`) with `spec.resourceClaims`: `claims` entry -> claim name,
    `templates` entry -> template name, `generated` entry -> the claim its status records for it."""
    out = plain_pod(name, uid=uid or f"uid-{name}", **kwargs)
    entries = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    entries += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    out["spec"]["resourceClaims"] = entries
    if generated is not None:
        out["status"]["resourceClaimStatuses"] = [
            {"name": k, **({"resourceClaimName": v} if v is not None else {})} for k, v in generated.items()
        ]
    return out
