"""Kopf handlers: a few lines each, feeding the state. All return None, so Kopf writes nothing.

Pods and nodes are not among them: they come through Placer's own watches
(`placer.controller.informers.informer`), where an event costs a tenth of what it costs through Kopf.

Only `@kopf.on.event` (no on.create/resume, daemons or timers: those would write annotations,
finalizers or status on pods) and no `@kopf.index` (an index holds every handler back until the
whole initial listing is indexed). The handlers are registered on a per-operator registry so
that several operators can run in one process (tests).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from placer.controller._kopf import kopf
from placer.controller.lifecycle.kopf_settings import configure_settings
from placer.controller.options import Options
from placer.controller.state import SchedulerState
from placer.controller.transport.client import connection_info
from placer.engine.catalog import Kind
from placer.engine.kinds import KINDS as CATALOG_KINDS

__all__ = ["register"]

DISCOVERY_MODULE = os.path.join("kopf", "_cogs", "clients", "scanning.py")


def register(registry: kopf.OperatorRegistry, options: Options) -> None:
    """Register the handlers of one operator instance; the state comes from `memo.placer`."""

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        configure_settings(settings, options)
        memo.placer.kopf_ready = True

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_: Any) -> None:
        # Stop binding and release the Lease now: Kopf runs cleanup handlers before it waits
        # (up to 5 s) for its own lingering tasks, so a follower takes over without that delay.
        await memo.placer_stop()
        # A watch-stream cancelled at the wrong moment leaves its "pause-waiter" task behind (the
        # async generator that would cancel it is not finalised yet), and so does Kopf's API
        # discovery stopped half-way (its requests are tasks of `asyncio.as_completed`, which
        # nobody cancels; they retry forever on a closed session): Kopf then waits 5 s for them.
        # Its watchers and observers are all gone when cleanup handlers run: nothing waits on them.
        for task in asyncio.all_tasks():
            if task.get_name().startswith("pause-waiter for ") or _kopf_discovery(task):
                task.cancel()

    @kopf.on.login(registry=registry)
    async def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
        state: SchedulerState = memo.placer
        assert state.kube is not None
        return await connection_info(state.kube.configuration)

    @kopf.on.event("placer.dev", "v1alpha1", "schedulerprofiles", registry=registry)
    async def profile_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        memo.placer.profile_event(event)

    for kind in CATALOG_KINDS:  # namespaces, services, workloads, ...: one handler per kind, one path
        register_catalog_kind(registry, kind)


def _kopf_discovery(task: asyncio.Task[Any]) -> bool:
    """Whether `task` is one of Kopf's API discovery requests (`kopf._cogs.clients.scanning`)."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and code.co_filename.endswith(DISCOVERY_MODULE)


def register_catalog_kind(registry: kopf.OperatorRegistry, kind: Kind) -> None:
    @kopf.on.event(kind.api_version, kind.plural, registry=registry, id=f"{kind.plural}_event")
    async def object_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        memo.placer.object_event(kind, event)
