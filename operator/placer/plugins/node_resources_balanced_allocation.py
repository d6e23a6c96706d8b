"""NodeResourcesBalancedAllocation — prefer nodes whose resources stay in balance.

What it does (kube-scheduler v1.36's plugin): for each resource, the fraction of allocatable
that bound pods request (capped at 1); a node's balance is `(1 - std) * 100` over those
fractions. v1.36 (kubernetes#135573) scores how the pod changes it: the balance with the pod
against the balance without it, `50 + (50 + with - without) / 2` — 75 when the pod leaves the
balance as it was, towards 100 when it evens the node out, towards 50 when it tips it. Pods
that request none of the resources (best-effort) are skipped and score 0 everywhere, as in
kube-scheduler; extended resources the pod does not request are left out of the fractions. A
pod's requests are its pod-level ones where set, and a bound pod's resize counts as in
NodeResourcesFit.

Args::

    resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]   # the default; weight must be 1

Example profile::

    spec:
      schedulerName: my-scheduler
      scores:
        - name: NodeResourcesBalancedAllocation
          args: {resources: [{name: cpu}, {name: memory}, {name: nvidia.com/gpu}]}
"""

from __future__ import annotations

import contextlib
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from placer.engine.cluster import CPU, MEMORY, ClusterState
from placer.engine.extended_resources import class_for, is_dra_extended_resource_name
from placer.engine.framework import MAX_NODE_SCORE, PluginArgs, ScorePlugin
from placer.engine.objects import PodInfo, is_scalar_resource
from placer.plugins.node_resources_fit import allocation, pod_request_for_score


class BalancedResource(PluginArgs):
    name: str = Field(min_length=1)
    weight: Literal[1] = 1  # kube-scheduler rejects any other weight here


class BalancedAllocationArgs(PluginArgs):
    resources: tuple[BalancedResource, ...] = Field(
        default=(BalancedResource(name="cpu"), BalancedResource(name="memory")), min_length=1
    )

    @field_validator("resources")
    @classmethod
    def _unique(cls, resources: tuple[BalancedResource, ...]) -> tuple[BalancedResource, ...]:
        names = [r.name for r in resources]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate resource name(s) {', '.join(duplicates)}")
        return resources


class NodeResourcesBalancedAllocation(ScorePlugin[BalancedAllocationArgs]):
    name: ClassVar[str] = "NodeResourcesBalancedAllocation"
    Args: ClassVar[type[PluginArgs]] = BalancedAllocationArgs

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return pod.requests  # against each node's own pods (BATCH_NODE)

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return any(pod_request_for_score(pod, r.name, nonzero=False) for r in self.args.resources)

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        # kubernetes#135573: how the pod changes the node's balance, mapped back onto 50..100
        # (Go's int64 arithmetic; 50 + with - without is never negative, so // truncates as Go does)
        half = MAX_NODE_SCORE // 2
        two = self._two_columns(pod, cluster)
        if two is not None:  # the default (cpu, memory): one pass over both
            columns, amounts = two
            if columns == [CPU, MEMORY]:  # (resource x candidate) blocks, a row per resource
                used = cluster.requested.T[:2].take(slots, axis=1)
                allocatable, positive = cluster.cpu_memory_allocatable(slots)
            else:
                used = np.stack([cluster.requested[:, column].take(slots) for column in columns])
                allocatable = np.stack([cluster.allocatable[:, column].take(slots) for column in columns])
                positive = bool((allocatable > 0).all())
            change = balance_of_two_rows(used, allocatable, amounts, positive)
        else:
            with_pod, without_pod = [], []
            for spec in self.args.resources:
                found = allocation(pod, cluster, slots, spec.name, nonzero=False)
                if found is None:
                    continue
                requested, allocatable = found
                with_pod.append((requested, allocatable))
                without_pod.append((requested - pod_request_for_score(pod, spec.name, nonzero=False), allocatable))
            if not with_pod:  # nothing to weigh anywhere: balanced with and without the pod
                return np.full(len(slots), half + half // 2, dtype=np.int64)
            change = balance(with_pod) - balance(without_pod)
        change += 3 * half  # half + (half + change) // 2, in two steps
        change //= 2
        return change

    def _two_columns(self, pod: PodInfo, cluster: ClusterState) -> tuple[list[int], np.ndarray] | None:
        """The node table's columns and the pod's requests when exactly two resources are weighed."""
        if len(self.args.resources) != 2:
            return None
        columns, amounts = [], []
        for spec in self.args.resources:
            column = cluster.resource_index.get(spec.name)
            amount = pod_request_for_score(pod, spec.name, nonzero=False)
            if column is None or (amount == 0 and is_scalar_resource(spec.name)):
                return None
            if is_dra_extended_resource_name(spec.name) and class_for(cluster.catalog, spec.name) is not None:
                return None  # a DeviceClass backs it: nodes without it count devices (`allocation`)
            columns.append(column)
            amounts.append(amount)
        return columns, np.asarray(amounts, dtype=np.int64)


def balance_of_two(used: np.ndarray, allocatable: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    """`balance(with the pod) - balance(without it)` for two resources, over (nodes x 2) columns of
    what the node's pods request and its allocatable: the std of two fractions is half their
    distance, 0 where a node lacks either resource."""
    return balance_of_two_rows(used.T, allocatable.T, np.asarray(amounts))


def balance_of_two_rows(
    used: np.ndarray, allocatable: np.ndarray, amounts: np.ndarray, positive: bool | None = None
) -> np.ndarray:
    """`balance_of_two` over (2 x nodes) rows, one per resource (the default profile's path): all
    four fractions (with and without the pod, two resources) in one block, so a handful of numpy
    calls does it. `positive`: whether all of `allocatable` is above 0, if known."""
    if positive is None:
        positive = bool((allocatable > 0).all())
    lacking = None if positive else (allocatable == 0).any(axis=0)
    fractions = np.empty((2, 2, used.shape[1]))  # [with the pod, without it] x resource x node
    with contextlib.nullcontext() if lacking is None else np.errstate(divide="ignore", invalid="ignore"):
        np.divide(used + amounts[:, None], allocatable, out=fractions[0])
        np.divide(used, allocatable, out=fractions[1])
    np.minimum(fractions, 1.0, out=fractions)
    distance = fractions[:, 0] - fractions[:, 1]  # rows: with the pod, without it
    np.abs(distance, out=distance)
    if lacking is not None:
        distance[:, lacking] = 0.0
    # (1 - d / 2) * 100 truncated, in Go's order of operations (the last bit decides the truncation);
    # d * 0.5 is d / 2 to the bit (a power of two), and cheaper
    distance *= 0.5
    np.subtract(1.0, distance, out=distance)
    distance *= MAX_NODE_SCORE
    scores = distance.astype(np.int64)
    return scores[0] - scores[1]


def balance(columns: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """kube's `balancedResourceScore` per slot over (requested, allocatable) columns: the fractions
    requested / allocatable capped at 1 (a resource the node lacks left out), score `(1 - std) * 100`
    truncated, with std half the distance for two fractions and the population std for more."""
    fractions = []
    for requested, allocatable in columns:
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.minimum(requested / allocatable, 1.0)
        fractions.append(np.where(allocatable > 0, fraction, np.nan))
    if len(fractions) == 1:  # one fraction (or none on a node): std 0
        return np.full(len(fractions[0]), MAX_NODE_SCORE, dtype=np.int64)
    if len(fractions) == 2:  # the default (cpu, memory): kube's std of two is half their distance
        distance = np.abs(fractions[0] - fractions[1])  # NaN where a node lacks either
        std = np.where(np.isnan(distance), 0.0, distance / 2)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    matrix = np.vstack(fractions)
    known = ~np.isnan(matrix)
    counted = known.sum(axis=0)
    values = np.where(known, matrix, 0.0)
    spread = np.where(known, matrix, -np.inf).max(axis=0) - np.where(known, matrix, np.inf).min(axis=0)
    mean = values.sum(axis=0) / np.maximum(counted, 1)
    population_std = np.sqrt(np.where(known, (values - mean) ** 2, 0.0).sum(axis=0) / np.maximum(counted, 1))
    std = np.where(counted == 2, np.abs(spread) / 2, np.where(counted > 2, population_std, 0.0))
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
