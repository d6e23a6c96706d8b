"""Engine-only benchmark: the default profile on synthetic clusters, one core, no I/O.

For each size it builds the cluster (not timed), then schedules every pending pod in queue
order, assuming each onto its node as the operator does, and times each decision. Three
workloads per size: `plain` (no pod relations), `relations` (every pod has required
anti-affinity on hostname and a DoNotSchedule zone spread constraint against its app's pods) and
`claims` (every pod mounts one claim bound to a zonal volume).
Several runs, interleaved; the medians are reported, with a baseline measured in the same run:
a bare numpy "fits-on-cpu-and-memory, most free cpu wins" decision, the least any vectorised
scheduler does per pod, so the ratio says what the full framework costs on top of it, whatever
the machine.

Each run also reports the CPU time of the loop per pod (`cpu_ms_per_pod`, this thread's CPU
clock): on a busy shared machine the wall clock counts the time other processes run, the CPU
clock does not, so it is the figure to compare between two trees there. `--workloads` adds
bench/synthetic.py's other workloads (`preferred`, `antiaffinity`, `spread`, `devices`), and
kube's scheduler_perf shapes, where every measured pod is the same template (what opportunistic
batching serves): `kube-basic` (SchedulingBasic: node-default.yaml nodes, a fifth as many init
pods bound, then pod-default.yaml pods), `kube-nodeaffinity` (SchedulingNodeAffinity: the nodes
labelled zone1, pod-with-node-affinity.yaml pods). `--batching both` runs each workload with
opportunistic batching and without it, interleaved (`batching` in the rows; the default `on` is
the scheduler as it runs).

    python bench/engine_bench.py [--runs 5] [--sizes 1000x5000,5000x10000] [--workloads plain,relations]
                                 [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from placer.engine.cluster import CPU, MEMORY, ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import compile_profile
from placer.engine.queue import queue_order
from placer.engine.runtime import Scheduler
from synthetic import WORKLOADS as SYNTHETIC_WORKLOADS
from synthetic import cluster as synthetic_cluster

# pods/s the issues ask for, by workload and node count
TARGETS = {"plain": {1000: 5000.0, 5000: 1000.0}, "relations": {1000: 1500.0, 5000: 700.0},
           "claims": {1000: 3000.0}}
WORKLOADS = ("plain", "relations", "claims")


KUBE_WORKLOADS = ("kube-basic", "kube-nodeaffinity")


def kube_cluster(nodes: int, pods: int, workload: str) -> tuple[list[dict], list[dict], list[dict]]:
    """kube's scheduler_perf templates: node-default.yaml nodes (4 CPU, 32Gi, 110 pods; labelled
    zone1 for SchedulingNodeAffinity), `nodes / 5` init pods bound round the nodes, then `pods`
    measured pods, all alike (pod-default.yaml: 100m and 500Mi; pod-with-node-affinity.yaml: zone
    In [zone1, zone2])."""
    zone = "topology.kubernetes.io/zone"
    labels = {zone: "zone1"} if workload == "kube-nodeaffinity" else {}
    def node(name: str) -> dict:
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
                "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}

    node_objs = [node(f"scheduler-perf-{i:05d}") for i in range(nodes)]
    resources = {"requests": {"cpu": "100m", "memory": "500Mi"}, "limits": {"cpu": "100m", "memory": "500Mi"}}

    def pod(name: str, node: str | None = None) -> dict:
        container = {"name": "pause", "image": "registry.k8s.io/pause:3.10.2", "ports": [{"containerPort": 80}],
                     "resources": resources}
        spec: dict = {"schedulerName": "placer", "containers": [container]}
        if workload == "kube-nodeaffinity":
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": zone, "operator": "In",
                                                             "values": ["zone1", "zone2"]}]}]}}}
        if node:
            spec["nodeName"] = node
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": spec, "status": {"phase": "Running" if node else "Pending"}}

    init = [pod(f"init-{i}", f"scheduler-perf-{i % nodes:05d}") for i in range(nodes // 5)]
    return node_objs, init + [pod(f"measured-{i}") for i in range(pods)], []


def build(nodes: int, pods: int, workload: str = "plain") -> tuple[ClusterState, list]:
    if workload in KUBE_WORKLOADS:
        node_objs, pod_objs, objects = kube_cluster(nodes, pods, workload)
    else:
        node_objs, pod_objs, objects = synthetic_cluster(nodes, pods, workload=workload)
    state = ClusterState()
    for obj in node_objs:
        state.upsert_node(parse_node(obj))
    for obj in objects:
        upsert_object(state.catalog, KINDS_BY_NAME[obj["kind"]], obj)
    parsed = [parse_pod(obj) for obj in pod_objs]
    for info in parsed:
        if info.node_name:
            state.add_pod(info)
    pending = sorted((info for info in parsed if not info.node_name), key=queue_order)
    return state, pending


def run_engine(nodes: int, pods: int, workload: str = "plain", batching: bool | None = None) -> dict[str, float]:
    """One run; `batching` None: the scheduler as it runs (a tree without batching knows no such switch)."""
    state, pending = build(nodes, pods, workload)
    profile = compile_profile("bench", {"schedulerName": "placer"})
    scheduler = Scheduler() if batching is None else Scheduler(batching=batching)
    latencies = np.empty(len(pending))
    scheduled = 0
    clock = time.perf_counter
    begin = clock()
    cpu_begin = time.thread_time()  # this thread's CPU: what a busy shared machine does not inflate
    for i, pod in enumerate(pending):
        start = clock()
        decision = scheduler.schedule(pod, profile, state, top=1)
        if decision.node is not None:
            scheduler.assume(pod, decision, profile, state)
            scheduled += 1
        latencies[i] = clock() - start
    cpu = time.thread_time() - cpu_begin
    elapsed = clock() - begin
    assert not state.overcommitted(), "the engine overcommitted a node"
    return {
        "pods_per_s": len(pending) / elapsed,
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p99_ms": float(np.percentile(latencies, 99) * 1000),
        "cpu_ms_per_pod": cpu * 1000 / len(pending),
        "scheduled": scheduled,
    }


def run_baseline(nodes: int, pods: int) -> dict[str, float]:
    state, pending = build(nodes, pods)
    n = state.size
    free = (state.allocatable[:n, [CPU, MEMORY]] - state.requested[:n, [CPU, MEMORY]]).copy()
    ok_nodes = state.present[:n] & state.ready[:n] & ~state.unschedulable[:n]
    begin = time.perf_counter()
    for pod in pending:
        need = np.array([pod.requests.get("cpu", 0), pod.requests.get("memory", 0)])
        fits = ok_nodes & (free >= need).all(axis=1)
        if fits.any():
            best = int(np.argmax(np.where(fits, free[:, 0], -1)))
            free[best] -= need
    elapsed = time.perf_counter() - begin
    return {"pods_per_s": len(pending) / elapsed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000x5000,5000x10000", help="NODESxPODS,...")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"of bench/synthetic.py's: {', '.join(SYNTHETIC_WORKLOADS)} (plain is always run)")
    parser.add_argument("--batching", choices=("on", "off", "both"), default="on",
                        help="opportunistic batching: as the scheduler runs (on), off, or both interleaved")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    workloads = list(dict.fromkeys(["plain", *args.workloads.split(",")]))  # plain: the ratios' reference
    known = (*SYNTHETIC_WORKLOADS, *KUBE_WORKLOADS)
    unknown = [w for w in workloads if w not in known]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}: one of {', '.join(known)}")
    modes: list[bool | None] = {"on": [None], "off": [False], "both": [True, False]}[args.batching]
    results = []
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.split("x"))
        cases = [(workload, mode) for workload in workloads for mode in modes]
        runs: dict[tuple[str, bool | None], list[dict[str, float]]] = {case: [] for case in cases}
        baseline_runs = []
        for _ in range(args.runs):  # interleaved, so all see the same machine load
            baseline_runs.append(run_baseline(nodes, pods))
            for workload, mode in cases:
                runs[workload, mode].append(run_engine(nodes, pods, workload, mode))
        baseline = statistics.median(r["pods_per_s"] for r in baseline_runs)
        plain = statistics.median(r["pods_per_s"] for r in runs["plain", modes[0]])
        for workload, mode in cases:
            engine_runs = runs[workload, mode]
            keys = ("pods_per_s", "p50_ms", "p99_ms", "cpu_ms_per_pod")
            median = {k: statistics.median(r[k] for r in engine_runs) for k in keys}
            target = TARGETS.get(workload, {}).get(nodes)
            row = {
                "nodes": nodes,
                "pods": pods,
                "workload": workload,
                "batching": mode is not False,
                "runs": args.runs,
                "scheduled": engine_runs[0]["scheduled"],
                **{k: round(v, 3) for k, v in median.items()},
                "baseline_pods_per_s": round(baseline, 1),
                "ratio_to_baseline": round(median["pods_per_s"] / baseline, 3),
                "ratio_to_plain": round(median["pods_per_s"] / plain, 3),
                "all_runs_pods_per_s": [round(r["pods_per_s"], 1) for r in engine_runs],
                "target_pods_per_s": target,
                "meets_target": None if target is None else median["pods_per_s"] >= target,
            }
            results.append(row)
            label = workload if len(modes) == 1 else f"{workload} ({'batched' if mode else 'unbatched'})"
            print(
                f"engine {nodes:>5} nodes {pods:>6} pods {label:>9}: {median['pods_per_s']:8.0f} pods/s "
                f"(p50 {median['p50_ms']:.3f} ms, p99 {median['p99_ms']:.3f} ms, "
                f"CPU {median['cpu_ms_per_pod']:.3f} ms/pod; median of {args.runs}; "
                f"runs {row['all_runs_pods_per_s']}; {row['scheduled']} scheduled) | baseline {baseline:8.0f} "
                f"pods/s, ratio {row['ratio_to_baseline']:.2f}, vs plain {row['ratio_to_plain']:.2f} | target "
                f"{target or '-'}: {'met' if row['meets_target'] else 'NOT met' if target else '-'}",
                flush=True,
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
