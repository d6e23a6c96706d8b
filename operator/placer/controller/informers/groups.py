"""The groups of pods in the operator's cache (kube's PodGroupManager): who is pending in which group,
and which members wait for their group.

- **Members**: the pending pods of each group (any schedulerName, gated ones included), kept in
  step with the cache's pending index; with the pods counted on nodes (`groups.scheduled_members`)
  they are the group's pods in all — kube's `AllPodsCount` for the minCount wait.
- **Waiting** (kube's GangScheduling PreEnqueue): a pod of a group that does not exist yet, or of a
  gang with fewer than `minCount` pods in all (`groups.waiting_reason`), is *held*: not queued, no
  event, no condition. Its group is looked at again when the PodGroup is added or changed (its
  informer) or a pod of the group is added: then every held member is released at once
  (`ClusterCache.release_group` queues them), so the group cycle finds them all.

The group's status condition is written by `placer.controller.binding.group_status`.
"""

from __future__ import annotations

from placer.engine.cluster import ClusterState
from placer.engine.groups import GroupRef, group_of, lookup, scheduled_members, waiting_reason
from placer.engine.objects import PodInfo

__all__ = ["GroupMembers"]


class GroupMembers:
    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.pending: dict[GroupRef, dict[str, PodInfo]] = {}
        self._ref: dict[str, GroupRef] = {}
        self.held: set[str] = set()  # pending members not queued: their group waits

    # ----------------------------------------------------------------- members (from the cache)

    def pended(self, pod: PodInfo) -> bool:
        """A pending pod filed (new or updated); True when it is a new member of its group (which it
        may complete: the group's held members are to be looked at)."""
        key = pod.key
        ref = group_of(pod)
        old = self._ref.get(key)
        if old is not None and old != ref:
            self.unpended(key)
        if ref is None:
            return False
        members = self.pending.setdefault(ref, {})
        new = key not in members
        members[key] = pod
        self._ref[key] = ref
        return new

    def ref_of(self, key: str) -> GroupRef | None:
        return self._ref.get(key)

    def unpended(self, key: str) -> None:
        """A pod no longer pending (bound, assumed and seen bound, deleted)."""
        self.held.discard(key)
        ref = self._ref.pop(key, None)
        if ref is None:
            return
        members = self.pending.get(ref)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self.pending[ref]

    def members(self, ref: GroupRef) -> int:
        """The group's pods in all: counted on nodes (bound or assumed) and pending."""
        return scheduled_members(self.cluster, ref) + len(self.pending.get(ref, ()))

    def waiting(self, ref: GroupRef) -> str | None:
        """Why the group's pods wait (kube's GangScheduling PreEnqueue), None when they may go."""
        return waiting_reason(lookup(self.cluster.catalog, ref), ref, self.members(ref))

    def holds(self, pod: PodInfo) -> bool:
        """Whether a pending pod, about to be queued, waits for its group instead."""
        ref = group_of(pod)
        if ref is None or self.waiting(ref) is None:
            self.held.discard(pod.key)
            return False
        self.held.add(pod.key)
        return True

    def hold(self, pods: list[PodInfo]) -> None:
        """Pods taken from the queue whose group turned out to wait (deleted meanwhile): held."""
        for pod in pods:
            self.held.add(pod.key)

    def release(self, ref: GroupRef) -> dict[str, PodInfo]:
        """The group changed, or a member came: its held members, no longer held, when it no longer
        waits (the cache queues them); nothing otherwise."""
        members = self.pending.get(ref)
        if not members or not any(key in self.held for key in members) or self.waiting(ref) is not None:
            return {}
        released = {key: pod for key, pod in members.items() if key in self.held}
        self.held.difference_update(released)
        return released

    def others(self, ref: GroupRef, key: str) -> list[PodInfo]:
        """The group's other pending pods (as the cache has them)."""
        return [pod for other, pod in self.pending.get(ref, {}).items() if other != key]
