"""`/healthz` and `/metrics` on `--metrics-port`, served by aiohttp inside the operator's loop, and
what healthy means (`health`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web

from placer.controller.metrics import Metrics

__all__ = ["HealthServer", "health"]

logger = logging.getLogger("placer.health")

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class Answering(Protocol):
    """When the API server last answered (`KubeClient` keeps it)."""

    last_answer: float | None
    last_failure: str | None


def health(
    tasks: Mapping[str, asyncio.Task[Any]], *, started: bool, synced: bool, client: Answering | None, window: float,
    unserved: Sequence[str] = (),
) -> tuple[bool, str]:
    """(healthy, reason) for /healthz: every background task running, the operator started, the
    collections it cannot do without served (`unserved` names those that are not: the
    SchedulerProfile CRD missing), every informer synced once, and the API server heard from
    within `window` seconds."""
    for name, task in tasks.items():
        if task.done():
            error = None if task.cancelled() else task.exception()
            return False, f"{name} stopped: {error!r}"
    if not started:
        return False, "starting"
    if unserved:
        return False, "not watching " + ", ".join(unserved)
    if not synced:
        return False, "initial sync not done"
    if client is not None:
        last = client.last_answer
        if last is None or time.monotonic() - last > window:
            return False, f"API server not answering: {client.last_failure or 'no answer yet'}"
    return True, "ok"


class HealthServer:
    """200 "ok" while healthy, else 500 with a short reason; Prometheus text on /metrics."""

    def __init__(self, check: Callable[[], tuple[bool, str]], metrics: Metrics, host: str, port: int) -> None:
        self.check = check
        self.metrics = metrics
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        addresses = self._runner.addresses  # the port bound, when 0 asked for any
        if addresses:
            self.port = addresses[0][1]
        logger.info("serving /healthz and /metrics on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        healthy, reason = self.check()
        return web.Response(text=reason + "\n", status=200 if healthy else 500)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render().encode(), headers={"Content-Type": PROMETHEUS_TEXT})
