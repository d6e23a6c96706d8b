"""`/healthz` and `/metrics` on `--metrics-port`, served by aiohttp inside the operator's loop, and
what healthy means (`health`)."""

from __future__ import annotations

import logging
import time

from aiohttp import web

from placer.controller.state import SchedulerState

__all__ = ["HealthServer", "health"]

logger = logging.getLogger("placer.health")

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def health(state: SchedulerState) -> tuple[bool, str]:
    """(healthy, reason) for /healthz: every background task running, Kopf started and watching,
    the initial sync done, and the API server heard from within `health_window`."""
    for name, task in state.tasks.items():
        if task.done():
            error = None if task.cancelled() else task.exception()
            return False, f"{name} stopped: {error!r}"
    if not state.kopf_ready:
        return False, "starting"
    if state.insights is not None:
        watched = {resource.plural for resource in getattr(state.insights, "watched_resources", ())}
        missing = {"schedulerprofiles"} - watched
        missing |= {kind for kind, versions in state.resync.watch_versions.items() if not versions}  # ours
        if missing:
            return False, "not watching " + ", ".join(sorted(missing))
    if not state.synced:
        return False, "initial sync not done"
    if state.kube is not None:
        last = state.kube.last_answer
        if last is None or time.monotonic() - last > state.options.health_window:
            return False, f"API server not answering: {state.kube.last_failure or 'no answer yet'}"
    return True, "ok"


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
        healthy, reason = health(self.state)
        return web.Response(text=reason + "\n", status=200 if healthy else 500)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.state.metrics.render().encode(), headers={"Content-Type": PROMETHEUS_TEXT})
