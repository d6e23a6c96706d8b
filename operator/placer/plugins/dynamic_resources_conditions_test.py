"""DynamicResources with kube v1.36's two DRA features on by default: binding conditions
(DRADeviceBindingConditions) and consumable capacity (DRAConsumableCapacity). kube's
`dynamicresources_test.go` rows (`TestPlugin`: the binding-conditions rows; `TestGatherAllocatedState`)
replayed, names kept, and what the plugin adds around them: the wait PreBind hands the binding
cycle, the shares a Reserve holds, and what simulate shows of a shared device."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from placer.engine.allocator import Allocator
from placer.engine.cluster import ClusterState
from placer.engine.device_index import CLAIM, device_index
from placer.engine.devices import DELETE_PROTECTION, ResourceClaimInfo, parse_resource_claim
from placer.engine.framework import PostFilterContext, PostFilterWrites, PreBindError
from placer.plugins.dynamic_resources import (
    BINDING_PENDING,
    BINDING_TIMEOUT,
    CANNOT_ALLOCATE,
    DEALLOCATED,
    NOT_AVAILABLE,
    ClaimReservation,
    DeviceReservation,
    DynamicResources,
    _go_quote,
    prebind_writes,
    settle,
)
from placer.plugins.dynamic_resources_test import (
    CLAIM_NAME,
    CLAIM_NAME2,
    CLASS,
    DEVICE_CLASS,
    DRIVER,
    OTHER_CLAIM,
    POD_UID,
    WORKER,
    allocated_claim,
    cluster,
    pending_claim,
    plugin,
    pod_with_template,
    reasons,
)
from placer.testing import filter_result, pod_info
from placer.testing_devices import (
    capacity_policy,
    claim_pod,
    device,
    device_class,
    request,
    resource_claim,
    resource_slice,
)

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
STAMP = "2027-01-15T08:00:00Z"
PINNED = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [WORKER]}]}]}
DRIVER2 = "some-driver-2"
TEN_MINUTES_AGO = "2027-01-15T07:49:59Z"  # (and a second: the deadline must be past, as kube's clock moved on)


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The plugin's wall clock, at NOW unless a test moves it."""
    now = [NOW]
    monkeypatch.setattr(DynamicResources, "clock", staticmethod(lambda: now[0]))
    yield now


def fabric_slice(driver: str = DRIVER, name: str = "instance-1") -> dict[str, Any]:
    """kube's `fabricSlice`: a device reached through the fabric (a node selector), bound to the node
    it is allocated for, that its driver must prepare (binding condition `condition`, failure
    condition `failed`)."""
    return resource_slice(f"{WORKER}-{driver}", driver, node_selector=PINNED, pool=WORKER, generation=0,
                          devices=[device(name, binding_conditions=["condition"], binding_failure_conditions=["failed"],
                                          binds_to_node=True)])


def conditioned(request_name: str = "req-1", driver: str = DRIVER, name: str = "instance-1",
                stamp: str | None = STAMP) -> dict[str, Any]:
    """kube's `allocationResultWithBindingConditions`."""
    out: dict[str, Any] = {"devices": {"results": [{
        "request": request_name, "driver": driver, "pool": WORKER, "device": name,
        "bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]}]}, "nodeSelector": PINNED}
    if stamp is not None:
        out["allocationTimestamp"] = stamp
    return out


def with_status(claim: dict[str, Any], *conditions: tuple[str, str], driver: str = DRIVER,
                name: str = "instance-1", reason: str = "", message: str = "") -> dict[str, Any]:
    """The claim with the driver's `status.devices` entry for its device."""
    entry: dict[str, Any] = {"driver": driver, "pool": WORKER, "device": name}
    if conditions:
        entry["conditions"] = [{"type": kind, "status": status, "reason": reason if status == "True" else "",
                                "message": message if status == "True" else "",
                                "lastTransitionTime": STAMP} for kind, status in conditions]
    claim["status"]["devices"] = [entry]
    return claim


def bound_claim(name: str = CLAIM_NAME, driver: str = DRIVER, device_name: str = "instance-1",
                request_name: str = "req-1") -> dict[str, Any]:
    """kube's `boundClaim`: allocated, the driver reporting `condition` True and `failed` False."""
    claim = allocated_claim(name=name, allocated=conditioned(request_name, driver, device_name))
    return with_status(claim, ("condition", "True"), ("failed", "False"), driver=driver, name=device_name)


def failed_claim(name: str = CLAIM_NAME, driver: str = DRIVER, device_name: str = "instance-1",
                 request_name: str = "req-1", reason: str = "", message: str = "") -> dict[str, Any]:
    """kube's `failedBindingClaim`: the failure condition True."""
    claim = allocated_claim(name=name, allocated=conditioned(request_name, driver, device_name))
    return with_status(claim, ("condition", "False"), ("failed", "True"), driver=driver, name=device_name,
                       reason=reason, message=message)


def pod_with_claim_name() -> dict[str, Any]:
    return claim_pod("my-pod", claims={"my-resource": CLAIM_NAME}, uid=POD_UID)


def pod_with_two_claim_names() -> dict[str, Any]:
    return claim_pod("my-pod", claims={"my-resource": CLAIM_NAME, "my-resource-2": CLAIM_NAME2}, uid=POD_UID)


def post_filter(pod_obj: dict[str, Any], state: ClusterState) -> PostFilterWrites | str:
    present = state.present[: state.size].copy()
    context = PostFilterContext(np.empty(0, dtype=np.int64), len(state.index), lambda slot, gone: None,
                                lambda slot, gone: False, reached=lambda name: present)
    return plugin().post_filter(pod_info(pod_obj), state, context)


def plan_for(pod_obj: dict[str, Any], state: ClusterState) -> tuple[DeviceReservation | None, Any]:
    p = plugin()
    pod = pod_info(pod_obj)
    reservation = p.reserve(pod, state, WORKER)
    return reservation, p.pre_bind(pod, state, WORKER, reservation)


def land(state: ClusterState, claim: dict[str, Any]) -> None:
    """The watch brings the API server's copy of a claim (what PreBind wrote, or the driver)."""
    info = parse_resource_claim(claim)
    state.catalog.put(CLAIM, info.namespace, info.name, info)


# ---------------------------------------------------------------------- binding conditions: kube's rows


def test_bind_claim_with_binding_conditions(clock: list[float]) -> None:
    """bind-claim-with-binding-conditions: Reserve holds the fabric device in flight (its conditions
    copied, pinned to the node by bindsToNode); PreBind writes the allocation with its timestamp and
    waits; nobody sets the conditions, so the wait ends in the timeout (kube's row shortens it)."""
    state = cluster(pending_claim(), DEVICE_CLASS, fabric_slice())
    assert reasons(pod_with_claim_name(), state) == {WORKER: []}
    reservation, plan = plan_for(pod_with_claim_name(), state)
    assert isinstance(reservation, DeviceReservation)
    (claim,) = reservation.claims
    assert claim.allocation == conditioned(stamp=None)
    shown: ResourceClaimInfo = state.catalog.get(CLAIM, CLAIM_NAME, "default")
    assert shown.pending and shown.allocation is not None and shown.allocation.binding_conditions
    finalizer, status = plan.writes
    assert finalizer.body()["metadata"]["finalizers"] == [DELETE_PROTECTION]
    assert {op["path"]: op["value"] for op in status.body()[2:]} == {
        "/status/reservedFor": [{"resource": "pods", "name": "my-pod", "uid": POD_UID}],
        "/status/allocation": conditioned()}  # with allocationTimestamp, as kube's bindClaim
    wait = plan.wait
    assert wait is not None and wait.timeout == BINDING_TIMEOUT and CLAIM in wait.events
    assert wait.notice is not None and (wait.notice.type, wait.notice.reason, wait.notice.action, wait.notice.note) == (
        "Normal", BINDING_PENDING, "Scheduling", f"waiting for binding conditions for device on node {WORKER}")
    assert wait.timeout_message == "device binding timeout: context deadline exceeded"
    assert not wait.check(state, {})  # our own assumption: no status yet
    written = allocated_claim(allocated=conditioned(), finalizers=[DELETE_PROTECTION],
                              reserved_for=[("my-pod", POD_UID)], resource_version="2")
    land(state, written)
    assert not wait.check(state, {})
    clock[0] = NOW + BINDING_TIMEOUT + 1
    with pytest.raises(PreBindError, match=r"^device binding timeout: claim=my-pod-my-resource$"):
        wait.check(state, {})


def test_bound_claim_with_succeeded_binding_conditions() -> None:
    """bound-claim-with-succeeded-binding-conditions: the claim is only reserved; ready at once."""
    state = cluster(bound_claim())
    _, plan = plan_for(pod_with_claim_name(), state)
    (write,) = plan.writes
    assert write.body()["status"] == {"reservedFor": [{"resource": "pods", "name": "my-pod", "uid": POD_UID}]}
    assert plan.wait is not None and plan.wait.check(state, {}) is True


@pytest.mark.parametrize("claim", [
    pytest.param(failed_claim(), id="bound-claim-with-failed-binding"),
    pytest.param(with_status(allocated_claim(allocated=conditioned(stamp=TEN_MINUTES_AGO))),
                 id="bound-claim-with-timed-out-binding"),
    pytest.param(with_status(allocated_claim(allocated=conditioned(stamp=TEN_MINUTES_AGO)),
                             ("condition1", "True"), ("condition2", "False")),
                 id="bound-claim-with-mixed-binding-conditions"),
])
def test_unavailable_claim_is_deallocated(claim: dict[str, Any]) -> None:
    """The binding failed, or timed out (allocated 10 minutes ago): every node rejects the pod
    ("resourceclaim not available on the node") and PostFilter deallocates the claim — allocation,
    reservedFor and the driver's `status.devices` cleared — so the next attempt allocates anew."""
    state = cluster(claim, fabric_slice())
    assert reasons(pod_with_claim_name(), state) == {WORKER: [NOT_AVAILABLE]}
    outcome = post_filter(pod_with_claim_name(), state)
    assert isinstance(outcome, PostFilterWrites) and outcome.message == DEALLOCATED
    (write,) = outcome.writes
    assert write.body()["status"] == {"reservedFor": None, "allocation": None, "devices": None}
    assert write.target.name == CLAIM_NAME


def test_prebind_fail_with_binding_timeout(clock: list[float]) -> None:
    """prebind-fail-with-binding-timeout: allocated 590 s ago, not ready; the filter passes, PreBind
    waits, and 10 s later the claim's own timeout ends the wait: `device binding timeout: claim=...`."""
    allocated_at = "2027-01-15T07:50:10Z"
    claim = with_status(allocated_claim(allocated=conditioned(stamp=allocated_at)))
    state = cluster(claim, fabric_slice())
    assert reasons(pod_with_claim_name(), state) == {WORKER: []}
    _, plan = plan_for(pod_with_claim_name(), state)
    (write,) = plan.writes
    assert "allocation" not in write.body()["status"]  # the allocation (and its timestamp) stays as it is
    assert not plan.wait.check(state, {})
    clock[0] = NOW + 10
    assert not plan.wait.check(state, {})  # (not before: the deadline itself is not past it)
    clock[0] = NOW + 11
    with pytest.raises(PreBindError, match=r"^device binding timeout: claim=my-pod-my-resource$"):
        plan.wait.check(state, {})
    # and the next attempt finds it timed out: unavailable, deallocated by PostFilter
    assert reasons(pod_with_claim_name(), state) == {WORKER: [NOT_AVAILABLE]}


def test_bound_claim_without_binding_conditions() -> None:
    """bound-claim-without-binding-conditions: nothing to wait for; the pod is only added to
    `reservedFor` (kube's PreBind also adds an `allocationTimestamp` to an allocation that lacks one,
    which a real API server refuses: an allocation is immutable. Placer leaves it as it is)."""
    state = cluster(allocated_claim(), OTHER_CLAIM)
    p = plugin()
    pod = pod_info(pod_with_template())
    reservation = p.reserve(pod, state, WORKER)
    plan = p.pre_bind(pod, state, WORKER, reservation)
    assert plan is not None and plan.preflight and plan.wait is None
    (write,) = plan.writes
    assert write.body()["status"] == {"reservedFor": [{"resource": "pods", "name": "my-pod", "uid": POD_UID}]}


def test_a_pod_whose_claims_are_reserved_already_still_has_prebind() -> None:
    """kube's PreBindPreFlight says Success for any pod with claims (and the binding cycle then sets
    its nominatedNodeName): a pod whose claim is reserved for it already has a plan with nothing to
    write, and waits for binding conditions all the same."""
    reserved = allocated_claim(reserved_for=[("my-pod", POD_UID)])
    _, plan = plan_for(pod_with_claim_name(), cluster(reserved))
    assert plan is not None and plan.preflight and plan.writes == () and plan.wait is None
    pending = with_status(allocated_claim(allocated=conditioned(), reserved_for=[("my-pod", POD_UID)]))
    state = cluster(pending, fabric_slice())
    _, plan = plan_for(pod_with_claim_name(), state)
    assert plan.writes == () and plan.wait is not None and not plan.wait.check(state, {})


def test_multi_claims_binding_conditions_all_success() -> None:
    state = cluster(bound_claim(), bound_claim(CLAIM_NAME2, DRIVER2, "instance-2", "req-2"), DEVICE_CLASS,
                    fabric_slice(), fabric_slice(DRIVER2, "instance-2"))
    _, plan = plan_for(pod_with_two_claim_names(), state)
    assert len(plan.writes) == 2 and plan.wait.check(state, {}) is True


def test_multi_claims_binding_conditions_one_fail() -> None:
    """multi-claims-binding-conditions-one-fail: only the claim whose binding failed is deallocated."""
    state = cluster(bound_claim(), failed_claim(CLAIM_NAME2, DRIVER2, "instance-2", "req-2"), DEVICE_CLASS,
                    fabric_slice(), fabric_slice(DRIVER2, "instance-2"))
    assert reasons(pod_with_two_claim_names(), state) == {WORKER: [NOT_AVAILABLE]}
    outcome = post_filter(pod_with_two_claim_names(), state)
    assert isinstance(outcome, PostFilterWrites) and outcome.message == DEALLOCATED
    assert [w.target.name for w in outcome.writes] == [CLAIM_NAME2]


# ---------------------------------------------------------------------- binding conditions: the wait


def test_a_failure_condition_fails_the_wait_with_kubes_message() -> None:
    state = cluster(with_status(allocated_claim(allocated=conditioned()), ("condition", "False")), fabric_slice())
    _, plan = plan_for(pod_with_claim_name(), state)
    assert not plan.wait.check(state, {})
    land(state, failed_claim(reason="FabricError", message='attach "gpu" failed\n'))
    with pytest.raises(PreBindError) as error:
        plan.wait.check(state, {})
    assert str(error.value) == ('device binding failed: claim=my-pod-my-resource, reason=FabricError, '
                                'message="attach \\"gpu\\" failed\\n"')


def test_the_wait_goes_through_the_claims_in_order() -> None:
    """kube's isPodReadyForBinding: the first claim not ready ends the look (its own timeout only)."""
    state = cluster(with_status(allocated_claim(allocated=conditioned())),
                    failed_claim(CLAIM_NAME2, DRIVER2, "instance-2", "req-2"), fabric_slice(),
                    fabric_slice(DRIVER2, "instance-2"))
    p = plugin()
    pod = pod_info(pod_with_two_claim_names())
    plan = p.pre_bind(pod, state, WORKER, None)
    assert not plan.wait.check(state, {})  # my-pod-my-resource is not ready: the second is not looked at
    land(state, bound_claim())
    with pytest.raises(PreBindError, match="claim=my-pod-my-resource-2"):
        plan.wait.check(state, {})
    state.catalog.remove(CLAIM, "default", CLAIM_NAME)
    with pytest.raises(PreBindError, match=r'^could not find ResourceClaim "default/my-pod-my-resource"$'):
        plan.wait.check(state, {})


def test_a_failed_binding_keeps_the_allocation() -> None:
    """kube's Unreserve takes the pod out of `reservedFor` but leaves an allocation with binding
    conditions (its devices may be prepared meanwhile; PostFilter gives a failed one back)."""
    state = cluster(pending_claim(), DEVICE_CLASS, fabric_slice())
    _, plan = plan_for(pod_with_claim_name(), state)
    finalizer, status = plan.writes
    written = {"metadata": {"finalizers": [DELETE_PROTECTION]}, "status": {
        "allocation": conditioned(), "reservedFor": [{"resource": "pods", "name": "my-pod", "uid": POD_UID}]}}
    undo = status.undo(written)
    assert undo is not None and undo.patch == {"status": {"reservedFor": None}}
    assert finalizer.undo({"metadata": written["metadata"], "status": {"allocation": conditioned()}}) is None


def test_a_claim_timing_out_rejects_the_node_without_any_change(clock: list[float]) -> None:
    """The filter's answer for a claim waiting on its driver holds until its deadline only: a retry
    after it finds the claim timed out though nothing in the cluster changed."""
    state = cluster(with_status(allocated_claim(allocated=conditioned())), fabric_slice())
    p = plugin()
    pod = pod_info(pod_with_claim_name())
    assert p.filter(pod, state) is None
    clock[0] = NOW + BINDING_TIMEOUT + 1
    mask = p.filter(pod, state)
    assert mask is not None and not mask.any()


def test_go_quote() -> None:
    assert _go_quote('a "b"\t\\ é\x01') == '"a \\"b\\"\\t\\\\ é\\x01"'


# ---------------------------------------------------------------------- TestGatherAllocatedState


def shared_claim(name: str, share: str, consumed: str | None = None) -> dict[str, Any]:
    """kube's `allocatedClaimWithSharedDevice` / `...WithConsumedCapacity`: a share of `shared-instance`."""
    result: dict[str, Any] = {"request": "req-1", "driver": DRIVER, "pool": WORKER, "device": "shared-instance",
                              "shareID": share}
    if consumed is not None:
        result["consumedCapacity"] = {"my-cap": consumed}
    return resource_claim(name, requests=[request("req-1", CLASS)],
                          allocated={"devices": {"results": [result]}, "nodeSelector": PINNED})


SHARED = (DRIVER, WORKER, "shared-instance")


@pytest.mark.parametrize(("claims", "in_flight", "devices", "shares", "capacity"), [
    ([], None, 0, 0, None),
    ([allocated_claim()], None, 1, 0, None),
    ([shared_claim("claim-1", "share-123")], None, 0, 1, None),
    ([shared_claim("claim-1", "share-123", "1")], None, 0, 1, 1),
    ([allocated_claim(), shared_claim("claim-1", "share-123", "1")], None, 1, 1, 1),
    ([allocated_claim(), shared_claim("claim-1", "share-123", "1")], shared_claim("claim-2", "share-456", "1"),
     1, 2, 2),
], ids=["no-claims", "single-allocated-claim", "single-allocated-claim-with-shared-device",
        "single-allocated-claim-with-capacity", "mixed-allocated-claim", "add-inflight-allocated-claim-with-capacity"])
def test_gather_allocated_state(claims: list[dict[str, Any]], in_flight: dict[str, Any] | None, devices: int,
                                shares: int, capacity: int | None) -> None:
    """kube's rows with DRAConsumableCapacity on (its `disabled-*` rows have it off). kube adds two
    objects of one name to its informer; here the shared claims have their own names. An in-flight
    claim is this scheduler's assumption."""
    state = cluster(*claims, pending_claim("claim-2"))
    if in_flight is not None:
        info = parse_resource_claim(in_flight)
        state.catalog.assume(CLAIM, "default", "claim-2", ResourceClaimInfo(**{
            **{f: getattr(info, f) for f in ResourceClaimInfo.__dataclass_fields__}, "pending": True}))
    index = device_index(state)
    assert sum(1 for d in index.allocated if index.allocated[d] > 0) == devices
    assert sum(len(held) for held in index.shares.values()) == shares
    assert (None if SHARED not in index.capacity else index.capacity[SHARED]["my-cap"]) == capacity
    assert index.state.holds(SHARED) is (shares > 0)


# ---------------------------------------------------------------------- consumable capacity


GPU_CLASS = device_class("shared-gpu", f'device.driver == "{DRIVER}" && device.allowMultipleAllocations == true')


def gpu_slice(memory: Any = "80Gi") -> dict[str, Any]:
    return resource_slice(f"{WORKER}-{DRIVER}", DRIVER, node=WORKER, pool=WORKER, generation=0,
                          devices=[device("gpu-0", capacity={"memory": memory}, multiple=True)])


def memory_claim(name: str, *amounts: str | None) -> dict[str, Any]:
    """A claim of one request per amount (None: no capacity asked)."""
    return resource_claim(name, requests=[
        request(f"req-{i}", "shared-gpu", capacity=None if amount is None else {"memory": amount})
        for i, amount in enumerate(amounts)])


def memory_pod(name: str, claim: str) -> dict[str, Any]:
    return claim_pod(name, claims={"gpu": claim}, uid=f"uid-{name}")


UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_shares_of_a_device_until_its_capacity_is_used_up() -> None:
    """Claims share one GPU's memory: each share is its rounded request, with a fresh share ID;
    in-flight shares count, so the capacity is never handed out twice; a pod whose request no longer
    fits reads `cannot allocate all claims`; a share given back (Unreserve) makes room again."""
    state = cluster(GPU_CLASS, gpu_slice(), *(memory_claim(f"c{i}", "30Gi") for i in range(3)))
    p = plugin()
    placed = []
    for i in range(2):
        pod = pod_info(memory_pod(f"p{i}", f"c{i}"))
        assert reasons(memory_pod(f"p{i}", f"c{i}"), state) == {WORKER: []}
        reservation = p.reserve(pod, state, WORKER)
        assert isinstance(reservation, DeviceReservation)
        placed.append((pod, reservation))
    (first,), (second,) = (r.as_json() for _, r in placed)
    assert first["consumedCapacity"] == {"memory": "30Gi"} and UUID.match(first["shareID"])
    assert UUID.match(second["shareID"]) and second["shareID"] != first["shareID"]
    assert first["capacity"] == {"memory": {"used": "30Gi", "left": "50Gi"}}
    assert second["capacity"] == {"memory": {"used": "60Gi", "left": "20Gi"}}
    assert reasons(memory_pod("p2", "c2"), state) == {WORKER: [CANNOT_ALLOCATE]}
    pod, reservation = placed[0]
    p.unreserve(pod, state, reservation)
    assert reasons(memory_pod("p2", "c2"), state) == {WORKER: []}
    assert device_index(state).capacity[(DRIVER, WORKER, "gpu-0")] == {"memory": 30 * 2**30}


def test_two_requests_of_one_claim_share_one_device() -> None:
    state = cluster(GPU_CLASS, gpu_slice(), memory_claim("both", "12Gi", "12Gi"))
    reservation = plugin().reserve(pod_info(memory_pod("p", "both")), state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    first, second = reservation.as_json()
    assert (first["device"], second["device"]) == ("gpu-0", "gpu-0") and first["shareID"] != second["shareID"]
    assert first["consumedCapacity"] == second["consumedCapacity"] == {"memory": "12Gi"}
    assert second["capacity"] == {"memory": {"used": "24Gi", "left": "56Gi"}}


def test_a_claim_asking_no_capacity_consumes_the_policys_default() -> None:
    state = cluster(GPU_CLASS, gpu_slice(capacity_policy("80Gi", default="8Gi", minimum="4Gi", step="4Gi")),
                    memory_claim("plain", None), memory_claim("odd", "10Gi"))
    p = plugin()
    (plain,) = p.reserve(pod_info(memory_pod("a", "plain")), state, WORKER).as_json()
    assert plain["consumedCapacity"] == {"memory": "8Gi"}
    (odd,) = p.reserve(pod_info(memory_pod("b", "odd")), state, WORKER).as_json()
    assert odd["consumedCapacity"] == {"memory": "12Gi"}  # 10Gi rounded up to a step above 4Gi
    assert odd["capacity"] == {"memory": {"used": "20Gi", "left": "60Gi"}}


def test_a_share_written_and_landed_counts_once() -> None:
    """The watch brings the claim with the share PreBind wrote: the assumption gives way to it and the
    share is counted once; settled (simulate) it stays counted; deallocated it is free."""
    state = cluster(GPU_CLASS, gpu_slice(), memory_claim("c0", "30Gi"))
    reservation = plugin().reserve(pod_info(memory_pod("p0", "c0")), state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    (claim,) = reservation.claims
    index = device_index(state)
    land(state, resource_claim("c0", requests=[request("req-0", "shared-gpu", capacity={"memory": "30Gi"})],
                               uid="uid-c0", allocated=claim.allocation, finalizers=[DELETE_PROTECTION],
                               reserved_for=[("p0", "uid-p0")], resource_version="2"))
    assert index.capacity[(DRIVER, WORKER, "gpu-0")] == {"memory": 30 * 2**30}
    assert sum(len(s) for s in index.shares.values()) == 1
    settle(state, reservation)
    assert index.capacity[(DRIVER, WORKER, "gpu-0")] == {"memory": 30 * 2**30}
    land(state, resource_claim("c0", requests=[request("req-0", "shared-gpu", capacity={"memory": "30Gi"})],
                               uid="uid-c0", resource_version="3"))
    assert (DRIVER, WORKER, "gpu-0") not in index.capacity and not index.shares


def test_prebind_writes_the_share() -> None:
    state = cluster(GPU_CLASS, gpu_slice(), memory_claim("c0", "30Gi"))
    reservation = plugin().reserve(pod_info(memory_pod("p0", "c0")), state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    (claim,) = reservation.claims
    _, status = prebind_writes(claim, STAMP)
    (result,) = {op["path"]: op["value"] for op in status.body()[2:]}["/status/allocation"]["devices"]["results"]
    assert result["consumedCapacity"] == {"memory": "30Gi"} and UUID.match(result["shareID"])
    assert isinstance(claim, ClaimReservation)


def test_counting_shares_agrees_with_the_allocator() -> None:
    """The filter counts devices with room for a plain request (shared ones with capacity left over
    allocated shares, policies rounding what a share takes, dedicated ones whose capacity the
    request fits); the full allocator on every node must agree, share by share."""
    taken = resource_claim("taken", requests=[request("r", "any-gpu", capacity={"memory": "60Gi"})], allocated={
        "devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "w1", "device": "s0",
                                 "shareID": "1b4e28ba-2fa1-11d2-883f-b9a761bde3fb",
                                 "consumedCapacity": {"memory": "60Gi"}}]}, "nodeSelector": PINNED})
    state = cluster(
        device_class("shared-gpu", f'device.driver == "{DRIVER}"'),
        memory_claim(CLAIM_NAME, "24Gi"),
        taken,
        resource_slice("w1", DRIVER, node=WORKER, pool="w1", devices=[
            device("s0", capacity={"memory": "80Gi"}, multiple=True),  # 20Gi left: no
            device("s1", capacity={"memory": capacity_policy("80Gi", minimum="4Gi", step="16Gi")}, multiple=True)]),
        resource_slice("w2", DRIVER, node="worker-2", pool="w2", devices=[
            device("d0", capacity={"memory": "16Gi"}),  # dedicated, too small
            device("d1", {"model": "x"})]),  # no memory at all
        resource_slice("w3", DRIVER, node="worker-3", pool="w3", devices=[device("d2", capacity={"memory": "32Gi"})]),
        nodes=(WORKER, "worker-2", "worker-3"),
    )
    p = plugin()
    info = pod_info(memory_pod("p", CLAIM_NAME))
    assert filter_result(p, info, state) == {WORKER: True, "worker-2": False, "worker-3": True}
    plan = p._plan(info, state)
    assert plan.simple is not None  # counted, not searched
    index = device_index(state)
    allocator = Allocator(functools.partial(state.catalog.get, "DeviceClass"), index.state)
    for name, slot in state.index.items():
        counted = p._results_on(plan, state, slot)
        searched = allocator.allocate(name, state.node(name).labels, index.pools_for(state, name), plan.claims)
        assert counted == searched, name
    (share,) = p.reserve(info, state, WORKER).as_json()
    assert (share["device"], share["consumedCapacity"]) == ("s1", {"memory": "36Gi"})  # 4Gi + 2 steps of 16Gi
