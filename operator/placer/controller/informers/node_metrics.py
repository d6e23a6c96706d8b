"""metrics.k8s.io NodeMetrics, polled into the cluster for NodeUtilization while an active profile
uses it (every `metrics_poll_interval`, and at once when a profile starts using it). A cluster
without the metrics API (404/503) is tolerated: the profile's status says so."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from placer.controller.signals import Wake
from placer.controller.transport import ApiError
from placer.engine.cluster import ClusterState
from placer.engine.framework import ClusterEvent
from placer.engine.objects import ObjectError
from placer.engine.parsing import parse_node_metrics

__all__ = ["NodeMetricsPoller"]

logger = logging.getLogger("placer.node_metrics")


class MetricsApi(Protocol):
    async def list_node_metrics(self) -> list[Any] | None: ...


class NodeMetricsPoller:
    def __init__(
        self, client: MetricsApi, cluster: ClusterState, wake: Wake, *, wanted_by: Callable[[], bool],
        on_poll: Callable[[], None], interval: float,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.wake = wake
        self.wanted_by = wanted_by  # whether an active profile uses the metrics (NodeUtilization)
        self.on_poll = on_poll  # the profiles' status may say whether the cluster serves the metrics API
        self.interval = interval
        self.wanted = asyncio.Event()  # a profile started using metrics: poll now
        self.api: bool | None = None  # whether the cluster serves metrics.k8s.io (None: not asked yet)
        self._usage: dict[str, dict[str, int]] = {}

    async def poll(self) -> None:
        """One poll of NodeMetrics into the cluster."""
        try:
            items = await self.client.list_node_metrics()
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
                self.cluster.set_node_metrics(name, usage.get(name))
                changed = True
        self._usage = usage
        if changed:
            self.wake(ClusterEvent.NODE_METRICS)
        self.on_poll()  # a NodeUtilization warning may come or go

    async def forever(self) -> None:
        while True:
            if self.wanted_by():
                await self.poll()
            self.wanted.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self.wanted.wait()
