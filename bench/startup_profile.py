"""Placer's cold start on a real API server's LIST bodies, offline, in steps (issue 25).

`bench/list_probe.py --save DIR` writes what a v1.36 API server answered to the start-up LISTs of
nodes and active pods (nodes.json, pods.json). Here those items are served again in pages, as JSON
bytes, by an in-process stand-in for `KubeClient` (the other kinds: empty lists, the `bench`
SchedulerProfile), and `Resync.run()` (decode, parse, index: everything before the first decision)
then the first decision are timed in CPU, `--runs` times, medians. With `--profile` a cProfile of
one resync is printed (the top functions by own time).

    python bench/startup_profile.py DIR [--runs 3] [--page 500] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from placer.controller.options import Options
from placer.controller.state import SchedulerState
from placer.controller.transport.client import Pages, Reply
from placer.controller.transport.listing import PENDING_FIRST_PAGE

PROFILE = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
           "metadata": {"name": "bench", "resourceVersion": "1"}, "spec": {"schedulerName": "placer"}}


class ReplayKube:
    """`KubeClient`'s listing calls over saved LIST bodies, a page at a time, as JSON bytes."""

    def __init__(self, nodes: list[Any], pods: list[Any], version: str) -> None:
        self.items = {"/api/v1/nodes": nodes, "/api/v1/pods": pods,
                      "/apis/placer.dev/v1alpha1/schedulerprofiles": [PROFILE]}
        self.version = version
        self.pages: dict[tuple[str, int, int], bytes] = {}  # (path, offset, limit) -> the page

    def encoded(self, path: str, limit: int, first: int | None = None) -> list[bytes]:
        """The pages of `path` (`first` items in the first, `limit` in each next), encoded once (the
        server's work, not Placer's)."""
        pages, offset, size = [], 0, first or limit
        while True:
            pages.append(self.page(path, offset, size))
            offset, size = offset + size, limit
            if offset >= len(self.items.get(path, [])):
                return pages

    def page(self, path: str, offset: int, limit: int) -> bytes:
        key = (path, offset, limit)
        if key not in self.pages:
            items = self.items.get(path, [])
            more = {"continue": str(offset + limit)} if offset + limit < len(items) else {}
            self.pages[key] = orjson.dumps({"kind": "List", "metadata": {"resourceVersion": self.version, **more},
                                            "items": items[offset:offset + limit]})
        return self.pages[key]

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), **_: Any) -> Reply:
        params = dict(query)
        limit = int(params.get("limit") or 10**9)
        data = self.page(path, int(params.get("continue") or 0), limit)
        await asyncio.sleep(0)
        return Reply(200, data)

    async def list_objects(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Any], str]:
        items: list[Any] = []
        version = ""
        async for batch, page_version, _ in Pages(self.request, path, query, 500):
            items.extend(batch)
            version = page_version
        return items, version

    def list_pages(
        self, path: str, query: Sequence[tuple[str, str]] = (), *, limit: int = 500, first: int | None = None
    ) -> Pages:
        return Pages(self.request, path, query, limit, first)


async def one(kube: ReplayKube, page: int, profiler: cProfile.Profile | None) -> dict[str, float]:
    state = SchedulerState(Options(leader_elect=False, pods_list_page=page), kube)  # type: ignore[arg-type]
    for path in kube.items:  # encode outside the clock
        kube.encoded(path, page)
        kube.encoded(path, page, min(page, PENDING_FIRST_PAGE))
        kube.encoded(path, 500)
    gc.disable()
    started = time.process_time()
    if profiler is not None:
        profiler.enable()
    await state.resync.run()
    resynced = time.process_time()
    state.nominations.rebuild()
    for name in state.profiles.scheduler_names():
        state.cache.enqueue_pending(name)
    state.profiles.mark_all()
    queued = time.process_time()
    if profiler is not None:
        profiler.disable()
    gc.enable()
    return {"resync_cpu_s": resynced - started, "enqueue_cpu_s": queued - resynced,
            "nodes": state.cluster.node_count, "pending": len(state.queue)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    nodes_body = orjson.loads((args.folder / "nodes.json").read_bytes())
    pods_body = orjson.loads((args.folder / "pods.json").read_bytes())
    kube = ReplayKube(nodes_body["items"], pods_body["items"], pods_body["metadata"]["resourceVersion"])
    for path in ("/api/v1/nodes", "/api/v1/pods"):
        started = time.process_time()
        for data in kube.encoded(path, args.page):
            orjson.loads(data)
        print(f"{path}: decode alone {time.process_time() - started:.3f} s CPU "
              f"({sum(map(len, kube.encoded(path, args.page))) / 1e6:.1f} MB)")
    runs = [asyncio.run(one(kube, args.page, None)) for _ in range(args.runs)]
    for key in runs[0]:
        print(f"{key}: {statistics.median(r[key] for r in runs):.3f} (runs: {[round(r[key], 3) for r in runs]})")
    if args.profile:
        profiler = cProfile.Profile()
        asyncio.run(one(kube, args.page, profiler))
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
