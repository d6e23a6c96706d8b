"""LISTs of a collection, page by page (`limit` and `continue`), over `KubeClient.request`.

Kept apart from `placer.controller.transport.client` (the request path) because listing has its own rules:
pages are asked for one ahead, so the server prepares the next while the caller files this one,
and a continue token that expired (410) starts the listing over. Each page is a GET, so the
client's retry policy resends it on connection errors and timeouts (`placer.controller.transport.retry`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from placer.controller.transport.retry import ApiError

if TYPE_CHECKING:
    from placer.controller.transport.client import Reply

__all__ = [
    "ACTIVE_PODS_SELECTOR",
    "ASSIGNED_PODS_SELECTOR",
    "LIST_PAGE",
    "NODES_LIST_PAGE",
    "NODES_PATH",
    "PENDING_FIRST_PAGE",
    "PENDING_PODS_SELECTOR",
    "PROFILES_PATH",
    "Page",
    "Pages",
    "ResyncLists",
    "list_objects",
]

LIST_PAGE = 500
NODES_PATH = "/api/v1/nodes"
# nodes per page of the resync's node LIST (its pages are filed while the server prepares the next)
NODES_LIST_PAGE = 500
# as kube-scheduler's informer: terminal pods hold no resources and are never scheduled
ACTIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# the resync's two pod LISTs: the assigned pods (what a decision must know) and the pending ones
ASSIGNED_PODS_SELECTOR = ACTIVE_PODS_SELECTOR + ",spec.nodeName!="
PENDING_PODS_SELECTOR = ACTIVE_PODS_SELECTOR + ",spec.nodeName="
# the pending pods' first page: the snapshot the assigned LIST waits for, and the pods a cold start's
# first decisions are chosen among (the next pages come `pods_list_page` at a time meanwhile)
PENDING_FIRST_PAGE = 100
PROFILES_PATH = "/apis/placer.dev/v1alpha1/schedulerprofiles"

Request = Callable[..., Awaitable["Reply"]]
#: one page of a listing: its items, the listing's resourceVersion, whether the listing started over
Page = tuple[list[Any], str, bool]


class Pages:
    """A LIST page by page, as an async iterator of (items, the list's resourceVersion, whether the
    listing started over); `close()` when done with it.

    The first page is asked for on creation, and each next page before this one is handed out, so
    the server prepares it while the caller files this one. A listing starts over when its continue
    token expired (410): the caller drops what the earlier pages proved."""

    def __init__(
        self, request: Request, path: str, query: Sequence[tuple[str, str]], limit: int, first: int | None = None
    ) -> None:
        self._request, self.path, self._query, self._limit = request, path, list(query), limit
        self._token = ""
        self._restarted = False
        self._pending: asyncio.Future[Reply] | None = self._page(first or limit)

    def _page(self, limit: int | None = None) -> asyncio.Future[Reply]:
        query = self._query
        if self._token:  # a continue token carries the listing's version: the server refuses another
            query = [(key, value) for key, value in query if key not in ("resourceVersion", "resourceVersionMatch")]
        params = [*query, ("limit", str(limit or self._limit)), *((("continue", self._token),) if self._token else ())]
        return asyncio.ensure_future(self._request("GET", self.path, query=params))

    def __aiter__(self) -> Pages:
        return self

    async def __anext__(self) -> Page:
        while self._pending is not None:
            reply = await self._pending
            if reply.status == 410 and self._token:  # the continue token expired: start over
                self._token, self._restarted = "", True
                self._pending = self._page()
                continue
            if not reply.ok:
                self._pending = None
                raise ApiError(reply.status, f"GET {self.path}: {reply.message()}")
            body = reply.json() or {}
            meta = body.get("metadata") or {}
            self._token = meta.get("continue") or ""
            self._pending = self._page() if self._token else None
            if self._pending is not None:
                await asyncio.sleep(0)  # the request goes out before the caller files this page
            restarted, self._restarted = self._restarted, False
            return list(body.get("items") or []), str(meta.get("resourceVersion") or ""), restarted
        raise StopAsyncIteration

    def close(self) -> None:
        """Abandon the page in flight, if any (its failure, if it failed, is no one's to report)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            abandon(pending)


def abandon(future: asyncio.Future[Any]) -> None:
    """Cancel `future` if it is still running, else mark its failure, if any, as seen (nobody is
    left to report it)."""
    if not future.done():
        future.cancel()
    elif not future.cancelled():
        future.exception()


async def list_objects(request: Request, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Any], str]:
    """Every item of a collection, paged; returns (items, the list's resourceVersion)."""
    items: list[Any] = []
    token = ""
    while True:
        params = [*query, ("limit", str(LIST_PAGE))]
        if token:
            params.append(("continue", token))
        reply = await request("GET", path, query=params)
        if reply.status == 410 and token:  # the continue token expired: start over
            items, token = [], ""
            continue
        if not reply.ok:
            raise ApiError(reply.status, f"GET {path}: {reply.message()}")
        body = reply.json() or {}
        items.extend(body.get("items") or [])
        meta = body.get("metadata") or {}
        token = meta.get("continue") or ""
        if not token:
            return items, str(meta.get("resourceVersion") or "")


class Lister(Protocol):
    def list_pages(
        self, path: str, query: Sequence[tuple[str, str]] = (), *, limit: int = LIST_PAGE, first: int | None = None
    ) -> Pages: ...

    async def list_objects(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Any], str]: ...


@dataclass(slots=True)
class ResyncLists:
    """A resync's big LISTs: the nodes and the pending pods (a listing per namespace watched, or one
    of every namespace), asked for at once (`Pages` asks for its first page on creation), then the
    assigned pods (`assigned`), asked for as soon as the pending listings' first pages are here
    (`snapshots`): the pending snapshot comes first, so a pod bound between the two is in the
    assigned one. `others`: the small LISTs (profiles, catalog kinds) asked for ahead
    (`ask_others`), by path. `query`: what every LIST of this resync adds (`cached`: the watch
    cache).

    `placer run` makes its first resync's before it imports the engine (about half a second of
    CPU at a cold start), and asks for the others as soon as the catalog's kinds are imported:
    the API server prepares them meanwhile (`placer.controller.main.operate`). The resync takes
    them over only while they are fresh (`MAX_AGE`): a standby replica that becomes leader later
    lists afresh."""

    client: Lister
    query: list[tuple[str, str]]
    page: int  # pods per page
    nodes: Pages
    pending: list[Pages]
    asked_at: float
    #: each pending listing's first page, once here (and the assigned pods' LISTs asked for)
    snapshots: asyncio.Future[list[Page]] = field(init=False)
    assigned: list[Pages] = field(default_factory=list)
    others: dict[str, asyncio.Future[tuple[list[Any], str]]] = field(default_factory=dict)
    _lanes: list[asyncio.Task[None]] = field(default_factory=list)

    MAX_AGE = 10.0  # seconds
    LANES = 2  # the small LISTs asked for ahead go one after another on this many connections

    @classmethod
    def ask(cls, client: Lister, namespaces: Sequence[str], page: int, *, cached: bool) -> ResyncLists:
        """`cached`: the nodes from the watch cache (`resourceVersion=0`), as a process's first
        resync reads them (`placer.controller.resync`); the pending pods are consistent pages."""
        paths = [f"/api/v1/namespaces/{namespace}/pods" for namespace in namespaces] or ["/api/v1/pods"]
        query = [("resourceVersion", "0")] if cached else []
        return cls(
            client=client,
            query=query,
            page=page,
            nodes=client.list_pages(NODES_PATH, query, limit=max(page, NODES_LIST_PAGE)),
            pending=[client.list_pages(path, [("fieldSelector", PENDING_PODS_SELECTOR)], limit=page,
                                       first=min(page, PENDING_FIRST_PAGE)) for path in paths],
            asked_at=time.monotonic(),
        )

    def __post_init__(self) -> None:
        self.snapshots = asyncio.ensure_future(self._snapshots_then_assigned())

    async def _snapshots_then_assigned(self) -> list[Page]:
        firsts = [await anext(pages) for pages in self.pending]
        selector = [("fieldSelector", ASSIGNED_PODS_SELECTOR), *self.query]
        self.assigned = [self.client.list_pages(pages.path, selector, limit=self.page) for pages in self.pending]
        return firsts

    def ask_others(self, paths: Sequence[str]) -> None:
        """Every item of each collection in `paths`, asked for now (the resync's `objects`), `LANES`
        at a time: a few connections kept busy cost less than a TLS handshake per small LIST, and
        they are asked for while the engine imports, with time to spare."""
        client, query = self.client, self.query
        wanted = [path for path in dict.fromkeys(paths) if path not in self.others]
        loop = asyncio.get_running_loop()
        futures = {path: loop.create_future() for path in wanted}
        self.others.update(futures)

        async def lane(paths: Sequence[str]) -> None:
            for path in paths:
                future = futures[path]
                if future.done():  # abandoned (`close`)
                    continue
                try:
                    listed = await client.list_objects(path, query)
                except Exception as error:  # the resync's to handle, as if it had asked itself
                    if not future.done():
                        future.set_exception(error)
                else:
                    if not future.done():
                        future.set_result(listed)

        lanes = min(self.LANES, len(wanted))
        self._lanes.extend(asyncio.ensure_future(lane(wanted[index::lanes])) for index in range(lanes))

    def objects(self, path: str) -> Awaitable[tuple[list[Any], str]]:
        """Every item of `path`: the LIST asked for ahead if it was, else asked for now."""
        return self.others.pop(path, None) or self.client.list_objects(path, self.query)

    def fresh(self) -> bool:
        return time.monotonic() - self.asked_at <= self.MAX_AGE

    def close(self) -> None:
        """Abandon what is still in flight, and what was not taken (its failure is no one's to report)."""
        abandon(self.snapshots)
        for pages in (self.nodes, *self.pending, *self.assigned):
            pages.close()
        for task in self._lanes:
            task.cancel()
        others, self.others = self.others, {}
        for listing in others.values():
            abandon(listing)
