"""`placer_profile_ready{profile,reason}`: each SchedulerProfile's Ready condition as the status
writer writes it — 1 when True, 0 otherwise, with its reason (Loaded, InvalidArgs, UnknownPlugin,
Conflict) — one series per profile, gone with the profile."""

from __future__ import annotations

from placer.controller.metrics import Metrics
from placer.controller.profiles.registry import ProfileRegistry
from placer.engine.cluster import ClusterState

from tests.controller.helpers import profile, unit_state

PREFER_A = {"scores": [{"name": "PreferNode", "weight": 10, "args": {"nodes": ["a"]}}]}
BAD_ARGS = {"scores": [{"name": "PreferNode", "weight": 10, "args": {"nodez": ["a"]}}]}
UNKNOWN = {"scores": [{"name": "NoSuchPlugin"}]}


def registry() -> ProfileRegistry:
    return ProfileRegistry(ClusterState(), Metrics())


def ready(reg: ProfileRegistry) -> dict[str, tuple[str, float]]:
    """profile -> (reason, value), failing if a profile has more than one series."""
    found: dict[str, tuple[str, float]] = {}
    for labels, value in reg.metrics.profile_ready.values.items():
        series = dict(labels)
        assert set(series) == {"profile", "reason"}
        assert series["profile"] not in found, f"two series for {series['profile']}"
        found[series["profile"]] = (series["reason"], value)
    return found


def written(reg: ProfileRegistry) -> dict[str, tuple[str, float]]:
    """What the status writer would write now, in the gauge's terms."""
    return {name: (status.reason, 1.0 if status.status == "True" else 0.0) for name, status in reg.status_updates()}


def test_ready_follows_the_condition_through_a_bad_change_and_its_fix() -> None:
    reg = registry()
    reg.upsert(profile("p", "sched", **PREFER_A))
    assert ready(reg) == {"p": ("Loaded", 1.0)} == written(reg)
    reg.upsert(profile("p", "sched", generation=2, **BAD_ARGS))  # the last good version keeps scheduling
    assert ready(reg) == {"p": ("InvalidArgs", 0.0)} == written(reg)
    reg.upsert(profile("p", "sched", generation=3, **UNKNOWN))
    assert ready(reg) == {"p": ("UnknownPlugin", 0.0)} == written(reg)
    reg.upsert(profile("p", "sched", generation=4))
    assert ready(reg) == {"p": ("Loaded", 1.0)} == written(reg)


def test_a_profile_that_never_loaded_is_not_ready() -> None:
    reg = registry()
    reg.upsert(profile("broken", "sched", **BAD_ARGS))
    assert ready(reg) == {"broken": ("InvalidArgs", 0.0)}
    assert reg.active("sched") is None


def test_a_conflict_is_not_ready_until_the_owner_goes() -> None:
    reg = registry()
    reg.upsert(profile("newer", "sched", created="2025-01-02T00:00:00Z"))
    reg.upsert(profile("older", "sched", created="2025-01-01T00:00:00Z"))  # takes the name over
    assert ready(reg) == {"older": ("Loaded", 1.0), "newer": ("Conflict", 0.0)}
    assert written(reg) == ready(reg)
    reg.delete("older")  # the name passes on; the deleted profile's series goes
    assert ready(reg) == {"newer": ("Loaded", 1.0)} == written(reg)
    reg.delete("newer")
    assert ready(reg) == {}
    assert "placer_profile_ready{" not in reg.metrics.render()


def test_a_shadow_profile_is_ready_once_it_compiles() -> None:
    reg = registry()
    reg.upsert(profile("owner", "sched"))
    reg.upsert(profile("shadow", "shadow-sched", mode="Shadow", shadowOf="sched"))
    assert ready(reg) == {"owner": ("Loaded", 1.0), "shadow": ("Loaded", 1.0)} == written(reg)


def test_exported_on_every_replica_from_the_watch() -> None:
    # a follower writes no status, but computes the same condition: its /metrics says it too
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer", **BAD_ARGS))
    text = state.metrics.render()
    assert "# TYPE placer_profile_ready gauge" in text
    assert 'placer_profile_ready{profile="p",reason="InvalidArgs"} 0' in text
    state.profile_feed.upsert(profile("p", "placer", generation=2))
    text = state.metrics.render()
    assert 'placer_profile_ready{profile="p",reason="Loaded"} 1' in text and 'reason="InvalidArgs"' not in text
    state.profile_feed.delete(profile("p", "placer"))
    assert "placer_profile_ready{" not in state.metrics.render()
