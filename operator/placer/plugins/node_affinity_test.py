"""NodeAffinity: nodeSelector and required terms (every operator, matchFields, ORed terms, the
empty-term rule), and the preferred-terms score normalised as kube-scheduler does."""

from __future__ import annotations

from typing import Any

import pytest

from placer.engine.framework import PreFilterResult
from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError
from placer.testing import (
    cluster_of,
    decide,
    filter_result,
    make_plugin,
    make_profile,
    node,
    pod,
    raw_scores,
    scores,
)

AFFINITY = make_plugin("NodeAffinity")
REASON = "node(s) didn't match Pod's node affinity/selector"


def labelled() -> object:
    return cluster_of(
        [
            node("a", labels={"zone": "a", "disk": "ssd", "cores": "8"}),
            node("b", labels={"zone": "b", "disk": "hdd", "cores": "16"}),
            node("c", labels={"zone": "c", "cores": "many"}),
            node("d", labels={}),
        ]
    )


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    item: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


def passing(pod_obj: dict) -> set[str]:
    return {name for name, ok in filter_result(AFFINITY, pod_obj, labelled()).items() if ok}


def test_no_selector_or_affinity_filters_nothing() -> None:
    assert AFFINITY.filter(parse_pod(pod("p")), labelled()) is None
    assert passing(pod("p")) == {"a", "b", "c", "d"}


def test_node_selector_needs_every_label() -> None:
    assert passing(pod("p", node_selector={"zone": "a"})) == {"a"}
    assert passing(pod("p", node_selector={"zone": "a", "disk": "hdd"})) == set()


def test_reason_and_message() -> None:
    profile = make_profile(filters=[{"name": "NodeAffinity"}], scores=[])
    decision = decide(profile, pod("p", node_selector={"zone": "z"}), labelled())
    assert decision.reasons == {REASON: 4}
    assert decision.message == f"0/4 nodes are available: 4 {REASON}."


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (expr("zone", "In", "a", "b"), {"a", "b"}),
        (expr("zone", "NotIn", "a"), {"b", "c", "d"}),  # a node without the label is not in
        (expr("disk", "Exists"), {"a", "b"}),
        (expr("disk", "DoesNotExist"), {"c", "d"}),
        (expr("cores", "Gt", "8"), {"b"}),  # "many" is not an integer, d has no label
        (expr("cores", "Lt", "16"), {"a"}),
        (expr("cores", "Gt", "-1"), {"a", "b"}),
    ],
)
def test_match_expressions(requirement: dict, expected: set[str]) -> None:
    assert passing(pod("p", affinity=required({"matchExpressions": [requirement]}))) == expected


def test_gt_and_lt_read_label_values_as_go_integers() -> None:
    cluster = cluster_of([node("under", labels={"cores": "1_0"}), node("plus", labels={"cores": "+12"}),
                          node("float", labels={"cores": "12.0"})])
    profile = make_profile(filters=[{"name": "NodeAffinity"}], scores=[])
    decision = decide(profile, pod("p", affinity=required({"matchExpressions": [expr("cores", "Gt", "8")]})), cluster)
    assert decision.node == "plus"
    assert decision.feasible == 1


def test_match_fields_on_metadata_name() -> None:
    in_names = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b", "d"]}]}
    assert passing(pod("p", affinity=required(in_names))) == {"b", "d"}
    not_in = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["b"]}]}
    assert passing(pod("p", affinity=required(not_in))) == {"a", "c", "d"}


def test_requirements_in_a_term_are_anded_and_terms_are_ored() -> None:
    anded = {"matchExpressions": [expr("disk", "Exists")],
             "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b", "c"]}]}
    assert passing(pod("p", affinity=required(anded))) == {"b"}
    ored = required({"matchExpressions": [expr("zone", "In", "a")]}, {"matchExpressions": [expr("zone", "In", "c")]})
    assert passing(pod("p", affinity=ored)) == {"a", "c"}


def test_empty_term_matches_no_node() -> None:
    assert passing(pod("p", affinity=required({}))) == set()
    assert passing(pod("p", affinity=required({"matchExpressions": []}))) == set()
    # an empty term ORed with a real one: only the real one can match
    assert passing(pod("p", affinity=required({}, {"matchExpressions": [expr("zone", "In", "b")]}))) == {"b"}
    # no terms at all: nothing matches
    assert passing(pod("p", affinity=required())) == set()


def name_in(*names: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


FOO = {"foo": "bar"}


# TestNodeAffinity rows on matchFields (kube v1.36): PreFilter's result (its node names, or the
# conflict), and Filter on the one node
@pytest.mark.parametrize(
    ("terms", "node_name", "labels", "fits", "pre_filter"),
    [
        # matchFields In matches the existing node
        ([{"matchFields": [name_in("node1")]}], "node1", {}, True, {"node1"}),
        # matchFields In does not match the existing node
        ([{"matchFields": [name_in("node1")]}], "node2", {}, False, {"node1"}),
        # two terms: matchFields does not match, but matchExpressions matches (no node set: a term
        # without names leaves every node possible)
        ([{"matchFields": [name_in("node1"), name_in("node2")]}, {"matchExpressions": [expr("foo", "In", "bar")]}],
         "node2", FOO, True, None),
        # one term: matchFields does not match, but matchExpressions matches (ANDed)
        ([{"matchFields": [name_in("node1")], "matchExpressions": [expr("foo", "In", "bar")]}], "node2", FOO,
         False, {"node1"}),
        # one term: both match
        ([{"matchFields": [name_in("node1")], "matchExpressions": [expr("foo", "In", "bar")]}], "node1", FOO,
         True, {"node1"}),
        # two terms: both matchFields and matchExpressions do not match
        ([{"matchFields": [name_in("node1")]}, {"matchExpressions": [expr("foo", "In", "not-match-to-bar")]}],
         "node2", FOO, False, None),
        # two terms of node.Name affinity: the names are united
        ([{"matchFields": [name_in("node1")]}, {"matchFields": [name_in("node2")]}], "node2", {}, True,
         {"node1", "node2"}),
        # two conflicting match field requirements: PreFilter rejects the pod itself
        ([{"matchFields": [name_in("node1"), name_in("node2")]}], "node2", FOO, False, "pod affinity terms conflict"),
    ],
)
def test_kube_match_fields_rows(
    terms: list[dict], node_name: str, labels: dict[str, str], fits: bool, pre_filter: set[str] | str | None
) -> None:
    cluster = cluster_of([node(node_name, labels=labels)])
    wanted = parse_pod(pod("p", affinity=required(*terms)))
    expected = PreFilterResult(frozenset(pre_filter)) if isinstance(pre_filter, set) else pre_filter
    assert AFFINITY.pre_filter(wanted, cluster) == expected
    assert filter_result(AFFINITY, wanted, cluster) == {node_name: fits}


def test_pre_filter_has_no_node_set_without_required_terms() -> None:
    cluster = cluster_of([node("node1")])
    # kube's Skip (nothing to do) and the rows with a nodeSelector only or no terms: no node set
    assert AFFINITY.pre_filter(parse_pod(pod("p")), cluster) is None
    assert AFFINITY.pre_filter(parse_pod(pod("p", node_selector={"foo": "bar"})), cluster) is None
    assert AFFINITY.pre_filter(parse_pod(pod("p", affinity=required())), cluster) is None


def test_named_nodes_are_the_only_ones_evaluated() -> None:
    cluster = cluster_of([node("node1", cpu="1"), node("node2", cpu="1"), node("node3", cpu="1"),
                          node("node4", unschedulable=True)])
    named = pod("p", cpu="2", affinity=required({"matchFields": [name_in("node1", "node4", "gone")]}))
    decision = decide(make_profile(), named, cluster)
    # node1 is too small, node4 cordoned (their own reasons); node2 and node3 never reach a filter,
    # and the name of no node is skipped
    assert decision.message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    assert decision.reasons == {"Insufficient cpu": 1, "node(s) were unschedulable": 1,
                                "node(s) didn't satisfy plugin(s) [NodeAffinity]": 2}
    assert set(decision.rejected_by) == {"NodeAffinity", "NodeUnschedulable", "NodeResourcesFit"}
    assert decide(make_profile(), pod("p", cpu="500m", affinity=named["spec"]["affinity"]), cluster).node == "node1"
    # every name is of no node: all nodes are left out
    nowhere = pod("p", affinity=required({"matchFields": [name_in("invalid-node")]}))
    assert decide(make_profile(), nowhere, cluster).message == (
        "0/4 nodes are available: 4 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_conflicting_terms_reject_the_pod_itself() -> None:
    cluster = cluster_of([node("node1"), node("node2"), node("node3")])
    conflicting = pod("p", affinity=required({"matchFields": [name_in("node1"), name_in("node2")]}))
    decision = decide(make_profile(), conflicting, cluster)
    assert decision.node is None and decision.preemption is None
    assert decision.message == "0/3 nodes are available: pod affinity terms conflict."
    # every term must name nodes: one that does not leaves any node possible
    open_term = pod("p", affinity=required({"matchFields": [name_in("node1"), name_in("node2")]},
                                           {"matchExpressions": [expr("kubernetes.io/hostname", "In", "node3")]}))
    assert AFFINITY.pre_filter(parse_pod(open_term), cluster) is None
    assert decide(make_profile(), open_term, cluster).node == "node3"
    # NotIn on the name does not narrow anything
    not_in = pod("p", affinity=required({"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                                          "values": ["node1"]}]}))
    assert AFFINITY.pre_filter(parse_pod(not_in), cluster) is None


def test_selector_and_affinity_both_apply() -> None:
    both = pod("p", node_selector={"disk": "ssd"}, affinity=required({"matchExpressions": [expr("zone", "In", "b")]}))
    assert passing(both) == set()
    both = pod("p", node_selector={"disk": "ssd"}, affinity=required({"matchExpressions": [expr("zone", "In", "a")]}))
    assert passing(both) == {"a"}


def test_relabelled_node_is_seen() -> None:
    from placer.engine.parsing import parse_node

    cluster = labelled()
    wants_z = pod("p", node_selector={"zone": "z"})
    assert not any(filter_result(AFFINITY, wants_z, cluster).values())
    cluster.upsert_node(parse_node(node("d", labels={"zone": "z"})))
    assert filter_result(AFFINITY, wants_z, cluster) == {"a": False, "b": False, "c": False, "d": True}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (expr("zone", "Near", "a"), "operator"),
        (expr("zone", "In"), "values"),
        (expr("zone", "Exists", "a"), "values"),
        (expr("cores", "Gt", "1", "2"), "values"),
        (expr("cores", "Lt", "x"), "values[0]"),
    ],
)
def test_invalid_requirement_sets_pod_error(bad: dict, field: str) -> None:
    info = parse_pod(pod("p", affinity=required({"matchExpressions": [bad]})))
    assert info.error is not None
    prefix = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    assert f"{prefix}.matchExpressions[0].{field}" in info.error
    decision = decide(make_profile(), info, labelled())
    assert decision.node is None
    assert decision.message == info.error


def test_match_fields_only_on_metadata_name() -> None:
    bad_field = {"key": "spec.x", "operator": "In", "values": ["a"]}
    info = parse_pod(pod("p", affinity=required({"matchFields": [bad_field]})))
    assert info.error is not None
    assert "matchFields[0].key" in info.error


# ----------------------------------------------------------------------------------- score


def preferred(*pairs: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": p} for w, p in pairs]}


def test_score_sums_matching_weights_and_normalises_by_the_maximum() -> None:
    cluster = cluster_of(
        [
            node("zone-a", labels={"zone": "a"}),
            node("ssd", labels={"disk": "ssd"}),
            node("both", labels={"zone": "a", "disk": "ssd"}),
            node("none"),
        ]
    )
    wants = pod("p", affinity=preferred((2, {"matchExpressions": [expr("zone", "In", "a")]}),
                                        (5, {"matchExpressions": [expr("disk", "In", "ssd")]})))
    assert raw_scores(AFFINITY, wants, cluster) == {"both": 7, "none": 0, "ssd": 5, "zone-a": 2}
    # 100 * raw / 7: 2 -> 28, 5 -> 71
    assert scores(AFFINITY, wants, cluster) == {"both": 100, "none": 0, "ssd": 71, "zone-a": 28}
    # normalised over the scored nodes only
    assert scores(AFFINITY, wants, cluster, names=["zone-a", "ssd"]) == {"zone-a": 40, "ssd": 100}


def test_score_with_match_fields_and_gt() -> None:
    cluster = labelled()
    wants = pod("p", affinity=preferred((10, {"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                "values": ["c"]}]}),
                                        (30, {"matchExpressions": [expr("cores", "Gt", "4")]})))
    assert raw_scores(AFFINITY, wants, cluster) == {"a": 30, "b": 30, "c": 10, "d": 0}
    assert scores(AFFINITY, wants, cluster) == {"a": 100, "b": 100, "c": 33, "d": 0}


def test_no_match_anywhere_scores_zero() -> None:
    cluster = labelled()
    wants = pod("p", affinity=preferred((50, {"matchExpressions": [expr("zone", "In", "z")]})))
    assert scores(AFFINITY, wants, cluster) == {"a": 0, "b": 0, "c": 0, "d": 0}


def test_empty_preference_matches_nothing() -> None:
    cluster = labelled()
    wants = pod("p", affinity=preferred((50, {}), (10, {"matchExpressions": [expr("zone", "In", "a")]})))
    assert raw_scores(AFFINITY, wants, cluster) == {"a": 10, "b": 0, "c": 0, "d": 0}


def test_pod_without_preferred_terms_is_skipped() -> None:
    cluster = labelled()
    assert AFFINITY.pre_score(parse_pod(pod("p", node_selector={"zone": "a"})), cluster) is False
    profile = make_profile(filters=[], scores=[{"name": "NodeAffinity", "weight": 2}])
    decision = decide(profile, pod("p"), cluster, top=4)
    assert {s.node: s.plugins["NodeAffinity"] for s in decision.top} == {"a": 0, "b": 0, "c": 0, "d": 0}


def test_preferred_weight_out_of_range_is_a_pod_error() -> None:
    info = parse_pod(pod("p", affinity=preferred((0, {"matchExpressions": [expr("zone", "In", "a")]}))))
    assert info.error is not None
    assert "preferredDuringSchedulingIgnoredDuringExecution[0].weight" in info.error


def test_takes_no_args() -> None:
    with pytest.raises(ProfileError, match=r'profile "na": scores\[0\] NodeAffinity: args.addedAffinity: Extra'):
        make_profile(scores=[{"name": "NodeAffinity", "args": {"addedAffinity": {}}}], name="na")
