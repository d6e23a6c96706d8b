"""hack/cluster_check.py's pure helpers (`make check-cluster` itself needs hollow nodes and is never
part of the suite): how it reads what the cluster ends up holding, and what it starts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("placer_hack_cluster_check", ROOT / "hack" / "cluster_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load()


def pod(name: str, node: str | None, cpu: str = "200m", phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": phase, **status}}


@pytest.mark.parametrize(("quantity", "millicores"), [("250m", 250), ("1", 1000), ("0.5", 500), ("2", 2000),
                                                      (None, 0), (3, 3000)])
def test_milli(quantity: Any, millicores: int) -> None:
    assert check.milli(quantity) == millicores


def test_rejections_are_the_kubelets_refusals_only() -> None:
    pods = [pod("ok", "n1"),
            pod("refused", "n2", phase="Failed", reason="OutOfcpu",
                message="Pod was rejected: Node didn't have enough resource: cpu, requested: 200, used: 900, "
                        "capacity: 1000"),
            pod("evicted", "n1", phase="Failed", reason="Evicted", message="The node was low on resource: memory."),
            pod("crashed", "n1", phase="Failed", reason="Error", message="")]
    assert check.rejections(pods) == [("refused", "n2", "OutOfcpu")]


def test_overcommitted_counts_what_runs_or_waits_on_a_node() -> None:
    pods = [pod("a", "n1", "600m"), pod("b", "n1", "500m", phase="Pending"), pod("c", "n1", "900m", phase="Failed"),
            pod("d", "n2", "1"), pod("e", None, "5")]
    assert check.overcommitted(pods, {"n1": 1000, "n2": 1000}) == {"n1": 1100}
    assert check.overcommitted(pods, {"n1": 1100, "n2": 1000}) == {}


def test_running_by_node_leaves_out_pods_being_deleted() -> None:
    leaving = pod("c", "n2")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert check.running_by_node([pod("a", "n1"), pod("b", "n1"), leaving, pod("d", "n2", phase="Pending")]) == {
        "n1": 2}


def test_a_burst_exactly_fills_four_hollow_nodes_the_two_schedulers_interleaved() -> None:
    pods = check.burst_pods(1, ("default-scheduler", "placer-check"), 10, "200m")
    assert len(pods) == 20 and len({p["metadata"]["name"] for p in pods}) == 20
    assert [p["spec"]["schedulerName"] for p in pods[:4]] == ["default-scheduler", "placer-check"] * 2
    assert sum(check.pod_cpu(p) for p in pods) == check.NODES * check.NODE_CPU_MILLI
    assert all(p["spec"]["terminationGracePeriodSeconds"] == 0 and "tolerations" not in p["spec"] for p in pods)
    toleration = {"key": "pool", "operator": "Equal", "value": "placer", "effect": "NoSchedule"}
    split = check.burst_pods(0, ("default-scheduler", "placer-check"), 2, "200m", {"placer-check": [toleration]})
    assert [p["spec"].get("tolerations") for p in split] == [None, [toleration]] * 2


def test_kube_scheduler_configuration(tmp_path: Path) -> None:
    second = check.kube_scheduler_config(tmp_path / "kc", [{"schedulerName": "placer-check"}])
    assert second["leaderElection"] == {"leaderElect": False}
    assert second["clientConnection"] == {"kubeconfig": str(tmp_path / "kc"), "qps": 5000, "burst": 10000}
    only = check.kube_scheduler_config(tmp_path / "kc", [{"schedulerName": "default-scheduler"}], leader_elect=True)
    assert only["leaderElection"] == {"leaderElect": True, "resourceNamespace": "kube-system",
                                      "resourceName": "kube-scheduler"}


def test_latency_summary() -> None:
    created = {"a": 10.0, "b": 11.0, "c": 12.0, "d": 13.0}
    bound = {"a": 10.1, "b": 13.5, "c": 12.2}
    assert check.latency_summary(created, bound) == {"pods": 4, "bound": 3, "unbound": ["d"], "max_s": 2.5,
                                                     "median_s": 0.2}
    assert check.latency_summary({}, {})["max_s"] is None


def test_summary_table() -> None:
    results = {"second-placer": {"scenarios": {"drain": {"ok": True}, "profile-edit": {"ok": False}}},
               "only-kube": {"scenarios": {"drain": {"ok": True}, "profile-edit": {"ok": True, "skipped": "..."}}}}
    assert check.summary_table(results).splitlines() == [
        "| scenario | second-placer | only-kube |", "|---|---|---|", "| drain | ok | ok |",
        "| profile-edit | FAIL | n/a |"]


def test_every_scenario_has_a_namespace_and_runs_before_the_node_dies() -> None:
    names = list(check.SCENARIOS)
    assert names[-1] == "node-dies"  # it kills a hollow node: last
    assert len({check._ns(name) for name in names}) == len(names)


def test_the_default_filters_are_placers() -> None:
    from placer.engine.profile import DEFAULT_FILTERS

    assert list(check.DEFAULT_FILTERS) == [entry["name"] for entry in DEFAULT_FILTERS]
