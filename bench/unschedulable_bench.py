"""Engine and queue benchmark of kube's scheduler_perf `Unschedulable` workload (misc/
performance-config.yaml): what pods that fit nowhere cost while the others are scheduled.

node-default.yaml nodes (4 CPU), `init` pod-default.yaml pods bound, then `measured` pod-default
pods decided from the queue while a pod-high-priority-large-cpu.yaml pod (priority 10, 9 CPU: no
node has that much) is created every 200 ms ("churn"). The loop is the operator's, without I/O:
pop, decide, assume (waking the queue with the pod added) or back off with the decision's events
and rejecting filters; the clock is virtual, moved `--tick` ms per decision (Placer's rate on a
real plane: about 1.8 ms a pod at 500 nodes), so the unschedulable pods are retried as often as
they would be (1 s doubling to 10 s). Reported, this thread's CPU clock, medians over runs: per
attempt of an unschedulable pod, per measured pod, the attempts, and the whole loop.

    python bench/unschedulable_bench.py [--nodes 500] [--init 10] [--measured 1000] [--runs 5] [--json FILE]
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
from placer.engine.framework import ClusterEvent
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import compile_profile
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Scheduler
from placer.testing import node, pod

CHURN_MS = 200.0  # kube's churn opcode: intervalMilliseconds


def cluster_of(nodes: int, init: int) -> ClusterState:
    cluster = ClusterState()
    for i in range(nodes):
        cluster.upsert_node(parse_node(node(f"scheduler-perf-{i:05d}", cpu="4", memory="32Gi", pods="110")))
    for i in range(init):
        name = f"scheduler-perf-{i % nodes:05d}"
        cluster.add_pod(parse_pod(pod(f"init-{i}", cpu="100m", memory="500Mi", node_name=name)))
    return cluster


def run(nodes: int, init: int, measured: int, tick_ms: float) -> dict[str, float]:
    cluster = cluster_of(nodes, init)
    profile = compile_profile("bench", {"schedulerName": "placer"})
    by_name = {p.name: p for p in profile.filters}
    now = [0.0]
    queue = SchedulingQueue(clock=lambda: now[0])
    scheduler = Scheduler()
    for i in range(measured):
        queue.add(parse_pod(pod(f"measured-{i:05d}", cpu="100m", memory="500Mi")))
    left = measured
    churned = 0
    attempts = {"unschedulable": 0, "measured": 0}
    cpu = {"unschedulable": 0.0, "measured": 0.0}
    begin = time.thread_time()
    while left:
        while churned * CHURN_MS / 1000 <= now[0]:
            queue.add(parse_pod(pod(f"pod-h-{churned:05d}", cpu="9", memory="500Mi", priority=10)))
            churned += 1
        info = queue.pop()
        if info is None:
            now[0] += queue.next_ready_in() or tick_ms / 1000
            continue
        kind = "unschedulable" if info.name.startswith("pod-h-") else "measured"
        start = time.thread_time()
        decision = scheduler.schedule(info, profile, cluster, top=0)
        if decision.node is not None:
            scheduler.assume(info, decision, profile, cluster)
            queue.remove(info.key)
            queue.wake(ClusterEvent.POD_ADD, None, info)
            left -= 1
        else:
            rejectors = tuple(by_name[name] for name in decision.rejected_by if name in by_name)
            queue.backoff(info.key, decision.wake_on, rejectors=rejectors)
        cpu[kind] += time.thread_time() - start
        attempts[kind] += 1
        now[0] += tick_ms / 1000
    total = time.thread_time() - begin
    return {
        "unschedulable_pods": churned,
        "unschedulable_attempts": attempts["unschedulable"],
        "cpu_ms_per_unschedulable_attempt": cpu["unschedulable"] * 1000 / max(attempts["unschedulable"], 1),
        "cpu_ms_per_measured_pod": cpu["measured"] * 1000 / measured,
        "cpu_s_unschedulable": cpu["unschedulable"],
        "cpu_s_total": total,
        "virtual_s": now[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--init", type=int, default=10)
    parser.add_argument("--measured", type=int, default=1000)
    parser.add_argument("--tick", type=float, default=1.8, help="virtual ms per decision")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = [run(args.nodes, args.init, args.measured, args.tick) for _ in range(args.runs)]
    row = {key: round(statistics.median(r[key] for r in runs), 4) for key in runs[0]}
    row.update(nodes=args.nodes, init=args.init, measured=args.measured, tick_ms=args.tick, runs=args.runs)
    print(f"Unschedulable {args.nodes} nodes, {args.measured} measured pods: {row['unschedulable_pods']:.0f} "
          f"unschedulable pods, {row['unschedulable_attempts']:.0f} attempts, "
          f"{row['cpu_ms_per_unschedulable_attempt']:.3f} ms CPU each ({row['cpu_s_unschedulable']:.3f} s); "
          f"measured {row['cpu_ms_per_measured_pod']:.3f} ms CPU a pod; loop {row['cpu_s_total']:.3f} s "
          f"(medians of {args.runs})", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(row, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
