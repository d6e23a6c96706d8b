"""Whether the API server answers: a bind that got no answer at all pauses scheduling
(`unreachable`, the loop waits on `up`) until a ping with backoff hears the server again
(`probe_forever`), so an outage costs a ping, not a bind per pending pod; and while idle, a ping now
and then keeps the client's `last_answer` fresh for /healthz (`ping_forever`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["ApiHealth"]

logger = logging.getLogger("placer.api")


class Pingable(Protocol):
    last_answer: float | None

    async def ping(self) -> bool: ...


class ApiHealth:
    def __init__(
        self, client: Pingable, *, on_back: Callable[[], None], backoff: float, max_backoff: float,
        ping_interval: float,
    ) -> None:
        self.client = client
        self.on_back = on_back  # pods that backed off meanwhile are retried soon
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.ping_interval = ping_interval
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
        while True:
            await self._down.wait()
            delay = self.backoff
            while True:
                await asyncio.sleep(delay)
                if await self.client.ping():
                    break
                delay = min(delay * 2, self.max_backoff)
            self._down.clear()
            self.up.set()
            logger.info("the API server answers again: scheduling resumes")
            self.on_back()

    async def ping_forever(self) -> None:
        """Keep `last_answer` fresh while idle, so /healthz can tell a dead API server."""
        while True:
            last = self.client.last_answer
            if last is None or time.monotonic() - last >= self.ping_interval:
                await self.client.ping()
            await asyncio.sleep(self.ping_interval)
