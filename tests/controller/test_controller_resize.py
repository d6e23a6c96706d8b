"""An in-place resize that shrinks a bound pod frees room on its node: the cache counts the smaller
requests and raises the pod update NodeResourcesFit waits for (kube's `UpdatePodScaleDown`), so a
pod rejected for resources is retried promptly, not after its long backoff; steps that free
nothing (the spec shrunk, the kubelet not done) raise nothing."""

from __future__ import annotations

from typing import Any

from placer.controller.state import SchedulerState
from placer.engine.framework import ClusterEvent

from tests.controller.helpers import node, pod, profile, unit_state


def resized(name: str, spec_cpu: str, allocated: str | None, running: str | None, **extra: Any) -> dict[str, Any]:
    """A bound pod on n1 with its spec's cpu, and what its container status says is allocated and
    running (None: the status does not report resources, as before the kubelet answers)."""
    raw = pod(name, cpu=spec_cpu, node_name="n1", phase="Running", **extra)
    if allocated is not None and running is not None:
        raw["status"]["containerStatuses"] = [{
            "name": "main", "allocatedResources": {"cpu": allocated, "memory": "128Mi"},
            "resources": {"requests": {"cpu": running, "memory": "128Mi"}},
        }]
    return raw


def cpu_requested(state: SchedulerState) -> int:
    return int(state.cluster.requested[state.cluster.index["n1"], 0])


def rejected_for_cpu(state: SchedulerState) -> str:
    """Queue a 2-cpu pod, decide it (Insufficient cpu) and back it off a few times, as the loop
    would: it now waits 8 s unless one of its filters' events comes."""
    state.cache.observe_pod(pod("two", cpu="2"))
    key = "default/two"
    for _ in range(4):
        state.queue.retry_now(key)
        info = state.queue.pop()
        assert info is not None and info.key == key
        decision = state.scheduler.schedule(info, state.profiles.active("placer"), state.cluster)
        assert decision.node is None and decision.message == "0/1 nodes are available: 1 Insufficient cpu."
        state.queue.backoff(key, decision.wake_on)
    assert ClusterEvent.POD_UPDATE in decision.wake_on
    return key


def waits(state: SchedulerState, key: str) -> float:
    entry = state.queue.entry(key)
    assert entry is not None and entry.state == "waiting"
    return entry.ready_at - entry.last_attempt


def setup() -> tuple[SchedulerState, list[str | None], str]:
    state = unit_state()
    events: list[str | None] = []
    wake = state.cache.wake
    state.cache.wake = lambda event=None, *objects: (events.append(event), wake(event, *objects))[-1]
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1", cpu="4"))
    state.cache.observe_pod(resized("running", "3", "3", "3"))
    assert cpu_requested(state) == 3000
    key = rejected_for_cpu(state)
    assert waits(state, key) == 8.0
    events.clear()
    return state, events, key


def test_a_resize_shrink_wakes_pods_rejected_for_resources_once_the_kubelet_is_done() -> None:
    state, events, key = setup()
    # the resize PATCH: the spec asks 1 cpu, the container still has 3 allocated and running
    state.cache.observe_pod(resized("running", "1", "3", "3"))
    # the kubelet allocated 1 but runs with 3 still (PodResizeInProgress): 3 held
    state.cache.observe_pod(resized("running", "1", "1", "3"))
    assert cpu_requested(state) == 3000 and events == [] and waits(state, key) == 8.0
    # done: 1 cpu held, 3 free, and the waiting pod is retried after the initial backoff
    state.cache.observe_pod(resized("running", "1", "1", "1"))
    assert cpu_requested(state) == 1000
    assert events == [ClusterEvent.POD_UPDATE]
    assert waits(state, key) == state.queue.initial_backoff
    info = state.queue.entry(key).pod
    assert state.scheduler.schedule(info, state.profiles.active("placer"), state.cluster).node == "n1"


def test_a_spec_shrink_of_a_pod_without_status_resources_wakes_them_too() -> None:
    state, events, key = setup()
    state.cache.observe_pod(resized("running", "1", None, None))  # no resize status: the spec counts
    assert cpu_requested(state) == 1000
    assert events == [ClusterEvent.POD_UPDATE] and waits(state, key) == state.queue.initial_backoff


def test_a_new_version_that_frees_nothing_raises_nothing() -> None:
    state, events, key = setup()
    state.cache.observe_pod(resized("running", "3", "3", "3"))  # a status heartbeat, same requests
    assert events == [] and waits(state, key) == 8.0
