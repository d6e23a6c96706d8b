"""The plugin framework's helpers: kube's DefaultNormalizeScore, Placer's min-max mapping, and the
per-cluster StaticCache."""

from __future__ import annotations

import numpy as np
from placer.engine.framework import default_normalize, minmax_normalize
from placer.testing import cluster_of, decide, make_profile, node, pod


def test_default_normalize() -> None:
    assert default_normalize(np.array([0, 2, 5, 7])).tolist() == [0, 28, 71, 100]
    assert default_normalize(np.array([0, 1, 3]), reverse=True).tolist() == [100, 67, 0]
    assert default_normalize(np.array([0, 0])).tolist() == [0, 0]
    assert default_normalize(np.array([0, 0]), reverse=True).tolist() == [100, 100]
    assert default_normalize(np.array([], dtype=np.int64)).tolist() == []


def test_minmax_normalize() -> None:
    assert minmax_normalize(np.array([-1, 0, 2])).tolist() == [0, 33, 100]
    assert minmax_normalize(np.array([5, 5, 5])).tolist() == [0, 0, 0]
    assert minmax_normalize(np.array([0.1, 0.2, 0.4])).tolist() == [0, 33, 100]
    assert minmax_normalize(np.array([], dtype=np.int64)).tolist() == []


def test_a_compiled_profile_serves_a_new_cluster_state() -> None:
    # plugins cache per-node results until the cluster's static_version moves; a second
    # ClusterState at the same version (e.g. rebuilt after a re-list) must not get the first one's
    profile = make_profile(scores=[{"name": "NodeLabel", "args": {"preferred": {"disk": "ssd"}}},
                                   {"name": "PreferNode", "args": {"nodes": ["x"]}}])
    wants_zone = pod("p", node_selector={"zone": "a"})
    first = cluster_of([node("x", labels={"zone": "a"}), node("y", labels={"zone": "b", "disk": "ssd"})])
    second = cluster_of([node("x", labels={"zone": "b"}), node("y", labels={"zone": "a", "disk": "ssd"})])
    assert first.static_version == second.static_version
    assert decide(profile, wants_zone, first).node == "x"
    decision = decide(profile, wants_zone, second)
    assert decision.node == "y"
    assert [s.node for s in decision.top] == ["y"]  # x is in zone b here
    # and back: the first cluster is computed afresh too
    both = decide(profile, pod("q"), first, top=2)
    assert [(s.node, s.plugins["NodeLabel"], s.plugins["PreferNode"]) for s in both.top] == [("x", 0, 100),
                                                                                            ("y", 100, 0)]
