"""A kubelet's refusal of a pod, and counting its node as that kubelet does until the views meet.

A kubelet admits a pod bound to its node only if it fits what the kubelet itself counts there (kube's
`pkg/kubelet/lifecycle/predicate.go`: the scheduler's `AdmissionCheck` — resources, node affinity,
node name, host ports — plus NoExecute taints, the OS, device and topology managers...). When it
refuses, it ends the pod (`rejectPod`): phase `Failed`, `status.reason` the first failure's name
(`OutOfcpu`, `OutOfmemory`, `OutOfpods`, `OutOf<resource>`, `NodeAffinity`, `NodePorts`,
`TaintToleration`, `UnexpectedAdmissionError`, `TopologyAffinityError`, ...) and `status.message`
`Pod was rejected: <what failed>`, for a resource `Node didn't have enough resource: cpu, requested:
500, used: 3600, capacity: 4000` (cpu in millicores, memory and storage in bytes, pods a count).

A refusal means the kubelet counted something Placer's view of the node lacks: pods another
scheduler bound a moment ago whose watch events have not arrived, pods that ended in the API but still
run on the node, an allocatable or label the watch has not shown yet. A controller's replacement pod
would go to the same node and be refused again. So the node is counted as the kubelet counts it
(`withhold`):

- a resource the kubelet lacked: what the kubelet left free (capacity - used) is all Placer leaves free
  there, the difference withheld (`ClusterState.withhold`) until pods arriving on the node in the
  watch explain it, or its Node object changes, or the operator releases it after a settle time;
- `NodePorts`: the refused pod's host ports are withheld there likewise;
- a reason about the node's state (`NODE_STATE_REASONS`: its labels or taints as the kubelet sees
  them, a shutdown, pressure, its devices): the node differs from what Placer sees; it is held (as if
  cordoned) until its Node object changes or the settle time passes;
- a reason about the pod on that node (its OS label, sysctls, AppArmor, the topology manager's
  alignment, a feature the node lacks...): nothing is withheld (the node is as Placer sees it; another
  pod may go there).

Pure: the operator reads the pod's status, calls `withhold` and releases after its settle time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placer.engine.cluster import ClusterState
from placer.engine.objects import PodInfo

__all__ = [
    "NODE_STATE_REASONS",
    "REJECTED_PREFIX",
    "Rejection",
    "Withholding",
    "rejection_of",
    "release",
    "withhold",
]

#: what the kubelet's `rejectPod` puts before its message: an admission refusal, not an eviction or a
#: container that failed
REJECTED_PREFIX = "Pod was rejected: "
_INSUFFICIENT = re.compile(
    r"^Node didn't have enough resource: (?P<resource>[^,\s]+), requested: (?P<requested>-?\d+), "
    r"used: (?P<used>-?\d+), capacity: (?P<capacity>-?\d+)"
)
#: the kubelet's predicate name for host ports (kube's `nodeports.Name`)
NODE_PORTS = "NodePorts"
#: refusals that say the node's state differs from what the API shows Placer (kube's predicate names
#: NodeAffinity, NodeName, TaintToleration; the shutdown manager's, the eviction manager's (pressure),
#: the device manager's and the volume manager's reasons; the kubelet not knowing its own node)
NODE_STATE_REASONS = frozenset({
    "NodeAffinity", "NodeName", "TaintToleration", "NodeShutdown", "Evicted", "InvalidNodeInfo",
    "UnexpectedAdmissionError", "VolumeAttachmentLimitExceeded", "UnknownReason", "UnexpectedPredicateFailureType",
})


@dataclass(frozen=True, slots=True)
class Rejection:
    """A kubelet's refusal as its pod's status records it."""

    reason: str  # status.reason: OutOfcpu, NodeAffinity, UnexpectedAdmissionError, ...
    message: str  # what failed, without "Pod was rejected: "
    resource: str = ""  # the resource the kubelet lacked ("" for any other reason)
    requested: int = 0
    used: int = 0
    capacity: int = 0


def rejection_of(status: Any) -> Rejection | None:
    """The kubelet's admission refusal a pod's `status` records; None for anything else (a running
    pod, a pod evicted or ended by its containers, a malformed status)."""
    if not isinstance(status, Mapping) or status.get("phase") != "Failed":
        return None
    reason, message = status.get("reason"), status.get("message")
    if not isinstance(reason, str) or not reason or not isinstance(message, str):
        return None
    if not message.startswith(REJECTED_PREFIX):
        return None
    message = message[len(REJECTED_PREFIX):]
    found = _INSUFFICIENT.match(message)
    if found is None or not reason.startswith("OutOf"):
        return Rejection(reason, message)
    return Rejection(reason, message, found["resource"], int(found["requested"]), int(found["used"]),
                     int(found["capacity"]))


@dataclass(frozen=True, slots=True)
class Withholding:
    """What `withhold` did on a node: `kind` "amounts" (resources, ports) or "node" (held whole),
    with the serial `release` needs; `amounts` and `ports` what was withheld."""

    node: str
    kind: str
    serial: int
    amounts: Mapping[str, int]
    ports: tuple[tuple[str, str, int], ...] = ()


def _unexplained(cluster: ClusterState, pod: PodInfo, node: str, rejection: Rejection) -> int:
    """How much more of the resource the kubelet counts as taken than Placer does: what Placer
    leaves free there less what the kubelet left free, the refused pod not counted."""
    resource = rejection.resource
    ours = cluster.own_requested(node, resource)
    record = cluster.pods.get(pod.key)
    if record is not None and record.node == node:  # the refused pod, if still counted, is not in `used`
        ours -= 1 if resource == "pods" else record.pod.requests.get(resource, 0)
    info = cluster.node(node)
    allocatable = 0 if info is None else info.allocatable.get(resource, 0)
    return (allocatable - ours) - (rejection.capacity - rejection.used)


def withhold(cluster: ClusterState, pod: PodInfo, node: str, rejection: Rejection) -> Withholding | None:
    """Count the node as the kubelet that refused `pod` counts it (the module's docstring); None
    when Placer's view already explains the refusal (e.g. the other scheduler's pod is in it), or
    the refusal is about the pod rather than the node."""
    if cluster.node(node) is None:
        return None
    if rejection.resource:
        extra = _unexplained(cluster, pod, node, rejection)
        withheld = cluster.withheld.get(node)
        if extra <= 0:
            if withheld is not None and rejection.resource in withheld.amounts:
                cluster.withhold(node, {rejection.resource: 0})  # that part is explained now
            return None
        serial = cluster.withhold(node, {rejection.resource: extra})
        return Withholding(node, "amounts", serial, {rejection.resource: extra})
    if rejection.reason == NODE_PORTS:
        if not pod.host_ports:
            return None
        serial = cluster.withhold(node, {}, pod.host_ports)
        return Withholding(node, "amounts", serial, {}, pod.host_ports)
    if rejection.reason in NODE_STATE_REASONS:
        return Withholding(node, "node", cluster.hold_node(node), {})
    return None


def release(cluster: ClusterState, withholding: Withholding) -> bool:
    """The settle time passed: stop counting what `withhold` withheld (unless a later refusal
    replaced it). True when the cluster changed."""
    if withholding.kind == "node":
        return cluster.release_node(withholding.node, withholding.serial)
    return cluster.release_withheld(withholding.node, withholding.serial)
