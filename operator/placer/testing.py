"""Builders for the engine's tests: Kubernetes-shaped dicts for nodes, pods and metrics, and the
engine objects made from them.

Kept in the package (not under `tests/`) so that the plugin tests beside each plugin
(`placer/plugins/<name>_test.py`) and the engine tests under `tests/engine/` import them the same
way, however pytest is started::

    from placer.testing import cluster_of, node, pod

    cluster = cluster_of([node("a", cpu="2"), node("b", taints=["dedicated=gpu:NoSchedule"])],
                         [pod("web", cpu="1", node_name="a")])

Nothing here is used by the scheduler itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import FilterPlugin, Plugin, ScorePlugin
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.objects import PodInfo
from placer.engine.parsing import parse_node, parse_node_metrics, parse_pod
from placer.engine.profile import Profile, compile_profile
from placer.engine.runtime import Decision, Scheduler
from placer.plugins import REGISTRY

__all__ = [
    "GiB",
    "MiB",
    "affinity_term",
    "claim",
    "cluster_of",
    "container",
    "decide",
    "filter_result",
    "fits_without_answers",
    "make_plugin",
    "make_profile",
    "namespace",
    "node",
    "node_metrics",
    "pod",
    "pod_info",
    "raw_scores",
    "replica_set",
    "scores",
    "service",
    "spread_constraint",
    "stateful_set",
    "storage_class",
    "taint",
    "volume",
]

MiB = 1024**2
GiB = 1024**3

Obj = dict[str, Any]


def taint(spec: str | Mapping[str, str]) -> Obj:
    """`"key=value:Effect"` or `"key:Effect"` as a taint object."""
    if isinstance(spec, Mapping):
        return dict(spec)
    key_value, effect = spec.rsplit(":", 1)
    key, _, value = key_value.partition("=")
    result: Obj = {"key": key, "effect": effect}
    if value:
        result["value"] = value
    return result


def node(
    name: str,
    cpu: str | None = "4",
    memory: str | None = "8Gi",
    pods: str | None = "110",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[str | Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool | str | None = True,
    images: Iterable[tuple[Sequence[str] | str, int]] = (),
    allocatable: Mapping[str, str] | None = None,
    hostname_label: bool = True,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """A v1 Node. `ready`: True/False/"Unknown", or None for no Ready condition at all.

    `allocatable` adds (or with value None removes) resources, e.g. `{"nvidia.com/gpu": "4"}`.
    """
    resources: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": pods}
    resources.update(allocatable or {})
    node_labels = {"kubernetes.io/hostname": name} if hostname_label else {}
    node_labels.update(labels or {})
    status: Obj = {"allocatable": {k: v for k, v in resources.items() if v is not None}}
    if ready is not None:
        ready_status = ready if isinstance(ready, str) else ("True" if ready else "False")
        status["conditions"] = [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": ready_status},
        ]
    if images:
        status["images"] = [
            {"names": [names] if isinstance(names, str) else list(names), "sizeBytes": size} for names, size in images
        ]
    spec: Obj = {}
    if taints:
        spec["taints"] = [taint(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    metadata: Obj = {"name": name, "labels": node_labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec, "status": status}


def _resources(
    cpu: str | None, memory: str | None, requests: Mapping[str, str] | None, limits: Mapping[str, str] | None
) -> Obj:
    wanted = {"cpu": cpu, "memory": memory, **(requests or {})}
    result: Obj = {}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    if wanted:
        result["requests"] = wanted
    if limits:
        result["limits"] = dict(limits)
    return result


def container(
    name: str = "main",
    cpu: str | None = None,
    memory: str | None = None,
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    image: str | None = None,
    host_ports: Iterable[int | tuple[int, str] | tuple[int, str, str]] = (),
    restart_policy: str | None = None,
) -> Obj:
    """A container; a host port is `8080`, `(8080, "UDP")` or `(8080, "TCP", "10.0.0.1")`."""
    result: Obj = {"name": name, "image": image or "busybox:1.36"}
    resources = _resources(cpu, memory, requests, limits)
    if resources:
        result["resources"] = resources
    ports = []
    for item in host_ports:
        port, protocol, host_ip = (item, "TCP", None) if isinstance(item, int) else (*item, None)[:3]
        entry: Obj = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        ports.append(entry)
    if ports:
        result["ports"] = ports
    if restart_policy:
        result["restartPolicy"] = restart_policy
    return result


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    *,
    namespace: str = "default",
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    scheduler: str = "placer",
    priority: int | None = None,
    created: str | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    host_ports: Iterable[int | tuple[int, str] | tuple[int, str, str]] = (),
    image: str | None = None,
    containers: Sequence[Obj] | None = None,
    init_containers: Sequence[Obj] = (),
    overhead: Mapping[str, str] | None = None,
    phase: str | None = None,
    pod_affinity: Mapping[str, Any] | None = None,
    pod_anti_affinity: Mapping[str, Any] | None = None,
    spread: Sequence[Mapping[str, Any]] = (),
    owner: tuple[str, str] | None = None,
    deleting: bool = False,
    claims: Sequence[str] = (),
    volumes: Sequence[Obj] = (),
    uid: str | None = None,
) -> Obj:
    """A v1 Pod; `cpu`, `memory`, `requests`, `limits`, `image` and `host_ports` describe its one
    container unless `containers` is given. `pod_affinity` / `pod_anti_affinity` are the
    `spec.affinity` fields as written (see `affinity_term`), `spread` the topologySpreadConstraints
    (see `spread_constraint`), `owner` the controller's (kind, name) (ReplicaSet, StatefulSet),
    `claims` PersistentVolumeClaims it mounts, `volumes` other `spec.volumes` entries as written."""
    meta: Obj = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(labels)
    if created:
        meta["creationTimestamp"] = created
    if owner:
        kind, owner_name = owner
        api_version = "v1" if kind == "ReplicationController" else "apps/v1"
        reference = {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": f"uid-{owner_name}"}
        meta["ownerReferences"] = [{**reference, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2025-03-10T10:00:00Z"
    spec: Obj = {"schedulerName": scheduler}
    spec["containers"] = (
        list(containers)
        if containers is not None
        else [container("main", cpu, memory, requests=requests, limits=limits, image=image, host_ports=host_ports)]
    )
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = {"nodeAffinity": dict(affinity)}
    if pod_affinity:
        spec.setdefault("affinity", {})["podAffinity"] = dict(pod_affinity)
    if pod_anti_affinity:
        spec.setdefault("affinity", {})["podAntiAffinity"] = dict(pod_anti_affinity)
    if spread:
        spec["topologySpreadConstraints"] = [dict(c) for c in spread]
    if claims or volumes:
        spec["volumes"] = [
            *({"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)),
            *(dict(v) for v in volumes),
        ]
    if overhead:
        spec["overhead"] = dict(overhead)
    result: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    result["status"] = {"phase": phase or ("Running" if node_name else "Pending")}
    return result


def affinity_term(
    topology_key: str = "kubernetes.io/hostname",
    match_labels: Mapping[str, str] | None = None,
    *,
    match_expressions: Sequence[Mapping[str, Any]] | None = None,
    namespaces: Sequence[str] | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
    match_label_keys: Sequence[str] | None = None,
    mismatch_label_keys: Sequence[str] | None = None,
    weight: int | None = None,
) -> Obj:
    """A PodAffinityTerm (with `weight`: a WeightedPodAffinityTerm, for the preferred lists)."""
    selector: Obj = {}
    if match_labels is not None:
        selector["matchLabels"] = dict(match_labels)
    if match_expressions is not None:
        selector["matchExpressions"] = [dict(e) for e in match_expressions]
    term: Obj = {"labelSelector": selector, "topologyKey": topology_key}
    if namespaces is not None:
        term["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        term["namespaceSelector"] = dict(namespace_selector)
    if match_label_keys is not None:
        term["matchLabelKeys"] = list(match_label_keys)
    if mismatch_label_keys is not None:
        term["mismatchLabelKeys"] = list(mismatch_label_keys)
    return term if weight is None else {"weight": weight, "podAffinityTerm": term}


def spread_constraint(
    max_skew: int = 1,
    topology_key: str = "topology.kubernetes.io/zone",
    when: str = "DoNotSchedule",
    match_labels: Mapping[str, str] | None = None,
    **extra: Any,
) -> Obj:
    """A TopologySpreadConstraint; `extra` adds fields as written (minDomains, nodeAffinityPolicy, ...)."""
    constraint: Obj = {"maxSkew": max_skew, "topologyKey": topology_key, "whenUnsatisfiable": when}
    if match_labels is not None:
        constraint["labelSelector"] = {"matchLabels": dict(match_labels)}
    constraint.update(extra)
    return constraint


def namespace(name: str, labels: Mapping[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def service(name: str, selector: Mapping[str, str] | None, namespace: str = "default") -> Obj:
    spec: Obj = {} if selector is None else {"selector": dict(selector)}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _workload(kind: str, name: str, match_labels: Mapping[str, str], namespace: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(match_labels)}},
    }


def replica_set(name: str, match_labels: Mapping[str, str], namespace: str = "default") -> Obj:
    return _workload("ReplicaSet", name, match_labels, namespace)


def stateful_set(name: str, match_labels: Mapping[str, str], namespace: str = "default") -> Obj:
    return _workload("StatefulSet", name, match_labels, namespace)


def claim(
    name: str,
    storage_class: str | None = "standard",
    size: str = "1Gi",
    *,
    namespace: str = "default",
    volume_name: str | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    selected_node: str | None = None,
    selector: Mapping[str, Any] | None = None,
    phase: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """A PersistentVolumeClaim; with `volume_name` it is bound (phase Bound, bind-completed)."""
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-claim-{name}"}
    notes = dict(annotations or {})
    if selected_node:
        notes["volume.kubernetes.io/selected-node"] = selected_node
    if volume_name:
        notes["pv.kubernetes.io/bind-completed"] = "yes"
    if notes:
        meta["annotations"] = notes
    spec: Obj = {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name:
        spec["volumeName"] = volume_name
    if selector is not None:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Bound" if volume_name else "Pending")}}


def volume(
    name: str,
    storage_class: str = "standard",
    size: str = "10Gi",
    *,
    nodes: Sequence[str] | None = None,
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    claim_ref: tuple[str, str] | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    labels: Mapping[str, str] | None = None,
    csi_driver: str | None = None,
    phase: str | None = None,
) -> Obj:
    """A PersistentVolume; `nodes` pins it to hostnames, `node_affinity` to any label's values,
    `claim_ref` = (namespace, name) binds (or pre-binds) it to a claim."""
    spec: Obj = {"storageClassName": storage_class, "capacity": {"storage": size},
                 "accessModes": list(access_modes)}
    expressions = []
    if nodes is not None:
        expressions.append({"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)})
    for key, values in (node_affinity or {}).items():
        expressions.append({"key": key, "operator": "In", "values": list(values)})
    if expressions:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    if claim_ref is not None:
        spec["claimRef"] = {"namespace": claim_ref[0], "name": claim_ref[1]}
    if csi_driver:
        spec["csi"] = {"driver": csi_driver, "volumeHandle": f"handle-{name}"}
    meta: Obj = {"name": name, "labels": dict(labels or {})}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Bound" if claim_ref else "Available")}}


def storage_class(
    name: str = "standard",
    provisioner: str = "csi.example.com",
    *,
    wait_for_first_consumer: bool = True,
    allowed_topologies: Mapping[str, Sequence[str]] | None = None,
) -> Obj:
    """A StorageClass (WaitForFirstConsumer by default; `kubernetes.io/no-provisioner` for static
    local volumes)."""
    obj: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer" if wait_for_first_consumer else "Immediate"}
    if allowed_topologies:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": key, "values": list(values)} for key, values in allowed_topologies.items()]}]
    return obj


def node_metrics(name: str, cpu: str, memory: str) -> Obj:
    """A metrics.k8s.io NodeMetrics."""
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetrics",
        "metadata": {"name": name},
        "timestamp": "2025-03-10T10:00:00Z",
        "window": "20s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def pod_info(obj: Obj | PodInfo) -> PodInfo:
    return obj if isinstance(obj, PodInfo) else parse_pod(obj)


def cluster_of(
    nodes: Iterable[Obj], pods: Iterable[Obj] = (), metrics: Iterable[Obj] = (), objects: Iterable[Obj] = ()
) -> ClusterState:
    """A ClusterState with these nodes (in order), bound pods (those with `nodeName`), metrics, and
    other objects (Namespaces, Services, ReplicaSets, ...: any kind of `placer.engine.kinds.KINDS`)."""
    cluster = ClusterState()
    for item in objects:
        upsert_object(cluster.catalog, KINDS_BY_NAME[item["kind"]], item)
    for item in nodes:
        cluster.upsert_node(parse_node(item))
    for item in pods:
        info = parse_pod(item)
        assert info.node_name, f"{info.key} is not bound; cluster_of takes bound pods only"
        cluster.add_pod(info)
    for item in metrics:
        cluster.set_node_metrics(*parse_node_metrics(item))
    return cluster


def make_plugin(name: str, args: Mapping[str, Any] | None = None) -> Plugin:
    """A plugin instance with validated args (pydantic's ValidationError on bad args)."""
    plugin_class = REGISTRY[name]
    return plugin_class(plugin_class.Args.model_validate(dict(args or {})))


def make_profile(
    filters: Sequence[Mapping[str, Any]] | None = None,
    scores: Sequence[Mapping[str, Any]] | None = None,
    *,
    name: str = "test",
    scheduler_name: str = "placer",
    percentage: int = 0,
) -> Profile:
    spec: Obj = {"schedulerName": scheduler_name, "percentageOfNodesToScore": percentage}
    if filters is not None:
        spec["filters"] = [dict(f) for f in filters]
    if scores is not None:
        spec["scores"] = [dict(s) for s in scores]
    return compile_profile(name, spec)


def filter_result(plugin: Plugin, pod_obj: Obj | PodInfo, cluster: ClusterState) -> dict[str, bool]:
    """Node name -> whether the filter lets the pod onto it."""
    assert isinstance(plugin, FilterPlugin)
    mask = plugin.filter(pod_info(pod_obj), cluster)
    return {name: bool(True if mask is None else mask[slot]) for name, slot in sorted(cluster.index.items())}


def fits_without_answers(plugin: Plugin, pod_obj: Obj | PodInfo, cluster: ClusterState) -> set[bool]:
    """Check a filter's `fits_without` against its `filter` run with the pods gone, for every subset of
    the pods of every node, and so its `eviction_terms` where it has them (the shortfall covered by
    what the subset frees; what every pod below each priority frees); returns the answers seen (so a
    test can require both)."""
    assert isinstance(plugin, FilterPlugin)
    info = pod_info(pod_obj)
    count = len(cluster.pods)
    seen: set[bool] = set()
    slots = np.fromiter(cluster.index.values(), dtype=np.int64)
    terms = plugin.eviction_terms(info, cluster, slots) if plugin.filter(info, cluster) is not None else None
    for position, (name, slot) in enumerate(cluster.index.items()):
        records = list(cluster.pods_on(name))
        for size in range(len(records) + 1):
            for removed in itertools.combinations(records, size):
                with cluster.without(removed):
                    mask = plugin.filter(info, cluster)
                    expected = mask is None or bool(mask[slot])
                assert plugin.fits_without(info, cluster, slot, removed) is expected, (name, removed)
                if terms is not None:
                    freed = np.zeros(terms.shortfall.shape[1], dtype=np.int64)
                    for record in removed:
                        freed += np.asarray(terms.frees(record.pod), dtype=np.int64)
                    assert bool((terms.shortfall[position] <= freed).all()) is expected, (name, removed, freed)
                seen.add(expected)
        if terms is not None and terms.frees_below is not None:
            for priority in sorted({record.pod.priority for record in records} | {info.priority}):
                below = [record for record in records if record.pod.priority < priority]
                freed = np.zeros(terms.shortfall.shape[1], dtype=np.int64)
                for record in below:
                    freed += np.asarray(terms.frees(record.pod), dtype=np.int64)
                assert terms.frees_below(priority)[position].tolist() == freed.tolist(), (name, priority)
    assert len(cluster.pods) == count  # every pod put back
    return seen


def _slots(cluster: ClusterState, names: Sequence[str] | None) -> tuple[list[str], np.ndarray]:
    names = list(names) if names is not None else sorted(cluster.index)
    return names, np.asarray([cluster.index[n] for n in names], dtype=np.int64)


def raw_scores(
    plugin: Plugin, pod_obj: Obj | PodInfo, cluster: ClusterState, names: Sequence[str] | None = None
) -> dict[str, float]:
    """Node name -> the plugin's raw score (before normalisation), for the given or all nodes."""
    assert isinstance(plugin, ScorePlugin)
    names, slots = _slots(cluster, names)
    raw = plugin.score(pod_info(pod_obj), cluster, slots)
    return {n: (float(v) if raw.dtype.kind == "f" else int(v)) for n, v in zip(names, raw, strict=True)}


def scores(
    plugin: Plugin, pod_obj: Obj | PodInfo, cluster: ClusterState, names: Sequence[str] | None = None
) -> dict[str, int]:
    """Node name -> the plugin's normalised 0..100 score, as the runtime computes it (0 everywhere
    when `pre_score` says the plugin does not apply)."""
    assert isinstance(plugin, ScorePlugin)
    info = pod_info(pod_obj)
    names, slots = _slots(cluster, names)
    if not plugin.pre_score(info, cluster):
        return dict.fromkeys(names, 0)
    normalized = plugin.normalize(plugin.score(info, cluster, slots))
    return {n: int(v) for n, v in zip(names, normalized, strict=True)}


def decide(profile: Profile, pod_obj: Obj | PodInfo, cluster: ClusterState, top: int = 3) -> Decision:
    """One scheduling cycle with a fresh Scheduler."""
    return Scheduler().schedule(pod_info(pod_obj), profile, cluster, top=top)
