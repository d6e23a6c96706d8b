"""Pods a kubelet refused (its admission: `OutOfcpu`, `NodeAffinity`, `UnexpectedAdmissionError`...):
reported, and their nodes counted as the kubelet counts them for a while.

A watch of failed pods (`placer.controller.failed_pods`) shows such a pod going `Failed` on the node
it was bound to, its status saying why (`placer.engine.kubelet_admission.rejection_of`). When that
pod was counted on its node until then (still counted, or gone from the pod watch a moment ago: the
pod watch selects active pods and says DELETED when one ends, in whichever order the two watches
answer; a pod that failed before this operator started is not reported):

- the node is counted as the kubelet counts it (`kubelet_admission.withhold`) until pods arriving in
  the watch explain the difference, the Node object changes, or `Options.kubelet_settle` seconds pass
  (then released here and the queue woken), so a controller's replacement pod does not go back to a
  node that refuses it; on every replica, so a new leader sees the same;
- a pod this operator bound (remembered from its binding on: not another scheduler's, nor one
  created with its `nodeName`; the kubelet's refusal drops the pod's `PodScheduled` condition, which
  it owns, so the pod itself no longer says) gets, from the leader, a Warning event
  `RejectedByKubelet` naming the node and the kubelet's reason and message, and counts in
  `placer_kubelet_rejections_total{profile,reason}`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placer.engine.cluster import PodRecord
from placer.engine.kubelet_admission import Rejection, Withholding, rejection_of, release, withhold
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_pod

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["KubeletRejections"]

logger = logging.getLogger("placer.kubelet")

#: bound pods gone from the pod watch remembered (key -> (uid, node)), the oldest forgotten first: a
#: failed pod's ADDED comes within moments of its DELETED there
REMEMBERED_GONE = 4096
#: pods this operator bound, remembered by uid, the oldest forgotten first: a kubelet refuses a pod
#: within moments of its binding
REMEMBERED_BOUND = 8192


class KubeletRejections:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self._timers: dict[tuple[str, int], asyncio.TimerHandle] = {}
        self._gone: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._bound: OrderedDict[str, None] = OrderedDict()

    def bound(self, pod: PodInfo) -> None:
        """This operator bound the pod (the binding cycle): a refusal of it is its to report."""
        bound = self._bound
        bound[pod.uid] = None
        if len(bound) > REMEMBERED_BOUND:
            bound.popitem(last=False)

    def gone(self, record: PodRecord) -> None:
        """A pod counted on its node left the pod watch (deleted, or ended): remembered a while."""
        self._gone[record.pod.key] = (record.pod.uid, record.node)
        self._gone.move_to_end(record.pod.key)
        while len(self._gone) > REMEMBERED_GONE:
            self._gone.popitem(last=False)

    def failed(self, raw: Mapping[str, Any]) -> Rejection | None:
        """A pod of the failed pods' watch: a kubelet's refusal if its status says so."""
        try:
            pod = parse_pod(raw)
        except ObjectError as error:
            logger.debug("ignoring an unusable failed pod: %s", error)
            return None
        record = self.state.cluster.pods.get(pod.key)
        counted = record is not None and record.node == pod.node_name and record.pod.uid == pod.uid
        if counted:
            self.state.cache.pod_seen(pod)  # ended: no longer counted on its node
        elif self._gone.get(pod.key) == (pod.uid, pod.node_name):
            counted = True
        self._gone.pop(pod.key, None)  # reported once
        return self.observed(pod, raw.get("status"), counted, ours=self._bound.pop(pod.uid, 0) is None)

    def observed(self, pod: PodInfo, status: Any, counted: bool, ours: bool = True) -> Rejection | None:
        """A pod seen ended (`Failed`); `counted`: it was counted on its node until now; `ours`: this
        operator bound it. Returns the kubelet's refusal when it was one."""
        if not counted or not pod.node_name:
            return None
        rejection = rejection_of(status)
        if rejection is None:
            return None
        state = self.state
        node = pod.node_name
        withholding = withhold(state.cluster, pod, node, rejection)
        if withholding is not None:
            self._release_later(withholding)
            state.wake()  # the queue's view of the node changed (pods may now go elsewhere sooner)
        profile = state.profiles.active(pod.scheduler_name)
        logger.warning("pod %s (scheduler %s) rejected by the kubelet on node %s: %s: %s%s", pod.key,
                       pod.scheduler_name, node, rejection.reason, rejection.message, _withheld(withholding))
        if profile is not None and ours and state.is_leader():
            state.metrics.kubelet_rejections.inc(profile=profile.name, reason=rejection.reason)
            state.reporter.kubelet_rejected(pod, node, rejection.reason, rejection.message, profile.scheduler_name)
        return rejection

    def _release_later(self, withholding: Withholding) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous test): the withholding lasts until explained
            return
        key = (withholding.node, withholding.serial)
        self._timers[key] = loop.call_later(self.state.options.kubelet_settle, self._release, withholding)

    def _release(self, withholding: Withholding) -> None:
        self._timers.pop((withholding.node, withholding.serial), None)
        if release(self.state.cluster, withholding):
            logger.info("node %s: the kubelet's view is no longer withheld (settle time passed)", withholding.node)
            self.state.wake()

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def withheld_nodes(self) -> list[tuple[Mapping[str, str], float]]:
        """Nodes counted as their kubelets count them now, by kind (`amounts`, `held`): a gauge."""
        cluster = self.state.cluster
        return [({"kind": "amounts"}, float(len(cluster.withheld))), ({"kind": "held"}, float(len(cluster.held)))]


def _withheld(withholding: Withholding | None) -> str:
    if withholding is None:
        return " (the watch already explains it)"
    if withholding.kind == "node":
        return "; node held until it changes"
    parts = [f"{name} {amount}" for name, amount in withholding.amounts.items()]
    parts += [f"port {protocol}/{port}" for _, protocol, port in withholding.ports]
    return "; withheld there as the kubelet counts it: " + ", ".join(parts)
