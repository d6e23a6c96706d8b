"""PodGroups of both APIs: which kinds the API server serves (discovery), each served kind through an
informer into the engine's catalog.

Not among `engine.kinds.KINDS`: which upstream version to watch depends on the API server (v1beta1
where served, else v1alpha2, else none), scheduler-plugins' kind exists only where its CRD is
installed, and the kinds share the plural `podgroups`. So:

- **discovery** — `GET /apis/scheduling.k8s.io/v1beta1`, else `/v1alpha2`, and
  `GET /apis/scheduling.x-k8s.io/v1alpha1`: a kind is served when its group-version lists
  `podgroups` (a 404 is "not served"). Run at start-up and every `interval` seconds (an API
  switched on, a CRD installed later), and at once when a watched kind's informer finds it gone.
  A kind no longer served is dropped from the catalog (its informer stopped); the upstream kind
  moving from v1alpha2 to v1beta1 is watched in its new version (both file into the one cache
  `PodGroup`);
- **each watched kind** — an `Informer` (list, watch, relist on 410, prune); every change files the
  group (`CatalogFeed`) and lets the group's held members go (`release`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from placer.controller.informers.catalog import CatalogFeed
from placer.controller.informers.informer import STREAM_FAILURES, Informer, ListWatch, WatchTimings
from placer.controller.transport import ApiError, Reply
from placer.engine.catalog import Catalog, Kind
from placer.engine.groups import POD_GROUP_V1ALPHA2, POD_GROUP_V1BETA1, SCHEDULER_PLUGINS_POD_GROUP, GroupRef

__all__ = ["GroupKinds"]

logger = logging.getLogger("placer.groups")

UPSTREAM = (POD_GROUP_V1BETA1, POD_GROUP_V1ALPHA2)  # in the order discovery prefers them


class Discovery(ListWatch, Protocol):
    async def request(self, method: str, path: str, **kwargs: Any) -> Reply: ...


def group_ref(kind: Kind, raw: Mapping[str, Any]) -> GroupRef:
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return GroupRef(kind.name, str(meta.get("namespace") or "default"), str(meta.get("name")))


class GroupKinds:
    def __init__(
        self, client: Discovery, catalog: Catalog, wake: Callable[[str], None],
        release: Callable[[GroupRef], None], timings: WatchTimings, interval: float = 60.0,
    ) -> None:
        self.client = client
        self.catalog = catalog
        self.wake = wake
        self.release = release  # the group changed: its held members may go
        self.timings = timings
        self.interval = interval
        self.informers: dict[Kind, Informer] = {}
        self._tasks: dict[Kind, asyncio.Task[None]] = {}
        self.rediscover = asyncio.Event()
        self.discoveries = 0  # discovery rounds done (tests and curiosity)
        self.discovered = asyncio.Event()  # the first discovery is done: its informers exist

    @property
    def kinds(self) -> tuple[Kind, ...]:
        return tuple(self.informers)

    async def synced(self) -> None:
        """The first discovery done and each kind it found listed."""
        await self.discovered.wait()
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers.values()))

    async def relist(self) -> None:
        await asyncio.gather(*(informer.relist() for informer in self.informers.values()))

    # ----------------------------------------------------------------- discovery

    async def _served(self, kind: Kind) -> bool:
        reply = await self.client.request("GET", f"/apis/{kind.api_version}", retries=1)
        if reply.status in (403, 404):
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
        """Discover, follow what is served, and discover again now and then."""
        delay = self.timings.backoff
        try:
            while True:
                self.rediscover.clear()
                try:
                    kinds = await self.discover()
                except (ApiError, *STREAM_FAILURES) as error:
                    logger.warning("PodGroup discovery failed, retrying in %.1fs: %s", delay, error)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.timings.max_backoff)
                    continue
                delay = self.timings.backoff
                self._apply(kinds)
                self.discoveries += 1
                self.discovered.set()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self.rediscover.wait()
        finally:
            for task in self._tasks.values():
                task.cancel()

    def _apply(self, kinds: tuple[Kind, ...]) -> None:
        for kind in list(self.informers):
            if kind not in kinds:
                logger.info("PodGroups %s are not served any more", kind.api_version)
                self._stop(kind)
        for kind in kinds:
            if kind not in self.informers:
                logger.info("watching PodGroups %s", kind.api_version)
                self._follow(kind)

    def _follow(self, kind: Kind) -> None:
        feed = CatalogFeed(self.catalog, kind, self.wake)

        def upsert(raw: Mapping[str, Any]) -> None:
            feed.upsert(raw)
            self.release(group_ref(kind, raw))

        def delete(raw: Mapping[str, Any]) -> None:
            feed.delete(raw)
            self.release(group_ref(kind, raw))

        def served(served: bool) -> None:
            if not served:  # its CRD deleted, or RBAC withdrawn: discovery decides again
                self.rediscover.set()

        informer = Informer(self.client, kind.path(), upsert=upsert, delete=delete, timings=self.timings,
                            served=served, name=f"PodGroups {kind.api_version}")
        self.informers[kind] = informer
        self._tasks[kind] = asyncio.create_task(informer.run(), name=f"placer: {kind.api_version}")

    def _stop(self, kind: Kind) -> None:
        """Every group of a kind no longer watched leaves the catalog."""
        self.informers.pop(kind)
        self._tasks.pop(kind).cancel()
        refs = [GroupRef(kind.name, namespace, name) for namespace, name, _ in self.catalog.items(kind.name)]
        for ref in refs:
            self.catalog.remove(kind.name, ref.namespace, ref.name)
        if refs:
            self.wake(kind.name)
        for ref in refs:
            self.release(ref)
