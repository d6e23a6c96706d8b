"""The profile registry: last good version keeps scheduling, conflicts, takeover, status writes."""

from __future__ import annotations

from typing import Any

from placer.controller.metrics import Metrics
from placer.controller.profiles.registry import ProfileRegistry
from placer.engine.cluster import ClusterState
from placer.engine.profile import Profile

from tests.controller.helpers import profile

PREFER_A = {"scores": [{"name": "PreferNode", "weight": 10, "args": {"nodes": ["a"]}}]}
BAD_ARGS = {"scores": [{"name": "PreferNode", "weight": 10, "args": {"nodez": ["a"]}}]}


def registry() -> tuple[ProfileRegistry, list[tuple[str, Profile | None, Profile | None]]]:
    changes: list[tuple[str, Profile | None, Profile | None]] = []
    reg = ProfileRegistry(ClusterState(), Metrics(), lambda *change: changes.append(change))
    return reg, changes


def with_status(raw: dict[str, Any], generation: int, status: str, reason: str, message: str) -> dict[str, Any]:
    raw["status"] = {"observedGeneration": generation, "conditions": [{
        "type": "Ready", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": generation}]}
    return raw


def test_load_makes_the_profile_active_and_ready() -> None:
    reg, changes = registry()
    reg.upsert(profile("p", "sched", **PREFER_A))
    active = reg.active("sched")
    assert active is not None and active.name == "p" and active.generation == 1
    assert changes == [("sched", None, active)]
    [(name, status)] = reg.status_updates()
    assert (name, status.status, status.reason, status.generation) == ("p", "True", "Loaded", 1)
    assert 'schedulerName "sched"' in status.message
    assert reg.metrics.reloads.get(profile="p", result="success") == 1


def test_invalid_update_keeps_the_last_good_version() -> None:
    reg, changes = registry()
    reg.upsert(profile("p", "sched", **PREFER_A))
    good = reg.active("sched")
    reg.status_updates()
    reg.upsert(profile("p", "sched", generation=2, **BAD_ARGS))
    assert reg.active("sched") is good  # the same object: nothing changed for the loop
    assert len(changes) == 1
    [(_, status)] = reg.status_updates()
    assert (status.status, status.reason, status.generation) == ("False", "InvalidArgs", 2)
    assert "PreferNode" in status.message and "nodez" in status.message
    assert "generation 1 keeps scheduling" in status.message
    assert reg.metrics.reloads.get(profile="p", result="invalid") == 1
    reg.upsert(profile("p", "sched", generation=3, scores=[{"name": "PreferNode", "args": {"nodes": ["b"]}}]))
    fixed = reg.active("sched")
    assert fixed is not good and fixed is not None and fixed.generation == 3
    [(_, status)] = reg.status_updates()
    assert (status.status, status.reason, status.generation) == ("True", "Loaded", 3)


def test_invalid_from_the_start_schedules_nothing() -> None:
    reg, changes = registry()
    reg.upsert(profile("p", "sched", **BAD_ARGS))
    assert reg.active("sched") is None and changes == []
    [(_, status)] = reg.status_updates()
    assert (status.status, status.reason) == ("False", "InvalidArgs")
    assert "keeps scheduling" not in status.message


def test_an_unknown_plugin_is_its_own_reason_and_the_last_good_version_keeps_scheduling() -> None:
    reg, _ = registry()
    reg.upsert(profile("p", "sched", **PREFER_A))
    good = reg.active("sched")
    reg.status_updates()
    reg.upsert(profile("p", "sched", generation=2, scores=[{"name": "PreferNodes"}]))
    assert reg.active("sched") is good
    [(_, status)] = reg.status_updates()
    assert (status.status, status.reason, status.generation) == ("False", "UnknownPlugin", 2)
    assert 'unknown plugin "PreferNodes" (installed: ' in status.message
    assert status.message.endswith("; generation 1 keeps scheduling")
    reg.upsert(profile("p", "sched", generation=3, **BAD_ARGS))  # the reason follows the current error
    [(_, status)] = reg.status_updates()
    assert (status.status, status.reason, status.generation) == ("False", "InvalidArgs", 3)


def test_the_older_profile_keeps_a_contested_scheduler_name() -> None:
    reg, _ = registry()
    reg.upsert(profile("newer", "sched", created="2025-01-02T00:00:00Z", **PREFER_A))
    reg.upsert(profile("older", "sched", created="2025-01-01T00:00:00Z"))
    active = reg.active("sched")
    assert active is not None and active.name == "older"
    statuses = dict(reg.status_updates())
    assert (statuses["older"].status, statuses["older"].reason) == ("True", "Loaded")
    assert (statuses["newer"].status, statuses["newer"].reason) == ("False", "Conflict")
    assert '"older"' in statuses["newer"].message


def test_same_age_is_decided_by_name() -> None:
    reg, _ = registry()
    reg.upsert(profile("b", "sched"))
    reg.upsert(profile("a", "sched"))
    active = reg.active("sched")
    assert active is not None and active.name == "a"


def test_deleting_the_holder_hands_the_name_over() -> None:
    reg, changes = registry()
    reg.upsert(profile("older", "sched", created="2025-01-01T00:00:00Z"))
    reg.upsert(profile("newer", "sched", created="2025-01-02T00:00:00Z", **PREFER_A))
    reg.status_updates()
    older = reg.active("sched")
    reg.delete("older")
    newer = reg.active("sched")
    assert newer is not None and newer.name == "newer"
    assert changes[-1] == ("sched", older, newer)
    statuses = dict(reg.status_updates())
    assert (statuses["newer"].status, statuses["newer"].reason) == ("True", "Loaded")
    reg.delete("newer")
    assert reg.active("sched") is None
    assert changes[-1] == ("sched", newer, None)


def test_status_is_written_only_when_it_changes() -> None:
    reg, _ = registry()
    raw = profile("p", "sched")
    reg.upsert(raw)
    [(name, status)] = reg.status_updates()
    reg.mark_written(name, status)
    reg.mark_all()
    assert reg.status_updates() == []  # written, the watch has not shown it yet
    # the watch shows what we wrote: still nothing to write
    reg.upsert(with_status(profile("p", "sched"), 1, "True", "Loaded", status.message))
    reg.mark_all()
    assert reg.status_updates() == []


def test_an_unchanged_status_shown_by_the_object_is_not_rewritten_after_a_restart() -> None:
    reg, _ = registry()
    reg.upsert(with_status(profile("p", "sched"), 1, "True", "Loaded", 'scheduling pods with schedulerName "sched"'))
    assert reg.status_updates() == []


def test_last_transition_time_is_kept_while_the_status_stays() -> None:
    reg, _ = registry()
    reg.upsert(with_status(profile("p", "sched", generation=2, **BAD_ARGS), 1, "False", "InvalidArgs", "old"))
    [(_, status)] = reg.status_updates()
    assert status.last_transition == "2025-01-01T00:00:00Z"
    reg.upsert(with_status(profile("p", "sched", generation=3), 2, "False", "InvalidArgs", status.message))
    [(_, status)] = reg.status_updates()
    assert status.status == "True" and status.last_transition != "2025-01-01T00:00:00Z"


def test_a_status_only_event_does_not_recompile() -> None:
    reg, changes = registry()
    reg.upsert(profile("p", "sched"))
    first = reg.active("sched")
    reg.upsert(with_status(profile("p", "sched"), 1, "True", "Loaded", "x"))
    assert reg.active("sched") is first and len(changes) == 1
    assert reg.metrics.reloads.get(profile="p", result="success") == 1


def test_node_utilization_without_metrics_says_so_in_the_status() -> None:
    reg, _ = registry()
    reg.upsert(profile("busy", "sched", scores=[{"name": "NodeUtilization"}]))
    assert reg.uses_metrics
    [(_, status)] = reg.status_updates()
    assert status.status == "True" and "metrics" in status.message.lower()


def test_a_recreated_profile_is_a_new_one() -> None:
    reg, _ = registry()
    reg.upsert(profile("a", "sched", created="2025-01-01T00:00:00Z"))
    reg.upsert(profile("b", "sched", created="2025-01-02T00:00:00Z"))
    reg.delete("a")
    reg.upsert(profile("a", "sched", created="2025-01-03T00:00:00Z", uid="second"))
    active = reg.active("sched")
    assert active is not None and active.name == "b"
