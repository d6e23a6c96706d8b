"""CPU per reply of the transport's parser (docs/performance.md, issue 23), medians of timeit runs.

    .venv/bin/python hack/bench_http_parse.py [module]      # default placer.controller.transport.http

Feeds one connection (no socket: a stub transport) the two replies Placer reads most: a 426-byte
reply to a binding POST (201 and a Status) and a 359-byte watch chunk (one event line), each in one
read as they come off loopback; and a request/response round trip over loopback (plain TCP) to a
server answering the bind reply. Pass another module path (e.g. an older http.py put on
PYTHONPATH) to compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import statistics
import sys
import time
import timeit

_BODY = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201'
HEAD = (b"HTTP/1.1 201 Created\r\nAudit-Id: 0d0bd7c2-7b0a-4a6d-9b8e-2f4b0b3f6d5e\r\n"
        b"Cache-Control: no-cache, private\r\nContent-Type: application/json\r\n"
        b"X-Kubernetes-Pf-Flowschema-Uid: 2f4b0b3f-6d5e-4a6d-9b8e-0d0bd7c27b0a\r\n"
        b"X-Kubernetes-Pf-Prioritylevel-Uid: 9b8e2f4b-0b3f-6d5e-4a6d-0d0bd7c27b0a\r\n"
        b"Date: Sat, 28 Nov 2026 02:00:00 GMT\r\nContent-Length: %d\r\n\r\n")
BODY = _BODY + b" " * (426 - len(HEAD % 99) - len(_BODY) - 1) + b"}"  # (JSON's whitespace: 426 bytes in all)
BIND = HEAD % len(BODY) + BODY
_EVENT = (b'{"type":"MODIFIED","object":{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":'
          b'{"name":"placer","namespace":"kube-system","uid":"4a6d9b8e-2f4b-0b3f-6d5e-0d0bd7c27b0a",'
          b'"resourceVersion":"123456"},"spec":{"holderIdentity":'
          b'"placer-0","leaseDurationSeconds":15,"renewTime":"2026-11-28T02:00:00.000000Z"')
EVENT = _EVENT + b" " * (352 - 3 - len(_EVENT)) + b"}}\n"  # 352 bytes, 359 with the chunk's framing
WATCH = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)


class _Transport:
    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _median(run: object, number: int) -> float:
    # CPU time of this process (not wall time: the machine is shared), median of 11 runs
    runs = timeit.repeat(run, number=number, repeat=11, timer=time.process_time)  # type: ignore[arg-type]
    return statistics.median(runs) / number * 1e6


async def _measure(http: object) -> None:
    loop = asyncio.get_running_loop()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(BIND)

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    client = http.HttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")  # type: ignore[attr-defined]
    request = client.encode("POST", "/api/v1/namespaces/default/pods/p/binding", "", None)
    await client.request(request, 5)
    rounds = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(5000):
            await client.request(request, 5)
        rounds.append((time.process_time() - started) / 5000 * 1e6)
    print(f"loopback round trip, CPU of client and server (one process): {statistics.median(rounds):.1f} us")
    await client.close()
    server.close()

    client = http.HttpClient("http://127.0.0.1:1")  # type: ignore[attr-defined]
    conn = http._Connection(client, loop)  # type: ignore[attr-defined]
    conn.connection_made(_Transport())
    client._count += 1
    client._connections.add(conn)
    assert len(BIND) == 426 and len(WATCH) == 359

    def bind() -> None:
        waiter = loop.create_future()
        conn.start(waiter, None, 0.0, 10.0)
        conn.data_received(BIND)
        client._idle.pop()
    bind()
    print(f"bind reply, 426 B: {_median(bind, 20000):.2f} us")

    stream = http.Stream(conn, loop)  # type: ignore[attr-defined]
    conn.start(None, stream, 0.0, 10.0, 10.0)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")

    def watch() -> None:
        conn.data_received(WATCH)
        stream._lines.clear()
        stream._buffered = 0
    watch()
    assert stream._error is None
    print(f"watch chunk, 359 B: {_median(watch, 20000):.2f} us")
    await client.close()


if __name__ == "__main__":
    module = sys.argv[1] if len(sys.argv) > 1 else "placer.controller.transport.http"
    asyncio.run(_measure(importlib.import_module(module)))
