"""Unit tests of the reliability fixes: the loop paused while the API server does not answer, Kopf's
endless retries, an unexpected stop reported once. (Re-listings are the informer's:
tests/controller/test_informer.py.)"""

from __future__ import annotations

import asyncio
import itertools
import logging
import subprocess
import sys

import pytest
from placer.controller.lifecycle.kopf_settings import EndlessBackoff
from placer.controller.transport.client import BindOutcome, BindResult

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state, until


def test_endless_backoff_doubles_to_its_cap_and_restarts_per_request() -> None:
    backoff = EndlessBackoff(1.0, 16.0)
    assert list(itertools.islice(backoff, 7)) == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    assert next(iter(backoff)) == 1.0  # each request (each iter()) starts over
    assert not hasattr(backoff, "__len__")  # Kopf counts no attempts, so it never gives up


async def test_no_answer_pauses_the_loop_until_a_ping_is_answered() -> None:
    kube = FakeKube()
    kube.reachable = False
    state = unit_state(kube, initial_backoff=0.02, max_backoff=0.05)
    loop = state.loop
    outcomes = iter([BindOutcome(BindResult.FAILED, "ConnectionRefused", answered=False)])
    kube.bind_result = lambda key, node_name: next(outcomes, BindOutcome(BindResult.BOUND))
    tasks = [asyncio.create_task(loop.run()), asyncio.create_task(state.api.probe_forever())]
    try:
        state.profile_feed.upsert(profile("default", "placer"))
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
    from placer.controller.options import Options

    async def failing(options: object, **_: object) -> None:
        raise RuntimeError("watcher for pods.v1@None has failed")

    monkeypatch.setattr(main, "configure_logging", lambda verbose: None)
    monkeypatch.setattr(main, "operate", failing)
    with caplog.at_level(logging.INFO, logger="placer"):
        assert main.run(Options(metrics_port=0, leader_elect=False)) == 1
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "placer stopped on an error" and record.exc_info is not None


def test_placer_run_sets_the_collector_for_a_long_running_service() -> None:
    """`placer run` (not the tests' `operate`): what the imports made is frozen out of collections,
    and young collections come every 50,000 allocations. In a child process: it changes the whole
    interpreter."""
    script = (
        "import gc\n"
        "from placer.controller import main\n"
        "from placer.controller.options import Options\n"
        "calls = []\n"
        "async def fake(options): calls.append(options)\n"
        "main.operate = fake\n"
        "main.configure_logging = lambda verbose: None\n"
        "assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0\n"
        "assert main.run(Options(metrics_port=0, leader_elect=False)) == 0 and calls\n"
        "assert gc.get_threshold() == main.GC_THRESHOLDS and gc.get_freeze_count() > 100_000\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout == "ok\n", done.stderr
