"""The PodGroup fields behind kube v1.36's other workload gates, end to end: the real operator over
HTTP against the emulator playing a v1.36 API server started with `GenericWorkload,
GangScheduling` plus `WorkloadAwarePreemption` and `DRAWorkloadResourceClaims` (the fields served,
the PodGroup's priority resolved by the priority admission plugin), and, for contrast, without them
(the fields dropped, as a v1.36.2 server does).

- a PodGroup's `spec.resourceClaims`: the group's claim allocated once, `reservedFor` the PodGroup
  (`apiGroup: scheduling.k8s.io, resource: podgroups`), every member on the claim's node;
- the group's own priority decides its preemption; `disruptionMode: PodGroup` makes a running
  group one victim.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from placer.engine.devices import DELETE_PROTECTION
from placer.testing_devices import device, device_class, request, resource_slice

from tests.controller.helpers import Launch, assert_sound, bound_node, events_about, until
from tests.kubeemu import KubeEmulator
from tests.kubeemu.errors import ApiError

Obj = dict[str, Any]
NS = "default"
PODGROUPS = "scheduling.k8s.io/v1alpha2/podgroups"
CLAIMS = "resource.k8s.io/v1/resourceclaims"
DRIVER = "gpu.example.com"
GATES = ("WorkloadAwarePreemption", "DRAWorkloadResourceClaims")


@pytest_asyncio.fixture(params=[GATES], ids=["gates-on"])
async def kube_emulator(request: pytest.FixtureRequest) -> AsyncIterator[KubeEmulator]:
    """A v1.36 API server with gang scheduling and (per `request.param`) the further gates on."""
    async with KubeEmulator(gang_scheduling=True, workload_gates=request.param) as emu:
        yield emu


def podgroup(emu: KubeEmulator, name: str, min_count: int, **spec: Any) -> Obj:
    return emu.create(PODGROUPS, {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec}})


def member(emu: KubeEmulator, name: str, group: str, **kwargs: Any) -> Obj:
    spec = {"schedulingGroup": {"podGroupName": group}, **kwargs.pop("spec", {})}
    return emu.add_pod(name, NS, scheduler_name="placer", spec=spec, **kwargs)


def bound(emu: KubeEmulator, names: list[str]) -> list[str]:
    return [name for name in names if bound_node(emu, name) is not None]


# ----------------------------------------------------------------- what the server stores


@pytest.mark.parametrize("kube_emulator", [GATES, ()], ids=["gates-on", "gates-off"], indirect=True)
async def test_the_server_serves_the_gated_fields_only_with_their_gates(kube_emulator: KubeEmulator) -> None:
    """Gates on: `priority` resolved from `priorityClassName` by admission (0 without a class),
    `disruptionMode` and `resourceClaims` kept, an unknown class refused; gates off: all dropped."""
    emu = kube_emulator
    emu.add_priority_class("high", 1000)
    claims = [{"name": "gpu", "resourceClaimName": "shared"}]
    stored = podgroup(emu, "g", 2, priorityClassName="high", disruptionMode="PodGroup", resourceClaims=claims)
    plain = podgroup(emu, "plain", 2)
    if emu.store.workload_gates:
        assert (stored["spec"]["priority"], stored["spec"]["disruptionMode"]) == (1000, "PodGroup")
        assert stored["spec"]["resourceClaims"] == claims
        assert (plain["spec"]["priority"], plain["spec"]["disruptionMode"]) == (0, "Pod")
        with pytest.raises(ApiError, match="no PriorityClass with name missing was found"):
            podgroup(emu, "bad", 2, priorityClassName="missing")
        with pytest.raises(ApiError, match=r"spec\.priority: Invalid value: 5: field is immutable"):
            emu.patch(PODGROUPS, "g", {"spec": {"priority": 5}}, NS, subresource=None)  # a client's PATCH
        with pytest.raises(ApiError, match="must specify exactly one of"):
            podgroup(emu, "both", 2, resourceClaims=[{"name": "x", "resourceClaimName": "a",
                                                      "resourceClaimTemplateName": "b"}])
    else:
        assert stored["spec"]["disruptionMode"] == "Pod"
        assert not {"priority", "priorityClassName", "resourceClaims"} & set(stored["spec"])


# ----------------------------------------------------------------- a PodGroup's claims


def gpu_cluster(emu: KubeEmulator) -> None:
    """`gpu-node` with one GPU (a node-local device), two nodes without, the `gpu` class."""
    for name in ("cpu-1", "gpu-node", "cpu-2"):
        emu.add_node(name, cpu="4")
    emu.create("resource.k8s.io/v1/resourceslices", resource_slice(
        "gpu-node-gpus", DRIVER, node="gpu-node", devices=[device("gpu-0")]))
    emu.create("resource.k8s.io/v1/deviceclasses", device_class("gpu", f'device.driver == "{DRIVER}"'))
    emu.create(CLAIMS, {"metadata": {"name": "shared", "namespace": NS},
                        "spec": {"devices": {"requests": [request("gpu", "gpu")]}}, "status": {}})
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


def claim_patches(emu: KubeEmulator, subresource: str = "") -> list[int]:
    """The answered PATCHes of the shared claim (or its status): their HTTP statuses."""
    path = f"/namespaces/{NS}/resourceclaims/shared" + (f"/{subresource}" if subresource else "")
    return [r.status for r in emu.requests if r.method == "PATCH" and r.path.endswith(path) and r.status is not None]


async def test_a_groups_claim_is_allocated_once_and_reserved_for_the_podgroup(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """Three members naming the PodGroup's claim: one allocation (the only GPU), `reservedFor` the
    PodGroup alone, every member bound on the GPU's node; a member added later writes nothing."""
    emu = kube_emulator
    gpu_cluster(emu)
    group = podgroup(emu, "train", 3, resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}])
    names = ["t0", "t1", "t2"]
    for name in names:
        member(emu, name, "train", cpu="1", spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]})
    await launch()
    await until(lambda: len(bound(emu, names)) == 3, timeout=15)
    assert {bound_node(emu, name) for name in names} == {"gpu-node"}
    claim = emu.get(CLAIMS, "shared", NS)
    assert claim is not None and DELETE_PROTECTION in claim["metadata"]["finalizers"]
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "gpu-node", "device": "gpu-0"}]
    assert claim["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                               "name": "train", "uid": group["metadata"]["uid"]}]
    # written once: the other members' identical writes found it there (409 / a failed test, 422),
    # and counted as written — no member failed its PreBind
    assert claim_patches(emu, "status").count(200) == 1 and claim_patches(emu).count(200) == 1
    assert not any(events_about(emu, name, "FailedScheduling") for name in names)
    assert_sound(emu, names)

    # a member added later joins the claim's node; the claim is not written again (once the operator
    # has seen it reserved for the group it sends nothing; before, its writes find them landed)
    member(emu, "late", "train", cpu="1", spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]})
    await until(lambda: bound_node(emu, "late"), timeout=10)
    assert bound_node(emu, "late") == "gpu-node"
    assert claim_patches(emu, "status").count(200) == 1 and claim_patches(emu).count(200) == 1
    assert emu.get(CLAIMS, "shared", NS)["status"] == claim["status"]


# ----------------------------------------------------------------- the group's own priority


@pytest.mark.parametrize("kube_emulator", [GATES, ()], ids=["gates-on", "gates-off"], indirect=True)
async def test_the_groups_own_priority_decides_its_preemption(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """Two full 2-cpu nodes of priority-100 pods; a gang of two 1-cpu pods without a class
    (priority 0) whose PodGroup names the class `high` (1000). Served (gates on), the group's
    priority preempts two pods and the gang is bound; dropped (gates off), the group weighs its
    pods' priority, 0: no victims."""
    emu = kube_emulator
    emu.add_priority_class("high", 1000)
    for node in ("n1", "n2"):
        emu.add_node(node, cpu="2")
        for i in range(2):
            emu.add_pod(f"{node}-busy{i}", NS, cpu="1", node_name=node, priority=100)
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    podgroup(emu, "train", 2, priorityClassName="high")
    names = ["t0", "t1"]
    for name in names:
        member(emu, name, "train", cpu="1")
    await launch()
    busy = [f"{node}-busy{i}" for node in ("n1", "n2") for i in range(2)]
    if emu.store.workload_gates:
        await until(lambda: len(bound(emu, names)) == 2, timeout=15)
        evicted = [name for name in busy if emu.get("pods", name, NS) is None]
        assert len(evicted) == 2 and all(events_about(emu, name, "Preempted") for name in evicted)
        assert_sound(emu, names)
    else:
        await until(lambda: events_about(emu, "t0", "FailedScheduling"), timeout=10)
        assert bound(emu, names) == [] and all(emu.get("pods", name, NS) is not None for name in busy)
        note = events_about(emu, "t0", "FailedScheduling")[-1]["note"]
        assert "No preemption victims found for incoming preemptor" in note


async def test_disruption_mode_podgroup_makes_a_running_group_one_victim(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """A running group of two 2-cpu pods (one per node) with `disruptionMode: PodGroup`; a gang of
    one 2-cpu pod of a higher-priority group needs one node, but the running group goes whole."""
    emu = kube_emulator
    emu.add_priority_class("high", 1000)
    podgroup(emu, "running", 2, disruptionMode="PodGroup")
    for i, node in enumerate(("n1", "n2")):
        emu.add_node(node, cpu="2")
        emu.add_pod(f"r{i}", NS, cpu="2", node_name=node, spec={"schedulingGroup": {"podGroupName": "running"}})
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    podgroup(emu, "urgent", 1, priorityClassName="high")
    member(emu, "u0", "urgent", cpu="2")
    await launch()
    await until(lambda: bound_node(emu, "u0"), timeout=15)
    await until(lambda: emu.get("pods", "r0", NS) is None and emu.get("pods", "r1", NS) is None, timeout=10)
    assert all(events_about(emu, name, "Preempted") for name in ("r0", "r1"))
    assert_sound(emu, ["u0"])


async def test_a_group_below_the_running_pods_preempts_nothing(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The PodGroup's class (50) is below the running pod's priority (100), whatever its pods say:
    nothing is evicted; the member reads kube's DefaultPreemption declining for a pod of a group,
    the group's condition why the group could not preempt."""
    emu = kube_emulator
    emu.add_priority_class("low", 50)
    emu.add_node("n1", cpu="2")
    emu.add_pod("busy", NS, cpu="2", node_name="n1", priority=100)
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    podgroup(emu, "batch", 1, priorityClassName="low")
    member(emu, "b0", "batch", cpu="1", priority=1000)
    await launch()
    events = await until(lambda: events_about(emu, "b0", "FailedScheduling"), timeout=10)
    assert events[-1]["note"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                  "preemption: not eligible due to workload aware preemption enabled")
    group = await until(lambda: (emu.get(PODGROUPS, "batch", NS) or {}).get("status", {}).get("conditions"),
                        timeout=10)
    assert group[0]["message"] == "pod group is unschedulable, No preemption victims found for incoming preemptor"
    assert emu.get("pods", "busy", NS) is not None and bound_node(emu, "b0") is None


@pytest.mark.parametrize("kube_emulator", [()], ids=["gates-off"], indirect=True)
async def test_a_gang_sharing_a_claim_of_its_pods(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """Without PodGroup claims (the gate off): two members of a gang name one claim as their own.
    Both are placed together on the GPU's node (the second reuses the first's pending allocation,
    as kube's group cycle does), the claim allocated once and reserved for both pods."""
    emu = kube_emulator
    gpu_cluster(emu)
    podgroup(emu, "pair", 2)
    entry = {"name": "gpu", "resourceClaimName": "shared"}
    pods = [member(emu, name, "pair", cpu="1", spec={"resourceClaims": [entry]}) for name in ("p0", "p1")]
    await launch()
    await until(lambda: len(bound(emu, ["p0", "p1"])) == 2, timeout=20)
    assert {bound_node(emu, name) for name in ("p0", "p1")} == {"gpu-node"}
    claim = emu.get(CLAIMS, "shared", NS)
    assert claim is not None and len(claim["status"]["allocation"]["devices"]["results"]) == 1
    assert sorted(r["uid"] for r in claim["status"]["reservedFor"]) == sorted(p["metadata"]["uid"] for p in pods)
    assert claim_patches(emu).count(200) == 1  # the finalizer, once
    assert_sound(emu, ["p0", "p1"])
