"""The binding cycle against a fake API, with the test plugins of `tests/controller/plugins/`: a pod
waiting on Permit is left to the next leader when leadership goes (its room freed, nothing written),
ends its wait when the operator drains, is preempted in memory rather than deleted (kube's
`Preempt`), and PostBind writes follow a bind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
from placer.controller.scheduling.loop import SchedulingLoop
from placer.controller.scheduling.preemption import pod_ref
from placer.controller.state import SchedulerState
from placer.engine.cluster import ClusterState
from placer.engine.framework import STRATEGIC_MERGE_PATCH, FilterPlugin, NoArgs, PostBindPlugin, Write
from placer.engine.objects import PodInfo
from placer.plugins import REGISTRY

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state, until
from tests.controller.plugins.hold_until_labelled import HoldUntilLabelled

Running = tuple[SchedulerState, FakeKube, SchedulingLoop]
KEY = "placer.dev/release"


class MarkBound(FilterPlugin[NoArgs], PostBindPlugin[NoArgs]):
    """Admits every node; after a bind, asks for a status patch of the pod saying where it went."""

    name: ClassVar[str] = "MarkBound"

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def post_bind(self, pod: PodInfo, cluster: ClusterState, node: str) -> Sequence[Write]:
        return [Write(pod_ref(pod), {"status": {"message": f"bound to {node}"}}, STRATEGIC_MERGE_PATCH,
                      subresource="status", uid=pod.uid)]


@pytest.fixture
async def running(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Running]:
    monkeypatch.setitem(REGISTRY, HoldUntilLabelled.name, HoldUntilLabelled)
    monkeypatch.setitem(REGISTRY, MarkBound.name, MarkBound)
    kube = FakeKube()
    state = unit_state(kube, initial_backoff=0.05, max_backoff=0.2)
    loop = state.loop
    task = asyncio.create_task(loop.run())
    workers = [asyncio.create_task(state.reporter.worker()) for _ in range(2)]
    state.profile_feed.upsert(profile("held", "placer", filters=[
        {"name": "NodeResourcesFit"}, {"name": "HoldUntilLabelled"}, {"name": "MarkBound"}]))
    state.cache.observe_node(node("n1", cpu="1"))
    state.may_schedule.set()
    yield state, kube, loop
    for job in (task, *workers, *loop.binding.tasks, *loop.preemptions.tasks):
        job.cancel()
    await asyncio.gather(task, *workers, return_exceptions=True)


def held(name: str, cpu: str = "800m", priority: int = 0, **labels: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, labels=labels, spec={"priority": priority})


def notes(kube: FakeKube, reason: str) -> list[str]:
    return [event["note"] for event in kube.events if event["reason"] == reason]


async def test_leadership_lost_while_waiting_on_permit_leaves_the_pod_to_the_next_leader(running: Running) -> None:
    state, kube, loop = running
    state.cache.observe_pod(held("p"))
    await until(lambda: "default/p" in state.scheduler.waiting)
    assert loop.binding.waiting == 1 and state.cluster.is_assumed("default/p")
    state.leader = SimpleNamespace(is_leader=False)  # type: ignore[assignment]
    state._stopped_leading()
    await until(lambda: loop.binding.waiting == 0)
    assert not state.cluster.is_assumed("default/p") and "default/p" not in state.scheduler.waiting
    entry = state.queue.entry("default/p")
    assert entry is not None and entry.state == "active"  # left for the next term
    assert kube.binds == [] and kube.events == []


async def test_drain_ends_the_waits_at_once(running: Running) -> None:
    state, kube, loop = running
    state.cache.observe_pod(held("p"))
    await until(lambda: "default/p" in state.scheduler.waiting)
    async with asyncio.timeout(2):  # not the plugin's 30 s
        await loop.drain(timeout=5)
    assert not state.cluster.is_assumed("default/p") and kube.binds == []


async def test_a_victim_waiting_on_permit_is_preempted_in_memory_not_deleted(running: Running) -> None:
    state, kube, _ = running
    state.cache.observe_pod(held("low"))
    await until(lambda: "default/low" in state.scheduler.waiting)
    state.cache.observe_pod(held("high", priority=100, **{KEY: "yes"}))
    await until(lambda: kube.binds)
    assert kube.binds == [("default/high", "n1")]
    assert kube.deletes == []  # not deleted: it was never bound
    await until(lambda: notes(kube, "Preempted") and notes(kube, "FailedScheduling"))
    assert notes(kube, "Preempted") == ["Preempted by default/high on node n1 (in kube-scheduler memory)."]
    assert "waiting on permit for pod: preempted" in notes(kube, "FailedScheduling")
    assert state.metrics.preemption_victims.get(result="deleted") == 1
    assert "default/low" in state.queue  # back in the queue, with backoff


async def test_post_bind_writes_follow_the_bind(running: Running) -> None:
    state, kube, loop = running
    state.cache.observe_pod(held("p", cpu="100m", **{KEY: "yes"}))
    await until(lambda: kube.binds and kube.conditions)
    assert kube.binds == [("default/p", "n1")]
    [(key, patch)] = kube.conditions
    assert key == "default/p" and patch == {"status": {"message": "bound to n1"}, "metadata": {"uid": "uid-p"}}
    await asyncio.gather(*loop.binding.tasks)
