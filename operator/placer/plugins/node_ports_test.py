"""NodePorts: host ports held by bound or assumed pods, with kube's hostIP / protocol overlap rules."""

from __future__ import annotations

import pytest

from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError
from placer.testing import (
    cluster_of,
    container,
    decide,
    filter_result,
    fits_without_answers,
    make_plugin,
    make_profile,
    node,
    pod,
)

PORTS = make_plugin("NodePorts")
REASON = "node(s) didn't have free ports for the requested pod ports"


def cluster_with(used: int | tuple) -> object:
    return cluster_of([node("a"), node("b")], [pod("holder", node_name="a", host_ports=[used])])


@pytest.mark.parametrize(
    ("used", "wanted", "conflict"),
    [
        (8080, 8080, True),
        (8080, 8081, False),
        (8080, (8080, "UDP"), False),
        ((8080, "UDP"), (8080, "UDP"), True),
        (8080, (8080, "TCP", "10.0.0.1"), True),  # the holder binds 0.0.0.0: every address
        ((8080, "TCP", "10.0.0.1"), 8080, True),  # the pod wants 0.0.0.0: overlaps 10.0.0.1
        ((8080, "TCP", "10.0.0.1"), (8080, "TCP", "10.0.0.1"), True),
        ((8080, "TCP", "10.0.0.1"), (8080, "TCP", "10.0.0.2"), False),
        ((8080, "SCTP", "10.0.0.1"), (8080, "TCP", "10.0.0.1"), False),
    ],
)
def test_conflicts(used: int | tuple, wanted: int | tuple, conflict: bool) -> None:
    assert filter_result(PORTS, pod("p", host_ports=[wanted]), cluster_with(used)) == {"a": not conflict, "b": True}


def test_pod_without_host_ports_is_not_filtered() -> None:
    cluster = cluster_with(8080)
    assert PORTS.filter(parse_pod(pod("p")), cluster) is None
    # a container port without a hostPort holds nothing
    plain = pod("p")
    plain["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    assert PORTS.filter(parse_pod(plain), cluster) is None


def test_reason_and_message() -> None:
    cluster = cluster_of([node("a"), node("b")], [pod("x", node_name="a", host_ports=[80]),
                                                  pod("y", node_name="b", host_ports=[80, 443])])
    decision = decide(make_profile(filters=[{"name": "NodePorts"}], scores=[]), pod("p", host_ports=[80]), cluster)
    assert decision.reasons == {REASON: 2}
    assert decision.message == f"0/2 nodes are available: 2 {REASON}."


def test_assumed_pods_hold_ports_and_forgetting_frees_them() -> None:
    cluster = cluster_of([node("a")])
    cluster.assume(parse_pod(pod("first", host_ports=[8080])), "a")
    assert filter_result(PORTS, pod("p", host_ports=[8080]), cluster) == {"a": False}
    cluster.forget("default/first")
    assert filter_result(PORTS, pod("p", host_ports=[8080]), cluster) == {"a": True}


def test_two_holders_of_one_port_then_one_leaves() -> None:
    # e.g. two pods on different hostIPs; removing one keeps the other's port held
    cluster = cluster_of([node("a")], [pod("x", node_name="a", host_ports=[(9000, "TCP", "10.0.0.1")]),
                                       pod("y", node_name="a", host_ports=[(9000, "TCP", "10.0.0.2")])])
    wants = pod("p", host_ports=[(9000, "TCP", "10.0.0.1")])
    assert filter_result(PORTS, wants, cluster) == {"a": False}
    cluster.remove_pod("default/x")
    assert filter_result(PORTS, wants, cluster) == {"a": True}
    assert filter_result(PORTS, pod("p", host_ports=[9000]), cluster) == {"a": False}
    cluster.remove_pod("default/y")
    assert filter_result(PORTS, pod("p", host_ports=[9000]), cluster) == {"a": True}
    assert cluster.node_ports == {}


def test_evicting_holders_frees_their_ports_on_the_columns() -> None:
    """`fits_without` and the eviction terms preemption's dry run uses agree with the filter run with
    any subset of each node's pods gone: two holders of overlapping addresses on a, one of another
    protocol, a pod holding two of the wanted ports, priorities for `frees_below`."""
    cluster = cluster_of(
        [node("a"), node("b"), node("c")],
        [pod("x", node_name="a", host_ports=[(9000, "TCP", "10.0.0.1")], priority=1),
         pod("y", node_name="a", host_ports=[(9000, "TCP", "10.0.0.2")], priority=3),
         pod("udp", node_name="a", host_ports=[(9000, "UDP")], priority=0),
         pod("both", node_name="b", host_ports=[9000, 9001], priority=2),
         pod("other", node_name="c", host_ports=[7000])],
    )
    assert fits_without_answers(PORTS, pod("p", host_ports=[9000, 9001], priority=5), cluster) == {True, False}
    assert fits_without_answers(PORTS, pod("p", host_ports=[(9000, "TCP", "10.0.0.1")]), cluster) == {True, False}


def test_terminal_pod_holds_no_port() -> None:
    cluster = cluster_of([node("a")], [pod("done", node_name="a", host_ports=[8080], phase="Succeeded")])
    assert filter_result(PORTS, pod("p", host_ports=[8080]), cluster) == {"a": True}


def test_invalid_host_port_is_a_pod_error() -> None:
    info = parse_pod(pod("p", host_ports=[70000]))
    assert info.error is not None
    assert "spec.containers[0].ports[0].hostPort" in info.error


def test_not_a_score() -> None:
    with pytest.raises(ProfileError, match=r'profile "np": scores\[0\] NodePorts: name: NodePorts is not a score'):
        make_profile(scores=[{"name": "NodePorts"}], name="np")


def test_a_sidecars_host_port_is_held_a_plain_init_containers_is_not() -> None:
    # kube counts the ports of restartable init containers (sidecars, restartPolicy: Always): they
    # run for the pod's whole life; a plain init container has exited before the app starts
    sidecar = container("proxy", host_ports=[15001], restart_policy="Always")
    plain_init = container("setup", host_ports=[15002])
    bound = pod("mesh", node_name="a", init_containers=[sidecar, plain_init])
    cluster = cluster_of([node("a"), node("b")], [bound])
    assert filter_result(PORTS, pod("p", host_ports=[15001]), cluster) == {"a": False, "b": True}
    assert filter_result(PORTS, pod("p", host_ports=[15002]), cluster) == {"a": True, "b": True}
    # and the incoming pod's own sidecar asks for its port
    wants = pod("q", init_containers=[container("proxy", host_ports=[15001], restart_policy="Always")])
    assert filter_result(PORTS, wants, cluster) == {"a": False, "b": True}
