"""PodGroupPodsCount: kube v1.36's `TestScorePlacement` and `TestNormalizePlacementScore` rows, and
that it scores no node."""

from __future__ import annotations

import numpy as np
import pytest

from placer.engine.framework import Placement, PlacementAssignment, PlacementError
from placer.engine.profile import compile_profile
from placer.plugins.pod_group_pods_count import NO_PODS_ASSIGNED, PodGroupPodsCount
from placer.testing import cluster_of, node, pod, pod_info

PLUGIN = PodGroupPodsCount(PodGroupPodsCount.Args())
PROPOSED = ((pod_info(pod("proposed-pod-1")), "node1"), (pod_info(pod("proposed-pod-2")), "node2"))


@pytest.mark.parametrize(("scheduled", "expected"), [
    (3, 5),  # 1 assumed + 2 assigned + 2 proposed
    (1, 3),  # 1 assigned + 2 proposed
    (0, 2),  # 2 proposed
])
def test_score_placement_counts_scheduled_and_proposed_pods(scheduled: int, expected: int) -> None:
    cluster = cluster_of([node("node1"), node("node2")])
    assignment = PlacementAssignment(Placement("rack"), PROPOSED, scheduled)
    assert PLUGIN.score_placement(None, cluster, assignment) == expected


@pytest.mark.parametrize(("raw", "normalized"), [
    ([10, 50, 110], [9, 45, 100]),
    ([50, 50], [100, 100]),
    ([50], [100]),
    ([11, 100, 101, 102], [10, 98, 99, 100]),
])
def test_normalize_by_the_highest_count(raw: list[int], normalized: list[int]) -> None:
    assert PLUGIN.normalize_placement_scores(raw) == normalized


def test_normalize_with_no_pod_anywhere_is_kubes_error() -> None:
    with pytest.raises(PlacementError, match=NO_PODS_ASSIGNED):
        PLUGIN.normalize_placement_scores([0, 0])


def test_it_scores_no_node_and_is_listed_among_scores() -> None:
    cluster = cluster_of([node("n1"), node("n2")])
    one = pod_info(pod("p", "1"))
    assert not PLUGIN.pre_score(one, cluster)
    assert PLUGIN.score(one, cluster, np.array([0, 1])).tolist() == [0, 0]
    profile = compile_profile("p", {"schedulerName": "s", "scores": [{"name": "PodGroupPodsCount", "weight": 2}]})
    assert [(p.name, w) for p, w in profile.scores] == [("PodGroupPodsCount", 2)]
