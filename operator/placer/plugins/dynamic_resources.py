"""DynamicResources — a pod's ResourceClaims (Dynamic Resource Allocation, `resource.k8s.io/v1`), as
kube-scheduler v1.36's plugin of that name: the scheduler allocates the devices.

Pod-level (kube's PreEnqueue and PreFilter), each making the pod unschedulable on every node with
kube's words:

- its claims: `spec.resourceClaims[].resourceClaimName`, or for a `resourceClaimTemplateName` the
  claim recorded in `status.resourceClaimStatuses` — `pod "NS/NAME": ResourceClaim not created yet`
  while there is none; a claim that does not exist — `could not find ResourceClaim "NS/NAME"`;
  one being deleted — `resourceclaim "NAME" is being deleted`; a template's claim the pod does not
  control — `ResourceClaim NS/NAME was not created for Pod NS/POD (Pod is not owner)`;
- an unallocated claim another pod's allocation is in flight for — `resource claim NS/NAME is in
  the process of being allocated`; a request naming a DeviceClass that does not exist —
  `request NAME: device class CLASS does not exist`;
- an error kube's allocator reports (it aborts the attempt there): a CEL runtime error
  (`claim NS/NAME: selector #0: CEL runtime error: no such key: model`), a request over the
  32-device limit, `allocationMode: All` over a pool being updated, ...

On an API server that does not serve `resource.k8s.io/v1` (older than v1.34; the operator's LIST
of ResourceClaims got a 404) a pod with claims is not scheduled either — `pod "NS/NAME": its
ResourceClaims cannot be read: this API server does not serve resource.k8s.io/v1 (Kubernetes v1.34
or later)` — rather than bound as if it had none.

Per node (kube's Filter), both UnschedulableAndUnresolvable (preemption cannot help):

- an allocated claim's `status.allocation.nodeSelector` must admit the node — "resourceclaim not
  available on the node";
- the unallocated claims must be allocatable together from the devices the node reaches
  (`placer.engine.allocator`: classes' and requests' CEL selectors, `count`, `allocationMode: All`,
  `matchAttribute` and `distinctAttribute` constraints, `firstAvailable` alternatives, device taints
  and the requests' tolerations, devices other claims hold or this scheduler assumed unavailable,
  shares of devices with `allowMultipleAllocations` within their capacity) — "cannot allocate all
  claims" ("invalid resource pools were encountered" when a reachable pool is invalid);
- an allocated claim whose devices' binding failed (a failure condition True in `status.devices`)
  or timed out (600 s after `allocationTimestamp`, its binding conditions not all True) — "resourceclaim
  not available on the node", on every node: PostFilter then deallocates it.

Score (kube's): a node where a `firstAvailable` request gets an earlier alternative is better
(8 - index per request), normalised by the maximum.

Reserve: the devices chosen on the node are assumed in the catalog — the claim shows the allocation
(and kube's finalizer), marked in flight — so the next pod never gets them (nor the capacity its
shares consume: each share gets a fresh `shareID` here); Unreserve restores the claim. PreBind (the
operator, before binding the pod; kube's PreBindPreFlight says yes for any pod with claims, so the
binding cycle sets the pod's nominatedNodeName first): the finalizer
`resource.kubernetes.io/delete-protection`, then `status.allocation` (with `allocationTimestamp`)
and `status.reservedFor` (the pod), each with a precondition, undone if the binding fails — an
allocation with binding conditions excepted, as kube's Unreserve leaves it (`pre_bind`,
`prebind_writes`). When a device of the pod's claims has binding conditions, PreBind then posts
kube's Normal event `BindingConditionsPending` ("waiting for binding conditions for device on node
N") and waits until the driver reports them all True: a failure condition True fails it with
`device binding failed: claim=C, reason=R, message="M"`, 600 s after the allocation's
`allocationTimestamp` with `device binding timeout: claim=C` (`_bound`). `placer simulate` lists the
devices each placement allocates, a share's capacity used and left (`DeviceReservation.as_json`).

Extended resources backed by a DeviceClass (kube v1.36's DRAExtendedResource,
`placer.engine.extended_resources`): a pod's `example.com/gpu: 1` that a class names in
`extendedResourceName`, on a node whose allocatable lacks it, is allocated here through a special
claim (one request per container) with the pod's own claims — "cannot allocate all claims" when no
devices; "cannot fit resource" for a resource neither on the node nor backed; "cannot schedule
extended resource claim" while a special claim from an earlier attempt exists. PreBind creates the
claim (kube's `<pod>-extended-resources-XXXXX`, owned by the pod), writes its finalizer, allocation
and reservation, then the pod's `status.extendedResourceClaimStatus` (`extended_writes`); undone —
the claim deleted — if the binding fails.

PostFilter (no node fits; kube runs it before DefaultPreemption, and so does the default profile):
an allocated claim of the pod that is unavailable on a node every filter before this one passed (its
`allocation.nodeSelector` rejects the node, or its binding failed or timed out), reserved for nobody
or only for this pod, is deallocated — a status update
clearing `allocation`, `reservedFor` and `devices`, with the claim's resourceVersion as
precondition — "deallocation of ResourceClaim completed"; else a special claim of the pod's backed
extended resources left by an earlier attempt is deleted (its finalizer removed first) —
"deletion of ResourceClaim completed"; else "still not schedulable" ("no new claims to
deallocate" for a pod without claims, or one rejected before its claims were looked at). The
message joins DefaultPreemption's: `... no new claims to deallocate, preemption: 0/3 nodes are
available: ...`, as kube v1.36 words it (`post_filter`, `deallocation_writes`, `deletion_writes`).

A PodGroup's claims (kube v1.36's DRAWorkloadResourceClaims): a member's `spec.resourceClaims`
entry that matches one of its PodGroup's `spec.resourceClaims` exactly (name, and the same claim or
template) uses the group's claim, reserved for the PodGroup — `reservedFor: [{apiGroup:
scheduling.k8s.io, resource: podgroups, name, uid}]` (kube's `BindTo`) — never for the pod. The
first member of a group decision to need it allocates it; the members after it reuse that pending
allocation (kube's `podGroupStateData.pendingAllocations`): only the node must satisfy its node
selector. Once the claim is allocated and reserved for the group, a member needs no write at all.
A template's claim the PodGroup controls is accepted as the pod's (`neither Pod nor PodGroup X is
the owner` otherwise). Pods of one group sharing a claim of their own (reserved for pods) share its
pending allocation the same way (kube's group cycle does, whatever the gate): the members after the
first join `reservedFor` once the first member's allocation has landed. If a binding fails, a
PodGroup's reservation stays (kube's Unreserve leaves it: other members may use the claim).

Not modelled: kube's PostFilter taking a PodGroup out of its claims' `reservedFor` when none of its
pods is scheduled (the group decision runs no PostFilter); kube's `bindingTimeout` and
`filterTimeout` args (the binding timeout is kube's default, 600 s).

Args: none.

Example profile (the default profile has it as a filter and a score of weight 2)::

    spec:
      schedulerName: gpu-scheduler
      filters: [{name: NodeResourcesFit}, {name: DynamicResources}]
      scores: [{name: DynamicResources, weight: 2}, {name: NodeResourcesFit}]
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from placer.engine.allocator import (
    AllocationError,
    AllocationResult,
    Allocator,
    DeviceID,
    InvalidPools,
    single_request_result,
)
from placer.engine.cluster import ClusterState
from placer.engine.device_index import CLAIM, CLASS, SLICE, DeviceIndex, device_index
from placer.engine.devices import (
    ALLOCATION_RESULTS_MAX_SIZE,
    DELETE_PROTECTION,
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX_SIZE,
    POD_GROUP_API_GROUP,
    Allocation,
    ConsumerRef,
    DeviceClassInfo,
    DeviceResult,
    ResourceClaimInfo,
    StatusCondition,
    SubRequest,
)
from placer.engine.extended_resources import (
    ExtendedClaim,
    backed_requests,
    class_for,
    existing_claim,
    is_dra_extended_resource_name,
    requests_and_mappings,
    special_claim,
)
from placer.engine.framework import (
    BATCH_NONE,
    JSON_PATCH,
    UNSIGNABLE,
    ClusterEvent,
    FilterPlugin,
    NoArgs,
    Notice,
    ObjectRef,
    PostFilterContext,
    PostFilterPlugin,
    PostFilterWrites,
    PreBind,
    PreBindError,
    PreBindPlugin,
    ReservePlugin,
    ScorePlugin,
    WaitFor,
    Write,
    default_normalize,
)
from placer.engine.groups import POD_GROUP_KIND, GroupRef, PodGroupInfo, group_of, lookup
from placer.engine.node_selectors import term_mask
from placer.engine.objects import PodInfo
from placer.engine.quantity import Quantity

__all__ = [
    "CANNOT_ALLOCATE",
    "NOT_AVAILABLE",
    "ClaimReservation",
    "DeviceReservation",
    "DynamicResources",
    "capacity_usage",
    "claim_object",
    "claimed_devices",
    "deallocation_writes",
    "deletion_writes",
    "extended_writes",
    "prebind_writes",
    "release_pod",
    "settle",
]

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
INVALID_POOLS = "invalid resource pools were encountered"
CANNOT_FIT = "cannot fit resource"
STALE_EXTENDED = "cannot schedule extended resource claim"
# the PostFilter's statuses (kube's words)
NO_CLAIMS = "no new claims to deallocate"
DEALLOCATED = "deallocation of ResourceClaim completed"
DELETED = "deletion of ResourceClaim completed"
STILL_UNSCHEDULABLE = "still not schedulable"
# a node's code, and its reason
REASONS = {1: NOT_AVAILABLE, 2: CANNOT_ALLOCATE, 3: INVALID_POOLS, 4: CANNOT_FIT, 5: STALE_EXTENDED}
UNSERVED_API = "resource.k8s.io/v1"
#: kube's DynamicResourcesArgs.bindingTimeout default: how long after `allocationTimestamp` a pod may
#: wait for its devices' binding conditions
BINDING_TIMEOUT = 600.0
BINDING_PENDING = "BindingConditionsPending"  # kube's event reason while PreBind waits for them


# ------------------------------------------------------------------------------------ binding conditions


def _go_quote(text: str) -> str:
    """Go's `%q` of a string (strconv.Quote), as kube's binding failure message quotes the condition's."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
               "\f": "\\f", "\v": "\\v"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def binding_state(claim: ResourceClaimInfo) -> tuple[bool, StatusCondition | None]:
    """kube's `isClaimReadyForBinding`: (ready, the failure condition that is True). Ready when the
    claim is allocated and, for each device with binding conditions, the driver reports every one of
    them True in `status.devices` (in device order: the first device without a status, or with a
    condition not True yet, makes it not ready; a True failure condition fails it)."""
    allocation = claim.allocation
    if allocation is None:
        return False, None
    for result in allocation.results:
        if not result.binding_conditions:
            continue
        status = claim.device_status(result)
        if status is None:
            return False, None
        for kind in result.binding_failure_conditions:
            condition = status.condition(kind)
            if condition is not None and condition.status == "True":
                return False, condition
        for kind in result.binding_conditions:
            condition = status.condition(kind)
            if condition is None or condition.status != "True":
                return False, None
    return True, None


def binding_deadline(claim: ResourceClaimInfo) -> float | None:
    """When waiting for the claim's binding conditions times out (kube's `isClaimTimeout`: its
    `allocationTimestamp` plus the binding timeout), None when it cannot."""
    allocation = claim.allocation
    if allocation is None or allocation.timestamp is None or not allocation.binding_conditions:
        return None
    return allocation.timestamp + BINDING_TIMEOUT


def binding_failed(claim: ResourceClaimInfo, condition: StatusCondition) -> str:
    """kube's ErrDeviceBindingFailed message for a claim whose failure condition is True."""
    return (f"device binding failed: claim={claim.name}, reason={condition.reason}, "
            f"message={_go_quote(condition.message)}")


def binding_problem(claim: ResourceClaimInfo, now: float) -> bool:
    """Whether kube's Filter takes the claim as unavailable: a binding failure condition is True, or
    its binding conditions timed out (PostFilter then deallocates it)."""
    ready, failed = binding_state(claim)
    if failed is not None:
        return True
    deadline = binding_deadline(claim)
    return not ready and deadline is not None and deadline < now


def _rfc3339(seconds: float) -> str:
    """A `metav1.Time` as the API writes it (seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _new_share_id() -> str:
    """A fresh share ID (kube's `uuid.NewUUID`: any UUID the API server validates)."""
    return str(uuid.uuid4())


# ------------------------------------------------------------------------------------ reservations


@dataclass(frozen=True, slots=True)
class ClaimReservation:
    """One claim of a pod placed on a node: what PreBind writes to it (kube's `bindClaim`)."""

    claim: ResourceClaimInfo  # as the API server last said (resourceVersion, finalizers, status)
    #: `status.allocation` to write (the API's JSON); None: the claim is allocated already, only
    #: `reservedFor` gets the pod
    allocation: Mapping[str, Any] | None
    consumer: ConsumerRef  # the `status.reservedFor` entry: the pod, or its PodGroup (a group's claim)
    #: the special claim of the pod's backed extended resources: created by PreBind
    extended: ExtendedClaim | None = None
    #: a claim whose pending allocation an earlier member of the pod's group made (not listed as this
    #: pod's devices): for a PodGroup's claim the same writes (whichever lands first; the others
    #: count as landed); for a claim reserved for pods, this pod joins `reservedFor` (`_join_write`)
    shared: bool = False

    @property
    def key(self) -> str:
        return self.claim.key


CapacityUsage = Mapping[str, tuple[Quantity, Quantity]]  # capacity name -> (used, left)


@dataclass(frozen=True, slots=True)
class DeviceReservation:
    """What DynamicResources reserved for a pod on its node (kube's per-pod state from Reserve to
    PreBind): every claim to allocate or to reserve, in the pod's order; and, for the shared devices
    it takes a share of, their capacity used (with its share, and every other allocated or in-flight
    one) and left."""

    node: str
    pod: str  # NS/NAME
    claims: tuple[ClaimReservation, ...] = ()
    usage: Mapping[DeviceID, CapacityUsage] = field(default_factory=dict)

    def as_json(self) -> list[dict[str, Any]]:
        """`placer simulate`'s `devices`: the devices this placement allocated, claim by claim (API.md
        §4): a share adds its `consumedCapacity`, `shareID` and the device's `capacity` used and left;
        a device with binding conditions adds them."""
        out = []
        for claim in self.claims:
            if claim.allocation is None or claim.shared:
                continue
            for result in claim.allocation.get("devices", {}).get("results", []):
                entry = {"claim": claim.key, "request": result["request"], "driver": result["driver"],
                         "pool": result["pool"], "device": result["device"]}
                for key in ("consumedCapacity", "shareID", "bindingConditions", "bindingFailureConditions"):
                    if key in result:
                        entry[key] = result[key]
                usage = self.usage.get((result["driver"], result["pool"], result["device"]))
                if "shareID" in result and usage:
                    entry["capacity"] = usage_json(usage)
                out.append(entry)
        return out


def usage_json(usage: CapacityUsage) -> dict[str, dict[str, str]]:
    """A shared device's capacity as simulate and explain print it: `{NAME: {used, left}}`."""
    return {name: {"used": str(used), "left": str(left)} for name, (used, left) in sorted(usage.items())}


def capacity_usage(index: DeviceIndex, device_id: DeviceID) -> dict[str, tuple[Quantity, Quantity]]:
    """A shared device's capacities: what its allocated and in-flight shares consume, and what is
    left (in the capacity's own format); empty when the device is not known."""
    device = index.device(*device_id)
    if device is None:
        return {}
    used = index.capacity.get(device_id, {})
    out = {}
    for name, capacity in device.capacities.items():
        taken = used.get(name, 0)
        out[name] = (Quantity(taken, capacity.value.format), Quantity(capacity.value.value - taken,
                                                                     capacity.value.format))
    return out


def claim_object(claim: ResourceClaimInfo) -> ObjectRef:
    return ObjectRef("resource.k8s.io/v1", CLAIM, "resourceclaims", claim.name, claim.namespace)


def _reserved(raw: Mapping[str, Any], uid: str) -> bool:
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    return any(isinstance(r, Mapping) and r.get("uid") == uid for r in status.get("reservedFor") or [])


def _allocated_as(raw: Mapping[str, Any], allocation: Mapping[str, Any]) -> bool:
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    current = status.get("allocation")
    if not isinstance(current, Mapping):
        return False
    mine = allocation.get("devices", {}).get("results", [])
    theirs = (current.get("devices") or {}).get("results") or []
    key = ("request", "driver", "pool", "device", "shareID")
    return [tuple(r.get(k) for k in key) for r in theirs] == [tuple(r.get(k) for k in key) for r in mine]


def _has_finalizer(raw: Mapping[str, Any]) -> bool:
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    return DELETE_PROTECTION in (meta.get("finalizers") or [])


def _landed(reservation: ClaimReservation, raw: Mapping[str, Any]) -> bool:
    """Whether the claim (as the API server holds it) has our allocation and reservation already."""
    if not _reserved(raw, reservation.consumer.uid):
        return False
    return reservation.allocation is None or _allocated_as(raw, reservation.allocation)


def _with_binding_conditions(allocation: Mapping[str, Any]) -> bool:
    return any(r.get("bindingConditions") for r in allocation.get("devices", {}).get("results", []))


def _undo_status(reservation: ClaimReservation, raw: Mapping[str, Any]) -> Write | None:
    """Take the pod out of `reservedFor`, and the allocation too when we made it and nobody else
    holds the claim (kube's Unreserve removes the reservation; a claim allocated for a pod that was
    not bound is deallocated at once here rather than by the resourceclaim controller). An
    allocation with binding conditions stays, as kube's Unreserve leaves it: its devices may be
    being prepared for the next attempt, and a failed or timed-out one is given back by PostFilter."""
    if not _reserved(raw, reservation.consumer.uid):
        return None
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    others = [r for r in status.get("reservedFor") or [] if not (isinstance(r, Mapping) and
                                                                  r.get("uid") == reservation.consumer.uid)]
    patch: dict[str, Any] = {"reservedFor": others or None}
    if (reservation.allocation is not None and not others and _allocated_as(raw, reservation.allocation)
            and not _with_binding_conditions(reservation.allocation)):
        patch["allocation"] = None
    return Write(claim_object(reservation.claim), {"status": patch}, subresource="status",
                 uid=reservation.claim.uid)


def _undo_finalizer(reservation: ClaimReservation, raw: Mapping[str, Any]) -> Write | None:
    """Drop the finalizer we added while the claim is allocated to nobody (else it protects devices)."""
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    if not _has_finalizer(raw) or status.get("allocation") is not None or status.get("reservedFor"):
        return None
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    kept = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION]
    return Write(claim_object(reservation.claim), {"metadata": {"finalizers": kept or None}},
                 uid=reservation.claim.uid)


def _stamped(allocation: Mapping[str, Any], stamp: str | None) -> dict[str, Any]:
    """The allocation to write, with kube's `allocationTimestamp` (set by its PreBind when the
    binding-conditions features are on, as they are by default in v1.36)."""
    out = dict(allocation)
    if stamp is not None:
        out["allocationTimestamp"] = stamp
    return out


def prebind_writes(reservation: ClaimReservation, stamp: str | None = None) -> list[Write]:
    """The API writes of kube's `bindClaim` for one claim, in order, each undone if the binding fails
    (`stamp`: the `allocationTimestamp` a new allocation is written with):

    1. when a new allocation is written and the claim lacks it, the finalizer
       `resource.kubernetes.io/delete-protection` (a merge patch of `metadata.finalizers`, with the
       claim's resourceVersion as precondition);
    2. `status.allocation` (new allocations) and `status.reservedFor` + the pod (or its PodGroup, for
       a group's claim: then nothing is undone, as in kube): a merge patch of the
       status subresource with the resourceVersion as precondition when nothing was written before
       it; after the finalizer (whose resourceVersion is not known yet), a JSON patch whose `test`
       operations require the claim's uid and its whole `status` as read — the same guarantee: no
       allocation or reservation written meanwhile by anyone else is overwritten. The merge patch,
       refused on a conflict, is made again on the claim as it is now (`_reserve_again`, kube's
       `RetryOnConflict`): pods sharing a claim, bound in parallel, would otherwise fail each other.
    """
    claim = reservation.claim
    target = claim_object(claim)
    if reservation.shared and not reservation.consumer.pod_group:
        return [_join_write(reservation)]
    writes: list[Write] = []
    needs_finalizer = reservation.allocation is not None and DELETE_PROTECTION not in claim.finalizers
    if needs_finalizer:
        writes.append(Write(
            target, {"metadata": {"finalizers": [*claim.finalizers, DELETE_PROTECTION]}},
            resource_version=claim.resource_version,
            landed=_has_finalizer, undo=None if reservation.consumer.pod_group
            else functools.partial(_undo_finalizer, reservation),
        ))
    status = _reservation_status(reservation, [r.as_json() for r in claim.reserved_for], stamp)
    if not needs_finalizer:
        writes.append(_status_write(reservation, status, claim.resource_version, stamp))
    else:
        operations = [
            {"op": "test", "path": "/metadata/uid", "value": claim.uid},
            {"op": "test", "path": "/status", "value": dict(claim.status)},
            *({"op": "add", "path": f"/status/{key}", "value": value} for key, value in status.items()),
        ]
        writes.append(Write(target, operations, patch_type=JSON_PATCH, subresource="status",
                            landed=functools.partial(_landed, reservation), undo=_status_undo(reservation)))
    return writes


def _reservation_status(
    reservation: ClaimReservation, reserved: list[Any], stamp: str | None
) -> dict[str, Any]:
    """The claim's `status` fields a PreBind writes: `reservedFor` (those `reserved` already, and
    the pod or its PodGroup) and, when the pod allocates the claim, `allocation`."""
    status: dict[str, Any] = {"reservedFor": [*reserved, reservation.consumer.as_json()]}
    if reservation.allocation is not None:
        status["allocation"] = _stamped(reservation.allocation, stamp)
    return status


def _status_undo(reservation: ClaimReservation) -> Callable[[Mapping[str, Any]], Write | None] | None:
    """How a reservation's status write is undone. kube's Unreserve leaves a PodGroup's reservation
    (and so its allocation and finalizer): other members of the group may use the claim, bound or
    about to be."""
    return None if reservation.consumer.pod_group else functools.partial(_undo_status, reservation)


def _status_write(
    reservation: ClaimReservation, status: dict[str, Any], resource_version: str, stamp: str | None
) -> Write:
    """The reservation's merge patch of the claim's status, at `resource_version`; made again on
    the claim as it is now when refused on a conflict (`_reserve_again`)."""
    return Write(claim_object(reservation.claim), {"status": status}, subresource="status",
                 resource_version=resource_version, landed=functools.partial(_landed, reservation),
                 undo=_status_undo(reservation), rebase=functools.partial(_reserve_again, reservation, stamp))


def _reserve_again(reservation: ClaimReservation, stamp: str | None, raw: Mapping[str, Any]) -> Write | None:
    """The status write of `prebind_writes` made again on the claim as it is now, after a 409 (kube's
    `bindClaim` retries on a conflict the same way): the pod added to whatever `reservedFor` holds
    now — another pod sharing the claim joined meanwhile. Given up (None) when the claim was deleted
    or re-created, allocated by someone else when we allocate it, or no longer allocated as the pod's
    decision saw it."""
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    if meta.get("deletionTimestamp") or meta.get("uid") != reservation.claim.uid:
        return None
    current = status.get("allocation")
    if reservation.allocation is not None:
        if current is not None:
            return None  # allocated elsewhere in the meantime
    elif current is None or current != reservation.claim.status.get("allocation"):
        return None  # deallocated or allocated anew meanwhile: the pod is decided again
    reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, Mapping)]
    return _status_write(reservation, _reservation_status(reservation, reserved, stamp),
                         str(meta.get("resourceVersion") or ""), stamp)


def _join_write(reservation: ClaimReservation) -> Write:
    """A member of a group joining a claim (reserved for pods) that an earlier member of the same
    group allocated: the pod added to `reservedFor` once that allocation is there — a JSON patch
    whose `test` operations require the claim's uid and each device of the allocation (a 422 while
    the earlier member's PreBind has not landed: this pod is retried then, as kube's `bindClaim`
    fails with "got allocated elsewhere in the meantime"). Undone as any reservation."""
    claim, allocation = reservation.claim, reservation.allocation
    assert allocation is not None
    checks = [
        {"op": "test", "path": f"/status/allocation/devices/results/{i}/{key}", "value": result[key]}
        for i, result in enumerate(allocation.get("devices", {}).get("results", []))
        for key in ("request", "driver", "pool", "device")
    ]
    operations = [*checks, {"op": "add", "path": "/status/reservedFor/-", "value": reservation.consumer.as_json()}]
    return Write(claim_object(claim), operations, patch_type=JSON_PATCH, subresource="status", uid=claim.uid,
                 landed=functools.partial(_landed, reservation), undo=functools.partial(_undo_status, reservation))


def _owned_by(uid: str, raw: Mapping[str, Any]) -> bool:
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    return any(isinstance(ref, Mapping) and ref.get("uid") == uid and ref.get("controller") is True
               for ref in meta.get("ownerReferences") or [])


def _undo_create(uid: str, raw: Mapping[str, Any]) -> Write | None:
    """Delete the special claim we created (kube's Unreserve deletes it) — ours only, by its UID."""
    if not _owned_by(uid, raw):
        return None
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    target = ObjectRef("resource.k8s.io/v1", CLAIM, "resourceclaims", name, namespace)
    return Write(target, delete=True, uid=str(meta.get("uid") or ""), tolerate=frozenset({404}))


def extended_writes(reservation: ClaimReservation, pod: PodInfo, stamp: str | None = None) -> list[Write]:
    """kube's PreBind for the special claim of backed extended resources, in order:

    1. create it (POST; a 409 counts as written when the claim there is the pod's — a retry);
    2. the finalizer `resource.kubernetes.io/delete-protection`;
    3. `status.allocation` and `status.reservedFor` + the pod;
    4. the pod's `status.extendedResourceClaimStatus` (`requestMappings`, `resourceClaimName`).

    If the binding fails the claim is deallocated, unprotected and deleted (undone latest first).
    """
    extended = reservation.extended
    assert extended is not None and reservation.allocation is not None
    claim = reservation.claim
    target = claim_object(claim)
    status = {"allocation": _stamped(reservation.allocation, stamp), "reservedFor": [reservation.consumer.as_json()]}
    pod_target = ObjectRef("v1", "Pod", "pods", pod.name, pod.namespace)
    claim_status = {"requestMappings": [dict(m) for m in extended.mappings], "resourceClaimName": claim.name}
    return [
        Write(target, extended.body(), create=True, landed=functools.partial(_owned_by, pod.uid),
              undo=functools.partial(_undo_create, pod.uid)),
        Write(target, {"metadata": {"finalizers": [DELETE_PROTECTION]}}, landed=_has_finalizer,
              undo=functools.partial(_undo_finalizer, reservation)),
        Write(target, {"status": status}, subresource="status", landed=functools.partial(_landed, reservation),
              undo=functools.partial(_undo_status, reservation)),
        Write(pod_target, {"status": {"extendedResourceClaimStatus": claim_status}}, subresource="status",
              uid=pod.uid),
    ]


def _deallocated(raw: Mapping[str, Any]) -> bool:
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    return status.get("allocation") is None and not status.get("reservedFor")


def deallocation_writes(claim: ResourceClaimInfo) -> tuple[Write, ...]:
    """kube's PostFilter `UpdateStatus` of a claim with `reservedFor`, `allocation` and `devices`
    cleared: a merge patch of the status subresource, with the claim's resourceVersion (as read)
    and UID as preconditions — a claim changed meanwhile is left alone (a 409), as kube's update
    of the object it read would be."""
    return (Write(claim_object(claim), {"status": {"reservedFor": None, "allocation": None, "devices": None}},
                  subresource="status", resource_version=claim.resource_version, uid=claim.uid,
                  landed=_deallocated, retries=1),)


def _unprotected(raw: Mapping[str, Any]) -> bool:
    return not _has_finalizer(raw)


def deletion_writes(claim: ResourceClaimInfo) -> tuple[Write, ...]:
    """kube's PostFilter `deleteClaim` of a special claim left by an earlier attempt: its finalizer
    `resource.kubernetes.io/delete-protection` removed (an update at the resourceVersion read),
    then the claim deleted (by UID; gone already counts as deleted)."""
    target = claim_object(claim)
    writes: list[Write] = []
    if DELETE_PROTECTION in claim.finalizers:
        kept = [f for f in claim.finalizers if f != DELETE_PROTECTION]
        writes.append(Write(target, {"metadata": {"finalizers": kept or None}}, resource_version=claim.resource_version,
                            uid=claim.uid, landed=_unprotected, retries=1))
    writes.append(Write(target, delete=True, uid=claim.uid, tolerate=frozenset({404}), retries=1))
    return tuple(writes)


# ------------------------------------------------------------------------------------ the plan


@dataclass(slots=True)
class _Plan:
    """One pod's claims against the nodes, for one state of the cluster."""

    reason: str | None = None  # why the pod fits nowhere (kube's PreFilter / an allocator error)
    claims: list[ResourceClaimInfo] = field(default_factory=list)
    to_allocate: list[int] = field(default_factory=list)  # indices into claims
    codes: np.ndarray | None = None  # per slot: 0 fits, else a REASONS key; None: every node fits
    results: dict[int, list[AllocationResult]] = field(default_factory=dict)  # slot -> per claim to allocate
    first_available: bool = False  # some claim has firstAvailable requests: the score applies
    # a plain request whose nodes were found by counting: (request, class, usable devices); its
    # devices on such a node are the first usable free ones (not on `searched` nodes)
    simple: tuple[SubRequest, DeviceClassInfo, np.ndarray] | None = None
    searched: np.ndarray | None = None  # the slots the full search ran on
    # a pod with extended resources a DeviceClass backs: per group of nodes (mask), the plan of its
    # claims there, the special claim among them; None for other pods
    extended_parts: list[tuple[np.ndarray, _Plan]] | None = None
    extended: ExtendedClaim | None = None  # this part's special claim (its last claim)
    #: per claim, the `reservedFor` entry it gets: the pod, or its PodGroup (kube's `BindTo`)
    bindings: list[ConsumerRef] = field(default_factory=list)
    #: claims whose pending allocation an earlier member of the pod's group made: read as allocated
    shared: set[int] = field(default_factory=set)
    group: str = ""  # the pod's group (`_group_id`), "" for a pod of none
    #: when a claim's binding conditions time out (a node rejection the cluster's changes do not
    #: bring): the plan holds until then
    expires: float = math.inf


def _pod_group(pod: PodInfo, cluster: ClusterState) -> PodGroupInfo | None:
    """The upstream PodGroup the pod names, when it lists claims (the server serves PodGroup
    claims: its DRAWorkloadResourceClaims gate is on); None otherwise."""
    if not pod.pod_group_name:
        return None
    group: PodGroupInfo | None = lookup(cluster.catalog, GroupRef(POD_GROUP_KIND, pod.namespace, pod.pod_group_name))
    return group if group is not None and group.resource_claims else None


def _group_id(pod: PodInfo) -> str:
    """The group whose members share a pending allocation (kube's pod group cycle state): the
    pod's PodGroup of either API, "" for a pod of none."""
    ref = group_of(pod)
    return f"{ref.kind}:{ref.key}" if ref is not None else ""


def _group_consumer(group: PodGroupInfo) -> ConsumerRef:
    return ConsumerRef("podgroups", group.name, group.uid, POD_GROUP_API_GROUP)


def _owned(claim: ResourceClaimInfo, pod: PodInfo, group: PodGroupInfo | None) -> bool:
    """kube's `IsForPod`: the pod controls the claim, or (PodGroup claims served) its PodGroup does
    — by API group, kind and name (`isForPodGroupByPod`: the pod does not know the group's UID)."""
    owner = claim.controller
    if owner is None:
        return False
    if pod.uid and owner.uid == pod.uid:
        return True
    return (group is not None and owner.kind == "PodGroup" and owner.name == group.name
            and owner.api_version.startswith(f"{POD_GROUP_API_GROUP}/"))


def _resolve(pod: PodInfo, cluster: ClusterState) -> tuple[str | None, list[ResourceClaimInfo], list[ConsumerRef]]:
    """kube's `foreachPodResourceClaim` and `podResourceClaimBindings`: the pod's claims and, for
    each, the `reservedFor` entry it gets — or why the pod cannot be scheduled."""
    if CLAIM in cluster.catalog.unserved:  # an API server older than v1.34 (the operator found no such kind)
        return (f'pod "{pod.namespace}/{pod.name}": its ResourceClaims cannot be read: this API server does not '
                f"serve {UNSERVED_API} (Kubernetes v1.34 or later)"), [], []
    claims: list[ResourceClaimInfo] = []
    bindings: list[ConsumerRef] = []
    group = _pod_group(pod, cluster) if pod.resource_claims else None
    for entry in pod.resource_claims:
        must_own = False
        if entry.claim_name is not None:
            name = entry.claim_name
        elif entry.template_name is not None:
            if not entry.recorded:
                return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet', [], []
            if entry.generated is None:
                continue  # no claim was needed for it
            name, must_own = entry.generated, True
        else:
            return (f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{entry.name}": none of the supported '
                    "fields are set"), [], []
        claim: ResourceClaimInfo | None = cluster.catalog.get(CLAIM, name, pod.namespace)
        if claim is None:
            return f'could not find ResourceClaim "{pod.namespace}/{name}"', [], []
        if claim.deleting:
            return f'resourceclaim "{claim.name}" is being deleted', [], []
        if must_own and not _owned(claim, pod, group):
            whose = "Pod is not owner" if group is None else f"neither Pod nor PodGroup {group.name} is the owner"
            return (f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                    f"{pod.namespace}/{pod.name} ({whose})"), [], []
        claims.append(claim)
        shared = group is not None and any(entry.same_reference(c) for c in group.resource_claims)
        bindings.append(_group_consumer(group) if group is not None and shared else _consumer(pod))
    return None, claims, bindings


def _class_problem(cluster: ClusterState, request: SubRequest, qualified: str) -> str | None:
    if not request.device_class:
        return f"request {qualified}: unsupported request type"
    if cluster.catalog.get(CLASS, request.device_class) is None:
        return f"request {qualified}: device class {request.device_class} does not exist"
    return None


def _consumer(pod: PodInfo) -> ConsumerRef:
    return ConsumerRef("pods", pod.name, pod.uid)


def _score(claims: Sequence[ResourceClaimInfo], results: Sequence[AllocationResult]) -> int:
    """kube's `computeScore`: per request, FIRST_AVAILABLE_MAX_SIZE - the index of the alternative
    allocated (allocated claims count as they are)."""
    score = 0
    pending = iter(results)
    for claim in claims:
        if claim.allocation is not None:
            chosen = {r.request for r in claim.allocation.results if r.request.count("/") == 1}
        else:
            result = next(pending, None)
            chosen = set() if result is None else {d.request for d in result.devices if d.request.count("/") == 1}
        for request in claim.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX_SIZE - i
    return score


class DynamicResources(FilterPlugin[NoArgs], ScorePlugin[NoArgs], ReservePlugin[NoArgs], PreBindPlugin[NoArgs],
                       PostFilterPlugin[NoArgs]):
    name: ClassVar[str] = "DynamicResources"
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE, CLAIM, SLICE, CLASS}
    )
    # the last plan: (pod, cluster, catalog revision, nodes' static version) -> plan, shared by the
    # profile's filter and score instances. Pods on nodes do not change it (devices are in the
    # catalog), so Reserve, after the pod was assumed, reuses what Filter found.
    _last: ClassVar[tuple[object, object, tuple[int, int], _Plan] | None] = None
    #: the wall clock binding conditions' timeouts are read against (`allocationTimestamp`)
    clock: Callable[[], float] = staticmethod(time.time)
    #: a fresh share ID for each share of a device this scheduler allocates
    new_share_id: Callable[[], str] = staticmethod(_new_share_id)
    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods it does not concern)

    # -------------------------------------------------------------- the plan

    def _plan(self, pod: PodInfo, cluster: ClusterState) -> _Plan:
        key = (cluster.catalog.revision, cluster.static_version)
        last = DynamicResources._last
        if (last is not None and last[0] is pod and last[1] is cluster and last[2] == key
                and (last[3].expires == math.inf or self.clock() <= last[3].expires)):
            return last[3]
        plan = self._compute(pod, cluster)
        DynamicResources._last = (pod, cluster, key, plan)
        return plan

    def _compute(self, pod: PodInfo, cluster: ClusterState) -> _Plan:
        reason, claims, bindings = _resolve(pod, cluster)
        if reason is not None:
            return _Plan(reason)
        backed = backed_requests(pod, cluster.catalog)
        if backed:
            return self._compute_extended(pod, cluster, claims, bindings, backed)
        return self._compute_claims(cluster, claims, bindings, group=_group_id(pod))

    def _compute_claims(self, cluster: ClusterState, claims: list[ResourceClaimInfo], bindings: list[ConsumerRef],
                        restrict: np.ndarray | None = None, group: str = "") -> _Plan:
        """The plan for these claims (on the `restrict` nodes only, when given); `group`: the pod's
        group (`_group_id`), whose members share the pending allocations they make."""
        plan = _Plan(claims=claims, bindings=bindings, group=group)
        if not claims:
            return plan
        size = cluster.size
        codes = np.zeros(size, dtype=np.int8)
        for index, claim in enumerate(claims):
            if any(request.first_available for request in claim.requests):
                plan.first_available = True
            if claim.pending:
                if group and claim.pending_group == group:
                    plan.shared.add(index)  # made by a member of the pod's group: kube reuses it
                else:  # kube keeps in-flight allocations apart: the claim reads as unallocated
                    return _Plan(f"resource claim {claim.key} is in the process of being allocated")
            if claim.allocation is not None:
                terms = claim.allocation.node_selector
                if terms is not None:
                    admitted = np.zeros(size, dtype=bool)
                    for term in terms:
                        admitted |= term_mask(cluster, term)
                    codes[~admitted] = 1
                if claim.allocation.binding_conditions:
                    now = self.clock()
                    if binding_problem(claim, now):  # failed or timed out: kube's Filter rejects every node
                        codes[:] = 1
                    else:
                        deadline = binding_deadline(claim)
                        if deadline is not None:
                            plan.expires = min(plan.expires, deadline)
                continue
            plan.to_allocate.append(index)
            for request in claim.requests:
                if request.exactly is not None:
                    problem = _class_problem(cluster, request.exactly, request.name)
                elif request.first_available:
                    problem = next(filter(None, (
                        _class_problem(cluster, sub, f"{request.name}/{sub.name}") for sub in request.first_available
                    )), None)
                else:
                    problem = f"resource claim {claim.key}, request {request.name}: unknown request type"
                if problem is not None:
                    return _Plan(problem)
        if plan.to_allocate:
            candidates = (codes == 0) & cluster.present[:size]
            if restrict is not None:
                candidates &= restrict[:size]
            try:
                self._allocate(plan, cluster, codes, candidates)
            except AllocationError as error:
                return _Plan(str(error))
        plan.codes = codes if codes.any() else None
        return plan

    def _compute_extended(self, pod: PodInfo, cluster: ClusterState, claims: list[ResourceClaimInfo],
                          bindings: list[ConsumerRef], backed: dict[str, int]) -> _Plan:
        """kube's `filterExtendedResources`: per node, the backed resources its allocatable lacks go
        to a special claim allocated with the pod's own claims; nodes are grouped by that set."""
        size = cluster.size
        codes = np.zeros(size, dtype=np.int8)
        previous = existing_claim(pod, cluster.catalog)
        if previous is not None and previous.requests and not previous.pending:
            # a claim left from an earlier attempt (kube's PostFilter deletes it, then retries)
            codes[:] = 5
            return _Plan(claims=claims, codes=codes)
        unbacked = [name for name, amount in pod.fit_requests.items()
                    if amount > 0 and name not in backed and is_dra_extended_resource_name(name)]
        groups: dict[tuple[str, ...], list[int]] = {}
        for slot in range(size):
            node = cluster.nodes[slot]
            if node is None:
                continue
            allocatable = node.allocatable
            if any(name not in allocatable for name in unbacked):
                codes[slot] = 4  # neither a device plugin's nor backed by a class
                continue
            groups.setdefault(tuple(r for r in sorted(backed) if allocatable.get(r, 0) <= 0), []).append(slot)
        plan = _Plan(claims=claims, extended_parts=[])
        for resources, slots in groups.items():
            mask = np.zeros(size, dtype=bool)
            mask[slots] = True
            part_claims, part_bindings = list(claims), list(bindings)
            extended = None
            if resources:
                requests, mappings = requests_and_mappings(
                    pod, {r: backed[r] for r in resources}, functools.partial(class_for, cluster.catalog))
                extended = ExtendedClaim(special_claim(pod, requests), mappings)
                part_claims.append(extended.claim)
                part_bindings.append(_consumer(pod))
            part = self._compute_claims(cluster, part_claims, part_bindings, mask, _group_id(pod))
            if part.reason is not None:
                return _Plan(part.reason)
            part.extended = extended
            plan.expires = min(plan.expires, part.expires)
            if part.codes is not None:
                codes[mask] = part.codes[mask]
            plan.first_available |= part.first_available
            assert plan.extended_parts is not None
            plan.extended_parts.append((mask, part))
        plan.codes = codes if codes.any() else None
        return plan

    @staticmethod
    def _part(plan: _Plan, slot: int) -> _Plan:
        """The plan of the node's group (a pod with backed extended resources), else the plan."""
        if plan.extended_parts is None:
            return plan
        for mask, part in plan.extended_parts:
            if mask[slot]:
                return part
        return _Plan()

    def _allocate(self, plan: _Plan, cluster: ClusterState, codes: np.ndarray, candidates: np.ndarray) -> None:
        """Codes 2 and 3 where the claims to allocate do not fit; allocation results where known."""
        index = device_index(cluster)
        claims = [plan.claims[i] for i in plan.to_allocate]
        general = candidates.copy()
        simple = self._simple_request(cluster, claims)
        if simple is not None:
            request, klass = simple
            usable, failing = index.usable((*klass.selectors, *request.selectors), request.tolerations)
            room = index.room(request)  # shared devices with capacity left (or devices the request's capacity fits)
            if room is not None:
                usable = usable & room
            fits = index.per_node(cluster, usable & ~index.in_use) >= request.count
            failing = failing & ~index.in_use
            general &= index.complex_nodes | (index.per_node(cluster, failing) > 0 if failing.any() else False)
            codes[candidates & ~general & ~fits] = 2
            plan.simple, plan.searched = (request, klass, usable), general
        allocator = Allocator(functools.partial(cluster.catalog.get, CLASS), index.state, index.matcher)
        for slot in np.flatnonzero(general):
            self._allocate_on(plan, cluster, index, allocator, int(slot), claims, codes)

    @staticmethod
    def _simple_request(
        cluster: ClusterState, claims: list[ResourceClaimInfo]
    ) -> tuple[SubRequest, DeviceClassInfo] | None:
        """The one request of a pod whose claims ask for a plain count of one class's devices (nearly
        every pod; a share of a device's capacity included): its nodes are found by counting free
        matching devices (with room for it)."""
        if len(claims) != 1 or len(claims[0].requests) != 1 or claims[0].constraints:
            return None
        request = claims[0].requests[0].exactly
        if (
            request is None or request.mode != EXACT_COUNT or request.admin_access is not None
            or not 0 < request.count <= ALLOCATION_RESULTS_MAX_SIZE or None in request.selectors
        ):
            return None
        klass: DeviceClassInfo | None = cluster.catalog.get(CLASS, request.device_class)
        if klass is None or None in klass.selectors:
            return None
        return request, klass

    @staticmethod
    def _allocate_on(
        plan: _Plan, cluster: ClusterState, index: DeviceIndex, allocator: Allocator, slot: int,
        claims: list[ResourceClaimInfo], codes: np.ndarray,
    ) -> list[AllocationResult] | None:
        node = cluster.nodes[slot]
        if node is None:
            return None
        try:
            results = allocator.allocate(node.name, node.labels, index.pools_for(cluster, node.name), claims)
        except InvalidPools:
            codes[slot] = 3
            return None
        if results is None:
            codes[slot] = 2
            return None
        plan.results[slot] = results
        return results

    def _results_on(self, plan: _Plan, cluster: ClusterState, slot: int) -> list[AllocationResult] | None:
        """The allocation on a node that passed the filter (computed now for nodes the filter
        passed by counting)."""
        if not plan.to_allocate:
            return []
        results = plan.results.get(slot)
        if results is None and plan.simple is not None and plan.searched is not None and not plan.searched[slot]:
            request, klass, usable = plan.simple
            index = device_index(cluster)
            picks = index.reaching(slot, usable & ~index.in_use)[: request.count]
            if len(picks) < request.count:
                return None
            claim = plan.claims[plan.to_allocate[0]]
            chosen = [(index.ids[g], index.devices[g], index.slice_of[g]) for g in picks]
            results = plan.results[slot] = [single_request_result(claim, request, klass, chosen, cluster.names[slot])]
            return results
        if results is None:
            index = device_index(cluster)
            allocator = Allocator(functools.partial(cluster.catalog.get, CLASS), index.state, index.matcher)
            codes = np.zeros(cluster.size, dtype=np.int8)
            claims = [plan.claims[i] for i in plan.to_allocate]
            results = self._allocate_on(plan, cluster, index, allocator, slot, claims, codes)
        return results

    # -------------------------------------------------------------- filter

    @staticmethod
    def _concerns(pod: PodInfo, cluster: ClusterState) -> bool:
        """Whether the pod has claims, or extended resources a DeviceClass may back."""
        return bool(pod.resource_claims) or bool(pod.extended_containers and backed_requests(pod, cluster.catalog))

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod it does not concern (kube: "pods with dra resource claims are not signable")."""
        return UNSIGNABLE if self._concerns(pod, cluster) else None

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | None:
        if not self._concerns(pod, cluster):
            return None
        return self._plan(pod, cluster).reason

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not self._concerns(pod, cluster):
            return None
        plan = self._plan(pod, cluster)
        if plan.reason is not None:
            return np.zeros(cluster.size, dtype=bool)
        return None if plan.codes is None else plan.codes == 0

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        plan = self._plan(pod, cluster)
        if plan.reason is not None:
            return Counter({plan.reason: len(rejected)})
        counts: Counter[str] = Counter()
        if plan.codes is not None:
            for code, number in zip(*np.unique(plan.codes[rejected], return_counts=True), strict=True):
                if code:
                    counts[REASONS[int(code)]] = int(number)
        return counts

    # -------------------------------------------------------------- score

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        if not self._concerns(pod, cluster):
            return False
        plan = self._plan(pod, cluster)
        return plan.reason is None and plan.first_available

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        plan = self._plan(pod, cluster)
        scores = np.zeros(slots.size, dtype=np.int64)
        for i, slot in enumerate(slots):
            part = self._part(plan, int(slot))
            results = self._results_on(part, cluster, int(slot))
            if results is not None:
                scores[i] = _score(part.claims, results)
        return scores

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return default_normalize(raw)

    # -------------------------------------------------------------- reserve

    def reserve(self, pod: PodInfo, cluster: ClusterState, node: str) -> DeviceReservation | None:
        """Assume the allocation found on `node` in the catalog (kube's in-flight allocation), and
        say what PreBind must write: new allocations, and the pod in every claim's `reservedFor`
        (and the special claim of backed extended resources, created first)."""
        if not self._concerns(pod, cluster):
            return None
        plan = self._plan(pod, cluster)
        slot = cluster.index.get(node)
        if plan.reason is not None or slot is None:
            return None
        plan = self._part(plan, slot)
        if not plan.claims:
            return None
        results = self._results_on(plan, cluster, slot)
        if results is None:
            return None  # (the filter passed the node: cannot happen)
        pending = iter(results)
        reservations = []
        shared: list[DeviceID] = []  # devices this pod takes a share of
        catalog = cluster.catalog
        for index, claim in enumerate(plan.claims):
            binding = plan.bindings[index] if index < len(plan.bindings) else _consumer(pod)
            if index in plan.shared and claim.allocation is not None:
                # one more member holds the group's pending allocation; its writes are the first
                # member's (as the API server's copy says), so whichever binding comes first lands them
                held = dataclasses.replace(claim, sharers=claim.sharers + 1)
                catalog.assume(CLAIM, claim.namespace, claim.name, held)
                server = catalog.server_copy(CLAIM, claim.name, claim.namespace)
                reservations.append(ClaimReservation(server if isinstance(server, ResourceClaimInfo) else claim,
                                                     claim.allocation.raw, binding, shared=True))
                continue
            if claim.allocation is not None:
                if not claim.is_reserved_for(binding):
                    reservations.append(ClaimReservation(claim, None, binding))
                continue
            result = next(pending).with_share_ids(self.new_share_id)
            allocation = result.as_json()
            shared.extend(d.id for d in result.devices if d.share_id)
            assumed = dataclasses.replace(
                claim,
                allocation=Allocation(
                    tuple(DeviceResult(d.request, d.driver, d.pool, d.device, d.admin_access, d.share_id,
                                       d.consumed_capacity, d.binding_conditions, d.binding_failure_conditions)
                          for d in result.devices),
                    result.node_selector, allocation,
                ),
                finalizers=claim.finalizers if DELETE_PROTECTION in claim.finalizers
                else (*claim.finalizers, DELETE_PROTECTION),
                pending=True,
                pending_group=plan.group,
                sharers=1,
            )
            extended = plan.extended if plan.extended is not None and claim is plan.extended.claim else None
            if extended is not None:  # not in the API yet: shown as this scheduler's until created
                cluster.catalog.put(CLAIM, claim.namespace, claim.name, assumed)
            else:
                cluster.catalog.assume(CLAIM, claim.namespace, claim.name, assumed)
            reservations.append(ClaimReservation(claim, allocation, binding, extended))
        if not reservations:
            return None
        usage = {}
        if shared:  # what the shared devices have left, this pod's shares taken (as simulate shows them)
            index = device_index(cluster)
            usage = {device_id: capacity_usage(index, device_id) for device_id in shared}
        return DeviceReservation(node, pod.key, tuple(reservations), usage)

    def unreserve(self, pod: PodInfo, cluster: ClusterState, reservation: DeviceReservation) -> None:
        for claim in reservation.claims:
            if claim.extended is not None:
                shown: ResourceClaimInfo | None = cluster.catalog.get(CLAIM, claim.claim.name, claim.claim.namespace)
                if shown is not None and shown.pending:  # (once created, the API server's copy stays)
                    cluster.catalog.remove(CLAIM, claim.claim.namespace, claim.claim.name)
            elif claim.allocation is not None:
                _release_pending(cluster, claim.claim)

    # -------------------------------------------------------------- postfilter

    def post_filter(self, pod: PodInfo, cluster: ClusterState, context: PostFilterContext) -> PostFilterWrites | str:
        """kube's PostFilter: free a claim allocated where the pod cannot run, or delete a special
        claim left by an earlier attempt, so that the next attempt may allocate anew (the pod is
        retried when the claim's change arrives: a ResourceClaim event). On an API server without
        `resource.k8s.io/v1` nothing (kube-scheduler of that release has no such plugin)."""
        if CLAIM in cluster.catalog.unserved:
            return ""
        if not self._concerns(pod, cluster):
            return NO_CLAIMS
        plan = self._plan(pod, cluster)
        backed = bool(pod.extended_containers and backed_requests(pod, cluster.catalog))
        if plan.reason is not None or (not plan.claims and not backed):
            return NO_CLAIMS  # kube's PreFilter failed before it kept the claims, or there are none
        stale = existing_claim(pod, cluster.catalog) if backed else None
        if stale is not None and (not stale.requests or stale.pending):
            stale = None  # kube's special claim still in memory (or ours in flight): nothing to delete
        reached = context.reached(self.name)
        if reached is not None and stale is None:
            if plan.codes is not None:  # kube's Filter returns early on these nodes, before the claims
                reached = reached & ~np.isin(plan.codes, (4, 5))
            now = self.clock()
            for claim in plan.claims:
                if claim.allocation is None or claim.pending:
                    continue
                terms = claim.allocation.node_selector
                if claim.allocation.binding_conditions and binding_problem(claim, now):
                    if not reached.any():  # its binding failed or timed out: unavailable wherever looked
                        continue
                elif terms is None:
                    continue
                else:
                    admitted = np.zeros(cluster.size, dtype=bool)
                    for term in terms:
                        admitted |= term_mask(cluster, term)
                    if not (reached & ~admitted).any():
                        continue  # available wherever kube's Filter looked
                if not claim.reserved_for or (len(claim.reserved_for) == 1 and claim.reserved_for[0].uid == pod.uid):
                    return PostFilterWrites(DEALLOCATED, deallocation_writes(claim))
        if stale is not None:
            return PostFilterWrites(DELETED, deletion_writes(stale))
        return STILL_UNSCHEDULABLE

    def clears_nomination(self, message: str) -> bool:
        """kube's DynamicResources returns no PostFilterResult: the pod's nomination stays as it is."""
        return False

    # -------------------------------------------------------------- prebind

    def pre_bind(self, pod: PodInfo, cluster: ClusterState, node: str, reservation: Any) -> PreBind | None:
        """kube's PreBind, for any pod with claims (its PreBindPreFlight: `preflight`): for each claim
        not reserved for the pod yet, the finalizer, then the allocation (with `allocationTimestamp`)
        and the reservation (`prebind_writes`); the special claim is created first, and the pod's
        `status.extendedResourceClaimStatus` written after (`extended_writes`). Then, when a device
        of its claims has binding conditions, the `BindingConditionsPending` event and the wait until
        the driver reports them all True (`_bound`: a failure condition fails it, and so does the
        binding timeout, counted from each claim's `allocationTimestamp`)."""
        reserved = reservation.claims if isinstance(reservation, DeviceReservation) else ()
        _, claims, _ = _resolve(pod, cluster) if pod.resource_claims else (None, [], [])
        if not reserved and not claims:
            return None
        stamp = _rfc3339(self.clock())
        writes: list[Write] = []
        keys: dict[str, tuple[str, str]] = {claim.key: (claim.namespace, claim.name) for claim in claims}
        waits = any(claim.allocation is not None and claim.allocation.binding_conditions for claim in claims)
        for claim in reserved:
            keys.setdefault(claim.key, (claim.claim.namespace, claim.claim.name))
            if claim.allocation is not None and _with_binding_conditions(claim.allocation):
                waits = True
            if claim.extended is not None:
                writes.extend(extended_writes(claim, pod, stamp))
            else:
                writes.extend(prebind_writes(claim, stamp))
        wait = None
        if waits:
            wait = WaitFor(
                functools.partial(self._bound, tuple(keys.values())), frozenset({CLAIM}), BINDING_TIMEOUT,
                "device binding timeout: context deadline exceeded",  # kube's poll ending before a claim's
                Notice(BINDING_PENDING, "Scheduling", f"waiting for binding conditions for device on node {node}"),
            )
        return PreBind(tuple(writes), wait, preflight=True)

    def _bound(
        self, keys: tuple[tuple[str, str], ...], cluster: ClusterState, written: Mapping[ObjectRef, str]
    ) -> bool:
        """kube's `isPodReadyForBinding`, on the claims as the watches bring them: True once every
        claim is ready; the first claim not ready keeps the wait going, or ends it once its binding
        conditions timed out (`device binding timeout: claim=NAME`); a True failure condition ends it
        (`device binding failed: claim=NAME, reason=R, message="M"`)."""
        now = self.clock()
        for namespace, name in keys:
            claim: ResourceClaimInfo | None = cluster.catalog.get(CLAIM, name, namespace)
            if claim is None:
                raise PreBindError(f'could not find ResourceClaim "{namespace}/{name}"')
            ready, failed = binding_state(claim)
            if failed is not None:
                raise PreBindError(binding_failed(claim, failed))
            if not ready:
                deadline = binding_deadline(claim)
                if deadline is not None and deadline < now:
                    raise PreBindError(f"device binding timeout: claim={claim.name}")
                return False
        return True


def _release_pending(cluster: ClusterState, claim: ResourceClaimInfo) -> None:
    """A member lets go of a pending allocation (kube's `MaybeRemoveClaimPendingAllocation`): while
    other members of its group still hold it, it stays; the last one restores the server's copy."""
    shown: ResourceClaimInfo | None = cluster.catalog.get(CLAIM, claim.name, claim.namespace)
    if shown is not None and shown.pending and shown.sharers > 1:
        released = dataclasses.replace(shown, sharers=shown.sharers - 1)
        cluster.catalog.assume(CLAIM, claim.namespace, claim.name, released)
    else:
        cluster.catalog.restore(CLAIM, claim.namespace, claim.name)


def claimed_devices(pod: PodInfo, cluster: ClusterState, now: float) -> list[dict[str, Any]]:
    """`placer explain`'s `devices`: the devices the pod's claims are allocated (docs/cli.md) — each
    with its share's `consumedCapacity`, `shareID` and the device's `capacity` used and left (every
    allocated or in-flight share), and, for a device with binding conditions, where its binding
    stands (`binding`: ready, the conditions still pending and those failed, what the driver reported,
    `since` the allocation's timestamp, the `timeout` 600 s after it)."""
    if not pod.resource_claims or CLAIM in cluster.catalog.unserved:
        return []
    _, claims, _ = _resolve(pod, cluster)
    index = device_index(cluster)
    out: list[dict[str, Any]] = []
    for claim in claims:
        allocation = claim.allocation
        if allocation is None:
            continue
        for result in allocation.results:
            entry: dict[str, Any] = {"claim": claim.key, "request": result.request, "driver": result.driver,
                                     "pool": result.pool, "device": result.device}
            if result.consumed_capacity is not None:
                entry["consumedCapacity"] = {k: str(v) for k, v in sorted(result.consumed_capacity.items())}
            if result.share_id:
                entry["shareID"] = result.share_id
                usage = capacity_usage(index, result.id)
                if usage:
                    entry["capacity"] = usage_json(usage)
            if result.binding_conditions:
                entry["bindingConditions"] = list(result.binding_conditions)
                entry["bindingFailureConditions"] = list(result.binding_failure_conditions)
                entry["binding"] = _binding_view(claim, result, now)
            out.append(entry)
    return out


def _binding_view(claim: ResourceClaimInfo, result: DeviceResult, now: float) -> dict[str, Any]:
    status = claim.device_status(result)
    conditions = status.conditions if status is not None else ()
    true = {c.type for c in conditions if c.status == "True"}
    pending = [kind for kind in result.binding_conditions if kind not in true]
    failed = [kind for kind in result.binding_failure_conditions if kind in true]
    deadline = binding_deadline(claim)
    allocation = claim.allocation
    stamp = allocation.raw.get("allocationTimestamp") if allocation is not None else None
    return {
        "ready": not pending and not failed,
        "pending": pending,
        "failed": failed,
        "reported": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                      "since": c.since} for c in conditions],
        "since": stamp if isinstance(stamp, str) else None,
        "timeout": None if deadline is None else _rfc3339(deadline),
        "timedOut": deadline is not None and deadline < now and bool(pending),
    }


def settle(cluster: ClusterState, reservation: DeviceReservation) -> None:
    """As if PreBind had written the reservation (`placer simulate`, where bindings complete at
    once): each claim shows its allocation and the pod in `reservedFor`, no longer in flight."""
    catalog = cluster.catalog
    for item in reservation.claims:
        current: ResourceClaimInfo | None = catalog.get(CLAIM, item.claim.name, item.claim.namespace)
        if current is None:
            continue
        reserved = current.reserved_for if current.is_reserved_for(item.consumer) else (
            *current.reserved_for, item.consumer)
        settled = dataclasses.replace(current, pending=False, pending_group="", sharers=0, reserved_for=reserved)
        catalog.assume(CLAIM, current.namespace, current.name, settled)


def release_pod(cluster: ClusterState, pod: PodInfo) -> None:
    """A pod gone (`placer simulate`'s preemption victims): out of its claims' `reservedFor`, and a
    claim it alone held deallocated, as the resourceclaim controller does — its devices are free."""
    catalog = cluster.catalog
    names = [entry.claim_name or entry.generated for entry in pod.resource_claims]
    if pod.extended_containers:  # the claim of its backed extended resources
        extended = existing_claim(pod, catalog)
        names.append(extended.name if extended is not None else None)
    for name in names:
        claim: ResourceClaimInfo | None = catalog.get(CLAIM, name, pod.namespace) if name else None
        if claim is None or not pod.uid or not claim.is_reserved_for(_consumer(pod)):
            continue
        others = tuple(ref for ref in claim.reserved_for if ref.uid != pod.uid)
        released = dataclasses.replace(claim, reserved_for=others, allocation=claim.allocation if others else None,
                                       pending=False, pending_group="", sharers=0)
        catalog.assume(CLAIM, claim.namespace, claim.name, released)
