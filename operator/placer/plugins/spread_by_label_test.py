"""SpreadByLabel: fewer pods sharing the pod's labelKey value in the node's topology domain is
better; counts map onto 0..100 across the scored nodes (fewest 100, most 0)."""

from __future__ import annotations

import pytest

from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError
from placer.testing import cluster_of, decide, make_plugin, make_profile, node, pod, raw_scores, scores

ZONE = "topology.kubernetes.io/zone"
BY_ZONE = make_plugin("SpreadByLabel", {"labelKey": "tenant", "topologyKey": ZONE})
BY_HOST = make_plugin("SpreadByLabel", {"labelKey": "tenant"})


def zoned() -> object:
    nodes = [
        node("a1", labels={ZONE: "a"}),
        node("a2", labels={ZONE: "a"}),
        node("b1", labels={ZONE: "b"}),
        node("c1", labels={ZONE: "c"}),
        node("loner"),  # no zone label: a domain of its own
    ]
    pods = [
        pod("blue-1", labels={"tenant": "blue"}, node_name="a1"),
        pod("blue-2", labels={"tenant": "blue"}, node_name="a1"),
        pod("blue-3", labels={"tenant": "blue"}, node_name="b1"),
        pod("red-1", labels={"tenant": "red"}, node_name="c1"),
        pod("red-2", labels={"tenant": "red"}, node_name="c1"),
        pod("red-3", labels={"tenant": "red"}, node_name="loner"),
        pod("nolabel", node_name="loner"),
    ]
    return cluster_of(nodes, pods)


def test_zone_topology_counts_the_whole_zone() -> None:
    cluster = zoned()
    blue = pod("p", labels={"tenant": "blue"})
    # zone a holds 2 blue pods (both on a1), zone b 1, zone c 0, loner 0
    assert raw_scores(BY_ZONE, blue, cluster) == {"a1": -2, "a2": -2, "b1": -1, "c1": 0, "loner": 0}
    assert scores(BY_ZONE, blue, cluster) == {"a1": 0, "a2": 0, "b1": 50, "c1": 100, "loner": 100}


def test_hostname_topology_is_the_default() -> None:
    cluster = zoned()
    blue = pod("p", labels={"tenant": "blue"})
    assert scores(BY_HOST, blue, cluster) == {"a1": 0, "a2": 100, "b1": 50, "c1": 100, "loner": 100}
    red = pod("p", labels={"tenant": "red"})
    # c1 2, loner 1, others 0: (raw + 2) * 100 / 2
    assert scores(BY_HOST, red, cluster) == {"a1": 100, "a2": 100, "b1": 100, "c1": 0, "loner": 50}


def test_nodes_without_the_topology_label_are_separate_domains() -> None:
    cluster = cluster_of(
        [node("x", hostname_label=False), node("y", hostname_label=False)],
        [pod("g", labels={"tenant": "green"}, node_name="x")],
    )
    assert scores(BY_HOST, pod("p", labels={"tenant": "green"}), cluster) == {"x": 0, "y": 100}


def test_value_with_no_pods_anywhere_scores_zero_everywhere() -> None:
    assert set(scores(BY_ZONE, pod("p", labels={"tenant": "purple"}), zoned()).values()) == {0}


def test_pod_without_the_label_is_skipped() -> None:
    cluster = zoned()
    assert BY_ZONE.pre_score(parse_pod(pod("p", labels={"app": "x"})), cluster) is False
    profile = make_profile(filters=[], scores=[{"name": "SpreadByLabel", "weight": 5, "args": {"labelKey": "tenant"}}])
    decision = decide(profile, pod("p"), cluster, top=5)
    assert {s.node: s.plugins["SpreadByLabel"] for s in decision.top} == dict.fromkeys(
        ["a1", "a2", "b1", "c1", "loner"], 0
    )


def test_assumed_and_removed_pods_change_the_counts() -> None:
    cluster = zoned()
    blue = pod("p", labels={"tenant": "blue"})
    cluster.assume(parse_pod(pod("blue-4", labels={"tenant": "blue"})), "c1")
    cluster.assume(parse_pod(pod("blue-5", labels={"tenant": "blue"})), "c1")
    # zone a 2, b 1, c 2, loner 0
    assert scores(BY_ZONE, blue, cluster) == {"a1": 0, "a2": 0, "b1": 50, "c1": 0, "loner": 100}
    cluster.forget("default/blue-5")
    cluster.remove_pod("default/blue-1")
    # zone a 1, b 1, c 1, loner 0
    assert scores(BY_ZONE, blue, cluster) == {"a1": 0, "a2": 0, "b1": 0, "c1": 0, "loner": 100}


def test_spreads_a_sequence_of_pods() -> None:
    cluster = cluster_of([node("n1"), node("n2"), node("n3")])
    profile = make_profile(filters=[], scores=[{"name": "SpreadByLabel", "args": {"labelKey": "tenant"}}])
    placed = []
    for i in range(6):
        obj = pod(f"p{i}", labels={"tenant": "t"})
        decision = decide(profile, obj, cluster)
        placed.append(decision.node)
        cluster.assume(parse_pod(obj), decision.node)
    # ties go to the smaller name, so each round fills n1, n2, n3 in turn
    assert placed == ["n1", "n2", "n3", "n1", "n2", "n3"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({}, "args.labelKey: Field required"),
        ({"labelKey": ""}, "args.labelKey: "),
        ({"labelKey": "tenant", "topologyKey": ""}, "args.topologyKey: "),
        ({"labelKey": "tenant", "maxSkew": 1}, "args.maxSkew: Extra inputs are not permitted"),
    ],
)
def test_bad_args(args: dict, field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(scores=[{"name": "SpreadByLabel", "args": args}], name="spread")
    assert str(caught.value).startswith('profile "spread": scores[0] SpreadByLabel: ')
    assert field in str(caught.value)
