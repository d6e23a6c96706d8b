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


def test_tolerations_do_not_matter() -> None:
    cluster = cluster_of([node("false", ready=False)])
    assert filter_result(PLUGIN, pod("p", tolerations=[{"operator": "Exists"}]), cluster) == {"false": False}


def test_becoming_ready_is_seen() -> None:
    cluster = cluster_of([node("n", ready=False)])
    cluster.upsert_node(parse_node(node("n", ready=True)))
    assert filter_result(PLUGIN, pod("p"), cluster) == {"n": True}


def test_not_a_score_and_no_args() -> None:
    with pytest.raises(ProfileError, match="NodeReady is not a score plugin"):
        make_profile(scores=[{"name": "NodeReady"}])
    with pytest.raises(ProfileError, match=r"filters\[0\] NodeReady: args.x: Extra inputs"):
        make_profile(filters=[{"name": "NodeReady", "args": {"x": 1}}])
