"""A shadow profile end to end (API.md §5): the operator against the emulator with the real CRD, a
fake "default-scheduler" binding its pods round-robin through the binding endpoint, and the
shadow's outcomes checked against the engine's own decision on the same state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import yaml
from placer.controller.profiles.shadow import ShadowRecorder, decision_profile
from placer.engine.cluster import ClusterState
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import compile_profile
from placer.engine.runtime import Scheduler

from tests.controller.helpers import Launch, OperatorThread, bound_node, events_about, until
from tests.kubeemu import KubeEmulator

ROOT = Path(__file__).resolve().parents[2]
TARGET = "default-scheduler"
NODES = {"n0": ("2", "4Gi"), "n1": ("4", "8Gi"), "n2": ("8", "16Gi")}
SHADOW_SPEC = {"schedulerName": "shadow-scheduler", "mode": "Shadow", "shadowOf": TARGET}
# (name, cpu, memory): varied, so LeastAllocated's choice moves from node to node
SHADOWED = [("s0", "1", "1Gi"), ("s1", "500m", "512Mi"), ("s2", "2", "2Gi"), ("s3", "1500m", "3Gi"),
            ("s4", "250m", "256Mi"), ("s5", "1", "4Gi"), ("s6", "3", "1Gi"), ("s7", "700m", "700Mi"),
            ("s8", "64", "1Gi")]  # s8 fits nowhere: Placer finds no node, the fake binds it anyway


class FakeDefaultScheduler:
    """Binds pods round-robin over the nodes by POSTing pods/binding, as a scheduler does."""

    def __init__(self, emu: KubeEmulator, nodes: list[str]) -> None:
        self.emu, self.nodes, self.count = emu, nodes, 0

    async def bind(self, name: str, namespace: str = "default") -> str:
        node = self.nodes[self.count % len(self.nodes)]
        self.count += 1
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        async with aiohttp.ClientSession() as session, session.post(
            f"{self.emu.url}/api/v1/namespaces/{namespace}/pods/{name}/binding", json=body
        ) as response:
            assert response.status == 201, await response.text()
        return node


def expected_outcome(emu: KubeEmulator, name: str, bound_to: str) -> tuple[str, int | None]:
    """What the shadow must report, from the engine on the emulator's state: every node, every
    bound pod, and the pod as it was created."""
    cluster = ClusterState()
    for raw in emu.list("nodes"):
        cluster.upsert_node(parse_node(raw))
    for raw in emu.list("pods"):
        if (raw.get("spec") or {}).get("nodeName"):
            cluster.add_pod(parse_pod(raw))
    profile = decision_profile(compile_profile("shadow", SHADOW_SPEC))
    decision = Scheduler().schedule(parse_pod(emu.get("pods", name)), profile, cluster, top=0)
    if decision.node is None or decision.weighed is None:
        return "unschedulable", None
    totals = {cluster.names[slot]: int(total) for slot, total in zip(decision.weighed.slots,
                                                                      decision.weighed.totals, strict=True)}
    if bound_to == decision.node:
        return "same", totals[bound_to]
    if totals.get(bound_to) == totals[decision.node]:
        return "equal", totals[bound_to]
    return "different", totals.get(bound_to)


def recorder_of(operator: OperatorThread) -> ShadowRecorder:
    assert operator.state is not None
    return operator.state.shadows.recorders["shadow"]


def shadow_status(emu: KubeEmulator) -> dict[str, Any]:
    found = emu.get("sp", "shadow")
    return ((found or {}).get("status") or {}).get("shadow") or {}


async def test_shadow_reports_where_the_engine_differs_and_writes_nothing_to_pods(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    emu.install_crd(yaml.safe_load((ROOT / "crds" / "schedulerprofiles.placer.dev.yaml").read_text()))
    for name, (cpu, memory) in NODES.items():
        emu.add_node(name, cpu=cpu, memory=memory)
    emu.create("sp", {"metadata": {"name": "active"}, "spec": {"schedulerName": "placer"}})
    emu.create("sp", {"metadata": {"name": "shadow"}, "spec": SHADOW_SPEC})
    operator = await launch(shadow_status_interval=0.2)
    await until(lambda: operator.state is not None and "shadow" in operator.state.shadows.recorders, timeout=10)
    recorder = recorder_of(operator)
    fake = FakeDefaultScheduler(emu, sorted(NODES))

    emu.add_pod("mine", scheduler_name="placer", cpu="100m")  # the active profile works meanwhile
    emu.add_pod("orphan", scheduler_name="shadow-scheduler")  # a shadow's own name owns no pods
    emu.add_pod("gone", scheduler_name=TARGET)  # deleted before any binding: records nothing
    await until(lambda: "default/gone" in recorder.choices, timeout=10)
    emu.delete("pods", "gone")

    expected: dict[str, tuple[str, int | None]] = {}
    for count, (name, cpu, memory) in enumerate(SHADOWED, start=1):
        emu.add_pod(name, scheduler_name=TARGET, cpu=cpu, memory=memory)
        await until(lambda name=name: f"default/{name}" in recorder.choices, timeout=10)
        node = fake.nodes[fake.count % len(fake.nodes)]
        expected[name] = expected_outcome(emu, name, node)  # the state the shadow decided on
        assert await fake.bind(name) == node
        await until(lambda count=count: recorder.counts["decisions"] == count, timeout=10)

    outcomes = [outcome for outcome, _ in expected.values()]
    assert {"same", "different", "unschedulable"} <= set(outcomes), outcomes  # the test means something
    counts = {key: outcomes.count(key) for key in ("same", "equal", "different", "unschedulable")}
    await until(lambda: shadow_status(emu).get("decisions") == len(SHADOWED), timeout=10)
    status = shadow_status(emu)
    assert {key: status[key] for key in counts} == counts
    agreed = counts["same"] + counts["equal"]
    assert status["agreement"] == f"{agreed * 1000 // len(SHADOWED) / 10:.1f}% of {len(SHADOWED)}"
    disagreements = {d["pod"]: d for d in status["disagreements"]}
    assert set(disagreements) == {f"default/{n}" for n, (o, _) in expected.items() if o in ("different",
                                                                                           "unschedulable")}
    for name, (outcome, bound_total) in expected.items():
        entry = disagreements.get(f"default/{name}")
        if entry is not None:
            assert (entry["outcome"], entry["boundTo"], entry["boundTotal"]) == (
                outcome, bound_node(emu, name), bound_total)
    assert disagreements["default/s8"]["placer"] is None
    message = disagreements["default/s8"]["message"]
    assert message.startswith("0/3 nodes are available: ") and "3 Insufficient cpu" in message
    ready = emu.get("sp", "shadow")["status"]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("True", "Loaded")
    assert operator.state is not None and operator.state.metrics.shadow_decisions.get(
        profile="shadow", outcome="same") == counts["same"]

    # the active profile scheduled its pod; the shadow bound, reported and patched nothing
    await until(lambda: bound_node(emu, "mine") is not None, timeout=10)
    shadowed = [name for name, _, _ in SHADOWED]
    assert [b.key for b in emu.bindings if b.key != "default/mine"] == [f"default/{n}" for n in shadowed]
    for name in [*shadowed, "gone", "orphan"]:
        assert events_about(emu, name) == [], name
        writes = [r for r in emu.requests_matching(path=f"/pods/{name}(/|$)") if r.method != "GET"]
        assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in writes] == (
            [("POST", "binding")] if name in shadowed else []), name
    assert bound_node(emu, "orphan") is None
    assert "Unschedulable" not in str(emu.get("pods", "orphan").get("status"))
