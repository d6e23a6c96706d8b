#!/usr/bin/env python3
"""A loopback TCP forwarder for fault runs on a real control plane (issue 23): resets 20 % of new
connections (half at once, half after up to 2 s of traffic) and black-holes 5 %, for SECONDS.
Usage: hack/chaos_forward.py LISTEN_PORT TARGET_PORT SECONDS; point a kubeconfig's server at
https://127.0.0.1:LISTEN_PORT (TLS stays end to end).
"""

import asyncio
import random
import socket
import struct
import sys
import time

listen_port, target_port, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
RESET, HOLE = 0.20, 0.05
start = time.monotonic()
TASKS: set[asyncio.Future[None]] = set()  # kept referenced while they run
stats = {"conns": 0, "reset": 0, "hole": 0}


async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    except Exception:
        pass
    finally:
        w.close()


async def handle(reader, writer):
    stats["conns"] += 1
    chaos = time.monotonic() - start < seconds
    x = random.random()
    if chaos and x < RESET:
        stats["reset"] += 1
        # reset after a moment: some after the request went out
        await asyncio.sleep(random.uniform(0, 0.05))
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return
    if chaos and x < RESET + HOLE:
        stats["hole"] += 1
        await asyncio.sleep(120)
        writer.close()
        return
    try:
        r2, w2 = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        writer.close()
        return
    if chaos and random.random() < RESET:
        # a connection that lives a while, then is reset mid-stream
        async def later():
            await asyncio.sleep(random.uniform(0.05, 2))
            for w in (writer, w2):
                sock = w.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                w.transport.abort()
            stats["reset"] += 1

        TASKS.add(asyncio.ensure_future(later()))
    await asyncio.gather(pipe(reader, w2), pipe(r2, writer))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)

    async def report():
        while True:
            await asyncio.sleep(10)
            print(stats, flush=True)

    TASKS.add(asyncio.ensure_future(report()))
    async with server:
        await server.serve_forever()


asyncio.run(main())
