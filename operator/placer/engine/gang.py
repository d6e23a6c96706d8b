"""Deciding a group of pods as one unit (kube v1.36's pod group scheduling cycle): pure, a cluster,
a profile and the group's pending pods in, a `GroupDecision` out.

Why a unit: a gang placed pod by pod holds nodes while its last pods wait for room, and two gangs
doing so deadlock each other. Here every pending pod of the group is tried on one snapshot of the
cluster — filtered, scored and assumed in turn, highest priority first, then in queue order, each
counting against its node before the next (kube's `podGroupSchedulingDefaultAlgorithm`):

- enough fit — at least `minCount` of the group scheduled, counting its pods already bound or
  assumed (kube's Permit reads `ScheduledPodsCount`), and at least one of them new: the group is
  placed; its pods that fit stay assumed for the caller to bind, the others stay pending with
  their own reasons. A `basic` group is placed as soon as one pod fits (each pod is scheduled on
  its own);
- too few fit: every assumption is undone (nothing is held), each pod that fitted reads kube's
  `pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more
  plugins asked to wait and no plugin rejected pod`, each that
  did not its own `0/N nodes are available: ...`;
- with `DefaultPreemption` in the profile, a gang that does not fit may preempt as a whole (kube's
  workload-aware preemption, KEP-5710): every pod of lower priority than the gang's is taken off
  at once; if the gang then fits, the victims are reprieved one by one, most important first
  (those whose PodDisruptionBudget would break before the others), each kept when the gang still
  fits without evicting it. The rest are the victims: evicted all, or none when the gang does not
  fit even with every one gone. The pods of a PodGroup with `disruptionMode: PodGroup` are
  victims together (v1beta1: `disruptionMode: All`). No pod of a gang preempts on its own.

With a PlacementGenerate plugin in the profile, or where the cluster shows kube's
TopologyAwareWorkloadScheduling on (a group with a topology key; any PodGroup with
`schedulingConstraints`), the group is tried in each placement — a domain of the key — and the best
kept (`placer.engine.placement`, docs/gang.md); a group with a key does not preempt.

`GroupDecision.condition` is what the group's status condition says afterwards, and
`condition_update` the status the operator writes (kube's `updatePodGroupCondition`: a True
condition is never turned back to False).
"""

from __future__ import annotations

import contextlib
import enum
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.framework import Preemption
from placer.engine.groups import (
    GroupCondition,
    GroupRef,
    PodGroupInfo,
    group_of,
    lookup,
    scheduled_members,
    waiting_reason,
)
from placer.engine.objects import PodInfo
from placer.engine.placement import (
    GROUP_UNSCHEDULABLE,
    WAP_NOT_SUPPORTED,
    Attempt,
    GroupRun,
    PlacementTry,
    generator_of,
    place_group,
    refused_preemption,
)
from placer.engine.profile import Profile
from placer.engine.queue import queue_order
from placer.engine.runtime import Decision, Scheduler

__all__ = [
    "GANG_WAITING",
    "GROUP_UNSCHEDULABLE",
    "MEMBER_UNSCHEDULABLE",
    "GroupDecision",
    "Outcome",
    "condition_update",
    "decide_group",
    "group_priority",
]

# kube's words: the GangScheduling Permit's wait, what kube's RunPermitPlugins appends to a Wait, and
# what a pod that fitted in a gang that did not reads (`NewStatus(Unschedulable,
# permit.Message()).WithError(errPodGroupUnschedulable)`, measured on kube-scheduler v1.36.2)
GANG_WAITING = "waiting for minCount pods from a gang to be scheduled"
PERMIT_WAITING = "one or more plugins asked to wait and no plugin rejected pod"
MEMBER_UNSCHEDULABLE = f"{GROUP_UNSCHEDULABLE}, {GANG_WAITING}, {PERMIT_WAITING}"
MIXED_SCHEDULERS = 'all pods in a single pod group should have the same .spec.schedulerName set, got: "{}" and "{}"'
# kube's workload-aware preemption (PodGroupEvaluator) and the preemption plugin's shared reasons
NO_VICTIMS = "No preemption victims found for incoming preemptor"
NEVER = "not eligible due to preemptionPolicy=Never."
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# kube's DefaultPreemption PostFilter for a pod of a group when the WorkloadAwarePreemption gate is on
# (a server that serves PodGroup `spec.priority`): the group preempts as a whole, never its pods
WAP_ENABLED = "preemption: not eligible due to workload aware preemption enabled"


class Outcome(enum.Enum):
    WAITING = "waiting"  # not attempted: the group is missing or short of minCount pods
    PLACED = "placed"  # enough fit: those that fit are assumed, to be bound
    UNSCHEDULABLE = "unschedulable"  # too few fit: nothing held
    PREEMPTING = "preempting"  # it fits once `victims` are evicted (nothing assumed)
    ERROR = "error"  # the group cannot be decided (its pods name different schedulers)


@dataclass(slots=True)
class GroupDecision:
    """What became of a group's pending pods."""

    ref: GroupRef
    group: PodGroupInfo | None
    outcome: Outcome
    #: the pods tried, in the order tried, and each one's decision (same order)
    pods: list[PodInfo] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    #: why the group's pods wait (WAITING), or the group condition's message
    message: str = ""
    #: PREEMPTING: every pod to evict for the gang (each decision's `preemption` lists those on its node)
    victims: tuple[PodInfo, ...] = ()
    #: pods of the group already bound or assumed before this decision
    scheduled_before: int = 0
    #: with a PlacementGenerate plugin in the profile: every placement tried (in order), and the
    #: one chosen (its domain; None when the group fitted in none)
    placements: list[PlacementTry] = field(default_factory=list)
    placement: str | None = None
    #: ERROR inside the group's cycle (a placement plugin's), which kube writes as SchedulerError
    cycle_error: bool = False

    @property
    def placed(self) -> bool:
        return self.outcome is Outcome.PLACED

    @property
    def waiting(self) -> bool:
        return self.outcome is Outcome.WAITING

    @property
    def condition(self) -> tuple[str, str, str] | None:
        """(status, reason, message) of the group's scheduled condition after this decision (kube's
        `submitPodGroupAlgorithmResult`); None when it is not to be touched (waiting, error)."""
        if self.outcome is Outcome.PLACED:
            return "True", "Scheduled", self.message
        if self.outcome in (Outcome.UNSCHEDULABLE, Outcome.PREEMPTING):
            return "False", "Unschedulable", self.message
        if self.cycle_error:
            return "False", "SchedulerError", self.message
        return None

    @property
    def now_placed(self) -> bool:
        """The group counts as placed after this decision: placed now, or earlier (its condition
        True, or already `minCount` of its pods scheduled, one for a basic group — kube never turns
        the condition back to False)."""
        if self.outcome is Outcome.PLACED:
            return True
        group = self.group
        if group is None:
            return False
        return group.scheduled or self.scheduled_before >= group.quorum


# ----------------------------------------------------------------- deciding


_BARE: weakref.WeakKeyDictionary[Profile, Profile] = weakref.WeakKeyDictionary()


def _without_post_filters(profile: Profile) -> Profile:
    """The profile with no PostFilter plugins: a gang's pods never preempt one by one."""
    if not profile.post_filters:
        return profile
    bare = _BARE.get(profile)
    if bare is None:
        bare = _BARE[profile] = replace(profile, post_filters=())
    return bare


def _preempts(profile: Profile) -> bool:
    return any(plugin.name == "DefaultPreemption" for plugin in profile.post_filters)


def decide_group(
    scheduler: Scheduler,
    profile: Profile,
    cluster: ClusterState,
    ref: GroupRef,
    pods: Sequence[PodInfo],
    *,
    top: int = 3,
    members: int | None = None,
) -> GroupDecision:
    """Decide the pending `pods` of the group `ref` together, on `cluster` as it is now.

    `members`: how many pods the group has in all (bound, assumed, pending), for the minCount wait;
    by default those counted on nodes plus `pods`. PLACED leaves the pods that fit assumed (the
    caller binds them, or forgets them when a binding fails); every other outcome leaves the
    cluster as it found it (PREEMPTING: the caller evicts `victims`, then the pods go where their
    decisions say)."""
    group = lookup(cluster.catalog, ref)
    ordered = sorted(pods, key=queue_order)
    already = scheduled_members(cluster, ref)
    result = GroupDecision(ref, group, Outcome.WAITING, ordered, scheduled_before=already)
    why = waiting_reason(group, ref, already + len(ordered) if members is None else members)
    if why is not None or group is None:
        result.message = why or ""
        result.decisions = [Decision(pod.key, profile.name, None, why) for pod in ordered]
        return result
    names = [pod.scheduler_name for pod in ordered]
    other = next((name for name in names if name != names[0]), None)
    if other is not None:
        result.outcome = Outcome.ERROR
        result.message = MIXED_SCHEDULERS.format(other, names[0])
        result.decisions = [Decision(pod.key, profile.name, None, result.message) for pod in ordered]
        return result

    run = GroupRun(scheduler, profile, _without_post_filters(profile), cluster, ordered, top, group.quorum, already)
    generator = generator_of(profile, group, cluster.catalog)
    base = GROUP_UNSCHEDULABLE
    if generator is None:  # kube's default algorithm (TopologyAwareWorkloadScheduling off)
        tried = run.attempt()
        placed = tried.enough(already, group.quorum)
        if not placed:
            run.undo(tried)
        attempt: Attempt | None = tried
    else:  # kube's placement algorithm: the group tried in each placement, the best kept
        found = place_group(run, generator, group)
        result.placements, result.placement = found.tries, found.chosen
        if found.error:
            result.outcome, result.cycle_error = Outcome.ERROR, True
            result.message = found.message
            result.decisions = [Decision(pod.key, profile.name, None, found.message) for pod in ordered]
            return result
        attempt, placed = found.attempt, not found.message
        base = found.message or base
    if placed and attempt is not None:
        result.decisions = attempt.decisions
        result.outcome = Outcome.PLACED
        return result
    result.outcome = Outcome.UNSCHEDULABLE
    result.message = base
    whole = attempt is None
    if attempt is None:  # no placement at all: every pod gets the group's status
        attempt = Attempt([Decision(pod.key, profile.name, None, base) for pod in ordered], [])
    result.decisions = attempt.decisions
    for _, decision in attempt.fitted:  # nothing held: what fitted waits for the rest
        _unplaced(decision, MEMBER_UNSCHEDULABLE)
    if not _preempts(profile):
        return result
    if generator is not None and (group.topology_key or group.constrained):
        _constrained(result, attempt, group.topology_key != "", whole, profile, cluster)
        if group.topology_key:
            return result
    victims, why = _preemption(run, group, ref, cluster)
    if why is not None:
        result.message = f"{base}, {why}"
        for decision in attempt.decisions:
            if decision.message is not None and decision.message != MEMBER_UNSCHEDULABLE \
                    and not decision.constrained_refusal:
                if group.priority is not None:  # WorkloadAwarePreemption on: the pod's own PostFilter's words
                    decision.post_filter_message, decision.clears_nomination = WAP_ENABLED, False
                else:
                    decision.post_filter_message = f"preemption: {why}"
                    decision.clears_nomination = why != NEVER
        return result
    result.outcome = Outcome.PREEMPTING
    result.victims = tuple(record.pod for record in victims)
    with cluster.without(victims):
        final = run.attempt()
        run.undo(final)
    first = {d.pod: d.message for d in attempt.decisions if d.message != MEMBER_UNSCHEDULABLE}
    _attribute(final, victims, first)
    result.decisions = final.decisions
    return result


def _constrained(result: GroupDecision, attempt: Attempt, topology: bool, whole: bool, profile: Profile,
                 cluster: ClusterState) -> None:
    """A group with scheduling constraints, the gate on: its pods' own PostFilters are kube's
    DefaultPreemption refusing them (`refused_preemption`), and with a topology key workload-aware
    preemption refuses the group (its reason appended to the group's status, which pods without a
    result share)."""
    if topology:
        result.message = f"{result.message}, {WAP_NOT_SUPPORTED}"
    pods = {pod.key: pod for pod in result.pods}
    for decision in attempt.decisions:
        if whole:
            decision.message = result.message
        elif decision.message is not None and decision.message != MEMBER_UNSCHEDULABLE:
            decision.post_filter_message = refused_preemption(profile, pods[decision.pod], cluster)
            decision.constrained_refusal = True
            decision.clears_nomination = True


def _unplaced(decision: Decision, message: str) -> None:
    """A decision whose node was given back: the pod stays pending with `message`."""
    decision.node = None
    decision.message = message
    decision.top = []
    decision.weighed = None
    decision.feasible = 0
    decision.reservations = {}


def _attribute(final: Attempt, victims: Sequence[PodRecord], first: dict[str, str | None]) -> None:
    """Each placed pod's `preemption`: the victims on its node not listed for an earlier pod (those
    on nodes no pod of the gang takes go with the first), set when it has some or did not fit
    before; its message, why it did not fit before (None when it did)."""
    left = list(victims)
    placed = [decision for _, decision in final.fitted]
    for decision in placed:
        mine = [record for record in left if record.node == decision.node]
        if decision is placed[0]:
            others = {d.node for d in placed}
            mine += [record for record in left if record.node not in others]
        left = [record for record in left if record not in mine]
        decision.message = first.get(decision.pod)
        if mine or decision.message is not None:
            decision.preemption = Preemption(decision.node or "", tuple(record.pod for record in mine))


# ----------------------------------------------------------------- preemption for the gang


@dataclass(slots=True)
class _Victim:
    """Pods evicted together: one pod, or every pod of a PodGroup with disruptionMode PodGroup."""

    records: list[PodRecord]
    priority: int
    group: bool

    @property
    def earliest_start(self) -> float:
        return min((record.pod.start_time or math.inf) for record in self.records)

    def importance(self) -> tuple[int, int, int, float, str]:
        """kube's `moreImportantVictim`, most important first: higher priority, groups before single
        pods, bigger groups first, earlier start; then the first pod's key (kube leaves ties open)."""
        return (-self.priority, 0 if self.group else 1, -len(self.records) if self.group else 0,
                self.earliest_start, self.records[0].pod.key)


def group_priority(group: PodGroupInfo, pods: Sequence[PodInfo], catalog: Catalog, highest: bool = False) -> int:
    """A group's priority as preemption weighs it: `spec.priority`, else its `priorityClassName`'s
    value, else its pods' (the lowest — for a preemptor —, or with `highest`, the highest — for a
    victim —, so that a group never preempts, nor is preempted by, pods of its own priority)."""
    if group.priority is not None:
        return group.priority
    if group.priority_class_name:
        named = catalog.get("PriorityClass", group.priority_class_name)
        if named is not None:
            return int(named.value)
    priorities = [pod.priority for pod in pods]
    if not priorities:
        return 0
    return max(priorities) if highest else min(priorities)


def _victims(cluster: ClusterState, ref: GroupRef, below: int) -> list[_Victim]:
    """Every pod counted on a node with priority below `below`, but the gang's own, as victims."""
    groups: dict[GroupRef, list[PodRecord]] = {}
    found: list[_Victim] = []
    for record in cluster.pods.values():
        member = group_of(record.pod)
        if member == ref:
            continue
        if member is not None:
            info = lookup(cluster.catalog, member)
            if info is not None and info.upstream and info.disrupted_whole:
                groups.setdefault(member, []).append(record)
                continue
        if record.pod.priority < below:
            found.append(_Victim([record], record.pod.priority, False))
    for member, records in groups.items():
        info = lookup(cluster.catalog, member)
        assert info is not None
        priority = group_priority(info, [record.pod for record in records], cluster.catalog, highest=True)
        if priority < below:
            found.append(_Victim(sorted(records, key=lambda r: r.pod.key), priority, True))
    return found


def _split_by_budgets(victims: Sequence[_Victim], catalog: Catalog) -> tuple[list[_Victim], list[_Victim]]:
    """kube's `filterVictimsWithPDBViolation` over victims: one violating pod makes its victim
    violating; each budget's allowed disruptions spent in the order given."""
    budgets = [budget for _, _, budget in catalog.items("PodDisruptionBudget")]
    allowed = [budget.disruptions_allowed for budget in budgets]

    def violates(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, budget in enumerate(budgets):
            if budget.namespace != pod.namespace or budget.selector.empty or budget.selector.nothing:
                continue
            if not budget.selector.matches(pod.labels) or pod.name in budget.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[_Victim] = []
    fine: list[_Victim] = []
    for victim in victims:
        (violating if any(violates(record.pod) for record in victim.records) else fine).append(victim)
    return violating, fine


def _preemption(run: GroupRun, group: PodGroupInfo, ref: GroupRef, cluster: ClusterState) -> tuple[
    list[PodRecord], str | None
]:
    """kube's `PodGroupEvaluator.selectVictimsOnDomain` on the whole cluster: (the victims, None),
    or ([], why not)."""
    pods = run.pods
    if group.preemption_policy == "Never" or any(pod.preemption_policy == "Never" for pod in pods):
        return [], NEVER
    candidates = _victims(cluster, ref, group_priority(group, pods, cluster.catalog))
    if not candidates:
        return [], NO_VICTIMS
    everyone = [record for victim in candidates for record in victim.records]
    chosen: list[PodRecord] = []
    with cluster.without(everyone):
        if not run.fits():
            return [], NOT_HELPFUL
        ordered = sorted(candidates, key=_Victim.importance)
        violating, fine = _split_by_budgets(ordered, cluster.catalog)
        with contextlib.ExitStack() as spared:
            for victim in (*violating, *fine):
                back = contextlib.ExitStack()
                back.enter_context(cluster.with_pods(victim.records))
                if run.fits():
                    spared.enter_context(back)
                else:
                    back.close()
                    chosen.extend(victim.records)
    return chosen, None


# ----------------------------------------------------------------- the group's status


def condition_update(group: PodGroupInfo, decision: GroupDecision, now: str) -> list[dict[str, Any]] | None:
    """The group's `status.conditions` after `decision` (kube's `updatePodGroupCondition` with
    `SetStatusCondition`), None when nothing is to be written: no condition to set, a True one
    never turned back to False, or no change. `lastTransitionTime` moves only when the status does;
    `observedGeneration` is the group's generation."""
    kind = group.condition_type
    wanted = decision.condition
    if kind is None or wanted is None:
        return None
    status, reason, message = wanted
    existing = group.condition()
    if existing is not None and existing.status == "True" and status != "True":
        return None
    moved = existing is None or existing.status != status
    new = GroupCondition(kind, status, reason, message,
                         now if moved or existing is None else existing.last_transition_time, group.generation)
    if new == existing:
        return None
    conditions = [new if condition.type == kind else condition for condition in group.conditions]
    if existing is None:
        conditions.append(new)
    return [condition.as_json() for condition in conditions]
