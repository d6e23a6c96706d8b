"""The one object that holds everything (kept in Kopf's memo): the engine's cluster, queue and
profiles, the reporter, the API client and leader election, plus the bookkeeping that turns
watch events into engine calls.

Pods, as kube-scheduler's cache sees them:

- bound (`spec.nodeName`): counted on their node (`ClusterState.add_pod`, which also confirms a
  pod we assumed); terminal or deleted ones are removed and wake the queue (resources freed);
- unbound: indexed by `spec.schedulerName` whether or not a profile owns that name yet, and
  queued when one does; a pod we assumed (bind in flight, or bound but not yet seen bound) is
  never queued again, so it is never bound twice;
- stale events (an older resourceVersion, or an unbound copy of a pod known to be bound, as the
  resync LIST and the pod watch may race) are ignored;
- nominated (`status.nominatedNodeName`, a preemptor waiting for its victims to go): a pending pod
  of ours holds that node's room (`ClusterState.nominate`) until it is bound, deleted, or its
  nomination cleared (`_follow_nomination`); every new term rebuilds them from the pods' status;
- shadowed (its schedulerName is a Shadow profile's `shadowOf`): handed to
  `placer.controller.shadow` when seen pending (by the leader), bound, and deleted; decided
  there, never queued here, never written to;
- priority: a pod without `spec.priority` (only hand-made ones) gets its PriorityClass's value as
  admission would (`resolve_priority`), when it is parsed.

Pods and nodes come from Placer's own watches (`placer.controller.informers`), resumed from the
resync's LIST; every other kind from Kopf's.

Deletions no event will ever tell: when a watch resumes from a resourceVersion the server has
compacted (410 Expired), the pod watch asks for a resync, and Kopf lists again and replays what
exists, but objects deleted in the gap get no DELETED event. A listing event (type None) for an
object Kopf already showed, after watch events of that kind, or a while after the previous
listing event of that kind, means Kopf is re-listing; a resync with pruning follows (`relisted`).
(A re-listing that finds no object at all cannot be told; the next resync prunes then.)
Every resync prunes what its LIST proves gone (absent, and last seen at or before the LIST's
resourceVersion).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from placer.controller.catalog_feed import CatalogFeed, object_key
from placer.controller.kube import ApiError, KubeClient
from placer.controller.leader import LeaderElector
from placer.controller.metrics import Metrics
from placer.controller.options import Options
from placer.controller.profiles import ProfileRegistry
from placer.controller.reporting import Reporter, pod_scheduled_condition
from placer.controller.shadow import Shadows
from placer.engine.catalog import Kind
from placer.engine.cluster import ClusterState
from placer.engine.framework import ClusterEvent
from placer.engine.kinds import KINDS as CATALOG_KINDS
from placer.engine.kinds import resolve_priority
from placer.engine.objects import ObjectError, PodInfo, parse_node, parse_node_metrics, parse_pod, pod_key
from placer.engine.profile import Profile
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Scheduler

__all__ = ["ACTIVE_PODS_SELECTOR", "KOPF_KINDS", "PROFILES_PATH", "SchedulerState", "Signal"]

logger = logging.getLogger("placer.state")

# as kube-scheduler's informer: terminal pods hold no resources and are never scheduled
ACTIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
PROFILES_PATH = "/apis/placer.dev/v1alpha1/schedulerprofiles"
# the kinds Kopf watches (pods and nodes come through `placer.controller.informers`)
KOPF_KINDS = ("profiles", *(kind.plural for kind in CATALOG_KINDS))
# Kopf delivers a listing in one burst; a listing event this long after the previous one of its
# kind starts a new listing
RELIST_GAP = 1.0
# the changes that may end a wait for volumes (a claim or volume written, the pod or its node gone)
VOLUME_WAKE = frozenset({
    "PersistentVolumeClaim", "PersistentVolume", ClusterEvent.POD_DELETE, ClusterEvent.POD_UPDATE,
    ClusterEvent.NODE_DELETE, ClusterEvent.NODE_UPDATE,
})


class Signal:
    """Wakes every coroutine waiting on it at each `fire` (an Event that re-arms itself); costs
    nothing while nobody waits."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def fire(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


def _older(new: str, old: str) -> bool:
    """Whether resourceVersion `new` is older than `old` (only when both are numbers, as in etcd)."""
    return new.isdigit() and old.isdigit() and int(new) < int(old)


def _gone(version: str, list_version: str) -> bool:
    """Whether an object last seen at `version` and absent from a LIST taken at `list_version` is gone
    (only when both are numbers: an opaque resourceVersion proves nothing)."""
    return version.isdigit() and list_version.isdigit() and int(version) <= int(list_version)


def _accounting_differs(a: PodInfo, b: PodInfo) -> bool:
    """Whether anything the node accounting reads differs between two versions of a bound pod."""
    return (
        a.node_name != b.node_name
        or a.requests != b.requests
        or a.nonzero_cpu != b.nonzero_cpu
        or a.nonzero_memory != b.nonzero_memory
        or a.host_ports != b.host_ports
        or a.labels != b.labels
        or a.uid != b.uid
        or a.deleting != b.deleting  # spreading does not count pods being deleted
    )


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
        self.profiles = ProfileRegistry(self.cluster, self.metrics, self._owner_changed)
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
        # unbound pods by schedulerName, owned or not (so a new profile finds its pods at once)
        self.pending: dict[str, dict[str, PodInfo]] = {}
        self._pending_name: dict[str, str] = {}
        self._gated: set[str] = set()  # pending pods with spec.schedulingGates: not scheduled yet
        # pods whose status.nominatedNodeName Placer is writing (`placer.controller.preemption`):
        # until the write is done, the cluster's nomination leads and the watch's copies do not
        self.nomination_writes: Counter[str] = Counter()
        self.wakeup = asyncio.Event()  # something may be schedulable: the loop looks again
        # a claim, volume, pod or node changed, or leadership was lost: pods waiting for their
        # volumes to be bound (`placer.controller.prebind`) look again
        self.volumes_changed = Signal()
        # Cleared when a bind got no answer at all: the loop stops deciding (no bind per pending
        # pod against a dead server) until `probe_api_forever` hears the server again.
        self.api_up = asyncio.Event()
        self.api_up.set()
        self._api_down = asyncio.Event()
        self.may_schedule = asyncio.Event()  # leader and resynced: the loop runs
        self.synced = False
        self.kopf_ready = False
        self.term = 0  # bumps at every start of leadership
        self._term_changed = asyncio.Event()
        self._metrics_wanted = asyncio.Event()
        self._metrics_usage: dict[str, dict[str, int]] = {}
        self.metrics_api: bool | None = None  # None: not asked yet
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.insights: Any = None  # Kopf's insights, when available, for /healthz
        # Objects a resync LIST filed that no Kopf event has mentioned yet (kind -> key -> path).
        # A deletion between our LIST and Kopf's own initial LIST would reach neither stream, so
        # these are checked with a GET until Kopf confirms them (see `verify_provisional`).
        self._from_kopf: dict[str, set[str]] = {kind: set() for kind in KOPF_KINDS}
        self.provisional: dict[str, dict[str, str]] = {kind: {} for kind in KOPF_KINDS}
        # Whether Kopf's stream of a kind is past its listing (a watch event came), and when its
        # last listing event came, for telling a re-listing; `relisted` asks `reconcile_forever`
        # for a pruning resync.
        self._streaming: dict[str, bool] = {kind: False for kind in KOPF_KINDS}
        self._listed_at: dict[str, float] = {}
        self._clock = clock
        self.relisted = asyncio.Event()
        self.resyncs = 0
        self.resyncs_done = 0
        self.resynced = Signal()  # fired at the end of every resync
        # where the watches of `placer.controller.informers` resume: kind -> listed path -> version
        self.watch_versions: dict[str, dict[str, str]] = {"pods": {}, "nodes": {}}
        # last seen resourceVersions of nodes and profiles (pods carry theirs), for pruning
        self._versions: dict[str, dict[str, str]] = {"nodes": {}, "profiles": {}}
        # namespaces, services, workloads, ...: every catalog kind through one path
        self.catalog = CatalogFeed(self.cluster.catalog, self._wake)
        # per Kopf kind: what files an object (added, changed, listed) and what removes one
        self._feeds: dict[str, tuple[Callable[[Mapping[str, Any]], None], Callable[[Mapping[str, Any]], None]]] = {
            "profiles": (self.observe_profile, self.profile_deleted),
            **{
                kind.plural: (
                    functools.partial(self.catalog.observe, kind), functools.partial(self.catalog.deleted, kind)
                )
                for kind in CATALOG_KINDS
            },
        }

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
        self.volumes_changed.fire()

    # ----------------------------------------------------------------- Kopf's events

    def _kopf(self, kind: str, key: str, event_type: str | None) -> None:
        self.provisional[kind].pop(key, None)
        if event_type is None:  # a listing: Kopf's first, or a re-listing after 410 Expired
            now = self._clock()
            previous = self._listed_at.get(kind)
            self._listed_at[kind] = now
            if key in self._from_kopf[kind] or self._streaming[kind] or (
                previous is not None and now - previous > RELIST_GAP
            ):
                if not self.relisted.is_set():
                    logger.info("the %s watch is listing again: deletions it missed will be pruned", kind[:-1])
                self._streaming[kind] = False
                self.relisted.set()
        else:
            self._streaming[kind] = True
        if event_type == "DELETED":
            self._from_kopf[kind].discard(key)
        else:
            self._from_kopf[kind].add(key)

    def pod_event(self, event: Mapping[str, Any]) -> None:
        """An event of Placer's own pod watch (`placer.controller.informers`), not Kopf's."""
        raw = event["object"]
        if event["type"] == "DELETED":
            self.pod_deleted(raw)
        else:
            self.observe_pod(raw)

    def node_event(self, event: Mapping[str, Any]) -> None:
        """An event of Placer's own node watch (`placer.controller.informers`), not Kopf's."""
        raw = event["object"]
        if event["type"] == "DELETED":
            self.node_deleted(raw)
        else:
            self.observe_node(raw)

    def profile_event(self, event: Mapping[str, Any]) -> None:
        raw = event["object"]
        deleted = event["type"] == "DELETED"
        self._kopf("profiles", str((raw.get("metadata") or {}).get("name")), event["type"])
        if deleted:
            self.profile_deleted(raw)
        else:
            self.observe_profile(raw)

    def object_event(self, kind: Kind, event: Mapping[str, Any]) -> None:
        """A watch event of a catalog kind (Namespace, Service, ...)."""
        raw = event["object"]
        self._kopf(kind.plural, object_key(kind, raw), event["type"])
        if event["type"] == "DELETED":
            self.catalog.deleted(kind, raw)
        else:
            self.catalog.observe(kind, raw)

    # ----------------------------------------------------------------- pods

    def _known(self, key: str) -> PodInfo | None:
        record = self.cluster.pods.get(key)
        if record is not None:
            return record.pod
        name = self._pending_name.get(key)
        return None if name is None else self.pending[name].get(key)

    def observe_pod(self, raw: Mapping[str, Any]) -> None:
        """An ADDED/MODIFIED/listed pod: parse it once (unless it is a version we have) and file it."""
        meta = raw.get("metadata")
        if isinstance(meta, Mapping):
            known = self._known(f"{meta.get('namespace') or 'default'}/{meta.get('name')}")
            if known is not None and known.resource_version and known.resource_version == meta.get(
                "resourceVersion"
            ) and known.uid == meta.get("uid"):
                return
        try:
            pod = parse_pod(raw)
        except ObjectError as error:
            logger.debug("ignoring an unusable pod: %s", error)
            return
        resolve_priority(pod, self.cluster.catalog)  # what admission does, for a pod without spec.priority
        gated = False
        if not pod.node_name and not pod.terminal:
            self.reporter.observe_condition(pod.key, pod_scheduled_condition(raw))
            spec = raw.get("spec")
            gated = isinstance(spec, Mapping) and bool(spec.get("schedulingGates"))
        self.pod_seen(pod, gated)

    def pod_seen(self, pod: PodInfo, gated: bool = False) -> None:
        """File one version of a pod; `gated`: it has schedulingGates (kube-scheduler waits too)."""
        key = pod.key
        record = self.cluster.pods.get(key)
        if record is not None and record.pod.uid != pod.uid and pod.uid and record.pod.uid:
            self.cluster.remove_pod(key)  # a re-created pod whose DELETED we never saw
            record = None
        known = record.pod if record is not None else self._known(key)
        if known is not None and known.uid == pod.uid and _older(pod.resource_version, known.resource_version):
            return
        if pod.terminal:
            self._forget_pod(key)
            if self.cluster.remove_pod(key):
                self._wake(ClusterEvent.POD_DELETE)
            return
        if pod.node_name:
            self.unnominate(key, now_on=pod.node_name)  # bound: on its nominated node or elsewhere
            self.shadows.bound(pod)  # a shadowed pod: compared with the shadow's choice
            self._unpend(key)
            self.queue.remove(key)
            self.reporter.forget(key)
            if record is None or record.assumed or _accounting_differs(record.pod, pod):
                self.cluster.add_pod(pod)
                if record is None:  # (an assumed pod woke the queue when it was assumed)
                    self._wake(ClusterEvent.POD_ADD)
                elif not record.assumed or record.node != pod.node_name:
                    self._wake(ClusterEvent.POD_UPDATE)
            return
        if record is not None:
            if record.assumed:
                self._pend(pod)  # our bind is in flight or awaiting its watch event: do not queue
            return  # else: an unbound copy of a pod known to be bound is stale
        if pod.deleting:
            self._forget_pod(key)
            return
        self._follow_nomination(pod, known)
        self._pend(pod)
        if gated:
            self._gated.add(key)
            self.queue.remove(key)
            return
        self._gated.discard(key)
        if self.profiles.active(pod.scheduler_name) is not None:
            self.queue.add(pod)
            self.wakeup.set()
        if self.shadows.watching(pod.scheduler_name) and self.is_leader() and self.shadows.created(pod):
            self.wakeup.set()  # a shadow decision to take when the loop has time

    def pod_deleted(self, raw: Mapping[str, Any]) -> None:
        key = pod_key(raw)
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        known = self._known(key)
        if known is not None and uid and known.uid and known.uid != uid:
            return  # a DELETED of an older incarnation
        self._forget_pod(key)
        if self.cluster.remove_pod(key):
            self._wake(ClusterEvent.POD_DELETE)

    def _forget_pod(self, key: str) -> None:
        self.unnominate(key)
        self.shadows.deleted(key)
        self._gated.discard(key)
        self._unpend(key)
        self.queue.remove(key)
        self.reporter.forget(key)

    # ----------------------------------------------------------------- nominations

    def _follow_nomination(self, pod: PodInfo, known: PodInfo | None) -> None:
        """A pending pod's `status.nominatedNodeName`, as kube's nominator follows it: a pod of ours
        (a profile serves its schedulerName) nominated to a node holds that node's room against
        pods of its priority or lower. A change on the server is followed (set, moved, cleared);
        a copy that did not change it keeps what this scheduler decided meanwhile (a preemption
        whose write is on its way, a nomination it cleared), and so does any copy while Placer's
        own write of it is in flight."""
        key = pod.key
        held = self.cluster.nominated.get(key)
        if self.profiles.active(pod.scheduler_name) is None:
            self.unnominate(key)
            return
        if key in self.nomination_writes or (
            known is not None and known.uid == pod.uid and known.nominated_node == pod.nominated_node
        ):
            if held is not None:
                self.cluster.nominate(pod, held[1])  # the pod's latest version, where memory says
            return
        if pod.nominated_node:
            self.cluster.nominate(pod, pod.nominated_node)
        else:
            self.unnominate(key)

    def unnominate(self, key: str, now_on: str | None = None) -> bool:
        """Drop a pod's nomination; the room it held is free (unless the pod now runs there)."""
        held = self.cluster.nominated.get(key)
        if held is None:
            return False
        self.cluster.unnominate(key)
        if held[1] != now_on:
            self._wake(ClusterEvent.POD_DELETE)
        return True

    def rebuild_nominations(self) -> None:
        """The nominations as the pods' status says (at the start of a term): what a previous term of
        this process decided but never wrote is forgotten, what another leader wrote is taken."""
        for key in list(self.cluster.nominated):
            self.cluster.unnominate(key)
        for name in self.profiles.scheduler_names():
            for key, pod in self.pending.get(name, {}).items():
                if pod.nominated_node and key not in self.cluster.pods and not pod.deleting:
                    self.cluster.nominate(pod, pod.nominated_node)

    def _pend(self, pod: PodInfo) -> None:
        name = pod.scheduler_name
        previous = self._pending_name.get(pod.key)
        if previous is not None and previous != name:
            self.pending[previous].pop(pod.key, None)
        self.pending.setdefault(name, {})[pod.key] = pod
        self._pending_name[pod.key] = name

    def _unpend(self, key: str) -> None:
        name = self._pending_name.pop(key, None)
        self._gated.discard(key)
        if name is not None:
            pods = self.pending.get(name)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self.pending[name]

    def enqueue_pending(self, scheduler_name: str) -> None:
        """Queue every pending pod of a schedulerName (a profile started owning it, or a new term)."""
        for key, pod in self.pending.get(scheduler_name, {}).items():
            if key not in self.cluster.pods and key not in self._gated:
                self.queue.add(pod)
        self.wakeup.set()

    def _wake(self, event: str | None = None) -> None:
        """A change that may help waiting pods: `event` (a ClusterEvent or a catalog kind's name)
        wakes those it may help; None wakes them all (a profile changed, the API server is back)."""
        self.queue.wake(event)
        self.wakeup.set()
        if event is None or event in VOLUME_WAKE:
            self.volumes_changed.fire()

    # ----------------------------------------------------------------- nodes

    def _seen_version(self, kind: str, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata")
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            self._versions[kind][meta["name"]] = str(meta.get("resourceVersion") or "")

    def observe_node(self, raw: Mapping[str, Any]) -> None:
        self._seen_version("nodes", raw)
        try:
            node = parse_node(raw)
        except ObjectError as error:
            name = (raw.get("metadata") or {}).get("name")
            logger.warning("node %s cannot be used: %s", name, error)
            if isinstance(name, str):
                self.cluster.remove_node(name)
            return
        new = self.cluster.node(node.name) is None
        if self.cluster.upsert_node(node):
            self._wake(ClusterEvent.NODE_ADD if new else ClusterEvent.NODE_UPDATE)

    def node_deleted(self, raw: Mapping[str, Any]) -> None:
        name = (raw.get("metadata") or {}).get("name")
        if isinstance(name, str):
            self._versions["nodes"].pop(name, None)
            if self.cluster.remove_node(name):  # spreading may count one domain fewer
                self._wake(ClusterEvent.NODE_DELETE)

    # ----------------------------------------------------------------- profiles

    def observe_profile(self, raw: Mapping[str, Any]) -> None:
        self._seen_version("profiles", raw)
        self.profiles.upsert(raw)
        self._sync_shadows()
        status = raw.get("status")
        self.shadows.observe_status(str((raw.get("metadata") or {}).get("name")),
                                    status.get("shadow") if isinstance(status, Mapping) else None)
        if self.profiles.uses_metrics:
            self._metrics_wanted.set()

    def profile_deleted(self, raw: Mapping[str, Any]) -> None:
        name = (raw.get("metadata") or {}).get("name")
        if isinstance(name, str):
            self._versions["profiles"].pop(name, None)
            self.profiles.delete(name)
            self._sync_shadows()

    def _sync_shadows(self) -> None:
        """Shadow profiles added, changed or gone: a scheduler newly shadowed has its pending pods
        queued for shadow decisions (when leading; a new term queues them all)."""
        for scheduler_name in self.shadows.sync(self.profiles.shadow_profiles()):
            if self.is_leader():
                self.enqueue_shadowed(scheduler_name)

    def enqueue_shadowed(self, scheduler_name: str) -> None:
        """Queue every pending pod of a shadowed scheduler for a shadow decision."""
        for key, pod in self.pending.get(scheduler_name, {}).items():
            if key not in self._gated and not pod.deleting:
                self.shadows.created(pod)
        self.wakeup.set()

    def _owner_changed(self, scheduler_name: str, old: Profile | None, new: Profile | None) -> None:
        if new is None:
            for key in self.pending.get(scheduler_name, {}):
                self.queue.remove(key)  # no longer ours: they stay pending
                self.unnominate(key)  # and hold no room
        elif old is None:
            for key, pod in self.pending.get(scheduler_name, {}).items():
                if pod.nominated_node and key not in self.cluster.pods:
                    self.cluster.nominate(pod, pod.nominated_node)
            self.enqueue_pending(scheduler_name)
        else:
            self._wake()  # a new version may fit pods the old one could not

    # ----------------------------------------------------------------- resync

    async def resync(self) -> None:
        """Fresh LISTs of nodes, profiles and pods, reconciled into the caches.

        Run at startup, at every start of leadership (before anything is scheduled: pods that
        another leader bound moments ago, their watch events not here yet, get counted), and after
        Kopf re-listed a kind. It adds and updates, and removes only what the LIST proves gone
        (absent from it, and last seen at or before its resourceVersion): anything else is left to
        the watch, as an extra pod counted is safe and a missing one is not. Objects deleted
        between this LIST and Kopf's own first one, which no stream mentions, are caught by
        `verify_provisional`.
        """
        assert self.kube is not None
        pod_query = [("fieldSelector", ACTIVE_PODS_SELECTOR)]
        pod_paths = [f"/api/v1/namespaces/{ns}/pods" for ns in self.options.namespaces] or ["/api/v1/pods"]
        nodes_job = self.kube.list_objects("/api/v1/nodes")
        profiles_job = self._list_profiles()
        catalog_jobs = [self.kube.list_objects(kind.path()) for kind in CATALOG_KINDS]
        pods_jobs = [self.kube.list_objects(path, pod_query) for path in pod_paths]
        (nodes, nodes_version), (profiles, profiles_version), *lists = await asyncio.gather(
            nodes_job, profiles_job, *catalog_jobs, *pods_jobs)
        catalog_lists, pod_lists = lists[: len(CATALOG_KINDS)], lists[len(CATALOG_KINDS):]
        self.resyncs += 1
        for raw in nodes:  # the node watch resumes from this LIST: nothing is provisional
            self.observe_node(raw)
        self._prune_named("nodes", nodes, nodes_version, self.node_deleted)
        self._watch_from("nodes", "/api/v1/nodes", nodes_version)
        for raw in profiles:
            self._provisional("profiles", raw, PROFILES_PATH + "/{name}")
            self.observe_profile(raw)
        self._prune_named("profiles", profiles, profiles_version, self.profile_deleted)
        for kind, (items, version) in zip(CATALOG_KINDS, catalog_lists, strict=True):
            item_path = kind.path("{namespace}") + "/{name}"
            for raw in items:
                self._provisional(kind.plural, raw, item_path, kind.namespaced)
                self.catalog.observe(kind, raw)
            self.catalog.prune(kind, items, version, _gone)
        if self.profiles.uses_metrics:
            await self.poll_node_metrics()
        listed: set[str] = set()
        for pods, _ in pod_lists:
            for raw in pods:  # the pod watch resumes from this LIST: nothing is provisional
                self.observe_pod(raw)
                listed.add(pod_key(raw))
        # the oldest of the LISTs: what is absent from it and not newer is gone
        pods_version = min((version for _, version in pod_lists), key=lambda v: int(v) if v.isdigit() else -1)
        self._prune_pods(listed, pods_version)
        for path, (_, version) in zip(pod_paths, pod_lists, strict=True):
            self._watch_from("pods", path, version)
        self.resyncs_done += 1
        self.resynced.fire()

    def _watch_from(self, kind: str, path: str, version: str) -> None:
        """Where the informer of `kind` resumes: this LIST's version, unless its watch is ahead."""
        current = self.watch_versions[kind].get(path)
        if current is None or not _older(version, current):
            self.watch_versions[kind][path] = version

    def _prune_named(
        self, kind: str, items: list[Any], list_version: str, deleted: Callable[[Mapping[str, Any]], None]
    ) -> None:
        listed = {str((raw.get("metadata") or {}).get("name")) for raw in items}
        for name, version in list(self._versions[kind].items()):
            if name not in listed and _gone(version, list_version):
                logger.info("%s %s is gone (no deletion event reached us)", kind[:-1], name)
                deleted({"metadata": {"name": name}})

    def _prune_pods(self, listed: set[str], list_version: str) -> None:
        for key in [*self.cluster.pods, *(k for k in self._pending_name if k not in self.cluster.pods)]:
            if key in listed:
                continue
            known = self._known(key)
            if known is not None and _gone(known.resource_version, list_version):
                logger.info("pod %s is gone (no deletion event reached us)", key)
                namespace, name = key.split("/", 1)
                self.pod_deleted({"metadata": {"name": name, "namespace": namespace}})

    def _provisional(self, kind: str, raw: Mapping[str, Any], path: str, namespaced: bool = False) -> None:
        meta = raw.get("metadata") or {}
        name, namespace = str(meta.get("name")), str(meta.get("namespace") or "default")
        key = f"{namespace}/{name}" if namespaced else name
        if key not in self._from_kopf[kind]:
            self.provisional[kind][key] = path.format(name=name, namespace=namespace)

    async def verify_provisional(self, limit: int = 100) -> int:
        """GET the objects only a resync has seen; a 404 is applied as a deletion.

        Run while Kopf's own listing is over (few such objects left): an object that still exists
        is bound to reach us through Kopf (its list or its watch), one that does not never would.
        Returns how many are still unconfirmed.
        """
        assert self.kube is not None
        pending = sum(len(keys) for keys in self.provisional.values())
        if not pending or pending > limit:
            return pending
        for kind, keys in self.provisional.items():
            for key, path in list(keys.items()):
                try:
                    reply = await self.kube.request("GET", path, retries=1)
                except ApiError:
                    continue
                if key not in keys:
                    continue  # Kopf confirmed it meanwhile
                observe, deleted = self._feeds[kind]
                if reply.status == 404:
                    del keys[key]
                    namespace, _, name = key.rpartition("/")
                    gone = {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}
                    logger.info("%s %s is gone (deleted before Kopf's first listing)", kind[:-1], key)
                    deleted(gone)
                elif reply.ok:
                    raw = reply.json()
                    observe(raw)
        return sum(len(keys) for keys in self.provisional.values())

    async def verify_provisional_forever(self) -> None:
        while True:
            await asyncio.sleep(self.options.verify_interval)
            with contextlib.suppress(ApiError):
                await self.verify_provisional()

    async def _list_profiles(self) -> tuple[list[Any], str]:
        assert self.kube is not None
        try:
            return await self.kube.list_objects(PROFILES_PATH)
        except ApiError as error:
            if error.status == 404:
                logger.warning("the SchedulerProfile CRD is not installed (kubectl apply -f crds/)")
                return [], ""  # no resourceVersion: nothing is pruned on this evidence
            raise

    async def reconcile_forever(self) -> None:
        """A pruning resync each time Kopf re-lists a kind (see the module's docstring)."""
        while True:
            await self.relisted.wait()
            await asyncio.sleep(self.options.relist_settle)  # one resync for the kinds re-listed together
            self.relisted.clear()
            await self._resync_until_done()

    async def _resync_until_done(self) -> None:
        delay = self.options.initial_backoff
        while True:
            try:
                await self.resync()
                return
            except ApiError as error:
                logger.warning("resync failed, retrying in %.1fs: %s", delay, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.options.max_backoff)

    async def coordinate(self) -> None:
        """Resync, then let the loop run while leading; resync again at every new term."""
        if self.leader is not None:
            with contextlib.suppress(TimeoutError):  # let the first election attempt finish first
                async with asyncio.timeout(self.options.retry_period):
                    await self._term_changed.wait()
        while True:
            self._term_changed.clear()
            term = self.term
            await self._resync_until_done()
            self.synced = True
            if self.is_leader() and self.term == term:
                self.rebuild_nominations()
                for name in self.profiles.scheduler_names():
                    self.enqueue_pending(name)
                self.shadows.start_term()
                for name in {recorder.target for recorder in self.shadows.recorders.values()}:
                    self.enqueue_shadowed(name)
                self.profiles.mark_all()
                self.may_schedule.set()
                logger.info("scheduling (%d nodes, %d pods pending)", self.cluster.node_count, len(self.queue))
            await self._term_changed.wait()

    # ----------------------------------------------------------------- background duties

    async def write_profile_statuses(self) -> None:
        """Write profile statuses when they change; only the leader writes."""
        assert self.kube is not None
        while True:
            await self.profiles.changed.wait()
            self.profiles.changed.clear()
            if not self.is_leader() or not self.may_schedule.is_set():
                continue
            for name, status in self.profiles.status_updates():
                written = await self._patch_profile_status(name, status.patch())
                if written:
                    self.profiles.mark_written(name, status)
                elif written is False:
                    self.profiles.dirty.add(name)
                    asyncio.get_running_loop().call_later(self.options.initial_backoff, self.profiles.changed.set)

    async def _patch_profile_status(self, name: str, patch: Mapping[str, Any]) -> bool | None:
        """True when written, None when the profile is gone (404), False when it failed (counted)."""
        assert self.kube is not None
        try:
            reply = await self.kube.patch_profile_status(name, patch)
        except ApiError as error:
            reply = None
            logger.warning("status of profile %s: %s", name, error)
        if reply is not None and reply.ok:
            return True
        if reply is not None and reply.status == 404:
            return None
        self.metrics.api_errors.inc(call="patch_profile_status")
        return False

    async def write_shadow_statuses(self) -> None:
        """Write shadow profiles' `status.shadow` when it changed, at most once per interval per
        profile, through the status subresource; only the leader writes."""
        assert self.kube is not None
        while True:
            await self.shadows.changed.wait()
            self.shadows.changed.clear()
            if not self.is_leader() or not self.may_schedule.is_set():
                continue
            for name, patch in self.shadows.status_patches():
                if await self._patch_profile_status(name, patch) is False:
                    self.shadows.unwritten(name, patch)
            await asyncio.sleep(self.options.shadow_status_interval)

    async def poll_node_metrics(self) -> None:
        """One poll of metrics.k8s.io NodeMetrics into the cluster (404: no metrics API, tolerated)."""
        assert self.kube is not None
        try:
            items = await self.kube.list_node_metrics()
        except ApiError as error:
            logger.warning("NodeMetrics: %s", error)
            return
        self.metrics_api = items is not None
        usage: dict[str, dict[str, int]] = {}
        for raw in items or ():
            try:
                name, values = parse_node_metrics(raw)
            except ObjectError:
                continue
            usage[name] = values
        changed = False
        for name in self._metrics_usage.keys() | usage.keys():
            if self._metrics_usage.get(name) != usage.get(name):
                self.cluster.set_node_metrics(name, usage.get(name))
                changed = True
        self._metrics_usage = usage
        if changed:
            self._wake(ClusterEvent.NODE_METRICS)
        self.profiles.mark_all()  # a NodeUtilization warning may come or go

    async def poll_node_metrics_forever(self) -> None:
        while True:
            if self.profiles.uses_metrics:
                await self.poll_node_metrics()
            self._metrics_wanted.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.options.metrics_poll_interval):
                    await self._metrics_wanted.wait()

    def api_unreachable(self, why: str) -> None:
        """A bind got no answer: pause scheduling until the API server answers a ping again."""
        if self.api_up.is_set():
            logger.warning("the API server does not answer (%s): scheduling paused until it does", why)
            self.api_up.clear()
            self._api_down.set()

    async def probe_api_forever(self) -> None:
        """While scheduling is paused for an unreachable API server, ping it with backoff."""
        assert self.kube is not None
        while True:
            await self._api_down.wait()
            delay = self.options.initial_backoff
            while True:
                await asyncio.sleep(delay)
                if await self.kube.ping():
                    break
                delay = min(delay * 2, self.options.max_backoff)
            self._api_down.clear()
            self.api_up.set()
            logger.info("the API server answers again: scheduling resumes")
            self._wake()  # pods that backed off meanwhile are retried soon

    async def ping_forever(self) -> None:
        """Keep `last_answer` fresh while idle, so /healthz can tell a dead API server."""
        assert self.kube is not None
        while True:
            last = self.kube.last_answer
            if last is None or time.monotonic() - last >= self.options.health_ping_interval:
                await self.kube.ping()
            await asyncio.sleep(self.options.health_ping_interval)

    # ----------------------------------------------------------------- health

    def health(self) -> tuple[bool, str]:
        """(healthy, reason) for /healthz."""
        for name, task in self.tasks.items():
            if task.done():
                error = None if task.cancelled() else task.exception()
                return False, f"{name} stopped: {error!r}"
        if not self.kopf_ready:
            return False, "starting"
        if self.insights is not None:
            watched = {resource.plural for resource in getattr(self.insights, "watched_resources", ())}
            missing = {"schedulerprofiles"} - watched
            missing |= {kind for kind, versions in self.watch_versions.items() if not versions}  # ours
            if missing:
                return False, "not watching " + ", ".join(sorted(missing))
        if not self.synced:
            return False, "initial sync not done"
        if self.kube is not None:
            last = self.kube.last_answer
            if last is None or time.monotonic() - last > self.options.health_window:
                return False, f"API server not answering: {self.kube.last_failure or 'no answer yet'}"
        return True, "ok"
