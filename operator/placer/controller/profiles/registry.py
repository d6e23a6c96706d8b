"""The SchedulerProfile registry: compiled profiles, who owns which schedulerName, and the status.

- A spec is compiled once per change. A bad spec leaves the last good compiled version in place
  (it keeps scheduling) and sets `Ready=False` with the engine's message and its reason:
  `UnknownPlugin` when it names a plugin no installed package provides, else `InvalidArgs`.
- Two profiles claiming one schedulerName: the older (creationTimestamp, then name) owns it, the
  other gets `Ready=False, reason=Conflict`. Every change re-evaluates ownership, so deleting the
  owner hands the name to the next claimant.
- A Shadow profile (`spec.mode: Shadow`) owns no schedulerName, so it conflicts with no one; it
  is Ready once it compiles, and `shadow_profiles()` hands it to `placer.controller.profiles.shadow`,
  which finds it by the `spec.shadowOf` it watches (several may shadow one scheduler).
- `active(scheduler_name)` is a dict lookup of an immutable `Profile`: the loop takes it once per
  cycle, so no pod is ever scored by a mix of two versions.
- The status (`observedGeneration` and the `Ready` condition) is written through the status
  subresource only when it differs from what the object shows or what we last wrote, and only
  by the leader (the caller decides). Every replica exports the condition it computes as
  `placer_profile_ready{profile,reason}` (1 when Ready is True), kept current at every change.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from placer.controller.metrics import Metrics
from placer.engine.cluster import ClusterState
from placer.engine.parsing import parse_timestamp
from placer.engine.profile import Profile, ProfileError, compile_profile

__all__ = ["ProfileEntry", "ProfileRegistry", "ReadyStatus", "uses_node_utilization"]

logger = logging.getLogger("placer.profiles")

OwnerChange = Callable[[str, Profile | None, Profile | None], None]


def uses_node_utilization(profile: Profile) -> bool:
    return any(p.name == "NodeUtilization" for p in (*profile.filters, *(s for s, _ in profile.scores)))


@dataclass(frozen=True, slots=True)
class ReadyStatus:
    """`status.observedGeneration` and the Ready condition, as written or observed."""

    generation: int
    status: str
    reason: str
    message: str
    last_transition: str = ""

    def same(self, other: ReadyStatus | None) -> bool:
        return other is not None and (self.generation, self.status, self.reason, self.message) == (
            other.generation, other.status, other.reason, other.message)

    def patch(self) -> dict[str, Any]:
        return {
            "status": {
                "observedGeneration": self.generation,
                "conditions": [{
                    "type": "Ready",
                    "status": self.status,
                    "reason": self.reason,
                    "message": self.message,
                    "lastTransitionTime": self.last_transition,
                    "observedGeneration": self.generation,
                }],
            }
        }


def _observed_status(raw: Mapping[str, Any]) -> ReadyStatus | None:
    status = raw.get("status")
    if not isinstance(status, Mapping):
        return None
    generation = status.get("observedGeneration")
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return ReadyStatus(
                int(generation) if isinstance(generation, int) else -1,
                str(condition.get("status") or ""), str(condition.get("reason") or ""),
                str(condition.get("message") or ""), str(condition.get("lastTransitionTime") or ""),
            )
    return None


@dataclass
class ProfileEntry:
    """One SchedulerProfile object: its last good compiled version and its current error."""

    name: str
    uid: str
    created: float
    generation: int = 0
    spec: Any = None
    compiled: Profile | None = None  # the last good version
    error: str | None = None  # why the current spec cannot be used
    error_reason: str = ""  # the status reason of `error` (ProfileError.reason)
    observed: ReadyStatus | None = None  # what the object shows
    written: ReadyStatus | None = None  # what we wrote and the watch has not shown yet

    @property
    def order(self) -> tuple[float, str]:
        return (self.created, self.name)


class ProfileRegistry:
    def __init__(self, cluster: ClusterState, metrics: Metrics, on_owner_change: OwnerChange | None = None) -> None:
        self.cluster = cluster
        self.metrics = metrics
        self.on_owner_change = on_owner_change
        self.entries: dict[str, ProfileEntry] = {}
        self._active: dict[str, Profile] = {}
        self._owners: dict[str, ProfileEntry] = {}
        self.dirty: set[str] = set()
        self.changed = asyncio.Event()

    # ----------------------------------------------------------------- lookups (hot path)

    def active(self, scheduler_name: str) -> Profile | None:
        return self._active.get(scheduler_name)

    def scheduler_names(self) -> list[str]:
        return list(self._active)

    @property
    def uses_metrics(self) -> bool:
        profiles = (*self._active.values(), *self.shadow_profiles().values())
        return any(uses_node_utilization(profile) for profile in profiles)

    def shadow_profiles(self) -> dict[str, Profile]:
        """Shadow profiles (API.md §5) by name, each its last good version: they own no schedulerName."""
        return {name: entry.compiled for name, entry in self.entries.items()
                if entry.compiled is not None and entry.compiled.shadow}

    # ----------------------------------------------------------------- changes (from the watch)

    def upsert(self, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return
        uid = str(meta.get("uid") or "")
        spec = raw.get("spec")
        generation = meta.get("generation")
        generation = generation if isinstance(generation, int) else 0
        entry = self.entries.get(name)
        if entry is None or entry.uid != uid:
            entry = ProfileEntry(name, uid, parse_timestamp(meta.get("creationTimestamp")))
            self.entries[name] = entry
            changed = True
        else:
            changed = generation != entry.generation or spec != entry.spec
        entry.observed = _observed_status(raw)
        if entry.written is not None and entry.written.same(entry.observed):
            entry.written = None
        if changed:
            entry.generation = generation
            entry.spec = copy.deepcopy(spec)
            self._compile(entry)
            self._reassign()
        self._mark(name)

    def delete(self, name: str) -> None:
        if self.entries.pop(name, None) is not None:
            logger.info("profile %s deleted", name)
            self._reassign()  # (which re-publishes the Ready gauge without it)

    def _compile(self, entry: ProfileEntry) -> None:
        try:
            entry.compiled = compile_profile(entry.name, entry.spec, entry.generation)
        except ProfileError as error:
            entry.error, entry.error_reason = str(error), error.reason
            self.metrics.reloads.inc(profile=entry.name, result="invalid")
            kept = f"; generation {entry.compiled.generation} keeps scheduling" if entry.compiled else ""
            logger.warning("profile %s generation %d is invalid%s: %s", entry.name, entry.generation, kept, error)
        else:
            entry.error = None
            self.metrics.reloads.inc(profile=entry.name, result="success")
            logger.info("profile %s generation %d loaded (schedulerName %s)",
                        entry.name, entry.generation, entry.compiled.scheduler_name)

    def _reassign(self) -> None:
        """Who owns each schedulerName: the oldest claimant with a usable (last good) version."""
        owners: dict[str, ProfileEntry] = {}
        for entry in self.entries.values():
            if entry.compiled is None or entry.compiled.shadow:  # a shadow owns no pods
                continue
            name = entry.compiled.scheduler_name
            holder = owners.get(name)
            if holder is None or entry.order < holder.order:
                owners[name] = entry
        previous = self._active
        self._owners = owners
        self._active = {name: entry.compiled for name, entry in owners.items() if entry.compiled is not None}
        for name in previous.keys() | self._active.keys():
            old, new = previous.get(name), self._active.get(name)
            if old is not new and self.on_owner_change is not None:
                self.on_owner_change(name, old, new)
        self.mark_all()

    # ----------------------------------------------------------------- status

    def _mark(self, name: str) -> None:
        self.dirty.add(name)
        self.changed.set()
        self._publish_ready()

    def mark_all(self) -> None:
        """Re-evaluate every status (ownership moved, metrics appeared, a new leader)."""
        self.dirty.update(self.entries)
        self.changed.set()
        self._publish_ready()

    def _publish_ready(self) -> None:
        """`placer_profile_ready{profile,reason}`: each profile's Ready condition as `desired` makes
        it (what the leader writes), on every replica; whatever ownership, compilation or deletion
        changed is in the one assignment (a profile's reason moving or the profile gone leave no
        stale series)."""
        statuses = {name: self.desired(entry, warnings=False) for name, entry in self.entries.items()}
        self.metrics.profile_ready.replace(
            ({"profile": name, "reason": status.reason}, 1.0 if status.status == "True" else 0.0)
            for name, status in statuses.items()
        )

    def desired(self, entry: ProfileEntry, warnings: bool = True) -> ReadyStatus:
        """The status the object should show now (without lastTransitionTime); `warnings`: with the
        plugins' warnings in the message (the condition's status and reason never depend on them)."""
        generation = entry.generation
        if entry.error is not None:
            kept = f"; generation {entry.compiled.generation} keeps scheduling" if entry.compiled else ""
            return ReadyStatus(generation, "False", entry.error_reason, entry.error + kept)
        assert entry.compiled is not None
        if entry.compiled.shadow:
            return self._shadow_ready(entry, entry.compiled, warnings)
        scheduler_name = entry.compiled.scheduler_name
        owner = self._owners.get(scheduler_name)
        if owner is entry:
            message = f'scheduling pods with schedulerName "{scheduler_name}"'
            found = entry.compiled.warnings(self.cluster) if warnings else []
            if found:
                message += "; " + "; ".join(found)
            return ReadyStatus(generation, "True", "Loaded", message)
        holder = owner.name if owner is not None else "?"
        return ReadyStatus(
            generation, "False", "Conflict",
            f'schedulerName "{scheduler_name}" is already served by the older profile "{holder}"',
        )

    def _shadow_ready(self, entry: ProfileEntry, compiled: Profile, warnings: bool = True) -> ReadyStatus:
        """A shadow profile is Ready as soon as it compiles: it conflicts with no one."""
        message = f'shadowing pods with schedulerName "{compiled.shadow_of}" (binds none)'
        found = compiled.warnings(self.cluster) if warnings else []
        if found:
            message += "; " + "; ".join(found)
        return ReadyStatus(entry.generation, "True", "Loaded", message)

    def status_updates(self) -> list[tuple[str, ReadyStatus]]:
        """The statuses to write now (clears the dirty marks); mark them written once they are."""
        updates: list[tuple[str, ReadyStatus]] = []
        for name in sorted(self.dirty):
            entry = self.entries.get(name)
            if entry is None:
                continue
            want = self.desired(entry)
            have = entry.written or entry.observed
            if want.same(have):
                continue
            keep = have is not None and have.status == want.status and have.last_transition
            since = have.last_transition if keep and have is not None else _now_seconds()
            updates.append((name, ReadyStatus(want.generation, want.status, want.reason, want.message, since)))
        self.dirty.clear()
        return updates

    def mark_written(self, name: str, status: ReadyStatus) -> None:
        entry = self.entries.get(name)
        if entry is not None:
            entry.written = status


def _now_seconds() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
