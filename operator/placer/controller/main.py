"""Wiring: logging, the state, the background tasks, and Kopf.

`run()` is what `placer run` calls; `operate()` is the same operator as a coroutine, for tests
(stop it with `stop_flag`, or cancel it). Each call builds its own Kopf registry, settings and
state, so several operators can share a process (each in its own thread and event loop: Kopf
cancels every task created after it started when it exits).

Start-up order, for the first binding's sake (a cold start lists thousands of pods): Placer's own
tasks start first, and the first resync lists everything a decision reads (nodes, pods, profiles,
every catalog kind) and lets the scheduling loop run. Kopf (its watches of profiles and the catalog
kinds) and /healthz start only then (`Options.kopf_start_delay` at the latest, should the API
server not answer the resync), and once the first bind is answered or the queue held nothing to
decide (`KOPF_AFTER_FIRST_BIND` at the latest): Kopf's and aiohttp's imports (~0.2 s, done in a
thread holding the GIL) and Kopf's own start-up (API discovery, a LIST per kind) are not on the way
to the first binding, and Kopf's first listing replays whatever changed meanwhile. Nothing on the
way imports them, nor kubernetes_asyncio's generated client (`placer.controller._kopf`,
`placer.controller.transport.kubeconfig`). The methods `@dataclass` generates come compiled from
`placer.dataclass_cache` (`save_compiled`). Until Kopf installs its signal handlers,
SIGTERM/SIGINT stop the operator gracefully here. `placer run` keeps the garbage collector off
until the first resync is filed (`resume_gc`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import gc
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from placer import dataclass_cache
from placer.controller.options import Options
from placer.controller.transport.client import ApiError, KubeClient
from placer.controller.transport.kubeconfig import ConfigError
from placer.controller.transport.listing import PROFILES_PATH, ResyncLists
from placer.controller.transport.proxy_env import ProxyError

if TYPE_CHECKING:
    from placer.controller.lifecycle.health import HealthServer
    from placer.controller.scheduling.loop import SchedulingLoop
    from placer.controller.state import SchedulerState

__all__ = ["LogfmtFormatter", "configure_logging", "operate", "run"]

logger = logging.getLogger("placer")
#: at most this long after the first resync, Kopf's start waits for the first bind's answer
KOPF_AFTER_FIRST_BIND = 1.0


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


def _import_engine(kinds_imported: Callable[[], None] | None = None, save_compiled: bool = False) -> None:
    """The engine, the plugins and the parts of the operator that use them: about 0.3 s of CPU at a
    cold start, done in a thread while the first LISTs are on their way (`operate`).
    `kinds_imported` is called once the catalog's kinds are known (their LISTs can be asked for)."""
    import placer.engine.kinds  # the catalog's kinds (about a third of the engine)

    if kinds_imported is not None:
        kinds_imported()
    import placer.controller.informers.informer
    import placer.controller.scheduling.loop
    import placer.controller.state
    import placer.plugins  # noqa: F401

    if save_compiled:
        dataclass_cache.save()


def _import_kopf_side(save_compiled: bool = False) -> None:
    """Kopf, Placer's handlers and /healthz (aiohttp): what `operate` starts after the first resync."""
    import placer.controller.lifecycle.health
    import placer.controller.lifecycle.kopf_handlers
    import placer.controller.lifecycle.kopf_settings  # noqa: F401

    if save_compiled:
        dataclass_cache.save()
        dataclass_cache.release()  # nothing more to import: the tables are not needed again


def _stop_on_signals() -> asyncio.Event:
    """An event SIGTERM and SIGINT set, until Kopf replaces these handlers with its own (only in the
    main thread, as Kopf; elsewhere it is never set)."""
    signalled = asyncio.Event()
    if threading.current_thread() is threading.main_thread():
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(number, signalled.set)
    return signalled


def _is_set(flag: Any) -> bool:
    """Whether Kopf's `stop_flag` (an asyncio or threading Event, or a Future; or a tuple of them,
    any of which) is raised."""
    if flag is None:
        return False
    if isinstance(flag, tuple):
        return any(_is_set(each) for each in flag)
    if isinstance(flag, asyncio.Future | concurrent.futures.Future):
        return flag.done()
    return bool(flag.is_set())


async def _first_resync(state: SchedulerState, stop_flag: Any, limit: float) -> None:
    """Until the first resync is done, at most `limit` seconds (an API server that does not answer
    must not keep Kopf from starting), or the operator is told to stop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not state.resync.resyncs_done and not _is_set(stop_flag) and loop.time() < deadline:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(0.1, max(deadline - loop.time(), 0.0))):
                await state.resync.resynced.wait()


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
    resume_gc: bool = False,
    save_compiled: bool = False,
) -> None:
    """Run one operator until `stop_flag` is set (or the task is cancelled). `resume_gc`: the garbage
    collector was turned off for the start-up; once the first resync is filed, what exists then is
    frozen (never scanned again: modules, the cluster's objects) and collection resumes.
    `save_compiled` (`placer run`): after each import step, `placer.dataclass_cache` is written if
    the step compiled dataclass methods anew (the next start finds them compiled)."""
    kube = await KubeClient.connect(
        options.kubeconfig,
        pool_size=max(64, 2 * options.max_binds_in_flight + options.report_workers + 8),
        retries=options.api_retries,
        timeout=options.api_timeout,
        max_backoff=options.api_max_backoff,
    )
    # The first resync's big LISTs (nodes, pending pods) are asked for before the engine is
    # imported: the API server prepares them while the import runs in a thread (the loop reading
    # their answers meanwhile), and the first resync takes them over.
    first_lists = ResyncLists.ask(kube, options.namespaces, options.pods_list_page, cached=True)
    loop = asyncio.get_running_loop()

    def ask_others() -> None:  # in the loop's thread: the profiles' and catalog kinds' LISTs
        from placer.engine.kinds import KINDS

        first_lists.ask_others([PROFILES_PATH, *(kind.path() for kind in KINDS)])

    try:
        await asyncio.to_thread(_import_engine, lambda: loop.call_soon_threadsafe(ask_others), save_compiled)
    except BaseException:
        first_lists.close()
        await kube.close()
        raise
    from placer.controller.informers.informer import node_informer, pod_informer
    from placer.controller.scheduling.loop import SchedulingLoop
    from placer.controller.state import SchedulerState
    from placer.plugins import log_plugins

    log_plugins()
    state = SchedulerState(options, kube)
    state.resync.first_lists = first_lists
    scheduling = SchedulingLoop(state)
    if on_state is not None:
        on_state(state)
    runtime = _Runtime(state, scheduling, None)
    try:
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
        # Kopf (the watches of profiles and catalog kinds) and /healthz start once the first resync
        # has listed everything a decision reads: their imports (Kopf, aiohttp: ~0.2 s) and Kopf's
        # own start-up (API discovery, a LIST per kind) then stay off the way to the first binding.
        # The imports run in a thread, so the scheduling loop goes on meanwhile.
        # Until Kopf installs its handlers, SIGTERM/SIGINT stop the operator here, as gracefully.
        signalled = _stop_on_signals()
        await _first_resync(state, (stop_flag, signalled), options.kopf_start_delay)
        if resume_gc:
            gc.freeze()
            gc.enable()
        if _is_set((stop_flag, signalled)):  # told to stop before Kopf started: nothing of Kopf's to stop
            return
        if state.may_schedule.is_set() and state.is_leader():
            await scheduling.under_way(KOPF_AFTER_FIRST_BIND)
        await asyncio.to_thread(_import_kopf_side, save_compiled)
        if _is_set((stop_flag, signalled)):
            return
        from placer.controller._kopf import kopf
        from placer.controller.lifecycle.health import HealthServer
        from placer.controller.lifecycle.kopf_handlers import register
        from placer.controller.lifecycle.kopf_settings import configure_settings

        registry = kopf.OperatorRegistry()
        register(registry, options)
        settings = kopf.OperatorSettings()
        configure_settings(settings, options)
        state.insights = _insights()
        if options.metrics_port:
            runtime.health = HealthServer(state, options.metrics_host, options.metrics_port)
            await runtime.health.start()
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


def run(
    namespaces: Sequence[str], metrics_port: int, leader_elect: bool, verbose: bool, gc_paused: bool = False
) -> int:
    """`placer run`: the operator until SIGTERM/SIGINT; 1 when it cannot start. `gc_paused`: the CLI
    turned the cyclic garbage collector off for the start-up (`operate` turns it back on)."""
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
    try:
        asyncio.run(operate(options, resume_gc=gc_paused, save_compiled=True))
    except KeyboardInterrupt:
        pass
    except ImportError as error:  # PluginsNotInstalled: a source tree, not installed
        print(f"placer run: {error}", file=sys.stderr)
        return 1
    except (ApiError, ConfigError, ProxyError, OSError) as error:  # ProxyError: HTTPS_PROXY & co unusable
        logger.error("placer cannot run: %s", error)
        return 1
    except Exception:  # e.g. Kopf stopping on a watch error it does not retry: logged as one record
        logger.exception("placer stopped on an error")
        return 1
    return 0
