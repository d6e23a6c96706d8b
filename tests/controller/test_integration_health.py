"""/healthz tells the truth: healthy through an API outage shorter than its window, unhealthy once
the outage outlasts it, healthy again when the server is back."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from tests.controller.helpers import Launch, bound_node, until, watching
from tests.kubeemu import KubeEmulator

WINDOW = 2.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as client:
        yield client


class Probe:
    """Samples GET /healthz every 0.1 s in the background: (seconds since start, status, text)."""

    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/healthz"
        self.session = session
        self.samples: list[tuple[float, int, str]] = []
        self._task: asyncio.Task[None] | None = None
        self.started = time.monotonic()

    async def get(self) -> tuple[int, str]:
        async with self.session.get(self.url) as response:
            return response.status, await response.text()

    async def _run(self) -> None:
        while True:
            status, text = await self.get()
            self.samples.append((time.monotonic() - self.started, status, text.strip()))
            await asyncio.sleep(0.1)

    def start(self) -> None:
        self.started = time.monotonic()
        self.samples.clear()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> list[tuple[float, int, str]]:
        assert self._task is not None
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task
        return list(self.samples)


async def started(kube_emulator: KubeEmulator, launch: Launch, session: aiohttp.ClientSession) -> Probe:
    emu = kube_emulator
    emu.add_node("n0")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.add_pod("p0", scheduler_name="placer")
    port = free_port()
    await launch(metrics_port=port, metrics_host="127.0.0.1", health_window=WINDOW, health_ping_interval=0.2)
    probe = Probe(session, port)
    await until(lambda: bound_node(emu, "p0") and watching(emu))
    for _ in range(50):
        if (await probe.get())[0] == 200:
            break
        await asyncio.sleep(0.1)
    assert await probe.get() == (200, "ok\n")
    return probe


async def test_healthz_follows_the_api_server_with_its_window(
    kube_emulator: KubeEmulator, launch: Launch, session: aiohttp.ClientSession
) -> None:
    emu = kube_emulator
    probe = await started(emu, launch, session)

    # a blip well within the window: healthy throughout
    probe.start()
    async with emu.unreachable():
        await asyncio.sleep(WINDOW / 5)
    await asyncio.sleep(0.5)
    samples = await probe.stop()
    assert samples and all(status == 200 for _, status, _ in samples), samples

    # a longer outage: unhealthy once it outlasts the window (not before), healthy soon after it ends
    probe.start()
    async with emu.unreachable():
        await asyncio.sleep(WINDOW + 1.0)
        down_for = time.monotonic() - probe.started
    await until(lambda: probe.samples and probe.samples[-1][1] == 200, timeout=5)
    back_after = time.monotonic() - probe.started - down_for
    samples = await probe.stop()
    unhealthy = [(at, text) for at, status, text in samples if status != 200]
    assert unhealthy, samples
    first_at, reason = unhealthy[0]
    # the last answer came at most ~2 ping intervals (0.4 s) before the outage began
    assert WINDOW - 0.5 <= first_at <= WINDOW + 0.8, samples
    assert reason.startswith("API server not answering")
    assert all(at < down_for + 0.5 for at, _ in unhealthy)
    assert back_after < 1.5  # the pinger hears the server within its interval
