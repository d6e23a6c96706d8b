"""Pods and nodes as the engine sees them: the records every plugin reads, immutable after parsing.

`placer.engine.parsing` builds them from Kubernetes JSON (requests summed the way kube-scheduler
sums them, selectors and tolerations validated, images normalised), so that a scheduling cycle
only compares prepared values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from placer.engine.pod_claims import NO_CLAIMS, PodClaim
from placer.engine.relations import NONE, ControllerRef, PodRelations, SpreadConstraint
from placer.engine.volumes import NO_VOLUMES, PodVolumes

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "ExtendedContainer",
    "NodeInfo",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectError",
    "PodInfo",
    "Taint",
    "Toleration",
    "go_int",
    "is_scalar_resource",
]

# kube-scheduler scores a container without cpu/memory requests as if it asked for these.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
DEFAULT_REQUESTS = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SUPPORTED_EFFECTS = 'supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"'
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")


_GO_INT = re.compile(r"^[+-]?[0-9]+$")


def go_int(value: str) -> int | None:
    """A label value as Go's `strconv.ParseInt(v, 10, 64)` reads it for Gt/Lt; None if it cannot."""
    if not _GO_INT.match(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


class ObjectError(ValueError):
    """An object the engine cannot use at all; `path` names the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """kube's `Toleration.ToleratesTaint`. The numeric operators Gt and Lt (v1.35+) tolerate
        nothing: kube-scheduler v1.36 compares them only behind its TaintTolerationComparisonOperators
        gate, alpha and off by default."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One requirement, validated; matched against node columns in `placer.engine.node_selectors`."""

    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class ExtendedContainer:
    """A container with extended resource requests, as kube's `createRequestsAndMappings` reads it."""

    index: int  # in initContainers + containers
    name: str
    request_names: tuple[str, ...]  # every name in resources.requests, sorted (the request's index)
    requests: Mapping[str, int]  # its extended resources' requests
    long_lived: bool  # a container or a sidecar (not a plain init container)


@dataclass(slots=True)
class PodInfo:
    """What scheduling needs of a pod; `requests` hold cpu in millicores, the rest in units."""

    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    priority: int = 0
    # spec.priority was given (the API server's admission always sets it; a hand-written pod may
    # name only a PriorityClass, resolved by `placer.engine.kinds.resolve_priority`)
    priority_set: bool = False
    priority_class_name: str = ""
    preemption_policy: str = ""  # PreemptLowerPriority, Never, or "" (unset: its PriorityClass's, else preempts)
    start_time: float = 0.0  # status.startTime (0: not started), for preemption's choice of node
    nominated_node: str = ""  # status.nominatedNodeName
    created: float = 0.0
    phase: str = ""
    deleting: bool = False
    # status.conditions: DisruptionTarget True with reason PreemptionByScheduler (a scheduler's
    # victim: kube's podTerminatingByPreemption, once it is deleting)
    preempted: bool = False
    # what the pod holds on its node (kube's PodInfo.CalculateResource: pod-level requests, and the
    # larger of spec and status while an in-place resize is under way)
    requests: dict[str, int] = field(default_factory=dict)
    # what it asks for from its spec alone (kube's PreFilter), only where that differs from `requests`
    spec_requests: dict[str, int] | None = None
    # cpu and memory with kube-scheduler's defaults for containers that request none: as counted on
    # a node (NonZeroRequested), and as the incoming pod's score request (resource_allocation.go),
    # which differ only for pods with pod-level requests
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    score_cpu: int = 0
    score_memory: int = 0
    host_ports: tuple[tuple[str, str, int], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    images: tuple[str, ...] = ()  # containers' and init containers' images, then `image` volumes'
    container_count: int = 0
    # node features the pod needs in `status.declaredFeatures` (placer.engine.node_features), sorted
    required_features: tuple[str, ...] = ()
    # inter-pod (anti-)affinity terms (placer.engine.relations), NONE for pods without any
    relations: PodRelations = NONE
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    controller: ControllerRef | None = None
    # claims, inline disks and inline CSI volumes (placer.engine.volumes), NO_VOLUMES for most pods
    volumes: PodVolumes = NO_VOLUMES
    # spec.resourceClaims with their status entries (placer.engine.pod_claims), NO_CLAIMS for most pods
    resource_claims: tuple[PodClaim, ...] = NO_CLAIMS
    # the containers asking for extended resources, for a DeviceClass to back them
    # (placer.engine.extended_resources): init containers then containers, () for most pods
    extended_containers: tuple[ExtendedContainer, ...] = ()
    # spec.schedulingGroup.podGroupName: the `scheduling.k8s.io` PodGroup the pod belongs to
    # (placer.engine.groups), "" for most pods
    pod_group_name: str = ""
    error: str | None = None
    resource_version: str = ""
    #: "namespace/name", made once: the engine asks it of every pod it counts in and out
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Succeeded and Failed pods hold no resources, as in kube-scheduler's cache."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def fit_requests(self) -> dict[str, int]:
        """The requests NodeResourcesFit checks for this pod as the one being placed."""
        return self.requests if self.spec_requests is None else self.spec_requests


@dataclass(slots=True)
class NodeInfo:
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = False
    # the Ready condition is Unknown (the kubelet stopped posting): the node lifecycle controller's
    # taint is then `node.kubernetes.io/unreachable`, else (False, missing) `node.kubernetes.io/not-ready`
    unreachable: bool = False
    allocatable: dict[str, int] = field(default_factory=dict)
    # (names, sizeBytes) for each image in status.images
    images: tuple[tuple[tuple[str, ...], int], ...] = ()
    # metadata.annotations, for plugins that read them (plugin packages): a copy of the object's
    # map, compared with the rest, so an annotation change is a node update as in kube-scheduler
    annotations: dict[str, str] = field(default_factory=dict)
    # status.declaredFeatures: what the kubelet implements (NodeDeclaredFeatures)
    declared_features: frozenset[str] = frozenset()


def is_scalar_resource(name: str) -> bool:
    """Extended resources and huge pages: what kube's NodeInfo keeps as ScalarResources."""
    return "/" in name or name.startswith("hugepages-")
