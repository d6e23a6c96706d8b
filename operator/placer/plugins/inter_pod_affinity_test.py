"""InterPodAffinity, against kube-scheduler's own tables (`interpodaffinity/filtering_test.go`,
`scoring_test.go`) re-expressed with the builders:

- filter: required affinity (operators, several terms matched by one pod, missing topology keys,
  the first pod of a group and when it does not apply), required anti-affinity, the symmetry of
  existing pods' anti-affinity, namespaces / namespaceSelector, matchLabelKeys / mismatchLabelKeys,
  pods being deleted, assumed, forgotten, removed; the reasons, their per-node precedence and the
  message;
- score: preferred terms of the incoming pod and of existing pods, existing pods' required affinity
  at `hardPodAffinityWeight`, `ignorePreferredTermsOfExistingPods`, kube's min-max normalisation;
- args and malformed terms;
- a property: random clusters and pods with anti-affinity to their own app, scheduled one by one,
  checked by a brute-force model that knows nothing of the plugin.

Namespaces: kube's tables use the namespace "" for the default one; here it is "default".
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import ProfileError
from placer.engine.runtime import Scheduler
from placer.testing import (
    affinity_term,
    cluster_of,
    decide,
    make_plugin,
    make_profile,
    namespace,
    node,
    pod,
    pod_info,
    raw_scores,
    scores,
)

IPA = make_plugin("InterPodAffinity")
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
OK = None

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

# kube's scoring_test.go namespaces (filtering_test.go uses the same)
KUBE_NAMESPACES = [
    namespace("subteam1.team1", {"team": "team1"}),
    namespace("subteam2.team1", {"team": "team1"}),
    namespace("subteam1.team2", {"team": "team2"}),
    namespace("subteam2.team2", {"team": "team2"}),
]
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}

SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}

_names = itertools.count()


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    item: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


def term(topology_key: str, *expressions: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A PodAffinityTerm selecting by match expressions (none: an empty selector, every pod)."""
    return affinity_term(topology_key, match_expressions=list(expressions), **kwargs)


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {REQUIRED: list(terms)}


def preferred(*terms: dict[str, Any]) -> dict[str, Any]:
    return {PREFERRED: list(terms)}


def on(node_name: str, labels: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """An existing pod bound to `node_name`, with a fresh name."""
    return pod(f"existing-{next(_names)}", labels=labels, node_name=node_name, **kwargs)


def n(name: str, **labels: str) -> dict[str, Any]:
    return node(name, labels=labels)


def statuses(pod_obj: dict[str, Any] | PodInfo, cluster: ClusterState, plugin: Any = IPA) -> dict[str, str | None]:
    """Node -> the plugin's one reason for rejecting the pod there (None: the pod fits)."""
    info = pod_info(pod_obj)
    mask = plugin.filter(info, cluster)
    result: dict[str, str | None] = {}
    for name, slot in sorted(cluster.index.items()):
        if mask is None or mask[slot]:
            result[name] = None
            continue
        counts = plugin.reason_counts(info, cluster, np.asarray([slot]))
        assert sum(counts.values()) == 1, counts
        result[name] = next(iter(counts))
    return result


def passing(pod_obj: dict[str, Any] | PodInfo, cluster: ClusterState) -> set[str]:
    return {name for name, reason in statuses(pod_obj, cluster).items() if reason is None}


# ============================================================================ filter: one node
# kube's TestRequiredAffinitySingleNode: node1 {region: r1, zone: z11}

NODE1 = n("node1", region="r1", zone="z11")

SINGLE_NODE = [
    pytest.param(pod("p"), [], OK, id="no-terms-no-pods"),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(term("region", expr("service", "In", "securityscan", "value2")))),
        [on("node1", SCAN)], OK, id="affinity-In-matches-existing",
    ),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(term("region", expr("service", "NotIn", "securityscan3", "v3")))),
        [on("node1", SCAN)], OK, id="affinity-NotIn-matches-existing",
    ),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(
            term("region", expr("service", "In", "securityscan", "value2"), namespaces=["diff-namespace"]))),
        [on("node1", SCAN, namespace="ns")], AFF, id="affinity-other-namespace",
    ),
    pytest.param(
        pod("p", labels=SCAN, pod_affinity=required(term("region", expr("service", "In", "antivirusscan", "value2")))),
        [on("node1", SCAN)], AFF, id="affinity-selector-does-not-match",
    ),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(
            term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
            term("region", expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue")))),
        [on("node1", SCAN)], OK, id="affinity-Exists-DoesNotExist-In-NotIn-in-two-terms",
    ),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(
            term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
            term("region", expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue")))),
        [on("node1", SCAN)], AFF, id="affinity-expressions-are-ANDed",
    ),
    pytest.param(
        pod("p", labels=S1,
            pod_affinity=required(term("region", expr("service", "In", "securityscan", "value2"))),
            pod_anti_affinity=required(term("node", expr("service", "In", "antivirusscan", "value2")))),
        [on("node1", SCAN)], OK, id="affinity-and-anti-affinity-satisfied",
    ),
    pytest.param(
        pod("p", labels=S1,
            pod_affinity=required(term("region", expr("service", "In", "securityscan", "value2"))),
            pod_anti_affinity=required(term("node", expr("service", "In", "antivirusscan", "value2")))),
        [on("node1", SCAN, pod_anti_affinity=required(term("node", expr("service", "In", "antivirusscan"))))],
        OK, id="affinity-anti-affinity-and-symmetry-satisfied",
    ),
    pytest.param(
        pod("p", labels=S1,
            pod_affinity=required(term("region", expr("service", "In", "securityscan", "value2"))),
            pod_anti_affinity=required(term("zone", expr("service", "In", "securityscan", "value2")))),
        [on("node1", SCAN)], ANTI, id="affinity-satisfied-anti-affinity-not",
    ),
    pytest.param(
        pod("p", labels=SCAN,
            pod_affinity=required(term("region", expr("service", "In", "securityscan", "value2"))),
            pod_anti_affinity=required(term("node", expr("service", "In", "antivirusscan", "value2")))),
        [on("node1", SCAN, pod_anti_affinity=required(term("zone", expr("service", "In", "securityscan"))))],
        EXISTING, id="symmetry-not-satisfied",
    ),
    pytest.param(
        pod("p", labels=SCAN, pod_affinity=required(term("region", expr("service", "NotIn", "securityscan")))),
        [on("node2", SCAN)],  # node2 is not in the cluster: its pod counts nowhere
        AFF, id="pod-does-not-match-its-own-term",
    ),
    pytest.param(
        pod("p", labels=SCAN),
        [on("node1", SCAN, pod_anti_affinity=required(term("zone", expr("service", "In", "securityscan"))))],
        EXISTING, id="symmetry-without-terms-of-its-own",
    ),
    pytest.param(
        pod("p", labels=SCAN),
        [on("node1", SCAN, pod_anti_affinity=required(term("zone", expr("service", "NotIn", "securityscan"))))],
        OK, id="symmetry-NotIn-satisfied",
    ),
    pytest.param(
        pod("p", labels=SCAN, pod_anti_affinity=required(term("region", expr("service", "Exists")),
                                                         term("region", expr("security", "Exists")))),
        [on("node1", S1, pod_anti_affinity=required(term("zone", expr("security", "Exists"))))],
        ANTI, id="anti-affinity-before-symmetry",
    ),
    pytest.param(
        pod("p", labels=SCAN, pod_anti_affinity=required(term("zone", expr("service", "Exists")),
                                                         term("zone", expr("security", "Exists")))),
        [on("node1", S1, pod_anti_affinity=required(term("zone", expr("security", "Exists"))))],
        ANTI, id="symmetry-a1",
    ),
    pytest.param(
        pod("p", labels=S1, pod_anti_affinity=required(term("zone", expr("security", "Exists")))),
        [on("node1", SCAN, pod_anti_affinity=required(term("zone", expr("service", "Exists")),
                                                      term("zone", expr("security", "Exists"))))],
        EXISTING, id="symmetry-a2",
    ),
    pytest.param(
        pod("p", labels={"abc": "", "xyz": ""}, pod_anti_affinity=required(term("zone", expr("abc", "Exists")),
                                                                           term("zone", expr("def", "Exists")))),
        [on("node1", {"def": "", "xyz": ""}, pod_anti_affinity=required(term("zone", expr("abc", "Exists")),
                                                                        term("zone", expr("def", "Exists"))))],
        ANTI, id="symmetry-b1",
    ),
    pytest.param(
        pod("p", labels={"def": "", "xyz": ""}, pod_anti_affinity=required(term("zone", expr("abc", "Exists")),
                                                                           term("zone", expr("def", "Exists")))),
        [on("node1", {"abc": "", "xyz": ""}, pod_anti_affinity=required(term("zone", expr("abc", "Exists")),
                                                                        term("zone", expr("def", "Exists"))))],
        ANTI, id="symmetry-b2",
    ),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(
            term("region", expr("service", "In", "securityscan", "value2"), namespace_selector=TEAM1))),
        [on("node1", SCAN, namespace="subteam1.team1")], OK, id="affinity-namespaceSelector",
    ),
    pytest.param(
        pod("p", labels=S1, pod_affinity=required(
            term("region", expr("service", "In", "securityscan", "value2"), namespace_selector=TEAM1))),
        [on("node1", SCAN, namespace="subteam1.team2")], AFF, id="affinity-namespaceSelector-not-matching",
    ),
    pytest.param(
        pod("p", namespace="subteam1.team1", labels=S1, pod_anti_affinity=required(
            term("zone", expr("service", "In", "securityscan", "value2"), namespace_selector=TEAM1))),
        [on("node1", SCAN, namespace="subteam2.team1")], ANTI, id="anti-affinity-namespaceSelector",
    ),
    pytest.param(
        pod("p", namespace="subteam1.team1", labels=S1, pod_anti_affinity=required(
            term("zone", expr("service", "In", "securityscan", "value2"), namespace_selector={}))),
        [on("node1", SCAN, namespace="subteam2.team1")], ANTI, id="anti-affinity-empty-namespaceSelector-is-all",
    ),
    pytest.param(
        pod("p", namespace="subteam1.team1", labels=S1, pod_anti_affinity=required(
            term("zone", expr("service", "In", "securityscan", "value2"), namespace_selector=TEAM1))),
        [on("node1", SCAN, namespace="subteam1.team2")], OK, id="anti-affinity-namespaceSelector-not-matching",
    ),
]


@pytest.mark.parametrize(("pod_obj", "existing", "expected"), SINGLE_NODE)
def test_kube_required_affinity_single_node(pod_obj: dict, existing: list[dict], expected: str | None) -> None:
    cluster = cluster_of([NODE1], existing, objects=KUBE_NAMESPACES)
    assert statuses(pod_obj, cluster) == {"node1": expected}


def test_nothing_to_check_filters_nothing() -> None:
    """kube's PreFilter Skip: no required terms and no existing pod with required anti-affinity."""
    cluster = cluster_of([NODE1], [on("node1", SCAN, pod_affinity=required(term("zone", expr("a", "Exists"))))])
    assert IPA.filter(parse_pod(pod("p", labels=SCAN)), cluster) is None
    with_anti = cluster_of([NODE1], [on("node1", pod_anti_affinity=required(term("zone", expr("x", "Exists"))))])
    assert IPA.filter(parse_pod(pod("p", labels=SCAN)), with_anti) is None  # its term does not select p
    assert statuses(pod("p", labels={"x": "1"}), with_anti) == {"node1": EXISTING}


# ============================================================================ filter: several nodes
# kube's TestRequiredAffinityMultipleNodes

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def rzh(name: str, region: str, zone: str) -> dict[str, Any]:
    return n(name, region=region, zone=zone, hostname=name)


AB_SAME_ZONE = [rzh("nodeA", "r1", "z1"), rzh("nodeB", "r1", "z1")]
AB_TWO_ZONES = [rzh("nodeA", "r1", "z1"), rzh("nodeB", "r1", "z2")]

MULTIPLE_NODES = [
    pytest.param(
        pod("p", pod_affinity=required(term("region", expr("foo", "In", "bar")))),
        [on("node1", {"foo": "bar"})],
        [n("node1", **CHINA), n("node2", **CHINA_AZ1), n("node3", **INDIA)],
        {"node1": OK, "node2": OK, "node3": AFF}, id="affinity-whole-domain",
    ),
    pytest.param(
        pod("p", labels={"foo": "bar", "service": "securityscan"}, pod_affinity=required(
            term("zone", expr("foo", "In", "bar")), term("zone", expr("service", "In", "securityscan")))),
        [on("nodeA", {"foo": "bar"})],
        [n("nodeA", zone="az1", hostname="h1"), n("nodeB", zone="az2", hostname="h2")],
        {"nodeA": OK, "nodeB": OK}, id="first-pod-of-group-goes-anywhere",
    ),
    pytest.param(
        pod("p", labels={"foo": "bar", "service": "securityscan"}, pod_affinity=required(
            term("zone", expr("foo", "In", "bar")), term("zone", expr("service", "In", "securityscan")))),
        [on("nodeA", {"foo": "bar"})],
        [n("nodeA", zoneLabel="az1", hostname="h1"), n("nodeB", zoneLabel="az2", hostname="h2")],
        {"nodeA": AFF, "nodeB": AFF}, id="first-pod-of-group-needs-the-topology-key",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("region", expr("foo", "In", "abc")))),
        [on("nodeA", {"foo": "abc"})],
        [n("nodeA", region="r1", hostname="nodeA"), n("nodeB", region="r1", hostname="nodeB")],
        {"nodeA": ANTI, "nodeB": ANTI}, id="anti-affinity-whole-domain",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("region", expr("foo", "In", "abc")),
                                            term("zone", expr("service", "In", "securityscan")))),
        [on("nodeA", {"foo": "abc", "service": "securityscan"})],
        [rzh("nodeA", "r1", "z1"), rzh("nodeB", "r1", "z2")],
        {"nodeA": ANTI, "nodeB": ANTI}, id="anti-affinity-any-term",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("region", expr("foo", "In", "abc")))),
        [on("nodeA", {"foo": "abc"})],
        [n("nodeA", **CHINA), n("nodeB", **CHINA_AZ1), n("nodeC", **INDIA)],
        {"nodeA": ANTI, "nodeB": ANTI, "nodeC": OK}, id="anti-affinity-other-region-free",
    ),
    pytest.param(
        pod("p", namespace="ns1", labels={"foo": "123"},
            pod_anti_affinity=required(term("region", expr("foo", "In", "bar")))),
        [on("nodeA", {"foo": "bar"}, namespace="ns1"),
         on("nodeC", namespace="ns2", pod_anti_affinity=required(term("region", expr("foo", "In", "123"))))],
        [n("nodeA", **CHINA), n("nodeB", **CHINA_AZ1), n("nodeC", **INDIA)],
        {"nodeA": ANTI, "nodeB": ANTI, "nodeC": OK}, id="existing-anti-affinity-in-its-own-namespace-only",
    ),
    pytest.param(
        pod("p", labels={"foo": ""}),
        [on("nodeA", pod_anti_affinity=required(term("invalid-node-label", expr("foo", "Exists"))))],
        AB_SAME_ZONE, {"nodeA": OK, "nodeB": OK}, id="existing-anti-affinity-key-on-no-node",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("invalid-node-label", expr("foo", "Exists")))),
        [on("nodeA", {"foo": ""})],
        AB_SAME_ZONE, {"nodeA": OK, "nodeB": OK}, id="anti-affinity-key-on-no-node",
    ),
    pytest.param(
        pod("p", labels={"foo": "", "bar": ""}),
        [on("nodeA", pod_anti_affinity=required(term("zone", expr("foo", "Exists")))),
         on("nodeA", pod_anti_affinity=required(term("region", expr("bar", "Exists"))))],
        AB_TWO_ZONES, {"nodeA": EXISTING, "nodeB": EXISTING}, id="existing-anti-affinity-of-each-pod",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("zone", expr("foo", "Exists")),
                                            term("region", expr("bar", "Exists")))),
        [on("nodeA", {"foo": ""}), on("nodeB", {"bar": ""})],
        AB_TWO_ZONES, {"nodeA": ANTI, "nodeB": ANTI}, id="anti-affinity-one-term-suffices",
    ),
    pytest.param(
        pod("p", labels={"foo": "", "bar": ""}),
        [on("nodeA", pod_anti_affinity=required(term("invalid-node-label", expr("foo", "Exists")),
                                                term("zone", expr("bar", "Exists"))))],
        AB_TWO_ZONES, {"nodeA": EXISTING, "nodeB": OK}, id="existing-anti-affinity-selector-and-key",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("invalid-node-label", expr("foo", "Exists")),
                                            term("zone", expr("bar", "Exists")))),
        [on("nodeA", {"foo": "", "bar": ""})],
        AB_TWO_ZONES, {"nodeA": ANTI, "nodeB": OK}, id="anti-affinity-selector-and-key",
    ),
    pytest.param(
        pod("p", labels={"foo": "", "bar": ""}),
        [on("nodeA", pod_anti_affinity=required(term("region", expr("foo", "Exists")),
                                                term("zone", expr("bar", "Exists"))))],
        AB_TWO_ZONES, {"nodeA": EXISTING, "nodeB": EXISTING}, id="existing-anti-affinity-all-keys-valid",
    ),
    pytest.param(
        pod("p", pod_anti_affinity=required(term("region", expr("foo", "Exists")),
                                            term("zone", expr("bar", "Exists")))),
        [on("nodeA", {"foo": "", "bar": ""})],
        AB_TWO_ZONES, {"nodeA": ANTI, "nodeB": ANTI}, id="anti-affinity-all-keys-valid",
    ),
    pytest.param(
        pod("p", labels={"foo": "", "bar": ""}),
        [on("nodeA", pod_anti_affinity=required(term("zone", expr("foo", "Exists")),
                                                term("zone", expr("labelA", "Exists")))),
         on("nodeB", pod_anti_affinity=required(term("zone", expr("bar", "Exists")),
                                                term("zone", expr("labelB", "Exists"))))],
        [*AB_TWO_ZONES, rzh("nodeC", "r1", "z3")],
        {"nodeA": EXISTING, "nodeB": EXISTING, "nodeC": OK}, id="existing-anti-affinity-leaves-nodeC",
    ),
    pytest.param(
        pod("p", pod_affinity=required(term("region", expr("foo", "Exists")), term("zone", expr("bar", "Exists")))),
        [on("nodeA", {"foo": "", "bar": ""})],
        AB_SAME_ZONE, {"nodeA": OK, "nodeB": OK}, id="affinity-all-terms-one-pod",
    ),
    pytest.param(
        pod("p", pod_affinity=required(term("region", expr("foo", "Exists")), term("zone", expr("bar", "Exists")))),
        [on("nodeA", {"foo": ""}), on("nodeB", {"bar": ""})],
        AB_TWO_ZONES, {"nodeA": AFF, "nodeB": AFF}, id="affinity-terms-must-match-the-same-pod",
    ),
]


@pytest.mark.parametrize(("pod_obj", "existing", "nodes", "expected"), MULTIPLE_NODES)
def test_kube_required_affinity_multiple_nodes(
    pod_obj: dict, existing: list[dict], nodes: list[dict], expected: dict[str, str | None]
) -> None:
    cluster = cluster_of(nodes, existing, objects=[namespace("ns1")])
    assert statuses(pod_obj, cluster) == expected


# ============================================================================ first pod of a group

ZONES = [n("a1", zone="z1"), n("a2", zone="z1"), n("b1", zone="z2"), n("nozone")]
WEB = {"app": "web"}
WANTS_WEB = {"pod_affinity": required(term("zone", expr("app", "In", "web")))}


def test_first_of_group_goes_to_any_node_with_the_key() -> None:
    cluster = cluster_of(ZONES, [on("a1", {"app": "db"})])
    assert statuses(pod("p", labels=WEB, **WANTS_WEB), cluster) == {"a1": OK, "a2": OK, "b1": OK, "nozone": AFF}


def test_once_one_exists_the_group_follows_it() -> None:
    cluster = cluster_of(ZONES, [on("b1", WEB)])
    assert passing(pod("p", labels=WEB, **WANTS_WEB), cluster) == {"b1"}


def test_not_first_of_group_when_the_pod_does_not_match_its_terms() -> None:
    cluster = cluster_of(ZONES)
    assert passing(pod("p", labels={"app": "api"}, **WANTS_WEB), cluster) == set()
    # nor when it matches only one of several terms
    two = required(term("zone", expr("app", "In", "web")), term("zone", expr("tier", "In", "front")))
    assert passing(pod("p", labels=WEB, pod_affinity=two), cluster) == set()
    assert passing(pod("p", labels={**WEB, "tier": "front"}, pod_affinity=two), cluster) == {"a1", "a2", "b1"}


def test_not_first_of_group_when_the_term_names_other_namespaces() -> None:
    cluster = cluster_of(ZONES)
    elsewhere = required(term("zone", expr("app", "In", "web"), namespaces=["other"]))
    assert passing(pod("p", labels=WEB, pod_affinity=elsewhere), cluster) == set()
    listed = required(term("zone", expr("app", "In", "web"), namespaces=["other", "default"]))
    assert passing(pod("p", labels=WEB, pod_affinity=listed), cluster) == {"a1", "a2", "b1"}
    every = required(term("zone", expr("app", "In", "web"), namespace_selector={}))
    assert passing(pod("p", labels=WEB, pod_affinity=every), cluster) == {"a1", "a2", "b1"}


def test_a_match_in_another_namespace_of_the_term_is_a_group_already() -> None:
    all_namespaces = required(term("zone", expr("app", "In", "web"), namespace_selector={}))
    cluster = cluster_of(ZONES, [on("b1", WEB, namespace="other")])
    assert passing(pod("p", labels=WEB, pod_affinity=all_namespaces), cluster) == {"b1"}
    # the default scope is the pod's namespace: that pod does not count, the pod is first
    assert passing(pod("p", labels=WEB, **WANTS_WEB), cluster) == {"a1", "a2", "b1"}


def test_a_match_on_a_node_without_the_key_does_not_count() -> None:
    """kube counts topology pairs only: a matching pod on a node without the key makes none."""
    cluster = cluster_of(ZONES, [on("nozone", WEB)])
    assert passing(pod("p", labels=WEB, **WANTS_WEB), cluster) == {"a1", "a2", "b1"}
    assert passing(pod("p", labels={"app": "api"}, **WANTS_WEB), cluster) == set()


def test_a_pod_being_deleted_still_makes_a_group() -> None:
    cluster = cluster_of(ZONES, [on("b1", WEB, deleting=True)])
    assert passing(pod("p", labels=WEB, **WANTS_WEB), cluster) == {"b1"}
    assert passing(pod("p", labels={"app": "api"}, **WANTS_WEB), cluster) == {"b1"}


def test_every_term_key_must_be_on_the_node() -> None:
    cluster = cluster_of([n("both", zone="z1", rack="r1"), n("zone-only", zone="z1")], [on("both", WEB)])
    two_keys = required(term("zone", expr("app", "In", "web")), term("rack", expr("app", "In", "web")))
    assert statuses(pod("p", pod_affinity=two_keys), cluster) == {"both": OK, "zone-only": AFF}


def test_one_pod_must_be_in_the_namespaces_of_every_term() -> None:
    cluster = cluster_of(ZONES, [on("a1", WEB, namespace="ns1"), on("b1", WEB, namespace="ns2")])
    web = expr("app", "In", "web")
    disjoint = required(term("zone", web, namespaces=["ns1"]), term("zone", web, namespaces=["ns2"]))
    assert passing(pod("p", pod_affinity=disjoint), cluster) == set()
    overlapping = required(term("zone", web, namespaces=["ns1", "ns2"]), term("zone", web, namespaces=["ns2"]))
    assert passing(pod("p", pod_affinity=overlapping), cluster) == {"b1"}
    everywhere = required(term("zone", web, namespace_selector={}), term("zone", web, namespaces=["ns1"]))
    assert passing(pod("p", pod_affinity=everywhere), cluster) == {"a1", "a2"}


def test_required_affinity_of_existing_pods_does_not_filter() -> None:
    cluster = cluster_of(ZONES, [on("a1", pod_affinity=required(term("zone", expr("app", "In", "db"))))])
    assert IPA.filter(parse_pod(pod("p", labels=WEB)), cluster) is None


# ============================================================================ namespaces and label keys

TEAM_NAMESPACES = [namespace("team1-a", {"team": "team1"}), namespace("team1-b", {"team": "team1"}),
                   namespace("team2-a", {"team": "team2"})]


def spread_over(nodes: list[str], ns: list[str], labels: dict[str, str]) -> list[dict[str, Any]]:
    return [on(node_name, labels, namespace=name) for node_name, name in zip(nodes, ns, strict=True)]


def test_anti_affinity_namespaces_and_namespace_selector_add_up() -> None:
    cluster = cluster_of([n("h1"), n("h2"), n("h3"), n("h4")],
                         spread_over(["h1", "h2", "h3", "h4"], ["team1-a", "team1-b", "team2-a", "default"], WEB),
                         objects=TEAM_NAMESPACES)
    web = expr("app", "In", "web")

    def blocked(**kwargs: Any) -> set[str]:
        anti = required(term(HOST, web, **kwargs))
        return {name for name, ok in statuses(pod("p", pod_anti_affinity=anti), cluster).items() if ok}

    assert blocked() == {"h4"}  # the pod's own namespace
    assert blocked(namespaces=["team2-a"]) == {"h3"}  # listed: not the pod's own any more
    assert blocked(namespace_selector=TEAM1) == {"h1", "h2"}
    assert blocked(namespaces=["team2-a"], namespace_selector=TEAM1) == {"h1", "h2", "h3"}
    assert blocked(namespace_selector={}) == {"h1", "h2", "h3", "h4"}
    nobody = {"matchLabels": {"team": "team9"}}
    assert blocked(namespace_selector=nobody) == set()


def test_namespace_selector_needs_namespace_objects() -> None:
    """Namespaces are selected by the labels of Namespace objects: without them, none is."""
    pods = spread_over(["h1", "h2"], ["team1-a", "team1-b"], WEB)
    anti = required(term(HOST, expr("app", "In", "web"), namespace_selector=TEAM1))
    without = cluster_of([n("h1"), n("h2")], pods)
    assert passing(pod("p", pod_anti_affinity=anti), without) == {"h1", "h2"}
    cluster = cluster_of([n("h1"), n("h2")], pods, objects=TEAM_NAMESPACES)
    assert passing(pod("p", pod_anti_affinity=anti), cluster) == set()


def test_relabelled_namespace_is_seen() -> None:
    cluster = cluster_of([n("h1"), n("h2")], spread_over(["h1", "h2"], ["team1-a", "team2-a"], WEB),
                         objects=TEAM_NAMESPACES)
    incoming = parse_pod(pod("p", pod_anti_affinity=required(term(HOST, expr("app", "In", "web"),
                                                                   namespace_selector=TEAM1))))
    assert passing(incoming, cluster) == {"h2"}
    upsert_object(cluster.catalog, KINDS_BY_NAME["Namespace"], namespace("team2-a", {"team": "team1"}))
    assert passing(incoming, cluster) == set()  # the same PodInfo: nothing stale is reused


GUARD_TEAM1 = {"pod_anti_affinity": required(term("zone", expr("app", "In", "web"), namespace_selector=TEAM1))}


@pytest.mark.parametrize(
    ("incoming_namespace", "expected"),
    [("team1-a", EXISTING), ("team1-b", EXISTING), ("team2-a", OK), ("unknown", OK), ("default", OK)],
)
def test_symmetry_selects_the_incoming_pods_namespace_by_its_labels(incoming_namespace: str, expected: str) -> None:
    cluster = cluster_of([n("a", zone="z1"), n("b", zone="z1"), n("c", zone="z2")],
                         [on("a", **GUARD_TEAM1)], objects=TEAM_NAMESPACES)
    assert statuses(pod("p", labels=WEB, namespace=incoming_namespace), cluster) == {
        "a": expected, "b": expected, "c": OK}


def test_symmetry_with_empty_namespace_selector_or_listed_namespaces() -> None:
    everyone = {"pod_anti_affinity": required(term("zone", expr("app", "In", "web"), namespace_selector={}))}
    listed = {"pod_anti_affinity": required(term("zone", expr("app", "In", "web"), namespaces=["team2-a"]))}
    cluster = cluster_of([n("a", zone="z1"), n("c", zone="z2")], [on("a", **everyone), on("c", **listed)],
                         objects=TEAM_NAMESPACES)
    assert statuses(pod("p", labels=WEB, namespace="nowhere"), cluster) == {"a": EXISTING, "c": OK}
    assert statuses(pod("p", labels=WEB, namespace="team2-a"), cluster) == {"a": EXISTING, "c": EXISTING}
    # an existing pod's term without namespaces is about its own namespace
    own = cluster_of([n("a", zone="z1")], [on("a", namespace="team2-a", pod_anti_affinity=required(
        term("zone", expr("app", "In", "web"))))])
    assert statuses(pod("p", labels=WEB), own) == {"a": OK}
    assert statuses(pod("p", labels=WEB, namespace="team2-a"), own) == {"a": EXISTING}


HASH = "pod-template-hash"


def test_match_label_keys_narrow_to_the_pods_own_values() -> None:
    cluster = cluster_of([n("h1"), n("h2"), n("h3")],
                         [on("h1", {**WEB, HASH: "v1"}), on("h2", {**WEB, HASH: "v2"}), on("h3", WEB)])
    anti = required(term(HOST, expr("app", "In", "web"), match_label_keys=[HASH]))
    assert statuses(pod("p", labels={**WEB, HASH: "v2"}, pod_anti_affinity=anti), cluster) == {
        "h1": OK, "h2": ANTI, "h3": OK}
    # a key the pod does not carry is ignored: the selector alone applies
    assert passing(pod("p", labels=WEB, pod_anti_affinity=anti), cluster) == set()


def test_mismatch_label_keys_exclude_the_pods_own_values() -> None:
    cluster = cluster_of([n("h1"), n("h2"), n("h3")],
                         [on("h1", {**WEB, "tenant": "t1"}), on("h2", {**WEB, "tenant": "t2"}), on("h3", WEB)])
    anti = required(term(HOST, expr("app", "In", "web"), mismatch_label_keys=["tenant"]))
    assert statuses(pod("p", labels={**WEB, "tenant": "t1"}, pod_anti_affinity=anti), cluster) == {
        "h1": OK, "h2": ANTI, "h3": ANTI}
    # required affinity with mismatchLabelKeys: next to another tenant's pod only
    aff = required(term(HOST, expr("app", "In", "web"), mismatch_label_keys=["tenant"]))
    assert passing(pod("p", labels={"tenant": "t2"}, pod_affinity=aff), cluster) == {"h1", "h3"}


def test_existing_pods_label_keys_use_their_own_values() -> None:
    guard = {"pod_anti_affinity": required(term(HOST, expr("app", "In", "web"), match_label_keys=[HASH]))}
    cluster = cluster_of([n("h1")], [on("h1", {**WEB, HASH: "v1"}, **guard)])
    assert statuses(pod("p", labels={**WEB, HASH: "v1"}), cluster) == {"h1": EXISTING}
    assert statuses(pod("p", labels={**WEB, HASH: "v2"}), cluster) == {"h1": OK}


# ============================================================================ counted pods

ZONE_ANTI_WEB = {"pod_anti_affinity": required(term("zone", expr("app", "In", "web")))}


def two_zones() -> ClusterState:
    return cluster_of([n("a", zone="z1"), n("b", zone="z1"), n("c", zone="z2")])


def test_pods_being_deleted_are_still_counted() -> None:
    """kube's InterPodAffinity does not skip terminating pods (PodTopologySpread does)."""
    cluster = cluster_of([n("a", zone="z1"), n("c", zone="z2")], [on("a", WEB, deleting=True)])
    assert statuses(pod("p", **ZONE_ANTI_WEB), cluster) == {"a": ANTI, "c": OK}
    guard = cluster_of([n("a", zone="z1"), n("c", zone="z2")], [on("a", deleting=True, **ZONE_ANTI_WEB)])
    assert statuses(pod("p", labels=WEB), guard) == {"a": EXISTING, "c": OK}
    assert passing(pod("p", **WANTS_WEB), cluster) == {"a"}


def test_assumed_pods_are_counted_and_forgotten_ones_are_not() -> None:
    cluster = two_zones()
    first = parse_pod(pod("web-1", labels=WEB, **ZONE_ANTI_WEB))
    second = parse_pod(pod("web-2", labels=WEB, **ZONE_ANTI_WEB))
    assert passing(second, cluster) == {"a", "b", "c"}
    cluster.assume(first, "a")
    assert statuses(second, cluster) == {"a": ANTI, "b": ANTI, "c": OK}
    # its own anti-affinity (symmetry) is counted too
    assert statuses(pod("plain", labels=WEB), cluster) == {"a": EXISTING, "b": EXISTING, "c": OK}
    cluster.forget(first.key)
    assert passing(second, cluster) == {"a", "b", "c"}
    assert passing(pod("plain", labels=WEB), cluster) == {"a", "b", "c"}


def test_confirmed_assumption_counts_once_and_removal_uncounts() -> None:
    cluster = two_zones()
    obj = pod("web-1", labels=WEB)
    prefers = pod("p", pod_affinity=preferred(term("zone", expr("app", "In", "web"), weight=7)))
    cluster.assume(parse_pod(obj), "a")
    assert raw_scores(IPA, prefers, cluster) == {"a": 7, "b": 7, "c": 0}
    cluster.add_pod(parse_pod({**obj, "spec": {**obj["spec"], "nodeName": "a"}}))
    assert raw_scores(IPA, prefers, cluster) == {"a": 7, "b": 7, "c": 0}
    cluster.forget("default/web-1")  # confirmed: forgetting does nothing
    assert raw_scores(IPA, prefers, cluster) == {"a": 7, "b": 7, "c": 0}
    cluster.remove_pod("default/web-1")
    assert IPA.pre_score(parse_pod(prefers), cluster) is False


def test_removed_and_readded_node_takes_its_pods_along() -> None:
    cluster = two_zones()
    cluster.add_pod(parse_pod(on("a", labels=WEB, **ZONE_ANTI_WEB)))
    incoming = parse_pod(pod("p", labels=WEB))
    assert statuses(incoming, cluster) == {"a": EXISTING, "b": EXISTING, "c": OK}
    cluster.remove_node("a")
    assert statuses(incoming, cluster) == {"b": OK, "c": OK}
    cluster.upsert_node(parse_node(n("a", zone="z1")))
    assert statuses(incoming, cluster) == {"a": EXISTING, "b": EXISTING, "c": OK}


def test_relabelled_node_moves_its_pods_domain() -> None:
    cluster = two_zones()
    cluster.add_pod(parse_pod(on("a", labels=WEB)))
    incoming = parse_pod(pod("p", **ZONE_ANTI_WEB))
    assert passing(incoming, cluster) == {"c"}
    cluster.upsert_node(parse_node(n("a", zone="z2")))
    assert passing(incoming, cluster) == {"b"}
    cluster.upsert_node(parse_node(n("a")))  # no zone at all: its pod is in no zone
    assert statuses(incoming, cluster) == {"a": OK, "b": OK, "c": OK}


# ============================================================================ reasons and messages

ONLY_IPA = make_profile(filters=[{"name": "InterPodAffinity"}], scores=[])


def test_message_counts_each_nodes_first_reason() -> None:
    cluster = cluster_of(
        [n("a", zone="z1"), n("b", zone="z2"), n("c", zone="z2")],
        [on("a", {"app": "db"}), on("b", pod_anti_affinity=required(term("zone", expr("app", "In", "web"))))],
    )
    incoming = pod("p", labels=WEB, pod_anti_affinity=required(term(HOST, expr("app", "In", "db"))))
    decision = decide(ONLY_IPA, incoming, cluster)
    assert decision.node is None
    assert decision.reasons == {ANTI: 1, EXISTING: 2}
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, "
        "2 node(s) didn't satisfy existing pods anti-affinity rules."
    )
    assert decision.rejected_by == ("InterPodAffinity",)
    assert {"Namespace"} <= decision.wake_on


def test_reason_precedence_affinity_then_anti_affinity_then_existing() -> None:
    guard = {"pod_anti_affinity": required(term("zone", expr("app", "In", "web")))}
    cluster = cluster_of(
        [n("a", zone="z1"), n("b", zone="z2"), n("c", zone="z2"), n("d", zone="z3")],
        [
            on("a", {"app": "db"}), on("a", **guard),  # a: all three fail
            on("b", pod_anti_affinity=required(term(HOST, expr("app", "In", "web")))),  # b: existing only
            on("c", {"app": "cache"}), on("c", {"app": "db"}),  # c: anti-affinity only
        ],
    )
    incoming = pod("p", labels=WEB, pod_affinity=required(term("zone", expr("app", "In", "cache"))),
                   pod_anti_affinity=required(term(HOST, expr("app", "In", "db"))))
    assert statuses(incoming, cluster) == {"a": AFF, "b": EXISTING, "c": ANTI, "d": AFF}
    decision = decide(ONLY_IPA, incoming, cluster)
    assert decision.message == (
        "0/4 nodes are available: 1 node(s) didn't match pod anti-affinity rules, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules, 2 node(s) didn't match pod affinity rules."
    )
    # anti-affinity before existing anti-affinity on one node
    both = cluster_of([n("x", zone="z1")], [on("x", {"app": "db"}, **guard)])
    assert decide(ONLY_IPA, pod("p", labels=WEB, pod_anti_affinity=required(
        term(HOST, expr("app", "In", "db")))), both).reasons == {ANTI: 1}


def test_earlier_filters_take_their_nodes() -> None:
    cluster = cluster_of([node("small", cpu="1", labels={"zone": "z1"}), node("big", labels={"zone": "z1"}),
                          node("other", labels={"zone": "z2"})],
                         [on("big", WEB), on("other", cpu="4")])
    profile = make_profile(filters=[{"name": "NodeResourcesFit"}, {"name": "InterPodAffinity"}], scores=[])
    decision = decide(profile, pod("p", cpu="2", **ZONE_ANTI_WEB), cluster)
    assert decision.reasons == {"Insufficient cpu": 2, ANTI: 1}
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 2 Insufficient cpu."
    )


def test_a_fitting_node_is_chosen() -> None:
    cluster = cluster_of([n("a", zone="z1"), n("b", zone="z2")], [on("a", WEB)])
    decision = decide(ONLY_IPA, pod("p", labels=WEB, **ZONE_ANTI_WEB), cluster)
    assert decision.node == "b"
    assert decision.feasible == 1


# ============================================================================ score
# kube's TestPreferredAffinity

REGION_CHINA, REGION_INDIA, AZ1, AZ2 = {"region": "China"}, {"region": "India"}, {"az": "az1"}, {"az": "az2"}


def weighted(weight: int, key: str, *expressions: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return term(key, *expressions, weight=weight, **kwargs)


STAY_S1_REGION = {"pod_affinity": preferred(weighted(5, "region", expr("security", "In", "S1")))}
STAY_S2_REGION = {"pod_affinity": preferred(weighted(6, "region", expr("security", "In", "S2")))}
AFFINITY3 = {"pod_affinity": preferred(
    weighted(8, "region", expr("security", "NotIn", "S1"), expr("security", "In", "S2")),
    weighted(2, "region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist")),
)}
HARD_AFFINITY = {"pod_affinity": required(
    term("region", expr("security", "In", "S1", "value2")),
    term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist")),
)}
AWAY_S1_AZ = {"pod_anti_affinity": preferred(weighted(5, "az", expr("security", "In", "S1")))}
AWAY_S2_AZ = {"pod_anti_affinity": preferred(weighted(5, "az", expr("security", "In", "S2")))}
STAY_S1_AWAY_S2 = {
    "pod_affinity": preferred(weighted(8, "region", expr("security", "In", "S1"))),
    "pod_anti_affinity": preferred(weighted(5, "az", expr("security", "In", "S2"))),
}
NS_SELECTOR_TERM = {"namespaces": ["subteam2.team2"], "namespace_selector": TEAM1}
AFFINITY_NS_SELECTOR = {"pod_affinity": preferred(
    weighted(5, "region", expr("security", "In", "S1"), **NS_SELECTOR_TERM))}
ANTI_AFFINITY_NS_SELECTOR = {"pod_anti_affinity": preferred(
    weighted(5, "region", expr("security", "In", "S1"), **NS_SELECTOR_TERM))}

TEAM1_S1 = {"namespace": "subteam1.team1", "labels": S1}


def nodes_of(**labels: dict[str, str]) -> list[dict[str, Any]]:
    return [n(name, **node_labels) for name, node_labels in labels.items()]


THREE = nodes_of(node1=REGION_CHINA, node2=REGION_INDIA, node3=AZ1)

PREFERRED_CASES = [
    pytest.param(
        pod("p", labels=S1, **STAY_S1_REGION),
        [on("node1", S1), on("node2", S2), on("node3", S1)], THREE,
        {"node1": 100, "node2": 0, "node3": 0}, id="affinity-topology-and-selector",
    ),
    pytest.param(
        pod("p", **STAY_S1_REGION), [on("node1", S1)],
        nodes_of(node1=REGION_CHINA, node2={"region": "China", "az": "az1"}, node3=REGION_INDIA),
        {"node1": 100, "node2": 100, "node3": 0}, id="affinity-same-domain-same-score",
    ),
    pytest.param(
        pod("p", labels=S1, **STAY_S2_REGION),
        [on("node1", S2), on("node1", S2), on("node2", S2), on("node3", S2), on("node4", S2), on("node5", S2)],
        nodes_of(node1=REGION_CHINA, node2=REGION_INDIA, node3=REGION_CHINA, node4=REGION_CHINA,
                 node5=REGION_INDIA),
        {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}, id="affinity-more-matches-win",
    ),
    pytest.param(
        pod("p", labels=S1, **AFFINITY3), [on("node1", S1), on("node2", S2), on("node3", S1)], THREE,
        {"node1": 20, "node2": 100, "node3": 0}, id="affinity-operators-and-weights",
    ),
    pytest.param(
        pod("p", labels=S2), [on("node1", S1, **STAY_S1_REGION), on("node2", S2, **STAY_S2_REGION)], THREE,
        {"node1": 0, "node2": 100, "node3": 0}, id="symmetry-preferred-affinity",
    ),
    pytest.param(
        pod("p", **TEAM1_S1), [on("node1", S1, **AFFINITY_NS_SELECTOR), on("node2", S2, **STAY_S2_REGION)], THREE,
        {"node1": 100, "node2": 0, "node3": 0}, id="symmetry-affinity-namespace-selector",
    ),
    pytest.param(
        pod("p", **TEAM1_S1), [on("node1", S1, **ANTI_AFFINITY_NS_SELECTOR), on("node2", S2, **STAY_S2_REGION)],
        THREE, {"node1": 0, "node2": 100, "node3": 100}, id="symmetry-anti-affinity-namespace-selector",
    ),
    pytest.param(
        pod("p", labels=S1), [on("node1", S1, **HARD_AFFINITY), on("node2", S2, **HARD_AFFINITY)], THREE,
        {"node1": 100, "node2": 100, "node3": 0}, id="symmetry-required-affinity",
    ),
    pytest.param(
        pod("p", labels=S1, **AWAY_S1_AZ), [on("node1", S1), on("node2", S2)],
        nodes_of(node1=AZ1, node2=REGION_CHINA), {"node1": 0, "node2": 100}, id="anti-affinity",
    ),
    pytest.param(
        pod("p", labels=S1, **AWAY_S1_AZ), [on("node1", S1), on("node2", S1)],
        nodes_of(node1=AZ1, node2=REGION_CHINA), {"node1": 0, "node2": 100}, id="anti-affinity-topology-key",
    ),
    pytest.param(
        pod("p", labels=S1, **AWAY_S1_AZ), [on("node1", S1), on("node1", S1), on("node2", S2)],
        nodes_of(node1=AZ1, node2=REGION_INDIA), {"node1": 0, "node2": 100}, id="anti-affinity-more-matches",
    ),
    pytest.param(
        pod("p", labels=S2), [on("node1", S1, **AWAY_S2_AZ), on("node2", S2, **AWAY_S1_AZ)],
        nodes_of(node1=AZ1, node2=AZ2), {"node1": 0, "node2": 100}, id="symmetry-preferred-anti-affinity",
    ),
    pytest.param(
        pod("p", labels=S1, **STAY_S1_AWAY_S2), [on("node1", S1), on("node2", S1)],
        nodes_of(node1=REGION_CHINA, node2=AZ1), {"node1": 100, "node2": 0}, id="affinity-and-anti-affinity",
    ),
    pytest.param(
        pod("p", labels=S1, **STAY_S1_AWAY_S2),
        [on("node1", S1), on("node1", S1), on("node2", S1), on("node3", S1), on("node3", S1), on("node4", S1),
         on("node5", S1)],
        nodes_of(node1={"region": "China", "az": "az1"}, node2=REGION_INDIA, node3=REGION_CHINA,
                 node4=REGION_CHINA, node5=REGION_INDIA),
        {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}, id="affinity-and-anti-affinity-same-labels",
    ),
    pytest.param(
        pod("p", labels=S1, **STAY_S1_AWAY_S2),
        [on("node1", S1), on("node2", S2), on("node3", **STAY_S1_AWAY_S2), on("node4", **AWAY_S1_AZ)],
        nodes_of(node1=REGION_CHINA, node2=AZ1, node3=REGION_INDIA, node4=AZ2),
        {"node1": 100, "node2": 0, "node3": 100, "node4": 0}, id="affinity-anti-affinity-and-symmetry",
    ),
    pytest.param(
        pod("p", labels=S1), [on("node1", S1), on("node2", **STAY_S1_AWAY_S2)],
        nodes_of(node1=REGION_CHINA, node2=REGION_CHINA), {"node1": 0, "node2": 0}, id="partial-domain-no-panic",
    ),
    pytest.param(
        pod("p", **TEAM1_S1, **AFFINITY_NS_SELECTOR),
        [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
         on("node1", S1, namespace="subteam1.team2"), on("node2", S1, namespace="subteam2.team1")],
        nodes_of(node1=REGION_CHINA, node2=REGION_INDIA), {"node1": 100, "node2": 0},
        id="affinity-namespace-selector",
    ),
    pytest.param(
        pod("p", **TEAM1_S1, **AFFINITY_NS_SELECTOR),
        [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
         on("node1", S1, namespace="subteam2.team2"), on("node2", S1, namespace="subteam2.team1")],
        nodes_of(node1=REGION_CHINA, node2=REGION_INDIA), {"node1": 100, "node2": 0},
        id="affinity-namespace-selector-and-namespaces",
    ),
    pytest.param(
        pod("p", **TEAM1_S1, **ANTI_AFFINITY_NS_SELECTOR),
        [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
         on("node1", S1, namespace="subteam1.team2"), on("node2", S1, namespace="subteam2.team1")],
        nodes_of(node1=REGION_CHINA, node2=REGION_INDIA), {"node1": 0, "node2": 100},
        id="anti-affinity-namespace-selector",
    ),
    pytest.param(
        pod("p", **TEAM1_S1, **ANTI_AFFINITY_NS_SELECTOR),
        [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"),
         on("node1", S1, namespace="subteam2.team2"), on("node2", S1, namespace="subteam2.team1")],
        nodes_of(node1=REGION_CHINA, node2=REGION_INDIA), {"node1": 0, "node2": 100},
        id="anti-affinity-namespace-selector-and-namespaces",
    ),
    pytest.param(
        pod("p", labels=S2), [on("node1", S1, **STAY_S1_AWAY_S2), on("node2", S2, **STAY_S2_REGION)],
        nodes_of(node1=REGION_CHINA, node2=REGION_INDIA), {"node1": 0, "node2": 100},
        id="existing-preferred-terms-not-ignored",
    ),
]


@pytest.mark.parametrize(("pod_obj", "existing", "nodes", "expected"), PREFERRED_CASES)
def test_kube_preferred_affinity(pod_obj: dict, existing: list[dict], nodes: list[dict], expected: dict) -> None:
    cluster = cluster_of(nodes, existing, objects=KUBE_NAMESPACES)
    assert IPA.pre_score(parse_pod(pod_obj), cluster) is True
    assert scores(IPA, pod_obj, cluster) == expected


def test_raw_scores_are_summed_weights_per_domain() -> None:
    """The numbers behind two of kube's cases: affinity3 (20/100/0) and affinity+anti+symmetry."""
    cluster = cluster_of(THREE, [on("node1", S1), on("node2", S2), on("node3", S1)])
    assert raw_scores(IPA, pod("p", labels=S1, **AFFINITY3), cluster) == {"node1": 2, "node2": 10, "node3": 0}
    cluster = cluster_of(nodes_of(node1=REGION_CHINA, node2=AZ1, node3=REGION_INDIA, node4=AZ2),
                         [on("node1", S1), on("node2", S2), on("node3", **STAY_S1_AWAY_S2), on("node4", **AWAY_S1_AZ)])
    assert raw_scores(IPA, pod("p", labels=S1, **STAY_S1_AWAY_S2), cluster) == {
        "node1": 8, "node2": -5, "node3": 8, "node4": -5}


def test_nothing_to_score_is_skipped() -> None:
    """kube's PreScore Skip: no term anywhere matches; every node scores 0."""
    cluster = cluster_of(THREE, [on("node1", S1)])
    incoming = parse_pod(pod("p", labels=S1))
    assert IPA.pre_score(incoming, cluster) is False
    assert scores(IPA, incoming, cluster) == {"node1": 0, "node2": 0, "node3": 0}
    # preferred terms that match no pod, or only pods on nodes without the key: skipped as well
    assert IPA.pre_score(parse_pod(pod("p", **STAY_S2_REGION)), cluster) is False
    on_az = cluster_of(THREE, [on("node3", S2)])
    assert IPA.pre_score(parse_pod(pod("p", **STAY_S2_REGION)), on_az) is False
    profile = make_profile(filters=[], scores=[{"name": "InterPodAffinity", "weight": 2}])
    decision = decide(profile, incoming, cluster, top=3)
    assert {s.node: s.plugins["InterPodAffinity"] for s in decision.top} == {"node1": 0, "node2": 0, "node3": 0}


def test_ignore_preferred_terms_of_existing_pods_skips_a_pod_without_preferences() -> None:
    """kube's "Ignore preferred terms of existing pods": Skip, even existing required affinity."""
    ignoring = make_plugin("InterPodAffinity", {"ignorePreferredTermsOfExistingPods": True})
    cluster = cluster_of(nodes_of(node1=REGION_CHINA, node2=REGION_INDIA),
                         [on("node1", S1, **STAY_S1_AWAY_S2), on("node2", S2, **STAY_S2_REGION),
                          on("node2", **HARD_AFFINITY)])
    incoming = parse_pod(pod("p", labels=S2))
    assert ignoring.pre_score(incoming, cluster) is False
    assert IPA.pre_score(incoming, cluster) is True
    assert raw_scores(IPA, incoming, cluster) == {"node1": 0, "node2": 6 + 1}


def test_ignore_preferred_terms_of_existing_pods_not_when_the_pod_has_preferences() -> None:
    """kube ignores existing pods' preferred terms "unless the incoming pod has inter-pod affinities":
    with preferred terms of its own, the existing pods' preferred (and required) terms still count."""
    ignoring = make_plugin("InterPodAffinity", {"ignorePreferredTermsOfExistingPods": True})
    cluster = cluster_of(nodes_of(node1=REGION_CHINA, node2=REGION_INDIA, node3={"region": "Other"}),
                         [on("node1", S1, **STAY_S1_REGION), on("node2", **HARD_AFFINITY),
                          on("node3", {"foo": "bar"})])
    incoming = pod("p", labels=S1, pod_affinity=preferred(weighted(1, "region", expr("foo", "In", "bar"))))
    # node1: the existing pod's preferred term (5); node2: its two required terms (1 each); node3: own term
    expected = {"node1": 5, "node2": 2, "node3": 1}
    assert raw_scores(IPA, incoming, cluster) == expected
    assert raw_scores(ignoring, incoming, cluster) == expected
    assert scores(ignoring, incoming, cluster) == {"node1": 100, "node2": 25, "node3": 0}


# kube's TestPreferredAffinityWithHardPodAffinitySymmetricWeight
HARD_POD_AFFINITY = {"pod_affinity": required(
    term("region", expr("service", "In", "S1"), namespaces=["default", "subteam2.team2"], namespace_selector=TEAM1))}


@pytest.mark.parametrize(
    ("weight", "incoming_namespace", "expected"),
    [
        pytest.param(1, "default", {"node1": 100, "node2": 100, "node3": 0}, id="default-weight"),
        pytest.param(0, "default", None, id="zero-weight-skips"),
        pytest.param(1, "subteam1.team2", None, id="no-matching-namespace-skips"),
        pytest.param(1, "subteam1.team1", {"node1": 100, "node2": 100, "node3": 0}, id="matching-namespace-selector"),
        pytest.param(1, "subteam2.team2", {"node1": 100, "node2": 100, "node3": 0}, id="matching-namespaces"),
    ],
)
def test_kube_hard_pod_affinity_weight(weight: int, incoming_namespace: str, expected: dict | None) -> None:
    plugin = make_plugin("InterPodAffinity", {"hardPodAffinityWeight": weight})
    cluster = cluster_of(THREE, [on("node1", **HARD_POD_AFFINITY), on("node2", **HARD_POD_AFFINITY)],
                         objects=KUBE_NAMESPACES)
    incoming = parse_pod(pod("p", namespace=incoming_namespace, labels={"service": "S1"}))
    if expected is None:
        assert plugin.pre_score(incoming, cluster) is False
        assert scores(plugin, incoming, cluster) == {"node1": 0, "node2": 0, "node3": 0}
    else:
        assert plugin.pre_score(incoming, cluster) is True
        assert scores(plugin, incoming, cluster) == expected


def test_hard_pod_affinity_weight_scales_against_preferred_weights() -> None:
    cluster = cluster_of(THREE, [on("node1", **HARD_POD_AFFINITY), on("node2", S2)], objects=KUBE_NAMESPACES)
    incoming = pod("p", labels={"service": "S1"}, pod_affinity=preferred(weighted(2, "region",
                                                                                  expr("security", "In", "S2"))))
    weight3 = make_plugin("InterPodAffinity", {"hardPodAffinityWeight": 3})
    assert raw_scores(weight3, incoming, cluster) == {"node1": 3, "node2": 2, "node3": 0}
    assert scores(weight3, incoming, cluster) == {"node1": 100, "node2": 66, "node3": 0}
    assert raw_scores(IPA, incoming, cluster) == {"node1": 1, "node2": 2, "node3": 0}
    weight0 = make_plugin("InterPodAffinity", {"hardPodAffinityWeight": 0})
    assert raw_scores(weight0, incoming, cluster) == {"node1": 0, "node2": 2, "node3": 0}


def test_normalisation_is_kubes_float_min_max() -> None:
    """`int(100 * ((s - min) / (max - min)))` in float64, as kube's NormalizeScore: 29/100 gives 28."""
    assert IPA.normalize(np.asarray([0, 29, 100])).tolist() == [0, 28, 100]
    assert IPA.normalize(np.asarray([-5, 3, 0])).tolist() == [0, 100, 62]
    assert IPA.normalize(np.asarray([7, 7])).tolist() == [0, 0]
    assert IPA.normalize(np.asarray([-3])).tolist() == [0]
    assert IPA.normalize(np.asarray([], dtype=np.int64)).tolist() == []


def test_normalisation_through_the_plugin_over_the_scored_nodes() -> None:
    cluster = cluster_of(nodes_of(n1={"zone": "z1"}, n2={"zone": "z2"}, n3={"zone": "z3"}),
                         [on("n1", {"app": "a"}), on("n2", {"app": "b"})])
    incoming = pod("p", pod_affinity=preferred(weighted(29, "zone", expr("app", "In", "a")),
                                               weighted(100, "zone", expr("app", "In", "b"))))
    assert raw_scores(IPA, incoming, cluster) == {"n1": 29, "n2": 100, "n3": 0}
    assert scores(IPA, incoming, cluster) == {"n1": 28, "n2": 100, "n3": 0}
    assert scores(IPA, incoming, cluster, names=["n1", "n3"]) == {"n1": 100, "n3": 0}
    assert scores(IPA, incoming, cluster, names=["n2"]) == {"n2": 0}


def test_deleting_and_assumed_pods_score() -> None:
    cluster = cluster_of(THREE, [on("node1", S1, deleting=True)])
    incoming = pod("p", **STAY_S1_REGION)
    assert raw_scores(IPA, incoming, cluster) == {"node1": 5, "node2": 0, "node3": 0}
    assumed = parse_pod(pod("s1-assumed", labels=S1))
    cluster.assume(assumed, "node2")
    assert raw_scores(IPA, incoming, cluster) == {"node1": 5, "node2": 5, "node3": 0}
    cluster.forget(assumed.key)
    assert raw_scores(IPA, incoming, cluster) == {"node1": 5, "node2": 0, "node3": 0}


def test_score_in_a_decision() -> None:
    cluster = cluster_of(THREE, [on("node1", S1), on("node2", S2)])
    profile = make_profile(filters=[{"name": "InterPodAffinity"}], scores=[{"name": "InterPodAffinity", "weight": 2}])
    decision = decide(profile, pod("p", labels=S1, **STAY_S1_REGION), cluster, top=3)
    assert decision.node == "node1"
    assert [(s.node, s.total) for s in decision.top] == [("node1", 200), ("node2", 0), ("node3", 0)]


# ============================================================================ args

def test_default_args() -> None:
    assert IPA.args.hardPodAffinityWeight == 1
    assert IPA.args.ignorePreferredTermsOfExistingPods is False
    for weight in (0, 100):
        make_profile(scores=[{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": weight}}])


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": 1.5}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": True}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": None}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"hardPodAffinitySymmetricWeight": 1}, "hardPodAffinitySymmetricWeight"),
    ],
)
def test_invalid_args_are_profile_errors(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(scores=[{"name": "InterPodAffinity", "args": args}], name="ipa")
    message = str(caught.value)
    assert message.startswith('profile "ipa": scores[0] InterPodAffinity: ')
    assert f"args.{field}" in message


# ============================================================================ malformed terms

ANTI_REQ = f"spec.affinity.podAntiAffinity.{REQUIRED}[0]"
AFF_REQ = f"spec.affinity.podAffinity.{REQUIRED}[0]"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"pod_affinity": required(term("zone", expr("app", "Near", "x")))},
                     f"{AFF_REQ}.labelSelector.matchExpressions[0].operator", id="bad-operator"),
        pytest.param({"pod_anti_affinity": required(term("", expr("app", "In", "x")))},
                     f"{ANTI_REQ}.topologyKey", id="empty-topology-key"),
        pytest.param({"pod_anti_affinity": required(term("bad key!", expr("app", "In", "x")))},
                     f"{ANTI_REQ}.topologyKey", id="invalid-topology-key"),
        pytest.param({"pod_anti_affinity": preferred(weighted(0, "zone", expr("app", "In", "x")))},
                     f"spec.affinity.podAntiAffinity.{PREFERRED}[0].weight", id="weight-0"),
        pytest.param({"pod_affinity": preferred(weighted(101, "zone", expr("app", "In", "x")))},
                     f"spec.affinity.podAffinity.{PREFERRED}[0].weight", id="weight-101"),
        pytest.param({"pod_affinity": required(term("zone", expr("service", "In", "{{.bad-value.}}")))},
                     f"{AFF_REQ}.labelSelector.matchExpressions[0].values[0]", id="bad-label-value"),
        pytest.param({"pod_affinity": required(term("zone", expr("service", "In")))},
                     f"{AFF_REQ}.labelSelector.matchExpressions[0].values", id="In-without-values"),
        pytest.param({"pod_anti_affinity": required(term("zone", expr("a", "Exists"),
                                                         namespace_selector={"matchExpressions": [expr("t", "Is")]}))},
                     f"{ANTI_REQ}.namespaceSelector.matchExpressions[0].operator", id="bad-namespace-selector"),
        pytest.param({"pod_anti_affinity": required(term("zone", expr("a", "Exists"), match_label_keys=["k"],
                                                         mismatch_label_keys=["k"]))},
                     f"{ANTI_REQ}.matchLabelKeys", id="key-in-match-and-mismatch-label-keys"),
    ],
)
def test_malformed_term_is_a_pod_error(kwargs: dict[str, Any], field: str) -> None:
    info = parse_pod(pod("p", labels={"app": "x"}, **kwargs))
    assert info.error is not None
    assert field in info.error
    cluster = cluster_of([n("a", zone="z1")])
    decision = decide(make_profile(), info, cluster)
    assert decision.node is None
    assert decision.message == info.error


# ============================================================================ property

PROPERTY_PROFILE = make_profile(
    filters=[{"name": "NodeResourcesFit"}, {"name": "InterPodAffinity"}],
    scores=[{"name": "InterPodAffinity"}],
)
APPS = ("a", "b", "c")
NAMESPACES = ("default", "default", "other")


@dataclass(frozen=True)
class Spec:
    """One pod of the property: its app, namespace, required anti-affinity (topology key or None)
    against its own app, the term's scope (its namespace, or every namespace) and cpu (milli)."""

    name: str
    app: str
    namespace: str
    key: str | None
    every_namespace: bool
    cpu: int
    soft: int  # a preferred anti-affinity weight (0: none): scores only, never legality

    def obj(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.key is not None:
            scope = {"namespace_selector": {}} if self.every_namespace else {}
            kwargs["pod_anti_affinity"] = required(affinity_term(self.key, {"app": self.app}, **scope))
        if self.soft:
            soft = {PREFERRED: [affinity_term(ZONE, {"app": self.app}, weight=self.soft)]}
            kwargs["pod_anti_affinity"] = {**kwargs.get("pod_anti_affinity", {}), **soft}
        cpu = f"{self.cpu}m" if self.cpu else None
        return pod(self.name, cpu=cpu, namespace=self.namespace, labels={"app": self.app}, **kwargs)


class Model:
    """A brute-force model of the cluster: who is where, and what a legal node is."""

    def __init__(self, node_objs: list[dict[str, Any]]) -> None:
        self.labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in node_objs}
        self.cpu = {o["metadata"]["name"]: int(o["status"]["allocatable"]["cpu"]) * 1000 for o in node_objs}
        self.placed: dict[str, tuple[Spec, str]] = {}  # pod key -> (spec, node)

    @staticmethod
    def selects(owner: Spec, other: Spec) -> bool:
        """Whether `owner`'s required anti-affinity term selects `other`."""
        return owner.key is not None and other.app == owner.app and (
            owner.every_namespace or other.namespace == owner.namespace)

    def together(self, key: str, node_a: str, node_b: str) -> bool:
        value = self.labels[node_a].get(key)
        return value is not None and value == self.labels[node_b].get(key)

    def reason(self, spec: Spec, node_name: str) -> str | None:
        """The first filter's reason against `spec` on that node (None: legal)."""
        used = sum(other.cpu for other, where in self.placed.values() if where == node_name)
        if used + spec.cpu > self.cpu[node_name]:
            return "Insufficient cpu"
        others = list(self.placed.values())
        if any(self.selects(spec, other) and self.together(spec.key, node_name, where)  # type: ignore[arg-type]
               for other, where in others):
            return ANTI
        if any(self.selects(other, spec) and self.together(other.key, where, node_name)  # type: ignore[arg-type]
               for other, where in others):
            return EXISTING
        return None

    def check_no_violation(self) -> None:
        items = list(self.placed.values())
        for (p, p_node), (q, q_node) in itertools.permutations(items, 2):
            assert not (self.selects(p, q) and self.together(p.key, p_node, q_node)), (p, p_node, q, q_node)  # type: ignore[arg-type]


@st.composite
def property_nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    zones = draw(st.integers(2, 3))
    result = []
    for i in range(draw(st.integers(3, 8))):
        labels = {ZONE: f"z{draw(st.integers(0, zones - 1))}"} if draw(st.integers(0, 9)) else {}
        result.append(node(f"n{i}", cpu=draw(st.sampled_from(["1", "2", "4"])), labels=labels))
    return result


@st.composite
def property_steps(draw: st.DrawFn) -> list[tuple[str, Spec | int]]:
    steps: list[tuple[str, Spec | int]] = []
    for i in range(draw(st.integers(1, 24))):
        if draw(st.integers(0, 6)) == 0:
            steps.append((draw(st.sampled_from(["forget", "confirm", "delete"])), draw(st.integers(0, 99))))
            continue
        spec = Spec(
            name=f"pod-{i:02}",
            app=draw(st.sampled_from(APPS)),
            namespace=draw(st.sampled_from(NAMESPACES)),
            key=draw(st.sampled_from([HOST, HOST, ZONE, ZONE, None])),
            every_namespace=draw(st.integers(0, 4)) == 0,
            cpu=draw(st.sampled_from([0, 250, 500, 1000])),
            soft=draw(st.sampled_from([0, 0, 10, 100])),
        )
        steps.append(("schedule", spec))
    return steps


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_objs=property_nodes(), steps=property_steps())
def test_anti_affinity_is_never_violated_and_refusals_are_real(
    node_objs: list[dict[str, Any]], steps: list[tuple[str, Spec | int]]
) -> None:
    cluster = cluster_of(node_objs)
    model = Model(node_objs)
    scheduler = Scheduler()
    objs: dict[str, dict[str, Any]] = {}
    for op, arg in steps:
        if op == "schedule":
            assert isinstance(arg, Spec)
            info = parse_pod(arg.obj())
            objs[info.key] = arg.obj()
            expected = {name: model.reason(arg, name) for name in model.labels}
            decision = scheduler.schedule(info, PROPERTY_PROFILE, cluster)
            if decision.node is None:
                assert all(reason is not None for reason in expected.values()), (expected, decision.message)
                assert decision.reasons == dict(Counter(expected.values()))
            else:
                assert expected[decision.node] is None, (decision.node, expected)
                assert decision.feasible == sum(reason is None for reason in expected.values())
                assert all(0 <= s.plugins["InterPodAffinity"] <= 100 for s in decision.top)
                cluster.assume(info, decision.node)
                model.placed[info.key] = (arg, decision.node)
        elif model.placed:
            assert isinstance(arg, int)
            key = sorted(model.placed)[arg % len(model.placed)]
            if op == "confirm":
                obj = objs[key]
                cluster.add_pod(parse_pod({**obj, "spec": {**obj["spec"], "nodeName": model.placed[key][1]}}))
            elif op == "forget":
                if cluster.is_assumed(key):
                    cluster.forget(key)
                    del model.placed[key]
            else:
                cluster.remove_pod(key)
                del model.placed[key]
        model.check_no_violation()
