"""Extended resources backed by a DeviceClass (kube v1.36's DRAExtendedResource) end to end: the real
operator over HTTP against the emulator (v1.36), asserting on what the API server ends up holding.

A pod asks for `example.com/gpu: 1`; no node advertises it, a DeviceClass names it in
`extendedResourceName`. Before the pod is bound Placer creates the pod's claim (kube-scheduler's
`<pod>-extended-resources-XXXXX`, annotated, owned by the pod) with the finalizer, the allocation
and the pod in `reservedFor`, and records it in the pod's `status.extendedResourceClaimStatus`; a
pod for which no device is free stays pending (never bound as if the resource were absent), and a
failed binding deletes the claim it created.
"""

from __future__ import annotations

import re
from typing import Any

from placer.engine.devices import DELETE_PROTECTION
from placer.testing_devices import device, device_class, resource_slice

from tests.controller.helpers import Launch, bound_node, events_about, until
from tests.kubeemu import KubeEmulator

DRIVER = "gpu.example.com"
GPU = "example.com/gpu"
CLAIMS = "resource.k8s.io/v1/resourceclaims"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def setup(emu: KubeEmulator, gpus: dict[str, int], others: tuple[str, ...] = ()) -> None:
    for name, count in gpus.items():
        emu.add_node(name)
        devices = [device(f"gpu-{i}") for i in range(count)]
        emu.create("resource.k8s.io/v1/resourceslices", resource_slice(f"{name}-gpus", DRIVER, node=name,
                                                                       devices=devices))
    for name in others:
        emu.add_node(name)
    emu.create("resource.k8s.io/v1/deviceclasses",
               device_class("gpu", f'device.driver == "{DRIVER}"', extended=GPU))
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


def extended_claims(emu: KubeEmulator, pod: dict[str, Any]) -> list[dict[str, Any]]:
    uid = pod["metadata"]["uid"]
    return [c for c in emu.list(CLAIMS) if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"
            and any(r.get("uid") == uid for r in c["metadata"].get("ownerReferences") or [])]


def answered(emu: KubeEmulator, method: str, path: str) -> list[int]:
    pattern = re.compile(path)
    return [i for i, r in enumerate(emu.requests)
            if r.method == method and pattern.search(r.path) and r.status is not None and r.status < 300]


def assert_sound(emu: KubeEmulator, pods: list[str]) -> None:
    """As `helpers.assert_sound`, except that the backed resource is not counted against nodes'
    allocatable (the emulator's audit counts every request there; DRA provides this one)."""
    assert emu.double_bindings() == []
    assert [v for v in emu.audit_capacity() if v.resource != GPU] == []
    for name in pods:
        assert bound_node(emu, name) is not None, name


def failed_note(emu: KubeEmulator, pod: str) -> str | None:
    events = events_about(emu, pod, "FailedScheduling")
    return events[-1]["note"] if events else None


async def test_an_extended_resource_is_allocated_through_a_claim_before_binding(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup(emu, {"gpu-node": 2}, others=("cpu-node",))
    pod = emu.add_pod("train", scheduler_name="placer", extended={GPU: 1})
    await launch()
    await until(lambda: bound_node(emu, "train"), timeout=10)
    assert bound_node(emu, "train") == "gpu-node"  # not cpu-node: no device there

    (claim,) = extended_claims(emu, pod)
    name = claim["metadata"]["name"]
    assert name.startswith("train-extended-resources-") and len(name) == len("train-extended-resources-") + 5
    assert claim["metadata"]["generateName"] == "train-extended-resources-"
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "train", "uid": pod["metadata"]["uid"], "controller": True}]
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
    # container 0; example.com/gpu is second among its sorted requests (cpu, example.com/gpu, memory)
    request = "container-0-request-1"
    assert claim["spec"]["devices"]["requests"] == [{"name": request, "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": request, "driver": DRIVER, "pool": "gpu-node", "device": "gpu-0"}]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": pod["metadata"]["uid"]}]
    status = emu.get("pods", "train")["status"]["extendedResourceClaimStatus"]
    container = pod["spec"]["containers"][0]["name"]
    assert status == {"resourceClaimName": name, "requestMappings": [
        {"containerName": container, "resourceName": GPU, "requestName": request}]}

    # the order on the wire: the pod's nominatedNodeName (kube's NominatedNodeNameForExpectation: it
    # has PreBind work), create, finalizer, status, the pod's extendedResourceClaimStatus, the binding
    create = answered(emu, "POST", r"/namespaces/default/resourceclaims$")
    finalizer = answered(emu, "PATCH", rf"/resourceclaims/{name}$")
    claim_status = answered(emu, "PATCH", rf"/resourceclaims/{name}/status$")
    pod_status = answered(emu, "PATCH", r"/pods/train/status$")  # (a bound pod's status is not written else)
    binding = answered(emu, "POST", r"/pods/train/binding$")
    assert [len(x) for x in (create, finalizer, claim_status, pod_status, binding)] == [1, 1, 1, 2, 1]
    assert pod_status[0] < create[0] < finalizer[0] < claim_status[0] < pod_status[1] < binding[0]

    # a second pod gets the other device, a third none: it waits, never placed without one
    second = emu.add_pod("second", scheduler_name="placer", extended={GPU: 1})
    await until(lambda: bound_node(emu, "second"), timeout=10)
    (claim2,) = extended_claims(emu, second)
    assert claim2["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"
    emu.add_pod("third", scheduler_name="placer", extended={GPU: 1})
    await until(lambda: failed_note(emu, "third"), timeout=10)
    note = failed_note(emu, "third")
    assert note is not None and note.startswith("0/2 nodes are available: 2 cannot allocate all claims."), note
    assert "Insufficient example.com/gpu" not in note
    assert bound_node(emu, "third") is None and emu.bind_attempts.get("default/third", 0) == 0
    assert_sound(emu, ["train", "second"])


async def test_a_failed_binding_deletes_the_claim_it_created(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The binding refused once (an admission webhook): the claim is deallocated, unprotected and
    deleted (kube's Unreserve); the retry creates it again and binds the pod."""
    emu = kube_emulator
    setup(emu, {"gpu-node": 1})
    pod = emu.add_pod("p", scheduler_name="placer", extended={GPU: 1})
    fault = emu.inject("POST", r"/pods/p/binding$", status=403, count=1, message="denied by an admission webhook")
    await launch()
    await until(lambda: fault.hits == 1, timeout=10)
    await until(lambda: bound_node(emu, "p"), timeout=15)
    assert len(answered(emu, "POST", r"/namespaces/default/resourceclaims$")) == 2  # created, deleted, created
    assert len(answered(emu, "DELETE", r"/resourceclaims/p-extended-resources-[a-z0-9]{5}$")) == 1
    (claim,) = extended_claims(emu, pod)
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
    assert_sound(emu, ["p"])


async def test_a_node_advertising_the_resource_uses_its_device_plugin(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """Where a node's allocatable has the resource, NodeResourcesFit counts it and no claim is made."""
    emu = kube_emulator
    emu.add_node("plugin-node", extended={GPU: 1})
    emu.create("resource.k8s.io/v1/deviceclasses", device_class("gpu", extended=GPU))
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    first = emu.add_pod("first", scheduler_name="placer", extended={GPU: 1})
    await launch()
    await until(lambda: bound_node(emu, "first"), timeout=10)
    assert extended_claims(emu, first) == []
    emu.add_pod("second", scheduler_name="placer", extended={GPU: 1})
    await until(lambda: failed_note(emu, "second"), timeout=10)
    note = failed_note(emu, "second")
    assert note is not None and note.startswith("0/1 nodes are available: 1 Insufficient example.com/gpu."), note
    assert emu.audit_capacity() == []  # the device plugin's count: never over it
