"""AnnotationScore: nodes scored by a numeric annotation, installed as a plugin package."""

from __future__ import annotations

from typing import Any

import pytest
from placer.engine.parsing import parse_node
from placer.engine.profile import ProfileError
from placer.plugins import LOAD_ERRORS, REGISTRY
from placer.testing import cluster_of, decide, make_profile, node, pod, raw_scores, scores
from placer_annotation_score import LIMIT, AnnotationScore, AnnotationScoreArgs, annotation_value

KEY = "placer.dev/score"


def plugin(**args: Any) -> AnnotationScore:
    return AnnotationScore(AnnotationScoreArgs.model_validate(args))


def annotated(name: str, value: str | None = None, key: str = KEY, **kwargs: Any) -> dict[str, Any]:
    return node(name, annotations=None if value is None else {key: value}, **kwargs)


def test_registered_through_its_entry_point() -> None:
    assert REGISTRY["AnnotationScore"] is AnnotationScore
    assert not [str(error) for error in LOAD_ERRORS if "placer-annotation-score" in str(error)]


@pytest.mark.parametrize(
    ("raw", "value"),
    [("7", 7.0), ("2.5", 2.5), ("-1", -1.0), (" 3 ", 3.0), ("1e3", 1000.0), ("", 0.0), ("high", 0.0),
     ("nan", 0.0), ("inf", 0.0), ("-Infinity", 0.0), ("1e300", LIMIT), ("-1e300", -LIMIT), (None, 0.0), (5, 0.0)],
)
def test_annotation_value(raw: object, value: float) -> None:
    assert annotation_value(raw) == value


def test_scores_follow_the_annotation_missing_and_non_numeric_count_0() -> None:
    cluster = cluster_of([annotated("a", "5"), annotated("b", "10"), annotated("c"), annotated("d", "lots"),
                          annotated("e", "7", key="other/score")])
    assert raw_scores(plugin(), pod("p"), cluster) == {"a": 5.0, "b": 10.0, "c": 0.0, "d": 0.0, "e": 0.0}
    assert scores(plugin(), pod("p"), cluster) == {"a": 50, "b": 100, "c": 0, "d": 0, "e": 0}
    assert scores(plugin(annotationKey="other/score"), pod("p"), cluster) == {
        "a": 0, "b": 0, "c": 0, "d": 0, "e": 100}


def test_negative_values_rank_below_missing_ones_and_all_alike_score_0() -> None:
    cluster = cluster_of([annotated("a", "-10"), annotated("b"), annotated("c", "30")])
    assert scores(plugin(), pod("p"), cluster) == {"a": 0, "b": 25, "c": 100}
    alike = cluster_of([annotated("a", "3"), annotated("b", "3.0")])
    assert scores(plugin(), pod("p"), alike) == {"a": 0, "b": 0}
    extremes = cluster_of([annotated("a", "-1e308"), annotated("b", "1e308"), annotated("c")])
    assert scores(plugin(), pod("p"), extremes) == {"a": 0, "b": 100, "c": 50}


def test_an_annotation_change_is_seen_by_the_next_pod() -> None:
    cluster = cluster_of([annotated("a", "1"), annotated("b", "2")])
    scorer = plugin()
    assert scores(scorer, pod("p"), cluster) == {"a": 0, "b": 100}
    assert cluster.upsert_node(parse_node(annotated("a", "9")))
    assert scores(scorer, pod("p"), cluster) == {"a": 100, "b": 0}
    assert not cluster.upsert_node(parse_node(annotated("a", "9")))  # unchanged: no node update


def test_the_highest_annotated_feasible_node_wins() -> None:
    cluster = cluster_of([annotated("a", "1"), annotated("b", "90", cpu="1"), annotated("c", "50")])
    profile = make_profile(scores=[{"name": "AnnotationScore", "weight": 5}])
    decision = decide(profile, pod("small", cpu="500m"), cluster)
    assert decision.node == "b" and decision.top[0].plugins["AnnotationScore"] == 100
    assert decision.top[0].total == 500
    assert decide(profile, pod("big", cpu="2"), cluster).node == "c"  # b cannot hold it


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"annotationKey": ""}, "args.annotationKey: String should match pattern"),
        ({"annotationKey": "Bad Key"}, "args.annotationKey: String should match pattern"),
        ({"annotationKey": 7}, "args.annotationKey: Input should be a valid string"),
        ({"key": KEY}, "args.key: Extra inputs are not permitted"),
    ],
)
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(scores=[{"name": "AnnotationScore", "args": args}], name="an")
    assert str(caught.value).startswith('profile "an": scores[0] AnnotationScore: ')
    assert field in str(caught.value)


def test_not_a_filter() -> None:
    with pytest.raises(ProfileError, match=r"filters\[0\] AnnotationScore: name: AnnotationScore is not a filter"):
        make_profile(filters=[{"name": "AnnotationScore"}])
