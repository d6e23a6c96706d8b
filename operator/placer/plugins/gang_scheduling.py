"""GangScheduling — a gang's pods are bound together or not at all, as kube-scheduler v1.36's plugin
of that name (its Permit; its PreEnqueue is the operator's queueing, see docs/gang.md).

The operator decides a gang as one unit (`placer.engine.gang.decide_group`: every pending pod of
the group on one snapshot, at least `minCount` of them assumed or none). This plugin is the
binding cycle's guard on top of that, kube's Permit:

- a pod of no group, or of a `basic` group, is allowed at once;
- a pod of a gang waits on Permit, assumed on its node (its room held, no bind sent), while fewer
  than `minCount` of the group's pods are assumed or bound (`groups.scheduled_members`): kube's
  `waiting for minCount pods from a gang to be scheduled`. The pod that completes the quorum is
  allowed, and allows every pod of its group this plugin holds: they are bound together;
- a wait lasts kube's 5 minutes (`permitTimeoutDuration`), or a scheduler-plugins group's
  `spec.scheduleTimeoutSeconds` (its Coscheduling default: 60 s); then the pod is rejected
  (`rejected due to timeout after waiting 5m0s at plugin GangScheduling`);
- a pod of the gang that will not be bound after all (rejected, timed out, its bind failed:
  Unreserve) rejects the others still held — no partial gang is left waiting for it — and they
  go back to the queue to be decided again as a group;
- a pod whose PodGroup is gone is rejected (kube: `failed to get podGroup NS/NAME`).

Since the operator assumes a placed gang's pods all at once, the first permit finds the quorum
met and allows them all; the hold matters when the group is short (a member's bind failed and
it is decided again with fewer placed) — it is never bound alone.

Filter: none (it admits every node): a Permit plugin is listed in a profile's `filters`.

Args: `permitTimeoutSeconds` (default 300, kube's; at most 900: kube's cap on any Permit wait);
scheduler-plugins' groups use their own `scheduleTimeoutSeconds` when set.

Example profile::

    spec:
      schedulerName: placer
      filters:
        - name: NodeResourcesFit
        - name: GangScheduling
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    ALLOW,
    BATCH_NONE,
    ClusterEvent,
    FilterPlugin,
    Permit,
    PermitPlugin,
    PluginArgs,
    WaitingPods,
)
from placer.engine.groups import COSCHEDULING_KIND, POD_GROUP_KIND, group_of, lookup, scheduled_members
from placer.engine.objects import PodInfo

__all__ = ["COSCHEDULING_TIMEOUT", "GangScheduling", "GangSchedulingArgs"]

#: scheduler-plugins' Coscheduling default for a group without spec.scheduleTimeoutSeconds
COSCHEDULING_TIMEOUT = 60.0


class GangSchedulingArgs(PluginArgs):
    permitTimeoutSeconds: float = Field(default=300.0, gt=0, le=900)


class GangScheduling(FilterPlugin[GangSchedulingArgs], PermitPlugin[GangSchedulingArgs]):
    name: ClassVar[str] = "GangScheduling"
    Args: ClassVar[type[PluginArgs]] = GangSchedulingArgs
    #: a pod this plugin rejected may go once a pod is added (one more member) or its group changes
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.POD_ADD, POD_GROUP_KIND, COSCHEDULING_KIND})

    batch_reach: ClassVar[str] = BATCH_NONE

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        return None  # no Filter answer of its own (its Permit is not batched)

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def permit(self, pod: PodInfo, cluster: ClusterState, node: str, waiting: WaitingPods) -> Permit:
        ref = group_of(pod)
        if ref is None:
            return ALLOW
        group = lookup(cluster.catalog, ref)
        if group is None:
            return Permit.reject(f"failed to get podGroup {ref.key}")
        if not group.gang:
            return ALLOW
        if scheduled_members(cluster, ref) < group.min_count:
            if group.upstream or group.schedule_timeout is None:
                timeout = self.args.permitTimeoutSeconds if group.upstream else COSCHEDULING_TIMEOUT
            else:
                timeout = float(group.schedule_timeout) or COSCHEDULING_TIMEOUT
            return Permit.wait(timeout)
        for held in waiting.waiting_on(self.name):  # the quorum is met: the group goes together
            if held.pod.key != pod.key and group_of(held.pod) == ref:
                held.allow(self.name)
        return ALLOW

    def unpermit(self, pod: PodInfo, cluster: ClusterState, waiting: WaitingPods) -> None:
        from placer.engine.gang import GANG_WAITING  # (engine.gang imports the runtime, which loads plugins)

        ref = group_of(pod)
        if ref is None:
            return
        for held in waiting.waiting_on(self.name):
            if held.pod.key != pod.key and group_of(held.pod) == ref:
                held.reject(self.name, GANG_WAITING)
