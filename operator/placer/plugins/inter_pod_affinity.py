"""InterPodAffinity — pods placed by where other pods are, as kube-scheduler's plugin of that name.

Filter (kube's PreFilter + Filter), in this order per node:

1. the incoming pod's required `podAffinity`: every term needs, in the node's domain of the term's
   `topologyKey`, a pod matching *all* the terms — "node(s) didn't match pod affinity rules". A
   node without a term's topology label fails. The first pod of a group may go where no such pod
   exists yet, when no pod anywhere matches the terms and the pod matches them itself;
2. the incoming pod's required `podAntiAffinity`: no pod matching a term in the node's domain of
   its `topologyKey` — "node(s) didn't match pod anti-affinity rules";
3. symmetry: no pod already placed whose required anti-affinity term matches the incoming pod in
   the node's domain of that term's key — "node(s) didn't satisfy existing pods anti-affinity rules".

A term selects pods by `labelSelector` in its `namespaces`, or the pod's own namespace when it lists
none; a `namespaceSelector` adds the Namespaces whose labels it matches (`{}`: every namespace);
`matchLabelKeys` / `mismatchLabelKeys` are merged into the selector with the pod's own values.
Pods counted are those bound and those assumed (bind in flight), so two replicas scheduled back to
back never land together.

Score: per topology domain, +weight for each pod matching one of the incoming pod's preferred
affinity terms, -weight for its preferred anti-affinity terms, +`hardPodAffinityWeight` for each
placed pod whose *required* affinity term matches the incoming pod, ±weight for each placed pod
whose preferred (anti-)affinity term matches it;
a node scores the sum over the domains it belongs to, min-max normalised onto 0..100 as kube does.
Skipped (0 everywhere) when nothing contributes, or, with `ignorePreferredTermsOfExistingPods`,
when the incoming pod has no preferred terms of its own (kube's PreScore Skip).

Counts are kept incrementally per node (`placer.engine.matching`): no cycle scans the pods, and
which existing pods' terms match the incoming pod is remembered per namespace and labels (the
replicas of a workload share it) until the terms present or the Namespaces change.

Args: `hardPodAffinityWeight` (0..100, default 1), `ignorePreferredTermsOfExistingPods` (default false).

Example profile (the default profile has it as a filter and a score of weight 2)::

    spec:
      schedulerName: my-scheduler
      filters: [{name: InterPodAffinity}]
      scores:
        - name: InterPodAffinity
          weight: 2
          args: {hardPodAffinityWeight: 5}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, StrictBool

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    MAX_NODE_SCORE,
    UNSIGNABLE,
    ClusterEvent,
    CycleMemo,
    FilterPlugin,
    PluginArgs,
    ScorePlugin,
)
from placer.engine.labels import LabelSelector
from placer.engine.matching import MatchingPods, PodQuery, PodTerms, TermRole
from placer.engine.objects import PodInfo
from placer.engine.relations import NONE, AffinityTerm

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
# a node's reason code -> its reason (0: the node passes)
REASONS = ("", AFFINITY_REASON, ANTI_AFFINITY_REASON, EXISTING_ANTI_AFFINITY_REASON)


class InterPodAffinityArgs(PluginArgs):
    hardPodAffinityWeight: int = Field(default=1, ge=0, le=100, strict=True)
    ignorePreferredTermsOfExistingPods: StrictBool = False


def _all_match(terms: tuple[AffinityTerm, ...], other: PodInfo) -> bool | None:
    """kube's podMatchesAllAffinityTerms (False with no terms); None when a term selects
    namespaces by label and `other`'s namespace is not listed (a hint then says yes)."""
    if not terms:
        return False
    for term in terms:
        if term.namespace_selector is not None and other.namespace not in term.namespaces:
            return None
        if not term.matches(other.namespace, other.labels, {}):
            return False
    return True


def namespace_labels(cluster: ClusterState, namespace: str) -> Mapping[str, str]:
    value = cluster.catalog.get("Namespace", namespace)
    return value.labels if value is not None else {}


def term_query(cluster: ClusterState, term: AffinityTerm) -> PodQuery:
    """The incoming pod's term as a query: its namespaces plus those its namespaceSelector selects
    (kube's `mergeAffinityTermNamespacesIfNotEmpty`; an empty selector selects every namespace)."""
    selector = term.namespace_selector
    if selector is None:
        return PodQuery(term.namespaces, term.selector)
    if selector.empty:
        return PodQuery(None, term.selector)
    selected = {name for _, name, ns in cluster.catalog.items("Namespace") if selector.matches(ns.labels)}
    return PodQuery(term.namespaces | selected, term.selector)


def all_terms_query(queries: list[PodQuery]) -> PodQuery:
    """Pods matching every one of the queries (kube's `podMatchesAllAffinityTerms`)."""
    namespaces: frozenset[str] | None = None
    requirements = []
    nothing = False
    for query in queries:
        if query.namespaces is not None:
            namespaces = query.namespaces if namespaces is None else namespaces & query.namespaces
        requirements.extend(query.selector.requirements)
        nothing = nothing or query.selector.nothing
    selector = LabelSelector(nothing=True) if nothing else LabelSelector.of(requirements)
    return PodQuery(namespaces, selector)


@dataclass(slots=True)
class _FilterState:
    fits: np.ndarray | None  # per slot: the node passes; None: every node passes
    #: (reason code, slots failing that check), in reverse of kube's order of checks
    failures: tuple[tuple[int, np.ndarray], ...] = ()
    _codes: np.ndarray | None = None

    def codes(self) -> np.ndarray | None:
        """Per slot, an index into REASONS: the node's first failing check (0: it passes); None:
        every node passes. Built on first use (only an unschedulable pod's reasons need it)."""
        if self.fits is None:
            return None
        if self._codes is None:
            codes = np.zeros(len(self.fits), dtype=np.int8)
            for code, failing in self.failures:  # later writes win: a node keeps its first failure
                codes[failing] = code
            self._codes = codes
        return self._codes


class InterPodAffinity(FilterPlugin[InterPodAffinityArgs], ScorePlugin[InterPodAffinityArgs]):
    name: ClassVar[str] = "InterPodAffinity"
    Args: ClassVar[type[PluginArgs]] = InterPodAffinityArgs
    # a pod added, gone or relabelled, a node relabelled, a namespace relabelled may each help
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE, ClusterEvent.POD, "Namespace"})
    # evicting pods may undo an anti-affinity rejection, never a missing affinity peer (kube's
    # UnschedulableAndUnresolvable)
    resolvable: ClassVar[bool] = True

    def __init__(self, args: InterPodAffinityArgs) -> None:
        super().__init__(args)
        self._filter_state: CycleMemo[_FilterState] = CycleMemo()
        self._score_state: CycleMemo[tuple[np.ndarray | None]] = CycleMemo()

    batch_reach: ClassVar[str] = BATCH_NONE  # (see batch_breaks)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod without terms of its own (kube: "pods with InterPodAffinity are not
        signable"), by its namespace and labels, which the placed pods' terms are matched against."""
        if pod.relations is not NONE:
            return UNSIGNABLE
        return pod.namespace, pod.labels

    def batch_breaks(self, pod: PodInfo, changed: PodInfo) -> bool:
        """For a pod without terms, only the placed pods' terms count, over whole topology domains:
        a pod with terms counted or uncounted may change its answers on any node; one without,
        on none."""
        return changed.relations is not NONE

    # ----------------------------------------------------------------- filter

    def _existing_anti_affinity(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        """Slots where a placed pod's required anti-affinity term forbids the incoming pod."""
        terms = cluster.tracker(PodTerms)
        if not terms.has(TermRole.REQUIRED_ANTI_AFFINITY):
            return None
        blocked: np.ndarray | None = None
        labels = namespace_labels(cluster, pod.namespace)
        for _, term, column in terms.matching(TermRole.REQUIRED_ANTI_AFFINITY, pod, labels):
            hit = cluster.domains(term.topology_key).occupied(column)
            blocked = hit if blocked is None else blocked | hit
        return blocked

    def _state(self, pod: PodInfo, cluster: ClusterState) -> _FilterState:
        state = self._filter_state.get(pod, cluster)
        if state is not None:
            return state
        relations = pod.relations
        existing = self._existing_anti_affinity(pod, cluster)
        if existing is None and not (relations.required_affinity or relations.required_anti_affinity):
            return self._filter_state.put(pod, cluster, _FilterState(None))
        failures: list[tuple[int, np.ndarray]] = []
        if existing is not None:
            failures.append((3, existing))
        matching = cluster.tracker(MatchingPods)
        for term in relations.required_anti_affinity:
            counts = matching.counts(term_query(cluster, term))
            failures.append((2, cluster.domains(term.topology_key).occupied(counts)))
        if relations.required_affinity:
            failures.append((1, self._affinity_fails(pod, cluster)))
        failing = failures[0][1]
        for _, mask in failures[1:]:
            failing = failing | mask
        return self._filter_state.put(pod, cluster, _FilterState(~failing, tuple(failures)))

    def _affinity_fails(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray:
        terms = pod.relations.required_affinity
        queries = [term_query(cluster, term) for term in terms]
        together = all_terms_query(queries)
        counts = cluster.tracker(MatchingPods).counts(together)
        fails = np.zeros(cluster.size, dtype=bool)
        pods_exist = np.ones(cluster.size, dtype=bool)
        any_match = False
        for term in terms:
            domains = cluster.domains(term.topology_key)
            totals = domains.totals(counts)
            any_match = any_match or bool(totals.any())
            fails |= domains.ids < 0  # every topology label must exist on the node
            pods_exist &= domains.spread(totals > 0, missing=False)
        # the first pod of a group: nothing matches anywhere yet, and the pod matches its own terms
        first_of_group = not any_match and all(
            q.namespaces is None or pod.namespace in q.namespaces for q in queries
        ) and together.selector.matches(pod.labels)
        if not first_of_group:
            fails |= ~pods_exist
        return fails

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's isSchedulableAfterPodChange: the pod's own labels changed (another pod's
        anti-affinity may no longer select it); a placed pod added that matches all its affinity
        terms, relabelled into its affinity or out of its anti-affinity, or gone while it matched
        its anti-affinity (or its own anti-affinity selected this pod). Nodes and namespaces: yes."""
        if event == ClusterEvent.POD_LABEL or not event.startswith("Pod/"):
            return True
        terms, anti = pod.relations.required_affinity, pod.relations.required_anti_affinity
        if old is None and not terms and type(new) is PodInfo:  # (the common case: a pod placed)
            return False
        before = old if isinstance(old, PodInfo) else None
        after = new if isinstance(new, PodInfo) else None
        if after is not None:
            if before is not None:  # relabelled
                checks = ((terms, before), (terms, after), (anti, before), (anti, after))
                was, now, was_anti, now_anti = (_all_match(t, p) for t, p in checks)
                if None in (was, now, was_anti, now_anti):
                    return True
                return bool((not was and now) or (was_anti and not now_anti))
            return _all_match(terms, after) is not False  # added
        if before is None:
            return True
        theirs = before.relations.required_anti_affinity  # (this pod may be what they kept away)
        return _all_match(anti, before) is not False or _all_match(theirs, pod) is not False

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return self._state(pod, cluster).fits

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        codes = self._state(pod, cluster).codes()
        counts: Counter[str] = Counter()
        if codes is not None:
            for code, number in enumerate(np.bincount(codes[rejected], minlength=len(REASONS))):
                if code and number:
                    counts[REASONS[code]] += int(number)
        return counts

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        codes = self._state(pod, cluster).codes()
        return np.ones(len(rejected), dtype=bool) if codes is None else codes[rejected] != 1

    # ----------------------------------------------------------------- score

    def _topology_score(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        """Per slot, the summed weights of its domains (kube's PreScore + Score); None: skip."""
        relations = pod.relations
        preferred = (*relations.preferred_affinity, *((-w, t) for w, t in relations.preferred_anti_affinity))
        if self.args.ignorePreferredTermsOfExistingPods and not preferred:
            return None
        terms = cluster.tracker(PodTerms)
        hard = self.args.hardPodAffinityWeight > 0 and terms.has(TermRole.REQUIRED_AFFINITY)
        soft = terms.has(TermRole.PREFERRED)
        if not (preferred or hard or soft):  # nothing can contribute
            return None
        per_slot: np.ndarray | None = None  # None until a matching pod is found (kube: Skip)

        def add(weight: int, term: AffinityTerm, column: np.ndarray) -> None:
            nonlocal per_slot
            # kube: a topology pair gets an entry once a matching pod is found (None: none yet)
            contribution = cluster.domains(term.topology_key).weighted(column, weight)
            if contribution is not None:
                per_slot = contribution if per_slot is None else per_slot + contribution

        if preferred:
            matching = cluster.tracker(MatchingPods)
            for weight, term in preferred:
                add(weight, term, matching.counts(term_query(cluster, term)))
        labels = namespace_labels(cluster, pod.namespace)
        if hard:
            for _, term, column in terms.matching(TermRole.REQUIRED_AFFINITY, pod, labels):
                add(self.args.hardPodAffinityWeight, term, column)
        # kube ignores them only when the incoming pod has no preferred terms (skipped above)
        if soft:
            for weight, term, column in terms.matching(TermRole.PREFERRED, pod, labels):
                add(weight, term, column)
        return per_slot

    def _scores(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        memo = self._score_state.get(pod, cluster)
        if memo is None:
            memo = self._score_state.put(pod, cluster, (self._topology_score(pod, cluster),))
        return memo[0]

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return self._scores(pod, cluster) is not None

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        scores = self._scores(pod, cluster)
        return np.zeros(slots.size, dtype=np.int64) if scores is None else scores[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """kube's NormalizeScore: `100 * (s - min) / (max - min)`, truncated; all alike: 0."""
        if raw.size == 0:
            return raw.astype(np.int64)
        low, high = int(raw.min()), int(raw.max())
        if high == low:
            return np.zeros(raw.shape, dtype=np.int64)
        return (float(MAX_NODE_SCORE) * ((raw - low).astype(np.float64) / float(high - low))).astype(np.int64)
