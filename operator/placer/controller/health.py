"""`/healthz` and `/metrics` on `--metrics-port`, served by aiohttp inside the operator's loop."""

from __future__ import annotations

import logging

from aiohttp import web

from placer.controller.state import SchedulerState

__all__ = ["HealthServer"]

logger = logging.getLogger("placer.health")

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class HealthServer:
    """200 "ok" while healthy, else 500 with a short reason; Prometheus text on /metrics."""

    def __init__(self, state: SchedulerState, host: str, port: int) -> None:
        self.state = state
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
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        logger.info("serving /healthz and /metrics on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        healthy, reason = self.state.health()
        return web.Response(text=reason + "\n", status=200 if healthy else 500)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.state.metrics.render().encode(), headers={"Content-Type": PROMETHEUS_TEXT})
