"""metrics.k8s.io NodeMetrics, polled into the cluster for NodeUtilization while an active profile
uses it (every `metrics_poll_interval`, and at once when a profile starts using it). A cluster
without the metrics API (404/503) is tolerated: the profile's status says so."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from placer.controller.transport.client import ApiError
from placer.engine.framework import ClusterEvent
from placer.engine.objects import ObjectError
from placer.engine.parsing import parse_node_metrics

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["NodeMetricsPoller"]

logger = logging.getLogger("placer.node_metrics")


class NodeMetricsPoller:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.wanted = asyncio.Event()  # a profile started using metrics: poll now
        self.api: bool | None = None  # whether the cluster serves metrics.k8s.io (None: not asked yet)
        self._usage: dict[str, dict[str, int]] = {}

    async def poll(self) -> None:
        """One poll of NodeMetrics into the cluster."""
        state = self.state
        assert state.kube is not None
        try:
            items = await state.kube.list_node_metrics()
        except ApiError as error:
            logger.warning("NodeMetrics: %s", error)
            return
        self.api = items is not None
        usage: dict[str, dict[str, int]] = {}
        for raw in items or ():
            try:
                name, values = parse_node_metrics(raw)
            except ObjectError:
                continue
            usage[name] = values
        changed = False
        for name in self._usage.keys() | usage.keys():
            if self._usage.get(name) != usage.get(name):
                state.cluster.set_node_metrics(name, usage.get(name))
                changed = True
        self._usage = usage
        if changed:
            state.wake(ClusterEvent.NODE_METRICS)
        state.profiles.mark_all()  # a NodeUtilization warning may come or go

    async def forever(self) -> None:
        while True:
            if self.state.profiles.uses_metrics:
                await self.poll()
            self.wanted.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.state.options.metrics_poll_interval):
                    await self.wanted.wait()
