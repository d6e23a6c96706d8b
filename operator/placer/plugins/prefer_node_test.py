"""PreferNode: the named nodes score 100, every other node 0."""

from __future__ import annotations

import pytest

from placer.engine.profile import ProfileError
from placer.testing import cluster_of, decide, make_plugin, make_profile, node, pod, scores


def test_named_nodes_score_100_others_0() -> None:
    cluster = cluster_of([node("a"), node("b"), node("c")])
    plugin = make_plugin("PreferNode", {"nodes": ["b", "c", "not-there"]})
    assert scores(plugin, pod("p"), cluster) == {"a": 0, "b": 100, "c": 100}
    assert scores(make_plugin("PreferNode", {"nodes": ["gone"]}), pod("p"), cluster) == {"a": 0, "b": 0, "c": 0}


def test_steers_pods_while_they_fit_then_lets_them_go() -> None:
    cluster = cluster_of([node("a", cpu="1"), node("b", cpu="1")])
    profile = make_profile(scores=[{"name": "PreferNode", "weight": 10, "args": {"nodes": ["b"]}}])
    decision = decide(profile, pod("p", cpu="600m"), cluster)
    assert decision.node == "b"
    assert decision.top[0].plugins["PreferNode"] == 100
    assert decision.top[0].total == 1000  # weight 10 x 100
    from placer.engine.parsing import parse_pod

    cluster.assume(parse_pod(pod("p", cpu="600m")), "b")
    decision = decide(profile, pod("q", cpu="600m"), cluster)
    assert decision.node == "a"
    assert [s.node for s in decision.top] == ["a"]
    assert decision.top[0].plugins["PreferNode"] == 0


def test_node_added_later_is_preferred() -> None:
    from placer.engine.parsing import parse_node

    cluster = cluster_of([node("a")])
    plugin = make_plugin("PreferNode", {"nodes": ["z"]})
    assert scores(plugin, pod("p"), cluster) == {"a": 0}
    cluster.upsert_node(parse_node(node("z")))
    assert scores(plugin, pod("p"), cluster) == {"a": 0, "z": 100}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({}, "args.nodes: Field required"),
        ({"nodes": []}, "args.nodes: "),
        ({"nodes": "a"}, "args.nodes: "),
        ({"nodes": ["a"], "weight": 3}, "args.weight: Extra inputs are not permitted"),
    ],
)
def test_bad_args(args: dict, field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(scores=[{"name": "PreferNode", "args": args}], name="pn")
    assert str(caught.value).startswith('profile "pn": scores[0] PreferNode: ')
    assert field in str(caught.value)


def test_not_a_filter() -> None:
    with pytest.raises(ProfileError, match=r"filters\[0\] PreferNode: name: PreferNode is not a filter plugin"):
        make_profile(filters=[{"name": "PreferNode", "args": {"nodes": ["a"]}}])
