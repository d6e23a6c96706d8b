"""The composition root: every part of the operator built and wired here, and nowhere else.

Each part receives the few things it uses (the objects themselves, or a small Protocol its module
states); none of them knows this class. What it builds, by stage (docs/architecture.md):

- the engine: the cluster (`ClusterState`), the queue, the `Scheduler`;
- the informers (`placer.controller.informers`): one per collection the scheduler reads —
  SchedulerProfiles, the catalog kinds, nodes, pods, PodGroups — feeding the profile registry, the
  catalog and the cluster cache;
- the scheduling cycle (`placer.controller.scheduling`): the loop, preemption, group cycles, and
  the terms that say when the loop runs;
- the binding cycle and the writes (`placer.controller.binding`): binding cycles, plugins'
  writes, events and conditions, PodGroup status;
- the profiles (`placer.controller.profiles`): registry, status writer, shadow profiles;
- the lifecycle (`placer.controller.lifecycle`): leader election, the API server's health,
  /healthz and /metrics.

`start` (Kopf's startup hook) starts every task; `stop` (Kopf's cleanup hook) stops deciding, lets
the binds in flight finish, releases the Lease and stops every task; `close` frees the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from placer.controller.binding.cycle import BindingCycles
from placer.controller.binding.effects import Effects
from placer.controller.binding.group_status import GroupStatusWriter
from placer.controller.binding.reporting import Reporter
from placer.controller.informers.cache import ClusterCache
from placer.controller.informers.catalog import CatalogFeed
from placer.controller.informers.group_kinds import GroupKinds
from placer.controller.informers.groups import GroupMembers
from placer.controller.informers.informer import Informer, WatchTimings
from placer.controller.informers.kubelet_rejections import FAILED_PODS_SELECTOR, KubeletRejections
from placer.controller.informers.node_metrics import NodeMetricsPoller
from placer.controller.informers.nominations import Nominations
from placer.controller.lifecycle.api_health import ApiHealth
from placer.controller.lifecycle.health import HealthChecks, HealthServer
from placer.controller.lifecycle.leader import LeaderElector
from placer.controller.metrics import Metrics
from placer.controller.options import Options
from placer.controller.profiles.feed import ProfileFeed
from placer.controller.profiles.registry import ProfileRegistry
from placer.controller.profiles.shadow import Shadows, ShadowWork
from placer.controller.profiles.statuses import StatusWriter
from placer.controller.scheduling.loop import SchedulingLoop
from placer.controller.scheduling.preemption import Preemptions
from placer.controller.scheduling.terms import Terms
from placer.controller.signals import WatchedEvents
from placer.controller.transport import Configuration, KubeClient
from placer.engine.catalog import Kind
from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS as CATALOG_KINDS
from placer.engine.kinds import KINDS_BY_NAME
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Scheduler

__all__ = ["NODES_PATH", "PODS_SELECTOR", "PROFILES_PATH", "SchedulerState"]

logger = logging.getLogger("placer.state")

PROFILES_PATH = "/apis/placer.dev/v1alpha1/schedulerprofiles"
NODES_PATH = "/api/v1/nodes"
# as kube-scheduler's pod informer: terminal pods hold nothing and are never scheduled; a pod that
# turns terminal leaves the selection and comes as DELETED
PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


class SchedulerState:
    def __init__(self, options: Options, kube: KubeClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.kube = kube
        self.metrics = metrics = Metrics()
        self.cluster = cluster = ClusterState(capacity=1024)
        self.queue = queue = SchedulingQueue(clock=clock, initial_backoff=options.initial_backoff,
                                             max_backoff=options.max_backoff)
        self.scheduler = scheduler = Scheduler()
        self.wakeup = asyncio.Event()  # something may be schedulable: the loop looks again
        self.binding_changes = WatchedEvents()  # what binding cycles wait on (a PreBind's condition, a Permit)
        self.may_schedule = asyncio.Event()  # leading, every informer synced: the loop runs
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.started = False

        # ------------------------------------------------------------- leadership
        self.leader: LeaderElector | None = None
        if options.leader_elect and kube is not None:
            self.leader = LeaderElector(
                kube, namespace=options.lease_namespace, name=options.lease_name, identity=options.identity,
                lease_duration=options.lease_duration, renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
                on_started_leading=self._started_leading, on_stopped_leading=self._stopped_leading,
            )
        metrics.leader.set(0 if self.leader is not None else 1)
        metrics.pending.source = lambda: [({"queue": q}, n) for q, n in queue.counts().items()]

        # ------------------------------------------------------------- profiles
        self.profiles = ProfileRegistry(cluster, metrics, lambda name, old, new: self.cache.owner_changed(
            name, old, new))
        self.shadows = Shadows(metrics, limit=options.shadow_memory)
        self.reporter = Reporter(
            kube, metrics, identity=options.identity, limit=options.report_queue_limit,
            series_interval=options.event_series_interval, active=self.is_leader,
        )

        # ------------------------------------------------------------- the cache the informers feed
        self.nominations = Nominations(cluster, self.profiles.active, self.wake)
        self.groups = GroupMembers(cluster)
        # pods a kubelet refused: reported, their nodes counted as the kubelet counts them a while
        self.kubelet_rejections = KubeletRejections(
            cluster, pod_ended=lambda pod: self.cache.pod_seen(pod), active=self.profiles.active,
            reporter=self.reporter, metrics=metrics, wake=self.wake, is_leader=self.is_leader,
            settle=options.kubelet_settle,
        )
        self.cache = ClusterCache(
            cluster, queue, scheduler, profiles=self.profiles, reporter=self.reporter, shadows=self.shadows,
            nominations=self.nominations, groups=self.groups, wake=self.wake, wakeup=self.wakeup,
            is_leader=self.is_leader, on_gone=self.kubelet_rejections.gone,
        )
        self.api = ApiHealth(kube, on_back=self.wake, backoff=options.initial_backoff,
                             max_backoff=options.max_backoff, ping_interval=options.health_ping_interval)
        self.node_metrics = NodeMetricsPoller(
            kube, cluster, self.wake, wanted_by=lambda: self.profiles.uses_metrics, on_poll=self.profiles.mark_all,
            interval=options.metrics_poll_interval,
        )
        self.profile_feed = ProfileFeed(self.profiles, self.shadows, enqueue_shadowed=self.cache.enqueue_shadowed,
                                        metrics_wanted=self.node_metrics.wanted, is_leader=self.is_leader)
        self.statuses = StatusWriter(
            kube, self.profiles, self.shadows, metrics, writing=lambda: self.is_leader() and self.may_schedule.is_set(),
            retry_delay=options.initial_backoff, shadow_interval=options.shadow_status_interval,
        )
        timings = WatchTimings(
            page=options.list_page, server_timeout=options.watch_server_timeout,
            connect_timeout=options.watch_connect_timeout, backoff=options.watch_backoff,
            max_backoff=options.watch_max_backoff, recheck=options.group_discovery_interval,
        )
        self.informers = self._informers(timings)
        self.group_kinds = GroupKinds(kube, cluster.catalog, self.wake, self.cache.release_group, timings,
                                      interval=options.group_discovery_interval)

        # ------------------------------------------------------------- the scheduling and binding cycles
        slots = asyncio.Semaphore(options.max_binds_in_flight)
        stopping = asyncio.Event()
        effects = Effects(kube, metrics)
        self.preemptions = Preemptions(
            scheduler, cluster, queue, effects=effects, reporter=self.reporter, nominations=self.nominations,
            metrics=metrics, wakeup=self.wakeup, is_leader=self.is_leader,
        )
        self.binding = BindingCycles(
            scheduler, cluster, queue, binder=kube, effects=effects, reporter=self.reporter, metrics=metrics,
            changes=self.binding_changes, wakeup=self.wakeup, is_leader=self.is_leader,
            unreachable=self.api.unreachable, pre_bind_timeout=options.pre_bind_timeout, slots=slots,
            stopping=stopping, clear_nomination=self.preemptions.clear, nominate=self.preemptions.expect,
            bound=self.kubelet_rejections.bound,
        )
        self.group_status = GroupStatusWriter(kube, cluster.catalog, self.is_leader)
        self.loop = SchedulingLoop(
            scheduler, cluster, queue, active=self.profiles.active, binding=self.binding,
            preemptions=self.preemptions,
            shadow=ShadowWork(self.shadows, cluster, share=options.shadow_busy_share),
            members=self.groups, group_status=self.group_status, gated=self.cache.gated,
            nominations=self.nominations, reporter=self.reporter, metrics=metrics, may_schedule=self.may_schedule,
            api_up=self.api.up, wakeup=self.wakeup, changes=self.binding_changes, is_leader=self.is_leader,
            slots=slots, stopping=stopping,
        )
        self.elected = asyncio.Event()  # the first election attempt is over: the informers may list
        if self.leader is None:
            self.elected.set()
        self.terms = Terms(
            synced=self._synced, relist=self._relist, start_term=self._start_term, is_leader=self.is_leader,
            may_schedule=self.may_schedule, elected=self.elected,
        )
        self._health: HealthServer | None = None
        self._stopped = False
        self.health_checks = HealthChecks(
            lambda: self.tasks, started=lambda: self.started, unserved=self._unserved, synced=lambda: self.synced,
            client=self.kube, window=options.health_window, stopping=lambda: self._stopped,
        )

    # ----------------------------------------------------------------- the informers

    def _informers(self, timings: WatchTimings) -> dict[str, Informer]:
        """One informer per collection: profiles, every catalog kind, nodes, pods (per namespace watched
        for namespaced kinds when `--namespace` is given)."""
        options, kube = self.options, self.kube
        informers: dict[str, Informer] = {}
        self.catalog_feeds: dict[str, CatalogFeed] = {}  # by kind plural

        def add(name: str, path: str, upsert: Any, delete: Any, **extra: Any) -> None:
            informers[name] = Informer(kube, path, upsert=upsert, delete=delete, timings=timings, name=name, **extra)

        add("schedulerprofiles", PROFILES_PATH, self.profile_feed.upsert, self.profile_feed.delete,
            served=_profiles_served)
        for kind in CATALOG_KINDS:
            feed = self.catalog_feeds[kind.plural] = CatalogFeed(self.cluster.catalog, kind, self.wake)
            for path in _paths(kind, options.namespaces):
                add(path, path, feed.upsert, feed.delete, served=feed.served)
        add("nodes", NODES_PATH, self.cache.observe_node, self.cache.node_deleted)
        classes = informers[KINDS_BY_NAME["PriorityClass"].path()]

        async def classes_listed() -> None:  # a pod without spec.priority takes its class's value when parsed
            await classes.synced.wait()

        pods = Kind("Pod", "v1", "pods", True, dict)
        for path in _paths(pods, options.namespaces):
            add(path, path, self.cache.observe_pod, self.cache.pod_deleted, query=[("fieldSelector", PODS_SELECTOR)],
                file_after=classes_listed)
            # the pods that end Failed on a node: a kubelet's refusal says so there (kubelet_rejections)
            add(f"failed {path}", path, self.kubelet_rejections.failed, _ignore,
                query=[("fieldSelector", FAILED_PODS_SELECTOR)])
        return informers

    async def _run_informers(self) -> None:
        """Every informer, once the first election attempt is over (`Terms`: a leader's first LISTs
        then hold what an earlier leader did)."""
        await self.elected.wait()
        await asyncio.gather(*(informer.run() for informer in self.informers.values()))

    async def _synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers.values()),
                             self.group_kinds.synced())

    async def _relist(self) -> None:
        await asyncio.gather(*(informer.relist() for informer in self.informers.values()), self.group_kinds.relist())

    # ----------------------------------------------------------------- events, leadership, terms

    def wake(self, event: str | None = None, old: Any = None, new: Any = None) -> None:
        """A change that may help waiting pods: `event` (a ClusterEvent or a catalog kind's name,
        with the object before and after when known, for the queueing hints) wakes those it may
        help; None wakes them all (a profile changed, the API server is back). Binding cycles
        waiting on such a change look again."""
        self.queue.wake(event, old, new)
        self.wakeup.set()
        self.binding_changes.event(event)

    def is_leader(self) -> bool:
        return self.leader is None or self.leader.is_leader

    def _started_leading(self) -> None:
        self.metrics.leader.set(1)
        self.terms.started_leading()

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        self.terms.stopped_leading()
        self.reporter.reset()
        self.shadows.forget_all()  # the next leader decides them
        self.wakeup.set()
        self.binding_changes.fire()

    def _start_term(self) -> None:
        """A term begins (every informer synced, leading): nominations as the pods' status says,
        every pending pod of an owned schedulerName queued, shadow recorders restarted, profile
        statuses re-evaluated."""
        names = self.profiles.scheduler_names()
        self.nominations.rebuild(self.cache.pending, names)
        for name in names:
            self.cache.enqueue_pending(name)
        self.shadows.start_term()
        for name in {recorder.target for recorder in self.shadows.recorders.values()}:
            self.cache.enqueue_shadowed(name)
        self.profiles.mark_all()
        logger.info("scheduling (%d nodes, %d pods pending)", self.cluster.node_count, len(self.queue))

    @property
    def synced(self) -> bool:
        return self.terms.synced_once

    def _unserved(self) -> list[str]:
        return ["schedulerprofiles"] if self.informers["schedulerprofiles"].serving is False else []

    def health(self) -> tuple[bool, str]:
        """/healthz's answer (`HealthChecks.first_failure`)."""
        return self.health_checks.first_failure()

    # ----------------------------------------------------------------- start and stop

    async def start(self) -> None:
        """Every task of the operator (Kopf's startup hook), and /healthz."""
        jobs: dict[str, Coroutine[Any, Any, None]] = {
            "informers": self._run_informers(),
            "podgroup kinds": self.group_kinds.run(),
            "terms": self.terms.run(),
            "scheduling loop": self.loop.run(),
            "profile status writer": self.statuses.profiles_forever(),
            "shadow status writer": self.statuses.shadows_forever(),
            "node metrics poller": self.node_metrics.forever(),
            "api pinger": self.api.ping_forever(),
            "api prober": self.api.probe_forever(),
        }
        if self.leader is not None:
            jobs["leader election"] = self._elect(self.leader)
        for index in range(self.options.report_workers):
            jobs[f"reporter {index}"] = self.reporter.worker()
        for name, job in jobs.items():
            self.tasks[name] = asyncio.create_task(job, name=f"placer: {name}")
        if self.options.metrics_port:
            self._health = HealthServer(self.health_checks, self.metrics, self.options.metrics_host,
                                        self.options.metrics_port)
            await self._health.start()
        self.started = True

    async def _elect(self, leader: LeaderElector) -> None:
        attempted = asyncio.ensure_future(leader.attempted.wait())
        attempted.add_done_callback(lambda _: self.elected.set())
        try:
            await leader.run()
        finally:
            attempted.cancel()

    @property
    def configuration(self) -> Configuration:
        """The client's configuration: Kopf's credentials come from it (its login hook)."""
        return self.kube.configuration

    async def stop(self) -> None:
        """Stop deciding, let binds and reports finish (bounded), release the Lease, stop every task.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        options = self.options
        self.may_schedule.clear()
        for name in ("scheduling loop", "terms", "leader election"):
            await _stop_task(self.tasks.pop(name, None))
        if options.release_on_exit:
            await self.loop.drain(timeout=min(options.api_timeout, 5.0))
            await self.reporter.drain(timeout=2.0)
            if self.leader is not None:
                await self.leader.release()
        tasks, self.tasks = self.tasks, {}
        await asyncio.gather(*(_stop_task(task) for task in tasks.values()))

    async def close(self) -> None:
        """After Kopf returned (or was cancelled): whatever is left, the health server, the client."""
        await self.stop()
        self.kubelet_rejections.close()
        if self._health is not None:
            await self._health.stop()
        if self.kube is not None:
            await self.kube.close()


def _paths(kind: Kind, namespaces: tuple[str, ...]) -> list[str]:
    if kind.namespaced and namespaces:
        return [kind.path(namespace) for namespace in namespaces]
    return [kind.path()]


def _ignore(raw: Any) -> None:
    """A failed pod deleted: nothing to do (the pod informer said it left its node)."""


def _profiles_served(served: bool) -> None:
    if not served:
        logger.warning("the SchedulerProfile CRD is not installed (kubectl apply -f crds/)")


async def _stop_task(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task

