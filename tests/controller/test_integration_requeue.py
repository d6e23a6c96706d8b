"""Queueing hints over real HTTP against the emulator: a pending pod is bound as soon as a change
kube-scheduler v1.36's hints say may help it comes (its own new toleration, its gates removed, a
placed pod relabelled or deleted, a node relabelled, uncordoned, untainted or added), not at the
end of its backoff.

The operator runs with a 2 s initial backoff, so that what the change does is told apart from the
retry the backoff would bring anyway: each pod is bound well within 1 s of the change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.controller.helpers import Launch, bound_node, until
from tests.kubeemu import KubeEmulator

Step = Callable[[KubeEmulator], object]

TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
HOSTNAME = "kubernetes.io/hostname"


def _affinity(kind: str, app: str) -> dict[str, object]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


@dataclass(frozen=True)
class Case:
    name: str
    setup: Step  # the cluster, then the pending pod `p` that cannot go anywhere yet
    change: Step  # what should bring it at once
    gated: bool = False  # `p` is gated: never attempted before the change


def _pod(**spec: object) -> Step:
    return lambda emu: emu.add_pod("p", scheduler_name="placer", spec=dict(spec))


def _then(*steps: Step) -> Step:
    def run(emu: KubeEmulator) -> None:
        for step in steps:
            step(emu)
    return run


def _node(**kwargs: object) -> Step:
    return lambda emu: emu.add_node("n1", **kwargs)  # type: ignore[arg-type]


def _peer(labels: dict[str, str], cpu: str = "100m") -> Step:
    return lambda emu: emu.add_pod("peer", node_name="n1", labels=labels, cpu=cpu, phase="Running")


CASES = [
    Case("toleration added", _then(_node(taints=[TAINT]), _pod()),
         lambda emu: emu.patch("pods", "p", {"spec": {"tolerations": [
             {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}, subresource=None)),
    Case("scheduling gates removed",
         _then(_node(), lambda emu: emu.add_pod("p", scheduler_name="placer", scheduling_gates=["wait"])),
         lambda emu: emu.remove_scheduling_gates("p"), gated=True),
    Case("placed pod labelled into its affinity",
         _then(_node(), _peer({"app": "x"}), _pod(**_affinity("podAffinity", "web"))),
         lambda emu: emu.patch("pods", "peer", {"metadata": {"labels": {"app": "web"}}}, subresource=None)),
    Case("placed pod labelled out of its anti-affinity",
         _then(_node(), _peer({"app": "db"}), _pod(**_affinity("podAntiAffinity", "db"))),
         lambda emu: emu.patch("pods", "peer", {"metadata": {"labels": {"app": "x"}}}, subresource=None)),
    Case("placed pod of its anti-affinity deleted",
         _then(_node(), _peer({"app": "db"}), _pod(**_affinity("podAntiAffinity", "db"))),
         lambda emu: emu.delete("pods", "peer")),
    Case("placed pod holding the cpu deleted",
         _then(_node(cpu="1"), _peer({"app": "hog"}, cpu="1"),
               lambda emu: emu.add_pod("p", scheduler_name="placer", cpu="500m")),
         lambda emu: emu.delete("pods", "peer")),
    Case("node labelled", _then(_node(), _pod(nodeSelector={"disk": "ssd"})),
         lambda emu: emu.patch("nodes", "n1", {"metadata": {"labels": {"disk": "ssd"}}})),
    Case("node uncordoned", _then(_node(unschedulable=True), _pod()),
         lambda emu: emu.patch("nodes", "n1", {"spec": {"unschedulable": False}})),
    Case("node untainted", _then(_node(taints=[TAINT]), _pod()),
         lambda emu: emu.patch("nodes", "n1", {"spec": {"taints": None}})),
    Case("node added", _then(_node(unschedulable=True), _pod()), lambda emu: emu.add_node("n2")),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_a_change_that_may_help_binds_the_pending_pod_at_once(
    kube_emulator: KubeEmulator, launch: Launch, case: Case
) -> None:
    emu = kube_emulator
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    case.setup(emu)
    operator = await launch(initial_backoff=2.0)
    assert operator.state is not None
    queue = operator.state.queue
    if case.gated:
        await until(lambda: "default/p" in operator.state.cache.gated)  # type: ignore[union-attr]
    else:
        await until(lambda: getattr(queue.entry("default/p"), "state", None) == "waiting")  # failed once
    await asyncio.sleep(0.05)  # (its FailedScheduling is being written: not what this is about)
    assert bound_node(emu, "p") is None
    changed = time.monotonic()
    case.change(emu)
    await until(lambda: bound_node(emu, "p"), timeout=5)
    took = time.monotonic() - changed
    assert took < 1.0, f"bound {took:.2f}s after the change ({case.name}): its backoff, not the change, brought it"
