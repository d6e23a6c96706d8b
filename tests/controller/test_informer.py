"""The informer (`placer.controller.informers.informer`) against a scripted API: LIST then WATCH, resumed,
listed again on 410 with what the new LIST no longer holds deleted, a collection not served, a relist
asked for, failures retried from where it was."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from placer.controller.informers.informer import Informer, WatchTimings, object_key
from placer.controller.transport.retry import ApiError

from tests.controller.helpers import until

TIMINGS = WatchTimings(page=2, server_timeout=30, backoff=0.01, max_backoff=0.02, recheck=0.05)


def obj(name: str, rv: int, namespace: str | None = "default", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, **extra}


class ScriptedApi:
    """A collection's LISTs (paged by `limit`) and watch streams, as a test scripts them."""

    def __init__(self, items: list[dict[str, Any]], version: int = 10) -> None:
        self.items = items
        self.version = version
        self.lists: list[dict[str, str]] = []  # the query of every LIST page asked for
        self.watches: list[dict[str, str]] = []  # the query of every watch opened
        self.streams: asyncio.Queue[list[dict[str, Any]] | BaseException | None] = asyncio.Queue()
        self.list_error: ApiError | None = None

    def list_pages(self, path: str, query: Sequence[tuple[str, str]] = (), *, limit: int = 500) -> AsyncIterator[Any]:
        self.lists.append({**dict(query), "limit": str(limit)})  # the first page is asked for at once, as Pages does
        return self._pages(dict(query), limit)

    async def _pages(self, query: dict[str, str], limit: int) -> AsyncIterator[Any]:
        snapshot = json.loads(json.dumps(self.items))
        for start in range(0, max(len(snapshot), 1), limit):
            if start:
                self.lists.append({**query, "limit": str(limit)})
            if self.list_error is not None:
                raise self.list_error
            yield snapshot[start:start + limit], str(self.version), False

    async def watch(self, path: str, query: Sequence[tuple[str, str]], *, connect_timeout: float,
                    read_timeout: float) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(dict(query))
        script = await self.streams.get()
        if isinstance(script, BaseException):
            raise script
        for event in script or ():
            yield event


class Recorder:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.served: list[bool] = []

    def upsert(self, raw: Any) -> None:
        self.objects[object_key(raw)] = raw

    def delete(self, raw: Any) -> None:
        self.objects.pop(object_key(raw), None)
        self.deleted.append(object_key(raw))


@pytest.fixture
async def running() -> AsyncIterator[Any]:
    tasks: list[asyncio.Task[None]] = []

    def start(api: ScriptedApi, recorder: Recorder) -> Informer:
        informer = Informer(api, "/api/v1/things", upsert=recorder.upsert, delete=recorder.delete, timings=TIMINGS,
                            served=recorder.served.append)
        tasks.append(asyncio.create_task(informer.run()))
        return informer

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_first_list_reads_the_watch_cache_and_the_watch_resumes_from_it(running: Any) -> None:
    api, seen = ScriptedApi([obj("a", 3), obj("b", 4), obj("c", 5)]), Recorder()
    informer = running(api, seen)
    await asyncio.wait_for(informer.synced.wait(), 1)
    assert set(seen.objects) == {"default/a", "default/b", "default/c"} and seen.served == [True]
    assert [q.get("resourceVersion") for q in api.lists] == ["0", "0"]  # two pages, both from the cache
    await api.streams.put([{"type": "ADDED", "object": obj("d", 11)}, {"type": "DELETED", "object": obj("a", 12)},
                           {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}}])
    # the stream ends after them (the server's timeout): resumed from the last version, no LIST
    await until(lambda: len(api.watches) == 2 and "default/d" in seen.objects)
    assert api.watches[0]["resourceVersion"] == "10" and api.watches[0]["allowWatchBookmarks"] == "true"
    assert seen.deleted == ["default/a"]
    assert api.watches[1]["resourceVersion"] == "13" and len(api.lists) == 2


async def test_an_expired_watch_lists_again_and_applies_what_the_gap_deleted(running: Any) -> None:
    api, seen = ScriptedApi([obj("a", 3), obj("b", 4)]), Recorder()
    informer = running(api, seen)
    await asyncio.wait_for(informer.synced.wait(), 1)
    api.items = [obj("b", 4), obj("c", 20)]  # while no watch was open: a deleted, c added
    api.version = 21
    await api.streams.put([{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}])
    await until(lambda: informer.lists == 2)
    assert seen.deleted == ["default/a"] and set(seen.objects) == {"default/b", "default/c"}
    assert "resourceVersion" not in api.lists[-1]  # consistent: not the watch cache
    await until(lambda: len(api.watches) == 2)
    assert api.watches[1]["resourceVersion"] == "21"
    # a 410 as the HTTP status of the watch request does the same
    api.items = []
    await api.streams.put(ApiError(410, "Expired"))
    await until(lambda: informer.lists == 3)
    assert set(seen.deleted) == {"default/a", "default/b", "default/c"} and not seen.objects


async def test_a_relist_asked_for_is_a_fresh_consistent_list(running: Any) -> None:
    api, seen = ScriptedApi([obj("a", 3, namespace=None)]), Recorder()
    informer = running(api, seen)
    await asyncio.wait_for(informer.synced.wait(), 1)
    await until(lambda: api.watches)  # watching (the stream waits for its script)
    api.items = [obj("b", 30, namespace=None)]
    await asyncio.wait_for(informer.relist(), 1)
    assert informer.lists == 2 and set(seen.objects) == {"b"} and seen.deleted == ["a"]
    assert "resourceVersion" not in api.lists[-1]


async def test_a_collection_not_served_counts_as_synced_and_is_asked_for_again(running: Any) -> None:
    api, seen = ScriptedApi([obj("a", 3)]), Recorder()
    api.list_error = ApiError(404, "the server could not find the requested resource")
    informer = running(api, seen)
    await asyncio.wait_for(informer.synced.wait(), 1)
    assert seen.served == [False] and not seen.objects
    api.list_error = None  # installed meanwhile (a CRD): found at the next look
    await until(lambda: seen.served == [False, True] and "default/a" in seen.objects)


async def test_a_failed_stream_resumes_after_its_backoff_from_where_it_was(running: Any) -> None:
    api, seen = ScriptedApi([obj("a", 3)]), Recorder()
    informer = running(api, seen)
    await asyncio.wait_for(informer.synced.wait(), 1)
    await api.streams.put([{"type": "MODIFIED", "object": obj("a", 15)}])
    await api.streams.put(ConnectionResetError("reset"))
    await until(lambda: len(api.watches) == 3)
    assert [w["resourceVersion"] for w in api.watches] == ["10", "15", "15"] and informer.lists == 1
    # a LIST that fails is tried again, and nothing is deleted on its account
    api.list_error = ApiError(500, "etcd is sad")
    await api.streams.put([{"type": "ERROR", "object": {"code": 410}}])
    await until(lambda: len(api.lists) >= 3)
    assert seen.deleted == [] and "default/a" in seen.objects
    api.list_error = None
    await until(lambda: informer.lists == 2)


async def test_filing_may_wait_while_the_list_is_already_asked_for() -> None:
    """The pods' LIST goes out at once; their filing waits for the PriorityClasses (`file_after`)."""
    api, seen = ScriptedApi([obj("a", 3)]), Recorder()
    classes = asyncio.Event()

    async def classes_listed() -> None:
        await classes.wait()

    informer = Informer(api, "/api/v1/pods", upsert=seen.upsert, delete=seen.delete, timings=TIMINGS,
                        file_after=classes_listed)
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: api.lists)  # asked for
        await asyncio.sleep(0.05)
        assert not seen.objects and not informer.synced.is_set()  # not filed yet
        classes.set()
        await asyncio.wait_for(informer.synced.wait(), 1)
        assert set(seen.objects) == {"default/a"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
