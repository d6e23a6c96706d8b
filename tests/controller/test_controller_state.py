"""Watch events into engine calls: accounting, the pending index, stale events, metrics text."""

from __future__ import annotations

import json
from typing import Any

import placer.controller.informers.cache as cache_module
import pytest
from placer.controller.metrics import Metrics
from placer.controller.state import SchedulerState
from placer.engine.parsing import parse_pod

from tests.controller.helpers import node, pod, profile, unit_state


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
    state.profile_feed.upsert(profile("p1", "s1"))
    assert "default/a" in state.queue and "default/b" not in state.queue
    state.profile_feed.delete(profile("p1", "s1"))
    assert "default/a" not in state.queue and "default/a" in state.cache.pending["s1"]


def test_stale_and_duplicate_events_are_ignored() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", rv=10))
    state.cache.observe_pod(pod("a", cpu="1", rv=5))  # an older, unbound copy (e.g. a lagging listing)
    state.cache.observe_pod(pod("a", cpu="1", rv=11))  # a newer copy claiming unbound: nodeName is never unset
    assert "default/a" not in state.queue and "default/a" not in state.cache.pending.get("placer", {})
    assert cpu_requested(state, "n1") == 1000


def test_a_version_from_before_a_pods_end_delivered_late_is_not_filed() -> None:
    """The failed pods' informer (kubelet rejections) may see a pod's end before the pods' informer
    delivers its binding: the late binding must not count the ended pod on its node again."""
    state = unit_state()
    state.cache.observe_node(node("n1"))
    state.cache.pod_seen(parse_pod(pod("a", cpu="1", node_name="n1", rv=20, phase="Failed")))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", rv=10))  # the binding, late
    assert cpu_requested(state, "n1") == 0 and "default/a" not in state.cluster.pods
    state.cache.pod_deleted(pod("a", node_name="n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", uid="again", rv=30))  # a new pod of that name
    assert cpu_requested(state, "n1") == 1000


def test_a_recreated_pod_replaces_the_old_one() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("a", cpu="1", node_name="n1", uid="first", rv=10))
    state.cache.observe_pod(pod("a", cpu="1", uid="second", rv=20))
    assert cpu_requested(state, "n1") == 0 and "default/a" in state.queue
    state.cache.pod_deleted(pod("a", uid="first"))  # a late DELETED of the old one changes nothing
    assert "default/a" in state.queue


def test_pods_being_deleted_are_not_scheduled() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    raw = pod("a")
    raw["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    state.cache.observe_pod(raw)
    assert "default/a" not in state.queue


def test_node_changes_wake_waiting_pods_but_heartbeats_do_not() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
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
    assert state.health() == (False, "starting")
    state.started = True
    assert state.health() == (False, "initial sync not done")
    state.terms.synced_once = True
    healthy, reason = state.health()
    assert not healthy and "API server" in reason
    state.informers["schedulerprofiles"].serving = False  # the CRD is not installed
    assert state.health() == (False, "not watching schedulerprofiles")


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


def test_metric_series_resolved_once_count_into_the_same_exposition() -> None:
    metrics = Metrics()
    attempts = metrics.attempts.labels(result="scheduled", profile="p")
    duration = metrics.attempt_duration.labels(profile="p", result="scheduled")
    assert "placer_scheduling_attempt_duration_seconds_count" not in metrics.render()  # not before it is used
    attempts.inc()
    metrics.attempts.inc(profile="p", result="scheduled")
    duration.observe(0.003)
    metrics.attempt_duration.observe(0.0005, result="scheduled", profile="p")
    text = metrics.render()
    assert metrics.attempts.get(result="scheduled", profile="p") == 2
    assert 'placer_schedule_attempts_total{profile="p",result="scheduled"} 2' in text
    labels = 'profile="p",result="scheduled"'
    assert f'placer_scheduling_attempt_duration_seconds_bucket{{{labels},le="0.001"}} 1' in text
    assert f"placer_scheduling_attempt_duration_seconds_count{{{labels}}} 2" in text
    assert metrics.attempt_duration.count(result="scheduled", profile="p") == 2


def test_pods_with_scheduling_gates_wait_until_the_gates_are_removed() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_pod(pod("a", rv=1, spec={"schedulingGates": [{"name": "example.com/quota"}]}))
    assert "default/a" not in state.queue and "default/a" in state.cache.pending["placer"]
    state.cache.enqueue_pending("placer")  # e.g. a new term: still gated
    assert "default/a" not in state.queue
    state.cache.observe_pod(pod("a", rv=2))
    assert "default/a" in state.queue


def _assumed(state: SchedulerState, raw: dict[str, Any], node_name: str) -> None:
    """A pending pod decided as the loop does: popped, assumed on `node_name`, its bind answered."""
    state.cache.observe_pod(raw)
    popped = state.queue.pop()
    assert popped is not None and popped.key == "default/" + raw["metadata"]["name"]
    state.cluster.assume(popped, node_name)
    state.queue.remove(popped.key)


def _counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parsed: list[str] = []

    def counting(raw: Any) -> Any:
        parsed.append(raw["metadata"]["name"])
        return parse_pod(raw)

    monkeypatch.setattr(cache_module, "parse_pod", counting)
    return parsed


def test_the_binding_of_a_pod_we_assumed_is_taken_without_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_node(node("n2"))
    raw = pod("a", cpu="1", rv=10, labels={"app": "web"})
    _assumed(state, raw, "n1")
    parsed = _counting_parses(monkeypatch)
    modified = json.loads(json.dumps(raw))
    modified["metadata"]["resourceVersion"] = "11"
    modified["spec"]["nodeName"] = "n1"
    modified["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    state.cache.observe_pod(modified)
    assert parsed == []
    record = state.cluster.pods["default/a"]
    assert not record.assumed and record.node == "n1" and record.pod == parse_pod(modified)
    assert cpu_requested(state, "n1") == 1000 and cpu_requested(state, "n2") == 0
    assert "default/a" not in state.cache.pending.get("placer", {}) and "default/a" not in state.queue
    assert state.cache.known("default/a") is record.pod and record.pod.resource_version == "11"


def test_a_binding_elsewhere_or_with_changes_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_node(node("n2"))
    first, second = pod("a", cpu="1", rv=10), pod("b", cpu="1", rv=20)
    _assumed(state, first, "n1")
    _assumed(state, second, "n1")
    parsed = _counting_parses(monkeypatch)
    elsewhere = json.loads(json.dumps(first))  # bound by someone else meanwhile, on another node
    elsewhere["metadata"]["resourceVersion"] = "12"
    elsewhere["spec"]["nodeName"] = "n2"
    changed = json.loads(json.dumps(second))  # bound where assumed, but its labels changed too
    changed["metadata"]["resourceVersion"] = "22"
    changed["metadata"]["labels"] = {"app": "new"}
    changed["spec"]["nodeName"] = "n1"
    state.cache.observe_pod(elsewhere)
    state.cache.observe_pod(changed)
    assert parsed == ["a", "b"]
    assert cpu_requested(state, "n1") == 1000 and cpu_requested(state, "n2") == 1000
    assert state.cluster.pods["default/b"].pod.labels == {"app": "new"}
    assert not any(record.assumed for record in state.cluster.pods.values())


def test_a_victims_disruption_condition_reaches_the_cache_after_its_deletion_began() -> None:
    """kube patches DisruptionTarget before deleting a victim, but the watch may bring the deleting
    copy first: the condition's later copy is still taken (a preemptor waits only for a scheduler's
    victim terminating on its node)."""
    state = unit_state()
    state.cache.observe_node(node("n1"))
    victim = pod("v", node_name="n1", cpu="1", rv=10)
    victim["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:05Z"
    state.cache.observe_pod(victim)
    assert state.cluster.pods["default/v"].pod.deleting and not state.cluster.pods["default/v"].pod.preempted
    marked = json.loads(json.dumps(victim))
    marked["metadata"]["resourceVersion"] = "11"
    marked["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    state.cache.observe_pod(marked)
    assert state.cluster.pods["default/v"].pod.preempted
