"""The scheduling cycle: filter, pick the nodes to score, score, normalise, weigh, select.

Kept apart from the plugins, as kube-scheduler's `framework/runtime`: this module knows the
order of the extension points and kube-scheduler's rules around them
(`percentageOfNodesToScore`, the rotating start index, the `0/N nodes are available` message),
and nothing about what any plugin does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import FilterPlugin, ReservePlugin
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Decision",
    "NodeScore",
    "Scheduler",
    "fit_error_message",
    "nodes_to_find",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_MESSAGE = "no nodes available to schedule pods"


@dataclass(frozen=True, slots=True)
class NodeScore:
    node: str
    total: int
    plugins: dict[str, int]

    def as_dict(self) -> dict[str, object]:
        return {"node": self.node, "total": self.total, "plugins": dict(self.plugins)}


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

    @property
    def scheduled(self) -> bool:
        return self.node is not None


def nodes_to_find(percentage: int, all_nodes: int) -> int:
    """kube-scheduler's `numFeasibleNodesToFind`: how many feasible nodes are enough to score."""
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return all_nodes
    if percentage == 0:
        percentage = max(50 - all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return all_nodes
    return max(all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def fit_error_message(all_nodes: int, reasons: Counter[str], pod_reason: str | None = None) -> str:
    """kube-scheduler's FitError: `0/5 nodes are available: 1 node(s) ..., 4 Insufficient cpu.`, or,
    when a PreFilter rejected the pod itself, `0/5 nodes are available: <that reason>.`"""
    if pod_reason is not None:
        return f"0/{all_nodes} nodes are available: {pod_reason}."
    pairs = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{all_nodes} nodes are available: {', '.join(pairs)}."


class Scheduler:
    """Runs scheduling cycles; holds kube-scheduler's rotating start index across pods."""

    def __init__(self) -> None:
        self.next_start_index = 0

    def schedule(self, pod: PodInfo, profile: Profile, cluster: ClusterState, top: int = 3) -> Decision:
        """Decide for one pod; changes nothing in `cluster` (the caller assumes the pod)."""
        decision = Decision(pod=pod.key, profile=profile.name, node=None)
        if pod.error is not None:
            decision.message = pod.error
            return decision
        all_nodes = cluster.node_count
        if all_nodes == 0:
            decision.message = NO_NODES_MESSAGE
            return decision

        for plugin in profile.filters:
            pod_reason = plugin.pre_filter(pod, cluster)
            if pod_reason is not None:
                decision.message = fit_error_message(all_nodes, Counter(), pod_reason)
                decision.rejected_by, decision.wake_on = (plugin.name,), plugin.events
                return decision

        feasible = cluster.present[: cluster.size].copy()
        for plugin in profile.filters:
            mask = plugin.filter(pod, cluster)
            if mask is not None:
                feasible &= mask
                if not feasible.any():
                    break
        slots = self._nodes_to_score(feasible, profile, cluster, all_nodes)
        if slots.size == 0:
            reasons, rejected_by = self._failure_reasons(pod, profile, cluster)
            decision.reasons = dict(reasons)
            decision.message = fit_error_message(all_nodes, reasons)
            decision.rejected_by = tuple(plugin.name for plugin in rejected_by)
            decision.wake_on = frozenset().union(*(plugin.events for plugin in rejected_by))
            return decision

        totals = np.zeros(slots.size, dtype=np.int64)
        per_plugin: list[tuple[str, np.ndarray | None]] = []
        for plugin, weight in profile.scores:
            if plugin.pre_score(pod, cluster):
                scores = plugin.normalize(plugin.score(pod, cluster, slots))
                totals += weight * scores
                per_plugin.append((plugin.name, scores))
            else:  # the plugin does not apply: 0 on every node
                per_plugin.append((plugin.name, None))

        ranks = cluster.name_rank()[slots]
        order = np.lexsort((ranks, -totals))  # best total first, then smaller node name
        decision.node = cluster.names[slots[order[0]]]
        decision.feasible = int(slots.size)
        decision.top = [
            NodeScore(
                node=cluster.names[slots[i]],
                total=int(totals[i]),
                plugins={name: 0 if scores is None else int(scores[i]) for name, scores in per_plugin},
            )
            for i in order[:top]
        ]
        return decision

    @staticmethod
    def assume(pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState) -> None:
        """Count the pod on its chosen node and reserve what its filters found there (kube's assume
        and Reserve), before the binding is sent: the next decision already sees both."""
        assert decision.node is not None
        cluster.assume(pod, decision.node)
        for plugin in profile.filters:
            if isinstance(plugin, ReservePlugin):
                reservation = plugin.reserve(pod, cluster, decision.node)
                if reservation is not None:
                    decision.reservations[plugin.name] = reservation

    @staticmethod
    def forget(pod: PodInfo, decision: Decision, profile: Profile, cluster: ClusterState) -> None:
        """Undo `assume`: the binding failed."""
        for plugin in reversed(profile.filters):
            reservation = decision.reservations.pop(plugin.name, None)
            if reservation is not None and isinstance(plugin, ReservePlugin):
                plugin.unreserve(pod, cluster, reservation)
        cluster.forget(pod.key)

    def _nodes_to_score(
        self, feasible: np.ndarray, profile: Profile, cluster: ClusterState, all_nodes: int
    ) -> np.ndarray:
        """The first feasible nodes in node-tree order from the rotating start index, as many as
        `percentageOfNodesToScore` asks; advances the index past the nodes examined."""
        order = cluster.scan_order()
        start = self.next_start_index % all_nodes
        rotated = np.concatenate((order[start:], order[:start])) if start else order
        positions = np.flatnonzero(feasible[rotated])
        wanted = nodes_to_find(profile.percentage_of_nodes_to_score, all_nodes)
        if positions.size > wanted:
            # kube-scheduler stops at the first feasible node beyond those it needs and counts
            # every node before it as processed
            examined = int(positions[wanted])
            positions = positions[:wanted]
        else:
            examined = all_nodes
        self.next_start_index = (start + examined) % all_nodes
        return rotated[positions]

    @staticmethod
    def _failure_reasons(
        pod: PodInfo, profile: Profile, cluster: ClusterState
    ) -> tuple[Counter[str], list[FilterPlugin]]:
        """Each node's reasons come from the first filter that rejected it; also which filters did."""
        remaining = cluster.present[: cluster.size].copy()
        reasons: Counter[str] = Counter()
        rejected_by: list[FilterPlugin] = []
        for plugin in profile.filters:
            mask = plugin.filter(pod, cluster)
            if mask is None:
                continue
            rejected = np.flatnonzero(remaining & ~mask)
            if rejected.size:
                reasons.update(plugin.reason_counts(pod, cluster, rejected))
                rejected_by.append(plugin)
            remaining &= mask
        return reasons, rejected_by
