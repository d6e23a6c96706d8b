"""DynamicResources against kube v1.36's `dynamicresources_test.go` rows (`TestPlugin`, the score rows,
`computeScore`), names kept: PreFilter's pod-level reasons, Filter's per-node ones, Score, Reserve and
Unreserve through the catalog, and the PreBind writes."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest

from placer.engine.allocator import Allocator
from placer.engine.cluster import ClusterState
from placer.engine.device_index import CLAIM, device_index
from placer.engine.devices import DELETE_PROTECTION, ResourceClaimInfo, parse_resource_claim
from placer.engine.framework import JSON_PATCH
from placer.engine.parsing import parse_pod
from placer.engine.profile import compile_profile
from placer.engine.runtime import Scheduler
from placer.plugins.dynamic_resources import (
    CANNOT_ALLOCATE,
    NOT_AVAILABLE,
    ClaimReservation,
    DeviceReservation,
    DynamicResources,
    _score,
    prebind_writes,
    release_pod,
    settle,
)
from placer.testing import (
    cluster_of,
    container,
    decide,
    filter_result,
    make_plugin,
    make_profile,
    node,
    pod_info,
    scores,
)
from placer.testing import pod as make_pod
from placer.testing_devices import (
    allocation,
    claim_pod,
    device,
    device_class,
    first_available,
    request,
    resource_claim,
    resource_slice,
    sub_request,
)

WORKER, WORKER2, WORKER3 = "worker", "worker-2", "worker-3"
DRIVER = "some-driver"
CLASS = "my-resource-class"
CLAIM_NAME, CLAIM_NAME2 = "my-pod-my-resource", "my-pod-my-resource-2"
POD_UID = "1234"
BROKEN = f'device.attributes["{DRIVER}"].healthy'  # kube's brokenSelector: not set on `worker`
TAINT = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}

DEVICE_CLASS = device_class(CLASS)


def worker_slice(node_name: str, *devices: dict[str, Any]) -> dict[str, Any]:
    """kube's `st.MakeResourceSlice(node, driver)`: one pool per node, named after it."""
    return resource_slice(f"{node_name}-{DRIVER}", DRIVER, node=node_name, pool=node_name, generation=0,
                          devices=list(devices) or [device("instance-1")])


def healthy(value: bool) -> dict[str, Any]:
    return device("instance-1", {"healthy": value})


def pending_claim(name: str = CLAIM_NAME, *requests: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A claim the template controller made for the pod (kube's `pendingClaim`)."""
    return resource_claim(name, requests=list(requests) or [request("req-1", CLASS)], owner=("my-pod", POD_UID),
                          **kwargs)


def allocated_claim(**kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("allocated", allocation([("req-1", DRIVER, WORKER, "instance-1")], node=WORKER))
    return pending_claim(**kwargs)


OTHER_CLAIM = resource_claim("not-my-claim", requests=[request("req-1", CLASS)])
OTHER_ALLOCATED = resource_claim("not-my-claim", requests=[request("req-1", CLASS)],
                                 allocated=allocation([("req-1", DRIVER, WORKER, "instance-1")], node=WORKER))


def pod_with_claim_name(**kwargs: Any) -> dict[str, Any]:
    return claim_pod("my-pod", claims={"my-resource": CLAIM_NAME}, uid=POD_UID, **kwargs)


def pod_with_template(status: bool = True) -> dict[str, Any]:
    return claim_pod("my-pod", templates={"my-resource": CLAIM_NAME}, uid=POD_UID,
                     generated={"my-resource": CLAIM_NAME} if status else None)


def cluster(*objects: dict[str, Any], nodes: tuple[str, ...] = (WORKER,)) -> ClusterState:
    return cluster_of([node(name) for name in nodes], objects=objects)


def plugin() -> DynamicResources:
    instance = make_plugin("DynamicResources")
    assert isinstance(instance, DynamicResources)
    return instance


def prefilter(pod: dict[str, Any], state: ClusterState) -> str | None:
    return plugin().pre_filter(pod_info(pod), state)


def reasons(pod: dict[str, Any], state: ClusterState) -> dict[str, list[str]]:
    """Node -> the filter's reasons (empty: it fits)."""
    p = plugin()
    info = pod_info(pod)
    assert p.pre_filter(info, state) is None
    mask = p.filter(info, state)
    out = {}
    for name, slot in sorted(state.index.items()):
        fits = mask is None or bool(mask[slot])
        out[name] = [] if fits else list(p.reason_counts(info, state, np.array([slot])))
    return out


# ---------------------------------------------------------------------------- PreEnqueue / PreFilter


def test_claim_reference_and_template() -> None:
    for pod in (pod_with_claim_name(), pod_with_template()):
        state = cluster(allocated_claim(), OTHER_CLAIM)
        assert reasons(pod, state) == {WORKER: []}


@pytest.mark.parametrize(("pod", "objects", "message"), [
    (pod_with_template(status=False), [allocated_claim(), OTHER_CLAIM],
     'pod "default/my-pod": ResourceClaim not created yet'),
    (pod_with_template(), [allocated_claim(deleting=True)], 'resourceclaim "my-pod-my-resource" is being deleted'),
    (pod_with_template(), [resource_claim(CLAIM_NAME, requests=[request("req-1", CLASS)], owner=("my-pod", "1234123"))],
     "ResourceClaim default/my-pod-my-resource was not created for Pod default/my-pod (Pod is not owner)"),
    (pod_with_claim_name(), [], 'could not find ResourceClaim "default/my-pod-my-resource"'),
    (pod_with_claim_name(), [pending_claim()], "request req-1: device class my-resource-class does not exist"),
    (pod_with_claim_name(), [pending_claim(CLAIM_NAME, request("req-1", "does-not-exist"))],
     "request req-1: device class does-not-exist does not exist"),
    (pod_with_claim_name(),
     [pending_claim(CLAIM_NAME, first_available("req-1", sub_request("subreq-1", "does-not-exist")))],
     "request req-1/subreq-1: device class does-not-exist does not exist"),
], ids=["missing-claim", "deleted-claim", "wrong-claim", "could-not-find", "missing-class",
        "claim-with-request-with-unknown-device-class", "claim-with-prioritized-list-unknown-device-class"])
def test_pod_level_reasons(pod: dict[str, Any], objects: list[dict[str, Any]], message: str) -> None:
    state = cluster(*objects)
    assert prefilter(pod, state) == message
    decision = decide(make_profile([{"name": "DynamicResources"}], []), pod, state)
    assert decision.node is None and decision.message == f"0/1 nodes are available: {message}."


def test_claims_on_an_api_server_without_resource_k8s_io_v1() -> None:
    """Placer's own rule (kube v1.36 always serves the API): the operator found no ResourceClaim kind
    (a 404: an API server older than v1.34), so a pod with claims is kept pending, saying why, rather
    than bound as if it had none; a pod without claims is unaffected."""
    state = cluster()
    assert state.catalog.set_served(CLAIM, False) and not state.catalog.set_served(CLAIM, False)
    message = ('pod "default/my-pod": its ResourceClaims cannot be read: this API server does not serve '
               "resource.k8s.io/v1 (Kubernetes v1.34 or later)")
    for pod in (pod_with_claim_name(), pod_with_template(), pod_with_template(status=False)):
        assert prefilter(pod, state) == message
    assert reasons(claim_pod("plain", claims={}), state) == {WORKER: []}
    assert state.catalog.set_served(CLAIM, True)
    assert prefilter(pod_with_claim_name(), state) == 'could not find ResourceClaim "default/my-pod-my-resource"'


def test_template_entry_without_a_claim_is_skipped() -> None:
    """A status entry without a claim name: no claim was needed (kube skips it)."""
    pod = claim_pod("my-pod", templates={"my-resource": CLAIM_NAME}, uid=POD_UID, generated={"my-resource": None})
    assert reasons(pod, cluster()) == {WORKER: []}


def test_reserved_okay() -> None:
    state = cluster(allocated_claim(reserved_for=[("my-pod", POD_UID)]))
    assert reasons(pod_with_claim_name(), state) == {WORKER: []}
    assert plugin().reserve(pod_info(pod_with_claim_name()), state, WORKER) is None  # nothing to write


# ---------------------------------------------------------------------------- Filter


@pytest.mark.parametrize(("objects", "expected"), [
    ([pending_claim(), DEVICE_CLASS], [CANNOT_ALLOCATE]),  # no-resources
    ([pending_claim(), DEVICE_CLASS, worker_slice(WORKER)], []),  # with-resources
    ([pending_claim(), OTHER_ALLOCATED, DEVICE_CLASS, worker_slice(WORKER)], [CANNOT_ALLOCATE]),
    ([pending_claim(), DEVICE_CLASS, worker_slice(WORKER, device("instance-1", taints=[TAINT]))], [CANNOT_ALLOCATE]),
    ([pending_claim(CLAIM_NAME, request("req-1", CLASS, admin_access=True)), OTHER_ALLOCATED, DEVICE_CLASS,
      worker_slice(WORKER)], []),
    ([pending_claim(), resource_claim("not-my-claim", requests=[request("req-1", CLASS, admin_access=True)],
                                      allocated={"devices": {"results": [
                                          {"request": "req-1", "driver": DRIVER, "pool": WORKER,
                                           "device": "instance-1", "adminAccess": True}]}}),
      DEVICE_CLASS, worker_slice(WORKER)], []),
    ([allocated_claim(allocated={"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}]}})], [NOT_AVAILABLE]),
    ([allocated_claim(allocated={"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [WORKER]}]}]}})], []),
], ids=["no-resources", "with-resources", "exhausted-resources-in-informer-cache", "tainted-device-enabled",
        "request-admin-access-with-DRAAdminAccess-featuregate", "structured-ignore-allocated-admin-access",
        "wrong-topology", "good-topology"])
def test_filter(objects: list[dict[str, Any]], expected: list[str]) -> None:
    assert reasons(pod_with_claim_name(), cluster(*objects)) == {WORKER: expected}


def test_filter_message() -> None:
    state = cluster(pending_claim(), DEVICE_CLASS)
    decision = decide(compile_profile("p", {"schedulerName": "placer"}), pod_with_claim_name(), state)
    assert decision.message == "0/1 nodes are available: 1 cannot allocate all claims."


@pytest.mark.parametrize(("claim", "klass", "message"), [
    (pending_claim(CLAIM_NAME, request("req-1", CLASS, 1, BROKEN)), DEVICE_CLASS,
     "claim default/my-pod-my-resource: selector #0: CEL runtime error: no such key: healthy"),
    (pending_claim(), device_class(CLASS, BROKEN),
     "class my-resource-class: selector #0: CEL runtime error: no such key: healthy"),
], ids=["claim-parameters-CEL-runtime-error", "class-parameters-CEL-runtime-error"])
def test_cel_runtime_errors(claim: dict[str, Any], klass: dict[str, Any], message: str) -> None:
    """An error aborts the attempt in kube, whichever node it happens on (also
    CEL-runtime-error-for-one-of-two-nodes): the pod fits nowhere, with kube's words."""
    for nodes, slices in (((WORKER,), [worker_slice(WORKER)]),
                          ((WORKER, WORKER2), [worker_slice(WORKER), worker_slice(WORKER2, healthy(True))])):
        assert prefilter(pod_with_claim_name(), cluster(claim, klass, *slices, nodes=nodes)) == message


def test_in_flight_claims() -> None:
    """exhausted-resources-in-flight-claim / other-resources-in-flight-claim: devices another pod's
    claim holds while its allocation is in flight are taken, other devices are not."""
    state = cluster(pending_claim(), OTHER_CLAIM, DEVICE_CLASS, worker_slice(WORKER))
    other = parse_resource_claim(OTHER_ALLOCATED)
    state.catalog.assume(CLAIM, "default", "not-my-claim", other)
    assert reasons(pod_with_claim_name(), state) == {WORKER: [CANNOT_ALLOCATE]}
    moved = parse_resource_claim(resource_claim(
        "not-my-claim", requests=[request("req-1", CLASS)],
        allocated=allocation([("req-1", DRIVER, WORKER, "instance-1-other")], node=WORKER)))
    state.catalog.assume(CLAIM, "default", "not-my-claim", moved)
    assert reasons(pod_with_claim_name(), state) == {WORKER: []}


def test_reserve_assumes_and_unreserve_restores() -> None:
    """with-resources: Reserve shows the allocation in the catalog (in flight, with the finalizer);
    a second pod finds the device taken and the claim in flight; Unreserve gives both back."""
    state = cluster(pending_claim(), pending_claim(CLAIM_NAME2), DEVICE_CLASS, worker_slice(WORKER))
    p = plugin()
    first = pod_info(pod_with_claim_name())
    reservation = p.reserve(first, state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    (claim,) = reservation.claims
    assert claim.allocation == {
        "devices": {"results": [{"request": "req-1", "driver": DRIVER, "pool": WORKER, "device": "instance-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [WORKER]}]}]},
    }
    assert reservation.as_json() == [{"claim": "default/my-pod-my-resource", "request": "req-1", "driver": DRIVER,
                                      "pool": WORKER, "device": "instance-1"}]
    assumed: ResourceClaimInfo = state.catalog.get(CLAIM, CLAIM_NAME, "default")
    assert assumed.pending and DELETE_PROTECTION in assumed.finalizers and assumed.allocation is not None
    second = parse_pod(claim_pod("other", claims={"gpu": CLAIM_NAME2}, uid="5678"))
    assert p.filter(second, state) is not None and not p.filter(second, state).any()
    sharing = parse_pod(claim_pod("sharing", claims={"gpu": CLAIM_NAME}, uid="9999"))
    assert p.pre_filter(sharing, state) == (
        "resource claim default/my-pod-my-resource is in the process of being allocated")
    p.unreserve(first, state, reservation)
    assert state.catalog.get(CLAIM, CLAIM_NAME, "default").allocation is None
    assert filter_result(p, second, state) == {WORKER: True}


def test_an_allocation_in_flight_outlasts_the_finalizer_write() -> None:
    """PreBind writes the finalizer first: the watch then brings a newer copy of the claim that
    shows no allocation yet. The device stays taken until the allocation lands (a second claim
    found it free here once: the same GPU given to two claims on a real API server)."""
    state = cluster(pending_claim(), pending_claim(CLAIM_NAME2), DEVICE_CLASS, worker_slice(WORKER))
    p = plugin()
    first = pod_info(pod_with_claim_name())
    reservation = p.reserve(first, state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    server: ResourceClaimInfo = state.catalog.server_copy(CLAIM, CLAIM_NAME, "default")
    with_finalizer = dataclasses.replace(server, resource_version="999", finalizers=(DELETE_PROTECTION,))
    state.catalog.put(CLAIM, "default", CLAIM_NAME, with_finalizer)
    second = parse_pod(claim_pod("other", claims={"gpu": CLAIM_NAME2}, uid="5678"))
    assert not p.filter(second, state).any()  # still held by the first claim
    assert state.catalog.server_copy(CLAIM, CLAIM_NAME, "default") is with_finalizer
    # the allocation lands: the server's copy replaces the assumption, the device stays taken
    (claim,) = reservation.claims
    landed = parse_resource_claim(resource_claim(
        CLAIM_NAME, requests=[request("req-1", CLASS)], uid=server.uid, allocated=claim.allocation,
        finalizers=[DELETE_PROTECTION], resource_version="1000"))
    state.catalog.put(CLAIM, "default", CLAIM_NAME, landed)
    assert not state.catalog.assumed(CLAIM, CLAIM_NAME, "default")
    assert not p.filter(second, state).any()
    # a binding that fails after the finalizer: Unreserve shows the server's latest copy again
    state = cluster(pending_claim(), pending_claim(CLAIM_NAME2), DEVICE_CLASS, worker_slice(WORKER))
    reservation = p.reserve(first, state, WORKER)
    server = state.catalog.server_copy(CLAIM, CLAIM_NAME, "default")
    state.catalog.put(CLAIM, "default", CLAIM_NAME,
                      dataclasses.replace(server, resource_version="999", finalizers=(DELETE_PROTECTION,)))
    p.unreserve(first, state, reservation)
    assert state.catalog.get(CLAIM, CLAIM_NAME, "default").resource_version == "999"
    assert filter_result(p, second, state) == {WORKER: True}


def test_a_claim_this_scheduler_creates_outlasts_its_first_server_copy() -> None:
    """The special claim of backed extended resources is shown before it exists; the copy the
    create returns has no allocation yet (the status is written after): the devices stay taken."""
    state = cluster(pending_claim(), DEVICE_CLASS, worker_slice(WORKER))
    p = plugin()
    reservation = p.reserve(pod_info(pod_with_claim_name()), state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    shown: ResourceClaimInfo = state.catalog.get(CLAIM, CLAIM_NAME, "default")
    state.catalog.remove(CLAIM, "default", CLAIM_NAME)
    state.catalog.put(CLAIM, "default", "special", dataclasses.replace(shown, name="special", uid=""))
    created = dataclasses.replace(shown, name="special", uid="new-uid", resource_version="5", allocation=None,
                                  pending=False)
    assert state.catalog.put(CLAIM, "default", "special", created) is False
    assert state.catalog.get(CLAIM, "special", "default").pending
    assert state.catalog.server_copy(CLAIM, "special", "default") is created
    state.catalog.remove(CLAIM, "default", "special")  # the create undone
    assert not state.catalog.assumed(CLAIM, "special", "default")


def test_scheduler_assume_and_forget() -> None:
    """Through the runtime: two pods, one device; the second waits until the first is forgotten."""
    state = cluster(pending_claim(), pending_claim(CLAIM_NAME2), DEVICE_CLASS, worker_slice(WORKER),
                    nodes=(WORKER, WORKER2))
    profile = compile_profile("p", {"schedulerName": "placer"})
    scheduler = Scheduler()
    first = parse_pod(pod_with_claim_name())
    decision = scheduler.schedule(first, profile, state)
    assert decision.node == WORKER
    scheduler.assume(first, decision, profile, state)
    assert isinstance(decision.reservations["DynamicResources"], DeviceReservation)
    second = parse_pod(claim_pod("other", claims={"gpu": CLAIM_NAME2}, uid="5678"))
    blocked = scheduler.schedule(second, profile, state)
    assert blocked.message == "0/2 nodes are available: 2 cannot allocate all claims."
    scheduler.forget(first, decision, profile, state)
    assert scheduler.schedule(second, profile, state).node == WORKER


def test_settle_and_release() -> None:
    """`placer simulate`: a placement's claim shows the pod in reservedFor once settled; a victim
    gone frees the claim it alone held."""
    state = cluster(pending_claim(), DEVICE_CLASS, worker_slice(WORKER))
    pod = parse_pod(pod_with_claim_name())
    reservation = plugin().reserve(pod, state, WORKER)
    assert reservation is not None
    settle(state, reservation)
    claim: ResourceClaimInfo = state.catalog.get(CLAIM, CLAIM_NAME, "default")
    assert not claim.pending and [r.uid for r in claim.reserved_for] == [POD_UID]
    release_pod(state, pod)
    released: ResourceClaimInfo = state.catalog.get(CLAIM, CLAIM_NAME, "default")
    assert released.allocation is None and released.reserved_for == ()


# ---------------------------------------------------------------------------- Score


def _scores(pod: dict[str, Any], state: ClusterState) -> tuple[dict[str, int], dict[str, int]]:
    p = plugin()
    info = pod_info(pod)
    names = sorted(n for n, fits in filter_result(p, info, state).items() if fits)
    slots = np.array([state.index[n] for n in names])
    raw = p.score(info, state, slots)
    return dict(zip(names, raw.tolist(), strict=True)), scores(p, info, state, names)


def test_single_claim_prioritized_list_scoring() -> None:
    claim = pending_claim(CLAIM_NAME, first_available("req-1", sub_request("subreq-1", CLASS, None, BROKEN),
                                                      sub_request("subreq-2", CLASS, 1)))
    state = cluster(claim, DEVICE_CLASS, worker_slice(WORKER, healthy(True)), worker_slice(WORKER2, healthy(False)),
                    nodes=(WORKER, WORKER2))
    assert _scores(pod_with_claim_name(), state) == ({WORKER: 8, WORKER2: 7}, {WORKER: 100, WORKER2: 87})


def test_multiple_claims_prioritized_list_scoring() -> None:
    claims = [
        pending_claim(CLAIM_NAME, first_available("req-1", sub_request("subreq-1", CLASS, 1))),
        pending_claim(CLAIM_NAME2, first_available("req-1", *(sub_request(f"subreq-{i + 1}", CLASS, 4 - i)
                                                              for i in range(4)))),
    ]
    slices = [worker_slice(WORKER, *(device(f"instance-{i}") for i in range(1, 5))),
              worker_slice(WORKER2, device("instance-1"), device("instance-2")),
              worker_slice(WORKER3, device("instance-1"))]
    state = cluster(*claims, DEVICE_CLASS, *slices, nodes=(WORKER, WORKER2, WORKER3))
    pod = claim_pod("my-pod", claims={"my-resource": CLAIM_NAME, "my-resource-2": CLAIM_NAME2}, uid=POD_UID)
    assert reasons(pod, state)[WORKER3] == [CANNOT_ALLOCATE]
    assert _scores(pod, state) == ({WORKER: 15, WORKER2: 13}, {WORKER: 100, WORKER2: 86})


def test_multiple_requests_prioritized_list_scoring() -> None:
    alternatives = [sub_request("subreq-1", CLASS, 2), sub_request("subreq-2", CLASS, 1)]
    claim = pending_claim(CLAIM_NAME, first_available("req-1", *alternatives), first_available("req-2", *alternatives))
    slices = [worker_slice(name, *(device(f"instance-{i}") for i in range(1, count + 1)))
              for name, count in ((WORKER, 4), (WORKER2, 3), (WORKER3, 2))]
    state = cluster(claim, DEVICE_CLASS, *slices, nodes=(WORKER, WORKER2, WORKER3))
    assert _scores(pod_with_claim_name(), state) == (
        {WORKER: 16, WORKER2: 15, WORKER3: 14}, {WORKER: 100, WORKER2: 93, WORKER3: 87})


def test_score_does_not_apply_without_first_available() -> None:
    state = cluster(pending_claim(), DEVICE_CLASS, worker_slice(WORKER))
    assert not plugin().pre_score(pod_info(pod_with_claim_name()), state)


@pytest.mark.parametrize(("requests", "allocated", "expected"), [
    ([first_available("req-1", sub_request("subreq-1", CLASS), sub_request("subreq-2", CLASS))],
     ["req-1/subreq-1"], 8),  # single-request-only-subrequest-allocated
    ([first_available("req-1", *(sub_request(f"subreq-{i}", CLASS) for i in range(1, 9)))],
     ["req-1/subreq-8"], 1),  # single-request-last-subrequest-allocated
    ([first_available("req-1", sub_request("subreq-1", CLASS), sub_request("subreq-2", CLASS)),
      request("req-2", CLASS),
      first_available("req-3", sub_request("subreq-1", CLASS), sub_request("subreq-2", CLASS))],
     ["req-1/subreq-2", "req-2", "req-3/subreq-2"], 14),
])
def test_compute_score(requests: list[dict[str, Any]], allocated: list[str], expected: int) -> None:
    """kube's TestComputeScore rows: allocated claims count as they are."""
    claim = parse_resource_claim(resource_claim(CLAIM_NAME, requests=requests, allocated=allocation(
        [(name, DRIVER, WORKER, f"instance-{i}") for i, name in enumerate(allocated)])))
    assert _score([claim], []) == expected


# ---------------------------------------------------------------------------- PreBind


def test_prebind_writes_new_allocation() -> None:
    state = cluster(pending_claim(resource_version="7"), DEVICE_CLASS, worker_slice(WORKER))
    pod = pod_info(pod_with_claim_name())
    reservation = plugin().reserve(pod, state, WORKER)
    assert reservation is not None
    finalizer, status = prebind_writes(reservation.claims[0])
    assert finalizer.target.path() == "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/my-pod-my-resource"
    assert finalizer.body() == {"metadata": {"finalizers": [DELETE_PROTECTION], "resourceVersion": "7"}}
    assert status.subresource == "status" and status.patch_type == JSON_PATCH
    body = status.body()
    assert body[:2] == [{"op": "test", "path": "/metadata/uid", "value": "uid-my-pod-my-resource"},
                        {"op": "test", "path": "/status", "value": {}}]
    assert {op["path"]: op["value"] for op in body[2:]} == {
        "/status/reservedFor": [{"resource": "pods", "name": "my-pod", "uid": POD_UID}],
        "/status/allocation": reservation.claims[0].allocation,
    }
    written = {"metadata": {"finalizers": [DELETE_PROTECTION]}, "status": {
        "allocation": reservation.claims[0].allocation, "reservedFor": [{"resource": "pods", "uid": POD_UID}]}}
    assert status.landed is not None and status.landed(written) and finalizer.landed is not None
    assert finalizer.landed(written)
    # undone latest first: the status (allocation and reservation), then the finalizer
    assert status.undo is not None and finalizer.undo is not None
    undo_status = status.undo(written)
    assert undo_status is not None and undo_status.patch == {"status": {"reservedFor": None, "allocation": None}}
    assert finalizer.undo(written) is None  # still allocated: the finalizer protects it
    undone = {"metadata": {"finalizers": [DELETE_PROTECTION, "other"]}, "status": {}}
    undo_finalizer = finalizer.undo(undone)
    assert undo_finalizer is not None and undo_finalizer.patch == {"metadata": {"finalizers": ["other"]}}


def test_prebind_reserves_an_allocated_claim() -> None:
    """claim-reference: an allocated claim only gets the pod in reservedFor, with a resourceVersion
    precondition (and nothing to undo but that)."""
    state = cluster(allocated_claim(resource_version="9", finalizers=[DELETE_PROTECTION],
                                    reserved_for=[("other", "5678")]))
    pod = pod_info(pod_with_claim_name())
    reservation = plugin().reserve(pod, state, WORKER)
    assert reservation is not None and reservation.as_json() == []
    (write,) = prebind_writes(reservation.claims[0])
    assert write.body() == {"status": {"reservedFor": [{"resource": "pods", "name": "other", "uid": "5678"},
                                                       {"resource": "pods", "name": "my-pod", "uid": POD_UID}]},
                            "metadata": {"resourceVersion": "9"}}
    assert write.undo is not None
    undo = write.undo({"status": {"allocation": {}, "reservedFor": [{"uid": "5678"}, {"uid": POD_UID}]}})
    assert undo is not None and undo.patch == {"status": {"reservedFor": [{"uid": "5678"}]}}
    plan = plugin().pre_bind(pod, state, WORKER, reservation)
    assert plan is not None and [w.body() for w in plan.writes] == [write.body()] and plan.wait is None


def test_a_reservation_refused_on_a_conflict_is_made_again_on_the_claim_as_it_is_now() -> None:
    """kube's `bindClaim` retries on a conflict: another pod joined the shared claim meanwhile; the
    pod is added to what `reservedFor` holds now, at the claim's new resourceVersion. Given up when
    the claim was deleted or re-created, or is no longer allocated as the decision saw it."""
    state = cluster(allocated_claim(resource_version="9", finalizers=[DELETE_PROTECTION],
                                    reserved_for=[("other", "5678")]))
    pod = pod_info(pod_with_claim_name())
    reservation = plugin().reserve(pod, state, WORKER)
    assert reservation is not None
    (write,) = prebind_writes(reservation.claims[0])
    assert write.rebase is not None
    seen = reservation.claims[0].claim
    assert seen is not None
    allocation = dict(seen.status)["allocation"]
    joined = {"resource": "pods", "name": "third", "uid": "9999"}
    now = {"metadata": {"uid": seen.uid, "resourceVersion": "11"},
           "status": {"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "other", "uid": "5678"},
                                                               joined]}}
    again = write.rebase(now)
    assert again is not None and again.rebase is not None and again.undo is not None
    assert again.body() == {"status": {"reservedFor": [
        {"resource": "pods", "name": "other", "uid": "5678"}, joined,
        {"resource": "pods", "name": "my-pod", "uid": POD_UID}]}, "metadata": {"resourceVersion": "11"}}
    assert write.rebase({**now, "metadata": {"uid": seen.uid, "deletionTimestamp": "2026-01-01T00:00:00Z"}}) is None
    assert write.rebase({**now, "metadata": {"uid": "another-incarnation"}}) is None
    assert write.rebase({**now, "status": {"reservedFor": [joined]}}) is None  # deallocated meanwhile
    moved = {**allocation, "devices": {"results": []}}
    assert write.rebase({**now, "status": {"allocation": moved, "reservedFor": [joined]}}) is None


def test_prebind_skips_without_claims() -> None:
    assert plugin().pre_bind(pod_info(pod_with_claim_name()), cluster(), WORKER, None) is None
    empty = DeviceReservation(WORKER, "default/my-pod", ())
    assert plugin().pre_bind(pod_info(pod_with_claim_name()), cluster(), WORKER, empty) is None
    assert isinstance(ClaimReservation, type)


# ---------------------------------------------------------------------------- the fast path


def test_counting_agrees_with_the_allocator() -> None:
    """The filter counts free matching devices per node for a plain request (node-local, network-
    attached and per-device slices); the full allocator on every node must agree."""
    state = cluster(
        device_class("gpu", f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "a"'),
        pending_claim(CLAIM_NAME, request("req-1", "gpu", 2)),
        worker_slice(WORKER, device("g0", {"model": "a"}), device("g1", {"model": "b"})),
        worker_slice(WORKER2, device("g0", {"model": "a"}), device("g1", {"model": "a"}, taints=[TAINT])),
        resource_slice("net", DRIVER, pool="net", node_selector={"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [WORKER, WORKER3]}]}]},
            devices=[device("n0", {"model": "a"})]),
        resource_slice("per-device", DRIVER, pool="per-device", per_device=True, devices=[
            device("p0", {"model": "a"}, node_name=WORKER3), device("p1", {"model": "a"}, all_nodes=True)]),
        nodes=(WORKER, WORKER2, WORKER3, "worker-4"),
    )
    p = plugin()
    info = pod_info(pod_with_claim_name())
    counted = filter_result(p, info, state)
    assert counted == {WORKER: True, WORKER2: True, WORKER3: True, "worker-4": False}
    plan = p._plan(info, state)
    index = device_index(state)
    allocator = Allocator(functools.partial(state.catalog.get, "DeviceClass"), index.allocated)
    for name, slot in state.index.items():
        counted_result = p._results_on(plan, state, slot)
        searched = allocator.allocate(name, state.node(name).labels, index.pools_for(state, name), plan.claims)
        assert counted_result == searched, name
    # a network-attached pool is one object in the lists of the nodes it reaches (not one per node:
    # ten thousand such slices over five hundred nodes would be five million pools)
    net = [pool for name in (WORKER, WORKER3) for pool in index.pools_for(state, name) if pool.pool == "net"]
    assert len(net) == 2 and net[0] is net[1]
    reservation = p.reserve(info, state, WORKER2)
    assert reservation is not None
    assert [d["device"] for d in reservation.as_json()] == ["p1", "g0"]  # pools in (driver, pool) order


# ---------------------------------------------------------------------------- extended resources (DRAExtendedResource)
# kube v1.36's `TestPlugin` rows "extended-resource-*" (and the implicit-name ones): a pod's extended
# resource that a DeviceClass backs, on a node whose allocatable lacks it, is allocated through the
# special claim created at PreBind.

GPU, GPU2 = "example.com/gpu", "example.com/gpu2"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
EXTENDED_CLASS = device_class(CLASS, extended=GPU)
EXTENDED_CLASS2 = device_class(CLASS + "2", extended=GPU2)
LARGE_SLICE = worker_slice(WORKER, *(device(f"instance-{i}") for i in range(1, 5)))


def extended_pod(requests: dict[str, str], *more: dict[str, str]) -> dict[str, Any]:
    containers = [container(f"con{i}", requests=r) for i, r in enumerate((requests, *more))]
    return make_pod("my-pod", containers=containers, uid=POD_UID)


def extended_cluster(*objects: dict[str, Any], gpus: str | None = None) -> ClusterState:
    allocatable = None if gpus is None else {"cpu": "4", "memory": "8Gi", "pods": "110", GPU: gpus}
    return cluster_of([node(WORKER, allocatable=allocatable)], objects=objects)


def test_extended_resource_name_with_node_resource() -> None:
    """The node's device plugin provides it: nothing for DynamicResources to allocate."""
    state = extended_cluster(EXTENDED_CLASS, worker_slice(WORKER), gpus="1")
    pod = extended_pod({GPU: "1"})
    assert reasons(pod, state) == {WORKER: []}
    assert plugin().reserve(pod_info(pod), state, WORKER) is None


def test_non_dra_extended_resource_name_with_zero_allocatable() -> None:
    """No class names the resource: the plugin skips the pod (NodeResourcesFit rejects it)."""
    state = extended_cluster(DEVICE_CLASS, worker_slice(WORKER), gpus="0")
    info = pod_info(extended_pod({GPU: "1"}))
    p = plugin()
    assert p.pre_filter(info, state) is None and p.filter(info, state) is None
    assert p.reserve(info, state, WORKER) is None


def test_extended_resource_name_no_resource() -> None:
    assert reasons(extended_pod({GPU: "1"}), extended_cluster(EXTENDED_CLASS)) == {WORKER: [CANNOT_ALLOCATE]}


@pytest.mark.parametrize("gpus", [None, "0"], ids=["extended-resource-name-with-resources",
                                                  "extended-resource-name-with-zero-allocatable"])
def test_extended_resource_name_with_resources(gpus: str | None) -> None:
    state = extended_cluster(EXTENDED_CLASS, worker_slice(WORKER), gpus=gpus)
    pod = pod_info(extended_pod({GPU: "1"}))
    p = plugin()
    p.clock = lambda: 1_800_000_000.0  # type: ignore[method-assign]
    assert reasons(extended_pod({GPU: "1"}), state) == {WORKER: []}
    reservation = p.reserve(pod, state, WORKER)
    assert isinstance(reservation, DeviceReservation)
    (claim,) = reservation.claims
    assert claim.extended is not None and claim.key.startswith("default/my-pod-extended-resources-")
    assert [(r.name, r.exactly.device_class, r.exactly.count) for r in claim.claim.requests
            if r.exactly is not None] == [("container-0-request-0", CLASS, 1)]
    assert reservation.as_json() == [{"claim": claim.key, "request": "container-0-request-0", "driver": DRIVER,
                                      "pool": WORKER, "device": "instance-1"}]
    shown: ResourceClaimInfo = state.catalog.get(CLAIM, claim.claim.name, "default")
    assert shown.pending and shown.extended and shown.allocation is not None  # in flight: the device is held
    other = pod_info(make_pod("other", containers=[container("c", requests={GPU: "1"})], uid="5678"))
    assert reasons(make_pod("other", containers=[container("c", requests={GPU: "1"})], uid="5678"),
                   state) == {WORKER: [CANNOT_ALLOCATE]}
    prebind = p.pre_bind(pod, state, WORKER, reservation)
    assert prebind is not None
    create, finalizer, status, pod_status = prebind.writes
    assert create.create and create.call == "create_resourceclaim"
    assert create.target.collection_path() == "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    body = create.body()
    assert body["metadata"]["name"] == claim.claim.name
    assert body["metadata"]["generateName"] == "my-pod-extended-resources-"
    assert body["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": POD_UID, "controller": True}]
    assert body["spec"] == {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
        "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}
    assert create.landed is not None and create.landed(body) and not create.landed({"metadata": {}})
    assert finalizer.body() == {"metadata": {"finalizers": [DELETE_PROTECTION]}}
    assert status.subresource == "status" and status.body()["status"] == {
        "allocation": {**claim.allocation, "allocationTimestamp": "2027-01-15T08:00:00Z"},
        "reservedFor": [{"resource": "pods", "name": "my-pod", "uid": POD_UID}]}
    assert pod_status.target.path("status") == "/api/v1/namespaces/default/pods/my-pod/status"
    assert pod_status.body() == {"metadata": {"uid": POD_UID}, "status": {"extendedResourceClaimStatus": {
        "requestMappings": [{"containerName": "con0", "resourceName": GPU, "requestName": "container-0-request-0"}],
        "resourceClaimName": claim.claim.name}}}
    # the binding failed: the created claim is deleted (ours only, by its UID)
    assert create.undo is not None
    created = {**body, "metadata": {**body["metadata"], "uid": "claim-uid"}}
    undo = create.undo(created)
    assert undo is not None and undo.delete and undo.uid == "claim-uid" and 404 in undo.tolerate
    assert create.undo({"metadata": {"name": claim.claim.name, "ownerReferences": []}}) is None
    p.unreserve(pod, state, reservation)
    assert state.catalog.get(CLAIM, claim.claim.name, "default") is None
    assert reasons(make_pod("other", containers=[container("c", requests={GPU: "1"})], uid="5678"),
                   state) == {WORKER: []}
    assert other.key == "default/other"


def test_extended_resource_one_device_plugin_one_dra() -> None:
    """gpu from the node's device plugin, gpu2 through a claim (request `container-0-request-1`)."""
    state = extended_cluster(EXTENDED_CLASS, EXTENDED_CLASS2, worker_slice(WORKER), gpus="1")
    pod = extended_pod({GPU: "1", GPU2: "1"})
    assert reasons(pod, state) == {WORKER: []}
    reservation = plugin().reserve(pod_info(pod), state, WORKER)
    assert reservation is not None
    (claim,) = reservation.claims
    assert [(r.name, r.exactly.device_class) for r in claim.claim.requests if r.exactly is not None] == [
        ("container-0-request-1", CLASS + "2")]


@pytest.mark.parametrize("pod", [
    extended_pod({IMPLICIT: "1", GPU: "2"}), extended_pod({IMPLICIT: "1"}, {GPU: "2"}),
], ids=["implicit-extended-resource-name-with-resources",
        "implicit-extended-resource-name-two-containers-with-resources"])
def test_implicit_extended_resource_name(pod: dict[str, Any]) -> None:
    state = extended_cluster(EXTENDED_CLASS, LARGE_SLICE)
    reservation = plugin().reserve(pod_info(pod), state, WORKER)
    assert reservation is not None
    (claim,) = reservation.claims
    assert sum(r.exactly.count for r in claim.claim.requests if r.exactly is not None) == 3
    assert len(reservation.as_json()) == 3


@pytest.mark.parametrize("node_name", [WORKER, WORKER2], ids=["extended-resource-name-with-resources-has-claim",
                                                             "extended-resource-name-with-resources-delete-claim"])
def test_extended_resource_claim_from_an_earlier_attempt(node_name: str) -> None:
    stale = resource_claim("my-pod-extended-resources-0", requests=[request("container-0-request-0", CLASS)],
                           owner=("my-pod", POD_UID),
                           allocated=allocation([("container-0-request-0", DRIVER, node_name, "instance-1")],
                                                node=node_name))
    stale["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    state = extended_cluster(EXTENDED_CLASS, worker_slice(WORKER), stale)
    assert reasons(extended_pod({GPU: "1"}), state) == {WORKER: ["cannot schedule extended resource claim"]}


def test_extended_resource_through_the_scheduler() -> None:
    """NodeResourcesFit leaves the resource to DynamicResources on nodes without it: the pod is
    placed where a device is free, never as if the resource were absent; no device, no place."""
    profile = make_profile([{"name": "NodeResourcesFit"}, {"name": "DynamicResources"}], [])
    state = cluster_of([node(WORKER), node(WORKER2)], objects=[EXTENDED_CLASS, worker_slice(WORKER2)])
    decision = decide(profile, extended_pod({GPU: "1"}), state)
    assert decision.node == WORKER2
    empty = cluster_of([node(WORKER)], objects=[EXTENDED_CLASS])
    decision = decide(profile, extended_pod({GPU: "1"}), empty)
    assert decision.node is None and decision.message == "0/1 nodes are available: 1 cannot allocate all claims."
    classless = cluster_of([node(WORKER)], objects=[worker_slice(WORKER)])
    decision = decide(profile, extended_pod({GPU: "1"}), classless)
    assert decision.node is None and decision.message == "0/1 nodes are available: 1 Insufficient example.com/gpu."


def test_extended_resource_neither_plugin_nor_class() -> None:
    """A resource no class backs and the node lacks, beside a backed one: kube's "cannot fit resource"."""
    state = extended_cluster(EXTENDED_CLASS, worker_slice(WORKER))
    assert reasons(extended_pod({GPU: "1", "example.com/fpga": "1"}), state) == {WORKER: ["cannot fit resource"]}
