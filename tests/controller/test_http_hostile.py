"""placer.controller.transport.http against hostile servers on 127.0.0.1: bounds, truncation, strict framing,
the errors a retry policy relies on (NotSentError, TlsVerificationError), SOCKS5, redacted proxy URLs."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
import struct
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from placer.controller.transport.http import (
    BodyTooLargeError,
    HttpClient,
    HttpError,
    NotSentError,
    TlsVerificationError,
    tls_context,
)

from tests.controller.netfixtures import Certs, Proxy, Socks5Proxy, make_certs

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
GET = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@contextlib.asynccontextmanager
async def server(handler: Handler, tls: Certs | None = None) -> AsyncIterator[str]:
    """A server on 127.0.0.1 running `handler` per connection (after reading one request head)."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await handler(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.server_cert, tls.server_key)
    listening = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    finally:
        listening.close()


def answering(data: bytes, then: float = 10) -> Handler:
    """A handler writing `data`, then holding the connection open for `then` seconds."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        await asyncio.sleep(then)
    return handler


async def ask(url: str, timeout: float = 5, **client_args: object) -> bytes:
    client = HttpClient(url, **client_args)  # type: ignore[arg-type]
    try:
        return (await client.request(GET, timeout)).body
    finally:
        await client.close()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# ----------------------------------------------------------------- framing: strict, and failing fast


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",  # duplicate lengths
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0x5\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: notchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunk(gzip.compress(b"hello")) + b"0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 999 Whatever\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 2x0 OK\r\n",  # a malformed status line, then nothing
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LFs
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
], ids=["dup-length", "same-length-twice", "plus3", "1_0", "0x5", "notchunked", "gzip-chunked", "te-and-length",
        "status-999", "status-099", "http2", "bad-status-line", "bare-lf", "101"])
async def test_lenient_framing_is_refused_at_once(answer: bytes) -> None:
    async with server(answering(answer)) as url:
        started = time.monotonic()
        with pytest.raises(HttpError):
            await ask(url, timeout=5)
        assert time.monotonic() - started < 1  # not waited out


async def test_informational_replies_are_skipped() -> None:
    answer = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
              b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    async with server(answering(answer)) as url:
        assert await ask(url) == b"ok"


# ----------------------------------------------------------------- bounds


async def test_a_huge_content_length_is_refused_at_once() -> None:
    async with server(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 107374182400\r\n\r\nxx")) as url:
        started = time.monotonic()
        with pytest.raises(BodyTooLargeError):
            await ask(url, timeout=5, body_limit=2**20)
        assert time.monotonic() - started < 1


async def test_a_huge_chunk_is_refused_once_past_the_bound() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40000000\r\n")
        for _ in range(64):
            writer.write(b"x" * 65536)
            await writer.drain()
        await asyncio.sleep(10)

    async with server(handler) as url:
        started = time.monotonic()
        with pytest.raises(BodyTooLargeError):
            await ask(url, timeout=5, body_limit=2**20)
        assert time.monotonic() - started < 2


async def test_unasked_gzip_is_inflated_within_the_bound_and_a_bomb_refused() -> None:
    bomb = gzip.compress(b"\0" * 100 * 2**20, 9)
    assert len(bomb) < 200 * 1024
    async with server(answering(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(bomb), bomb))) as url:
        with pytest.raises(BodyTooLargeError):
            await ask(url, body_limit=16 * 2**20)


async def test_no_accept_encoding_is_sent() -> None:
    client = HttpClient("http://127.0.0.1:1")
    assert b"accept-encoding" not in client.encode("GET", "/x", "Accept: application/json\r\n", None).lower()


# ----------------------------------------------------------------- truncation


async def test_a_truncated_gzip_body_is_an_error() -> None:
    packed = gzip.compress(b'{"kind":"PodList","items":[]}' * 100)[:-12]  # no end, no trailer
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
    async with server(answering(head + packed)) as url:
        with pytest.raises(HttpError, match="cut short"):
            await ask(url)


async def test_a_read_until_close_body_cut_by_a_reset_is_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n{\"kind\":\"PodList\",\"ite")
        await writer.drain()
        await asyncio.sleep(0.1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # RST, not FIN

    async with server(handler) as url:
        with pytest.raises(HttpError):
            await ask(url)


async def test_over_tls_a_read_until_close_body_needs_close_notify(certs: Certs) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npart of it")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.transport.abort()  # a TCP close, no close_notify

    async def clean(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        await writer.drain()  # then close(): close_notify, then FIN

    context = tls_context(ca_file=str(certs.ca), cert_file=None, key_file=None, verify=True)
    async with server(cut, certs) as url:
        with pytest.raises(HttpError, match="close_notify"):
            await ask(url, ssl_context=context)
    async with server(clean, certs) as url:
        assert await ask(url, ssl_context=context) == b"all of it"


# ----------------------------------------------------------------- streams


async def test_a_watch_line_longer_than_the_pause_mark_is_delivered() -> None:
    line = b'{"type":"ADDED","object":{"data":"' + b"x" * (5 * 2**20) + b'"}}'

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(line), 2**20):
            writer.write(chunk(line[start:start + 2**20]))
            await writer.drain()
        writer.write(chunk(b"\n{}\n") + b"0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(10)

    async with server(handler) as url:
        client = HttpClient(url)
        try:
            stream = await client.stream(GET, connect_timeout=5, read_timeout=2)
            lines: list[bytes] = []
            async with asyncio.timeout(10):
                while (batch := await stream.batch()) is not None:
                    lines += batch
            assert [item for item in lines if item] == [line, b"{}"]
        finally:
            await client.close()


async def test_a_watch_line_over_the_line_limit_fails_the_stream() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"{}\n"))
        for _ in range(40):
            writer.write(chunk(b"x" * 65536))
            await writer.drain()
        await asyncio.sleep(10)

    async with server(handler) as url:
        client = HttpClient(url, line_limit=2**20)
        try:
            stream = await client.stream(GET, connect_timeout=5, read_timeout=5)
            assert await stream.batch() == [b"{}"]
            async with asyncio.timeout(5):
                with pytest.raises(BodyTooLargeError):
                    while await stream.batch() is not None:
                        pass
        finally:
            await client.close()


async def test_a_refused_watch_trickling_its_body_times_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 410 Gone\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(1000):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    async with server(handler) as url:
        client = HttpClient(url)
        try:
            stream = await client.stream(GET, connect_timeout=5, read_timeout=0.5)
            assert stream.status == 410
            started = time.monotonic()
            async with asyncio.timeout(5):
                with pytest.raises(TimeoutError):
                    await stream.read()
            assert time.monotonic() - started < 2
        finally:
            await client.close()


async def test_a_compressed_watch_is_refused() -> None:
    body = chunk(zlib.compress(b"{}\n"))
    async with server(answering(b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\n"
                                b"Transfer-Encoding: chunked\r\n\r\n" + body)) as url:
        client = HttpClient(url)
        try:
            with pytest.raises(HttpError, match="compressed watch"):
                await client.stream(GET, connect_timeout=5, read_timeout=5)
        finally:
            await client.close()


# ----------------------------------------------------------------- not sent, and TLS verification


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("proxy", [None, "http", "socks5"])
async def test_no_connection_is_not_sent(proxy: str | None) -> None:
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(NotSentError, match="cannot connect"):
        await ask("https://127.0.0.1:6443" if proxy else f"http://{dead}", proxy=proxy and f"{proxy}://{dead}")


async def test_a_black_holed_tunnel_is_not_sent() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)  # takes the connection, never answers CONNECT

    listening = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        port = listening.sockets[0].getsockname()[1]
        with pytest.raises(NotSentError, match="in time"):
            await ask("https://127.0.0.1:6443", timeout=0.3, proxy=f"http://127.0.0.1:{port}")
    finally:
        listening.close()


async def test_a_black_holed_handshake_gives_up_at_the_connect_timeout() -> None:
    """A server that takes the connection and never answers the TLS handshake costs the request the
    connect timeout (client-go's 10 s TLS handshake timeout), not its whole deadline."""
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)

    listening = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        port = listening.sockets[0].getsockname()[1]
        started = time.monotonic()
        with pytest.raises(NotSentError, match="in time"):
            await ask(f"https://127.0.0.1:{port}", timeout=8, connect_timeout=0.3)
        assert time.monotonic() - started < 3
    finally:
        listening.close()


async def test_a_connection_found_closing_before_the_write_is_not_sent() -> None:
    async with server(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) as url:
        client = HttpClient(url)
        try:
            conn = await client._acquire(asyncio.get_running_loop(), asyncio.get_running_loop().time() + 5)
            assert conn.transport is not None
            conn.transport.close()
            with pytest.raises(NotSentError):
                client._send(conn, GET)
            assert client._count == 0  # its slot given back
            await client.close()
            with pytest.raises(NotSentError):
                await client.request(GET, 1)
        finally:
            await client.close()


async def test_tls_verification_failures_say_so(certs: Certs) -> None:
    async with server(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), certs) as url:
        wrong_ca = tls_context(ca_file=str(certs.other_ca), cert_file=None, key_file=None, verify=True)
        with pytest.raises(TlsVerificationError, match=r"127\.0\.0\.1 did not verify: .*issuer"):
            await ask(url, ssl_context=wrong_ca)
        right_ca = tls_context(ca_file=str(certs.ca), cert_file=None, key_file=None, verify=True)
        with pytest.raises(TlsVerificationError, match=r"localhost did not verify: Hostname mismatch"):
            await ask(url, ssl_context=right_ca, server_hostname="localhost")
        assert await ask(url, ssl_context=right_ca, server_hostname="kubernetes") == b""
    proxy = await Proxy(tls=certs).start()  # an https:// proxy whose certificate the system's CAs did not sign
    try:
        with pytest.raises(TlsVerificationError, match=rf"the proxy 127\.0\.0\.1:{proxy.port} did not verify"):
            await ask(url, ssl_context=right_ca, server_hostname="kubernetes", proxy=f"https://127.0.0.1:{proxy.port}")
    finally:
        await proxy.close()


# ----------------------------------------------------------------- SOCKS5, proxy URLs


async def test_through_socks5_with_a_password_and_socks5h_with_tls(certs: Certs) -> None:
    ok = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    socks = await Socks5Proxy(credentials="user:p@ss").start()
    try:
        async with server(ok) as url:
            port = int(url.rsplit(":", 1)[1])
            assert await ask(url, proxy=f"socks5://user:p%40ss@127.0.0.1:{socks.port}") == b"ok"
            with pytest.raises(NotSentError, match="refused"):
                await ask(url, proxy=f"socks5://user:wrong@127.0.0.1:{socks.port}")
        async with server(ok, certs) as url:
            tls_port = int(url.rsplit(":", 1)[1])
            context = tls_context(ca_file=str(certs.ca), cert_file=None, key_file=None, verify=True)
            assert await ask(f"https://localhost:{tls_port}", ssl_context=context, server_hostname="kubernetes",
                             proxy=f"socks5h://user:p%40ss@127.0.0.1:{socks.port}") == b"ok"
        assert socks.destinations[0] == (1, "127.0.0.1", port)  # socks5: resolved here
        assert socks.destinations[-1] == (3, "localhost", tls_port)  # socks5h: by the proxy
    finally:
        await socks.close()


@pytest.mark.parametrize("proxy", [
    "ftp://user:s3cret@proxy.example:21", "http://user:s3cret@proxy.example:port", "socks4://user:s3cret@p:1080",
    "http://user:s3cret@[::1:3128", "user:s3cret@proxy.example:3128/x",
])
def test_a_bad_proxy_url_is_a_value_error_without_its_password(proxy: str) -> None:
    with pytest.raises(ValueError, match="proxy URL") as raised:
        HttpClient("https://127.0.0.1:6443", proxy=proxy)
    assert "s3cret" not in str(raised.value) and "xxxxx" in str(raised.value)


async def test_a_byte_after_the_reply_in_the_same_read_drops_the_connection() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokH")  # "H": the start of a reply nobody asked
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await asyncio.sleep(10)

    async with server(handler) as url:
        client = HttpClient(url)
        try:
            assert (await client.request(GET, 5)).body == b"ok"
            assert (await client.request(GET, 5)).body == b"ok"  # on a new connection, not "HHTTP/1.1 ..."
            assert connections == 2
        finally:
            await client.close()
