"""Start-up order (`placer.controller.main.operate`): the first resync lists everything a decision
reads before Kopf (and its imports) start; Kopf still starts when the API server will not answer
the resync, and the operator still stops while it waits."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from placer.controller.main import operate

from tests.controller.helpers import Launch, OperatorThread, operator_options, until
from tests.kubeemu import KubeEmulator
from tests.kubeemu.emulator import kubeconfig_text

PROFILE = {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}}


def setup(emu: KubeEmulator) -> None:
    emu.add_node("n1", cpu="4", memory="8Gi")
    emu.create("sp", PROFILE)
    emu.add_pod("web", scheduler_name="placer", cpu="100m")


async def test_kopf_starts_once_the_first_resync_is_done(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    setup(emu)
    emu.inject("GET", r"^/api/v1/pods$", query="limit=", delay=0.5, count=1)  # a slow pods LIST
    operator = await launch()
    await until(lambda: emu.get("pods", "web")["spec"].get("nodeName") == "n1")

    def kopf_watches() -> list[float]:  # Kopf's watch of the profiles (the resync LISTs them, unwatched)
        return [r.started for r in emu.requests_matching("GET", r"/schedulerprofiles$") if "watch=true" in r.query]

    await until(kopf_watches)
    listing = emu.requests_matching("GET", r"^/api/v1/pods$")
    listed = min(r.started + (r.duration or 0.0) for r in listing if "limit=" in r.query)
    assert min(kopf_watches()) >= listed
    assert operator.state is not None and operator.state.kopf_ready


async def test_kopf_starts_even_if_the_first_resync_cannot_finish(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup(emu)
    failing = emu.inject("GET", r"^/api/v1/nodes$", query="limit=", status=500, count=None)
    started = time.monotonic()
    operator = await launch(kopf_start_delay=0.5, initial_backoff=0.1, max_backoff=0.2)
    assert operator.state is not None and operator.state.resync.resyncs_done == 0
    assert time.monotonic() - started < 5.0
    await until(lambda: operator.state is not None and operator.state.kopf_ready)
    emu.faults.remove(failing)  # the API server answers again: the resync ends, scheduling starts
    await until(lambda: emu.get("pods", "web")["spec"].get("nodeName") == "n1", timeout=10)


async def test_the_operator_stops_while_it_waits_for_the_first_resync(
    kube_emulator: KubeEmulator, tmp_path: Path
) -> None:
    emu = kube_emulator
    setup(emu)
    emu.inject("GET", r"^/api/v1/nodes$", query="limit=", status=500, count=None)
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
    operator = OperatorThread(operator_options(kubeconfig, kopf_start_delay=60.0, initial_backoff=0.1,
                                               max_backoff=0.2))
    operator.thread.start()
    await asyncio.sleep(1.0)
    assert not operator.ready.is_set()  # Kopf waits for the resync, which fails
    started = time.monotonic()
    await operator.stop()
    assert time.monotonic() - started < 5.0
    assert not [r for r in emu.requests_matching("GET", r"/schedulerprofiles$") if "watch=true" in r.query]


class PausedCollector(OperatorThread):
    """An operator started as `placer run` starts it: the garbage collector off until the first resync."""

    def _main(self) -> None:
        async def runner() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()  # type: ignore[assignment]
            await operate(self.options, stop_flag=self.stop_flag, ready_flag=self.ready, on_state=self._keep,
                          resume_gc=True)

        try:
            asyncio.run(runner())
        except BaseException as error:
            self.error = error


async def test_the_collector_paused_for_the_start_up_resumes_after_the_first_resync(
    kube_emulator: KubeEmulator, tmp_path: Path
) -> None:
    emu = kube_emulator
    setup(emu)
    emu.inject("GET", r"^/api/v1/pods$", query="limit=", delay=0.5, count=1)
    operator = PausedCollector(operator_options(emu.write_kubeconfig(tmp_path / "kubeconfig")))
    gc.disable()
    try:
        operator.thread.start()
        await asyncio.sleep(0.3)
        assert not gc.isenabled()  # the resync is still listing
        await asyncio.to_thread(operator.ready.wait, 10)
        assert gc.isenabled() and gc.get_freeze_count() > 0
        await until(lambda: emu.get("pods", "web")["spec"].get("nodeName") == "n1")
        await operator.stop()
    finally:
        gc.unfreeze()
        gc.enable()


async def test_a_stop_during_kopfs_api_discovery_is_not_held_up(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """Kopf starts after the first resync, so a stop soon after start-up may find its API discovery
    in flight: those requests are cancelled by the cleanup handler instead of held for 5 s."""
    emu = kube_emulator
    setup(emu)
    emu.inject("GET", r"^/apis/[^/]+/[^/]+$", delay=1.0, count=None)  # each group's discovery, slow
    operator = await launch()
    started = time.monotonic()
    await operator.stop()
    assert time.monotonic() - started < 3.0


def test_sigterm_before_kopf_started_stops_gracefully(tmp_path: Path) -> None:
    """Kopf installs its signal handlers only when it starts; until then (the first resync, here
    never done: nothing listens) SIGTERM still stops `placer run` gracefully, exit code 0."""
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text("http://127.0.0.1:1"))
    log = tmp_path / "placer.log"
    env = {**os.environ, "KUBECONFIG": str(config), "POD_NAMESPACE": "placer-system", "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "placer.cli", "run", "--no-leader-elect",
                                    "--metrics-port", "0"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while "resync failed" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            assert process.wait(10) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
