"""The informer: one collection of the API server kept in step with the cache, as client-go's reflector
and shared informer keep kube-scheduler's. Every kind the scheduler reads comes through this one
class: pods, nodes, SchedulerProfiles, the catalog kinds, PodGroups.

Its life:

1. **LIST**, page by page (`limit`/`continue`); each object goes to `upsert`. The first LIST reads
   the API server's watch cache (`resourceVersion=0`, as the reflector's first LIST): a consistent
   LIST of 30,000 pods costs the server seconds of CPU in etcd. Every later LIST (after 410, or
   asked for by `relist`) is consistent: a new leader must see what the last one bound. Once a
   LIST is filed, what the informer knew and the LIST no longer holds is handed to `delete` (a
   deletion that happened while no watch was open reaches the cache that way), and `synced` is
   set.
2. **WATCH** from the LIST's resourceVersion, with bookmarks, the server asked to end each stream
   after `server_timeout`; resumed from the last resourceVersion seen when it ends.
3. A resume the server refuses as too old (410 Expired, as an HTTP status or an ERROR event) lists
   again (1.). Any other failure (no answer, 5xx, 429) is retried with backoff from `backoff` to
   `max_backoff`, forever, from where it was.
4. A collection the server does not serve (404: an older release, a CRD not installed) or may not be
   read (403: RBAC) is reported to `served(False)`, counts as synced (there is nothing to wait for)
   and is asked for again every `recheck` seconds.

`relist()` asks for a fresh consistent LIST (a new leadership term) and returns once it is filed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from placer.controller.signals import Signal
from placer.controller.transport import ApiError, Page

__all__ = ["EXPIRED", "Informer", "ListWatch", "WatchTimings", "object_key"]

logger = logging.getLogger("placer.informers")

EXPIRED = 410
NOT_SERVED = frozenset({403, 404})
#: what a watch stream may fail with besides an ApiError (the transport's, `placer.controller.transport`)
STREAM_FAILURES = (TimeoutError, OSError, ValueError)


class ListWatch(Protocol):
    """What an informer asks of the API client (`KubeClient` has it)."""

    def list_pages(self, path: str, query: Sequence[tuple[str, str]] = (), *, limit: int = ...) -> AsyncIterator[Page]:
        ...

    def watch(
        self, path: str, query: Sequence[tuple[str, str]], *, connect_timeout: float, read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class WatchTimings:
    """How an informer lists and watches (`placer.controller.options.Options` gives them)."""

    page: int = 500  # objects per LIST page
    server_timeout: int = 300  # seconds the server keeps a watch stream open
    connect_timeout: float = 10.0
    backoff: float = 1.0  # first delay after a failure, doubling ...
    max_backoff: float = 16.0  # ... up to this
    recheck: float = 60.0  # a collection not served is asked for again this often


class _Expired(Exception):
    """The server no longer has the history to resume from: list again."""


class _NotServed(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def object_key(raw: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced objects, `name` otherwise."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _version(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    return str(meta.get("resourceVersion") or "") if type(meta) is dict or isinstance(meta, Mapping) else ""


def _stub(key: str) -> dict[str, Any]:
    """The object handed to `delete` for one a LIST no longer holds: its name (and namespace)."""
    namespace, _, name = key.rpartition("/")
    return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}


class Informer:
    """One collection (`path`, narrowed by `query`) fed to `upsert(raw)` and `delete(raw)`."""

    def __init__(
        self,
        client: ListWatch,
        path: str,
        *,
        upsert: Callable[[Mapping[str, Any]], None],
        delete: Callable[[Mapping[str, Any]], None],
        query: Sequence[tuple[str, str]] = (),
        timings: WatchTimings = WatchTimings(),
        served: Callable[[bool], None] | None = None,
        name: str = "",
        file_after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.path = path
        self.upsert = upsert
        self.delete = delete
        self.query = list(query)
        self.timings = timings
        self.served = served
        self.name = name or path
        # what filing waits for (its LIST is asked for at once): the pods' parse reads PriorityClasses
        self.file_after = file_after
        self.synced = asyncio.Event()  # a LIST was filed (or the collection is not served)
        self.lists = 0  # LISTs filed
        self.serving: bool | None = None  # whether the server serves the collection (None: not asked yet)
        self.streams = 0  # watch streams opened, for tests and curiosity
        self._known: dict[str, None] = {}  # keys of what `upsert` was given and `delete` was not
        self._version = ""  # where the watch resumes
        self._relist = asyncio.Event()
        self._listing = False
        self._listed = Signal()  # fired at each LIST filed

    async def relist(self) -> None:
        """A fresh consistent LIST, asked for now and filed; returns once it is (or once the
        collection is found unserved)."""
        target = self.lists + (2 if self._listing else 1)  # a LIST under way was asked for before
        self._relist.set()
        while self.lists < target:
            await self._listed.wait()

    async def run(self) -> None:
        timings = self.timings
        delay = timings.backoff
        consistent = False  # the first LIST reads the watch cache
        must_list = True
        while True:
            try:
                if must_list:
                    await self._list(consistent)
                    consistent, must_list = True, False
                await self._watch()  # until `relist` asks for a LIST
                must_list = True
                delay = timings.backoff
            except _Expired:
                logger.info("the watch of %s expired: listing again (deletions it missed are applied)", self.name)
                must_list = True
            except _NotServed as refused:
                self._not_served(refused)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timings.recheck):
                        await self._relist.wait()
                must_list = True
            except (ApiError, *STREAM_FAILURES) as error:  # resumed from where it was
                why = str(error) or type(error).__name__
                logger.warning("%s: %s failed, again in %.1fs: %s", self.name, "LIST" if must_list else "watch",
                               delay, why)
                await asyncio.sleep(delay)
                delay = min(delay * 2, timings.max_backoff)

    # ----------------------------------------------------------------- LIST

    async def _list(self, consistent: bool) -> None:
        self._relist.clear()
        self._listing = True
        started = time.monotonic()
        query = self.query if consistent else [*self.query, ("resourceVersion", "0")]
        listed: set[str] = set()
        version = ""
        pages = self.client.list_pages(self.path, query, limit=self.timings.page)
        try:
            if self.file_after is not None:
                await self.file_after()
            async for items, page_version, restarted in pages:
                version = page_version  # every page of one listing carries the listing's version
                if restarted:  # its continue token expired: only the new listing proves anything gone
                    listed.clear()
                for raw in items:
                    key = object_key(raw)
                    listed.add(key)
                    self._known[key] = None
                    self.upsert(raw)
        except ApiError as error:
            if error.status in NOT_SERVED:
                raise _NotServed(error.status, error.message) from None
            raise
        finally:
            self._listing = False
            close = getattr(pages, "close", None)
            if close is not None:
                close()
        for key in [key for key in self._known if key not in listed]:
            del self._known[key]
            logger.info("%s: %s is gone (no deletion event reached us)", self.name, key)
            self.delete(_stub(key))
        self._version = version
        self.serving = True
        if self.served is not None:
            self.served(True)
        logger.debug("%s: listed %d in %.3f s", self.name, len(listed), time.monotonic() - started)
        self.lists += 1
        self.synced.set()
        self._listed.fire()

    def _not_served(self, refused: _NotServed) -> None:
        if refused.status == 403:
            logger.warning("%s may not be read (RBAC: get/list/watch): %s", self.name, refused)
        for key in list(self._known):  # what was there is gone with its collection
            del self._known[key]
            self.delete(_stub(key))
        self.serving = False
        if self.served is not None:
            self.served(False)
        self.lists += 1
        self.synced.set()
        self._listed.fire()

    # ----------------------------------------------------------------- WATCH

    async def _watch(self) -> None:
        """Streams resumed one after the other until a LIST is needed (410, or `relist`)."""
        while not self._relist.is_set():
            relist = asyncio.ensure_future(self._relist.wait())
            stream = asyncio.ensure_future(self._stream())
            try:
                await asyncio.wait([relist, stream], return_when=asyncio.FIRST_COMPLETED)
            finally:
                relist.cancel()
                if not stream.done():
                    stream.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await stream
            if stream.done() and not stream.cancelled():
                stream.result()  # (raises what ended it)

    async def _stream(self) -> None:
        timings = self.timings
        query = [
            *self.query,
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timings.server_timeout)),
            ("resourceVersion", self._version),
        ]
        self.streams += 1
        try:
            async for event in self.client.watch(self.path, query, connect_timeout=timings.connect_timeout,
                                                 read_timeout=timings.server_timeout + 60):
                kind = event.get("type")
                raw = event.get("object")
                if type(raw) is not dict and not isinstance(raw, Mapping):  # (dict first: the ABC check is slow)
                    continue
                if kind == "ERROR":
                    if raw.get("code") == EXPIRED:
                        raise _Expired()
                    raise ApiError(int(raw.get("code") or 0), f"watch {self.path}: {raw.get('message')}")
                if kind == "DELETED":
                    self._known.pop(object_key(raw), None)
                    self.delete(raw)
                elif kind in ("ADDED", "MODIFIED"):
                    self._known[object_key(raw)] = None
                    self.upsert(raw)
                version = _version(raw)
                if version:
                    self._version = version
        except ApiError as error:
            if error.status == EXPIRED:
                raise _Expired() from None
            if error.status in NOT_SERVED:
                raise _NotServed(error.status, error.message) from None
            raise
