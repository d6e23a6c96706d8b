"""`placer explain` for a pod of a PodGroup, against the emulated API server (PodGroups served as
CRDs): the pod is explained as its group is decided — every pending member together, placed whole
or not at all — and the JSON says which group and whether it is placed; PodGroups not served (404)
leave explain as it was."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from placer.cli import main

from tests.kubeemu import KubeEmulator

SCHEDULER = "placer"


def podgroup_crd(group: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
                 "versions": [{"name": version, "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


async def explain_json(kube_emulator: KubeEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       *args: str) -> dict[str, Any]:
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    code = await asyncio.to_thread(main, ["explain", "--kubeconfig", str(kubeconfig), *args, "-o", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    writes = sorted({f"{r.method} {r.path}" for r in kube_emulator.requests if r.method != "GET"})
    assert writes == [], f"explain must only read, it sent {writes}"
    return json.loads(captured.out)


def setup(emu: KubeEmulator, min_count: int, cpus: list[str]) -> None:
    emu.install_crd(podgroup_crd("scheduling.k8s.io", "v1alpha2"))
    emu.create("scheduling.k8s.io/v1alpha2/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "job"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}, namespace="default")
    for i, cpu in enumerate(cpus):
        emu.add_pod(f"w{i}", cpu=cpu, scheduler_name=SCHEDULER, spec={"schedulingGroup": {"podGroupName": "job"}},
                    metadata={"creationTimestamp": f"2026-01-01T00:0{i}:00Z"})
    emu.create("sp", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "main"},
                      "spec": {"schedulerName": SCHEDULER}})


async def test_a_gang_member_that_fits_with_its_gang(kube_emulator: KubeEmulator, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        kube_emulator.add_node(name, cpu="4")
    setup(kube_emulator, 2, ["3", "3"])
    doc = await explain_json(kube_emulator, tmp_path, capsys, "default/w1")
    assert doc["node"] in ("a", "b") and doc["message"] is None
    assert doc["group"] == {"name": "default/job", "placed": True, "outcome": "placed", "message": None}


async def test_a_gang_member_whose_gang_does_not_fit(kube_emulator: KubeEmulator, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Alone the pod fits; with its gang (three 3-cpu pods, two nodes) none is placed."""
    for name in ("a", "b"):
        kube_emulator.add_node(name, cpu="4")
    setup(kube_emulator, 3, ["3", "3", "3"])
    doc = await explain_json(kube_emulator, tmp_path, capsys, "default/w0")
    assert doc["node"] is None and doc["scores"] == []
    assert doc["message"] == ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, "
                              "one or more plugins asked to wait and no plugin rejected pod")
    assert doc["group"]["placed"] is False and doc["group"]["outcome"] == "unschedulable"
    last = await explain_json(kube_emulator, tmp_path, capsys, "default/w2")
    assert last["message"] == "0/2 nodes are available: 2 Insufficient cpu."


async def test_a_member_waiting_for_its_quorum(kube_emulator: KubeEmulator, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    kube_emulator.add_node("a", cpu="4")
    setup(kube_emulator, 3, ["1"])
    doc = await explain_json(kube_emulator, tmp_path, capsys, "default/w0")
    assert doc["node"] is None
    assert doc["message"] == "waiting for minCount pods from a gang to appear in scheduling queue"
    assert doc["group"]["outcome"] == "waiting"


async def test_podgroups_not_served(kube_emulator: KubeEmulator, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """No PodGroup API: a member's group is missing, so it waits for it, as kube-scheduler's does."""
    kube_emulator.add_node("a", cpu="4")
    kube_emulator.add_pod("w0", cpu="1", scheduler_name=SCHEDULER, spec={"schedulingGroup": {"podGroupName": "job"}})
    kube_emulator.create("sp", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                "metadata": {"name": "main"}, "spec": {"schedulerName": SCHEDULER}})
    doc = await explain_json(kube_emulator, tmp_path, capsys, "default/w0")
    assert doc["message"] == 'waiting for pods\'s pod group "job" to appear in scheduling queue'
    assert doc["group"] == {"name": "default/job", "placed": False, "outcome": "waiting", "message": doc["message"]}


async def test_a_topology_gang_shows_every_placement_tried(kube_emulator: KubeEmulator, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """TopologyPlacementGenerator in the profile: the group is tried in each rack, and explain says
    where each member did not fit and which rack won, with its score."""
    for name, rack, cpu in (("a1", "rack-a", "4"), ("b1", "rack-b", "6"), ("c1", "rack-c", "2")):
        kube_emulator.add_node(name, cpu=cpu, labels={"example.com/rack": rack})
    kube_emulator.install_crd(podgroup_crd("scheduling.k8s.io", "v1alpha2"))
    kube_emulator.create("scheduling.k8s.io/v1alpha2/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "job"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                 "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]}}}, namespace="default")
    for i in range(5):
        kube_emulator.add_pod(f"w{i}", cpu="1", scheduler_name=SCHEDULER,
                              spec={"schedulingGroup": {"podGroupName": "job"}},
                              metadata={"creationTimestamp": f"2026-01-01T00:0{i}:00Z"})
    kube_emulator.create("sp", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                "metadata": {"name": "main"}, "spec": {
                                    "schedulerName": SCHEDULER,
                                    "filters": [{"name": "NodeResourcesFit"}, {"name": "TopologyPlacementGenerator"}],
                                    "scores": [{"name": "NodeResourcesFit"}, {"name": "PodGroupPodsCount"}]}})
    doc = await explain_json(kube_emulator, tmp_path, capsys, "default/w0")
    group = doc["group"]
    assert doc["node"] == "b1" and group["placement"] == "rack-b" and group["topologyKey"] == "example.com/rack"
    tried = {t["domain"]: t for t in group["placements"]}
    assert [(d, t["placed"], t["fits"], t["chosen"]) for d, t in tried.items()] == [
        ("rack-a", 4, True, False), ("rack-b", 5, True, True), ("rack-c", 2, True, False)]
    assert tried["rack-b"]["scores"]["PodGroupPodsCount"] == 100
    assert tried["rack-a"]["scores"]["PodGroupPodsCount"] == 80
    assert tried["rack-c"]["misses"] == {f"default/w{i}": "0/1 nodes are available: 1 Insufficient cpu."
                                         for i in (2, 3, 4)}
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    code = await asyncio.to_thread(main, ["explain", "--kubeconfig", str(kubeconfig), "default/w0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "placements (example.com/rack): 3 tried, chosen 'rack-b'" in out
    assert "  rack-c: 1 node, 2/5 fit, score" in out and "    default/w4: 0/1 nodes are available" in out
    assert "  <- chosen" in out.split("rack-b:")[1].splitlines()[0]
