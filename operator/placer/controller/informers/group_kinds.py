"""PodGroups of both APIs, found by discovery and watched into the engine's catalog.

Not Kopf's and not among `engine.kinds.KINDS`: which upstream version to watch depends on the API
server (v1beta1 where served, else v1alpha2, else none), scheduler-plugins' kind exists only where
its CRD is installed, and the kinds share the plural `podgroups`. So:

- **discovery** — `GET /apis/scheduling.k8s.io/v1beta1`, else `/v1alpha2`, and
  `GET /apis/scheduling.x-k8s.io/v1alpha1`: a kind is served when its group-version lists
  `podgroups` (a 404 is "not served"). Run at start-up, every `group_discovery_interval` seconds
  (an API switched on, a CRD installed later), and at once when a watched kind answers 404 (its
  CRD deleted). An absent API is simply absent: nothing is watched, nothing retried in a loop.
  A kind that is no longer served is dropped from the catalog; the upstream kind moving from
  v1alpha2 to v1beta1 is watched in its new version (both file into the one cache `PodGroup`);
- **each watched kind** — a LIST (filed, and what it proves gone pruned), then a WATCH from its
  resourceVersion, resumed after the server ends it, listed again on 410 Expired; other failures
  are retried with the watches' backoff. A 403 (no RBAC for podgroups) is logged once and treated
  as not served until the next discovery;
- **every change** files the group (`GROUP_KINDS` parsers; an invalid one is logged and left out),
  wakes the pods waiting on that kind, and lets the group's held members go
  (`placer.controller.informers.groups`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placer.controller.informers.catalog import CatalogFeed
from placer.controller.transport.client import ApiError
from placer.engine.catalog import Kind
from placer.engine.groups import POD_GROUP_V1ALPHA2, POD_GROUP_V1BETA1, SCHEDULER_PLUGINS_POD_GROUP, GroupRef

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["GroupWatches"]

logger = logging.getLogger("placer.groups")

UPSTREAM = (POD_GROUP_V1BETA1, POD_GROUP_V1ALPHA2)  # in the order discovery prefers them
EXPIRED = 410
FAILURES = (ApiError, TimeoutError, OSError, ValueError)  # kube.watch's (placer.controller.transport.http)


class _NotServed(Exception):
    """The kind answered 404 or 403: discovery decides again."""


def _gone(version: str, list_version: str) -> bool:
    return version.isdigit() and list_version.isdigit() and int(version) <= int(list_version)


class GroupWatches:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.watched: dict[Kind, asyncio.Task[None]] = {}
        self.feeds: dict[Kind, CatalogFeed] = {}
        self.rediscover = asyncio.Event()
        self.discoveries = 0  # discovery rounds done (tests and curiosity)
        self._forbidden: set[Kind] = set()

    @property
    def kinds(self) -> tuple[Kind, ...]:
        return tuple(self.watched)

    # ----------------------------------------------------------------- discovery

    async def _served(self, kind: Kind) -> bool:
        assert self.state.kube is not None
        reply = await self.state.kube.request("GET", f"/apis/{kind.api_version}", retries=1)
        if reply.status == 404:
            return False
        if not reply.ok:
            raise ApiError(reply.status, f"GET /apis/{kind.api_version}: {reply.message()}")
        body = reply.json()
        resources = body.get("resources") if isinstance(body, Mapping) else None
        return any(isinstance(r, Mapping) and r.get("name") == kind.plural for r in resources or ())

    async def discover(self) -> tuple[Kind, ...]:
        """The PodGroup kinds the API server serves now."""
        found: list[Kind] = []
        for kind in UPSTREAM:
            if await self._served(kind):
                found.append(kind)
                break
        if await self._served(SCHEDULER_PLUGINS_POD_GROUP):
            found.append(SCHEDULER_PLUGINS_POD_GROUP)
        return tuple(found)

    async def run(self) -> None:
        """Discover, watch what is served, and discover again now and then."""
        options = self.state.options
        delay = options.watch_backoff
        try:
            while True:
                self.rediscover.clear()
                try:
                    kinds = await self.discover()
                except FAILURES as error:
                    logger.warning("PodGroup discovery failed, retrying in %.1fs: %s", delay, error)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, options.watch_max_backoff)
                    continue
                delay = options.watch_backoff
                self._apply(kinds)
                self.discoveries += 1
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(options.group_discovery_interval):
                        await self.rediscover.wait()
        finally:
            for task in self.watched.values():
                task.cancel()

    def _apply(self, kinds: tuple[Kind, ...]) -> None:
        wanted = [kind for kind in kinds if kind not in self._forbidden]
        self._forbidden.clear()  # (asked again at the next discovery)
        for kind in list(self.watched):
            if kind not in wanted:
                logger.info("PodGroups %s are not served any more", kind.api_version)
                self.watched.pop(kind).cancel()
                self._drop(kind)
        for kind in wanted:
            if kind not in self.watched:
                logger.info("watching PodGroups %s", kind.api_version)
                self.feeds[kind] = CatalogFeed(self.state.cluster.catalog, self.state.wake, (kind,))
                self.watched[kind] = asyncio.create_task(self._follow(kind), name=f"placer: {kind.api_version}")

    def _drop(self, kind: Kind) -> None:
        """Every group of a kind no longer watched leaves the catalog."""
        feed = self.feeds.pop(kind, None)
        if feed is not None:
            refs = [self._ref(kind, {"metadata": {"namespace": ns, "name": name}})
                    for ns, name, _ in self.state.cluster.catalog.items(kind.name)]
            feed.prune(kind, [], "", lambda *_: True)
            for ref in refs:
                self.state.groups.group_changed(ref)

    # ----------------------------------------------------------------- one kind: list, then watch

    async def _follow(self, kind: Kind) -> None:
        options = self.state.options
        delay = options.watch_backoff
        while True:
            try:
                version = await self._list(kind)
                while True:
                    version = await self._stream(kind, version)
            except _NotServed:
                self.rediscover.set()
                return
            except _Expired:
                continue  # list again
            except FAILURES as error:
                logger.warning("PodGroup watch of %s failed, resuming in %.1fs: %s", kind.api_version, delay, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, options.watch_max_backoff)

    def _check(self, kind: Kind, error: ApiError) -> None:
        if error.status in (403, 404):
            if error.status == 403:
                self._forbidden.add(kind)
                logger.warning("PodGroups %s may not be read (RBAC: podgroups get/list/watch): %s",
                               kind.api_version, error.message)
            raise _NotServed() from None

    async def _list(self, kind: Kind) -> str:
        assert self.state.kube is not None
        try:
            items, version = await self.state.kube.list_objects(kind.path())
        except ApiError as error:
            self._check(kind, error)
            raise
        feed = self.feeds[kind]
        listed = {self._ref(kind, raw) for raw in items}
        known = {self._ref(kind, {"metadata": {"namespace": ns, "name": name}})
                 for ns, name, _ in self.state.cluster.catalog.items(kind.name)}
        for raw in items:
            feed.observe(kind, raw)
        feed.prune(kind, items, version, _gone)
        for ref in listed | known:
            self.state.groups.group_changed(ref)
        return version

    async def _stream(self, kind: Kind, version: str) -> str:
        state = self.state
        assert state.kube is not None
        options = state.options
        query = [("allowWatchBookmarks", "true"), ("timeoutSeconds", str(options.watch_server_timeout)),
                 ("resourceVersion", version)]
        feed = self.feeds[kind]
        try:
            async for event in state.kube.watch(kind.path(), query, connect_timeout=options.watch_connect_timeout,
                                                read_timeout=options.watch_server_timeout + 60):
                raw = event.get("object")
                if not isinstance(raw, Mapping):
                    continue
                if event.get("type") == "ERROR":
                    if raw.get("code") == EXPIRED:
                        raise _Expired()
                    raise ApiError(int(raw.get("code") or 0), f"watch {kind.path()}: {raw.get('message')}")
                if event.get("type") == "DELETED":
                    feed.deleted(kind, raw)
                elif event.get("type") in ("ADDED", "MODIFIED"):
                    feed.observe(kind, raw)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    state.groups.group_changed(self._ref(kind, raw))
                meta = raw.get("metadata")
                if isinstance(meta, Mapping) and meta.get("resourceVersion"):
                    version = str(meta["resourceVersion"])
        except ApiError as error:
            if error.status == EXPIRED:
                raise _Expired() from None
            self._check(kind, error)
            raise
        return version

    @staticmethod
    def _ref(kind: Kind, raw: Mapping[str, Any]) -> GroupRef:
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return GroupRef(kind.name, str(meta.get("namespace") or "default"), str(meta.get("name")))


class _Expired(Exception):
    """The server no longer has the history to resume from: list again."""
