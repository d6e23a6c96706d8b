"""HoldUntilLabelled — a test plugin: a Permit that holds every pod it is asked about until the pod
carries a label, to show that a plugin with a binding-cycle point is one module and the operator
needs no change for it (tests/controller/test_integration_binding_cycle.py runs it end to end).

Permit: a pod that carries `labelKey` (any value) is allowed at once; any other waits, assumed on
its node (its room held) but not bound, until a newer version of it with the label comes from the
watch (`pod_updated`: kube's "released by an event"), or, after `timeoutSeconds`, is rejected —
`0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin HoldUntilLabelled.`

Filter: none (it admits every node): a plugin is listed in a profile by its lists, and the Permit
point runs for every plugin of the profile that has it.

Args: `labelKey` (default `placer.dev/release`), `timeoutSeconds` (0 < t <= 900, default 30).

Example profile::

    spec:
      schedulerName: held
      filters: [{name: NodeResourcesFit}, {name: HoldUntilLabelled, args: {timeoutSeconds: 60}}]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from placer.engine.cluster import ClusterState
from placer.engine.framework import ALLOW, FilterPlugin, Permit, PermitPlugin, PluginArgs, WaitingPods
from placer.engine.objects import PodInfo
from pydantic import Field

__all__ = ["HoldUntilLabelled", "HoldUntilLabelledArgs"]


class HoldUntilLabelledArgs(PluginArgs):
    labelKey: str = Field(default="placer.dev/release", min_length=1)
    timeoutSeconds: float = Field(default=30.0, gt=0, le=900)


class HoldUntilLabelled(FilterPlugin[HoldUntilLabelledArgs], PermitPlugin[HoldUntilLabelledArgs]):
    name: ClassVar[str] = "HoldUntilLabelled"
    Args: ClassVar[type[PluginArgs]] = HoldUntilLabelledArgs

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def permit(self, pod: PodInfo, cluster: ClusterState, node: str, waiting: WaitingPods) -> Permit:
        if self.args.labelKey in pod.labels:
            return ALLOW
        return Permit.wait(self.args.timeoutSeconds)

    def pod_updated(self, pod: PodInfo, cluster: ClusterState, waiting: WaitingPods) -> None:
        held = waiting.get(pod.key)
        if (
            held is not None
            and self.name in held.pending
            and held.pod.uid == pod.uid
            and self.args.labelKey in pod.labels
        ):
            held.allow(self.name)
