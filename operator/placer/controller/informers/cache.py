"""The cache the informers feed: pods and nodes as they come from the API server, turned into engine
calls (the cluster's accounting, the queue, the shadows).

Pods, as kube-scheduler's cache sees them:

- bound (`spec.nodeName`): counted on their node (`ClusterState.add_pod`, which also confirms a
  pod we assumed); terminal or deleted ones are removed and wake the queue (resources freed); the
  MODIFIED of a binding we sent (bound where assumed, nothing else `parse_pod` reads changed) is
  taken without a parse: a pending pod of an active profile keeps what its parse read
  (`PodSource`) until it leaves pending;
- unbound: indexed by `spec.schedulerName` whether or not a profile owns that name yet (`pending`),
  and queued when one does; a pod we assumed (bind in flight, or bound but not yet seen bound) is
  never queued again, so it is never bound twice;
- gated (`spec.schedulingGates`): pending but not queued until the gates are gone;
- updated while pending: what changed (`pod_update_events`: a toleration added, its labels or
  requests changed) is asked of the plugins that rejected it (the queue's hints), which may move
  it at once; every event here carries the object before and after, for the same hints;
- of a group (`placer.controller.informers.groups`): not queued while the group waits (its PodGroup
  missing, or fewer than `minCount` of its pods exist);
- ended (`Failed`, `Succeeded`): they leave the informer's selection and come as DELETED, with their
  content from before (a real server's); `on_gone` hands them to
  `placer.controller.informers.kubelet_rejections`, which hears from its own informer of failed pods
  whether a kubelet refused one;
- stale copies (an older resourceVersion, or an unbound copy of a pod known to be bound: an event
  from before our bind that comes after we assumed it) are ignored;
- nominated (`status.nominatedNodeName`): followed by `placer.controller.informers.nominations`;
- waiting on Permit: its Permit plugins hear of its new versions (and of every other pod's); one
  deleted is rejected (`Scheduler.pod_updated`, `Scheduler.pod_deleted`);
- shadowed (its schedulerName is a Shadow profile's `shadowOf`): handed to
  `placer.controller.profiles.shadow` when seen pending (by the leader), bound, and deleted; decided
  there, never queued here, never written to;
- priority: a pod without `spec.priority` (only hand-made ones) gets its PriorityClass's value as
  admission would (`resolve_priority`), when it is parsed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from placer.controller.binding.reporting import Condition, pod_scheduled_condition
from placer.controller.informers.groups import GroupMembers
from placer.controller.informers.nominations import Nominations
from placer.controller.signals import Wake
from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.framework import ClusterEvent
from placer.engine.groups import GroupRef
from placer.engine.kinds import resolve_priority
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import PodSource, parse_node, parse_pod, pod_key
from placer.engine.profile import Profile
from placer.engine.queue import SchedulingQueue, pod_update_events
from placer.engine.runtime import Scheduler

__all__ = ["ActiveProfiles", "ClusterCache", "ConditionMemory", "ShadowedPods", "older"]


class ActiveProfiles(Protocol):
    def active(self, scheduler_name: str) -> Profile | None: ...


class ConditionMemory(Protocol):
    """What the reporter remembers of pods (`placer.controller.binding.reporting.Reporter`)."""

    def observe_condition(self, key: str, condition: Condition | None) -> None: ...

    def forget(self, key: str) -> None: ...


class ShadowedPods(Protocol):
    """The shadow profiles' side of the pods (`placer.controller.profiles.shadow.Shadows`)."""

    def watching(self, scheduler_name: str) -> bool: ...

    def created(self, pod: PodInfo) -> bool: ...

    def bound(self, pod: PodInfo) -> None: ...

    def deleted(self, key: str) -> None: ...

logger = logging.getLogger("placer.cache")


# how many ended pods are remembered, so that a late event of one from before it ended is not filed
REMEMBERED_ENDED = 4096


def older(new: str, old: str) -> bool:
    """Whether resourceVersion `new` is older than `old` (only when both are numbers, as in etcd)."""
    return new.isdigit() and old.isdigit() and int(new) < int(old)


def _accounting_differs(a: PodInfo, b: PodInfo) -> bool:
    """Whether anything the node accounting reads differs between two versions of a bound pod."""
    return (
        a.node_name != b.node_name
        or a.requests != b.requests
        or a.nonzero_cpu != b.nonzero_cpu
        or a.nonzero_memory != b.nonzero_memory
        or a.host_ports != b.host_ports
        or a.labels != b.labels
        or a.uid != b.uid
        or a.deleting != b.deleting  # spreading does not count pods being deleted
        or a.preempted != b.preempted  # a scheduler's victim holds its preemptor back (DisruptionTarget)
    )


class ClusterCache:
    def __init__(
        self,
        cluster: ClusterState,
        queue: SchedulingQueue,
        scheduler: Scheduler,
        *,
        profiles: ActiveProfiles,
        reporter: ConditionMemory,
        shadows: ShadowedPods,
        nominations: Nominations,
        groups: GroupMembers,
        wake: Wake,
        wakeup: asyncio.Event,
        is_leader: Callable[[], bool],
        on_gone: Callable[[PodRecord], None] = lambda record: None,
    ) -> None:
        self.cluster = cluster
        self.queue = queue
        self.scheduler = scheduler  # (its pods waiting on Permit hear of every pod's new version)
        self.profiles = profiles
        self.reporter = reporter
        self.shadows = shadows
        self.nominations = nominations
        self.groups = groups
        self.wake = wake
        self.wakeup = wakeup  # the scheduling loop looks at the queue again
        self.is_leader = is_leader
        # a bound pod left the watch (deleted, or ended: refused by its kubelet?): kubelet_rejections
        self.on_gone = on_gone
        # unbound pods by schedulerName, owned or not (so a new profile finds its pods at once)
        self.pending: dict[str, dict[str, PodInfo]] = {}
        self._pending_name: dict[str, str] = {}
        self.gated: set[str] = set()  # pending pods with spec.schedulingGates: not scheduled yet
        # pending pods of an active profile as parsed, with what their parse read: the MODIFIED of
        # their binding is recognised without a parse (`PodSource`); dropped once they leave pending
        self._sources: dict[str, PodSource] = {}
        # pods seen ended (Succeeded or Failed: for good), by key: their uid. The failed pods'
        # informer (kubelet rejections) may see an end before the pods' informer delivers the
        # versions before it; those are then stale, and are not filed again
        self._ended: OrderedDict[str, str] = OrderedDict()

    # ----------------------------------------------------------------- pods

    def known(self, key: str) -> PodInfo | None:
        record = self.cluster.pods.get(key)
        if record is not None:
            return record.pod
        name = self._pending_name.get(key)
        return None if name is None else self.pending[name].get(key)

    def observe_pod(self, raw: Mapping[str, Any]) -> None:
        """An ADDED/MODIFIED/listed pod: parse it once (unless it is a version we have, or the one
        we assumed, now bound there) and file it."""
        meta = raw.get("metadata")
        if type(meta) is dict or isinstance(meta, Mapping):
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            record = self.cluster.pods.get(key)
            if record is not None:
                known: PodInfo | None = record.pod
            else:
                name = self._pending_name.get(key)
                known = None if name is None else self.pending[name].get(key)
            if known is not None and known.uid == meta.get("uid"):
                if known.resource_version and known.resource_version == meta.get("resourceVersion"):
                    return
                if record is not None and record.assumed:
                    source = self._sources.get(key)
                    bound = None if source is None else source.bound(raw)
                    if bound is not None and bound.node_name == record.node:
                        resolve_priority(bound, self.cluster.catalog)
                        self.pod_seen(bound)  # the binding we sent, as we assumed it
                        return
        try:
            pod = parse_pod(raw)
        except ObjectError as error:
            logger.debug("ignoring an unusable pod: %s", error)
            return
        resolve_priority(pod, self.cluster.catalog)  # what admission does, for a pod without spec.priority
        gated = False
        if not pod.node_name and not pod.terminal:
            self.reporter.observe_condition(pod.key, pod_scheduled_condition(raw))
            spec = raw.get("spec")
            gated = isinstance(spec, Mapping) and bool(spec.get("schedulingGates"))
        self.pod_seen(pod, gated)
        key = pod.key
        if self.pending.get(pod.scheduler_name, {}).get(key) is pod:  # filed as this pod's pending version
            source = PodSource.of(raw, pod) if self.profiles.active(pod.scheduler_name) is not None else None
            if source is not None:
                self._sources[key] = source
            else:
                self._sources.pop(key, None)

    def pod_seen(self, pod: PodInfo, gated: bool = False) -> None:
        """File one version of a pod; `gated`: it has schedulingGates (kube-scheduler waits too)."""
        key = pod.key
        record = self.cluster.pods.get(key)
        if record is not None and record.pod.uid != pod.uid and pod.uid and record.pod.uid:
            self.cluster.remove_pod(key)  # a re-created pod whose DELETED we never saw
            record = None
        known = record.pod if record is not None else self.known(key)
        if known is not None and known.uid == pod.uid and older(pod.resource_version, known.resource_version):
            return
        if pod.uid and self._ended.get(key) == pod.uid and not pod.terminal:
            return  # a version from before its end, delivered late
        if self.scheduler.waiting:  # Permit plugins holding pods hear of every pod's new version
            self.scheduler.pod_updated(pod, self.cluster)
        if pod.terminal:
            self._remember_ended(pod)
            self._forget_pod(key)
            if self.cluster.remove_pod(key):
                self.wake(ClusterEvent.POD_DELETE, known, None)
            return
        if pod.node_name:
            self.nominations.unnominate(key, now_on=pod.node_name)  # bound: on its nominated node or elsewhere
            self.shadows.bound(pod)  # a shadowed pod: compared with the shadow's choice
            self._unpend(key)
            self.queue.remove(key)
            self.reporter.forget(key)
            if record is None or record.assumed or _accounting_differs(record.pod, pod):
                self.cluster.add_pod(pod)
                if record is None:  # (an assumed pod woke the queue when it was assumed)
                    self.wake(ClusterEvent.POD_ADD, None, pod)
                elif not record.assumed or record.node != pod.node_name:
                    self.wake(ClusterEvent.POD_UPDATE, record.pod, pod)
            return
        if record is not None:
            if record.assumed:
                self._pend(pod)  # our bind is in flight or awaiting its watch event: do not queue
            return  # else: an unbound copy of a pod known to be bound is stale
        if pod.deleting:
            self._forget_pod(key)
            return
        self.nominations.follow(pod, known)
        self._pend(pod)
        if gated:
            self.gated.add(key)
            self.queue.remove(key)
            return
        self.gated.discard(key)
        if self.profiles.active(pod.scheduler_name) is not None and not self.groups.holds(pod):
            self.queue.add(pod)
            if known is not None and known.uid == pod.uid and known is not pod:
                if known.resource_claims != pod.resource_claims:
                    self.queue.wake_pod(key)  # its template's claim recorded (UpdatePodGeneratedResourceClaim)
                else:  # its own update, asked of the plugins that rejected it (kube's queueing hints)
                    events = pod_update_events(known, pod)
                    if events:
                        self.queue.wake_pod(key, events, known)
            self.wakeup.set()
        if self.shadows.watching(pod.scheduler_name) and self.is_leader() and self.shadows.created(pod):
            self.wakeup.set()  # a shadow decision to take when the loop has time

    def pod_deleted(self, raw: Mapping[str, Any]) -> None:
        key = pod_key(raw)
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        known = self.known(key)
        if known is not None and uid and known.uid and known.uid != uid:
            return  # a DELETED of an older incarnation
        self._forget_pod(key)
        self._ended.pop(key, None)
        record = self.cluster.pods.get(key)
        if self.cluster.remove_pod(key):
            if record is not None and not record.assumed:  # deleted, or ended (refused by its kubelet?)
                self.on_gone(record)
            self.wake(ClusterEvent.POD_DELETE, None if record is None else record.pod, None)

    def _remember_ended(self, pod: PodInfo) -> None:
        if not pod.uid:
            return
        ended = self._ended
        ended[pod.key] = pod.uid
        ended.move_to_end(pod.key)
        if len(ended) > REMEMBERED_ENDED:
            ended.popitem(last=False)

    def _forget_pod(self, key: str) -> None:
        self.scheduler.pod_deleted(key)  # a pod waiting on Permit is rejected
        self.nominations.unnominate(key)
        self.shadows.deleted(key)
        self.gated.discard(key)
        self._unpend(key)
        self.queue.remove(key)
        self.reporter.forget(key)

    def _pend(self, pod: PodInfo) -> None:
        name = pod.scheduler_name
        previous = self._pending_name.get(pod.key)
        if previous is not None and previous != name:
            self.pending[previous].pop(pod.key, None)
        self.pending.setdefault(name, {})[pod.key] = pod
        self._pending_name[pod.key] = name
        if self.groups.pended(pod):  # a new member completed its group: its held members go
            self.release_group(self.groups.ref_of(pod.key))

    def _unpend(self, key: str) -> None:
        name = self._pending_name.pop(key, None)
        self._sources.pop(key, None)
        self.gated.discard(key)
        self.groups.unpended(key)
        if name is not None:
            pods = self.pending.get(name)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self.pending[name]

    def enqueue_pending(self, scheduler_name: str) -> None:
        """Queue every pending pod of a schedulerName (a profile started owning it, or a new term)."""
        for key, pod in self.pending.get(scheduler_name, {}).items():
            if key not in self.cluster.pods and key not in self.gated and not self.groups.holds(pod):
                self.queue.add(pod)
        self.wakeup.set()

    def release_group(self, ref: GroupRef | None) -> None:
        """The group changed (its PodGroup added or changed, a member came): its held members are
        queued once it no longer waits (kube's GangScheduling PreEnqueue passing)."""
        if ref is None:
            return
        released = self.groups.release(ref)
        for key, pod in released.items():
            if key not in self.cluster.pods and key not in self.gated and not pod.deleting \
                    and self.profiles.active(pod.scheduler_name) is not None:
                self.queue.add(pod)
        if released:
            self.wakeup.set()

    # ----------------------------------------------------------------- nodes

    def observe_node(self, raw: Mapping[str, Any]) -> None:
        try:
            node = parse_node(raw)
        except ObjectError as error:
            name = (raw.get("metadata") or {}).get("name")
            logger.warning("node %s cannot be used: %s", name, error)
            if isinstance(name, str):
                self.cluster.remove_node(name)
            return
        old = self.cluster.node(node.name)
        if self.cluster.upsert_node(node):
            self.wake(ClusterEvent.NODE_ADD if old is None else ClusterEvent.NODE_UPDATE, old, node)

    def node_deleted(self, raw: Mapping[str, Any]) -> None:
        name = (raw.get("metadata") or {}).get("name")
        if isinstance(name, str):
            old = self.cluster.node(name)
            if self.cluster.remove_node(name):  # spreading may count one domain fewer
                self.wake(ClusterEvent.NODE_DELETE, old, None)

    # ----------------------------------------------------------------- profiles and shadows

    def enqueue_shadowed(self, scheduler_name: str) -> None:
        """Queue every pending pod of a shadowed scheduler for a shadow decision."""
        for key, pod in self.pending.get(scheduler_name, {}).items():
            if key not in self.gated and not pod.deleting:
                self.shadows.created(pod)
        self.wakeup.set()

    def owner_changed(self, scheduler_name: str, old: Profile | None, new: Profile | None) -> None:
        if new is None:
            for key in self.pending.get(scheduler_name, {}):
                self.queue.remove(key)  # no longer ours: they stay pending
                self.nominations.unnominate(key)  # and hold no room
        elif old is None:
            for key, pod in self.pending.get(scheduler_name, {}).items():
                if pod.nominated_node and key not in self.cluster.pods:
                    self.cluster.nominate(pod, pod.nominated_node)
            self.enqueue_pending(scheduler_name)
        else:
            self.wake()  # a new version may fit pods the old one could not
