"""`placer explain` through `placer.cli.main` against the emulated API server over HTTP: a pending
pod's reasons per node, a bound pod's scores, the 20-node cut, exit 2 for what does not exist,
`--shadow`, NodeMetrics and profile ownership; and never a request other than GET."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from placer.cli import main

from tests.kubeemu import KubeEmulator

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
SCHEDULER = "placer"


@pytest.fixture
def kubeconfig(kube_emulator: KubeEmulator, tmp_path: Path) -> Path:
    return kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")


class Explain:
    """Runs `placer explain ARGS --kubeconfig ...` in a thread (the CLI runs its own event loop while
    the emulator serves on the test's), then checks that explain only read."""

    def __init__(self, emu: KubeEmulator, kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.emu, self.kubeconfig, self.capsys = emu, kubeconfig, capsys

    async def __call__(self, *args: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["explain", "--kubeconfig", str(self.kubeconfig), *args])
        captured = self.capsys.readouterr()
        writes = sorted({f"{r.method} {r.path}" for r in self.emu.requests if r.method != "GET"})
        assert writes == [], f"explain must only read, it sent {writes}"
        return code, captured.out, captured.err

    async def json(self, *args: str) -> dict[str, Any]:
        code, out, err = await self(*args, "-o", "json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def run(kube_emulator: KubeEmulator, kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> Explain:
    return Explain(kube_emulator, kubeconfig, capsys)


def profile(emu: KubeEmulator, name: str = "main", scheduler: str = SCHEDULER, **spec: Any) -> dict[str, Any]:
    return emu.create("sp", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                             "metadata": {"name": name}, "spec": {"schedulerName": scheduler, **spec}})


async def test_a_pending_pod_names_every_reason_of_every_node(kube_emulator: KubeEmulator, run: Explain) -> None:
    emu = kube_emulator
    emu.add_node("a-tainted-small", cpu="1", taints=[TAINT])
    emu.add_node("b-cordoned-small", cpu="1", unschedulable=True)
    emu.add_node("c-not-ready", cpu="8", ready=False)
    emu.add_pod("web", cpu="2", scheduler_name=SCHEDULER)
    profile(emu)

    doc = await run.json("default/web")
    assert list(doc)[:6] == ["pod", "profile", "node", "message", "rejected", "scores"]  # API.md §5's order
    assert doc["pod"] == "default/web" and doc["profile"] == "main" and doc["node"] is None
    assert doc["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), "
        "1 node(s) were not ready, 1 node(s) were unschedulable."
    )
    assert doc["rejected"] == {
        "a-tainted-small": ["node(s) had untolerated taint(s)", "Insufficient cpu"],
        "b-cordoned-small": ["node(s) were unschedulable", "Insufficient cpu"],
        "c-not-ready": ["node(s) were not ready"],
    }
    assert doc["scores"] == [] and doc["truncated"] == 0 and doc["feasible"] == 0 and doc["bound"] is False

    code, out, err = await run("default/web")
    assert code == 0 and err == ""
    assert "pending; no node fits" in out and doc["message"] in out
    rows = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  ")}
    assert rows["a-tainted-small"] == "node(s) had untolerated taint(s); Insufficient cpu"


async def test_a_placeable_pod_shows_where_it_would_go(kube_emulator: KubeEmulator, run: Explain) -> None:
    emu = kube_emulator
    emu.add_node("big", cpu="16", memory="64Gi")
    emu.add_node("small", cpu="1", memory="64Gi")
    emu.add_pod("web", cpu="2", scheduler_name=SCHEDULER)
    profile(emu, scores=[{"name": "NodeResourcesFit"}])
    doc = await run.json("default/web")
    assert doc["node"] == "big" and doc["message"] is None and doc["nodeRank"] == 1
    assert doc["rejected"] == {"small": ["Insufficient cpu"]}
    assert [score["node"] for score in doc["scores"]] == ["big"]
    assert set(doc["scores"][0]) == {"node", "total", "plugins"} and list(doc["scores"][0]["plugins"]) == [
        "NodeResourcesFit"]


async def test_a_bound_pods_scores_include_its_node(kube_emulator: KubeEmulator, run: Explain) -> None:
    emu = kube_emulator
    for name, cpu in (("big", "16"), ("mid", "8"), ("small", "2")):
        emu.add_node(name, cpu=cpu, memory="64Gi")
    # it fills `small`: held against it, its own node would refuse it
    emu.add_pod("web", cpu="2", memory="1Gi", scheduler_name=SCHEDULER, node_name="small", phase="Running")
    profile(emu)

    doc = await run.json("default/web", "--top", "1")
    assert doc["node"] == "small" and doc["bound"] is True and doc["message"] is None
    assert doc["rejected"] == {}
    assert [score["node"] for score in doc["scores"]] == ["big", "small"]  # the best, then its own
    assert (doc["nodeRank"], doc["scored"]) == (3, 3)

    code, out, _ = await run("default/web", "--top", "1")
    assert code == 0 and "bound to small (rank 3 of 3 nodes scored)" in out
    assert any(line.startswith("*") and " small " in line for line in out.splitlines())


async def test_rejected_lists_the_first_20_nodes_by_name_unless_all_nodes(
    kube_emulator: KubeEmulator, run: Explain
) -> None:
    emu = kube_emulator
    for number in reversed(range(25)):
        emu.add_node(f"node-{number:02d}", unschedulable=True)
    emu.add_pod("web", scheduler_name=SCHEDULER)
    profile(emu)

    cut = await run.json("default/web")
    assert list(cut["rejected"]) == [f"node-{n:02d}" for n in range(20)] and cut["truncated"] == 5
    assert cut["message"] == "0/25 nodes are available: 25 node(s) were unschedulable."
    everything = await run.json("default/web", "--all-nodes")
    assert list(everything["rejected"]) == [f"node-{n:02d}" for n in range(25)] and everything["truncated"] == 0

    code, out, _ = await run("default/web")
    assert code == 0 and "node-19" in out and "node-20" not in out and "... and 5 more (--all-nodes" in out


async def test_what_does_not_exist_exits_2(kube_emulator: KubeEmulator, run: Explain, tmp_path: Path) -> None:
    emu = kube_emulator
    emu.add_node("a")
    emu.add_pod("web", scheduler_name=SCHEDULER)
    emu.add_pod("other", scheduler_name="someone-else")
    emu.add_pod("stray", scheduler_name="broken-scheduler")
    profile(emu)
    profile(emu, "broken", "broken-scheduler", filters=[{"name": "NoSuchPlugin"}])

    cases = {
        ("default/nope",): 'pod "default/nope" not found',
        ("default/web", "--profile", "nope"): 'SchedulerProfile "nope" not found',
        ("default/other",): 'no SchedulerProfile serves schedulerName "someone-else" of pod default/other',
        ("web",): '"web": expected NAMESPACE/NAME',
        ("default/stray",): 'SchedulerProfile "broken" cannot be used: ',
        ("default/web", "--profile", "broken"): 'SchedulerProfile "broken" cannot be used: ',
    }
    for args, message in cases.items():
        code, out, err = await run(*args)
        assert (code, out) == (2, ""), args
        assert message in err, (args, err)
        assert "NoSuchPlugin" in err or "broken" not in message, err

    code, out, err = await run("default/web", "--kubeconfig", str(tmp_path / "missing"))
    assert (code, out) == (2, "") and f"cannot load the kubeconfig ({tmp_path / 'missing'})" in err
    for args in ([], ["default/web", "--shadow", "x"], ["--shadow", "x", "--all-nodes"]):
        code, out, err = await run(*args)
        assert (code, out) == (2, "") and err.startswith("placer explain: "), args


async def test_shadow_prints_a_shadow_profiles_counts_and_disagreements(
    kube_emulator: KubeEmulator, run: Explain
) -> None:
    emu = kube_emulator
    shadow = {
        "decisions": 1204, "same": 1100, "equal": 69, "different": 31, "unschedulable": 4,
        "agreement": "97.1% of 1,204",
        "disagreements": [
            {"pod": "default/web-1", "outcome": "different", "boundTo": "node-a", "placer": "node-b",
             "boundTotal": 210, "placerTotal": 260, "message": None, "time": "2026-11-22T10:00:00Z"},
            {"pod": "default/web-2", "outcome": "unschedulable", "boundTo": "node-c", "placer": None,
             "boundTotal": None, "placerTotal": None,
             "message": "0/3 nodes are available: 3 Insufficient cpu.", "time": "2026-11-22T10:00:05Z"},
        ],
    }
    created = profile(emu, "candidate", "candidate-scheduler", mode="Shadow", shadowOf="default-scheduler")
    emu.patch("sp", "candidate", {"status": {"shadow": shadow}}, subresource="status")
    profile(emu, "active")
    assert created["spec"]["mode"] == "Shadow"

    assert await run.json("--shadow", "candidate") == {"profile": "candidate", **shadow}
    code, out, err = await run("--shadow", "candidate")
    assert code == 0 and err == ""
    assert "shadow profile candidate: agreement 97.1% of 1,204" in out
    assert "decisions 1204  same 1100  equal 69  different 31  unschedulable 4" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("2026-")]
    assert rows[0] == ["2026-11-22T10:00:00Z", "default/web-1", "different", "node-a", "210", "node-b", "260"]
    assert rows[1][:7] == ["2026-11-22T10:00:05Z", "default/web-2", "unschedulable", "node-c", "-", "-", "-"]

    for name, message in (("active", 'SchedulerProfile "active" is not a shadow profile'),
                          ("nope", 'SchedulerProfile "nope" not found')):
        code, out, err = await run("--shadow", name)
        assert code == 2 and out == "" and message in err


async def test_node_metrics_are_read_for_node_utilization_and_their_absence_is_a_warning(
    kube_emulator: KubeEmulator, run: Explain
) -> None:
    emu = kube_emulator
    emu.add_node("busy", cpu="4")
    emu.add_node("idle", cpu="4")
    emu.set_node_metrics("busy", cpu="3900m", memory="1Gi")
    emu.set_node_metrics("idle", cpu="100m", memory="1Gi")
    emu.add_pod("web", scheduler_name=SCHEDULER)
    profile(emu, filters=[{"name": "NodeUtilization", "args": {"cpuThreshold": 0.8}}], scores=[])

    doc = await run.json("default/web")
    assert doc["rejected"] == {"busy": ["node(s) had CPU usage above threshold"]} and doc["node"] == "idle"

    emu.inject("GET", "/apis/metrics.k8s.io/", status=404, count=None)
    code, out, err = await run("default/web", "-o", "json")
    assert code == 0 and json.loads(out)["rejected"] == {}
    assert "warning: /apis/metrics.k8s.io/v1beta1/nodes is not served" in err


async def test_the_profile_serving_the_pods_scheduler_name_is_the_oldest_claimant(
    kube_emulator: KubeEmulator, run: Explain
) -> None:
    emu = kube_emulator
    emu.add_node("a")
    emu.add_pod("web", scheduler_name=SCHEDULER)
    profile(emu, "zz-older")
    profile(emu, "aa-newer")
    for stored in emu.store.iter_objects(emu.resource("sp")):  # created within one second: date them apart
        stored["metadata"]["creationTimestamp"] = (
            "2026-01-01T00:00:00Z" if stored["metadata"]["name"] == "zz-older" else "2026-06-01T00:00:00Z")

    assert (await run.json("default/web"))["profile"] == "zz-older"
    code, out, err = await run("default/web", "--profile", "aa-newer", "-o", "json")
    assert code == 0 and json.loads(out)["profile"] == "aa-newer"
    assert 'profile "aa-newer" does not serve schedulerName "placer": the older profile "zz-older" does' in err


async def test_on_a_server_without_resource_k8s_io_v1_a_pod_with_claims_is_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A v1.33 API server serves no resource.k8s.io/v1: explain warns of each absent kind and says why
    a pod naming a claim cannot go, as the operator does (not that its claim is missing)."""
    async with KubeEmulator(kube_version="1.33") as emu:
        emu.add_node("n1")
        profile(emu)
        emu.add_pod("p", scheduler_name=SCHEDULER,
                    spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]})
        code, out, err = await Explain(emu, emu.write_kubeconfig(tmp_path / "kc"), capsys)("default/p", "-o", "json")
    assert code == 0, err
    explained = json.loads(out)
    assert explained["node"] is None
    assert explained["message"] == (
        '0/1 nodes are available: pod "default/p": its ResourceClaims cannot be read: this API server does not '
        "serve resource.k8s.io/v1 (Kubernetes v1.34 or later).")
    assert [line for line in err.splitlines() if "resource.k8s.io" in line] == [
        f"warning: /apis/resource.k8s.io/v1/{plural} is not served by this API server: none are used"
        for plural in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")]


async def test_a_pod_waiting_for_binding_conditions_and_a_shared_device(
    kube_emulator: KubeEmulator, run: Explain
) -> None:
    """A pod whose claim is allocated and reserved for it, its device's binding condition not True
    yet: explain says which condition it waits for and since when; a share of a GPU shows the
    device's memory used (every share) and left."""
    emu = kube_emulator
    emu.add_node("n1")
    profile(emu)
    claims = "resource.k8s.io/v1/resourceclaims"
    allocated_at = time.time() - 60
    stamp, reported = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(allocated_at + d)) for d in (0, 5))
    deadline = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(allocated_at) + 600))
    pinned = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    emu.create("resource.k8s.io/v1/deviceclasses", {"metadata": {"name": "fabric"}, "spec": {}})
    emu.create("resource.k8s.io/v1/resourceslices", {"metadata": {"name": "gpus"}, "spec": {
        "driver": "gpu.example.com", "nodeName": "n1",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "80Gi"}}}]}})
    pod = emu.add_pod("job", scheduler_name=SCHEDULER, spec={"resourceClaims": [
        {"name": "acc", "resourceClaimName": "accel"}, {"name": "mem", "resourceClaimName": "mem"}]})
    mine = [{"resource": "pods", "name": "job", "uid": pod["metadata"]["uid"]}]
    emu.create(claims, {"metadata": {"name": "accel", "namespace": "default"},
                        "spec": {"devices": {"requests": [{"name": "acc", "exactly": {"deviceClassName": "fabric"}}]}},
                        "status": {"reservedFor": mine, "allocation": {"devices": {"results": [{
                            "request": "acc", "driver": "fabric.example.com", "pool": "fabric", "device": "accel-0",
                            "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}]},
                            "nodeSelector": pinned, "allocationTimestamp": stamp},
                            "devices": [{"driver": "fabric.example.com", "pool": "fabric", "device": "accel-0",
                                         "conditions": [{"type": "Attached", "status": "False", "reason": "Wiring",
                                                         "message": "", "lastTransitionTime": reported}]}]}})

    def share(name: str, uid: str, amount: str, reserved: list[dict[str, str]]) -> None:
        emu.create(claims, {"metadata": {"name": name, "namespace": "default"},
                            "spec": {"devices": {"requests": [
                                {"name": "mem", "exactly": {"deviceClassName": "fabric"}}]}},
                            "status": {"reservedFor": reserved, "allocation": {"devices": {"results": [{
                                "request": "mem", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0",
                                "shareID": uid, "consumedCapacity": {"memory": amount}}]}, "nodeSelector": pinned}}})

    share("mem", "1b4e28ba-2fa1-11d2-883f-b9a761bde3fb", "30Gi", mine)
    share("other", "6fa459ea-ee8a-3ca4-894e-db77e160355e", "20Gi", [])

    doc = await run.json("default/job")
    assert doc["node"] == "n1" and doc["message"] is None
    accel, memory = doc["devices"]
    assert accel["binding"] == {
        "ready": False, "pending": ["Attached"], "failed": [], "since": stamp, "timeout": deadline, "timedOut": False,
        "reported": [{"type": "Attached", "status": "False", "reason": "Wiring", "message": "", "since": reported}]}
    assert memory["consumedCapacity"] == {"memory": "30Gi"}
    assert memory["capacity"] == {"memory": {"used": "50Gi", "left": "30Gi"}}
    code, out, _ = await run("default/job")
    assert code == 0
    assert (f"  default/accel acc: fabric.example.com/fabric/accel-0, waiting for binding conditions Attached since "
            f"{stamp} (times out at {deadline})") in out.splitlines()
    assert ("  default/mem mem: gpu.example.com/n1/gpu-0, share of 30Gi memory (50Gi used, 30Gi left)"
            in out.splitlines())
