"""DefaultPreemption — when no node fits, evict lower-priority pods to make room, as kube-scheduler's
plugin of that name (a PostFilter, listed in a profile's `postFilters`; the default).

1. A pod with `preemptionPolicy: Never` never preempts ("not eligible due to preemptionPolicy=Never.");
   nor does a pod whose nominated node still has a lower-priority pod terminating (its earlier
   victims are on their way out).
2. Candidates: only nodes whose rejection evicting pods may undo (resources, host ports, pod
   anti-affinity, spread skew, volume conflicts and limits — not taints, node affinity, a missing
   claim, ...), in node order, until `max(nodes x minCandidateNodesPercentage / 100,
   minCandidateNodesAbsolute)` candidates are found, one of them violating no budget.
3. On each: remove every pod of lower priority; if the pod still does not fit, no candidate. Else
   re-add them one by one, most important first (priority, then earlier start) — those whose
   PodDisruptionBudget would be violated first, so they are spared first — keeping each that
   still lets the pod fit: the rest are the victims. Pods nominated to the node with the pod's
   priority or more count as if there (their room is held for them).
4. The node: fewest budget violations, then the lowest highest-victim priority, the smallest sum of
   victim priorities, the fewest victims, the latest start among the highest-priority victims,
   then node order (kube picks at random among full ties; Placer stays deterministic).

With no candidate, the reason kube gives, e.g. `preemption: 0/5 nodes are available: 2 No preemption
victims found for incoming pod, 3 Preemption is not helpful for scheduling.` — the operator adds it
to the FailedScheduling note; it drops the pod's nomination, if any, unless the pod may not preempt
now (step 1). A nomination goes with the decision; the operator evicts the victims and holds the
node for the pod (`placer simulate` evicts them at once and places the pod there).

Args: `minCandidateNodesPercentage` (0..100, default 10), `minCandidateNodesAbsolute` (default
100); not both 0.

Example profile (preemption is on by default; `postFilters: []` turns it off)::

    spec:
      schedulerName: batch-scheduler
      postFilters:
        - name: DefaultPreemption
          args: {minCandidateNodesPercentage: 20, minCandidateNodesAbsolute: 50}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field, model_validator

from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.framework import (
    PluginArgs,
    PostFilterContext,
    PostFilterPlugin,
    Preemption,
    fit_error_message,
)
from placer.engine.kinds import DisruptionBudget
from placer.engine.objects import PodInfo

__all__ = ["DefaultPreemption", "DefaultPreemptionArgs"]

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."


class DefaultPreemptionArgs(PluginArgs):
    minCandidateNodesPercentage: int = Field(default=10, ge=0, le=100, strict=True)
    minCandidateNodesAbsolute: int = Field(default=100, ge=0, strict=True)

    @model_validator(mode="after")
    def _not_both_zero(self) -> DefaultPreemptionArgs:
        if self.minCandidateNodesPercentage == 0 and self.minCandidateNodesAbsolute == 0:
            raise ValueError(
                "minCandidateNodesPercentage and minCandidateNodesAbsolute: Invalid value: 0: cannot both be zero"
            )
        return self


def start_time(pod: PodInfo) -> float:
    """kube's `GetPodStartTime`: a pod not started yet counts as starting now (later than any)."""
    return pod.start_time or math.inf


def importance(pod: PodInfo) -> tuple[int, float, str]:
    """Sort key, most important first (kube's `MoreImportantPod`): higher priority, earlier start;
    then namespace/name, where kube's order is arbitrary (a node's pods are a set here: without it
    the victims of a full tie would change with the process's string hashing)."""
    return -pod.priority, start_time(pod), pod.key


def split_by_budgets(
    records: Sequence[PodRecord], budgets: Sequence[DisruptionBudget]
) -> tuple[list[PodRecord], list[PodRecord]]:
    """kube's `filterPodsWithPDBViolation`: (evicting them would violate a budget, would not), the
    budgets' allowed disruptions spent in the order given."""
    allowed = [budget.disruptions_allowed for budget in budgets]
    violating, fine = [], []
    for record in records:
        pod = record.pod
        breaks = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if budget.namespace != pod.namespace or budget.selector.empty or budget.selector.nothing:
                    continue
                if not budget.selector.matches(pod.labels) or pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    breaks = True
        (violating if breaks else fine).append(record)
    return violating, fine


class _Candidate:
    __slots__ = ("node", "order", "victims", "violations")

    def __init__(self, node: str, order: int, victims: list[PodInfo], violations: int) -> None:
        self.node, self.order, self.victims, self.violations = node, order, victims, violations

    def earliest_start_of_highest(self) -> float:
        """kube's `GetEarliestPodStartTime`: among the highest-priority victims, the earliest start."""
        top = max(v.priority for v in self.victims)
        return min(start_time(v) for v in self.victims if v.priority == top)


def pick_one(candidates: Sequence[_Candidate]) -> _Candidate:
    """kube's `pickOneNodeForPreemption`, with node order as the last tie-breaker."""
    ranked = sorted(
        candidates,
        key=lambda c: (
            c.violations,
            c.victims[0].priority,  # victims are most important first: the highest priority
            sum(v.priority + 2**31 for v in c.victims),
            len(c.victims),
            -c.earliest_start_of_highest(),  # the latest start wins
            c.order,
        ),
    )
    return ranked[0]


class DefaultPreemption(PostFilterPlugin[DefaultPreemptionArgs]):
    name: ClassVar[str] = "DefaultPreemption"
    Args: ClassVar[type[PluginArgs]] = DefaultPreemptionArgs

    def _wanted(self, potential: int) -> int:
        """kube's `calculateNumCandidates`."""
        wanted = potential * self.args.minCandidateNodesPercentage // 100
        return min(max(wanted, self.args.minCandidateNodesAbsolute), potential)

    def _ineligible(self, pod: PodInfo, cluster: ClusterState, context: PostFilterContext) -> str | None:
        """kube's `PodEligibleToPreemptOthers`."""
        if pod.preemption_policy == "Never":
            return NEVER
        held = cluster.nominated.get(pod.key)
        node = held[1] if held is not None else pod.nominated_node
        slot = cluster.index.get(node) if node else None
        if slot is None or slot not in set(context.candidates.tolist()):
            return None  # no nomination, or preemption can no longer help there: try again
        for record in cluster.pods_on(node):
            if record.pod.deleting and record.pod.priority < pod.priority:
                return TERMINATING
        return None

    def clears_nomination(self, message: str) -> bool:
        """A pod that may not preempt now keeps its nomination (kube's ModeNoop); one for which no
        candidate was found loses it ("Specify nominatedNodeName to clear the pod's nominatedNodeName
        status", kube's `Preempt`)."""
        return message not in (f"preemption: {NEVER}", f"preemption: {TERMINATING}")

    def post_filter(self, pod: PodInfo, cluster: ClusterState, context: PostFilterContext) -> Preemption | str:
        why = self._ineligible(pod, cluster, context)
        if why is not None:
            return f"preemption: {why}"
        statuses: Counter[str] = Counter()
        statuses[NOT_HELPFUL] = context.all_nodes - len(context.candidates)
        budgets = [b for _, _, b in cluster.catalog.items("PodDisruptionBudget")]
        wanted = self._wanted(len(context.candidates))
        found: list[_Candidate] = []
        fine = 0
        for order, slot in enumerate(context.candidates.tolist()):
            node = cluster.names[slot]
            outcome = self._select_victims(pod, cluster, context, int(slot), node, budgets)
            if isinstance(outcome, list):
                statuses.update(outcome)
                continue
            victims, violations = outcome
            found.append(_Candidate(node, order, victims, violations))
            fine += violations == 0
            if fine and len(found) >= wanted:
                break
        if not found:
            return f"preemption: {fit_error_message(context.all_nodes, +statuses)}"
        best = pick_one(found)
        displaced = tuple(
            key for key, (other, node) in cluster.nominated.items()
            if node == best.node and other.priority < pod.priority and key != pod.key
        )
        return Preemption(best.node, tuple(best.victims), displaced)

    @staticmethod
    def _select_victims(
        pod: PodInfo,
        cluster: ClusterState,
        context: PostFilterContext,
        slot: int,
        node: str,
        budgets: Sequence[DisruptionBudget],
    ) -> tuple[list[PodInfo], int] | list[str]:
        """kube's `SelectVictimsOnNode`: (victims, how many violate a budget), or the node's reasons."""
        potential = sorted(
            (record for record in cluster.pods_on(node) if record.pod.priority < pod.priority),
            key=lambda record: importance(record.pod),
        )
        if not potential:
            return [NO_VICTIMS]
        if not context.fits(slot, potential):
            return context.check(slot, potential) or [NO_VICTIMS]
        violating, fine = split_by_budgets(potential, budgets)
        removed = list(potential)
        victims: list[PodRecord] = []
        violations = 0
        for group, counts in ((violating, True), (fine, False)):
            for record in group:
                removed.remove(record)
                if context.fits(slot, removed):
                    continue  # reprieved: the pod fits with it still there
                removed.append(record)
                victims.append(record)
                violations += counts
        ordered = sorted((record.pod for record in victims), key=importance)
        return ordered, violations
