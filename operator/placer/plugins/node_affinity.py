"""NodeAffinity — `spec.nodeSelector` and node affinity, as kube-scheduler's plugin.

Filter: the node must carry every `nodeSelector` label and match at least one term of
`requiredDuringSchedulingIgnoredDuringExecution` (each term: all `matchExpressions` with
operators In, NotIn, Exists, DoesNotExist, Gt, Lt, and all `matchFields` on `metadata.name`).
Reason: "node(s) didn't match Pod's node affinity/selector".

PreFilter (kube's): when every required term names nodes (`matchFields` `metadata.name In`), only
those nodes are evaluated (a `PreFilterResult`): every other node reads "node(s) didn't satisfy
plugin(s) [NodeAffinity]", and preemption does not try it. When no name survives (`In [a]` and
`In [b]` in one term), the pod fits nowhere — "pod affinity terms conflict", kube v1.36's
`0/N nodes are available: pod affinity terms conflict.`

Score: the sum of the weights of the pod's `preferredDuringSchedulingIgnoredDuringExecution`
terms the node matches, normalised as kube-scheduler does (`100 * sum / max(sum)`). A pod
without preferred terms is skipped: it scores 0 on every node.

Pods with the same selector and affinity share one evaluation until node labels change.

Args: none.

Example profile::

    spec:
      schedulerName: my-scheduler
      filters: [{name: NodeAffinity}]
      scores: [{name: NodeAffinity, weight: 2}]
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    ClusterEvent,
    FilterPlugin,
    NoArgs,
    PreFilterResult,
    ScorePlugin,
    StaticCache,
    default_normalize,
)
from placer.engine.node_selectors import term_mask
from placer.engine.objects import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodInfo, go_int

CONFLICT = "pod affinity terms conflict"
NAME_FIELD = "metadata.name"


def required_node_names(terms: tuple[NodeSelectorTerm, ...]) -> set[str] | None:
    """kube's NodeAffinity PreFilter: the only nodes the required terms can admit, when every term
    names its nodes (`matchFields` `metadata.name In`, intersected within a term, united across
    terms); None when some term does not (any node may do)."""
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for requirement in term.fields:
            if requirement.key == NAME_FIELD and requirement.operator == "In":
                values = set(requirement.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


def _holds(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    """One requirement on one node's label (or name) value, as `requirement_mask` over columns."""
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    number, bound = go_int(value) if value is not None else None, int(requirement.values[0])
    if number is None:
        return False
    return number > bound if operator == "Gt" else number < bound


def node_matches(pod: PodInfo, node: NodeInfo) -> bool:
    """kube's RequiredNodeAffinity.Match on one node: the nodeSelector, and one required term (an
    empty term matches nothing)."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    if pod.required_terms is None:
        return True
    return any(
        (term.expressions or term.fields)
        and all(_holds(r, node.labels.get(r.key)) for r in term.expressions)
        and all(_holds(r, node.name if r.key == NAME_FIELD else None) for r in term.fields)
        for term in pod.required_terms
    )


class NodeAffinity(FilterPlugin[NoArgs], ScorePlugin[NoArgs]):
    name: ClassVar[str] = "NodeAffinity"
    reason: ClassVar[str] = "node(s) didn't match Pod's node affinity/selector"
    # kube's EventsToRegister: a node added or relabelled (a pending pod's selector cannot change
    # once it is ungated)
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE})

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        self._masks: StaticCache[np.ndarray] = StaticCache()
        self._preferences: StaticCache[np.ndarray] = StaticCache()

    batch_reach: ClassVar[str] = BATCH_NONE  # node labels against the pod's selector and affinity

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.node_selector, pod.required_terms, pod.preferred_terms

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | PreFilterResult | None:
        if not pod.required_terms:  # no required affinity, or no terms: kube returns no node set
            return None
        names = required_node_names(pod.required_terms)
        if names is None:
            return None
        return PreFilterResult(frozenset(names)) if names else CONFLICT

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not pod.node_selector and pod.required_terms is None:
            return None
        key = (tuple(sorted(pod.node_selector.items())), pod.required_terms)
        mask = self._masks.get(cluster, key)
        if mask is None:
            mask = np.ones(cluster.size, dtype=bool)
            for label, value in pod.node_selector.items():
                mask &= np.equal(cluster.label_column(label), value)
            if pod.required_terms is not None:
                matched = np.zeros(cluster.size, dtype=bool)
                for term in pod.required_terms:
                    matched |= term_mask(cluster, term)
                mask &= matched
            self._masks.put(key, mask)
        return mask

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's isSchedulableAfterNodeChange: a node that matches now and did not before."""
        if not isinstance(new, NodeInfo):
            return True
        return node_matches(pod, new) and not (isinstance(old, NodeInfo) and node_matches(pod, old))

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return bool(pod.preferred_terms)

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        weights = self._preferences.get(cluster, pod.preferred_terms)
        if weights is None:
            weights = np.zeros(cluster.size, dtype=np.int64)
            for weight, term in pod.preferred_terms:
                weights += weight * term_mask(cluster, term)
            self._preferences.put(pod.preferred_terms, weights)
        return weights[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return default_normalize(raw)
