"""The operator over real HTTP against the emulator: retries, hot reloads, conflicts, 409s, health."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from placer.controller.lifecycle.health import HealthChecks

from tests.controller.helpers import OperatorThread, until
from tests.controller.helpers import profile_ready as ready
from tests.kubeemu import KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]


def node_of(emu: KubeEmulator, name: str, namespace: str = "default") -> str | None:
    pod = emu.get("pods", name, namespace)
    return None if pod is None else pod["spec"].get("nodeName")


def prefer(node: str) -> list[dict[str, Any]]:
    return [{"name": "PreferNode", "weight": 100, "args": {"nodes": [node]}}]


def events_of(emu: KubeEmulator, name: str, reason: str | None = None) -> list[dict[str, Any]]:
    return [e for e in emu.list("events.k8s.io/v1/events")
            if (e.get("regarding") or {}).get("name") == name and (reason is None or e["reason"] == reason)]


async def test_a_pod_waits_for_a_labelled_node_then_is_bound_promptly(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.add_node("n2")
    emu.create("sp", {"metadata": {"name": "cpu"}, "spec": {"schedulerName": "placer", "filters": [
        {"name": "NodeResourcesFit"}, {"name": "NodeLabel", "args": {"required": {"cpu": "true"}}}]}})
    emu.add_pod("p1", scheduler_name="placer")
    await launch()
    await until(lambda: events_of(emu, "p1", "FailedScheduling"))
    [event] = events_of(emu, "p1", "FailedScheduling")
    assert event["type"] == "Warning" and event["note"].startswith("0/2 nodes are available: 2 ")
    conditions = emu.get("pods", "p1")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions] == [
        ("PodScheduled", "False", "Unschedulable", event["note"])]
    await asyncio.sleep(2.5)  # a few retries with backoff, each one unschedulable again
    labelled = time.monotonic()
    emu.patch("nodes", "n2", {"metadata": {"labels": {"cpu": "true"}}})
    await until(lambda: node_of(emu, "p1"), timeout=5)
    assert node_of(emu, "p1") == "n2"
    assert time.monotonic() - labelled < 2.5  # woken by the node change, not by a 10 s backoff
    # retried several times meanwhile, but one event object and one condition write
    assert len(events_of(emu, "p1", "FailedScheduling")) == 1
    assert len(emu.requests_matching("PATCH", r"/pods/p1/status$")) == 1
    await until(lambda: events_of(emu, "p1", "Scheduled"))  # (posted by its own writer, after the bind's answer)
    assert [e["note"] for e in events_of(emu, "p1", "Scheduled")] == ["Successfully assigned default/p1 to n2"]


async def test_a_profile_change_applies_to_later_pods(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("a", cpu="8")
    emu.add_node("b", cpu="8")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer", "scores": prefer("a")}})
    for index in range(3):
        emu.add_pod(f"first-{index}", scheduler_name="placer")
    await launch()
    await until(lambda: all(node_of(emu, f"first-{i}") for i in range(3)))
    emu.patch("sp", "p", {"spec": {"scores": prefer("b")}})
    await until(lambda: (ready(emu, "p") or {}).get("observedGeneration") == 2)
    for index in range(3):
        emu.add_pod(f"second-{index}", scheduler_name="placer")
    await until(lambda: all(node_of(emu, f"second-{i}") for i in range(3)))
    assert [node_of(emu, f"first-{i}") for i in range(3)] == ["a"] * 3
    assert [node_of(emu, f"second-{i}") for i in range(3)] == ["b"] * 3
    condition = ready(emu, "p")
    assert condition is not None and (condition["status"], condition["reason"]) == ("True", "Loaded")


async def test_an_invalid_update_keeps_the_old_version_scheduling(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("a")
    emu.add_node("b")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer", "scores": prefer("a")}})
    operator = await launch()
    await until(lambda: (ready(emu, "p") or {}).get("reason") == "Loaded")
    emu.patch("sp", "p", {"spec": {"scores": [{"name": "PreferNode", "args": {"nodez": ["b"]}}]}})
    await until(lambda: (ready(emu, "p") or {}).get("reason") == "InvalidArgs")
    condition = ready(emu, "p")
    assert condition is not None and condition["status"] == "False" and condition["observedGeneration"] == 2
    assert "PreferNode" in condition["message"] and "nodez" in condition["message"]
    assert "generation 1 keeps scheduling" in condition["message"]
    emu.add_pod("p1", scheduler_name="placer")
    await until(lambda: node_of(emu, "p1"))
    assert node_of(emu, "p1") == "a"
    emu.patch("sp", "p", {"spec": {"scores": prefer("b")}})
    await until(lambda: (ready(emu, "p") or {}).get("reason") == "Loaded")
    emu.add_pod("p2", scheduler_name="placer")
    await until(lambda: node_of(emu, "p2"))
    assert node_of(emu, "p2") == "b"
    assert operator.state is not None
    reloads = operator.state.metrics.reloads
    assert reloads.get(profile="p", result="success") == 2 and reloads.get(profile="p", result="invalid") == 1


async def test_two_profiles_schedule_side_by_side(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("a")
    emu.add_node("b")
    emu.create("sp", {"metadata": {"name": "to-a"}, "spec": {"schedulerName": "sched-a", "scores": prefer("a")}})
    emu.create("sp", {"metadata": {"name": "to-b"}, "spec": {"schedulerName": "sched-b", "scores": prefer("b")}})
    for index in range(2):
        emu.add_pod(f"pa-{index}", scheduler_name="sched-a")
        emu.add_pod(f"pb-{index}", scheduler_name="sched-b")
    await launch()
    await until(lambda: all(node_of(emu, f"p{x}-{i}") for x in "ab" for i in range(2)))
    assert {node_of(emu, f"pa-{i}") for i in range(2)} == {"a"}
    assert {node_of(emu, f"pb-{i}") for i in range(2)} == {"b"}
    await until(lambda: events_of(emu, "pa-0"))  # posted by the reporter after the bind
    assert {e["reportingInstance"] for e in events_of(emu, "pa-0")} == {"sched-a-op-a"}
    await until(lambda: all((ready(emu, name) or {}).get("reason") == "Loaded" for name in ("to-a", "to-b")))


async def test_the_older_profile_keeps_a_contested_name(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("a")
    emu.add_node("b")
    # created in the same second: the name breaks the tie, as the creation time would
    emu.create("sp", {"metadata": {"name": "aa-older"}, "spec": {"schedulerName": "placer", "scores": prefer("a")}})
    emu.create("sp", {"metadata": {"name": "zz-newer"}, "spec": {"schedulerName": "placer", "scores": prefer("b")}})
    emu.add_pod("p1", scheduler_name="placer")
    await launch()
    await until(lambda: node_of(emu, "p1") and (ready(emu, "zz-newer") or {}).get("reason") == "Conflict")
    assert node_of(emu, "p1") == "a"
    condition = ready(emu, "zz-newer")
    assert condition is not None and condition["status"] == "False" and '"aa-older"' in condition["message"]
    assert (ready(emu, "aa-older") or {}).get("reason") == "Loaded"
    emu.delete("sp", "aa-older")
    await until(lambda: (ready(emu, "zz-newer") or {}).get("reason") == "Loaded")
    emu.add_pod("p2", scheduler_name="placer")
    await until(lambda: node_of(emu, "p2"))
    assert node_of(emu, "p2") == "b"


async def test_deleting_a_profile_stops_its_pods_and_recreating_resumes(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.add_node("a")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    operator = await launch()
    await until(lambda: ready(emu, "p"))
    emu.delete("sp", "p")
    await until(lambda: operator.state is not None and operator.state.profiles.active("placer") is None)
    emu.add_pod("p1", scheduler_name="placer")
    await until(lambda: operator.state is not None and "default/p1" in operator.state.cache.pending.get("placer", {}))
    assert node_of(emu, "p1") is None and events_of(emu, "p1") == []
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    await until(lambda: node_of(emu, "p1"))


async def test_a_409_on_bind_drops_the_pod(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.add_node("n2")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.inject("POST", r"/pods/contested/binding$", status=409, count=1,
               message='Operation cannot be fulfilled on pods/binding "contested": pod contested is already '
                       'assigned to node "n2"')
    emu.add_pod("contested", scheduler_name="placer", cpu="1")
    emu.add_pod("other", scheduler_name="placer")
    operator = await launch(initial_backoff=0.2)
    await until(lambda: emu.bind_attempts.get("default/contested") == 1 and node_of(emu, "other"))
    emu.bind("default", "contested", "n2")  # the one who won
    await until(lambda: operator.state is not None and operator.state.metrics.bindings.get(result="conflict") == 1)
    await asyncio.sleep(0.8)  # several backoffs: it must not come back
    assert emu.bind_attempts["default/contested"] == 1
    assert node_of(emu, "contested") == "n2"
    assert events_of(emu, "contested") == []
    assert emu.double_bindings() == [] and emu.audit_capacity() == []


async def test_transient_api_errors_are_retried(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.inject("POST", r"/binding$", status=503, count=2)
    emu.inject("POST", r"/events$", status=429, retry_after=0.1, count=1)
    emu.add_pod("p1", scheduler_name="placer")
    await launch()
    await until(lambda: node_of(emu, "p1") and events_of(emu, "p1", "Scheduled"))
    assert emu.bind_attempts["default/p1"] == 3 and len(emu.bindings) == 1


async def test_a_malformed_pod_is_reported_not_fatal(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.add_pod("bad", scheduler_name="placer",
                spec={"tolerations": [{"key": "k", "operator": "Sometimes", "value": "v"}]})
    emu.add_pod("good", scheduler_name="placer")
    await launch()
    await until(lambda: node_of(emu, "good") and events_of(emu, "bad", "FailedScheduling"))
    [event] = events_of(emu, "bad", "FailedScheduling")
    assert "spec.tolerations[0].operator" in event["note"]
    await until(lambda: emu.get("pods", "bad")["status"].get("conditions"))
    [condition] = emu.get("pods", "bad")["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", event["note"])


async def test_namespaces_restrict_the_pods(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.create("namespaces", {"metadata": {"name": "team-a"}})
    emu.create("namespaces", {"metadata": {"name": "team-b"}})
    emu.add_node("n1", cpu="2")
    emu.add_pod("theirs", "team-b", scheduler_name="placer", cpu="1500m", node_name="n1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.add_pod("mine", "team-a", scheduler_name="placer")
    emu.add_pod("not-mine", "team-b", scheduler_name="placer")
    await launch(namespaces=("team-a",))
    await until(lambda: node_of(emu, "mine", "team-a"))
    await asyncio.sleep(0.5)
    assert node_of(emu, "not-mine", "team-b") is None and events_of(emu, "not-mine") == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_healthz_and_metrics(kube_emulator: KubeEmulator, launch: Start) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.add_pod("p1", scheduler_name="placer")
    port = _free_port()
    await launch(metrics_port=port, metrics_host="127.0.0.1", health_window=1.0, health_ping_interval=0.2)
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        async def get(path: str) -> tuple[int, str]:
            async with session.get(base + path) as response:
                return response.status, await response.text()

        await until(lambda: node_of(emu, "p1"))
        status = await _poll(lambda: get("/healthz"), lambda r: r[0] == 200)
        assert status == (200, "ok\n")
        code, text = await get("/metrics")
        assert code == 200
        for line in (
            'placer_schedule_attempts_total{profile="p",result="scheduled"} 1',
            'placer_bindings_total{result="bound"} 1',
            'placer_profile_reloads_total{profile="p",result="success"} 1',
            'placer_pending_pods{queue="active"} 0',
            "placer_leader 1",
            "# TYPE placer_scheduling_attempt_duration_seconds histogram",
        ):
            assert line in text, line
        async with emu.unreachable():
            code, reason = await _poll(lambda: get("/healthz"), lambda r: r[0] == 500, timeout=5)
            assert "API server not answering" in reason
        await _poll(lambda: get("/healthz"), lambda r: r[0] == 200, timeout=5)


async def test_livez_and_readyz_as_a_control_plane_component(kube_emulator: KubeEmulator, launch: Start) -> None:
    """kube-scheduler's endpoints: /livez for the liveness and startup probes (the process works), /readyz
    for readiness (synced, watching, the API server answering, not shutting down), each a list of named
    checks with ?verbose, ?exclude and /readyz/NAME."""
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    port = _free_port()
    await launch(metrics_port=port, metrics_host="127.0.0.1", health_window=1.0, health_ping_interval=0.2)
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        async def get(path: str) -> tuple[int, str]:
            async with session.get(base + path) as response:
                return response.status, await response.text()

        assert await _poll(lambda: get("/readyz"), lambda r: r[0] == 200) == (200, "ok\n")
        assert await get("/livez") == (200, "ok\n")
        code, text = await get("/readyz?verbose")
        assert code == 200 and text.splitlines() == [
            "[+]ping ok", "[+]tasks ok", "[+]started ok", "[+]watches ok", "[+]informer-sync ok",
            "[+]api-server ok", "[+]shutdown ok", "readyz check passed"]
        assert (await get("/livez?verbose"))[1].splitlines() == ["[+]ping ok", "[+]tasks ok", "livez check passed"]
        assert await get("/readyz/informer-sync") == (200, "ok\n")
        async with emu.unreachable():
            code, text = await _poll(lambda: get("/readyz"), lambda r: r[0] == 500, timeout=5)
            assert "[-]api-server failed: API server not answering" in text
            assert "[+]informer-sync ok" in text and text.endswith("readyz check failed\n")
            assert (await get("/readyz/api-server"))[0] == 500
            assert await get("/readyz?exclude=api-server") == (200, "ok\n")
            assert await get("/livez") == (200, "ok\n")  # not a reason to restart
            assert (await get("/healthz"))[0] == 500
        await _poll(lambda: get("/readyz"), lambda r: r[0] == 200, timeout=5)


def test_readyz_says_when_shutting_down() -> None:
    """kube's `shutdown` check: once told to stop, not ready (still alive, still healthy)."""
    stopping = False
    checks = HealthChecks(dict, started=lambda: True, unserved=list, synced=lambda: True, client=None, window=60.0,
                          stopping=lambda: stopping)
    assert checks.first_failure() == (True, "ok") and [c() for _, c in checks.readyz] == [None] * 7
    stopping = True
    assert dict((name, check()) for name, check in checks.readyz)["shutdown"] == "process is shutting down"
    assert checks.first_failure() == (True, "ok")  # /healthz does not check it
    assert [c() for _, c in checks.livez] == [None, None]


async def _poll(call: Callable[[], Awaitable[Any]], accept: Callable[[Any], bool], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await call()
        if accept(result) or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.1)
