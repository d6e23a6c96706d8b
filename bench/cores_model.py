"""A model for bigger machines, from `make bench-real`'s suite JSON: for each workload, each
scheduler's rate on N free cores, and from how many cores kube-scheduler would overtake Placer.

Nobody here has more than two cores, so the rates are reasoned from per-pod figures measured in
the same run, with the assumptions stated (docs/performance.md, "Bigger machines"):

- N free cores for the scheduler, kube-apiserver and etcd together; the API server and etcd scale
  with cores for these requests (binds and events are independent writes);
- kube-scheduler's scheduling cycle is sequential (`scheduleOne`, one pod at a time): its serial
  part is its scheduling algorithm's wall time less Filter's and Score's (from its own
  `scheduler_scheduling_algorithm_duration_seconds` and `..._extension_point_duration_seconds`,
  scraped in the run); the rest of its CPU per pod — generously, all of it — divides over
  min(N, 16) goroutines (`parallelism: 16`); its binding cycles run beside it;
- Placer decides on one core (one Python thread), so its ceiling is 1 / its CPU per pod;
- each scheduler's rate is the lower of its ceiling and N cores over its CPU per pod plus the API
  server's and etcd's it causes.

The figures are the `during` rows' (the scheduler already running: no start-up in its CPU), or
the `waiting` rows' where a workload has no `during` row.

    .venv/bin/python bench/cores_model.py bench/results/suite-v1.36-500.json bench/results/suite-v1.36-5000.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARALLELISM = 16  # kube-scheduler's default `parallelism`
CORES = (2, 4, 8, 16, 32)
MAX_CORES = 256
TIMES = "\u00d7"


@dataclass(frozen=True)
class Costs:
    """Per measured pod, in ms: the scheduler's CPU, the API server's and etcd's CPU it caused, and
    for kube-scheduler the serial part of its scheduling cycle (wall)."""

    cpu: float
    server: float
    serial: float = 0.0


def kube_rate(costs: Costs, cores: int) -> float:
    """Pods/s kube-scheduler would reach on `cores` free cores."""
    parallel = max(costs.cpu - costs.serial, 0.0)
    cycle = costs.serial + parallel / min(cores, PARALLELISM)
    return min(1000.0 / cycle, cores * 1000.0 / (costs.cpu + costs.server))


def placer_rate(costs: Costs, cores: int) -> float:
    """Pods/s Placer would reach on `cores` free cores: one core decides."""
    return min(1000.0 / costs.cpu, cores * 1000.0 / (costs.cpu + costs.server))


def overtaking(kube: Costs, placer: Costs, limit: int = MAX_CORES) -> int | None:
    """The fewest free cores on which kube-scheduler would be faster than Placer (None: not below
    `limit`)."""
    for cores in range(1, limit + 1):
        if kube_rate(kube, cores) > placer_rate(placer, cores):
            return cores
    return None


def _metric_mean(metrics: Mapping[str, Any], name: str, **labels: str) -> float:
    """The mean (ms) of a histogram kube-scheduler exposed, over its series matching `labels`."""
    count = total = 0.0
    for series in metrics.get(name) or ():
        if all(series.get("labels", {}).get(key) == value for key, value in labels.items()):
            count += series.get("count") or 0.0
            total += series.get("sum_s") or 0.0
    return 1000.0 * total / count if count else math.nan


def kube_serial_ms(metrics: Mapping[str, Any]) -> float:
    """kube-scheduler's scheduling algorithm's wall time per attempt less Filter and Score (the
    two points whose per-node work runs over its goroutines)."""
    algorithm = _metric_mean(metrics, "scheduler_scheduling_algorithm_duration_seconds")
    points = "scheduler_framework_extension_point_duration_seconds"
    parallel = sum(_metric_mean(metrics, points, extension_point=point) for point in ("Filter", "Score"))
    if math.isnan(algorithm):
        return math.nan
    return max(algorithm - (0.0 if math.isnan(parallel) else parallel), 0.0)


@dataclass(frozen=True)
class Row:
    workload: str
    size: int
    mode: str
    kube: Costs
    placer: Costs


def _costs(result: Mapping[str, Any], serial: float = 0.0) -> Costs | None:
    cpu = result.get("cpu_ms_per_pod_scheduler")
    server = (result.get("cpu_ms_per_pod_apiserver") or 0.0) + (result.get("cpu_ms_per_pod_etcd") or 0.0)
    if cpu is None or not cpu > 0:
        return None
    return Costs(float(cpu), float(server), serial)


def rows_of(documents: Iterable[Mapping[str, Any]]) -> list[Row]:
    """The suite's rows with both schedulers measured, a `during` row preferred per workload."""
    chosen: dict[tuple[str, int], Row] = {}
    for document in documents:
        for row in document.get("rows") or ():
            results = row.get("results") or {}
            kube, placer = results.get("kube-scheduler") or {}, results.get("placer") or {}
            serial = kube_serial_ms(kube.get("kube_scheduler_metrics") or {})
            kube_costs = _costs(kube, 0.0 if math.isnan(serial) else serial)
            placer_costs = _costs(placer)
            if kube_costs is None or placer_costs is None:
                continue
            key = (str(row.get("test_case")), int(row.get("size") or 0))
            candidate = Row(key[0], key[1], str(row.get("mode")), kube_costs, placer_costs)
            if key not in chosen or (candidate.mode == "during" and chosen[key].mode != "during"):
                chosen[key] = candidate
    return sorted(chosen.values(), key=lambda row: (row.size, row.workload))


def table(rows: list[Row]) -> str:
    """The model as a Markdown table."""
    header = ("| workload | nodes | mode | kube CPU/pod (serial) | Placer CPU/pod | API+etcd kube / Placer | "
              + " | ".join(f"{n} cores" for n in CORES) + " | kube overtakes at |")
    lines = [header, "|" + "---|" * (7 + len(CORES))]
    for row in rows:
        ratios = " | ".join(f"{placer_rate(row.placer, n) / kube_rate(row.kube, n):.2f}{TIMES}" for n in CORES)
        over = overtaking(row.kube, row.placer)
        overtakes = f"never (up to {MAX_CORES})" if over is None else f"{over} core{'s' * (over > 1)}"
        lines.append(
            f"| {row.workload} | {row.size:,} | {row.mode} | {row.kube.cpu:.2f} ms ({row.kube.serial:.2f}) | "
            f"{row.placer.cpu:.2f} ms | {row.kube.server:.2f} / {row.placer.server:.2f} ms | {ratios} | "
            f"{overtakes} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="suite JSON from make bench-real")
    arguments = parser.parse_args()
    documents = [json.loads(path.read_text()) for path in arguments.results]
    print("Placer / kube-scheduler, modelled pods/s on N free cores\n")
    print(table(rows_of(documents)))


if __name__ == "__main__":
    main()
