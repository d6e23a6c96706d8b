"""Volume scheduling end to end: the operator against the emulator, with its PV controller and, where
asked, its provisioner; asserting what the API server ends up holding (PV claimRefs, claim
annotations, pods' nodes, events) and that no volume is ever given twice.

The profile lists its filters (the default profile may change): the usual node checks, then
VolumeBinding.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tests.controller.helpers import OperatorThread, assert_sound, bound_node, events_about, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
HOSTNAME = "kubernetes.io/hostname"
FILTERS = ["NodeUnschedulable", "NodeReady", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
           "VolumeBinding"]
TIMED_OUT = 'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting for the condition'
NO_VOLUME = "node(s) didn't find available persistent volumes to bind"


def volume_profile(emu: KubeEmulator) -> None:
    emu.create("sp", {"metadata": {"name": "volumes"},
                      "spec": {"schedulerName": "placer", "filters": [{"name": name} for name in FILTERS]}})


def failure_notes(emu: KubeEmulator, name: str) -> list[str]:
    return [event["note"] for event in events_about(emu, name, "FailedScheduling")]


def claim_of(emu: KubeEmulator, name: str) -> dict[str, Any]:
    claim = emu.get("persistentvolumeclaims", name, "default")
    assert claim is not None
    return claim


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


def writes(emu: KubeEmulator, method: str, path: str) -> list[Any]:
    return [r for r in emu.requests if r.method == method and r.path == path]


def claim_ref(emu: KubeEmulator, volume: str) -> tuple[str, str, str] | None:
    pv = emu.get("persistentvolumes", volume)
    assert pv is not None
    ref = pv["spec"].get("claimRef")
    return None if ref is None else (ref.get("namespace"), ref.get("name"), ref.get("uid"))


async def test_a_pod_waits_for_its_missing_claim_and_binds_once_claim_and_volume_exist(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.pv_controller = True
    emu.add_node("n1")
    emu.add_node("n2")
    emu.add_storage_class("local", "kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer")
    volume_profile(emu)
    emu.add_pod("web", scheduler_name="placer", pvcs=["data"])
    await launch(pre_bind_timeout=5.0)
    await until(lambda: failure_notes(emu, "web"), timeout=10)
    assert failure_notes(emu, "web")[0].startswith('0/2 nodes are available: persistentvolumeclaim "data" not found.')
    assert bound_node(emu, "web") is None

    created = time.monotonic()
    emu.add_pv("disk-n2", storage_class="local", node_affinity={HOSTNAME: ["n2"]})
    claim = emu.add_pvc("data", storage_class="local")
    await until(lambda: bound_node(emu, "web"), timeout=10)
    assert time.monotonic() - created < 5.0  # woken by the claim and the volume, not a long backoff
    assert bound_node(emu, "web") == "n2"  # where the volume is
    assert claim_ref(emu, "disk-n2") == ("default", "data", claim["metadata"]["uid"])
    bound = claim_of(emu, "data")
    assert bound["spec"]["volumeName"] == "disk-n2" and BIND_COMPLETED in annotations(bound)
    assert bound["status"]["phase"] == "Bound"
    # PreBind came first: the PV was written before the pod was bound
    [pv_write] = writes(emu, "PATCH", "/api/v1/persistentvolumes/disk-n2")
    [binding] = writes(emu, "POST", "/api/v1/namespaces/default/pods/web/binding")
    assert pv_write.started < binding.started
    assert_sound(emu, ["web"])


async def test_a_wait_for_first_consumer_claim_is_provisioned_on_the_pods_node(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.pv_controller = True
    emu.auto_provision = {"csi.example.com": HOSTNAME}
    emu.add_node("n1", cpu="1")
    emu.add_node("n2", cpu="8")
    emu.add_storage_class("fast", "csi.example.com", binding_mode="WaitForFirstConsumer")
    claim = emu.add_pvc("data", storage_class="fast")
    volume_profile(emu)
    emu.add_pod("db", scheduler_name="placer", cpu="2", pvcs=["data"])  # fits n2 only
    await launch(pre_bind_timeout=5.0)
    await until(lambda: bound_node(emu, "db"), timeout=10)
    assert bound_node(emu, "db") == "n2"
    provisioned = claim_of(emu, "data")
    assert annotations(provisioned)[SELECTED_NODE] == "n2"
    volume = provisioned["spec"]["volumeName"]
    assert volume == f"pvc-{claim['metadata']['uid']}"
    pv = emu.get("persistentvolumes", volume)
    assert pv is not None
    [term] = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["n2"]
    [annotate] = writes(emu, "PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data")
    [binding] = writes(emu, "POST", "/api/v1/namespaces/default/pods/db/binding")
    assert annotate.started < binding.started
    assert failure_notes(emu, "db") == []
    assert_sound(emu, ["db"])


async def test_a_pod_whose_provisioner_never_answers_is_requeued_and_nothing_is_left_half_done(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.pv_controller = True
    emu.add_node("n1")
    emu.add_storage_class("slow", "slow.example.com", binding_mode="WaitForFirstConsumer")
    emu.add_pvc("data", storage_class="slow")
    volume_profile(emu)
    emu.add_pod("db", scheduler_name="placer", pvcs=["data"])
    operator = await launch(pre_bind_timeout=1.0, initial_backoff=3.0, max_backoff=3.0)
    await until(lambda: SELECTED_NODE in annotations(claim_of(emu, "data")), timeout=10)
    assert annotations(claim_of(emu, "data"))[SELECTED_NODE] == "n1"
    annotated = time.monotonic()
    await until(lambda: failure_notes(emu, "db"), timeout=10)
    assert time.monotonic() - annotated >= 0.8  # the timeout ran out
    assert failure_notes(emu, "db") == [TIMED_OUT]
    [condition] = emu.get("pods", "db")["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "SchedulerError", TIMED_OUT)
    # within the backoff (3 s): the annotation Placer set is gone, the pod is unbound and holds nothing
    await until(lambda: SELECTED_NODE not in annotations(claim_of(emu, "data")), timeout=2)
    state = operator.state
    assert state is not None
    await until(lambda: "default/db" not in state.cluster.pods, timeout=2)
    assert int(state.cluster.requested[state.cluster.index["n1"], 0]) == 0
    assert not state.cluster.catalog.assumed("PersistentVolumeClaim", "data", "default")
    assert bound_node(emu, "db") is None and emu.list("persistentvolumes") == []
    assert claim_of(emu, "data")["status"]["phase"] == "Pending"

    # requeued: the next attempt asks again, and a provisioner that now answers gets the pod bound
    emu.auto_provision = {"slow.example.com": HOSTNAME}
    await until(lambda: bound_node(emu, "db"), timeout=15)
    assert bound_node(emu, "db") == "n1"
    assert annotations(claim_of(emu, "data"))[SELECTED_NODE] == "n1"
    assert claim_of(emu, "data")["status"]["phase"] == "Bound"
    assert len(writes(emu, "PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data")) == 3  # set, unset, set
    assert_sound(emu, ["db"])


async def test_two_pods_racing_for_one_local_volume_never_share_it(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.pv_controller = True
    emu.pv_controller_delay = 0.5  # the first pod is still waiting for its volume when the second is decided
    emu.add_node("n1")
    emu.add_node("n2")
    emu.add_storage_class("local", "kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer")
    emu.add_pv("disk-1", storage_class="local", node_affinity={HOSTNAME: ["n1"]})
    claims = {name: emu.add_pvc(name, storage_class="local") for name in ("a", "b")}
    volume_profile(emu)
    emu.add_pod("pa", scheduler_name="placer", pvcs=["a"])
    emu.add_pod("pb", scheduler_name="placer", pvcs=["b"])
    await launch(pre_bind_timeout=5.0)
    await until(lambda: any(bound_node(emu, n) for n in ("pa", "pb")), timeout=10)
    [winner] = [n for n in ("pa", "pb") if bound_node(emu, n)]
    loser = "pb" if winner == "pa" else "pa"
    won, lost = ("a", "b") if winner == "pa" else ("b", "a")
    await until(lambda: failure_notes(emu, loser), timeout=10)
    assert NO_VOLUME in failure_notes(emu, loser)[0]
    assert bound_node(emu, winner) == "n1"
    assert claim_ref(emu, "disk-1") == ("default", won, claims[won]["metadata"]["uid"])
    await until(lambda: claim_of(emu, won)["status"]["phase"] == "Bound", timeout=5)
    # the loser waits: its claim untouched, the volume never given to it
    await _still(lambda: bound_node(emu, loser) is None, seconds=1.5)
    assert claim_of(emu, lost)["status"]["phase"] == "Pending"
    assert "volumeName" not in claim_of(emu, lost)["spec"] and SELECTED_NODE not in annotations(claim_of(emu, lost))
    assert len(writes(emu, "PATCH", "/api/v1/persistentvolumes/disk-1")) == 1
    assert claim_ref(emu, "disk-1") == ("default", won, claims[won]["metadata"]["uid"])

    # a second volume appears: the waiting pod is retried promptly and gets it
    created = time.monotonic()
    emu.add_pv("disk-2", storage_class="local", node_affinity={HOSTNAME: ["n2"]})
    await until(lambda: bound_node(emu, loser), timeout=10)
    assert time.monotonic() - created < 5.0
    assert bound_node(emu, loser) == "n2"
    assert claim_ref(emu, "disk-2") == ("default", lost, claims[lost]["metadata"]["uid"])
    assert claim_ref(emu, "disk-1") == ("default", won, claims[won]["metadata"]["uid"])
    assert len(writes(emu, "PATCH", "/api/v1/persistentvolumes/disk-1")) == 1
    assert_sound(emu, ["pa", "pb"])


async def _still(predicate: Callable[[], bool], seconds: float) -> None:
    """`predicate` holds the whole time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate()
        await asyncio.sleep(0.05)
