"""Extended resources backed by a DeviceClass (kube v1.36's DRAExtendedResource, beta, on by default).

A pod may ask for an extended resource (`example.com/gpu: 1`) that no device plugin advertises: a
DeviceClass naming it in `spec.extendedResourceName` (or any class by its implicit name
`deviceclass.resource.kubernetes.io/<class>`) backs it. On a node whose allocatable lacks the
resource, NodeResourcesFit leaves it to DynamicResources, which allocates devices of that class
through a claim kube-scheduler makes for the pod: `<pod>-extended-resources-XXXXX`, annotated
`resource.kubernetes.io/extended-resource-claim: "true"`, owned by the pod, one `ExactCount`
request per container (`container-<i>-request-<j>`), with the mapping recorded in the pod's
`status.extendedResourceClaimStatus`. Here: which class backs a resource (kube's
`ExtendedResourceCache`), the claim's requests and mappings (`createRequestsAndMappings`), and its
name. A node that advertises the resource (allocatable > 0) gets it from the device plugin as before.

For the score (NodeResourcesFit, NodeResourcesBalancedAllocation: kube's
`calculateDRAExtendedResourceAllocatableRequest`), such a resource's allocatable on a node whose
allocatable lacks it is the number of devices of its class the node reaches through ResourceSlices,
and its requested the number of those that claims hold (`dra_totals`).
"""

from __future__ import annotations

import hashlib
import itertools
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState
from placer.engine.device_index import CLAIM, CLASS, SLICE, device_index
from placer.engine.devices import (
    EXACT_COUNT,
    EXTENDED_RESOURCE_CLAIM,
    DeviceClassInfo,
    DeviceRequest,
    ResourceClaimInfo,
    SubRequest,
)
from placer.engine.dra_cel import CelError
from placer.engine.node_selectors import term_mask
from placer.engine.objects import NodeSelectorTerm, PodInfo
from placer.engine.relations import ControllerRef

__all__ = [
    "DEVICE_CLASS_PREFIX",
    "ExtendedClaim",
    "backed_requests",
    "claim_name",
    "class_for",
    "dra_totals",
    "existing_claim",
    "is_dra_extended_resource_name",
    "requests_and_mappings",
    "special_claim",
]

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # kube's resourceapi.ResourceDeviceClassPrefix
# kube's names.SimpleNameGenerator: a generateName base cut to 58 characters, then 5 of these
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_BASE = 58


def is_dra_extended_resource_name(name: str) -> bool:
    """kube's `IsDRAExtendedResourceName`: an extended resource name (a domain other than
    kubernetes.io, not `requests.`), or an implicit `deviceclass.resource.kubernetes.io/<class>`."""
    if name.startswith(DEVICE_CLASS_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


# catalog -> (its DeviceClass version, resource name -> class); weak, so a catalog that is gone
# (and another that reuses its id) never sees a stale answer
_RESOLVED: weakref.WeakKeyDictionary[Catalog, tuple[int, dict[str, DeviceClassInfo]]] = weakref.WeakKeyDictionary()


def _resolver(catalog: Catalog) -> dict[str, DeviceClassInfo]:
    """kube's `ExtendedResourceCache.resourceName2class`: each class under its implicit name, and
    under its `extendedResourceName` — where several classes name the same, the newest
    (creationTimestamp) wins, the lower name on a tie."""
    version = catalog.version(CLASS)
    cached = _RESOLVED.get(catalog)
    if cached is not None and cached[0] == version:
        return cached[1]
    mapping: dict[str, DeviceClassInfo] = {}
    explicit: dict[str, DeviceClassInfo] = {}
    for _, name, klass in catalog.items(CLASS):
        mapping[DEVICE_CLASS_PREFIX + name] = klass
        resource = klass.extended_resource_name
        if resource:
            held = explicit.get(resource)
            newer = held is None or klass.created > held.created
            if newer or (held is not None and klass.created == held.created and klass.name < held.name):
                explicit[resource] = klass
    mapping.update(explicit)
    _RESOLVED[catalog] = (version, mapping)
    return mapping


def class_for(catalog: Catalog, resource: str) -> DeviceClassInfo | None:
    """The DeviceClass backing `resource` (kube's `DeviceClassResolver.GetDeviceClass`), if any."""
    if not catalog.count(CLASS):
        return None
    return _resolver(catalog).get(resource)


@dataclass(slots=True)
class _ClassDevices:
    """One class's devices as kube's scorer counts them, for one state of slices, classes and nodes."""

    allocatable: np.ndarray  # per slot: the class's devices listed for the node
    failed: np.ndarray  # per slot: a selector failed at run time on one of them (kube: 0 of 0)
    #: device -> the slots it is listed for: one slot (a node-local device) or a mask
    where: dict[Any, list[int | np.ndarray]]


# cluster -> (node layout, slice and class versions) and, per class name, its devices
_MATCHED: weakref.WeakKeyDictionary[ClusterState, tuple[tuple[int, int, int], dict[str, _ClassDevices]]] = (
    weakref.WeakKeyDictionary()
)


def _reach(cluster: ClusterState, node: str | None, all_nodes: bool,
           selector: tuple[NodeSelectorTerm, ...] | None) -> int | np.ndarray | None:
    """The node slots a slice (or, per device, a device) is listed for, as kube's scorer reads it:
    one slot (by node name), a mask (`allNodes`, a node selector), or None (no node)."""
    if all_nodes:
        return np.ones(cluster.size, dtype=bool)
    if selector is not None:
        mask = np.zeros(cluster.size, dtype=bool)
        for term in selector:
            mask |= term_mask(cluster, term)
        if node and node in cluster.index:
            mask[cluster.index[node]] = True
        return mask if mask.any() else None
    return cluster.index.get(node) if node else None


def _class_devices(cluster: ClusterState, klass: DeviceClassInfo) -> _ClassDevices:
    """kube's `calculateDRAResourceTotals` but the allocated count: every device of every
    ResourceSlice that the class's CEL selectors accept (all of them for a class without any; a
    selector of another type is skipped) counted on the nodes it is listed for; and the slots where
    a selector failed at run time. Kept until slices, classes or nodes change."""
    catalog = cluster.catalog
    versions = (cluster.static_version, catalog.version(SLICE), catalog.version(CLASS))
    cached = _MATCHED.get(cluster)
    if cached is None or cached[0] != versions:
        cached = _MATCHED[cluster] = (versions, {})
    found = cached[1].get(klass.name)
    if found is not None:
        return found
    index = device_index(cluster)
    allocatable = np.zeros(cluster.size, dtype=np.int64)
    failed = np.zeros(cluster.size, dtype=bool)
    where: dict[Any, list[int | np.ndarray]] = {}
    expressions = [e for e in klass.selectors if e is not None]
    for _, _, slice_ in catalog.items(SLICE):
        shared = None if slice_.per_device else _reach(cluster, slice_.node_name, slice_.all_nodes,
                                                       slice_.node_selector)
        for device in slice_.devices:
            nodes = shared if not slice_.per_device else _reach(cluster, device.node_name, device.all_nodes,
                                                                device.node_selector)
            if nodes is None:
                continue
            try:
                matches = all(index.matcher(expression, device) for expression in expressions)
            except CelError:
                failed[nodes] = True
                continue
            if matches:
                allocatable[nodes] += 1
                where.setdefault((slice_.driver, slice_.pool, device.name), []).append(nodes)
    found = cached[1][klass.name] = _ClassDevices(allocatable, failed, where)
    return found


def dra_totals(cluster: ClusterState, resource: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(allocatable, allocated) per node slot of an extended resource a DeviceClass backs (kube's
    `calculateDRAExtendedResourceAllocatableRequest`): the devices of the class listed for the node
    (a device of a shared pool counts on every node it is listed for), and those of them a claim
    holds — allocated or assumed by this scheduler, admin access aside, a shared (consumable
    capacity) allocation counting the device as held. None when no class backs the resource."""
    klass = class_for(cluster.catalog, resource) if is_dra_extended_resource_name(resource) else None
    if klass is None:
        return None
    devices = _class_devices(cluster, klass)
    index = device_index(cluster)
    held = index.state  # kube's IsDeviceAllocated: held whole, or shares of it taken
    allocated = np.zeros(cluster.size, dtype=np.int64)
    candidates = (itertools.chain(index.allocated, index.shares)
                  if len(index.allocated) + len(index.shares) < len(devices.where) else devices.where)
    for device_id in set(candidates):
        if device_id in devices.where and held.holds(device_id):
            for nodes in devices.where[device_id]:
                allocated[nodes] += 1
    allocatable = devices.allocatable.copy()
    allocatable[devices.failed] = 0
    allocated[devices.failed] = 0
    return allocatable, allocated


def backed_requests(pod: PodInfo, catalog: Catalog) -> dict[str, int]:
    """The pod's requests of extended resources a DeviceClass backs ({} for nearly every pod)."""
    if not pod.extended_containers or not catalog.count(CLASS):
        return {}
    resolver = _resolver(catalog)
    return {name: amount for name, amount in pod.fit_requests.items()
            if amount > 0 and name in resolver and is_dra_extended_resource_name(name)}


def claim_name(pod: PodInfo) -> str:
    """The special claim's name: kube's generateName `<pod>-extended-resources-` (cut to 58
    characters) plus 5 characters — derived from the pod's UID here rather than random, so a
    retried create recognises the claim it made."""
    base = f"{pod.name}-extended-resources-"[:_MAX_GENERATED_BASE]
    digest = hashlib.sha256(f"{pod.namespace}/{pod.name}/{pod.uid}".encode()).digest()
    return base + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:5])


def existing_claim(pod: PodInfo, catalog: Catalog) -> ResourceClaimInfo | None:
    """kube's `findExtendedResourceClaim`: the annotated claim the pod controls, from an earlier
    attempt (or this scheduler's own, assumed)."""
    if not pod.uid:
        return None
    for claim in catalog.in_namespace(CLAIM, pod.namespace).values():
        if claim.extended and claim.controller is not None and claim.controller.uid == pod.uid \
                and claim.controller.name == pod.name:
            return claim
    return None


@dataclass(frozen=True, slots=True)
class ExtendedClaim:
    """The special claim for one set of resources (per node, those no device plugin provides there)."""

    claim: ResourceClaimInfo
    mappings: tuple[Mapping[str, str], ...]  # status.extendedResourceClaimStatus.requestMappings

    def body(self) -> dict[str, Any]:
        """The ResourceClaim kube-scheduler POSTs (without its allocation: the status comes after)."""
        claim = self.claim
        assert claim.controller is not None
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": claim.name,
                "generateName": claim.name[:-5],
                "namespace": claim.namespace,
                "annotations": {EXTENDED_RESOURCE_CLAIM: "true"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": claim.controller.name,
                                     "uid": claim.controller.uid, "controller": True}],
            },
            "spec": {"devices": {"requests": [
                {"name": r.name, "exactly": {"deviceClassName": r.exactly.device_class,
                                             "allocationMode": EXACT_COUNT, "count": r.exactly.count}}
                for r in claim.requests if r.exactly is not None
            ]}},
        }


def requests_and_mappings(
    pod: PodInfo, resources: Mapping[str, int], resolve: Callable[[str], DeviceClassInfo | None]
) -> tuple[tuple[DeviceRequest, ...], tuple[dict[str, str], ...]]:
    """kube's `createRequestsAndMappings`: per resource (sorted), a request per long-lived container
    (containers and sidecars) asking for it, `container-<i>-request-<j>` (i: the container's index in
    initContainers + containers, j: the resource's index among its sorted requests); plain init
    containers reuse later long-lived requests and add one request, the largest of theirs, for the
    rest. Requests are sorted by name; mappings list long-lived containers' first. `resolve` gives
    a resource's class (`class_for`); a resource without one is skipped."""
    requests: list[DeviceRequest] = []
    mappings: list[dict[str, str]] = []
    containers = pod.extended_containers
    for resource in sorted(resources):
        klass = resolve(resource)
        if klass is None:
            continue
        long_lived: dict[int, DeviceRequest] = {}  # container index -> its request
        long_mappings: list[dict[str, str]] = []
        for c in containers:
            if c.long_lived:
                request, found = _container_request(c, resource, klass.name, [])
                if request is not None:
                    long_lived[c.index] = request
                long_mappings.extend(found)
        biggest: DeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for c in containers:
            if c.long_lived:
                continue
            reusable = [r for i, r in sorted(long_lived.items()) if i >= c.index]
            request, found = _container_request(c, resource, klass.name, reusable)
            if request is not None:
                short_names.add(request.name)
                assert request.exactly is not None
                if biggest is None or (biggest.exactly is not None and biggest.exactly.count < request.exactly.count):
                    biggest = request
            short_mappings.extend(found)
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest.name)
            for m in short_mappings:
                if m["requestName"] in short_names:
                    m["requestName"] = biggest.name
        if biggest is not None:
            requests.append(biggest)
        requests.extend(long_lived[i] for i in sorted(long_lived))
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: r.name)
    return tuple(requests), tuple(mappings)


def _container_request(
    container: Any, resource: str, class_name: str, reusable: list[DeviceRequest]
) -> tuple[DeviceRequest | None, list[dict[str, str]]]:
    """kube's `createResourceRequestAndMappings` for one container."""
    amount = container.requests.get(resource, 0)
    if amount <= 0:
        return None, []
    found: list[dict[str, str]] = []
    total = 0
    for request in reusable:
        assert request.exactly is not None
        total += request.exactly.count
        found.append({"containerName": container.name, "resourceName": resource, "requestName": request.name})
        if total >= amount:
            return None, found
    index = container.request_names.index(resource) if resource in container.request_names else 0
    name = f"container-{container.index}-request-{index}"
    found.append({"containerName": container.name, "resourceName": resource, "requestName": name})
    sub = SubRequest(name=name, device_class=class_name, mode=EXACT_COUNT, count=amount - total)
    return DeviceRequest(name, exactly=sub), found


def special_claim(pod: PodInfo, requests: tuple[DeviceRequest, ...]) -> ResourceClaimInfo:
    """The claim kube-scheduler keeps in memory until PreBind creates it (`<extended-resources>`),
    under the name it will be created with."""
    return ResourceClaimInfo(
        namespace=pod.namespace, name=claim_name(pod),
        controller=ControllerRef("v1", "Pod", pod.name, pod.uid), requests=requests, extended=True,
    )
