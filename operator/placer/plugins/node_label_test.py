"""NodeLabel: required / forbidden labels (value "" = the key alone), and the preferred / avoided
score mapped onto 0..100 across the scored nodes."""

from __future__ import annotations

import pytest

from placer.engine.parsing import parse_node
from placer.engine.profile import ProfileError
from placer.testing import cluster_of, decide, filter_result, make_plugin, make_profile, node, pod, raw_scores, scores

REASON = "node(s) didn't have the requested labels"


def labelled() -> object:
    return cluster_of(
        [
            node("cpu-true", labels={"cpu": "true", "gpu": "a100"}),
            node("cpu-false", labels={"cpu": "false", "node": "hello"}),
            node("hello", labels={"node": "hello", "spot": ""}),
            node("bare"),
        ]
    )


def passing(args: dict) -> set[str]:
    result = filter_result(make_plugin("NodeLabel", args), pod("p"), labelled())
    return {name for name, ok in result.items() if ok}


def test_required_value() -> None:
    assert passing({"required": {"cpu": "true"}}) == {"cpu-true"}


def test_required_empty_value_means_the_key_exists() -> None:
    assert passing({"required": {"cpu": ""}}) == {"cpu-true", "cpu-false"}
    assert passing({"required": {"spot": ""}}) == {"hello"}  # an empty label value still exists


def test_required_labels_all_apply() -> None:
    assert passing({"required": {"cpu": "", "gpu": "a100"}}) == {"cpu-true"}
    assert passing({"required": {"cpu": "false", "gpu": ""}}) == set()


def test_forbidden() -> None:
    assert passing({"forbidden": {"node": "hello"}}) == {"cpu-true", "bare"}
    assert passing({"forbidden": {"node": "world"}}) == {"cpu-true", "cpu-false", "hello", "bare"}
    # "" forbids the key whatever its value
    assert passing({"forbidden": {"cpu": ""}}) == {"hello", "bare"}


def test_required_and_forbidden_together() -> None:
    assert passing({"required": {"cpu": ""}, "forbidden": {"node": "hello"}}) == {"cpu-true"}


def test_without_required_or_forbidden_nothing_is_filtered() -> None:
    from placer.testing import pod_info

    assert make_plugin("NodeLabel", {"preferred": {"a": "b"}}).filter(pod_info(pod("p")), labelled()) is None


def test_reason_and_message() -> None:
    profile = make_profile(filters=[{"name": "NodeLabel", "args": {"required": {"cpu": "true"}}}], scores=[],
                           name="require-label")
    decision = decide(profile, pod("p"), labelled())
    assert decision.node == "cpu-true"
    cluster = labelled()
    cluster.remove_node("cpu-true")
    decision = decide(profile, pod("p"), cluster)
    assert decision.message == f"0/3 nodes are available: 3 {REASON}."


def test_relabel_is_seen() -> None:
    plugin = make_plugin("NodeLabel", {"required": {"cpu": "true"}})
    cluster = labelled()
    assert filter_result(plugin, pod("p"), cluster)["bare"] is False
    cluster.upsert_node(parse_node(node("bare", labels={"cpu": "true"})))
    assert filter_result(plugin, pod("p"), cluster)["bare"] is True


def test_score_preferred_and_avoided() -> None:
    plugin = make_plugin("NodeLabel", {"preferred": {"gpu": "", "cpu": "true"}, "avoided": {"node": "hello"}})
    cluster = labelled()
    assert raw_scores(plugin, pod("p"), cluster) == {"bare": 0, "cpu-false": -1, "cpu-true": 2, "hello": -1}
    # (raw - min) * 100 / (max - min): 0 -> 100/3 = 33
    assert scores(plugin, pod("p"), cluster) == {"bare": 33, "cpu-false": 0, "cpu-true": 100, "hello": 0}


def test_score_avoided_only() -> None:
    plugin = make_plugin("NodeLabel", {"avoided": {"spot": ""}})
    assert scores(plugin, pod("p"), labelled()) == {"bare": 100, "cpu-false": 100, "cpu-true": 100, "hello": 0}


def test_score_all_alike_is_zero() -> None:
    plugin = make_plugin("NodeLabel", {"preferred": {"zone": "x"}})
    assert scores(plugin, pod("p"), labelled()) == {"bare": 0, "cpu-false": 0, "cpu-true": 0, "hello": 0}


def test_score_is_mapped_across_the_scored_nodes_only() -> None:
    plugin = make_plugin("NodeLabel", {"preferred": {"gpu": "", "cpu": "true"}, "avoided": {"node": "hello"}})
    assert scores(plugin, pod("p"), labelled(), names=["bare", "cpu-true"]) == {"bare": 0, "cpu-true": 100}


def test_filter_and_score_in_one_profile_with_their_own_args() -> None:
    profile = make_profile(
        filters=[{"name": "NodeLabel", "args": {"forbidden": {"cpu": "false"}}}],
        scores=[{"name": "NodeLabel", "weight": 10, "args": {"avoided": {"node": "hello"}}}],
    )
    decision = decide(profile, pod("p"), labelled(), top=5)
    assert [(s.node, s.total) for s in decision.top] == [("bare", 1000), ("cpu-true", 1000), ("hello", 0)]
    assert decision.node == "bare"  # tie: the smaller name


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"required": {"cpu": True}}, "args.required.cpu"),
        ({"required": ["cpu"]}, "args.required"),
        ({"forbidden": {"a": 1}}, "args.forbidden.a"),
        ({"preferred": "disk=ssd"}, "args.preferred"),
        ({"avoid": {"a": "b"}}, "args.avoid"),
    ],
)
def test_bad_args(args: dict, field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(filters=[{"name": "NodeLabel", "args": args}], name="labels")
    assert str(caught.value).startswith('profile "labels": filters[0] NodeLabel: ')
    assert f"{field}:" in str(caught.value)
