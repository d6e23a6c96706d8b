"""Unit tests of the reliability fixes: re-listings pruned, the loop paused while the API server
does not answer, Kopf's endless retries."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest
from placer.controller.lifecycle.kopf_settings import EndlessBackoff
from placer.controller.scheduling.loop import SchedulingLoop
from placer.controller.transport.client import BindOutcome, BindResult
from placer.engine.kinds import KINDS_BY_NAME
from placer.testing import namespace

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state, until


def test_endless_backoff_doubles_to_its_cap_and_restarts_per_request() -> None:
    backoff = EndlessBackoff(1.0, 16.0)
    assert list(itertools.islice(backoff, 7)) == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    assert next(iter(backoff)) == 1.0  # each request (each iter()) starts over
    assert not hasattr(backoff, "__len__")  # Kopf counts no attempts, so it never gives up


def test_a_relisting_is_told_from_the_first_listing() -> None:
    now = [0.0]
    state = unit_state()
    state.resync._clock = lambda: now[0]
    # the first listing: objects Kopf never showed, in one burst
    state.profile_event({"type": None, "object": profile("a")})
    state.profile_event({"type": None, "object": profile("b")})
    assert not state.resync.relisted.is_set()
    # an object Kopf already showed, listed again
    state.profile_event({"type": None, "object": profile("a")})
    assert state.resync.relisted.is_set()
    # after watch events of that kind
    state.resync.relisted.clear()
    state.profile_event({"type": None, "object": profile("r")})
    state.profile_event({"type": "MODIFIED", "object": profile("r")})
    state.profile_event({"type": None, "object": profile("s")})
    assert state.resync.relisted.is_set()
    # only new objects, but long after the previous listing event
    state.resync.relisted.clear()
    namespaces = KINDS_BY_NAME["Namespace"]
    state.object_event(namespaces, {"type": None, "object": namespace("p")})
    now[0] += 5.0
    state.object_event(namespaces, {"type": None, "object": namespace("q")})
    assert state.resync.relisted.is_set()


async def test_a_resync_prunes_what_its_list_proves_gone() -> None:
    kube = FakeKube()  # its lists are at resourceVersion 1000
    state = unit_state(kube)
    for raw in (node("n1"), node("gone-node"), profile("p", "placer"), profile("gone-profile", "other")):
        raw["metadata"]["resourceVersion"] = "50"
        (state.cache.observe_node if raw["kind"] == "Node" else state.cache.observe_profile)(raw)
    state.cache.observe_pod(pod("bound", node_name="n1", cpu="1", rv=10))
    state.cache.observe_pod(pod("deleted", node_name="n1", cpu="1", rv=20))
    state.cache.observe_pod(pod("waiting", rv=30))
    state.cache.observe_pod(pod("deleted-waiting", rv=40))
    state.cache.observe_pod(pod("newer", node_name="n1", cpu="1", rv=2000))  # created after the LIST
    kube.lists = {
        "/api/v1/nodes": [node("n1")],
        "/apis/placer.dev/v1alpha1/schedulerprofiles": [profile("p", "placer")],
        "/api/v1/pods": [pod("bound", node_name="n1", cpu="1", rv=10), pod("waiting", rv=30)],
    }
    await state.resync.run()
    assert state.cluster.node_names() == ["n1"]
    assert state.profiles.active("other") is None and state.profiles.active("placer") is not None
    assert set(state.cluster.pods) == {"default/bound", "default/newer"}
    assert set(state.cache.pending.get("placer", {})) == {"default/waiting"}
    assert "default/deleted-waiting" not in state.queue
    assert int(state.cluster.requested[state.cluster.index["n1"], 0]) == 2000


async def test_a_resync_without_numeric_versions_prunes_nothing() -> None:
    kube = FakeKube()
    state = unit_state(kube)
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(pod("a", node_name="n1", cpu="1", rv=10))

    async def opaque(path: str, query: object = ()) -> tuple[list[object], str]:
        return [], "opaque-version"

    kube.list_objects = opaque  # type: ignore[method-assign]
    await state.resync.run()
    assert "default/a" in state.cluster.pods


async def test_no_answer_pauses_the_loop_until_a_ping_is_answered() -> None:
    kube = FakeKube()
    kube.reachable = False
    state = unit_state(kube, initial_backoff=0.02, max_backoff=0.05)
    loop = SchedulingLoop(state)
    outcomes = iter([BindOutcome(BindResult.FAILED, "ConnectionRefused", answered=False)])
    kube.bind_result = lambda key, node_name: next(outcomes, BindOutcome(BindResult.BOUND))
    tasks = [asyncio.create_task(loop.run()), asyncio.create_task(state.api.probe_forever())]
    try:
        state.cache.observe_profile(profile("default", "placer"))
        state.cache.observe_node(node("n1"))
        state.may_schedule.set()
        for index in range(5):
            state.cache.observe_pod(pod(f"p{index}"))
        await until(lambda: kube.binds)
        await until(lambda: not state.api.up.is_set())
        await until(lambda: kube.pings >= 3)
        assert len(kube.binds) <= 4  # the ones decided before the first answer-less bind came back
        binds = len(kube.binds)
        await asyncio.sleep(0.2)
        assert len(kube.binds) == binds  # nothing new while the server does not answer
        kube.reachable = True
        await until(lambda: state.api.up.is_set())
        await until(lambda: state.metrics.bindings.get(result="bound") == 5, timeout=5)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_run_reports_an_unexpected_stop_as_one_log_record_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from placer.controller import main

    async def failing(options: object) -> None:
        raise RuntimeError("watcher for pods.v1@None has failed")

    monkeypatch.setattr(main, "configure_logging", lambda verbose: None)
    monkeypatch.setattr(main, "operate", failing)
    with caplog.at_level(logging.INFO, logger="placer"):
        assert main.run((), 0, False, False) == 1
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "placer stopped on an error" and record.exc_info is not None
