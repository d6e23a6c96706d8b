"""Binding a pod's volumes before the pod (kube's PreBind) against a fake API: what is written, the
wait on the watch-fed catalog, and on every failure nothing left assumed in the catalog or on the node."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from placer.controller.scheduling.loop import SchedulingLoop
from placer.controller.state import SchedulerState
from placer.controller.transport.client import ApiError
from placer.engine.kinds import KINDS
from placer.engine.storage import BIND_COMPLETED, SELECTED_NODE
from placer.plugins.volume_binding import BOUND_BY_CONTROLLER

from tests.controller.helpers import FakeKube, node, pod, profile, unit_state, until

Running = tuple[SchedulerState, FakeKube, SchedulingLoop]
FILTERS = [{"name": name} for name in (
    "NodeUnschedulable", "NodeReady", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
    "VolumeBinding",
)]
LOCAL = "local"  # WaitForFirstConsumer, no provisioner: only pre-created volumes
FAST = "fast"  # WaitForFirstConsumer, provisioned by csi.example.com
PV = "PersistentVolume"
PVC = "PersistentVolumeClaim"
KIND_OF = {kind.plural: kind for kind in KINDS}


def storage_class(name: str, provisioner: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}


def volume(name: str, node_name: str = "n1", size: str = "10Gi") -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": LOCAL,
                 "local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}},
        "status": {"phase": "Available"},
    }


def claim(name: str, storage: str = LOCAL) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"storageClassName": storage, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending"},
    }


def pod_with(name: str, *claims: str, cpu: str = "1") -> dict[str, Any]:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return pod(name, cpu=cpu, spec={"volumes": volumes})


def observe(state: SchedulerState, plural: str, raw: dict[str, Any]) -> None:
    """What the watch delivers: the object as the API server holds it."""
    state.catalog_feeds[KIND_OF[plural].plural].upsert(raw)


def put(state: SchedulerState, kube: FakeKube, plural: str, raw: dict[str, Any]) -> None:
    observe(state, plural, kube.store(plural, raw))


def complete_binding(state: SchedulerState, kube: FakeKube, claim_name: str, volume_name: str) -> None:
    """The PV controller's part: the claim names the volume and the binding is complete."""
    stored = kube.claims[f"default/{claim_name}"]
    stored["spec"]["volumeName"] = volume_name
    stored["metadata"].setdefault("annotations", {})[BIND_COMPLETED] = "yes"
    stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1000)
    observe(state, "persistentvolumeclaims", dict(stored))


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    kube = FakeKube()
    state = unit_state(kube, max_binds_in_flight=1, initial_backoff=0.05, max_backoff=0.2, pre_bind_timeout=0.5)
    kube.on_write = lambda plural, raw: observe(state, plural, raw)  # the watch echoes every write
    loop = state.loop
    task = asyncio.create_task(loop.run())
    workers = [asyncio.create_task(state.reporter.worker()) for _ in range(2)]
    state.profile_feed.upsert(profile("volumes", "placer", filters=FILTERS))
    state.cache.observe_node(node("n1", cpu="4"))
    observe(state, "storageclasses", storage_class(LOCAL, "kubernetes.io/no-provisioner"))
    observe(state, "storageclasses", storage_class(FAST, "csi.example.com"))
    state.may_schedule.set()
    yield state, kube, loop
    for job in (task, *workers):
        job.cancel()
    await asyncio.gather(task, *workers, return_exceptions=True)


def slow_retries(state: SchedulerState) -> None:
    """Back failed pods off for 5 s, so what a failure left behind can be looked at."""
    state.queue.initial_backoff = state.queue.max_backoff = 5.0


def retry_now(state: SchedulerState, key: str = "default/p") -> None:
    state.queue.retry_now(key)
    state.wakeup.set()


def requested_cpu(state: SchedulerState, node_name: str = "n1") -> int:
    return int(state.cluster.requested[state.cluster.index[node_name], 0])


def assert_nothing_held(state: SchedulerState, key: str = "default/p") -> None:
    """Neither the pod nor any volume or claim is assumed any more; the node's room is free."""
    catalog = state.cluster.catalog
    assert key not in state.cluster.pods
    assert requested_cpu(state) == 0
    assert not any(catalog.assumed(PV, name) for _, name, _ in catalog.items(PV))
    assert not any(catalog.assumed(PVC, name, ns) for ns, name, _ in catalog.items(PVC))


def waiting(state: SchedulerState) -> float:
    """`placer_volume_binds_waiting`: pods in VolumeBinding's PreBind now."""
    [line] = [line for line in state.metrics.render().splitlines() if line.startswith("placer_volume_binds_waiting ")]
    return float(line.split()[1])


def notes(kube: FakeKube) -> list[str]:
    return [event["note"] for event in kube.events if event["reason"] == "FailedScheduling"]


async def test_a_static_binding_is_written_then_the_pod_bound_once_the_claim_is(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    pv_version = kube.volumes["pv1"]["metadata"]["resourceVersion"]
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: kube.writes)
    [(plural, key, patch)] = kube.writes
    assert (plural, key) == ("persistentvolumes", "pv1")
    assert patch["metadata"] == {"resourceVersion": pv_version, "annotations": {BOUND_BY_CONTROLLER: "yes"}}
    ref = patch["spec"]["claimRef"]
    assert {k: ref[k] for k in ("apiVersion", "kind", "namespace", "name", "uid")} == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default", "name": "data",
        "uid": "uid-data"}
    await asyncio.sleep(0.1)
    assert kube.binds == []  # not before the claim is bound
    assert state.cluster.is_assumed("default/p") and requested_cpu(state) == 1000
    complete_binding(state, kube, "data", "pv1")
    await until(lambda: kube.binds)
    assert kube.binds == [("default/p", "n1")]
    assert state.metrics.volume_binds.get(result="bound") == 1
    assert notes(kube) == []


async def test_waiting_for_volumes_holds_no_bind_slot(running: Running) -> None:
    state, kube, _ = running  # one bind slot only
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: waiting(state) == 1)
    state.cache.observe_pod(pod("plain", cpu="1"))
    await until(lambda: kube.binds)
    assert kube.binds == [("default/plain", "n1")]
    complete_binding(state, kube, "data", "pv1")
    await until(lambda: len(kube.binds) == 2)


async def test_a_rejected_write_leaves_nothing_assumed(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    kube.write_status = 403
    slow_retries(state)
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: notes(kube))
    assert notes(kube)[0] == 'running PreBind plugin "VolumeBinding": HTTP 403 from the fake'
    assert kube.binds == []
    assert state.metrics.volume_binds.get(result="failed") >= 1
    await until(lambda: "default/p" not in state.cluster.pods)
    assert_nothing_held(state)
    assert state.cluster.catalog.get(PV, "pv1").claim is None  # the catalog shows the server's copy again
    # nominated to its node before PreBind (kube's NominatedNodeNameForExpectation), then, the binding
    # failed, nominated nowhere in the patch that writes its condition (kube's updatePod)
    [(_, nominated), (_, patch)] = kube.conditions
    assert nominated == {"status": {"nominatedNodeName": "n1"}, "metadata": {"uid": "uid-p"}}
    assert patch["status"]["nominatedNodeName"] is None
    condition = patch["status"]["conditions"][0]
    assert (condition["reason"], condition["message"]) == ("SchedulerError", notes(kube)[0])
    kube.write_status = None  # the next attempt goes through
    retry_now(state)
    await until(lambda: kube.volumes["pv1"]["spec"].get("claimRef"))
    complete_binding(state, kube, "data", "pv1")
    await until(lambda: kube.binds == [("default/p", "n1")])


async def test_an_unanswered_write_pauses_scheduling(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    kube.write_error = ApiError(0, "PATCH /api/v1/persistentvolumes/pv1: ClientConnectorError")
    slow_retries(state)
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: notes(kube))
    assert not state.api.up.is_set()
    await until(lambda: "default/p" not in state.cluster.pods)
    assert_nothing_held(state)


async def test_a_provisioner_that_never_answers_times_out_and_the_annotation_goes(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumeclaims", claim("data", FAST))
    version = kube.claims["default/data"]["metadata"]["resourceVersion"]
    slow_retries(state)
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: kube.writes)
    plural, key, patch = kube.writes[0]
    assert (plural, key) == ("persistentvolumeclaims", "default/data")
    assert patch == {"metadata": {"annotations": {SELECTED_NODE: "n1"}, "resourceVersion": version}}
    started = time.monotonic()
    await until(lambda: notes(kube), timeout=3)
    assert time.monotonic() - started >= 0.4  # the 0.5 s timeout
    assert notes(kube)[0] == ('running PreBind plugin "VolumeBinding": binding volumes: '
                              "timed out waiting for the condition")
    assert state.metrics.volume_binds.get(result="timeout") == 1
    await until(lambda: "default/p" not in state.cluster.pods)
    assert_nothing_held(state)
    # the annotation Placer set is removed (GET, then a merge patch with the claim's resourceVersion)
    assert len(kube.writes) == 2 and kube.writes[1][2]["metadata"]["annotations"] == {SELECTED_NODE: None}
    assert SELECTED_NODE not in (kube.claims["default/data"]["metadata"].get("annotations") or {})
    assert kube.binds == []
    retry_now(state)  # requeued: the next attempt asks the provisioner again
    await until(lambda: len(kube.writes) == 3)
    assert kube.writes[2][2]["metadata"]["annotations"] == {SELECTED_NODE: "n1"}


async def test_a_provisioner_that_gives_up_fails_at_once(running: Running) -> None:
    state, kube, _ = running
    state.options.pre_bind_timeout = 30.0
    slow_retries(state)
    put(state, kube, "persistentvolumeclaims", claim("data", FAST))
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: SELECTED_NODE in (kube.claims["default/data"]["metadata"].get("annotations") or {}))
    stored = kube.claims["default/data"]
    del stored["metadata"]["annotations"][SELECTED_NODE]  # the external-provisioner's "reschedule"
    stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1000)
    started = time.monotonic()
    observe(state, "persistentvolumeclaims", dict(stored))
    await until(lambda: notes(kube))
    assert time.monotonic() - started < 0.5  # woken by the claim's change, not by the timeout
    assert notes(kube)[0] == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "data"')
    await until(lambda: "default/p" not in state.cluster.pods)
    assert_nothing_held(state)


async def test_a_pod_deleted_during_the_wait_is_dropped_and_nothing_is_left(running: Running) -> None:
    state, kube, _ = running
    state.options.pre_bind_timeout = 30.0
    put(state, kube, "persistentvolumeclaims", claim("data", FAST))
    raw = pod_with("p", "data")
    state.cache.observe_pod(raw)
    await until(lambda: waiting(state) == 1 and kube.writes)
    started = time.monotonic()
    state.cache.pod_deleted(raw)
    await until(lambda: waiting(state) == 0)
    assert time.monotonic() - started < 0.5
    assert state.metrics.volume_binds.get(result="gone") == 1
    assert_nothing_held(state)
    assert SELECTED_NODE not in (kube.claims["default/data"]["metadata"].get("annotations") or {})
    await asyncio.sleep(0.2)
    assert kube.binds == [] and notes(kube) == [] and "default/p" not in state.queue


async def test_leadership_lost_during_the_wait_abandons_the_binding(running: Running) -> None:
    state, kube, _ = running
    state.options.pre_bind_timeout = 30.0
    put(state, kube, "persistentvolumeclaims", claim("data", FAST))
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: waiting(state) == 1 and kube.writes)
    state.leader = SimpleNamespace(is_leader=False)  # type: ignore[assignment]
    state._stopped_leading()
    await until(lambda: waiting(state) == 0, timeout=2)
    assert state.metrics.volume_binds.get(result="abandoned") == 1
    assert_nothing_held(state)
    assert SELECTED_NODE not in (kube.claims["default/data"]["metadata"].get("annotations") or {})
    assert kube.binds == [] and notes(kube) == []
    entry = state.queue.entry("default/p")
    assert entry is not None and entry.state == "active"  # left for the next term


async def test_stopping_abandons_the_waits(running: Running) -> None:
    state, kube, loop = running
    state.options.pre_bind_timeout = 30.0
    put(state, kube, "persistentvolumeclaims", claim("data", FAST))
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: waiting(state) == 1 and kube.writes)
    started = time.monotonic()
    await loop.drain(timeout=2.0)
    assert time.monotonic() - started < 1.0
    assert waiting(state) == 0 and state.metrics.volume_binds.get(result="abandoned") == 1
    assert_nothing_held(state)
    assert SELECTED_NODE not in (kube.claims["default/data"]["metadata"].get("annotations") or {})


async def test_a_volume_taken_meanwhile_is_a_conflict_and_never_given_twice(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    # someone else (another scheduler) takes the volume before our write lands
    kube.volumes["pv1"]["spec"]["claimRef"] = {"namespace": "other", "name": "theirs", "uid": "uid-theirs"}
    kube.volumes["pv1"]["metadata"]["resourceVersion"] = "999999"
    slow_retries(state)
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: notes(kube))
    assert notes(kube)[0].startswith('running PreBind plugin "VolumeBinding": Operation cannot be fulfilled')
    assert kube.volumes["pv1"]["spec"]["claimRef"]["name"] == "theirs"
    await until(lambda: "default/p" not in state.cluster.pods)
    assert_nothing_held(state)


async def test_a_second_pod_never_gets_the_volume_the_first_one_is_waiting_for(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("a"))
    put(state, kube, "persistentvolumeclaims", claim("b"))
    state.cache.observe_pod(pod_with("pa", "a"))
    await until(lambda: kube.writes)
    state.cache.observe_pod(pod_with("pb", "b"))
    await until(lambda: notes(kube))
    assert notes(kube)[0].startswith(
        "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind.")
    assert [key for plural, key, _ in kube.writes if plural == "persistentvolumes"] == ["pv1"]
    assert kube.volumes["pv1"]["spec"]["claimRef"]["name"] == "a"


async def test_a_write_that_landed_before_its_conflict_counts_as_written(running: Running) -> None:
    state, kube, _ = running
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    # our first attempt landed, its answer lost, its watch event not here yet: the retry gets a 409
    stored = kube.volumes["pv1"]
    stored["spec"]["claimRef"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default",
                                  "name": "data", "uid": "uid-data"}
    stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1000)
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: kube.writes)
    await asyncio.sleep(0.1)
    assert notes(kube) == [] and state.cluster.is_assumed("default/p")
    observe(state, "persistentvolumes", dict(stored))  # the watch catches up
    complete_binding(state, kube, "data", "pv1")
    await until(lambda: kube.binds == [("default/p", "n1")])
    assert state.metrics.volume_binds.get(result="bound") == 1


async def test_the_catalog_shows_the_assumption_and_keeps_the_servers_copy(running: Running) -> None:
    state, kube, _ = running
    state.options.pre_bind_timeout = 30.0
    put(state, kube, "persistentvolumes", volume("pv1"))
    put(state, kube, "persistentvolumeclaims", claim("data"))
    kube.on_write = None  # the watch never echoes our write
    state.cache.observe_pod(pod_with("p", "data"))
    await until(lambda: kube.writes)
    catalog = state.cluster.catalog
    assert catalog.assumed(PV, "pv1") and catalog.get(PV, "pv1").claim == ("default", "data", "uid-data")
    assert catalog.server_copy(PV, "pv1").claim is None
    observe(state, "persistentvolumes", kube.volumes["pv1"])  # the watch echoes our write at last
    assert catalog.server_copy(PV, "pv1").claim == ("default", "data", "uid-data")
    assert not catalog.assumed(PV, "pv1")
