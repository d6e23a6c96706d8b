"""ClusterState accounting: bound, assumed, forgotten and confirmed pods, nodes leaving and coming
back, pods seen before their node, extended-resource columns added late, terminal pods."""

from __future__ import annotations

import numpy as np
from placer.engine.cluster import CPU, MEMORY, PODS, ClusterState, PodTracker
from placer.engine.matching import label_counts
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.testing import GiB, MiB, cluster_of, node, pod


def used(cluster: ClusterState, name: str, resource: str = "cpu") -> int:
    return int(cluster.requested[cluster.index[name], cluster.resource_index[resource]])


def nonzero(cluster: ClusterState, name: str) -> tuple[int, int]:
    row = cluster.nonzero_requested[cluster.index[name]]
    return int(row[0]), int(row[1])


def test_bound_pods_add_requests_pod_count_and_non_zero_amounts() -> None:
    cluster = cluster_of([node("a")], [pod("x", cpu="1", memory="1Gi", node_name="a"), pod("y", node_name="a")])
    assert used(cluster, "a") == 1000
    assert used(cluster, "a", "memory") == GiB
    assert used(cluster, "a", "pods") == 2
    assert nonzero(cluster, "a") == (1100, GiB + 200 * MiB)
    assert cluster.overcommitted() == []


def test_assume_forget_confirm() -> None:
    cluster = cluster_of([node("a"), node("b")])
    p = parse_pod(pod("p", cpu="1"))
    cluster.assume(p, "a")
    assert cluster.is_assumed("default/p")
    assert used(cluster, "a") == 1000
    cluster.forget("default/p")
    assert not cluster.is_assumed("default/p")
    assert used(cluster, "a") == 0
    assert used(cluster, "a", "pods") == 0
    # assumed, then the watch confirms the binding: counted once, no longer assumed
    cluster.assume(p, "a")
    cluster.add_pod(parse_pod(pod("p", cpu="1", node_name="a")))
    assert not cluster.is_assumed("default/p")
    assert used(cluster, "a") == 1000
    assert used(cluster, "a", "pods") == 1
    # forgetting a confirmed pod changes nothing
    cluster.forget("default/p")
    assert used(cluster, "a") == 1000


def test_confirmation_on_another_node_moves_the_pod() -> None:
    cluster = cluster_of([node("a"), node("b")])
    cluster.assume(parse_pod(pod("p", cpu="1")), "a")
    cluster.add_pod(parse_pod(pod("p", cpu="1", node_name="b")))
    assert (used(cluster, "a"), used(cluster, "b")) == (0, 1000)


def test_a_confirmation_renews_the_record_and_what_trackers_derive_but_not_the_totals() -> None:
    seen: list[tuple[str, str, int, int]] = []

    class Recorder(PodTracker):
        def account(self, pod: PodInfo, slot: int, sign: int) -> None:
            seen.append((pod.key, pod.resource_version, slot, sign))

    cluster = cluster_of([node("a"), node("b")])
    cluster.tracker(Recorder)
    assumed = parse_pod(pod("p", cpu="1", memory="1Gi", labels={"app": "x"}))
    cluster.assume(assumed, "b")
    bound = parse_pod(pod("p", cpu="1", memory="1Gi", labels={"app": "x"}, node_name="b"))
    bound.resource_version = "7"
    slot = cluster.index["b"]
    version = cluster.version
    cluster.add_pod(bound)
    record = cluster.pods["default/p"]
    assert record.pod is bound and not record.assumed and cluster.version > version
    assert seen[1:] == [("default/p", "", slot, -1), ("default/p", "7", slot, +1)]
    assert (used(cluster, "b"), used(cluster, "b", "memory"), used(cluster, "b", "pods")) == (1000, GiB, 1)
    assert nonzero(cluster, "b") == (1000, GiB) and cluster.pods_by_node == {"b": {"default/p"}}


def test_update_replaces_the_old_requests() -> None:
    cluster = cluster_of([node("a")], [pod("p", cpu="1", node_name="a")])
    cluster.add_pod(parse_pod(pod("p", cpu="2", node_name="a")))
    assert used(cluster, "a") == 2000
    assert used(cluster, "a", "pods") == 1


def test_terminal_pods_are_not_counted() -> None:
    cluster = cluster_of([node("a")], [pod("done", cpu="3", node_name="a", phase="Succeeded")])
    assert used(cluster, "a") == 0
    assert "default/done" not in cluster.pods
    # a running pod that finishes releases what it held
    cluster.add_pod(parse_pod(pod("job", cpu="2", node_name="a")))
    assert used(cluster, "a") == 2000
    cluster.add_pod(parse_pod(pod("job", cpu="2", node_name="a", phase="Failed")))
    assert used(cluster, "a") == 0
    assert used(cluster, "a", "pods") == 0


def test_remove_pod() -> None:
    cluster = cluster_of([node("a")], [pod("x", cpu="1", node_name="a"), pod("y", cpu="1", node_name="a")])
    assert cluster.remove_pod("default/x") is True
    assert cluster.remove_pod("default/x") is False
    assert used(cluster, "a") == 1000
    assert [r.pod.key for r in cluster.pods_on("a")] == ["default/y"]


def test_node_removal_and_re_add_keeps_its_pods() -> None:
    cluster = cluster_of([node("a"), node("b")], [pod("x", cpu="1", requests={"example.com/x": "1"}, node_name="a")])
    assert cluster.remove_node("a") is True
    assert cluster.remove_node("a") is False
    assert cluster.node_count == 1
    assert cluster.node_names() == ["b"]
    assert cluster.node("a") is None
    assert cluster.overcommitted() == []
    # the pod is still known; when the node returns it is counted again
    assert "default/x" in cluster.pods
    cluster.upsert_node(parse_node(node("a", allocatable={"example.com/x": "1"})))
    assert used(cluster, "a") == 1000
    assert used(cluster, "a", "example.com/x") == 1
    assert used(cluster, "a", "pods") == 1


def test_freed_slot_reused_by_another_node_starts_empty() -> None:
    cluster = cluster_of([node("a"), node("b")], [pod("x", cpu="3", node_name="a", host_ports=[80])])
    slot = cluster.index["a"]
    cluster.remove_node("a")
    cluster.upsert_node(parse_node(node("c", cpu="2", labels={"x": "y"})))
    assert cluster.index["c"] == slot
    assert used(cluster, "c") == 0
    assert cluster.node_ports == {}
    assert cluster.overcommitted() == []
    assert cluster.label_column("x").tolist() == ["y" if s == slot else None for s in range(cluster.size)]


def test_pods_arriving_before_their_node() -> None:
    cluster = ClusterState()
    cluster.add_pod(parse_pod(pod("early", cpu="1", memory="1Gi", requests={"example.com/x": "2"}, node_name="late")))
    assert cluster.node_count == 0
    cluster.upsert_node(parse_node(node("other")))
    assert used(cluster, "other") == 0
    cluster.upsert_node(parse_node(node("late", allocatable={"example.com/x": "4"})))
    assert used(cluster, "late") == 1000
    assert used(cluster, "late", "memory") == GiB
    assert used(cluster, "late", "example.com/x") == 2
    assert used(cluster, "late", "pods") == 1


def test_extended_resource_columns_appear_later() -> None:
    cluster = cluster_of([node("a"), node("b")], [pod("x", cpu="1", node_name="a")])
    assert "example.com/foo" not in cluster.resource_index
    # a node bringing a new resource: a new column, zero for every other node
    cluster.upsert_node(parse_node(node("c", allocatable={"example.com/foo": "3"})))
    column = cluster.resource_index["example.com/foo"]
    assert cluster.allocatable[[cluster.index[n] for n in "abc"], column].tolist() == [0, 0, 3]
    # a pod requesting a resource no node has: another column
    cluster.add_pod(parse_pod(pod("y", requests={"example.com/bar": "1"}, node_name="b")))
    assert used(cluster, "b", "example.com/bar") == 1
    assert used(cluster, "a") == 1000  # the earlier columns survived the widening
    assert cluster.overcommitted() == ["b"]  # b has none of example.com/bar


def test_growing_past_the_initial_capacity() -> None:
    cluster = ClusterState(capacity=2)
    for i in range(9):
        cluster.upsert_node(parse_node(node(f"n{i}", labels={"i": str(i)})))
        cluster.add_pod(parse_pod(pod(f"p{i}", cpu="1", labels={"t": "a"}, node_name=f"n{i}")))
    assert cluster.node_count == 9
    assert [used(cluster, f"n{i}") for i in range(9)] == [1000] * 9
    assert cluster.label_column("i").tolist() == [str(i) for i in range(9)]
    assert label_counts(cluster, "t", "a").tolist() == [1] * 9


def test_node_update_changes_allocatable_and_labels() -> None:
    cluster = cluster_of([node("a", cpu="4", labels={"x": "1"})], [pod("p", cpu="3", node_name="a")])
    cluster.label_column("x")  # create the column before the update
    assert cluster.upsert_node(parse_node(node("a", cpu="4", labels={"x": "1"}))) is False  # no change
    version = cluster.static_version
    assert cluster.upsert_node(parse_node(node("a", cpu="2", labels={"x": "2"}))) is True
    assert cluster.static_version > version
    assert cluster.label_column("x").tolist() == ["2"]
    assert cluster.allocatable[cluster.index["a"], CPU] == 2000
    assert cluster.overcommitted() == ["a"]  # the node shrank under its pods


def test_overcommitted_names_the_node() -> None:
    cluster = cluster_of([node("a", cpu="1"), node("b", memory="1Gi", pods="1")])
    cluster.assume(parse_pod(pod("x", cpu="2")), "a")
    cluster.assume(parse_pod(pod("y", memory="512Mi")), "b")
    assert cluster.overcommitted() == ["a"]
    cluster.assume(parse_pod(pod("z")), "b")  # a second pod on a one-pod node
    assert cluster.overcommitted() == ["a", "b"]
    assert cluster.requested[cluster.index["b"], PODS] == 2
    assert cluster.requested[cluster.index["b"], MEMORY] == 512 * MiB


def test_scan_order_interleaves_zones_like_kube_node_tree() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [node("a1", labels={zone: "a"}), node("a2", labels={zone: "a"}), node("b1", labels={zone: "b"}),
             node("c1", labels={zone: "c"}), node("c2", labels={zone: "c"}), node("c3", labels={zone: "c"})]
    cluster = cluster_of(nodes)

    def order() -> list[str]:
        return [cluster.names[s] for s in cluster.scan_order()]

    assert order() == ["a1", "b1", "c1", "a2", "c2", "c3"]
    # an update that keeps the zone keeps the node's place (kube's nodeTree.updateNode)
    cluster.upsert_node(parse_node(node("a1", cpu="8", labels={zone: "a", "new": "label"})))
    assert order() == ["a1", "b1", "c1", "a2", "c2", "c3"]
    # a zone change moves the node to the end of its new zone
    cluster.upsert_node(parse_node(node("a1", labels={zone: "b"})))
    assert order() == ["a2", "b1", "c1", "a1", "c2", "c3"]
    # a removed node leaves; a new zone goes last
    cluster.remove_node("c2")
    cluster.upsert_node(parse_node(node("d1", labels={zone: "d"})))
    assert order() == ["a2", "b1", "c1", "d1", "a1", "c3"]
    # region and zone together name a zone; nodes without either share the "" zone
    cluster = cluster_of([node("x"), node("y"), node("r", labels={"topology.kubernetes.io/region": "r1"})])
    assert [cluster.names[s] for s in cluster.scan_order()] == ["x", "r", "y"]


def test_label_counts_follow_pods() -> None:
    cluster = cluster_of([node("a"), node("b")], [pod("x", labels={"t": "blue"}, node_name="a")])
    counts = label_counts(cluster, "t", "blue")
    assert counts.tolist() == [1, 0]
    cluster.assume(parse_pod(pod("y", labels={"t": "blue"})), "b")
    cluster.add_pod(parse_pod(pod("z", labels={"t": "red"}, node_name="b")))
    assert label_counts(cluster, "t", "blue").tolist() == [1, 1]
    assert label_counts(cluster, "t", "red").tolist() == [0, 1]
    cluster.remove_pod("default/x")
    cluster.forget("default/y")
    assert label_counts(cluster, "t", "blue").tolist() == [0, 0]
    assert np.array_equal(label_counts(cluster, "t", "green"), [0, 0])


def _snapshot(cluster: ClusterState) -> tuple:
    from placer.engine.priority_room import RoomByPriority

    room = cluster.tracker(RoomByPriority)
    slots = np.arange(cluster.size)
    below = [(room.count_below(p, slots).tolist(), room.requested_below(p, "cpu", slots).tolist()) for p in (1, 11, 13)]
    return (
        sorted((key, record.node) for key, record in cluster.pods.items()),
        {node: sorted(keys) for node, keys in cluster.pods_by_node.items()},
        cluster.requested[: cluster.size].tolist(),
        cluster.nonzero_requested[: cluster.size].tolist(),
        {slot: dict(ports) for slot, ports in cluster.node_ports.items()},
        below,
    )


def test_many_nominated_pods_are_counted_in_and_out_as_one_at_a_time() -> None:
    """`with_pods` sums a long list of records as arrays (the pods nominated to nodes, counted into
    every cycle): inside, the cluster reads as if each were recorded in turn; after, as before."""
    from placer.engine.cluster import PodRecord

    nodes = [node(f"n{i}", cpu="8") for i in range(4)]
    bound = [pod(f"low-{i}", cpu="1", node_name=f"n{i % 4}", priority=0) for i in range(6)]
    one_by_one, summed = cluster_of(nodes, bound), cluster_of(nodes, bound)
    nominated = [
        PodRecord(parse_pod(pod(f"high-{i}", cpu=f"{i + 1}00m", memory="64Mi", priority=10 + i % 2,
                                host_ports=[8080 + i % 3] if i % 4 == 0 else ())),
                  f"n{i % 3}" if i != 5 else "gone", assumed=True)  # one nominated to a node not there
        for i in range(12)
    ]
    before = _snapshot(summed)
    for record in nominated:
        one_by_one._record(record)
    for _ in range(2):  # the second time from the arrays summed the first
        with summed.with_pods(nominated):
            assert _snapshot(summed) == _snapshot(one_by_one)
        assert _snapshot(summed) == before
    with summed.with_pods(nominated[:-1]):  # other records: summed again
        one_by_one.remove_pod(nominated[-1].pod.key)
        assert _snapshot(summed) == _snapshot(one_by_one)
    assert _snapshot(summed) == before
    extra = [PodRecord(parse_pod(pod(f"more-{i}", cpu="50m", priority=12, host_ports=[9090] if i else ())),
                       f"n{i}", assumed=True) for i in range(3)]
    with summed.with_pods([*extra, *nominated[2:-1]]):  # two gone, three new: the rest's rows reused
        for record in (*nominated[:2], *extra):
            if record in extra:
                one_by_one._record(record)
            else:
                one_by_one.remove_pod(record.pod.key)
        assert _snapshot(summed) == _snapshot(one_by_one)
    assert _snapshot(summed) == before
    for record in (*nominated[:2], *extra):  # (back to nominated[:-1])
        if record in extra:
            one_by_one.remove_pod(record.pod.key)
        else:
            one_by_one._record(record)
    with summed.with_pods([*nominated[:-1], nominated[0]]):  # a name twice: counted once
        assert _snapshot(summed) == _snapshot(one_by_one)
    assert _snapshot(summed) == before
