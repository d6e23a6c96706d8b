"""TaintToleration: the filter (NoSchedule/NoExecute, kube's reason for the first untolerated
taint) and the score (untolerated PreferNoSchedule taints, reverse-normalised)."""

from __future__ import annotations

import pytest

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
    assert decision.reasons == {"node(s) had untolerated taint {dedicated: gpu}": 1}
    assert decision.message == "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}."


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


def test_reason_names_the_first_untolerated_hard_taint() -> None:
    cluster = cluster_of(
        [
            node("n1", taints=["a=1:PreferNoSchedule", "b=2:NoSchedule", "c=3:NoExecute"]),
            node("n2", taints=["b=2:NoSchedule", "c=3:NoExecute"]),
            node("n3", taints=["spot:NoSchedule"]),  # no value: "{spot: }"
        ]
    )
    assert decide(ONLY_TAINTS, pod("p"), cluster).reasons == {
        "node(s) had untolerated taint {b: 2}": 2,
        "node(s) had untolerated taint {spot: }": 1,
    }
    tolerates_b = pod("p", tolerations=[{"key": "b", "operator": "Exists"}])
    assert decide(ONLY_TAINTS, tolerates_b, cluster).reasons == {
        "node(s) had untolerated taint {c: 3}": 2,
        "node(s) had untolerated taint {spot: }": 1,
    }


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


def test_takes_no_args() -> None:
    with pytest.raises(ProfileError, match=r'profile "t": filters\[0\] TaintToleration: args.x: Extra inputs'):
        make_profile(filters=[{"name": "TaintToleration", "args": {"x": 1}}], name="t")
