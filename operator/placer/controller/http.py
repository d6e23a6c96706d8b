"""A lean HTTP/1.1 client: the transport `placer.controller.kube` sends its API calls over.

Why not aiohttp: measured live on a real API server, aiohttp's client request path (session,
request and response objects, payload registry, timeout handles, stream readers) was about a
quarter of Placer's CPU, and asyncio's TLS transport another tenth, for what is two small requests
per pod (a binding, an event). Here a request is one pre-built `bytes` written with one
`transport.write` (over TLS: one record, one `send`), and its reply is parsed by a small
`asyncio.Protocol` as it arrives: the status line, the few headers that matter (Content-Length,
Transfer-Encoding: chunked, Connection, Retry-After, Content-Encoding) and a Content-Length,
chunked or read-until-close body. One future per request; deadlines are checked by one sweep a
second (sooner for short timeouts) rather than a timer per request, whose heap upkeep in asyncio
cost more than the parsing.

- Connections: a keep-alive pool, at most `limit` open at once (callers beyond it wait for one);
  the most recently used idle connection goes first, and one idle longer than `keepalive`
  seconds is closed rather than reused (a server may have dropped it meanwhile). A reply that
  cannot be trusted to have ended cleanly (an error, a timeout, a cancelled caller, leftover bytes,
  `Connection: close`) closes its connection.
- TLS: the caller's `ssl.SSLContext` (`tls_context` builds one as kubernetes_asyncio would from a
  kubeconfig: CA, client certificate, insecure-skip-tls-verify); SNI and the certificate's name
  check use `server_hostname` (a kubeconfig's `tls-server-name`) or the URL's host. The TLS layer
  is an `ssl.SSLObject` on memory BIOs inside the connection's protocol, over a plain transport:
  asyncio's SSL transport (its buffered protocol, app transport and flow-control states, in Python)
  cost about 15 % more CPU per call. OpenSSL does the same work either way.
- Proxies: an `http://` or `https://` proxy URL (credentials in it become `Proxy-Authorization:
  Basic`). An https server is reached through a CONNECT tunnel (TLS to the server inside it, as
  any HTTPS client does; to an `https://` proxy, TLS inside TLS); a plain-http server gets
  absolute-form requests sent to the proxy.
  `proxy_from_environment` applies `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and `NO_PROXY` as
  aiohttp's `trust_env` and Go's `ProxyFromEnvironment` do.
- Streams (watches): `HttpClient.stream` returns once the reply's head is in; its body then comes
  as batches of lines (`Stream.batch`). Reading pauses while more than `HIGH_WATER` bytes wait
  for the consumer, and a stream silent for `read_timeout` seconds fails with TimeoutError.
- Errors: a connection that fails or ends early, and a reply that breaks HTTP/1.1, raise OSError
  (`HttpError` for the latter two); deadlines raise TimeoutError. Nothing is retried here: the
  caller's policy decides. Nothing here logs a header or a body.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import zlib
from collections import deque
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment

__all__ = [
    "HIGH_WATER",
    "KEEPALIVE",
    "HttpClient",
    "BodyTooLargeError",
    "HttpError",
    "NotSentError",
    "Response",
    "Stream",
    "TlsVerificationError",
    "proxy_from_environment",
    "tls_context",
]

KEEPALIVE = 15.0  # seconds an idle connection may be reused (aiohttp's default keep-alive)
HIGH_WATER = 4 * 2**20  # bytes of a stream waiting for its consumer before reading pauses
MAX_HEAD = 64 * 1024  # a reply head (status line + headers) longer than this is refused

# reply parser states
_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE = range(8)


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


def tls_context(
    *, ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool, strict: bool = True
) -> ssl.SSLContext:
    """TLS as kubernetes_asyncio's REST client sets it up from a kubeconfig: the cluster's CA (the
    system's store without one), an optional client certificate, and insecure-skip-tls-verify.
    Without verification no CA store is loaded at all (loading the system's costs ~50 ms)."""
    if verify:
        context = ssl.create_default_context(cafile=ca_file)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, keyfile=key_file)
    if not strict:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def proxy_from_environment(url: str) -> str | None:
    """The proxy `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` name for `url`, unless `NO_PROXY` exempts it."""
    proxies = getproxies_environment()
    if not proxies:
        return None
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxy


def _origin(url: str, what: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL; a clear ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"unsupported {what} URL {url!r}: only http:// and https:// are supported")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise ValueError(f"{what} URL {url!r}: {error}") from None
    return parts.scheme, parts.hostname, port


def _authority(scheme: str, host: str, port: int) -> str:
    host = f"[{host}]" if ":" in host else host
    return host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"


def _value(head: bytes, name: bytes, lower: bytes | None = None) -> bytes:
    """A header's value from a reply head, stripped, b"" if absent. `name` is b"\\r\\nheader-name:",
    lowercase, looked up in `lower` (the head lowercased; `head` itself when it is that already)."""
    lower = head if lower is None else lower
    start = lower.find(name)
    if start < 0:
        return b""
    start += len(name)
    end = lower.find(b"\r\n", start)
    return head[start:end if end >= 0 else None].strip()


class Stream:
    """A reply read as it comes (a watch): `status` once the head is in, then its body's lines."""

    __slots__ = ("_buffered", "_conn", "_ended", "_error", "_head", "_lines", "_loop", "_partial", "_raw",
                 "_waiter", "status")

    def __init__(self, conn: _Connection, loop: asyncio.AbstractEventLoop) -> None:
        self._conn: _Connection | None = conn
        self._loop = loop
        self._head: asyncio.Future[None] = loop.create_future()
        self._waiter: asyncio.Future[None] | None = None
        self._lines: list[bytes] = []
        self._partial = b""
        self._buffered = 0
        self._raw = False  # a refusal: its body is kept whole, not split into lines
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

    def _feed(self, piece: bytes) -> None:
        if self._raw or b"\n" not in piece:
            self._partial += piece
        else:
            lines = piece.split(b"\n")
            if self._partial:
                lines[0] = self._partial + lines[0]
            self._partial = lines.pop()
            self._lines += lines
            self._wake()
        self._buffered += len(piece)
        conn = self._conn
        if self._buffered > HIGH_WATER and not self._raw and conn is not None and not conn.paused:
            conn.pause()  # (not a refusal's body: `read` waits for all of it)

    def _started(self, status: int) -> None:
        self.status = status
        self._raw = status != 200
        if not self._head.done():
            self._head.set_result(None)

    def _end(self) -> None:
        self._ended = True
        if self._partial and not self._raw:
            self._lines.append(self._partial)
            self._partial = b""
        self._conn = None
        self._wake()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._conn = None
        if not self._head.done():
            self._head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One keep-alive connection and the parser of the reply being read on it."""

    __slots__ = ("body", "buffer", "client", "counted", "deadline", "decoder", "idle_since", "keep_alive",
                 "last_read", "loop", "paused", "read_timeout", "remaining", "retry_after", "state", "status",
                 "stream", "transport", "waiter")

    def __init__(self, client: HttpClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.counted = True  # holds one of the client's `limit` slots until forgotten
        self.idle_since = 0.0
        self.paused = False
        self.waiter: asyncio.Future[Response] | None = None
        self.stream: Stream | None = None
        self.deadline = 0.0  # of the whole reply (a request) or of the stream's first bytes
        self.read_timeout = 0.0
        self.last_read = 0.0
        self.buffer = bytearray()
        self.body = bytearray()
        self.state = _IDLE
        self.status = 0
        self.retry_after: str | None = None
        self.keep_alive = True
        self.remaining = 0
        self.decoder: zlib._Decompress | None = None

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        state = self.state
        if state == _IDLE:  # nothing was asked: a server talking out of turn is not trusted
            self.abort()
            return
        if self.stream is not None:
            self.last_read = self.loop.time()
        buf = self.buffer
        try:
            if state == _HEAD and not buf and self.stream is None:
                # the common case, a whole small reply in one read: no copy through the buffer
                end = data.find(b"\r\n\r\n")
                if end >= 0:
                    self._head(data[:end])
                    if self.state == _LENGTH and len(data) - end - 4 == self.remaining:
                        self.remaining = 0
                        self._done(data[end + 4:])
                        return
                    data = data[end + 4:]
            buf += data
            self._parse()
        except (ValueError, zlib.error) as error:  # HttpError is an OSError, not a ValueError
            self._fail(HttpError(f"malformed reply: {error}"))
        except HttpError as error:
            self._fail(error)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        state = self.state
        if state == _UNTIL_CLOSE:
            self.keep_alive = False
            self._done()
        elif state != _IDLE:
            why = f": {exc}" if exc else ""
            self._fail(HttpError(f"the server closed the connection before the reply ended{why}"))
        self.state = _IDLE
        self.client._forget(self)

    # -- the client's side

    def start(self, waiter: asyncio.Future[Response] | None, stream: Stream | None, now: float, timeout: float,
              read_timeout: float = 0.0) -> None:
        self.state = _HEAD
        self.status = 0
        self.waiter = waiter
        self.stream = stream
        self.deadline = now + timeout
        self.read_timeout = read_timeout
        self.last_read = now
        self.client._watch(self, timeout)

    def send(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[union-attr]

    def abort(self) -> None:
        transport = self.transport
        if transport is not None:
            transport.abort()
        self.client._forget(self)

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
        """The sweep: fail a reply past its deadline, or a stream silent too long (unless we paused it)."""
        if self.state == _IDLE:
            return
        if self.stream is not None and self.status:
            if not self.paused and now - self.last_read >= self.read_timeout:
                self._fail(TimeoutError(f"no data for {self.read_timeout:g}s"))
        elif now >= self.deadline:
            self._fail(TimeoutError("no reply in time"))

    def _parse(self) -> None:
        buf = self.buffer
        while buf:
            state = self.state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise HttpError("reply head too long")
                    return
                head = bytes(buf[:end])
                del buf[:end + 4]
                self._head(head)
            elif state == _LENGTH:
                size = self.remaining
                if self.stream is None:
                    if len(buf) < size:
                        return
                    self.remaining = 0
                    self._done(_take(buf, size))
                else:
                    piece = _take(buf, size)
                    self.remaining = size - len(piece)
                    self._piece(piece)
                    if not self.remaining:
                        self._done()
            elif state == _CHUNK_SIZE:
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > 1024:
                        raise HttpError("chunk size line too long")
                    return
                size = int(bytes(buf[:end]).split(b";", 1)[0], 16)
                del buf[:end + 2]
                if size < 0:
                    raise HttpError("negative chunk size")
                self.remaining = size
                self.state = _CHUNK_DATA if size else _TRAILERS
            elif state == _CHUNK_DATA:
                size = self.remaining
                piece = _take(buf, size)
                self.remaining = size - len(piece)
                self._piece(piece)
                if not self.remaining:
                    self.state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(buf) < 2:
                    return
                if buf[0] != 13 or buf[1] != 10:
                    raise HttpError("chunk not followed by CRLF")
                del buf[:2]
                self.state = _CHUNK_SIZE
            elif state == _TRAILERS:
                if len(buf) < 2:
                    return
                if buf[0] == 13 and buf[1] == 10:
                    del buf[:2]
                else:  # trailer fields: skipped
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        if len(buf) > MAX_HEAD:
                            raise HttpError("trailers too long")
                        return
                    del buf[:end + 4]
                self._done()
            elif state == _UNTIL_CLOSE:
                piece = bytes(buf)
                buf.clear()
                self._piece(piece)
            else:  # bytes after the reply ended: the connection is not reused
                self.keep_alive = False
                self.abort()
                return

    def _head(self, head: bytes) -> None:
        if not head.startswith(b"HTTP/1."):
            raise HttpError("not an HTTP/1.x reply")
        status = int(head[9:12])
        if status < 200:  # 100 Continue and the like: the real head follows
            if status == 101:
                raise HttpError("unexpected protocol switch")
            return
        self.status = status
        lower = head.lower()  # header names are case-insensitive; values looked at are too
        http10 = head[7] == 48  # "HTTP/1.0"
        if b"\r\nconnection:" in lower:
            connection = _value(lower, b"\r\nconnection:")
            self.keep_alive = b"close" not in connection and (not http10 or b"keep-alive" in connection)
        else:
            self.keep_alive = not http10
        self.retry_after = None
        if status == 429 or status == 503:
            retry_after = _value(head, b"\r\nretry-after:", lower)
            self.retry_after = retry_after.decode("latin-1") if retry_after else None
        self.decoder = None
        if b"\r\ncontent-encoding:" in lower:
            encoding = _value(lower, b"\r\ncontent-encoding:")
            if encoding in (b"gzip", b"x-gzip", b"deflate"):
                self.decoder = zlib.decompressobj(wbits=47)  # gzip or zlib, told apart by its header
            elif encoding not in (b"identity", b""):
                raise HttpError(f"unsupported Content-Encoding {encoding.decode('latin-1')!r}")
        stream = self.stream
        if stream is not None:
            stream._started(status)
        if status == 204 or status == 304:
            self.state = _LENGTH
            self.remaining = 0
        elif b"\r\ntransfer-encoding:" in lower and b"chunked" in _value(lower, b"\r\ntransfer-encoding:"):
            self.state = _CHUNK_SIZE
        elif b"\r\ncontent-length:" in lower:
            self.remaining = int(_value(lower, b"\r\ncontent-length:"))
            if self.remaining < 0:
                raise HttpError("negative Content-Length")
            self.state = _LENGTH
        else:
            self.keep_alive = False
            self.state = _UNTIL_CLOSE
        if self.state == _LENGTH and not self.remaining:
            self._done(b"")

    def _piece(self, piece: bytes) -> None:
        if self.decoder is not None:
            piece = self.decoder.decompress(piece)
        stream = self.stream
        if stream is not None:
            stream._feed(piece)
        else:
            self.body += piece

    def _done(self, body: bytes | None = None) -> None:
        """The reply ended: hand it over and give the connection back (or close it)."""
        self.client._busy.discard(self)
        if body is None:
            body = bytes(self.body)
            self.body.clear()
        elif self.decoder is not None:
            body = self.decoder.decompress(body)
        if self.decoder is not None:
            body += self.decoder.flush()
            self.decoder = None
        self.state = _IDLE
        stream, self.stream = self.stream, None
        waiter, self.waiter = self.waiter, None
        if stream is not None:
            if body:
                stream._feed(body)
            stream._end()
            self.resume()
        elif waiter is not None and not waiter.done():
            waiter.set_result(Response(self.status, body, self.retry_after))
        self.client._release(self, self.keep_alive and not self.buffer)

    def _fail(self, error: BaseException) -> None:
        """No (whole) reply: the waiting caller gets `error`, the connection is closed."""
        self.client._busy.discard(self)
        self.state = _IDLE
        self.body.clear()
        stream, self.stream = self.stream, None
        waiter, self.waiter = self.waiter, None
        if stream is not None:
            stream._fail(error)
        elif waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.abort()


class _TlsConnection(_Connection):
    """A connection with TLS done here, on the bytes of a plain transport, rather than by asyncio's
    SSL transport: one `SSLObject` between the socket and the parser, no buffering protocol, app
    transport and flow-control layers in between (they were a third of the cost of a call)."""

    __slots__ = ("handshake", "shaken", "tls", "tls_in", "tls_out")

    def __init__(self, client: HttpClient, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(client, loop)
        self.tls_in = ssl.MemoryBIO()
        self.tls_out = ssl.MemoryBIO()
        assert client._ssl is not None
        self.tls = client._ssl.wrap_bio(self.tls_in, self.tls_out, server_side=False,
                                        server_hostname=client._server_hostname)
        self.handshake: asyncio.Future[None] = loop.create_future()
        self.shaken = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._shake()

    def _shake(self) -> None:
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except (ssl.SSLError, ssl.CertificateError, OSError) as error:
            with contextlib.suppress(OSError):
                self._flush()  # the alert, if any
            if not self.handshake.done():
                self.handshake.set_exception(error)
            return
        self._flush()
        self.shaken = True
        if not self.handshake.done():
            self.handshake.set_result(None)

    def _flush(self) -> None:
        if self.tls_out.pending:
            self.transport.write(self.tls_out.read())  # type: ignore[union-attr]

    def send(self, data: bytes) -> None:
        try:
            self.tls.write(data)
        except ssl.SSLError as error:
            self._fail(error)
            return
        self.transport.write(self.tls_out.read())  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self.tls_in.write(data)
        if not self.shaken:
            self._shake()
            if not self.shaken:
                return
        chunks = []
        closed = False
        tls = self.tls
        try:
            while chunk := tls.read(262144):
                chunks.append(chunk)
            closed = True  # b"": the server's close_notify
        except ssl.SSLWantReadError:
            pass  # no whole record left
        except ssl.SSLZeroReturnError:
            closed = True
        except ssl.SSLError as error:
            self._fail(error)
            return
        if self.tls_out.pending:  # (TLS 1.3 key updates and the like)
            self._flush()
        if chunks:
            super().data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if closed and self.transport is not None:
            self.transport.close()  # connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(exc or HttpError("the server closed the connection during the TLS handshake"))
        super().connection_lost(exc)


class _ProxyReply(asyncio.Protocol):
    """Reads a proxy's answer to CONNECT (its status)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.status: asyncio.Future[int] = loop.create_future()
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        if self.status.done():
            return
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end >= 0:
            head = self.buffer[:end]
            if not head.startswith(b"HTTP/1.") or len(head) < 12 or not head[9:12].isdigit():
                self.status.set_exception(HttpError("the proxy's answer to CONNECT is not HTTP"))
            elif end + 4 != len(self.buffer):
                self.status.set_exception(HttpError("the proxy sent data before the tunnel was up"))
            else:
                self.status.set_result(int(head[9:12]))
        elif len(self.buffer) > MAX_HEAD:
            self.status.set_exception(HttpError("the proxy's answer to CONNECT is too long"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.status.done():
            self.status.set_exception(HttpError("the proxy closed the connection during CONNECT"))


class HttpClient:
    """Requests to one server (`url`: scheme, host and port; a path in it is ignored) over a pool."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        proxy: str | None = None,
        proxy_headers: Mapping[str, str] | None = None,
        limit: int = 100,
        keepalive: float = KEEPALIVE,
        user_agent: str = "placer",
    ) -> None:
        scheme, host, port = _origin(url, "server")
        self.host, self.port = host, port
        self.limit = max(1, limit)
        self.keepalive = keepalive
        self._ssl = (ssl_context or tls_context(ca_file=None, cert_file=None, key_file=None, verify=True)
                     if scheme == "https" else None)
        self._server_hostname = (server_hostname or host) if self._ssl is not None else None
        authority = _authority(scheme, host, port)
        fixed = [f"Host: {authority}\r\n", f"User-Agent: {user_agent}\r\n"]
        self._proxy: tuple[str, int, ssl.SSLContext | None] | None = None
        self._tunnel = b""  # the CONNECT request, for an https server behind a proxy
        self.prefix = ""  # absolute-form request targets, for an http server behind a proxy
        if proxy:
            proxy_scheme, proxy_host, proxy_port = _origin(proxy, "proxy")
            parts = urlsplit(proxy)
            extra = [f"{name}: {value}\r\n" for name, value in (proxy_headers or {}).items()]
            if parts.username is not None:
                secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
                extra.append(f"Proxy-Authorization: Basic {base64.b64encode(secret).decode()}\r\n")
            proxy_tls = (tls_context(ca_file=None, cert_file=None, key_file=None, verify=True)
                         if proxy_scheme == "https" else None)
            self._proxy = (proxy_host, proxy_port, proxy_tls)
            if self._ssl is not None:
                self._tunnel = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{''.join(extra)}\r\n".encode()
            else:
                self.prefix = f"http://{authority}"
                fixed += extra
        self.headers = "".join(fixed)
        self._idle: list[_Connection] = []
        self._connections: set[_Connection] = set()
        self._count = 0  # connections open or opening
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._busy: set[_Connection] = set()  # waiting for a reply (or reading a stream)
        self._sweeper: asyncio.TimerHandle | None = None
        self._tick = 1.0  # seconds between sweeps: a quarter of the shortest timeout seen, at most 1
        self._now = 0.0  # the time of the last sweep
        self._closed = False

    def encode(self, method: str, target: str, headers: str, body: bytes | None) -> bytes:
        """One request as the bytes sent: `target` is path and query (quoted), `headers` more
        "Name: value\\r\\n" lines (not checked: the caller's own)."""
        if body is None:
            if method in ("POST", "PUT", "PATCH"):
                headers += "Content-Length: 0\r\n"
            return f"{method} {self.prefix}{target} HTTP/1.1\r\n{self.headers}{headers}\r\n".encode("latin-1")
        head = f"{method} {self.prefix}{target} HTTP/1.1\r\n{self.headers}{headers}Content-Length: {len(body)}\r\n\r\n"
        return head.encode("latin-1") + body

    async def request(self, data: bytes, timeout: float) -> Response:
        """Send one encoded request; its whole reply, within `timeout` seconds all told."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        conn = self._pop_idle() or await self._acquire(loop, now + timeout)
        waiter: asyncio.Future[Response] = loop.create_future()
        conn.start(waiter, None, now, timeout)
        conn.send(data)
        try:
            return await waiter
        except BaseException:
            if conn.waiter is waiter:  # cancelled mid-reply: the connection's state is unknown
                conn.waiter = None
                conn.abort()
            raise

    async def stream(self, data: bytes, *, connect_timeout: float, read_timeout: float) -> Stream:
        """Send one encoded request and return once its reply's head is in (`Stream.status`)."""
        loop = asyncio.get_running_loop()
        conn = self._pop_idle() or await self._acquire(loop, loop.time() + connect_timeout)
        stream = Stream(conn, loop)
        conn.start(None, stream, loop.time(), read_timeout, read_timeout)
        conn.send(data)
        try:
            await stream._head
        except BaseException:
            stream.close()
            raise
        return stream

    async def close(self) -> None:
        """Close every connection (streams and requests in flight fail)."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._connections):
            conn.abort()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(HttpError("the client was closed"))
        for _ in range(2):  # let the transports' connection_lost run (TLS: two hops)
            await asyncio.sleep(0)

    # -- the pool

    def _pop_idle(self) -> _Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if conn.counted and transport is not None and not transport.is_closing():
                return conn
            conn.abort()
        return None

    def _watch(self, conn: _Connection, timeout: float) -> None:
        """`conn` waits for a reply: the sweep keeps an eye on it."""
        self._busy.add(conn)
        if timeout < 4 * self._tick:  # a shorter timeout than any so far: sweep more often, from now on
            self._tick = max(timeout / 4, 0.01)
            if self._sweeper is not None:
                self._sweeper.cancel()
                self._sweeper = None
        if self._sweeper is None and not self._closed:
            self._now = conn.loop.time()
            self._sweeper = conn.loop.call_at(self._now + self._tick, self._sweep)

    def _sweep(self) -> None:
        """Fail replies past their deadline, close connections idle past `keepalive`."""
        self._sweeper = None
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        now = self._now = loop.time()
        for conn in list(self._busy):
            conn.check(now)
        expired = [conn for conn in self._idle if now - conn.idle_since >= self.keepalive]
        for conn in expired:
            conn.abort()
        if self._busy or self._idle:
            self._sweeper = loop.call_at(now + self._tick, self._sweep)

    async def _acquire(self, loop: asyncio.AbstractEventLoop, deadline: float) -> _Connection:
        """A connection: an idle one, a new one while under `limit`, else the next one freed."""
        async with asyncio.timeout_at(deadline):
            while True:
                if self._closed:
                    raise HttpError("the client was closed")
                conn = self._pop_idle()
                if conn is not None:
                    return conn
                if self._count < self.limit:
                    self._count += 1
                    conn = _Connection(self, loop) if self._ssl is None else _TlsConnection(self, loop)
                    try:
                        await self._connect(loop, conn)
                    except BaseException:
                        conn.abort()  # frees the slot
                        raise
                    if self._closed or not conn.usable:
                        conn.abort()
                        raise HttpError("the client was closed" if self._closed else "the connection closed at once")
                    self._connections.add(conn)
                    return conn
                waiter: asyncio.Future[_Connection | None] = loop.create_future()
                self._waiters.append(waiter)
                try:
                    conn = await waiter
                except BaseException:
                    if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                        handed = waiter.result()
                        if handed is not None:
                            self._release(handed, True)  # handed over as we gave up: pass it on
                    elif waiter in self._waiters:
                        self._waiters.remove(waiter)
                    raise
                if conn is not None and conn.usable:  # (it may have closed since it was handed over)
                    return conn

    async def _connect(self, loop: asyncio.AbstractEventLoop, conn: _Connection) -> None:
        if self._proxy is None:
            await loop.create_connection(lambda: conn, self.host, self.port)
        else:
            proxy_host, proxy_port, proxy_tls = self._proxy
            hostname = proxy_host if proxy_tls else None
            if not self._tunnel:  # an http server: requests go to the proxy as they are
                await loop.create_connection(lambda: conn, proxy_host, proxy_port, ssl=proxy_tls,
                                             server_hostname=hostname)
                return
            reply = _ProxyReply(loop)
            transport, _ = await loop.create_connection(lambda: reply, proxy_host, proxy_port, ssl=proxy_tls,
                                                        server_hostname=hostname)
            try:
                transport.write(self._tunnel)
                status = await reply.status
                if status != 200:
                    raise HttpError(f"the proxy refused the tunnel to {self.host}:{self.port}: HTTP {status}")
            except BaseException:
                transport.abort()
                raise
            transport.set_protocol(conn)
            conn.connection_made(transport)
        if isinstance(conn, _TlsConnection):
            await conn.handshake

    def _release(self, conn: _Connection, reusable: bool) -> None:
        """A reply ended on `conn`: to the next waiting caller, to the idle pool, or closed."""
        if not reusable or not conn.usable or self._closed:
            conn.abort()
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.idle_since = self._now  # the last sweep's time: keep-alive is not that precise
        self._idle.append(conn)

    def _forget(self, conn: _Connection) -> None:
        """`conn` is closed (or closing): its slot is free."""
        if not conn.counted:
            return
        conn.counted = False
        self._count -= 1
        self._connections.discard(conn)
        self._busy.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        self._wake()

    def _wake(self) -> None:
        """A slot is free: the first waiting caller opens a connection."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


def _take(buf: bytearray, size: int) -> bytes:
    """Up to `size` bytes off the front of `buf` (all of it without a copy of the rest when it
    holds no more)."""
    if len(buf) <= size:
        piece = bytes(buf)
        buf.clear()
    else:
        piece = bytes(buf[:size])
        del buf[:size]
    return piece
