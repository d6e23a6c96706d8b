"""Resyncs: fresh LISTs reconciled into the cache, and the deletions no event will ever tell.

A resync runs at startup, at every start of leadership (`SchedulerState.coordinate`), and after
Kopf re-listed a kind. Pods and nodes come from Placer's own watches (`placer.controller.informers.informer`),
which resume from the resync's LISTs (`watch_versions`); profiles and the catalog kinds from Kopf's.

Deletions no event will ever tell: when a watch resumes from a resourceVersion the server has
compacted (410 Expired), the pod watch asks for a resync, and Kopf lists again and replays what
exists, but objects deleted in the gap get no DELETED event. A listing event (type None) for an
object Kopf already showed, after watch events of that kind, or a while after the previous
listing event of that kind, means Kopf is re-listing; a resync with pruning follows (`relisted`).
(A re-listing that finds no object at all cannot be told; the next resync prunes then.)
Every resync prunes what its LIST proves gone (absent, and last seen at or before the LIST's
resourceVersion). Objects a resync LIST filed that no Kopf event has mentioned yet are checked with a
GET until Kopf confirms them (`verify_provisional`): a deletion between our LIST and Kopf's own
first one would reach neither stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from placer.controller.informers.cache import older
from placer.controller.signals import Signal
from placer.controller.startup_timing import StartupTiming
from placer.controller.transport.client import ApiError, Pages
from placer.controller.transport.listing import NODES_PATH, PROFILES_PATH, Page, ResyncLists
from placer.engine.catalog import Kind
from placer.engine.kinds import KINDS as CATALOG_KINDS
from placer.engine.parsing import pod_key

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["KOPF_KINDS", "PROFILES_PATH", "Resync"]

logger = logging.getLogger("placer.resync")

# the kinds Kopf watches (pods and nodes come through `placer.controller.informers.informer`)
KOPF_KINDS = ("profiles", *(kind.plural for kind in CATALOG_KINDS))
# Kopf delivers a listing in one burst; a listing event this long after the previous one of its
# kind starts a new listing
RELIST_GAP = 1.0
#: after the first page's worth of pending pods (`Options.pods_list_page`), pending pods are filed
#: this many at a time with a turn of the event loop between (under 1 ms each): pages already here
#: do not await, and a page of 500 filed in one go (~40 ms) would keep the scheduling loop and its
#: binds waiting
FILE_CHUNK = 10
#: turns of the event loop given once the first decisions may start, before the next page's JSON
#: is decoded (~16 ms for 500 pods): the coordinator's wake-ups, the first cycle, its bind
FIRST_TURNS = 4


def _number(version: str) -> int:
    """A resourceVersion's order among LISTs' (an opaque one first: it proves nothing)."""
    return int(version) if version.isdigit() else -1


def _gone(version: str, list_version: str) -> bool:
    """Whether an object last seen at `version` and absent from a LIST taken at `list_version` is gone
    (only when both are numbers: an opaque resourceVersion proves nothing)."""
    return version.isdigit() and list_version.isdigit() and int(version) <= int(list_version)


class Resync:
    def __init__(self, state: SchedulerState, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self._clock = clock
        # Objects a resync LIST filed that no Kopf event has mentioned yet (kind -> key -> path).
        self._from_kopf: dict[str, set[str]] = {kind: set() for kind in KOPF_KINDS}
        self.provisional: dict[str, dict[str, str]] = {kind: {} for kind in KOPF_KINDS}
        # Whether Kopf's stream of a kind is past its listing (a watch event came), and when its
        # last listing event came, for telling a re-listing; `relisted` asks `reconcile_forever`
        # for a pruning resync.
        self._streaming: dict[str, bool] = {kind: False for kind in KOPF_KINDS}
        self._listed_at: dict[str, float] = {}
        self.relisted = asyncio.Event()
        self.resyncs = 0
        self.resyncs_done = 0
        self.resynced = Signal()  # fired at the end of every resync
        # a resync filed every node and assigned pod (its pending pods may still be coming)
        self.decidables = 0
        self.decided = Signal()
        self._running: asyncio.Task[None] | None = None
        # where the watches of `placer.controller.informers.informer` resume: kind -> listed path -> version
        self.watch_versions: dict[str, dict[str, str]] = {"pods": {}, "nodes": {}}
        # the first resync's node and pending pods LISTs, asked for before the engine was imported
        # (`placer.controller.main.operate`); taken over by the first resync while fresh
        self.first_lists: ResyncLists | None = None
        # per Kopf kind: what files an object (added, changed, listed) and what removes one
        cache, catalog = state.cache, state.catalog
        self._feeds: dict[str, tuple[Callable[[Mapping[str, Any]], None], Callable[[Mapping[str, Any]], None]]] = {
            "profiles": (cache.observe_profile, cache.profile_deleted),
            **{
                kind.plural: (functools.partial(catalog.observe, kind), functools.partial(catalog.deleted, kind))
                for kind in CATALOG_KINDS
            },
        }

    # ----------------------------------------------------------------- Kopf's listings

    def kopf_event(self, kind: str, key: str, event_type: str | None) -> None:
        """An event of Kopf's stream of `kind` (profiles, catalog kinds): it confirms the object, and
        tells a re-listing apart from the first listing."""
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

    # ----------------------------------------------------------------- the resync

    async def run(self) -> None:
        """Fresh LISTs of nodes, profiles and pods, reconciled into the caches.

        Run at startup, at every start of leadership (before anything is scheduled: pods that
        another leader bound moments ago, their watch events not here yet, get counted), and after
        Kopf re-listed a kind. It adds and updates, and removes only what the LIST proves gone
        (absent from it, and last seen at or before its resourceVersion): anything else is left to
        the watch, as an extra pod counted is safe and a missing one is not. Objects deleted
        between this LIST and Kopf's own first one, which no stream mentions, are caught by
        `verify_provisional`.

        A decision needs every node and assigned pod, not every pending one: the pods are two
        LISTs, pending (`spec.nodeName=`) and assigned (`spec.nodeName!=`); once the nodes, the
        profiles, the catalog kinds, the assigned pods and a page's worth of pending pods
        (`Options.pods_list_page`; all of them, when fewer) are filed the resync is decidable
        (`until_decidable`) and scheduling may start while the pending pods' pages still come
        (each filed pod is queued at once, as from a watch). The pending LIST's snapshot is taken
        first (its first page answered before the assigned LIST is asked for): a pod bound
        between the two is in the assigned one, and the watch resumes from the older. Pages are
        filed as they come, the server preparing the next meanwhile; the pods wait for the
        profiles and catalog kinds (a pod's parse reads PriorityClasses); a pod on a node not yet
        filed is counted when its node comes. The first resync reads the watch cache (`_apply`).
        """
        assert self.state.kube is not None
        first = self.resyncs_done == 0
        timing = StartupTiming(first)
        lists, self.first_lists = self.first_lists, None
        if lists is not None and not (first and lists.fresh()):
            lists.close()  # asked for too long ago (a standby become leader): listed afresh
            lists = None
        if lists is None:
            options = self.state.options
            lists = ResyncLists.ask(self.state.kube, options.namespaces, options.pods_list_page, cached=first)
        try:
            await self._apply(lists, timing)
        finally:
            lists.close()
        timing.report()
        self.resyncs_done += 1
        self.resynced.fire()

    async def _apply(self, lists: ResyncLists, timing: StartupTiming) -> None:
        """`run`'s LISTs filed: the profiles and catalog kinds, the nodes' and assigned pods' pages
        as they come, then the pending pods' (decidable after a page's worth). The assigned pods'
        LISTs are asked for once the pending LISTs' snapshots are taken (`ResyncLists.snapshots`).
        `lists.query`: `resourceVersion=0`, the API server's watch cache, for the nodes, assigned
        pods, profiles and catalog kinds of a process's first resync (as client-go's reflector
        lists first): a consistent LIST goes to etcd unless etcd reports watch progress (3.4.31+,
        3.5.13+), every pod decoded there and scanned for the field selector, at 30,000 pods
        seconds of the server's CPU; the cache may lag by its watch's delay (so may the assigned
        snapshot behind the pending one), as kube-scheduler's informers do. The cache ignores
        `limit` (one answer per LIST), so the pending pods, needed a page at a time, stay
        consistent pages. Later resyncs (a new term, a relist) read consistently: a new leader
        must see what the last one bound."""
        others = asyncio.ensure_future(asyncio.gather(
            self._list_profiles(lists), *(self._list_kind(kind, lists) for kind in CATALOG_KINDS)))
        nodes = asyncio.ensure_future(self._file_nodes(lists.nodes, timing))
        pending = lists.pending
        try:
            firsts: list[Page | None] = list(await lists.snapshots)  # the pending snapshots come first
            assigned = lists.assigned
            (profiles, profiles_version), *catalog_lists = await others
            self.resyncs += 1
            self._file_others(profiles, profiles_version, catalog_lists)
            if self.state.profiles.uses_metrics:
                await self.state.node_metrics.poll()
            timing.step("profiles and catalog kinds")
            listed: set[str] = set()
            versions = await self._file_pods(assigned, [None] * len(assigned), listed, timing, "assigned pods")
            await nodes

            def decidable() -> None:
                timing.step("pending pods", "first pending pods")
                timing.report("decidable")
                self.decidables += 1
                self.decided.fire()

            versions = [min(pair, key=_number) for pair in zip(
                versions, await self._file_pods(pending, firsts, listed, timing, "pending pods", decidable),
                strict=True)]
        except BaseException:  # one LIST failed (or the resync was cancelled): the others are dropped
            for task in (nodes, others):
                task.cancel()
            await asyncio.gather(nodes, others, return_exceptions=True)
            raise
        # the oldest of the LISTs: what is absent from them and not newer is gone
        self._prune_pods(listed, min(versions, key=_number))
        for pages, version in zip(pending, versions, strict=True):
            self._watch_from("pods", pages.path, version)

    async def _file_nodes(self, pages: Pages, timing: StartupTiming) -> None:
        cache = self.state.cache
        listed: set[str] = set()
        version = ""
        async for items, page_version, restarted in pages:
            started = time.perf_counter()
            version = page_version  # every page of one listing carries the listing's version
            if restarted:  # its continue token expired: only the new listing proves anything gone
                listed.clear()
            for raw in items:  # the node watch resumes from this LIST: nothing is provisional
                cache.observe_node(raw)
                listed.add(str((raw.get("metadata") or {}).get("name")))
            timing.filed("nodes", len(items), time.perf_counter() - started)
        self._prune_named("nodes", listed, version, cache.node_deleted)
        self._watch_from("nodes", NODES_PATH, version)
        timing.step("nodes")

    def _file_others(
        self, profiles: list[Any], profiles_version: str, catalog_lists: list[tuple[list[Any], str]]
    ) -> None:
        cache = self.state.cache
        for raw in profiles:
            self._provisional("profiles", raw, PROFILES_PATH + "/{name}")
            cache.observe_profile(raw)
        self._prune_named("profiles", {str((raw.get("metadata") or {}).get("name")) for raw in profiles},
                          profiles_version, cache.profile_deleted)
        for kind, (items, version) in zip(CATALOG_KINDS, catalog_lists, strict=True):
            item_path = kind.path("{namespace}") + "/{name}"
            for raw in items:
                self._provisional(kind.plural, raw, item_path, kind.namespaced)
                self.state.catalog.observe(kind, raw)
            self.state.catalog.prune(kind, items, version, _gone)

    async def _file_pods(self, pod_pages: list[Pages], firsts: list[Page | None], listed: set[str],
                         timing: StartupTiming, what: str, on_eager: Callable[[], None] | None = None) -> list[str]:
        """File each listing's pages (`firsts`: its first page, when already taken) and add what
        they listed to `listed`; returns each listing's resourceVersion. `on_eager` (the pending
        pods) is called once a page's worth is filed (`Options.pods_list_page`, 500), or every pod
        if fewer: a cluster with no bigger backlog is decided as kube-scheduler decides it (every
        pending pod known, taken in queue order), a bigger one as its pages come. Then the
        scheduling loop is given `FIRST_TURNS` turns of the event loop, and the rest is filed
        `FILE_CHUNK` pods at a time with a turn between, so that the first binds do not wait for
        every page already answered to be filed. Without it, pages are filed whole."""
        cache = self.state.cache
        versions: list[str] = []
        eager = max(self.state.options.pods_list_page, 1)
        filed = 0
        streaming = False  # `on_eager` was called: chunks, with turns between
        for pages, first in zip(pod_pages, firsts, strict=True):
            listed_here: set[str] = set()
            version = ""
            page = first if first is not None else await anext(pages, None)
            while page is not None:
                items, version, restarted = page  # every page of one listing carries its version
                if restarted:  # its continue token expired: only the new listing proves anything gone
                    listed_here.clear()
                start = 0
                while True:  # (an empty page still counts)
                    if streaming:
                        end = start + FILE_CHUNK
                    elif on_eager is not None:
                        end = start + eager - filed
                    else:
                        end = len(items)
                    chunk = items[start:end]
                    started = time.perf_counter()
                    for raw in chunk:  # the pod watch resumes from this LIST: nothing is provisional
                        cache.observe_pod(raw)
                        listed_here.add(pod_key(raw))
                    timing.filed(what, len(chunk), time.perf_counter() - started)
                    filed, start = filed + len(chunk), end
                    if streaming:
                        await asyncio.sleep(0)  # the scheduling loop decides meanwhile
                    elif on_eager is not None and filed >= eager:
                        on_eager()
                        streaming = True
                        for _ in range(FIRST_TURNS):
                            await asyncio.sleep(0)
                    if start >= len(items):
                        break
                page = await anext(pages, None)
            listed |= listed_here
            versions.append(version)
        if on_eager is not None and not streaming:
            on_eager()  # fewer pending pods than a page's worth: every one is filed
        timing.step(what)
        return versions

    def _watch_from(self, kind: str, path: str, version: str) -> None:
        """Where the informer of `kind` resumes: this LIST's version, unless its watch is ahead."""
        current = self.watch_versions[kind].get(path)
        if current is None or not older(version, current):
            self.watch_versions[kind][path] = version

    def _prune_named(
        self, kind: str, listed: set[str], list_version: str, deleted: Callable[[Mapping[str, Any]], None]
    ) -> None:
        for name, version in list(self.state.cache.versions[kind].items()):
            if name not in listed and _gone(version, list_version):
                logger.info("%s %s is gone (no deletion event reached us)", kind[:-1], name)
                deleted({"metadata": {"name": name}})

    def _prune_pods(self, listed: set[str], list_version: str) -> None:
        cache, pods = self.state.cache, self.state.cluster.pods
        for key in [*pods, *(k for k in cache.pending_keys() if k not in pods)]:
            if key in listed:
                continue
            known = cache.known(key)
            if known is not None and _gone(known.resource_version, list_version):
                logger.info("pod %s is gone (no deletion event reached us)", key)
                namespace, name = key.split("/", 1)
                cache.pod_deleted({"metadata": {"name": name, "namespace": namespace}})

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
        assert self.state.kube is not None
        kube = self.state.kube
        pending = sum(len(keys) for keys in self.provisional.values())
        if not pending or pending > limit:
            return pending
        for kind, keys in self.provisional.items():
            for key, path in list(keys.items()):
                try:
                    reply = await kube.request("GET", path, retries=1)
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
            await asyncio.sleep(self.state.options.verify_interval)
            with contextlib.suppress(ApiError):
                await self.verify_provisional()

    async def _list_kind(self, kind: Kind, lists: ResyncLists) -> tuple[list[Any], str]:
        """A catalog kind's LIST (asked for ahead, or now); a kind the API server does not serve (an
        older release: 404) is simply absent."""
        try:
            listed = await lists.objects(kind.path())
        except ApiError as error:
            if error.status == 404:
                self.state.catalog.served(kind, False)
                return [], ""  # no resourceVersion: nothing is pruned on this evidence
            raise
        self.state.catalog.served(kind, True)
        return listed

    async def _list_profiles(self, lists: ResyncLists) -> tuple[list[Any], str]:
        try:
            return await lists.objects(PROFILES_PATH)
        except ApiError as error:
            if error.status == 404:
                logger.warning("the SchedulerProfile CRD is not installed (kubectl apply -f crds/)")
                return [], ""  # no resourceVersion: nothing is pruned on this evidence
            raise

    async def reconcile_forever(self) -> None:
        """A pruning resync each time Kopf re-lists a kind (see the module's docstring)."""
        while True:
            await self.relisted.wait()
            await asyncio.sleep(self.state.options.relist_settle)  # one resync for the kinds listed together
            self.relisted.clear()
            await self.until_done()

    async def until_decidable(self) -> None:
        """A resync (retried as `until_done`) that goes on in the background once decidable: returns
        when every node and assigned pod is filed, and a page's worth of pending pods. A
        resync still running from before is cancelled (this one lists everything again); the
        running one is in the state's tasks until it ends, so that the operator's stop cancels it."""
        previous = self._running
        if previous is not None and not previous.done():
            previous.cancel()
            await asyncio.gather(previous, return_exceptions=True)
        target = self.decidables + 1
        running = self._running = asyncio.ensure_future(self.until_done())
        self.state.tasks["resync"] = running
        running.add_done_callback(self._finished)
        try:
            while self.decidables < target and not running.done():
                decided = asyncio.ensure_future(self.decided.wait())
                await asyncio.wait([decided, running], return_when=asyncio.FIRST_COMPLETED)
                decided.cancel()
        except asyncio.CancelledError:
            running.cancel()
            raise
        if running.done():
            running.result()  # (until_done retries API errors: anything else is raised here)

    def _finished(self, task: asyncio.Task[None]) -> None:
        """A background resync ended: out of the state's tasks, unless it failed (/healthz says so)."""
        if self.state.tasks.get("resync") is task and (task.cancelled() or task.exception() is None):
            del self.state.tasks["resync"]

    async def until_done(self) -> None:
        delay = self.state.options.initial_backoff
        while True:
            try:
                await self.run()
                return
            except ApiError as error:
                logger.warning("resync failed, retrying in %.1fs: %s", delay, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.state.options.max_backoff)
