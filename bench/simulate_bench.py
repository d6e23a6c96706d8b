"""`placer simulate -o json` benchmark: a cluster dump in, every pending pod placed, JSON out; one core.

The workload is written once to a temporary directory: `synthetic.cluster(NODES, PODS)` (no pod
relations; every pod pending, schedulerName `placer`) as one `v1` List the way `kubectl get -o yaml`
prints it, and a SchedulerProfile for `placer` with no lists (the default profile). Each run goes
through the functions `placer simulate --cluster F --profile P -o json` runs, in process, timing the
phases apart:

  load     reading the files and YAML-loading them (reported, not counted: libyaml's cost, the same
           whatever Placer does with the documents)
  build    nodes and pods parsed, the cluster built, profiles compiled, pending pods sorted
  decide   every pending pod placed in queue order, each counting against its node (top 3 kept)
  render   the JSON of API.md §4 written to /dev/null

pods/s = pending pods / (build + decide + render). The baseline, measured in the same run on a
cluster built the same way (not timed): the engine alone deciding the same pods (no parsing, no
rendering), so the ratio says what parsing and rendering cost on top of the decisions; 1.0 would
mean they are free. Several runs, interleaved; the medians are reported.

    python bench/simulate_bench.py [--runs 5] [--nodes 1000] [--pods 2000] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from placer.engine import parsing, quantity
from placer.engine.runtime import Scheduler
from placer.simulate import Documents, Simulation, place, prepare, read_documents, render_json
from synthetic import cluster as synthetic_cluster

TARGET_PODS_PER_S = 2500.0  # at 1,000 nodes and 2,000 pods, without relations
TOP = 3  # `placer simulate`'s default --top
PHASES = ("load", "build", "decide", "render")

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_inputs(directory: Path, nodes: int, pods: int) -> tuple[Path, Path]:
    """The cluster as `kubectl get nodes,pods -A -o yaml` prints it, and the default profile."""
    node_objs, pod_objs, _ = synthetic_cluster(nodes, pods)
    dump = {"apiVersion": "v1", "items": [*node_objs, *pod_objs], "kind": "List", "metadata": {"resourceVersion": ""}}
    cluster_path = directory / "cluster.yaml"
    with cluster_path.open("w", encoding="utf-8") as out:
        yaml.dump(dump, out, Dumper=_DUMPER, default_flow_style=False, sort_keys=True)  # kubectl sorts keys
    profile_path = directory / "profile.yaml"
    profile_path.write_text(
        "apiVersion: placer.dev/v1alpha1\nkind: SchedulerProfile\nmetadata:\n  name: default\n"
        "spec:\n  schedulerName: placer\n",
        encoding="utf-8",
    )
    return cluster_path, profile_path


def load(cluster_path: Path, profile_path: Path) -> tuple[list[Documents], list[Documents]]:
    return (
        [(cluster_path, list(read_documents(cluster_path)))],
        [(profile_path, list(read_documents(profile_path)))],
    )


def cold_caches() -> None:
    """Empty the parsers' memo caches (functools caches of quantities and the like), so that each
    run starts as a fresh `placer simulate` process does."""
    for module in (quantity, parsing):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def run_simulate(cluster_path: Path, profile_path: Path) -> dict[str, float]:
    """One `placer simulate -o json`, phase by phase. As in the CLI, the loaded documents are
    garbage once the cluster is built (the collector does not walk them while pods are placed)."""
    clock = time.perf_counter
    cold_caches()
    gc.collect()
    t0 = clock()
    documents = list(load(cluster_path, profile_path))
    t1 = clock()
    simulation = prepare(*documents)
    documents.clear()
    t2 = clock()
    place(simulation, top=TOP)
    t3 = clock()
    with open(os.devnull, "w", encoding="utf-8") as sink:
        render_json(simulation, sink)
    t4 = clock()
    pods = len(simulation.pending)
    beyond = t4 - t1
    return {
        "pods": pods,
        "scheduled": sum(1 for d in simulation.decisions if d.node is not None),
        "load_s": t1 - t0,
        "build_s": t2 - t1,
        "decide_s": t3 - t2,
        "render_s": t4 - t3,
        "beyond_load_s": beyond,
        "pods_per_s": pods / beyond,
    }


def run_baseline(cluster_path: Path, profile_path: Path) -> dict[str, float]:
    """The engine alone on a cluster built the same way (not timed): the same pods, in the same
    order, with the same top, and nothing else."""
    simulation: Simulation = prepare(*load(cluster_path, profile_path))
    cluster, profiles = simulation.cluster, simulation.profiles
    scheduler = Scheduler()
    gc.collect()
    begin = time.perf_counter()
    for pod in simulation.pending:
        decision = scheduler.schedule(pod, profiles[pod.scheduler_name], cluster, top=TOP)
        if decision.node is not None:
            cluster.assume(pod, decision.node)
    elapsed = time.perf_counter() - begin
    return {"pods_per_s": len(simulation.pending) / elapsed}


def check_output(cluster_path: Path, profile_path: Path, pods: int) -> int:
    """The JSON parses, and has one placement per pending pod; its size in bytes."""
    simulation = place(prepare(*load(cluster_path, profile_path)), top=TOP)
    out = io.StringIO()
    render_json(simulation, out)
    text = out.getvalue()
    result = json.loads(text)
    assert len(result["placements"]) == pods == result["summary"]["pods"], "placements missing"
    return len(text.encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="placer-simulate-bench-") as tmp:
        cluster_path, profile_path = write_inputs(Path(tmp), args.nodes, args.pods)
        runs: list[dict[str, float]] = []
        baseline_runs: list[dict[str, float]] = []
        for _ in range(args.runs):  # interleaved, so both see the same machine load
            runs.append(run_simulate(cluster_path, profile_path))
            baseline_runs.append(run_baseline(cluster_path, profile_path))
        output_bytes = check_output(cluster_path, profile_path, int(runs[0]["pods"]))
        file_bytes = cluster_path.stat().st_size
    pods = int(runs[0]["pods"])
    median = {
        key: statistics.median(r[key] for r in runs)
        for key in ("pods_per_s", "beyond_load_s", *(f"{phase}_s" for phase in PHASES))
    }
    baseline = statistics.median(r["pods_per_s"] for r in baseline_runs)
    target = TARGET_PODS_PER_S if (args.nodes, args.pods) == (1000, 2000) else None
    row = {
        "nodes": args.nodes,
        "pods": pods,
        "runs": args.runs,
        "scheduled": runs[0]["scheduled"],
        "pods_per_s": round(median["pods_per_s"], 1),
        **{f"{phase}_ms": round(median[f"{phase}_s"] * 1000, 1) for phase in PHASES},
        "beyond_load_ms": round(median["beyond_load_s"] * 1000, 1),
        "baseline_pods_per_s": round(baseline, 1),
        "ratio_to_baseline": round(median["pods_per_s"] / baseline, 3),
        "all_runs_pods_per_s": [round(r["pods_per_s"], 1) for r in runs],
        "cluster_file_bytes": file_bytes,
        "output_bytes": output_bytes,
        "target_pods_per_s": target,
        "meets_target": None if target is None else median["pods_per_s"] >= target,
    }
    print(
        f"simulate -o json {args.nodes:>5} nodes {pods:>6} pods: {row['pods_per_s']:8.0f} pods/s beyond loading "
        f"(median of {args.runs}; runs {row['all_runs_pods_per_s']}; {row['scheduled']} scheduled) | "
        f"load {row['load_ms']:.0f} ms (not counted), build {row['build_ms']:.0f} ms, "
        f"decide {row['decide_ms']:.0f} ms, render {row['render_ms']:.0f} ms ({output_bytes} bytes) | "
        f"baseline (engine alone) {baseline:8.0f} pods/s, "
        f"ratio {row['ratio_to_baseline']:.2f} | target {target or '-'}: "
        f"{'met' if row['meets_target'] else 'NOT met' if target else '-'}",
        flush=True,
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([row], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
