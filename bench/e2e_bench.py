"""End-to-end benchmark: `placer run` against the emulated API server in another process.

Per run: a fresh emulator process is filled with NODES nodes, a SchedulerProfile and PODS
pending pods (BENCHMARKS.md's workload shape, `bench/synthetic.py`); then `placer run
--no-leader-elect` starts as a third process and the clock runs from its start to the last
binding (the emulator timestamps every binding). Afterwards every binding is audited: bound
once, to a Ready, schedulable node whose taints the pod tolerates and whose labels match its
nodeSelector, and no node over its allocatable. Peak RSS is the operator's VmHWM.

The baseline, measured in the same run on a fresh emulator: a bare HTTP client binding the same
pods round-robin with 32 requests in flight and no decisions (the API path's ceiling, as in
BENCHMARKS.md). Figures are medians over the runs.

    python bench/e2e_bench.py [--runs 3] [--nodes 1000] [--pods 5000] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from synthetic import cluster as synthetic_cluster  # noqa: E402

from tests.kubeemu import EmulatorProcess  # noqa: E402

SCHEDULER = "placer"
PROFILE = {
    "apiVersion": "placer.dev/v1alpha1",
    "kind": "SchedulerProfile",
    "metadata": {"name": "bench"},
    "spec": {"schedulerName": SCHEDULER},
}
TARGET_PODS_PER_S = 350.0


async def _post_all(url: str, items: list[tuple[str, dict[str, Any]]], concurrency: int = 32) -> None:
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            path, body = queue.get_nowait()
            async with session.post(url + path, json=body) as response:
                if response.status >= 300:
                    raise RuntimeError(f"POST {path}: {response.status} {await response.text()}")

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))


def populate(emu: EmulatorProcess, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
    items = [("/api/v1/nodes", node) for node in nodes]
    items.append(("/apis/placer.dev/v1alpha1/schedulerprofiles", PROFILE))
    items += [(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod) for pod in pods]
    asyncio.run(_post_all(emu.url, items))


def audit(emu: EmulatorProcess, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, int]:
    """Count invalid bindings: double, capacity, readiness, cordon, taints, selectors."""
    bindings = emu.control("GET", "bindings")
    by_name = {n["metadata"]["name"]: n for n in nodes}
    pod_by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    seen: set[str] = set()
    problems = {
        "double": 0,
        "capacity": len(emu.control("GET", "capacity")),
        "not_ready": 0,
        "cordoned": 0,
        "taint": 0,
        "selector": 0,
        "unknown_pod": 0,
    }
    for record in bindings:
        key = f"{record['namespace']}/{record['name']}"
        if key in seen:
            problems["double"] += 1
        seen.add(key)
        pod, node = pod_by_key.get(key), by_name[record["node"]]
        if pod is None:
            problems["unknown_pod"] += 1
            continue
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"]):
            problems["not_ready"] += 1
        if node["spec"].get("unschedulable"):
            problems["cordoned"] += 1
        tolerations = pod["spec"].get("tolerations", [])
        for taint in node["spec"].get("taints", []):
            if taint["effect"] in ("NoSchedule", "NoExecute") and not any(
                t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", "") for t in tolerations
            ):
                problems["taint"] += 1
        labels = node["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in pod["spec"].get("nodeSelector", {}).items()):
            problems["selector"] += 1
    return problems


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_operator(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    with EmulatorProcess("--no-record-requests") as emu, tempfile.TemporaryDirectory() as tmp:
        populate(emu, nodes, pods)
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "placer-system"}
        log = open(Path(tmp) / "placer.log", "wb")  # noqa: SIM115 - closed below
        start_wall = time.time()
        start = time.perf_counter()
        operator = subprocess.Popen(
            [sys.executable, "-m", "placer.cli", "run", "--no-leader-elect", "--metrics-port", "0"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            bound = 0
            while time.perf_counter() - start < timeout:
                bound = emu.control("GET", "stats").get("bindings", 0)
                if bound >= len(pods) or operator.poll() is not None:
                    break
                time.sleep(0.1)
            rss = peak_rss_mb(operator.pid) if operator.poll() is None else float("nan")
        finally:
            operator.terminate()
            try:
                operator.wait(10)
            except subprocess.TimeoutExpired:
                operator.kill()
            log.close()
        bindings = emu.control("GET", "bindings")
        if not bindings:
            tail = (Path(tmp) / "placer.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"no binding at all; operator log tail:\n{tail}")
        times = sorted(b["time"] for b in bindings)
        problems = audit(emu, nodes, pods)
    last = times[-1] - start_wall
    return {
        "bound": len(bindings),
        "pods_per_s": len(bindings) / last,
        "first_binding_s": times[0] - start_wall,
        "last_binding_s": last,
        "peak_rss_mb": rss,
        "invalid": sum(problems.values()),
        "problems": problems,
    }


async def _bind_round_robin(url: str, pods: list[dict[str, Any]], node_names: list[str]) -> None:
    queue: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
    for index, pod in enumerate(pods):
        queue.put_nowait((index, pod))

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            index, pod = queue.get_nowait()
            meta = pod["metadata"]
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": meta["name"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_names[index % len(node_names)]},
            }
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
            async with session.post(url + path, json=body) as response:
                await response.read()

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(32)))


def run_baseline(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Any]:
    with EmulatorProcess("--no-record-requests") as emu:
        populate(emu, nodes, pods)
        start = time.perf_counter()
        asyncio.run(_bind_round_robin(emu.url, pods, [n["metadata"]["name"] for n in nodes]))
        elapsed = time.perf_counter() - start
        bound = emu.control("GET", "stats").get("bindings", 0)
    return {"bound": bound, "pods_per_s": bound / elapsed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    nodes, pods, _ = synthetic_cluster(args.nodes, args.pods)
    runs, baselines = [], []
    for i in range(args.runs):
        baselines.append(run_baseline(nodes, pods))
        runs.append(run_operator(nodes, pods, args.timeout))
        r = runs[-1]
        print(
            f"run {i + 1}: {r['bound']} bound, {r['pods_per_s']:.0f} pods/s, "
            f"first binding {r['first_binding_s']:.2f} s, "
            f"last {r['last_binding_s']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB, invalid {r['invalid']} "
            f"| baseline {baselines[-1]['pods_per_s']:.0f} binds/s",
            flush=True,
        )
    median = {
        k: statistics.median(r[k] for r in runs)
        for k in ("pods_per_s", "first_binding_s", "last_binding_s", "peak_rss_mb")
    }
    baseline = statistics.median(b["pods_per_s"] for b in baselines)
    summary = {
        "nodes": args.nodes,
        "pods": args.pods,
        "runs": args.runs,
        **{k: round(v, 2) for k, v in median.items()},
        "baseline_binds_per_s": round(baseline, 1),
        "ratio_to_baseline": round(median["pods_per_s"] / baseline, 3),
        "invalid_bindings": sum(r["invalid"] for r in runs),
        "all_bound": all(r["bound"] == args.pods for r in runs),
        "target_pods_per_s": TARGET_PODS_PER_S,
        "meets_target": median["pods_per_s"] >= TARGET_PODS_PER_S,
        "all_runs": runs,
    }
    print(
        f"e2e {args.nodes} nodes {args.pods} pods: {median['pods_per_s']:.0f} pods/s (median of {args.runs}), "
        f"first binding {median['first_binding_s']:.2f} s, last binding {median['last_binding_s']:.2f} s, "
        f"peak RSS {median['peak_rss_mb']:.0f} MB, invalid bindings {summary['invalid_bindings']} | "
        f"bare-client baseline {baseline:.0f} binds/s, ratio {summary['ratio_to_baseline']:.2f} | "
        f"target {TARGET_PODS_PER_S:.0f}: {'met' if summary['meets_target'] else 'NOT met'}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
