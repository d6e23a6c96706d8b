"""bench/cores_model.py: the bigger-machines model docs/performance.md quotes, on hand-made rows."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import cores_model as cm  # noqa: E402


def histogram(mean_ms: float, count: int = 100, **labels: str) -> dict[str, object]:
    return {"labels": labels, "count": float(count), "sum_s": mean_ms * count / 1000.0}


def suite_row(case: str, mode: str, kube_cpu: float, placer_cpu: float) -> dict[str, object]:
    metrics = {
        "scheduler_scheduling_algorithm_duration_seconds": [histogram(1.5)],
        "scheduler_framework_extension_point_duration_seconds": [
            histogram(0.6, extension_point="Filter"), histogram(0.5, extension_point="Score"),
            histogram(9.0, extension_point="Bind")],
    }
    return {"test_case": case, "size": 500, "mode": mode, "results": {
        "kube-scheduler": {"cpu_ms_per_pod_scheduler": kube_cpu, "cpu_ms_per_pod_apiserver": 2.0,
                           "cpu_ms_per_pod_etcd": 0.5, "kube_scheduler_metrics": metrics},
        "placer": {"cpu_ms_per_pod_scheduler": placer_cpu, "cpu_ms_per_pod_apiserver": 1.5,
                   "cpu_ms_per_pod_etcd": 0.5},
        "limit": {"cpu_ms_per_pod_scheduler": 0.2}}}


def test_kubes_serial_part_is_its_algorithm_less_filter_and_score() -> None:
    row = suite_row("A", "during", 2.0, 0.5)
    metrics = row["results"]["kube-scheduler"]["kube_scheduler_metrics"]  # type: ignore[index]
    assert cm.kube_serial_ms(metrics) == pytest.approx(0.4)
    assert math.isnan(cm.kube_serial_ms({}))


def test_rates_follow_the_stated_model() -> None:
    kube, placer = cm.Costs(cpu=2.0, server=2.5, serial=0.4), cm.Costs(cpu=0.5, server=2.0)
    # 2 cores: both bounded by the cores (2,000 / 4.5 and 2,000 / 2.5 pods/s)
    assert cm.kube_rate(kube, 2) == pytest.approx(2000 / 4.5)
    assert cm.placer_rate(placer, 2) == pytest.approx(800)
    # many cores: kube's sequential cycle (0.4 + 1.6 / 16 ms) and Placer's one core (0.5 ms)
    assert cm.kube_rate(kube, 64) == pytest.approx(1000 / 0.5)
    assert cm.placer_rate(placer, 64) == pytest.approx(2000)
    assert cm.overtaking(kube, placer) is None  # equal at best: never faster
    faster_kube = cm.Costs(cpu=2.0, server=2.5, serial=0.1)
    cores = cm.overtaking(faster_kube, placer)
    assert cores is not None
    assert cm.kube_rate(faster_kube, cores) > cm.placer_rate(placer, cores)
    assert cm.kube_rate(faster_kube, cores - 1) <= cm.placer_rate(placer, cores - 1)


def test_a_during_row_is_preferred_and_incomplete_rows_are_left_out() -> None:
    document = {"rows": [suite_row("A", "waiting", 3.0, 1.0), suite_row("A", "during", 2.0, 0.5),
                         {"test_case": "B", "size": 500, "mode": "waiting", "results": {"placer": {}}}]}
    [row] = cm.rows_of([document])
    assert (row.workload, row.mode, row.kube.cpu, row.placer.cpu) == ("A", "during", 2.0, 0.5)
    assert row.kube.server == pytest.approx(2.5) and row.kube.serial == pytest.approx(0.4)
    text = cm.table([row])
    assert text.splitlines()[2].startswith("| A | 500 | during | 2.00 ms (0.40) | 0.50 ms |")
