"""Watch events into engine calls: accounting, the pending index, stale events, metrics text."""

from __future__ import annotations

from placer.controller.health import health
from placer.controller.metrics import Metrics
from placer.controller.state import SchedulerState
from placer.engine.kinds import KINDS_BY_NAME
from placer.testing import namespace, replica_set

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state


def cpu_requested(state: SchedulerState, node_name: str) -> int:
    return int(state.cluster.requested[state.cluster.index[node_name], 0])


def test_bound_pods_are_counted_and_terminal_or_deleted_ones_freed() -> None:
    state = unit_state()
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1"))
    state.cache.observe_pod(pod("b", cpu="1", node_name="n1"))
    assert cpu_requested(state, "n1") == 2000
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", phase="Succeeded"))
    assert cpu_requested(state, "n1") == 1000
    state.cache.pod_deleted(pod("b", node_name="n1"))
    assert cpu_requested(state, "n1") == 0


def test_pods_bound_before_their_node_arrives_are_counted_when_it_does() -> None:
    state = unit_state()
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1"))
    state.cache.observe_node(node("n1"))
    assert cpu_requested(state, "n1") == 1000


def test_unbound_pods_are_indexed_by_scheduler_name_and_queued_when_owned() -> None:
    state = unit_state()
    state.cache.observe_pod(pod("a", scheduler="s1"))
    state.cache.observe_pod(pod("b", scheduler="s2"))
    assert set(state.cache.pending) == {"s1", "s2"} and len(state.queue) == 0
    state.cache.observe_profile(profile("p1", "s1"))
    assert "default/a" in state.queue and "default/b" not in state.queue
    state.cache.profile_deleted(profile("p1", "s1"))
    assert "default/a" not in state.queue and "default/a" in state.cache.pending["s1"]


def test_stale_and_duplicate_events_are_ignored() -> None:
    state = unit_state()
    state.cache.observe_profile(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", rv=10))
    state.cache.observe_pod(pod("a", cpu="1", rv=5))  # an older, unbound copy (e.g. a lagging listing)
    state.cache.observe_pod(pod("a", cpu="1", rv=11))  # a newer copy claiming unbound: nodeName is never unset
    assert "default/a" not in state.queue and "default/a" not in state.cache.pending.get("placer", {})
    assert cpu_requested(state, "n1") == 1000


def test_a_recreated_pod_replaces_the_old_one() -> None:
    state = unit_state()
    state.cache.observe_profile(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", uid="first", rv=10))
    state.cache.observe_pod(pod("a", cpu="1", uid="second", rv=20))
    assert cpu_requested(state, "n1") == 0 and "default/a" in state.queue
    state.cache.pod_deleted(pod("a", uid="first"))  # a late DELETED of the old one changes nothing
    assert "default/a" in state.queue


def test_pods_being_deleted_are_not_scheduled() -> None:
    state = unit_state()
    state.cache.observe_profile(profile("p", "placer"))
    raw = pod("a")
    raw["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    state.cache.observe_pod(raw)
    assert "default/a" not in state.queue


def test_node_changes_wake_waiting_pods_but_heartbeats_do_not() -> None:
    state = unit_state()
    state.cache.observe_profile(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.wakeup.clear()
    state.cache.observe_node(node("n1"))  # the same node again (a heartbeat): nothing changed
    assert not state.wakeup.is_set()
    state.cache.observe_node(node("n1", labels={"disk": "ssd"}))
    assert state.wakeup.is_set()
    state.cache.node_deleted(node("n1"))
    assert state.cluster.node_count == 0


def test_an_unusable_node_is_dropped() -> None:
    state = unit_state()
    state.cache.observe_node(node("n1"))
    bad = node("n1")
    bad["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"}]
    state.cache.observe_node(bad)
    assert state.cluster.node_count == 0


def test_health_reports_starting_until_synced() -> None:
    state = unit_state()
    assert health(state) == (False, "starting")
    state.kopf_ready = True
    assert health(state) == (False, "initial sync not done")
    state.synced = True
    healthy, reason = health(state)
    assert not healthy and "API server" in reason


def test_metrics_exposition() -> None:
    metrics = Metrics()
    metrics.attempts.inc(result="scheduled", profile="default")
    metrics.attempt_duration.observe(0.003, result="scheduled", profile="default")
    metrics.reloads.inc(profile='we"ird', result="success")
    metrics.pending.source = lambda: [({"queue": "active"}, 3)]
    text = metrics.render()
    assert 'placer_schedule_attempts_total{profile="default",result="scheduled"} 1' in text
    assert "# TYPE placer_scheduling_attempt_duration_seconds histogram" in text
    series = "placer_scheduling_attempt_duration_seconds"
    labels = 'profile="default",result="scheduled"'
    assert f'{series}_bucket{{{labels},le="0.002"}} 0' in text
    assert f'{series}_bucket{{{labels},le="0.004"}} 1' in text
    assert f'{series}_bucket{{{labels},le="+Inf"}} 1' in text
    assert f"{series}_count{{{labels}}} 1" in text
    assert 'placer_pending_pods{queue="active"} 3' in text
    assert 'placer_profile_reloads_total{profile="we\\"ird",result="success"} 1' in text
    assert "placer_leader 0" not in text  # unset gauges print nothing


async def test_resync_then_objects_kopf_never_confirms_are_checked_and_dropped() -> None:
    kube = FakeKube()
    kube.lists = {
        "/api/v1/nodes": [node("n1"), node("ghost")],
        "/apis/placer.dev/v1alpha1/schedulerprofiles": [profile("p", "placer")],
        "/api/v1/pods": [pod("a"), pod("b", node_name="n1", cpu="1")],
        "/api/v1/namespaces": [namespace("team-a"), namespace("gone")],
        "/apis/apps/v1/replicasets": [replica_set("web", {"app": "web"}, "team-a")],
    }
    state = unit_state(kube)
    await state.resync.run()
    assert state.profiles.active("placer") is not None and state.cluster.node_count == 2
    assert state.cluster.catalog.count("Namespace") == 2 and state.cluster.catalog.count("ReplicaSet") == 1
    # pods and nodes are not provisional: Placer's own watches resume from this very LIST
    assert {kind: len(keys) for kind, keys in state.resync.provisional.items() if keys} == {
        "profiles": 1, "namespaces": 2, "replicasets": 1}
    assert {kind: list(paths) for kind, paths in state.resync.watch_versions.items()} == {
        "pods": ["/api/v1/pods"], "nodes": ["/api/v1/nodes"]}
    # Kopf's own listing shows what still exists; the profile, namespace "gone" and the
    # replicaset were deleted in between
    state.object_event(KINDS_BY_NAME["Namespace"], {"type": None, "object": namespace("team-a")})
    assert await state.resync.verify_provisional() == 0
    assert sorted(kube.gets) == [
        "/api/v1/namespaces/gone", "/apis/apps/v1/namespaces/team-a/replicasets/web",
        "/apis/placer.dev/v1alpha1/schedulerprofiles/p"]
    assert state.profiles.active("placer") is None
    assert state.cluster.catalog.count("Namespace") == 1 and state.cluster.catalog.count("ReplicaSet") == 0
    assert cpu_requested(state, "n1") == 1000


async def test_objects_still_there_stay_provisional_until_kopf_shows_them() -> None:
    kube = FakeKube()
    kube.lists = {"/api/v1/namespaces": [namespace("team-a")]}
    kube.objects = {"/api/v1/namespaces/team-a": namespace("team-a", labels={"new": "label"})}
    state = unit_state(kube)
    await state.resync.run()
    assert await state.resync.verify_provisional() == 1
    kind = KINDS_BY_NAME["Namespace"]
    assert state.cluster.catalog.get(kind.name, "team-a").labels.get("new") == "label"  # the fresher copy
    state.object_event(kind, {"type": "MODIFIED", "object": namespace("team-a", labels={"new": "label"})})
    assert await state.resync.verify_provisional() == 0


async def test_many_unconfirmed_objects_wait_for_kopf_instead_of_a_get_each() -> None:
    kube = FakeKube()
    kube.lists = {"/api/v1/namespaces": [namespace(f"ns{i}") for i in range(150)]}
    state = unit_state(kube)
    await state.resync.run()
    assert await state.resync.verify_provisional(limit=100) == 150
    assert kube.gets == []


def test_pods_with_scheduling_gates_wait_until_the_gates_are_removed() -> None:
    state = unit_state()
    state.cache.observe_profile(profile("p", "placer"))
    state.cache.observe_pod(pod("a", rv=1, spec={"schedulingGates": [{"name": "example.com/quota"}]}))
    assert "default/a" not in state.queue and "default/a" in state.cache.pending["placer"]
    state.cache.enqueue_pending("placer")  # e.g. a new term: still gated
    assert "default/a" not in state.queue
    state.cache.observe_pod(pod("a", rv=2))
    assert "default/a" in state.queue
