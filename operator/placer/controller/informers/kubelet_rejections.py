"""Pods a kubelet refused (its admission: `OutOfcpu`, `NodeAffinity`, `UnexpectedAdmissionError`...):
reported, and their nodes counted as the kubelet counts them for a while.

An informer of failed pods (`FAILED_PODS_SELECTOR`: the pod informer, as kube-scheduler's, selects
active pods, and a pod that ends leaves it as DELETED with its content from before, never saying
why) shows such a pod `Failed` on the node it was bound to, its status saying why
(`placer.engine.kubelet_admission.rejection_of`). When that pod was counted on its node until then
(still counted, or gone from the pod informer a moment ago: `gone`, in whichever order the two
informers answer; a pod that failed before, listed by the informer's LIST, is not):

- the node is counted as the kubelet counts it (`kubelet_admission.withhold`) until pods arriving in
  the watch explain the difference, the Node object changes, or `settle` seconds pass (then
  released here and the queue woken), so a controller's replacement pod does not go back to a node
  that refuses it; on every replica, so a new leader sees the same;
- a pod this operator bound (`bound`, from the binding cycle: not another scheduler's, nor one
  created with its `nodeName`; the kubelet's status drops the pod's `PodScheduled` condition, which
  the kubelet owns, so the pod itself no longer says) gets, from the leader, a Warning event
  `RejectedByKubelet` naming the node and the kubelet's reason and message, and counts in
  `placer_kubelet_rejections_total{profile,reason}`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from placer.controller.metrics import Metrics
from placer.controller.signals import Wake
from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.kubelet_admission import Rejection, Withholding, rejection_of, release, withhold
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_pod
from placer.engine.profile import Profile

__all__ = ["FAILED_PODS_SELECTOR", "KubeletRejections"]

logger = logging.getLogger("placer.kubelet")

#: the informer of pods that ended `Failed` on a node
FAILED_PODS_SELECTOR = "status.phase=Failed,spec.nodeName!="
#: bound pods gone from the pod informer remembered (key -> (uid, node)), the oldest forgotten first: a
#: failed pod's ADDED comes within moments of its DELETED there
REMEMBERED_GONE = 4096
#: pods this operator bound, remembered by uid, the oldest forgotten first: a kubelet refuses a pod
#: within moments of its binding
REMEMBERED_BOUND = 8192


class Notices(Protocol):
    """The event a rejection posts (`Reporter` has it)."""

    def notice(self, pod: PodInfo, scheduler_name: str, reason: str, action: str, kind: str, note: str) -> None: ...


class KubeletRejections:
    def __init__(
        self, cluster: ClusterState, *, pod_ended: Callable[[PodInfo], None],
        active: Callable[[str], Profile | None], reporter: Notices, metrics: Metrics, wake: Wake,
        is_leader: Callable[[], bool], settle: float,
    ) -> None:
        self.cluster = cluster
        self.pod_ended = pod_ended  # the cache files a pod that ended (`ClusterCache.pod_seen`)
        self.active = active
        self.reporter = reporter
        self.metrics = metrics
        self.wake = wake
        self.is_leader = is_leader
        self.settle = settle
        self._timers: dict[tuple[str, int], asyncio.TimerHandle] = {}
        self._gone: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._bound: OrderedDict[str, None] = OrderedDict()
        metrics.kubelet_withheld.source = self.withheld_nodes

    def bound(self, pod: PodInfo) -> None:
        """This operator binds the pod (the binding cycle, as it sends the bind: a kubelet may refuse
        the pod before the bind's answer arrives): a refusal of it is its to report."""
        bound = self._bound
        bound[pod.uid] = None
        if len(bound) > REMEMBERED_BOUND:
            bound.popitem(last=False)

    def gone(self, record: PodRecord) -> None:
        """A pod counted on its node left the pod informer (deleted, or ended): remembered a while."""
        self._gone[record.pod.key] = (record.pod.uid, record.node)
        self._gone.move_to_end(record.pod.key)
        while len(self._gone) > REMEMBERED_GONE:
            self._gone.popitem(last=False)

    def failed(self, raw: Mapping[str, Any]) -> Rejection | None:
        """A pod of the failed pods' informer: a kubelet's refusal if its status says so."""
        try:
            pod = parse_pod(raw)
        except ObjectError as error:
            logger.debug("ignoring an unusable failed pod: %s", error)
            return None
        record = self.cluster.pods.get(pod.key)
        counted = record is not None and record.node == pod.node_name and record.pod.uid == pod.uid
        if counted:
            self.pod_ended(pod)  # no longer counted on its node
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
        node = pod.node_name
        withholding = withhold(self.cluster, pod, node, rejection)
        if withholding is not None:
            self._release_later(withholding)
            self.wake()  # the queue's view of the node changed (pods may now go elsewhere sooner)
        profile = self.active(pod.scheduler_name)
        logger.warning("pod %s (scheduler %s) rejected by the kubelet on node %s: %s: %s%s", pod.key,
                       pod.scheduler_name, node, rejection.reason, rejection.message, _withheld(withholding, rejection))
        if profile is not None and ours and self.is_leader():
            self.metrics.kubelet_rejections.inc(profile=profile.name, reason=rejection.reason)
            self.reporter.notice(pod, profile.scheduler_name, "RejectedByKubelet", "Binding", "Warning",
                                 f"Rejected by the kubelet on node {node}: {rejection.reason}: {rejection.message}")
        return rejection

    def _release_later(self, withholding: Withholding) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous test): the withholding lasts until explained
            return
        key = (withholding.node, withholding.serial)
        self._timers[key] = loop.call_later(self.settle, self._release, withholding)

    def _release(self, withholding: Withholding) -> None:
        self._timers.pop((withholding.node, withholding.serial), None)
        if release(self.cluster, withholding):
            logger.info("node %s: the kubelet's view is no longer withheld (settle time passed)", withholding.node)
            self.wake()

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def withheld_nodes(self) -> list[tuple[Mapping[str, str], float]]:
        """Nodes counted as their kubelets count them now, by kind (`amounts`, `held`): a gauge."""
        cluster = self.cluster
        return [({"kind": "amounts"}, float(len(cluster.withheld))), ({"kind": "held"}, float(len(cluster.held)))]


def _withheld(withholding: Withholding | None, rejection: Rejection) -> str:
    if withholding is None:
        return " (the watch already explains it)" if rejection.resource else " (about the pod: nothing withheld)"
    if withholding.kind == "node":
        return "; node held until it changes"
    parts = [f"{name} {amount}" for name, amount in withholding.amounts.items()]
    parts += [f"port {protocol}/{port}" for _, protocol, port in withholding.ports]
    return "; withheld there as the kubelet counts it: " + ", ".join(parts)
