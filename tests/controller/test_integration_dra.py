"""Dynamic Resource Allocation end to end: the real operator over HTTP against the emulator serving
`resource.k8s.io/v1` (v1.36), asserting on what the API server ends up holding.

The tests play the DRA driver (they publish ResourceSlices) and, for template claims, kube's
resourceclaim controller (they create the pod's claim from its template, owned by the pod, and
record it in the pod's `status.resourceClaimStatuses`). Before a pod is bound, each of its claims
carries the finalizer `resource.kubernetes.io/delete-protection`, its `status.allocation` and the
pod in `status.reservedFor`; a failed write is undone and the pod retried, never bound without its
allocation. On API servers that do not serve `resource.k8s.io/v1` (v1.24, v1.33) the operator runs
as before, and a pod with claims stays pending with a message saying why.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from placer.engine.devices import DELETE_PROTECTION
from placer.testing_devices import device, device_class, request, resource_slice

from tests.controller.helpers import (
    Launch,
    OperatorThread,
    assert_sound,
    bound_node,
    events_about,
    operator_options,
    until,
    watching,
)
from tests.kubeemu import KubeEmulator

DRIVER = "gpu.example.com"
CLAIMS = "resource.k8s.io/v1/resourceclaims"
SLICES = "resource.k8s.io/v1/resourceslices"
CLASSES = "resource.k8s.io/v1/deviceclasses"
TEMPLATES = "resource.k8s.io/v1/resourceclaimtemplates"
# kube v1.36's DefaultPreemption sentence for pods no eviction can help (its own double stop)
# kube v1.36's PostFilters: DynamicResources' word (`no new claims to deallocate` when the claims
# never got as far as an allocation to undo), then DefaultPreemption's sentence
NOT_HELPFUL = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
NO_NEW_CLAIMS = "no new claims to deallocate, " + NOT_HELPFUL
STILL_NOT = "still not schedulable, " + NOT_HELPFUL


def setup_cluster(emu: KubeEmulator, gpus: dict[str, int], others: tuple[str, ...] = ()) -> None:
    """Nodes with `gpus[node]` GPUs each (one ResourceSlice per node, as a driver publishes them),
    nodes without any, the `gpu` DeviceClass, and the default profile for `placer`."""
    for name, count in gpus.items():
        emu.add_node(name)
        publish(emu, name, count)
    for name in others:
        emu.add_node(name)
    emu.create(CLASSES, device_class("gpu", f'device.driver == "{DRIVER}"'))
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


def publish(emu: KubeEmulator, node: str, count: int) -> None:
    devices = [device(f"gpu-{i}", {"model": "a100"}) for i in range(count)]
    emu.create(SLICES, resource_slice(f"{node}-gpus", DRIVER, node=node, devices=devices))


def claim_body(name: str, namespace: str = "default", owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """An unallocated claim for one GPU (as `kubectl create` or the resourceclaim controller makes it)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True,
                                    "blockOwnerDeletion": True}]
    return {"metadata": meta, "spec": {"devices": {"requests": [request("gpu", "gpu")]}}, "status": {}}


def add_claim_pod(
    emu: KubeEmulator, name: str, *, claim: str | None = None, template: str | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "gpu"}
    if claim is not None:
        entry["resourceClaimName"] = claim
    if template is not None:
        entry["resourceClaimTemplateName"] = template
    return emu.add_pod(name, scheduler_name="placer", spec={"resourceClaims": [entry]})


def record_claim(emu: KubeEmulator, pod: str, claim: str) -> None:
    """The resourceclaim controller's second step: the pod's status names the claim made for it."""
    emu.patch("pods", pod, {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}},
              subresource="status")


def claim_of(emu: KubeEmulator, name: str) -> dict[str, Any]:
    found = emu.get(CLAIMS, name, "default")
    assert found is not None, name
    return found


def allocated(emu: KubeEmulator, name: str) -> bool:
    status = (emu.get(CLAIMS, name, "default") or {}).get("status") or {}
    return bool(status.get("allocation"))


def failed_note(emu: KubeEmulator, pod: str) -> str | None:
    events = events_about(emu, pod, "FailedScheduling")
    return events[-1]["note"] if events else None


def pod_condition(emu: KubeEmulator, name: str) -> dict[str, Any] | None:
    for condition in ((emu.get("pods", name) or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return condition
    return None


def request_index(emu: KubeEmulator, method: str, path: str) -> list[int]:
    """Positions in the request log of the answered requests matching (method, path regex)."""
    pattern = re.compile(path)
    return [i for i, r in enumerate(emu.requests)
            if r.method == method and pattern.search(r.path) and r.status is not None and r.status < 300]


def assert_within_rbac(emu: KubeEmulator) -> None:
    """What the operator asked of resource.k8s.io is what the chart's ClusterRole grants (docs/install.md):
    get/list/watch of the four kinds, patch of claims and of their status, nothing else."""
    kinds = "deviceclasses|resourceslices|resourceclaims|resourceclaimtemplates"
    for r in emu.requests:
        if not r.path.startswith("/apis/resource.k8s.io/") or r.path == "/apis/resource.k8s.io/v1":
            continue  # (discovery: every user may read it)
        if r.method == "GET":
            assert re.search(rf"/v1/(namespaces/[^/]+/)?({kinds})(/[^/]+)?$", r.path), r.path
        else:
            assert r.method == "PATCH" and re.search(r"/resourceclaims/[^/]+(/status)?$", r.path), (r.method, r.path)


# ----------------------------------------------------------------- allocation before binding


async def test_a_claim_is_allocated_and_reserved_before_its_pod_is_bound(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 2}, others=("cpu-1", "cpu-2"))
    emu.create(CLAIMS, claim_body("train-gpu"))
    pod = add_claim_pod(emu, "train", claim="train-gpu")
    await launch()
    await until(lambda: bound_node(emu, "train"), timeout=10)
    assert bound_node(emu, "train") == "gpu-node"

    claim = claim_of(emu, "train-gpu")
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "gpu-node", "device": "gpu-0"}]
    assert allocation["nodeSelector"] == {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node"]}]}]}
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "train", "uid": pod["metadata"]["uid"]}]

    # the order on the wire: finalizer, then status, then the binding
    finalizer = request_index(emu, "PATCH", r"/resourceclaims/train-gpu$")
    status = request_index(emu, "PATCH", r"/resourceclaims/train-gpu/status$")
    binding = request_index(emu, "POST", r"/pods/train/binding$")
    assert len(finalizer) == 1 and len(status) == 1 and len(binding) == 1
    assert finalizer[0] < status[0] < binding[0]
    await until(lambda: events_about(emu, "train", "Scheduled"), timeout=5)
    assert [e["note"] for e in events_about(emu, "train")] == ["Successfully assigned default/train to gpu-node"]
    assert_sound(emu, ["train"])
    assert_within_rbac(emu)


async def test_an_allocated_claim_keeps_its_pod_on_the_claims_node_and_is_shared(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """A second pod naming the same claim goes where the claim's devices are, and joins reservedFor;
    nothing is allocated again."""
    emu = kube_emulator
    setup_cluster(emu, {"gpu-a": 1, "gpu-b": 1})
    emu.create(CLAIMS, claim_body("shared"))
    first = add_claim_pod(emu, "first", claim="shared")
    await launch()
    await until(lambda: bound_node(emu, "first"), timeout=10)
    node = bound_node(emu, "first")
    await until(lambda: len(claim_of(emu, "shared")["status"].get("reservedFor") or []) == 1, timeout=5)
    results = claim_of(emu, "shared")["status"]["allocation"]["devices"]["results"]
    second = add_claim_pod(emu, "second", claim="shared")
    await until(lambda: bound_node(emu, "second"), timeout=10)
    assert bound_node(emu, "second") == node
    claim = claim_of(emu, "shared")
    assert claim["status"]["allocation"]["devices"]["results"] == results
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [first["metadata"]["uid"], second["metadata"]["uid"]]
    assert len(request_index(emu, "PATCH", r"/resourceclaims/shared$")) == 1  # the finalizer, once
    assert_sound(emu, ["first", "second"])


async def test_pods_sharing_a_claim_join_it_without_failing_on_each_others_writes(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """kube's SchedulingWithResourceClaim shape: five pods a claim, bound in parallel. Their
    `reservedFor` writes conflict with each other (409); each is made again on the claim as it is
    now (kube's RetryOnConflict in `bindClaim`), so no binding fails on it."""
    emu = kube_emulator
    setup_cluster(emu, {f"gpu-{index}": 4 for index in range(4)})
    pods = {f"c{claim}": [f"c{claim}-{index}" for index in range(5)] for claim in range(4)}
    for claim, names in pods.items():
        emu.create(CLAIMS, claim_body(claim))
        for name in names:
            add_claim_pod(emu, name, claim=claim)
    await launch()
    every = [name for names in pods.values() for name in names]
    await until(lambda: all(bound_node(emu, name) for name in every), timeout=15)
    for claim, names in pods.items():
        reserved = {entry["name"] for entry in claim_of(emu, claim)["status"]["reservedFor"]}
        assert reserved == set(names) and len({bound_node(emu, name) for name in names}) == 1
    assert emu.requests_matching("PATCH", r"/resourceclaims/c\d+/status$", status=409)  # they did conflict
    # (waiting while the first pod's allocation of their claim is in flight is kube's rule too:
    # "resource claim ... is in the process of being allocated"; a failed PreBind is not)
    failed = [e["note"] for name in every for e in events_about(emu, name, "FailedScheduling")]
    assert [note for note in failed if "PreBind" in note] == []
    assert len(emu.requests_matching("POST", r"/pods/[^/]+/binding$")) == len(every)
    assert_sound(emu, every)


async def test_two_pods_never_get_the_only_device(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 1}, others=("cpu-node",))
    emu.create(CLAIMS, claim_body("claim-a"))
    emu.create(CLAIMS, claim_body("claim-b"))
    add_claim_pod(emu, "pod-a", claim="claim-a")
    add_claim_pod(emu, "pod-b", claim="claim-b")
    await launch()
    await until(lambda: bound_node(emu, "pod-a") or bound_node(emu, "pod-b"), timeout=10)
    winner, loser = ("pod-a", "pod-b") if bound_node(emu, "pod-a") else ("pod-b", "pod-a")
    await until(lambda: failed_note(emu, loser), timeout=5)
    message = "0/2 nodes are available: 2 cannot allocate all claims."
    assert failed_note(emu, loser) == f"{message} {STILL_NOT.format(n=2)}"
    await until(lambda: (pod_condition(emu, loser) or {}).get("reason") == "Unschedulable", timeout=5)
    assert pod_condition(emu, loser)["message"] == failed_note(emu, loser)
    await asyncio.sleep(1.5)  # retries meanwhile change nothing
    assert bound_node(emu, winner) == "gpu-node" and bound_node(emu, loser) is None
    won, lost = (claim_of(emu, f"claim-{winner[-1]}"), claim_of(emu, f"claim-{loser[-1]}"))
    assert won["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert lost["status"] == {} and DELETE_PROTECTION not in (lost["metadata"].get("finalizers") or [])
    assert emu.bind_attempts.get(f"default/{loser}", 0) == 0

    # the winner goes, the resourceclaim controller deallocates its claim: the other pod gets the GPU
    emu.delete("pods", winner)
    emu.patch(CLAIMS, won["metadata"]["name"], {"status": {"allocation": None, "reservedFor": None}}, "default",
              subresource="status")
    emu.patch(CLAIMS, won["metadata"]["name"], {"metadata": {"finalizers": None}}, "default")
    await until(lambda: bound_node(emu, loser), timeout=5)
    assert bound_node(emu, loser) == "gpu-node"
    assert claim_of(emu, f"claim-{loser[-1]}")["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert emu.double_bindings() == []


# ----------------------------------------------------------------- claims not there yet


async def test_a_template_claim_waits_for_the_resourceclaim_controller_and_goes_promptly(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """Until the resourceclaim controller has created the pod's claim and recorded it in the pod's
    status, the pod is unschedulable with kube's words; the pod's own status update re-queues it at
    once (kube's UpdatePodGeneratedResourceClaim), whatever backoff it has accumulated."""
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 1}, others=("cpu-node",))
    emu.create(TEMPLATES, {"metadata": {"name": "one-gpu"},
                           "spec": {"spec": {"devices": {"requests": [request("gpu", "gpu")]}}}})
    pod = add_claim_pod(emu, "tp", template="one-gpu")
    operator = await launch(initial_backoff=0.1, max_backoff=10.0)
    await until(lambda: failed_note(emu, "tp"), timeout=10)
    message = '0/2 nodes are available: pod "default/tp": ResourceClaim not created yet.'
    assert failed_note(emu, "tp") == f"{message} {NO_NEW_CLAIMS.format(n=2)}"
    state = operator.state
    assert state is not None

    def attempts() -> int:
        entry = state.queue.entry("default/tp")
        return entry.attempts if entry is not None else 0

    await until(lambda: attempts() >= 6, timeout=10)  # backing off 3.2 s and more by now
    # the resourceclaim controller: the claim first (a ResourceClaim event wakes the pod: it is
    # retried, and still fails, its status not recorded yet) ...
    before = attempts()
    emu.create(CLAIMS, claim_body("tp-gpu-x7k2p", owner=pod))
    await until(lambda: attempts() > before, timeout=5)
    assert bound_node(emu, "tp") is None
    # ... then the pod's status: the pod is retried at once, not after its backoff (6.4 s now)
    recorded = time.monotonic()
    record_claim(emu, "tp", "tp-gpu-x7k2p")
    await until(lambda: bound_node(emu, "tp"), timeout=10)
    took = time.monotonic() - recorded
    assert took < 2.0, f"bound {took:.2f} s after its claim was recorded"
    claim = claim_of(emu, "tp-gpu-x7k2p")
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "tp", "uid": pod["metadata"]["uid"]}]
    assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == "gpu-node"
    assert_sound(emu, ["tp"])


async def test_a_template_claim_the_pod_does_not_own_is_refused(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 1})
    add_claim_pod(emu, "tp", template="one-gpu")
    emu.create(CLAIMS, claim_body("someone-elses"))
    record_claim(emu, "tp", "someone-elses")
    await launch()
    await until(lambda: failed_note(emu, "tp"), timeout=10)
    assert failed_note(emu, "tp").startswith(
        "0/1 nodes are available: ResourceClaim default/someone-elses was not created for Pod default/tp "
        "(Pod is not owner).")
    assert not allocated(emu, "someone-elses") and bound_node(emu, "tp") is None


async def test_a_missing_claim_keeps_the_pod_pending_until_it_is_created(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 1}, others=("cpu-node",))
    add_claim_pod(emu, "waiting", claim="later")
    await launch()
    await until(lambda: failed_note(emu, "waiting"), timeout=10)
    message = '0/2 nodes are available: could not find ResourceClaim "default/later".'
    assert failed_note(emu, "waiting") == f"{message} {NO_NEW_CLAIMS.format(n=2)}"
    await until(lambda: (pod_condition(emu, "waiting") or {}).get("message") == failed_note(emu, "waiting"), timeout=5)
    assert pod_condition(emu, "waiting")["reason"] == "Unschedulable"
    await asyncio.sleep(2.5)  # a few backoffs: the claim is still missing
    assert bound_node(emu, "waiting") is None and emu.bind_attempts.get("default/waiting", 0) == 0
    emu.create(CLAIMS, claim_body("later"))
    created = time.monotonic()
    await until(lambda: bound_node(emu, "waiting"), timeout=10)
    assert time.monotonic() - created < 2.5  # woken by the claim, not its 4 s backoff
    assert allocated(emu, "later")
    assert_sound(emu, ["waiting"])


@pytest.mark.parametrize("later", ["slice", "class", "claim"])
async def test_a_device_published_or_a_class_or_claim_changed_later_wakes_the_pod(
    kube_emulator: KubeEmulator, launch: Launch, later: str
) -> None:
    """ClusterEvents for ResourceSlice, DeviceClass and ResourceClaim: a pod that could not get a device
    is retried promptly when a driver publishes one, its class appears, or its claim is changed."""
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    if later != "slice":
        publish(emu, "n1", 1)
    if later != "class":
        emu.create(CLASSES, device_class("gpu", f'device.driver == "{DRIVER}"'))
    body = claim_body("c")
    if later == "claim":  # asks for an H100, which n1 does not have
        h100 = f'device.attributes["{DRIVER}"].model == "h100"'
        body["spec"]["devices"]["requests"] = [request("gpu", "gpu", None, h100)]
    emu.create(CLAIMS, body)
    add_claim_pod(emu, "p", claim="c")
    await launch()
    await until(lambda: failed_note(emu, "p"), timeout=10)
    reason = {"slice": "1 cannot allocate all claims", "class": "request gpu: device class gpu does not exist",
              "claim": "1 cannot allocate all claims"}[later]
    assert failed_note(emu, "p").startswith(f"0/1 nodes are available: {reason}."), failed_note(emu, "p")
    await asyncio.sleep(2.5)  # backing off 4 s by now
    assert bound_node(emu, "p") is None
    changed = time.monotonic()
    if later == "slice":
        publish(emu, "n1", 1)
    elif later == "class":
        emu.create(CLASSES, device_class("gpu", f'device.driver == "{DRIVER}"'))
    else:  # the user deletes and re-creates the claim, asking for any GPU
        emu.delete(CLAIMS, "c", "default")
        emu.create(CLAIMS, claim_body("c"))
    await until(lambda: bound_node(emu, "p"), timeout=10)
    assert time.monotonic() - changed < 2.5
    assert allocated(emu, "c")
    assert_sound(emu, ["p"])


# ----------------------------------------------------------------- failures


async def test_a_failed_status_write_is_undone_and_the_pod_never_bound_without_its_allocation(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 1})
    emu.create(CLAIMS, claim_body("flaky"))
    add_claim_pod(emu, "p", claim="flaky")
    # every status write to the claim is refused (a conflict: someone else's write won)
    fault = emu.inject("PATCH", r"/resourceclaims/flaky/status$", status=409, count=None,
                       message='Operation cannot be fulfilled on resourceclaims.resource.k8s.io "flaky": '
                               "the object has been modified; please apply your changes to the latest version")
    await launch()
    await until(lambda: (pod_condition(emu, "p") or {}).get("reason") == "SchedulerError", timeout=10)
    # the event is written after the condition (events go out on their own writer): wait for it too
    await until(lambda: failed_note(emu, "p") is not None, timeout=10)
    note = failed_note(emu, "p")
    assert note is not None and note.startswith('running PreBind plugin "DynamicResources": ')
    assert "the object has been modified" in note
    await until(lambda: fault.hits >= 2, timeout=10)  # retried (with backoff)
    # each attempt added the finalizer and took it back: never bound, nothing left on the claim
    await until(lambda: DELETE_PROTECTION not in (claim_of(emu, "flaky")["metadata"].get("finalizers") or []),
                timeout=5)
    claim = claim_of(emu, "flaky")
    assert claim["status"] == {} and bound_node(emu, "p") is None
    assert emu.bind_attempts.get("default/p", 0) == 0
    assert len(request_index(emu, "PATCH", r"/resourceclaims/flaky$")) >= 2 * fault.hits - 1  # added, removed

    emu.clear_faults()
    await until(lambda: bound_node(emu, "p"), timeout=15)
    claim = claim_of(emu, "flaky")
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    assert_sound(emu, ["p"])
    assert_within_rbac(emu)


async def test_a_failed_bind_takes_the_allocation_back(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The binding itself refused (an admission webhook): the claim's reservation and allocation are
    removed again, then the pod is retried and bound with them."""
    emu = kube_emulator
    setup_cluster(emu, {"gpu-node": 1})
    emu.create(CLAIMS, claim_body("c"))
    add_claim_pod(emu, "p", claim="c")
    fault = emu.inject("POST", r"/pods/p/binding$", status=403, count=1, message="denied by an admission webhook")
    await launch()
    await until(lambda: fault.hits == 1, timeout=10)
    await until(lambda: bound_node(emu, "p"), timeout=15)
    # between the two attempts the claim was deallocated (status cleared, finalizer removed)
    assert len(request_index(emu, "PATCH", r"/resourceclaims/c/status$")) == 3  # allocate, undo, allocate
    assert len(request_index(emu, "PATCH", r"/resourceclaims/c$")) == 3  # add, remove, add
    claim = claim_of(emu, "c")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
    assert_sound(emu, ["p"])


# ----------------------------------------------------------------- API servers without resource.k8s.io/v1


@pytest_asyncio.fixture(params=["1.24", "1.33"])
async def old_server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[KubeEmulator, Path]]:
    async with KubeEmulator(kube_version=request.param) as emu:
        yield emu, emu.write_kubeconfig(tmp_path / "kubeconfig-old")


async def test_without_resource_k8s_io_v1_the_operator_runs_and_a_pod_with_claims_waits(
    old_server: tuple[KubeEmulator, Path]
) -> None:
    emu, kubeconfig = old_server
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    add_claim_pod(emu, "claims", claim="gpu")
    emu.add_pod("plain", scheduler_name="placer")
    operator = await OperatorThread(operator_options(kubeconfig)).start()
    try:
        await until(lambda: watching(emu, ("/api/v1/pods", "/api/v1/nodes",
                                           "/apis/placer.dev/v1alpha1/schedulerprofiles")), timeout=10)
        await until(lambda: bound_node(emu, "plain"), timeout=10)
        await until(lambda: failed_note(emu, "claims"), timeout=10)
        message = ('0/1 nodes are available: pod "default/claims": its ResourceClaims cannot be read: this API '
                   "server does not serve resource.k8s.io/v1 (Kubernetes v1.34 or later).")
        assert failed_note(emu, "claims").startswith(message), failed_note(emu, "claims")
        asked = len(emu.requests_matching(path=r"^/apis/resource\.k8s\.io"))
        await asyncio.sleep(2.0)  # no watch of absent kinds retried in a loop
        assert len(emu.requests_matching(path=r"^/apis/resource\.k8s\.io")) - asked <= 4
        assert bound_node(emu, "claims") is None and emu.bind_attempts.get("default/claims", 0) == 0
        emu.add_pod("later", scheduler_name="placer")  # still scheduling
        await until(lambda: bound_node(emu, "later"), timeout=5)
        assert operator.error is None
        assert_sound(emu, ["plain", "later"])
    finally:
        await operator.stop()
