"""Generate the bundled sample cluster for `placer simulate`.

Writes ``cluster.yaml`` (what ``kubectl get namespaces,nodes,pods,services,replicasets,
statefulsets,persistentvolumeclaims,persistentvolumes,storageclasses,csinodes,poddisruptionbudgets,
priorityclasses -A -o yaml`` would print, followed by ``metrics.k8s.io`` NodeMetrics documents) and
``profiles/all.yaml`` (the example profiles in one file, priority.yaml aside). The output is
deterministic: a fixed seed, fixed timestamps and sorted keys, so the checked-in files can be
compared with a fresh run (``tests/test_examples_shape.py`` does). The Namespaces, the HA workload
and the volumes and priority recipes come from RNGs of their own, drawn after everything else, so
that the objects generated before them did not change.

    python examples/generate_cluster.py             # writes next to this script
    python examples/generate_cluster.py --out DIR   # writes DIR/cluster.yaml, DIR/profiles/all.yaml
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
PROFILES_DIR = HERE / "profiles"
ALL_PROFILES = "all.yaml"
# Left out of all.yaml: priority.yaml preempts, evicting running pods of the sample, and a run of
# all.yaml places every other pending pod without evicting any (so each placement can be checked
# against the capacity the file shows). Run it alone, or add `--profile examples/profiles/priority.yaml`.
NOT_IN_ALL = frozenset({"priority.yaml"})

SEED = 20250310
NOW = datetime(2025, 3, 10, 10, 0, 0, tzinfo=UTC)  # "now": metrics timestamp, newest pod
ZONES = ("zone-a", "zone-b", "zone-c")
REGION = "region-1"
KUBELET_VERSION = "v1.29.4"
MAX_PODS = 110

Manifest = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """A group of identical nodes, named ``{prefix}-01`` ... and spread round-robin over zones."""

    prefix: str
    count: int
    cpu: int
    memory_gi: int
    disk_gi: int
    instance_type: str
    gpus: int = 0


POOLS = (
    Pool("small", 12, 4, 16, 100, "std-4x16"),
    Pool("medium", 16, 8, 32, 100, "std-8x32"),
    Pool("large", 12, 16, 64, 200, "std-16x64"),
    Pool("xlarge", 6, 32, 128, 200, "std-32x128"),
    Pool("gpu", 4, 32, 128, 500, "gpu-32x128-4g", gpus=4),
)


def _names(prefix: str, numbers: Iterable[int]) -> frozenset[str]:
    return frozenset(f"{prefix}-{n:02d}" for n in numbers)


# The special nodes, fixed by name so that README.md and the profiles can refer to them.
CPU_LABELLED = _names("large", range(1, 7)) | _names("xlarge", range(1, 7))  # cpu: "true"
HELLO_LABELLED = _names("small", (1, 2)) | _names("medium", (1, 2, 3, 4))  # node: hello
SPOT = _names("medium", (15, 16))  # spot=true:PreferNoSchedule
CORDONED = _names("small", (11,)) | _names("large", (11,))
NOT_READY = _names("small", (12,)) | _names("medium", (14,))
HOST_PORT_8080 = _names("medium", (6,)) | _names("large", (9,))  # a bound pod holds hostPort 8080

# Nodes with NodeMetrics: name -> (cpu, memory) usage as fractions of allocatable.
# The first three are above avoid-busy's thresholds (cpu 0.8, memory 0.85).
METRICS = {
    "small-03": (0.93, 0.45),
    "medium-07": (0.35, 0.91),
    "large-02": (0.86, 0.88),
    "small-05": (0.22, 0.31),
    "medium-09": (0.48, 0.52),
    "medium-10": (0.12, 0.18),
    "large-04": (0.61, 0.40),
    "xlarge-02": (0.27, 0.66),
    "gpu-02": (0.55, 0.35),
}

# Images: reference -> size in MB (50-900). Nodes hold a random subset in status.images.
IMAGES = {
    "registry.example/web:2.4": 142,
    "registry.example/api:1.2": 318,
    "registry.example/cache:7.2": 117,
    "registry.example/checkout:3.1": 264,
    "registry.example/search:5.0": 587,
    "registry.example/frontend:1.9": 96,
    "registry.example/etl:0.14": 731,
    "registry.example/report:2.2": 412,
    "registry.example/train:0.7": 894,
    "registry.example/edge-proxy:1.27": 58,
    "registry.example/legacy:4.6": 205,
    "registry.example/log-agent:0.9": 74,
    "registry.example/tools:1.0": 153,
    "registry.example/coredns:1.11": 61,
    "registry.example/metrics-server:0.7": 67,
}


@dataclass
class NodeState:
    """What the generator tracks per node while binding the running pods."""

    name: str
    zone: str
    ip: str
    cpu_m: int  # allocatable
    memory_ki: int  # allocatable
    gpus: int
    used_cpu_m: int = 0
    used_memory_ki: int = 0
    used_gpus: int = 0
    pods: int = 0

    def fits(self, cpu_m: int, memory_ki: int, gpus: int) -> bool:
        return (
            self.used_cpu_m + cpu_m <= self.cpu_m
            and self.used_memory_ki + memory_ki <= self.memory_ki
            and self.used_gpus + gpus <= self.gpus
            and self.pods < MAX_PODS
        )

    def take(self, cpu_m: int, memory_ki: int, gpus: int) -> None:
        self.used_cpu_m += cpu_m
        self.used_memory_ki += memory_ki
        self.used_gpus += gpus
        self.pods += 1


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def new_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def reserved_cpu_m(cpu: int) -> int:
    """kube-reserved CPU as GKE computes it: 6% of the first core, 1% of the next, ..."""
    reserved = 60.0 + 10.0 * min(max(cpu - 1, 0), 1)
    reserved += 5.0 * min(max(cpu - 2, 0), 2) + 2.5 * max(cpu - 4, 0)
    return int(reserved)


def node_labels(name: str, pool: Pool, zone: str) -> dict[str, str]:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.instance_type,
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": zone,
        "pool": pool.prefix,
    }
    if name in CPU_LABELLED:
        labels["cpu"] = "true"
    if name in HELLO_LABELLED:
        labels["node"] = "hello"
    if pool.gpus:
        labels["nvidia.com/gpu.present"] = "true"
    return labels


def node_taints(name: str, pool: Pool) -> list[Manifest]:
    taints: list[Manifest] = []
    if pool.gpus:
        taints.append({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})
    if name in SPOT:
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    if name in CORDONED:
        taints.append(
            {
                "key": "node.kubernetes.io/unschedulable",
                "effect": "NoSchedule",
                "timeAdded": ts(NOW - timedelta(hours=3)),
            }
        )
    if name in NOT_READY:
        taints.append(
            {
                "key": "node.kubernetes.io/not-ready",
                "effect": "NoSchedule",
                "timeAdded": ts(NOW - timedelta(minutes=40)),
            }
        )
    return taints


def node_conditions(name: str) -> list[Manifest]:
    heartbeat = ts(NOW - timedelta(seconds=20))
    since = ts(NOW - timedelta(days=6))

    def condition(kind: str, status: str, reason: str, message: str, at: str) -> Manifest:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": at,
        }

    if name in NOT_READY:
        ready = condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false "
            "reason:NetworkPluginNotReady message:Network plugin returns error: "
            "cni plugin not initialized",
            ts(NOW - timedelta(minutes=40)),
        )
    else:
        ready = condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", since)
    return [
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            since,
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            since,
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            since,
        ),
        ready,
    ]


def image_digest(reference: str) -> str:
    repository = reference.rsplit(":", 1)[0]
    digest = hashlib.sha256(reference.encode()).hexdigest()
    return f"{repository}@sha256:{digest}"


def node_images(rng: random.Random, pool: Pool) -> list[Manifest]:
    candidates = sorted(ref for ref in IMAGES if ref != "registry.example/train:0.7")
    held = rng.sample(candidates, rng.randint(4, 9))
    if pool.gpus:
        held.append("registry.example/train:0.7")
    held.sort(key=lambda ref: (-IMAGES[ref], ref))  # the kubelet lists the largest first
    return [
        {"names": [image_digest(ref), ref], "sizeBytes": IMAGES[ref] * 1_000_000 + 123_456}
        for ref in held
    ]


def make_node(
    rng: random.Random, pool: Pool, number: int, index: int
) -> tuple[Manifest, NodeState]:
    name = f"{pool.prefix}-{number:02d}"
    zone = ZONES[(number - 1) % len(ZONES)]
    ip = f"10.0.{ZONES.index(zone) * 32 + index // 200}.{10 + index % 200}"

    memory_ki = pool.memory_gi * 1024 * 1024 - rng.randint(150_000, 400_000)
    allocatable_memory_ki = memory_ki - (512 + 16 * pool.memory_gi + 100) * 1024
    disk_ki = pool.disk_gi * 1024 * 1024 - rng.randint(1_000_000, 3_000_000)
    allocatable_cpu_m = pool.cpu * 1000 - reserved_cpu_m(pool.cpu)

    capacity = {
        "cpu": str(pool.cpu),
        "ephemeral-storage": f"{disk_ki}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{memory_ki}Ki",
        "pods": str(MAX_PODS),
    }
    allocatable = {
        "cpu": f"{allocatable_cpu_m}m",
        # the kubelet prints allocatable ephemeral-storage in plain bytes
        "ephemeral-storage": str(disk_ki * 1024 * 9 // 10),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{allocatable_memory_ki}Ki",
        "pods": str(MAX_PODS),
    }
    if pool.gpus:
        capacity["nvidia.com/gpu"] = str(pool.gpus)
        allocatable["nvidia.com/gpu"] = str(pool.gpus)

    spec: Manifest = {
        "podCIDR": f"10.244.{index}.0/24",
        "podCIDRs": [f"10.244.{index}.0/24"],
        "providerID": f"example://{REGION}/{zone}/{name}",
    }
    taints = node_taints(name, pool)
    if taints:
        spec["taints"] = taints
    if name in CORDONED:
        spec["unschedulable"] = True

    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": new_uid(rng),
            "resourceVersion": str(rng.randint(100_000, 999_999)),
            "creationTimestamp": ts(NOW - timedelta(days=30 - index % 20, minutes=7 * index)),
            "labels": node_labels(name, pool, zone),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": node_conditions(name),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": node_images(rng, pool),
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kernelVersion": "6.5.0-1017-example",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
            },
        },
    }
    state = NodeState(name, zone, ip, allocatable_cpu_m, allocatable_memory_ki, pool.gpus)
    return manifest, state


def make_nodes(rng: random.Random) -> tuple[list[Manifest], dict[str, NodeState]]:
    manifests: list[Manifest] = []
    states: dict[str, NodeState] = {}
    index = 0
    for pool in POOLS:
        for number in range(1, pool.count + 1):
            manifest, state = make_node(rng, pool, number, index)
            manifests.append(manifest)
            states[state.name] = state
            index += 1
    manifests.sort(key=lambda node: node["metadata"]["name"])  # as the API server lists them
    return manifests, states


# --------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class App:
    name: str
    namespace: str
    image: str
    restart_policy: str = "Always"


APPS = {
    app.name: app
    for app in (
        App("web", "team-a", "registry.example/web:2.4"),
        App("api", "team-a", "registry.example/api:1.2"),
        App("cache", "team-a", "registry.example/cache:7.2"),
        App("edge-proxy", "team-a", "registry.example/edge-proxy:1.27"),
        App("checkout", "team-b", "registry.example/checkout:3.1"),
        App("search", "team-b", "registry.example/search:5.0"),
        App("frontend", "team-b", "registry.example/frontend:1.9"),
        App("legacy", "team-b", "registry.example/legacy:4.6"),
        App("etl", "batch", "registry.example/etl:0.14", "OnFailure"),
        App("report", "batch", "registry.example/report:2.2", "OnFailure"),
        App("train", "batch", "registry.example/train:0.7", "Never"),
        App("coredns", "kube-system", "registry.example/coredns:1.11"),
        App("metrics-server", "kube-system", "registry.example/metrics-server:0.7"),
    )
}
GENERAL_APPS = ("web", "api", "cache", "checkout", "search", "frontend", "etl", "report")
TENANTS = ("tenant-1", "tenant-2", "tenant-3", "tenant-4")

CPU_REQUESTS = ("100m", "200m", "250m", "500m", "750m", "1", "1500m", "2")
MEMORY_REQUESTS = ("128Mi", "256Mi", "512Mi", "1Gi", "1G", "1536Mi", "2Gi", "4Gi")
PRIORITY_CLASSES = {0: None, 100: "standard", 1000: "high"}

# Added by the API server's DefaultTolerationSeconds admission plugin to every pod.
DEFAULT_TOLERATIONS: list[Manifest] = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
GPU_TOLERATION: Manifest = {
    "key": "dedicated",
    "operator": "Equal",
    "value": "gpu",
    "effect": "NoSchedule",
}
SPOT_TOLERATION: Manifest = {
    "key": "spot",
    "operator": "Equal",
    "value": "true",
    "effect": "PreferNoSchedule",
}

# Scheduler names of the example profiles (examples/profiles/*.yaml) and how many pending pods
# each gets; "default-scheduler" pods are not Placer's and `placer simulate` skips them.
PENDING_BY_SCHEDULER = {
    "placer": 97,
    "spread-scheduler": 14,
    "binpack-scheduler": 14,
    "prefer-node-scheduler": 14,
    "cpu-scheduler": 14,
    "avoid-hello-scheduler": 14,
    "tenant-spread-scheduler": 14,
    "avoid-busy-scheduler": 14,
}
FOREIGN_SCHEDULER = "default-scheduler"
FOREIGN_PENDING = 5

# Special pending pods by kind; the rest of PENDING_BY_SCHEDULER's pods are "plain".
PENDING_KINDS = {
    "best-effort": 5,
    "init": 6,
    "gpu": 6,
    "node-selector": 8,
    "required-affinity": 6,
    "preferred-affinity": 8,
    "host-port": 3,
    "spot-toleration": 4,
    "overhead": 2,
    "impossible": 5,
}
BOUND_RUNNING = 60
BOUND_SUCCEEDED = 2


@dataclass
class PodPlan:
    """A pod under construction; `render_pod` turns it into the API object."""

    app: App
    name: str
    uid: str
    created: datetime
    scheduler: str
    containers: list[Manifest]
    labels: dict[str, str] = field(default_factory=dict)
    priority: int = 0
    init_containers: list[Manifest] = field(default_factory=list)
    tolerations: list[Manifest] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Manifest = field(default_factory=dict)
    runtime_class: str | None = None
    overhead: dict[str, str] = field(default_factory=dict)
    node: NodeState | None = None
    phase: str = "Pending"
    spread: list[Manifest] = field(default_factory=list)  # topologySpreadConstraints
    owner: Manifest | None = None  # the controller's ownerReference


class Names:
    """Deployment-style pod names: ``{app}-{replicaset hash}-{suffix}``, unique."""

    ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.hashes: dict[str, str] = {}
        self.used: set[str] = set()

    def _token(self, length: int) -> str:
        return "".join(self.rng.choice(self.ALPHABET) for _ in range(length))

    def next(self, app: App) -> str:
        if app.name not in self.hashes:
            self.hashes[app.name] = self._token(10 if app.restart_policy == "Always" else 8)
        while True:
            name = f"{app.name}-{self.hashes[app.name]}-{self._token(5)}"
            if name not in self.used:
                self.used.add(name)
                return name


def random_resources(rng: random.Random) -> Manifest:
    requests = {"cpu": rng.choice(CPU_REQUESTS), "memory": rng.choice(MEMORY_REQUESTS)}
    if rng.random() < 0.1:
        requests["ephemeral-storage"] = rng.choice(("1Gi", "2Gi", "5Gi"))
    style = rng.choice(("requests-only", "memory-limit", "guaranteed", "burstable"))
    if style == "memory-limit":
        return {"requests": requests, "limits": {"memory": requests["memory"]}}
    if style == "guaranteed":
        return {"requests": requests, "limits": dict(requests)}
    if style == "burstable":
        return {"requests": requests, "limits": {"cpu": "4", "memory": "8Gi"}}
    return {"requests": requests}


def container(name: str, image: str, resources: Manifest) -> Manifest:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def log_agent() -> Manifest:
    resources = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    return container("log-agent", "registry.example/log-agent:0.9", resources)


def new_plan(
    rng: random.Random,
    names: Names,
    app: App,
    scheduler: str,
    created: datetime,
    resources: Manifest | None = None,
) -> PodPlan:
    containers = [container(app.name, app.image, resources or random_resources(rng))]
    if app.namespace != "batch" and rng.random() < 0.2:
        containers.append(log_agent())
    labels = {"app": app.name}
    if rng.random() < 0.9:  # a few pods carry no tenant: SpreadByLabel scores them alike
        labels["tenant"] = rng.choice(TENANTS)
    priority = rng.choices((0, 100, 1000), weights=(7, 2, 1))[0]
    return PodPlan(
        app=app,
        name=names.next(app),
        uid=new_uid(rng),
        created=created,
        scheduler=scheduler,
        containers=containers,
        labels=labels,
        priority=priority,
    )


# Modifiers for the special kinds of pending pods. Each gets the plan and how many pods of its
# kind came before, so that variants are spread deterministically.


def make_best_effort(plan: PodPlan, _: random.Random, __: int) -> None:
    for spec in plan.containers:
        spec["resources"] = {}


def make_init(plan: PodPlan, rng: random.Random, nth: int) -> None:
    steps = [
        ("migrate", "1", "1Gi"),
        ("fetch-model", "1500m", "3Gi"),
        ("wait-for-db", "100m", "64Mi"),
    ]
    name, cpu, memory = steps[nth % len(steps)]
    resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}
    plan.init_containers.append(container(name, "registry.example/tools:1.0", resources))


def make_gpu(plan: PodPlan, rng: random.Random, nth: int) -> None:
    resources = {
        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"},
    }
    plan.containers = [container("train", plan.app.image, resources)]
    plan.tolerations.append(dict(GPU_TOLERATION))


NODE_SELECTORS = (
    {"topology.kubernetes.io/zone": "zone-b"},
    {"cpu": "true"},
    {"node.kubernetes.io/instance-type": "std-16x64"},
    {"node": "hello"},
    {"kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "zone-c"},
)


def make_node_selector(plan: PodPlan, _: random.Random, nth: int) -> None:
    plan.node_selector = dict(NODE_SELECTORS[nth % len(NODE_SELECTORS)])


def _requirement(key: str, operator: str, *values: str) -> Manifest:
    requirement: Manifest = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


REQUIRED_TERMS: tuple[list[Manifest], ...] = (
    [{"matchExpressions": [_requirement("topology.kubernetes.io/zone", "In", "zone-a", "zone-c")]}],
    [{"matchExpressions": [_requirement("node.kubernetes.io/instance-type", "NotIn", "std-4x16")]}],
    [{"matchExpressions": [_requirement("cpu", "Exists")]}],
    [  # two terms are ORed
        {"matchExpressions": [_requirement("topology.kubernetes.io/zone", "In", "zone-a")]},
        {"matchExpressions": [_requirement("node", "In", "hello")]},
    ],
    [{"matchExpressions": [_requirement("node", "DoesNotExist")]}],
    [{"matchFields": [_requirement("metadata.name", "In", "large-05", "large-06", "xlarge-03")]}],
)


def make_required_affinity(plan: PodPlan, _: random.Random, nth: int) -> None:
    terms = REQUIRED_TERMS[nth % len(REQUIRED_TERMS)]
    plan.affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def _preference(weight: int, requirement: Manifest) -> Manifest:
    return {"weight": weight, "preference": {"matchExpressions": [requirement]}}


PREFERRED_TERMS: tuple[list[Manifest], ...] = (
    [_preference(50, _requirement("topology.kubernetes.io/zone", "In", "zone-b"))],
    [
        _preference(80, _requirement("node.kubernetes.io/instance-type", "In", "std-32x128")),
        _preference(20, _requirement("cpu", "Exists")),
    ],
    [_preference(100, _requirement("topology.kubernetes.io/zone", "In", "zone-a", "zone-c"))],
    [_preference(10, _requirement("node", "NotIn", "hello"))],
)


def make_preferred_affinity(plan: PodPlan, _: random.Random, nth: int) -> None:
    terms = PREFERRED_TERMS[nth % len(PREFERRED_TERMS)]
    plan.affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}


def make_host_port(plan: PodPlan, _: random.Random, __: int) -> None:
    resources = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}}
    proxy = container("edge-proxy", plan.app.image, resources)
    proxy["ports"] = [{"containerPort": 8080, "hostPort": 8080, "name": "http", "protocol": "TCP"}]
    plan.containers = [proxy]


def make_spot_toleration(plan: PodPlan, _: random.Random, __: int) -> None:
    plan.tolerations.append(dict(SPOT_TOLERATION))


def make_overhead(plan: PodPlan, _: random.Random, __: int) -> None:
    plan.runtime_class = "kata"
    plan.overhead = {"cpu": "250m", "memory": "160Mi"}


def make_impossible(plan: PodPlan, rng: random.Random, nth: int) -> None:
    """Pods no node can take, so `placer simulate` reports some unschedulable ones."""
    main = plan.containers[0]
    if nth % 5 == 0:  # no node has 64 CPUs
        main["resources"] = {"requests": {"cpu": "64", "memory": "8Gi"}}
    elif nth % 5 == 1:  # nor 512Gi of memory
        main["resources"] = {"requests": {"cpu": "2", "memory": "512Gi"}}
    elif nth % 5 == 2:  # there is no zone-d
        plan.node_selector = {"topology.kubernetes.io/zone": "zone-d"}
    elif nth % 5 == 3:  # GPU nodes have 4 GPUs each
        make_gpu(plan, rng, nth)
        plan.containers[0]["resources"] = {
            "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"},
            "limits": {"nvidia.com/gpu": "8"},
        }
    else:  # 24 CPUs only on cpu-labelled nodes in zone-a with 16 CPUs
        main["resources"] = {"requests": {"cpu": "24", "memory": "4Gi"}}
        plan.node_selector = {
            "cpu": "true",
            "node.kubernetes.io/instance-type": "std-16x64",
            "topology.kubernetes.io/zone": "zone-a",
        }


KIND_MODIFIERS = {
    "best-effort": make_best_effort,
    "init": make_init,
    "gpu": make_gpu,
    "node-selector": make_node_selector,
    "required-affinity": make_required_affinity,
    "preferred-affinity": make_preferred_affinity,
    "host-port": make_host_port,
    "spot-toleration": make_spot_toleration,
    "overhead": make_overhead,
    "impossible": make_impossible,
}


def app_for(rng: random.Random, kind: str, nth: int) -> App:
    """The workload of a pending pod: some kinds need a particular one."""
    if kind == "gpu" or (kind == "impossible" and nth % 5 == 3):
        return APPS["train"]
    if kind == "host-port":
        return APPS["edge-proxy"]
    return APPS[rng.choice(GENERAL_APPS)]


def pending_plans(rng: random.Random, names: Names) -> list[PodPlan]:
    schedulers = [name for name, count in PENDING_BY_SCHEDULER.items() for _ in range(count)]
    kinds = [kind for kind, count in PENDING_KINDS.items() for _ in range(count)]
    kinds += ["plain"] * (len(schedulers) - len(kinds))
    rng.shuffle(schedulers)
    rng.shuffle(kinds)
    seen: dict[str, int] = {}
    plans = []
    for scheduler, kind in zip(schedulers, kinds, strict=True):
        nth = seen.get(kind, 0)
        seen[kind] = nth + 1
        created = NOW - timedelta(seconds=rng.randint(60, 3660))
        plan = new_plan(rng, names, app_for(rng, kind, nth), scheduler, created)
        if kind != "plain":
            KIND_MODIFIERS[kind](plan, rng, nth)
        plans.append(plan)
    for _ in range(FOREIGN_PENDING):
        created = NOW - timedelta(seconds=rng.randint(60, 3660))
        plans.append(new_plan(rng, names, APPS["legacy"], FOREIGN_SCHEDULER, created))
    return plans


# Bound pods ---------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9}


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def memory_kibibytes(quantity: str) -> int:
    for suffix, factor in {**_BINARY, **_DECIMAL}.items():
        if quantity.endswith(suffix):
            return -(-int(quantity[: -len(suffix)]) * factor // 1024)
    return -(-int(quantity) // 1024)


def plan_requests(plan: PodPlan) -> tuple[int, int, int]:
    """(cpu millis, memory KiB, GPUs) the pod requests, as the scheduler counts them."""

    def total(specs: list[Manifest], key: str, parse: Any) -> list[int]:
        return [parse(c["resources"].get("requests", {}).get(key, "0")) for c in specs]

    result = []
    for key, parse in (("cpu", cpu_millis), ("memory", memory_kibibytes), ("nvidia.com/gpu", int)):
        app = sum(total(plan.containers, key, parse))
        value = max([app, *total(plan.init_containers, key, parse)])
        if key in plan.overhead:
            value += parse(plan.overhead[key])
        result.append(value)
    return result[0], result[1], result[2]


def bind(rng: random.Random, plan: PodPlan, candidates: list[NodeState]) -> None:
    cpu_m, memory_ki, gpus = plan_requests(plan)
    fitting = [node for node in candidates if node.fits(cpu_m, memory_ki, gpus)]
    node = rng.choice(fitting)
    node.take(cpu_m, memory_ki, gpus)
    plan.node = node


def bound_plans(rng: random.Random, names: Names, nodes: dict[str, NodeState]) -> list[PodPlan]:
    """Pods bound before the simulation starts: system pods, services, batch jobs."""

    def created() -> datetime:
        return NOW - timedelta(hours=rng.randint(2, 200), seconds=rng.randint(0, 3599))

    general = [node for node in nodes.values() if node.gpus == 0]
    # The nodes that NodeMetrics show busy also carry more pods.
    weighted = general + [nodes[name] for name in METRICS if METRICS[name][0] > 0.8] * 6
    plans: list[PodPlan] = []

    for app_name, count in (("coredns", 2), ("metrics-server", 1)):
        for _ in range(count):
            resources = {
                "requests": {"cpu": "100m", "memory": "70Mi"},
                "limits": {"memory": "170Mi"},
            }
            plan = new_plan(rng, names, APPS[app_name], "default-scheduler", created(), resources)
            plan.labels = {"k8s-app": app_name}
            plan.priority = 2_000_000_000
            plans.append(plan)
            bind(rng, plan, general)

    for name in sorted(HOST_PORT_8080):
        plan = new_plan(rng, names, APPS["edge-proxy"], "default-scheduler", created())
        make_host_port(plan, rng, 0)
        plans.append(plan)
        bind(rng, plan, [nodes[name]])

    gpu_nodes = [node for node in nodes.values() if node.gpus]
    for _ in range(2):
        plan = new_plan(rng, names, APPS["train"], "default-scheduler", created())
        make_gpu(plan, rng, 0)
        plans.append(plan)
        bind(rng, plan, gpu_nodes)

    while len(plans) < BOUND_RUNNING:
        app = APPS[rng.choice(GENERAL_APPS)]
        plan = new_plan(rng, names, app, "default-scheduler", created())
        plans.append(plan)
        bind(rng, plan, weighted)

    for plan in plans:
        plan.phase = "Running"
    for _ in range(BOUND_SUCCEEDED):  # finished jobs: bound, but they no longer hold resources
        plan = new_plan(rng, names, APPS["report"], "default-scheduler", created())
        plan.node = rng.choice(general)
        plan.phase = "Succeeded"
        plans.append(plan)
    return plans


def qos_class(plan: PodPlan) -> str:
    specs = plan.containers + plan.init_containers
    if all(not s["resources"].get("requests") and not s["resources"].get("limits") for s in specs):
        return "BestEffort"
    for spec in specs:
        requests = spec["resources"].get("requests", {})
        limits = spec["resources"].get("limits", {})
        for resource in ("cpu", "memory"):
            limit = limits.get(resource)
            if limit is None or requests.get(resource, limit) != limit:
                return "Burstable"
    return "Guaranteed"


def pod_status(plan: PodPlan, pod_index: int) -> Manifest:
    status: Manifest = {"phase": plan.phase, "qosClass": qos_class(plan)}
    if plan.node is None:
        return status
    started = plan.created + timedelta(seconds=2)
    running = plan.phase == "Running"
    conditions = [
        ("Initialized", "True"),
        ("Ready", "True" if running else "False"),
        ("ContainersReady", "True" if running else "False"),
        ("PodScheduled", "True"),
    ]
    status["conditions"] = [
        {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": ts(started)}
        for kind, value in conditions
    ]
    status["hostIP"] = plan.node.ip
    status["podIP"] = f"10.244.{pod_index % 50}.{10 + pod_index % 240}"
    status["startTime"] = ts(started)
    return status


def render_pod(plan: PodPlan, pod_index: int) -> Manifest:
    spec: Manifest = {
        "containers": plan.containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": plan.priority,
        "restartPolicy": plan.app.restart_policy,
        "schedulerName": plan.scheduler,
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": plan.tolerations + [dict(t) for t in DEFAULT_TOLERATIONS],
    }
    if plan.init_containers:
        spec["initContainers"] = plan.init_containers
    if plan.node_selector:
        spec["nodeSelector"] = plan.node_selector
    if plan.affinity:
        spec["affinity"] = plan.affinity
    if plan.spread:
        spec["topologySpreadConstraints"] = plan.spread
    if plan.runtime_class:
        spec["runtimeClassName"] = plan.runtime_class
        spec["overhead"] = plan.overhead
    if plan.node is not None:
        spec["nodeName"] = plan.node.name
    priority_class = PRIORITY_CLASSES.get(plan.priority)
    if plan.priority >= 2_000_000_000:
        priority_class = "system-cluster-critical"
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata: Manifest = {
        "name": plan.name,
        "namespace": plan.app.namespace,
        "uid": plan.uid,
        "resourceVersion": str(1_000_000 + pod_index),
        "creationTimestamp": ts(plan.created),
        "labels": plan.labels,
    }
    if plan.owner is not None:
        metadata["ownerReferences"] = [plan.owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": pod_status(plan, pod_index),
    }


# --------------------------------------------------------------------------------------------
# NodeMetrics
# --------------------------------------------------------------------------------------------


def make_node_metrics(
    rng: random.Random, nodes: dict[str, NodeState], manifests: list[Manifest]
) -> list[Manifest]:
    labels = {m["metadata"]["name"]: m["metadata"]["labels"] for m in manifests}
    documents = []
    for i, (name, (cpu_fraction, memory_fraction)) in enumerate(sorted(METRICS.items())):
        node = nodes[name]
        cpu_m = int(node.cpu_m * cpu_fraction)
        memory_ki = int(node.memory_ki * memory_fraction)
        # metrics-server prints nanocores and KiB; other adapters print millicores and MiB
        cpu = f"{cpu_m * 1_000_000 + rng.randint(0, 999_999)}n" if i % 2 == 0 else f"{cpu_m}m"
        memory = f"{memory_ki}Ki" if i % 3 != 2 else f"{memory_ki // 1024}Mi"
        documents.append(
            {
                "apiVersion": "metrics.k8s.io/v1beta1",
                "kind": "NodeMetrics",
                "metadata": {"name": name, "creationTimestamp": ts(NOW), "labels": labels[name]},
                "timestamp": ts(NOW - timedelta(seconds=rng.randint(5, 25))),
                "window": "30s",
                "usage": {"cpu": cpu, "memory": memory},
            }
        )
    return documents


# --------------------------------------------------------------------------------------------
# Namespaces and the HA workload
#
# Generated after everything above and from their own RNG, so that the nodes, pods and metrics
# above are exactly what they were before these objects were added.
# --------------------------------------------------------------------------------------------

# Every namespace the sample used before the recipes (NEW_NAMESPACES has theirs), and `default`;
# the API server adds kubernetes.io/metadata.name.
NAMESPACE_LABELS: dict[str, dict[str, str]] = {
    "batch": {"team": "data", "env": "prod"},
    "default": {},
    "kube-system": {},
    "shop": {"team": "commerce", "env": "prod"},
    "team-a": {"team": "team-a", "env": "prod"},
    "team-b": {"team": "team-b", "env": "staging"},
}

# The `checkout` Deployment of namespace `shop`, just scaled from 2 to 8 replicas: its ReplicaSet,
# the Service in front of it, 2 running replicas and 6 pending ones for `ha-scheduler`
# (examples/profiles/ha.yaml). Each replica wants its own node (required pod anti-affinity per
# hostname) and the zones evened out (maxSkew 1, DoNotSchedule).
HA_APP = App("checkout", "shop", "registry.example/checkout:3.1")
HA_SCHEDULER = "ha-scheduler"
HA_REPLICAS = 8
HA_RUNNING_NODES = ("small-07", "medium-12")  # zone-a and zone-c: the 2 replicas already running
HA_CREATED = NOW - timedelta(days=9, hours=4)  # the Deployment and its ReplicaSet
HA_SCALED = NOW - timedelta(seconds=20)  # the scale-up: newer than every other pending pod
HA_LABEL_SELECTOR: Manifest = {"matchLabels": {"app": HA_APP.name}}


def ha_pod_spec(plan: PodPlan, template_hash: str) -> None:
    """The replica's spec, as the Deployment's pod template writes it."""
    resources = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}
    main = container(HA_APP.name, HA_APP.image, resources)
    main["ports"] = [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]
    plan.containers = [main]
    plan.labels = {"app": HA_APP.name, "pod-template-hash": template_hash}
    plan.priority = 0
    plan.affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": copy.deepcopy(HA_LABEL_SELECTOR), "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    plan.spread = [
        {
            "labelSelector": copy.deepcopy(HA_LABEL_SELECTOR),
            "matchLabelKeys": ["pod-template-hash"],
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
        }
    ]


@dataclass
class HaWorkload:
    pods: list[Manifest]
    services: list[Manifest]
    replicasets: list[Manifest]


def make_namespaces(rng: random.Random, used: Iterable[str]) -> list[Manifest]:
    names = sorted(set(used) | {"default"})
    missing = set(names) - set(NAMESPACE_LABELS)
    assert not missing, f"NAMESPACE_LABELS lacks {sorted(missing)}"
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": new_uid(rng),
                "resourceVersion": str(rng.randint(100, 99_999)),
                "creationTimestamp": ts(NOW - timedelta(days=40 - i)),
                "labels": {"kubernetes.io/metadata.name": name, **NAMESPACE_LABELS[name]},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        for i, name in enumerate(names)
    ]


def make_ha_workload(
    rng: random.Random, nodes: dict[str, NodeState], first_index: int
) -> HaWorkload:
    """The checkout Service, ReplicaSet and 8 replicas; pods are rendered from `first_index` on."""
    names = Names(rng)
    template_hash = names._token(10)
    names.hashes[HA_APP.name] = template_hash
    deployment_uid = new_uid(rng)
    replicaset_name = f"{HA_APP.name}-{template_hash}"
    replicaset_uid = new_uid(rng)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": replicaset_name,
        "uid": replicaset_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }

    plans: list[PodPlan] = []
    for i in range(HA_REPLICAS):
        running = i < len(HA_RUNNING_NODES)
        if running:
            created = HA_CREATED + timedelta(seconds=3 + i, minutes=2 * i)
        else:
            created = HA_SCALED + timedelta(seconds=i // 3)
        plan = new_plan(rng, names, HA_APP, HA_SCHEDULER, created)
        ha_pod_spec(plan, template_hash)
        plan.owner = dict(owner)
        if running:
            node = nodes[HA_RUNNING_NODES[i]]
            cpu_m, memory_ki, gpus = plan_requests(plan)
            assert node.fits(cpu_m, memory_ki, gpus), node.name
            node.take(cpu_m, memory_ki, gpus)
            plan.node = node
            plan.phase = "Running"
        plans.append(plan)
    zones = [plan.node.zone for plan in plans if plan.node is not None]
    assert len(set(zones)) == len(zones), "the running replicas are in different zones"

    template_spec = copy.deepcopy(render_pod(plans[-1], 0)["spec"])  # no YAML anchors to a pod
    template_spec.pop("priority")  # the API server sets it from the priority class
    template_spec.pop("tolerations")  # DefaultTolerationSeconds adds them to pods, not templates
    template_labels = {"app": HA_APP.name, "pod-template-hash": template_hash}
    replicaset: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": replicaset_name,
            "namespace": HA_APP.namespace,
            "uid": replicaset_uid,
            "resourceVersion": str(rng.randint(100_000, 999_999)),
            "generation": 2,
            "creationTimestamp": ts(HA_CREATED),
            "labels": dict(template_labels),
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": str(HA_REPLICAS),
                "deployment.kubernetes.io/max-replicas": str(HA_REPLICAS + 2),
                "deployment.kubernetes.io/revision": "1",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": HA_APP.name,
                    "uid": deployment_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": HA_REPLICAS,
            "selector": {"matchLabels": dict(template_labels)},
            "template": {"metadata": {"labels": dict(template_labels)}, "spec": template_spec},
        },
        "status": {
            "replicas": HA_REPLICAS,
            "fullyLabeledReplicas": HA_REPLICAS,
            "readyReplicas": len(HA_RUNNING_NODES),
            "availableReplicas": len(HA_RUNNING_NODES),
            "observedGeneration": 2,
        },
    }
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": HA_APP.name,
            "namespace": HA_APP.namespace,
            "uid": new_uid(rng),
            "resourceVersion": str(rng.randint(100_000, 999_999)),
            "creationTimestamp": ts(HA_CREATED),
            "labels": {"app": HA_APP.name},
        },
        "spec": {
            "clusterIP": "10.96.41.17",
            "clusterIPs": ["10.96.41.17"],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
            "selector": {"app": HA_APP.name},
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
        "status": {"loadBalancer": {}},
    }
    pods = [render_pod(plan, first_index + i) for i, plan in enumerate(plans)]
    return HaWorkload(pods, [service], [replicaset])


# --------------------------------------------------------------------------------------------
# Volumes (namespace `data`) and priority (namespace `batch`)
#
# Like the HA workload, each recipe draws from an RNG of its own, after everything above, so that
# the objects above are exactly what they were before these were added.
# --------------------------------------------------------------------------------------------

ZONE_KEY = "topology.kubernetes.io/zone"
REGION_KEY = "topology.kubernetes.io/region"
HOSTNAME_KEY = "kubernetes.io/hostname"

# Namespaces the recipes added, with labels besides kubernetes.io/metadata.name, and when.
NEW_NAMESPACES: dict[str, tuple[dict[str, str], datetime]] = {
    "data": ({"team": "data", "env": "prod"}, NOW - timedelta(days=21)),
}

# The volumes recipe (examples/profiles/stateful.yaml), in namespace `data`: the `redis`
# StatefulSet, 2 replicas running and the third pending again (its node is gone; its zonal disk, a
# Bound claim and PV, stays in its zone); the new `postgres` StatefulSet, whose 3 pending replicas'
# claims `data-postgres-N` wait for their first consumer; and 2 pending jobs whose claims are not
# usable (one missing, one Immediate and unbound). All of them for stateful-scheduler.
DATA_NAMESPACE = "data"
STATEFUL_SCHEDULER = "stateful-scheduler"
LOCAL_CLASS = "local-ssd"  # kubernetes.io/no-provisioner: local PVs only
ZONAL_CLASS = "zonal-disk"  # a CSI driver provisions it, in ZONAL_ZONES only; the default class
SHARED_CLASS = "shared-files"  # Immediate
ZONAL_DRIVER = "disk.csi.example.com"
SHARED_DRIVER = "files.csi.example.com"
ZONAL_ZONES = ("zone-b", "zone-c")
# Free local SSDs, each an Available `local-ssd` PV pinned to its node: (node, size, path).
LOCAL_VOLUMES = (
    ("large-07", "200Gi", "/mnt/disks/ssd0"),
    ("large-08", "50Gi", "/mnt/disks/ssd0"),
    ("large-08", "100Gi", "/mnt/disks/ssd1"),
    ("large-12", "100Gi", "/mnt/disks/ssd0"),
)
# Where each redis replica's disk was provisioned (zone, node) and the node it runs on (None: pending).
# The two running replicas are on nodes nothing else can use now (one cordoned, one NotReady), so
# they leave every other placement of the sample as it was; medium-17, redis-2's old node, is gone.
REDIS_REPLICAS = (("zone-b", "large-11", "large-11"), ("zone-c", "small-12", "small-12"), ("zone-b", "medium-17", None))
REDIS_CREATED = NOW - timedelta(days=12, hours=5)
REDIS_RECREATED = NOW - timedelta(seconds=14)  # redis-2: after the checkout replicas, before postgres
# CSINodes: the zonal disk's driver runs where its class provisions (ZONAL_ZONES), and each node
# attaches at most this many of its disks, by instance type. Nodes without a CSINode have no limit.
VOLUME_LIMITS_BY_TYPE = {"std-4x16": 4, "std-8x32": 8, "std-16x64": 16, "std-32x128": 24, "gpu-32x128-4g": 8}
POSTGRES_REPLICAS = 3
POSTGRES_CLAIM_SIZE = "100Gi"
# The claim of each replica: 0 and 1 were created by the StatefulSet from its template (local-ssd);
# data-postgres-2 was created ahead of it with the zonal class (there is no third large local SSD).
POSTGRES_CLAIM_CLASSES = (LOCAL_CLASS, LOCAL_CLASS, ZONAL_CLASS)
POSTGRES_CREATED = NOW - timedelta(days=1)  # the StatefulSet, its Service and the claims
POSTGRES_PODS_CREATED = NOW - timedelta(seconds=12)  # after the checkout replicas and redis-2: last
MISSING_CLAIM = "pg-backups"  # the backup job's claim: never created
IMMEDIATE_CLAIM = "shared-reports"  # Immediate, its provisioner has not answered: unbound

# The priority recipe (examples/profiles/priority.yaml). Low-priority batch jobs fill the two spot
# nodes; a PodDisruptionBudget covers the `backfill` ones; two `ingest` jobs of PriorityClass `high`
# must run there and preempt, and one `replay` job of `high-nonpreempting` may not.
PRIORITY_SCHEDULER = "priority-scheduler"
PRIORITY_NODES = ("medium-15", "medium-16")  # the spot nodes (zone-c, zone-a)
# PriorityClasses: name -> (value, preemptionPolicy, description). `standard` and `high` are the
# classes the sample's pods with priority 100 and 1000 already name; none is globalDefault, so a pod
# without a class keeps priority 0.
PRIORITY_CLASS_VALUES: dict[str, tuple[int, str, str]] = {
    "high": (1000, "PreemptLowerPriority", "Urgent work: may preempt lower-priority pods."),
    "high-nonpreempting": (1000, "Never", "Urgent work that waits rather than preempt."),
    "low": (0, "PreemptLowerPriority", "Batch work that others may preempt."),
    "standard": (100, "PreemptLowerPriority", "Services."),
    "system-cluster-critical": (
        2_000_000_000,
        "PreemptLowerPriority",
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
    "system-node-critical": (
        2_000_001_000,
        "PreemptLowerPriority",
        "Used for system critical pods that must not be moved from their current node.",
    ),
}
# The jobs on each spot node, in start order: (app, cpu, memory). With the pods already there
# (medium-15: coredns 100m and a cache 250m; medium-16: a checkout pod 100m) each node has 60m of
# CPU left. `backfill` jobs (the PDB's) started last, so without the budget they would be the
# first victims.
LOW_JOBS = {
    "medium-15": [("adhoc", "1500m", "2Gi")] * 3 + [("backfill", "1500m", "3Gi")] * 2,
    "medium-16": [("adhoc", "1500m", "2Gi")] * 3 + [("backfill", "1500m", "3Gi"), ("backfill", "1750m", "3Gi")],
}
LOW_STARTED = NOW - timedelta(hours=5)  # the first job (medium-15 first); the next ones every 20 minutes
# The pending jobs: (app, priorityClassName), created 90 s before the snapshot, 1 s apart.
URGENT_JOBS = (("ingest", "high"), ("ingest", "high"), ("replay", "high-nonpreempting"))
URGENT_CREATED = NOW - timedelta(seconds=90)
URGENT_RESOURCES: Manifest = {"requests": {"cpu": "3", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}


@dataclass
class Workload:
    """Objects of one recipe, by kind."""

    pods: list[Manifest] = field(default_factory=list)
    services: list[Manifest] = field(default_factory=list)
    statefulsets: list[Manifest] = field(default_factory=list)
    claims: list[Manifest] = field(default_factory=list)
    volumes: list[Manifest] = field(default_factory=list)
    storage_classes: list[Manifest] = field(default_factory=list)
    csinodes: list[Manifest] = field(default_factory=list)
    budgets: list[Manifest] = field(default_factory=list)
    priority_classes: list[Manifest] = field(default_factory=list)

    def extend(self, other: Workload) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))


def make_new_namespaces(rng: random.Random) -> list[Manifest]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": new_uid(rng),
                "resourceVersion": str(rng.randint(100, 99_999)),
                "creationTimestamp": ts(created),
                "labels": {"kubernetes.io/metadata.name": name, **labels},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        for name, (labels, created) in sorted(NEW_NAMESPACES.items())
    ]


def _object_meta(rng: random.Random, name: str, created: datetime, namespace: str | None = None) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["uid"] = new_uid(rng)
    meta["resourceVersion"] = str(rng.randint(100_000, 999_999))
    meta["creationTimestamp"] = ts(created)
    return meta


def _zone_term(*zones: str) -> Manifest:
    return {"matchExpressions": [_requirement(ZONE_KEY, "In", *zones)]}


def make_storage_classes(rng: random.Random) -> list[Manifest]:
    created = NOW - timedelta(days=30)

    def storage_class(name: str, provisioner: str, mode: str, **extra: Any) -> Manifest:
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": _object_meta(rng, name, created),
            "provisioner": provisioner,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": mode,
            **extra,
        }

    local = storage_class(LOCAL_CLASS, "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    shared = storage_class(
        SHARED_CLASS, SHARED_DRIVER, "Immediate", allowVolumeExpansion=True, parameters={"protocol": "nfs4"}
    )
    zonal = storage_class(
        ZONAL_CLASS,
        ZONAL_DRIVER,
        "WaitForFirstConsumer",
        allowVolumeExpansion=True,
        parameters={"csi.storage.k8s.io/fstype": "ext4", "type": "ssd"},
        allowedTopologies=[{"matchLabelExpressions": [{"key": ZONE_KEY, "values": list(ZONAL_ZONES)}]}],
    )
    zonal["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return [local, shared, zonal]


def make_claim(
    rng: random.Random,
    name: str,
    storage_class: str,
    size: str,
    created: datetime,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Manifest:
    meta = _object_meta(rng, name, created, DATA_NAMESPACE)
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    meta["finalizers"] = ["kubernetes.io/pvc-protection"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": storage_class,
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Pending"},
    }


def bind_zonal_claim(rng: random.Random, claim: Manifest, zone: str, node: str, created: datetime) -> Manifest:
    """Bind `claim` (in place) to a disk the zonal class's driver provisioned in `zone` for a pod on
    `node`; the PV."""
    meta, spec = claim["metadata"], claim["spec"]
    name = f"pvc-{meta['uid']}"
    size = spec["resources"]["requests"]["storage"]
    meta["annotations"] = {
        "pv.kubernetes.io/bind-completed": "yes",
        "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.beta.kubernetes.io/storage-provisioner": ZONAL_DRIVER,
        "volume.kubernetes.io/selected-node": node,
        "volume.kubernetes.io/storage-provisioner": ZONAL_DRIVER,
    }
    spec["volumeName"] = name
    claim["status"] = {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}, "phase": "Bound"}
    volume_meta = _object_meta(rng, name, created + timedelta(seconds=4))
    volume_meta["annotations"] = {"pv.kubernetes.io/provisioned-by": ZONAL_DRIVER}
    volume_meta["finalizers"] = ["external-attacher/disk-csi-example-com", "kubernetes.io/pv-protection"]
    volume_meta["labels"] = {REGION_KEY: REGION, ZONE_KEY: zone}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": volume_meta,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": size},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
                "uid": meta["uid"],
            },
            "csi": {
                "driver": ZONAL_DRIVER,
                "fsType": "ext4",
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "1741000000000-ssd"},
                "volumeHandle": f"projects/example/zones/{zone}/disks/{name}",
            },
            "nodeAffinity": {"required": {"nodeSelectorTerms": [_zone_term(zone)]}},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": ZONAL_CLASS,
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound"},
    }


def make_local_volume(rng: random.Random, node: str, size: str, path: str) -> Manifest:
    """A local SSD as the local static provisioner publishes it: Available, pinned to its node."""
    digest = hashlib.sha256(f"{node}:{path}".encode()).hexdigest()[:8]
    meta = _object_meta(rng, f"local-pv-{digest}", NOW - timedelta(days=29, minutes=rng.randint(1, 600)))
    meta["annotations"] = {"pv.kubernetes.io/provisioned-by": f"local-volume-provisioner-{node}"}
    meta["finalizers"] = ["kubernetes.io/pv-protection"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": meta,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": size},
            "local": {"path": path},
            "nodeAffinity": {
                "required": {"nodeSelectorTerms": [{"matchExpressions": [_requirement(HOSTNAME_KEY, "In", node)]}]}
            },
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": LOCAL_CLASS,
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Available"},
    }


def make_csinodes(rng: random.Random, node_manifests: list[Manifest]) -> list[Manifest]:
    """A CSINode for every node in ZONAL_ZONES: the zonal disk's driver with its attach limit, and
    the shared files' driver (no limit)."""
    csinodes = []
    for node in node_manifests:
        labels = node["metadata"]["labels"]
        if labels[ZONE_KEY] not in ZONAL_ZONES:
            continue
        name = node["metadata"]["name"]
        meta = _object_meta(rng, name, parse_ts(node["metadata"]["creationTimestamp"]) + timedelta(minutes=2))
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}]
        count = VOLUME_LIMITS_BY_TYPE[labels["node.kubernetes.io/instance-type"]]
        drivers = [
            {"allocatable": {"count": count}, "name": ZONAL_DRIVER, "nodeID": name, "topologyKeys": [ZONE_KEY]},
            {"name": SHARED_DRIVER, "nodeID": name},
        ]
        csinode = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": drivers}}
        csinodes.append(csinode)
    return csinodes


def headless_service(rng: random.Random, app: App, port: int, created: datetime) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**_object_meta(rng, app.name, created, app.namespace), "labels": {"app": app.name}},
        "spec": {
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": app.name, "port": port, "protocol": "TCP", "targetPort": port}],
            "publishNotReadyAddresses": True,
            "selector": {"app": app.name},
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
        "status": {"loadBalancer": {}},
    }


@dataclass
class StatefulSetPlan:
    app: App
    replicas: int
    created: datetime
    claim_class: str
    claim_size: str
    mount_path: str
    resources: Manifest
    port: int
    ready: int
    uid: str = ""
    revision: str = ""


def statefulset_pod(plan: PodPlan, stateful: StatefulSetPlan, ordinal: int, pod_index: int) -> Manifest:
    """Render a replica of `stateful`: its name, labels, owner, hostname and claim."""
    name = f"{stateful.app.name}-{ordinal}"
    plan.name = name
    plan.labels = {
        "app": stateful.app.name,
        "apps.kubernetes.io/pod-index": str(ordinal),
        "controller-revision-hash": f"{stateful.app.name}-{stateful.revision}",
        "statefulset.kubernetes.io/pod-name": name,
    }
    plan.owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": stateful.app.name,
        "uid": stateful.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    main = container(stateful.app.name, stateful.app.image, copy.deepcopy(stateful.resources))
    main["ports"] = [{"containerPort": stateful.port, "name": stateful.app.name, "protocol": "TCP"}]
    main["volumeMounts"] = [{"mountPath": stateful.mount_path, "name": "data"}]
    plan.containers = [main]
    plan.priority = 0
    pod = render_pod(plan, pod_index)
    pod["spec"]["hostname"] = name
    pod["spec"]["subdomain"] = stateful.app.name
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}]
    return pod


def make_statefulset(rng: random.Random, stateful: StatefulSetPlan, template: Manifest) -> Manifest:
    """The StatefulSet whose pod template `template` (a rendered replica) follows."""
    spec = copy.deepcopy(template["spec"])
    for key in ("priority", "tolerations", "nodeName", "hostname", "subdomain", "volumes"):
        spec.pop(key, None)
    labels = {"app": stateful.app.name}
    meta = _object_meta(rng, stateful.app.name, stateful.created, stateful.app.namespace)
    meta["uid"] = stateful.uid
    meta["generation"] = 1
    meta["labels"] = dict(labels)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "podManagementPolicy": "Parallel",
            "replicas": stateful.replicas,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": dict(labels)},
            "serviceName": stateful.app.name,
            "template": {"metadata": {"labels": dict(labels)}, "spec": spec},
            "updateStrategy": {"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"},
            "volumeClaimTemplates": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": stateful.claim_size}},
                        "storageClassName": stateful.claim_class,
                        "volumeMode": "Filesystem",
                    },
                }
            ],
        },
        "status": {
            "availableReplicas": stateful.ready,
            "collisionCount": 0,
            "currentReplicas": stateful.replicas,
            "currentRevision": f"{stateful.app.name}-{stateful.revision}",
            "observedGeneration": 1,
            "readyReplicas": stateful.ready,
            "replicas": stateful.replicas,
            "updateRevision": f"{stateful.app.name}-{stateful.revision}",
            "updatedReplicas": stateful.replicas,
        },
    }


def make_volumes_workload(
    rng: random.Random, nodes: dict[str, NodeState], node_manifests: list[Manifest], first_index: int
) -> Workload:
    """The volumes recipe; its pods are rendered from `first_index` on."""
    work = Workload()
    names = Names(rng)
    index = first_index
    work.storage_classes = make_storage_classes(rng)
    work.volumes = [make_local_volume(rng, node, size, path) for node, size, path in LOCAL_VOLUMES]
    work.csinodes = make_csinodes(rng, node_manifests)

    # redis: 3 replicas, each on its zonal disk; 2 running, the third pending again
    redis = StatefulSetPlan(
        App("redis", DATA_NAMESPACE, "registry.example/redis:7.2"),
        replicas=len(REDIS_REPLICAS),
        created=REDIS_CREATED,
        claim_class=ZONAL_CLASS,
        claim_size="20Gi",
        mount_path="/data",
        resources={"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        port=6379,
        ready=sum(1 for *_, running in REDIS_REPLICAS if running),
        uid=new_uid(rng),
        revision=names._token(10),
    )
    for ordinal, (zone, first_node, node_name) in enumerate(REDIS_REPLICAS):
        created = REDIS_CREATED + timedelta(seconds=5 + 40 * ordinal)
        claim = make_claim(rng, f"data-redis-{ordinal}", ZONAL_CLASS, redis.claim_size, created, {"app": "redis"})
        work.volumes.append(bind_zonal_claim(rng, claim, zone, first_node, created))
        work.claims.append(claim)
        plan = new_plan(rng, names, redis.app, STATEFUL_SCHEDULER, created if node_name else REDIS_RECREATED)
        if node_name is not None:
            node = nodes[node_name]
            assert node.zone == zone, node_name
            statefulset_pod(plan, redis, ordinal, 0)  # sets the containers, for their requests
            cpu_m, memory_ki, gpus = plan_requests(plan)
            assert node.fits(cpu_m, memory_ki, gpus), node.name
            node.take(cpu_m, memory_ki, gpus)
            plan.node = node
            plan.phase = "Running"
        work.pods.append(statefulset_pod(plan, redis, ordinal, index))
        index += 1
    work.statefulsets.append(make_statefulset(rng, redis, work.pods[-1]))
    work.services.append(headless_service(rng, redis.app, redis.port, REDIS_CREATED))

    # postgres: 3 replicas pending, their claims waiting for them
    postgres = StatefulSetPlan(
        App("postgres", DATA_NAMESPACE, "registry.example/postgres:16.2"),
        replicas=POSTGRES_REPLICAS,
        created=POSTGRES_CREATED,
        claim_class=LOCAL_CLASS,
        claim_size=POSTGRES_CLAIM_SIZE,
        mount_path="/var/lib/postgresql/data",
        resources={"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        port=5432,
        ready=0,
        uid=new_uid(rng),
        revision=names._token(10),
    )
    for ordinal, claim_class in enumerate(POSTGRES_CLAIM_CLASSES):
        early = claim_class != postgres.claim_class  # created by hand before the StatefulSet
        created = POSTGRES_CREATED + (timedelta(minutes=-20) if early else timedelta(seconds=1 + ordinal))
        work.claims.append(
            make_claim(rng, f"data-postgres-{ordinal}", claim_class, POSTGRES_CLAIM_SIZE, created, {"app": "postgres"})
        )
    for ordinal in range(POSTGRES_REPLICAS):
        plan = new_plan(rng, names, postgres.app, STATEFUL_SCHEDULER, POSTGRES_PODS_CREATED)
        work.pods.append(statefulset_pod(plan, postgres, ordinal, index))
        index += 1
    work.statefulsets.append(make_statefulset(rng, postgres, work.pods[-1]))
    work.services.append(headless_service(rng, postgres.app, postgres.port, POSTGRES_CREATED))

    # the nightly backup job, whose claim was never created, and a report job on shared files
    for app, claim_name, mount in (
        (App("pg-backup", DATA_NAMESPACE, "registry.example/tools:1.0", "OnFailure"), MISSING_CLAIM, "/backups"),
        (App("report-export", DATA_NAMESPACE, "registry.example/report:2.2", "OnFailure"), IMMEDIATE_CLAIM, "/reports"),
    ):
        resources = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
        plan = new_plan(rng, names, app, STATEFUL_SCHEDULER, POSTGRES_PODS_CREATED + timedelta(seconds=1), resources)
        plan.labels = {"app": app.name}
        plan.priority = 0
        plan.containers[0]["volumeMounts"] = [{"mountPath": mount, "name": "output"}]
        pod = render_pod(plan, index)
        pod["spec"]["volumes"] = [{"name": "output", "persistentVolumeClaim": {"claimName": claim_name}}]
        work.pods.append(pod)
        index += 1
    work.claims.append(
        make_claim(
            rng,
            IMMEDIATE_CLAIM,
            SHARED_CLASS,
            "10Gi",
            NOW - timedelta(minutes=3),
            {"app": "report-export"},
            {"volume.beta.kubernetes.io/storage-provisioner": SHARED_DRIVER,
             "volume.kubernetes.io/storage-provisioner": SHARED_DRIVER},
        )
    )
    return work


def make_priority_class(rng: random.Random, name: str) -> Manifest:
    value, policy, description = PRIORITY_CLASS_VALUES[name]
    created = NOW - timedelta(days=40 if name.startswith("system-") else 30)
    manifest: Manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _object_meta(rng, name, created),
        "value": value,
        "preemptionPolicy": policy,
        "description": description,
    }
    return manifest


def make_priority_workload(rng: random.Random, nodes: dict[str, NodeState], first_index: int) -> Workload:
    """The priority recipe; its pods are rendered from `first_index` on."""
    work = Workload()
    names = Names(rng)
    index = first_index
    work.priority_classes = [make_priority_class(rng, name) for name in sorted(PRIORITY_CLASS_VALUES)]
    apps = {
        name: App(name, "batch", "registry.example/etl:0.14", "OnFailure")
        for name in ("adhoc", "backfill", "ingest", "replay")
    }
    started = LOW_STARTED
    plans: list[tuple[PodPlan, str]] = []  # and the PriorityClass each names
    for node_name in PRIORITY_NODES:
        node = nodes[node_name]
        for app_name, cpu, memory in LOW_JOBS[node_name]:
            resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}
            plan = new_plan(rng, names, apps[app_name], "default-scheduler", started - timedelta(seconds=2), resources)
            plan.labels = {"app": app_name}
            plan.priority = 0
            plan.tolerations.append(dict(SPOT_TOLERATION))
            cpu_m, memory_ki, gpus = plan_requests(plan)
            assert node.fits(cpu_m, memory_ki, gpus), node.name
            node.take(cpu_m, memory_ki, gpus)
            plan.node = node
            plan.phase = "Running"
            plans.append((plan, "low"))
            started += timedelta(minutes=20)
    for i, (app_name, class_name) in enumerate(URGENT_JOBS):
        plan = new_plan(
            rng, names, apps[app_name], PRIORITY_SCHEDULER, URGENT_CREATED + timedelta(seconds=i),
            copy.deepcopy(URGENT_RESOURCES),
        )
        plan.labels = {"app": app_name}
        plan.tolerations.append(dict(SPOT_TOLERATION))
        plan.affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [_requirement(HOSTNAME_KEY, "In", *PRIORITY_NODES)]}
                    ]
                }
            }
        }
        plans.append((plan, class_name))
    for plan, class_name in plans:
        pod = render_pod(plan, index)
        index += 1
        spec = pod["spec"]
        spec["priorityClassName"] = class_name
        if plan.node is None:  # as written, not yet admitted: the API server sets priority and policy
            del spec["priority"], spec["preemptionPolicy"]
        work.pods.append(pod)

    backfill = [p for p in work.pods if p["metadata"]["labels"]["app"] == "backfill"]
    budget_meta = _object_meta(rng, "backfill", LOW_STARTED - timedelta(days=3), "batch")
    budget_meta["generation"] = 1
    work.budgets.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": budget_meta,
            "spec": {"minAvailable": len(backfill), "selector": {"matchLabels": {"app": "backfill"}}},
            "status": {
                "conditions": [
                    {
                        "lastTransitionTime": max(p["status"]["startTime"] for p in backfill),
                        "message": "",
                        "observedGeneration": 1,
                        "reason": "InsufficientPods",
                        "status": "False",
                        "type": "DisruptionAllowed",
                    }
                ],
                "currentHealthy": len(backfill),
                "desiredHealthy": len(backfill),
                "disruptionsAllowed": 0,
                "expectedPods": len(backfill),
                "observedGeneration": 1,
            },
        }
    )
    return work


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def _listed(manifest: Manifest) -> tuple[str, str]:
    """The order the API server lists objects of one kind in: namespace, then name."""
    return manifest["metadata"].get("namespace", ""), manifest["metadata"]["name"]


def build_cluster(seed: int = SEED) -> list[Manifest]:
    """The YAML documents of cluster.yaml: one v1 List of every object, kind by kind, then
    NodeMetrics."""
    rng = random.Random(seed)
    node_manifests, nodes = make_nodes(rng)
    names = Names(rng)
    plans = bound_plans(rng, names, nodes) + pending_plans(rng, names)
    plans.sort(key=lambda plan: (plan.app.namespace, plan.name))  # as the API server lists them
    pods = [render_pod(plan, i) for i, plan in enumerate(plans)]
    node_metrics = make_node_metrics(rng, nodes, node_manifests)

    # Everything below draws from RNGs of its own (see "Namespaces and the HA workload").
    ha_rng = random.Random(f"{seed}/ha")
    ha = make_ha_workload(ha_rng, nodes, first_index=len(pods))
    pods = pods + ha.pods
    namespaces = make_namespaces(ha_rng, (pod["metadata"]["namespace"] for pod in pods))
    # (see "Volumes (namespace `data`) and priority (namespace `batch`)")
    namespaces += make_new_namespaces(random.Random(f"{seed}/namespaces"))
    recipes = Workload(services=ha.services)
    recipes.extend(make_volumes_workload(random.Random(f"{seed}/volumes"), nodes, node_manifests, len(pods)))
    recipes.extend(make_priority_workload(random.Random(f"{seed}/priority"), nodes, len(pods) + len(recipes.pods)))
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            *sorted(namespaces, key=_listed),
            *node_manifests,
            *sorted(pods + recipes.pods, key=_listed),
            *sorted(recipes.services, key=_listed),
            *ha.replicasets,
            *sorted(recipes.statefulsets, key=_listed),
            *sorted(recipes.claims, key=_listed),
            *sorted(recipes.volumes, key=_listed),
            *sorted(recipes.storage_classes, key=_listed),
            *sorted(recipes.csinodes, key=_listed),
            *sorted(recipes.budgets, key=_listed),
            *sorted(recipes.priority_classes, key=_listed),
        ],
    }
    return [listing, *node_metrics]


def dump_cluster(documents: list[Manifest]) -> str:
    header = (
        "# The sample cluster of examples/README.md: `kubectl get namespaces,nodes,pods,services,\n"
        "# replicasets,statefulsets,persistentvolumeclaims,persistentvolumes,storageclasses,csinodes,\n"
        "# poddisruptionbudgets,priorityclasses -A -o yaml` followed by NodeMetrics. Generated by\n"
        "# examples/generate_cluster.py; do not edit by hand.\n"
    )
    body = yaml.dump_all(
        documents, Dumper=yaml.SafeDumper, sort_keys=True, default_flow_style=False, width=100
    )
    return header + body


def profile_files(directory: Path = PROFILES_DIR) -> list[Path]:
    """The profiles all.yaml holds: every file of the directory but itself and NOT_IN_ALL."""
    return sorted(
        path for path in directory.glob("*.yaml") if path.name != ALL_PROFILES and path.name not in NOT_IN_ALL
    )


def dump_all_profiles(directory: Path = PROFILES_DIR) -> str:
    parts = [
        "# Every example profile in one file but priority.yaml (it preempts: run it on its own).\n"
        "# Generated by examples/generate_cluster.py from the other files in this directory; do not\n"
        "# edit by hand.\n"
    ]
    for path in profile_files(directory):
        text = path.read_text()
        parts.append("---\n" + text + ("" if text.endswith("\n") else "\n"))
    return "".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=HERE, help="directory to write into (default: examples/)"
    )
    parser.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out: Path = args.out
    (out / "profiles").mkdir(parents=True, exist_ok=True)
    (out / "cluster.yaml").write_text(dump_cluster(build_cluster(args.seed)))
    (out / "profiles" / ALL_PROFILES).write_text(dump_all_profiles())


if __name__ == "__main__":
    main()
