"""Kubelet rejections, the emulator playing the kubelet: a pod Placer bound goes `Failed` with the
kubelet's `OutOfcpu` (the kubelet counts a pod Placer's watch does not show); it is reported (an event
naming the node and the reason, a metric) and the controller's replacement does not go back to the
refusing node until the settle time has passed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tests.controller.helpers import OperatorThread, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
NS = "web"


def node_of(emu: KubeEmulator, name: str) -> str | None:
    pod = emu.get("pods", name, NS)
    return None if pod is None else pod["spec"].get("nodeName")


def events_of(emu: KubeEmulator, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in emu.list("events.k8s.io/v1/events")
            if (e.get("regarding") or {}).get("name") == name and e["reason"] == reason]


def reject(emu: KubeEmulator, name: str, reason: str, message: str) -> None:
    """What a kubelet's `rejectPod` writes: its status replaces the conditions it owns (PodScheduled
    among them) with none."""
    emu.patch("pods", name, {"status": {"phase": "Failed", "reason": reason, "conditions": None,
                                        "message": "Pod was rejected: " + message}}, NS)


def replica(emu: KubeEmulator, name: str, owner: dict[str, Any], cpu: str = "1") -> None:
    emu.add_pod(name, NS, cpu=cpu, scheduler_name="placer", owner=owner, labels={"app": "web"})


async def test_a_refused_pods_replacement_goes_elsewhere_until_the_view_settles(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_namespace(NS)
    emu.add_namespace("hidden")
    emu.add_node("a", cpu="4")
    emu.add_node("b", cpu="4")
    # a pod the kubelet of `a` runs and Placer never sees (it watches namespace `web` only)
    emu.add_pod("invisible", "hidden", cpu="3500m", node_name="a", phase="Running")
    owner = emu.add_replicaset("web", NS, selector={"app": "web"}, replicas=1)
    emu.create("sp", {"metadata": {"name": "web"}, "spec": {"schedulerName": "placer", "scores": [
        {"name": "PreferNode", "weight": 100, "args": {"nodes": ["a"]}}]}})
    operator = await launch(namespaces=(NS,), kubelet_settle=1.5)
    replica(emu, "web-1", owner)
    await until(lambda: node_of(emu, "web-1"))
    assert node_of(emu, "web-1") == "a"  # Placer's view: 4 cpu free on a
    reject(emu, "web-1", "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1000, used: 3500, "
                                     "capacity: 4000")
    await until(lambda: events_of(emu, "web-1", "RejectedByKubelet"))
    [event] = events_of(emu, "web-1", "RejectedByKubelet")
    assert event["type"] == "Warning" and event["reportingController"] == "placer.dev/scheduler"
    assert event["note"] == ("Rejected by the kubelet on node a: OutOfcpu: Node didn't have enough resource: cpu, "
                             "requested: 1000, used: 3500, capacity: 4000")
    state = operator.state
    assert state is not None
    assert state.metrics.kubelet_rejections.get(profile="web", reason="OutOfcpu") == 1
    assert "placer_kubelet_withheld_nodes{kind=\"amounts\"} 1" in state.metrics.render()
    # the ReplicaSet's replacement: the preferred node refuses it, so it goes to b
    replica(emu, "web-2", owner)
    await until(lambda: node_of(emu, "web-2"))
    assert node_of(emu, "web-2") == "b"
    # a pod that fits what the kubelet left free may still go to a
    replica(emu, "small", owner, cpu="400m")
    await until(lambda: node_of(emu, "small"))
    assert node_of(emu, "small") == "a"
    # the settle time passes: a is counted from the watch alone again
    await until(lambda: "placer_kubelet_withheld_nodes{kind=\"amounts\"} 0" in state.metrics.render(), timeout=5)
    replica(emu, "web-3", owner)
    await until(lambda: node_of(emu, "web-3"))
    assert node_of(emu, "web-3") == "a"
    assert emu.double_bindings() == []


async def test_a_refusal_the_watch_explains_is_reported_and_withholds_nothing(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    """Two schedulers' race: the other scheduler's pod is in Placer's view by the time the kubelet's
    refusal arrives; a refusal of a pod Placer did not bind (another scheduler's, or one created with
    its nodeName) is not its to report."""
    emu = kube_emulator
    emu.add_namespace(NS)
    emu.add_node("a", cpu="4")
    emu.add_node("b", cpu="4")
    emu.create("sp", {"metadata": {"name": "web"}, "spec": {"schedulerName": "placer", "scores": [
        {"name": "PreferNode", "weight": 100, "args": {"nodes": ["a"]}}]}})
    operator = await launch()
    emu.add_pod("web-1", NS, cpu="1", scheduler_name="placer")
    await until(lambda: node_of(emu, "web-1") == "a")
    emu.add_pod("theirs", NS, cpu="3500m", node_name="a", scheduler_name="default-scheduler", phase="Running")
    emu.add_pod("kube-1", NS, cpu="1", node_name="b", scheduler_name="default-scheduler")
    emu.add_pod("forced", NS, cpu="3500m", node_name="b", scheduler_name="placer")  # its nodeName set: bound by no one
    state = operator.state
    assert state is not None
    await until(lambda: state.cluster.own_requested("a", "cpu") == 4500 and "web/forced" in state.cluster.pods)
    reject(emu, "web-1", "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1000, used: 3500, "
                                     "capacity: 4000")
    reject(emu, "forced", "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3500, used: 1000, "
                                      "capacity: 4000")
    await until(lambda: events_of(emu, "web-1", "RejectedByKubelet") and "web/forced" not in state.cluster.pods)
    await asyncio.sleep(0.3)
    assert state.cluster.withheld == {}
    reject(emu, "kube-1", "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                                          "affinity/selector")
    await until(lambda: "b" in state.cluster.held)  # counted on every replica, reported for its own pods only
    await asyncio.sleep(0.3)
    assert events_of(emu, "kube-1", "RejectedByKubelet") == [] and events_of(emu, "forced", "RejectedByKubelet") == []
    assert state.metrics.kubelet_rejections.get(profile="web", reason="OutOfcpu") == 1
    assert state.metrics.kubelet_rejections.get(profile="web", reason="NodeAffinity") == 0
    emu.add_pod("web-2", NS, cpu="400m", scheduler_name="placer")
    await until(lambda: node_of(emu, "web-2"))
    assert node_of(emu, "web-2") == "a"  # b is held, a has room in Placer's (right) view
