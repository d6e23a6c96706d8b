"""`/healthz`, `/livez`, `/readyz` and `/metrics` on `--metrics-port`, served by aiohttp inside the
operator's loop, and what each health endpoint checks.

As a control-plane component's (kube-scheduler's: `k8s.io/apiserver/pkg/server/healthz`), each is a
list of named checks: `GET /readyz` is 200 `ok` when every check passes, else 500 listing each check
(`[+]name ok`, `[-]name failed: reason`) and `readyz check failed`; `?verbose` lists them on success
too, `?exclude=NAME` (repeatable) leaves checks out, `GET /readyz/NAME` runs one. What they check:

- `/livez` (the kubelet's liveness and startup probes): `ping` (the event loop answers) and `tasks`
  (every background task runs: one that died needs a restart). An API server that does not answer
  is not a reason to restart, as for kube-scheduler, whose `/livez` checks nothing but `ping`.
- `/readyz` (readiness): `ping`, `tasks`, `started` (Kopf started), `watches` (every kind watched),
  `informer-sync` (the first resync done: kube-scheduler's `sched-handler-sync`), `api-server`
  (answered within `health_window`), `shutdown` (not stopping: kube's `shutdown` check).
- `/healthz` (API.md; kube-scheduler still serves it, deprecated): `/readyz` without `shutdown`, a
  failure answered with its first failing check's reason alone (as before `/readyz` existed).

A follower is ready: it keeps warm caches and takes over when the leader goes (kube-scheduler's
follower is ready too once synced).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from aiohttp import web

from placer.controller.state import SchedulerState

__all__ = ["HEALTHZ", "LIVEZ", "READYZ", "HealthServer", "health", "run_checks"]

logger = logging.getLogger("placer.health")

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"

#: a check: its name, and what fails (None: it passes)
Check = tuple[str, Callable[[SchedulerState], str | None]]


def _ping(state: SchedulerState) -> str | None:
    return None


def _tasks(state: SchedulerState) -> str | None:
    for name, task in state.tasks.items():
        if task.done():
            error = None if task.cancelled() else task.exception()
            return f"{name} stopped: {error!r}"
    return None


def _started(state: SchedulerState) -> str | None:
    return None if state.kopf_ready else "starting"


def _watches(state: SchedulerState) -> str | None:
    if state.insights is None:
        return None
    watched = {resource.plural for resource in getattr(state.insights, "watched_resources", ())}
    missing = {"schedulerprofiles"} - watched
    missing |= {kind for kind, versions in state.resync.watch_versions.items() if not versions}  # ours
    return "not watching " + ", ".join(sorted(missing)) if missing else None


def _synced(state: SchedulerState) -> str | None:
    return None if state.synced else "initial sync not done"


def _api_server(state: SchedulerState) -> str | None:
    if state.kube is None:
        return None
    last = state.kube.last_answer
    if last is None or time.monotonic() - last > state.options.health_window:
        return f"API server not answering: {state.kube.last_failure or 'no answer yet'}"
    return None


def _shutdown(state: SchedulerState) -> str | None:
    return "process is shutting down" if state.shutting_down else None


LIVEZ: tuple[Check, ...] = (("ping", _ping), ("tasks", _tasks))
HEALTHZ: tuple[Check, ...] = (
    *LIVEZ, ("started", _started), ("watches", _watches), ("informer-sync", _synced), ("api-server", _api_server),
)
READYZ: tuple[Check, ...] = (*HEALTHZ, ("shutdown", _shutdown))


def run_checks(state: SchedulerState, checks: Sequence[Check]) -> list[tuple[str, str | None]]:
    """Each check's name and what failed (None: passed)."""
    return [(name, check(state)) for name, check in checks]


def health(state: SchedulerState) -> tuple[bool, str]:
    """(healthy, reason) for /healthz: every background task running, Kopf started and watching,
    the initial sync done, and the API server heard from within `health_window`."""
    for _, reason in run_checks(state, HEALTHZ):
        if reason is not None:
            return False, reason
    return True, "ok"


class HealthServer:
    """The health endpoints (the module's docstring) and Prometheus text on /metrics."""

    def __init__(self, state: SchedulerState, host: str, port: int) -> None:
        self.state = state
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        for path, checks in (("/livez", LIVEZ), ("/readyz", READYZ)):
            app.router.add_get(path, self._endpoint(path[1:], checks))
            for name, check in checks:
                app.router.add_get(f"{path}/{name}", self._single(name, check))
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        logger.info("serving /healthz, /livez, /readyz and /metrics on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        if "verbose" in request.query:
            return self._listing("healthz", HEALTHZ, request)
        healthy, reason = health(self.state)
        return web.Response(text=reason + "\n", status=200 if healthy else 500)

    def _endpoint(self, endpoint: str, checks: Sequence[Check]) -> Callable[[web.Request], object]:
        async def handle(request: web.Request) -> web.Response:
            return self._listing(endpoint, checks, request)
        return handle

    def _single(self, name: str, check: Callable[[SchedulerState], str | None]) -> Callable[[web.Request], object]:
        async def handle(request: web.Request) -> web.Response:
            reason = check(self.state)
            if reason is None:
                return web.Response(text="ok\n")
            return web.Response(text=f"internal server error: {reason}\n", status=500)
        return handle

    def _listing(self, endpoint: str, checks: Sequence[Check], request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", ()))
        results = run_checks(self.state, [check for check in checks if check[0] not in excluded])
        failed = any(reason is not None for _, reason in results)
        if not failed and "verbose" not in request.query:
            return web.Response(text="ok\n")
        lines = [f"[+]{name} ok" if reason is None else f"[-]{name} failed: {reason}" for name, reason in results]
        lines += [f"[+]{name} excluded: ok" for name in sorted(excluded)]
        lines.append(f"{endpoint} check {'failed' if failed else 'passed'}")
        return web.Response(text="\n".join(lines) + "\n", status=500 if failed else 200)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.state.metrics.render().encode(), headers={"Content-Type": PROMETHEUS_TEXT})
