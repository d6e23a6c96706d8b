"""The hostile-input corpus end to end, against ONE operator for the whole module.

Every profile of tests/engine/hostile_corpus.py is applied as a SchedulerProfile (the emulator's
built-in CRD has no schema, as when the CRD is missing or older than the operator, so nothing is
rejected at the door), every pod is created with the served schedulerName; all of it before the
operator starts, then each case is checked on its own. Alongside: a valid profile and valid pods
keep being served, a profile deleted mid-cycle, a pod deleted between decision and bind, unicode
and very long names.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from tests.controller.helpers import (
    OperatorThread,
    assert_sound,
    bound_node,
    events_about,
    operator_options,
    until,
)
from tests.engine.hostile_corpus import LONG, POD_CASES, PROFILE_CASES, UNICODE, PodCase, ProfileCase
from tests.kubeemu import KubeEmulator

pytestmark = pytest.mark.asyncio(loop_scope="module")

SCHEDULER = "placer"


def profile_name(case: ProfileCase) -> str:
    return f"hostile-{PROFILE_CASES.index(case):02d}"


def pod_name(case: PodCase) -> str:
    return f"pod-{case.id}"


@dataclass
class World:
    emu: KubeEmulator
    operator: OperatorThread

    @property
    def state(self) -> Any:
        assert self.operator.state is not None
        return self.operator.state


def ready(emu: KubeEmulator, name: str) -> dict[str, Any] | None:
    obj = emu.get("sp", name) or {}
    status = obj.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and status.get("observedGeneration") == obj["metadata"]["generation"]:
            return dict(condition)
    return None


def pod_scheduled(emu: KubeEmulator, name: str) -> dict[str, Any] | None:
    pod = emu.get("pods", name) or {}
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def create_pod(emu: KubeEmulator, name: str, spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
    body = {"metadata": {"name": name, "namespace": "default", **(metadata or {})},
            "spec": {"schedulerName": SCHEDULER, **spec}}
    if isinstance(spec.get("containers"), list):
        emu.create("pods", body)
        return
    # the emulator, like the API server, cannot default a pod whose containers are not a list:
    # store a parked valid pod, then rewrite it "by hand" (the emulator's direct patch is unchecked)
    emu.create("pods", {**body, "spec": {"schedulerName": "parked", "containers": [{"name": "c", "image": "i"}]}})
    emu.patch("pods", name, {"spec": {**spec, "schedulerName": SCHEDULER}})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with KubeEmulator() as emu:
        for index in range(3):
            emu.add_node(f"n{index}", cpu="8", memory="32Gi")
        emu.add_node("tiny", cpu="1", memory="4Gi", labels={"pool": "tiny"},
                     taints=[{"key": "pool", "value": "tiny", "effect": "NoSchedule"}])
        emu.create("sp", {"metadata": {"name": "main"}, "spec": {"schedulerName": SCHEDULER}})
        for case in PROFILE_CASES:
            emu.create("sp", {"metadata": {"name": profile_name(case)}, "spec": case.spec})
        for case in POD_CASES:
            create_pod(emu, pod_name(case), case.spec, case.metadata)
        emu.add_pod("good-before", scheduler_name=SCHEDULER)
        kubeconfig = emu.write_kubeconfig(tmp_path_factory.mktemp("hostile") / "kubeconfig")
        operator = await OperatorThread(operator_options(kubeconfig, identity="hostile")).start()
        try:
            yield World(emu, operator)
        finally:
            await operator.stop()


@pytest.mark.parametrize("case", PROFILE_CASES, ids=lambda case: case.id)
async def test_profile(world: World, case: ProfileCase) -> None:
    emu, name = world.emu, profile_name(case)
    condition = await until(lambda: ready(emu, name), timeout=10)
    if case.error is None:
        assert (condition["status"], condition["reason"]) == ("True", "Loaded"), condition
        return
    assert (condition["status"], condition["reason"]) == ("False", case.reason), condition
    missing = [part for part in case.error if part not in condition["message"]]
    assert not missing, f"{case.id}: {missing} not in {condition['message']!r}"


def expected_parts(emu: KubeEmulator, name: str, case: PodCase) -> list[str]:
    """What the message must name. The API server (and the emulator) copies a container's limits
    into its unset requests, so a bad limit is then also a bad request, and the first one found."""
    parts = list(case.error or ())
    stored = (emu.get("pods", name) or {}).get("spec") or {}
    given = case.spec.get("containers")
    if isinstance(given, list) and isinstance(stored.get("containers"), list):
        for mine, theirs in zip(given, stored["containers"], strict=False):
            resources = mine.get("resources") or {}
            defaulted = (theirs.get("resources") or {}).get("requests")
            if "limits" in resources and "requests" not in resources and defaulted:
                parts = [part.replace("limits.", "requests.") for part in parts]
    return parts


@pytest.mark.parametrize("case", POD_CASES, ids=lambda case: case.id)
async def test_pod(world: World, case: PodCase) -> None:
    emu, name = world.emu, pod_name(case)
    if case.error is None:
        await until(lambda: bound_node(emu, name), timeout=10)
        assert events_about(emu, name, "FailedScheduling") == []
        return
    [event] = await until(lambda: events_about(emu, name, "FailedScheduling"), timeout=10)
    assert event["type"] == "Warning" and event["reportingInstance"] == f"{SCHEDULER}-hostile"
    missing = [part for part in expected_parts(emu, name, case) if part not in event["note"]]
    assert not missing, f"{case.id}: {missing} not in {event['note']!r}"
    condition = await until(lambda: pod_scheduled(emu, name), timeout=10)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "Unschedulable", event["note"])
    assert bound_node(emu, name) is None


async def test_valid_pods_are_served_throughout(world: World) -> None:
    emu = world.emu
    await until(lambda: bound_node(emu, "good-before"), timeout=10)
    emu.add_pod("good-after", scheduler_name=SCHEDULER)
    await until(lambda: bound_node(emu, "good-after"), timeout=10)
    assert (ready(emu, "main") or {}).get("reason") == "Loaded"
    assert world.operator.thread.is_alive() and world.operator.error is None
    assert_sound(emu, ["good-before", "good-after"])


async def test_unicode_and_very_long_names(world: World) -> None:
    emu = world.emu
    unicode_scheduler = "hostile-" + UNICODE
    long_scheduler = "hostile-" + LONG
    long_pod = "p" + "x" * 252  # 253 characters, the most a pod name may have
    emu.add_pod("unicode-scheduled", scheduler_name=unicode_scheduler, labels={"tenant": UNICODE})
    emu.add_pod(long_pod, scheduler_name=long_scheduler)
    emu.add_pod("long-unschedulable", scheduler_name=long_scheduler, cpu="100")  # fits nowhere
    await until(lambda: bound_node(emu, "unicode-scheduled") and bound_node(emu, long_pod), timeout=10)
    await until(lambda: events_about(emu, "unicode-scheduled", "Scheduled") and events_about(emu, long_pod, "Scheduled")
                and events_about(emu, "long-unschedulable", "FailedScheduling"), timeout=10)
    [event] = events_about(emu, "unicode-scheduled", "Scheduled")
    assert event["reportingInstance"] == f"{unicode_scheduler}-hostile"
    [event] = events_about(emu, long_pod, "Scheduled")
    assert len(event["metadata"]["name"]) <= 253 and len(event["reportingInstance"]) <= 128
    assert event["note"] == f"Successfully assigned default/{long_pod} to {bound_node(emu, long_pod)}"
    [failed] = events_about(emu, "long-unschedulable", "FailedScheduling")
    assert failed["note"].startswith("0/4 nodes are available: ")
    assert_sound(emu, ["unicode-scheduled", long_pod])


async def test_a_profile_deleted_mid_cycle(world: World) -> None:
    """Binds in flight when the profile goes finish (they were decided); the pods still queued stay
    pending, untouched; re-creating the profile resumes them."""
    emu, state = world.emu, world.state
    spec = {"schedulerName": "transient"}
    emu.create("sp", {"metadata": {"name": "transient"}, "spec": spec})
    await until(lambda: state.profiles.active("transient") is not None)
    rule = emu.inject("POST", r"/pods/tr-\d+/binding$", delay=0.5, count=None)
    names = [f"tr-{index}" for index in range(96)]  # three times the binds allowed in flight (32)
    for name in names:
        emu.add_pod(name, scheduler_name="transient")
    await until(lambda: rule.hits >= 10)
    emu.delete("sp", "transient")
    await until(lambda: state.profiles.active("transient") is None)
    await asyncio.sleep(0.8)  # the binds in flight land meanwhile
    attempted = sum(emu.bind_attempts.get(f"default/{name}", 0) for name in names)
    left = [name for name in names if not bound_node(emu, name)]
    assert left, "every pod was bound: the deletion came too late to test anything"
    await asyncio.sleep(0.5)
    assert sum(emu.bind_attempts.get(f"default/{name}", 0) for name in names) == attempted  # nothing new
    assert all(not events_about(emu, name, "FailedScheduling") for name in left)
    assert all(f"default/{name}" in state.cache.pending.get("transient", {}) for name in left)
    emu.faults.remove(rule)
    emu.create("sp", {"metadata": {"name": "transient"}, "spec": spec})
    await until(lambda: all(bound_node(emu, name) for name in names), timeout=10)
    assert_sound(emu, names)


async def test_a_pod_deleted_between_decision_and_bind(world: World) -> None:
    """The bind answers 404: the pod is dropped and its assumption forgotten, so the room it took
    on the node is free for the next pod at once."""
    emu, state = world.emu, world.state
    emu.create("sp", {"metadata": {"name": "tiny"}, "spec": {"schedulerName": "tiny", "filters": [
        {"name": "NodeResourcesFit"}, {"name": "NodeLabel", "args": {"required": {"pool": "tiny"}}}]}})
    await until(lambda: state.profiles.active("tiny") is not None)
    tolerate = {"tolerations": [{"key": "pool", "operator": "Exists"}]}
    gone_before = state.metrics.bindings.get(result="gone")
    emu.inject("POST", r"/pods/doomed/binding$", delay=0.5, count=1)
    emu.add_pod("doomed", scheduler_name="tiny", cpu="800m", spec=tolerate)
    await until(lambda: emu.bind_attempts.get("default/doomed"))
    emu.delete("pods", "doomed")
    await until(lambda: state.metrics.bindings.get(result="gone") == gone_before + 1, timeout=5)
    assert "default/doomed" not in state.cluster.pods and "default/doomed" not in state.queue
    emu.add_pod("heir", scheduler_name="tiny", cpu="800m", spec=tolerate)  # fits only if doomed is forgotten
    await until(lambda: bound_node(emu, "heir"), timeout=5)
    assert bound_node(emu, "heir") == "tiny"
    assert not any(record.key == "default/doomed" for record in emu.bindings)
    assert_sound(emu, ["heir"])
