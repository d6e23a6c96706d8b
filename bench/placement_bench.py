"""Placement benchmark: how many gangs each placement choice places on a rack-shaped cluster
(issue 24: "a profile argument lets the placement choice be best-fit ... with a benchmark on a
rack-shaped cluster of mixed gang sizes that reports how many gangs each choice places").

The cluster: `--racks` racks (node label `bench.placer.dev/rack`) of 2 to 6 nodes of 8 cpu / 32 Gi,
each rack already holding background pods up to a random share (0-60 %) of its cpu, from a seed.
Then a stream of gangs arrives, one after the other: sizes drawn from 2, 4, 8, 12, 16, 24 and 32
pods of 1 cpu / 2 Gi (`minCount` = size, `schedulingConstraints.topology: [{key: rack}]`). Each gang
is decided once, when it arrives (`decide_group`): placed whole inside one rack, or not at all
(nothing held; it does not come back). A placed gang runs for a random 5 to 20 further arrivals,
then finishes and frees its room (`--lifetime 0`: it never does, the cluster only fills). Same seed,
same cluster and same stream for each choice:

- `Default`: kube v1.36's choice — the highest placement score (`PodGroupPodsCount` + NodeResourcesFit's
  MostAllocated over the rack), ties to the smallest rack name (kube draws at random);
- `BestFit`: TopologyPlacementGenerator's `placement: BestFit` — the rack that takes the most of the
  group, then leaves the least room (cpu and memory, each as a share of the cluster's);
- `CountOnly`: kube's choice with `PodGroupPodsCount` as the only placement score (NodeResourcesFit
  not in the profile's scores): what kube's MostAllocated placement score adds.

Reported per choice: gangs placed, pods placed, summed over `--seeds` seeds, and engine time per
gang decision (median). `make bench-placement` writes bench/results/placement.json.

    python bench/placement_bench.py [--seeds 5] [--racks 12] [--gangs 200] [--lifetime 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from placer.engine.cluster import ClusterState
from placer.engine.gang import Outcome, decide_group
from placer.engine.groups import group_of
from placer.engine.kinds import document_kind, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import Profile, compile_profile
from placer.engine.runtime import Scheduler

RACK = "bench.placer.dev/rack"
SIZES = (2, 4, 8, 12, 16, 24, 32)
CHOICES = ("Default", "BestFit", "CountOnly")


def profile(choice: str) -> Profile:
    scores = [{"name": "NodeResourcesFit", "weight": 1}, {"name": "PodGroupPodsCount", "weight": 1}]
    return compile_profile(choice.lower(), {
        "schedulerName": "placer", "postFilters": [],
        "filters": [{"name": "NodeResourcesFit"}, {"name": "GangScheduling"},
                    {"name": "TopologyPlacementGenerator",
                     "args": {"placement": "BestFit" if choice == "BestFit" else "Default"}}],
        "scores": scores[1:] if choice == "CountOnly" else scores})


def _pod(name: str, cpu: str, memory: str, node: str | None = None, group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "placer", "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node is not None:
        spec["nodeName"] = node
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "bench", "uid": name},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def cluster(seed: int, racks: int) -> ClusterState:
    """Racks of 2-6 nodes of 8 cpu, each loaded to a random share of its cpu (1-cpu pods)."""
    rng = random.Random(seed)
    state = ClusterState()
    for r in range(racks):
        rack = f"rack-{r:02d}"
        names = [f"{rack}-n{i}" for i in range(rng.randint(2, 6))]
        for name in names:
            state.upsert_node(parse_node({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, RACK: rack}},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}))
        busy = int(len(names) * 8 * rng.uniform(0.0, 0.6))
        for i in range(busy):
            state.add_pod(parse_pod(_pod(f"bg-{rack}-{i}", "1", "2Gi", node=names[i % len(names)])))
    return state


def stream(seed: int, gangs: int, lifetime: int) -> list[tuple[int, int]]:
    """(size, how many arrivals it runs for once placed) of each gang, in arrival order."""
    rng = random.Random(seed * 7919 + 1)
    return [(rng.choice(SIZES), rng.randint(5, lifetime) if lifetime else gangs) for _ in range(gangs)]


def run(choice: str, seed: int, racks: int, gangs: int, lifetime: int) -> dict[str, Any]:
    state = cluster(seed, racks)
    chosen = profile(choice)
    scheduler = Scheduler()
    placed_gangs = placed_pods = 0
    times: list[float] = []
    running: list[tuple[int, list[str]]] = []  # (the arrival at which it finishes, its pods)
    for index, (size, runs_for) in enumerate(stream(seed, gangs, lifetime)):
        for done in [job for job in running if job[0] <= index]:
            running.remove(done)
            for key in done[1]:
                state.remove_pod(key)
        name = f"g{index:03d}"
        obj = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "bench"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": size}},
                        "schedulingConstraints": {"topology": [{"key": RACK}]}}}
        kind = document_kind(obj)
        assert kind is not None
        upsert_object(state.catalog, kind, obj)
        pods = [parse_pod(_pod(f"{name}-{i}", "1", "2Gi", group=name)) for i in range(size)]
        ref = group_of(pods[0])
        assert ref is not None
        begin = time.perf_counter()
        decision = decide_group(scheduler, chosen, state, ref, pods, top=0)
        times.append(time.perf_counter() - begin)
        if decision.outcome is Outcome.PLACED:
            placed_gangs += 1
            placed_pods += size
            racks_used = {state.node(d.node).labels[RACK] for d in decision.decisions if d.node}  # type: ignore[union-attr]
            assert len(racks_used) == 1, f"gang {name} spread over {racks_used}"
            running.append((index + runs_for, [p.key for p in pods]))
        else:
            assert not any(state.is_assumed(p.key) for p in pods), "a gang not placed held something"
    assert not state.overcommitted(), "the engine overcommitted a node"
    return {"gangs": gangs, "placed_gangs": placed_gangs, "placed_pods": placed_pods,
            "median_ms": statistics.median(times) * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--racks", type=int, default=12)
    parser.add_argument("--gangs", type=int, default=200, help="gangs arriving, per seed")
    parser.add_argument("--lifetime", type=int, default=20,
                        help="a placed gang runs for 5 to this many further arrivals (0: forever)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    totals = {choice: {"placed_gangs": 0, "placed_pods": 0, "ms": []} for choice in CHOICES}
    for seed in range(1, args.seeds + 1):
        for choice in CHOICES:
            result = run(choice, seed, args.racks, args.gangs, args.lifetime)
            rows.append({"choice": choice, "seed": seed, "racks": args.racks, "lifetime": args.lifetime, **result})
            total = totals[choice]
            total["placed_gangs"] += result["placed_gangs"]
            total["placed_pods"] += result["placed_pods"]
            total["ms"].append(result["median_ms"])
            print(f"seed {seed} {choice:>8}: {result['placed_gangs']:3d}/{args.gangs} gangs, "
                  f"{result['placed_pods']:5d} pods placed; {result['median_ms']:.2f} ms per gang (median)",
                  flush=True)
    summary = []
    for choice, total in totals.items():
        summary.append({"choice": choice, "seeds": args.seeds, "gangs": args.gangs * args.seeds,
                        "placed_gangs": total["placed_gangs"], "placed_pods": total["placed_pods"],
                        "median_ms_per_gang": round(statistics.median(total["ms"]), 3)})
        print(f"{choice:>8}: {total['placed_gangs']} of {args.gangs * args.seeds} gangs, "
              f"{total['placed_pods']} pods, over {args.seeds} seeds of {args.racks} racks "
              f"(lifetime {args.lifetime or 'forever'})", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
