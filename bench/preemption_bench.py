"""Preemption benchmark: one pod that fits nowhere, on a cluster full of lower-priority pods.

1,000 nodes of 8 CPU, each full with 8 one-CPU pods of priorities 0-2 (some covered by a
PodDisruptionBudget), then preemptors of priority 1000 asking 1-3 CPU: the engine finds the
candidates, picks the victims on each and the node, as `Scheduler.schedule` does with the default
profile (DefaultPreemption included). Timed per preemptor (nothing is evicted, so every run sees
the same full cluster); the median is reported, with a baseline measured in the same run: the same
unschedulable decision with `postFilters: []` (filters and FailedScheduling message only), so the
ratio is what preemption adds on top.

    python bench/preemption_bench.py [--runs 5] [--nodes 1000] [--json FILE]
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

from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import compile_profile
from placer.engine.runtime import Scheduler
from placer.testing import node, pod

TARGET_MS = 20.0  # the ceiling for one preemption at 1,000 nodes


def full_cluster(nodes: int) -> ClusterState:
    cluster = ClusterState()
    for i in range(nodes):
        cluster.upsert_node(parse_node(node(f"node-{i:05d}", cpu="8", memory="32Gi",
                                            labels={"topology.kubernetes.io/zone": f"zone-{i % 3}"})))
    for i in range(nodes):
        for j in range(8):
            app = "db" if j == 0 else f"batch-{j % 3}"
            obj = pod(f"p-{i:05d}-{j}", cpu="1", memory="1Gi", node_name=f"node-{i:05d}", priority=(i + j) % 3,
                      labels={"app": app})
            obj["status"]["startTime"] = f"2026-01-01T{j:02d}:00:00Z"
            cluster.add_pod(parse_pod(obj))
    meta = {"name": "db", "namespace": "default"}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
              "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": nodes - 10},
              "status": {"disruptionsAllowed": 10}}
    upsert_object(cluster.catalog, KINDS_BY_NAME["PodDisruptionBudget"], budget)
    return cluster


def measure(cluster: ClusterState, preemption: bool, preemptors: int) -> tuple[list[float], int]:
    spec = {"schedulerName": "placer"} if preemption else {"schedulerName": "placer", "postFilters": []}
    profile = compile_profile("bench", spec)
    scheduler = Scheduler()
    times, nominated = [], 0
    for k in range(preemptors):
        preemptor = parse_pod(pod(f"urgent-{k}", cpu=f"{1 + k % 3}", memory="1Gi", priority=1000))
        start = time.perf_counter()
        decision = scheduler.schedule(preemptor, profile, cluster, top=1)
        times.append(time.perf_counter() - start)
        assert decision.node is None
        nominated += decision.preemption is not None
    return times, nominated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--preemptors", type=int, default=20, help="preemptors timed per run")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cluster = full_cluster(args.nodes)
    medians, baselines, nominated = [], [], 0
    for _ in range(args.runs):  # interleaved, so both see the same machine load
        base, _ = measure(cluster, preemption=False, preemptors=args.preemptors)
        times, nominated = measure(cluster, preemption=True, preemptors=args.preemptors)
        baselines.append(statistics.median(base) * 1000)
        medians.append(statistics.median(times) * 1000)
    median, baseline = statistics.median(medians), statistics.median(baselines)
    row = {
        "nodes": args.nodes,
        "pods": args.nodes * 8,
        "runs": args.runs,
        "preemption_ms": round(median, 3),
        "all_runs_ms": [round(m, 3) for m in medians],
        "baseline_unschedulable_ms": round(baseline, 3),
        "ratio_to_baseline": round(median / baseline, 2),
        "nominated": f"{nominated}/{args.preemptors}",
        "target_ms": TARGET_MS,
        "meets_target": median <= TARGET_MS,
    }
    print(
        f"preemption {args.nodes} nodes full ({args.nodes * 8} pods): {median:.2f} ms per preemptor "
        f"(median of {args.runs} runs of {args.preemptors}; runs {row['all_runs_ms']}; nominated {row['nominated']}) | "
        f"baseline unschedulable without preemption {baseline:.2f} ms, ratio {row['ratio_to_baseline']} | "
        f"target <= {TARGET_MS} ms: {'met' if row['meets_target'] else 'NOT met'}",
        flush=True,
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(row, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
