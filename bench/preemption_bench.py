"""Preemption benchmark: one pod that fits nowhere, on a cluster full of lower-priority pods.

1,000 nodes of 8 CPU, each full with 8 one-CPU pods of priorities 0-2 (some covered by a
PodDisruptionBudget), then preemptors of priority 1000 asking 1-3 CPU: the engine finds the
candidates, picks the victims on each and the node, as `Scheduler.schedule` does with the default
profile (DefaultPreemption included). Timed per preemptor (nothing is evicted, so every run sees
the same full cluster); the median is reported, with a baseline measured in the same run: the same
unschedulable decision with `postFilters: []` (filters and FailedScheduling message only), so the
ratio is what preemption adds on top.

`--shape basic` is kube's scheduler_perf `PreemptionBasic` instead (misc/performance-config.yaml
and its templates): nodes of 4 CPU, 32Gi and 110 pods, each full with 4 low-priority pods of 900m
and 500Mi (20,000 on 5,000 nodes), and preemptors of priority 10 asking 3 CPU, each of which must
evict 3 of a node's 4. A preemptor is carried out as the operator does it: its decision (the dry
run), its victims evicted, the pod nominated, then its second cycle placing it on the nominated
node. As preemptors take nodes, the dry run must look further for nodes still full of victims,
so the cost changes along the workload: it is measured at stages, a stage `f` being the cluster
with its first `f x nodes` nodes (in node-tree order, the order preemption takes them) already
preempted (one low pod and one preemptor each). Reported: CPU per preemptor (this thread's
clock), both cycles, median of each stage's preemptors, and the mean over the stages (the default
stages are the midpoints of ten equal parts of the workload: their mean estimates the whole
workload's average).

`--shape waves` is PreemptionBasic as a real API server plays it: the writes lag the decisions, so
a preemptor is decided while the last `--outstanding` preemptors are still nominated with their
victims in place; then the oldest one's victims go and it is placed. CPU per preemptor over all
its cycles, median of `--runs`; `--budget`: every other low-priority pod under a
PodDisruptionBudget allowing none (bench/suite's PreemptionWithPDB: every candidate breaks it, so
the dry run visits every node).

    python bench/preemption_bench.py [--runs 5] [--nodes 1000] [--json FILE]
    python bench/preemption_bench.py --shape basic --nodes 5000 [--stages 0.05,0.15,...] [--preemptors 10]
    python bench/preemption_bench.py --shape waves --nodes 500 --outstanding 150 --preemptors 450 [--budget]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.objects import PodInfo
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


BASIC_STAGES = tuple(round(0.05 + 0.1 * i, 2) for i in range(10))


def low_pod(name: str, node_name: str, labels: dict[str, str] | None = None) -> PodInfo:
    """kube's templates/pod-low-priority.yaml, bound (no status.startTime: no kubelet runs it)."""
    return parse_pod(pod(name, cpu="900m", memory="500Mi", node_name=node_name, labels=labels))


def high_pod(name: str, node_name: str | None = None) -> PodInfo:
    """kube's templates/pod-high-priority.yaml."""
    return parse_pod(pod(name, cpu="3", memory="500Mi", priority=10, node_name=node_name))


def basic_cluster(nodes: int, protected: bool = False) -> ClusterState:
    """PreemptionBasic's start: every node full with 4 low-priority pods (`protected`: every other
    one labelled `protected: "1"`, the rest `"0"`, as bench/suite's PreemptionWithPDB)."""
    cluster = ClusterState()
    for i in range(nodes):
        cluster.upsert_node(parse_node(node(f"scheduler-perf-{i:05d}", cpu="4", memory="32Gi", pods="110")))
    for i, name in enumerate(cluster.names[slot] for slot in cluster.scan_order()):
        for j in range(4):
            cluster.add_pod(low_pod(f"pod-{i:05d}-{j}", name, {"protected": str(j % 2)} if protected else None))
    return cluster


def advance(cluster: ClusterState, stage: float, nodes: int) -> None:
    """Preempt, without timing it, the first nodes in node-tree order not preempted yet, until a
    `stage` of them are: 3 low pods evicted, a preemptor bound (what the timed preemptors do too)."""
    names = [cluster.names[slot] for slot in cluster.scan_order()]
    preempted = [any(r.pod.priority == 10 for r in cluster.pods_on(name)) for name in names]
    missing = int(stage * nodes) - sum(preempted)
    for name, done in zip(names, preempted, strict=True):
        if missing <= 0:
            return
        if done:
            continue
        for low in sorted((r.pod for r in cluster.pods_on(name)), key=lambda p: p.name)[1:]:
            cluster.remove_pod(low.key)
        cluster.add_pod(high_pod(f"filler-{name}", name))
        missing -= 1


def measure_basic(cluster: ClusterState, preemptors: int, tag: str) -> list[float]:
    """CPU seconds per preemptor: its preemption cycle, its victims evicted and its nomination, its
    second cycle placing it there."""
    profile = compile_profile("bench", {"schedulerName": "placer"})
    scheduler = Scheduler()
    times = []
    for k in range(preemptors):
        preemptor = high_pod(f"high-{tag}-{k}")
        start = time.thread_time()
        decision = scheduler.schedule(preemptor, profile, cluster, top=0)
        assert decision.preemption is not None, decision.full_message
        assert len(decision.preemption.victims) == 3
        for victim in decision.preemption.victims:
            cluster.remove_pod(victim.key)
        cluster.nominate(preemptor, decision.preemption.node)
        placed = scheduler.schedule(preemptor, profile, cluster, top=0)
        assert placed.node == decision.preemption.node
        scheduler.assume(preemptor, placed, profile, cluster)
        cluster.unnominate(preemptor.key)
        times.append(time.thread_time() - start)
    return times


def main_basic(args: argparse.Namespace) -> int:
    stages = [float(x) for x in args.stages.split(",")] if args.stages else list(BASIC_STAGES)
    per_stage: dict[float, list[float]] = {stage: [] for stage in stages}
    for run in range(args.runs):
        cluster = basic_cluster(args.nodes)
        for stage in sorted(stages):
            advance(cluster, stage, args.nodes)
            times = measure_basic(cluster, args.preemptors, f"{run}-{stage}")
            per_stage[stage].append(statistics.median(times) * 1000)
    medians = {stage: statistics.median(values) for stage, values in per_stage.items()}
    mean = statistics.fmean(medians.values())
    row = {
        "shape": "PreemptionBasic",
        "nodes": args.nodes,
        "low_priority_pods": args.nodes * 4,
        "runs": args.runs,
        "preemptors_per_stage": args.preemptors,
        "cpu_ms_per_preemptor_by_stage": {f"{stage:g}": round(value, 3) for stage, value in medians.items()},
        "all_runs_ms_by_stage": {f"{stage:g}": [round(v, 3) for v in per_stage[stage]] for stage in stages},
        "cpu_ms_per_preemptor_mean_over_stages": round(mean, 3),
    }
    by_stage = ", ".join(f"{stage:g}: {value:.2f}" for stage, value in medians.items())
    print(f"PreemptionBasic {args.nodes} nodes ({args.nodes * 4} low-priority pods): CPU per preemptor "
          f"{mean:.2f} ms (mean over stages of the medians of {args.runs} runs x {args.preemptors}; "
          f"by stage {by_stage})", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(row, indent=2) + "\n")
    return 0


def waves_cluster(nodes: int, budget: bool) -> ClusterState:
    """PreemptionBasic's start; with `budget`, every other low pod under a budget allowing none."""
    cluster = basic_cluster(nodes, protected=budget)
    if budget:
        upsert_object(cluster.catalog, KINDS_BY_NAME["PodDisruptionBudget"], {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "protected", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"protected": "1"}}},
            "status": {"disruptionsAllowed": 0}})
    return cluster


def measure_waves(nodes: int, outstanding: int, preemptors: int, budget: bool) -> float:
    """CPU ms per preemptor, all cycles, with `outstanding` preemptions not carried out yet."""
    cluster = waves_cluster(nodes, budget)
    profile = compile_profile("bench", {"schedulerName": "placer"})
    scheduler = Scheduler()
    waiting: list[tuple[PodInfo, Any]] = []
    start = time.thread_time()
    for k in range(preemptors):
        preemptor = high_pod(f"high-{k}")
        decision = scheduler.schedule(preemptor, profile, cluster, top=0)
        assert decision.preemption is not None, decision.full_message
        cluster.nominate(preemptor, decision.preemption.node)
        waiting.append((preemptor, decision))
        while len(waiting) > outstanding or (k == preemptors - 1 and waiting):
            oldest, chosen = waiting.pop(0)
            for victim in chosen.preemption.victims:
                cluster.remove_pod(victim.key)
            placed = scheduler.schedule(oldest, profile, cluster, top=0)
            assert placed.node == chosen.preemption.node, placed.full_message
            scheduler.assume(oldest, placed, profile, cluster)
            cluster.unnominate(oldest.key)
    return (time.thread_time() - start) / preemptors * 1000


def main_waves(args: argparse.Namespace) -> int:
    runs = [measure_waves(args.nodes, args.outstanding, args.preemptors, args.budget) for _ in range(args.runs)]
    row = {"shape": "PreemptionWithPDB" if args.budget else "PreemptionBasic", "nodes": args.nodes,
           "outstanding": args.outstanding, "preemptors": args.preemptors, "runs": args.runs,
           "cpu_ms_per_preemptor": round(statistics.median(runs), 3), "all_runs_ms": [round(r, 3) for r in runs]}
    print(f"{row['shape']} waves, {args.nodes} nodes, {args.outstanding} outstanding: "
          f"{row['cpu_ms_per_preemptor']:.2f} ms per preemptor (median of {args.runs}: {row['all_runs_ms']})",
          flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(row, indent=2) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--preemptors", type=int, default=20, help="preemptors timed per run (per stage: basic)")
    parser.add_argument("--shape", choices=("full", "basic", "waves"), default="full",
                        help="full: 8 pods of priorities 0-2 per node, a budget; basic: kube's PreemptionBasic; "
                             "waves: PreemptionBasic with preemptions outstanding")
    parser.add_argument("--stages", help="basic: the fractions of nodes preempted before each measurement")
    parser.add_argument("--outstanding", type=int, default=150, help="waves: preemptions not carried out yet")
    parser.add_argument("--budget", action="store_true", help="waves: every other low pod under a budget")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.shape == "basic":
        return main_basic(args)
    if args.shape == "waves":
        return main_waves(args)
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
