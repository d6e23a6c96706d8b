"""Properties of the engine over random clusters and pod sequences (hypothesis):

- no node is ever overcommitted, whatever the interleaving of scheduling (with assume), forget,
  confirm, pod removal and a node leaving and coming back; and the incremental accounting agrees
  with a recomputation from scratch;
- the same input gives the same placements, with a fresh Scheduler and ClusterState, and (below
  100 nodes, where every feasible node is scored) whatever order the nodes were listed in;
- no sequence of placements ever breaks a required anti-affinity (either way) or a DoNotSchedule
  zone skew, and a pod refused had no legal node (checked by brute force apart from the engine).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placer.engine.cluster import PODS, ClusterState
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import Profile
from placer.engine.runtime import Scheduler
from placer.testing import make_profile, node, pod

GPU = "example.com/gpu"
TAINTS = ["dedicated=gpu:NoSchedule", "spot=true:PreferNoSchedule", "evict=now:NoExecute"]
LABELS = {"zone": ["a", "b", "c"], "disk": ["ssd", "hdd"]}

PROFILES: dict[str, Profile] = {
    "default": make_profile(),
    "binpack": make_profile(scores=[{"name": "NodeResourcesFit", "weight": 5,
                                     "args": {"scoringStrategy": {"type": "MostAllocated"}}}]),
    "ratio": make_profile(
        filters=[{"name": "NodeResourcesFit"}, {"name": "TaintToleration"}],
        scores=[
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 3}],
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                       {"utilization": 60, "score": 2},
                                                       {"utilization": 100, "score": 0}]}}}},
            {"name": "SpreadByLabel", "weight": 2, "args": {"labelKey": "tenant", "topologyKey": "zone"}},
            {"name": "NodeLabel", "args": {"preferred": {"disk": "ssd"}}},
        ],
    ),
}

quantities_cpu = st.one_of(
    st.just(None), st.just("0"), st.integers(1, 4000).map(lambda m: f"{m}m"), st.sampled_from(["64", "1e6"])
)
quantities_memory = st.one_of(
    st.just(None), st.just("0"), st.integers(1, 8192).map(lambda m: f"{m}Mi"), st.sampled_from(["1Ti", "5e15"])
)


@st.composite
def nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 12))
    result = []
    for i in range(count):
        labels = {key: draw(st.sampled_from(values)) for key, values in LABELS.items() if draw(st.booleans())}
        extra = {GPU: str(draw(st.integers(0, 4)))} if draw(st.booleans()) else {}
        result.append(
            node(
                f"node-{i:02}",
                cpu=f"{draw(st.integers(0, 8000))}m",
                memory=f"{draw(st.integers(0, 16384))}Mi",
                pods=str(draw(st.integers(0, 8))),
                labels=labels,
                taints=draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)),
                ready=draw(st.sampled_from([True, True, True, False])),
                unschedulable=draw(st.integers(0, 9)) == 0,
                allocatable=extra,
            )
        )
    return result


@st.composite
def pods(draw: st.DrawFn, count: int) -> list[dict[str, Any]]:
    result = []
    for i in range(count):
        requests = {}
        if draw(st.integers(0, 3)) == 0:
            requests[GPU] = str(draw(st.integers(0, 3)))
        if draw(st.integers(0, 5)) == 0:
            requests["ephemeral-storage"] = "1Gi"
        tolerations = [{"key": "dedicated", "operator": "Exists"}] if draw(st.booleans()) else []
        selector = {"zone": draw(st.sampled_from(LABELS["zone"]))} if draw(st.integers(0, 4)) == 0 else None
        tenant = draw(st.sampled_from([None, "t1", "t2"]))
        result.append(
            pod(
                f"pod-{i:03}",
                cpu=draw(quantities_cpu),
                memory=draw(quantities_memory),
                requests=requests,
                tolerations=tolerations,
                node_selector=selector,
                labels={"tenant": tenant} if tenant else None,
                priority=draw(st.sampled_from([0, 0, 100])),
            )
        )
    return result


def check_accounting(cluster: ClusterState) -> None:
    """Nothing overcommitted, and the incremental columns equal a recomputation from the pods."""
    assert cluster.overcommitted() == []
    for name, slot in cluster.index.items():
        info = cluster.node(name)
        assert info is not None
        expected = dict.fromkeys(cluster.resources, 0)
        nonzero = [0, 0]
        count = 0
        for record in cluster.pods.values():
            if record.node != name:
                continue
            count += 1
            for resource, amount in record.pod.requests.items():
                expected[resource] += amount
            nonzero[0] += record.pod.nonzero_cpu
            nonzero[1] += record.pod.nonzero_memory
        expected["pods"] = count
        actual = {resource: int(cluster.requested[slot, column]) for resource, column in cluster.resource_index.items()}
        assert actual == expected, name
        assert cluster.nonzero_requested[slot].tolist() == nonzero
        for resource, amount in expected.items():
            if amount > 0:
                assert amount <= info.allocatable.get(resource, 0), (name, resource)
    assert cluster.requested[:, PODS].sum() == sum(1 for r in cluster.pods.values() if r.node in cluster.index)


operations = st.lists(
    st.tuples(st.sampled_from(["schedule"] * 6 + ["forget", "confirm", "remove_pod", "remove_node", "readd_node"]),
              st.integers(0, 1000)),
    min_size=5,
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_objs=nodes(), data=st.data(), ops=operations, profile=st.sampled_from(sorted(PROFILES)))
def test_no_node_is_ever_overcommitted(
    node_objs: list[dict[str, Any]], data: st.DataObject, ops: list[tuple[str, int]], profile: str
) -> None:
    pod_objs = data.draw(pods(len(ops)))
    pending = [parse_pod(p) for p in pod_objs]
    objs_by_key = {info.key: obj for info, obj in zip(pending, pod_objs, strict=True)}
    cluster = ClusterState(capacity=4)
    for obj in node_objs:
        cluster.upsert_node(parse_node(obj))
    scheduler = Scheduler()
    assumed: list[PodInfo] = []
    removed_nodes: list[dict[str, Any]] = []
    placed = 0
    for step, (op, pick) in enumerate(ops):
        if op == "schedule":
            info = pending[step]
            decision = scheduler.schedule(info, PROFILES[profile], cluster)
            if decision.node is not None:
                assert decision.node in cluster.index
                cluster.assume(info, decision.node)
                assumed.append(info)
                placed += 1
            else:
                assert decision.message is not None
                assert decision.message.startswith(f"0/{cluster.node_count} nodes are available: ") or (
                    cluster.node_count == 0 and decision.message == "no nodes available to schedule pods"
                )
        elif op == "forget" and assumed:
            info = assumed.pop(pick % len(assumed))
            if cluster.is_assumed(info.key):
                cluster.forget(info.key)
        elif op == "confirm" and assumed:
            info = assumed.pop(pick % len(assumed))
            record = cluster.pods.get(info.key)
            if record is not None and record.assumed:
                obj = objs_by_key[info.key]
                # the watch event of the binding: the same pod, now with spec.nodeName
                cluster.add_pod(parse_pod({**obj, "spec": {**obj["spec"], "nodeName": record.node}}))
                assert not cluster.is_assumed(info.key)
        elif op == "remove_pod" and cluster.pods:
            keys = sorted(cluster.pods)
            cluster.remove_pod(keys[pick % len(keys)])
        elif op == "remove_node" and cluster.node_count:
            names = sorted(cluster.index)
            name = names[pick % len(names)]
            removed_nodes.append(next(n for n in node_objs if n["metadata"]["name"] == name))
            cluster.remove_node(name)
        elif op == "readd_node" and removed_nodes:
            cluster.upsert_node(parse_node(removed_nodes.pop(pick % len(removed_nodes))))
        check_accounting(cluster)
    for obj in removed_nodes:
        cluster.upsert_node(parse_node(obj))
    check_accounting(cluster)


def place_all(node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]], profile: Profile) -> list[str | None]:
    cluster = ClusterState(capacity=4)
    for obj in node_objs:
        cluster.upsert_node(parse_node(obj))
    scheduler = Scheduler()
    placements = []
    for obj in pod_objs:
        info = parse_pod(obj)
        decision = scheduler.schedule(info, profile, cluster)
        placements.append(decision.node)
        if decision.node is not None:
            cluster.assume(info, decision.node)
    check_accounting(cluster)
    return placements


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_objs=nodes(), data=st.data(), profile=st.sampled_from(sorted(PROFILES)))
def test_same_input_same_placements(node_objs: list[dict[str, Any]], data: st.DataObject, profile: str) -> None:
    pod_objs = data.draw(pods(data.draw(st.integers(1, 25))))
    first = place_all(node_objs, pod_objs, PROFILES[profile])
    assert place_all(node_objs, pod_objs, PROFILES[profile]) == first
    # with every feasible node scored (fewer than 100 nodes), the listing order does not matter
    shuffled = data.draw(st.permutations(node_objs))
    assert place_all(shuffled, pod_objs, PROFILES[profile]) == first


# ----------------------------------------------------------------- pods' relations

ZONE = "topology.kubernetes.io/zone"


@st.composite
def relation_steps(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, int, int, int]]]:
    """Nodes over 2-3 zones (some without a zone label), and pods: (app, cpu millis, maxSkew, hard)
    where `hard` picks the relations: 0 none, 1 zone spread, 2 hostname anti-affinity, 3 both."""
    zones = draw(st.sampled_from([("a", "b"), ("a", "b", "c")]))
    node_objs = []
    for i in range(draw(st.integers(2, 8))):
        labels = {ZONE: draw(st.sampled_from(zones))} if draw(st.integers(0, 5)) else {}
        node_objs.append(node(f"n{i}", cpu=str(draw(st.integers(1, 4))), labels=labels))
    pods = draw(st.lists(
        st.tuples(st.sampled_from(["web", "db"]), st.sampled_from([100, 500, 1500]), st.integers(1, 2),
                  st.integers(0, 3)),
        min_size=1, max_size=18,
    ))
    return node_objs, pods


def relation_pod(index: int, app: str, millis: int, max_skew: int, hard: int) -> dict[str, Any]:
    selector = {"matchLabels": {"app": app}}
    spread = [{"maxSkew": max_skew, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": selector}] if hard & 1 else []
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]} if hard & 2 else None
    return pod(f"{app}-{index}", cpu=f"{millis}m", labels={"app": app}, spread=spread, pod_anti_affinity=anti)


def legal_nodes(candidate: PodInfo, placed: list[tuple[PodInfo, str]], node_objs: list[dict[str, Any]]) -> set[str]:
    """Brute force, apart from the engine: the nodes where `candidate` breaks no relation and fits."""
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in node_objs}
    capacity = {n["metadata"]["name"]: parse_node(n).allocatable["cpu"] for n in node_objs}
    app = candidate.labels["app"]
    legal = set()
    for name in labels:
        used = sum(p.requests.get("cpu", 0) for p, where in placed if where == name)
        if used + candidate.requests.get("cpu", 0) > capacity[name]:
            continue
        here = [p for p, where in placed if where == name]
        # required anti-affinity, both ways: an app's pod with it never shares a node with its app
        if any(p.labels["app"] == app and (p.relations.required_anti_affinity or
                                           candidate.relations.required_anti_affinity) for p in here):
            continue
        ok = True
        for constraint in candidate.spread_constraints:
            if ZONE not in labels[name]:
                ok = False
                break
            domains = {v[ZONE] for v in labels.values() if ZONE in v}
            counts = {d: sum(1 for p, where in placed if p.labels["app"] == app and labels[where].get(ZONE) == d)
                      for d in domains}
            if counts[labels[name][ZONE]] + 1 - min(counts.values()) > constraint.max_skew:
                ok = False
        if ok:
            legal.add(name)
    return legal


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relation_steps())
def test_no_sequence_breaks_a_required_anti_affinity_or_a_hard_skew(
    case: tuple[list[dict[str, Any]], list[tuple[str, int, int, int]]],
) -> None:
    node_objs, specs = case
    cluster = ClusterState()
    for item in node_objs:
        cluster.upsert_node(parse_node(item))
    profile = PROFILES["default"]
    scheduler = Scheduler()
    placed: list[tuple[PodInfo, str]] = []
    for index, spec in enumerate(specs):
        candidate = parse_pod(relation_pod(index, *spec))
        legal = legal_nodes(candidate, placed, node_objs)
        decision = scheduler.schedule(candidate, profile, cluster)
        if decision.node is None:
            assert not legal, f"{candidate.key} refused ({decision.message}) but {sorted(legal)} were legal"
            continue
        assert decision.node in legal, f"{candidate.key} -> {decision.node}, legal: {sorted(legal)}"
        cluster.assume(candidate, decision.node)
        placed.append((candidate, decision.node))
