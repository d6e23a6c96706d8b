"""The one object that holds an operator together (kept in Kopf's memo), and its terms of leadership.

What it holds, each part in a module named for its job:

- the engine: the cluster (`ClusterState`), the queue, the `Scheduler` (with the pods waiting on
  Permit), the profiles (`placer.controller.profiles.registry`) and the shadows (`placer.controller.profiles.shadow`);
- `cache` (`placer.controller.informers.cache`): what the informers feed — pods, nodes, profiles — turned
  into engine calls; `nominations` (`placer.controller.informers.nominations`); `catalog`
  (`placer.controller.informers.catalog`): every other kind; `groups` (`placer.controller.informers.groups`) and
  `group_watch` (`placer.controller.informers.group_kinds`): groups of pods and their PodGroups;
- `resync` (`placer.controller.resync`): fresh LISTs, pruning, where the watches resume;
- `statuses` (`placer.controller.profiles.statuses`): the profiles' status writer;
- `node_metrics` (`placer.controller.informers.node_metrics`): NodeMetrics for NodeUtilization;
- `api` (`placer.controller.lifecycle.api_health`): whether the API server answers; /healthz is
  `placer.controller.lifecycle.health`;
- the reporter (events, conditions), the API client and leader election.

Events come in here (`pod_event`, `node_event` from Placer's informers; `profile_event`,
`object_event` from Kopf's handlers) and go to the part that files them; `wake` tells the queue,
the scheduling loop and waiting binding cycles that something changed. `coordinate` runs the terms:
resync, then let the scheduling loop (`placer.controller.scheduling.loop`) run while leading.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from placer.controller.binding.reporting import Reporter
from placer.controller.informers.cache import ClusterCache
from placer.controller.informers.catalog import CatalogFeed, object_key
from placer.controller.informers.group_kinds import GroupWatches
from placer.controller.informers.groups import GroupMembers
from placer.controller.informers.node_metrics import NodeMetricsPoller
from placer.controller.informers.nominations import Nominations
from placer.controller.lifecycle.api_health import ApiHealth
from placer.controller.lifecycle.leader import LeaderElector
from placer.controller.metrics import Metrics
from placer.controller.options import Options
from placer.controller.profiles.registry import ProfileRegistry
from placer.controller.profiles.shadow import Shadows
from placer.controller.profiles.statuses import StatusWriter
from placer.controller.resync import Resync
from placer.controller.signals import WatchedEvents
from placer.controller.transport.client import KubeClient
from placer.engine.catalog import Kind
from placer.engine.cluster import ClusterState
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Scheduler

__all__ = ["SchedulerState"]

logger = logging.getLogger("placer.state")


class SchedulerState:
    def __init__(
        self, options: Options, kube: KubeClient | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.options = options
        self.kube = kube
        self.metrics = Metrics()
        self.cluster = ClusterState(capacity=1024)
        self.queue = SchedulingQueue(clock=clock, initial_backoff=options.initial_backoff,
                                     max_backoff=options.max_backoff)
        self.scheduler = Scheduler()
        self.profiles = ProfileRegistry(
            self.cluster, self.metrics, lambda name, old, new: self.cache.owner_changed(name, old, new)
        )
        # shadow profiles' recorders: pods of the schedulers they shadow, decided and compared
        self.shadows = Shadows(self.metrics, limit=options.shadow_memory)
        self.reporter = Reporter(
            kube, self.metrics,  # type: ignore[arg-type]  # None only in unit tests that never report
            identity=options.identity, limit=options.report_queue_limit,
            series_interval=options.event_series_interval, active=self.is_leader,
        )
        self.leader: LeaderElector | None = None
        if options.leader_elect and kube is not None:
            self.leader = LeaderElector(
                kube, namespace=options.lease_namespace, name=options.lease_name, identity=options.identity,
                lease_duration=options.lease_duration, renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
                on_started_leading=self._started_leading, on_stopped_leading=self._stopped_leading,
            )
        self.metrics.leader.set(0 if self.leader is not None else 1)
        self.metrics.pending.source = lambda: [({"queue": q}, n) for q, n in self.queue.counts().items()]
        self.wakeup = asyncio.Event()  # something may be schedulable: the loop looks again
        # the events binding cycles wait for (a PreBind's condition, a Permit), and leadership lost
        self.binding_changes = WatchedEvents()
        self.may_schedule = asyncio.Event()  # leader and resynced: the loop runs
        self.synced = False
        self.kopf_ready = False
        self.term = 0  # bumps at every start of leadership
        self._term_changed = asyncio.Event()
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.insights: Any = None  # Kopf's insights, when available, for /healthz
        # namespaces, services, workloads, ...: every catalog kind through one path
        self.catalog = CatalogFeed(self.cluster.catalog, self.wake)
        self.nominations = Nominations(self)
        self.groups = GroupMembers(self)  # pods by group, the members waiting for theirs, its status
        self.group_watch = GroupWatches(self)  # PodGroups of both APIs, where served
        self.cache = ClusterCache(self)
        self.resync = Resync(self, clock)
        self.statuses = StatusWriter(self)
        self.node_metrics = NodeMetricsPoller(self)
        self.api = ApiHealth(self)

    # ----------------------------------------------------------------- leadership

    def is_leader(self) -> bool:
        return self.leader is None or self.leader.is_leader

    def _started_leading(self) -> None:
        self.metrics.leader.set(1)
        self.term += 1
        self._term_changed.set()

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        self.may_schedule.clear()
        self.reporter.reset()
        self.shadows.forget_all()  # the next leader decides them
        self.wakeup.set()
        self.binding_changes.fire()

    async def coordinate(self) -> None:
        """Resync, then let the loop run while leading; resync again at every new term."""
        if self.leader is not None:
            with contextlib.suppress(TimeoutError):  # let the first election attempt finish first
                async with asyncio.timeout(self.options.retry_period):
                    await self._term_changed.wait()
        while True:
            self._term_changed.clear()
            term = self.term
            await self.resync.until_decidable()  # every node and assigned pod known (pending ones may follow)
            self.synced = True
            if self.is_leader() and self.term == term:
                self.nominations.rebuild()
                for name in self.profiles.scheduler_names():
                    self.cache.enqueue_pending(name)
                self.shadows.start_term()
                for name in {recorder.target for recorder in self.shadows.recorders.values()}:
                    self.cache.enqueue_shadowed(name)
                self.profiles.mark_all()
                self.may_schedule.set()
                logger.info("scheduling (%d nodes, %d pods pending)", self.cluster.node_count, len(self.queue))
            await self._term_changed.wait()

    # ----------------------------------------------------------------- events in

    def pod_event(self, event: Mapping[str, Any]) -> None:
        """An event of Placer's own pod watch (`placer.controller.informers.informer`), not Kopf's."""
        raw = event["object"]
        if event["type"] == "DELETED":
            self.cache.pod_deleted(raw)
        else:
            self.cache.observe_pod(raw)

    def node_event(self, event: Mapping[str, Any]) -> None:
        """An event of Placer's own node watch (`placer.controller.informers.informer`), not Kopf's."""
        raw = event["object"]
        if event["type"] == "DELETED":
            self.cache.node_deleted(raw)
        else:
            self.cache.observe_node(raw)

    def profile_event(self, event: Mapping[str, Any]) -> None:
        """A SchedulerProfile event of Kopf's."""
        raw = event["object"]
        self.resync.kopf_event("profiles", str((raw.get("metadata") or {}).get("name")), event["type"])
        if event["type"] == "DELETED":
            self.cache.profile_deleted(raw)
        else:
            self.cache.observe_profile(raw)

    def object_event(self, kind: Kind, event: Mapping[str, Any]) -> None:
        """A watch event of a catalog kind (Namespace, Service, ...), from Kopf."""
        raw = event["object"]
        self.resync.kopf_event(kind.plural, object_key(kind, raw), event["type"])
        if event["type"] == "DELETED":
            self.catalog.deleted(kind, raw)
        else:
            self.catalog.observe(kind, raw)

    def wake(self, event: str | None = None, old: Any = None, new: Any = None) -> None:
        """A change that may help waiting pods: `event` (a ClusterEvent or a catalog kind's name,
        with the object before and after when known, for the queueing hints) wakes those it may
        help; None wakes them all (a profile changed, the API server is back). Binding cycles
        waiting on such a change look again."""
        self.queue.wake(event, old, new)
        self.wakeup.set()
        self.binding_changes.event(event)
