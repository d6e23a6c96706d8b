"""`/healthz`, `/livez`, `/readyz` and `/metrics` on `--metrics-port`, served by aiohttp inside the
operator's loop, and what each health endpoint checks (`HealthChecks`).

As a control-plane component's (kube-scheduler's: `k8s.io/apiserver/pkg/server/healthz`), each is a
list of named checks: `GET /readyz` is 200 `ok` when every check passes, else 500 listing each check
(`[+]name ok`, `[-]name failed: reason`) and `readyz check failed`; `?verbose` lists them on success
too, `?exclude=NAME` (repeatable) leaves checks out, `GET /readyz/NAME` runs one. What they check:

- `/livez` (the kubelet's liveness and startup probes): `ping` (the event loop answers) and `tasks`
  (every background task runs: one that died needs a restart). An API server that does not answer
  is not a reason to restart, as for kube-scheduler, whose `/livez` checks nothing but `ping`.
- `/readyz` (readiness): `ping`, `tasks`, `started` (the operator's tasks started), `watches` (the
  collections it cannot do without are served: the SchedulerProfile CRD), `informer-sync` (every
  informer synced once: kube-scheduler's `sched-handler-sync`), `api-server` (answered within
  `window`), `shutdown` (not stopping: kube's `shutdown` check).
- `/healthz` (API.md; kube-scheduler still serves it, deprecated): `/readyz` without `shutdown`, a
  failure answered with its first failing check's reason alone (`health`).

A follower is ready: it keeps warm caches and takes over when the leader goes (kube-scheduler's
follower is ready too once synced).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web

from placer.controller.metrics import Metrics

__all__ = ["HealthChecks", "HealthServer", "health"]

logger = logging.getLogger("placer.health")

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"

#: a check: its name, and what fails (None: it passes)
Check = tuple[str, Callable[[], "str | None"]]


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
    checks = HealthChecks(lambda: tasks, started=lambda: started, unserved=lambda: unserved, synced=lambda: synced,
                          client=client, window=window)
    for _, check in checks.healthz:
        reason = check()
        if reason is not None:
            return False, reason
    return True, "ok"


class HealthChecks:
    """The named checks of /livez, /readyz and /healthz, each reading the operator through a callable."""

    def __init__(
        self, tasks: Callable[[], Mapping[str, asyncio.Task[Any]]], *, started: Callable[[], bool],
        unserved: Callable[[], Sequence[str]], synced: Callable[[], bool], client: Answering | None, window: float,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._tasks = tasks
        self._started = started
        self._unserved = unserved
        self._synced = synced
        self._client = client
        self._window = window
        self._stopping = stopping
        self.livez: tuple[Check, ...] = (("ping", _ping), ("tasks", self.tasks))
        self.healthz: tuple[Check, ...] = (
            *self.livez, ("started", self.started), ("watches", self.watches), ("informer-sync", self.synced),
            ("api-server", self.api_server),
        )
        self.readyz: tuple[Check, ...] = (*self.healthz, ("shutdown", self.shutdown))

    def tasks(self) -> str | None:
        for name, task in self._tasks().items():
            if task.done():
                error = None if task.cancelled() else task.exception()
                return f"{name} stopped: {error!r}"
        return None

    def started(self) -> str | None:
        return None if self._started() else "starting"

    def watches(self) -> str | None:
        unserved = self._unserved()
        return "not watching " + ", ".join(unserved) if unserved else None

    def synced(self) -> str | None:
        return None if self._synced() else "initial sync not done"

    def api_server(self) -> str | None:
        client = self._client
        if client is None:
            return None
        last = client.last_answer
        if last is None or time.monotonic() - last > self._window:
            return f"API server not answering: {client.last_failure or 'no answer yet'}"
        return None

    def shutdown(self) -> str | None:
        return "process is shutting down" if self._stopping() else None

    def first_failure(self) -> tuple[bool, str]:
        """/healthz's answer: (healthy, the first failing check's reason or "ok")."""
        for _, check in self.healthz:
            reason = check()
            if reason is not None:
                return False, reason
        return True, "ok"


def _ping() -> str | None:
    return None


class HealthServer:
    """The health endpoints (the module's docstring) and Prometheus text on /metrics."""

    def __init__(self, checks: HealthChecks, metrics: Metrics, host: str, port: int) -> None:
        self.checks = checks
        self.metrics = metrics
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        for path, checks in (("/livez", self.checks.livez), ("/readyz", self.checks.readyz)):
            app.router.add_get(path, self._endpoint(path[1:], checks))
            for name, check in checks:
                app.router.add_get(f"{path}/{name}", self._single(check))
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        addresses = self._runner.addresses  # the port bound, when 0 asked for any
        if addresses:
            self.port = addresses[0][1]
        logger.info("serving /healthz, /livez, /readyz and /metrics on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        if "verbose" in request.query:
            return self._listing("healthz", self.checks.healthz, request)
        healthy, reason = self.checks.first_failure()
        return web.Response(text=reason + "\n", status=200 if healthy else 500)

    def _endpoint(self, endpoint: str, checks: Sequence[Check]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            return self._listing(endpoint, checks, request)
        return handle

    @staticmethod
    def _single(check: Callable[[], str | None]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            reason = check()
            if reason is None:
                return web.Response(text="ok\n")
            return web.Response(text=f"internal server error: {reason}\n", status=500)
        return handle

    @staticmethod
    def _listing(endpoint: str, checks: Sequence[Check], request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", ()))
        results = [(name, check()) for name, check in checks if name not in excluded]
        failed = any(reason is not None for _, reason in results)
        if not failed and "verbose" not in request.query:
            return web.Response(text="ok\n")
        lines = [f"[+]{name} ok" if reason is None else f"[-]{name} failed: {reason}" for name, reason in results]
        lines += [f"[+]{name} excluded: ok" for name in sorted(excluded)]
        lines.append(f"{endpoint} check {'failed' if failed else 'passed'}")
        return web.Response(text="\n".join(lines) + "\n", status=500 if failed else 200)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render().encode(), headers={"Content-Type": PROMETHEUS_TEXT})
