"""Vectorised label matching shared by the plugins that read node labels."""

from __future__ import annotations

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.objects import NodeSelectorRequirement, NodeSelectorTerm, go_int


def label_equals(cluster: ClusterState, key: str, value: str) -> np.ndarray:
    """Slots whose label `key` equals `value`; with value "" the key need only exist."""
    column = cluster.label_column(key)
    if value == "":
        return np.not_equal(column, None)
    return np.equal(column, value)


def _compare_integers(column: np.ndarray, operator: str, bound: int) -> np.ndarray:
    """Gt/Lt: label values read as Go integers; absent or non-integer values never match."""
    result = np.zeros(len(column), dtype=bool)
    for slot, value in enumerate(column):
        number = go_int(value) if value is not None else None
        if number is not None:
            result[slot] = number > bound if operator == "Gt" else number < bound
    return result


def requirement_mask(
    cluster: ClusterState, requirement: NodeSelectorRequirement, field: bool = False
) -> np.ndarray:
    """Where a node selector requirement holds; `field` reads `metadata.name` instead of labels."""
    column = cluster.names[: cluster.size] if field else cluster.label_column(requirement.key)
    operator = requirement.operator
    if operator in ("In", "NotIn"):
        found = np.zeros(len(column), dtype=bool)
        for value in requirement.values:
            found |= np.equal(column, value)
        return found if operator == "In" else ~found
    if operator == "Exists":
        return np.not_equal(column, None)
    if operator == "DoesNotExist":
        return np.equal(column, None)
    return _compare_integers(column, operator, int(requirement.values[0]))


def term_mask(cluster: ClusterState, term: NodeSelectorTerm) -> np.ndarray:
    """A node selector term: every requirement holds; an empty term matches nothing."""
    if not term.expressions and not term.fields:
        return np.zeros(cluster.size, dtype=bool)
    mask = np.ones(cluster.size, dtype=bool)
    for requirement in term.expressions:
        mask &= requirement_mask(cluster, requirement)
    for requirement in term.fields:
        mask &= requirement_mask(cluster, requirement, field=True)
    return mask


def required_affinity_mask(
    cluster: ClusterState,
    node_selector: dict[str, str],
    required_terms: tuple[NodeSelectorTerm, ...] | None,
) -> np.ndarray | None:
    """kube's `nodeaffinity.GetRequiredNodeAffinity(pod).Match` over every slot: the node carries every
    `nodeSelector` label and matches one of the required terms (None: the pod has neither, all match).
    The same mask NodeAffinity's filter computes; PodTopologySpread's `nodeAffinityPolicy: Honor` reads it."""
    if not node_selector and required_terms is None:
        return None
    mask = np.ones(cluster.size, dtype=bool)
    for label, value in node_selector.items():
        mask &= np.equal(cluster.label_column(label), value)
    if required_terms is not None:
        matched = np.zeros(cluster.size, dtype=bool)
        for term in required_terms:
            matched |= term_mask(cluster, term)
        mask &= matched
    return mask
