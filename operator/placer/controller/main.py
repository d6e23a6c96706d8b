"""Wiring: logging, the state, the background tasks, and Kopf.

`run()` is what `placer run` calls; `operate()` is the same operator as a coroutine, for tests
(stop it with `stop_flag`, or cancel it). Each call builds its own Kopf registry, settings and
state, so several operators can share a process (each in its own thread and event loop: Kopf
cancels every task created after it started when it exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import kopf
from kubernetes_asyncio.config import ConfigException

from placer.controller.handlers import register
from placer.controller.health import HealthServer
from placer.controller.informers import node_informer, pod_informer
from placer.controller.kube import ApiError, KubeClient
from placer.controller.loop import SchedulingLoop
from placer.controller.options import Options
from placer.controller.settings import configure_settings
from placer.controller.state import SchedulerState
from placer.plugins import log_plugins

__all__ = ["LogfmtFormatter", "configure_logging", "operate", "run"]

logger = logging.getLogger("placer")


class LogfmtFormatter(logging.Formatter):
    """Structured logs as logfmt: `ts=... level=info logger=placer.loop msg="..."`."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        quoted = message.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'ts={stamp} level={record.levelname.lower()} logger={record.name} msg="{quoted}"'


def configure_logging(verbose: bool) -> None:
    """Placer at INFO (DEBUG with --verbose: every placement with its top scores); Kopf quiet.

    Kopf logs a line per handled object at INFO, which costs a lot at thousands of pods
    (BENCHMARKS.md); its loggers stay at WARNING unless --verbose.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("placer").setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("kopf").setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("kubernetes_asyncio").setLevel(logging.WARNING)


def _insights() -> Any:
    """Kopf's (internal) insights, so /healthz can tell which resources are being watched."""
    try:
        from kopf._cogs.structs.references import Insights
    except ImportError:  # pragma: no cover - a future Kopf moved it; /healthz then skips the check
        return None
    return Insights()


async def _stop_task(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


class _Runtime:
    """What `operate()` started, and how to stop it: gracefully from Kopf's cleanup handler (before
    Kopf waits for its lingering tasks), and for good after Kopf returns or is cancelled."""

    def __init__(self, state: SchedulerState, scheduling: SchedulingLoop, health: HealthServer | None) -> None:
        self.state = state
        self.scheduling = scheduling
        self.health = health
        self._stopped_scheduling = False

    async def stop_scheduling(self) -> None:
        """Stop deciding, let binds and reports finish (bounded), release the Lease. Idempotent."""
        if self._stopped_scheduling:
            return
        self._stopped_scheduling = True
        state, options = self.state, self.state.options
        state.may_schedule.clear()
        for name in ("scheduling loop", "leader election"):
            task = state.tasks.pop(name, None)
            if task is not None:
                await _stop_task(task)
        if options.release_on_exit:
            await self.scheduling.drain(timeout=min(options.api_timeout, 5.0))
            await state.reporter.drain(timeout=2.0)
            if state.leader is not None:
                await state.leader.release()
        # the informers' streams are tasks started after Kopf's: Kopf would wait 5 s for them
        for name in ("pod watch", "node watch", "podgroup watch"):
            task = state.tasks.pop(name, None)
            if task is not None:
                await _stop_task(task)

    async def close(self) -> None:
        await self.stop_scheduling()
        tasks, self.state.tasks = self.state.tasks, {}
        await asyncio.gather(*(_stop_task(task) for task in tasks.values()))
        if self.health is not None:
            await self.health.stop()
        if self.state.kube is not None:
            await self.state.kube.close()


async def operate(
    options: Options,
    *,
    stop_flag: Any = None,
    ready_flag: Any = None,
    on_state: Callable[[SchedulerState], None] | None = None,
) -> None:
    """Run one operator until `stop_flag` is set (or the task is cancelled)."""
    kube = await KubeClient.connect(
        options.kubeconfig,
        pool_size=max(64, 2 * options.max_binds_in_flight + options.report_workers + 8),
        retries=options.api_retries,
        timeout=options.api_timeout,
        max_backoff=options.api_max_backoff,
    )
    state = SchedulerState(options, kube)
    scheduling = SchedulingLoop(state)
    if on_state is not None:
        on_state(state)
    registry = kopf.OperatorRegistry()
    register(registry, options)
    settings = kopf.OperatorSettings()
    configure_settings(settings, options)
    state.insights = _insights()
    health = HealthServer(state, options.metrics_host, options.metrics_port) if options.metrics_port else None
    runtime = _Runtime(state, scheduling, health)
    try:
        if health is not None:
            await health.start()
        jobs: dict[str, Any] = {
            "coordinator": state.coordinate(),
            "scheduling loop": scheduling.run(),
            "profile status writer": state.statuses.profiles_forever(),
            "shadow status writer": state.statuses.shadows_forever(),
            "node metrics poller": state.node_metrics.forever(),
            "api pinger": state.api.ping_forever(),
            "resync verifier": state.resync.verify_provisional_forever(),
            "relist reconciler": state.resync.reconcile_forever(),
            "pod watch": pod_informer(state).run(),
            "node watch": node_informer(state).run(),
            "podgroup watch": state.group_watch.run(),
            "api prober": state.api.probe_forever(),
        }
        if state.leader is not None:
            jobs["leader election"] = state.leader.run()
        for index in range(options.report_workers):
            jobs[f"reporter {index}"] = state.reporter.worker()
        for name, job in jobs.items():
            state.tasks[name] = asyncio.create_task(job, name=f"placer: {name}")
        await kopf.operator(
            registry=registry,
            settings=settings,
            memo=kopf.Memo(placer=state, placer_stop=runtime.stop_scheduling),
            insights=state.insights,
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
            standalone=True,
            stop_flag=stop_flag,
            ready_flag=ready_flag,
        )
    finally:
        await asyncio.shield(runtime.close())


def run(namespaces: Sequence[str], metrics_port: int, leader_elect: bool, verbose: bool) -> int:
    """`placer run`: the operator until SIGTERM/SIGINT; 1 when it cannot start."""
    configure_logging(verbose)
    options = Options(
        namespaces=tuple(namespaces), metrics_port=metrics_port, leader_elect=leader_elect, verbose=verbose
    )
    logger.info(
        "starting placer (%s, leader election %s, identity %s)",
        "namespaces " + ",".join(namespaces) if namespaces else "all namespaces",
        f"on lease {options.lease_namespace}/{options.lease_name}" if leader_elect else "off",
        options.identity,
    )
    log_plugins()
    try:
        asyncio.run(operate(options))
    except KeyboardInterrupt:
        pass
    except (ApiError, ConfigException, OSError) as error:
        logger.error("placer cannot run: %s", error)
        return 1
    except Exception:  # e.g. Kopf stopping on a watch error it does not retry: logged as one record
        logger.exception("placer stopped on an error")
        return 1
    return 0
