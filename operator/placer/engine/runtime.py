"""The scheduling cycle: filter, pick the nodes to score, score, normalise, weigh, select; then
Reserve and Permit, and the binding cycle's plugin calls (PreBind, PostBind, Unreserve).

Kept apart from the plugins, as kube-scheduler's `framework/runtime`: this module knows the
order of the extension points and kube-scheduler's rules around them
(`percentageOfNodesToScore`, the rotating start index, the `0/N nodes are available` message, the
15-minute cap on a Permit wait), and nothing about what any plugin does. What the binding cycle
writes and waits for is carried out by the operator (`placer.controller.binding.cycle`).

What a cycle costs is the number of numpy calls far more than the number of nodes, so the runtime
makes few: the scan for the nodes to score looks at the next `2 x (wanted + 1)` nodes of the
node-tree order first (the whole round only when they hold too few feasible ones); the winner is
the highest total with the smallest node name among its ties, a maximum rather than a sort (the
full order is sorted only when asked: `--top`, explain); the filters' masks are ANDed without
copies, and a cycle with no nominated pods skips that bookkeeping. A pod signed as one decided
before reuses that cycle's work (opportunistic batching, `placer.engine.batching`), with the same
decision.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.engine.batching import Batch, Batches
from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.framework import (
    ALLOW,
    BindingPoints,
    EvictionCheck,
    FilterPlugin,
    Permit,
    PermitCode,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterContext,
    PostFilterWrites,
    PreBind,
    PreBindPlugin,
    Preemption,
    PreFilterResult,
    ReservePlugin,
    WaitingPod,
    WaitingPods,
    Write,
    fit_error_message,
)
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile

__all__ = [
    "MAX_PERMIT_TIMEOUT",
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Decision",
    "Narrowed",
    "NodeScore",
    "PluginFailed",
    "Scheduler",
    "Weighed",
    "binding_points",
    "fit_error_message",
    "narrowing_conflict",
    "nodes_to_find",
    "permit_message",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_MESSAGE = "no nodes available to schedule pods"
MAX_PERMIT_TIMEOUT = 15 * 60.0  # kube's maxTimeout: no Permit wait lasts longer
_AS_IT_IS = contextlib.nullcontext()  # `cluster.with_pods` of no pods, without its bookkeeping


@dataclass(frozen=True, slots=True)
class NodeScore:
    node: str
    total: int
    plugins: dict[str, int]

    def as_dict(self) -> dict[str, object]:
        return {"node": self.node, "total": self.total, "plugins": dict(self.plugins)}


class Weighed:
    """The candidates' totals and per-plugin scores (None: the plugin does not apply, 0 everywhere),
    and their positions best first (total, then node name).

    The full order is sorted only when asked (`order`): a cycle needs just the best (`best`), which
    is a maximum, not a sort. The per-plugin scores may come as a function, called when first asked
    (a batched cycle adds cached totals and asks the plugins' scores only for its best nodes)."""

    __slots__ = ("_order", "_per_plugin", "_ranks", "_scores_at", "slots", "totals")

    def __init__(
        self, slots: np.ndarray, totals: np.ndarray,
        per_plugin: list[tuple[str, np.ndarray | None]] | Callable[[], list[tuple[str, np.ndarray | None]]],
        ranks: np.ndarray, scores_at: Callable[[int], dict[str, int]] | None = None,
    ) -> None:
        self.slots = slots
        self.totals = totals
        self._per_plugin = per_plugin
        self._ranks = ranks  # every slot's node-name rank (ties go to the smaller name)
        self._order: np.ndarray | None = None
        #: the per-plugin scores of one candidate, without the others' (with `per_plugin` a function)
        self._scores_at = scores_at

    @property
    def per_plugin(self) -> list[tuple[str, np.ndarray | None]]:
        """(plugin name, its normalised scores per candidate, None where it does not apply)."""
        if callable(self._per_plugin):
            self._per_plugin = self._per_plugin()
        return self._per_plugin

    @property
    def order(self) -> np.ndarray:
        """Positions in `slots`, best first: higher total, then smaller node name."""
        if self._order is None:
            self._order = np.lexsort((self._ranks[self.slots], -self.totals))
        return self._order

    def best(self) -> int:
        """`order[0]`, without sorting: the highest total, the smallest node name among its ties."""
        if self._order is not None:
            return int(self._order[0])
        totals = self.totals
        ties = (totals == totals.max()).nonzero()[0]
        if ties.size == 1:
            return int(ties[0])
        return int(ties[np.argmin(self._ranks[self.slots[ties]])])

    def node_score(self, cluster: ClusterState, i: int) -> NodeScore:
        """The `i`-th candidate (a position in `slots`) as a NodeScore."""
        if self._scores_at is not None and callable(self._per_plugin):
            plugins = self._scores_at(int(i))
        else:
            plugins = {name: 0 if scores is None else int(scores[i]) for name, scores in self.per_plugin}
        return NodeScore(node=cluster.names[self.slots[i]], total=int(self.totals[i]), plugins=plugins)


@dataclass(slots=True)
class Decision:
    """Where a pod goes (or why it cannot go anywhere), with the best candidates' scores."""

    pod: str
    profile: str
    node: str | None
    message: str | None = None
    #: reason -> number of nodes that gave it; empty when scheduled or the pod itself is invalid
    reasons: dict[str, int] = field(default_factory=dict)
    feasible: int = 0
    top: list[NodeScore] = field(default_factory=list)
    #: the filters that rejected the pod, and the cluster events that may undo their rejections
    #: (empty when unknown: any change may help)
    rejected_by: tuple[str, ...] = ()
    wake_on: frozenset[str] = frozenset()
    #: what ReservePlugins hold for the pod on its node, by plugin (set by `Scheduler.assume`)
    reservations: dict[str, Any] = field(default_factory=dict)
    #: no node fits now, but one will once these victims are evicted (DefaultPreemption)
    preemption: Preemption | None = None
    #: why the PostFilter plugins found nothing (`preemption: 0/5 nodes are available: ...`);
    #: None when they did (or there are none)
    post_filter_message: str | None = None
    #: whether that failure drops the pod's nomination (`PostFilterPlugin.clears_nomination`)
    clears_nomination: bool = False
    #: the PostFilter message is DefaultPreemption refusing a constrained group's member (set by
    #: the group cycle; workload-aware preemption then leaves it as it is)
    constrained_refusal: bool = False
    #: what the PostFilter plugins wrote trying (`PostFilterWrites`: a claim deallocated), for the
    #: operator to make whatever the decision
    post_filter_writes: tuple[Write, ...] = ()
    #: the Permit plugins' verdict (set by `Scheduler.permit`); None before Permit ran
    permit: Permit | None = None
    #: every scored candidate's total (references only: a shadow profile compares another
    #: scheduler's node with them); None when unschedulable
    weighed: Weighed | None = None

    @property
    def full_message(self) -> str | None:
        """The event's note and the condition's message: kube's FitError with the PostFilter's
        sentence (`... 5 Insufficient cpu. preemption: 0/5 nodes are available: ...`)."""
        if self.message is None or self.post_filter_message is None:
            return self.message
        return f"{self.message} {self.post_filter_message}"  # kube's FitError adds no period of its own

    @property
    def scheduled(self) -> bool:
        return self.node is not None


@dataclass(frozen=True, slots=True)
class Narrowed:
    """The nodes the PreFilter plugins' `PreFilterResult`s leave (kube's merged PreFilterResult):
    only these are evaluated; every other node is `reason`, unresolvable."""

    allowed: np.ndarray  # bool per slot: a present node every narrowing plugin named
    plugins: tuple[FilterPlugin, ...]  # the plugins that narrowed, in profile order

    @property
    def reason(self) -> str:
        """kube's status for the nodes left out (`findNodesThatFitPod`'s absent-nodes status)."""
        return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted({p.name for p in self.plugins}))}]"

    @staticmethod
    def of(names: frozenset[str], plugins: tuple[FilterPlugin, ...], cluster: ClusterState) -> Narrowed:
        allowed = np.zeros(cluster.size, dtype=bool)
        slots = [slot for slot in map(cluster.index.get, names) if slot is not None]
        allowed[slots] = True
        allowed &= cluster.present[: cluster.size]  # a name of no (present) node is skipped, as kube does
        return Narrowed(allowed, plugins)


def narrowing_conflict(plugins: Sequence[FilterPlugin]) -> str:
    """kube's RunPreFilterPlugins when the plugins' node sets leave no node: the pod's own reason."""
    names = sorted({plugin.name for plugin in plugins})
    if len(names) == 1:
        return f"node(s) didn't satisfy plugin {names[0]}"
    return f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"


class PluginFailed(Exception):
    """A plugin raised at a binding point: which one, and what (the operator reports it as kube
    does, `running PreBind plugin "NAME": ...`)."""

    def __init__(self, plugin: Plugin[Any], error: Exception) -> None:
        super().__init__(f"{plugin.name}: {error}")
        self.plugin = plugin
        self.error = error


_POINTS: weakref.WeakKeyDictionary[Any, BindingPoints] = weakref.WeakKeyDictionary()


def binding_points(profile: Profile) -> BindingPoints:
    """The profile's Reserve, Permit, PreBind and PostBind plugins (found once per profile)."""
    points = _POINTS.get(profile)
    if points is None:
        by_name: dict[str, Plugin[Any]] = {}
        for plugin in (*profile.filters, *(p for p, _ in profile.scores), *profile.post_filters):
            by_name.setdefault(plugin.name, plugin)
        plugins = list(by_name.values())
        points = BindingPoints(
            reserves=tuple(p for p in plugins if isinstance(p, ReservePlugin)),
            permits=tuple(p for p in plugins if isinstance(p, PermitPlugin)),
            pre_binds=tuple(p for p in plugins if isinstance(p, PreBindPlugin)),
            post_binds=tuple(p for p in plugins if isinstance(p, PostBindPlugin)),
            by_name=by_name,
        )
        _POINTS[profile] = points
    return points


def permit_message(permit: Permit) -> str:
    """What a Permit rejection reads as, kube's FitError on the one node (`0/1 nodes are
    available: 1 rejected due to timeout after waiting 10s at plugin X.`); a waiting pod preempted
    fails as kube's WaitOnPermit error."""
    if permit.error:
        return f"waiting on permit for pod: {permit.message}"
    return fit_error_message(1, Counter({permit.message: 1}))


def nodes_to_find(percentage: int, all_nodes: int) -> int:
    """kube-scheduler's `numFeasibleNodesToFind`: how many feasible nodes are enough to score."""
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return all_nodes
    if percentage == 0:
        percentage = max(50 - all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return all_nodes
    return max(all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Scheduler:
    """Runs scheduling cycles; holds kube-scheduler's rotating start index across pods, and the pods
    waiting on Permit."""

    def __init__(self, batching: bool = True) -> None:
        self.next_start_index = 0
        #: opportunistic batching (placer.engine.batching): a pod signed as one decided before
        #: reuses its work; the decisions are the same without (False: every cycle in full)
        self.batching = batching
        self.batched_pods = 0  # cycles that reused a batch (kube's batchedPods)
        self._batches = Batches()
        self.waiting = WaitingPods()
        # the Permit plugin instances holding pods now (with how many), and who holds each pod
        self._holders: dict[int, tuple[PermitPlugin[Any], int]] = {}
        self._held_by: dict[str, tuple[PermitPlugin[Any], ...]] = {}

    def schedule(self, pod: PodInfo, profile: Profile, cluster: ClusterState, top: int = 3,
                 placement: np.ndarray | None = None) -> Decision:
        """Decide for one pod; changes nothing in `cluster` (the caller assumes the pod, or, for a
        preemption, evicts the victims and nominates it). `placement` (a bool mask over slots): only
        those nodes are candidates and counted (kube's snapshot with a placement assumed, a pod
        group's topology domain: `0/N nodes` counts the placement's nodes)."""
        decision = Decision(pod=pod.key, profile=profile.name, node=None)
        if pod.error is not None:
            decision.message = pod.error
            return decision
        if placement is not None:
            placement = placement & cluster.present[: cluster.size]
        all_nodes = cluster.node_count if placement is None else int(np.count_nonzero(placement))
        if all_nodes == 0:
            decision.message = NO_NODES_MESSAGE
            return decision
        # pods nominated to nodes with this pod's priority or more hold their room (kube runs the
        # filters with them and without them: a node must pass both)
        nominated = cluster.nominated_against(pod) if cluster.nominated else []
        signed = None
        if self.batching and placement is None and not nominated and not self._nominated(pod, cluster):
            signed = self._batches.sign(profile, pod, cluster)
            batch = None if signed is None else self._batches.serving(signed, pod, profile, cluster)
            if batch is not None:
                slots = self._nodes_to_score(batch.feasible, profile, cluster, all_nodes, pod)
                if slots.size:
                    weighed = self._weigh_batched(pod, profile, cluster, slots, batch)
                    self._decide(cluster, slots, decision, top, weighed)
                    self.batched_pods += 1
                    return decision
                # no node fits: the full cycle finds why
        with cluster.with_pods(nominated) if nominated else _AS_IT_IS:
            pod_reason, narrowed = self._pre_filter(pod, profile, cluster, decision)
            # the nodes to evaluate: all, or those the PreFilters named and the pod's nominated node
            # (kube tries that one first, whatever the PreFilterResult)
            within = None if narrowed is None else self._with_nominated(narrowed.allowed, pod, cluster)
            if placement is not None:
                within = placement if within is None else within & placement
            masks: list[np.ndarray | None] = []  # each filter's, as far as the first pass went
            feasible = None if pod_reason is not None else self._filter(pod, profile, cluster, within, masks)
            if feasible is None or not feasible.any():  # (with the nominated pods still counted)
                self._unschedulable(pod, profile, cluster, decision, all_nodes, pod_reason, narrowed, within, masks)
                return decision
        if nominated:
            feasible &= self._filter(pod, profile, cluster, within)
        allowed = None if narrowed is None else narrowed.allowed
        if placement is not None:
            allowed = placement if allowed is None else allowed & placement
        slots = self._nodes_to_score(feasible, profile, cluster, all_nodes, pod, allowed)
        if slots.size == 0:
            with cluster.with_pods(nominated):  # (as in the first pass: its masks hold)
                self._unschedulable(pod, profile, cluster, decision, all_nodes, pod_reason, narrowed, within, masks)
            return decision
        if signed is None or narrowed is not None:
            self._decide(cluster, slots, decision, top, self.weigh(pod, profile, cluster, slots))
            return decision
        raw: list[np.ndarray | None] = []
        self._decide(cluster, slots, decision, top, self.weigh(pod, profile, cluster, slots, raw))
        self._batches.keep(signed, cluster, feasible, slots, raw)
        return decision

    @staticmethod
    def _nominated(pod: PodInfo, cluster: ClusterState) -> bool:
        """Whether the pod is nominated to a node (its cycle tries that node first)."""
        return bool(pod.nominated_node) or pod.key in cluster.nominated

    @staticmethod
    def _weigh_batched(pod: PodInfo, profile: Profile, cluster: ClusterState, slots: np.ndarray,
                       batch: Batch) -> Weighed:
        """`weigh` from the batch: the same totals, each plugin's scores worked out only if asked."""
        totals, per_plugin, scores_at = batch.weigh(pod, profile, cluster, slots)
        return Weighed(slots, totals, per_plugin, cluster.name_rank(), scores_at)

    @staticmethod
    def _pre_filter(
        pod: PodInfo, profile: Profile, cluster: ClusterState, decision: Decision
    ) -> tuple[str | None, Narrowed | None]:
        """kube's RunPreFilterPlugins: the first rejection of the pod itself, else the node sets of
        the plugins that named nodes, intersected (none left: the pod's own reason)."""
        names: frozenset[str] | None = None
        narrowing: tuple[FilterPlugin, ...] = ()
        for plugin in profile.filters:
            outcome = plugin.pre_filter(pod, cluster)
            if outcome is None:
                continue
            if not isinstance(outcome, PreFilterResult):
                decision.rejected_by, decision.wake_on = (plugin.name,), plugin.events
                return outcome, None
            narrowing += (plugin,)
            names = outcome.node_names if names is None else names & outcome.node_names
            if not names:
                decision.rejected_by = tuple(dict.fromkeys(p.name for p in narrowing))
                decision.wake_on = frozenset().union(*(p.events for p in narrowing))
                return narrowing_conflict(narrowing), None
        return None, None if names is None else Narrowed.of(names, narrowing, cluster)

    @staticmethod
    def _with_nominated(allowed: np.ndarray, pod: PodInfo, cluster: ClusterState) -> np.ndarray:
        """`allowed` and the node the pod is nominated to, if any (kube evaluates it first)."""
        nominated = cluster.nominated.get(pod.key)
        node = nominated.node if nominated is not None else pod.nominated_node
        slot = cluster.index.get(node) if node else None
        if slot is None or allowed[slot] or not cluster.present[slot]:
            return allowed
        within = allowed.copy()
        within[slot] = True
        return within

    @staticmethod
    def _filter(pod: PodInfo, profile: Profile, cluster: ClusterState, within: np.ndarray | None = None,
                masks: list[np.ndarray | None] | None = None) -> np.ndarray:
        """The nodes every filter lets the pod onto (`masks`, if given, gets each filter's answer,
        in order, as far as they were asked: no node left ends the pass)."""
        present = cluster.present[: cluster.size]
        feasible = None if within is None else present & within
        for plugin in profile.filters:
            mask = plugin.filter(pod, cluster)
            if masks is not None:
                masks.append(mask)
            if mask is not None:
                if feasible is None:
                    feasible = present & mask  # (a new array: masks are the plugins', read only)
                else:
                    feasible &= mask
                if not feasible.size or not feasible[feasible.argmax()]:  # none left (argmax: the first True)
                    break
        return present.copy() if feasible is None else feasible

    def _unschedulable(
        self, pod: PodInfo, profile: Profile, cluster: ClusterState, decision: Decision, all_nodes: int,
        pod_reason: str | None, narrowed: Narrowed | None = None, within: np.ndarray | None = None,
        masks: Sequence[np.ndarray | None] = (),
    ) -> None:
        """kube's FitError, then the PostFilter plugins (preemption) with what it found. Nodes a
        PreFilterResult left out count as its reason, and preemption does not try them. `masks`:
        the first filters' answers, as the cycle found them on this cluster."""
        if pod_reason is not None:
            decision.message = fit_error_message(all_nodes, Counter(), pod_reason)
            candidates = np.empty(0, dtype=np.int64)
        else:
            reasons, rejected_by, resolvable = self._failure_reasons(pod, profile, cluster, within, masks)
            if narrowed is not None and within is not None:
                left_out = all_nodes - int(np.count_nonzero(within))
                if left_out > 0:
                    reasons[narrowed.reason] += left_out
                rejected_by = [*(p for p in narrowed.plugins if p not in rejected_by), *rejected_by]
            decision.reasons = dict(reasons)
            decision.message = fit_error_message(all_nodes, reasons)
            decision.rejected_by = tuple(plugin.name for plugin in rejected_by)
            decision.wake_on = frozenset().union(*(plugin.events for plugin in rejected_by))
            order = cluster.scan_order()
            candidates = order[resolvable[order]]
        # kube's RunPostFilterPlugins: in order until one nominates a node; the others' reasons
        # joined, the nomination dropped as the last that decided one way says
        messages: list[str] = []
        reached = functools.partial(self._reached, pod, profile, cluster, within)
        for plugin in profile.post_filters:
            evictions = functools.partial(self._evictions, pod, profile, cluster, candidates)
            context = PostFilterContext(candidates, all_nodes, *self._checks(pod, profile, cluster), reached=reached,
                                        evictions=evictions)
            outcome = plugin.post_filter(pod, cluster, context)
            if isinstance(outcome, PostFilterWrites):
                decision.post_filter_writes += outcome.writes
                outcome = outcome.message
            if isinstance(outcome, Preemption):
                decision.preemption = outcome
                decision.post_filter_message = None
                decision.clears_nomination = False
                return
            if outcome:  # (an Unschedulable status without reasons adds none)
                messages.append(outcome)
                decision.post_filter_message = ", ".join(messages)
            decision.clears_nomination = decision.clears_nomination or plugin.clears_nomination(outcome)

    @staticmethod
    def _reached(
        pod: PodInfo, profile: Profile, cluster: ClusterState, within: np.ndarray | None, name: str
    ) -> np.ndarray | None:
        """The nodes the profile's filter `name` was run on: every earlier filter passed them (kube
        stops at a node's first failing filter); None when the profile has no such filter."""
        remaining = cluster.present[: cluster.size].copy()
        if within is not None:
            remaining &= within
        for plugin in profile.filters:
            if plugin.name == name:
                return remaining
            mask = plugin.filter(pod, cluster)
            if mask is not None:
                remaining &= mask
        return None

    @staticmethod
    def _checks(pod: PodInfo, profile: Profile, cluster: ClusterState) -> tuple[
        Callable[[int, Sequence[PodRecord]], list[str] | None], Callable[[int, Sequence[PodRecord]], bool]
    ]:
        """The profile's filters on one node with some pods gone, for PostFilter plugins (kube runs
        them all there, in order): those evicting pods may satisfy with the pods gone, the others
        once — evictions do not change their answer, but a candidate a resolvable filter rejected
        first was never put to them (kube's `SelectVictimsOnNode` still is)."""
        dependent = [plugin for plugin in profile.filters if plugin.resolvable]
        one = np.empty(1, dtype=np.int64)
        static: dict[int, np.ndarray | None] = {}  # the other filters' masks, on first use

        def static_mask(index: int) -> np.ndarray | None:
            if index not in static:
                static[index] = profile.filters[index].filter(pod, cluster)
            return static[index]

        passed: list[np.ndarray | None] = []  # all of them together, on first use

        def static_fits(slot: int) -> bool:
            if not passed:
                masks = [static_mask(i) for i, plugin in enumerate(profile.filters) if not plugin.resolvable]
                masks = [mask for mask in masks if mask is not None]
                passed.append(np.logical_and.reduce(masks) if masks else None)
            mask = passed[0]
            return mask is None or bool(mask[slot])

        def check(slot: int, removed: Sequence[PodRecord]) -> list[str] | None:
            masks = [None if plugin.resolvable else static_mask(i) for i, plugin in enumerate(profile.filters)]
            with cluster.without(removed):
                for plugin, mask in zip(profile.filters, masks, strict=True):
                    if plugin.resolvable:
                        mask = plugin.filter(pod, cluster)
                    if mask is not None and not mask[slot]:
                        one[0] = slot
                        return list(plugin.reason_counts(pod, cluster, one))
            return None

        def fits(slot: int, removed: Sequence[PodRecord]) -> bool:
            return static_fits(slot) and all(
                plugin.fits_without(pod, cluster, slot, removed) for plugin in dependent
            )

        return check, fits

    @staticmethod
    def _evictions(pod: PodInfo, profile: Profile, cluster: ClusterState, slots: np.ndarray) -> EvictionCheck:
        """The profile's filters on the candidate `slots` as pods are evicted there (`EvictionCheck`):
        the filters evictions cannot change, once; the resolvable ones that constrain the pod as
        `EvictionTerms` where they can, else node by node (`fits_without`)."""
        passes = np.ones(len(slots), dtype=bool)
        terms = []
        others: list[FilterPlugin] = []
        for plugin in profile.filters:
            mask = plugin.filter(pod, cluster)
            if mask is None:
                continue  # the plugin does not constrain this pod: no pod needs to move for it
            if not plugin.resolvable:
                passes &= mask[slots]
                continue
            found = plugin.eviction_terms(pod, cluster, slots)
            if found is None:
                others.append(plugin)
            else:
                terms.append(found)
        if not others:
            return EvictionCheck(slots, passes, terms)

        def node_fits(slot: int, removed: Sequence[PodRecord]) -> bool:
            return all(plugin.fits_without(pod, cluster, slot, removed) for plugin in others)

        return EvictionCheck(slots, passes, terms, node_fits)

    @staticmethod
    def _decide(cluster: ClusterState, slots: np.ndarray, decision: Decision, top: int, weighed: Weighed) -> None:
        """The best of the scored candidates `slots`, with the `top` best scores."""
        best = weighed.best()
        decision.node = cluster.names[slots[best]]
        decision.weighed = weighed
        decision.feasible = int(slots.size)
        if top == 1:
            decision.top = [weighed.node_score(cluster, best)]
        elif top:
            decision.top = [weighed.node_score(cluster, i) for i in weighed.order[:top]]

    @staticmethod
    def weigh(pod: PodInfo, profile: Profile, cluster: ClusterState, slots: np.ndarray,
              raw: list[np.ndarray | None] | None = None) -> Weighed:
        """Every score plugin on the candidate `slots`, normalised and weighted, and the candidates
        best first; shared with `placer explain`, which scores nodes the cycle would not pick.
        `raw`, if given, gets each plugin's raw scores (None where it does not apply)."""
        totals = np.zeros(slots.size, dtype=np.int64)
        per_plugin: list[tuple[str, np.ndarray | None]] = []
        for plugin, weight in profile.scores:
            if plugin.pre_score(pod, cluster):
                values = plugin.score(pod, cluster, slots)
                if raw is not None:
                    raw.append(values)
                scores = plugin.normalize(values)
                totals += scores if weight == 1 else weight * scores
                per_plugin.append((plugin.name, scores))
            else:  # the plugin does not apply: 0 on every node
                if raw is not None:
                    raw.append(None)
                per_plugin.append((plugin.name, None))
        return Weighed(slots, totals, per_plugin, cluster.name_rank())

    @staticmethod
    def assume(pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState) -> None:
        """Count the pod on its chosen node and reserve what its plugins found there (kube's assume
        and Reserve), before the binding is sent: the next decision already sees both."""
        assert decision.node is not None
        cluster.assume(pod, decision.node)
        for plugin in binding_points(profile).reserves:
            reservation = plugin.reserve(pod, cluster, decision.node)
            if reservation is not None:
                decision.reservations[plugin.name] = reservation

    @staticmethod
    def forget(pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState) -> None:
        """Undo `assume`: the binding failed. (A pod of that name re-created and assumed meanwhile
        keeps its room: only this pod's reservations are undone then.)"""
        by_name = binding_points(profile).by_name
        for name in reversed(list(decision.reservations)):
            plugin = by_name.get(name)
            reservation = decision.reservations.pop(name)
            if isinstance(plugin, ReservePlugin):
                plugin.unreserve(pod, cluster, reservation)
        cluster.forget(pod.key, pod)

    # ----------------------------------------------------------------- Permit

    def permit(self, pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState) -> Permit:
        """kube's RunPermitPlugins, after `assume`: the first rejection wins; otherwise every plugin
        that asks the pod to wait holds it (each wait capped at 15 minutes) and the pod joins
        `waiting` until they all allow it (`WaitingPod`)."""
        assert decision.node is not None
        pending: dict[str, float] = {}
        holders: list[PermitPlugin[Any]] = []
        for plugin in binding_points(profile).permits:
            answer = plugin.permit(pod, cluster, decision.node, self.waiting)
            if answer.code is PermitCode.REJECT:
                decision.permit = Permit(PermitCode.REJECT, answer.message, plugin=plugin.name)
                return decision.permit
            if answer.code is PermitCode.WAIT:
                pending[plugin.name] = min(max(answer.timeout, 0.0), MAX_PERMIT_TIMEOUT)
                holders.append(plugin)
        if not pending:
            decision.permit = ALLOW
            return ALLOW
        self.done_waiting(pod)  # (an earlier wait of the pod never collected: replaced)
        self.waiting.add(WaitingPod(pod, decision.node, pending))
        self._held_by[pod.key] = tuple(holders)
        for plugin in holders:
            held = self._holders.get(id(plugin))
            self._holders[id(plugin)] = (plugin, 1 if held is None else held[1] + 1)
        decision.permit = Permit(PermitCode.WAIT, timeout=max(pending.values()))
        return decision.permit

    def done_waiting(self, pod: PodInfo) -> WaitingPod | None:
        """The pod's wait on Permit is over (decided, or abandoned): it leaves `waiting`."""
        waiting = self.waiting.remove(pod.key)
        for plugin in self._held_by.pop(pod.key, ()):
            _, count = self._holders[id(plugin)]
            if count > 1:
                self._holders[id(plugin)] = (plugin, count - 1)
            else:
                del self._holders[id(plugin)]
        return waiting

    def unpermit(self, pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState) -> None:
        """The pod will not be bound after all: its Permit plugins undo what they counted (kube runs
        Unreserve for them)."""
        if decision.permit is None:
            return
        self.done_waiting(pod)
        for plugin in reversed(binding_points(profile).permits):
            plugin.unpermit(pod, cluster, self.waiting)

    def pod_updated(self, pod: PodInfo, cluster: ClusterState) -> None:
        """A newer version of a pod came from the watch: the Permit plugins holding pods hear it."""
        if self._holders:
            for plugin, _ in list(self._holders.values()):
                plugin.pod_updated(pod, cluster, self.waiting)

    def pod_deleted(self, key: str) -> None:
        """A waiting pod deleted is rejected (kube's RejectWaitingPod: "removed")."""
        waiting = self.waiting.get(key)
        if waiting is not None:
            waiting.reject("", "removed")

    # ----------------------------------------------------------------- PreBind, PostBind

    @staticmethod
    def pre_bind(
        pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState
    ) -> list[tuple[PreBindPlugin[Any], PreBind]]:
        """Each PreBind plugin's work for the pod, in order (kube's PreBindPreFlight, then what its
        PreBind does); empty when none has any: the pod is bound at once."""
        assert decision.node is not None
        plans: list[tuple[PreBindPlugin[Any], PreBind]] = []
        for plugin in binding_points(profile).pre_binds:
            try:
                plan = plugin.pre_bind(pod, cluster, decision.node, decision.reservations.get(plugin.name))
            except Exception as error:
                raise PluginFailed(plugin, error) from error
            if plan is not None and (plan.writes or plan.wait is not None or plan.preflight):
                plans.append((plugin, plan))
        return plans

    @staticmethod
    def post_bind(
        pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState
    ) -> list[tuple[PostBindPlugin[Any], Write]]:
        """The PostBind plugins told that the pod is bound; the writes they ask for."""
        assert decision.node is not None
        return [
            (plugin, write)
            for plugin in binding_points(profile).post_binds
            for write in plugin.post_bind(pod, cluster, decision.node) or ()
        ]

    def _nodes_to_score(
        self, feasible: np.ndarray, profile: Profile, cluster: ClusterState, all_nodes: int, pod: PodInfo,
        allowed: np.ndarray | None = None,
    ) -> np.ndarray:
        """The first feasible nodes in node-tree order from the rotating start index, as many as
        `percentageOfNodesToScore` asks; advances the index past the nodes examined. A pod
        nominated to a node that fits goes there (kube's `evaluateNominatedNode`). With a
        PreFilterResult (`allowed`), only its nodes are scanned, as kube's list of them."""
        nominated = cluster.nominated.get(pod.key)
        node = nominated.node if nominated is not None else pod.nominated_node
        slot = cluster.index.get(node) if node else None
        if slot is not None and feasible[slot]:
            return np.array([slot], dtype=np.int64)
        order = cluster.scan_order()
        count = all_nodes
        if allowed is not None:
            order = order[allowed[order]]
            count = int(order.size)
            if count == 0:
                return order
        if not feasible.size or not feasible[feasible.argmax()]:  # no node fits: every one examined
            self.next_start_index = (self.next_start_index + count) % all_nodes
            return order[:0]
        start = self.next_start_index % count
        wanted = nodes_to_find(profile.percentage_of_nodes_to_score, count)
        window = 2 * (wanted + 1)
        if window < count:
            # the scan usually ends well before going round: the next `window` nodes first, the
            # whole round only when they hold too few feasible nodes
            end = start + window
            chunk = order[start:end] if end <= count else np.concatenate((order[start:], order[: end - count]))
            found = feasible[chunk].nonzero()[0]
            if found.size > wanted:
                # kube-scheduler stops at the first feasible node beyond those it needs and counts
                # every node before it as processed
                self.next_start_index = (self.next_start_index + int(found[wanted])) % all_nodes
                return chunk[found[:wanted]]
        rotated = np.concatenate((order[start:], order[:start])) if start else order
        positions = feasible[rotated].nonzero()[0]
        if positions.size > wanted:
            examined = int(positions[wanted])
            positions = positions[:wanted]
        else:
            examined = count
        self.next_start_index = (self.next_start_index + examined) % all_nodes
        return rotated[positions]

    @staticmethod
    def _failure_reasons(
        pod: PodInfo, profile: Profile, cluster: ClusterState, within: np.ndarray | None = None,
        masks: Sequence[np.ndarray | None] = (),
    ) -> tuple[Counter[str], list[FilterPlugin], np.ndarray]:
        """Each node's reasons come from the first filter that rejected it (kube stops at a node's
        first failing plugin); also which filters did, and per slot whether evicting pods may undo
        its rejection (what preemption may try). Only the nodes `within` are looked at, if given.
        The first filters' answers may be given (`masks`: the cycle's); the filters after the one
        that left no node are not asked (they reject none of them)."""
        remaining = cluster.present[: cluster.size].copy()
        if within is not None:
            remaining &= within
        reasons: Counter[str] = Counter()
        rejected_by: list[FilterPlugin] = []
        resolvable = np.zeros(cluster.size, dtype=bool)
        for index, plugin in enumerate(profile.filters):
            if not remaining.size or not remaining[remaining.argmax()]:  # no node left (argmax: the first True)
                break
            mask = masks[index] if index < len(masks) else plugin.filter(pod, cluster)
            if mask is None:
                continue
            rejected = np.flatnonzero(remaining & ~mask)
            if rejected.size:
                reasons.update(plugin.reason_counts(pod, cluster, rejected))
                rejected_by.append(plugin)
                resolvable[rejected] = plugin.resolvable_nodes(pod, cluster, rejected)
            remaining &= mask
        return reasons, rejected_by, resolvable
