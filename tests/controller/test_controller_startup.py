"""Start-up order (`placer.controller.main.operate`): the first resync lists everything a decision
reads before Kopf (and its imports) start; Kopf still starts when the API server will not answer
the resync, and the operator still stops while it waits."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from placer.controller.main import operate
from placer.controller.options import Options
from placer.controller.resync import FILE_CHUNK
from placer.controller.transport.client import ApiError
from placer.controller.transport.listing import PENDING_FIRST_PAGE, PROFILES_PATH, ResyncLists
from placer.engine.kinds import KINDS

from tests.controller.helpers import FakeKube, Launch, OperatorThread, node, operator_options, pod, unit_state, until
from tests.kubeemu import KubeEmulator
from tests.kubeemu.emulator import kubeconfig_text

PROFILE = {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}}
# the resync's two pod LISTs, as their raw (percent-encoded) queries say
ASSIGNED = r"spec\.nodeName(!|%21)%3D"
PENDING = r"spec\.nodeName%3D(&|$)"
EAGER = Options().pods_list_page  # the pending pods filed before the first decisions


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


def _answered(emu: KubeEmulator, path: str, query: str) -> list[float]:
    """When each request of `path` whose raw query matches `query` was answered."""
    return [r.started + (r.duration or 0.0) for r in emu.requests_matching("GET", path)
            if re.search(query, r.query) and r.duration is not None]


def _binds(emu: KubeEmulator) -> list[float]:
    return [r.started for r in emu.requests_matching("POST", r"/binding$")]


async def test_no_decision_before_every_assigned_pod_is_filed(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The assigned pods' LIST (slow here) is waited for: the node's CPU they hold is not offered."""
    emu = kube_emulator
    emu.add_node("n1", cpu="2", memory="8Gi")
    emu.add_node("n2", cpu="4", memory="8Gi")
    emu.create("sp", PROFILE)
    emu.add_pod("running", node_name="n2", cpu="3500m")  # most of n2 (the emptier node otherwise)
    emu.add_pod("web", scheduler_name="placer", cpu="1")
    emu.inject("GET", r"^/api/v1/pods$", query=ASSIGNED, delay=0.8, count=1)
    await launch()
    await until(lambda: emu.get("pods", "web")["spec"].get("nodeName"))
    assert emu.get("pods", "web")["spec"]["nodeName"] == "n1"
    assert min(_binds(emu)) >= max(_answered(emu, r"^/api/v1/pods$", ASSIGNED))


async def test_scheduling_starts_while_pending_pods_are_still_listed(kube_emulator: KubeEmulator,
                                                                     launch: Launch) -> None:
    """Nodes and assigned pods known, the first pending pods are decided while the rest of the
    pending LIST (its second page slow here) is on its way; every pod is bound in the end."""
    emu = kube_emulator
    emu.add_node("n1", cpu="8", memory="16Gi")
    emu.create("sp", PROFILE)
    for index in range(6):
        emu.add_pod(f"web-{index}", scheduler_name="placer", cpu="100m")
    emu.inject("GET", r"^/api/v1/pods$", query=PENDING + ".*continue=|continue=.*" + PENDING, delay=1.5, count=1)
    await launch(pods_list_page=2)
    await until(lambda: all(emu.get("pods", f"web-{i}")["spec"].get("nodeName") for i in range(6)), timeout=10)
    slow_page = max(_answered(emu, r"^/api/v1/pods$", "continue="))
    assert min(_binds(emu)) < slow_page - 1.0


def _recorded_lists() -> tuple[FakeKube, list[tuple[str, dict[str, str]]]]:
    """A fake API with a node, an assigned and a pending pod, and the LISTs asked of it (path, query)."""
    kube = FakeKube()
    kube.lists["/api/v1/nodes"] = [node("n1")]
    kube.lists["/api/v1/pods"] = [pod("a", node_name="n1", cpu="1", rv=10), pod("b", rv=11)]
    asked: list[tuple[str, dict[str, str]]] = []
    list_pages = kube.list_pages

    def recording(path: str, query: Any = (), *, limit: int = 500, first: int | None = None) -> Any:
        asked.append((path, dict(query)))
        return list_pages(path, query, limit=limit, first=first)

    kube.list_pages = recording  # type: ignore[method-assign]
    return kube, asked


async def test_the_first_resync_reads_the_watch_cache_and_later_ones_read_consistently() -> None:
    """`resourceVersion=0` (the API server's watch cache, as client-go's first LIST) for a cold
    start's LISTs of nodes and assigned pods only (the pending pods come in consistent pages); a
    new term or a relist must see the latest state."""
    kube, asked = _recorded_lists()
    state = unit_state(kube)
    await state.resync.run()
    first = list(asked)
    assert sorted(path for path, _ in first) == ["/api/v1/nodes", "/api/v1/pods", "/api/v1/pods"]
    cached = [query.get("fieldSelector", "nodes") for _, query in first if query.get("resourceVersion") == "0"]
    assert sorted(cached) == ["nodes", "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="]
    assert "default/a" in state.cluster.pods and state.cluster.node_count == 1
    asked.clear()
    await state.resync.run()
    assert len(asked) == 3 and all("resourceVersion" not in query for _, query in asked)


async def test_the_first_resync_takes_over_the_lists_asked_for_before_the_engine_was_imported() -> None:
    """`operate` asks for the nodes and the pending pods before it imports the engine; the first
    resync files those answers instead of asking again, and lists afresh when they are stale (a
    standby replica that becomes leader long after its start)."""
    kube, asked = _recorded_lists()
    profile = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p", "uid": "u"},
               "spec": {"schedulerName": "placer"}}
    kube.lists[PROFILES_PATH] = [profile]
    state = unit_state(kube)
    lists = ResyncLists.ask(kube, (), 500, cached=True)
    others: list[tuple[str, Any]] = []
    list_objects = kube.list_objects

    async def recording_objects(path: str, query: Any = ()) -> Any:
        others.append((path, dict(query)))
        return await list_objects(path, query)

    kube.list_objects = recording_objects  # type: ignore[method-assign]
    lists.ask_others([PROFILES_PATH, *(kind.path() for kind in KINDS)])
    state.resync.first_lists = lists
    await lists.snapshots  # the pending pods' first page is here: the assigned pods are asked for too
    early = list(asked)
    small = [(path, query) for path, query in others if path != "/api/v1/pods"]  # not the pods' pages
    assert [(path, query.get("fieldSelector")) for path, query in early] == [
        ("/api/v1/nodes", None), ("/api/v1/pods", "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName="),
        ("/api/v1/pods", "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!=")]
    assert len(small) == 1 + len(KINDS) and all(query == {"resourceVersion": "0"} for _, query in small)
    await state.resync.run()
    assert asked[len(early):] == []  # nothing asked again, not even the assigned pods
    assert [path for path, _ in others if path != "/api/v1/pods"][len(small):] == []  # none asked again
    assert state.cluster.node_count == 1 and "default/a" in state.cluster.pods
    assert state.profiles.active("placer") is not None
    assert state.resync.first_lists is None and "default/b" in state.cache.pending_keys()

    stale_state = unit_state(kube)
    stale = ResyncLists.ask(kube, (), 500, cached=True)
    stale.asked_at -= ResyncLists.MAX_AGE + 1
    stale_state.resync.first_lists = stale
    asked.clear()
    await stale_state.resync.run()
    assert sorted(path for path, _ in asked) == ["/api/v1/nodes", "/api/v1/pods", "/api/v1/pods"]  # afresh
    assert stale_state.cluster.node_count == 1


async def test_the_assigned_pods_are_asked_for_once_the_pending_snapshot_is_taken() -> None:
    """The assigned pods' LIST goes out as soon as the pending pods' first page is answered (while
    the engine imports), never before it: a pod bound between the two LISTs must be in the assigned
    one. A failed pending page fails the snapshot (the resync's to see) and asks for nothing more."""
    kube, asked = _recorded_lists()
    answered = asyncio.Event()
    list_objects = kube.list_objects

    async def held_pending(path: str, query: Any = ()) -> Any:
        if dict(query).get("fieldSelector", "").endswith("spec.nodeName="):
            await answered.wait()
        return await list_objects(path, query)

    kube.list_objects = held_pending  # type: ignore[method-assign]
    firsts_asked: list[int | None] = []
    recording = kube.list_pages

    def first_sizes(path: str, query: Any = (), *, limit: int = 500, first: int | None = None) -> Any:
        firsts_asked.append(first)
        return recording(path, query, limit=limit, first=first)

    kube.list_pages = first_sizes  # type: ignore[method-assign]
    lists = ResyncLists.ask(kube, (), 500, cached=True)
    assert firsts_asked == [None, PENDING_FIRST_PAGE]  # the nodes whole, the pending pods' snapshot small
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(asked) == 2 and lists.assigned == [] and not lists.snapshots.done()  # nodes, pending only
    answered.set()
    firsts = await lists.snapshots
    assert len(firsts) == 1 and firsts[0][1] == "1000"  # the pending listing's first page (this fake ignores selectors)
    assert [query.get("fieldSelector", "").rsplit(",", 1)[-1] for _, query in asked[2:]] == ["spec.nodeName!="]
    assert len(lists.assigned) == 1 and dict(asked[2][1]).get("resourceVersion") == "0"
    lists.close()

    class Failing(FakeKube):
        async def list_objects(self, path: str, query: Any = ()) -> Any:
            if path == "/api/v1/pods":
                raise ApiError(500, "GET /api/v1/pods: boom")
            return [], "1"

    failing = ResyncLists.ask(Failing(), (), 500, cached=True)
    with pytest.raises(ApiError):
        await failing.snapshots
    assert failing.assigned == []
    failing.close()


def test_placer_run_asks_for_its_first_lists_before_it_imports_the_engine() -> None:
    """What `operate` needs before its first LISTs (the client, the options, the listing) imports no
    numpy, pydantic or plugin: those come in `_import_engine`, while the server answers; nor
    python-socks or tempfile (only a SOCKS proxy, a kubeconfig's inline certificates need them)."""
    code = ("import sys; import placer.cli, placer.controller.main; "
            "heavy = sorted(m for m in ('numpy', 'pydantic', 'placer.plugins', 'placer.engine.framework', "
            "'placer.controller.state', 'python_socks', 'tempfile') if m in sys.modules); assert not heavy, heavy; "
            "placer.controller.main._import_engine(); "
            "assert {'numpy', 'placer.plugins', 'placer.controller.state'} <= set(sys.modules); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


async def test_the_small_lists_asked_ahead_share_a_few_connections() -> None:
    """The profiles' and catalog kinds' LISTs asked for ahead go `LANES` at a time (each lane one
    connection, no TLS handshake per LIST); a failure is the resync's to see; `close` abandons the rest."""
    in_flight, most, release = 0, 0, asyncio.Event()

    class Slow(FakeKube):
        async def list_objects(self, path: str, query: Any = ()) -> Any:
            nonlocal in_flight, most
            if path.startswith("/api/"):  # the nodes' and pending pods' LISTs
                return [], "7"
            in_flight += 1
            most = max(most, in_flight)
            await release.wait()
            in_flight -= 1
            if path == "/broken":
                raise ApiError(500, "GET /broken: boom")
            return [{"metadata": {"name": path}}], "7"

    kube = Slow()
    lists = ResyncLists.ask(kube, (), 500, cached=True)
    paths = [f"/kind-{index}" for index in range(5)] + ["/broken"]
    lists.ask_others(paths)
    await asyncio.sleep(0.01)
    assert in_flight == ResyncLists.LANES
    release.set()
    assert await lists.objects("/kind-3") == ([{"metadata": {"name": "/kind-3"}}], "7")
    assert "/broken" in lists.others  # asked for ahead
    try:
        await lists.objects("/broken")
    except ApiError as error:
        assert error.status == 500
    else:
        raise AssertionError("the failure was not handed over")
    assert most == ResyncLists.LANES
    lists.close()
    assert lists.others == {}


async def _pending_filed_by_decidable(pending: int) -> tuple[int, int, int]:
    """A cold start's resync over `pending` pending pods (one page, already answered): how many
    pending pods were filed when it became decidable, when a coroutine waiting for that got its
    first turn, and in the end."""
    kube = FakeKube()
    kube.lists["/api/v1/nodes"] = [node("n1")]
    kube.lists["/api/v1/pods"] = [pod(f"p{index:04}", rv=index + 1) for index in range(pending)]
    state = unit_state(kube)
    filed: list[str] = []
    observe = state.cache.observe_pod

    def counted(raw: Any) -> Any:
        filed.append(raw["metadata"]["name"])
        return observe(raw)

    state.cache.observe_pod = counted  # type: ignore[method-assign]
    at_decidable: list[int] = []
    fire = state.resync.decided.fire
    state.resync.decided.fire = lambda: (at_decidable.append(len(filed)), fire())[1]  # type: ignore[method-assign]
    seen: list[int] = []

    async def first_turn_after_decidable() -> None:
        await state.resync.decided.wait()
        seen.append(len(filed))

    watcher = asyncio.create_task(first_turn_after_decidable())
    await asyncio.sleep(0)  # waiting
    await state.resync.run()
    await watcher
    assert len(state.cache.pending_keys()) == pending
    # (this fake ignores field selectors: its assigned LIST files every pod too, before the pending one)
    return at_decidable[0] - pending, seen[0] - pending, len(filed) - pending


async def test_a_small_backlog_is_filed_whole_before_the_first_decision() -> None:
    """Up to a page's worth of pending pods (`pods_list_page`, 500), the first decisions wait for
    every one (as kube-scheduler's, its informer synced): they are taken in queue order, as
    `placer simulate` takes them."""
    assert await _pending_filed_by_decidable(EAGER - 1) == (EAGER - 1,) * 3


async def test_the_first_decisions_of_a_big_backlog_do_not_wait_for_every_page_already_here() -> None:
    """Past a page's worth, the rest is filed `FILE_CHUNK` pods at a time with a turn of the event
    loop between (the scheduling loop decides and binds meanwhile): pages already answered do not
    await, and filing them in one go (~80 µs a pod) would hold the first binding back."""
    at_decidable, at_first_turn, in_the_end = await _pending_filed_by_decidable(EAGER + 20 * FILE_CHUNK)
    assert at_decidable == EAGER and in_the_end == EAGER + 20 * FILE_CHUNK
    assert at_first_turn < EAGER + 2 * FILE_CHUNK  # the loop turned before the rest was filed
