"""TopologyPlacementGenerator: kube v1.36's `GeneratePlacements` — one placement per domain of the
group's key (nodes without the label in none), the scheduled pods' domain only once any is
scheduled, kube's errors, and its `placement` argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from placer.engine.cluster import ClusterState
from placer.engine.framework import Placement, PlacementError
from placer.engine.groups import PodGroupInfo
from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError, compile_profile
from placer.plugins.topology_placement import TopologyPlacementGenerator
from placer.testing import cluster_of, node, pod, pod_info

KEY = "example.com/rack"
PLUGIN = TopologyPlacementGenerator(TopologyPlacementGenerator.Args())
GROUP = PodGroupInfo("default", "pg", "scheduling.k8s.io/v1alpha2", min_count=2, topology_key=KEY, constrained=True)


def member(name: str, node_name: str | None = None) -> dict[str, Any]:
    obj = pod(name, "1", node_name=node_name)
    obj["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    return obj


def cluster(bound: list[dict[str, Any]] = ()) -> ClusterState:  # type: ignore[assignment]
    return cluster_of([node("a1", labels={KEY: "a"}), node("b1", labels={KEY: "b"}), node("a2", labels={KEY: "a"}),
                       node("none")], bound)


def named(state: ClusterState, placements: list[Placement]) -> dict[str, list[str]]:
    return {p.name: sorted(state.names[np.flatnonzero(p.nodes)]) for p in placements}


def test_one_placement_per_domain_sorted_nodes_without_the_label_in_none() -> None:
    state = cluster()
    placements = PLUGIN.generate_placements(GROUP, state, Placement(""))
    assert [p.name for p in placements] == ["a", "b"]
    assert named(state, placements) == {"a": ["a1", "a2"], "b": ["b1"]}


def test_no_key_is_the_parent_placement() -> None:
    parent = Placement("")
    plain = PodGroupInfo("default", "pg", "scheduling.k8s.io/v1alpha2", min_count=2)
    assert PLUGIN.generate_placements(plain, cluster(), parent) == [parent]


def test_within_the_parent_placement_only() -> None:
    state = cluster()
    parent = Placement("p", np.array([True, True, False, True]))
    assert named(state, PLUGIN.generate_placements(GROUP, state, parent)) == {"a": ["a1"], "b": ["b1"]}


def test_the_scheduled_pods_pin_the_domain() -> None:
    state = cluster([member("s1", "b1")])
    assert named(state, PLUGIN.generate_placements(GROUP, state, Placement(""))) == {"b": ["b1"]}
    assumed = cluster()
    assumed.assume(parse_pod(member("s2")), "a2")
    assert [p.name for p in PLUGIN.generate_placements(GROUP, assumed, Placement(""))] == ["a"]


@pytest.mark.parametrize(("bound", "message"), [
    ([member("s1", "a1"), member("s2", "b1")],
     "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: a, b"),
    ([member("s1", "none")],
     "cannot determine domain for already scheduled pods: no topology domain found for pod default/s1"),
])
def test_scheduled_pods_kube_cannot_place(bound: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(PlacementError) as raised:
        PLUGIN.generate_placements(GROUP, cluster(bound), Placement(""))
    assert str(raised.value) == message


def test_other_groups_pods_do_not_pin() -> None:
    other = pod("o1", "1", node_name="a1")
    other["spec"]["schedulingGroup"] = {"podGroupName": "other"}
    state = cluster([other])
    assert [p.name for p in PLUGIN.generate_placements(GROUP, state, Placement(""))] == ["a", "b"]


def test_admits_every_node_and_takes_its_argument() -> None:
    assert PLUGIN.filter(pod_info(pod("p")), cluster()) is None
    profile = compile_profile("p", {"schedulerName": "s", "filters": [
        {"name": "TopologyPlacementGenerator", "args": {"placement": "BestFit"}}]})
    assert profile.filters[0].args.placement == "BestFit"  # type: ignore[attr-defined]
    with pytest.raises(ProfileError, match="placement"):
        compile_profile("p", {"schedulerName": "s", "filters": [
            {"name": "TopologyPlacementGenerator", "args": {"placement": "Tightest"}}]})
