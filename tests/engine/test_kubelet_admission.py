"""A kubelet's refusal read from its pod's status, and the node then counted as that kubelet counts it
until pods arriving in the watch explain the difference (or the node changes, or it is released)."""

from __future__ import annotations

from typing import Any

from placer.engine.cluster import ClusterState
from placer.engine.kubelet_admission import Rejection, rejection_of, release, withhold
from placer.engine.parsing import parse_node, parse_pod
from placer.testing import cluster_of, decide, filter_result, make_plugin, make_profile, node, pod

FIT = make_plugin("NodeResourcesFit")
PORTS = make_plugin("NodePorts")
UNSCHEDULABLE = make_plugin("NodeUnschedulable")


def refused(reason: str, message: str) -> dict[str, Any]:
    """A pod status as the kubelet's `rejectPod` writes it."""
    return {"phase": "Failed", "reason": reason, "message": "Pod was rejected: " + message}


def out_of(resource: str, requested: int, used: int, capacity: int) -> Rejection:
    status = refused(f"OutOf{resource}", f"Node didn't have enough resource: {resource}, requested: {requested}, "
                                         f"used: {used}, capacity: {capacity}")
    rejection = rejection_of(status)
    assert rejection is not None
    return rejection


def two_nodes(*bound: dict[str, Any]) -> ClusterState:
    return cluster_of([node("a", cpu="4"), node("b", cpu="4")], list(bound))


def test_the_kubelets_words_are_read() -> None:
    rejection = rejection_of(refused("OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, "
                                                 "used: 3600, capacity: 4000"))
    assert rejection == Rejection("OutOfcpu", "Node didn't have enough resource: cpu, requested: 500, used: 3600, "
                                              "capacity: 4000", "cpu", 500, 3600, 4000)
    assert out_of("nvidia.com/gpu", 1, 4, 4).resource == "nvidia.com/gpu"
    affinity = rejection_of(refused("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's "
                                                    "node affinity/selector"))
    assert affinity is not None and affinity.reason == "NodeAffinity" and affinity.resource == ""
    # not a kubelet's admission refusal: evicted, ended by its containers, running, malformed
    assert rejection_of({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: "
                                                                            "memory."}) is None
    assert rejection_of({"phase": "Failed", "reason": "Error", "message": ""}) is None
    assert rejection_of({"phase": "Failed"}) is None
    assert rejection_of({"phase": "Running", "reason": "OutOfcpu", "message": "Pod was rejected: x"}) is None
    assert rejection_of({"phase": "Failed", "reason": 3, "message": "Pod was rejected: x"}) is None
    assert rejection_of("Failed") is None
    assert rejection_of(None) is None


def test_what_the_kubelet_counts_and_the_watch_does_not_is_withheld() -> None:
    """The kubelet counted 3600m on a (another scheduler's pods the watch has not shown): Placer
    leaves free only the 400m the kubelet left, so a replacement does not go back to a."""
    cluster = two_nodes(pod("mine", cpu="1", node_name="a"))
    refused_pod = parse_pod(pod("web-1", cpu="500m", node_name="a"))
    done = withhold(cluster, refused_pod, "a", out_of("cpu", 500, 3600, 4000))
    assert done is not None and done.kind == "amounts" and dict(done.amounts) == {"cpu": 2600}
    assert cluster.own_requested("a", "cpu") == 1000
    replacement = pod("web-2", cpu="500m")
    assert filter_result(FIT, replacement, cluster) == {"a": False, "b": True}
    assert filter_result(FIT, pod("small", cpu="400m"), cluster) == {"a": True, "b": True}
    assert decide(make_profile(), replacement, cluster).node == "b"
    assert cluster.overcommitted() == []


def test_pods_arriving_in_the_watch_explain_it() -> None:
    cluster = two_nodes()
    withhold(cluster, parse_pod(pod("web-1", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3500, 4000))
    assert cluster.withheld["a"].amounts == {"cpu": 3500}
    cluster.add_pod(parse_pod(pod("theirs-1", cpu="2", node_name="a")))  # another scheduler's bind, seen now
    assert cluster.withheld["a"].amounts == {"cpu": 1500}
    assert cluster.own_requested("a", "cpu") == 2000
    assert filter_result(FIT, pod("p", cpu="600m"), cluster) == {"a": False, "b": True}
    cluster.add_pod(parse_pod(pod("theirs-2", cpu="1500m", node_name="a")))
    assert "a" not in cluster.withheld  # explained: the views meet
    assert int(cluster.requested[cluster.index["a"], 0]) == 3500
    assert filter_result(FIT, pod("p", cpu="500m"), cluster) == {"a": True, "b": True}


def test_placers_own_binds_do_not_explain_it() -> None:
    """A pod Placer assumed and then sees bound is one the kubelet counts on top: not an arrival."""
    cluster = two_nodes()
    withhold(cluster, parse_pod(pod("web-1", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3000, 4000))
    ours = parse_pod(pod("ours", cpu="500m"))
    cluster.assume(ours, "a")
    cluster.add_pod(parse_pod(pod("ours", cpu="500m", node_name="a")))
    assert cluster.withheld["a"].amounts == {"cpu": 3000}
    assert int(cluster.requested[cluster.index["a"], 0]) == 3500
    assert filter_result(FIT, pod("p", cpu="600m"), cluster) == {"a": False, "b": True}


def test_a_refusal_the_view_explains_withholds_nothing() -> None:
    """The usual race of two schedulers: by the time the refusal is seen, the watch shows the other
    scheduler's pod; and the refused pod itself, if still counted, is not part of `used`."""
    cluster = two_nodes(pod("theirs", cpu="3500m", node_name="a"), pod("web-1", cpu="1", node_name="a"))
    refused_pod = parse_pod(pod("web-1", cpu="1", node_name="a"))
    assert withhold(cluster, refused_pod, "a", out_of("cpu", 1000, 3500, 4000)) is None
    assert cluster.withheld == {}
    cluster.remove_pod(refused_pod.key)
    assert withhold(cluster, refused_pod, "a", out_of("cpu", 1000, 3500, 4000)) is None
    assert filter_result(FIT, pod("p", cpu="500m"), cluster) == {"a": True, "b": True}


def test_a_later_reading_replaces_the_earlier_and_release_names_its_own() -> None:
    cluster = two_nodes()
    first = withhold(cluster, parse_pod(pod("w1", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3500, 4000))
    second = withhold(cluster, parse_pod(pod("w2", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3200, 4000))
    assert first is not None and second is not None
    assert cluster.withheld["a"].amounts == {"cpu": 3200}
    assert not release(cluster, first)  # replaced meanwhile: the later reading stays
    assert cluster.withheld["a"].amounts == {"cpu": 3200}
    assert release(cluster, second)
    assert cluster.withheld == {} and int(cluster.requested[cluster.index["a"], 0]) == 0
    # a reading the view explains clears what was withheld of that resource
    withhold(cluster, parse_pod(pod("w3", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3500, 4000))
    cluster.add_pod(parse_pod(pod("theirs", cpu="3500m", node_name="a")))
    assert cluster.withheld == {}


def test_memory_pods_and_extended_resources() -> None:
    cluster = cluster_of([node("a", cpu="4", memory="4Gi", pods="3", allocatable={"example.com/gpu": "2"})],
                         [pod("one", cpu="100m", memory="1Gi", node_name="a")])
    withhold(cluster, parse_pod(pod("w", memory="1Gi", node_name="a")), "a",
             out_of("memory", 2**30, 3 * 2**30 + 1, 4 * 2**30))
    assert cluster.withheld["a"].amounts == {"memory": 2 * 2**30 + 1}
    assert filter_result(FIT, pod("p", memory="1Gi"), cluster) == {"a": False}
    withhold(cluster, parse_pod(pod("w", node_name="a")), "a", out_of("pods", 1, 3, 3))
    assert cluster.withheld["a"].amounts == {"memory": 2 * 2**30 + 1, "pods": 2}
    assert decide(make_profile(), pod("p", cpu="100m"), cluster).message == "0/1 nodes are available: 1 Too many pods."
    gpu = pod("g", requests={"example.com/gpu": "1"})
    withhold(cluster, parse_pod(gpu), "a", out_of("example.com/gpu", 1, 2, 2))
    assert cluster.withheld["a"].amounts["example.com/gpu"] == 2


def test_a_node_whose_kubelet_says_less_allocatable_counts_as_that() -> None:
    """The kubelet's capacity is below the allocatable the watch shows (an update not seen yet)."""
    cluster = two_nodes()
    withhold(cluster, parse_pod(pod("w", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 1500, 2000))
    assert cluster.withheld["a"].amounts == {"cpu": 3500}
    # the Node object's new allocatable arrives: the difference was of the old one, released
    cluster.upsert_node(parse_node(node("a", cpu="2")))
    assert cluster.withheld == {}


def test_host_ports_the_kubelet_found_taken_are_withheld() -> None:
    cluster = two_nodes()
    web = pod("web-1", cpu="100m", node_name="a", host_ports=[8080])
    rejection = rejection_of(refused("NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports "
                                                  "for the requested pod ports"))
    assert rejection is not None
    done = withhold(cluster, parse_pod(web), "a", rejection)
    assert done is not None and done.ports == (("0.0.0.0", "TCP", 8080),)
    assert filter_result(PORTS, pod("web-2", host_ports=[8080]), cluster) == {"a": False, "b": True}
    assert filter_result(PORTS, pod("other", host_ports=[9090]), cluster) == {"a": True, "b": True}
    cluster.add_pod(parse_pod(pod("theirs", node_name="a", host_ports=[8080])))  # the holder, seen now
    assert cluster.withheld == {}
    assert filter_result(PORTS, pod("web-2", host_ports=[8080]), cluster) == {"a": False, "b": True}
    cluster.remove_pod("default/theirs")
    assert filter_result(PORTS, pod("web-2", host_ports=[8080]), cluster) == {"a": True, "b": True}


def test_a_reason_about_the_pod_withholds_nothing() -> None:
    """The kubelet refuses the pod itself there (its `kubernetes.io/os` label, a sysctl, NUMA
    alignment): the node is as Placer sees it, other pods may go."""
    cluster = two_nodes()
    for reason in ("PodOSSelectorNodeLabelDoesNotMatch", "SysctlForbidden", "TopologyAffinityError", "Other"):
        rejection = rejection_of(refused(reason, "Failed to admit pod"))
        assert rejection is not None
        assert withhold(cluster, parse_pod(pod("w", node_name="a")), "a", rejection) is None
    assert cluster.withheld == {} and cluster.held == {}
    assert filter_result(UNSCHEDULABLE, pod("p"), cluster) == {"a": True, "b": True}


def test_a_reason_about_the_nodes_state_holds_it_until_it_changes() -> None:
    cluster = two_nodes()
    rejection = rejection_of(refused("UnexpectedAdmissionError", "Allocate failed due to no healthy devices"))
    assert rejection is not None
    done = withhold(cluster, parse_pod(pod("w", node_name="a")), "a", rejection)
    assert done is not None and done.kind == "node"
    assert filter_result(UNSCHEDULABLE, pod("p"), cluster) == {"a": False, "b": True}
    assert decide(make_profile(), pod("p"), cluster).node == "b"
    cluster.upsert_node(parse_node(node("a", cpu="4", labels={"changed": "yes"})))
    assert filter_result(UNSCHEDULABLE, pod("p"), cluster) == {"a": True, "b": True}
    assert not release(cluster, done)  # gone already
    again = withhold(cluster, parse_pod(pod("w", node_name="a")), "a", rejection)
    assert again is not None
    assert release(cluster, again)
    assert filter_result(UNSCHEDULABLE, pod("p"), cluster) == {"a": True, "b": True}
    # a cordoned node stays cordoned when a hold ends
    cluster.upsert_node(parse_node(node("a", cpu="4", unschedulable=True)))
    held = withhold(cluster, parse_pod(pod("w", node_name="a")), "a", rejection)
    assert held is not None and release(cluster, held)
    assert filter_result(UNSCHEDULABLE, pod("p"), cluster) == {"a": False, "b": True}


def test_a_node_gone_and_back_keeps_what_is_withheld() -> None:
    cluster = two_nodes()
    withhold(cluster, parse_pod(pod("w", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3000, 4000))
    cluster.remove_node("a")
    assert withhold(cluster, parse_pod(pod("w", cpu="1", node_name="a")), "a", out_of("cpu", 1000, 3000, 4000)) \
        is None  # no such node (any more): nothing to count
    cluster.upsert_node(parse_node(node("a", cpu="4")))
    assert int(cluster.requested[cluster.index["a"], 0]) == 3000
    assert filter_result(FIT, pod("p", cpu="1500m"), cluster) == {"a": False, "b": True}
