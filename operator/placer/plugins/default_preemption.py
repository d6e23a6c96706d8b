"""DefaultPreemption — when no node fits, evict lower-priority pods to make room, as kube-scheduler's
plugin of that name (a PostFilter, listed in a profile's `postFilters`; the default).

1. A pod with `preemptionPolicy: Never` never preempts ("not eligible due to preemptionPolicy=Never.");
   nor does a pod whose nominated node still has a lower-priority pod terminating because a
   scheduler preempted it (deleting, with the `DisruptionTarget` condition of reason
   `PreemptionByScheduler`: its earlier victims are on their way out; another pod terminating
   does not hold it back, as in kube-scheduler v1.36).
2. Candidates: only nodes whose rejection evicting pods may undo (resources, host ports, pod
   anti-affinity, spread skew, volume conflicts and limits — not taints, node affinity, a missing
   claim, ...), in node-tree order from the first node, until `max(nodes x
   minCandidateNodesPercentage / 100, minCandidateNodesAbsolute)` candidates are found, one of them
   violating no budget. (kube-scheduler starts at a random offset into that list and dry-runs 16
   nodes at a time, so which candidates it finds varies from run to run; Placer always starts at
   the first node and goes one node after another: the same cluster gives the same decision,
   one of those kube-scheduler may give.)
3. On each: remove every pod of lower priority; if the pod still does not fit, no candidate. Else
   re-add them one by one, most important first (priority, then earlier start) — those whose
   PodDisruptionBudget would be violated first, so they are spared first — keeping each that
   still lets the pod fit: the rest are the victims. Pods nominated to the node with the pod's
   priority or more count as if there (their room is held for them).
   This dry run works on the columns, not by running every filter per node per victim: the
   resolvable filters say what a node lacks and what each pod frees as arithmetic
   (`EvictionTerms`; NodeResourcesFit and NodePorts), so the nodes where even evicting every
   lower pod cannot help are told apart over all candidates at once (what the lower pods hold is
   kept per priority, `RoomByPriority`), and the put-backs of a batch of nodes are weighed
   together; filters without such terms (inter-pod affinity, spreading, volumes) are asked node by
   node. The victims are those of kube's algorithm (a test runs it literally against this one).
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
from collections.abc import Hashable, Sequence
from typing import ClassVar

import numpy as np
from pydantic import Field, model_validator

from placer.engine.cluster import ClusterState, PodRecord, PodSums, PodTracker
from placer.engine.framework import (
    EvictionCheck,
    PluginArgs,
    PostFilterContext,
    PostFilterPlugin,
    Preemption,
    fit_error_message,
)
from placer.engine.kinds import DisruptionBudget
from placer.engine.objects import PodInfo
from placer.engine.priority_room import RoomByPriority

__all__ = ["DefaultPreemption", "DefaultPreemptionArgs"]

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
_MORE = 16  # nodes examined at a time past the wanted count, while every candidate found violates a budget


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


class _Lower:
    """A node's pods below a priority in put-back order (`VictimOrder`)."""

    __slots__ = ("_importance", "ordered", "outcomes", "protected", "rows")

    def __init__(self, ordered: list[PodRecord], protected: int) -> None:
        self.ordered = ordered  # those a budget protects first, each part most important first
        self.protected = protected  # how many a budget protects
        self.rows: dict[Hashable, list[int]] = {}  # EvictionCheck.frees_key -> what each frees, flat
        self._importance: list[tuple[int, float, str]] | None = None
        #: (frees key, checked, the node's shortfall) -> the put-backs' outcome there: the victims
        #: and how many break a budget, or None (the pod cannot fit, or needs no victim)
        self.outcomes: dict[tuple[Hashable, bool, bytes], tuple[list[PodInfo], int] | None] = {}

    def most_important_first(self, picked: list[int]) -> list[PodInfo]:
        """The pods at these positions of `ordered`, most important first."""
        if not self.protected:  # (`ordered` is in that order already)
            return [self.ordered[j].pod for j in picked]
        if self._importance is None:
            self._importance = [importance(record.pod) for record in self.ordered]
        return [self.ordered[j].pod for j in sorted(picked, key=self._importance.__getitem__)]


class VictimOrder(PodTracker):
    """Per node: its pods below a priority in the order the dry run puts them back (those a budget
    protects first, each part most important first) and what each frees, kept until a pod is
    counted or uncounted there or the budgets change — most of the hundred nodes a dry run visits
    are the same from one preemptor to the next."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._stamps = np.zeros(cluster.capacity, dtype=np.int64)  # per slot: bumped by every pod (un)counted
        # slot -> (stamp, priority, budgets, the node's lower pods)
        self._kept: dict[int, tuple[int, int, tuple[DisruptionBudget, ...], _Lower]] = {}

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        self._stamps[slot] += 1

    def account_many(self, sums: PodSums, sign: int) -> None:
        np.add.at(self._stamps, sums.slots, 1)

    def clear_slot(self, slot: int) -> None:
        self._stamps[slot] += 1

    def grow(self, capacity: int) -> None:
        grown = np.zeros(capacity, dtype=np.int64)
        grown[: len(self._stamps)] = self._stamps
        self._stamps = grown

    def lower(self, slot: int, priority: int, budgets: tuple[DisruptionBudget, ...]) -> _Lower:
        """The pods below `priority` on the node of `slot`."""
        stamp = int(self._stamps[slot])
        kept = self._kept.get(slot)
        if (kept is not None and kept[0] == stamp and kept[1] == priority and len(kept[2]) == len(budgets)
                and all(a is b for a, b in zip(kept[2], budgets, strict=True))):
            return kept[3]
        cluster = self.cluster
        potential = sorted(
            (record for record in cluster.pods_on(cluster.names[slot]) if record.pod.priority < priority),
            key=lambda record: importance(record.pod),
        )
        violating, fine = split_by_budgets(potential, budgets)
        lower = _Lower(violating + fine, len(violating))
        self._kept[slot] = (stamp, priority, budgets, lower)
        return lower


class _Candidate:
    __slots__ = ("node", "order", "victims", "violations")

    def __init__(self, node: str, order: int, victims: list[PodInfo], violations: int) -> None:
        self.node, self.order, self.victims, self.violations = node, order, victims, violations

    def rank(self) -> tuple[int, int, int, int, float, int]:
        """`pick_one`'s sort key: the first one wins."""
        victims = self.victims
        return (
            self.violations,
            victims[0].priority,  # victims are most important first: the highest priority
            sum(v.priority for v in victims) + len(victims) * 2**31,
            len(victims),
            -self.earliest_start_of_highest(),  # the latest start wins
            self.order,
        )

    def earliest_start_of_highest(self) -> float:
        """kube's `GetEarliestPodStartTime`: among the highest-priority victims, the earliest start —
        the first victim's, as they are most important first (higher priority, then earlier start)."""
        return start_time(self.victims[0])


def pick_one(candidates: Sequence[_Candidate]) -> _Candidate:
    """kube's `pickOneNodeForPreemption`, with node order as the last tie-breaker."""
    return min(candidates, key=_Candidate.rank)


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
        node = held.node if held is not None else pod.nominated_node
        slot = cluster.index.get(node) if node else None
        if slot is None or not (context.candidates == slot).any():
            return None  # no nomination, or preemption can no longer help there: try again
        for record in cluster.pods_on(node):
            victim = record.pod
            if victim.deleting and victim.preempted and victim.priority < pod.priority:
                return TERMINATING  # kube's podTerminatingByPreemption: a victim on its way out
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
        candidates = context.candidates
        if not len(candidates):  # no node where evicting pods could help: nothing to dry-run
            message = fit_error_message(context.all_nodes, Counter({NOT_HELPFUL: context.all_nodes}))
            return f"preemption: {message}"
        budgets = tuple(b for _, _, b in cluster.catalog.items("PodDisruptionBudget"))
        if context.evictions is not None:
            check = context.evictions()
        else:  # the filters node by node only
            check = EvictionCheck(candidates, np.ones(len(candidates), dtype=bool), node_fits=context.fits)
        lower = cluster.tracker(RoomByPriority).count_below(pod.priority, candidates)
        found = self._dry_run(pod, cluster, check, lower, budgets, self._wanted(len(candidates)))
        if not found:
            statuses: Counter[str] = Counter()
            statuses[NOT_HELPFUL] = context.all_nodes - len(candidates)
            for position, slot in enumerate(candidates.tolist()):
                statuses.update(self._failure(pod, cluster, context, slot, int(lower[position])))
            return f"preemption: {fit_error_message(context.all_nodes, +statuses)}"
        best = pick_one(found)
        displaced = tuple(
            key for key, held in cluster.nominated.items()
            if held.node == best.node and held.pod.priority < pod.priority and key != pod.key
        )
        return Preemption(best.node, tuple(best.victims), displaced)

    def _dry_run(
        self,
        pod: PodInfo,
        cluster: ClusterState,
        check: EvictionCheck,
        lower: np.ndarray,
        budgets: tuple[DisruptionBudget, ...],
        wanted: int,
    ) -> list[_Candidate]:
        """kube's DryRunPreemption, one node after another from the first candidate: the candidates
        found until `wanted` of them are, one of them violating no budget. The nodes where evicting
        every lower pod cannot help are told apart on the columns first (`EvictionCheck`), so only
        the others' pods are visited, a batch of nodes at a time."""
        viable = (lower > 0) & check.passes
        freed = check.frees_below(pod.priority)
        if freed is not None:
            viable &= check.covered(slice(None), freed)
        positions = np.flatnonzero(viable)
        found: list[_Candidate] = []
        fine = 0
        start = 0
        while start < len(positions):
            # the nodes still wanted; while every candidate violates a budget, as many again as
            # were examined (the answer is the same: candidates are taken in order, up to the stop)
            size = max(wanted - len(found), _MORE, start)
            batch = positions[start : start + size]
            start += len(batch)
            for candidate in self._select_victims(pod, cluster, check, batch, budgets, checked=freed is not None):
                if candidate is None:
                    continue
                found.append(candidate)
                fine += candidate.violations == 0
                if fine and len(found) >= wanted:
                    return found
        return found

    @staticmethod
    def _failure(pod: PodInfo, cluster: ClusterState, context: PostFilterContext, slot: int, lower: int) -> list[str]:
        """A candidate node's status when no candidate was found (kube's NodeToStatus of the dry run):
        no lower pod there, or the reasons of the first filter that still rejects the pod with them
        all gone."""
        if not lower:
            return [NO_VICTIMS]
        potential = [record for record in cluster.pods_on(cluster.names[slot]) if record.pod.priority < pod.priority]
        return context.check(slot, potential) or [NO_VICTIMS]

    @staticmethod
    def _select_victims(
        pod: PodInfo,
        cluster: ClusterState,
        check: EvictionCheck,
        positions: np.ndarray,
        budgets: tuple[DisruptionBudget, ...],
        checked: bool,
    ) -> list[_Candidate | None]:
        """kube's `SelectVictimsOnNode` on the candidates at `positions` together: every lower pod
        gone, the pod must fit (unless `checked` already); then the pods are put back one at a
        time, most important first (those a budget protects before the others), each kept where
        the pod still fits: the rest are the victims. None for a node where it cannot fit. A node's
        outcome is kept with its lower pods (`_Lower.outcomes`) for the next preemptor that asks
        the same there: the same pods, what each frees, and the same shortfall."""
        order = cluster.tracker(VictimOrder)
        key = check.frees_key
        keep = key is not None and check.node_fits is None  # (node_fits reads more than the columns)
        names = cluster.names
        outcomes: list[_Candidate | None] = [None] * len(positions)
        asked: list[tuple[int, _Lower, tuple[Hashable, bool, bytes] | None]] = []  # (i, lower, outcome's key)
        for i, (position, slot) in enumerate(zip(positions.tolist(), check.slots[positions].tolist(), strict=True)):
            lower = order.lower(slot, pod.priority, budgets)
            wanted = (key, checked, check.shortfall[position].tobytes()) if keep else None
            if wanted is not None and wanted in lower.outcomes:
                kept = lower.outcomes[wanted]
                if kept is not None:
                    outcomes[i] = _Candidate(names[slot], position, kept[0], kept[1])
                continue
            asked.append((i, lower, wanted))
        if asked:
            chosen = np.fromiter((i for i, _, _ in asked), dtype=np.intp, count=len(asked))
            found = DefaultPreemption._put_back(check, positions[chosen], [lower for _, lower, _ in asked], checked,
                                                key)
            if keep and sum(len(lower.outcomes) for _, lower, _ in asked) > 8 * len(asked):
                for _, lower, _ in asked:
                    lower.outcomes.clear()  # (shortfalls seen once: start again rather than grow)
            for (i, lower, wanted), outcome in zip(asked, found, strict=True):
                if wanted is not None:
                    lower.outcomes[wanted] = outcome
                if outcome is not None:
                    slot = int(check.slots[positions[i]])
                    outcomes[i] = _Candidate(names[slot], int(positions[i]), outcome[0], outcome[1])
        return outcomes

    @staticmethod
    def _put_back(
        check: EvictionCheck, positions: np.ndarray, lowers: list[_Lower], checked: bool, key: Hashable | None,
    ) -> list[tuple[list[PodInfo], int] | None]:
        """The put-backs on the candidates at `positions` (their lower pods `lowers`), all at once:
        per node, its victims most important first and how many of them break a budget, or None.
        `key`: the check's `frees_key`, under which each node's rows are kept."""
        width = check.width
        lists: list[list[PodRecord]] = []
        protected: list[int] = []  # per node: how many of its list a budget protects (they come first)
        rows: list[int] = []
        for lower in lowers:
            lists.append(lower.ordered)
            protected.append(lower.protected)
            part = lower.rows.get(key) if key is not None else None
            if part is None:
                part = [amount for record in lower.ordered for amount in check.frees(record.pod)]
                if key is not None:
                    lower.rows[key] = part
            rows.extend(part)
        lengths = np.fromiter((len(ordered) for ordered in lists), dtype=np.int64, count=len(lists))
        frees = np.asarray(rows, dtype=np.int64).reshape(int(lengths.sum()), width)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        removed = np.zeros((len(lists), width), dtype=np.int64)  # every lower pod gone: what they free
        np.add.at(removed, np.repeat(np.arange(len(lists)), lengths), frees)
        fits = lengths > 0
        if not checked:
            fits &= check.covered(positions, removed)
        node_fits = check.node_fits
        if node_fits is not None:
            for i in np.flatnonzero(fits).tolist():
                fits[i] = node_fits(int(check.slots[positions[i]]), lists[i])
        kept = np.zeros(len(frees), dtype=bool)  # reprieved
        if node_fits is None:
            # the put-backs of all nodes at once, step by step: the j-th pod of every node with one
            for j in range(int(lengths.max(initial=0))):
                nodes = np.flatnonzero(fits & (lengths > j))
                if not nodes.size:
                    break
                index = starts[nodes] + j
                trial = removed[nodes] - frees[index]
                still = check.covered(positions[nodes], trial)
                removed[nodes[still]] = trial[still]
                kept[index[still]] = True
        else:
            for i in np.flatnonzero(fits).tolist():
                slot = int(check.slots[positions[i]])
                gone = list(lists[i])
                for j, record in enumerate(lists[i]):
                    trial = removed[i] - frees[starts[i] + j]
                    gone.remove(record)
                    if check.covered(positions[i : i + 1], trial[None])[0] and node_fits(slot, gone):
                        removed[i] = trial
                        kept[starts[i] + j] = True
                    else:
                        gone.append(record)
        outcomes: list[tuple[list[PodInfo], int] | None] = []
        reprieved = kept.tolist()
        for i, ordered in enumerate(lists):
            if not fits[i]:
                outcomes.append(None)
                continue
            base = int(starts[i])
            picked = [j for j in range(len(ordered)) if not reprieved[base + j]]
            if not picked:
                # kube's "expected at least one victim pod on node": the pod fits with all of them
                outcomes.append(None)
                continue
            violations = sum(1 for j in range(protected[i]) if not reprieved[base + j])
            outcomes.append((lowers[i].most_important_first(picked), violations))
        return outcomes
