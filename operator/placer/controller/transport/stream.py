"""Watch streams of `placer.controller.transport.http`: a reply's body handed over as batches of lines.

Back-pressure: reading pauses while more than `HIGH_WATER` bytes of whole lines wait for the
consumer, and only then: a line still coming cannot be taken by the consumer, so it never pauses
reading (a pause waiting for the rest of a line would stall the watch forever). A line longer than
`line_limit` fails the stream with BodyTooLargeError instead; the informer logs it and resumes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from placer.controller.transport.reply import BodyTooLargeError

if TYPE_CHECKING:
    from placer.controller.transport.reply import Connection

HIGH_WATER = 4 * 2**20  # bytes of whole watch lines waiting for their consumer before reading pauses
# A watch line: above the largest object the API server can hold (etcd's request limit is at most
# 64 MiB, and an object's JSON can be larger than its stored protobuf): a longer line is an error.
LINE_LIMIT = 128 * 2**20


class Stream:
    """A reply read as it comes (a watch): `status` once the head is in, then its body's lines."""

    __slots__ = ("_buffered", "_conn", "_ended", "_error", "_line_limit", "_lines", "_loop", "_partial",
                 "_waiter", "head", "raw", "status")

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop, line_limit: int = LINE_LIMIT) -> None:
        self._conn: Connection | None = conn
        self._loop = loop
        self._line_limit = line_limit
        self.head: asyncio.Future[None] = loop.create_future()
        self._waiter: asyncio.Future[None] | None = None
        self._lines: list[bytes] = []
        self._partial = b""
        self._buffered = 0  # bytes of the whole lines in `_lines`
        self.raw = False  # a refusal: its body is kept whole, not split into lines
        self._ended = False
        self._error: BaseException | None = None
        self.status = 0

    async def batch(self) -> list[bytes] | None:
        """The lines come since the last call (possibly empty ones), or None once the body ended."""
        while not self._lines:
            if self._error is not None:
                raise self._error
            if self._ended:
                return None
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        lines, self._lines, self._buffered = self._lines, [], 0
        conn = self._conn
        if conn is not None and conn.paused:
            conn.resume()
        return lines

    async def read(self) -> bytes:
        """The whole body (what is left of it): for a refusal's Status."""
        while not self._ended:
            if self._error is not None:
                raise self._error
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return b"\n".join([*self._lines, self._partial]) if self._lines else self._partial

    def close(self) -> None:
        """Stop reading: a stream not read to its end takes its connection down with it."""
        conn, self._conn = self._conn, None
        if conn is not None and not self._ended:
            conn.abort()

    # -- fed by the connection

    def feed(self, piece: bytes) -> None:
        if self.raw or b"\n" not in piece:
            self._partial += piece
        else:
            lines = piece.split(b"\n")
            if self._partial:
                lines[0] = self._partial + lines[0]
            if len(lines[0]) > self._line_limit:  # (the other lines are no longer than one read)
                raise BodyTooLargeError(f"a watch line longer than {self._line_limit} bytes")
            self._buffered += len(piece) + len(self._partial) - len(lines[-1])
            self._partial = lines.pop()
            self._lines += lines
            self._wake()
        if len(self._partial) > self._line_limit and not self.raw:
            raise BodyTooLargeError(f"a watch line longer than {self._line_limit} bytes")
        conn = self._conn
        # Only whole lines waiting for the consumer pause reading: a line still coming never does
        # (its consumer cannot take it before it ends), so a long line cannot stall the stream.
        if self._buffered > HIGH_WATER and conn is not None and not conn.paused:
            conn.pause()

    def started(self, status: int) -> None:
        self.status = status
        self.raw = status != 200
        if not self.head.done():
            self.head.set_result(None)

    def end(self) -> None:
        self._ended = True
        if self._partial and not self.raw:
            self._lines.append(self._partial)
            self._partial = b""
        self._conn = None
        self._wake()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._conn = None
        if not self.head.done():
            self.head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
