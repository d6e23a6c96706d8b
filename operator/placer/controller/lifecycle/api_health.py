"""Whether the API server answers: a bind that got no answer at all pauses scheduling
(`unreachable`, the loop waits on `up`) until a ping with backoff hears the server again
(`probe_forever`), so an outage costs a ping, not a bind per pending pod; and while idle, a ping now
and then keeps `KubeClient.last_answer` fresh for /healthz (`ping_forever`)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["ApiHealth"]

logger = logging.getLogger("placer.api")


class ApiHealth:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.up = asyncio.Event()  # cleared while the API server does not answer
        self.up.set()
        self._down = asyncio.Event()

    def unreachable(self, why: str) -> None:
        """A call got no answer: pause scheduling until the API server answers a ping again."""
        if self.up.is_set():
            logger.warning("the API server does not answer (%s): scheduling paused until it does", why)
            self.up.clear()
            self._down.set()

    async def probe_forever(self) -> None:
        """While scheduling is paused for an unreachable API server, ping it with backoff."""
        state = self.state
        assert state.kube is not None
        while True:
            await self._down.wait()
            delay = state.options.initial_backoff
            while True:
                await asyncio.sleep(delay)
                if await state.kube.ping():
                    break
                delay = min(delay * 2, state.options.max_backoff)
            self._down.clear()
            self.up.set()
            logger.info("the API server answers again: scheduling resumes")
            state.wake()  # pods that backed off meanwhile are retried soon

    async def ping_forever(self) -> None:
        """Keep `last_answer` fresh while idle, so /healthz can tell a dead API server."""
        state = self.state
        assert state.kube is not None
        while True:
            last = state.kube.last_answer
            if last is None or time.monotonic() - last >= state.options.health_ping_interval:
                await state.kube.ping()
            await asyncio.sleep(state.options.health_ping_interval)
