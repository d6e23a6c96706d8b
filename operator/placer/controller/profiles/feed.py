"""SchedulerProfiles as their informer brings them: compiled into the registry, shadow profiles' recorders
kept in step, NodeMetrics polled once a profile uses them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from placer.controller.profiles.registry import ProfileRegistry
from placer.controller.profiles.shadow import Shadows

__all__ = ["ProfileFeed"]


class ProfileFeed:
    def __init__(
        self, registry: ProfileRegistry, shadows: Shadows, *, enqueue_shadowed: Callable[[str], None],
        metrics_wanted: asyncio.Event, is_leader: Callable[[], bool],
    ) -> None:
        self.registry = registry
        self.shadows = shadows
        self.enqueue_shadowed = enqueue_shadowed  # a scheduler newly shadowed: its pending pods decided
        self.metrics_wanted = metrics_wanted  # set when an active profile uses NodeMetrics
        self.is_leader = is_leader

    def upsert(self, raw: Mapping[str, Any]) -> None:
        self.registry.upsert(raw)
        self._sync_shadows()
        status = raw.get("status")
        self.shadows.observe_status(str((raw.get("metadata") or {}).get("name")),
                                    status.get("shadow") if isinstance(status, Mapping) else None)
        if self.registry.uses_metrics:
            self.metrics_wanted.set()

    def delete(self, raw: Mapping[str, Any]) -> None:
        name = (raw.get("metadata") or {}).get("name")
        if isinstance(name, str):
            self.registry.delete(name)
            self._sync_shadows()

    def _sync_shadows(self) -> None:
        """Shadow profiles added, changed or gone: a scheduler newly shadowed has its pending pods
        queued for shadow decisions (when leading; a new term queues them all)."""
        for scheduler_name in self.shadows.sync(self.registry.shadow_profiles()):
            if self.is_leader():
                self.enqueue_shadowed(scheduler_name)
