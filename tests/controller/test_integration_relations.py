"""Pods' relations end to end: the operator against the emulator, asserting what the API server holds.

Inter-pod anti-affinity and topology spread as kube-scheduler enforces them, the prompt retries
when a pod leaves or a node or namespace is relabelled, and a malformed relation reported, not
crashing the loop. The profile is the default one (no lists), as most users run it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from tests.controller.helpers import OperatorThread, assert_sound, bound_node, events_about, until
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
ZONE = "topology.kubernetes.io/zone"
ANTI_AFFINITY_MESSAGE = "0/10 nodes are available: 10 node(s) didn't match pod anti-affinity rules."


def default_profile(emu: KubeEmulator) -> None:
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})


def anti_affinity(app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def failure_notes(emu: KubeEmulator, name: str) -> list[str]:
    """The FailedScheduling notes of a pod, each its FitError without the preemption sentence a
    preempting profile adds (`... rules. preemption: 0/10 nodes are available: ...`)."""
    return [fit_error(event["note"]) for event in events_about(emu, name, "FailedScheduling")]


def fit_error(message: str) -> str:
    return re.split(r" (?:no new claims to deallocate, )?preemption: ", message, maxsplit=1)[0]


async def test_replicas_with_hostname_anti_affinity_never_share_a_node(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    for index in range(10):
        emu.add_node(f"n{index}", cpu="8")
    default_profile(emu)
    replicaset = emu.add_replicaset("web-5d8f", selector={"matchLabels": {"app": "web"}})
    names = [f"web-5d8f-{index:02d}" for index in range(20)]
    for name in names:
        emu.add_pod(name, scheduler_name="placer", labels={"app": "web"}, owner=replicaset, spec=anti_affinity("web"))
    await launch()
    await until(lambda: sum(1 for n in names if bound_node(emu, n)) == 10, timeout=10)
    pending = [n for n in names if not bound_node(emu, n)]
    await until(lambda: all(failure_notes(emu, n) for n in pending), timeout=10)
    assert sorted(Counter(bound_node(emu, n) for n in names if bound_node(emu, n)).values()) == [1] * 10
    for name in pending:
        assert failure_notes(emu, name) == [ANTI_AFFINITY_MESSAGE]
        [condition] = emu.get("pods", name)["status"]["conditions"]
        assert (condition["reason"], fit_error(condition["message"])) == ("Unschedulable", ANTI_AFFINITY_MESSAGE)
    assert_sound(emu, [n for n in names if n not in pending])

    victim = next(n for n in names if bound_node(emu, n))
    freed = bound_node(emu, victim)
    emu.delete("pods", victim)
    deleted = time.monotonic()
    await until(lambda: sum(1 for n in pending if bound_node(emu, n)) == 1, timeout=5)
    assert time.monotonic() - deleted < 3.0  # woken by the deletion, not by a 10 s backoff
    [moved] = [n for n in pending if bound_node(emu, n)]
    assert bound_node(emu, moved) == freed
    survivors = [n for n in names if emu.get("pods", n) and bound_node(emu, n)]
    assert sorted(Counter(bound_node(emu, n) for n in survivors).values()) == [1] * 10


async def test_zone_spread_holds_and_a_relabelled_node_is_used_promptly(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    for index in range(3):
        emu.add_node(f"a{index}", cpu="8", labels={ZONE: "zone-a"})
    emu.add_node("b0", cpu="1", labels={ZONE: "zone-b"})  # room for one of these pods
    emu.add_node("spare", cpu="8")  # no zone label: not a place for these pods
    default_profile(emu)
    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "db"}}}]}
    names = [f"db-{index}" for index in range(6)]
    for name in names:
        emu.add_pod(name, scheduler_name="placer", cpu="600m", labels={"app": "db"}, spec=spread)
    await launch()
    await until(lambda: all(bound_node(emu, n) or failure_notes(emu, n) for n in names), timeout=10)
    zones = Counter(emu.get("nodes", bound_node(emu, n))["metadata"]["labels"][ZONE] for n in names
                    if bound_node(emu, n))
    assert max(zones.values()) - min(zones.get(z, 0) for z in ("zone-a", "zone-b")) <= 1
    waiting = [n for n in names if not bound_node(emu, n)]
    assert len(waiting) == 3, "zone-b holds one pod, so zone-a may hold two: three must wait"
    assert all(bound_node(emu, n) != "spare" for n in names)
    assert "1 node(s) didn't match pod topology spread constraints (missing required label)" in (
        failure_notes(emu, waiting[0])[0])

    labelled = time.monotonic()
    emu.patch("nodes", "spare", {"metadata": {"labels": {ZONE: "zone-b"}}})
    await until(lambda: all(bound_node(emu, n) for n in names), timeout=5)
    assert time.monotonic() - labelled < 3.0  # woken by the node change
    assert_sound(emu, [n for n in names if bound_node(emu, n)])


async def test_a_namespace_relabelled_into_a_selector_lets_an_affine_pod_bind(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.add_node("n2")
    emu.add_namespace("shop")
    emu.add_pod("cache", "shop", scheduler_name="placer", labels={"app": "cache"}, node_name="n2")
    term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname",
            "namespaceSelector": {"matchLabels": {"env": "prod"}}}
    affinity = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    emu.add_pod("web", scheduler_name="placer", labels={"app": "web"}, spec=affinity)
    default_profile(emu)
    await launch()
    await until(lambda: failure_notes(emu, "web"), timeout=10)
    assert failure_notes(emu, "web") == ["0/2 nodes are available: 2 node(s) didn't match pod affinity rules."]
    relabelled = time.monotonic()
    emu.patch("namespaces", "shop", {"metadata": {"labels": {"env": "prod"}}})
    await until(lambda: bound_node(emu, "web"), timeout=5)
    assert bound_node(emu, "web") == "n2"
    assert time.monotonic() - relabelled < 3.0  # woken by the namespace change


async def test_a_malformed_relation_is_reported_and_the_loop_goes_on(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    default_profile(emu)
    bad_term = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]},
                "topologyKey": "kubernetes.io/hostname"}
    emu.add_pod("bad", scheduler_name="placer",
                spec={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [bad_term]}}})
    emu.add_pod("bad-spread", scheduler_name="placer", spec={"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]})
    emu.add_pod("good", scheduler_name="placer")
    await launch()
    await until(lambda: bound_node(emu, "good") and failure_notes(emu, "bad") and failure_notes(emu, "bad-spread"),
                timeout=10)
    [note] = failure_notes(emu, "bad")
    assert "invalid pod default/bad" in note
    assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]" \
           ".operator" in note and '"Near"' in note
    [note] = failure_notes(emu, "bad-spread")
    assert "spec.topologySpreadConstraints[0].topologyKey: Required value" in note
