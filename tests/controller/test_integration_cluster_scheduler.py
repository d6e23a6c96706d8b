"""Placer as the cluster's only scheduler (a profile owning `default-scheduler`), against the emulator:
the pods kube-scheduler places in a cluster are placed as it places them — pods that set no
schedulerName, a DaemonSet controller's pods (`matchFields metadata.name`, its tolerations, a cordoned
node), `system-node-critical` pods preempting, a node agent tolerating everything on a node not Ready
yet — and static pods' mirrors are left alone (they come bound) but counted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tests.controller.helpers import OperatorThread, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
NODE_CRITICAL = 2000001000


def node_of(emu: KubeEmulator, name: str, namespace: str = "default") -> str | None:
    return ((emu.get("pods", name, namespace) or {}).get("spec") or {}).get("nodeName")


def events_of(emu: KubeEmulator, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in emu.list("events.k8s.io/v1/events")
            if (e.get("regarding") or {}).get("name") == name and e["reason"] == reason]


def the_clusters_profile(emu: KubeEmulator) -> None:
    emu.create("sp", {"metadata": {"name": "default-scheduler"}, "spec": {"schedulerName": "default-scheduler"}})


def daemon_pod(emu: KubeEmulator, name: str, node: str, owner: dict[str, Any]) -> None:
    """A pod as the DaemonSet controller makes it: pinned by `matchFields metadata.name`, with the
    tolerations it adds (`AddOrUpdateDaemonPodTolerations`), no schedulerName."""
    tolerations = [{"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect} for key, effect in (
        ("not-ready", "NoExecute"), ("unreachable", "NoExecute"), ("disk-pressure", "NoSchedule"),
        ("memory-pressure", "NoSchedule"), ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule"))]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    emu.create("pods", {"metadata": {"name": name, "namespace": "default", "labels": {"app": "agent"},
                                     "ownerReferences": [emu.owner_reference(owner)]},
                        "spec": {"containers": [{"name": "c", "image": "agent",
                                                 "resources": {"requests": {"cpu": "100m"}}}],
                                 "tolerations": tolerations, "affinity": affinity}})


async def test_pods_without_a_scheduler_name_and_a_daemonsets_pods(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    for name in ("n1", "n2", "n3"):
        emu.add_node(name, cpu="2")
    emu.patch("nodes", "n3", {"spec": {"unschedulable": True, "taints": [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}})
    the_clusters_profile(emu)
    await launch()
    emu.create("pods", {"metadata": {"name": "plain", "namespace": "default"}, "spec": {
        "containers": [{"name": "c", "image": "web", "resources": {"requests": {"cpu": "100m"}}}]}})
    assert emu.get("pods", "plain")["spec"]["schedulerName"] == "default-scheduler"  # the API server's default
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "uid": "uid-agent"}}
    for node in ("n1", "n2", "n3"):
        daemon_pod(emu, f"agent-{node}", node, owner)
    await until(lambda: node_of(emu, "plain") and all(node_of(emu, f"agent-{n}") for n in ("n1", "n2", "n3")))
    assert node_of(emu, "plain") in ("n1", "n2")  # not the cordoned node
    assert {n: node_of(emu, f"agent-{n}") for n in ("n1", "n2", "n3")} == {"n1": "n1", "n2": "n2", "n3": "n3"}
    await until(lambda: events_of(emu, "agent-n3", "Scheduled"))  # written after the bind's answer
    [event] = events_of(emu, "agent-n3", "Scheduled")
    assert event["note"] == "Successfully assigned default/agent-n3 to n3"
    assert event["reportingInstance"].startswith("default-scheduler-")


async def test_a_node_critical_pod_preempts(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    assert emu.get("priorityclasses", "system-node-critical")["value"] == NODE_CRITICAL  # the server's own
    emu.add_priority_class("low", 100)
    emu.add_node("n1", cpu="1")
    the_clusters_profile(emu)
    for index in range(2):
        emu.add_pod(f"low-{index}", cpu="500m", node_name="n1", priority_class="low", phase="Running")
    await launch()
    emu.add_pod("critical", "kube-system", cpu="500m", priority_class="system-node-critical")
    await until(lambda: emu.get("pods", "critical", "kube-system")["status"].get("nominatedNodeName") == "n1"
                or node_of(emu, "critical", "kube-system"))
    await until(lambda: any(emu.get("pods", f"low-{i}") is None for i in range(2)))
    victims = [f"low-{i}" for i in range(2) if emu.get("pods", f"low-{i}") is None]
    assert len(victims) == 1
    await until(lambda: events_of(emu, victims[0], "Preempted"))  # (posted by the reporter's writer)
    assert events_of(emu, victims[0], "Preempted")[0]["note"] == "Preempted by kube-system/critical on node n1"
    await until(lambda: node_of(emu, "critical", "kube-system") == "n1")


async def test_a_pod_tolerating_not_ready_goes_to_a_node_not_ready_yet(kube_emulator: KubeEmulator,
                                                                       launch: Start) -> None:
    """A CNI agent's pod tolerates everything: kube-scheduler places it on a new node whose Ready is
    still False (the node lifecycle controller's not-ready:NoSchedule taint tolerated), which it makes
    Ready; a pod tolerating only NoExecute (what DaemonSet pods get) waits."""
    emu = kube_emulator
    emu.add_node("new", cpu="2", ready=False, taints=[
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])
    the_clusters_profile(emu)
    await launch()
    pinned = {"nodeSelector": {"kubernetes.io/hostname": "new"}}
    emu.add_pod("cni", spec={**pinned, "tolerations": [{"operator": "Exists"}]})
    emu.add_pod("daemon", spec={**pinned, "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]})
    await until(lambda: node_of(emu, "cni") == "new" and events_of(emu, "daemon", "FailedScheduling"))
    assert node_of(emu, "daemon") is None
    assert events_of(emu, "daemon", "FailedScheduling")[0]["note"].startswith(
        "0/1 nodes are available: 1 node(s) were not ready.")


async def test_static_pods_mirrors_are_left_alone_and_counted(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("cp", cpu="2")
    the_clusters_profile(emu)
    emu.add_pod("kube-apiserver-cp", "kube-system", cpu="1500m", node_name="cp", phase="Running",
                metadata={"annotations": {"kubernetes.io/config.mirror": "0123abcd",
                                          "kubernetes.io/config.source": "file"}})
    await launch()
    emu.add_pod("web", cpu="1")
    await until(lambda: events_of(emu, "web", "FailedScheduling"))
    assert events_of(emu, "web", "FailedScheduling")[0]["note"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu.")
    await asyncio.sleep(0.3)
    mirror = emu.get("pods", "kube-apiserver-cp", "kube-system")
    assert [c["type"] for c in (mirror.get("status") or {}).get("conditions") or []] == []  # no condition written
    assert not events_of(emu, "kube-apiserver-cp", "Scheduled")
    assert not emu.requests_matching("POST", r"/pods/kube-apiserver-cp/binding$")
