"""NodeDeclaredFeatures through the operator, over real HTTP against the emulator (a v1.36 API
server): a pod that needs a node feature no node declares gets kube's FailedScheduling message and
is bound promptly once a node's `status.declaredFeatures` lists the feature; other pods are not held
back meanwhile."""

from __future__ import annotations

import time

from tests.controller.helpers import Launch, assert_sound, bound_node, events_about, until, watching
from tests.kubeemu import KubeEmulator

NEEDS_FEATURE = {"hostNetwork": True, "hostUsers": False}
# kube's FitError, then DefaultPreemption's sentence: eviction cannot help (UnschedulableAndUnresolvable)
MESSAGE = ("0/2 nodes are available: 2 node(s) didn't match Pod's required features. "
           "no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
           "scheduling.")


async def test_a_pod_waits_for_a_node_declaring_its_feature(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    emu.add_node("old")
    emu.add_node("other", declared_features=["RestartAllContainersOnContainerExits"])
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    emu.add_pod("userns", scheduler_name="placer", spec=NEEDS_FEATURE)
    assert emu.get("pods", "userns")["spec"]["hostUsers"] is False  # a v1.36 server keeps the field
    await launch()
    await until(lambda: watching(emu), timeout=10)
    failed = await until(lambda: events_about(emu, "userns", "FailedScheduling"), timeout=5)
    assert failed[-1]["note"] == MESSAGE
    emu.add_pod("plain", scheduler_name="placer")  # needs nothing: placed meanwhile
    await until(lambda: bound_node(emu, "plain"), timeout=5)
    assert bound_node(emu, "userns") is None

    upgraded = time.monotonic()
    emu.patch("nodes", "old", {"status": {"declaredFeatures": ["UserNamespacesHostNetworkSupport"]}},
              subresource="status")
    await until(lambda: bound_node(emu, "userns"), timeout=5)
    assert time.monotonic() - upgraded < 3.0, "a node update declaring the feature wakes the pod"
    assert bound_node(emu, "userns") == "old"
    assert_sound(emu, ["userns", "plain"])
