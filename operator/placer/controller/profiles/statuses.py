"""The profile status writer: each SchedulerProfile's `Ready` condition and a Shadow profile's
`status.shadow`, through the status subresource, one merge patch per change; only the leader writes.
A profile deleted meanwhile (404) is dropped; any other failure is counted and retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placer.controller.transport.client import ApiError

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["StatusWriter"]

logger = logging.getLogger("placer.statuses")


class StatusWriter:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state

    def _writing(self) -> bool:
        return self.state.is_leader() and self.state.may_schedule.is_set()

    async def profiles_forever(self) -> None:
        """Write profile statuses when they change (`ProfileRegistry.changed`)."""
        profiles = self.state.profiles
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
                    asyncio.get_running_loop().call_later(self.state.options.initial_backoff, profiles.changed.set)

    async def shadows_forever(self) -> None:
        """Write shadow profiles' `status.shadow` when it changed, at most once per interval per
        profile."""
        shadows = self.state.shadows
        while True:
            await shadows.changed.wait()
            shadows.changed.clear()
            if not self._writing():
                continue
            for name, patch in shadows.status_patches():
                if await self._patch(name, patch) is False:
                    shadows.unwritten(name, patch)
            await asyncio.sleep(self.state.options.shadow_status_interval)

    async def _patch(self, name: str, patch: Mapping[str, Any]) -> bool | None:
        """True when written, None when the profile is gone (404), False when it failed (counted)."""
        assert self.state.kube is not None
        try:
            reply = await self.state.kube.patch_profile_status(name, patch)
        except ApiError as error:
            reply = None
            logger.warning("status of profile %s: %s", name, error)
        if reply is not None and reply.ok:
            return True
        if reply is not None and reply.status == 404:
            return None
        self.state.metrics.api_errors.inc(call="patch_profile_status")
        return False
