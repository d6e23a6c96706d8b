"""Each example profile end to end: the sample cluster in the emulator, the real operator over HTTP.

The operator must place every pending pod of the profile exactly where `placer simulate` places it
on the very objects the server holds (same engine, same queue order; simulate's algorithm is
replayed here without its YAML parsing, which alone would take a second per test), bind each
once, never overcommit a node, write the volume bindings simulate lists before binding the pod
(the emulator's PV controller and provisioner complete them), and report as API.md §3 says.

The pods simulate places by preemption (priority.yaml's `ingest` jobs) are left out of the
emulator: the operator evicts for real and asynchronously, so which pods it has placed by the time
the victims are gone — and so the placements after them in the queue — would depend on timing.
Preemption end to end is tests/controller/test_integration_preemption.py's subject.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.engine.cluster import ClusterState
from placer.engine.devices import DELETE_PROTECTION
from placer.engine.kinds import KINDS, upsert_object
from placer.engine.parsing import parse_node, parse_node_metrics, parse_pod
from placer.engine.profile import compile_profile
from placer.engine.queue import queue_order
from placer.engine.runtime import Decision
from placer.engine.storage import VolumeBindings
from placer.plugins.dynamic_resources import DeviceReservation
from placer.simulate import Simulation, place, simulate

from tests.controller.helpers import EXAMPLES, OperatorThread, operator_options, until
from tests.kubeemu import KubeEmulator

# every example on its own, and all.yaml: all of them at once, sharing one queue and one cluster
PROFILE_FILES = sorted((EXAMPLES / "profiles").glob("*.yaml"))
# the sample each example runs on: gpu.yaml's pods and devices are in the DRA sample
CLUSTER_FILES = {"gpu.yaml": "dra-cluster.yaml"}
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# the emulator's resource for each kind of the sample: nodes, pods, NodeMetrics and the catalog's kinds
# (Namespace, Service, ReplicaSet, StatefulSet, claims, volumes, storage and priority classes...)
RESOURCES = {
    "Node": "nodes",
    "Pod": "pods",
    "NodeMetrics": "metrics.k8s.io/v1beta1/nodes",
    **{kind.name: f"{kind.api_version}/{kind.plural}" for kind in KINDS},
}
# created first: the classes pods and claims name (the Priority admission refuses a pod naming a
# class that does not exist: the `replay` job carries no spec.priority, only its class)
LOAD_FIRST = ("PriorityClass", "StorageClass")
ZONE = "topology.kubernetes.io/zone"
CLAIMS = RESOURCES["ResourceClaim"]
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# the provisioner of the sample's zonal-disk class, and the label it pins a volume to
ZONAL_PROVISIONER = {"disk.csi.example.com": ZONE}


@functools.cache
def preempting_pods() -> frozenset[str]:
    """The pods `placer simulate` places by preemption with any example profile (see the docstring)."""
    profiles = [path for path in PROFILE_FILES if path.name != "all.yaml"]
    simulation = simulate([EXAMPLES / "cluster.yaml"], profiles, top=0)
    return frozenset(d.pod for d in simulation.decisions if d.preemption is not None)


@functools.cache
def sample_objects(cluster_file: str = "cluster.yaml") -> tuple[tuple[str, str], ...]:
    """(resource, JSON body) for every object of an example cluster but the preempting pods, the
    classes first, parsed once per session."""
    objects: list[tuple[int, str, str]] = []
    for document in yaml.load_all((EXAMPLES / cluster_file).read_text(), Loader=LOADER):
        for item in (document or {}).get("items") or ([document] if document else []):
            meta = item["metadata"]
            if item["kind"] == "Pod" and f"{meta['namespace']}/{meta['name']}" in preempting_pods():
                continue
            resource = RESOURCES[item["kind"]]
            body = {k: v for k, v in item.items() if k not in ("apiVersion", "kind")}
            body["metadata"] = {k: v for k, v in meta.items()
                                if k not in ("uid", "resourceVersion", "creationTimestamp")}
            if item["kind"] == "PersistentVolume" and "claimRef" in body["spec"]:
                # the server gives the claim a uid of its own: the bound volume names it without one
                body["spec"]["claimRef"] = {k: v for k, v in body["spec"]["claimRef"].items()
                                            if k not in ("uid", "resourceVersion")}
            rank = LOAD_FIRST.index(item["kind"]) if item["kind"] in LOAD_FIRST else len(LOAD_FIRST)
            objects.append((rank, resource, json.dumps(body)))
    return tuple((resource, body) for _, resource, body in sorted(objects, key=lambda o: o[0]))


def load_sample_cluster(emu: KubeEmulator, cluster_file: str = "cluster.yaml") -> None:
    """examples/cluster.yaml into the emulator: priority and storage classes, namespaces, nodes, pods
    (bound, completed, pending), services, replicasets, statefulsets, claims, volumes, CSINodes,
    budgets, NodeMetrics; with the PV controller and the zonal disks' provisioner at work. (Or another
    sample: examples/dra-cluster.yaml's GPU nodes, device classes, slices, claims and their pods.)"""
    emu.pv_controller = True
    emu.auto_provision = dict(ZONAL_PROVISIONER)
    owned: list[tuple[str, dict[str, Any]]] = []
    for resource, body in sample_objects(cluster_file):
        obj = json.loads(body)
        meta = obj["metadata"]
        if any(ref.get("kind") == "Pod" for ref in meta.get("ownerReferences") or []) or (
            (obj.get("status") or {}).get("reservedFor")
        ):
            owned.append((resource, obj))  # a template's claim, a claim in use: after their pods
            continue
        exists = resource in (RESOURCES["Namespace"], RESOURCES["PriorityClass"]) and emu.get(resource, meta["name"])
        if exists and resource == RESOURCES["Namespace"]:
            # default and kube-system exist from the start, as on a real server: take the sample's labels
            emu.patch(resource, meta["name"], {"metadata": {"labels": meta.get("labels") or {}}})
        elif not exists:  # (the system-* PriorityClasses exist from the start too, as the sample has them)
            emu.create(resource, obj)
    for resource, obj in owned:  # the server gave each pod a uid of its own: the claims name that one
        namespace = obj["metadata"]["namespace"]
        for ref in [*(obj["metadata"].get("ownerReferences") or []), *(obj.get("status") or {}).get("reservedFor", [])]:
            pod = emu.get("pods", ref["name"], namespace)
            assert pod is not None, ref
            ref["uid"] = pod["metadata"]["uid"]
        emu.create(resource, obj)


def expected_decisions(emu: KubeEmulator, specs: list[dict[str, Any]]) -> dict[str, Decision]:
    """What `placer simulate` decides on exactly what the server holds (its algorithm, without YAML):
    each placement assumed, with its reservations (the volumes VolumeBinding picked), before the next."""
    cluster = ClusterState()
    for raw in emu.list("nodes"):
        cluster.upsert_node(parse_node(raw))
    for raw in emu.list("metrics.k8s.io/v1beta1/nodes"):
        cluster.set_node_metrics(*parse_node_metrics(raw))
    for kind in KINDS:  # Namespaces, Services, claims, volumes...: what the relation and volume plugins read
        for raw in emu.list(RESOURCES[kind.name]):
            upsert_object(cluster.catalog, kind, {"apiVersion": kind.api_version, "kind": kind.name, **raw})
    pending = []
    for raw in emu.list("pods"):
        pod = parse_pod(raw)  # (the server's admission gave every pod its spec.priority)
        if pod.node_name:
            cluster.add_pod(pod)
        elif not pod.terminal:
            pending.append(pod)
    profiles = {spec["schedulerName"]: compile_profile(f"example-{i}", spec) for i, spec in enumerate(specs)}
    ours = sorted((p for p in pending if p.scheduler_name in profiles), key=queue_order)
    decisions = place(Simulation(cluster, ours, profiles)).decisions
    assert all(d.preemption is None for d in decisions), "preempting pods are left out (see the docstring)"
    return {d.pod: d for d in decisions}


def assert_volumes_bound(emu: KubeEmulator, expected: dict[str, Decision]) -> None:
    """The volume bindings simulate lists, as the API server ends up holding them: a statically
    matched claim bound to its PV, a dynamic one annotated with the pod's node and bound to the
    volume the provisioner made in that node's zone."""
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in emu.list("nodes")}
    checked = 0
    for decision in expected.values():
        bindings = decision.reservations.get("VolumeBinding")
        if not isinstance(bindings, VolumeBindings):
            continue
        for entry in bindings.as_json():
            namespace, name = entry["claim"].split("/")
            claim = emu.get("persistentvolumeclaims", name, namespace)
            assert claim is not None and claim["status"]["phase"] == "Bound", entry
            volume = emu.get("persistentvolumes", claim["spec"]["volumeName"])
            assert volume is not None and volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
            if entry["volume"] is not None:
                assert claim["spec"]["volumeName"] == entry["volume"], entry
            else:
                assert claim["metadata"]["annotations"][SELECTED_NODE] == entry["selectedNode"] == decision.node
                [term] = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
                assert term["matchExpressions"][0]["values"] == [zone_of[decision.node]]
            checked += 1
    assert checked or not any(p["spec"]["schedulerName"] == "stateful-scheduler" for p in emu.list("pods"))


def assert_devices_allocated(emu: KubeEmulator, expected: dict[str, Decision]) -> None:
    """The devices simulate lists for each placement, as the claims on the API server hold them: the
    allocation written (with kube's finalizer), the pod in `reservedFor`; a claim already allocated
    (shared with a running pod) gains the pod and keeps its devices."""
    checked = 0
    for key, decision in expected.items():
        reservation = decision.reservations.get("DynamicResources")
        if not isinstance(reservation, DeviceReservation):
            continue
        namespace, name = key.split("/")
        uid = emu.get("pods", name, namespace)["metadata"]["uid"]
        for item in reservation.claims:
            claim = emu.get(CLAIMS, item.claim.name, namespace)
            assert claim is not None and DELETE_PROTECTION in claim["metadata"]["finalizers"], item.key
            assert {"resource": "pods", "name": name, "uid": uid} in claim["status"]["reservedFor"], item.key
            results = claim["status"]["allocation"]["devices"]["results"]
            if item.allocation is not None:
                assert results == item.allocation["devices"]["results"], item.key
            checked += 1
    assert checked


def events_by_pod(emu: KubeEmulator) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event in emu.list("events.k8s.io/v1/events"):
        regarding = event.get("regarding") or {}
        found.setdefault(f"{regarding.get('namespace')}/{regarding.get('name')}", []).append(event)
    return found


def condition(emu: KubeEmulator, key: str) -> dict[str, Any] | None:
    namespace, name = key.split("/")
    pod = emu.get("pods", name, namespace) or {}
    for item in (pod.get("status") or {}).get("conditions") or []:
        if item.get("type") == "PodScheduled":
            return item
    return None


def assert_checkout_spread(emu: KubeEmulator, bound: Counter[str]) -> None:
    """The HA recipe (examples/profiles/ha.yaml) as the operator bound it: the checkout replicas of
    namespace shop, 2 running before and 6 bound now, each on a node of its own, zones even (skew <= 1)."""
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in emu.list("nodes")}
    replicas = emu.list("pods", "shop", label_selector="app=checkout")
    newly_bound = [p for p in replicas if bound[f"shop/{p['metadata']['name']}"] == 1]
    assert len(replicas) == 8 and len(newly_bound) == 6
    nodes = [p["spec"].get("nodeName") for p in replicas]
    assert all(nodes) and len(set(nodes)) == len(nodes), nodes
    zones = Counter(zone_of[node] for node in nodes)
    assert set(zones) == set(zone_of.values()) and max(zones.values()) - min(zones.values()) <= 1, zones


@pytest.mark.parametrize("profile_file", PROFILE_FILES, ids=[p.stem for p in PROFILE_FILES])
async def test_example_profile_end_to_end(kube_emulator: KubeEmulator, tmp_path: Path, profile_file: Path) -> None:
    emu = kube_emulator
    load_sample_cluster(emu, CLUSTER_FILES.get(profile_file.name, "cluster.yaml"))
    documents = [d for d in yaml.safe_load_all(profile_file.read_text()) if d]
    for document in documents:
        emu.create("sp", {k: v for k, v in document.items() if k not in ("apiVersion", "kind")})
    expected = expected_decisions(emu, [document["spec"] for document in documents])
    scheduler_of = {parse_pod(p).key: p["spec"]["schedulerName"] for p in emu.list("pods")}
    assert expected, "the sample cluster has pending pods for every example profile"
    others_before = {p["metadata"]["name"] for p in emu.list("pods") if not p["spec"].get("nodeName")}

    # No retry within the test: a retry sees the pods placed after the first attempt, so its
    # message (and Event) may differ from the one simulate gives (on a slow run, it did).
    options = operator_options(emu.write_kubeconfig(tmp_path / "kc"), initial_backoff=10.0, max_backoff=10.0)
    operator = await OperatorThread(options).start()
    try:
        def settled() -> bool:
            reported = events_by_pod(emu)
            for key, decision in expected.items():
                namespace, name = key.split("/")
                pod = emu.get("pods", name, namespace)
                if decision.node is not None and pod["spec"].get("nodeName") != decision.node:
                    return False
                if not reported.get(key):
                    return False
                if decision.node is None and condition(emu, key) is None:
                    return False
            return True

        await until(settled, timeout=20, interval=0.2)
    finally:
        await operator.stop()

    assert emu.audit_capacity() == [] and emu.double_bindings() == []
    bound = Counter(record.key for record in emu.bindings)
    reported = events_by_pod(emu)
    for key, decision in expected.items():
        namespace, name = key.split("/")
        pod = emu.get("pods", name, namespace)
        events = reported[key]
        assert all(e["reportingController"] == "placer.dev/scheduler" for e in events)
        assert all(e["reportingInstance"] == f"{scheduler_of[key]}-op-a" for e in events)
        if decision.node is not None:
            assert pod["spec"]["nodeName"] == decision.node and bound[key] == 1, key
            assert [(e["reason"], e["type"], e["note"]) for e in events] == [
                ("Scheduled", "Normal", f"Successfully assigned {key} to {decision.node}")]
        else:
            assert not pod["spec"].get("nodeName") and bound[key] == 0, key
            failed = [e for e in events if e["reason"] == "FailedScheduling"]
            # the whole FitError, preemption's sentence included (`Decision.full_message`)
            assert len(failed) == 1 and failed[0]["type"] == "Warning" and failed[0]["note"] == decision.full_message
            cond = condition(emu, key)
            assert cond is not None
            assert (cond["status"], cond["reason"], cond["message"]) == (
                "False", "Unschedulable", decision.full_message)
    # pods of other schedulers are not ours: untouched
    untouched = others_before - {key.split("/")[1] for key in expected}
    for pod in emu.list("pods"):
        if pod["metadata"]["name"] in untouched:
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            assert not pod["spec"].get("nodeName") and key not in reported
    for document in documents:
        status = emu.get("sp", document["metadata"]["name"])["status"]
        [ready] = status["conditions"]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Loaded")
        assert status["observedGeneration"] == ready["observedGeneration"] == 1
    if any(document["spec"]["schedulerName"] == "ha-scheduler" for document in documents):
        assert_checkout_spread(emu, bound)
    if any(document["spec"]["schedulerName"] == "stateful-scheduler" for document in documents):
        assert_volumes_bound(emu, expected)
    if profile_file.name in CLUSTER_FILES:
        assert_devices_allocated(emu, expected)
    # Kopf wrote nothing to any pod: only bindings and pods/status
    writes = [r for r in emu.requests if r.method in ("PATCH", "PUT") and "/pods/" in r.path]
    assert all(r.path.endswith("/status") for r in writes)
