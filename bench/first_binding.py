"""The first binding after a cold start at scale, kube-scheduler and Placer on one control plane
(issue 25), started in turn, many times, with the whole backlog pending.

One control plane (bench/real_bench.py's, under its lock) is filled once with NODES nodes and PODS
pending pods (bench/synthetic.py's `plain`), every other pod for each scheduler. Then, per round,
each contender is started cold and stopped at its first binding: kube-scheduler (raised client
limits, as bench/real_bench.py), Placer from this checkout and, with `--source DIR`, Placer from
another tree's `operator/` (A/B in the same run). The clock runs from the process's spawn to the
first of its pods seen bound through a watch; both schedulers LIST every pod and node, whatever
their schedulerName, so both read the same 45,000 objects at 15,000 / 30,000. Each start binds
some pods before it is stopped (Placer a few hundred: its binds in flight land as it drains); these
are then deleted and created again, pending, under the same names, so every start meets the same
backlog: the LIST's order (by name) alternates between the two schedulers' pods from its first page
on, and no pod is assigned. (Without this, the first pages of later rounds held only the pods of the
scheduler that had bound fewer, and the other waited for a later page: a harness artefact.)
Placer's "scheduling (...)" log line (every informer synced) is printed with its figures.

    python bench/first_binding.py [--nodes 15000] [--pods 30000] [--rounds 3] [--source DIR] [--json FILE]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import real_bench  # noqa: E402
from synthetic import cluster as synthetic_cluster  # noqa: E402


async def fill(api: real_bench.Api, kubeconfig: Path, nodes: int, pods: int) -> dict[str, tuple[str, str, Any, str]]:
    """The plane filled; returns each pod's creation call by name (to create it again)."""
    node_objs, pod_objs, _ = synthetic_cluster(nodes, pods)
    started = time.monotonic()
    await real_bench.populate(api, node_objs, kubeconfig)
    calls = [*real_bench.pod_calls(pod_objs[0::2], real_bench.PLACER_NAME),
             *real_bench.pod_calls(pod_objs[1::2], real_bench.KUBE_SCHEDULER_NAME)]
    await api.many(calls)
    print(f"filled {nodes} nodes, {pods} pods in {time.monotonic() - started:.0f} s", flush=True)
    return {call[2]["metadata"]["name"]: call for call in calls}


def spawn(which: str, kubeconfig: Path, kube_bin: Path, workdir: Path, source: Path | None) -> subprocess.Popen[bytes]:
    if which == "kube-scheduler":
        return real_bench.start_scheduler(which, kubeconfig, kube_bin, workdir)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "default"}
    if source is not None:
        env["PYTHONPATH"] = str(source / "operator")
    log = open(workdir / f"{which}.log", "wb")  # noqa: SIM115 - the child holds it
    return subprocess.Popen([str(real_bench.placer_command()), "run", "--no-leader-elect", "--metrics-port", "0"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


async def restore_backlog(api: real_bench.Api, creations: dict[str, tuple[str, str, Any, str]]) -> int:
    """The pods bound in the last start, deleted and created again pending (the same creation call):
    the next start meets the backlog the first did. Returns how many."""
    path = f"/api/v1/namespaces/{real_bench.NAMESPACE}/pods"
    bound = [pod["metadata"]["name"] for pod in
             (await api.call("GET", f"{path}?fieldSelector=spec.nodeName%21%3D"))["items"]]
    await api.many([("DELETE", f"{path}/{name}?gracePeriodSeconds=0", None, "application/json") for name in bound])
    await api.many([creations[name] for name in bound])
    return len(bound)


async def first_binding(api: real_bench.Api, which: str, kubeconfig: Path, kube_bin: Path, workdir: Path,
                        source: Path | None, creations: dict[str, tuple[str, str, Any, str]]) -> float:
    watch = real_bench.Watch(1)
    watcher = asyncio.create_task(real_bench.count_bindings(api, watch, time.time() + 120))
    await asyncio.sleep(0.5)  # the watch is open
    started = time.time()
    process = spawn(which, kubeconfig, kube_bin, workdir, source)
    try:
        await asyncio.wait_for(watcher, 120)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if not watch.bound_at:
        raise RuntimeError(f"{which}: no binding in 120 s")
    await asyncio.sleep(1.0)  # binds in flight land before the next contender starts
    first = min(watch.bound_at.values()) - started
    await restore_backlog(api, creations)
    return first


async def rounds(kube_bin: Path, state: Path, workdir: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    kubeconfig = real_bench.control_plane_up(kube_bin, state)
    api = real_bench.Api()
    results: dict[str, list[float]] = {}
    try:
        creations = await fill(api, kubeconfig, args.nodes, args.pods)
        contenders = ["kube-scheduler", "placer", *(["placer-source"] if args.source else [])]
        for round_ in range(args.rounds):
            order = contenders if round_ % 2 == 0 else contenders[::-1]
            for which in order:
                source = args.source if which == "placer-source" else None
                seconds = await first_binding(api, which, kubeconfig, kube_bin, workdir, source, creations)
                results.setdefault(which, []).append(seconds)
                lines = ""
                if which.startswith("placer"):
                    log = (workdir / f"{which}.log").read_text(errors="replace").splitlines()
                    lines = " | ".join(line.split('msg="', 1)[-1].rstrip('"') for line in log
                                       if "scheduling (" in line)
                print(f"round {round_ + 1} {which:>15}: first binding {seconds:.2f} s  {lines}", flush=True)
    finally:
        await api.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-bin", type=Path, default=real_bench.DEFAULT_KUBE_BIN)
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--source", type=Path, help="another tree whose operator/ is run as `placer-source`")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kube_bin = args.kube_bin.resolve()
    for tree in (ROOT, *([args.source] if args.source else [])):
        real_bench.precompile(tree)
    lock = real_bench.hold_lock()  # noqa: F841 - one control plane at a time
    with tempfile.TemporaryDirectory(prefix="first-binding-") as tmp:
        state = real_bench.plane_state(Path(tmp) / "control-plane")
        try:
            results = asyncio.run(rounds(kube_bin, state, Path(tmp), args))
        finally:
            real_bench.control_plane_down(kube_bin, state)
    summary: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "runs": results,
                               "median_s": {k: statistics.median(v) for k, v in results.items()}}
    print(json.dumps(summary["median_s"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
