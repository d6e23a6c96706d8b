"""TaintToleration: the filter (NoSchedule/NoExecute, kube v1.36's "node(s) had untolerated taint(s)")
and the score (untolerated PreferNoSchedule taints, reverse-normalised), with kube v1.36's test rows
(taint_toleration_test.go)."""

from __future__ import annotations

import pytest

from placer.engine.parsing import parse_node as pod_info_node
from placer.engine.profile import ProfileError
from placer.testing import (
    cluster_of,
    decide,
    filter_result,
    make_plugin,
    make_profile,
    node,
    pod,
    pod_info,
    raw_scores,
    scores,
)

TAINTS = make_plugin("TaintToleration")
ONLY_TAINTS = make_profile(filters=[{"name": "TaintToleration"}], scores=[])


def gpu_cluster() -> object:
    return cluster_of([node("gpu", taints=["dedicated=gpu:NoSchedule"]), node("plain")])


def test_untolerated_no_schedule_taint_rejects_with_kube_reason() -> None:
    cluster = gpu_cluster()
    assert filter_result(TAINTS, pod("p"), cluster) == {"gpu": False, "plain": True}
    only_gpu = cluster_of([node("gpu", taints=["dedicated=gpu:NoSchedule"])])
    decision = decide(ONLY_TAINTS, pod("p"), only_gpu)
    assert decision.reasons == {"node(s) had untolerated taint(s)": 1}
    assert decision.message == "0/1 nodes are available: 1 node(s) had untolerated taint(s)."


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "gpu"}, True),  # any effect, operator defaults to Equal
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # empty key with Exists tolerates everything
        ({"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerations(toleration: dict, tolerated: bool) -> None:
    assert filter_result(TAINTS, pod("p", tolerations=[toleration]), gpu_cluster()) == {"gpu": tolerated,
                                                                                         "plain": True}


def test_no_execute_rejects_and_prefer_no_schedule_does_not() -> None:
    cluster = cluster_of([node("evict", taints=["x=1:NoExecute"]), node("soft", taints=["spot=true:PreferNoSchedule"])])
    assert filter_result(TAINTS, pod("p"), cluster) == {"evict": False, "soft": True}


def test_one_reason_whatever_the_taints() -> None:
    """v1.36 no longer names the taint: nodes with different untolerated taints count together."""
    cluster = cluster_of(
        [
            node("n1", taints=["a=1:PreferNoSchedule", "b=2:NoSchedule", "c=3:NoExecute"]),
            node("n2", taints=["b=2:NoSchedule", "c=3:NoExecute"]),
            node("n3", taints=["spot:NoSchedule"]),
            node("n4", taints=["a=1:PreferNoSchedule"]),
        ]
    )
    decision = decide(ONLY_TAINTS, pod("p"), cluster)
    assert decision.node == "n4"
    tolerates_b = pod("p", tolerations=[{"key": "b", "operator": "Exists"}])
    assert filter_result(TAINTS, tolerates_b, cluster) == {"n1": False, "n2": False, "n3": False, "n4": True}
    hard = cluster_of([node("n1", taints=["b=2:NoSchedule", "c=3:NoExecute"]), node("n3", taints=["spot:NoSchedule"])])
    assert decide(ONLY_TAINTS, tolerates_b, hard).reasons == {"node(s) had untolerated taint(s)": 2}


def test_unresolvable_for_preemption() -> None:
    """kube's UnschedulableAndUnresolvable: a tainted node full of low-priority pods is no candidate."""
    cluster = cluster_of([node("gpu", cpu="1", taints=["dedicated=gpu:NoSchedule"])],
                         [pod("low", cpu="1", node_name="gpu", priority=0)])
    decision = decide(make_profile(), pod("high", cpu="1", priority=1000), cluster)
    assert decision.node is None and decision.preemption is None
    assert decision.message == "0/1 nodes are available: 1 node(s) had untolerated taint(s)."


# TestTaintTolerationFilter and TestTaintTolerationFilterWithFeatureGate (kube v1.36), the gate
# TaintTolerationComparisonOperators at its default (off): Gt and Lt tolerations tolerate nothing
UNTOLERATED = "node(s) had untolerated taint(s)"


@pytest.mark.parametrize(
    ("tolerations", "taints", "reason"),
    [
        ([], [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], UNTOLERATED),
        ([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
         [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], None),
        ([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
         [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], UNTOLERATED),
        ([{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
         [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], None),
        ([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
          {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
         [{"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
          {"key": "foo", "value": "bar", "effect": "NoSchedule"}], None),
        ([{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
         [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], UNTOLERATED),
        ([{"key": "foo", "operator": "Equal", "value": "bar"}],
         [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], None),
        ([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
         [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}], None),
        ([], [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}], None),
        # feature gate disabled: Gt / Lt tolerations are filtered out
        ([{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
         [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}], UNTOLERATED),
        ([{"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"}],
         [{"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}], UNTOLERATED),
        ([{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"},
          {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
         [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], None),
        ([{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"},
          {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
         [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"},
          {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}], UNTOLERATED),
    ],
)
def test_kube_filter_rows(tolerations: list[dict], taints: list[dict], reason: str | None) -> None:
    cluster = cluster_of([node("nodeA", taints=taints)])
    decision = decide(ONLY_TAINTS, pod("pod1", tolerations=tolerations), cluster)
    if reason is None:
        assert decision.node == "nodeA"
    else:
        assert decision.reasons == {reason: 1}


def test_no_taints_anywhere_filters_nothing() -> None:
    cluster = cluster_of([node("a"), node("b")])
    assert TAINTS.filter(pod_info(pod("p")), cluster) is None


def test_score_counts_untolerated_prefer_no_schedule_taints_reversed() -> None:
    cluster = cluster_of(
        [
            node("clean"),
            node("one", taints=["a=1:PreferNoSchedule", "hard=x:NoSchedule"]),
            node("two", taints=["a=1:PreferNoSchedule", "b=2:PreferNoSchedule"]),
        ]
    )
    assert raw_scores(TAINTS, pod("p"), cluster) == {"clean": 0, "one": 1, "two": 2}
    # 100 - 100 * count / max(count)
    assert scores(TAINTS, pod("p"), cluster) == {"clean": 100, "one": 50, "two": 0}


def test_score_truncates_like_go() -> None:
    cluster = cluster_of(
        [node("n0"), node("n1", taints=["a=1:PreferNoSchedule"]),
         node("n3", taints=["a=1:PreferNoSchedule", "b=1:PreferNoSchedule", "c=1:PreferNoSchedule"])]
    )
    # n1: 100 - 100*1/3 = 100 - 33 = 67
    assert scores(TAINTS, pod("p"), cluster) == {"n0": 100, "n1": 67, "n3": 0}


def test_score_only_prefer_no_schedule_tolerations_count() -> None:
    cluster = cluster_of([node("two", taints=["a=1:PreferNoSchedule", "b=2:PreferNoSchedule"]), node("clean")])
    soft = pod("p", tolerations=[{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}])
    assert raw_scores(TAINTS, soft, cluster) == {"clean": 0, "two": 1}
    any_effect = pod("p", tolerations=[{"key": "b", "operator": "Equal", "value": "2"}])
    assert raw_scores(TAINTS, any_effect, cluster) == {"clean": 0, "two": 1}
    hard_only = pod("p", tolerations=[{"key": "a", "operator": "Exists", "effect": "NoSchedule"}])
    assert raw_scores(TAINTS, hard_only, cluster) == {"clean": 0, "two": 2}


def test_all_nodes_score_100_without_prefer_no_schedule_taints() -> None:
    cluster = cluster_of([node("a"), node("b", taints=["x=1:NoSchedule"])])
    assert scores(TAINTS, pod("p"), cluster) == {"a": 100, "b": 100}
    cluster = cluster_of([node("a", taints=["s=1:PreferNoSchedule"]), node("b", taints=["s=1:PreferNoSchedule"])])
    assert scores(TAINTS, pod("p", tolerations=[{"operator": "Exists"}]), cluster) == {"a": 100, "b": 100}


# TestTaintTolerationScore (kube v1.36), the comparison-operators gate at its default (off)
@pytest.mark.parametrize(
    ("tolerations", "nodes", "expected"),
    [
        ([{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
         {"nodeA": ["foo=bar:PreferNoSchedule"], "nodeB": ["foo=blah:PreferNoSchedule"]},
         {"nodeA": 100, "nodeB": 0}),
        ([{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "PreferNoSchedule"},
          {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "PreferNoSchedule"}],
         {"nodeA": [], "nodeB": ["cpu-type=arm64:PreferNoSchedule"],
          "nodeC": ["cpu-type=arm64:PreferNoSchedule", "disk-type=ssd:PreferNoSchedule"]},
         {"nodeA": 100, "nodeB": 100, "nodeC": 100}),
        ([{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
         {"nodeA": [], "nodeB": ["cpu-type=arm64:PreferNoSchedule"],
          "nodeC": ["cpu-type=arm64:PreferNoSchedule", "disk-type=ssd:PreferNoSchedule"]},
         {"nodeA": 100, "nodeB": 50, "nodeC": 0}),
        ([{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
          {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"}],
         {"nodeA": [], "nodeB": ["cpu-type=arm64:NoSchedule"],
          "nodeC": ["cpu-type=arm64:PreferNoSchedule", "disk-type=ssd:PreferNoSchedule"]},
         {"nodeA": 100, "nodeB": 100, "nodeC": 0}),
        ([], {"nodeA": [], "nodeB": ["cpu-type=arm64:PreferNoSchedule"]}, {"nodeA": 100, "nodeB": 0}),
        # a Gt toleration with the gate off tolerates neither node's taint: both score alike
        ([{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "PreferNoSchedule"}],
         {"nodeA": ["node.kubernetes.io/sla=800:PreferNoSchedule"],
          "nodeB": ["node.kubernetes.io/sla=999:PreferNoSchedule"]},
         {"nodeA": 0, "nodeB": 0}),
    ],
)
def test_kube_score_rows(tolerations: list[dict], nodes: dict[str, list[str]], expected: dict[str, int]) -> None:
    cluster = cluster_of([node(name, taints=taints) for name, taints in nodes.items()])
    assert scores(TAINTS, pod("pod1", tolerations=tolerations), cluster) == expected


def test_numeric_operators_parse_and_tolerate_nothing() -> None:
    """v1.36's API knows Gt and Lt: such a pod is valid (not an error), its numeric tolerations
    match no taint while kube-scheduler's TaintTolerationComparisonOperators gate is off."""
    info = pod_info(pod("p", tolerations=[{"key": "sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"}]))
    assert info.error is None
    cluster = cluster_of([node("a", taints=["sla=800:NoSchedule"]), node("b")])
    assert filter_result(TAINTS, info, cluster) == {"a": False, "b": True}
    unknown = pod_info(pod("p", tolerations=[{"key": "sla", "operator": "Ge", "value": "1"}]))
    assert unknown.error is not None and 'Unsupported value: "Ge"' in unknown.error


def test_takes_no_args() -> None:
    with pytest.raises(ProfileError, match=r'profile "t": filters\[0\] TaintToleration: args.x: Extra inputs'):
        make_profile(filters=[{"name": "TaintToleration", "args": {"x": 1}}], name="t")


def test_pods_with_the_same_tolerations_share_an_answer_until_a_node_changes() -> None:
    plugin = make_plugin("TaintToleration")
    cluster = cluster_of([node("a", taints=["dedicated=gpu:NoSchedule"]), node("b", taints=["spot:PreferNoSchedule"]),
                          node("c")])
    tolerant = [{"key": "dedicated", "operator": "Exists"}]
    assert filter_result(plugin, pod("p1"), cluster) == {"a": False, "b": True, "c": True}
    assert filter_result(plugin, pod("p2", tolerations=tolerant), cluster) == {"a": True, "b": True, "c": True}
    assert raw_scores(plugin, pod("p1"), cluster) == {"a": 0, "b": 1, "c": 0}
    # the nodes' taints change: the next pod of the same shape sees it
    cluster.upsert_node(pod_info_node(node("a")))
    cluster.upsert_node(pod_info_node(node("c", taints=["dedicated=gpu:NoExecute", "spot:PreferNoSchedule"])))
    assert filter_result(plugin, pod("p3"), cluster) == {"a": True, "b": True, "c": False}
    assert raw_scores(plugin, pod("p3"), cluster) == {"a": 0, "b": 1, "c": 1}
    cluster.upsert_node(pod_info_node(node("b")))
    cluster.upsert_node(pod_info_node(node("c")))
    assert raw_scores(plugin, pod("p4"), cluster) == {"a": 0, "b": 0, "c": 0}
    assert scores(plugin, pod("p4"), cluster) == {"a": 100, "b": 100, "c": 100}
