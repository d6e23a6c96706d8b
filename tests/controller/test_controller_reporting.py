"""Reporting: events and the PodScheduled condition, written sparingly and off the hot path."""

from __future__ import annotations

import asyncio
import datetime as dt
import re

from placer.controller.binding.reporting import Condition, Reporter, pod_scheduled_condition
from placer.controller.lifecycle.leader import micro_time
from placer.controller.metrics import Metrics
from placer.engine.parsing import parse_pod

from tests.controller.helpers import FakeKube, pod

MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reporter(kube: FakeKube, clock: Clock | None = None, *, limit: int = 100, active: bool = True) -> Reporter:
    return Reporter(kube, Metrics(), identity="me", limit=limit, series_interval=30.0,
                    active=lambda: active, clock=clock or Clock())


async def flush(rep: Reporter) -> None:
    workers = [asyncio.create_task(rep.worker()) for _ in range(2)]
    await rep.drain(timeout=2.0)
    for worker in workers:
        worker.cancel()
    await asyncio.gather(*workers, return_exceptions=True)


async def test_scheduled_event_fields() -> None:
    kube = FakeKube()
    rep = reporter(kube)
    info = parse_pod(pod("web", "shop", rv=42))
    rep.scheduled(info, "node-1", "packing-scheduler")
    await flush(rep)
    [event] = kube.events
    assert event["apiVersion"] == "events.k8s.io/v1" and event["kind"] == "Event"
    assert event["reason"] == "Scheduled" and event["action"] == "Binding" and event["type"] == "Normal"
    assert event["note"] == "Successfully assigned shop/web to node-1"
    assert event["reportingController"] == "placer.dev/scheduler"
    assert event["reportingInstance"] == "packing-scheduler-me"
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web",
                                  "uid": "uid-web", "resourceVersion": "42"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    assert re.fullmatch(r"web\.[0-9a-f]+", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == "shop"
    # one instant for its name and its time, as client-go's recorder
    nanos = int(event["metadata"]["name"].split(".")[1], 16)
    assert event["eventTime"] == micro_time(dt.datetime.fromtimestamp(nanos // 1000 / 1e6, dt.UTC).replace(
        microsecond=nanos // 1000 % 1_000_000))


async def test_repeated_failures_make_one_event_and_a_throttled_series() -> None:
    kube = FakeKube()
    clock = Clock()
    rep = reporter(kube, clock)
    info = parse_pod(pod("web"))
    for _ in range(5):
        rep.failed(info, "placer", MESSAGE)
        await flush(rep)
        clock.now += 1
    [event] = kube.events
    assert (event["reason"], event["type"], event["action"], event["note"]) == (
        "FailedScheduling", "Warning", "Scheduling", MESSAGE)
    assert kube.event_patches == []  # within the series interval: counted, not sent
    clock.now += 30
    rep.failed(info, "placer", MESSAGE)
    await flush(rep)
    [(name, patch)] = kube.event_patches
    assert name == event["metadata"]["name"]
    assert patch["series"]["count"] == 6 and patch["series"]["lastObservedTime"]
    assert len(kube.events) == 1


async def test_a_new_message_is_a_new_event() -> None:
    kube = FakeKube()
    rep = reporter(kube)
    info = parse_pod(pod("web"))
    rep.failed(info, "placer", MESSAGE)
    rep.failed(info, "placer", "0/3 nodes are available: 3 node(s) were unschedulable.")
    await flush(rep)
    assert [e["note"] for e in kube.events] == [MESSAGE, "0/3 nodes are available: 3 node(s) were unschedulable."]


async def test_condition_is_written_only_when_it_changes() -> None:
    kube = FakeKube()
    rep = reporter(kube)
    info = parse_pod(pod("web"))
    rep.failed(info, "placer", MESSAGE)
    rep.failed(info, "placer", MESSAGE)
    await flush(rep)
    rep.failed(info, "placer", MESSAGE)
    await flush(rep)
    [(key, patch)] = kube.conditions
    assert key == "default/web"
    [condition] = patch["status"]["conditions"]
    assert condition["type"] == "PodScheduled" and condition["status"] == "False"
    assert condition["reason"] == "Unschedulable" and condition["message"] == MESSAGE
    assert condition["lastTransitionTime"]
    rep.failed(info, "placer", "other")
    await flush(rep)
    assert len(kube.conditions) == 2
    # the second keeps the first's transition time: the status stayed False
    second = kube.conditions[1][1]["status"]["conditions"][0]
    assert second["lastTransitionTime"] == condition["lastTransitionTime"]


async def test_a_condition_the_pod_already_shows_is_not_rewritten() -> None:
    kube = FakeKube()
    rep = reporter(kube)
    raw = pod("web")
    raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": MESSAGE, "lastTransitionTime": "2025-01-01T00:00:00Z"}]
    observed = pod_scheduled_condition(raw)
    assert observed == Condition("False", "Unschedulable", MESSAGE, "2025-01-01T00:00:00Z")
    rep.observe_condition("default/web", observed)
    rep.failed(parse_pod(raw), "placer", MESSAGE)
    await flush(rep)
    assert kube.conditions == []
    assert len(kube.events) == 1  # the event is still reported


async def test_bound_pods_are_forgotten() -> None:
    kube = FakeKube()
    rep = reporter(kube)
    info = parse_pod(pod("web"))
    rep.failed(info, "placer", MESSAGE)
    await flush(rep)
    rep.scheduled(info, "n1", "placer")
    rep.failed(info, "placer", MESSAGE)  # e.g. re-created with the same name
    await flush(rep)
    assert [e["reason"] for e in kube.events] == ["FailedScheduling", "Scheduled", "FailedScheduling"]


async def test_a_full_queue_drops_and_counts() -> None:
    kube = FakeKube()
    rep = reporter(kube, limit=2)
    for index in range(5):
        rep.scheduled(parse_pod(pod(f"p{index}")), "n1", "placer")
    assert rep.metrics.reports_dropped.get() == 3
    await flush(rep)
    assert len(kube.events) == 2


async def test_followers_send_nothing() -> None:
    kube = FakeKube()
    rep = reporter(kube, active=False)
    rep.failed(parse_pod(pod("web")), "placer", MESSAGE)
    await flush(rep)
    assert kube.events == [] and kube.conditions == []


async def test_malformed_pod_message_is_reported() -> None:
    kube = FakeKube()
    rep = reporter(kube)
    info = parse_pod(pod("bad", cpu="lots"))
    assert info.error is not None
    rep.failed(info, "placer", info.error)
    await flush(rep)
    assert "lots" in kube.events[0]["note"]
    assert kube.conditions[0][1]["status"]["conditions"][0]["message"] == info.error


async def test_the_condition_write_is_conditional_on_the_version_decided_on() -> None:
    kube = FakeKube()
    kube.condition_status = 409  # the pod changed meanwhile (e.g. it got bound)
    rep = reporter(kube)
    rep.failed(parse_pod(pod("web", rv=7)), "placer", MESSAGE)
    await flush(rep)
    [(_, patch)] = kube.conditions
    assert patch["metadata"] == {"resourceVersion": "7"}
    kube.condition_status = 200
    rep.failed(parse_pod(pod("web", rv=9)), "placer", MESSAGE)  # not written yet: try again
    await flush(rep)
    assert len(kube.conditions) == 2 and kube.conditions[1][1]["metadata"] == {"resourceVersion": "9"}
