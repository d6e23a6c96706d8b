"""The engine's shortcuts against the plain computations they replace: each must give the same
answer to the bit (the scan of the nodes to score, the best candidate, one-node topology domains,
the existing pods' terms matching a pod, the candidates' allocatable block, the column-major node
tables), on random inputs and after the cluster changes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from placer.engine.cluster import CPU, MEMORY, ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.matching import PodTerms, TermRole
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.runtime import Scheduler, Weighed, nodes_to_find
from placer.testing import affinity_term, cluster_of, make_profile, namespace, node, pod

ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")


def zoned_cluster(count: int, rng: random.Random) -> ClusterState:
    """Nodes spread unevenly over zones, so the node-tree order interleaves zones of several sizes."""
    return cluster_of([
        node(f"n{i:04}", labels={"topology.kubernetes.io/zone": rng.choice(ZONES)}) for i in range(count)
    ])


def reference_nodes_to_score(
    feasible: np.ndarray, percentage: int, cluster: ClusterState, start_index: int, allowed: np.ndarray | None
) -> tuple[np.ndarray, int]:
    """kube's scan as first written here: rotate the whole order, take the first feasible nodes."""
    all_nodes = cluster.node_count
    order = cluster.scan_order()
    count = all_nodes
    if allowed is not None:
        order = order[allowed[order]]
        count = int(order.size)
        if count == 0:
            return order, start_index
    start = start_index % count
    rotated = np.concatenate((order[start:], order[:start])) if start else order
    positions = np.flatnonzero(feasible[rotated])
    wanted = nodes_to_find(percentage, count)
    if positions.size > wanted:
        examined = int(positions[wanted])
        positions = positions[:wanted]
    else:
        examined = count
    return rotated[positions], (start_index + examined) % all_nodes


@pytest.mark.parametrize("count", [100, 150, 300, 1000])
def test_nodes_to_score_is_the_full_scan(count: int) -> None:
    rng = random.Random(count)
    cluster = zoned_cluster(count, rng)
    incoming = parse_pod(pod("p"))
    for trial in range(300):
        percentage = rng.choice((0, 0, 0, 10, 50, 100))
        density = rng.choice((0.0, 0.05, 0.3, 0.5, 0.9, 1.0))
        feasible = np.asarray([rng.random() < density for _ in range(cluster.size)], dtype=bool)
        allowed = None
        if trial % 5 == 0:
            allowed = np.asarray([rng.random() < 0.6 for _ in range(cluster.size)], dtype=bool)
        scheduler = Scheduler()
        scheduler.next_start_index = rng.randrange(count)
        expected, next_index = reference_nodes_to_score(
            feasible, percentage, cluster, scheduler.next_start_index, allowed
        )
        profile = make_profile(percentage=percentage)
        got = scheduler._nodes_to_score(feasible, profile, cluster, count, incoming, allowed)
        assert got.tolist() == expected.tolist(), (trial, percentage, density)
        assert scheduler.next_start_index == next_index, (trial, percentage, density)


def test_best_is_the_first_of_the_order() -> None:
    rng = np.random.default_rng(3)
    for _ in range(500):
        size = int(rng.integers(1, 60))
        ranks = rng.permutation(size + 10).astype(np.int64)
        slots = rng.permutation(size + 10)[:size].astype(np.int64)
        totals = rng.integers(0, int(rng.integers(1, 5)), size).astype(np.int64)  # many ties
        weighed = Weighed(slots, totals, [], ranks)
        best = weighed.best()
        assert best == int(np.lexsort((ranks[slots], -totals))[0])
        assert best == int(weighed.order[0])


def domains_cluster() -> ClusterState:
    """Hostnames (one node each), a node without one, a node removed, and zones (several each)."""
    nodes = [node(f"n{i}", labels={"zone": f"z{i % 3}"}) for i in range(12)]
    nodes.append(node("bare", labels={"zone": "z0"}, hostname_label=False))
    cluster = cluster_of(nodes)
    cluster.remove_node("n4")
    return cluster


@pytest.mark.parametrize("key", ["kubernetes.io/hostname", "zone", "absent"])
def test_domain_shortcuts_are_totals_spread_back(key: str) -> None:
    rng = np.random.default_rng(11)
    for cluster in (domains_cluster(), cluster_of([node(f"n{i}") for i in range(9)])):
        domains = cluster.domains(key)
        for _ in range(50):
            per_slot = (rng.integers(0, 3, cluster.capacity) * (rng.random(cluster.capacity) < 0.3)).astype(np.int32)
            occupied = domains.spread(domains.totals(per_slot) > 0, missing=False)
            assert np.array_equal(domains.occupied(per_slot), occupied)
            for weight in (1, -3, 100):
                totals = domains.totals(per_slot)
                expected = domains.spread(weight * totals, missing=0) if totals.any() else None
                got = domains.weighted(per_slot, weight)
                if expected is None:
                    assert got is None
                else:
                    assert got is not None and got.dtype == np.int64 and np.array_equal(got, expected)
    assert domains_cluster().domains("kubernetes.io/hostname").unique
    assert not domains_cluster().domains("kubernetes.io/hostname").dense  # "bare", and the hole of n4
    assert cluster_of([node(f"n{i}") for i in range(9)]).domains("kubernetes.io/hostname").dense
    assert not domains_cluster().domains("zone").unique


def anti_affinity_pod(name: str, app: str, node_name: str | None = None, **term: object) -> dict:
    required = [affinity_term("kubernetes.io/hostname", {"app": app}, **term)]  # type: ignore[arg-type]
    return pod(name, labels={"app": app}, node_name=node_name,
               pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": required})


def test_matching_terms_are_the_terms_that_match() -> None:
    selected = {"namespace_selector": {"matchLabels": {"team": "x"}}}
    cluster = cluster_of(
        [node(f"n{i}") for i in range(4)],
        [*(anti_affinity_pod(f"a{i}", f"app-{i % 3}", f"n{i}") for i in range(4)),
         anti_affinity_pod("s", "app-s", "n1", **selected)],
        objects=[namespace("default", {"team": "x"}), namespace("other", {"team": "y"})],
    )
    terms = cluster.tracker(PodTerms)

    def labels_of(info_namespace: str) -> dict[str, str]:
        value = cluster.catalog.get("Namespace", info_namespace)
        return dict(value.labels) if value is not None else {}

    def expected(incoming: dict) -> list[tuple[int, object, list[int]]]:
        info = parse_pod(incoming)
        labels = labels_of(info.namespace)
        return [(w, t, c.tolist()) for w, t, c in terms.terms(TermRole.REQUIRED_ANTI_AFFINITY)
                if t.matches(info.namespace, info.labels, labels)]

    def got(incoming: dict) -> list[tuple[int, object, list[int]]]:
        info = parse_pod(incoming)
        found = terms.matching(TermRole.REQUIRED_ANTI_AFFINITY, info, labels_of(info.namespace))
        return [(w, t, c.tolist()) for w, t, c in found]

    for app in ("app-0", "app-1", "app-2", "app-9", "app-s"):
        for ns in ("default", "other"):
            incoming = pod("p", labels={"app": app}, namespace=ns)
            assert got(incoming) == expected(incoming), (app, ns)
    assert len(got(pod("p", labels={"app": "app-s"}, namespace="other"))) == 0
    # the namespaceSelector reads Namespace labels: a relabelled Namespace is matched afresh
    upsert_object(cluster.catalog, KINDS_BY_NAME["Namespace"], namespace("other", {"team": "x"}))
    assert len(got(pod("p", labels={"app": "app-s"}, namespace="other"))) == 1
    # a new term (a pod of another app) and a term gone: the matches follow
    cluster.add_pod(parse_pod(anti_affinity_pod("b", "app-9", "n0")))
    assert len(got(pod("p", labels={"app": "app-9"}))) == 1
    cluster.remove_pod("default/b")
    assert got(pod("p", labels={"app": "app-9"})) == []
    # counts move without the set of terms changing: the columns are read afresh
    cluster.add_pod(parse_pod(anti_affinity_pod("c", "app-0", "n3")))
    incoming = pod("p", labels={"app": "app-0"})
    assert got(incoming) == expected(incoming)
    assert [c for _, _, c in got(incoming)] == [[1, 0, 0, 2]]  # a0 on n0; a3 and c on n3


def test_cpu_memory_allocatable_follows_node_changes() -> None:
    cluster = cluster_of([node("a", cpu="2", memory="4Gi"), node("b", cpu="4", memory="8Gi")])
    slots = np.asarray([1, 0], dtype=np.int64)
    block, positive = cluster.cpu_memory_allocatable(slots)
    assert positive and block.tolist() == [[4000, 2000], [8 * 1024**3, 4 * 1024**3]]
    assert cluster.cpu_memory_allocatable(slots)[0] is block  # kept for the same candidates
    cluster.upsert_node(parse_node(node("a", cpu="0", memory="4Gi")))
    block, positive = cluster.cpu_memory_allocatable(slots)
    assert not positive and block[CPU].tolist() == [4000, 0]
    other = np.asarray([1], dtype=np.int64)
    assert cluster.cpu_memory_allocatable(other)[1]
    assert cluster.cpu_memory_allocatable(np.empty(0, dtype=np.int64))[1]


def test_node_tables_stay_column_major_as_they_grow() -> None:
    cluster = ClusterState(capacity=2)
    for i in range(70):
        cluster.upsert_node(parse_node(node(f"n{i}", cpu=str(i + 1), allocatable={"example.com/gpu": str(i)})))
    cluster.add_pod(parse_pod(pod("p", cpu="1", node_name="n5", requests={"example.com/fpga": "1"})))
    for table in (cluster.allocatable, cluster.requested, cluster.nonzero_requested):
        assert table.flags.f_contiguous
    gpu, fpga = cluster.resource_index["example.com/gpu"], cluster.resource_index["example.com/fpga"]
    assert [int(cluster.allocatable[cluster.index[f"n{i}"], CPU]) for i in range(70)] == [
        (i + 1) * 1000 for i in range(70)
    ]
    assert int(cluster.allocatable[cluster.index["n69"], gpu]) == 69
    assert int(cluster.requested[cluster.index["n5"], fpga]) == 1
    assert int(cluster.requested[cluster.index["n5"], CPU]) == 1000
    assert int(cluster.nonzero_requested[cluster.index["n5"], MEMORY]) == 200 * 1024**2
