"""`placer run` as real processes against the emulator: SIGTERM of the leader while binds are in
flight. It stops binding, lets the binds in flight finish, releases the Lease and exits promptly;
the follower takes over at once (not after the 15 s lease), and every pod ends up bound exactly
once. (SIGKILL, i.e. a takeover after the Lease expires, is tested in-process with a short lease
in test_integration_leader.py and test_integration_crash.py: `placer run` has the real 15 s.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.controller.helpers import assert_sound, bound_node, until
from tests.kubeemu import KubeEmulator

TOKEN = "s3cr3t-placer-test-token"  # the emulator ignores it; it must never reach a log


def kubeconfig(emu: KubeEmulator, path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: emu\n  cluster:\n    server: {emu.url}\n"
        f"users:\n- name: emu\n  user:\n    token: {TOKEN}\n"
        "contexts:\n- name: emu\n  context:\n    cluster: emu\n    user: emu\n"
        "current-context: emu\n"
    )
    return path


class Placer:
    """`python -m placer.cli run` in a subprocess; its stderr (the logs) is collected."""

    def __init__(self, name: str, config: Path) -> None:
        self.name = name
        self.config = config
        self.process: asyncio.subprocess.Process | None = None
        self.logs: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> Placer:
        env = {**os.environ, "KUBECONFIG": str(self.config), "POD_NAME": self.name,
               "POD_NAMESPACE": "placer-system", "PYTHONUNBUFFERED": "1"}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "placer.cli", "run", "--metrics-port", "0", "--verbose",
            env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        async for line in self.process.stderr:
            self.logs.append(line.decode("utf-8", "replace"))

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.logs)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(sig)
        try:
            async with asyncio.timeout(timeout):
                code = await self.process.wait()
        except TimeoutError:
            self.process.kill()
            code = await self.process.wait()
        if self._reader is not None:
            await self._reader
        return code


@pytest.fixture
async def placers(kube_emulator: KubeEmulator, tmp_path: Path) -> AsyncIterator[list[Placer]]:
    started: list[Placer] = []
    yield started
    for placer in started:
        await placer.stop(signal.SIGKILL)


def holder(emu: KubeEmulator) -> str | None:
    lease = emu.get("coordination.k8s.io/v1/leases", "placer", "placer-system")
    return None if lease is None else str(lease["spec"].get("holderIdentity") or "")


def open_pod_watches(emu: KubeEmulator) -> int:
    """Open watches of the active pods (each operator also watches the failed ones: not counted)."""
    return sum(1 for r in emu.requests if r.path == "/api/v1/pods" and r.is_watch and r.duration is None
               and "phase%3DFailed" not in r.query and "phase=Failed" not in r.query)


async def test_sigterm_hands_over_at_once_with_binds_in_flight(
    kube_emulator: KubeEmulator, tmp_path: Path, placers: list[Placer]
) -> None:
    emu = kube_emulator
    for index in range(3):
        emu.add_node(f"n{index}", cpu="10")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    config = kubeconfig(emu, tmp_path / "kubeconfig")
    leader = await Placer("placer-a", config).start()
    placers.append(leader)
    await until(lambda: holder(emu) == "placer-a", timeout=20)
    follower = await Placer("placer-b", config).start()
    placers.append(follower)
    await until(lambda: open_pod_watches(emu) >= 2 and follower.logged("starting placer"), timeout=20)

    emu.inject("POST", r"/binding$", delay=0.5, count=None)  # binds take a while to land
    names = [f"p-{index:03d}" for index in range(100)]  # 32 binds in flight at a time, in waves
    for name in names:
        emu.add_pod(name, scheduler_name="placer", cpu="250m")
    await until(lambda: len(emu.bindings) >= 5, timeout=10)
    assert len(emu.bindings) < len(names)  # binds are in flight and more are queued

    stopped = time.monotonic()
    code = await leader.stop(signal.SIGTERM)
    took = time.monotonic() - stopped
    assert code == 0, "".join(leader.logs[-20:])
    assert took < 5.0, f"exited after {took:.1f}s"
    assert holder(emu) in ("", "placer-b")  # released (or already taken over)
    lease = emu.get("coordination.k8s.io/v1/leases", "placer", "placer-system")
    assert lease is not None and (lease["spec"]["holderIdentity"] == "placer-b" or
                                  lease["spec"]["leaseDurationSeconds"] == 1)
    assert leader.logged("released the lease")
    await until(lambda: holder(emu) == "placer-b", timeout=4)  # at its next retry, not after 15 s
    handed_over = time.monotonic() - stopped

    await until(lambda: all(bound_node(emu, name) for name in names), timeout=20)
    assert_sound(emu, names)
    await until(lambda: len([e for e in emu.list("events.k8s.io/v1/events") if e["reason"] == "Scheduled"]) == 100)
    scheduled_by = {e["regarding"]["name"]: e["reportingInstance"] for e in emu.list("events.k8s.io/v1/events")
                    if e["reason"] == "Scheduled"}
    assert set(scheduled_by.values()) == {"placer-placer-a", "placer-placer-b"}  # both bound some
    assert handed_over < 4.0

    assert await follower.stop(signal.SIGTERM) == 0
    logs = "".join(leader.logs + follower.logs)
    assert TOKEN not in logs
    assert 'level=debug logger=placer.loop msg="pod default/p-' in logs  # --verbose did log a lot
