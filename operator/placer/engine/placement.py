"""Trying a pod group on a set of nodes, and kube v1.36's placements (TopologyAwareWorkloadScheduling):
pure, used by `placer.engine.gang`.

`GroupRun` is one group's tries: each pending pod scheduled and assumed in turn (kube's
`podGroupSchedulingDefaultAlgorithm`), then undone. With a PlacementGenerate plugin in the profile
(`TopologyPlacementGenerator`, what the gate turns on), or where the cluster shows the gate on
(`gate_on`: a PodGroup carries `schedulingConstraints`, which the API server keeps only with it),
the group is decided as kube's `podGroupSchedulingPlacementAlgorithm` does:

1. the generator gives the placements (for a group with a topology key, one per domain of it —
   only the domain its scheduled pods are in once any is —, else one of every node);
2. the group is tried in each, on the placement's nodes only (`0/N nodes` counts them), and undone;
3. none where enough fit: `0/N placements are available, first placement status: pod group is
   unschedulable`, each pod with what it got in the first placement; one: that one; several: the
   PlacementScore plugins rank them (`PodGroupPodsCount`, and `NodeResourcesFit`'s MostAllocated
   over the placement — kube's `Fit.ScorePlacement` —, each times its weight), the highest total
   wins; ties go to the smallest domain name (kube draws at random);
4. the winner's pods are assumed again, as kube's binding cycle assumes them.

Beyond kube, `TopologyPlacementGenerator`'s `placement: BestFit` chooses instead the placement
that places the most of the group, then leaves the least room (cpu and memory, each as a share of
the cluster's, summed), so the next large gang still finds a whole domain.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    Placement,
    PlacementAssignment,
    PlacementError,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
)
from placer.engine.groups import POD_GROUP_KIND
from placer.engine.objects import PodInfo, is_scalar_resource
from placer.engine.profile import Profile
from placer.engine.runtime import Decision, Scheduler

__all__ = [
    "BEST_FIT",
    "GROUP_UNSCHEDULABLE",
    "NOT_ELIGIBLE",
    "NO_FEASIBLE_PLACEMENTS",
    "WAP_NOT_SUPPORTED",
    "Attempt",
    "FitPlacementScore",
    "GroupRun",
    "PlacementResult",
    "PlacementTry",
    "gate_on",
    "generator_of",
    "place_group",
    "placements_unavailable",
    "refused_preemption",
]

# kube's words: the pod group cycle's error, RunPlacementGeneratePlugins with no placement, the
# placement algorithm when none fits, DefaultPreemption's PostFilter for a constrained group's pod,
# and workload-aware preemption refusing a group with a topology constraint
GROUP_UNSCHEDULABLE = "pod group is unschedulable"
NO_FEASIBLE_PLACEMENTS = "no feasible placements found"
NOT_ELIGIBLE = "preemption: not eligible due to placement-based pod group scheduling limitation"
WAP_NOT_SUPPORTED = "workload aware preemption is not supported for pod groups with scheduling constraints"
NO_CLAIMS = "no new claims to deallocate"  # DynamicResources' PostFilter for a pod without claims
NORMALIZE_FAILED = "running NormalizePlacementScore on PlacementScore plugins: "
BEST_FIT = "BestFit"
MAX_SCORE = 100


def refused_preemption(profile: Profile, pod: PodInfo, cluster: ClusterState) -> str:
    """What kube's PostFilter plugins say for a pod of a group with scheduling constraints, the
    gate on (measured on kube-scheduler v1.36.2): DefaultPreemption refuses (`NOT_ELIGIBLE`), and
    DynamicResources, before it, has nothing to free for a pod without claims; joined with ", "."""
    parts: list[str] = []
    for plugin in profile.post_filters:
        if plugin.name == "DefaultPreemption":
            parts.append(NOT_ELIGIBLE)
        elif plugin.name == "DynamicResources" and not pod.resource_claims and not pod.extended_containers \
                and "ResourceClaim" not in cluster.catalog.unserved:
            parts.append(NO_CLAIMS)
    return ", ".join(parts)


def placements_unavailable(count: int) -> str:
    """kube's status when the group fits in none of `count` placements."""
    return f"0/{count} placements are available, first placement status: {GROUP_UNSCHEDULABLE}"


@dataclass(slots=True)
class Attempt:
    decisions: list[Decision]
    fitted: list[tuple[PodInfo, Decision]]

    def enough(self, already: int, quorum: int) -> bool:
        return bool(self.fitted) and already + len(self.fitted) >= quorum


class GroupRun:
    """One group's tries on the cluster: each pod scheduled and assumed in turn, then undone;
    `placement` (a slot mask) restricts the nodes tried."""

    def __init__(self, scheduler: Scheduler, profile: Profile, bare: Profile, cluster: ClusterState,
                 pods: Sequence[PodInfo], top: int, quorum: int, already: int) -> None:
        self.scheduler, self.profile, self.bare, self.cluster = scheduler, profile, bare, cluster
        self.pods, self.top, self.quorum, self.already = pods, top, quorum, already
        self.placement: np.ndarray | None = None

    def attempt(self, early: bool = False) -> Attempt:
        """Every pod in turn, those that fit assumed. `early`: stop once the answer is known (the
        quorum met, or out of reach) — for preemption's what-ifs, which need only yes or no."""
        result = Attempt([], [])
        remaining = len(self.pods)
        for pod in self.pods:
            if early and (result.enough(self.already, self.quorum)
                          or self.already + len(result.fitted) + remaining < self.quorum):
                break
            remaining -= 1
            decision = self.scheduler.schedule(pod, self.bare, self.cluster, top=self.top, placement=self.placement)
            if decision.node is not None:
                self.scheduler.assume(pod, decision, self.profile, self.cluster)
                result.fitted.append((pod, decision))
            result.decisions.append(decision)
        return result

    def undo(self, attempt: Attempt) -> None:
        for pod, decision in reversed(attempt.fitted):
            self.scheduler.forget(pod, decision, self.profile, self.cluster)

    def redo(self, attempt: Attempt) -> None:
        for pod, decision in attempt.fitted:
            self.scheduler.assume(pod, decision, self.profile, self.cluster)

    def fits(self) -> bool:
        attempt = self.attempt(early=True)
        self.undo(attempt)
        return attempt.enough(self.already, self.quorum)


@dataclass(slots=True)
class PlacementTry:
    """One placement the group was tried in, for `placer explain` and `placer simulate`."""

    name: str  # the domain ("" for every node)
    nodes: int
    placed: int  # pods of the group that fitted there
    fits: bool  # enough fitted (the quorum)
    #: pod key -> why it did not fit there (its `0/N nodes are available: ...`)
    misses: dict[str, str] = field(default_factory=dict)
    #: plugin -> weighted placement score (only when several placements fitted)
    scores: dict[str, int] = field(default_factory=dict)
    total: int | None = None
    leftover: float | None = None  # BestFit's measure: room left over (lower is tighter)
    chosen: bool = False

    def as_json(self, misses: bool = True) -> dict[str, Any]:
        """`misses`: with each pod that did not fit and why (explain); simulate leaves them out,
        every member of a group carrying the list."""
        result: dict[str, Any] = {"domain": self.name, "nodes": self.nodes, "pods": self.placed + len(self.misses),
                                  "placed": self.placed, "fits": self.fits, "chosen": self.chosen}
        if self.total is not None:
            result["score"] = self.total
            result["scores"] = dict(self.scores)
        if self.leftover is not None:
            result["leftover"] = round(self.leftover, 4)
        if misses and self.misses:
            result["misses"] = dict(self.misses)
        return result


@dataclass(slots=True)
class PlacementResult:
    """What the placement algorithm found: the attempt to report (the winner's, assumed again, or
    the first placement's, undone), and why the group is not placed (`message`; `error` when it
    cannot be decided)."""

    attempt: Attempt | None
    tries: list[PlacementTry]
    chosen: str | None = None
    message: str = ""
    error: bool = False


def generator_of(profile: Profile, group: Any = None, catalog: Catalog | None = None) -> (
    PlacementGeneratePlugin[Any] | None
):
    """The profile's first PlacementGenerate plugin (kube runs only the first); when the profile
    names none, kube's `TopologyPlacementGenerator` where the cluster shows the
    TopologyAwareWorkloadScheduling gate on (`gate_on`: the `group` has a topology key, or any
    PodGroup of `catalog` carries `schedulingConstraints`), kube-scheduler's default plugins then
    including it (docs/gang.md)."""
    for plugin in (*profile.filters, *(p for p, _ in profile.scores), *profile.post_filters):
        if isinstance(plugin, PlacementGeneratePlugin):
            return plugin
    if (group is not None and group.topology_key) or (catalog is not None and gate_on(catalog)):
        return _implied()[0]
    return None


_GATE: weakref.WeakKeyDictionary[Catalog, tuple[int, bool]] = weakref.WeakKeyDictionary()


def gate_on(catalog: Catalog) -> bool:
    """Whether an upstream PodGroup carries `spec.schedulingConstraints`: the API server keeps the
    field only with TopologyAwareWorkloadScheduling on, so its cluster runs with the gate on.
    Kept until a PodGroup changes."""
    version = catalog.version(POD_GROUP_KIND)
    known = _GATE.get(catalog)
    if known is not None and known[0] == version:
        return known[1]
    on = any(getattr(group, "constrained", False) for _, _, group in catalog.items(POD_GROUP_KIND))
    _GATE[catalog] = (version, on)
    return on


def _implied() -> tuple[PlacementGeneratePlugin[Any], PlacementScorePlugin[Any]]:
    """kube's gate-on defaults, for a profile that names neither: the generator and
    `PodGroupPodsCount` (weight 1), with their default args."""
    if not _IMPLIED:
        from placer.plugins.pod_group_pods_count import PodGroupPodsCount
        from placer.plugins.topology_placement import TopologyPlacementGenerator

        _IMPLIED.append((TopologyPlacementGenerator(TopologyPlacementGenerator.Args()),
                         PodGroupPodsCount(PodGroupPodsCount.Args())))
    return _IMPLIED[0]


_IMPLIED: list[tuple[Any, Any]] = []


class FitPlacementScore:
    """kube's `Fit.ScorePlacement` (NodeResourcesFit with the gate on): MostAllocated over the whole
    placement — the nodes' requests (cpu and memory non-zero) plus the group's proposed pods',
    against the nodes' allocatable, each resource of the plugin's `scoringStrategy.resources` by
    its weight. Kept here rather than in the plugin: it is a placement score only."""

    name = "NodeResourcesFit"

    def __init__(self, resources: Sequence[tuple[str, int]]) -> None:
        self.resources = tuple(resources)

    def score_placement(self, group: Any, cluster: ClusterState, assignment: PlacementAssignment) -> int:
        from placer.plugins.node_resources_fit import pod_request_for_score

        mask = _mask(cluster, assignment.placement)
        total = weights = 0
        for name, weight in self.resources:
            proposed = sum(pod_request_for_score(pod, name, True) for pod, _ in assignment.proposed)
            column = cluster.resource_index.get(name)
            if column is None or (proposed == 0 and is_scalar_resource(name)):
                continue
            allocatable = cluster.allocatable[: cluster.size, column][mask]
            used_table = cluster.nonzero_requested if column < 2 and name in ("cpu", "memory") else cluster.requested
            used = used_table[: cluster.size, column][mask]
            counted = allocatable > 0
            capacity = int(allocatable[counted].sum())
            if capacity == 0:
                continue
            requested = min(proposed + int(used[counted].sum()), capacity)
            total += requested * MAX_SCORE // capacity * weight
            weights += weight
        return total // weights if weights else 0

    def normalize_placement_scores(self, raw: list[int]) -> list[int]:
        return raw


def _mask(cluster: ClusterState, placement: Placement) -> np.ndarray:
    present = cluster.present[: cluster.size]
    return present.copy() if placement.nodes is None else present & placement.nodes[: cluster.size]


def _scorers(profile: Profile, implied: bool) -> list[tuple[Any, int]]:
    """The profile's PlacementScore plugins with their weights; with the `implied` generator (the
    profile names none) kube's default `PodGroupPodsCount` (weight 1) too, unless listed."""
    found: list[tuple[Any, int]] = []
    if implied and not any(plugin.name == "PodGroupPodsCount" for plugin, _ in profile.scores):
        found.append((_implied()[1], 1))
    for plugin, weight in profile.scores:
        if isinstance(plugin, PlacementScorePlugin):
            found.append((plugin, weight))
        elif plugin.name == FitPlacementScore.name:
            strategy = plugin.args.scoringStrategy  # type: ignore[attr-defined]
            found.append((FitPlacementScore([(r.name, r.weight) for r in strategy.resources]), weight))
    return found


def _leftover(cluster: ClusterState, placement: Placement, proposed: Sequence[tuple[PodInfo, str]]) -> float:
    """BestFit's measure: cpu and memory free in the placement once the group is in, each as a
    share of the cluster's allocatable, summed."""
    mask = _mask(cluster, placement)
    present = cluster.present[: cluster.size]
    share = 0.0
    for column, name in ((0, "cpu"), (1, "memory")):
        whole = int(cluster.allocatable[: cluster.size, column][present].sum())
        if whole <= 0:
            continue
        size = cluster.size
        free = int((cluster.allocatable[:size, column] - cluster.requested[:size, column])[mask].sum())
        free -= sum(pod.requests.get(name, 0) for pod, _ in proposed)
        share += max(free, 0) / whole
    return share


def place_group(run: GroupRun, generator: PlacementGeneratePlugin[Any], group: Any) -> PlacementResult:
    """kube's `podGroupSchedulingPlacementAlgorithm` over `run`; the winner's pods are left assumed."""
    cluster = run.cluster
    try:
        placements = generator.generate_placements(group, cluster, Placement(""))
    except PlacementError as error:
        return PlacementResult(None, [], message=str(error), error=True)
    if not placements:
        return PlacementResult(None, [], message=NO_FEASIBLE_PLACEMENTS)
    tries: list[PlacementTry] = []
    fitting: list[tuple[int, Attempt]] = []
    first: Attempt | None = None
    for index, placement in enumerate(placements):
        run.placement = placement.nodes
        try:
            attempt = run.attempt()
        finally:
            run.placement = None
        fits = attempt.enough(run.already, run.quorum)
        single = len(placements) == 1
        if not (single and fits):
            run.undo(attempt)
        nodes = int(np.count_nonzero(_mask(cluster, placement)))
        misses = {d.pod: d.message or "" for d in attempt.decisions if d.node is None}
        tries.append(PlacementTry(placement.name, nodes, len(attempt.fitted), fits, misses))
        first = first or attempt
        if fits:
            fitting.append((index, attempt))
        if single and fits:
            tries[0].chosen = True
            return PlacementResult(attempt, tries, placement.name)
    if not fitting:
        return PlacementResult(first, tries, message=placements_unavailable(len(placements)))
    try:
        best = fitting[0][0] if len(fitting) == 1 else _best(run, generator, group, placements, fitting, tries)
    except PlacementError as error:
        return PlacementResult(None, tries, message=str(error), error=True)
    winner = dict(fitting)[best]
    run.redo(winner)
    tries[best].chosen = True
    return PlacementResult(winner, tries, placements[best].name)


def _best(run: GroupRun, generator: Any, group: Any, placements: Sequence[Placement],
          fitting: list[tuple[int, Attempt]], tries: list[PlacementTry]) -> int:
    """kube's `findBestPlacement` (the highest weighted total; ties: the smallest domain name), or
    BestFit's choice when the generator asks for it. Every fitting try gets its scores either way."""
    cluster = run.cluster
    assignments = [PlacementAssignment(placements[i], tuple((pod, d.node or "") for pod, d in attempt.fitted),
                                       run.already) for i, attempt in fitting]
    totals = [0] * len(fitting)
    implied = bool(_IMPLIED) and generator is _IMPLIED[0][0]
    for plugin, weight in _scorers(run.profile, implied):
        raw = [int(plugin.score_placement(group, cluster, a)) for a in assignments]
        try:
            scores = plugin.normalize_placement_scores(raw)
        except PlacementError as error:
            raise PlacementError(NORMALIZE_FAILED + str(error)) from None
        for position, (index, _) in enumerate(fitting):
            tries[index].scores[plugin.name] = scores[position] * weight
            totals[position] += scores[position] * weight
    for position, (index, _) in enumerate(fitting):
        tries[index].total = totals[position]
    if getattr(getattr(generator, "args", None), "placement", "Default") == BEST_FIT:
        for assignment, (index, _) in zip(assignments, fitting, strict=True):
            tries[index].leftover = _leftover(cluster, assignment.placement, assignment.proposed)
        ranked = sorted(fitting, key=lambda item: (-tries[item[0]].placed, tries[item[0]].leftover or 0.0,
                                                   placements[item[0]].name))
        return ranked[0][0]
    ranked = sorted(zip(totals, fitting, strict=True), key=lambda item: (-item[0], placements[item[1][0]].name))
    return ranked[0][1][0]
