"""RoomByPriority: what the pods below a priority hold on each node, kept in step with the cluster
(the columns preemption's dry run reads instead of visiting every pod)."""

from __future__ import annotations

import numpy as np
from placer.engine.cluster import ClusterState
from placer.engine.objects import NodeInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.priority_room import RoomByPriority
from placer.testing import cluster_of, node, pod


def brute(cluster: ClusterState, priority: int, resource: str) -> tuple[list[int], list[int]]:
    """Per slot in [0, size): (pods below `priority`, their requests of `resource`), by visiting them."""
    counts, requests = [0] * cluster.size, [0] * cluster.size
    for record in cluster.pods.values():
        slot = cluster.index.get(record.node)
        if slot is not None and record.pod.priority < priority:
            counts[slot] += 1
            requests[slot] += record.pod.requests.get(resource, 0)
    return counts, requests


def agrees(cluster: ClusterState) -> None:
    room = cluster.tracker(RoomByPriority)
    slots = np.arange(cluster.size)
    for priority in (-5, 0, 1, 2, 3, 10):
        for resource in ("cpu", "memory", "example.com/gpu"):
            counts, requests = brute(cluster, priority, resource)
            present = cluster.present[: cluster.size]
            assert room.count_below(priority, slots)[present].tolist() == np.asarray(counts)[present].tolist()
            got = room.requested_below(priority, resource, slots)[present].tolist()
            assert got == np.asarray(requests)[present].tolist(), (priority, resource)


def test_levels_follow_pods_counted_and_uncounted() -> None:
    cluster = cluster_of(
        [node("a", cpu="8"), node("b", cpu="8", allocatable={"example.com/gpu": "2"})],
        [pod("low", cpu="1", memory="1Gi", node_name="a", priority=0),
         pod("mid", cpu="2", node_name="a", priority=2),
         pod("gpu", cpu="500m", node_name="b", priority=1, requests={"example.com/gpu": "1"})],
    )
    agrees(cluster)  # created now: fed every pod counted so far
    cluster.assume(parse_pod(pod("assumed", cpu="1", priority=-3)), "b")
    agrees(cluster)
    cluster.forget("default/assumed")
    cluster.remove_pod("default/mid")
    agrees(cluster)
    # a node gone and back: its pods are counted again
    info = cluster.node("a")
    assert info is not None
    cluster.remove_node("a")
    agrees(cluster)
    cluster.upsert_node(info)
    agrees(cluster)


def test_grows_with_the_node_table() -> None:
    cluster = ClusterState(capacity=2)
    cluster.upsert_node(parse_node_obj("a"))
    cluster.add_pod(parse_pod(pod("p0", cpu="1", node_name="a", priority=1)))
    agrees(cluster)
    for i in range(20):
        cluster.upsert_node(parse_node_obj(f"n{i}"))
        cluster.add_pod(parse_pod(pod(f"p{i + 1}", cpu="1", node_name=f"n{i}", priority=i % 3)))
    agrees(cluster)


def parse_node_obj(name: str) -> NodeInfo:
    return parse_node(node(name, cpu="4"))
