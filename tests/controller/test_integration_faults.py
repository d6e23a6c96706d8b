"""API faults, one at a time, against a running operator: what the emulator ends up holding.

Every test ends with `assert_sound`: each pod bound exactly once, nothing bound twice, no node
over its allocatable. (A 409 on bind and 503s on bind are covered in test_integration_behaviour.)
"""

from __future__ import annotations

import asyncio
from collections import Counter
from urllib.parse import parse_qs

import pytest

from tests.controller.helpers import (
    WATCHED_PATHS,
    Launch,
    SlowBindReplies,
    assert_sound,
    bound_node,
    events_about,
    until,
    watching,
)
from tests.kubeemu import KubeEmulator

PODS_WATCH = r"^/api/v1/pods$"


def setup(emu: KubeEmulator, nodes: int = 2, cpu: str = "4") -> None:
    for index in range(nodes):
        emu.add_node(f"n{index}", cpu=cpu)
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})


def add_pods(emu: KubeEmulator, prefix: str, count: int, cpu: str = "100m") -> list[str]:
    names = [f"{prefix}-{index}" for index in range(count)]
    for name in names:
        emu.add_pod(name, scheduler_name="placer", cpu=cpu)
    return names


def all_bound(emu: KubeEmulator, names: list[str]) -> bool:
    return all(bound_node(emu, name) for name in names)


def bind_requests(emu: KubeEmulator, name: str) -> list[float]:
    return [r.started for r in emu.requests_matching("POST", rf"/pods/{name}/binding$")]


async def test_429_on_bind_waits_for_retry_after(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    setup(emu)
    emu.inject("POST", r"/pods/p-0/binding$", status=429, retry_after=1, count=1)
    names = add_pods(emu, "p", 2)
    await launch()
    await until(lambda: all_bound(emu, names))
    first, second = bind_requests(emu, "p-0")
    assert second - first >= 1.0  # not before the server said so (our own backoff is 0.2 s at most)
    assert_sound(emu, names)


@pytest.mark.parametrize("fault", [{"status": 500}, {"status": 503}, {"reset": True}], ids=["500", "503", "reset"])
async def test_bind_failures_beyond_the_client_retries_requeue_the_pod(
    kube_emulator: KubeEmulator, launch: Launch, fault: dict[str, object]
) -> None:
    """The client retries 3 times; the 4th failure fails the bind, the pod is requeued with backoff,
    reported, and bound on a later cycle, once."""
    emu = kube_emulator
    setup(emu)
    emu.inject("POST", r"/pods/p-0/binding$", count=4, **fault)  # type: ignore[arg-type]
    names = add_pods(emu, "p", 3)
    operator = await launch(initial_backoff=0.2)
    await until(lambda: all_bound(emu, names))
    assert emu.bind_attempts["default/p-0"] == 5
    assert operator.state is not None and operator.state.metrics.bindings.get(result="failed") == 1
    await until(lambda: events_about(emu, "p-0", "FailedScheduling"))
    [event] = events_about(emu, "p-0", "FailedScheduling")
    assert event["note"].startswith("Binding rejected: ")
    assert "PodScheduled" not in {c["type"] for c in emu.get("pods", "p-0")["status"].get("conditions") or []
                                  if c["status"] == "False"}
    assert_sound(emu, names)


async def test_a_bind_that_timed_out_is_retried(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The server is slower than the client's timeout and the client gives up first: nothing was
    bound, the retry binds."""
    emu = kube_emulator
    setup(emu)
    emu.inject("POST", r"/pods/p-0/binding$", delay=1.0, count=1)
    names = add_pods(emu, "p", 2)
    await launch(api_timeout=0.3)
    await until(lambda: all_bound(emu, names))
    assert len(bind_requests(emu, "p-0")) == 2
    assert_sound(emu, names)


async def test_a_bind_that_landed_but_timed_out_counts_as_bound(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The server binds, the reply is late, the client times out and retries: the retry's 409
    "already assigned to node X" (X ours) is a success, and the node accounting stays right."""
    emu = kube_emulator
    emu.add_node("n0", cpu="1")
    emu.add_node("n1", cpu="1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    # the watch will not tell it either, for a while
    slow = SlowBindReplies(emu, 1.0, only={"big-0"}, times=1, before=lambda: setattr(emu, "watch_delay", 1.5))
    operator = await launch(api_timeout=0.3)
    await until(lambda: watching(emu))
    emu.add_pod("big-0", scheduler_name="placer", cpu="600m")
    await until(lambda: slow.landed)
    state = operator.state
    assert state is not None
    await until(lambda: state.metrics.bindings.get(result="bound") == 1, timeout=5)
    assert state.cluster.is_assumed("default/big-0")  # counted where it went, the watch has not said
    assert len(bind_requests(emu, "big-0")) == 2
    assert state.metrics.bindings.get(result="conflict") == 0
    # the next pod must not be put where big-0 went: only the other node has room
    emu.add_pod("big-1", scheduler_name="placer", cpu="600m")
    await until(lambda: bound_node(emu, "big-1"), timeout=5)
    assert bound_node(emu, "big-1") != bound_node(emu, "big-0")
    emu.watch_delay = 0.0
    await until(lambda: events_about(emu, "big-0", "Scheduled"))
    assert_sound(emu, ["big-0", "big-1"])


async def test_list_and_watch_errors_are_retried(kube_emulator: KubeEmulator, launch: Launch) -> None:
    emu = kube_emulator
    setup(emu)
    early = add_pods(emu, "early", 3)
    emu.inject("GET", PODS_WATCH, status=500, count=3)  # the pods' watch, three times
    operator = await launch()
    await until(lambda: all_bound(emu, early), timeout=10)
    # the watch stream breaks and its reconnects fail for a while
    rule = emu.inject("GET", PODS_WATCH, query="watch=true", status=503, count=None)
    emu.drop_watches()
    late = add_pods(emu, "late", 3)
    await until(lambda: rule.hits >= 3, timeout=10)
    emu.faults.remove(rule)
    await until(lambda: all_bound(emu, late), timeout=10)
    assert operator.state is not None
    assert_sound(emu, early + late)


async def test_a_watch_failing_for_long_recovers(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """An informer's retries are endless (capped backoff; Kopf's own default gives up after 8), so the
    watch resumes whenever it can."""
    emu = kube_emulator
    setup(emu)
    first = add_pods(emu, "first", 2)
    await launch(watch_backoff=0.02, watch_max_backoff=0.05)
    await until(lambda: all_bound(emu, first) and watching(emu))
    rule = emu.inject("GET", PODS_WATCH, status=503, count=None)
    emu.drop_watches()
    late = add_pods(emu, "late", 3)
    await until(lambda: rule.hits >= 15, timeout=10)
    emu.faults.remove(rule)
    await until(lambda: all_bound(emu, late), timeout=10)
    assert_sound(emu, first + late)


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "aborted"])
async def test_pods_created_while_the_watch_is_down_are_scheduled(
    kube_emulator: KubeEmulator, launch: Launch, abort: bool
) -> None:
    emu = kube_emulator
    setup(emu)
    first = add_pods(emu, "first", 3)
    await launch()
    await until(lambda: all_bound(emu, first))
    rule = emu.inject("GET", PODS_WATCH, query="watch=true", reset=True, count=None)
    emu.drop_watches(abort=abort)
    late = add_pods(emu, "late", 5)
    await until(lambda: rule.hits >= 2, timeout=10)
    await asyncio.sleep(0.3)
    emu.faults.remove(rule)
    await until(lambda: all_bound(emu, late), timeout=10)
    assert_sound(emu, first + late)


async def test_an_expired_watch_relists_and_loses_nothing(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """The watch is down while pods come and go, and the history is compacted: the resume gets 410
    Expired and the pod informer lists again. Pods created meanwhile are scheduled; a pod deleted
    meanwhile, of which no DELETED event will ever come, no longer holds its node."""
    emu = kube_emulator
    emu.add_node("n0", cpu="1")
    emu.create("sp", {"metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    emu.add_pod("old", scheduler_name="placer", cpu="800m")
    emu.add_pod("stays", scheduler_name="placer", cpu="100m")
    operator = await launch(initial_backoff=0.2, max_backoff=0.5)
    state = operator.state
    assert state is not None
    await until(lambda: bound_node(emu, "old") and watching(emu))
    await until(lambda: "default/old" in state.cluster.pods and not state.cluster.is_assumed("default/old"))
    rule = emu.inject("GET", PODS_WATCH, query="watch=true", status=503, count=None)
    emu.drop_watches()
    await until(lambda: rule.hits >= 1)
    emu.delete("pods", "old")
    created = add_pods(emu, "new", 2, cpu="400m")  # they fit only once "old" is gone
    emu.compact()
    emu.faults.remove(rule)
    await until(lambda: all_bound(emu, created), timeout=10)
    assert "default/old" not in state.cluster.pods
    assert state.informers["/api/v1/pods"].lists >= 2  # the startup one, and the one after the 410
    assert_sound(emu, ["stays", *created])


async def test_no_hot_loop_while_the_api_server_is_unreachable(kube_emulator: KubeEmulator, launch: Launch) -> None:
    """Every request is reset for 3 s (recorded, unlike a refused connection): count them.

    What backoff allows in that window with these settings (x2 for aiohttp's own retry of an
    idempotent request after a reset): the Lease every 0.25 s, with one retry (~52); each of
    Kopf's watches (the CRDs' and WATCHED_PATHS) with backoff from 0.1 s to 0.5 s (~16 each); the
    pinger and the prober (~20);
    and, once, the binds in flight when the server went away (4 attempts each) and their events
    (4 attempts each). No pod is tried again until the server answers (the loop pauses), so none of
    it grows with the pending pods.
    """
    emu = kube_emulator
    setup(emu, cpu="2")
    first = add_pods(emu, "first", 4)
    options = {"leader_elect": True, "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.25,
               "initial_backoff": 0.2, "max_backoff": 2.0}
    await launch(**options)
    await until(lambda: all_bound(emu, first), timeout=10)
    waiting = add_pods(emu, "waiting", 3, cpu="3")  # unschedulable: retried with backoff
    await until(lambda: all(events_about(emu, name, "FailedScheduling") for name in waiting))
    late = add_pods(emu, "late", 10)
    rule = emu.inject(None, ".*", reset=True, count=None)
    emu.drop_watches(abort=True)
    before = len(emu.requests)
    await asyncio.sleep(3.0)
    window = emu.requests[before:]
    emu.faults.remove(rule)
    per_path = Counter((r.method, r.path) for r in window)
    binds = {path: n for (method, path), n in per_path.items() if path.endswith("/binding")}
    assert max(binds.values(), default=0) <= 4, binds  # one attempt (3 retries) per pod, no more
    lease = per_path["GET", "/apis/coordination.k8s.io/v1/namespaces/placer-system/leases/placer"]
    assert lease <= 4 * (3.0 / 0.25 + 4), lease  # (+ the quick tries around losing the Lease)
    watches = [per_path["GET", path] for path in WATCHED_PATHS]
    assert max(watches) <= 2 * 12, watches  # 0.1 + 0.2 + 0.4 + 0.5 * 9 > 3 s
    budget = 150 + 2 * 12 * (1 + len(WATCHED_PATHS))  # 250 when Kopf watched 4 kinds
    assert len(window) < budget, f"{len(window)} requests in 3 s: {per_path.most_common(8)}"
    await until(lambda: all_bound(emu, late), timeout=15)
    assert_sound(emu, first + late)


@pytest.mark.parametrize("path", ["/api/v1/pods", "/api/v1/nodes"])
async def test_pods_and_nodes_are_listed_once_and_watched_from_that_list(
    kube_emulator: KubeEmulator, launch: Launch, path: str
) -> None:
    """The pod and node informers: one LIST at startup (pods: the active ones, as kube-scheduler's
    informer; nobody else lists them), from the watch cache; the watch resumes from that LIST's
    resourceVersion, and events on the streams reach the engine."""
    emu = kube_emulator
    setup(emu)
    first = add_pods(emu, "p", 3)
    await launch()
    await until(lambda: all_bound(emu, first) and watching(emu))
    failed = "status.phase=Failed,spec.nodeName!="  # the failed pods' informer (kubelet refusals), apart
    requests = [r for r in emu.requests if r.method == "GET" and r.path == path
                and parse_qs(r.query).get("fieldSelector") != [failed]]
    lists = [r for r in requests if not r.is_watch]
    watches = [r for r in requests if r.is_watch]
    active = "status.phase!=Succeeded,status.phase!=Failed"
    assert len(lists) == 1, [r.query for r in lists]
    assert parse_qs(lists[0].query)["resourceVersion"] == ["0"]
    if path.endswith("pods"):
        assert parse_qs(lists[0].query)["fieldSelector"] == [active]
    watch_query = parse_qs(watches[0].query)
    assert watch_query["allowWatchBookmarks"] == ["true"] and watch_query["resourceVersion"][0].isdigit()
    emu.add_node("big", cpu="16")  # only the node watch can tell about it
    emu.add_pod("huge", scheduler_name="placer", cpu="8")  # only the pod watch can, and it fits "big" alone
    later = add_pods(emu, "q", 2)
    await until(lambda: all_bound(emu, [*later, "huge"]))
    assert bound_node(emu, "huge") == "big"
    assert len([r for r in emu.requests if r.path == path and not r.is_watch
                and parse_qs(r.query).get("fieldSelector") != [failed]]) == len(lists)
    assert_sound(emu, [*first, *later, "huge"])
