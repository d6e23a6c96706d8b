"""PodTopologySpread: kube-scheduler's filtering_test.go and scoring_test.go tables re-expressed (the
2 zones x 2 nodes clusters, missing labels, minDomains, inclusion policies, matchLabelKeys, several
constraints, terminating and foreign pods), the default constraints and their selector
(Services, ReplicaSets, StatefulSets), the args validation, and a brute-force cross-check."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from placer.engine.cluster import ClusterState
from placer.engine.framework import ClusterEvent
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError
from placer.plugins.pod_topology_spread import (
    REASON,
    REASON_MISSING_LABEL,
    PodTopologySpread,
    go_round,
)
from placer.testing import (
    cluster_of,
    decide,
    make_plugin,
    make_profile,
    node,
    pod,
    pod_info,
    raw_scores,
    replica_set,
    scores,
    service,
    spread_constraint,
    stateful_set,
)

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
TAINT = "node.kubernetes.io/unschedulable:NoSchedule"  # kube's test `taints`
FITS = "fits"
SKEW = REASON
MISSING = REASON_MISSING_LABEL

SPREAD = make_plugin("PodTopologySpread")  # defaultingType System, as kube's score tests
LISTED = make_plugin("PodTopologySpread", {"defaultingType": "List"})  # as kube's filter tests


# ---------------------------------------------------------------------------------- builders


def tsc(max_skew: int, key: str, when: str = "DoNotSchedule", selector: Any = FOO, **extra: Any) -> dict[str, Any]:
    """A constraint as kube's `st.SpreadConstraint`: selector None = no labelSelector (nil)."""
    if selector is not None:
        extra["labelSelector"] = selector
    return spread_constraint(max_skew, key, when, **extra)


def incoming(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    return pod("p", labels={"foo": ""} if labels is None else labels, spread=list(constraints), **kw)


def on(node_name: str, *keys: str, name: str | None = None, **kw: Any) -> dict[str, Any]:
    """An existing pod with labels `key: ""`, bound to `node_name`."""
    return pod(name or f"e{next(_ids)}-{node_name}", labels=dict.fromkeys(keys, ""), node_name=node_name, **kw)


_ids = itertools.count()


def spread_on(counts: dict[str, int], *keys: str) -> list[dict[str, Any]]:
    """`counts[node]` existing pods with labels `keys` on each node."""
    return [on(name, *keys) for name, n in counts.items() for _ in range(n)]


def zn(name: str, zone: str | None, *, node_label: bool = True, **labels: str) -> dict[str, Any]:
    """A node of kube's filter tests: labels `zone` and `node` (and the hostname label, unused)."""
    own = dict(labels)
    if zone is not None:
        own["zone"] = zone
    if node_label:
        own["node"] = name
    return node(name, labels=own)


def two_by_two() -> list[dict[str, Any]]:
    """node-a, node-b in zone1 and node-x, node-y in zone2 (kube's classic table)."""
    return [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]


def verdicts(plugin: Any, pod_obj: Any, cluster: ClusterState) -> dict[str, str]:
    """Node -> FITS or the reason the filter gives for that node alone."""
    info = pod_info(pod_obj)
    mask = plugin.filter(info, cluster)
    result = {}
    for name, slot in sorted(cluster.index.items()):
        if mask is None or mask[slot]:
            result[name] = FITS
        else:
            reasons = plugin.reason_counts(info, cluster, np.asarray([slot]))
            assert sum(reasons.values()) == 1, reasons
            result[name] = next(iter(reasons))
    return result


def fitting(plugin: Any, pod_obj: Any, cluster: ClusterState) -> set[str]:
    return {name for name, verdict in verdicts(plugin, pod_obj, cluster).items() if verdict == FITS}


# ---------------------------------------------------------------------------------- filter, one constraint


def test_no_existing_pods_all_fit() -> None:
    cluster = cluster_of(two_by_two())
    assert fitting(LISTED, incoming(tsc(1, "zone")), cluster) == {"node-a", "node-b", "node-x", "node-y"}


def test_incoming_pod_not_matching_itself_fits_everywhere_in_a_clean_cluster() -> None:
    cluster = cluster_of(two_by_two())
    assert fitting(LISTED, incoming(tsc(1, "zone", selector=BAR)), cluster) == {"node-a", "node-b", "node-x", "node-y"}


def test_pods_of_other_namespaces_do_not_count() -> None:
    pods = [
        on("node-a", "foo", namespace="ns1"),
        on("node-a", "foo", namespace="ns2"),
        on("node-x", "foo"),
        on("node-y", "foo"),
    ]
    assert verdicts(LISTED, incoming(tsc(1, "zone")), cluster_of(two_by_two(), pods)) == {
        "node-a": FITS,
        "node-b": FITS,
        "node-x": SKEW,
        "node-y": SKEW,
    }


def test_null_selector_matches_no_existing_pod_and_not_the_pod() -> None:
    cluster = cluster_of(two_by_two(), [on("node-x", "foo"), on("node-y", "foo")])
    assert fitting(LISTED, incoming(tsc(1, "zone", selector=None)), cluster) == {"node-a", "node-b", "node-x", "node-y"}


def test_empty_selector_counts_no_pods_but_matches_the_pod() -> None:
    # kube's countPodsMatchSelector returns 0 for an empty selector; the pod matches it (self = 1):
    # skew 0 + 1 - 0 never exceeds maxSkew 1, however skewed the cluster really is
    cluster = cluster_of(two_by_two(), spread_on({"node-x": 3, "node-y": 2}, "foo"))
    assert fitting(LISTED, incoming(tsc(1, "zone", selector={})), cluster) == {"node-a", "node-b", "node-x", "node-y"}
    # with a real selector the same cluster rejects zone2
    assert fitting(LISTED, incoming(tsc(1, "zone")), cluster) == {"node-a", "node-b"}


def test_spread_3_3_all_fit() -> None:
    cluster = cluster_of(two_by_two(), spread_on({"node-a": 2, "node-b": 1, "node-y": 3}, "foo"))
    assert fitting(LISTED, incoming(tsc(1, "zone")), cluster) == {"node-a", "node-b", "node-x", "node-y"}


def test_node_without_the_zone_label_is_rejected_as_missing_label_and_not_counted() -> None:
    # pods spread 1/2 as node-b carries `zon`, not `zone`
    nodes = [zn("node-a", "zone1"), zn("node-b", None, zon="zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
    pods = [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")]
    assert verdicts(LISTED, incoming(tsc(1, "zone")), cluster_of(nodes, pods)) == {
        "node-a": FITS,
        "node-b": MISSING,
        "node-x": SKEW,
        "node-y": SKEW,
    }


def test_no_node_has_the_key() -> None:
    cluster = cluster_of([zn("node-a", "zone1"), zn("node-x", "zone2")])
    pod_obj = incoming(tsc(1, "rack"))
    assert verdicts(LISTED, pod_obj, cluster) == {"node-a": MISSING, "node-x": MISSING}
    profile = make_profile(filters=[{"name": "PodTopologySpread"}], scores=[])
    decision = decide(profile, pod_obj, cluster)
    assert decision.message == f"0/2 nodes are available: 2 {MISSING}."
    assert decision.rejected_by == ("PodTopologySpread",)
    assert decision.wake_on == PodTopologySpread.events


@pytest.mark.parametrize(
    ("max_skew", "labels", "expected"),
    [
        (1, {"foo": ""}, {"node-x"}),  # 2/1/0/3: only node-x
        (2, {"foo": ""}, {"node-b", "node-x"}),
        (1, {"bar": ""}, {"node-b", "node-x"}),  # the pod does not match itself
    ],
)
def test_spread_over_nodes_2_1_0_3(max_skew: int, labels: dict[str, str], expected: set[str]) -> None:
    cluster = cluster_of(two_by_two(), spread_on({"node-a": 2, "node-b": 1, "node-y": 3}, "foo"))
    pod_obj = incoming(tsc(max_skew, "node"), labels=labels)
    assert fitting(LISTED, pod_obj, cluster) == expected
    assert set(verdicts(LISTED, pod_obj, cluster).values()) == {FITS, SKEW}


def test_required_node_affinity_limits_the_nodes_counted() -> None:
    # only node-a and node-y count (2/~1~/~0~/3): node-a is at the minimum and fits; node-b and
    # node-x fit here as NodeAffinity, not this plugin, rejects them
    cluster = cluster_of(two_by_two(), spread_on({"node-a": 2, "node-b": 1, "node-y": 3}, "foo"))
    affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}
            ]
        }
    }
    assert fitting(LISTED, incoming(tsc(1, "node"), affinity=affinity), cluster) == {"node-a", "node-b", "node-x"}


def test_not_in_affinity_leaves_a_zone_uncounted_nodes() -> None:
    # 0/~2~/0/1 over zones: zone1 counts 0 without node-b, zone2 1
    cluster = cluster_of(two_by_two(), spread_on({"node-b": 2, "node-y": 1}, "foo"))
    affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-b"]}]}]
        }
    }
    assert verdicts(LISTED, incoming(tsc(1, "zone"), affinity=affinity), cluster) == {
        "node-a": FITS,
        "node-b": FITS,
        "node-x": SKEW,
        "node-y": SKEW,
    }


def test_terminating_pods_are_not_counted() -> None:
    cluster = cluster_of(
        [zn("node-a", None), zn("node-b", None)], [on("node-a", "foo", deleting=True), on("node-b", "foo")]
    )
    assert verdicts(LISTED, incoming(tsc(1, "node")), cluster) == {"node-a": FITS, "node-b": SKEW}


@pytest.mark.parametrize(
    ("key", "min_domains", "expected"),
    [
        ("node", 4, {"node-c"}),  # 2/2/1, 3 domains < 4: min is 0, only 1 + 1 - 0 <= 2
        ("node", 2, {"node-a", "node-b", "node-c"}),
        ("zone", 3, {"node-x", "node-y"}),  # zones 2/1, 2 domains < 3
        ("zone", 1, {"node-a", "node-b", "node-x", "node-y"}),
    ],
)
def test_min_domains(key: str, min_domains: int, expected: set[str]) -> None:
    if key == "node":
        nodes = [zn("node-a", None), zn("node-b", None), zn("node-c", None)]
        pods = spread_on({"node-a": 2, "node-b": 2, "node-c": 1}, "foo")
    else:
        nodes = two_by_two()
        pods = spread_on({"node-a": 1, "node-b": 1, "node-y": 1}, "foo")
    cluster = cluster_of(nodes, pods)
    pod_obj = incoming(tsc(2, key, minDomains=min_domains))
    assert fitting(LISTED, pod_obj, cluster) == expected


def test_min_domains_counts_domains_of_eligible_nodes_only() -> None:
    # three zones, but the pod's nodeSelector keeps only zone1 and zone2 nodes in the count:
    # 2 domains < minDomains 3 makes the minimum 0
    nodes = [
        zn("node-a", "zone1", disk="ssd"),
        zn("node-x", "zone2", disk="ssd"),
        zn("node-o", "zone3"),
    ]
    cluster = cluster_of(nodes, [on("node-a", "foo"), on("node-x", "foo")])
    pod_obj = incoming(tsc(1, "zone", minDomains=3), node_selector={"disk": "ssd"})
    assert verdicts(LISTED, pod_obj, cluster) == {"node-a": SKEW, "node-o": FITS, "node-x": SKEW}
    # Ignore: zone3 counts as a domain (3 >= 3, min 0 there too, but zone3 is a real domain)
    ignoring = incoming(tsc(1, "zone", minDomains=3, nodeAffinityPolicy="Ignore"), node_selector={"disk": "ssd"})
    assert verdicts(LISTED, ignoring, cluster) == {"node-a": SKEW, "node-o": FITS, "node-x": SKEW}
    cluster_two = cluster_of(nodes, [on("node-a", "foo"), on("node-x", "foo"), on("node-o", "foo")])
    # all three domains at 1: with Ignore min is 1 and all fit; with Honor only 2 domains: min 0
    assert fitting(LISTED, ignoring, cluster_two) == {"node-a", "node-o", "node-x"}
    assert fitting(LISTED, pod_obj, cluster_two) == {"node-o"}  # zone3 uncounted: 0 + 1 - 0


# ---------------------------------------------------------------------------------- inclusion policies (filter)


def policy_cluster(*, taint_y: bool = False) -> ClusterState:
    """kube's inclusion-policy tables: node-a, node-b, node-x carry `foo`, node-y may be tainted;
    one matching pod on node-a, node-b and node-y."""
    nodes = [
        node(
            n,
            labels={"node": n, **({"foo": ""} if n != "node-y" else {})},
            taints=[TAINT] if taint_y and n == "node-y" else [],
        )
        for n in ("node-a", "node-b", "node-x", "node-y")
    ]
    return cluster_of(nodes, spread_on({"node-a": 1, "node-b": 1, "node-y": 1}, "foo"))


AFFINITY_FOO = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}]
    }
}


@pytest.mark.parametrize(
    ("pod_obj", "taint_y", "expected"),
    [
        # 1/1/0/~0~: node-y is not counted, its domain counts 0 and it fits here (NodeAffinity,
        # not this plugin, rejects it); Ignore: 1/1/0/1, only node-x
        (incoming(tsc(1, "node"), node_selector={"foo": ""}), False, {"node-x", "node-y"}),
        (incoming(tsc(1, "node", nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}), False, {"node-x"}),
        (incoming(tsc(1, "node"), affinity=AFFINITY_FOO), False, {"node-x", "node-y"}),
        (incoming(tsc(1, "node", nodeAffinityPolicy="Ignore"), affinity=AFFINITY_FOO), False, {"node-x"}),
        (incoming(tsc(1, "node", nodeTaintsPolicy="Honor")), True, {"node-x", "node-y"}),
        (incoming(tsc(1, "node")), True, {"node-x"}),  # Ignore is the default
    ],
    ids=[
        "affinity-honored-selector",
        "affinity-ignored-selector",
        "affinity-honored-terms",
        "affinity-ignored-terms",
        "taints-honored",
        "taints-ignored",
    ],
)
def test_inclusion_policies_filter(pod_obj: dict[str, Any], taint_y: bool, expected: set[str]) -> None:
    cluster = policy_cluster(taint_y=taint_y)
    verdict = verdicts(LISTED, pod_obj, cluster)
    assert {n for n, v in verdict.items() if v == FITS} == expected
    assert {n for n, v in verdict.items() if v != FITS} == {"node-a", "node-b", "node-x", "node-y"} - expected


def test_tolerated_taint_is_counted_with_taints_honored() -> None:
    cluster = policy_cluster(taint_y=True)
    tolerating = incoming(
        tsc(1, "node", nodeTaintsPolicy="Honor"),
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
    )
    assert fitting(LISTED, tolerating, cluster) == {"node-x"}


# ---------------------------------------------------------------------------------- filter, several constraints


@pytest.mark.parametrize(
    ("labels", "constraints", "pods", "expected"),
    [
        # zone allows all, node allows node-x
        ({"foo": ""}, [tsc(1, "zone"), tsc(1, "node")],
         {"node-a": ["foo"] * 2, "node-b": ["foo"], "node-y": ["foo"] * 3}, {"node-x"}),
        # zone allows zone1, node allows node-x: nothing
        ({"foo": ""}, [tsc(1, "zone"), tsc(1, "node")],
         {"node-a": ["foo"] * 2, "node-b": ["foo"], "node-y": ["foo"] * 4}, set()),
        # different selectors, spreads [1/0, 1/0/0/1]
        ({"foo": "", "bar": ""}, [tsc(1, "zone"), tsc(1, "node", selector=BAR)], {"node-a": ["foo"], "node-y": ["bar"]},
         {"node-x"}),
        # [1/0, 0/0/1/1]: zone2 vs node-a/node-b
        ({"foo": "", "bar": ""}, [tsc(1, "zone"), tsc(1, "node", selector=BAR)],
         {"node-a": ["foo"], "node-x": ["bar"], "node-y": ["bar"]}, set()),
        # [2/3, 1/0/0/1]: zone1 and node-b/node-x
        ({"foo": "", "bar": ""}, [tsc(1, "zone"), tsc(1, "node", selector=BAR)],
         {"node-a": ["foo", "foo bar"], "node-y": ["foo", "foo bar", "foo"]}, {"node-b"}),
        # the pod does not match itself on zone
        ({"bar": ""}, [tsc(1, "zone"), tsc(1, "node", selector=BAR)],
         {"node-a": ["foo"], "node-x": ["bar"], "node-y": ["bar"]}, {"node-a", "node-b"}),
    ],
)
def test_multiple_constraints(
    labels: dict[str, str], constraints: list[dict[str, Any]], pods: dict[str, list[str]], expected: set[str]
) -> None:
    existing = [on(n, *keys.split()) for n, each in pods.items() for keys in each]
    cluster = cluster_of(two_by_two(), existing)
    assert fitting(LISTED, incoming(*constraints, labels=labels), cluster) == expected


def test_multiple_constraints_node_missing_one_key() -> None:
    # [1/1, 1/0/0/1] with node-x lacking `node`: it is not counted for either constraint
    nodes = [
        zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2", node_label=False), zn("node-y", "zone2")
    ]
    cluster = cluster_of(nodes, [on("node-a", "foo"), on("node-y", "foo")])
    assert verdicts(LISTED, incoming(tsc(1, "zone"), tsc(1, "node")), cluster) == {
        "node-a": SKEW,
        "node-b": FITS,
        "node-x": MISSING,
        "node-y": SKEW,
    }


def test_the_first_failing_constraint_gives_the_reason() -> None:
    # node-x lacks `node` (second constraint) but already fails the first (zone2 too full): skew
    nodes = [
        zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2", node_label=False), zn("node-y", "zone2")
    ]
    cluster = cluster_of(nodes, spread_on({"node-y": 2}, "foo"))
    assert verdicts(LISTED, incoming(tsc(1, "zone"), tsc(1, "node")), cluster) == {
        "node-a": FITS,
        "node-b": FITS,
        "node-x": SKEW,
        "node-y": SKEW,
    }
    # the other order: node-x's missing `node` is found first
    assert verdicts(LISTED, incoming(tsc(1, "node"), tsc(1, "zone")), cluster)["node-x"] == MISSING


@pytest.mark.parametrize(
    ("constraints", "node_selector", "foo_nodes", "expected"),
    [
        # zone: honor/ignore (2/~0~), node: ignore/ignore (1/1/0/~1~)
        ([tsc(1, "zone"), tsc(1, "node", nodeAffinityPolicy="Ignore")], {"foo": ""}, "abx", {"node-x"}),
        # zone: honor/honor (2/0), node: honor/ignore (1/1/0/~1~)
        ([tsc(1, "zone", nodeTaintsPolicy="Honor"), tsc(1, "node")], None, "abx", {"node-x"}),
        # zone: honor/ignore (1/~1~), node: honor/ignore (1/0/0/~1~)
        ([tsc(1, "zone"), tsc(1, "node")], {"foo": ""}, "axy", {"node-b", "node-x"}),
        # zone: honor/honor (1/0), node: ignore/ignore (1/~1~/0/~1~)
        ([tsc(1, "zone", nodeTaintsPolicy="Honor"), tsc(1, "node", nodeAffinityPolicy="Ignore")], {"foo": ""}, "axy",
         {"node-x"}),
    ],
)
def test_multiple_constraints_with_inclusion_policies(
    constraints: list[dict[str, Any]], node_selector: dict[str, str] | None, foo_nodes: str, expected: set[str]
) -> None:
    # kube's tables: `foo` on the nodes named by their last letter; node-y tainted when it has foo or
    # no nodeSelector is used
    taint_y = "y" in foo_nodes or node_selector is None
    nodes = [
        node(n, labels={"zone": z, "node": n, **({"foo": ""} if n[-1] in foo_nodes else {})},
             taints=[TAINT] if taint_y and n == "node-y" else [])
        for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))
    ]
    cluster = cluster_of(nodes, spread_on({"node-a": 1, "node-b": 1, "node-y": 1}, "foo"))
    pod_obj = incoming(*constraints, node_selector=node_selector)
    assert fitting(LISTED, pod_obj, cluster) == expected


# ---------------------------------------------------------------------------------- reasons and the message


def test_each_node_gets_its_own_reason_in_the_message() -> None:
    # zones 1/1 plus a node without a zone; minDomains 3 > 2 domains makes the minimum 0
    nodes = [zn("node-a", "zone1"), zn("node-b", None), zn("node-x", "zone2"), zn("node-y", "zone2")]
    cluster = cluster_of(nodes, [on("node-a", "foo"), on("node-x", "foo")])
    pod_obj = incoming(tsc(1, "zone", minDomains=3))
    profile = make_profile(filters=[{"name": "PodTopologySpread"}], scores=[])
    decision = decide(profile, pod_obj, cluster)
    assert decision.message == (
        "0/4 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), "
        "3 node(s) didn't match pod topology spread constraints."
    )
    assert decision.reasons == {MISSING: 1, SKEW: 3}
    info = parse_pod(pod_obj)
    all_slots = np.asarray(sorted(cluster.index.values()))
    assert SPREAD.reason_counts(info, cluster, all_slots) == Counter({SKEW: 3, MISSING: 1})


def test_other_filters_reject_first() -> None:
    nodes = [node("node-a", labels={"zone": "zone1"}, unschedulable=True), zn("node-b", None), zn("node-x", "zone2")]
    cluster = cluster_of(nodes, [on("node-x", "foo"), on("node-x", "foo")])
    profile = make_profile(filters=[{"name": "NodeUnschedulable"}, {"name": "PodTopologySpread"}], scores=[])
    decision = decide(profile, incoming(tsc(1, "zone")), cluster)
    # kube sorts the "count reason" strings: the shorter reason, a prefix of the longer, first
    assert decision.message == f"0/3 nodes are available: 1 {SKEW}, 1 {MISSING}, 1 node(s) were unschedulable."


def test_pod_without_constraints_or_defaults_is_not_filtered() -> None:
    cluster = cluster_of(two_by_two(), spread_on({"node-a": 5}, "foo"))
    assert SPREAD.filter(parse_pod(pod("p", labels={"foo": ""})), cluster) is None
    # ScheduleAnyway constraints do not filter
    assert LISTED.filter(parse_pod(incoming(tsc(1, "zone", "ScheduleAnyway"))), cluster) is None


# ---------------------------------------------------------------------------------- counting changes


def test_assumed_pods_count_and_deleted_pods_stop_counting() -> None:
    cluster = cluster_of(two_by_two(), [on("node-a", "foo", name="a1")])
    info = parse_pod(incoming(tsc(1, "zone")))
    assert fitting(LISTED, info, cluster) == {"node-x", "node-y"}
    cluster.assume(parse_pod(pod("assumed", labels={"foo": ""})), "node-x")
    assert fitting(LISTED, info, cluster) == {"node-a", "node-b", "node-x", "node-y"}  # same PodInfo: 1/1
    cluster.assume(parse_pod(pod("assumed-2", labels={"foo": ""})), "node-y")
    assert fitting(LISTED, info, cluster) == {"node-a", "node-b"}
    cluster.forget("default/assumed-2")
    cluster.remove_pod("default/a1")
    assert fitting(LISTED, info, cluster) == {"node-a", "node-b"}  # 0/1 now
    cluster.remove_pod("default/assumed")
    assert fitting(LISTED, info, cluster) == {"node-a", "node-b", "node-x", "node-y"}


def test_a_pod_marked_for_deletion_stops_counting() -> None:
    cluster = cluster_of(two_by_two(), [on("node-a", "foo", name="a1")])
    info = parse_pod(incoming(tsc(1, "zone")))
    assert fitting(LISTED, info, cluster) == {"node-x", "node-y"}
    cluster.add_pod(parse_pod(pod("a1", labels={"foo": ""}, node_name="node-a", deleting=True)))
    assert fitting(LISTED, info, cluster) == {"node-a", "node-b", "node-x", "node-y"}


def test_node_label_changes_move_the_domains() -> None:
    cluster = cluster_of(two_by_two(), spread_on({"node-a": 1}, "foo"))
    info = parse_pod(incoming(tsc(1, "zone")))
    assert fitting(LISTED, info, cluster) == {"node-x", "node-y"}
    from placer.engine.parsing import parse_node

    cluster.upsert_node(parse_node(zn("node-a", "zone2")))  # zone1: node-b (0), zone2: a, x, y (1)
    assert fitting(LISTED, info, cluster) == {"node-b"}
    cluster.remove_node("node-b")  # zone2 is the only domain: min 1
    assert fitting(LISTED, info, cluster) == {"node-a", "node-x", "node-y"}


def test_events() -> None:
    assert PodTopologySpread.events == frozenset({ClusterEvent.NODE, ClusterEvent.POD, "Service", "ReplicaSet",
                                                  "StatefulSet"})
    assert ClusterEvent.matches("Pod/Delete", PodTopologySpread.events)
    assert ClusterEvent.matches("Service", PodTopologySpread.events)


# ---------------------------------------------------------------------------------- score (kube's scoring_test.go)


def hosts(*names: str) -> list[dict[str, Any]]:
    """Nodes with only the hostname label."""
    return [node(n) for n in names]


def host(key_count: dict[str, int]) -> list[dict[str, Any]]:
    return spread_on(key_count, "foo")


ABCD = ("node-a", "node-b", "node-c", "node-d")


@pytest.mark.parametrize(
    ("max_skew", "existing", "candidates", "expected"),
    [
        (1, {}, ("node-a", "node-b"), {"node-a": 100, "node-b": 100}),
        (1, {"node-a": 2, "node-b": 1}, ("node-a",), {"node-a": 100}),  # one candidate
        (1, {"node-a": 1, "node-b": 1}, ("node-a", "node-b"), {"node-a": 100, "node-b": 100}),
        (1, {"node-a": 2, "node-b": 1, "node-d": 3}, ABCD, {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
        (2, {"node-a": 2, "node-b": 1, "node-d": 3}, ABCD, {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
        (3, {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}, ABCD,
         {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ],
)
def test_score_one_hostname_constraint(
    max_skew: int, existing: dict[str, int], candidates: tuple[str, ...], expected: dict[str, int]
) -> None:
    names = sorted({*candidates, *existing})
    cluster = cluster_of(hosts(*names), host(existing))
    pod_obj = incoming(tsc(max_skew, HOSTNAME, "ScheduleAnyway"))
    assert scores(SPREAD, pod_obj, cluster, list(candidates)) == expected


def test_score_null_selector_scores_all_100() -> None:
    cluster = cluster_of(hosts(*ABCD), host({"node-a": 2, "node-b": 1, "node-d": 3}))
    pod_obj = incoming(tsc(1, HOSTNAME, "ScheduleAnyway", selector=None))
    assert scores(SPREAD, pod_obj, cluster) == dict.fromkeys(ABCD, 100)


def test_score_system_defaults_nodes_without_zone_pods_of_a_service() -> None:
    cluster = cluster_of(
        hosts(*ABCD), host({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}), objects=[service("s", {"foo": ""})]
    )
    # the same scores as one hostname constraint with maxSkew 3
    assert scores(SPREAD, pod("p", labels={"foo": ""}), cluster) == {
        "node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100
    }


def test_score_three_of_four_candidates() -> None:
    # 4/2/1/~3~
    cluster = cluster_of(
        hosts("node-a", "node-b", "node-x", "node-y"), host({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
    )
    pod_obj = incoming(tsc(1, HOSTNAME, "ScheduleAnyway"))
    assert scores(SPREAD, pod_obj, cluster, ["node-a", "node-b", "node-x"]) == {
        "node-a": 33, "node-b": 83, "node-x": 100
    }


def test_score_candidate_without_the_key_is_ignored() -> None:
    # 4/?2?/1/~3~: node-b has no hostname label
    nodes = [node("node-a"), node("node-b", labels={"n": "node-b"}, hostname_label=False), node("node-x"),
             node("node-y")]
    cluster = cluster_of(nodes, host({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}))
    pod_obj = incoming(tsc(1, HOSTNAME, "ScheduleAnyway"))
    candidates = ["node-a", "node-b", "node-x"]
    assert raw_scores(SPREAD, pod_obj, cluster, candidates)["node-b"] == -1
    assert scores(SPREAD, pod_obj, cluster, candidates) == {"node-a": 16, "node-b": 0, "node-x": 100}


def zoned(*specs: tuple[str, str]) -> list[dict[str, Any]]:
    return [node(n, labels={"zone": z}) for n, z in specs]


AB_XY = (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


def test_score_zone_constraint_three_of_four_candidates() -> None:
    cluster = cluster_of(zoned(*AB_XY), host({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}))
    pod_obj = incoming(tsc(1, "zone", "ScheduleAnyway"))
    # zone2 counts node-y too, though it is not a candidate
    assert scores(SPREAD, pod_obj, cluster, ["node-a", "node-b", "node-x"]) == {
        "node-a": 75, "node-b": 75, "node-x": 100
    }


def test_score_zone_and_node_two_of_four_candidates() -> None:
    # 2/~1~/2/~4~
    cluster = cluster_of(zoned(*AB_XY), host({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}))
    pod_obj = incoming(tsc(1, "zone", "ScheduleAnyway"), tsc(1, HOSTNAME, "ScheduleAnyway"))
    assert scores(SPREAD, pod_obj, cluster, ["node-a", "node-x"]) == {"node-a": 100, "node-x": 63}


@pytest.mark.parametrize(
    ("existing", "candidates", "expected"),
    [
        # zone (foo): 2/2/1/1; node (bar): 0/1/0/1
        ({"node-a": ["foo"], "node-b": ["foo bar"], "node-y": ["foo", "bar"]}, None,
         {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}),
        # zone: 0/0/2/2; node: 0/1/0/1
        ({"node-b": ["bar"], "node-x": ["foo"], "node-y": ["foo bar"]}, None,
         {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}),
        # 2/2/1/~1~ and 0/1/0/~1~
        ({"node-a": ["foo"], "node-b": ["foo bar"], "node-y": ["foo", "bar"]}, ["node-a", "node-b", "node-x"],
         {"node-a": 50, "node-b": 25, "node-x": 100}),
    ],
)
def test_score_zone_and_node_with_different_selectors(
    existing: dict[str, list[str]], candidates: list[str] | None, expected: dict[str, int]
) -> None:
    pods = [on(n, *keys.split()) for n, each in existing.items() for keys in each]
    cluster = cluster_of(zoned(*AB_XY), pods)
    pod_obj = incoming(
        tsc(1, "zone", "ScheduleAnyway"), tsc(1, HOSTNAME, "ScheduleAnyway", selector=BAR),
        labels={"foo": "", "bar": ""},
    )
    assert scores(SPREAD, pod_obj, cluster, candidates) == expected


def test_score_other_namespaces_and_terminating_pods_do_not_count() -> None:
    cluster = cluster_of(
        hosts("node-a", "node-b"),
        [on("node-a", "foo", namespace="ns1"), on("node-a", "foo"), on("node-b", "foo"), on("node-b", "foo")],
    )
    pod_obj = incoming(tsc(1, HOSTNAME, "ScheduleAnyway"))
    assert scores(SPREAD, pod_obj, cluster) == {"node-a": 100, "node-b": 33}
    cluster = cluster_of(hosts("node-a", "node-b"), [on("node-a", "foo", deleting=True), on("node-b", "foo")])
    assert scores(SPREAD, pod_obj, cluster) == {"node-a": 100, "node-b": 0}


@pytest.mark.parametrize(
    ("constraint", "pod_extra", "taint_c", "expected"),
    [
        (tsc(1, "node", "ScheduleAnyway"), {"node_selector": {"foo": ""}}, False, (0, 33, 100)),
        (tsc(1, "node", "ScheduleAnyway", nodeAffinityPolicy="Ignore"), {"node_selector": {"foo": ""}}, False,
         (66, 100, 100)),
        (tsc(1, "node", "ScheduleAnyway"), {"affinity": AFFINITY_FOO}, False, (0, 33, 100)),
        (tsc(1, "node", "ScheduleAnyway", nodeAffinityPolicy="Ignore"), {"affinity": AFFINITY_FOO}, False,
         (66, 100, 100)),
        (tsc(1, "node", "ScheduleAnyway", nodeTaintsPolicy="Honor"), {}, True, (0, 33, 100)),
        (tsc(1, "node", "ScheduleAnyway"), {}, True, (66, 100, 100)),
    ],
    ids=["affinity-honored-selector", "affinity-ignored-selector", "affinity-honored-terms", "affinity-ignored-terms",
         "taints-honored", "taints-ignored"],
)
def test_score_inclusion_policies(
    constraint: dict[str, Any], pod_extra: dict[str, Any], taint_c: bool, expected: tuple[int, int, int]
) -> None:
    nodes = [
        node("node-a", labels={"node": "node-a", "foo": ""}),
        node("node-b", labels={"node": "node-b", "foo": ""}),
        node("node-c", labels={"node": "node-c"}, taints=[TAINT] if taint_c else []),
    ]
    cluster = cluster_of(nodes, host({"node-a": 2, "node-b": 1, "node-c": 1}))
    pod_obj = incoming(constraint, **pod_extra)
    assert scores(SPREAD, pod_obj, cluster) == dict(zip(("node-a", "node-b", "node-c"), expected, strict=True))


@pytest.mark.parametrize(
    ("constraints", "existing"),
    [
        # matchLabelKeys ANDed with an empty labelSelector
        ([tsc(1, "zone", "ScheduleAnyway", selector={}, matchLabelKeys=["foo"]),
          tsc(1, HOSTNAME, "ScheduleAnyway", selector={}, matchLabelKeys=["bar"])],
         {"node-a": ["foo"], "node-b": ["foo bar"], "node-c": ["foo", "bar"]}),
        # ... and with a non-empty one
        ([tsc(1, "zone", "ScheduleAnyway"), tsc(1, HOSTNAME, "ScheduleAnyway", selector=BAR, matchLabelKeys=["baz"])],
         {"node-a": ["foo"], "node-b": ["foo bar baz"], "node-c": ["foo", "bar", "bar baz"]}),
    ],
)
def test_score_match_label_keys(constraints: list[dict[str, Any]], existing: dict[str, list[str]]) -> None:
    pods = [on(n, *keys.split()) for n, each in existing.items() for keys in each]
    nodes = zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2"))
    cluster = cluster_of(nodes, pods)
    pod_obj = incoming(*constraints, labels={"foo": "", "bar": "", "baz": ""})
    assert scores(SPREAD, pod_obj, cluster) == {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}


def test_match_label_keys_select_by_the_pods_own_value() -> None:
    # the pod of revision 2 spreads only against revision 2
    pods = [pod(f"old-{i}", labels={"app": "web", "rev": "1"}, node_name="node-a") for i in range(3)]
    cluster = cluster_of(two_by_two(), pods)
    new = pod("p", labels={"app": "web", "rev": "2"},
              spread=[tsc(1, "zone", selector={"matchLabels": {"app": "web"}}, matchLabelKeys=["rev"])])
    assert fitting(LISTED, new, cluster) == {"node-a", "node-b", "node-x", "node-y"}
    without = pod(
        "p", labels={"app": "web", "rev": "2"}, spread=[tsc(1, "zone", selector={"matchLabels": {"app": "web"}})]
    )
    assert fitting(LISTED, without, cluster) == {"node-x", "node-y"}


def test_score_raw_values_and_rounding() -> None:
    # 2/1/0/3 on 4 hostnames: count * log(6), maxSkew 1, rounded half away from zero
    cluster = cluster_of(hosts(*ABCD), host({"node-a": 2, "node-b": 1, "node-d": 3}))
    raw = raw_scores(SPREAD, incoming(tsc(1, HOSTNAME, "ScheduleAnyway")), cluster)
    assert raw == {"node-a": round(2 * math.log(6)), "node-b": 2, "node-c": 0, "node-d": 5}
    assert go_round(np.asarray([0.5, 1.5, 2.5, -0.5, 0.49999999999999994, 2.4999999])).tolist() == [1, 2, 3, -1, 0, 2]


def test_normalize_ignores_invalid_scores() -> None:
    assert SPREAD.normalize(np.asarray([-1, -1])).tolist() == [0, 0]
    assert SPREAD.normalize(np.asarray([0, -1, 0])).tolist() == [100, 0, 100]
    assert SPREAD.normalize(np.asarray([6, -1, 1])).tolist() == [16, 0, 100]


def test_pre_score_skips_pods_without_soft_constraints() -> None:
    cluster = cluster_of(hosts("node-a", "node-b"))
    # only DoNotSchedule constraints: no defaults either
    hard_only = parse_pod(incoming(tsc(1, HOSTNAME)))
    assert SPREAD.pre_score(hard_only, cluster) is False
    # List defaulting without default constraints
    assert LISTED.pre_score(parse_pod(pod("p", labels={"foo": ""})), cluster) is False
    profile = make_profile(filters=[], scores=[{"name": "PodTopologySpread", "weight": 2}])
    decision = decide(profile, hard_only, cluster)
    assert {s.plugins["PodTopologySpread"] for s in decision.top} == {0}


# ---------------------------------------------------------------------------------- default constraints


def test_system_defaults_with_a_replica_set_and_nodes_without_zone() -> None:
    # kube: "Nodes with no zone are not excluded. They are considered a separate zone." The zone
    # constraint's weight is log(2 + 2) (mars and ""), the hostname one log(4 + 2); nodes without a
    # zone get no zone term
    nodes = [
        node("node-a", labels={ZONE: "mars"}),
        node("node-b", labels={ZONE: "mars"}),
        node("node-c"),
        node("node-d"),
    ]
    pods = [on("node-a", "foo"), on("node-a", "foo"), on("node-c", "foo")]
    rs1 = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs1", "namespace": "default"},
           "spec": {"selector": FOO}}
    cluster = cluster_of(nodes, pods, objects=[rs1])
    pod_obj = pod("p", labels={"foo": "tar", "baz": "sup"}, owner=("ReplicaSet", "rs1"))
    weight_host, weight_zone = math.log(6), math.log(4)
    expected_raw = {
        "node-a": 2 * weight_host + 2 + 2 * weight_zone + 4,
        "node-b": 0 + 2 + 2 * weight_zone + 4,
        "node-c": 1 * weight_host + 2,
        "node-d": 2.0,
    }
    assert raw_scores(SPREAD, pod_obj, cluster) == {n: math.floor(v + 0.5) for n, v in expected_raw.items()}
    assert scores(SPREAD, pod_obj, cluster) == {"node-a": 16, "node-b": 41, "node-c": 83, "node-d": 100}
    # no DoNotSchedule defaults in System
    assert SPREAD.filter(parse_pod(pod_obj), cluster) is None


def test_pod_without_service_or_controller_has_no_defaults() -> None:
    cluster = cluster_of(hosts("node-a", "node-b"), host({"node-a": 3}), objects=[service("other", {"app": "x"})])
    lone = parse_pod(pod("p", labels={"foo": ""}))
    assert SPREAD.pre_score(lone, cluster) is False
    # a Service without a selector selects nothing (not everything)
    cluster = cluster_of(hosts("node-a", "node-b"), host({"node-a": 3}), objects=[service("headless", None)])
    assert SPREAD.pre_score(parse_pod(pod("p", labels={"foo": ""})), cluster) is False
    # a Service of another namespace does not select it
    cluster = cluster_of(hosts("node-a", "node-b"), host({"node-a": 3}), objects=[service("s", {"foo": ""}, "ns1")])
    assert SPREAD.pre_score(parse_pod(pod("p", labels={"foo": ""})), cluster) is False


@pytest.mark.parametrize(
    ("owner", "objects", "applies"),
    [
        (("ReplicaSet", "rs1"), [replica_set("rs1", {"foo": ""})], True),
        (("StatefulSet", "ss1"), [stateful_set("ss1", {"foo": ""})], True),
        (("ReplicaSet", "rs2"), [replica_set("rs1", {"foo": ""})], False),  # not in the catalog
        (("ReplicaSet", "rs1"), [replica_set("rs1", {"foo": ""}, namespace="ns1")], False),
        (("StatefulSet", "rs1"), [replica_set("rs1", {"foo": ""})], False),  # kind mismatch
        (("ReplicationController", "rc1"), [], False),  # not in the catalog: ignored
    ],
)
def test_default_selector_from_the_controller(owner: tuple[str, str], objects: list[Any], applies: bool) -> None:
    cluster = cluster_of(hosts("node-a", "node-b"), host({"node-a": 2}), objects=objects)
    pod_obj = pod("p", labels={"foo": ""}, owner=owner)
    assert SPREAD.pre_score(parse_pod(pod_obj), cluster) is applies
    if applies:
        # hostname maxSkew 3: a = round(2 log 4 + 2) = 5, b = 2 -> 100 * (7 - 5) / 5 = 40
        assert scores(SPREAD, pod_obj, cluster) == {"node-a": 40, "node-b": 100}


def test_default_selector_is_the_and_of_services_and_the_controller() -> None:
    objects = [
        service("web", {"app": "web"}),
        service("all", {"tier": "front"}),
        service("other", {"app": "db"}),
        replica_set("rs1", {"rev": "1"}),
    ]
    nodes = hosts("node-a", "node-b")
    labels = {"app": "web", "tier": "front", "rev": "1"}
    pods = [
        pod("full", labels=labels, node_name="node-a"),
        pod("no-rev", labels={"app": "web", "tier": "front"}, node_name="node-b"),
        pod("no-tier", labels={"app": "web", "rev": "1"}, node_name="node-b"),
    ]
    cluster = cluster_of(nodes, pods, objects=objects)
    pod_obj = pod("p", labels=labels, owner=("ReplicaSet", "rs1"))
    # only "full" matches app=web,tier=front,rev=1: node-a 1, node-b 0
    raw = raw_scores(SPREAD, pod_obj, cluster)
    assert raw == {"node-a": round(math.log(4) + 2), "node-b": 2}
    from placer.plugins.pod_topology_spread import default_selector

    selector = default_selector(parse_pod(pod_obj), cluster.catalog)
    assert str(selector) == "app=web,rev=1,tier=front"


def test_default_selector_follows_catalog_changes() -> None:
    cluster = cluster_of(hosts("node-a", "node-b"), host({"node-a": 2}))
    info = parse_pod(pod("p", labels={"foo": ""}))
    assert SPREAD.pre_score(info, cluster) is False
    upsert_object(cluster.catalog, KINDS_BY_NAME["Service"], service("s", {"foo": ""}))
    assert SPREAD.pre_score(info, cluster) is True
    cluster.catalog.remove("Service", "default", "s")
    assert SPREAD.pre_score(parse_pod(pod("p", labels={"foo": ""})), cluster) is False


def test_own_constraints_replace_the_defaults() -> None:
    cluster = cluster_of(hosts("node-a", "node-b"), host({"node-a": 2}), objects=[service("s", {"foo": ""})])
    # a DoNotSchedule constraint of its own: no soft constraints, defaults not used
    assert SPREAD.pre_score(parse_pod(incoming(tsc(5, HOSTNAME))), cluster) is False


LIST_HARD_ZONE = {
    "defaultingType": "List",
    "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
}


def test_list_defaulting_with_a_do_not_schedule_default() -> None:
    plugin = make_plugin("PodTopologySpread", LIST_HARD_ZONE)
    nodes = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", None)]
    cluster = cluster_of(nodes, [on("node-a", "foo")], objects=[replica_set("rs1", {"foo": ""})])
    owned = pod("p", labels={"foo": ""}, owner=("ReplicaSet", "rs1"))
    assert verdicts(plugin, owned, cluster) == {"node-a": SKEW, "node-b": SKEW, "node-x": FITS, "node-y": MISSING}
    assert plugin.pre_score(parse_pod(owned), cluster) is False  # no ScheduleAnyway default
    # without a Service or controller: no defaults, no filtering
    assert plugin.filter(parse_pod(pod("p", labels={"foo": ""})), cluster) is None
    # with constraints of its own the defaults are not used
    assert fitting(plugin, pod("p", labels={"foo": ""}, owner=("ReplicaSet", "rs1"),
                               spread=[tsc(1, "node", "ScheduleAnyway")]), cluster) == {
        "node-a", "node-b", "node-x", "node-y"
    }
    profile = make_profile(filters=[{"name": "PodTopologySpread", "args": LIST_HARD_ZONE}], scores=[])
    assert decide(profile, owned, cluster).node == "node-x"


def test_list_defaulting_requires_all_keys_when_scoring() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
    }
    plugin = make_plugin("PodTopologySpread", args)
    nodes = [zn("node-a", "zone1"), zn("node-b", "zone2"), zn("node-c", None)]
    cluster = cluster_of(nodes, [on("node-a", "foo")], objects=[service("s", {"foo": ""})])
    pod_obj = pod("p", labels={"foo": ""})
    assert raw_scores(plugin, pod_obj, cluster) == {"node-a": round(math.log(4)), "node-b": 0, "node-c": -1}
    assert scores(plugin, pod_obj, cluster) == {"node-a": 0, "node-b": 100, "node-c": 0}
    # System defaulting does not ignore node-c (it would get hostname spreading)
    system = cluster_of(
        [node("node-a", labels={ZONE: "zone1"}), node("node-b", labels={ZONE: "zone2"}), node("node-c")],
        [on("node-a", "foo")], objects=[service("s", {"foo": ""})],
    )
    assert min(raw_scores(SPREAD, pod_obj, system).values()) >= 0


# ---------------------------------------------------------------------------------- args


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]},
         "args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector"),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
         'args.defaultConstraints: Duplicate value: "{zone, DoNotSchedule}"'),
        ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
         'args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
         "args.defaultConstraints[0].maxSkew: Input should be greater than or equal to 1"),
        ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
         "args.defaultConstraints[0].topologyKey: Field required"),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]},
         "args.defaultConstraints[0].whenUnsatisfiable: Input should be 'DoNotSchedule' or 'ScheduleAnyway'"),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "-zone", "whenUnsatisfiable": "DoNotSchedule"}]},
         'args.defaultConstraints[0].topologyKey: Invalid value: "-zone"'),
        ({"defaultingType": "Custom"}, "args.defaultingType: Input should be 'System' or 'List'"),
        ({"maxSkew": 1}, "args.maxSkew: Extra inputs are not permitted"),
    ],
)
def test_bad_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        make_profile(filters=[{"name": "PodTopologySpread", "args": args}], name="spread")
    assert str(caught.value).startswith('profile "spread": filters[0] PodTopologySpread: ')
    assert message in str(caught.value)


def test_good_args() -> None:
    for args in ({}, {"defaultingType": "System"}, {"defaultingType": "List"}, LIST_HARD_ZONE,
                 {"defaultingType": "System", "defaultConstraints": []}):
        profile = make_profile(
            filters=[{"name": "PodTopologySpread", "args": args}], scores=[{"name": "PodTopologySpread", "args": args}]
        )
        assert [p.name for p in profile.filters] == ["PodTopologySpread"]


# ---------------------------------------------------------------------------------- end to end


def test_spreads_a_deployment_over_zones() -> None:
    nodes = [node(f"{zone}-{i}", labels={ZONE: zone}) for zone in ("a", "b", "c") for i in range(2)]
    cluster = cluster_of(nodes)
    profile = make_profile(
        filters=[{"name": "PodTopologySpread"}], scores=[{"name": "PodTopologySpread"}], percentage=100
    )
    per_zone: Counter[str] = Counter()
    for i in range(9):
        obj = pod(f"web-{i}", labels={"app": "web"},
                  spread=[tsc(1, ZONE, selector={"matchLabels": {"app": "web"}}),
                          tsc(1, HOSTNAME, "ScheduleAnyway", selector={"matchLabels": {"app": "web"}})])
        decision = decide(profile, obj, cluster)
        assert decision.node is not None
        cluster.assume(parse_pod(obj), decision.node)
        per_zone[decision.node.split("-")[0]] += 1
        assert max(per_zone.values()) - min(per_zone.get(z, 0) for z in "abc") <= 1
    assert per_zone == {"a": 3, "b": 3, "c": 3}
    per_node = Counter(record.node for record in cluster.pods.values())
    assert sorted(per_node.values()) == [1, 1, 1, 2, 2, 2]  # hostname spreading within the zones


# ---------------------------------------------------------------------------------- brute force


def reference(pod_obj: dict[str, Any], cluster: ClusterState,
              candidates: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """kube's algorithm, node by node and pod by pod, for pods with their own constraints."""
    info = parse_pod(pod_obj)
    nodes = {name: cluster.node(name) for name in cluster.index}

    def count(node_name: str, c: Any) -> int:
        if c.selector.empty:
            return 0
        return sum(
            1 for r in cluster.pods_on(node_name)
            if not r.pod.deleting and r.pod.namespace == info.namespace and c.selector.matches(r.pod.labels)
        )

    def affinity_ok(n: Any) -> bool:
        if any(n.labels.get(k) != v for k, v in info.node_selector.items()):
            return False
        if info.required_terms is None:
            return True
        for term in info.required_terms:
            if not term.expressions and not term.fields:
                continue
            ok = True
            for r in term.expressions:
                value = n.labels.get(r.key)
                if r.operator == "In":
                    ok &= value in r.values
                elif r.operator == "NotIn":
                    ok &= value not in r.values
                elif r.operator == "Exists":
                    ok &= value is not None
                elif r.operator == "DoesNotExist":
                    ok &= value is None
                else:
                    raise AssertionError(r.operator)
            if ok:
                return True
        return False

    def included(n: Any, c: Any) -> bool:
        if c.node_affinity_policy == "Honor" and not affinity_ok(n):
            return False
        if c.node_taints_policy == "Honor":
            for taint in n.taints:
                hard = taint.effect in ("NoSchedule", "NoExecute")
                if hard and not any(t.tolerates(taint) for t in info.tolerations):
                    return False
        return True

    hard = [c for c in info.spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
    tp: list[dict[str, int]] = [{} for _ in hard]
    for name, n in nodes.items():
        if not all(c.topology_key in n.labels for c in hard):
            continue
        for i, c in enumerate(hard):
            if included(n, c):
                value = n.labels[c.topology_key]
                tp[i][value] = tp[i].get(value, 0) + count(name, c)
    verdict = {}
    for name, n in nodes.items():
        verdict[name] = FITS
        for i, c in enumerate(hard):
            if c.topology_key not in n.labels:
                verdict[name] = MISSING
                break
            minimum = min(tp[i].values()) if len(tp[i]) >= c.min_domains else 0
            own = 1 if c.selector.matches(info.labels) else 0
            if tp[i].get(n.labels[c.topology_key], 0) + own - minimum > c.max_skew:
                verdict[name] = SKEW
                break

    soft = [c for c in info.spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
    ignored = {name for name in candidates if not all(c.topology_key in nodes[name].labels for c in soft)}
    sizes = []
    tv: list[dict[str, float]] = [{} for _ in soft]
    for i, c in enumerate(soft):
        if c.topology_key == HOSTNAME:
            sizes.append(len(candidates) - len(ignored))
            continue
        for name in candidates:
            if name not in ignored:
                tv[i].setdefault(nodes[name].labels.get(c.topology_key, ""), 0)
        sizes.append(len(tv[i]))
    for name, n in nodes.items():
        if not all(c.topology_key in n.labels for c in soft):
            continue
        for i, c in enumerate(soft):
            value = n.labels.get(c.topology_key, "")
            if c.topology_key != HOSTNAME and included(n, c) and value in tv[i]:
                tv[i][value] += count(name, c)
    raw = {}
    for name in candidates:
        if name in ignored:
            raw[name] = -1
            continue
        total = 0.0
        n = nodes[name]
        for i, c in enumerate(soft):
            if c.topology_key in n.labels:
                cnt = count(name, c) if c.topology_key == HOSTNAME else tv[i][n.labels[c.topology_key]]
                total += cnt * math.log(sizes[i] + 2) + (c.max_skew - 1)
        raw[name] = int(go_round(np.asarray([total]))[0])
    return verdict, raw


def random_case(rng: random.Random) -> tuple[ClusterState, list[dict[str, Any]], list[str]]:
    nodes = []
    for i in range(rng.randint(1, 14)):
        labels = {}
        if rng.random() < 0.85:
            labels["zone"] = rng.choice(["z1", "z2", "z3"])
        if rng.random() < 0.8:
            labels["rack"] = rng.choice(["r1", "r2", "r3", "r4"])
        if rng.random() < 0.5:
            labels["disk"] = "ssd"
        taints = [TAINT] if rng.random() < 0.2 else []
        nodes.append(node(f"n{i}", labels=labels, taints=taints, hostname_label=rng.random() < 0.9))
    names = [n["metadata"]["name"] for n in nodes]
    pods = []
    for j in range(rng.randint(0, 40)):
        labels = {k: "" for k in ("foo", "bar") if rng.random() < 0.5}
        pods.append(pod(f"e{j}", labels=labels, node_name=rng.choice(names), namespace=rng.choice(["default", "ns1"]),
                        deleting=rng.random() < 0.1))
    cluster = cluster_of(nodes, pods)
    constraints = []
    for key in rng.sample(["zone", "rack", HOSTNAME], rng.randint(1, 3)):
        for when in ("DoNotSchedule", "ScheduleAnyway"):
            if rng.random() < 0.6:
                extra: dict[str, Any] = {}
                if when == "DoNotSchedule" and rng.random() < 0.3:
                    extra["minDomains"] = rng.randint(1, 4)
                if rng.random() < 0.3:
                    extra["nodeAffinityPolicy"] = "Ignore"
                if rng.random() < 0.3:
                    extra["nodeTaintsPolicy"] = "Honor"
                selector = rng.choice([FOO, BAR, None, {}, {"matchLabels": {"foo": ""}}])
                constraints.append(tsc(rng.randint(1, 3), key, when, selector=selector, **extra))
    candidates = sorted(rng.sample(names, rng.randint(1, len(names))))
    return cluster, constraints, candidates


@pytest.mark.parametrize("seed", range(60))
def test_matches_a_brute_force_reference(seed: int) -> None:
    rng = random.Random(seed)
    cluster, constraints, candidates = random_case(rng)
    if not constraints:
        constraints = [tsc(1, "zone")]
    extra: dict[str, Any] = {}
    if rng.random() < 0.4:
        extra["node_selector"] = {"disk": "ssd"}
    if rng.random() < 0.3:
        extra["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    pod_obj = pod("p", labels={k: "" for k in ("foo", "bar") if rng.random() < 0.6}, spread=constraints, **extra)
    info = parse_pod(pod_obj)
    assert info.error is None, info.error
    want_verdicts, want_raw = reference(pod_obj, cluster, candidates)
    assert verdicts(SPREAD, info, cluster) == want_verdicts
    if SPREAD.pre_score(info, cluster):
        assert raw_scores(SPREAD, info, cluster, candidates) == want_raw
    else:
        assert not any(c["whenUnsatisfiable"] == "ScheduleAnyway" for c in constraints)

