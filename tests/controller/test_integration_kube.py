"""KubeClient against the emulator: bind outcomes, retries, leases, events, pods/status."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from placer.controller.kube import ApiError, BindResult, KubeClient
from placer.controller.leader import micro_time

from tests.kubeemu import KubeEmulator


@pytest.fixture
async def kube(kube_emulator: KubeEmulator, tmp_path: Path) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(str(kube_emulator.write_kubeconfig(tmp_path / "kc")), retries=3,
                                      max_backoff=0.05)
    yield client
    await client.close()


async def test_bind_outcomes(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.add_node("n2")
    uid = emu.add_pod("p1")["metadata"]["uid"]
    assert (await kube.bind("default", "p1", uid, "n1")).result is BindResult.BOUND
    assert emu.get("pods", "p1")["spec"]["nodeName"] == "n1"
    # a retried bind whose first attempt landed: the 409 names our own node
    assert (await kube.bind("default", "p1", uid, "n1")).result is BindResult.BOUND
    conflict = await kube.bind("default", "p1", uid, "n2")
    assert conflict.result is BindResult.CONFLICT and "already assigned" in conflict.message
    assert (await kube.bind("default", "missing", "", "n1")).result is BindResult.GONE
    uid2 = emu.add_pod("p2")["metadata"]["uid"]
    stale = await kube.bind("default", "p2", "not-" + uid2, "n1")  # the UID is a precondition
    assert stale.result is BindResult.CONFLICT
    assert emu.double_bindings() == []


async def test_transient_failures_are_retried_with_backoff(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    uid = emu.add_pod("p1")["metadata"]["uid"]
    emu.inject("POST", r"/binding$", status=503, count=2)
    assert (await kube.bind("default", "p1", uid, "n1")).result is BindResult.BOUND
    assert emu.bind_attempts["default/p1"] == 3
    emu.inject("GET", r"/version$", status=429, retry_after=1, count=1)
    started = time.monotonic()
    assert (await kube.request("GET", "/version")).ok
    assert time.monotonic() - started >= 1.0  # Retry-After honoured, beyond our own max backoff
    emu.inject("GET", r"/version$", reset=True, count=2)
    assert (await kube.request("GET", "/version")).ok  # connection resets too
    emu.inject("GET", r"/version$", status=500, count=None)
    reply = await kube.request("GET", "/version")
    assert reply.status == 500  # given up after the retries, the last answer is returned
    emu.clear_faults()
    assert kube.last_answer is not None


async def test_no_answer_at_all_is_an_error(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    async with kube_emulator.unreachable():
        with pytest.raises(ApiError) as error:
            await kube.request("GET", "/version")
    assert error.value.status == 0
    assert await kube.ping()


async def test_leases_use_optimistic_concurrency(kube: KubeClient) -> None:
    assert await kube.get_lease("placer-system", "placer") is None
    body = {"metadata": {"name": "placer", "namespace": "placer-system"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": micro_time()}}
    created = await kube.create_lease("placer-system", body)
    with pytest.raises(ApiError) as exists:
        await kube.create_lease("placer-system", body)
    assert exists.value.status == 409
    renewed = await kube.update_lease("placer-system", "placer", {**created, "spec": {**created["spec"],
                                                                                        "renewTime": micro_time()}})
    with pytest.raises(ApiError) as stale:
        await kube.update_lease("placer-system", "placer", created)  # the old resourceVersion
    assert stale.value.status == 409
    assert (await kube.get_lease("placer-system", "placer")) == renewed


async def test_events_and_their_series(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    pod = emu.add_pod("p1")
    event = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "p1.abc", "namespace": "default"},
        "eventTime": micro_time(), "reportingController": "placer.dev/scheduler",
        "reportingInstance": "placer-me", "action": "Scheduling", "reason": "FailedScheduling",
        "note": "0/1 nodes are available: 1 Insufficient cpu.", "type": "Warning",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p1",
                      "uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"]},
    }
    assert (await kube.create_event("default", event)).status == 201
    reply = await kube.patch_event("default", "p1.abc", {"series": {"count": 4, "lastObservedTime": micro_time()}})
    assert reply.ok
    [stored] = emu.list("events.k8s.io/v1/events")
    assert stored["series"]["count"] == 4 and stored["note"] == event["note"]


async def test_the_condition_patch_merges_by_type(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_pod("p1")
    emu.patch("pods", "p1", {"status": {"conditions": [{"type": "Other", "status": "True"}]}})
    patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": "no", "lastProbeTime": None,
                                        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}
    assert (await kube.patch_pod_status("default", "p1", patch)).ok
    conditions = {c["type"]: c for c in emu.get("pods", "p1")["status"]["conditions"]}
    assert set(conditions) == {"Other", "PodScheduled"} and conditions["PodScheduled"]["message"] == "no"


async def test_lists_are_paged(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    for index in range(1203):
        kube_emulator.add_pod(f"p{index}")
    items, version = await kube.list_objects("/api/v1/pods")
    assert len(items) == 1203 and version
    assert len(kube_emulator.requests_matching("GET", r"^/api/v1/pods$")) == 3


async def test_node_metrics(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    kube_emulator.set_node_metrics("n1", cpu="500m", memory="1Gi")
    items = await kube.list_node_metrics()
    assert items is not None and [item["metadata"]["name"] for item in items] == ["n1"]
