"""Why a pod goes where it goes, or nowhere (`placer explain`): pure, a cluster and a profile in.

A scheduling cycle stops at a node's first failing filter, which is enough to place a pod but not
to tell its owner what to change: a node that is both tainted and full only says "tainted". Here
every filter of the profile runs on every node and each one's reasons are kept, in the profile's
filter order, with kube's wording as the plugins give it. A reason the pod itself causes (a
PreFilter's, such as a missing claim, or an invalid pod) applies to every node and comes first; so
does, on the nodes a PreFilter's node set leaves out (NodeAffinity's `metadata.name In`), kube's
`node(s) didn't satisfy plugin(s) [NodeAffinity]`.

A pending pod's node, message and scores are those of a real cycle (`Scheduler.schedule`, as
`placer simulate` runs it). A bound pod is taken off its node first, then every node it would pass
is scored with its own node, so that its node's scores read against the best others.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import FilterPlugin, Preemption, PreFilterResult
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.runtime import Narrowed, NodeScore, Scheduler, narrowing_conflict

__all__ = ["Explanation", "explain", "node_reasons"]


@dataclass(slots=True)
class Explanation:
    """What `placer explain` reports for one pod and profile."""

    pod: str
    profile: str
    #: where the pod is bound, else where a cycle would place it (its nominated node when only
    #: preemption makes room), else None
    node: str | None
    bound: bool
    #: kube's FitError (`0/N nodes are available: ...`) when no node fits a pending pod, else None
    message: str | None
    #: every node some filter refused -> each filter's reasons, by node name
    rejected: dict[str, list[str]]
    nodes: int
    #: best first; a bound pod's own node is always among them (last when below the top)
    scores: list[NodeScore] = field(default_factory=list)
    #: how many nodes were scored: a pending pod's as many as `percentageOfNodesToScore` takes; a
    #: bound pod's every feasible node and its own
    scored: int = 0
    #: the place of `node` among the nodes scored (1 = best), None when it was not scored
    node_rank: int | None = None
    preemption: Preemption | None = None

    @property
    def feasible(self) -> int:
        """How many nodes every filter accepts."""
        return self.nodes - len(self.rejected)


def _fallback(plugin: FilterPlugin) -> str:
    return plugin.reason or f"rejected by {plugin.name}"


def _per_slot(plugin: FilterPlugin, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Iterator[
    tuple[int, list[str]]
]:
    """(slot, the filter's reasons there) for each slot it rejected: one call when every node gave
    the same single reason (most filters have only one), else one per node."""
    counts = plugin.reason_counts(pod, cluster, rejected)
    if len(counts) == 1 and sum(counts.values()) == rejected.size:
        reasons = list(counts)
        for slot in rejected.tolist():
            yield slot, reasons
        return
    one = np.empty(1, dtype=np.int64)
    for slot in rejected.tolist():
        one[0] = slot
        yield slot, list(plugin.reason_counts(pod, cluster, one)) or [_fallback(plugin)]


def _pod_reasons(pod: PodInfo, profile: Profile, cluster: ClusterState) -> tuple[list[str], Narrowed | None]:
    """The reasons that concern the pod rather than any node, each once; and the nodes the
    PreFilters' node sets leave (None: every node), as the cycle intersects them."""
    if pod.error is not None:
        return [pod.error], None
    found: list[str] = []
    names: frozenset[str] | None = None
    narrowing: tuple[FilterPlugin, ...] = ()
    for plugin in profile.filters:
        reason = plugin.pre_filter(pod, cluster)
        if isinstance(reason, PreFilterResult):
            if names is not None and not names:
                continue  # no node left already: the cycle stopped at the first conflict
            narrowing += (plugin,)
            names = reason.node_names if names is None else names & reason.node_names
            if not names:
                reason = narrowing_conflict(narrowing)
        if isinstance(reason, str) and reason not in found:
            found.append(reason)
    return found, None if not names else Narrowed.of(names, narrowing, cluster)


def _rejections(pod: PodInfo, profile: Profile, cluster: ClusterState) -> dict[int, list[str]]:
    """Slot -> the reasons of every filter that refused it, in the profile's order, each once."""
    present = np.flatnonzero(cluster.present[: cluster.size])
    pod_reasons, narrowed = _pod_reasons(pod, profile, cluster)
    found: dict[int, list[str]] = {int(slot): list(pod_reasons) for slot in present} if pod_reasons else {}
    if pod.error is not None:
        return found  # an invalid pod is not put to the filters
    if narrowed is not None:
        for slot in present[~narrowed.allowed[present]].tolist():
            found.setdefault(slot, []).append(narrowed.reason)
    for plugin in profile.filters:
        mask = plugin.filter(pod, cluster)
        if mask is None:
            continue
        rejected = present[~mask[present]]
        if not rejected.size:
            continue
        for slot, reasons in _per_slot(plugin, pod, cluster, rejected):
            have = found.setdefault(slot, [])
            have.extend(reason for reason in reasons if reason not in have)
    return found


def _by_name(cluster: ClusterState, found: dict[int, list[str]]) -> dict[str, list[str]]:
    return {cluster.names[slot]: found[slot] for slot in sorted(found, key=lambda slot: cluster.names[slot])}


def node_reasons(pod: PodInfo, profile: Profile, cluster: ClusterState) -> dict[str, list[str]]:
    """Node name -> the reasons of every filter that refused it (not only the first), sorted by name."""
    return _by_name(cluster, _rejections(pod, profile, cluster))


def explain(pod: PodInfo, profile: Profile, cluster: ClusterState, top: int = 3) -> Explanation:
    """Explain `pod` under `profile`: bound pods as if not yet placed, pending ones as a cycle decides.
    Leaves `cluster` as it found it."""
    if pod.node_name:
        return _explain_bound(pod, profile, cluster, top)
    decision = Scheduler().schedule(pod, profile, cluster, top=top)
    node = decision.preemption.node if decision.preemption is not None else decision.node
    return Explanation(
        pod=pod.key, profile=profile.name, node=node, bound=False, message=decision.message,
        rejected=node_reasons(pod, profile, cluster), nodes=cluster.node_count, scores=list(decision.top),
        scored=decision.feasible, node_rank=1 if decision.node is not None else None,
        preemption=decision.preemption,
    )


def _explain_bound(pod: PodInfo, profile: Profile, cluster: ClusterState, top: int) -> Explanation:
    """Every node the pod would pass, and its own, scored with the pod off its node's accounting."""
    assert pod.node_name
    record = cluster.pods.get(pod.key)
    explanation = Explanation(
        pod=pod.key, profile=profile.name, node=pod.node_name, bound=True, message=None, rejected={},
        nodes=cluster.node_count,
    )
    with cluster.without([record] if record is not None else []):
        found = _rejections(pod, profile, cluster)
        explanation.rejected = _by_name(cluster, found)
        own = cluster.index.get(pod.node_name)
        candidates = [int(s) for s in np.flatnonzero(cluster.present[: cluster.size]) if int(s) not in found]
        if own is not None and own in found:
            candidates.append(own)  # refused now (a taint added since?): still scored, and listed as refused
        if not candidates:
            return explanation
        slots = np.asarray(candidates, dtype=np.int64)
        weighed = Scheduler.weigh(pod, profile, cluster, slots)
        explanation.scored = len(candidates)
        order = weighed.order.tolist()
        explanation.scores = [weighed.node_score(cluster, i) for i in order[:top]]
        if own is not None:
            position = order.index(candidates.index(own))
            explanation.node_rank = position + 1
            if position >= top:
                explanation.scores.append(weighed.node_score(cluster, order[position]))
    return explanation
