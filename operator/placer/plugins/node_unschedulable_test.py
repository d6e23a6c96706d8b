"""NodeUnschedulable: cordoned nodes are rejected unless the pod tolerates the unschedulable taint."""

from __future__ import annotations

import pytest

from placer.engine.profile import ProfileError
from placer.testing import cluster_of, decide, filter_result, make_plugin, make_profile, node, pod

PLUGIN = make_plugin("NodeUnschedulable")
KEY = "node.kubernetes.io/unschedulable"


def cluster() -> object:
    return cluster_of([node("cordoned", unschedulable=True), node("open")])


def test_cordoned_node_is_rejected_with_kube_reason() -> None:
    assert filter_result(PLUGIN, pod("p"), cluster()) == {"cordoned": False, "open": True}
    decision = decide(make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[]), pod("p"),
                      cluster_of([node("cordoned", unschedulable=True)]))
    assert decision.message == "0/1 nodes are available: 1 node(s) were unschedulable."


@pytest.mark.parametrize(
    ("toleration", "passes"),
    [
        ({"key": KEY, "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": KEY, "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": KEY, "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}, False),  # the taint has no value
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerating_the_unschedulable_taint(toleration: dict, passes: bool) -> None:
    assert filter_result(PLUGIN, pod("p", tolerations=[toleration]), cluster()) == {"cordoned": passes, "open": True}


def test_uncordon_is_seen() -> None:
    from placer.engine.parsing import parse_node

    state = cluster()
    state.upsert_node(parse_node(node("cordoned")))
    assert filter_result(PLUGIN, pod("p"), state) == {"cordoned": True, "open": True}


def test_not_a_score_and_no_args() -> None:
    with pytest.raises(ProfileError, match="NodeUnschedulable is not a score plugin"):
        make_profile(scores=[{"name": "NodeUnschedulable"}])
    with pytest.raises(ProfileError, match=r"filters\[0\] NodeUnschedulable: args.x: Extra inputs"):
        make_profile(filters=[{"name": "NodeUnschedulable", "args": {"x": 1}}])
