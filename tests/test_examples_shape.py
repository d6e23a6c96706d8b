"""The bundled examples: cluster.yaml is what the generator writes, and the profiles are sound.

These check the shape of the files; what `placer simulate` does with them is tested elsewhere, but
for the promises the recipes make about placements: ha.yaml spreads the checkout replicas,
stateful.yaml binds the postgres claims (static and dynamic), priority.yaml preempts sparing the
pods a PodDisruptionBudget covers, and its non-preempting pod waits.
"""

from __future__ import annotations

import copy
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
from placer.simulate import Simulation, placement, render_json, simulate, simulate_documents

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
    "stateful": "stateful-scheduler",
    "priority": "priority-scheduler",
    "gpu": "gpu-scheduler",
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
    "gpu": ({"DynamicResources": 5}, []),
}
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ZONES = {"zone-a", "zone-b", "zone-c"}
TENANTS = {"tenant-1", "tenant-2", "tenant-3", "tenant-4"}
# what `kubectl get namespaces,nodes,pods,services,replicasets,statefulsets,persistentvolumeclaims,
# persistentvolumes,storageclasses,csinodes,poddisruptionbudgets,priorityclasses -A -o yaml` prints
KIND_ORDER = [
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "PersistentVolume"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSINode"),
    ("policy/v1", "PodDisruptionBudget"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
]
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
SPOT_NODES = {"medium-15", "medium-16"}

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


@pytest.fixture(scope="module")
def priority_classes(items: list[Manifest]) -> dict[str, Manifest]:
    return {i["metadata"]["name"]: i for i in items if i["kind"] == "PriorityClass"}


def priority_of(pod: Manifest, classes: dict[str, Manifest]) -> int:
    """`spec.priority`, or for a pod as written (not yet admitted) its PriorityClass's value."""
    spec = pod["spec"]
    if "priority" in spec:
        return spec["priority"]
    return classes[spec["priorityClassName"]]["value"]


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
    assert list(dict.fromkeys(kinds)) == KIND_ORDER, "kind by kind, as kubectl prints them"
    for kind in KIND_ORDER:
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


def test_pods_are_unique_and_well_formed(pods: list[Manifest], priority_classes: dict[str, Manifest]) -> None:
    assert len({p["metadata"]["uid"] for p in pods}) == len(pods)
    keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
    assert len(set(keys)) == len(keys)
    for pod in pods:
        assert pod["metadata"]["creationTimestamp"]
        assert pod["spec"]["restartPolicy"] in {"Always", "OnFailure", "Never"}
        assert priority_of(pod, priority_classes) in {0, 100, 1000, 2_000_000_000}
        for c in pod["spec"]["containers"]:
            assert c["name"] and c["image"]
            for value in c.get("resources", {}).get("requests", {}).values():
                quantity(value)


def test_pending_pods(pending: list[Manifest], priority_classes: dict[str, Manifest]) -> None:
    assert 180 <= len(pending) <= 230
    assert {p["status"]["phase"] for p in pending} == {"Pending"}
    assert {p["metadata"]["namespace"] for p in pending} == {"team-a", "team-b", "batch", "shop", "data"}
    assert {priority_of(p, priority_classes) for p in pending} == {0, 100, 1000}
    tenants = {p["metadata"]["labels"].get("tenant") for p in pending}
    assert tenants - {None} == TENANTS
    assert all("app" in p["metadata"]["labels"] for p in pending)
    created = sorted(p["metadata"]["creationTimestamp"] for p in pending)
    assert created[0][:13] != created[-1][:13], "creation times should spread over an hour"

    schedulers = Counter(p["spec"]["schedulerName"] for p in pending)
    # (gpu-scheduler's pods are in dra-cluster.yaml, the DRA sample)
    assert set(schedulers) == set(EXPECTED_PROFILES.values()) - {"gpu-scheduler"} | {"default-scheduler"}
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
    assert 50 <= len(running) <= 80
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
    [service] = [s for s in of_kind(items, "Service") if s["metadata"]["namespace"] == "shop"]
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


# --- the volumes recipe (namespace data, stateful.yaml) ---------------------------------------


def by_name(items: list[Manifest], kind: str) -> dict[str, Manifest]:
    """Objects of a kind by name (namespace/name for namespaced ones)."""
    found = {}
    for item in of_kind(items, kind):
        meta = item["metadata"]
        found[f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]] = item
    return found


def claim_names(pod: Manifest) -> list[str]:
    volumes = pod["spec"].get("volumes", [])
    return [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]


def node_affinity_values(volume: Manifest, key: str) -> set[str]:
    [term] = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    [requirement] = term["matchExpressions"]
    assert (requirement["key"], requirement["operator"]) == (key, "In")
    return set(requirement["values"])


def test_storage_objects(items: list[Manifest], nodes: dict[str, Manifest], pods: list[Manifest]) -> None:
    classes = by_name(items, "StorageClass")
    claims = by_name(items, "PersistentVolumeClaim")
    volumes = by_name(items, "PersistentVolume")
    local = classes["local-ssd"]
    assert (local["provisioner"], local["volumeBindingMode"]) == (NO_PROVISIONER, "WaitForFirstConsumer")
    zonal = classes["zonal-disk"]
    assert zonal["provisioner"] != NO_PROVISIONER and zonal["volumeBindingMode"] == "WaitForFirstConsumer"
    [topology] = zonal["allowedTopologies"]
    [zones] = topology["matchLabelExpressions"]
    assert zones["key"] == ZONE and set(zones["values"]) < ZONES
    assert classes["shared-files"]["volumeBindingMode"] == "Immediate"
    defaults = [n for n, c in classes.items()
                if c["metadata"].get("annotations", {}).get("storageclass.kubernetes.io/is-default-class") == "true"]
    assert defaults == ["zonal-disk"]

    for key, claim in claims.items():
        assert claim["spec"]["storageClassName"] in classes, key
        name = claim["spec"].get("volumeName")
        if name is None:
            assert claim["status"]["phase"] == "Pending", key
            continue
        # bound: the PV names the claim (uid included), the binding is complete, the zones agree
        volume = volumes[name]
        ref = volume["spec"]["claimRef"]
        assert (ref["namespace"], ref["name"], ref["uid"]) == (*key.split("/"), claim["metadata"]["uid"])
        assert claim["metadata"]["annotations"][BIND_COMPLETED] == "yes"
        assert claim["status"]["phase"] == volume["status"]["phase"] == "Bound"
        assert node_affinity_values(volume, ZONE) == {volume["metadata"]["labels"][ZONE]} <= set(zones["values"])
    free_local = [v for v in volumes.values() if v["spec"]["storageClassName"] == "local-ssd"]
    assert len(free_local) >= 3
    for volume in free_local:
        assert "claimRef" not in volume["spec"] and volume["status"]["phase"] == "Available"
        assert "local" in volume["spec"] and node_affinity_values(volume, HOSTNAME) <= set(nodes)

    used = {f"{p['metadata']['namespace']}/{name}" for p in pods for name in claim_names(p)}
    assert used - set(claims) == {"data/pg-backups"}, "one pod's claim is missing"

    for csinode in of_kind(items, "CSINode"):
        name = csinode["metadata"]["name"]
        [owner] = csinode["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", name, nodes[name]["metadata"]["uid"])
        counts = [d["allocatable"]["count"] for d in csinode["spec"]["drivers"] if d["name"] == zonal["provisioner"]]
        assert len(counts) == 1 and counts[0] > 0


def test_statefulsets(items: list[Manifest], pods: list[Manifest]) -> None:
    services = by_name(items, "Service")
    claims = by_name(items, "PersistentVolumeClaim")
    sets = by_name(items, "StatefulSet")
    assert set(sets) == {"data/postgres", "data/redis"}
    for key, workload in sets.items():
        namespace, name = key.split("/")
        spec = workload["spec"]
        selector = spec["selector"]["matchLabels"]
        assert spec["template"]["metadata"]["labels"] == selector
        assert services[f"{namespace}/{spec['serviceName']}"]["spec"]["selector"] == selector
        uid = workload["metadata"]["uid"]
        owned = [p for p in pods if any(r["uid"] == uid for r in p["metadata"].get("ownerReferences", []))]
        assert sorted(p["metadata"]["name"] for p in owned) == [f"{name}-{i}" for i in range(spec["replicas"])]
        [template] = spec["volumeClaimTemplates"]
        for pod in owned:
            labels = pod["metadata"]["labels"]
            assert selector.items() <= labels.items()
            assert labels["statefulset.kubernetes.io/pod-name"] == pod["metadata"]["name"]
            assert claim_names(pod) == [f"{template['metadata']['name']}-{pod['metadata']['name']}"]
            assert f"{namespace}/{claim_names(pod)[0]}" in claims
        running = [p for p in owned if p["spec"].get("nodeName")]
        assert workload["status"]["readyReplicas"] == len(running)


@pytest.fixture(scope="module")
def simulations() -> dict[str, Simulation]:
    """simulate's decisions on the sample, in process, with each profile file the recipes use."""
    runs = {"stateful.yaml": ["stateful.yaml"], "priority.yaml": ["priority.yaml"], "all.yaml": ["all.yaml"],
            "all.yaml + priority.yaml": ["all.yaml", "priority.yaml"]}
    return {name: simulate([EXAMPLES / "cluster.yaml"], [PROFILES / file for file in files])
            for name, files in runs.items()}


def placements_of(simulation: Simulation) -> dict[str, Manifest]:
    return {d.pod: placement(d) for d in simulation.decisions}


@pytest.mark.parametrize("profile", ["stateful.yaml", "all.yaml"])
def test_stateful_profile_binds_the_claims(
    profile: str, simulations: dict[str, Simulation], items: list[Manifest], nodes: dict[str, Manifest]
) -> None:
    """The volumes recipe's promise, in simulate's JSON: the postgres replicas whose claims a free
    local PV can take get one on the PV's node (each its own), the replica whose class provisions
    gets its node as `selectedNode` (`volume` null, in an allowed zone), redis-2 goes to its bound
    disk's zone and binds nothing, and the two jobs with unusable claims say why."""
    placed = placements_of(simulations[profile])
    volumes = by_name(items, "PersistentVolume")
    claims = by_name(items, "PersistentVolumeClaim")
    ours = {key: p for key, p in placed.items() if key.startswith("data/")}
    assert {p["profile"] for p in ours.values()} == {"stateful"}
    assert all(p["volumes"] == [] for key, p in placed.items() if key not in ours)

    static = []
    for ordinal in (0, 1):
        p = ours[f"data/postgres-{ordinal}"]
        [binding] = p["volumes"]
        assert binding["claim"] == f"data/data-postgres-{ordinal}" and binding["selectedNode"] == p["node"]
        volume = volumes[binding["volume"]]
        assert volume["spec"]["storageClassName"] == "local-ssd" and volume["status"]["phase"] == "Available"
        assert node_affinity_values(volume, HOSTNAME) == {p["node"]}
        want = quantity(claims[binding["claim"]]["spec"]["resources"]["requests"]["storage"])
        assert quantity(volume["spec"]["capacity"]["storage"]) >= want
        static.append(binding["volume"])
    assert len(set(static)) == 2, "two claims never get the same PV"

    dynamic = ours["data/postgres-2"]
    assert dynamic["node"] is not None and dynamic["message"] is None
    assert dynamic["volumes"] == [{"claim": "data/data-postgres-2", "volume": None, "selectedNode": dynamic["node"]}]
    zonal = by_name(items, "StorageClass")["zonal-disk"]
    allowed = set(zonal["allowedTopologies"][0]["matchLabelExpressions"][0]["values"])
    assert nodes[dynamic["node"]]["metadata"]["labels"][ZONE] in allowed
    assert len({ours[f"data/postgres-{i}"]["node"] for i in range(3)}) == 3

    redis = ours["data/redis-2"]
    disk = volumes[claims["data/data-redis-2"]["spec"]["volumeName"]]
    assert redis["volumes"] == [] and redis["node"] is not None
    assert nodes[redis["node"]]["metadata"]["labels"][ZONE] == disk["metadata"]["labels"][ZONE]

    unusable = {key: p for key, p in ours.items() if p["node"] is None}
    assert sorted(p["message"] for p in unusable.values()) == [
        "0/50 nodes are available: persistentvolumeclaim \"pg-backups\" not found.",
        "0/50 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    ]
    assert all(p["volumes"] == [] and p["preemption"] is None for p in unusable.values())


# --- the priority recipe (namespace batch, priority.yaml) --------------------------------------


@pytest.fixture(scope="module")
def budget(items: list[Manifest]) -> Manifest:
    [pdb] = of_kind(items, "PodDisruptionBudget")
    return pdb


def covered(pod: Manifest, pdb: Manifest) -> bool:
    selector = pdb["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"].get("labels", {})
    return pod["metadata"]["namespace"] == pdb["metadata"]["namespace"] and selector.items() <= labels.items()


def test_priority_objects(
    items: list[Manifest], pods: list[Manifest], priority_classes: dict[str, Manifest], budget: Manifest,
    nodes: dict[str, Manifest],
) -> None:
    assert not any(c.get("globalDefault") for c in priority_classes.values()), "pods without a class keep 0"
    assert priority_classes["high-nonpreempting"]["preemptionPolicy"] == "Never"
    for pod in pods:
        spec = pod["spec"]
        name = spec.get("priorityClassName")
        if name is not None:
            assert spec.get("priority", priority_classes[name]["value"]) == priority_classes[name]["value"], name
        else:
            assert spec["priority"] == 0
    unadmitted = [p for p in pods if "priority" not in p["spec"]]
    assert unadmitted and all("preemptionPolicy" not in p["spec"] and not p["spec"].get("nodeName") for p in unadmitted)

    members = [p for p in pods if covered(p, budget)]
    status = budget["status"]
    assert status["expectedPods"] == status["currentHealthy"] == len(members) == budget["spec"]["minAvailable"]
    assert status["disruptionsAllowed"] == status["currentHealthy"] - status["desiredHealthy"] == 0
    assert {p["spec"]["nodeName"] for p in members} == SPOT_NODES
    # the spot nodes are full: no pending pod with requests fits there as they are
    for name in SPOT_NODES:
        requested = sum(pod_requests(p).get("cpu", 0) for p in pods
                        if p["spec"].get("nodeName") == name and p["status"]["phase"] == "Running")
        assert 0 <= quantity(nodes[name]["status"]["allocatable"]["cpu"]) - requested < 0.1, name


def preemptions(simulation: Simulation) -> dict[str, Manifest]:
    return {key: p for key, p in placements_of(simulation).items() if p["preemption"] is not None}


@pytest.mark.parametrize("profile", ["priority.yaml", "all.yaml + priority.yaml"])
def test_priority_profile_preempts_sparing_the_budget(
    profile: str, simulations: dict[str, Simulation], pods: list[Manifest], budget: Manifest,
    priority_classes: dict[str, Manifest],
) -> None:
    """The priority recipe's promise, in simulate's JSON: each `ingest` job (PriorityClass high, no
    spec.priority) is placed by preemption on a spot node, evicting only lower-priority pods that
    ran there and none that the PodDisruptionBudget covers; no pod is evicted twice."""
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    found = preemptions(simulations[profile])
    ingest = {k for k, p in by_key.items() if p["metadata"]["labels"].get("app") == "ingest"}
    assert set(found) == ingest and len(ingest) == 2
    victims: list[str] = []
    for key, p in found.items():
        assert p["profile"] == "priority" and p["node"] == p["preemption"]["node"] in SPOT_NODES
        assert p["message"].startswith("0/50 nodes are available: 2 Insufficient cpu, ")
        assert p["scores"] == [] and p["volumes"] == []
        assert p["preemption"]["victims"], key
        for victim in p["preemption"]["victims"]:
            pod = by_key[victim]
            assert pod["spec"]["nodeName"] == p["node"] and not covered(pod, budget), victim
            assert priority_of(pod, priority_classes) < priority_classes["high"]["value"]
        victims += p["preemption"]["victims"]
    assert len(set(victims)) == len(victims)
    assert len({p["node"] for p in found.values()}) == 2, "one job per spot node"


def test_without_the_budget_the_youngest_jobs_would_go(documents: list[Manifest], budget: Manifest) -> None:
    """What spares the `backfill` jobs is their PodDisruptionBudget: without it, preemption takes the
    least important pods (kube's order: lower priority, then later start), which are they."""
    listing = copy.deepcopy(documents[0])
    listing["items"] = [i for i in listing["items"] if i["kind"] != "PodDisruptionBudget"]
    profiles = [(1, load_profile(PROFILES / "priority.yaml"))]
    simulation = simulate_documents(
        [(EXAMPLES / "cluster.yaml", [(1, listing)])], [(PROFILES / "priority.yaml", profiles)]
    )
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in of_kind(listing["items"], "Pod")}
    victims = [v for p in preemptions(simulation).values() for v in p["preemption"]["victims"]]
    assert victims and any(covered(pods[v], budget) for v in victims)


@pytest.mark.parametrize("profile", ["priority.yaml", "all.yaml + priority.yaml"])
def test_a_never_preempting_pod_waits(profile: str, simulations: dict[str, Simulation]) -> None:
    [decision] = [d for d in simulations[profile].decisions if d.pod.startswith("batch/replay-")]
    assert decision.node is None and decision.preemption is None
    assert decision.message is not None
    assert decision.message.startswith("0/50 nodes are available: 2 Insufficient cpu, ")
    # the FailedScheduling event and the PodScheduled condition say why it did not preempt
    assert decision.full_message is not None and decision.full_message.startswith(f"{decision.message} ")
    assert "not eligible due to preemptionPolicy=Never" in decision.full_message


def test_pods_named_for_a_priority_class_are_queued_by_its_value(simulations: dict[str, Simulation]) -> None:
    """The `ingest` and `replay` jobs carry no spec.priority: simulate resolves `priorityClassName`
    as the API server would, so they come before every pending pod of lower priority."""
    run = simulations["all.yaml + priority.yaml"]
    order = [d.pod for d in run.decisions]
    priority = {p.key: p.priority for p in run.pending}
    urgent = [i for i, key in enumerate(order) if key.startswith(("batch/ingest-", "batch/replay-"))]
    assert len(urgent) == 3 and all(priority[order[i]] == 1000 for i in urgent)
    assert all(priority[key] < 1000 for key in order[max(urgent) + 1:])


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


def test_all_yaml_holds_every_profile_but_priority() -> None:
    """priority.yaml preempts: all.yaml places the other profiles' pods without evicting any."""
    with (PROFILES / "all.yaml").open() as f:
        combined = [d for d in yaml.load_all(f, Loader=LOADER) if d is not None]
    assert combined == [load_profile(p) for p in profile_paths() if p.name != "priority.yaml"]
    scheduler_names = [load_profile(p)["spec"]["schedulerName"] for p in profile_paths()]
    assert len(set(scheduler_names)) == len(scheduler_names), "no two profiles may conflict"


def test_all_yaml_evicts_nothing(simulations: dict[str, Simulation]) -> None:
    """Without priority.yaml, no pending pod of the sample preempts: every placement of all.yaml
    fits beside the running pods, and the priority recipe's pods are nobody's."""
    placed = placements_of(simulations["all.yaml"])
    assert all(p["preemption"] is None for p in placed.values())
    assert not any(key.startswith(("batch/ingest-", "batch/replay-")) for key in placed)


def test_dra_cluster_with_the_gpu_profile() -> None:
    """examples/dra-cluster.yaml with gpu.yaml: the pair behind one PCIe root gets gpu-a-1's two GPUs,
    the "80Gi, else any" claim its first choice on gpu-b-1 (its tainted GPU left alone), the
    template's claim the last free GPU, the shared claim's second pod its node; four GPUs and a claim
    not created yet leave their pods pending with kube-scheduler's words."""
    simulation = simulate([EXAMPLES / "dra-cluster.yaml"], [PROFILES / "gpu.yaml"])
    placed = {p["pod"]: p for p in map(placement, simulation.decisions)}

    def devices(key: str) -> list[tuple[str, str, str]]:
        return [(d["claim"], d["request"], f"{d['pool']}/{d['device']}") for d in placed[key]["devices"]]

    assert placed["ml/train-pair"]["node"] == "gpu-a-1"
    assert devices("ml/train-pair") == [("ml/train-pair-gpus", "gpus", "gpu-a-1/gpu-0"),
                                        ("ml/train-pair-gpus", "gpus", "gpu-a-1/gpu-1")]
    assert placed["ml/infer-0"]["node"] == "gpu-b-1"
    assert devices("ml/infer-0") == [("ml/infer-0-gpu", "gpu/large", "gpu-b-1/gpu-0")]
    assert placed["ml/infer-0"]["scores"][0]["plugins"]["DynamicResources"] == 100
    assert devices("ml/train-0") == [("ml/train-0-gpu-x7k2p", "gpu", "gpu-a-2/gpu-1")]
    assert placed["ml/notebook-1"]["node"] == "gpu-a-2" and placed["ml/notebook-1"]["devices"] == []
    assert placed["ml/train-big"]["message"] == "0/4 nodes are available: 4 cannot allocate all claims."
    assert placed["ml/train-late"]["message"] == (
        '0/4 nodes are available: pod "ml/train-late": ResourceClaim not created yet.')
