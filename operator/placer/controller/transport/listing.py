"""LISTs of a collection, page by page (`limit` and `continue`), over `KubeClient.request`.

Kept apart from `placer.controller.transport.client` (the request path) because listing has its own rules:
pages are asked for one ahead, so the server prepares the next while the caller files this one,
and a continue token that expired (410) starts the listing over. Each page is a GET, so the
client's retry policy resends it on connection errors and timeouts (`placer.controller.transport.retry`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from placer.controller.transport.retry import ApiError

__all__ = ["LIST_PAGE", "Page", "Pages", "list_objects"]

LIST_PAGE = 500

class Answer(Protocol):
    """A reply to a request (`placer.controller.transport.client.Reply`)."""

    status: int

    @property
    def ok(self) -> bool: ...

    def json(self) -> Any: ...

    def message(self) -> str: ...


Request = Callable[..., Awaitable[Answer]]
#: one page of a listing: its items, the listing's resourceVersion, whether the listing started over
Page = tuple[list[Any], str, bool]


class Pages:
    """A LIST page by page, as an async iterator of (items, the list's resourceVersion, whether the
    listing started over); `close()` when done with it.

    The first page is asked for on creation, and each next page before this one is handed out, so
    the server prepares it while the caller files this one. A listing starts over when its continue
    token expired (410): the caller drops what the earlier pages proved."""

    def __init__(
        self, request: Request, path: str, query: Sequence[tuple[str, str]], limit: int
    ) -> None:
        self._request, self.path, self._query, self._limit = request, path, list(query), limit
        self._token = ""
        self._restarted = False
        self._pending: asyncio.Future[Answer] | None = self._page()

    def _page(self) -> asyncio.Future[Answer]:
        query = self._query
        if self._token:  # a continue token carries the listing's version: the server refuses another
            query = [(key, value) for key, value in query if key not in ("resourceVersion", "resourceVersionMatch")]
        params = [*query, ("limit", str(self._limit)), *((("continue", self._token),) if self._token else ())]
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
