"""The bundled examples: cluster.yaml is what the generator writes, and the profiles are sound.

These check the shape of the files; what `placer simulate` does with them is tested elsewhere, but
for the one promise a recipe makes about placements: ha.yaml spreads the checkout replicas.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.engine import profile as profile_defaults
from placer.plugins import FILTER_NAMES, SCORE_NAMES
from placer.simulate import render_json, simulate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PROFILES = EXAMPLES / "profiles"
GENERATOR = EXAMPLES / "generate_cluster.py"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

EXPECTED_PROFILES = {
    "default": "placer",
    "spread": "spread-scheduler",
    "binpack": "binpack-scheduler",
    "prefer-node": "prefer-node-scheduler",
    "require-label": "cpu-scheduler",
    "avoid-label": "avoid-hello-scheduler",
    "spread-tenants": "tenant-spread-scheduler",
    "avoid-busy": "avoid-busy-scheduler",
    "ha": "ha-scheduler",
}
FILTERS = FILTER_NAMES
SCORES = SCORE_NAMES
DEFAULT_FILTERS = [f["name"] for f in profile_defaults.DEFAULT_FILTERS]
DEFAULT_SCORES = [(s["name"], s.get("weight", 1)) for s in profile_defaults.DEFAULT_SCORES]
# What each profile that lists scores changes in the default scores: {plugin: new weight, or None
# when it is left out}, and the plugins it adds after them.
SCORE_CHANGES: dict[str, tuple[dict[str, int | None], list[tuple[str, int]]]] = {
    "spread": ({"NodeResourcesFit": 2}, []),
    "binpack": ({"NodeResourcesFit": 5, "NodeResourcesBalancedAllocation": None}, []),
    "prefer-node": ({}, [("PreferNode", 10)]),
    "avoid-label": ({}, [("NodeLabel", 10)]),
    "spread-tenants": ({}, [("SpreadByLabel", 5)]),
    "avoid-busy": ({}, [("NodeUtilization", 3)]),
    "ha": ({}, []),
}
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ZONES = {"zone-a", "zone-b", "zone-c"}
TENANTS = {"tenant-1", "tenant-2", "tenant-3", "tenant-4"}

Manifest = dict[str, Any]

_SUFFIXES = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}


def quantity(text: str | int) -> float:
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)", str(text))
    assert match and match.group(2) in _SUFFIXES, f"not a quantity: {text!r}"
    return float(match.group(1)) * _SUFFIXES[match.group(2)]


def pod_requests(pod: Manifest) -> dict[str, float]:
    """What the scheduler counts: max(sum of containers, each init container) + overhead."""
    spec = pod["spec"]
    totals: dict[str, float] = defaultdict(float)
    for c in spec["containers"]:
        for name, value in c.get("resources", {}).get("requests", {}).items():
            totals[name] += quantity(value)
    for c in spec.get("initContainers", []):
        for name, value in c.get("resources", {}).get("requests", {}).items():
            totals[name] = max(totals[name], quantity(value))
    for name, value in spec.get("overhead", {}).items():
        totals[name] += quantity(value)
    return dict(totals)


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("examples")
    subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(out)], check=True, timeout=60, cwd=ROOT
    )
    return out


@pytest.fixture(scope="module")
def documents() -> list[Manifest]:
    with (EXAMPLES / "cluster.yaml").open() as f:
        return list(yaml.load_all(f, Loader=LOADER))


@pytest.fixture(scope="module")
def items(documents: list[Manifest]) -> list[Manifest]:
    return documents[0]["items"]


@pytest.fixture(scope="module")
def nodes(items: list[Manifest]) -> dict[str, Manifest]:
    return {i["metadata"]["name"]: i for i in items if i["kind"] == "Node"}


@pytest.fixture(scope="module")
def pods(items: list[Manifest]) -> list[Manifest]:
    return [i for i in items if i["kind"] == "Pod"]


@pytest.fixture(scope="module")
def pending(pods: list[Manifest]) -> list[Manifest]:
    return [p for p in pods if not p["spec"].get("nodeName")]


@pytest.fixture(scope="module")
def metrics(documents: list[Manifest]) -> list[Manifest]:
    return documents[1:]


def load_profile(path: Path) -> Manifest:
    with path.open() as f:
        docs = [d for d in yaml.load_all(f, Loader=LOADER) if d is not None]
    assert len(docs) == 1, f"{path.name}: expected one document"
    return docs[0]


def profile_paths() -> list[Path]:
    return sorted(p for p in PROFILES.glob("*.yaml") if p.name != "all.yaml")


# --- the generator ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cluster.yaml", "profiles/all.yaml"])
def test_checked_in_file_is_the_generators_output(generated: Path, name: str) -> None:
    assert (generated / name).read_text() == (EXAMPLES / name).read_text(), (
        f"examples/{name} is stale: run `python examples/generate_cluster.py`"
    )


# --- cluster.yaml -----------------------------------------------------------------------------


def test_cluster_is_a_list_followed_by_node_metrics(documents: list[Manifest]) -> None:
    listing = documents[0]
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    kinds = [(i["apiVersion"], i["kind"]) for i in listing["items"]]
    # what `kubectl get namespaces,nodes,pods,services,replicasets -A -o yaml` prints: kind by kind
    order = [("v1", "Namespace"), ("v1", "Node"), ("v1", "Pod"), ("v1", "Service"), ("apps/v1", "ReplicaSet")]
    assert list(dict.fromkeys(kinds)) == order
    for kind in order:
        keys = [
            (i["metadata"].get("namespace", ""), i["metadata"]["name"])
            for i in listing["items"]
            if (i["apiVersion"], i["kind"]) == kind
        ]
        assert keys == sorted(keys), f"{kind[1]}s in the order the API server lists them"
    assert all(
        (d["apiVersion"], d["kind"]) == ("metrics.k8s.io/v1beta1", "NodeMetrics")
        for d in documents[1:]
    )


def test_nodes(nodes: dict[str, Manifest]) -> None:
    assert 45 <= len(nodes) <= 55
    for name, node in nodes.items():
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == name
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["topology.kubernetes.io/zone"] in ZONES
        assert "node.kubernetes.io/instance-type" in labels
        assert node["metadata"]["creationTimestamp"]
        status = node["status"]
        assert status["allocatable"]["pods"] == "110"
        for resource in ("cpu", "memory", "ephemeral-storage"):
            allocatable = quantity(status["allocatable"][resource])
            assert 0 < allocatable < quantity(status["capacity"][resource]), (name, resource)
        assert [c["type"] for c in status["conditions"]].count("Ready") == 1
        for image in status["images"]:
            assert 50e6 <= image["sizeBytes"] <= 900e6
            assert any(re.search(r":[\w.]+$", n) for n in image["names"])
    zones = Counter(n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes.values())
    assert set(zones) == ZONES
    sizes = Counter(n["status"]["capacity"]["cpu"] for n in nodes.values())
    assert {"4", "8", "16", "32"} <= set(sizes)


def _taints(node: Manifest) -> set[tuple[str, str | None, str]]:
    return {(t["key"], t.get("value"), t["effect"]) for t in node["spec"].get("taints", [])}


def _ready(node: Manifest) -> str:
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


def test_special_nodes(nodes: dict[str, Manifest]) -> None:
    cordoned = [n for n in nodes.values() if n["spec"].get("unschedulable")]
    assert len(cordoned) == 2
    for node in cordoned:
        assert ("node.kubernetes.io/unschedulable", None, "NoSchedule") in _taints(node)

    not_ready = [n for n in nodes.values() if _ready(n) != "True"]
    assert len(not_ready) == 2
    for node in not_ready:
        assert _ready(node) == "False"
        assert ("node.kubernetes.io/not-ready", None, "NoSchedule") in _taints(node)

    gpu = [n for n in nodes.values() if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert 2 <= len(gpu) <= 6
    for node in gpu:
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert ("dedicated", "gpu", "NoSchedule") in _taints(node)

    prefer_no_schedule = [
        n for n in nodes.values() if any(e == "PreferNoSchedule" for _, _, e in _taints(n))
    ]
    assert len(prefer_no_schedule) >= 2
    labels = [n["metadata"]["labels"] for n in nodes.values()]
    assert 3 <= sum(lbl.get("cpu") == "true" for lbl in labels) < len(nodes)
    assert 3 <= sum(lbl.get("node") == "hello" for lbl in labels) < len(nodes)


def test_pods_are_unique_and_well_formed(pods: list[Manifest]) -> None:
    assert len({p["metadata"]["uid"] for p in pods}) == len(pods)
    keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
    assert len(set(keys)) == len(keys)
    for pod in pods:
        assert pod["metadata"]["creationTimestamp"]
        assert pod["spec"]["restartPolicy"] in {"Always", "OnFailure", "Never"}
        assert pod["spec"]["priority"] in {0, 100, 1000, 2_000_000_000}
        for c in pod["spec"]["containers"]:
            assert c["name"] and c["image"]
            for value in c.get("resources", {}).get("requests", {}).values():
                quantity(value)


def test_pending_pods(pending: list[Manifest]) -> None:
    assert 180 <= len(pending) <= 220
    assert {p["status"]["phase"] for p in pending} == {"Pending"}
    assert {p["metadata"]["namespace"] for p in pending} == {"team-a", "team-b", "batch", "shop"}
    assert {p["spec"]["priority"] for p in pending} == {0, 100, 1000}
    tenants = {p["metadata"]["labels"].get("tenant") for p in pending}
    assert tenants - {None} == TENANTS
    assert all("app" in p["metadata"]["labels"] for p in pending)
    created = sorted(p["metadata"]["creationTimestamp"] for p in pending)
    assert created[0][:13] != created[-1][:13], "creation times should spread over an hour"

    schedulers = Counter(p["spec"]["schedulerName"] for p in pending)
    assert set(schedulers) == set(EXPECTED_PROFILES.values()) | {"default-scheduler"}
    assert schedulers.most_common(1)[0][0] == "placer"
    assert 3 <= schedulers["default-scheduler"] <= 8


def test_pending_pods_cover_the_special_cases(
    pending: list[Manifest], nodes: dict[str, Manifest]
) -> None:
    specs = [p["spec"] for p in pending]
    containers = [c for s in specs for c in s["containers"]]

    def count(predicate: Any) -> int:
        return sum(1 for s in specs if predicate(s))

    assert count(lambda s: all(not c.get("resources") for c in s["containers"])) >= 2
    assert count(lambda s: s.get("initContainers")) >= 2
    assert count(lambda s: s.get("nodeSelector")) >= 2
    node_affinity = [s.get("affinity", {}).get("nodeAffinity", {}) for s in specs]
    assert sum("requiredDuringSchedulingIgnoredDuringExecution" in a for a in node_affinity) >= 2
    assert sum("preferredDuringSchedulingIgnoredDuringExecution" in a for a in node_affinity) >= 2
    assert "topology.kubernetes.io/zone" in str(node_affinity)
    host_ports = [p.get("hostPort") for c in containers for p in c.get("ports", [])]
    assert host_ports.count(8080) >= 2
    gpu = [s for s in specs if "nvidia.com/gpu" in str(s["containers"])]
    assert len(gpu) >= 2
    for spec in gpu:
        assert any(t.get("key") == "dedicated" for t in spec["tolerations"])

    biggest_cpu = max(quantity(n["status"]["allocatable"]["cpu"]) for n in nodes.values())
    too_big = [p for p in pending if pod_requests(p).get("cpu", 0) > biggest_cpu]
    assert too_big, "some pending pods should be unschedulable"


def test_bound_pods_fit_their_nodes(pods: list[Manifest], nodes: dict[str, Manifest]) -> None:
    running = [p for p in pods if p["spec"].get("nodeName") and p["status"]["phase"] == "Running"]
    assert 50 <= len(running) <= 70
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in running:
        node = pod["spec"]["nodeName"]
        assert node in nodes
        used[node].update(pod_requests(pod))
    for node, requested in used.items():
        allocatable = nodes[node]["status"]["allocatable"]
        for resource, amount in requested.items():
            assert amount <= quantity(allocatable.get(resource, "0")), (node, resource)


def test_node_metrics(metrics: list[Manifest], nodes: dict[str, Manifest]) -> None:
    assert 5 <= len(metrics) < len(nodes), "metrics for some nodes, not all"
    names = [m["metadata"]["name"] for m in metrics]
    assert len(set(names)) == len(names)
    busy_cpu = busy_memory = 0
    for doc in metrics:
        allocatable = nodes[doc["metadata"]["name"]]["status"]["allocatable"]
        assert doc["window"] == "30s" and doc["timestamp"]
        cpu = quantity(doc["usage"]["cpu"]) / quantity(allocatable["cpu"])
        memory = quantity(doc["usage"]["memory"]) / quantity(allocatable["memory"])
        assert 0 < cpu < 1 and 0 < memory < 1
        busy_cpu += cpu > 0.8
        busy_memory += memory > 0.85
    assert busy_cpu and busy_memory, "avoid-busy's filter should have something to reject"
    units = {re.sub(r"[0-9]", "", m["usage"]["cpu"]) for m in metrics}
    assert units == {"n", "m"}


def of_kind(items: list[Manifest], kind: str) -> list[Manifest]:
    return [i for i in items if i["kind"] == kind]


def test_namespaces(items: list[Manifest], pods: list[Manifest]) -> None:
    namespaces = {n["metadata"]["name"]: n for n in of_kind(items, "Namespace")}
    used = {i["metadata"]["namespace"] for i in items if "namespace" in i["metadata"]}
    assert used <= set(namespaces), "a Namespace object for every namespace the sample uses"
    for name, namespace in namespaces.items():
        labels = namespace["metadata"]["labels"]
        assert labels["kubernetes.io/metadata.name"] == name
        assert namespace["status"]["phase"] == "Active"
        if not name.startswith("kube-") and name != "default":
            assert {"team", "env"} <= set(labels), name


@pytest.fixture(scope="module")
def checkout(items: list[Manifest]) -> dict[str, Any]:
    """The HA workload of namespace shop: its Service, ReplicaSet and pods."""
    [service] = of_kind(items, "Service")
    [replicaset] = of_kind(items, "ReplicaSet")
    replicas = [p for p in of_kind(items, "Pod") if p["metadata"]["namespace"] == "shop"]
    return {"service": service, "replicaset": replicaset, "pods": replicas}


def test_checkout_workload(checkout: dict[str, Any], nodes: dict[str, Manifest]) -> None:
    service, replicaset, replicas = checkout["service"], checkout["replicaset"], checkout["pods"]
    assert (service["metadata"]["namespace"], service["metadata"]["name"]) == ("shop", "checkout")
    assert service["spec"]["selector"] == {"app": "checkout"}

    meta = replicaset["metadata"]
    template_hash = meta["labels"]["pod-template-hash"]
    assert (meta["namespace"], meta["name"]) == ("shop", f"checkout-{template_hash}")
    selector = {"app": "checkout", "pod-template-hash": template_hash}
    assert replicaset["spec"]["selector"] == {"matchLabels": selector}
    assert replicaset["spec"]["template"]["metadata"]["labels"] == selector
    assert replicaset["spec"]["replicas"] == len(replicas) == 8
    assert [r["kind"] for r in meta["ownerReferences"]] == ["Deployment"]

    owner = {k: meta[k] for k in ("name", "uid")} | {"apiVersion": "apps/v1", "kind": "ReplicaSet"}
    for pod in replicas:
        assert pod["metadata"]["name"].startswith(f"checkout-{template_hash}-")
        assert pod["metadata"]["labels"] == selector
        [reference] = pod["metadata"]["ownerReferences"]
        assert reference["controller"] is True and {k: reference[k] for k in owner} == owner
        spec = pod["spec"]
        assert spec["schedulerName"] == "ha-scheduler"
        assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
            {"labelSelector": {"matchLabels": {"app": "checkout"}}, "topologyKey": HOSTNAME}
        ]
        assert spec["topologySpreadConstraints"] == [
            {
                "labelSelector": {"matchLabels": {"app": "checkout"}},
                "matchLabelKeys": ["pod-template-hash"],
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
            }
        ]
        template = replicaset["spec"]["template"]["spec"]
        for key in ("affinity", "topologySpreadConstraints", "containers", "schedulerName"):
            assert spec[key] == template[key], key

    running = [p for p in replicas if p["spec"].get("nodeName")]
    assert len(running) == 2 and {p["status"]["phase"] for p in running} == {"Running"}
    zones = {nodes[p["spec"]["nodeName"]]["metadata"]["labels"][ZONE] for p in running}
    assert len(zones) == 2, "the running replicas are in different zones"
    assert replicaset["status"]["readyReplicas"] == len(running)
    pending = [p for p in replicas if not p["spec"].get("nodeName")]
    assert len(pending) == 6 and {p["status"]["phase"] for p in pending} == {"Pending"}


@pytest.mark.parametrize("profile", ["ha.yaml", "all.yaml"])
def test_ha_profile_spreads_the_checkout_replicas(
    profile: str, checkout: dict[str, Any], nodes: dict[str, Manifest]
) -> None:
    """The HA recipe's promise, in simulate's JSON: the 6 pending replicas land on 6 distinct nodes,
    none of them a running replica's, and the 8 replicas are spread over the zones with skew <= 1."""
    out = io.StringIO()
    render_json(simulate([EXAMPLES / "cluster.yaml"], [PROFILES / profile]), out)
    placements = json.loads(out.getvalue())["placements"]
    placed = {p["pod"]: p for p in placements if p["pod"].startswith("shop/")}
    pending = {f"shop/{p['metadata']['name']}" for p in checkout["pods"] if not p["spec"].get("nodeName")}
    assert set(placed) == pending
    assert all(p["profile"] == "ha" and p["node"] is not None for p in placed.values()), placed
    running = [p["spec"]["nodeName"] for p in checkout["pods"] if p["spec"].get("nodeName")]
    new = [p["node"] for p in placed.values()]
    assert len(set(new)) == 6 and not set(new) & set(running)
    zones = Counter(nodes[name]["metadata"]["labels"][ZONE] for name in running + new)
    assert set(zones) == ZONES and max(zones.values()) - min(zones.values()) <= 1, zones


# --- profiles ---------------------------------------------------------------------------------


def test_every_expected_profile_exists() -> None:
    assert {p.stem for p in profile_paths()} == set(EXPECTED_PROFILES)


@pytest.mark.parametrize("path", profile_paths(), ids=lambda p: p.stem)
def test_profile_file(path: Path) -> None:
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# ") and len(first_line) > 10, "one-line comment at the top"
    profile = load_profile(path)
    assert profile["apiVersion"] == "placer.dev/v1alpha1"
    assert profile["kind"] == "SchedulerProfile"
    assert profile["metadata"]["name"] == path.stem
    spec = profile["spec"]
    assert spec["schedulerName"] == EXPECTED_PROFILES[path.stem]
    for key, allowed in (("filters", FILTERS), ("scores", SCORES)):
        for plugin in spec.get(key, []):
            assert plugin["name"] in allowed, (key, plugin["name"])
            assert isinstance(plugin.get("args", {}), dict)
            if key == "scores":
                assert isinstance(plugin.get("weight", 1), int)
                assert 1 <= plugin.get("weight", 1) <= 100
            else:
                assert "weight" not in plugin


def test_default_profile_uses_the_defaults() -> None:
    spec = load_profile(PROFILES / "default.yaml")["spec"]
    assert "filters" not in spec and "scores" not in spec


def test_profiles_that_add_filters_keep_the_defaults() -> None:
    listed = {"require-label": ["NodeLabel"], "avoid-busy": ["NodeUtilization"], "ha": []}
    assert {p.stem for p in profile_paths() if "filters" in load_profile(p)["spec"]} == set(listed)
    for stem, extra in listed.items():
        filters = [f["name"] for f in load_profile(PROFILES / f"{stem}.yaml")["spec"]["filters"]]
        assert filters == [*DEFAULT_FILTERS, *extra], stem


def test_profiles_that_list_scores_keep_the_other_defaults() -> None:
    """Listing scores replaces the defaults: each profile lists them, changing only what it needs."""
    assert {p.stem for p in profile_paths() if "scores" in load_profile(p)["spec"]} == set(SCORE_CHANGES)
    for stem, (weights, added) in SCORE_CHANGES.items():
        scores = load_profile(PROFILES / f"{stem}.yaml")["spec"]["scores"]
        listed = [(s["name"], s.get("weight", 1)) for s in scores]
        kept = [(name, weights.get(name, weight)) for name, weight in DEFAULT_SCORES]
        assert listed == [(name, weight) for name, weight in kept if weight is not None] + added, stem


def test_profile_args() -> None:
    def score(stem: str, name: str) -> Manifest:
        scores = load_profile(PROFILES / f"{stem}.yaml")["spec"]["scores"]
        return next(s for s in scores if s["name"] == name)

    def filter_(stem: str, name: str) -> Manifest:
        filters = load_profile(PROFILES / f"{stem}.yaml")["spec"]["filters"]
        return next(f for f in filters if f["name"] == name)

    spread = score("spread", "NodeResourcesFit")
    assert spread["weight"] == 2
    assert spread["args"]["scoringStrategy"] == {
        "type": "LeastAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
    }
    binpack = score("binpack", "NodeResourcesFit")["args"]["scoringStrategy"]
    assert binpack["type"] == "MostAllocated"
    assert filter_("require-label", "NodeLabel")["args"] == {"required": {"cpu": "true"}}
    avoid = score("avoid-label", "NodeLabel")
    assert avoid["args"] == {"avoided": {"node": "hello"}} and avoid["weight"] >= 5
    spread_tenants = score("spread-tenants", "SpreadByLabel")["args"]
    assert spread_tenants == {"labelKey": "tenant"}
    assert filter_("avoid-busy", "NodeUtilization")["args"] == {
        "cpuThreshold": 0.8,
        "memoryThreshold": 0.85,
    }
    assert score("avoid-busy", "NodeUtilization")
    # bin-packing drops the system default spreading; the HA recipe tightens it
    assert score("binpack", "PodTopologySpread")["args"] == {"defaultingType": "List"}
    assert score("ha", "PodTopologySpread")["args"] == {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
        ],
    }


def test_prefer_node_names_nodes_of_the_sample_cluster(nodes: dict[str, Manifest]) -> None:
    preferred = next(
        s
        for s in load_profile(PROFILES / "prefer-node.yaml")["spec"]["scores"]
        if s["name"] == "PreferNode"
    )
    names = preferred["args"]["nodes"]
    assert len(names) == 2
    for name in names:
        assert name in nodes
        assert not nodes[name]["spec"].get("taints") and _ready(nodes[name]) == "True"


def test_all_yaml_holds_every_profile() -> None:
    with (PROFILES / "all.yaml").open() as f:
        combined = [d for d in yaml.load_all(f, Loader=LOADER) if d is not None]
    assert combined == [load_profile(p) for p in profile_paths()]
    scheduler_names = [d["spec"]["schedulerName"] for d in combined]
    assert len(set(scheduler_names)) == len(scheduler_names), "no two profiles may conflict"
