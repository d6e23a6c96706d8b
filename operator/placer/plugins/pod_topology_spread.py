"""PodTopologySpread — `topologySpreadConstraints`, as kube-scheduler v1.36's plugin (default gates).

Filter (the pod's `DoNotSchedule` constraints): for each constraint, the matching pods (the pod's
namespace, the constraint's selector, not being deleted; bound and assumed) are summed per domain
of its `topologyKey` over the eligible nodes: those carrying every constraint's key and passing the
constraint's inclusion policies (`nodeAffinityPolicy: Honor` (default): the pod's `nodeSelector` and
required node affinity match the node; `nodeTaintsPolicy: Honor` (default Ignore): the node has no
NoSchedule/NoExecute taint the pod does not tolerate). A node fits when, for every constraint,
`count(its domain) + (1 if the selector matches the pod itself) - min <= maxSkew`, `min` being the
smallest count among the eligible domains (0 when there are fewer than `minDomains` of them).
Reasons: "node(s) didn't match pod topology spread constraints (missing required label)" for a
node without a constraint's key, "node(s) didn't match pod topology spread constraints" otherwise
(the first failing constraint decides).

Score (the `ScheduleAnyway` constraints): over the candidate nodes, each constraint adds
`count * log(domains + 2) + maxSkew - 1` (for `kubernetes.io/hostname` the node's own count and
`domains` = the candidates), rounded as Go's `math.Round`; fewer is better: normalised as kube-
scheduler, `100 * (max + min - score) / max` (every node 100 when all are 0). Candidates lacking a
constraint's key score 0 when the pod has its own constraints or `defaultingType` is List. A pod
without score constraints is skipped (0 on every node).

A pod without any constraints gets the default ones, whose selector is kube's `DefaultSelector`:
the selectors of the Services of its namespace that select it, ANDed with its controlling
ReplicaSet's or StatefulSet's; without any, the pod has no default constraints.

Args::

    defaultingType: System        # System (default): kubernetes.io/hostname maxSkew 3 and
                                  #   topology.kubernetes.io/zone maxSkew 5, both ScheduleAnyway
                                  # List: the defaultConstraints below (none when empty)
    defaultConstraints:           # only with defaultingType List; no labelSelector (it is deduced)
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}

Counts are kept incrementally per node (`placer.engine.matching`); node facts (keys present,
inclusion policies) are cached per pod shape until a node changes, so a cycle is a few numpy
operations over the node columns.

Example profile::

    spec:
      schedulerName: spread-scheduler
      filters: [{name: NodeResourcesFit}, {name: PodTopologySpread}]
      scores:
        - name: PodTopologySpread
          weight: 2
          args:
            defaultingType: List
            defaultConstraints:
              - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationInfo, field_validator

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState
from placer.engine.fields import FieldError
from placer.engine.framework import (
    BATCH_NONE,
    MAX_NODE_SCORE,
    UNSIGNABLE,
    ClusterEvent,
    CycleMemo,
    FilterPlugin,
    PluginArgs,
    ScorePlugin,
    StaticCache,
)
from placer.engine.labels import NOTHING, LabelSelector, selector_from_labels, validate_label_key
from placer.engine.matching import MatchingPods, PodQuery
from placer.engine.node_selectors import required_affinity_mask
from placer.engine.objects import PodInfo
from placer.engine.relations import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY, SpreadConstraint
from placer.plugins.taint_toleration import tolerated_nodes

__all__ = ["PodTopologySpread", "PodTopologySpreadArgs"]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REASON = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON + " (missing required label)"
INVALID_SCORE = -1  # kube's invalidScore: a candidate lacking a key, normalised to 0


class DefaultConstraint(BaseModel):
    """One of `defaultConstraints` (a `v1.TopologySpreadConstraint` without a selector)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    maxSkew: StrictInt = Field(ge=1)
    topologyKey: str
    whenUnsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    minDomains: StrictInt | None = Field(default=None, ge=1)
    nodeAffinityPolicy: Literal["Honor", "Ignore"] | None = None
    nodeTaintsPolicy: Literal["Honor", "Ignore"] | None = None
    labelSelector: Any = None

    @field_validator("topologyKey")
    @classmethod
    def _qualified_name(cls, value: str) -> str:
        try:
            return validate_label_key(value, "topologyKey")
        except FieldError as error:
            raise ValueError(error.message) from None

    @field_validator("labelSelector")
    @classmethod
    def _no_selector(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("Forbidden: constraint must not define a selector, as they deduced for each pod")
        return value

    def as_constraint(self) -> SpreadConstraint:
        return SpreadConstraint(
            max_skew=self.maxSkew,
            topology_key=self.topologyKey,
            when_unsatisfiable=self.whenUnsatisfiable,
            selector=NOTHING,  # replaced by the pod's default selector
            min_domains=self.minDomains or 1,
            node_affinity_policy=self.nodeAffinityPolicy or HONOR,
            node_taints_policy=self.nodeTaintsPolicy or IGNORE,
        )


class PodTopologySpreadArgs(PluginArgs):
    """kube's `PodTopologySpreadArgs`, validated as `ValidatePodTopologySpreadArgs`."""

    # declared first so that defaultingType's check sees it
    defaultConstraints: tuple[DefaultConstraint, ...] = ()
    defaultingType: Literal["System", "List"] = Field(default="System", validate_default=True)

    @field_validator("defaultConstraints")
    @classmethod
    def _no_repeats(cls, value: tuple[DefaultConstraint, ...]) -> tuple[DefaultConstraint, ...]:
        seen: set[tuple[str, str]] = set()
        for constraint in value:
            pair = (constraint.topologyKey, constraint.whenUnsatisfiable)
            if pair in seen:
                raise ValueError(f'Duplicate value: "{{{pair[0]}, {pair[1]}}}"')
            seen.add(pair)
        return value

    @field_validator("defaultingType")
    @classmethod
    def _system_has_no_list(cls, value: str, info: ValidationInfo) -> str:
        if value == "System" and info.data.get("defaultConstraints"):
            raise ValueError(f'Invalid value: "{value}": when .defaultConstraints are not empty')
        return value


SYSTEM_DEFAULTS: tuple[SpreadConstraint, ...] = (
    SpreadConstraint(max_skew=3, topology_key=HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, selector=NOTHING),
    SpreadConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, selector=NOTHING),
)


@dataclass(slots=True)
class _Topology:
    """One constraint's node facts for one pod shape, laid out so that a cycle is one `bincount`
    (the pods per domain) and one gather (each node's domain) over the slots."""

    has: np.ndarray  # per slot: the node carries the key
    bins: np.ndarray  # per slot: its domain where its pods count, else `overflow`
    gather: np.ndarray  # per slot: its domain, `overflow` where it lacks the key
    overflow: int  # the extra bin: domains are [0, overflow)
    counted: np.ndarray  # per domain: some node whose pods count is in it (kube's TpValueToMatchNum keys)
    domains: int  # how many of those


@dataclass(slots=True)
class _Nodes:
    topologies: list[_Topology]
    has_all: np.ndarray  # per slot: the node carries every constraint's key


@dataclass(slots=True)
class _Cycle:
    """What one scheduling cycle of one pod shares between filter, reasons and score."""

    hard: tuple[SpreadConstraint, ...]
    soft: tuple[SpreadConstraint, ...]
    own: bool  # the pod has constraints of its own (not the defaults)
    fits: np.ndarray | None = field(default=None)  # the filter's mask
    #: per hard constraint, per slot: its domain stays within maxSkew with the pod (nodes without the
    #: key too: `has` tells them apart)
    within: list[np.ndarray] = field(default_factory=list)


def go_round(values: np.ndarray) -> np.ndarray:
    """Go's `math.Round` (half away from zero), exact also just below .5, as int64."""
    whole = np.trunc(values)
    fraction = values - whole  # exact for the magnitudes scores take
    return (whole + np.where(np.abs(fraction) >= 0.5, np.sign(values), 0.0)).astype(np.int64)


class PodTopologySpread(FilterPlugin[PodTopologySpreadArgs], ScorePlugin[PodTopologySpreadArgs]):
    name: ClassVar[str] = "PodTopologySpread"
    Args: ClassVar[type[PluginArgs]] = PodTopologySpreadArgs
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.NODE, ClusterEvent.POD, "Service", "ReplicaSet", "StatefulSet"}
    )
    # evicting pods may lower a domain's count, never give a node a missing label
    resolvable: ClassVar[bool] = True
    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods without constraints)

    def __init__(self, args: PodTopologySpreadArgs) -> None:
        super().__init__(args)
        self._system = args.defaultingType == "System"
        defaults = SYSTEM_DEFAULTS if self._system else tuple(c.as_constraint() for c in args.defaultConstraints)
        self._default_hard = tuple(c for c in defaults if c.when_unsatisfiable == DO_NOT_SCHEDULE)
        self._default_soft = tuple(c for c in defaults if c.when_unsatisfiable == SCHEDULE_ANYWAY)
        self._memo: CycleMemo[_Cycle] = CycleMemo()
        self._nodes: StaticCache[_Nodes] = StaticCache()
        self._affinity: StaticCache[np.ndarray | None] = StaticCache()
        self._taints: StaticCache[np.ndarray] = StaticCache()
        self._values: StaticCache[tuple[np.ndarray, int]] = StaticCache()
        self._selectors: dict[Any, tuple[tuple[SpreadConstraint, ...], ...]] = {}
        self._selectors_of: tuple[weakref.ref[Catalog] | None, tuple[int, int, int]] = (None, (-1, -1, -1))

    # ------------------------------------------------------------------ constraints

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod no constraint applies to, its own or a default one (kube signs no pod with
        constraints, nor any with default constraints configured: Placer's System defaults apply
        to a pod only when a Service or a workload selects it, so a bare pod is signed)."""
        cycle = self._cycle(pod, cluster)
        return UNSIGNABLE if cycle.hard or cycle.soft else None

    def _cycle(self, pod: PodInfo, cluster: ClusterState) -> _Cycle:
        cycle = self._memo.get(pod, cluster)
        if cycle is None:
            cycle = self._memo.put(pod, cluster, self._constraints(pod, cluster))
        return cycle

    def _constraints(self, pod: PodInfo, cluster: ClusterState) -> _Cycle:
        own = pod.spread_constraints
        if own:
            return _Cycle(
                hard=tuple(c for c in own if c.when_unsatisfiable == DO_NOT_SCHEDULE),
                soft=tuple(c for c in own if c.when_unsatisfiable == SCHEDULE_ANYWAY),
                own=True,
            )
        if not self._default_hard and not self._default_soft:
            return _Cycle((), (), own=False)
        if pod.controller is None and not cluster.catalog.in_namespace("Service", pod.namespace):
            return _Cycle((), (), own=False)  # nothing could select its peers: no default constraints
        hard, soft = self._defaults(pod, cluster.catalog)
        return _Cycle(hard, soft, own=False)

    def _defaults(self, pod: PodInfo, catalog: Catalog) -> tuple[tuple[SpreadConstraint, ...], ...]:
        """The default (hard, soft) constraints with kube's `helper.DefaultSelector` (none when it is
        empty); cached per namespace, labels and controller until Services, ReplicaSets or
        StatefulSets change."""
        versions = (catalog.version("Service"), catalog.version("ReplicaSet"), catalog.version("StatefulSet"))
        owner, seen = self._selectors_of
        if owner is None or owner() is not catalog or seen != versions or len(self._selectors) >= 4096:
            self._selectors.clear()
            self._selectors_of = (weakref.ref(catalog), versions)
        key = (pod.namespace, frozenset(pod.labels.items()), pod.controller)
        defaults = self._selectors.get(key)
        if defaults is None:
            selector = default_selector(pod, catalog)
            if selector.empty:
                defaults = ((), ())
            else:
                defaults = (
                    tuple(_with_selector(c, selector) for c in self._default_hard),
                    tuple(_with_selector(c, selector) for c in self._default_soft),
                )
            self._selectors[key] = defaults
        return defaults

    # ------------------------------------------------------------------ node facts

    def _affinity_mask(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not pod.node_selector and pod.required_terms is None:
            return None
        key = (tuple(sorted(pod.node_selector.items())), pod.required_terms)
        mask = self._affinity.get(cluster, key)
        if mask is None:
            mask = self._affinity.put(key, required_affinity_mask(cluster, pod.node_selector, pod.required_terms))
        return mask

    def _taint_mask(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return tolerated_nodes(pod, cluster, self._taints)

    def _node_facts(
        self,
        pod: PodInfo,
        cluster: ClusterState,
        constraints: tuple[SpreadConstraint, ...],
        require_all: bool,
        fold_missing: bool,
    ) -> _Nodes:
        """Which nodes count for each constraint and in which domain. The filter (`require_all`, not
        `fold_missing`) counts nodes carrying every key; the score reads a missing label as the value
        "" (`fold_missing`, as kube's `node.Labels[key]`), requiring all keys only when asked."""
        honor_affinity = any(c.node_affinity_policy == HONOR for c in constraints)
        honor_taints = any(c.node_taints_policy == HONOR for c in constraints)
        key = (
            tuple((c.topology_key, c.node_affinity_policy, c.node_taints_policy) for c in constraints),
            require_all,
            fold_missing,
            (tuple(sorted(pod.node_selector.items())), pod.required_terms) if honor_affinity else None,
            pod.tolerations if honor_taints else None,
        )
        facts = self._nodes.get(cluster, key)
        if facts is not None:
            return facts
        present = cluster.present[: cluster.size]
        has = [cluster.domains(c.topology_key).ids >= 0 for c in constraints]
        has_all = present.copy()
        for mask in has:
            has_all &= mask
        affinity = self._affinity_mask(pod, cluster) if honor_affinity else None
        taints = self._taint_mask(pod, cluster) if honor_taints else None
        topologies = []
        for c, has_key in zip(constraints, has, strict=True):
            if fold_missing:
                ids, overflow = self._value_ids(cluster, c.topology_key)
            else:
                domains = cluster.domains(c.topology_key)
                ids, overflow = domains.ids, domains.count
            counted = has_all.copy() if require_all else present.copy()
            if affinity is not None and c.node_affinity_policy == HONOR:
                counted &= affinity
            if taints is not None and c.node_taints_policy == HONOR:
                counted &= taints
            bins = np.where(counted, ids, overflow)
            gather = np.where(ids >= 0, ids, overflow)
            domains_counted = np.zeros(overflow + 1, dtype=bool)
            domains_counted[bins] = True
            domains_counted = domains_counted[:overflow]
            topologies.append(
                _Topology(has_key, bins, gather, overflow, domains_counted, int(np.count_nonzero(domains_counted)))
            )
        return self._nodes.put(key, _Nodes(topologies, has_all))

    def _value_ids(self, cluster: ClusterState, key: str) -> tuple[np.ndarray, int]:
        """Per slot, the index of its value of `key`, a node without it taking the value "" (how
        kube's score reads `node.Labels[key]`); and how many indexes there are."""
        cached = self._values.get(cluster, key)
        if cached is None:
            domains = cluster.domains(key)
            empty = domains.values.index("") if "" in domains.values else domains.count
            cached = self._values.put(key, (np.where(domains.ids >= 0, domains.ids, empty), domains.count + 1))
        return cached

    @staticmethod
    def _counts(pod: PodInfo, cluster: ClusterState, selector: LabelSelector) -> np.ndarray:
        """Per slot, the pods of the pod's namespace the selector matches, not being deleted
        (kube's `countPodsMatchSelector`: an empty selector counts none)."""
        if selector.empty:
            return np.zeros(cluster.size, dtype=np.int32)
        query = PodQuery(frozenset((pod.namespace,)), selector, skip_deleting=True)
        return cluster.tracker(MatchingPods).counts(query)

    # ------------------------------------------------------------------ filter

    def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
        """kube's isSchedulableAfterPodChange: the pod's own new toleration when a constraint
        honours taints; a pod of its namespace (or itself) added, relabelled or gone whose labels
        match (or stop or start matching) one of its constraints' selectors. Nodes and the kinds
        defaulted constraints read: yes (so is a pod with defaulted constraints: their selectors
        come from its owners)."""
        constraints = pod.spread_constraints
        if not event.startswith("Pod/") or not constraints:
            return True
        if event == ClusterEvent.POD_TOLERATION:
            return any(c.node_taints_policy == HONOR for c in constraints)
        before = old if isinstance(old, PodInfo) else None
        after = new if isinstance(new, PodInfo) else None
        changed = after or before
        if changed is None:
            return True
        if changed.uid != pod.uid and changed.namespace != pod.namespace:
            return False
        if before is not None and after is not None:
            return before.labels != after.labels and any(
                c.selector.matches(before.labels) != c.selector.matches(after.labels) for c in constraints)
        return any(c.selector.matches(changed.labels) for c in constraints)

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        cycle = self._cycle(pod, cluster)
        if not cycle.hard:
            return None
        if cycle.fits is None:
            self._prefilter(pod, cluster, cycle)
        return cycle.fits

    def _prefilter(self, pod: PodInfo, cluster: ClusterState, cycle: _Cycle) -> None:
        """kube's PreFilter + Filter over every slot: per constraint, the matching pods per domain
        over the counted nodes, the minimum over the counted domains (0 below minDomains), and the
        nodes whose domain would exceed maxSkew."""
        facts = self._node_facts(pod, cluster, cycle.hard, require_all=True, fold_missing=False)
        fits: np.ndarray | None = None
        cycle.within = []
        for c, topology in zip(cycle.hard, facts.topologies, strict=True):
            counts = self._counts(pod, cluster, c.selector)
            per_domain = np.bincount(topology.bins, weights=counts, minlength=topology.overflow + 1)
            if topology.domains >= c.min_domains:
                minimum = per_domain[: topology.overflow][topology.counted].min()
            else:
                minimum = 0.0
            self_match = 1 if c.selector.matches(pod.labels) else 0
            allowed = per_domain + (self_match - minimum) <= c.max_skew
            allowed[topology.overflow] = True  # nodes without the key (`has_all` leaves them out)
            within = allowed[topology.gather]
            cycle.within.append(within)
            fits = facts.has_all & within if fits is None else fits & within
        cycle.fits = fits

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        """Each node's reason is its first failing constraint's: a missing key, or the skew."""
        cycle = self._cycle(pod, cluster)
        if not cycle.hard:
            return Counter()
        if cycle.fits is None:
            self._prefilter(pod, cluster, cycle)
        facts = self._node_facts(pod, cluster, cycle.hard, require_all=True, fold_missing=False)
        undecided = np.ones(rejected.size, dtype=bool)
        missing_label = skew = 0
        for topology, within in zip(facts.topologies, cycle.within, strict=True):
            missing = undecided & ~topology.has[rejected]
            missing_label += int(np.count_nonzero(missing))
            undecided &= ~missing
            over = undecided & ~within[rejected]
            skew += int(np.count_nonzero(over))
            undecided &= ~over
        return +Counter({REASON_MISSING_LABEL: missing_label, REASON: skew})

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        """A rejected node whose first failing constraint's key it lacks is not resolvable."""
        cycle = self._cycle(pod, cluster)
        resolvable = np.ones(rejected.size, dtype=bool)
        if not cycle.hard:
            return resolvable
        facts = self._node_facts(pod, cluster, cycle.hard, require_all=True, fold_missing=False)
        if cycle.fits is None:
            self._prefilter(pod, cluster, cycle)
        undecided = np.ones(rejected.size, dtype=bool)
        for topology, within in zip(facts.topologies, cycle.within, strict=True):
            missing = undecided & ~topology.has[rejected]
            resolvable &= ~missing
            undecided &= ~missing & within[rejected]
        return resolvable

    # ------------------------------------------------------------------ score

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return bool(self._cycle(pod, cluster).soft)

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        """kube's PreScore + Score over the candidate slots; INVALID_SCORE marks ignored nodes."""
        cycle = self._cycle(pod, cluster)
        constraints = cycle.soft
        if not constraints or not slots.size:
            return np.zeros(slots.size, dtype=np.int64)
        require_all = cycle.own or not self._system
        facts = self._node_facts(pod, cluster, constraints, require_all, fold_missing=True)
        ignored = ~facts.has_all[slots] if require_all else np.zeros(slots.size, dtype=bool)
        considered = slots[~ignored] if require_all else slots
        total = np.zeros(slots.size, dtype=np.float64)
        for c, topology in zip(constraints, facts.topologies, strict=True):
            counts = self._counts(pod, cluster, c.selector)
            if c.topology_key == HOSTNAME:
                size = int(considered.size)
                count = counts[slots]
            else:
                values = np.zeros(topology.overflow + 1, dtype=bool)
                values[topology.gather[considered]] = True
                size = int(np.count_nonzero(values))
                per_value = np.bincount(topology.bins, weights=counts, minlength=topology.overflow + 1)
                count = per_value[topology.gather[slots]]
            weight = math.log(size + 2)
            total += np.where(topology.has[slots], count * weight + float(c.max_skew - 1), 0.0)
        raw = go_round(total)
        raw[ignored] = INVALID_SCORE
        return raw

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """kube's NormalizeScore: `100 * (max + min - s) / max` over the scored nodes; ignored ones 0."""
        raw = raw.astype(np.int64, copy=False)
        valid = raw != INVALID_SCORE
        if not valid.any():
            return np.zeros(raw.shape, dtype=np.int64)
        top, low = int(raw[valid].max()), int(raw[valid].min())
        if top == 0:
            return np.where(valid, MAX_NODE_SCORE, 0).astype(np.int64)
        return np.where(valid, MAX_NODE_SCORE * (top + low - raw) // top, 0).astype(np.int64)


def _with_selector(constraint: SpreadConstraint, selector: LabelSelector) -> SpreadConstraint:
    return SpreadConstraint(
        max_skew=constraint.max_skew,
        topology_key=constraint.topology_key,
        when_unsatisfiable=constraint.when_unsatisfiable,
        selector=selector,
        min_domains=constraint.min_domains,
        node_affinity_policy=constraint.node_affinity_policy,
        node_taints_policy=constraint.node_taints_policy,
    )


def default_selector(pod: PodInfo, catalog: Catalog) -> LabelSelector:
    """kube's `helper.DefaultSelector`: the selectors of the Services of the pod's namespace that
    select it (a Service without a selector selects nothing), ANDed with the selector of its
    controlling ReplicaSet or StatefulSet (group `apps`) when the catalog has it."""
    labels: dict[str, str] = {}
    for service in catalog.in_namespace("Service", pod.namespace).values():
        wanted = service.selector
        if wanted is not None and all(pod.labels.get(k) == v for k, v in wanted.items()):
            labels.update(wanted)
    selector = selector_from_labels(labels)
    owner = pod.controller
    if owner is None or owner.api_version.rpartition("/")[0] != "apps":
        return selector
    if owner.kind not in ("ReplicaSet", "StatefulSet"):
        return selector
    workload = catalog.get(owner.kind, owner.name, pod.namespace)
    if workload is None or workload.selector.nothing:
        return selector
    return LabelSelector.of((*selector.requirements, *workload.selector.requirements))
