"""The reply side of `placer.controller.transport.http`: the errors, `Response` and the connection protocol
that parses replies with llhttp (`httptools`, the parser of Node.js and uvicorn).

llhttp frames strictly (RFC 9112): a duplicate or malformed Content-Length (`+3`, `1_0`, `0x5`),
Content-Length beside Transfer-Encoding, a bad chunk size, a malformed status line and a missing
CR fail at once. On top of it, here:

- the status is 100-599 and the version HTTP/1.0 or 1.1; 1xx replies are skipped (101 is an error);
- Transfer-Encoding must be exactly `chunked`: RFC 9112 frames a response whose codings do not end
  in chunked by the connection's close, but its body is then in a coding Placer cannot undo
  (`gzip, chunked` would hand back gzip bytes), so any other transfer coding is refused;
- bounds: the head (`MAX_HEAD`), a whole reply's body (`HttpClient(body_limit=)`: its
  Content-Length checked up front, chunked and read-until-close bytes counted as they come, a
  compressed body's output counted as it is inflated, so a gzip bomb stops at the bound) and a
  watch line (`line_limit`); past a bound, BodyTooLargeError;
- truncation is an error: a body short of its Content-Length or its last chunk, a compressed body
  short of its gzip/zlib end, a read-until-close body ended by a reset or, over TLS, by a close
  without close_notify (only a clean close ends it);
- Placer sends no Accept-Encoding; a server that compresses anyway is decoded within the body
  bound, except a watch stream (200) whose lines could not be bounded that way: refused.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Protocol

import httptools

MAX_HEAD = 64 * 1024  # a reply head (status line + headers) longer than this is refused
BODY_LIMIT = 256 * 2**20  # a whole reply's body: a LIST page can be tens of MiB

_IDLE, _HEAD, _BODY, _UNTIL_CLOSE = range(4)  # a connection's reply states
_LENGTHS = frozenset(map(len, ("content-length", "transfer-encoding", "content-encoding", "retry-after")))


class HttpError(OSError):
    """The connection ended before the whole reply came, or the reply broke HTTP/1.1."""


class NotSentError(HttpError):
    """The request never left: no connection could be had (refused, unreachable, the proxy said no,
    the TLS handshake failed, the pool closed). Any request, a write included, may be sent again."""


class TlsVerificationError(NotSentError):
    """The server's certificate or name did not verify: retrying cannot help (reported once)."""


class BodyTooLargeError(HttpError):
    """A reply body (or a watch line) longer than the client's bound."""


class Response:
    """A whole reply: status, body (decoded if the server compressed it) and `Retry-After`."""

    __slots__ = ("body", "retry_after", "status")

    def __init__(self, status: int, body: bytes, retry_after: str | None) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after


class Pool(Protocol):
    """What a connection tells the client that pools it (`placer.controller.transport.http.HttpClient`)."""

    body_limit: int

    def watching(self, conn: Connection, timeout: float) -> None: ...

    def done(self, conn: Connection) -> None: ...

    def release(self, conn: Connection, reusable: bool) -> None: ...

    def forget(self, conn: Connection) -> None: ...


class Sink(Protocol):
    """Where a streamed reply's body goes (`placer.controller.transport.stream.Stream`)."""

    raw: bool  # a refusal: its body kept whole

    def started(self, status: int) -> None: ...

    def feed(self, piece: bytes) -> None: ...

    def end(self) -> None: ...

    def fail(self, error: BaseException) -> None: ...


class Connection(asyncio.Protocol):
    """One keep-alive connection and llhttp's parser of the replies read on it (its callbacks are
    the `on_*` methods; an error raised in one comes back out of `feed_data`)."""

    __slots__ = ("clean_eof", "client", "counted", "deadline", "decoder", "encoding", "generation", "head_bytes",
                 "idle_since", "interim", "keep_alive", "last_read", "length", "loop", "moved", "parser", "parts",
                 "paused", "read_timeout", "retry_after", "size", "state", "status", "stream", "te", "transport",
                 "waiter")

    def __init__(self, client: Pool, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.counted = True  # holds one of the client's `limit` slots until forgotten
        self.generation = 0  # the client's TLS context it was made with (HttpClient.use_tls_context)
        self.idle_since = 0.0
        self.paused = False
        self.clean_eof = True  # an end of the connection ends a read-until-close body well (TLS: on close_notify)
        self.waiter: asyncio.Future[Response] | None = None
        self.stream: Sink | None = None
        self.deadline = 0.0  # of the whole reply (a request, a refused stream) or of a stream's head
        self.read_timeout = 0.0
        self.last_read = 0.0
        self.parts: list[bytes] = []
        self.size = 0  # bytes of the reply's body so far (decoded), or all bytes read for it
        self.head_bytes = 0  # of the head; in a body, of the bytes since the last body bytes
        self.moved = False  # body bytes came in the last read
        self.state = _IDLE
        self.status = 0
        self.interim = False  # a 1xx head: the real one follows
        self.length = -1
        self.te = b""
        self.encoding = b""
        self.retry_after: str | None = None
        self.keep_alive = True
        self.decoder: zlib._Decompress | None = None

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.state == _IDLE:  # nothing was asked: a server talking out of turn is not trusted
            self.abort()
            return
        if self.stream is not None:
            self.last_read = self.loop.time()
        try:
            if self.state == _HEAD:
                self.head_bytes += len(data)
            self.moved = False
            self.parser.feed_data(data)
            state = self.state
            if state == _HEAD and self.head_bytes > MAX_HEAD:
                raise HttpError(f"a reply head longer than {MAX_HEAD} bytes")
            if state == _BODY:  # bytes that are no body: chunk size lines, extensions, trailers
                self.head_bytes = 0 if self.moved else self.head_bytes + len(data)
                if self.head_bytes > MAX_HEAD:
                    raise HttpError(f"more than {MAX_HEAD} bytes of chunk framing or trailers without data")
        except HttpError as error:
            self._fail(error)
        except httptools.HttpParserCallbackError as error:  # one of ours, raised in a callback
            cause = error.__context__
            if isinstance(cause, zlib.error):
                cause = HttpError(f"a malformed compressed body: {cause}")
            self._fail(cause if isinstance(cause, OSError) else HttpError(f"a malformed reply: {error}"))
        except httptools.HttpParserUpgrade:
            self._fail(HttpError("unexpected protocol switch (101)"))
        except httptools.HttpParserError as error:
            self._fail(HttpError(f"a malformed reply: {error}"))

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        state = self.state
        if state == _UNTIL_CLOSE and exc is None and self.clean_eof:
            try:
                self._finish()
            except HttpError as error:
                self._fail(error)
        elif state == _UNTIL_CLOSE:
            why = f": {exc}" if exc else " without TLS close_notify"
            self._fail(HttpError(f"the connection ended{why}: the reply's body may be cut short"))
        elif state != _IDLE:
            why = f": {exc}" if exc else ""
            self._fail(HttpError(f"the server closed the connection before the reply ended{why}"))
        self.state = _IDLE
        self.client.forget(self)

    # -- llhttp's callbacks

    def on_message_begin(self) -> None:
        if self.state == _IDLE:  # a byte after the reply in the same read: the connection is not reused
            raise HttpError("bytes after the reply")

    # (No on_status: the status is checked once the head is in; llhttp refuses a malformed line.)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) not in _LENGTHS or self.state != _HEAD:
            return  # not one looked at (most are not: a cheap test first); or a trailer field
        name = name.lower()
        if name == b"content-length":
            self.length = int(value)  # (llhttp checked it: digits only, once)
        elif name == b"transfer-encoding":
            self.te = self.te + b"," + value if self.te else value
        elif name == b"content-encoding":
            self.encoding = self.encoding + b"," + value if self.encoding else value
        elif name == b"retry-after":
            self.retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        parser = self.parser
        status = parser.get_status_code()
        version = parser.get_http_version()
        if version != "1.1" and version != "1.0":
            raise HttpError(f"not an HTTP/1.x reply (HTTP/{version})")
        if not 100 <= status <= 599:
            raise HttpError(f"an invalid status code {status}")
        if status < 200:
            if status == 101:
                raise HttpError("unexpected protocol switch (101)")
            self.interim = True  # 100 Continue and the like: the real head follows
            return
        self.status = status
        self.keep_alive = parser.should_keep_alive()
        if status != 429 and status != 503:
            self.retry_after = None
        stream = self.stream
        streaming = stream is not None and status == 200
        te = self.te
        if te:
            if [coding.strip() for coding in te.lower().split(b",")] != [b"chunked"]:
                raise HttpError(f"unsupported Transfer-Encoding {te.decode('latin-1')!r}: only chunked is read")
            self.state = _BODY
        elif self.length < 0 and status != 204 and status != 304:
            self.keep_alive = False
            self.state = _UNTIL_CLOSE
        else:
            self.state = _BODY
        self.decoder = None
        if self.encoding:
            encoding = self.encoding.strip().lower()
            if encoding in (b"gzip", b"x-gzip", b"deflate"):
                if streaming:
                    raise HttpError("a compressed watch stream (Placer never asks for one)")
                self.decoder = zlib.decompressobj(wbits=47)  # gzip or zlib, told apart by its header
            elif encoding != b"identity":
                raise HttpError(f"unsupported Content-Encoding {encoding.decode('latin-1')!r}")
        limit = self.client.body_limit
        if self.length > limit and not streaming:
            raise BodyTooLargeError(f"a reply body of {self.length} bytes, over the {limit}-byte bound")
        self.size = self.head_bytes = 0
        if stream is not None:
            if not streaming:  # a refusal: its whole body within the stream's read timeout
                self.deadline = self.loop.time() + self.read_timeout
            stream.started(status)

    def on_body(self, piece: bytes) -> None:
        self.moved = True
        stream = self.stream
        if stream is not None and not stream.raw:
            stream.feed(piece)
            return
        limit = self.client.body_limit
        decoder = self.decoder
        if decoder is not None:  # inflated no further than the bound allows
            piece = decoder.decompress(piece, limit - self.size + 1)
        self.size += len(piece)
        if self.size > limit:
            raise BodyTooLargeError(f"a reply body over the {limit}-byte bound")
        if stream is not None:
            stream.feed(piece)
        else:
            self.parts.append(piece)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            self._reset()
            return
        self._finish()

    # -- the client's side

    def start(self, waiter: asyncio.Future[Response] | None, stream: Sink | None, now: float, timeout: float,
              read_timeout: float = 0.0) -> None:
        self.state = _HEAD
        self.status = 0
        self._reset()
        self.waiter = waiter
        self.stream = stream
        self.deadline = now + timeout
        self.read_timeout = read_timeout
        self.last_read = now
        self.client.watching(self, timeout)

    def _reset(self) -> None:
        """Before a reply's head: forget the last one's."""
        self.head_bytes = 0
        self.length = -1
        self.te = self.encoding = b""
        self.retry_after = None

    def send(self, data: bytes) -> None:
        """Write one request; NotSentError if the connection is already closing (nothing written)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            raise NotSentError("the connection closed before the request was written")
        transport.write(data)

    def abort(self) -> None:
        transport = self.transport
        if transport is not None:
            transport.abort()
        self.client.forget(self)

    def pause(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            if self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()

    @property
    def usable(self) -> bool:
        transport = self.transport
        return self.counted and transport is not None and not transport.is_closing()

    # -- the reply

    def check(self, now: float) -> None:
        """The sweep: fail a reply past its deadline, or a stream silent too long (unless we paused it).
        A refused stream's body is a reply like any other: all of it by its deadline."""
        if self.state == _IDLE:
            return
        if self.stream is not None and self.status == 200:
            if not self.paused and now - self.last_read >= self.read_timeout:
                self._fail(TimeoutError(f"no data for {self.read_timeout:g}s"))
        elif now >= self.deadline:
            self._fail(TimeoutError("no reply in time"))

    def _finish(self) -> None:
        """The reply's body ended (its length, its last chunk, or a clean close): check a compressed
        body came to its own end, hand the reply over and give the connection back (or close it)."""
        decoder = self.decoder
        if decoder is not None:
            self.decoder = None
            if not decoder.eof:
                raise HttpError("the compressed body ended before its end: cut short")
            if decoder.unused_data:
                raise HttpError("bytes after the end of the compressed body")
        self.client.done(self)
        parts = self.parts
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self.parts = []
        self.state = _IDLE
        stream, self.stream = self.stream, None
        waiter, self.waiter = self.waiter, None
        if stream is not None:
            stream.end()
            self.resume()
        elif waiter is not None and not waiter.done():
            waiter.set_result(Response(self.status, body, self.retry_after))
        self.client.release(self, self.keep_alive)

    def _fail(self, error: BaseException) -> None:
        """No (whole) reply: the waiting caller gets `error`, the connection is closed."""
        self.client.done(self)
        self.state = _IDLE
        self.parts = []
        self.decoder = None
        stream, self.stream = self.stream, None
        waiter, self.waiter = self.waiter, None
        if stream is not None:
            stream.fail(error)
        elif waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.abort()
