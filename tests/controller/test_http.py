"""placer.controller.transport.http against scripted servers: framing, keep-alive, deadlines, the pool, streams."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from placer.controller.transport import stream as http_stream
from placer.controller.transport.http import HttpClient, HttpError
from placer.controller.transport.proxy_env import proxy_for
from placer.controller.transport.tls import ascii_hostname

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A TCP server on 127.0.0.1 running `handler` per connection; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self.closed = asyncio.Event()  # a connection ended (the client hung up or we did)
        self.server: asyncio.AbstractServer | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            await self.handler(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # (cancelled: the test is over)
        finally:
            self.open -= 1
            self.closed.set()
            writer.close()

    async def read(self, reader: asyncio.StreamReader) -> bytes:
        """One request (head and Content-Length body), recorded."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        request = head + (await reader.readexactly(length) if length else b"")
        self.requests.append(request)
        return request

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"


@contextlib.asynccontextmanager
async def serving(handler: Callable[[Server, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
                  **client_args: object) -> AsyncIterator[tuple[Server, HttpClient]]:
    server = Server(lambda reader, writer: handler(server, reader, writer))
    server.server = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    client = HttpClient(server.url, **client_args)  # type: ignore[arg-type]
    try:
        yield server, client
    finally:
        await client.close()
        server.server.close()


def get(client: HttpClient, path: str = "/x") -> bytes:
    return client.encode("GET", path, "Accept: application/json\r\n", None)


def reply(body: bytes = b"hello", status: str = "200 OK", headers: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def answer_each(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        await server.read(reader)
        writer.write(reply())


async def test_a_reply_with_a_length_and_the_connection_kept() -> None:
    async with serving(answer_each) as (server, client):
        for _ in range(3):
            response = await client.request(get(client), 5)
            assert (response.status, response.body, response.retry_after) == (200, b"hello", None)
        assert server.connections == 1


async def test_the_request_is_one_write_of_line_headers_and_body() -> None:
    async with serving(answer_each) as (server, client):
        data = client.encode("POST", "/api/v1/x?a=b", "Content-Type: application/json\r\n", b'{"k":1}')
        await client.request(data, 5)
        port = client.port
        assert server.requests == [
            b"POST /api/v1/x?a=b HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: placer\r\n"
            b'Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{"k":1}' % port]
        assert client.encode("DELETE", "/y", "", None).endswith(b"User-Agent: placer\r\n\r\n")
        assert b"Content-Length: 0\r\n" in client.encode("POST", "/y", "", None)


async def test_a_chunked_reply_arriving_byte_by_byte() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read(reader)
            data = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: 1\r\n\r\n")
            for index in range(len(data)):
                writer.write(data[index:index + 1])
                await writer.drain()
                await asyncio.sleep(0)

    async with serving(handler) as (server, client):
        assert (await client.request(get(client), 5)).body == b"hello world"
        assert (await client.request(get(client), 5)).body == b"hello world"
        assert server.connections == 1


async def test_a_reply_read_until_close_and_connection_close() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await server.read(reader)
        if b"/until-close" in request:
            writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of ")
            await writer.drain()
            writer.write(b"it")
        else:
            writer.write(reply(headers="Connection: close\r\n"))
            await asyncio.sleep(10)  # the client must not wait for this to end

    async with serving(handler) as (server, client):
        assert (await client.request(get(client, "/until-close"), 5)).body == b"all of it"
        assert (await client.request(get(client), 5)).body == b"hello"
        assert (await client.request(get(client), 5)).body == b"hello"
        assert server.connections == 3


async def test_informational_replies_compression_http10_and_retry_after() -> None:
    packed = gzip.compress(b'{"kind":"Status"}')

    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await server.read(reader)
            if b"/gzip" in request:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(packed, headers="Content-Encoding: gzip\r\n"))
            elif b"/old" in request:
                writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await reader.read()
            else:
                writer.write(reply(b"", "429 Too Many Requests", "Retry-After: 3\r\n"))

    async with serving(handler) as (server, client):
        assert (await client.request(get(client, "/gzip"), 5)).body == b'{"kind":"Status"}'
        assert (await client.request(get(client, "/old"), 5)).body == b"ok"
        throttled = await client.request(get(client, "/busy"), 5)
        assert (throttled.status, throttled.body, throttled.retry_after) == (429, b"", "3")
        assert server.connections == 2  # kept after the gzip reply, not after HTTP/1.0's


@pytest.mark.parametrize("answer", [
    b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",  # the body cut short
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a bad chunk size
    b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx",  # an unknown coding
])
async def test_a_broken_reply_is_an_os_error(answer: bytes) -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        writer.write(answer)

    async with serving(handler) as (_, client):
        with pytest.raises(HttpError):
            await client.request(get(client), 5)


async def test_no_reply_in_time_is_a_timeout_and_closes_the_connection() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        await reader.read()  # until the client hangs up

    async with serving(handler) as (server, client):
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await client.request(get(client), 0.2)
        assert 0.15 < time.monotonic() - started < 2
        await asyncio.wait_for(server.closed.wait(), 2)


async def test_the_pool_holds_at_most_its_limit_and_queues_the_rest() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read(reader)
            await asyncio.sleep(0.02)
            writer.write(reply())

    async with serving(handler, limit=2) as (server, client):
        replies = await asyncio.gather(*(client.request(get(client), 5) for _ in range(8)))
        assert [r.body for r in replies] == [b"hello"] * 8
        assert server.most_open <= 2 and server.connections == 2


async def test_a_cancelled_request_gives_its_slot_back() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await server.read(reader)
        if b"/slow" in request:
            await reader.read()
            return
        writer.write(reply())
        await reader.read()

    async with serving(handler, limit=1) as (server, client):
        slow = asyncio.create_task(client.request(get(client, "/slow"), 30))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(client.request(get(client), 5))  # queued behind it
        await asyncio.sleep(0.05)
        slow.cancel()
        assert (await asyncio.wait_for(waiting, 5)).body == b"hello"
        assert server.connections == 2


async def test_bytes_nobody_asked_for_drop_the_connection() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        writer.write(reply())
        await asyncio.sleep(0.05)
        writer.write(b"junk")
        await reader.read()

    async with serving(handler) as (server, client):
        await client.request(get(client), 5)
        await asyncio.wait_for(server.closed.wait(), 2)  # we hung up on the junk
        assert (await client.request(get(client), 5)).body == b"hello"
        assert server.connections == 2


async def test_closing_the_client_fails_what_is_in_flight() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        await reader.read()

    async with serving(handler) as (_, client):
        pending = asyncio.create_task(client.request(get(client), 30))
        await asyncio.sleep(0.05)
        await client.close()
        with pytest.raises(HttpError):
            await pending
        with pytest.raises(HttpError):
            await client.request(get(client), 1)


# ----------------------------------------------------------------- streams


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_a_stream_comes_as_lines_whatever_the_chunks() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await server.read(reader)
            if b"/watch" not in request:
                writer.write(reply())
                continue
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for piece in (b'{"a":1}\n{"b"', b':2}\n\n', b'{"c":3}\n{"d":', b"4}"):
                writer.write(chunk(piece))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(b"0\r\n\r\n")

    async with serving(handler) as (server, client):
        stream = await client.stream(get(client, "/watch"), connect_timeout=5, read_timeout=5)
        assert stream.status == 200
        lines = []
        while (batch := await stream.batch()) is not None:
            lines += batch
        assert [line for line in lines if line] == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']
        stream.close()
        assert (await client.request(get(client), 5)).body == b"hello"
        assert server.connections == 1  # the stream ended cleanly: its connection is reused


async def test_a_refused_stream_hands_its_body_over() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        writer.write(reply(b'{"kind":"Status","code":410}\n{}', "410 Gone"))
        await reader.read()

    async with serving(handler) as (_, client):
        stream = await client.stream(get(client), connect_timeout=5, read_timeout=5)
        assert stream.status == 410
        assert await stream.read() == b'{"kind":"Status","code":410}\n{}'


async def test_a_silent_stream_times_out() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"{}\n"))
        await reader.read()

    async with serving(handler) as (server, client):
        stream = await client.stream(get(client), connect_timeout=5, read_timeout=0.3)
        assert await stream.batch() == [b"{}"]
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await stream.batch()
        assert 0.2 < time.monotonic() - started < 2
        await asyncio.wait_for(server.closed.wait(), 2)


async def test_a_stream_not_read_pauses_the_socket_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_stream, "HIGH_WATER", 1000)
    line = b'{"type":"MODIFIED","object":{}}\n'
    paused_seen = asyncio.Event()

    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(2000):
            writer.write(chunk(line))
        await writer.drain()
        # the stream's end only once the test saw the pause: an end read in the same receive as the
        # lines would finish the stream (and hand its connection back) before it could be looked at
        await paused_seen.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with serving(handler) as (_, client):
        stream = await client.stream(get(client), connect_timeout=5, read_timeout=0.5)
        conn = stream._conn
        assert conn is not None
        for _ in range(100):
            if conn.paused:
                break
            await asyncio.sleep(0.01)
        assert conn.paused
        await asyncio.sleep(0.7)  # longer than read_timeout: a stream we paused is not "silent"
        paused_seen.set()
        lines = []
        while (batch := await stream.batch()) is not None:
            lines += batch
        assert lines == [line[:-1]] * 2000 and not conn.paused


async def test_closing_a_stream_midway_hangs_up() -> None:
    async def handler(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"{}\n"))
        await reader.read()

    async with serving(handler) as (server, client):
        stream = await client.stream(get(client), connect_timeout=5, read_timeout=5)
        assert await stream.batch() == [b"{}"]
        stream.close()
        await asyncio.wait_for(server.closed.wait(), 2)


# ----------------------------------------------------------------- configuration


def test_bad_urls_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="only http:// and https://"):
        HttpClient("unix:///var/run/k8s.sock")
    with pytest.raises(ValueError, match=r"unsupported proxy URL 'socks4://127\.0\.0\.1:1080'"):
        HttpClient("https://127.0.0.1:6443", proxy="socks4://127.0.0.1:1080")


def test_the_proxy_from_the_environment() -> None:
    """What the transport is given (`proxy_env.proxy_for`, Go's rules; its table is test_proxy_env.py)."""
    assert proxy_for("https://api.example:6443", {}) is None
    environ = {"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "internal.example,10.0.0.1"}
    assert proxy_for("https://api.example:6443", environ) == "http://proxy.example:3128"
    assert proxy_for("http://api.example:8080", environ) is None  # HTTP_PROXY is not set
    assert proxy_for("https://kube.internal.example:6443", environ) is None
    assert proxy_for("https://10.0.0.1:6443", environ) is None


def test_absolute_form_and_credentials_for_an_http_server_behind_a_proxy() -> None:
    client = HttpClient("http://api.example:8080/prefix", proxy="http://user:p%40ss@proxy.example:3128")
    data = client.encode("GET", "/version", "", None)
    assert data.startswith(b"GET http://api.example:8080/version HTTP/1.1\r\nHost: api.example:8080\r\n")
    assert b"Proxy-Authorization: Basic dXNlcjpwQHNz\r\n" in data  # user:p@ss
    tunnelled = HttpClient("https://api.example", proxy="http://user:pw@proxy.example:3128")
    assert tunnelled.encode("GET", "/version", "", None).startswith(b"GET /version HTTP/1.1\r\nHost: api.example\r\n")
    assert b"Proxy-Authorization" not in tunnelled.encode("GET", "/version", "", None)  # on the CONNECT only


def test_an_ascii_server_name_skips_the_idna_codec_and_names_the_same_server() -> None:
    """`ascii_hostname`: what `ssl` is given for SNI and the name check is the name IDNA gives, for
    ASCII names without importing the codec; other names still go through IDNA."""
    context = ssl.create_default_context()
    for name in ("kubernetes.default.svc", "Kube-API.Example.COM", "127.0.0.1", "::1"):
        given = ascii_hostname(name)
        assert isinstance(given, bytes)
        via_bytes = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname=given)
        via_idna = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname=name)
        assert via_bytes.server_hostname == via_idna.server_hostname
    assert ascii_hostname("bücher.example") == "bücher.example" and ascii_hostname(None) is None
    code = ("import sys, ssl; from placer.controller.transport.tls import ascii_hostname; "
            "ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), "
            "server_hostname=ascii_hostname('kubernetes.default.svc')); print('encodings.idna' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
