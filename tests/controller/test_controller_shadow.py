"""Shadow profiles (API.md §5): the recorder's outcomes, memory and status, ownership, the watch's
hand-off, and the loop's budget. The emulator test is test_integration_shadow.py."""

from __future__ import annotations

from typing import Any

import pytest
from placer.controller.metrics import Metrics
from placer.controller.profiles.registry import ProfileRegistry
from placer.controller.profiles.shadow import (
    KEPT_DISAGREEMENTS,
    Disagreement,
    NodeTable,
    ShadowRecorder,
    Shadows,
    ShadowWork,
    agreement,
)
from placer.engine.cluster import ClusterState
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile, compile_profile
from placer.testing import cluster_of, node, pod, pod_info

from tests.controller.helpers import FakeKube, profile, unit_state

TARGET = "default-scheduler"
PREFER_A_B = [{"name": "PreferNode", "weight": 10, "args": {"nodes": ["a", "b"]}}]
TIME = "2026-01-01T00:00:00Z"


def shadow_profile(name: str = "shadow", scores: list[dict[str, Any]] | None = None, **spec: Any) -> Profile:
    body: dict[str, Any] = {"schedulerName": f"{name}-scheduler", "mode": "Shadow", "shadowOf": TARGET,
                            "filters": [{"name": "NodeResourcesFit"}],
                            "scores": PREFER_A_B if scores is None else scores, **spec}
    return compile_profile(name, body)


def recorder(limit: int = 100) -> ShadowRecorder:
    return ShadowRecorder("shadow", shadow_profile(), Metrics(), limit=limit, now=lambda: TIME)


def three_nodes() -> ClusterState:
    """a and b: PreferNode's (total 1000 each); c: total 0; small: too little cpu for `web`."""
    return cluster_of([node("a"), node("b"), node("c"), node("small", cpu="100m")])


def web(name: str = "web", cpu: str = "1") -> PodInfo:
    return pod_info(pod(name, cpu=cpu, scheduler=TARGET))


def decided(rec: ShadowRecorder, cluster: ClusterState, *pods: PodInfo) -> None:
    for item in pods:
        assert rec.created(item)
    while rec.decide_next(cluster, NodeTable.of(cluster)):
        pass


@pytest.mark.parametrize(("bound_to", "outcome", "bound_total"), [
    ("a", "same", 1000),  # Placer's node (a: first by name among the best)
    ("b", "equal", 1000),  # another node of the best total
    ("c", "different", 0),  # a feasible node of a lower total
    ("small", "different", None),  # a node Placer's filters rejected
])
def test_outcome_of_a_binding(bound_to: str, outcome: str, bound_total: int | None) -> None:
    rec, cluster = recorder(), three_nodes()
    decided(rec, cluster, web())
    assert rec.bound("default/web", bound_to) == outcome
    assert rec.counts == {"decisions": 1, "same": 0, "equal": 0, "different": 0, "unschedulable": 0, outcome: 1}
    assert rec.metrics.shadow_decisions.get(profile="shadow", outcome=outcome) == 1
    assert not rec.choices and not rec.waiting
    if outcome == "different":
        assert [d.as_dict() for d in rec.disagreements] == [{
            "pod": "default/web", "outcome": "different", "boundTo": bound_to, "placer": "a",
            "boundTotal": bound_total, "placerTotal": 1000, "message": None, "time": TIME}]
    else:
        assert not rec.disagreements
    assert rec.bound("default/web", bound_to) is None  # compared once


def test_no_feasible_node_is_unschedulable_with_the_message() -> None:
    rec, cluster = recorder(), three_nodes()
    decided(rec, cluster, web(cpu="64"))
    assert rec.bound("default/web", "a") == "unschedulable"
    [entry] = rec.disagreements
    assert entry.as_dict() == {
        "pod": "default/web", "outcome": "unschedulable", "boundTo": "a", "placer": None, "boundTotal": None,
        "placerTotal": None, "message": "0/4 nodes are available: 4 Insufficient cpu.", "time": TIME}


def test_the_choice_is_the_state_at_creation_not_at_binding() -> None:
    rec, cluster = recorder(), three_nodes()
    decided(rec, cluster, web())
    cluster.add_pod(pod_info(pod("filler", cpu="4", node_name="a")))  # a is full by the time it binds
    assert rec.bound("default/web", "a") == "same"


def test_deleted_before_binding_records_nothing() -> None:
    rec, cluster = recorder(), three_nodes()
    decided(rec, cluster, web("decided"))
    rec.created(web("waiting"))
    rec.deleted("default/decided")
    rec.deleted("default/waiting")
    assert not rec.choices and not rec.waiting
    assert rec.bound("default/decided", "a") is None and rec.bound("default/waiting", "a") is None
    assert rec.counts["decisions"] == 0 and not rec.disagreements


def test_bound_before_its_decision_is_decided_without_itself() -> None:
    rec = recorder()
    cluster = three_nodes()
    rec.created(web(cpu="4"))  # fits a, b, c only while empty
    assert rec.bound("default/web", "c") is None  # no decision yet: waits
    bound = pod_info(pod("web", cpu="4", scheduler=TARGET, node_name="c"))
    cluster.add_pod(bound)
    cluster.add_pod(pod_info(pod("other", cpu="4", node_name="b")))  # b taken meanwhile
    assert rec.decide_next(cluster, NodeTable.of(cluster))
    [entry] = rec.disagreements  # c was free without the pod itself: a feasible, lower total
    assert (entry.outcome, entry.bound_to, entry.placer, entry.bound_total) == ("different", "c", "a", 0)
    assert rec.metrics.shadow_late.get(profile="shadow") == 1
    assert cluster.pods["default/web"].node == "c"  # the cluster is as it was
    assert cluster.requested[cluster.index["c"]][0] == 4000


def test_bound_then_deleted_before_its_decision_still_counts() -> None:
    rec, cluster = recorder(), three_nodes()
    rec.created(web())
    rec.bound("default/web", "b")
    rec.deleted("default/web")
    assert rec.decide_next(cluster, NodeTable.of(cluster))
    assert rec.counts["equal"] == 1


def test_the_last_100_disagreements_are_kept_newest_last() -> None:
    rec, cluster = recorder(limit=1000), three_nodes()
    names = [f"p{index:03d}" for index in range(150)]
    decided(rec, cluster, *(web(name) for name in names))
    for name in names:
        rec.bound(f"default/{name}", "c")
    assert len(rec.disagreements) == KEPT_DISAGREEMENTS == 100
    assert [d.pod for d in rec.disagreements] == [f"default/{name}" for name in names[50:]]
    status = rec.status()
    assert (status["decisions"], status["different"], len(status["disagreements"])) == (150, 150, 100)
    assert status["agreement"] == "0.0% of 150"


@pytest.mark.parametrize(("agreed", "decisions", "text"), [
    (1169, 1204, "97.0% of 1,204"),
    (1170, 1204, "97.1% of 1,204"),
    (9999, 10000, "99.9% of 10,000"),  # rounded down: 100.0% only when every decision agreed
    (5, 5, "100.0% of 5"),
    (0, 3, "0.0% of 3"),
    (0, 0, "no decisions yet"),
    (1_234_567, 2_000_000, "61.7% of 2,000,000"),
])
def test_agreement_text(agreed: int, decisions: int, text: str) -> None:
    assert agreement(agreed, decisions) == text


def test_counts_resume_from_the_status_the_object_shows() -> None:
    rec, cluster = recorder(), three_nodes()
    entry = {"pod": "default/old", "outcome": "unschedulable", "boundTo": "a", "placer": None,
             "boundTotal": None, "placerTotal": None, "message": "0/4 nodes are available: x.", "time": TIME}
    rec.resume({"decisions": 10, "same": 7, "equal": 1, "different": 1, "unschedulable": 1,
                "agreement": "80.0% of 10", "disagreements": [entry, {"pod": 3}, "junk"]})
    assert rec.counts == {"decisions": 10, "same": 7, "equal": 1, "different": 1, "unschedulable": 1}
    assert [d.as_dict() for d in rec.disagreements] == [entry]
    decided(rec, cluster, web())
    rec.bound("default/web", "a")
    status = rec.status()
    assert (status["decisions"], status["same"], status["agreement"]) == (11, 8, "81.8% of 11")
    assert [d["pod"] for d in status["disagreements"]] == ["default/old"]


def test_resume_ignores_what_is_not_a_count() -> None:
    rec = recorder()
    rec.resume({"decisions": "12", "same": -1, "equal": True, "different": 2.5})
    assert rec.counts == dict.fromkeys(("decisions", "same", "equal", "different", "unschedulable"), 0)
    rec.resume(None)
    assert rec.status()["agreement"] == "no decisions yet"


def test_disagreement_round_trips_through_the_status() -> None:
    entry = Disagreement("ns/p", "different", "n2", "n1", None, 300, None, TIME)
    assert Disagreement.parse(entry.as_dict()) == entry


def test_memory_is_bounded_oldest_forgotten_first() -> None:
    rec, cluster = recorder(limit=3), three_nodes()
    decided(rec, cluster, web("p1"), web("p2"))
    rec.created(web("p3"))
    rec.created(web("p4"))  # over the limit: p1 (decided longest ago) goes
    assert list(rec.choices) == ["default/p2"] and list(rec.waiting) == ["default/p3", "default/p4"]
    assert rec.metrics.shadow_dropped.get(profile="shadow") == 1


# ----------------------------------------------------------------- Shadows: profiles and pods


def test_several_shadows_of_one_scheduler_each_decide() -> None:
    shadows = Shadows(Metrics(), now=lambda: TIME)
    fresh = shadows.sync({"prefer": shadow_profile("prefer"), "flat": shadow_profile("flat", scores=[])})
    assert fresh == [TARGET] and shadows.watching(TARGET) and not shadows.watching("placer")
    cluster = three_nodes()
    assert shadows.created(web())
    while shadows.decide_next(cluster):
        pass
    shadows.bound(pod_info(pod("web", cpu="1", scheduler=TARGET, node_name="c")))
    assert shadows.recorders["prefer"].counts["different"] == 1
    assert shadows.recorders["flat"].counts["equal"] == 1  # every node totals 0 there
    assert {name for name, _ in shadows.status_patches()} == {"flat", "prefer"}
    assert shadows.status_patches() == []  # written once until something changes


def test_a_new_version_keeps_the_memory_a_new_target_clears_it() -> None:
    shadows = Shadows(Metrics())
    shadows.sync({"s": shadow_profile("s")})
    shadows.created(web())
    assert shadows.sync({"s": shadow_profile("s", percentageOfNodesToScore=50)}) == []
    assert shadows.waiting == 1
    other = compile_profile("s", {"schedulerName": "x", "mode": "Shadow", "shadowOf": "other-scheduler"})
    assert shadows.sync({"s": other}) == ["other-scheduler"]
    assert shadows.waiting == 0 and not shadows.watching(TARGET)
    shadows.sync({})
    assert not shadows.recorders


def test_a_profile_no_longer_shadow_has_its_record_removed() -> None:
    shadows = Shadows(Metrics())
    shadows.sync({"s": shadow_profile("s")})
    assert shadows.status_patches() == [("s", {"status": {"shadow": shadows.recorders["s"].status()}})]
    shadows.sync({})  # the profile went Active (or away)
    assert shadows.changed.is_set()
    assert shadows.status_patches() == [("s", {"status": {"shadow": None}})]  # merge patch: removed
    shadows.unwritten("s", {"status": {"shadow": None}})  # that write failed: once more
    assert shadows.status_patches() == [("s", {"status": {"shadow": None}})]
    assert shadows.status_patches() == []


def test_a_shadow_decides_on_every_node_without_preemption() -> None:
    rec = recorder()
    assert rec.profile.percentage_of_nodes_to_score == 100 and rec.profile.post_filters == ()
    assert [p.name for p in rec.source.post_filters] == ["DynamicResources", "DefaultPreemption"]


def test_a_started_term_resumes_from_what_the_object_shows() -> None:
    shadows = Shadows(Metrics())
    shadows.sync({"s": shadow_profile("s")})
    shadows.observe_status("s", {"decisions": 4, "same": 4})
    assert shadows.recorders["s"].counts["decisions"] == 4
    shadows.observe_status("s", {"decisions": 9, "same": 9})  # another leader's count, echoed
    assert shadows.recorders["s"].counts["decisions"] == 4  # not while this one counts
    shadows.start_term()
    assert shadows.recorders["s"].counts["decisions"] == 9


# ----------------------------------------------------------------- ownership and status (registry)


def test_a_shadow_owns_nothing_and_conflicts_with_no_one() -> None:
    reg = ProfileRegistry(ClusterState(), Metrics())
    reg.upsert(profile("shadow", "placer", created="2024-01-01T00:00:00Z", mode="Shadow", shadowOf=TARGET))
    reg.upsert(profile("active", "placer", created="2025-01-01T00:00:00Z"))
    reg.upsert(profile("shadow-2", "x", mode="Shadow", shadowOf=TARGET))
    active = reg.active("placer")
    assert active is not None and active.name == "active"
    assert reg.active(TARGET) is None and reg.active("x") is None
    assert set(reg.shadow_profiles()) == {"shadow", "shadow-2"}
    statuses = {name: (s.status, s.reason, s.message) for name, s in reg.status_updates()}
    assert statuses["active"][:2] == ("True", "Loaded")
    message = 'shadowing pods with schedulerName "default-scheduler" (binds none)'
    assert statuses["shadow"] == ("True", "Loaded", message)


def test_shadow_without_shadow_of_is_invalid_args() -> None:
    reg = ProfileRegistry(ClusterState(), Metrics())
    reg.upsert(profile("shadow", "s", mode="Shadow"))
    assert reg.shadow_profiles() == {} and reg.active("s") is None
    [(_, status)] = reg.status_updates()
    assert (status.status, status.reason) == ("False", "InvalidArgs")
    assert "spec.shadowOf: Required value: required when spec.mode is Shadow" in status.message


# ----------------------------------------------------------------- the state: watch hand-off, no writes


def shadow_state() -> tuple[Any, FakeKube]:
    kube = FakeKube()
    state = unit_state(kube)
    state.cache.observe_node(node("a"))
    state.cache.observe_node(node("b"))
    state.profile_feed.upsert(profile("shadow", "shadow-scheduler", mode="Shadow", shadowOf=TARGET,
                                  scores=[{"name": "PreferNode", "args": {"nodes": ["b"]}}]))
    return state, kube


def test_the_state_hands_shadowed_pods_over_and_queues_none() -> None:
    state, kube = shadow_state()
    state.cache.observe_pod(pod("web", cpu="1", scheduler=TARGET))
    shadows = state.shadows
    assert shadows.waiting == 1 and len(state.queue) == 0
    assert shadows.decide_next(state.cluster)
    assert "default/web" not in state.cluster.pods  # never assumed
    state.cache.observe_pod(pod("web", cpu="1", scheduler=TARGET, node_name="b"))
    assert shadows.recorders["shadow"].counts["same"] == 1
    state.cache.observe_pod(pod("gone", cpu="1", scheduler=TARGET))
    state.cache.pod_deleted(pod("gone", scheduler=TARGET))
    assert shadows.waiting == 0
    assert kube.pod_writes == [] and kube.events == [] and kube.binds == []


def test_a_follower_decides_nothing_and_a_new_leader_queues_the_pending_pods() -> None:
    state, _ = shadow_state()
    state._stopped_leading()
    state.leader = type("Follower", (), {"is_leader": False})()  # what is_leader() reads
    state.cache.observe_pod(pod("web", cpu="1", scheduler=TARGET))
    assert state.shadows.waiting == 0
    state.leader = None
    state.shadows.start_term()
    state.cache.enqueue_shadowed(TARGET)
    assert state.shadows.waiting == 1


# ----------------------------------------------------------------- the loop's budget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CostlyShadows:
    """Counts decisions; each advances the clock by `cost` seconds."""

    def __init__(self, clock: Clock, cost: float) -> None:
        self.clock, self.cost, self.decided, self.waiting = clock, cost, 0, 1_000

    def decide_next(self, cluster: ClusterState) -> bool:
        self.decided += 1
        self.clock.now += self.cost
        return True


def test_busy_time_gives_shadow_decisions_only_their_share() -> None:
    clock = Clock()
    shadows = CostlyShadows(clock, cost=0.0005)
    work = ShadowWork(shadows, ClusterState(), share=0.05, clock=clock)  # type: ignore[arg-type]
    for _ in range(10_000):  # 10 s of active pods, 1 ms each
        clock.now += 0.001
        work.busy()
    spent = shadows.decided * shadows.cost
    assert 0.04 * 10 <= spent <= 0.06 * 10  # about 5 % of the time


def test_idle_time_is_given_in_slices() -> None:
    clock = Clock()
    shadows = CostlyShadows(clock, cost=0.0005)
    work = ShadowWork(shadows, ClusterState(), time_slice=0.002, clock=clock)  # type: ignore[arg-type]
    assert work.idle()
    assert shadows.decided == 4
