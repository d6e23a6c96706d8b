"""The groups of pods in the operator's cache (kube's PodGroupManager): who is pending in which group,
which members wait for their group, and the upstream PodGroup's status condition.

- **Members**: the pending pods of each group (any schedulerName, gated ones included), kept in
  step with the cache's pending index; with the pods counted on nodes (`groups.scheduled_members`)
  they are the group's pods in all — kube's `AllPodsCount` for the minCount wait.
- **Waiting** (kube's GangScheduling PreEnqueue): a pod of a group that does not exist yet, or of a
  gang with fewer than `minCount` pods in all (`groups.waiting_reason`), is *held*: not queued, no
  event, no condition. Its group is looked at again when the PodGroup is added or changed (the
  group watch, `placer.controller.informers.group_kinds`) or a pod of the group is added: then every held
  member is queued at once, so the group cycle finds them all.
- **The group's status** (upstream PodGroups only; a scheduler-plugins group's `status.phase` is its
  own controller's): after each group decision, the condition `gang.condition_update` computes
  (`PodGroupScheduled`, v1beta1 `PodGroupInitiallyScheduled`: True/`Scheduled` once placed, never
  back to False; False/`Unschedulable` while it cannot be) is written by a merge patch of
  `podgroups/NAME/status` with the group's resourceVersion as precondition; on a 409 the group is
  read again and the condition recomputed. One write per group at a time, the latest decision wins.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placer.controller.transport.client import ApiError
from placer.engine.framework import MERGE_PATCH, ObjectRef, Write
from placer.engine.gang import GroupDecision, condition_update
from placer.engine.groups import GroupRef, PodGroupInfo, group_kind, group_of, lookup, scheduled_members, waiting_reason
from placer.engine.objects import ObjectError, PodInfo

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = ["GroupMembers", "status_write"]

logger = logging.getLogger("placer.groups")

STATUS_ATTEMPTS = 5  # a group's condition write, re-read and retried on 409 this often at most


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_write(group: PodGroupInfo, conditions: list[dict[str, Any]]) -> Write:
    """The merge patch of an upstream group's status subresource, its resourceVersion the
    precondition (a 409 when the group changed since it was read)."""
    ref = ObjectRef(group.api_version, "PodGroup", "podgroups", group.name, group.namespace)
    return Write(ref, {"status": {"conditions": conditions}}, MERGE_PATCH, subresource="status",
                 resource_version=group.resource_version, uid=group.uid, tolerate=frozenset({404, 409}), retries=2)


class GroupMembers:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.pending: dict[GroupRef, dict[str, PodInfo]] = {}
        self._ref: dict[str, GroupRef] = {}
        self.held: set[str] = set()  # pending members not queued: their group waits
        self._latest: dict[GroupRef, GroupDecision] = {}  # the decision whose condition is to be written
        self._writers: dict[GroupRef, asyncio.Task[None]] = {}

    # ----------------------------------------------------------------- members (from the cache)

    def pended(self, pod: PodInfo) -> None:
        """A pending pod filed (new or updated); a new member may complete its group's quorum."""
        key = pod.key
        ref = group_of(pod)
        old = self._ref.get(key)
        if old is not None and old != ref:
            self.unpended(key)
        if ref is None:
            return
        members = self.pending.setdefault(ref, {})
        new = key not in members
        members[key] = pod
        self._ref[key] = ref
        if new:
            self.release(ref)

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
        return scheduled_members(self.state.cluster, ref) + len(self.pending.get(ref, ()))

    def waiting(self, ref: GroupRef) -> str | None:
        """Why the group's pods wait (kube's GangScheduling PreEnqueue), None when they may go."""
        return waiting_reason(lookup(self.state.cluster.catalog, ref), ref, self.members(ref))

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
            self.state.queue.remove(pod.key)
            self.held.add(pod.key)

    def release(self, ref: GroupRef) -> None:
        """The group changed, or a member came: queue its held members when it no longer waits."""
        members = self.pending.get(ref)
        if not members or not any(key in self.held for key in members) or self.waiting(ref) is not None:
            return
        state = self.state
        for key, pod in members.items():
            if key not in self.held:
                continue
            self.held.discard(key)
            if key not in state.cluster.pods and key not in state.cache.gated and not pod.deleting \
                    and state.profiles.active(pod.scheduler_name) is not None:
                state.queue.add(pod)
        state.wakeup.set()

    def group_changed(self, ref: GroupRef) -> None:
        """A PodGroup added, changed or deleted (the group watch): its held members may go."""
        self.release(ref)

    def others(self, ref: GroupRef, key: str) -> list[PodInfo]:
        """The group's other pending pods (as the cache has them)."""
        return [pod for other, pod in self.pending.get(ref, {}).items() if other != key]

    # ----------------------------------------------------------------- the group's status

    def report(self, decision: GroupDecision) -> None:
        """Write the group's condition after a decision (when leading; nothing when unchanged)."""
        group = decision.group
        state = self.state
        if group is None or not group.upstream or state.kube is None or not state.is_leader():
            return
        if condition_update(group, decision, _now()) is None:
            return
        self._latest[decision.ref] = decision
        if decision.ref not in self._writers:
            task = asyncio.create_task(self._write(decision.ref))
            self._writers[decision.ref] = task
            task.add_done_callback(lambda _: self._writers.pop(decision.ref, None))

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._writers.values())

    async def _write(self, ref: GroupRef) -> None:
        state = self.state
        assert state.kube is not None
        group: PodGroupInfo | None = None
        for _ in range(STATUS_ATTEMPTS):
            decision = self._latest.pop(ref, None)
            if decision is None or not state.is_leader():
                return
            if group is None:
                group = lookup(state.cluster.catalog, ref) or decision.group
            assert group is not None
            conditions = condition_update(group, decision, _now())
            if conditions is None:
                continue
            write = status_write(group, conditions)
            try:
                reply = await state.kube.write(write)
            except ApiError as error:
                logger.warning("writing the condition of PodGroup %s failed: %s", ref.key, error)
                return
            if reply.ok or reply.status == 404:
                group = None
                continue  # (a newer decision may have come meanwhile)
            if reply.status != 409:
                logger.warning("writing the condition of PodGroup %s: HTTP %d %s", ref.key, reply.status,
                               reply.message())
                return
            self._latest.setdefault(ref, decision)  # the group changed: read it again, recompute
            group = await self._read(write.target)
            if group is None:
                return

    async def _read(self, target: ObjectRef) -> PodGroupInfo | None:
        state = self.state
        assert state.kube is not None
        try:
            reply = await state.kube.get_object(target, retries=2)
        except ApiError:
            return None
        if not reply.ok:
            return None
        raw = reply.json()
        kind = group_kind(raw.get("apiVersion"), raw.get("kind")) if isinstance(raw, Mapping) else None
        if kind is None:
            return None
        try:
            return kind.parse(raw)  # type: ignore[no-any-return]
        except ObjectError:
            return None
