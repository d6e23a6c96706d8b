"""`placer.engine.explain`, without a cluster: every filter's reasons per node (not only the first
failing one), pod-level reasons on every node, and a bound pod scored as if it were not placed."""

from __future__ import annotations

import numpy as np
from placer.engine.explain import explain, node_reasons
from placer.engine.parsing import parse_pod
from placer.testing import cluster_of, decide, make_profile, node, pod

TAINT = "dedicated=gpu:NoSchedule"


def test_a_node_refused_by_several_filters_lists_each_reason_in_filter_order() -> None:
    cluster = cluster_of([
        node("both", cpu="1", taints=[TAINT]),
        node("cordoned", cpu="8", unschedulable=True),
        node("free", cpu="8"),
        node("tainted", cpu="8", taints=["other=x:NoExecute"]),
    ])
    reasons = node_reasons(parse_pod(pod("p", cpu="2")), make_profile(), cluster)
    assert reasons == {
        "both": ["node(s) had untolerated taint(s)", "Insufficient cpu"],
        "cordoned": ["node(s) were unschedulable"],
        "tainted": ["node(s) had untolerated taint(s)"],
    }


def test_a_filter_with_several_reasons_gives_each_node_its_own() -> None:
    cluster = cluster_of([
        node("cpu-and-memory", cpu="1", memory="1Gi"),
        node("cpu-only", cpu="1", memory="64Gi"),
        node("full", cpu="8", memory="64Gi", pods="1"),
    ], [pod("sitter", node_name="full")])
    reasons = node_reasons(parse_pod(pod("p", cpu="2", memory="4Gi")), make_profile(), cluster)
    assert reasons == {
        "cpu-and-memory": ["Insufficient cpu", "Insufficient memory"],
        "cpu-only": ["Insufficient cpu"],
        "full": ["Too many pods"],
    }


def test_a_reason_of_the_pod_itself_applies_to_every_node_first() -> None:
    cluster = cluster_of([node("a", cpu="1"), node("b", cpu="8")])
    explanation = explain(parse_pod(pod("p", cpu="2", claims=["data"])), make_profile(), cluster)
    missing = 'persistentvolumeclaim "data" not found'
    # then each filter's own wording of it, where it has one (NodeVolumeLimits, as kube's)
    looking_up = f"looking up PVC default/data: {missing}"
    assert explanation.rejected == {"a": [missing, "Insufficient cpu", looking_up], "b": [missing, looking_up]}
    assert explanation.message == f"0/2 nodes are available: {missing}."
    assert explanation.node is None and explanation.scores == [] and explanation.feasible == 0


def test_a_pending_pod_gets_the_cycles_node_message_and_scores() -> None:
    cluster = cluster_of([node("a", cpu="2"), node("b", cpu="8"), node("c", cpu="4", taints=[TAINT])])
    profile = make_profile()
    placeable = parse_pod(pod("p", cpu="1"))
    explanation = explain(placeable, profile, cluster, top=5)
    decision = decide(profile, placeable, cluster, top=5)
    assert (explanation.node, explanation.message, explanation.scores) == (decision.node, None, decision.top)
    assert explanation.rejected == {"c": ["node(s) had untolerated taint(s)"]}
    assert (explanation.node_rank, explanation.bound, explanation.feasible, explanation.scored) == (1, False, 2, 2)

    stuck = parse_pod(pod("q", cpu="16"))
    explanation = explain(stuck, profile, cluster)
    assert explanation.node is None and explanation.node_rank is None
    assert explanation.message == decide(profile, stuck, cluster).message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
    )
    # the message counts each node once (its first filter); `rejected` has them all
    assert explanation.rejected["c"] == ["node(s) had untolerated taint(s)", "Insufficient cpu"]


def test_a_bound_pod_is_scored_off_its_node_and_its_node_is_always_listed() -> None:
    # `web` fills `small` exactly: counted there, it would not fit its own node
    web = pod("web", cpu="2", memory="4Gi", node_name="small")
    cluster = cluster_of([node("big", cpu="16", memory="64Gi"), node("mid", cpu="8", memory="32Gi"),
                          node("small", cpu="2", memory="4Gi")], [web])
    requested = cluster.requested.copy()
    explanation = explain(parse_pod(web), make_profile(), cluster, top=1)
    assert explanation.bound and explanation.node == "small" and explanation.message is None
    assert explanation.rejected == {}  # its own requests are not held against it
    assert [score.node for score in explanation.scores] == ["big", "small"]  # the top 1, then its node
    assert (explanation.node_rank, explanation.scored) == (3, 3)
    assert np.array_equal(cluster.requested, requested) and "default/web" in cluster.pods  # left as it was


def test_a_bound_pod_whose_node_a_filter_refuses_now_is_scored_and_listed_as_refused() -> None:
    web = pod("web", cpu="1", node_name="tainted")
    cluster = cluster_of([node("ok", cpu="4"), node("tainted", cpu="4", taints=[TAINT])], [web])
    explanation = explain(parse_pod(web), make_profile(), cluster, top=3)
    assert explanation.rejected == {"tainted": ["node(s) had untolerated taint(s)"]}
    assert [score.node for score in explanation.scores] == ["ok", "tainted"]
    assert explanation.node_rank == 2 and explanation.feasible == 1
