"""NodeUtilization: thresholds on measured usage (fractions of allocatable) and the least-busy
score, with and without NodeMetrics."""

from __future__ import annotations

import pytest

from placer.engine.profile import ProfileError
from placer.plugins.node_utilization import NO_METRICS_WARNING
from placer.testing import cluster_of, decide, filter_result, make_plugin, make_profile, node, node_metrics, pod, scores

CPU_REASON = "node(s) had CPU usage above threshold"
MEMORY_REASON = "node(s) had memory usage above threshold"
THRESHOLDS = {"cpuThreshold": 0.8, "memoryThreshold": 0.85}


def busy_cluster(with_both: bool = False) -> object:
    names = ["n1", "n2", "n3", "n4"] + (["n5"] if with_both else [])
    metrics = [
        node_metrics("n1", "3600000000n", "2097152Ki"),  # cpu .9,  memory .25
        node_metrics("n2", "1", "7Gi"),  # cpu .25, memory .875
        node_metrics("n3", "400m", "1024Mi"),  # cpu .1,  memory .125
        node_metrics("n5", "3800m", "7Gi"),  # cpu .95, memory .875
    ]
    return cluster_of([node(n, cpu="4", memory="8Gi") for n in names], [], metrics)


def test_thresholds_reject_busy_nodes_and_pass_nodes_without_metrics() -> None:
    plugin = make_plugin("NodeUtilization", THRESHOLDS)
    assert filter_result(plugin, pod("p"), busy_cluster()) == {"n1": False, "n2": False, "n3": True, "n4": True}


def test_only_the_thresholds_given_are_checked() -> None:
    cpu_only = make_plugin("NodeUtilization", {"cpuThreshold": 0.8})
    assert filter_result(cpu_only, pod("p"), busy_cluster()) == {"n1": False, "n2": True, "n3": True, "n4": True}
    memory_only = make_plugin("NodeUtilization", {"memoryThreshold": 0.9})
    assert filter_result(memory_only, pod("p"), busy_cluster()) == {"n1": True, "n2": True, "n3": True, "n4": True}
    from placer.testing import pod_info

    assert make_plugin("NodeUtilization").filter(pod_info(pod("p")), busy_cluster()) is None


def test_reasons_one_node_may_give_both() -> None:
    cluster = busy_cluster(with_both=True)
    cluster.remove_node("n3")
    cluster.remove_node("n4")
    profile = make_profile(filters=[{"name": "NodeUtilization", "args": THRESHOLDS}], scores=[])
    decision = decide(profile, pod("p"), cluster)
    assert decision.reasons == {CPU_REASON: 2, MEMORY_REASON: 2}
    assert decision.message == f"0/3 nodes are available: 2 {CPU_REASON}, 2 {MEMORY_REASON}."


def test_score_lower_usage_is_better() -> None:
    plugin = make_plugin("NodeUtilization")
    # mean usage: n1 .575, n2 .5625, n3 .1125; n4 has none and scores 0
    # (max - usage) * 100 / (max - min): n2 .0125 / .4625 -> 2
    assert scores(plugin, pod("p"), busy_cluster()) == {"n1": 0, "n2": 2, "n3": 100, "n4": 0}


def test_score_resource_weights() -> None:
    weighted = make_plugin("NodeUtilization", {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}]})
    # n1 (2.7 + .25) / 4 = .7375, n2 (.75 + .875) / 4 = .40625, n3 .10625: n2 .33125 / .63125 -> 52
    assert scores(weighted, pod("p"), busy_cluster()) == {"n1": 0, "n2": 52, "n3": 100, "n4": 0}
    memory = make_plugin("NodeUtilization", {"resources": [{"name": "memory"}]})
    # n1 .25, n2 .875, n3 .125: n1 .625 / .75 -> 83
    assert scores(memory, pod("p"), busy_cluster()) == {"n1": 83, "n2": 0, "n3": 100, "n4": 0}


def test_without_any_metrics_every_node_passes_scores_alike_and_status_says_so() -> None:
    cluster = cluster_of([node("a"), node("b")])
    plugin = make_plugin("NodeUtilization", THRESHOLDS)
    assert filter_result(plugin, pod("p"), cluster) == {"a": True, "b": True}
    assert scores(plugin, pod("p"), cluster) == {"a": 0, "b": 0}
    assert plugin.warnings(cluster) == [NO_METRICS_WARNING]
    profile = make_profile(filters=[{"name": "NodeUtilization", "args": THRESHOLDS}],
                           scores=[{"name": "NodeUtilization"}])
    assert profile.warnings(cluster) == [NO_METRICS_WARNING]  # once, though listed twice
    assert profile.warnings(busy_cluster()) == []


def test_metrics_update_and_removal() -> None:
    cluster = busy_cluster()
    plugin = make_plugin("NodeUtilization", THRESHOLDS)
    cluster.set_node_metrics("n1", {"cpu": 100, "memory": 0})
    assert filter_result(plugin, pod("p"), cluster)["n1"] is True
    cluster.set_node_metrics("n2", None)
    assert filter_result(plugin, pod("p"), cluster)["n2"] is True
    # metrics that arrive before their node apply when it does
    from placer.engine.parsing import parse_node

    cluster.set_node_metrics("late", {"cpu": 4000, "memory": 0})
    cluster.upsert_node(parse_node(node("late", cpu="4")))
    assert filter_result(plugin, pod("p"), cluster)["late"] is False


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"cpuThreshold": 0}, "args.cpuThreshold"),
        ({"cpuThreshold": 1.5}, "args.cpuThreshold"),
        ({"memoryThreshold": "high"}, "args.memoryThreshold"),
        ({"resources": [{"name": "gpu"}]}, "args.resources[0].name"),
        ({"resources": [{"name": "cpu", "weight": 0}]}, "args.resources[0].weight"),
        ({"resources": []}, "args.resources"),
        ({"threshold": 0.5}, "args.threshold"),
    ],
)
def test_bad_args(args: dict, field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(filters=[{"name": "NodeUtilization", "args": args}], name="busy")
    assert str(caught.value).startswith('profile "busy": filters[0] NodeUtilization: ')
    assert f"{field}:" in str(caught.value)
