"""The profile status writer: each SchedulerProfile's `Ready` condition and a Shadow profile's
`status.shadow`, through the status subresource, one merge patch per change; only the leader writes.
A profile deleted meanwhile (404) is dropped; any other failure is counted and retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from placer.controller.metrics import Metrics
from placer.controller.profiles.registry import ProfileRegistry
from placer.controller.profiles.shadow import Shadows
from placer.controller.transport import ApiError, Reply

__all__ = ["StatusWriter"]

logger = logging.getLogger("placer.statuses")


class ProfileStatusApi(Protocol):
    async def patch_profile_status(self, name: str, patch: Mapping[str, Any]) -> Reply: ...


class StatusWriter:
    def __init__(
        self, client: ProfileStatusApi, profiles: ProfileRegistry, shadows: Shadows, metrics: Metrics, *,
        writing: Callable[[], bool], retry_delay: float, shadow_interval: float,
    ) -> None:
        self.client = client
        self.profiles = profiles
        self.shadows = shadows
        self.metrics = metrics
        self._writing = writing  # only the leader writes, once it schedules
        self.retry_delay = retry_delay
        self.shadow_interval = shadow_interval

    async def profiles_forever(self) -> None:
        """Write profile statuses when they change (`ProfileRegistry.changed`)."""
        profiles = self.profiles
        while True:
            await profiles.changed.wait()
            profiles.changed.clear()
            if not self._writing():
                continue
            for name, status in profiles.status_updates():
                written = await self._patch(name, status.patch())
                if written:
                    profiles.mark_written(name, status)
                elif written is False:
                    profiles.dirty.add(name)
                    asyncio.get_running_loop().call_later(self.retry_delay, profiles.changed.set)

    async def shadows_forever(self) -> None:
        """Write shadow profiles' `status.shadow` when it changed, at most once per interval per
        profile."""
        shadows = self.shadows
        while True:
            await shadows.changed.wait()
            shadows.changed.clear()
            if not self._writing():
                continue
            for name, patch in shadows.status_patches():
                if await self._patch(name, patch) is False:
                    shadows.unwritten(name, patch)
            await asyncio.sleep(self.shadow_interval)

    async def _patch(self, name: str, patch: Mapping[str, Any]) -> bool | None:
        """True when written, None when the profile is gone (404), False when it failed (counted)."""
        try:
            reply = await self.client.patch_profile_status(name, patch)
        except ApiError as error:
            reply = None
            logger.warning("status of profile %s: %s", name, error)
        if reply is not None and reply.ok:
            return True
        if reply is not None and reply.status == 404:
            return None
        self.metrics.api_errors.inc(call="patch_profile_status")
        return False
