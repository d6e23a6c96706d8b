"""Opportunistic batching (placer.engine.batching) changes no decision: kube's scheduler_perf
workloads (their pod templates: pod-default, pod-with-node-affinity, pod-with-pod-affinity,
pod-with-pod-anti-affinity, the preferred ones, pod-with-topology-spreading, PreemptionBasic's
low- and high-priority pods, pod-high-priority-large-cpu, DRA's pod-with-claim-template) on a
synthetic cluster, decided pod by pod by a batching engine and by one deciding every pod in full,
on twin clusters fed the same events, must agree on every node, message and score.

Between the measured pods the stream changes the cluster the way a live one does (pods deleted,
other pods placed, a pod with affinity terms placed, a node relabelled or added), so the batch is
brought up to date, or dropped, on the way."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from placer.engine.cluster import ClusterState
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import compile_profile
from placer.engine.runtime import Decision, Scheduler
from placer.testing import affinity_term, namespace, node, pod, spread_constraint
from placer.testing_devices import claim_pod, device, device_class, request, resource_claim, resource_slice

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
DRIVER = "test-driver.cdi.k8s.io"


# ----------------------------------------------------------------------------- kube's templates


def default_pod(name: str, **extra: Any) -> Obj:
    """templates/pod-default.yaml: 100m and 500Mi."""
    return pod(name, cpu="100m", memory="500Mi", **extra)


def node_affinity_pod(name: str) -> Obj:
    """templates/pod-with-node-affinity.yaml: zone In [zone1, zone2]."""
    required = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}]}
    return default_pod(name, affinity={"requiredDuringSchedulingIgnoredDuringExecution": required})


def pod_affinity_pod(name: str) -> Obj:
    """templates/pod-with-pod-affinity.yaml: color blue, required affinity to blue pods in its zone."""
    term = affinity_term(ZONE, {"color": "blue"}, namespaces=["sched-1", "default"])
    return default_pod(name, labels={"color": "blue"},
                       pod_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [term]})


def anti_affinity_pod(name: str) -> Obj:
    """templates/pod-with-pod-anti-affinity.yaml: color green, required anti-affinity on hostname."""
    term = affinity_term("kubernetes.io/hostname", {"color": "green"}, namespaces=["sched-1", "default"])
    return default_pod(name, labels={"color": "green"},
                       pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [term]})


def preferred_pod(name: str, anti: bool) -> Obj:
    """templates/pod-with-preferred-pod-(anti-)affinity.yaml: weight 1 on hostname."""
    color = "yellow" if anti else "red"
    term = affinity_term("kubernetes.io/hostname", {"color": color}, namespaces=["sched-1", "default"], weight=1)
    rules = {"preferredDuringSchedulingIgnoredDuringExecution": [term]}
    if anti:
        return default_pod(name, labels={"color": color}, pod_anti_affinity=rules)
    return default_pod(name, labels={"color": color}, pod_affinity=rules)


def spreading_pod(name: str, when: str) -> Obj:
    """templates/pod-with-(preferred-)topology-spreading.yaml: maxSkew 5 on zones, color blue."""
    return default_pod(name, labels={"color": "blue"},
                       spread=[spread_constraint(5, ZONE, when, match_labels={"color": "blue"})])


def low_priority_pod(name: str, node_name: str | None = None) -> Obj:
    """templates/pod-low-priority.yaml: 900m and 500Mi."""
    return pod(name, cpu="900m", memory="500Mi", node_name=node_name)


def high_priority_pod(name: str, cpu: str = "3") -> Obj:
    """templates/pod-high-priority.yaml (3 CPU), or pod-high-priority-large-cpu.yaml (9)."""
    return pod(name, cpu=cpu, memory="500Mi", priority=10)


# ----------------------------------------------------------------------------- the twin engines


def synthetic_nodes(count: int, extra_labels: Callable[[int], dict[str, str]] = lambda i: {}) -> list[Obj]:
    """templates/node-default.yaml's nodes (4 CPU, 32Gi, 110 pods) in three zones, with what a
    real cluster varies: a few larger, some PreferNoSchedule- or NoSchedule-tainted, some holding
    the pause image."""
    nodes = []
    for i in range(count):
        taints = []
        if i % 17 == 3:
            taints.append("maintenance=soon:PreferNoSchedule")
        if i % 23 == 5:
            taints.append("dedicated=gpu:NoSchedule")
        obj = node(f"node-{i:03d}", cpu="8" if i % 11 == 0 else "4", memory="32Gi", pods="110",
                   labels={ZONE: f"zone{i % 3 + 1}", **extra_labels(i)}, taints=taints)
        if i % 5 == 0:
            obj["status"]["images"] = [{"names": ["registry.k8s.io/pause:3.10.2"], "sizeBytes": 300 * 1024 * 1024}]
        nodes.append(obj)
    return nodes


@dataclass
class Twins:
    """The same cluster twice, one decided with batching and one without."""

    objects: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    bound: list[Obj] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clusters = (self._build(), self._build())
        self.schedulers = (Scheduler(batching=True), Scheduler(batching=False))
        self.profile = compile_profile("default", {"schedulerName": "placer"})
        self.decided = 0

    def _build(self) -> ClusterState:
        cluster = ClusterState()
        for obj in self.objects:
            upsert_object(cluster.catalog, KINDS_BY_NAME[obj["kind"]], obj)
        for obj in self.nodes:
            cluster.upsert_node(parse_node(obj))
        for obj in self.bound:
            cluster.add_pod(parse_pod(obj))
        return cluster

    def each(self, change: Callable[[ClusterState], None]) -> None:
        for cluster in self.clusters:
            change(cluster)

    def schedule(self, obj: Obj) -> Decision:
        """Decide the pod on both, check they agree, and carry the decision out on both: assumed
        with its reservations; for a preemption, the victims evicted, the pod nominated and decided
        again (placed on its node, both again agreeing)."""
        infos = (parse_pod(obj), parse_pod(obj))
        decisions = self._decide(infos)
        preemption = decisions[0].preemption
        if preemption is not None:
            for cluster, info in zip(self.clusters, infos, strict=True):
                for victim in preemption.victims:
                    cluster.remove_pod(victim.key)
                cluster.nominate(info, preemption.node)
            placed = self._decide(infos)
            assert placed[0].node == preemption.node
            for cluster, info in zip(self.clusters, infos, strict=True):
                cluster.unnominate(info.key)
        return decisions[0]

    def _decide(self, infos: tuple[PodInfo, PodInfo]) -> list[Decision]:
        decisions = [scheduler.schedule(info, self.profile, cluster, top=3)
                     for scheduler, cluster, info in zip(self.schedulers, self.clusters, infos, strict=True)]
        assert summary(decisions[0]) == summary(decisions[1]), infos[0].key
        self.decided += 1
        for scheduler, cluster, info, decision in zip(self.schedulers, self.clusters, infos, decisions, strict=True):
            if decision.node is not None:
                scheduler.assume(info, decision, self.profile, cluster)
        return decisions

    @property
    def batched(self) -> int:
        return self.schedulers[0].batched_pods


def summary(decision: Decision) -> tuple[Any, ...]:
    """Everything a decision says: node, messages, reasons, the candidates' totals and every
    plugin's scores (in candidate order), the top three, the preemption."""
    weighed = decision.weighed
    scores = None
    if weighed is not None:
        scores = (weighed.slots.tolist(), weighed.totals.tolist(),
                  [(name, None if s is None else np.asarray(s).tolist()) for name, s in weighed.per_plugin])
    preemption = None
    if decision.preemption is not None:
        preemption = (decision.preemption.node, [v.key for v in decision.preemption.victims],
                      decision.preemption.displaced)
    return (decision.node, decision.message, decision.full_message, decision.reasons, decision.feasible,
            [s.as_dict() for s in decision.top], decision.rejected_by, sorted(decision.wake_on), scores, preemption,
            decision.clears_nomination)


def churn(twins: Twins, rng: random.Random, step: int, placed: list[str]) -> Iterator[None]:
    """What else happens in a live cluster between the measured pods, now and then: a placed pod
    deleted (one of the first, on whatever node, or one placed since), another pod placed (another
    size, a host port), a node relabelled or added."""
    if step % 31 == 3 and twins.bound:
        # (first those on the nodes no pod may go to: their room freed changes nothing)
        tainted = [i for i, obj in enumerate(twins.bound) if int(obj["spec"]["nodeName"][-3:]) % 23 == 5]
        gone = twins.bound.pop(tainted[0] if tainted else rng.randrange(len(twins.bound)))
        key = "default/" + gone["metadata"]["name"]
        twins.each(lambda cluster: cluster.remove_pod(key))
    if step % 29 == 7 and placed:
        key = placed.pop(rng.randrange(len(placed)))
        twins.each(lambda cluster: cluster.remove_pod(key))
    if step % 41 == 13:
        twins.schedule(pod(f"other-{step}", cpu="1500m", memory="2Gi"))
    if step % 97 == 50:
        twins.schedule(pod(f"ported-{step}", cpu="100m", host_ports=[8080]))
    if step == 120:
        relabelled = synthetic_nodes(len(twins.nodes))[4]
        relabelled["metadata"]["labels"]["disk"] = "ssd"
        twins.each(lambda cluster: cluster.upsert_node(parse_node(relabelled)))
    if step == 160:
        extra = node("node-extra", cpu="4", memory="32Gi", pods="110", labels={ZONE: "zone2"})
        twins.each(lambda cluster: cluster.upsert_node(parse_node(extra)))
    yield


def stream(twins: Twins, make: Callable[[str], Obj], count: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    placed: list[str] = []
    for step in range(count):
        decision = twins.schedule(make(f"measured-{step}"))
        if decision.node is not None:
            placed.append(f"default/measured-{step}")
        for _ in churn(twins, rng, step, placed):
            pass


# ----------------------------------------------------------------------------- the workloads


def test_scheduling_basic() -> None:
    """SchedulingBasic: 60 init pods (on every other node, tainted ones too), then identical pods
    (most of them batched)."""
    twins = Twins(nodes=synthetic_nodes(120), bound=[default_pod(f"init-{i}", node_name=f"node-{i * 2:03d}")
                                                    for i in range(60)])
    stream(twins, default_pod, 260)
    assert twins.batched > 150


def test_nodes_filling_up() -> None:
    """Untainted nodes of 1 CPU filling up: every node's TaintToleration score is the same (its
    normalised scores kept per number of candidates), and the number of candidates shrinks as
    nodes fill, down to none left."""
    nodes = [node(f"small-{i:02d}", cpu="1", memory="8Gi", pods="110", labels={ZONE: f"zone{i % 3 + 1}"})
             for i in range(12)]
    twins = Twins(nodes=nodes)
    for step in range(125):
        twins.schedule(default_pod(f"filler-{step}"))
    assert twins.batched > 100


def test_a_catalog_change_drops_the_batch() -> None:
    """A placed pod's anti-affinity selects the default pods' labels in namespaces labelled
    team=a: once the pods' namespace gets that label (a catalog change, no pod or node), they may
    no longer go to its zone."""
    term = affinity_term(ZONE, {"app": "web"}, namespace_selector={"matchLabels": {"team": "a"}})
    guard = default_pod("guard", namespace="guarded", node_name="node-001",
                        pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [term]})
    twins = Twins(objects=[namespace("default"), namespace("guarded")], nodes=synthetic_nodes(30), bound=[guard])
    for step in range(40):
        decision = twins.schedule(default_pod(f"web-{step}", labels={"app": "web"}))
        if step >= 20:
            assert decision.node is not None
            assert int(decision.node[-3:]) % 3 != 1  # not in node-001's zone
        if step == 19:
            labelled = namespace("default", {"team": "a"})
            twins.each(lambda cluster, labelled=labelled: upsert_object(
                cluster.catalog, KINDS_BY_NAME["Namespace"], labelled))
    assert twins.batched > 30


def test_scheduling_node_affinity() -> None:
    twins = Twins(nodes=synthetic_nodes(120))
    stream(twins, node_affinity_pod, 220)
    assert twins.batched > 120


def test_a_pod_with_affinity_terms_placed_drops_the_batch() -> None:
    """A placed pod's required anti-affinity matching the batched pods' labels changes their answer
    on a whole zone: the batch is dropped (`batch_breaks`), and the decisions still agree."""
    twins = Twins(nodes=synthetic_nodes(60))
    for step in range(80):
        twins.schedule(default_pod(f"web-{step}", labels={"app": "web"}))
        if step == 30:
            term = affinity_term(ZONE, {"app": "web"})
            twins.schedule(default_pod("guard", pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [
                term]}))
    assert twins.batched > 50


RELATED: dict[str, Callable[[str], Obj]] = {
    "pod-affinity": pod_affinity_pod,
    "pod-anti-affinity": anti_affinity_pod,
    "preferred-pod-affinity": lambda name: preferred_pod(name, anti=False),
    "preferred-pod-anti-affinity": lambda name: preferred_pod(name, anti=True),
    "topology-spreading": lambda name: spreading_pod(name, "DoNotSchedule"),
    "preferred-topology-spreading": lambda name: spreading_pod(name, "ScheduleAnyway"),
}


@pytest.mark.parametrize("workload", list(RELATED))
def test_relations_are_not_batched_and_agree(workload: str) -> None:
    """The suite's relation workloads: kube signs none of these pods, nor does Placer. In runs of
    ten, alternating with runs of default pods, which are batched."""
    seed = pod_affinity_pod("seed")
    seed["spec"]["nodeName"] = "node-001"
    twins = Twins(nodes=synthetic_nodes(90), bound=[seed])
    for run in range(8):
        for step in range(10):
            twins.schedule(RELATED[workload](f"related-{run}-{step}"))
        before = twins.batched
        for step in range(10):
            twins.schedule(default_pod(f"plain-{run}-{step}"))
        # a placed pod with affinity terms drops the batch (the first default pod of the run is then
        # decided in full); spreading pods carry none: the batch of the run before still serves
        expected = 10 if run and workload.endswith("spreading") else 9
        assert twins.batched - before == expected


def test_preemption_basic() -> None:
    """PreemptionBasic on 30 nodes (4 low-priority pods of 900m each), preemptors of 3 CPU carried
    out one after the other, with default pods between them."""
    nodes = synthetic_nodes(30)
    bound = [low_priority_pod(f"low-{i}-{j}", f"node-{i:03d}") for i in range(30) for j in range(4)]
    twins = Twins(nodes=nodes, bound=bound)
    for step in range(24):
        decision = twins.schedule(high_priority_pod(f"high-{step}"))
        assert decision.node is not None or decision.preemption is not None or decision.message
        twins.schedule(default_pod(f"plain-{step}"))
        twins.schedule(default_pod(f"plain-{step}-b"))
    assert twins.batched > 5


def test_unschedulable_churn() -> None:
    """Unschedulable: high-priority pods of 9 CPU (nowhere room) between default pods."""
    twins = Twins(nodes=synthetic_nodes(60))
    for step in range(150):
        if step % 5 == 0:
            decision = twins.schedule(high_priority_pod(f"huge-{step}", cpu="9"))
            assert decision.node is None and decision.preemption is None
        twins.schedule(default_pod(f"plain-{step}"))
    assert twins.batched > 80


def test_dra_claim_template() -> None:
    """SchedulingWithResourceClaimTemplate: nodes with the test driver's devices, each pod's claim
    made from the template (as the claim controller does), the allocation assumed on Reserve."""
    nodes = synthetic_nodes(24, lambda i: {"node-with-dra": "true"} if i % 2 == 0 else {})
    objects = [device_class("test-class", f'device.driver == "{DRIVER}"')]
    objects += [resource_slice(f"slice-{i}", DRIVER, node=f"node-{i:03d}",
                               devices=[device(f"dev-{k}") for k in range(4)]) for i in range(0, 24, 2)]
    twins = Twins(objects=objects, nodes=nodes)
    for step in range(60):
        name = f"test-dra-{step}"
        claim = resource_claim(f"{name}-resource", owner=(name, f"uid-{name}"),
                               requests=[request("req-0", "test-class")])
        twins.each(lambda cluster, claim=claim: upsert_object(cluster.catalog, KINDS_BY_NAME["ResourceClaim"], claim))
        twins.schedule(claim_pod(name, templates={"resource": "test-claim-template"},
                                 generated={"resource": f"{name}-resource"}))
        twins.schedule(default_pod(f"plain-{step}"))


# ----------------------------------------------------------------------------- the mechanism


def test_changes_since_are_the_pods_counted_and_uncounted() -> None:
    cluster = ClusterState()
    cluster.upsert_node(parse_node(node("a")))
    version, changes = cluster.version, cluster.pod_changes
    assert cluster.pod_changes_since(version, changes) == []
    first = parse_pod(default_pod("p", node_name="a"))
    cluster.add_pod(first)
    cluster.assume(parse_pod(default_pod("q")), "b")  # a node there is not (yet)
    cluster.remove_pod("default/p")
    assert [(slot, p.name) for slot, p in cluster.pod_changes_since(version, changes) or ()] == [
        (0, "p"), (None, "q"), (0, "p")]
    cluster.nominate(first, "a")  # anything else: the batch cannot tell what it changed
    assert cluster.pod_changes_since(version, changes) is None


def test_a_node_change_or_another_signature_is_decided_in_full() -> None:
    twins = Twins(nodes=synthetic_nodes(20))
    twins.schedule(default_pod("a"))
    twins.schedule(default_pod("b"))
    assert twins.batched == 1
    twins.each(lambda cluster: cluster.upsert_node(parse_node(node("new", labels={ZONE: "zone1"}))))
    twins.schedule(default_pod("c"))  # nodes changed: in full (and kept for the next)
    assert twins.batched == 1
    twins.schedule(pod("d", cpu="200m", memory="500Mi"))  # another signature
    twins.schedule(default_pod("e"))  # ... replaced the batch
    assert twins.batched == 1
    twins.schedule(default_pod("f"))
    assert twins.batched == 2


def test_a_node_no_pod_may_go_to_stays_out_when_its_room_is_freed() -> None:
    """The one change since the last batched pod: a pod gone from a node the others' filters rule
    out (a NoSchedule taint): it is asked again of the filters pods change, and stays out."""
    nodes = [node("a", cpu="4", taints=["dedicated=gpu:NoSchedule"]), node("b", cpu="4"), node("c", cpu="4")]
    taker = default_pod("taker", node_name="a", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    twins = Twins(nodes=nodes, bound=[taker, pod("busy-b", cpu="3", node_name="b")])
    profile = twins.profile
    batched = twins.schedulers[0]
    for name in ("p1", "p2"):  # decided, not placed: the cluster does not change
        decisions = [scheduler.schedule(parse_pod(default_pod(name)), profile, cluster, top=3)
                     for scheduler, cluster in zip(twins.schedulers, twins.clusters, strict=True)]
        assert summary(decisions[0]) == summary(decisions[1])
    assert batched.batched_pods == 1
    twins.each(lambda cluster: cluster.remove_pod("default/taker"))
    decision = twins.schedule(default_pod("p3"))
    assert batched.batched_pods == 2
    assert decision.node == "c"


def test_a_kubelets_refusal_and_a_not_ready_node_are_seen_through_a_batch() -> None:
    """What kubelet_admission withholds (room, a held node) changes what the next pod of the same
    signature may take, and NodeReady's answer depends on the condition taints a pod tolerates: the
    batching engine decides as the full one."""
    from placer.engine.kubelet_admission import rejection_of, withhold

    twins = Twins(nodes=[node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
                  + [node("fresh", cpu="64", memory="256Gi", ready=False)])
    for index in range(3):
        twins.schedule(default_pod(f"before-{index}"))
    refused = {"phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected: Node didn't have enough "
               "resource: cpu, requested: 100, used: 3950, capacity: 4000"}
    rejection = rejection_of(refused)
    assert rejection is not None
    target = twins.schedule(default_pod("probe")).node
    assert target is not None
    twins.each(lambda cluster: withhold(cluster, parse_pod(default_pod("probe", node_name=target)), target,
                                        rejection))
    after = [twins.schedule(default_pod(f"after-{index}")).node for index in range(3)]
    assert target not in after
    held = rejection_of({**refused, "reason": "NodeAffinity", "message": "Pod was rejected: Predicate NodeAffinity "
                         "failed: node(s) didn't match Pod's node affinity/selector"})
    assert held is not None
    twins.each(lambda cluster: withhold(cluster, parse_pod(default_pod("x", node_name="n0")), "n0", held))
    assert "n0" not in [twins.schedule(default_pod(f"later-{index}")).node for index in range(3)]
    tolerating = [twins.schedule(default_pod(f"cni-{index}", tolerations=[{"operator": "Exists"}])).node
                  for index in range(2)]
    assert tolerating == ["fresh", "fresh"]
    assert twins.schedule(default_pod("plain")).node != "fresh"
    assert twins.batched > 0  # the batching engine did reuse work along the way
