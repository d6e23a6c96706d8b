"""What a cold start's LISTs cost on a real control plane, step by step (issue 25).

One control plane (bench/real_bench.py's, under its lock) filled with NODES nodes and PODS pending
pods (bench/synthetic.py's `plain` workload), then the start-up LISTs of nodes and active pods read
several ways with Placer's own client (`KubeClient.request`), each variant `--rounds` times:

- `paged-500`: Placer's listing before issue 25 (pages of 500, the next asked for before this one
  is decoded; the node LIST, then the pods');
- `paged-5000`: pages of 5,000;
- `rv0`: `resourceVersion=0` without a limit, one answer per LIST served from the API server's
  watch cache (what client-go's reflector asks for first);
- `rv0-concurrent`: the same, the node and pod LISTs at once;
- `paged-500-concurrent`: pages of 500, the node and pod LISTs at once.
The API server's CPU (/proc of its pid) for each is printed too.

Per variant: wall time, bytes, and the CPU (`time.process_time`) this process spent receiving
and decoding (orjson). `--save DIR` writes the `rv0` bodies (nodes.json, pods.json) for offline
profiling of what follows the decode (parse and index: `bench/startup_profile.py`).

    python bench/list_probe.py [--nodes 15000] [--pods 30000] [--rounds 2] [--save DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "operator"))

import real_bench  # noqa: E402
from placer.controller.kube import KubeClient, loads  # noqa: E402
from placer.controller.listing import ACTIVE_PODS_SELECTOR  # noqa: E402
from synthetic import cluster as synthetic_cluster  # noqa: E402

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"
POD_QUERY = [("fieldSelector", ACTIVE_PODS_SELECTOR)]
VARIANTS = ("paged-500", "paged-500-concurrent", "paged-5000", "rv0", "rv0-concurrent")


async def paged(kube: KubeClient, path: str, query: list[tuple[str, str]], limit: int) -> tuple[int, int, float]:
    """Items, bytes and decode CPU of a paged LIST (one page ahead, as `Pages`)."""
    items = size = 0
    decode = 0.0
    pages = kube.list_pages(path, query, limit=limit)
    # Pages decodes inside __anext__: time the whole call's CPU minus nothing (receiving is small)
    try:
        while True:
            started = time.process_time()
            try:
                batch, _, _ = await pages.__anext__()
            except StopAsyncIteration:
                break
            decode += time.process_time() - started
            items += len(batch)
    finally:
        pages.close()
    return items, size, decode


async def whole(kube: KubeClient, path: str, query: list[tuple[str, str]]) -> tuple[int, int, float, bytes]:
    """Items, bytes and decode CPU of one unpaged LIST from the watch cache."""
    reply = await kube.request("GET", path, query=[*query, ("resourceVersion", "0")])
    started = time.process_time()
    body = loads(reply.data)
    decode = time.process_time() - started
    return len(body["items"]), len(reply.data), decode, reply.data


async def variant(kube: KubeClient, name: str, save: Path | None, apiserver: int) -> dict[str, float]:
    wall = time.monotonic()
    cpu = time.process_time()
    server = real_bench.cpu_seconds(apiserver)
    out: dict[str, float] = {}
    if name.startswith("paged"):
        limit = int(name.split("-")[1])
        nodes, _, node_decode = await paged(kube, NODES, [], limit)
        pods, _, pod_decode = await paged(kube, PODS, POD_QUERY, limit)
        out.update(nodes=nodes, pods=pods, decode_cpu_s=node_decode + pod_decode)
    else:
        if name == "rv0-concurrent":
            (nodes, node_bytes, node_decode, node_data), (pods, pod_bytes, pod_decode, pod_data) = await asyncio.gather(
                whole(kube, NODES, []), whole(kube, PODS, POD_QUERY))
        else:
            nodes, node_bytes, node_decode, node_data = await whole(kube, NODES, [])
            pods, pod_bytes, pod_decode, pod_data = await whole(kube, PODS, POD_QUERY)
        out.update(nodes=nodes, pods=pods, bytes=node_bytes + pod_bytes, decode_cpu_s=node_decode + pod_decode)
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
            (save / "nodes.json").write_bytes(node_data)
            (save / "pods.json").write_bytes(pod_data)
    out["wall_s"] = time.monotonic() - wall
    out["cpu_s"] = time.process_time() - cpu
    out["apiserver_cpu_s"] = real_bench.cpu_seconds(apiserver) - server
    return out


async def probe(kubeconfig: Path, rounds: int, save: Path | None, apiserver: int) -> dict[str, Any]:
    kube = await KubeClient.connect(str(kubeconfig), pool_size=8)
    results: dict[str, list[dict[str, float]]] = {}
    try:
        for round_ in range(rounds):
            for name in VARIANTS:
                outcome = await variant(kube, name, save if round_ == 0 and name == "rv0" else None, apiserver)
                results.setdefault(name, []).append(outcome)
                print(f"round {round_ + 1} {name:>15}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else
                                                                 f"{k} {v}" for k, v in outcome.items()), flush=True)
    finally:
        await kube.close()
    return {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in results.items()}


async def fill(kube_bin: Path, state: Path, nodes: int, pods: int) -> Path:
    node_objs, pod_objs, _ = synthetic_cluster(nodes, pods)
    kubeconfig = real_bench.control_plane_up(kube_bin, state)
    api = real_bench.Api()
    try:
        started = time.monotonic()
        await real_bench.populate(api, node_objs, kubeconfig)
        await api.many(real_bench.pod_calls(pod_objs, real_bench.PLACER_NAME), concurrency=32)
        print(f"filled {nodes} nodes, {pods} pods in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        await api.close()
    return kubeconfig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-bin", type=Path, default=real_bench.DEFAULT_KUBE_BIN)
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kube_bin = args.kube_bin.resolve()
    lock = real_bench.hold_lock()  # noqa: F841 - one control plane at a time
    with tempfile.TemporaryDirectory(prefix="list-probe-") as tmp:
        state = real_bench.plane_state(Path(tmp) / "control-plane")
        try:
            kubeconfig = asyncio.run(fill(kube_bin, state, args.nodes, args.pods))
            os.environ.pop("HTTPS_PROXY", None)
            summary = asyncio.run(probe(kubeconfig, args.rounds, args.save,
                                        int((state / "apiserver.pid").read_text().strip())))
        finally:
            real_bench.control_plane_down(kube_bin, state)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"nodes": args.nodes, "pods": args.pods, "variants": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
