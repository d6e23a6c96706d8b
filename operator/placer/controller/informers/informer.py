"""Placer's own watches of pods and nodes: kube-scheduler's informers, not Kopf's.

Pods are the kind whose events come at the scheduling rate (each pod is listed or added, then
bound, then deleted), and nodes the kind listed in thousands at start-up. Through Kopf each event
cost about 0.5 ms of CPU on a real API server (a Body, three loggers, the object's memory, cause
detection, handler bookkeeping), about a fifth of Placer's CPU per pod, and Kopf's initial
listings duplicated the resync's. Here the resync's LIST is the listing (`SchedulerState.resync`
records each path's resourceVersion in `watch_versions`) and the watch resumes from it: one
listing, and an event costs its JSON decoding and the state's own bookkeeping.

As an informer: the watch asks for bookmarks and for the server to end the stream after
`watch_server_timeout`, then resumes from the last resourceVersion it saw; a resume the server
refuses as too old (410 Expired, as an HTTP status or an ERROR event) asks for a resync, whose
LIST prunes what was deleted in the gap, and resumes from that LIST; any other failure (no
answer, 5xx, 429) is retried with backoff from `watch_backoff` to `watch_max_backoff`, forever,
from the last resourceVersion seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from placer.controller.state import SchedulerState
from placer.controller.transport.client import ApiError
from placer.controller.transport.listing import ACTIVE_PODS_SELECTOR

__all__ = ["Informer", "node_informer", "pod_informer"]

logger = logging.getLogger("placer.informers")

EXPIRED = 410


class _Expired(Exception):
    """The server no longer has the history to resume from: list again."""


class Informer:
    """The watch of one kind (`kind`: its key in `Resync.watch_versions`), its events fed to
    `feed`; `query` narrows it (e.g. the pods' field selector)."""

    def __init__(
        self, state: SchedulerState, kind: str, feed: Callable[[Mapping[str, Any]], None],
        query: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.state = state
        self.kind = kind
        self.feed = feed
        self.query = list(query)
        self.resumes = 0  # streams (re)opened, for tests and curiosity

    @property
    def versions(self) -> dict[str, str]:
        return self.state.resync.watch_versions[self.kind]

    async def run(self) -> None:
        """Follow every path the resync lists (for pods: all namespaces, or each of `--namespace`)."""
        state = self.state
        while not self.versions:  # the first resync lists the kind and says from where to watch
            await state.resync.resynced.wait()
        await asyncio.gather(*(self._follow(path) for path in list(self.versions)))

    async def _follow(self, path: str) -> None:
        state = self.state
        options = state.options
        delay = options.watch_backoff
        while True:
            try:
                await self._stream(path)
                delay = options.watch_backoff  # an orderly end (the server's timeout): resume at once
            except _Expired:
                await self._relist(path)
            except (ApiError, TimeoutError, OSError, ValueError) as error:
                if isinstance(error, ApiError) and error.status == EXPIRED:
                    await self._relist(path)
                    continue
                why = str(error) or type(error).__name__
                logger.warning("%s watch on %s failed, resuming in %.1fs: %s", self.kind[:-1], path, delay, why)
                await asyncio.sleep(delay)
                delay = min(delay * 2, options.watch_max_backoff)

    async def _stream(self, path: str) -> None:
        state = self.state
        assert state.kube is not None
        options = state.options
        query = [
            *self.query,
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(options.watch_server_timeout)),
            ("resourceVersion", self.versions[path]),
        ]
        self.resumes += 1
        async for event in state.kube.watch(
            path, query, connect_timeout=options.watch_connect_timeout,
            read_timeout=options.watch_server_timeout + 60,
        ):
            kind = event.get("type")
            raw = event.get("object")
            if type(raw) is not dict and not isinstance(raw, Mapping):  # (dict first: the ABC check is slow)
                continue
            if kind == "ERROR":
                if raw.get("code") == EXPIRED:
                    raise _Expired()
                raise ApiError(int(raw.get("code") or 0), f"watch {path}: {raw.get('message')}")
            version = _version(raw)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.feed(event)
            if version:
                self.versions[path] = version

    async def _relist(self, path: str) -> None:
        """Ask for a resync (it prunes what no event will tell) and wait for its LIST."""
        state = self.state
        logger.info("the %s watch on %s expired: listing again, deletions it missed will be pruned",
                    self.kind[:-1], path)
        target = state.resync.resyncs_done + 1
        state.resync.relisted.set()
        while state.resync.resyncs_done < target:
            await state.resync.resynced.wait()


def pod_informer(state: SchedulerState) -> Informer:
    """Active pods only, as kube-scheduler's informer: terminal pods hold nothing and are never
    scheduled; a pod that turns terminal leaves the selection and comes as DELETED."""
    return Informer(state, "pods", state.pod_event, [("fieldSelector", ACTIVE_PODS_SELECTOR)])


def node_informer(state: SchedulerState) -> Informer:
    return Informer(state, "nodes", state.node_event)


def _version(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    return str(meta.get("resourceVersion") or "") if type(meta) is dict or isinstance(meta, Mapping) else ""
