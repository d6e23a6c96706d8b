"""A lean HTTP/1.1 client: the transport `placer.controller.transport.client` sends its API calls over.

Why not aiohttp (Kopf brings it, and it parses with llhttp too): measured on a real v1.36.2 API
server, 1,000 nodes / 5,000 pending pods, Placer alone, the same tree with each transport in turn,
three interleaved rounds (`make bench-real`'s harness, 2026-12-07), Placer's CPU per bound pod
(medians): this client 0.84 ms on asyncio's loop (0.79 ms on uvloop); aiohttp 1.04 ms on uvloop
(+23 %) and 1.37 ms on asyncio's loop (+63 %). aiohttp's request path (session, request and response
objects, payload registry, timeout handles, stream readers) costs more than the two small requests a
pod needs (a binding, an event). Here a request is one pre-built `bytes` written with one
`transport.write` (over TLS: one record, one `send`), and its reply is parsed as it arrives by
llhttp (`httptools`, strict framing; `placer.controller.transport.reply`). One future per request;
deadlines are checked by one sweep a second (sooner for short timeouts) rather than a timer per
request, whose heap upkeep in asyncio cost more than the parsing.

- Connections: a keep-alive pool, at most `limit` open at once (callers beyond it wait for one);
  the most recently used idle connection goes first, and one idle longer than `keepalive`
  seconds is closed rather than reused (a server may have dropped it meanwhile). A reply that
  cannot be trusted to have ended cleanly (an error, a timeout, a cancelled caller, bytes after
  it, `Connection: close`) closes its connection.
- TLS (`http_tls`): the caller's `ssl.SSLContext` (`tls_context` builds one from a kubeconfig);
  SNI and the name check use `server_hostname` (a kubeconfig's `tls-server-name`) or the URL's
  host; an `ssl.SSLObject` on memory BIOs over a plain transport. `use_tls_context` swaps it for
  the connections opened after (an exec plugin's renewed client certificate).
- Proxies: `http://` and `https://` (credentials in the URL become `Proxy-Authorization: Basic`;
  an https server is reached through a CONNECT tunnel, a plain-http one with absolute-form
  requests), `socks5://` (names resolved here) and `socks5h://` (by the proxy), through
  `python-socks`, user and password as RFC 1929 has them. Another scheme, or a malformed URL, is
  a ValueError when the client is made, its password never in the message.
- Bounds (`http_reply`): a whole reply's body (`body_limit`), a watch line (`line_limit`), the head.
- Streams (watches): `HttpClient.stream` returns once the reply's head is in; its body then comes
  as batches of lines (`Stream.batch`). Reading pauses while more than `HIGH_WATER` bytes of whole
  lines wait for the consumer, a stream silent for `read_timeout` seconds fails with
  TimeoutError, and a refusal's body must come whole within `read_timeout` of its head.
- Errors: OSError for a connection that fails or ends early and a reply that breaks HTTP/1.1
  (`HttpError`); `NotSentError` when nothing of the request was written (no connection, the
  proxy or the TLS handshake failed, the pool closed: any request may be sent again), and its
  `TlsVerificationError` for a certificate or name that did not verify; `BodyTooLargeError` past a
  bound; TimeoutError past a reply's deadline. Nothing is retried here: the caller's policy
  decides. Nothing here logs a header or a body.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Mapping

from placer.controller.transport.proxy import ProxyRoute, origin, redact
from placer.controller.transport.proxy import authority as authority_of
from placer.controller.transport.reply import (
    BODY_LIMIT,
    BodyTooLargeError,
    Connection,
    HttpError,
    NotSentError,
    Response,
    TlsVerificationError,
)
from placer.controller.transport.stream import HIGH_WATER, LINE_LIMIT, Stream
from placer.controller.transport.tls import TlsConnection, handshake_error, tls_context

__all__ = [
    "BODY_LIMIT",
    "HIGH_WATER",
    "KEEPALIVE",
    "LINE_LIMIT",
    "BodyTooLargeError",
    "HttpClient",
    "HttpError",
    "NotSentError",
    "Response",
    "Stream",
    "TlsVerificationError",
    "redact",
    "tls_context",
]

KEEPALIVE = 15.0  # seconds an idle connection may be reused (aiohttp's default keep-alive)
#: seconds to open a connection (TCP, proxy, TLS handshake): client-go's TLSHandshakeTimeout; a
#: black-holed connection then costs its request 10 s, not the whole request timeout
CONNECT_TIMEOUT = 10.0


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
        connect_timeout: float = CONNECT_TIMEOUT,
        user_agent: str = "placer",
        body_limit: int = BODY_LIMIT,
        line_limit: int = LINE_LIMIT,
    ) -> None:
        scheme, host, port = origin(url, "server")
        self.host, self.port = host, port
        self.limit = max(1, limit)
        self.keepalive = keepalive
        self.connect_timeout = connect_timeout
        self.body_limit = body_limit
        self.line_limit = line_limit
        self._ssl = (ssl_context or tls_context(ca_file=None, cert_file=None, key_file=None, verify=True)
                     if scheme == "https" else None)
        self._server_hostname = (server_hostname or host) if self._ssl is not None else None
        authority = authority_of(scheme, host, port)
        fixed = [f"Host: {authority}\r\n", f"User-Agent: {user_agent}\r\n"]
        self._proxy = ProxyRoute(proxy, proxy_headers, tls_context) if proxy else None
        self.prefix = ""  # absolute-form request targets, for an http server behind an HTTP proxy
        if self._proxy is not None and self._proxy.socks is None:
            if self._ssl is not None:
                extra = "".join(self._proxy.header_lines)
                self._proxy.tunnel = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}\r\n".encode()
            else:
                self.prefix = f"http://{authority}"
                fixed += self._proxy.header_lines
        self.headers = "".join(fixed)
        self._idle: list[Connection] = []
        self._connections: set[Connection] = set()
        self._count = 0  # connections open or opening
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()
        self._busy: set[Connection] = set()  # waiting for a reply (or reading a stream)
        self._sweeper: asyncio.TimerHandle | None = None
        self._tick = 1.0  # seconds between sweeps: a quarter of the shortest timeout seen, at most 1
        self._now = 0.0  # the time of the last sweep
        self._closed = False
        self._tls_generation = 0  # bumped by use_tls_context: connections of an older one are not reused

    def use_tls_context(self, context: ssl.SSLContext) -> None:
        """New connections use `context` (a renewed client certificate): idle ones are closed now,
        busy ones (a request, a watch) when their reply ends, none cut short. An http client has no
        TLS: nothing changes."""
        if self._ssl is None:
            return
        self._ssl = context
        self._tls_generation += 1
        for conn in list(self._idle):
            conn.abort()

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
        self._send(conn, data)
        conn.start(waiter, None, now, timeout)
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
        stream = Stream(conn, loop, self.line_limit)
        self._send(conn, data)
        conn.start(None, stream, loop.time(), read_timeout, read_timeout)
        try:
            await stream.head
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
                waiter.set_exception(NotSentError("the client was closed"))
        for _ in range(2):  # let the transports' connection_lost run (TLS: two hops)
            await asyncio.sleep(0)

    # -- the pool

    def _send(self, conn: Connection, data: bytes) -> None:
        """Write a request on `conn`; a connection found closing takes its slot back (NotSentError)."""
        try:
            conn.send(data)
        except NotSentError:
            conn.abort()
            raise

    def _pop_idle(self) -> Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if conn.counted and transport is not None and not transport.is_closing():
                return conn
            conn.abort()
        return None

    def watching(self, conn: Connection, timeout: float) -> None:
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

    async def _acquire(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Connection:
        """A connection: an idle one, a new one while under `limit`, else the next one freed.
        Whatever goes wrong here, nothing was sent: NotSentError (a deadline passed included)."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self._acquire_within(loop)
        except TimeoutError as error:
            raise NotSentError(f"no connection to {self._where()} in time") from error

    async def _acquire_within(self, loop: asyncio.AbstractEventLoop) -> Connection:
        while True:
            if self._closed:
                raise NotSentError("the client was closed")
            conn = self._pop_idle()
            if conn is not None:
                return conn
            if self._count < self.limit:
                self._count += 1
                conn = Connection(self, loop) if self._ssl is None else TlsConnection(self, loop)
                conn.generation = self._tls_generation
                try:
                    async with asyncio.timeout(self.connect_timeout):
                        await self._connect(loop, conn)
                except BaseException:
                    conn.abort()  # frees the slot
                    raise
                if self._closed or not conn.usable:
                    conn.abort()
                    raise NotSentError("the client was closed" if self._closed else "the connection closed at once")
                self._connections.add(conn)
                return conn
            waiter: asyncio.Future[Connection | None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                conn = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    handed = waiter.result()
                    if handed is not None:
                        self.release(handed, True)  # handed over as we gave up: pass it on
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
            if conn is not None and conn.usable:  # (it may have closed since it was handed over)
                return conn

    def _where(self) -> str:
        proxy = self._proxy
        return f"{self.host}:{self.port}" + (f" through {proxy.where}" if proxy is not None else "")

    async def _connect(self, loop: asyncio.AbstractEventLoop, conn: Connection) -> None:
        """Open `conn`: directly, through a SOCKS5 proxy, or an HTTP(S) proxy (a CONNECT tunnel for an
        https server); then the TLS handshake with the server. Every failure is a NotSentError."""
        proxy = self._proxy
        try:
            if proxy is None:
                await loop.create_connection(lambda: conn, self.host, self.port)
            else:
                await proxy.open(loop, conn, self.host, self.port)
            if isinstance(conn, TlsConnection):
                await conn.handshake
        except NotSentError:
            raise
        except ssl.SSLCertVerificationError as error:  # (our own handshake's are NotSentErrors already)
            raise handshake_error(error, proxy.where if proxy is not None else self.host) from error
        except OSError as error:  # refused, unreachable, reset, a TLS failure with an https proxy
            if isinstance(error, TimeoutError):
                raise  # (the caller's deadline, reported as such)
            raise NotSentError(f"cannot connect to {self._where()}: {error}") from error

    def release(self, conn: Connection, reusable: bool) -> None:
        """A reply ended on `conn`: to the next waiting caller, to the idle pool, or closed."""
        if not reusable or not conn.usable or self._closed or conn.generation != self._tls_generation:
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

    def done(self, conn: Connection) -> None:
        """`conn`'s reply ended (or failed): the sweep no longer watches it."""
        self._busy.discard(conn)

    def forget(self, conn: Connection) -> None:
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
