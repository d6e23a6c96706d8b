"""Resyncs: fresh LISTs reconciled into the cache, and the deletions no event will ever tell.

A resync runs at startup, at every start of leadership (`SchedulerState.coordinate`), and after
Kopf re-listed a kind. Pods and nodes come from Placer's own watches (`placer.controller.informers`),
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

from placer.controller.cache import older
from placer.controller.kube import ApiError, Pages
from placer.controller.signals import Signal
from placer.engine.catalog import Kind
from placer.engine.kinds import KINDS as CATALOG_KINDS
from placer.engine.objects import pod_key

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["ACTIVE_PODS_SELECTOR", "KOPF_KINDS", "PROFILES_PATH", "Resync"]

logger = logging.getLogger("placer.resync")

# as kube-scheduler's informer: terminal pods hold no resources and are never scheduled
ACTIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
PROFILES_PATH = "/apis/placer.dev/v1alpha1/schedulerprofiles"
# the kinds Kopf watches (pods and nodes come through `placer.controller.informers`)
KOPF_KINDS = ("profiles", *(kind.plural for kind in CATALOG_KINDS))
# Kopf delivers a listing in one burst; a listing event this long after the previous one of its
# kind starts a new listing
RELIST_GAP = 1.0


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
        # where the watches of `placer.controller.informers` resume: kind -> listed path -> version
        self.watch_versions: dict[str, dict[str, str]] = {"pods": {}, "nodes": {}}
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

        Every LIST is asked for at once. The pods' (the big one: thousands at start-up) is filed a
        page at a time, after the other kinds (parsing a pod reads the profiles and PriorityClasses),
        while the server prepares the next page: the listing and the filing overlap instead of
        adding up. Nothing is decided before the whole resync is done.
        """
        assert self.state.kube is not None
        pod_query = [("fieldSelector", ACTIVE_PODS_SELECTOR)]
        pod_paths = [f"/api/v1/namespaces/{ns}/pods" for ns in self.state.options.namespaces] or ["/api/v1/pods"]
        pod_pages = [self.state.kube.list_pages(path, pod_query, limit=self.state.options.pods_list_page)
                     for path in pod_paths]
        try:
            await self._apply(pod_pages)
        finally:
            for pages in pod_pages:
                pages.close()
        self.resyncs_done += 1
        self.resynced.fire()

    async def _apply(self, pod_pages: list[Pages]) -> None:
        """`run`'s LISTs filed: nodes, profiles, the catalog kinds, then the pods' pages."""
        assert self.state.kube is not None
        kube, cache = self.state.kube, self.state.cache
        (nodes, nodes_version), (profiles, profiles_version), *catalog_lists = await asyncio.gather(
            kube.list_objects("/api/v1/nodes"), self._list_profiles(),
            *(self._list_kind(kind) for kind in CATALOG_KINDS))
        self.resyncs += 1
        for raw in nodes:  # the node watch resumes from this LIST: nothing is provisional
            cache.observe_node(raw)
        self._prune_named("nodes", nodes, nodes_version, cache.node_deleted)
        self._watch_from("nodes", "/api/v1/nodes", nodes_version)
        for raw in profiles:
            self._provisional("profiles", raw, PROFILES_PATH + "/{name}")
            cache.observe_profile(raw)
        self._prune_named("profiles", profiles, profiles_version, cache.profile_deleted)
        for kind, (items, version) in zip(CATALOG_KINDS, catalog_lists, strict=True):
            item_path = kind.path("{namespace}") + "/{name}"
            for raw in items:
                self._provisional(kind.plural, raw, item_path, kind.namespaced)
                self.state.catalog.observe(kind, raw)
            self.state.catalog.prune(kind, items, version, _gone)
        if self.state.profiles.uses_metrics:
            await self.state.node_metrics.poll()
        listed: set[str] = set()
        versions: list[str] = []
        for pages in pod_pages:
            listed_here: set[str] = set()
            version = ""
            async for items, page_version, restarted in pages:
                version = page_version  # every page of one listing carries the listing's version
                if restarted:  # its continue token expired: only the new listing proves anything gone
                    listed_here.clear()
                for raw in items:  # the pod watch resumes from this LIST: nothing is provisional
                    cache.observe_pod(raw)
                    listed_here.add(pod_key(raw))
            listed |= listed_here
            versions.append(version)
        # the oldest of the LISTs: what is absent from it and not newer is gone
        pods_version = min(versions, key=lambda v: int(v) if v.isdigit() else -1)
        self._prune_pods(listed, pods_version)
        for pages, version in zip(pod_pages, versions, strict=True):
            self._watch_from("pods", pages.path, version)

    def _watch_from(self, kind: str, path: str, version: str) -> None:
        """Where the informer of `kind` resumes: this LIST's version, unless its watch is ahead."""
        current = self.watch_versions[kind].get(path)
        if current is None or not older(version, current):
            self.watch_versions[kind][path] = version

    def _prune_named(
        self, kind: str, items: list[Any], list_version: str, deleted: Callable[[Mapping[str, Any]], None]
    ) -> None:
        listed = {str((raw.get("metadata") or {}).get("name")) for raw in items}
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

    async def _list_kind(self, kind: Kind) -> tuple[list[Any], str]:
        """A catalog kind's LIST; a kind the API server does not serve (an older release: 404) is
        simply absent."""
        assert self.state.kube is not None
        try:
            listed = await self.state.kube.list_objects(kind.path())
        except ApiError as error:
            if error.status == 404:
                self.state.catalog.served(kind, False)
                return [], ""  # no resourceVersion: nothing is pruned on this evidence
            raise
        self.state.catalog.served(kind, True)
        return listed

    async def _list_profiles(self) -> tuple[list[Any], str]:
        assert self.state.kube is not None
        try:
            return await self.state.kube.list_objects(PROFILES_PATH)
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
