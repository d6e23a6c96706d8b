"""Micro-benchmark of Placer's request path: CPU per API call, the current client against the old one.

An emulated API server (tests/kubeemu) runs in a child process, over plain HTTP and over TLS (a
self-signed certificate, `insecure-skip-tls-verify` as bench/real_bench.py's control plane), so
only the client's CPU is counted (`time.process_time` of this process). Per round and per
transport, each client in turn (alternating which goes first):

- binds: N pods bound (POST pods/binding) and N `Scheduled` events created (POST events.k8s.io),
  CONCURRENCY calls in flight, as Placer's binder and reporter do; CPU per call;
- list: all pods LISTed (pages of 500, as `KubeClient.list_objects`); CPU per pod;
- watch: a pods watch replaying the history (every pod's ADDED and MODIFIED); CPU per event.

"old" is the aiohttp session with the stdlib's json (Placer's request path before issue 19: the
code is kept below, verbatim but for the names); "new" is `placer.controller.transport.client.KubeClient`.
Figures are medians over the rounds, microseconds of CPU.

    python bench/kube_client_bench.py [--rounds 5] [--pods 1000] [--concurrency 32] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from placer.controller.transport.client import (  # noqa: E402
    JSON,
    MAX_RETRY_AFTER,
    RETRY_STATUSES,
    ApiError,
    KubeClient,
    Reply,
)

NAMESPACE = "bench"
TOKEN = "bench-token-0123456789abcdef0123456789abcdef"  # the emulator takes any; sent as a real one is


class OldReply(Reply):
    """A Reply decoded with the stdlib's json, as before."""

    __slots__ = ()

    def json(self) -> Any:
        return json.loads(self.data) if self.data else None


class OldKubeClient(KubeClient):
    """KubeClient's calls over the aiohttp session and json, as before (for comparison only)."""

    def __init__(self, configuration: Any, *, pool_size: int = 128, **kwargs: Any) -> None:
        super().__init__(configuration, pool_size=pool_size, **kwargs)
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if not configuration.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool_size, ssl=context), read_bufsize=2**21)
        self._url = configuration.host.rstrip("/")
        self._proxy = configuration.proxy or None
        self._timeout = aiohttp.ClientTimeout(total=self.timeout)

    async def close(self) -> None:
        await self._session.close()
        await super().close()

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] | None = None,
                      body: Any = None, content_type: str = JSON, retries: int | None = None) -> Reply:
        retries = self.retries if retries is None else retries
        headers = {"Content-Type": content_type, "Accept": JSON}
        data = None if body is None else json.dumps(body)
        url = self._url + path
        attempt = 0
        while True:
            delay: float
            try:
                authorization = await self._auth_header()
                if authorization:
                    headers["Authorization"] = authorization
                async with self._session.request(
                    method, url, params=query or None, data=data, headers=headers, proxy=self._proxy,
                    timeout=self._timeout,
                ) as response:
                    payload = await response.read()
                    status = response.status
                    retry_after = response.headers.get("Retry-After")
            except (aiohttp.ClientError, TimeoutError, OSError) as error:
                if attempt >= retries:
                    raise ApiError(0, f"{method} {path}: {type(error).__name__}: {error}") from None
                delay = self._backoff(attempt)
            else:
                if status < 500:
                    self.last_answer = time.monotonic()
                if status not in RETRY_STATUSES or attempt >= retries:
                    return OldReply(status, payload)
                delay = self._backoff(attempt)
                if status == 429 and retry_after:
                    with contextlib.suppress(ValueError):
                        delay = min(max(float(retry_after), delay), MAX_RETRY_AFTER)
            attempt += 1
            await self._sleep(delay)

    async def watch(self, path: str, query: Sequence[tuple[str, str]], *, connect_timeout: float,
                    read_timeout: float) -> AsyncIterator[dict[str, Any]]:
        headers = {"Accept": JSON}
        authorization = await self._auth_header()
        if authorization:
            headers["Authorization"] = authorization
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        async with self._session.get(
            self._url + path, params=[*query, ("watch", "true")], headers=headers, proxy=self._proxy,
            timeout=timeout,
        ) as response:
            if response.status != 200:
                reply = OldReply(response.status, await response.read())
                raise ApiError(reply.status, f"watch {path}: {reply.message()}")
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)


# ----------------------------------------------------------------- the server (child process)

SERVER = r'''
import asyncio, json, ssl, sys
sys.path.insert(0, sys.argv[1])
from aiohttp import web
from tests.kubeemu import KubeEmulator

async def main(cert, key, ports_file, pods):
    emu = KubeEmulator(record_requests=False, history_size=1_000_000)
    await emu.start()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    site = web.TCPSite(emu._runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    tls_port = site._server.sockets[0].getsockname()[1]
    for index in range(10):
        emu.add_node(f"node-{index}", cpu="1000", memory="4000Gi", pods=100000)
    for index in range(pods):
        emu.add_pod(f"pod-{index:06d}", "bench", cpu="1m", memory="1Mi")
    with open(ports_file, "w") as out:
        json.dump({"http": emu.port, "https": tls_port}, out)
    await asyncio.Event().wait()

asyncio.run(main(*sys.argv[2:5], int(sys.argv[5])))
'''


def kubeconfig(url: str) -> str:
    cluster = f"server: {url}" + (", insecure-skip-tls-verify: true" if url.startswith("https") else "")
    return (f"apiVersion: v1\nkind: Config\nclusters: [{{name: b, cluster: {{{cluster}}}}}]\n"
            f"users: [{{name: b, user: {{token: {TOKEN}}}}}]\n"
            "contexts: [{name: b, context: {cluster: b, user: b, namespace: bench}}]\ncurrent-context: b\n")


def event(index: int, node: str) -> dict[str, Any]:
    name = f"pod-{index:06d}"
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": f"{name}.{random.getrandbits(40):x}", "namespace": NAMESPACE},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "placer.dev/scheduler",
        "reportingInstance": "placer-bench", "action": "Binding", "reason": "Scheduled", "type": "Normal",
        "note": f"Successfully assigned {NAMESPACE}/{name} to {node}",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": NAMESPACE, "name": name},
    }


async def binds(client: KubeClient, indices: list[int], concurrency: int) -> float:
    """CPU seconds for a bind and an event per pod, `concurrency` calls in flight."""
    queue = list(reversed(indices))
    gc.collect()

    async def worker() -> None:
        while queue:
            index = queue.pop()
            node = f"node-{index % 10}"
            outcome = await client.bind(NAMESPACE, f"pod-{index:06d}", "", node)
            if outcome.result.value != "bound":
                raise RuntimeError(f"bind failed: {outcome}")
            reply = await client.create_event(NAMESPACE, event(index, node))
            if not reply.ok:
                raise RuntimeError(f"event failed: {reply.status}")

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.process_time() - started


async def listing(client: KubeClient) -> tuple[float, int]:
    gc.collect()
    started = time.process_time()
    items, _ = await client.list_objects(f"/api/v1/namespaces/{NAMESPACE}/pods")
    return time.process_time() - started, len(items)


async def watching(client: KubeClient, count: int) -> float:
    """CPU seconds to read `count` events of a pods watch replaying the history from the start."""
    gc.collect()
    started = time.process_time()
    seen = 0
    stream = client.watch(f"/api/v1/namespaces/{NAMESPACE}/pods", [("resourceVersion", "1")],
                          connect_timeout=10, read_timeout=30)
    async for _ in stream:
        seen += 1
        if seen >= count:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    return time.process_time() - started


async def bench(args: argparse.Namespace, urls: dict[str, str], workdir: Path) -> dict[str, Any]:
    clients: dict[tuple[str, str], KubeClient] = {}
    for transport, url in urls.items():
        path = workdir / f"{transport}.kubeconfig"
        path.write_text(kubeconfig(url))
        configuration = (await KubeClient.connect(str(path))).configuration
        clients["old", transport] = OldKubeClient(configuration, pool_size=128)
        clients["new", transport] = KubeClient(configuration, pool_size=128)
    per_call: dict[tuple[str, str], list[float]] = {key: [] for key in clients}
    per_pod_list: dict[tuple[str, str], list[float]] = {key: [] for key in clients}
    per_event: dict[tuple[str, str], list[float]] = {key: [] for key in clients}
    next_pod = 0
    for round_ in range(args.rounds):
        order = sorted(clients, key=lambda key: (key[1], key[0] != ("old" if round_ % 2 else "new")))
        for key in order:
            client = clients[key]
            indices = list(range(next_pod, next_pod + args.pods))
            next_pod += args.pods
            await binds(client, indices[: args.concurrency], args.concurrency)  # warm the pool
            cpu = await binds(client, indices[args.concurrency:], args.concurrency)
            per_call[key].append(cpu / (2 * (len(indices) - args.concurrency)) * 1e6)
            cpu, listed = await listing(client)
            per_pod_list[key].append(cpu / listed * 1e6)
            events = min(args.watch_events, 2 * next_pod)
            per_event[key].append(await watching(client, events) / events * 1e6)
    for client in clients.values():
        await client.close()
    result: dict[str, Any] = {}
    for transport in urls:
        row: dict[str, Any] = {}
        for what, series in (("call", per_call), ("listed_pod", per_pod_list), ("watch_event", per_event)):
            old, new = statistics.median(series["old", transport]), statistics.median(series["new", transport])
            row[what] = {"old_us": round(old, 1), "new_us": round(new, 1), "saved": f"{1 - new / old:.0%}"}
        result[transport] = row
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pods", type=int, default=1000, help="pods bound per client and round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watch-events", type=int, default=5000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    total = args.rounds * 4 * args.pods
    with tempfile.TemporaryDirectory(prefix="kube-client-bench-") as tmp:
        workdir = Path(tmp)
        cert, key = workdir / "tls.crt", workdir / "tls.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        ports = workdir / "ports.json"
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT), str(cert), str(key), str(ports),
                                   str(total)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                  stderr=subprocess.DEVNULL)  # (its complaints about watches we hang up on)
        try:
            deadline = time.monotonic() + 120
            while not ports.exists() or not ports.read_text():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the emulator did not start")
                time.sleep(0.1)
            port = json.loads(ports.read_text())
            urls = {"http": f"http://127.0.0.1:{port['http']}", "https": f"https://127.0.0.1:{port['https']}"}
            result = asyncio.run(bench(args, urls, workdir))
        finally:
            server.terminate()
            server.wait(10)
    result["setup"] = {"rounds": args.rounds, "pods": args.pods, "concurrency": args.concurrency}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
