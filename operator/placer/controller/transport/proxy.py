"""Proxies for `placer.controller.transport.http`: the proxy URL read once, and a connection opened through it.

- `http://` and `https://` (TLS to the proxy): an https server is reached through a CONNECT tunnel
  (TLS to the server inside it, as any HTTPS client does), a plain-http server with absolute-form
  requests; credentials in the URL become `Proxy-Authorization: Basic`.
- `socks5://` (the server's name resolved here) and `socks5h://` (resolved by the proxy), through
  `python-socks`; credentials in the URL are RFC 1929's user and password. The socket it returns
  is handed to `loop.create_connection(sock=...)`, and TLS to the server runs over it as usual.

Another scheme or a malformed URL is a ValueError when the client is made; its message shows the
URL redacted (`http://user:xxxxx@host`), as client-go does. A proxy that refuses or fails is a
NotSentError: nothing of the request reached the server.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
from collections.abc import Callable, Mapping
from urllib.parse import unquote, urlsplit

from placer.controller.transport.proxy_env import SCHEMES as PROXY_SCHEMES
from placer.controller.transport.proxy_env import redact
from placer.controller.transport.reply import Connection, NotSentError
from placer.controller.transport.tls import tls_context

MAX_PROXY_REPLY = 64 * 1024  # a proxy's answer to CONNECT longer than this is refused


def origin(url: str, what: str, schemes: tuple[str, ...] = ("http", "https")) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL with one of `schemes`; a clear ValueError otherwise (the URL
    redacted: a proxy's may hold a password)."""
    shown = redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ValueError(f"malformed {what} URL {shown!r}: {error}") from None
    if parts.scheme not in schemes or not parts.hostname:
        names = [f"{scheme}://" for scheme in schemes]
        supported = f"{', '.join(names[:-1])} and {names[-1]}"
        raise ValueError(f"unsupported {what} URL {shown!r}: only {supported} are supported")
    if port is None:
        port = 1080 if parts.scheme.startswith("socks5") else 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port


def authority(scheme: str, host: str, port: int) -> str:
    host = f"[{host}]" if ":" in host else host
    return host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"


class _ProxyReply(asyncio.Protocol):
    """Reads an HTTP proxy's answer to CONNECT (its status)."""

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
            if not re.match(rb"HTTP/1\.[01] [1-5][0-9][0-9](?: |\r\n|$)", head):
                self.status.set_exception(NotSentError("the proxy's answer to CONNECT is not HTTP/1.x"))
            elif end + 4 != len(self.buffer):
                self.status.set_exception(NotSentError("the proxy sent data before the tunnel was up"))
            else:
                self.status.set_result(int(head[9:12]))
        elif len(self.buffer) > MAX_PROXY_REPLY:
            self.status.set_exception(NotSentError("the proxy's answer to CONNECT is too long"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.status.done():
            self.status.set_exception(NotSentError("the proxy closed the connection during CONNECT"))


class ProxyRoute:
    """How connections reach the server through a proxy: its address, TLS to it (https://), the
    CONNECT request (an https server behind an HTTP proxy) or a SOCKS5 hop."""

    __slots__ = ("header_lines", "host", "port", "socks", "tls", "tunnel", "where")

    def __init__(self, url: str, headers: Mapping[str, str] | None,
                 context: Callable[..., ssl.SSLContext] = tls_context) -> None:
        scheme, self.host, self.port = origin(url, "proxy", PROXY_SCHEMES)
        self.where = f"the proxy {self.host}:{self.port}"
        parts = urlsplit(url)
        user = unquote(parts.username) if parts.username is not None else None
        password = unquote(parts.password or "") if parts.username is not None else None
        self.tls = (context(ca_file=None, cert_file=None, key_file=None, verify=True)
                    if scheme == "https" else None)
        self.socks: tuple[str | None, str | None, bool] | None = None
        self.tunnel = b""
        if scheme.startswith("socks5"):
            self.socks = (user, password, scheme == "socks5h")
        self.header_lines = [f"{name}: {value}\r\n" for name, value in (headers or {}).items()]
        if user is not None and self.socks is None:
            secret = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.header_lines.append(f"Proxy-Authorization: Basic {secret}\r\n")

    async def open(self, loop: asyncio.AbstractEventLoop, conn: Connection, host: str, port: int) -> None:
        """Connect `conn` to `host`:`port` through the proxy (TLS to the server is the caller's)."""
        if self.socks is not None:
            # imported here: python-socks' asyncio part costs about 50 ms of every start-up, and
            # few clusters are reached through a SOCKS proxy
            from python_socks import ProxyError as SocksError
            from python_socks import ProxyType
            from python_socks.async_.asyncio import Proxy as SocksProxy

            user, password, remote_dns = self.socks
            hop = SocksProxy(ProxyType.SOCKS5, self.host, self.port, user, password, rdns=remote_dns, loop=loop)
            try:
                sock = await hop.connect(host, port, timeout=None)  # (the caller's deadline bounds it)
            except SocksError as error:  # (python-socks' refusals are not OSErrors)
                raise NotSentError(f"{self.where} refused: {error}") from error
            try:
                await loop.create_connection(lambda: conn, sock=sock)
            except BaseException:
                sock.close()
                raise
            return
        hostname = self.host if self.tls else None
        if not self.tunnel:  # an http server: requests go to the proxy as they are
            await loop.create_connection(lambda: conn, self.host, self.port, ssl=self.tls, server_hostname=hostname)
            return
        reply = _ProxyReply(loop)
        transport, _ = await loop.create_connection(lambda: reply, self.host, self.port, ssl=self.tls,
                                                    server_hostname=hostname)
        try:
            transport.write(self.tunnel)
            status = await reply.status
            if status != 200:
                raise NotSentError(f"the proxy refused the tunnel to {host}:{port}: HTTP {status} "
                                   f"({self.host}:{self.port})")
        except BaseException:
            transport.abort()
            raise
        transport.set_protocol(conn)
        conn.connection_made(transport)
