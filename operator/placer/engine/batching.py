"""Opportunistic batching (kube-scheduler v1.35+, KEP-5598, on by default in v1.36), made exact: a
pod with the same scheduling signature as a pod decided before reuses that pod's work.

kube signs a pod with every Filter and Score plugin's fragments (`SignPod`; a plugin that cannot
sign it, or does not implement signing, keeps it out), and when the next pod has the previous
pod's signature and the node chosen for it no longer fits, hands it the next node of the previous
pod's sorted list. That reuse is approximate: other pods may have changed scores meanwhile, and the
rotating sample of nodes to score is not taken again. Placer keeps what kube's batching saves — the
filters and the scores of every node, recomputed for each pod of a workload of identical pods —
and none of its approximations: what is reused is per node, and the nodes whose pods changed since
(the previous pod assumed there, a binding confirmed, a pod deleted...) are asked again, so every
decision, message and score is the one the full cycle gives.

What a batch holds, for one profile and one signature (`Batch`):

- `feasible`: every node's verdict of all the filters, and `passes`, that of the filters whose
  answers no pod changes (`Plugin.batch_reach` BATCH_NONE: taints, node affinity, ...): a node
  whose pods changed is asked again of the others only (`FilterPlugin.filter_at`);
- per score plugin that applies (its PreScore), the raw score of each node asked so far (those
  whose pods changed forgotten, for BATCH_NODE plugins); for the plugins that normalise each node
  alone (the default `normalize`), their weighted sum per node (`total`): a cycle adds the cached
  sums of its nodes to score, computing the missing ones (with every node whose pods changed
  since, together), and normalises the other plugins' raw scores over its candidates as the full
  cycle does (a plugin whose raw score is the same on every node: its normalised scores kept per
  number of candidates).

A batch serves while the cluster changed only by pods counted or uncounted
(`ClusterState.pod_changes_since`: no node, metrics, catalog object or nomination), none of which a
plugin says may change its answers everywhere (`Plugin.batch_breaks`, e.g. a pod with inter-pod
affinity terms), and only for pods decided on every node (no placement, no nominated pods held
against them, no nomination of their own, no PreFilter narrowing or rejection).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from placer.engine.cluster import ClusterState
from placer.engine.framework import BATCH_NONE, UNSIGNABLE, FilterPlugin, Plugin, ScorePlugin
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile

__all__ = ["Batch", "BatchPlan", "Batches", "batch_plan"]

_SETTLE = 3  # pods a batch serves before the scores no pod changes are worked out on every node
# a profile whose last _IDLE batches served fewer than two pods (a varied workload: signing and
# making columns are only cost there) signs one pod in _SAMPLE until one serves more
_IDLE = 32
_SAMPLE = 8
_PROFILES = 64  # profiles a scheduler keeps batches for


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """A profile's plugins as batching needs them (found once per profile)."""

    #: the plugins that sign a pod: the filters and scores, one of each kind and args
    signers: tuple[Plugin[Any], ...]
    #: the filters a pod counted on a node may change there (asked again where pods changed)
    local_filters: tuple[FilterPlugin[Any], ...]
    #: the filters no pod changes
    fixed_filters: tuple[FilterPlugin[Any], ...]
    #: per score plugin of the profile: whether a pod counted on a node may change its raw score there
    local_scores: tuple[bool, ...]
    #: the plugins whose answers some pods change everywhere (`Plugin.batch_breaks`)
    breakers: tuple[Plugin[Any], ...]

    #: their `sign` methods
    signs: tuple[Callable[[PodInfo, ClusterState], object], ...] = ()

    def sign(self, pod: PodInfo, cluster: ClusterState) -> tuple[object, ...] | None:
        """The pod's signature: every signer's fragment; None when one cannot sign it."""
        fragments = [sign(pod, cluster) for sign in self.signs]
        for fragment in fragments:
            if fragment is UNSIGNABLE:
                return None
        return tuple(fragments)


_PLANS: weakref.WeakKeyDictionary[Profile, BatchPlan] = weakref.WeakKeyDictionary()


def batch_plan(profile: Profile) -> BatchPlan:
    """The profile's `BatchPlan`."""
    plan = _PLANS.get(profile)
    if plan is None:
        signers: list[Plugin[Any]] = []
        seen: list[tuple[type, Any]] = []
        for plugin in (*profile.filters, *(p for p, _ in profile.scores)):
            kind = (type(plugin), plugin.args)
            if kind not in seen:
                seen.append(kind)
                signers.append(plugin)
        plan = BatchPlan(
            signers=tuple(signers),
            signs=tuple(plugin.sign for plugin in signers),
            local_filters=tuple(p for p in profile.filters if p.batch_reach != BATCH_NONE),
            fixed_filters=tuple(p for p in profile.filters if p.batch_reach == BATCH_NONE),
            local_scores=tuple(p.batch_reach != BATCH_NONE for p, _ in profile.scores),
            breakers=tuple(p for p in signers if type(p).batch_breaks is not Plugin.batch_breaks),
        )
        _PLANS[profile] = plan
    return plan


class Batch:
    """One profile's work for one signature, valid for the cluster as it was at (`version`,
    `changes`) (see the module's docstring). Made from a full cycle, cheaply (most pods of a varied
    workload are never followed by one of their signature); its columns are built when a pod first
    reuses it."""

    __slots__ = ("_cluster", "_flat", "_seed", "applies", "changes", "feasible", "known", "passes", "plan",
                 "pointwise", "raw", "revision", "served", "signature", "static_version", "total", "total_known",
                 "total_stale", "uses", "version")

    def __init__(
        self, plan: BatchPlan, signature: tuple[object, ...], cluster: ClusterState,
        feasible: np.ndarray, slots: np.ndarray, raw: list[np.ndarray | None],
    ) -> None:
        """From a full cycle: its feasible nodes (the cycle's own array: the batch owns it now), the
        nodes it scored and each score plugin's raw scores there (None: the plugin did not apply)."""
        self.plan = plan
        self.signature = signature
        self._cluster = weakref.ref(cluster)
        self.feasible = feasible
        self.applies = tuple([values is not None for values in raw])
        self._seed: tuple[np.ndarray, list[np.ndarray | None]] | None = (slots, raw)
        self.served = 0  # pods it served
        self.sync(cluster)

    def _build(self, pod: PodInfo, profile: Profile, cluster: ClusterState) -> None:
        """The columns, from the seeding cycle's scores (the cluster's nodes and catalog are as they
        were then: only pods may have changed, which `serves` accounts for next)."""
        assert self._seed is not None
        slots, raw = self._seed
        self._seed = None
        size = cluster.size
        passes = cluster.present[:size].copy()
        for plugin in self.plan.fixed_filters:
            mask = plugin.filter(pod, cluster)
            if mask is not None:
                passes &= mask
        self.passes = passes
        #: per score plugin: whether its normalisation is the default (each node's score alone), so
        #: that its weighted score adds into `total` once per node
        self.pointwise = tuple(type(plugin).normalize is ScorePlugin.normalize for plugin, _ in profile.scores)
        self.raw: list[np.ndarray | None] = []
        self.known: list[np.ndarray | None] = []
        for values in raw:
            if values is None:
                self.raw.append(None)
                self.known.append(None)
                continue
            column = np.zeros(size, dtype=values.dtype)
            column[slots] = values
            known = np.zeros(size, dtype=bool)
            known[slots] = True
            self.raw.append(column)
            self.known.append(known)
        #: per plugin that applies, no pod changes and normalises over the candidates: the value its
        #: raw score has on every node, when it has one (then its normalised scores depend only on
        #: how many candidates there are: kept per count); looked for once the batch has served a few
        self._flat: list[tuple[np.ndarray, dict[int, np.ndarray]] | None] = [None] * len(raw)
        self.uses = 0
        #: per node: the weighted scores of the pointwise plugins, added, where `total_known`; where
        #: `total_stale`, known once but its pods changed since
        self.total = np.zeros(size, dtype=np.int64)
        self.total_known = np.zeros(size, dtype=bool)
        self.total_stale = np.zeros(size, dtype=bool)

    def _settle(self, pod: PodInfo, profile: Profile, cluster: ClusterState) -> None:
        """A batch serving pod after pod: the scores no pod changes, on every node at once (and
        whether one is the same everywhere)."""
        candidates = np.flatnonzero(self.passes)
        for index, ((plugin, _), local) in enumerate(zip(profile.scores, self.plan.local_scores, strict=True)):
            if not self.applies[index] or local:
                continue
            values = self._raw(index, plugin, pod, cluster, candidates)
            if not self.pointwise[index] and values.size and values.min() == values.max():
                self._flat[index] = (values[:1], {})

    def sync(self, cluster: ClusterState) -> None:
        """Valid for the cluster as it is now."""
        self.static_version = cluster.static_version
        self.revision = cluster.catalog.revision
        self.version = cluster.version
        self.changes = cluster.pod_changes

    def serves(self, signature: tuple[object, ...], pod: PodInfo, profile: Profile, cluster: ClusterState) -> bool:
        """Whether this batch serves a pod of `signature` on `cluster` now: brought up to date where
        pods changed since (the filters asked again there, the raw scores forgotten). False: it
        cannot (the pod is decided afresh)."""
        if self._cluster() is not cluster or signature != self.signature:
            return False
        if cluster.static_version != self.static_version or cluster.catalog.revision != self.revision:
            return False
        changes = cluster.pod_changes_since(self.version, self.changes)
        if changes is None:
            return False
        if self._seed is not None:
            self._build(pod, profile, cluster)
        if changes:
            breakers = self.plan.breakers
            dirty: set[int] = set()
            for slot, changed in changes:
                if breakers and any(plugin.batch_breaks(pod, changed) for plugin in breakers):
                    return False
                if slot is not None:
                    dirty.add(slot)
            if dirty:
                self._refresh(pod, cluster, np.fromiter(dirty, dtype=np.int64, count=len(dirty)))
        self.sync(cluster)
        return True

    def _refresh(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> None:
        """The nodes at `slots` had pods counted or uncounted: their filters asked again (those
        pods change), their scores forgotten (those pods change)."""
        local_known = [known for known, local in zip(self.known, self.plan.local_scores, strict=True)
                       if known is not None and local]
        stale_totals = any(self.pointwise[index] for index, (known, local) in enumerate(
            zip(self.known, self.plan.local_scores, strict=True)) if known is not None and local)
        if len(slots) == 1:  # (the usual: the node the pod before went to) without array calls
            slot = int(slots[0])
            fits = bool(self.passes[slot])
            for plugin in self.plan.local_filters:
                if not fits:
                    break
                mask = plugin.filter_at(pod, cluster, slots)
                if mask is not None:
                    fits = bool(mask[0])
            self.feasible[slot] = fits
            for known in local_known:
                known[slot] = False
            if stale_totals and self.total_known[slot]:
                self.total_known[slot] = False
                self.total_stale[slot] = True
            return
        fits = self.passes[slots]
        for plugin in self.plan.local_filters:
            if not fits.any():
                break
            mask = plugin.filter_at(pod, cluster, slots)
            if mask is not None:
                fits &= mask
        self.feasible[slots] = fits
        for known in local_known:
            known[slots] = False
        if stale_totals:
            self.total_stale[slots] |= self.total_known[slots]
            self.total_known[slots] = False

    def weigh(self, pod: PodInfo, profile: Profile, cluster: ClusterState, slots: np.ndarray) -> tuple[
        np.ndarray, Callable[[], list[tuple[str, np.ndarray | None]]], Callable[[int], dict[str, int]]
    ]:
        """The candidates' totals, as a full cycle's `weigh` adds them, and how to get each plugin's
        normalised scores, on every candidate or on one (asked only for the decision's best)."""
        scores = profile.scores
        self.uses += 1
        if self.uses == _SETTLE:
            self._settle(pod, profile, cluster)
        need = ~self.total_known[slots]
        if need.any():
            missing = slots[need]
            stale = self.total_stale
            if stale.any():
                # with every node whose pods changed since its total was known: asked together,
                # once every so many cycles rather than one in each (as candidates come round)
                missing = np.union1d(missing, np.flatnonzero(stale))
                stale[:] = False
            part = np.zeros(missing.size, dtype=np.int64)
            for index, (plugin, weight) in enumerate(scores):
                if self.applies[index] and self.pointwise[index]:
                    normalized = plugin.normalize(self._raw(index, plugin, pod, cluster, missing))
                    part += normalized if weight == 1 else weight * normalized
            self.total[missing] = part
            self.total_known[missing] = True
        totals = self.total[slots]
        others: dict[int, np.ndarray] = {}
        for index, (plugin, weight) in enumerate(scores):
            if self.applies[index] and not self.pointwise[index]:
                normalized = others[index] = self._normalized(index, plugin, pod, cluster, slots)
                totals += normalized if weight == 1 else weight * normalized

        def per_plugin() -> list[tuple[str, np.ndarray | None]]:
            result: list[tuple[str, np.ndarray | None]] = []
            for index, (plugin, _) in enumerate(scores):
                if not self.applies[index]:
                    result.append((plugin.name, None))
                elif index in others:
                    result.append((plugin.name, others[index]))
                else:
                    result.append((plugin.name, plugin.normalize(self._raw(index, plugin, pod, cluster, slots))))
            return result

        def scores_at(position: int) -> dict[str, int]:
            slot = slots[position : position + 1]
            result: dict[str, int] = {}
            for index, (plugin, _) in enumerate(scores):
                if not self.applies[index]:
                    result[plugin.name] = 0
                elif index in others:
                    result[plugin.name] = int(others[index][position])
                else:  # pointwise: normalised alone as among the others
                    result[plugin.name] = int(plugin.normalize(self._raw(index, plugin, pod, cluster, slot))[0])
            return result

        return totals, per_plugin, scores_at

    def _normalized(self, index: int, plugin: ScorePlugin[Any], pod: PodInfo, cluster: ClusterState,
                    slots: np.ndarray) -> np.ndarray:
        """A plugin's normalised scores on `slots` that normalises over the candidates."""
        flat = self._flat[index]
        if flat is None:
            return plugin.normalize(self._raw(index, plugin, pod, cluster, slots))
        value, by_count = flat  # every node's raw score is `value`: normalise that many of it
        normalized = by_count.get(slots.size)
        if normalized is None:
            normalized = by_count[slots.size] = plugin.normalize(np.repeat(value, slots.size))
        return normalized

    def _raw(self, index: int, plugin: ScorePlugin[Any], pod: PodInfo, cluster: ClusterState,
             slots: np.ndarray) -> np.ndarray:
        """Score plugin `index`'s raw scores on `slots` (it applies): those not known asked now."""
        column, known = self.raw[index], self.known[index]
        assert column is not None and known is not None
        missing = slots[~known[slots]]
        if missing.size:
            plugin.pre_score(pod, cluster)  # (its per-pod state, as a cycle primes it)
            values = plugin.score(pod, cluster, missing)
            if values.dtype != column.dtype:  # another type of number: the column starts again
                values = plugin.score(pod, cluster, slots)
                column = self.raw[index] = np.zeros(len(column), dtype=values.dtype)
                known[:] = False
                missing = slots
                self._flat[index] = None
            column[missing] = values
            known[missing] = True
        return column[slots]


class _Profile:
    """A profile's plan, its batch, and how many batches in a row served fewer than two pods."""

    __slots__ = ("batch", "idle", "plan")

    def __init__(self, plan: BatchPlan) -> None:
        self.plan = plan
        self.batch: Batch | None = None
        self.idle = 0


Signed = tuple[_Profile, tuple[object, ...]]


class Batches:
    """A scheduler's batches, one per profile (the last pod decided in full that could be signed),
    and when to sign at all: a profile whose batches keep serving fewer than two pods signs only a
    sample of its pods until one serves more (signing costs a few microseconds a pod, a batch's
    columns about a cycle; the decisions are the same either way)."""

    def __init__(self) -> None:
        # id(profile) -> (profile, its state): a plain dict, asked for every pod (a profile replaced
        # stays until a few more are: the dict is emptied past _PROFILES)
        self._profiles: dict[int, tuple[Profile, _Profile]] = {}
        self._skipped = 0

    def sign(self, profile: Profile, pod: PodInfo, cluster: ClusterState) -> Signed | None:
        """The pod's signature, with its profile's batching state; None when it is not batched."""
        entry = self._profiles.get(id(profile))
        if entry is None or entry[0] is not profile:
            if len(self._profiles) >= _PROFILES:
                self._profiles.clear()
            state = _Profile(batch_plan(profile))
            self._profiles[id(profile)] = (profile, state)
        elif (state := entry[1]).idle >= _IDLE:
            self._skipped += 1
            if self._skipped % _SAMPLE:
                return None
        signature = state.plan.sign(pod, cluster)
        return None if signature is None else (state, signature)

    @staticmethod
    def serving(signed: Signed, pod: PodInfo, profile: Profile, cluster: ClusterState) -> Batch | None:
        """The profile's batch if it serves this pod now (`Batch.serves`)."""
        state, signature = signed
        batch = state.batch
        if batch is None or not batch.serves(signature, pod, profile, cluster):
            return None
        batch.served += 1
        if batch.served == 2:  # (one pod served does not pay for making the batch's columns)
            state.idle = 0
        return batch

    @staticmethod
    def keep(signed: Signed, cluster: ClusterState, feasible: np.ndarray, slots: np.ndarray,
             raw: list[np.ndarray | None]) -> None:
        """A full cycle's work (`Batch`), for the pods of its signature that come next."""
        state, signature = signed
        if state.batch is not None and state.batch.served < 2:
            state.idle += 1
        state.batch = Batch(state.plan, signature, cluster, feasible, slots, raw)
