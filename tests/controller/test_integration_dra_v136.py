"""kube v1.36's two DRA features on by default, end to end: the real operator over HTTP against the
emulator playing a v1.36 API server (which validates claims' status updates as one does).

The tests play the DRA driver: they publish ResourceSlices and, for devices with binding
conditions, report the conditions in the claim's `status.devices`; and kube's resourceclaim
controller, where a pod goes (its claim deallocated).

- Binding conditions: the claim is allocated (conditions copied, `allocationTimestamp`, pinned to the
  node by `bindsToNode`) and reserved, the pod nominated to its node and told
  `BindingConditionsPending`, and bound only once the driver says the device is ready; a failure
  condition fails PreBind with kube's message, and the next attempt has PostFilter give the
  allocation back and allocate again; a claim whose conditions time out (600 s after its
  `allocationTimestamp`) the same.
- Consumable capacity: claims share one device's memory, each with its own share and a fresh
  share ID, until it is used up (`cannot allocate all claims`); a share given back is taken at once.
- On a v1.35 server the features' fields are dropped, and the same objects mean devices held whole
  and bound at once.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from placer.engine.parsing import parse_timestamp
from placer.testing_devices import capacity_policy, device, device_class, request, resource_slice

from tests.controller.helpers import (
    Launch,
    OperatorThread,
    assert_sound,
    bound_node,
    events_about,
    operator_options,
    until,
)
from tests.controller.test_integration_dra import CLAIMS, CLASSES, SLICES, claim_of, pod_condition
from tests.kubeemu import KubeEmulator

FABRIC = "fabric.example.com"
GPUS = "gpu.example.com"
PINNED = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
NOT_HELPFUL = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def fabric_cluster(emu: KubeEmulator, devices: int = 1) -> None:
    """A node reached by fabric-attached accelerators: network devices (a node selector) that must be
    attached before a pod may use them (binding conditions), pinned to the node they are attached to."""
    emu.add_node("n1")
    emu.create(CLASSES, device_class("accel", f'device.driver == "{FABRIC}"'))
    emu.create(SLICES, resource_slice("fabric", FABRIC, pool="fabric", node_selector=PINNED, devices=[
        device(f"accel-{i}", binding_conditions=["FabricAttached"], binding_failure_conditions=["FabricFailed"],
               binds_to_node=True) for i in range(devices)]))
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


def claim_body(name: str, klass: str, capacity: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [request("dev", klass, capacity=capacity)]}}}


def add_pod(emu: KubeEmulator, name: str, claim: str) -> dict[str, Any]:
    return emu.add_pod(name, scheduler_name="placer",
                       spec={"resourceClaims": [{"name": "dev", "resourceClaimName": claim}]})


def report(emu: KubeEmulator, claim: str, condition: str, status: str, reason: str = "Driver",
           message: str = "") -> None:
    """The driver's word on the claim's device (its `status.devices` entry)."""
    (result,) = claim_of(emu, claim)["status"]["allocation"]["devices"]["results"]
    emu.patch(CLAIMS, claim, {"status": {"devices": [{
        "driver": result["driver"], "pool": result["pool"], "device": result["device"],
        "conditions": [{"type": condition, "status": status, "reason": reason, "message": message,
                        "lastTransitionTime": "2027-01-15T08:00:00Z"}]}]}}, "default", subresource="status")


def nominated(emu: KubeEmulator, pod: str) -> str | None:
    return ((emu.get("pods", pod) or {}).get("status") or {}).get("nominatedNodeName")


def reserved(emu: KubeEmulator, claim: str) -> list[str]:
    return [r["name"] for r in claim_of(emu, claim).get("status", {}).get("reservedFor") or []]


def notes(emu: KubeEmulator, pod: str, reason: str = "FailedScheduling") -> list[str]:
    return [e["note"] for e in events_about(emu, pod, reason)]


# ----------------------------------------------------------------- binding conditions


async def test_a_pod_waits_for_its_devices_binding_conditions(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    fabric_cluster(emu)
    emu.create(CLAIMS, claim_body("accel", "accel"))
    pod = add_pod(emu, "job", "accel")
    await launch()
    await until(lambda: reserved(emu, "accel") == ["job"], timeout=10)
    allocation = claim_of(emu, "accel")["status"]["allocation"]
    assert allocation["devices"]["results"] == [{
        "request": "dev", "driver": FABRIC, "pool": "fabric", "device": "accel-0",
        "bindingConditions": ["FabricAttached"], "bindingFailureConditions": ["FabricFailed"]}]
    assert allocation["nodeSelector"] == PINNED  # bindsToNode: pinned to the node, not the slice's selector
    assert abs(parse_timestamp(allocation["allocationTimestamp"]) - time.time()) < 10
    # nominated before PreBind (kube's NominatedNodeNameForExpectation), and told why it waits
    assert nominated(emu, "job") == "n1"
    (event,) = await until(lambda: events_about(emu, "job", "BindingConditionsPending"), timeout=5)
    assert (event["type"], event["action"], event["note"]) == (
        "Normal", "Scheduling", "waiting for binding conditions for device on node n1")
    pod_status = [i for i, r in enumerate(emu.requests) if r.method == "PATCH" and r.path.endswith("/pods/job/status")]
    claim_status = [i for i, r in enumerate(emu.requests)
                    if r.method == "PATCH" and r.path.endswith("/resourceclaims/accel/status")]
    assert pod_status[0] < claim_status[0]
    await asyncio.sleep(1.5)
    assert bound_node(emu, "job") is None and emu.bind_attempts.get("default/job", 0) == 0
    report(emu, "accel", "FabricAttached", "False", "Attaching")  # not yet
    await asyncio.sleep(1.2)
    assert bound_node(emu, "job") is None
    ready = time.monotonic()
    report(emu, "accel", "FabricAttached", "True", "Attached")
    await until(lambda: bound_node(emu, "job"), timeout=5)
    assert time.monotonic() - ready < 2.0  # (kube checks every 5 s)
    assert bound_node(emu, "job") == "n1" and nominated(emu, "job") is None  # (the server clears it on binding)
    await until(lambda: notes(emu, "job", "Scheduled"))  # (posted by its own writer, after the bind's answer)
    assert notes(emu, "job", "Scheduled") == ["Successfully assigned default/job to n1"]
    assert reserved(emu, "accel") == ["job"] and pod["metadata"]["uid"]
    assert_sound(emu, ["job"])


async def test_a_failed_binding_gives_the_allocation_back_and_allocates_again(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """The driver reports the failure condition: PreBind fails with kube's message; the pod leaves
    `reservedFor` (the allocation stays, as kube's Unreserve leaves it); the next attempt finds the
    claim unavailable everywhere and PostFilter deallocates it (the driver's status goes with it);
    then the claim is allocated again, and the pod waits anew."""
    emu = kube_emulator
    fabric_cluster(emu)
    emu.create(CLAIMS, claim_body("accel", "accel"))
    add_pod(emu, "job", "accel")
    await launch(initial_backoff=0.5, max_backoff=1.0)
    await until(lambda: reserved(emu, "accel") == ["job"], timeout=10)
    first = claim_of(emu, "accel")["status"]["allocation"]["allocationTimestamp"]
    report(emu, "accel", "FabricFailed", "True", "PortDown", 'port "p3" is down')
    failed = ('running PreBind plugin "DynamicResources": device binding failed: claim=accel, reason=PortDown, '
              'message="port \\"p3\\" is down"')
    await until(lambda: failed in notes(emu, "job"), timeout=10)
    await until(lambda: (pod_condition(emu, "job") or {}).get("reason") == "SchedulerError", timeout=5)
    deallocated = ("0/1 nodes are available: 1 resourceclaim not available on the node. "
                   f"deallocation of ResourceClaim completed, {NOT_HELPFUL}")
    await until(lambda: deallocated in notes(emu, "job"), timeout=10)
    # allocated again (a fresh timestamp, no stale driver status), reserved, waiting again
    await until(lambda: reserved(emu, "accel") == ["job"]
                and claim_of(emu, "accel")["status"].get("devices") is None, timeout=10)
    await asyncio.sleep(1.1)  # (timestamps are in seconds)
    report(emu, "accel", "FabricAttached", "True")
    await until(lambda: bound_node(emu, "job"), timeout=10)
    assert bound_node(emu, "job") == "n1"
    again = claim_of(emu, "accel")["status"]["allocation"]["allocationTimestamp"]
    assert parse_timestamp(again) >= parse_timestamp(first)
    assert emu.bind_attempts.get("default/job", 0) == 1
    assert_sound(emu, ["job"])


async def test_binding_conditions_time_out_from_the_allocation_timestamp(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """A claim allocated 597 s ago whose device never got ready: the pod reserves it and waits, and
    3 s later the wait ends (`device binding timeout: claim=accel`); the next attempt deallocates
    it and allocates anew (a fresh timestamp: the pod waits again)."""
    emu = kube_emulator
    fabric_cluster(emu)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 597))
    emu.create(CLAIMS, {**claim_body("accel", "accel"), "metadata": {
        "name": "accel", "namespace": "default", "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "status": {"allocation": {"devices": {"results": [{
            "request": "dev", "driver": FABRIC, "pool": "fabric", "device": "accel-0",
            "bindingConditions": ["FabricAttached"], "bindingFailureConditions": ["FabricFailed"]}]},
            "nodeSelector": PINNED, "allocationTimestamp": stamp}}})
    add_pod(emu, "job", "accel")
    await launch(initial_backoff=0.5, max_backoff=1.0)
    await until(lambda: reserved(emu, "accel") == ["job"], timeout=10)
    assert claim_of(emu, "accel")["status"]["allocation"]["allocationTimestamp"] == stamp  # only reserved
    timeout = 'running PreBind plugin "DynamicResources": device binding timeout: claim=accel'
    await until(lambda: timeout in notes(emu, "job"), timeout=10)
    await until(lambda: any(n.endswith(f"deallocation of ResourceClaim completed, {NOT_HELPFUL}")
                            for n in notes(emu, "job")), timeout=10)
    await until(lambda: reserved(emu, "accel") == ["job"]
                and claim_of(emu, "accel")["status"]["allocation"]["allocationTimestamp"] != stamp, timeout=10)
    assert bound_node(emu, "job") is None
    report(emu, "accel", "FabricAttached", "True")
    await until(lambda: bound_node(emu, "job"), timeout=10)
    assert_sound(emu, ["job"])


# ----------------------------------------------------------------- consumable capacity


def shared_gpu_cluster(emu: KubeEmulator) -> None:
    emu.add_node("n1")
    emu.create(CLASSES, device_class("shared", f'device.driver == "{GPUS}" && device.allowMultipleAllocations'))
    emu.create(SLICES, resource_slice("n1-gpus", GPUS, node="n1", devices=[
        device("gpu-0", capacity={"memory": "80Gi"}, multiple=True)]))
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


def share_of(emu: KubeEmulator, claim: str) -> dict[str, Any]:
    (result,) = claim_of(emu, claim)["status"]["allocation"]["devices"]["results"]
    return result


async def test_claims_share_a_devices_capacity_until_it_is_used_up(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    shared_gpu_cluster(emu)
    for i in range(3):
        emu.create(CLAIMS, claim_body(f"mem-{i}", "shared", {"memory": "30Gi"}))
    await launch(initial_backoff=0.2, max_backoff=1.0)
    for i in range(3):
        add_pod(emu, f"p{i}", f"mem-{i}")
    await until(lambda: bound_node(emu, "p0") and bound_node(emu, "p1"), timeout=10)
    shares = [share_of(emu, f"mem-{i}") for i in range(2)]
    for share in shares:
        assert share["device"] == "gpu-0" and share["consumedCapacity"] == {"memory": "30Gi"}
        assert UUID.match(share["shareID"])
    assert shares[0]["shareID"] != shares[1]["shareID"]
    await until(lambda: notes(emu, "p2"), timeout=10)
    assert notes(emu, "p2")[-1] == (
        f"0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, {NOT_HELPFUL}")
    await asyncio.sleep(1.0)
    assert bound_node(emu, "p2") is None and "allocation" not in claim_of(emu, "mem-2").get("status", {})
    # p0 goes; the resourceclaim controller deallocates its claim: p2 takes the share freed
    emu.delete("pods", "p0")
    freed = time.monotonic()
    emu.patch(CLAIMS, "mem-0", {"status": {"allocation": None, "reservedFor": None}}, "default", subresource="status")
    await until(lambda: bound_node(emu, "p2"), timeout=5)
    assert time.monotonic() - freed < 2.0
    assert share_of(emu, "mem-2")["shareID"] not in {s["shareID"] for s in shares}
    assert_sound(emu, ["p1", "p2"])


async def test_two_requests_of_a_claim_share_one_device_and_no_request_takes_the_default(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """Two requests of one claim on one GPU, each with its own share: one asks 12Gi, the other no
    capacity at all and takes the capacity's request policy default (8Gi, the multiple of 4Gi the
    policy's range rounds 12Gi to)."""
    emu = kube_emulator
    emu.add_node("n1")
    emu.create(CLASSES, device_class("shared", f'device.driver == "{GPUS}" && device.allowMultipleAllocations'))
    emu.create(SLICES, resource_slice("n1-gpus", GPUS, node="n1", devices=[device("gpu-0", multiple=True, capacity={
        "memory": capacity_policy("80Gi", default="8Gi", minimum="4Gi", step="4Gi")})]))
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    emu.create(CLAIMS, {"metadata": {"name": "both", "namespace": "default"}, "spec": {"devices": {"requests": [
        request("a", "shared", capacity={"memory": "10Gi"}), request("b", "shared")]}}})
    add_pod(emu, "p", "both")
    await launch()
    await until(lambda: bound_node(emu, "p"), timeout=10)
    first, second = claim_of(emu, "both")["status"]["allocation"]["devices"]["results"]
    assert (first["request"], second["request"]) == ("a", "b")
    assert (first["device"], second["device"]) == ("gpu-0", "gpu-0") and first["shareID"] != second["shareID"]
    assert first["consumedCapacity"] == {"memory": "12Gi"} and second["consumedCapacity"] == {"memory": "8Gi"}
    assert_sound(emu, ["p"])


# ----------------------------------------------------------------- an older API server


@pytest_asyncio.fixture
async def v135(tmp_path: Path) -> AsyncIterator[tuple[KubeEmulator, Path]]:
    async with KubeEmulator(kube_version="1.35") as emu:
        yield emu, emu.write_kubeconfig(tmp_path / "kubeconfig-135")


async def test_on_a_v135_server_the_fields_are_gone_and_devices_are_held_whole(
    v135: tuple[KubeEmulator, Path]
) -> None:
    """A v1.35 server drops both features' fields: the fabric device needs no preparation (the pod is
    bound at once, its allocation without conditions) and the shared GPU is held by one claim."""
    emu, kubeconfig = v135
    fabric_cluster(emu)
    emu.create(CLASSES, device_class("shared", f'device.driver == "{GPUS}"'))
    emu.create(SLICES, resource_slice("n1-gpus", GPUS, node="n1", devices=[
        device("gpu-0", capacity={"memory": "80Gi"}, multiple=True)]))
    emu.create(CLAIMS, claim_body("accel", "accel"))
    for i in range(2):
        emu.create(CLAIMS, claim_body(f"mem-{i}", "shared", {"memory": "30Gi"}))
    add_pod(emu, "job", "accel")
    add_pod(emu, "m0", "mem-0")
    add_pod(emu, "m1", "mem-1")
    operator = await OperatorThread(operator_options(kubeconfig)).start()
    try:
        await until(lambda: bound_node(emu, "job"), timeout=10)
        (result,) = claim_of(emu, "accel")["status"]["allocation"]["devices"]["results"]
        assert "bindingConditions" not in result
        await until(lambda: bound_node(emu, "m0") or bound_node(emu, "m1"), timeout=10)
        loser = "m1" if bound_node(emu, "m0") else "m0"
        await until(lambda: notes(emu, loser), timeout=10)
        assert notes(emu, loser)[-1].startswith("0/1 nodes are available: 1 cannot allocate all claims.")
        winner = "mem-0" if loser == "m1" else "mem-1"
        assert "shareID" not in share_of(emu, winner) and "consumedCapacity" not in share_of(emu, winner)
    finally:
        await operator.stop()
