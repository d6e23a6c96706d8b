"""Carrying out the writes plugins and preemption ask for (`placer.engine.framework.Write`): the one
place the binding cycle's and the PostFilter's API calls go through.

A `Write` is a PATCH (merge, JSON or strategic merge; of the object or a subresource), a DELETE,
with its preconditions (resourceVersion, UID) in the body, or a POST creating the object (a 409 there:
it exists already — ours when `landed` says so). Here:

- a 409 on a write that knows how to recognise its own effect (`Write.landed`) reads the object: if
  it already holds what was written (a retried write whose first attempt landed), it counts as
  written, at the resourceVersion read; so does any refusal of a write the client sent again
  (`Reply.resent`, see `placer.controller.transport.retry`), and a DELETE sent again that finds nothing (404);
- a 409 on a write that can be made again on the object as it is now (`Write.rebase`) reads the
  object and sends the write made again, up to `CONFLICT_ATTEMPTS` times (kube's
  `retry.RetryOnConflict`);
- an answer in `Write.tolerate` (e.g. 404: gone already) is an answer, not an error; any other
  failure, and a call that got no HTTP answer at all, is counted in
  `placer_api_errors_total{call}` (`Write.call`: `patch_pod_status`, `delete_pod`, ...);
- `undo` takes back the writes that landed, latest first, each as its `Write.undo` says given the
  object as it is now (read again and retried on a 409, a few times).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from placer.controller.metrics import Metrics
from placer.controller.transport import ApiError, Reply
from placer.engine.framework import ObjectRef, Write

__all__ = ["CONFLICT_ATTEMPTS", "UNDO_ATTEMPTS", "Effects", "Written", "resource_version"]

logger = logging.getLogger("placer.effects")

UNDO_ATTEMPTS = 3
CONFLICT_ATTEMPTS = 5  # kube's retry.DefaultRetry: five steps


@dataclass(frozen=True, slots=True)
class Written:
    """What one write came to."""

    ok: bool  # written (or found written already)
    status: int  # the HTTP status; 0 when no answer came at all
    message: str = ""  # the server's message, or the client's error
    version_read: str = ""  # what the write left the object at, when read back
    #: the server's answer to a write that landed: its resourceVersion is read from it when asked
    #: (most writes never ask: a victim's DELETE answers with the whole pod)
    reply: Reply | None = None

    @property
    def answered(self) -> bool:
        return self.status != 0

    @property
    def resource_version(self) -> str:
        """What the write left the object at ("" when unknown)."""
        if self.version_read or self.reply is None:
            return self.version_read
        try:
            return resource_version(self.reply.json())
        except ValueError:
            return ""


def resource_version(body: Any) -> str:
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


class ObjectWriter(Protocol):
    """The calls writes need (`KubeClient` has them)."""

    async def write(self, write: Write) -> Reply: ...

    async def get_object(self, ref: ObjectRef, *, retries: int | None = None) -> Reply: ...


class Effects:
    """Sends `Write`s through the operator's API client."""

    def __init__(self, client: ObjectWriter, metrics: Metrics) -> None:
        self.kube = client
        self.metrics = metrics

    async def write(self, write: Write, subject: str) -> Written:
        """One write (for `subject`, a pod's key: it goes in the log)."""
        try:
            reply: Reply = await self.kube.write(write)
            if reply.ok:
                return Written(True, reply.status, reply=reply)
            if reply.resent and write.delete and reply.status == 404:  # the first attempt deleted it
                return Written(True, reply.status, reply.message())
            # our own write landed? (a 409, or a 422: a JSON patch whose `test` found the object changed)
            current: Mapping[str, Any] | None = None
            if (reply.status in (409, 422) or reply.resent) and write.landed is not None:
                current = await self._read(write)
                if current is not None and write.landed(current):
                    return Written(True, reply.status, reply.message(), resource_version(current))
            if reply.status == 409 and write.rebase is not None:
                rebased = await self._rebased(write, current)
                if rebased is not None:
                    return rebased
        except ApiError as error:  # no HTTP answer at all (after the client's retries)
            self.metrics.api_errors.inc(call=write.call)
            logger.warning("%s %s (for %s): %s", write.call, write.target, subject, error)
            return Written(False, 0, error.message)
        message = reply.message()
        if reply.status not in write.tolerate:
            self.metrics.api_errors.inc(call=write.call)
            logger.info("%s %s (for %s): HTTP %d %s", write.call, write.target, subject, reply.status, message)
        return Written(False, reply.status, message)

    async def _read(self, write: Write) -> Mapping[str, Any] | None:
        """The write's object as the API server holds it now (None: it could not be read)."""
        found = await self.kube.get_object(write.target, retries=write.retries)
        body = found.json() if found.ok else None
        return body if isinstance(body, Mapping) else None

    async def _rebased(self, write: Write, current: Mapping[str, Any] | None) -> Written | None:
        """`write` made again on the object as it is now (`current`, read here when not given),
        while it keeps changing (409), a few times; None when the write gives up or the object
        could not be read."""
        assert write.rebase is not None
        if current is None:
            current = await self._read(write)
        for _ in range(CONFLICT_ATTEMPTS):
            if current is None:
                return None
            again = write.rebase(current)
            if again is None:
                return None
            reply = await self.kube.write(again)
            if reply.ok:
                return Written(True, reply.status, reply=reply)
            if reply.status != 409:
                return None
            current = await self._read(write)
            if current is not None and write.landed is not None and write.landed(current):
                return Written(True, reply.status, reply.message(), resource_version(current))
        return None

    async def undo(self, done: Sequence[Write], subject: str) -> None:
        """Take back the writes that landed, latest first (a write without `undo` stays)."""
        for write in reversed(done):
            if write.undo is not None:
                await self._undo_one(write, subject)

    async def _undo_one(self, write: Write, subject: str) -> None:
        assert write.undo is not None
        for _ in range(UNDO_ATTEMPTS):
            try:
                reply = await self.kube.get_object(write.target, retries=1)
                if not reply.ok:
                    return  # 404: gone; anything else: leave it
                current = reply.json() or {}
                undo = write.undo(current)
                if undo is None:
                    return  # nothing of ours left to take back
                retries = 1 if undo.retries is None else undo.retries
                undo = dataclasses.replace(undo, resource_version=resource_version(current), retries=retries)
                reply = await self.kube.write(undo)
            except ApiError as error:
                logger.warning("%s keeps what was written for %s: %s", write.target, subject, error)
                return
            if reply.ok:
                logger.info("%s: what was written for %s is undone (it was not bound)", write.target, subject)
                return
            if reply.status != 409:  # (409: changed meanwhile, read it again)
                self.metrics.api_errors.inc(call=undo.call)
                logger.warning("%s keeps what was written for %s: HTTP %d %s", write.target, subject, reply.status,
                               reply.message())
                return
