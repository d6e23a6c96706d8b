"""Incremental counts of pods per node for the plugins that relate pods to pods.

kube-scheduler recomputes these in every PreFilter by walking every pod of every node; here they
are kept up to date as pods are counted and uncounted on nodes (bound, assumed, deleted), so a
scheduling cycle reads per-node columns and sums them per topology domain with numpy:

- `MatchingPods`: per node, how many pods match a query (namespaces + label selector) — the
  incoming pod's affinity terms and spread constraints ask these. A query is registered the
  first time it is asked (one scan of the pods then) and kept in step afterwards; queries are
  indexed by a `key=value` their selector requires, so counting a pod checks only the queries
  that could match it. The least recently asked are dropped beyond `LIMIT`.
- `PodTerms`: per node, how many pods carry each (anti-)affinity term — the existing pods' side
  of inter-pod affinity (kube's `PodsWithAffinity` / `PodsWithRequiredAntiAffinity`), one column
  per distinct term, so the replicas of a workload share one; which terms match an incoming pod
  is remembered per namespace and labels (`PodTerms.matching`), so a cycle tests none of them
  while the terms present stay as they were.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from placer.engine.cluster import ClusterState, PodTracker, SlotColumns
from placer.engine.labels import LabelSelector, Requirement
from placer.engine.objects import PodInfo
from placer.engine.relations import NONE, AffinityTerm

__all__ = ["MatchingPods", "PodQuery", "PodTerms", "TermRole", "label_counts"]


@dataclass(frozen=True, slots=True)
class PodQuery:
    """Pods of these namespaces (None: any) whose labels match; `skip_deleting` leaves out pods being
    deleted (PodTopologySpread does, as kube's `countPodsMatchSelector`)."""

    namespaces: frozenset[str] | None
    selector: LabelSelector
    skip_deleting: bool = False
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # kept: a cycle's query is looked up more than once (its column, the LRU order)
        value = self._hash
        if not value:
            value = hash((self.namespaces, self.selector, self.skip_deleting))
            object.__setattr__(self, "_hash", value)
        return value

    def matches(self, pod: PodInfo) -> bool:
        if self.skip_deleting and pod.deleting:
            return False
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)


class MatchingPods(PodTracker):
    LIMIT = 4096

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._columns = SlotColumns(cluster.capacity)
        self._anchored: dict[tuple[str, str], list[PodQuery]] = {}
        self._unanchored: list[PodQuery] = []
        self._recent: OrderedDict[PodQuery, None] = OrderedDict()

    def counts(self, query: PodQuery) -> np.ndarray:
        """Per slot in [0, cluster.size): how many counted pods there match `query`."""
        size = self.cluster.size
        if query.selector.nothing or (query.namespaces is not None and not query.namespaces):
            return np.zeros(size, dtype=np.int32)
        column = self._columns.get(query)
        if column is not None:
            self._recent.move_to_end(query)
            return column[:size]
        column = self._register(query)
        return column[:size]

    def _register(self, query: PodQuery) -> np.ndarray:
        if len(self._recent) >= self.LIMIT:
            self._forget(next(iter(self._recent)))
        column = self._columns.column(query)
        cluster = self.cluster
        for record in cluster.pods.values():
            slot = cluster.index.get(record.node)
            if slot is not None and query.matches(record.pod):
                column[slot] += 1
        anchor = query.selector.anchor()
        if anchor is None:
            self._unanchored.append(query)
        else:
            self._anchored.setdefault(anchor, []).append(query)
        self._recent[query] = None
        return column

    def _forget(self, query: PodQuery) -> None:
        del self._recent[query]
        self._columns.drop(query)
        anchor = query.selector.anchor()
        if anchor is None:
            self._unanchored.remove(query)
        else:
            queries = self._anchored[anchor]
            queries.remove(query)
            if not queries:
                del self._anchored[anchor]

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        if self._anchored:
            anchored = self._anchored
            for item in pod.labels.items():
                for query in anchored.get(item, ()):
                    if query.matches(pod):
                        self._columns.column(query)[slot] += sign
        for query in self._unanchored:
            if query.matches(pod):
                self._columns.column(query)[slot] += sign

    def clear_slot(self, slot: int) -> None:
        self._columns.clear_slot(slot)

    def grow(self, capacity: int) -> None:
        self._columns.grow(capacity)


class TermRole:
    """Which side of inter-pod affinity a term of an existing pod plays."""

    REQUIRED_AFFINITY = "required-affinity"
    REQUIRED_ANTI_AFFINITY = "required-anti-affinity"
    PREFERRED = "preferred"  # weight > 0: affinity, weight < 0: anti-affinity


class PodTerms(PodTracker):
    """Per slot, how many counted pods carry each distinct (role, weight, term)."""

    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self._columns = SlotColumns(cluster.capacity)
        self._totals: dict[tuple[str, int, AffinityTerm], int] = {}
        self._distinct: Counter[str] = Counter()  # role -> distinct terms present
        self.version = 0  # moves when the set of distinct terms present changes
        # (role, namespace, labels) -> the keys of the terms of that role matching such a pod; valid
        # while the terms present and the Namespaces (namespaceSelectors read them) stay as they were
        self._matches: dict[tuple[str, str, frozenset[tuple[str, str]]], list[tuple[str, int, AffinityTerm]]] = {}
        self._matches_of: tuple[int, object, int] = (-1, None, -1)

    def _set_total(self, key: tuple[str, int, AffinityTerm], total: int) -> None:
        if total > 0:
            if key not in self._totals:
                self._distinct[key[0]] += 1
                self.version += 1
            self._totals[key] = total
        elif key in self._totals:
            del self._totals[key]
            self._distinct[key[0]] -= 1
            self._columns.drop(key)
            self.version += 1

    def _bump(self, key: tuple[str, int, AffinityTerm], slot: int, sign: int) -> None:
        self._columns.column(key)[slot] += sign
        self._set_total(key, self._totals.get(key, 0) + sign)

    def account(self, pod: PodInfo, slot: int, sign: int) -> None:
        relations = pod.relations
        if relations is NONE:
            return
        for term in relations.required_anti_affinity:
            self._bump((TermRole.REQUIRED_ANTI_AFFINITY, 0, term), slot, sign)
        for term in relations.required_affinity:
            self._bump((TermRole.REQUIRED_AFFINITY, 0, term), slot, sign)
        for weight, term in relations.preferred_affinity:
            self._bump((TermRole.PREFERRED, weight, term), slot, sign)
        for weight, term in relations.preferred_anti_affinity:
            self._bump((TermRole.PREFERRED, -weight, term), slot, sign)

    def terms(self, role: str) -> Iterator[tuple[int, AffinityTerm, np.ndarray]]:
        """(weight, term, per-slot count) of every term of that role some counted pod carries."""
        size = self.cluster.size
        for role_, weight, term in self._totals:
            if role_ == role:
                column = self._columns.get((role_, weight, term))
                assert column is not None
                yield weight, term, column[:size]

    def has(self, role: str) -> bool:
        """Whether any counted pod carries a term of that role."""
        return self._distinct[role] > 0

    def matching(
        self, role: str, pod: PodInfo, namespace_labels: Mapping[str, str]
    ) -> list[tuple[int, AffinityTerm, np.ndarray]]:
        """`terms(role)` narrowed to the terms matching `pod` (kube's `AffinityTerm.Matches`, with
        `namespace_labels` those of the pod's Namespace in the catalog). Which terms match is
        remembered per namespace and labels (a workload's replicas share it) until the terms present
        or the Namespaces change, so a cycle does not test every term of every workload."""
        catalog = self.cluster.catalog
        version, of, namespaces = self._matches_of
        if (
            version != self.version or of is not catalog or namespaces != catalog.version("Namespace")
            or len(self._matches) >= 4096
        ):
            self._matches.clear()
            self._matches_of = (self.version, catalog, catalog.version("Namespace"))
        shape = (role, pod.namespace, frozenset(pod.labels.items()))
        keys = self._matches.get(shape)
        if keys is None:
            keys = self._matches[shape] = [
                key for key in self._totals
                if key[0] == role and key[2].matches(pod.namespace, pod.labels, namespace_labels)
            ]
        size = self.cluster.size
        found = []
        for key in keys:
            column = self._columns.get(key)
            assert column is not None
            found.append((key[1], key[2], column[:size]))
        return found

    def clear_slot(self, slot: int) -> None:
        # the pods of a removed node no longer count; re-adding the node accounts them again
        for key, column in list(self._columns.items()):
            count = int(column[slot])
            if count:
                column[slot] = 0
                term_key: tuple[str, int, AffinityTerm] = key  # type: ignore[assignment]
                self._set_total(term_key, self._totals.get(term_key, 0) - count)

    def grow(self, capacity: int) -> None:
        self._columns.grow(capacity)


def label_counts(cluster: ClusterState, label_key: str, value: str) -> np.ndarray:
    """Per slot, how many pods there carry `label_key=value` (any namespace); kept incrementally."""
    query = PodQuery(None, LabelSelector((Requirement(label_key, "In", frozenset((value,))),)))
    return cluster.tracker(MatchingPods).counts(query)
