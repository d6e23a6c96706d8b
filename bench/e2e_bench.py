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

With `--shadow`, what a shadow profile (API.md §5) costs the active one: each run also starts a
fake "default-scheduler" beside Placer, which binds as many pods of its own (copies of the
workload with a tenth of its requests, so that its round-robin never overcommits a node) as
Placer has bound so far, round-robin over the nodes through pods/binding — the same rate as the
active workload. The operator runs twice on fresh emulators, without and with a Shadow profile
watching "default-scheduler" (alternating which goes first); the figure is the active profile's throughput in each (its
own pods only) and their ratio, plus the shadow's decisions, agreement and how many of them were
taken after the pod was already bound (`placer_shadow_late_decisions_total`).

    python bench/e2e_bench.py [--runs 3] [--nodes 1000] [--pods 5000] [--shadow] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
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
SHADOWED_SCHEDULER = "default-scheduler"
SHADOW_PROFILE = {
    "apiVersion": "placer.dev/v1alpha1",
    "kind": "SchedulerProfile",
    "metadata": {"name": "bench-shadow"},
    "spec": {"schedulerName": "bench-shadow", "mode": "Shadow", "shadowOf": SHADOWED_SCHEDULER},
}
SHADOW_TARGET_RATIO = 0.9  # the active profile keeps at least 90 % of its throughput


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


def populate(
    emu: EmulatorProcess, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
    profiles: list[dict[str, Any]] | None = None,
) -> None:
    items = [("/api/v1/nodes", node) for node in nodes]
    items += [("/apis/placer.dev/v1alpha1/schedulerprofiles", profile) for profile in (profiles or [PROFILE])]
    items += [(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod) for pod in pods]
    asyncio.run(_post_all(emu.url, items))


def shadowed_copies(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fake default-scheduler's pods: the workload's shapes, a tenth of its requests."""
    copies = []
    for pod in pods:
        copy = json.loads(json.dumps(pod))
        meta = copy["metadata"]
        meta["name"], meta["uid"] = "d-" + meta["name"], "d-" + meta["uid"]
        copy["spec"]["schedulerName"] = SHADOWED_SCHEDULER
        for container in copy["spec"]["containers"]:
            requests = container["resources"]["requests"]
            requests["cpu"] = f"{int(requests['cpu'].removesuffix('m')) // 10}m"
            requests["memory"] = f"{int(requests['memory'].removesuffix('Mi')) // 10}Mi"
        copies.append(copy)
    return copies


class FakeDefaultScheduler(threading.Thread):
    """Binds its pods round-robin over the nodes, keeping pace with the bindings Placer makes: it
    polls the emulator's binding count and binds as many of its own as Placer's (32 in flight)."""

    def __init__(self, url: str, pods: list[dict[str, Any]], nodes: list[str]) -> None:
        super().__init__(name="fake default-scheduler", daemon=True)
        self.url, self.pods, self.nodes = url, pods, nodes
        self.bound = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._pace())

    async def _pace(self) -> None:
        sent, in_flight = 0, set()
        async with aiohttp.ClientSession() as session:
            while not self.stopping.is_set() and sent < len(self.pods):
                async with session.get(self.url + "/_emu/stats") as response:
                    placer = (await response.json())["bindings"] - self.bound
                while sent < min(placer, len(self.pods)) and len(in_flight) < 32:
                    task = asyncio.create_task(self._bind(session, sent))
                    in_flight.add(task)
                    task.add_done_callback(in_flight.discard)
                    sent += 1
                await asyncio.sleep(0.02)
            await asyncio.gather(*in_flight)

    async def _bind(self, session: aiohttp.ClientSession, index: int) -> None:
        meta = self.pods[index]["metadata"]
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.nodes[index % len(self.nodes)]}}
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
        async with session.post(self.url + path, json=body) as response:
            if response.status == 201:
                self.bound += 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (less noisy than wall time on a shared host)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int, names: tuple[str, ...]) -> dict[str, float]:
    """Sums of some metrics' samples from the operator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    sums = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            sums[name] += float(line.rsplit(" ", 1)[1])
    return sums


def audit(
    emu: EmulatorProcess, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], others: int = 0
) -> dict[str, int]:
    """Count invalid bindings: double, capacity, readiness, cordon, taints, selectors. With `others`
    (another scheduler's pods, named `d-...`, bound round-robin on purpose), only Placer's bindings
    are judged, and capacity is left out: two schedulers binding at once may overcommit a node
    between them, as on a real cluster."""
    bindings = [b for b in emu.control("GET", "bindings") if not (others and b["name"].startswith("d-"))]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    pod_by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    seen: set[str] = set()
    problems = {
        "double": 0,
        "capacity": 0 if others else len(emu.control("GET", "capacity")),
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


def run_operator(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], timeout: float,
    shadowed: list[dict[str, Any]] | None = None, shadow: bool = False,
) -> dict[str, Any]:
    """One `placer run` until every pod is bound; with `shadowed`, a fake default-scheduler binds
    those meanwhile, and with `shadow` a Shadow profile watches them."""
    shadowed = shadowed or []
    profiles = [PROFILE, SHADOW_PROFILE] if shadow else [PROFILE]
    port = free_port() if shadow else 0  # /metrics, for the shadow's late decisions
    with EmulatorProcess("--no-record-requests") as emu, tempfile.TemporaryDirectory() as tmp:
        populate(emu, nodes, pods + shadowed, profiles)
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "placer-system"}
        log = open(Path(tmp) / "placer.log", "wb")  # noqa: SIM115 - closed below
        fake = FakeDefaultScheduler(emu.url, shadowed, [n["metadata"]["name"] for n in nodes])
        start_wall = time.time()
        start = time.perf_counter()
        operator = subprocess.Popen(
            [sys.executable, "-m", "placer.cli", "run", "--no-leader-elect", "--metrics-port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        if shadowed:
            fake.start()
        shadow_report: dict[str, Any] = {}
        try:
            bound = 0
            while time.perf_counter() - start < timeout:
                bound = emu.control("GET", "stats").get("bindings", 0)
                if bound >= len(pods) + len(shadowed) or operator.poll() is not None:
                    break
                time.sleep(0.1)
            alive = operator.poll() is None
            rss = peak_rss_mb(operator.pid) if alive else float("nan")
            cpu = cpu_seconds(operator.pid) if alive else float("nan")
            if shadow and operator.poll() is None:
                shadow_report = shadow_outcome(emu, port, len(shadowed), deadline=time.perf_counter() + 60)
        finally:
            fake.stopping.set()
            operator.terminate()
            try:
                operator.wait(10)
            except subprocess.TimeoutExpired:
                operator.kill()
            log.close()
            if fake.is_alive():
                fake.join(10)
        ours = [b for b in emu.control("GET", "bindings") if not b["name"].startswith("d-")]
        if not ours:
            tail = (Path(tmp) / "placer.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"no binding at all; operator log tail:\n{tail}")
        times = sorted(b["time"] for b in ours)
        problems = audit(emu, nodes, pods, others=len(shadowed))
    last = times[-1] - start_wall
    return {
        "bound": len(ours),
        "pods_per_s": len(ours) / last,
        "first_binding_s": times[0] - start_wall,
        "last_binding_s": last,
        "peak_rss_mb": rss,
        "cpu_s": cpu,
        "invalid": sum(problems.values()),
        "problems": problems,
        "shadowed_bound": fake.bound,
        **({"shadow": shadow_report} if shadow else {}),
    }


def shadow_outcome(emu: EmulatorProcess, port: int, shadowed: int, deadline: float) -> dict[str, Any]:
    """The shadow profile's status once it compared every shadowed pod (or at the deadline), and
    how many decisions came after the binding."""
    status: dict[str, Any] = {}
    while time.perf_counter() < deadline:
        found = emu.request("GET", "/apis/placer.dev/v1alpha1/schedulerprofiles/bench-shadow")
        status = (found.get("status") or {}).get("shadow") or {}
        if status.get("decisions", 0) >= shadowed:
            break
        time.sleep(0.5)
    metrics = scrape(port, ("placer_shadow_late_decisions_total", "placer_shadow_dropped_total"))
    return {
        "decisions": status.get("decisions", 0),
        "agreement": status.get("agreement", ""),
        "late": int(metrics["placer_shadow_late_decisions_total"]),
        "dropped": int(metrics["placer_shadow_dropped_total"]),
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
    parser.add_argument("--shadow", action="store_true",
                        help="measure a shadow profile's cost: the active profile with and without it")
    args = parser.parse_args()
    nodes, pods, _ = synthetic_cluster(args.nodes, args.pods)
    if args.shadow:
        return main_shadow(args, nodes, pods)
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


def main_shadow(args: argparse.Namespace, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> int:
    """`--shadow`: per run, the operator without and with a shadow profile (alternating which goes
    first), both beside the fake default-scheduler; medians, and the ratio of the medians."""
    shadowed = shadowed_copies(pods)
    without, with_shadow = [], []
    for i in range(args.runs):
        order = (False, True) if i % 2 == 0 else (True, False)
        for shadow in order:
            result = run_operator(nodes, pods, args.timeout, shadowed, shadow=shadow)
            (with_shadow if shadow else without).append(result)
        a, b = without[-1], with_shadow[-1]
        print(
            f"run {i + 1}: without shadow {a['pods_per_s']:.0f} pods/s ({a['bound']} bound, invalid {a['invalid']}), "
            f"with shadow {b['pods_per_s']:.0f} pods/s ({b['bound']} bound, invalid {b['invalid']}), "
            f"ratio {b['pods_per_s'] / a['pods_per_s']:.2f} | operator CPU {a['cpu_s']:.1f} s vs {b['cpu_s']:.1f} s "
            f"| shadow: {b['shadow'].get('decisions')} decisions, "
            f"{b['shadow'].get('late')} after binding, agreement {b['shadow'].get('agreement')!r}",
            flush=True,
        )
    median_without = statistics.median(r["pods_per_s"] for r in without)
    median_with = statistics.median(r["pods_per_s"] for r in with_shadow)
    ratio = median_with / median_without
    summary = {
        "nodes": args.nodes,
        "pods": args.pods,
        "shadowed_pods": len(shadowed),
        "runs": args.runs,
        "pods_per_s_without_shadow": round(median_without, 1),
        "pods_per_s_with_shadow": round(median_with, 1),
        "ratio": round(ratio, 3),
        "run_ratios": [round(b["pods_per_s"] / a["pods_per_s"], 3) for a, b in zip(without, with_shadow, strict=True)],
        "cpu_s_without_shadow": round(statistics.median(r["cpu_s"] for r in without), 2),
        "cpu_s_with_shadow": round(statistics.median(r["cpu_s"] for r in with_shadow), 2),
        "peak_rss_mb_without_shadow": round(statistics.median(r["peak_rss_mb"] for r in without), 1),
        "peak_rss_mb_with_shadow": round(statistics.median(r["peak_rss_mb"] for r in with_shadow), 1),
        "shadow_decisions": [r["shadow"].get("decisions") for r in with_shadow],
        "shadow_late_decisions": [r["shadow"].get("late") for r in with_shadow],
        "invalid_bindings": sum(r["invalid"] for r in (*without, *with_shadow)),
        "all_bound": all(r["bound"] == args.pods for r in (*without, *with_shadow)),
        "target_ratio": SHADOW_TARGET_RATIO,
        "meets_target": ratio >= SHADOW_TARGET_RATIO,
        "without_shadow": without,
        "with_shadow": with_shadow,
    }
    print(
        f"shadow cost, {args.nodes} nodes, {args.pods} active + {len(shadowed)} shadowed pods (median of "
        f"{args.runs}): active profile {median_without:.0f} pods/s without a shadow profile, {median_with:.0f} "
        f"with it, ratio {ratio:.2f} (target {SHADOW_TARGET_RATIO:.2f}: "
        f"{'met' if summary['meets_target'] else 'NOT met'}); operator CPU until the last binding "
        f"{summary['cpu_s_without_shadow']:.1f} s vs {summary['cpu_s_with_shadow']:.1f} s; "
        f"invalid bindings {summary['invalid_bindings']}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
