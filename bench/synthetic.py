"""Synthetic clusters for the benchmarks, shaped like ../shared/BENCHMARKS.md's workload.

Mixed node sizes (4-16 CPU), about 5 % tainted, 2 % cordoned, 3 % NotReady (with the not-ready
taint), three zones; pods request 100m-1 CPU and 128Mi-1Gi, some with a nodeSelector or a
toleration. Deterministic for a given seed.

Workloads (`cluster(..., workload=)`): `plain`; `relations` and `claims` (the engine benchmark's:
see `cluster`); and four of kube's `scheduler_perf` kind, the same pods in groups of `GROUP` (100,
label `group`), each group against its own pods:

- `antiaffinity`: required podAntiAffinity on `kubernetes.io/hostname` (SchedulingPodAntiAffinity);
- `spread`: one topologySpreadConstraint on `topology.kubernetes.io/zone`, maxSkew 1,
  DoNotSchedule (SchedulingTopologySpreading, tighter); these pods carry no nodeSelector, so that
  every pod of a group counts the same domains and "skew <= maxSkew" holds on the final placement
  too (what bench/audit.py checks);
- `preferred`: even groups a preferred podAffinity, odd groups a preferred podAntiAffinity, on
  hostname, weight 1 (SchedulingPreferredPodAffinity / SchedulingPreferredPodAntiAffinity);
- `devices`: Dynamic Resource Allocation (`resource.k8s.io/v1`, Kubernetes v1.34+) with the test
  playing the driver: a DeviceClass selecting driver `gpu.example.com`, one ResourceSlice per node
  publishing `DEVICES_PER_NODE` (8) GPUs, and per pod a ResourceClaim for one GPU, created
  directly (no controller manager, so no claim templates) and named in the pod's
  `spec.resourceClaims[].resourceClaimName` (scheduler_perf's pod-with-claim-ref, one pod a claim).
"""

from __future__ import annotations

import random
from typing import Any

SIZES = ((4, 16), (8, 32), (16, 64))
ZONES = ("zone-a", "zone-b", "zone-c")
IMAGES = ("registry.example/app:1.0", "registry.example/web:2.3", "registry.example/batch:0.9")
WORKLOADS = ("plain", "relations", "claims", "antiaffinity", "spread", "preferred", "devices")
GROUP = 100  # pods per group in the scheduler_perf-like workloads
DEVICE_DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
DEVICES_PER_NODE = 8


def make_node(index: int, rng: random.Random) -> dict[str, Any]:
    cpu, memory = rng.choice(SIZES)
    name = f"node-{index:05d}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": ZONES[index % len(ZONES)],
        "disktype": rng.choice(("ssd", "hdd")),
    }
    taints: list[dict[str, str]] = []
    spec: dict[str, Any] = {}
    ready = "True"
    roll = rng.random()
    if roll < 0.05:
        taints.append({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})
    elif roll < 0.07:
        spec["unschedulable"] = True
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    elif roll < 0.10:
        ready = "False"
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    if taints:
        spec["taints"] = taints
    allocatable = {
        "cpu": f"{cpu * 1000 - 100}m",
        "memory": f"{memory - 1}Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "conditions": [{"type": "Ready", "status": ready}],
            "images": [
                {"names": [image], "sizeBytes": rng.randint(50, 900) * 1024 * 1024}
                for image in IMAGES
                if rng.random() < 0.5
            ],
        },
    }


def relations(app: str) -> dict[str, Any]:
    """What HA Deployments carry: replicas never share a node, and spread evenly over zones."""
    selector = {"matchLabels": {"app": app}}
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector}
        ],
    }


def make_pod(
    index: int,
    rng: random.Random,
    scheduler_name: str = "placer",
    namespace: str = "bench",
    with_relations: bool = False,
) -> dict[str, Any]:
    cpu = rng.choice((100, 250, 500, 750, 1000))
    memory = rng.choice((128, 256, 512, 1024))
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "main",
                "image": rng.choice(IMAGES),
                "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}},
            }
        ],
    }
    roll = rng.random()
    if roll < 0.10:
        spec["nodeSelector"] = {"disktype": "ssd"}
    elif roll < 0.15:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    app = f"app-{index % 20}"
    if with_relations:
        spec.update(relations(app))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{index:06d}",
            "namespace": namespace,
            "uid": f"uid-{index:06d}",
            "labels": {"app": app, "tenant": f"tenant-{index % 4}"},
            "creationTimestamp": f"2026-01-01T00:{(index // 60) % 60:02d}:{index % 60:02d}Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def bound_claim(index: int, pod: dict[str, Any], namespace: str = "bench") -> list[dict[str, Any]]:
    """Give a pod one claim, bound to a zonal PersistentVolume (a cloud disk): the claim and the volume."""
    claim, volume = f"data-{index:06d}", f"pv-{index:06d}"
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    zone = ZONES[index % len(ZONES)]
    return [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": claim, "namespace": namespace, "uid": f"uid-{claim}",
                      "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"storageClassName": "disk", "accessModes": ["ReadWriteOnce"], "volumeName": volume,
                  "resources": {"requests": {"storage": "10Gi"}}},
         "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
         "spec": {"storageClassName": "disk", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                  "claimRef": {"namespace": namespace, "name": claim, "uid": f"uid-{claim}"},
                  "csi": {"driver": "disk.csi.example.com", "volumeHandle": volume},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}},
         "status": {"phase": "Bound"}},
    ]


def group_of(index: int) -> str:
    return f"group-{index // GROUP:04d}"


def required_anti_affinity(group: str) -> dict[str, Any]:
    """scheduler_perf's pod-with-pod-anti-affinity: never two pods of the group on one node."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"group": group}}, "topologyKey": "kubernetes.io/hostname"}]}}


def zone_spread(group: str) -> list[dict[str, Any]]:
    """One DoNotSchedule zone spread constraint, skew at most 1, over the group's pods."""
    return [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"group": group}}}]


def preferred_affinity(group: str, anti: bool) -> dict[str, Any]:
    """scheduler_perf's pod-with-preferred-pod-(anti-)affinity: weight 1 on hostname, the group's pods."""
    term = {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"group": group}},
                                             "topologyKey": "kubernetes.io/hostname"}}
    return {"podAntiAffinity" if anti else "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}


def device_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DEVICE_DRIVER}"'}}]}}


def resource_slice(node: dict[str, Any]) -> dict[str, Any]:
    """The driver's ResourceSlice for one node: its pool (named after the node) of DEVICES_PER_NODE GPUs."""
    name = node["metadata"]["name"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
            "spec": {"driver": DEVICE_DRIVER, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "A100"},
                                                                     "index": {"int": i}},
                                  "capacity": {"memory": {"value": "80Gi"}}}
                                 for i in range(DEVICES_PER_NODE)]}}


def device_claim(index: int, pod: dict[str, Any], namespace: str = "bench") -> dict[str, Any]:
    """Give a pod one ResourceClaim for one GPU of DEVICE_CLASS (named by the pod, as a pod names an
    existing claim); returns the claim."""
    claim = f"gpu-{index:06d}"
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim, "namespace": namespace, "uid": f"uid-{claim}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]}}}


def cluster(
    nodes: int, pods: int, seed: int = 7, workload: str = "plain"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes, pending pods and the other objects they need. `workload`: `plain`; `relations` (every
    pod has required anti-affinity on hostname and a DoNotSchedule zone spread constraint against
    the other pods of its app, 20 apps); `claims` (every pod mounts one claim bound to a zonal
    volume); `antiaffinity`, `spread`, `preferred`, `devices` (the module's docstring). The random
    draws are those of `plain` whatever the workload: every workload has the same nodes and pod sizes."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}: one of {', '.join(WORKLOADS)}")
    rng = random.Random(seed)
    node_objs = [make_node(i, rng) for i in range(nodes)]
    pod_objs = [make_pod(i, rng, with_relations=workload == "relations") for i in range(pods)]
    objects: list[dict[str, Any]] = []
    if workload == "claims":
        for i, pod in enumerate(pod_objs):
            objects.extend(bound_claim(i, pod))
    elif workload == "devices":
        objects.append(device_class())
        objects.extend(resource_slice(node) for node in node_objs)
        objects.extend(device_claim(i, pod, pod["metadata"]["namespace"]) for i, pod in enumerate(pod_objs))
    elif workload in ("antiaffinity", "spread", "preferred"):
        for i, pod in enumerate(pod_objs):
            group = group_of(i)
            pod["metadata"]["labels"]["group"] = group
            spec = pod["spec"]
            if workload == "antiaffinity":
                spec["affinity"] = required_anti_affinity(group)
            elif workload == "spread":
                spec.pop("nodeSelector", None)
                spec["topologySpreadConstraints"] = zone_spread(group)
            else:
                spec["affinity"] = preferred_affinity(group, anti=(i // GROUP) % 2 == 1)
    return node_objs, pod_objs, objects
