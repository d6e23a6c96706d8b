"""An upstream PodGroup's status condition, written after each decision of its group.

The condition `gang.condition_update` computes (`PodGroupScheduled`, v1beta1
`PodGroupInitiallyScheduled`: True/`Scheduled` once placed, never back to False;
False/`Unschedulable` while it cannot be) is written by a merge patch of `podgroups/NAME/status` with
the group's resourceVersion as precondition; on a 409 the group is read again and the condition
recomputed. One write per group at a time, the latest decision wins. A scheduler-plugins group's
`status.phase` is its own controller's: nothing is written there.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from placer.controller.transport import ApiError, Reply
from placer.engine.catalog import Catalog
from placer.engine.framework import MERGE_PATCH, ObjectRef, Write
from placer.engine.gang import GroupDecision, condition_update
from placer.engine.groups import GroupRef, PodGroupInfo, group_kind, lookup
from placer.engine.objects import ObjectError

__all__ = ["GroupStatusWriter", "status_write"]

logger = logging.getLogger("placer.groups")

STATUS_ATTEMPTS = 5  # a group's condition write, re-read and retried on 409 this often at most


class ObjectStore(Protocol):
    """The calls it makes (`KubeClient` has them)."""

    async def write(self, write: Write) -> Reply: ...

    async def get_object(self, ref: ObjectRef, *, retries: int | None = None) -> Reply: ...


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_write(group: PodGroupInfo, conditions: list[dict[str, Any]]) -> Write:
    """The merge patch of an upstream group's status subresource, its resourceVersion the
    precondition (a 409 when the group changed since it was read)."""
    ref = ObjectRef(group.api_version, "PodGroup", "podgroups", group.name, group.namespace)
    return Write(ref, {"status": {"conditions": conditions}}, MERGE_PATCH, subresource="status",
                 resource_version=group.resource_version, uid=group.uid, tolerate=frozenset({404, 409}), retries=2)


class GroupStatusWriter:
    def __init__(self, client: ObjectStore | None, catalog: Catalog, is_leader: Callable[[], bool]) -> None:
        self.client = client
        self.catalog = catalog
        self.is_leader = is_leader
        self._latest: dict[GroupRef, GroupDecision] = {}  # the decision whose condition is to be written
        self._writers: dict[GroupRef, asyncio.Task[None]] = {}

    def report(self, decision: GroupDecision) -> None:
        """Write the group's condition after a decision (when leading; nothing when unchanged)."""
        group = decision.group
        if group is None or not group.upstream or self.client is None or not self.is_leader():
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
        client = self.client
        assert client is not None
        group: PodGroupInfo | None = None
        for _ in range(STATUS_ATTEMPTS):
            decision = self._latest.pop(ref, None)
            if decision is None or not self.is_leader():
                return
            if group is None:
                group = lookup(self.catalog, ref) or decision.group
            assert group is not None
            conditions = condition_update(group, decision, _now())
            if conditions is None:
                continue
            write = status_write(group, conditions)
            try:
                reply = await client.write(write)
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
        client = self.client
        assert client is not None
        try:
            reply = await client.get_object(target, retries=2)
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
