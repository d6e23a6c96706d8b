"""Groups of pods scheduled as one unit (gang scheduling): the PodGroup kinds, who belongs to which
group, and when a group's pods may be tried at all.

Two APIs describe a group, and Placer reads both:

- the upstream `scheduling.k8s.io` PodGroup (kube v1.35+, behind the GenericWorkload and
  GangScheduling gates; `v1alpha2` in v1.36, `v1beta1` from v1.37): `spec.schedulingPolicy` is
  either `gang: {minCount}` or `basic: {}`; a pod joins it with `spec.schedulingGroup.podGroupName`
  (same namespace). Its status carries the condition `PodGroupScheduled` (v1alpha2) or
  `PodGroupInitiallyScheduled` (v1beta1);
- scheduler-plugins' PodGroup (`scheduling.x-k8s.io/v1alpha1`, the Coscheduling plugin's CRD, what
  Kubeflow's trainer, the MPI operator, KubeRay and LeaderWorkerSet emit today): always a gang of
  `spec.minMember`; a pod joins it with the label `scheduling.x-k8s.io/pod-group: NAME`. Its
  `status.phase` belongs to its own controller, Placer leaves it alone.

Both are filed in the engine's `Catalog` like any other kind (`GROUP_KINDS`; the two upstream
versions share one cache, the scheduler-plugins kind has its own), and read the same way
afterwards: a `PodGroupInfo` with a policy and a minimum count.

The waiting rules are kube's `GangScheduling` PreEnqueue: a member waits (it is not attempted and
no failure is reported) until its PodGroup exists and, for a gang, until at least `minCount` of the
group's pods exist (bound, assumed or pending) — `waiting_reason`. Deciding a group is
`placer.engine.gang`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer.engine.catalog import Catalog, Kind
from placer.engine.cluster import ClusterState, PodTracker
from placer.engine.fields import FieldError, is_mapping, mapping, section, sequence
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import object_meta
from placer.engine.pod_claims import PodClaim, parse_group_claims

__all__ = [
    "BASIC",
    "COSCHEDULING_KIND",
    "COSCHEDULING_LABEL",
    "GANG",
    "GROUP_KINDS",
    "POD_GROUP_KIND",
    "POD_GROUP_V1ALPHA2",
    "POD_GROUP_V1BETA1",
    "SCHEDULER_PLUGINS_POD_GROUP",
    "TOPOLOGY_KEY_ANNOTATION",
    "WAIT_FOR_GROUP",
    "WAIT_FOR_QUORUM",
    "GroupCondition",
    "GroupRef",
    "PodGroupInfo",
    "ScheduledMembers",
    "group_kind",
    "group_of",
    "lookup",
    "parse_scheduler_plugins_group",
    "pending_by_group",
    "scheduled_members",
    "waiting_reason",
]

GANG = "gang"
BASIC = "basic"

#: the catalog's caches: upstream PodGroups (either version) and scheduler-plugins' PodGroups
POD_GROUP_KIND = "PodGroup"
COSCHEDULING_KIND = "PodGroup.scheduling.x-k8s.io"
#: scheduler-plugins' membership label (`v1alpha1.PodGroupLabel`)
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
#: Placer's annotation on a scheduler-plugins PodGroup: the node label whose one domain (rack,
#: block) must hold all its pods, as upstream's `spec.schedulingConstraints.topology[0].key`
TOPOLOGY_KEY_ANNOTATION = "placer.dev/topology-key"

#: the scheduled condition's type by upstream version (kube renamed it for v1beta1)
CONDITION_TYPES = {
    "scheduling.k8s.io/v1alpha2": "PodGroupScheduled",
    "scheduling.k8s.io/v1beta1": "PodGroupInitiallyScheduled",
}

#: spec.disruptionMode's values by upstream version, the default first (v1beta1 renamed them)
DISRUPTION_MODES = {
    "scheduling.k8s.io/v1alpha2": ("Pod", "PodGroup"),
    "scheduling.k8s.io/v1beta1": ("Single", "All"),
}

# kube's GangScheduling PreEnqueue messages (its "pods's" included): why a member is not attempted
WAIT_FOR_GROUP = 'waiting for pods\'s pod group "{name}" to appear in scheduling queue'
WAIT_FOR_QUORUM = "waiting for minCount pods from a gang to appear in scheduling queue"


@dataclass(frozen=True, slots=True)
class GroupRef:
    """Which group a pod names: the catalog kind (`POD_GROUP_KIND` or `COSCHEDULING_KIND`), and the
    group's namespace (the pod's) and name."""

    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class GroupCondition:
    """One entry of an upstream PodGroup's `status.conditions` (a metav1.Condition)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int = 0

    def as_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {"type": self.type, "status": self.status, "reason": self.reason,
                                  "message": self.message, "lastTransitionTime": self.last_transition_time}
        if self.observed_generation:
            result["observedGeneration"] = self.observed_generation
        return result


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """A PodGroup of either API, as the engine reads it."""

    namespace: str
    name: str
    api_version: str  # "scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1", "scheduling.x-k8s.io/v1alpha1"
    policy: str = GANG  # GANG or BASIC
    min_count: int = 0  # gang: spec.schedulingPolicy.gang.minCount / spec.minMember; basic: 0
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    #: spec.priority, and spec.priorityClassName (upstream, WorkloadAwarePreemption): the group's
    #: priority when it preempts or is preempted as a whole
    priority: int | None = None
    priority_class_name: str = ""
    #: spec.disruptionMode as written: "Pod" / "PodGroup" (v1alpha2), "Single" / "All" (v1beta1)
    disruption_mode: str = "Pod"
    #: spec.resourceClaims (DRAWorkloadResourceClaims): claims allocated once for the whole group,
    #: reserved for the PodGroup; a template's claim is named in status.resourceClaimStatuses
    resource_claims: tuple[PodClaim, ...] = ()
    #: spec.preemptionPolicy (v1beta1): "Never" = the group never preempts
    preemption_policy: str = ""
    #: scheduler-plugins' spec.scheduleTimeoutSeconds (how long its members may wait on Permit)
    schedule_timeout: int | None = None
    #: spec.schedulingConstraints.topology[0].key (TopologyAwareWorkloadScheduling), or
    #: scheduler-plugins' annotation `placer.dev/topology-key`: all its pods in one domain of it;
    #: `constrained`: spec.schedulingConstraints is set at all (kube then skips pod-by-pod preemption)
    topology_key: str = ""
    constrained: bool = False
    #: upstream status.conditions (scheduler-plugins groups: empty); `phase` is scheduler-plugins'
    conditions: tuple[GroupCondition, ...] = ()
    phase: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang(self) -> bool:
        return self.policy == GANG

    @property
    def quorum(self) -> int:
        """How many of its pods must be scheduled (bound or assumed) at once: minCount for a gang,
        1 for a basic group (any pod placed places it)."""
        return max(self.min_count, 1) if self.gang else 1

    @property
    def upstream(self) -> bool:
        return self.api_version.startswith("scheduling.k8s.io/")

    @property
    def disrupted_whole(self) -> bool:
        """Its pods are preempted together, never one by one (disruptionMode PodGroup / All)."""
        return self.disruption_mode in ("PodGroup", "All")

    @property
    def condition_type(self) -> str | None:
        """The status condition the scheduler writes (None: scheduler-plugins' groups have none)."""
        return CONDITION_TYPES.get(self.api_version)

    def condition(self) -> GroupCondition | None:
        kind = self.condition_type
        return next((c for c in self.conditions if c.type == kind), None) if kind else None

    @property
    def scheduled(self) -> bool:
        """The group was placed once (its condition is True: kube never turns it back to False)."""
        condition = self.condition()
        return condition is not None and condition.status == "True"


def _int(value: Any, path: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectError(path, f"Invalid value: {value!r}: must be an integer")
    if minimum is not None and value < minimum:
        raise ObjectError(path, f"Invalid value: {value}: must be greater than or equal to {minimum}")
    return value


def _conditions(status: Mapping[str, Any]) -> tuple[GroupCondition, ...]:
    found: list[GroupCondition] = []
    try:
        items = sequence(status.get("conditions"), "status.conditions")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    for raw in items:
        if not is_mapping(raw) or not isinstance(raw.get("type"), str):
            continue  # a status the scheduler rewrites anyway; nothing to schedule on
        generation = raw.get("observedGeneration")
        found.append(GroupCondition(
            raw["type"], str(raw.get("status") or ""), str(raw.get("reason") or ""), str(raw.get("message") or ""),
            str(raw.get("lastTransitionTime") or ""), generation if isinstance(generation, int) else 0,
        ))
    return tuple(found)


def _meta_numbers(meta: Mapping[str, Any]) -> tuple[str, int, str]:
    generation = meta.get("generation")
    return (str(meta.get("uid") or ""), generation if isinstance(generation, int) else 0,
            str(meta.get("resourceVersion") or ""))


def _upstream(api_version: str) -> Any:
    """The parser of one upstream version (both read alike; the version names the condition)."""

    def parse(obj: Mapping[str, Any]) -> PodGroupInfo:
        namespace, name, meta = object_meta(obj, "PodGroup", namespaced=True)
        spec = section(obj, "spec")
        try:
            policy = mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
        except FieldError as error:
            raise ObjectError(error.path, error.message) from None
        chosen = [key for key in (BASIC, GANG) if policy.get(key) is not None]
        if len(chosen) != 1:
            raise ObjectError("spec.schedulingPolicy", "Invalid value: exactly one of basic and gang must be set")
        min_count = 0
        if chosen[0] == GANG:
            gang = policy[GANG]
            if not is_mapping(gang):
                raise ObjectError("spec.schedulingPolicy.gang", "must be an object")
            if gang.get("minCount") is None:
                raise ObjectError("spec.schedulingPolicy.gang.minCount", "Required value")
            min_count = _int(gang["minCount"], "spec.schedulingPolicy.gang.minCount", 1)
        priority = spec.get("priority")
        modes = DISRUPTION_MODES[api_version]
        mode = spec.get("disruptionMode") or modes[0]
        if mode not in modes:
            supported = "supported values: " + ", ".join(f'"{m}"' for m in modes)
            raise ObjectError("spec.disruptionMode", f'Unsupported value: "{mode}": {supported}')
        policy_value = spec.get("preemptionPolicy") or ""
        if policy_value not in ("", "Never", "PreemptLowerPriority"):
            supported = 'supported values: "Never", "PreemptLowerPriority"'
            raise ObjectError("spec.preemptionPolicy", f'Unsupported value: "{policy_value}": {supported}')
        return PodGroupInfo(
            namespace, name, api_version, chosen[0], min_count, *_meta_numbers(meta),
            priority=None if priority is None else _int(priority, "spec.priority"),
            priority_class_name=str(spec.get("priorityClassName") or ""),
            disruption_mode=mode,
            resource_claims=_group_claims(spec, section(obj, "status")),
            preemption_policy=policy_value,
            conditions=_conditions(section(obj, "status")),
            topology_key=_topology_key(spec),
            constrained=spec.get("schedulingConstraints") is not None,
        )

    return parse


def _topology_key(spec: Mapping[str, Any]) -> str:
    """`spec.schedulingConstraints.topology[0].key` ("" when unset), validated as the API server
    does (`+k8s:maxItems=1`, the key required)."""
    try:
        constraints = mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
        topology = sequence(constraints.get("topology"), "spec.schedulingConstraints.topology")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    if len(topology) > 1:
        raise ObjectError("spec.schedulingConstraints.topology",
                          f"Too many: {len(topology)}: must have at most 1 item")
    if not topology:
        return ""
    first = topology[0]
    key = first.get("key") if is_mapping(first) else None
    if not key or not isinstance(key, str):
        raise ObjectError("spec.schedulingConstraints.topology[0].key", "Required value")
    return key


def _group_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    try:
        return parse_group_claims(spec.get("resourceClaims"), status.get("resourceClaimStatuses"))
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None


def parse_scheduler_plugins_group(obj: Mapping[str, Any]) -> PodGroupInfo:
    """scheduler-plugins' PodGroup: a gang of `spec.minMember` (0 when unset: no quorum)."""
    namespace, name, meta = object_meta(obj, "PodGroup", namespaced=True)
    spec, status = section(obj, "spec"), section(obj, "status")
    members = spec.get("minMember")
    timeout = spec.get("scheduleTimeoutSeconds")
    return PodGroupInfo(
        namespace, name, "scheduling.x-k8s.io/v1alpha1", GANG,
        0 if members is None else _int(members, "spec.minMember", 0), *_meta_numbers(meta),
        schedule_timeout=None if timeout is None else _int(timeout, "spec.scheduleTimeoutSeconds", 0),
        phase=str(status.get("phase") or ""),
        topology_key=_annotated_topology_key(meta),
    )


def _annotated_topology_key(meta: Mapping[str, Any]) -> str:
    """scheduler-plugins' PodGroup has no topology field: Placer reads `TOPOLOGY_KEY_ANNOTATION`."""
    annotations = meta.get("annotations")
    key = annotations.get(TOPOLOGY_KEY_ANNOTATION) if is_mapping(annotations) else None
    return key if isinstance(key, str) else ""


POD_GROUP_V1BETA1 = Kind(POD_GROUP_KIND, "scheduling.k8s.io/v1beta1", "podgroups", True,
                         _upstream("scheduling.k8s.io/v1beta1"))
POD_GROUP_V1ALPHA2 = Kind(POD_GROUP_KIND, "scheduling.k8s.io/v1alpha2", "podgroups", True,
                          _upstream("scheduling.k8s.io/v1alpha2"))
SCHEDULER_PLUGINS_POD_GROUP = Kind(COSCHEDULING_KIND, "scheduling.x-k8s.io/v1alpha1", "podgroups", True,
                                   parse_scheduler_plugins_group)
#: every PodGroup kind, the upstream versions in the order discovery prefers them (v1beta1 where
#: served, else v1alpha2). Not in `placer.engine.kinds.KINDS`: the operator must find which
#: upstream version its API server serves before it watches one (see docs/gang.md).
GROUP_KINDS: tuple[Kind, ...] = (POD_GROUP_V1BETA1, POD_GROUP_V1ALPHA2, SCHEDULER_PLUGINS_POD_GROUP)


def group_kind(api_version: Any, kind: Any) -> Kind | None:
    """The PodGroup kind of a document's apiVersion and kind; None when it is no PodGroup we read."""
    if kind != "PodGroup":
        return None
    return next((k for k in GROUP_KINDS if k.api_version == api_version), None)


def group_of(pod: PodInfo) -> GroupRef | None:
    """The group `pod` names: `spec.schedulingGroup.podGroupName` (upstream), else the
    scheduler-plugins label; None for a pod of no group."""
    if pod.pod_group_name:
        return GroupRef(POD_GROUP_KIND, pod.namespace, pod.pod_group_name)
    name = pod.labels.get(COSCHEDULING_LABEL) if pod.labels else None
    if name:
        return GroupRef(COSCHEDULING_KIND, pod.namespace, name)
    return None


def lookup(catalog: Catalog, ref: GroupRef) -> PodGroupInfo | None:
    """The PodGroup a ref names, None while it does not exist."""
    return catalog.get(ref.kind, ref.name, ref.namespace)


class ScheduledMembers(PodTracker):
    """How many pods of each group are counted on nodes (bound or assumed): kube's
    `ScheduledPodsCount`, kept in step with the cluster instead of counted per cycle."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self.counts: Counter[GroupRef] = Counter()
        self._by_slot: dict[int, Counter[GroupRef]] = {}

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        ref = group_of(pod)
        if ref is None:
            return
        self.counts[ref] += sign
        here = self._by_slot.setdefault(slot, Counter())
        here[ref] += sign
        if not here[ref]:
            del here[ref]
            if self.counts[ref] == 0:
                del self.counts[ref]

    def clear_slot(self, slot: int) -> None:
        for ref, count in self._by_slot.pop(slot, Counter()).items():
            self.counts[ref] -= count
            if not self.counts[ref]:
                del self.counts[ref]

    def count(self, ref: GroupRef) -> int:
        return self.counts.get(ref, 0)


def scheduled_members(cluster: ClusterState, ref: GroupRef) -> int:
    return cluster.tracker(ScheduledMembers).count(ref)


def waiting_reason(group: PodGroupInfo | None, ref: GroupRef, members: int) -> str | None:
    """Why the pods of a group are not attempted yet (kube's GangScheduling PreEnqueue), None when
    they may be: the group does not exist, or it is a gang with fewer than minCount pods in all
    (`members`: bound, assumed and pending)."""
    if group is None:
        return WAIT_FOR_GROUP.format(name=ref.name)
    if group.gang and members < group.min_count:
        return WAIT_FOR_QUORUM
    return None


def pending_by_group(pods: Sequence[PodInfo]) -> dict[GroupRef, list[PodInfo]]:
    """The pending pods of each group, in the order given (queue order)."""
    groups: dict[GroupRef, list[PodInfo]] = {}
    for pod in pods:
        ref = group_of(pod)
        if ref is not None:
            groups.setdefault(ref, []).append(pod)
    return groups
