"""NodeResourcesBalancedAllocation — prefer nodes whose resources stay in balance.

What it does (kube-scheduler's plugin): for each resource, the fraction of allocatable that
bound pods plus this pod would request (capped at 1); the score is `(1 - std) * 100` over
those fractions, so a node whose cpu and memory fill up evenly beats one that runs out of one
long before the other. Pods that request none of the resources (best-effort) are skipped and
score 0 everywhere, as in kube-scheduler; extended resources the pod does not request are left
out of the fractions.

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

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from placer.engine.cluster import ClusterState
from placer.engine.framework import MAX_NODE_SCORE, PluginArgs, ScorePlugin
from placer.engine.objects import PodInfo
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

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        return any(pod_request_for_score(pod, r.name, nonzero=False) for r in self.args.resources)

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        fractions = []
        for spec in self.args.resources:
            found = allocation(pod, cluster, slots, spec.name, nonzero=False)
            if found is None:
                continue
            requested, allocatable = found
            with np.errstate(divide="ignore", invalid="ignore"):
                fraction = np.minimum(requested / allocatable, 1.0)
            fractions.append(np.where(allocatable > 0, fraction, np.nan))
        if not fractions:
            return np.full(len(slots), MAX_NODE_SCORE, dtype=np.int64)
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
