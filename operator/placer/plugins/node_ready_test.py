"""NodeReady: only nodes whose Ready condition is True."""

from __future__ import annotations

import pytest

from placer.engine.parsing import parse_node
from placer.engine.profile import ProfileError
from placer.testing import cluster_of, decide, filter_result, make_plugin, make_profile, node, pod

PLUGIN = make_plugin("NodeReady")


def test_ready_false_unknown_and_missing_are_rejected() -> None:
    cluster = cluster_of([node("ready"), node("false", ready=False), node("unknown", ready="Unknown"),
                          node("missing", ready=None)])
    assert filter_result(PLUGIN, pod("p"), cluster) == {"false": False, "missing": False, "ready": True,
                                                        "unknown": False}
    decision = decide(make_profile(filters=[{"name": "NodeReady"}], scores=[]), pod("p"), cluster)
    assert decision.node == "ready"
    no_ready = cluster_of([node("false", ready=False), node("unknown", ready="Unknown")])
    decision = decide(make_profile(filters=[{"name": "NodeReady"}], scores=[]), pod("p"), no_ready)
    assert decision.message == "0/2 nodes are available: 2 node(s) were not ready."


def test_a_pod_tolerating_the_condition_taint_passes() -> None:
    """As kube-scheduler's TaintToleration with the node lifecycle controller's NoSchedule taints:
    not-ready for Ready False (and a node without the condition), unreachable for Unknown."""
    cluster = cluster_of([node("ready"), node("false", ready=False), node("unknown", ready="Unknown"),
                          node("missing", ready=None)])
    everything = pod("p", tolerations=[{"operator": "Exists"}])
    assert filter_result(PLUGIN, everything, cluster) == {"false": True, "missing": True, "ready": True,
                                                          "unknown": True}
    not_ready = pod("p", tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                       "effect": "NoSchedule"}])
    assert filter_result(PLUGIN, not_ready, cluster) == {"false": True, "missing": True, "ready": True,
                                                         "unknown": False}
    unreachable = pod("p", tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}])
    assert filter_result(PLUGIN, unreachable, cluster) == {"false": False, "missing": False, "ready": True,
                                                           "unknown": True}


def test_no_execute_tolerations_do_not_admit() -> None:
    """What the DaemonSet controller and DefaultTolerationSeconds add (effect NoExecute) tolerates
    the eviction taint, not the NoSchedule one: such pods stay off NotReady nodes, as in kube."""
    cluster = cluster_of([node("false", ready=False), node("unknown", ready="Unknown")])
    daemon = pod("p", tolerations=[
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])
    assert filter_result(PLUGIN, daemon, cluster) == {"false": False, "unknown": False}
    decision = decide(make_profile(filters=[{"name": "NodeReady"}], scores=[]), daemon, cluster)
    assert decision.message == "0/2 nodes are available: 2 node(s) were not ready."


def test_becoming_ready_is_seen() -> None:
    cluster = cluster_of([node("n", ready=False)])
    cluster.upsert_node(parse_node(node("n", ready=True)))
    assert filter_result(PLUGIN, pod("p"), cluster) == {"n": True}


def test_not_a_score_and_no_args() -> None:
    with pytest.raises(ProfileError, match="NodeReady is not a score plugin"):
        make_profile(scores=[{"name": "NodeReady"}])
    with pytest.raises(ProfileError, match=r"filters\[0\] NodeReady: args.x: Extra inputs"):
        make_profile(filters=[{"name": "NodeReady", "args": {"x": 1}}])
