"""Placer's operator scenarios against a real control plane (etcd + kube-apiserver on loopback, no
kubelets: `../shared/realcluster/`), for a Kubernetes version built by `../shared/realcluster/build.sh`.

The emulator in `tests/` is what the suite runs against; this checks the same behaviours where
validation, defaulting, admission and the pod strategy are the real ones (v1.36 by default, v1.24
the oldest supported). One fresh control plane, `placer run --no-leader-elect` beside it, then:

- `bind`: a pod is bound, gets a `Scheduled` event and `PodScheduled=True`;
- `unschedulable`: a pod that fits nowhere gets one `FailedScheduling` event and the
  `PodScheduled=False, Unschedulable` condition with the same message;
- `pod-level`: a pod with `spec.resources.requests.cpu: "3"` and no container requests is not placed
  on a node with 2 cpu free, and is placed once a node with room appears;
- `gates`: a pod with `spec.schedulingGates` keeps the server's `SchedulingGated` condition (no
  event, no condition write, no bind) until its last gate is removed, then is bound (the delay is
  measured);
- `resize`: a bound pod scaled down in place whose kubelet still runs the old size
  (`PodResizeInProgress`) keeps its node full; once the resize is done, the room is used;
- `declared-features`: a pod with a `RestartAllContainers` restart rule only goes to a node
  declaring `RestartAllContainersOnContainerExits`;
- `reload`: a SchedulerProfile change applies to later pods (Ready's observedGeneration follows);
- `preemption`: a high-priority pod evicts a low-priority one (DisruptionTarget condition,
  Preempted event, nominatedNodeName) and is bound once the victim is gone (the script plays the
  kubelet and force-deletes the terminating victim);
- `dra`: Dynamic Resource Allocation (the script plays the DRA driver: a DeviceClass and one
  node's ResourceSlice with one GPU): a pod naming a claim is bound to that node, its claim carrying
  the finalizer `resource.kubernetes.io/delete-protection`, `status.allocation` and the pod in
  `status.reservedFor` — all validated by the real server — written before the binding; a second
  pod wanting the only GPU stays pending with "cannot allocate all claims". On a server without
  `resource.k8s.io/v1` (before v1.34), a pod naming a claim stays pending and says why.

On a server older than a feature, the scenario reports what the server did with the fields (a
v1.24 server drops `spec.resources`, `spec.schedulingGates`, the resize status and
`declaredFeatures`) and what Placer then did. Never part of `make test` or CI.

    python hack/real_check.py --kube-bin DIR [--only NAME ...] [--json FILE] [--port 16443]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "bench"))

from real_bench import Api, control_plane_down, control_plane_up, kube_version, port_free  # noqa: E402

NS = "check"
SCHEDULER = "placer"
Obj = dict[str, Any]
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


class Failed(AssertionError):
    """A scenario's expectation that the real server and Placer did not meet."""


def expect(condition: Any, message: str) -> None:
    if not condition:
        raise Failed(message)


class Check:
    """The control plane's client, the minor version, and helpers the scenarios share."""

    def __init__(self, api: Api, minor: int) -> None:
        self.api = api
        self.minor = minor

    async def node(self, name: str, cpu: str, *, labels: dict[str, str] | None = None,
                   declared: list[str] | None = None) -> Obj:
        alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
        await self.api.call("POST", "/api/v1/nodes", {"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "check": name.split("-")[0], **(labels or {})}}})
        status: Obj = {"capacity": alloc, "allocatable": alloc, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
             "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]}
        if declared is not None:
            status["declaredFeatures"] = sorted(declared)
        return await self.api.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": status},
                                   "application/merge-patch+json")

    async def pod(self, name: str, *, cpu: str | None = "100m", scheduler: str = SCHEDULER,
                  group: str | None = None, spec: Obj | None = None, node: str | None = None,
                  labels: dict[str, str] | None = None) -> Obj:
        """A one-container pod, kept to the nodes labelled `check=<group>` (default: the name's
        first dash-separated word), so scenarios do not meet."""
        container: Obj = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
        if cpu is not None:
            container["resources"] = {"requests": {"cpu": cpu}}
        body: Obj = {"metadata": {"name": name, "namespace": NS, "labels": labels or {}}, "spec": {
            "schedulerName": scheduler, "containers": [container],
            "nodeSelector": {"check": group or name.split("-")[0]}, **(spec or {})}}
        if node:
            body["spec"]["nodeName"] = node
        return await self.api.call("POST", f"/api/v1/namespaces/{NS}/pods", body)

    async def get(self, name: str) -> Obj:
        return await self.api.call("GET", f"/api/v1/namespaces/{NS}/pods/{name}")

    async def node_of(self, name: str) -> str | None:
        pod = await self.api.call("GET", f"/api/v1/namespaces/{NS}/pods/{name}", allow_missing=True)
        return None if not pod else (pod.get("spec") or {}).get("nodeName")

    async def events(self, name: str, reason: str | None = None) -> list[Obj]:
        found = await self.api.call("GET", f"/api/v1/namespaces/{NS}/events?fieldSelector="
                                           f"involvedObject.name={name}")
        return [e for e in found.get("items") or [] if reason is None or e.get("reason") == reason]

    async def condition(self, name: str, kind: str = "PodScheduled") -> Obj | None:
        pod = await self.get(name)
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == kind:
                return cond
        return None

    async def failed_not_bound(self, name: str, timeout: float = 10) -> str:
        """The pod's FailedScheduling message; fails if it is bound instead."""
        async def either() -> Any:
            node = await self.node_of(name)
            if node:
                raise Failed(f"{name} was bound to {node}")
            events = await self.events(name, "FailedScheduling")
            return events[0]["message"] if events else None
        return await self.until(either, timeout, f"{name}: FailedScheduling")

    async def until(self, what: Callable[[], Awaitable[Any]], timeout: float, label: str,
                    interval: float = 0.02) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = await what()
            if found:
                return found
            if time.monotonic() > deadline:
                raise Failed(f"{label}: not within {timeout:g} s")
            await asyncio.sleep(interval)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ----------------------------------------------------------------- scenarios


async def bind(c: Check) -> Obj:
    await c.node("bind-1", "4")
    start = time.monotonic()
    await c.pod("bind-a")
    node = await c.until(lambda: c.node_of("bind-a"), 10, "bind-a bound")
    took = time.monotonic() - start
    expect(node == "bind-1", f"bound to {node}")
    events = await c.until(lambda: c.events("bind-a", "Scheduled"), 5, "Scheduled event")
    expect([e["message"] for e in events] == [f"Successfully assigned {NS}/bind-a to bind-1"],
           f"Scheduled events: {[e['message'] for e in events]}")
    cond = await c.condition("bind-a")
    expect(cond is not None and cond["status"] == "True", f"PodScheduled: {cond}")
    return {"bound_s": round(took, 3), "event": events[0]["message"],
            "reporting": events[0].get("reportingComponent")}


async def unschedulable(c: Check) -> Obj:
    await c.node("unsched-1", "1")
    await c.pod("unsched-a", cpu="8")
    events = await c.until(lambda: c.events("unsched-a", "FailedScheduling"), 10, "FailedScheduling")
    message = events[0]["message"]
    expect("Insufficient cpu" in message, f"FailedScheduling: {message}")
    cond = await c.until(lambda: c.condition("unsched-a"), 5, "PodScheduled condition")
    expect((cond["status"], cond.get("reason"), cond.get("message")) == ("False", "Unschedulable", message),
           f"condition: {cond}")
    await asyncio.sleep(2.0)  # retried meanwhile: still one event object
    again = await c.events("unsched-a", "FailedScheduling")
    expect(len(again) == 1, f"{len(again)} FailedScheduling events")
    return {"message": message}


async def pod_level(c: Check) -> Obj:
    await c.node("level-1", "2")
    await c.pod("level-a", cpu=None, spec={"resources": {"requests": {"cpu": "3"}}})
    stored = await c.get("level-a")
    kept = "resources" in stored["spec"]
    if not kept:  # an API server without PodLevelResources dropped the field
        node = await c.until(lambda: c.node_of("level-a"), 10, "level-a bound")
        return {"server": "dropped spec.resources", "placer": f"bound to {node} by its container requests"}
    message = await c.failed_not_bound("level-a")
    expect("Insufficient cpu" in message, f"FailedScheduling: {message}")
    expect(await c.node_of("level-a") is None, "placed on a node with 2 cpu free")
    await c.node("level-2", "4")
    node = await c.until(lambda: c.node_of("level-a"), 10, "level-a bound once a 4-cpu node is there")
    expect(node == "level-2", f"bound to {node}")
    return {"server": "kept spec.resources", "message": message, "then": f"bound to {node}"}


async def gates(c: Check) -> Obj:
    await c.node("gates-1", "4")
    await c.pod("gates-a", spec={"schedulingGates": [{"name": "example.com/one"}, {"name": "example.com/two"}]})
    stored = await c.get("gates-a")
    if not stored["spec"].get("schedulingGates"):
        node = await c.until(lambda: c.node_of("gates-a"), 10, "gates-a bound")
        return {"server": "dropped spec.schedulingGates", "placer": f"bound to {node} at once"}
    cond = await c.condition("gates-a")
    expect(cond is not None and (cond["status"], cond.get("reason"), cond.get("message")) == (
        "False", "SchedulingGated", GATED_MESSAGE), f"server's condition: {cond}")
    await c.pod("gates-b")  # Placer at work meanwhile
    await c.until(lambda: c.node_of("gates-b"), 10, "gates-b bound")
    await asyncio.sleep(3.0)
    expect(await c.node_of("gates-a") is None, "a gated pod was bound")
    expect(await c.events("gates-a") == [], "events about a gated pod")
    expect(await c.condition("gates-a") == cond, f"condition changed: {await c.condition('gates-a')}")
    path = f"/api/v1/namespaces/{NS}/pods/gates-a"
    merge = "application/merge-patch+json"
    refused = await c.api.call("PATCH", path, {"spec": {"schedulingGates": [
        {"name": "example.com/one"}, {"name": "example.com/two"}, {"name": "example.com/three"}]}}, merge,
        allow_status=(422,))
    expect(refused.get("code") == 422, f"adding a gate: {refused}")
    await c.api.call("PATCH", path, {"spec": {"schedulingGates": [{"name": "example.com/two"}]}}, merge)
    await asyncio.sleep(1.5)
    expect(await c.node_of("gates-a") is None, "bound with a gate left")
    opened = time.monotonic()
    await c.api.call("PATCH", path, {"spec": {"schedulingGates": None}}, merge)
    node = await c.until(lambda: c.node_of("gates-a"), 10, "gates-a bound after its last gate")
    took = time.monotonic() - opened
    expect(took < 2.0, f"bound {took:.2f} s after the last gate went")
    events = await c.until(lambda: c.events("gates-a", "Scheduled"), 5, "Scheduled event")
    return {"server": "SchedulingGated condition on create; gate addition refused (422)",
            "bound_after_last_gate_s": round(took, 3), "node": node, "events": len(events),
            "refusal": refused.get("message", "")[:160]}


async def resize(c: Check) -> Obj:
    await c.node("resize-1", "4")
    await c.pod("resize-a", cpu="3", node="resize-1")
    path = f"/api/v1/namespaces/{NS}/pods/resize-a"
    merge = "application/merge-patch+json"
    body = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}}
    answer = await c.api.call("PATCH", path + "/resize", body, merge, allow_status=(404, 422))
    if answer.get("code") in (404, 422):
        return {"server": f"no pods/resize ({answer.get('code')}): in-place resize unknown to this version"}
    # the kubelet: allocated 1, still running with 3, resize in progress
    status = {"phase": "Running", "containerStatuses": [{
        "name": "main", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": True,
        "restartCount": 0, "started": True, "state": {"running": {"startedAt": _now()}},
        "allocatedResources": {"cpu": "1"}, "resources": {"requests": {"cpu": "3"}}}],
        "conditions": [{"type": "PodResizeInProgress", "status": "True", "lastTransitionTime": _now()}]}
    await c.api.call("PATCH", path + "/status", {"status": status}, merge)
    kept = (await c.get("resize-a"))["status"]["containerStatuses"][0]
    expect(kept.get("allocatedResources") == {"cpu": "1"}, f"status kept: {kept}")
    await c.pod("resize-b", cpu="2")
    message = await c.failed_not_bound("resize-b")
    expect("Insufficient cpu" in message, message)
    done = {"containerStatuses": [{**status["containerStatuses"][0], "resources": {"requests": {"cpu": "1"}}}],
            "conditions": [{"type": "PodResizeInProgress", "status": "False", "lastTransitionTime": _now()}]}
    # a strategic merge would keep the old condition; replace the conditions of the status as a kubelet
    await c.api.call("PATCH", path + "/status", [
        {"op": "replace", "path": "/status/containerStatuses", "value": done["containerStatuses"]},
        {"op": "replace", "path": "/status/conditions", "value": []}], "application/json-patch+json")
    start = time.monotonic()
    node = await c.until(lambda: c.node_of("resize-b"), 10, "resize-b bound once the resize is done")
    return {"server": "pods/resize and the resize status accepted", "while_in_progress": message,
            "after_done": f"bound to {node} in {time.monotonic() - start:.2f} s"}


async def declared_features(c: Check) -> Obj:
    feature = "RestartAllContainersOnContainerExits"
    await c.node("features-1", "4")
    node = await c.node("features-2", "4", declared=[feature])
    declared = (node.get("status") or {}).get("declaredFeatures")
    rule = {"restartPolicy": "Never", "restartPolicyRules": [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}
    body: Obj = {"metadata": {"name": "features-a", "namespace": NS}, "spec": {
        "schedulerName": SCHEDULER, "nodeSelector": {"check": "features"},
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", **rule}]}}
    created = await c.api.call("POST", f"/api/v1/namespaces/{NS}/pods", body, allow_status=(422,))
    if created.get("code") == 422:
        return {"server": f"refused the restart rule: {created.get('message', '')[:200]}",
                "declaredFeatures": declared}
    kept = (created["spec"]["containers"][0]).get("restartPolicyRules")
    node_name = await c.until(lambda: c.node_of("features-a"), 10, "features-a bound")
    if not declared or not kept:
        return {"server": f"declaredFeatures {declared!r}, restartPolicyRules {'kept' if kept else 'dropped'}",
                "placer": f"bound to {node_name}"}
    expect(node_name == "features-2", f"bound to {node_name}, which does not declare {feature}")
    return {"server": "kept declaredFeatures and the restart rule", "placer": f"bound to {node_name}"}


async def reload(c: Check) -> Obj:
    await c.node("reload-1", "4")
    await c.node("reload-2", "4")
    path = "/apis/placer.dev/v1alpha1/schedulerprofiles"

    def prefer(node: str) -> Obj:
        return {"schedulerName": "placer-reload", "scores": [{"name": "PreferNode", "weight": 100,
                                                              "args": {"nodes": [node]}}]}

    await c.api.call("POST", path, {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                    "metadata": {"name": "reload"}, "spec": prefer("reload-1")})

    async def ready(generation: int) -> bool:
        obj = await c.api.call("GET", f"{path}/reload")
        status = obj.get("status") or {}
        conds = [x for x in status.get("conditions") or [] if x.get("type") == "Ready"]
        return bool(conds and conds[0].get("status") == "True" and status.get("observedGeneration") == generation)

    await c.until(lambda: ready(1), 10, "profile Ready (generation 1)")
    await c.pod("reload-a", scheduler="placer-reload")
    first = await c.until(lambda: c.node_of("reload-a"), 10, "reload-a bound")
    await c.api.call("PATCH", f"{path}/reload", {"spec": prefer("reload-2")}, "application/merge-patch+json")
    start = time.monotonic()
    await c.until(lambda: ready(2), 10, "profile Ready (generation 2)")
    took = time.monotonic() - start
    await c.pod("reload-b", scheduler="placer-reload")
    second = await c.until(lambda: c.node_of("reload-b"), 10, "reload-b bound")
    expect((first, second) == ("reload-1", "reload-2"), f"bound to {first}, then {second}")
    return {"before": first, "after": second, "reloaded_s": round(took, 3)}


async def preemption(c: Check) -> Obj:
    await c.node("preempt-1", "2")
    for name, value in (("check-low", 10), ("check-high", 1000)):
        await c.api.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                         {"metadata": {"name": name}, "value": value})
    await c.pod("preempt-low", cpu="2", spec={"priorityClassName": "check-low"})
    await c.until(lambda: c.node_of("preempt-low"), 10, "preempt-low bound")
    await c.pod("preempt-high", cpu="2", spec={"priorityClassName": "check-high"})
    nominated: list[str] = []

    async def victim_terminating() -> bool:
        pod = await c.api.call("GET", f"/api/v1/namespaces/{NS}/pods/preempt-low", allow_missing=True)
        high = await c.get("preempt-high")
        if (high.get("status") or {}).get("nominatedNodeName"):
            nominated.append(high["status"]["nominatedNodeName"])
        return not pod or bool(pod["metadata"].get("deletionTimestamp"))

    await c.until(victim_terminating, 15, "the victim deleted")
    victim = await c.api.call("GET", f"/api/v1/namespaces/{NS}/pods/preempt-low", allow_missing=True)
    conditions = {x["type"]: x for x in ((victim or {}).get("status") or {}).get("conditions") or []}
    target = conditions.get("DisruptionTarget") or {}
    # the kubelet's part: the containers stopped, the pod goes
    if victim:
        await c.api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/preempt-low",
                         {"gracePeriodSeconds": 0}, allow_missing=True)
    node = await c.until(lambda: c.node_of("preempt-high"), 15, "preempt-high bound")
    events = await c.events("preempt-low", "Preempted")
    expect(node == "preempt-1", f"preemptor bound to {node}")
    expect(target.get("reason") == "PreemptionByScheduler", f"DisruptionTarget: {target}")
    expect(events and events[0]["message"] == f"Preempted by {NS}/preempt-high on node preempt-1",
           f"Preempted events: {[e['message'] for e in events]}")
    after = (await c.get("preempt-high"))["status"].get("nominatedNodeName")
    return {"nominated": nominated[0] if nominated else None, "victim_condition": target.get("reason"),
            "event": events[0]["message"], "nominatedNodeName_after_binding": after}


DRA = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.check.example.com"


async def dra(c: Check) -> Obj:
    await c.node("dra-1", "4")
    await c.node("dra-2", "4")
    served = await c.api.call("GET", DRA, allow_missing=True)
    claim_spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "check-gpu"}}]}}
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "dra-a"}]}
    if served is None:  # before v1.34: the pod keeps spec.resourceClaims only where the beta API is on
        stored = await c.pod("dra-a", spec=spec)
        if not stored["spec"].get("resourceClaims"):
            node = await c.until(lambda: c.node_of("dra-a"), 10, "dra-a bound")
            return {"server": "no resource.k8s.io/v1; dropped spec.resourceClaims", "placer": f"bound to {node}"}
        message = await c.failed_not_bound("dra-a")
        expect("does not serve resource.k8s.io/v1" in message, f"FailedScheduling: {message}")
        return {"server": "no resource.k8s.io/v1", "message": message}
    await c.api.call("POST", f"{DRA}/deviceclasses", {"metadata": {"name": "check-gpu"}, "spec": {
        "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    await c.api.call("POST", f"{DRA}/resourceslices", {"metadata": {"name": "dra-1-gpus"}, "spec": {
        "driver": DRIVER, "nodeName": "dra-1", "pool": {"name": "dra-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]}})
    for name in ("dra-a", "dra-b"):
        await c.api.call("POST", f"{DRA}/namespaces/{NS}/resourceclaims", {"metadata": {"name": name},
                                                                          "spec": claim_spec})
    start = time.monotonic()
    pod = await c.pod("dra-a", spec=spec)
    node = await c.until(lambda: c.node_of("dra-a"), 15, "dra-a bound")
    took = time.monotonic() - start
    expect(node == "dra-1", f"bound to {node}, which has no GPU")
    claim = await c.api.call("GET", f"{DRA}/namespaces/{NS}/resourceclaims/dra-a")
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    expect("resource.kubernetes.io/delete-protection" in (claim["metadata"].get("finalizers") or []),
           f"claim finalizers: {claim['metadata'].get('finalizers')}")
    expect([(r["driver"], r["pool"], r["device"]) for r in results] == [(DRIVER, "dra-1", "gpu-0")],
           f"allocation: {status.get('allocation')}")
    expect([r.get("uid") for r in status.get("reservedFor") or []] == [pod["metadata"]["uid"]],
           f"reservedFor: {status.get('reservedFor')}")
    await c.pod("dra-b", spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "dra-b"}]})
    message = await c.failed_not_bound("dra-b")
    expect("2 cannot allocate all claims" in message, f"FailedScheduling: {message}")
    await asyncio.sleep(2.0)
    expect(await c.node_of("dra-b") is None, "dra-b was bound without a device")
    other = await c.api.call("GET", f"{DRA}/namespaces/{NS}/resourceclaims/dra-b")
    expect(not (other.get("status") or {}).get("allocation"), f"dra-b allocated: {other.get('status')}")
    return {"bound_s": round(took, 3), "allocation": results, "node_selector":
            (status.get("allocation") or {}).get("nodeSelector"), "second_pod": message}


PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2"
COSCHEDULING = "/apis/scheduling.x-k8s.io/v1alpha1"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
# scheduler-plugins' PodGroup CRD (config/crd/bases/scheduling.x-k8s.io_podgroups.yaml), cut to
# the fields Placer reads: spec.minMember, spec.scheduleTimeoutSeconds, spec.minResources, status.phase
COSCHEDULING_CRD = HERE / "scheduler-plugins-podgroup-crd.yaml"
GANG_SCENARIOS = ("gang-quorum", "gang-late", "gang-room", "gang-extras", "gang-compete", "gang-basic",
                  "gang-coscheduling")
#: the v1.36 API server's flags that serve the alpha gang API
GANG_APISERVER_ARGS = ("--feature-gates=GenericWorkload=true,GangScheduling=true "
                       "--runtime-config=scheduling.k8s.io/v1alpha2=true")


async def gang_served(c: Check) -> bool:
    found = await c.api.call("GET", PODGROUPS, allow_missing=True)
    return bool(found) and any(r.get("name") == "podgroups" for r in found.get("resources") or [])


async def pod_group(c: Check, name: str, min_count: int | None) -> Obj:
    """An upstream PodGroup: a gang of `min_count`, or a basic group (None)."""
    policy: Obj = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return await c.api.call("POST", f"{PODGROUPS}/namespaces/{NS}/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"schedulingPolicy": policy}})


async def member(c: Check, name: str, group: str, cpu: str = "1") -> Obj:
    """A pod of an upstream PodGroup, kept to the nodes labelled with its name's first word."""
    return await c.pod(name, cpu=cpu, spec={"schedulingGroup": {"podGroupName": group}})


async def group_condition(c: Check, name: str) -> Obj | None:
    group = await c.api.call("GET", f"{PODGROUPS}/namespaces/{NS}/podgroups/{name}")
    return next((x for x in (group.get("status") or {}).get("conditions") or []
                 if x.get("type") == "PodGroupScheduled"), None)


async def bound_all(c: Check, names: list[str], timeout: float = 15) -> dict[str, str]:
    async def nodes() -> dict[str, str] | None:
        found = {n: await c.node_of(n) for n in names}
        return found if all(found.values()) else None
    return await c.until(nodes, timeout, f"{', '.join(names)} bound")


async def bind_times(c: Check, names: list[str]) -> float:
    """The spread of the pods' PodScheduled=True times (s): how close together a gang was bound."""
    times = []
    for name in names:
        cond = await c.condition(name)
        expect(cond is not None and cond["status"] == "True", f"{name} PodScheduled: {cond}")
        times.append(time.mktime(time.strptime(cond["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")))
    return max(times) - min(times)


async def quiet(c: Check, names: list[str], seconds: float, label: str) -> None:
    """None of the pods is bound, nor gets an event or a condition, for `seconds`: they wait."""
    await asyncio.sleep(seconds)
    for name in names:
        expect(await c.node_of(name) is None, f"{label}: {name} was bound")
        expect(await c.events(name) == [], f"{label}: events about {name}: "
                                            f"{[e['message'] for e in await c.events(name)]}")
        expect(await c.condition(name) is None, f"{label}: {name} has {await c.condition(name)}")


async def delete_group(c: Check, path: str) -> None:
    """Delete a PodGroup as its controller would: the server adds `scheduling.k8s.io/podgroup-protection`
    and nothing on this control plane removes it, so the script does."""
    await c.api.call("DELETE", path, allow_missing=True)
    found = await c.api.call("GET", path, allow_missing=True)
    if found and found["metadata"].get("finalizers"):
        await c.api.call("PATCH", path, {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    await c.until(lambda: _missing(c, path), 10, f"{path} gone")


async def _missing(c: Check, path: str) -> bool:
    return await c.api.call("GET", path, allow_missing=True) is None


async def gang_quorum(c: Check) -> Obj:
    if not await gang_served(c):
        return {"server": "no scheduling.k8s.io/v1alpha2 podgroups"}
    await c.node("quorum-1", "2")
    await c.node("quorum-2", "2")
    created = await pod_group(c, "quorum", 3)
    names = ["quorum-a", "quorum-b", "quorum-c"]
    for name in names[:2]:
        await member(c, name, "quorum")
    await quiet(c, names[:2], 2.0, "2 of minCount 3")
    start = time.monotonic()
    await member(c, names[2], "quorum")
    nodes = await bound_all(c, names)
    took = time.monotonic() - start
    spread = await bind_times(c, names)
    cond = await c.until(lambda: group_condition(c, "quorum"), 5, "PodGroupScheduled")
    expect((cond["status"], cond["reason"]) == ("True", "Scheduled"), f"PodGroupScheduled: {cond}")
    return {"finalizers": created["metadata"].get("finalizers"), "bound_s": round(took, 3),
            "bind_spread_s": spread, "nodes": sorted(nodes.values()), "condition": cond}


async def gang_late(c: Check) -> Obj:
    if not await gang_served(c):
        return {"server": "no scheduling.k8s.io/v1alpha2 podgroups"}
    await c.node("late-1", "4")
    names = ["late-a", "late-b"]
    for name in names:
        await member(c, name, "late")
    await quiet(c, names, 2.0, "no PodGroup yet")
    start = time.monotonic()
    await pod_group(c, "late", 2)
    await bound_all(c, names)
    took = time.monotonic() - start
    # the group deleted (the script plays the PodGroup protection controller): a new member waits again
    await delete_group(c, f"{PODGROUPS}/namespaces/{NS}/podgroups/late")
    await member(c, "late-c", "late")
    await quiet(c, ["late-c"], 2.0, "PodGroup deleted")
    await pod_group(c, "late", 1)
    await bound_all(c, ["late-c"])
    return {"bound_after_group_s": round(took, 3), "after_delete": "a new member waited, bound once re-created"}


async def gang_room(c: Check) -> Obj:
    if not await gang_served(c):
        return {"server": "no scheduling.k8s.io/v1alpha2 podgroups"}
    await c.node("room-1", "2")
    await pod_group(c, "room", 3)
    names = ["room-a", "room-b", "room-c"]
    for name in names:
        await member(c, name, "room")
    messages = {name: await c.failed_not_bound(name) for name in names}
    for name in names:
        cond = await c.until(lambda n=name: c.condition(n), 5, f"{name} PodScheduled")
        expect((cond["status"], cond.get("reason")) == ("False", "Unschedulable"), f"{name}: {cond}")
    group = await c.until(lambda: group_condition(c, "room"), 5, "PodGroupScheduled")
    expect((group["status"], group["reason"]) == ("False", "Unschedulable"), f"PodGroupScheduled: {group}")
    await asyncio.sleep(2.0)
    for name in names:
        expect(await c.node_of(name) is None, f"partial gang: {name} bound")
    start = time.monotonic()
    await c.node("room-2", "4")
    nodes = await bound_all(c, names)
    took = time.monotonic() - start
    after = await c.until(lambda: _true(c, "room"), 5, "PodGroupScheduled True")
    return {"messages": sorted(set(messages.values())), "group_while_unschedulable": group,
            "bound_after_node_s": round(took, 3), "nodes": sorted(nodes.values()), "then": after}


async def _true(c: Check, name: str) -> Obj | None:
    cond = await group_condition(c, name)
    return cond if cond and cond["status"] == "True" else None


async def gang_extras(c: Check) -> Obj:
    if not await gang_served(c):
        return {"server": "no scheduling.k8s.io/v1alpha2 podgroups"}
    await c.node("extras-1", "3")
    await pod_group(c, "extras", 2)
    names = [f"extras-{x}" for x in "abcd"]
    for name in names:
        await member(c, name, "extras")

    async def three() -> list[str] | None:
        found = [n for n in names if await c.node_of(n)]
        return found if len(found) == 3 else None
    bound = await c.until(three, 15, "3 of 4 bound")
    left = next(n for n in names if n not in bound)
    message = await c.failed_not_bound(left)
    expect("Insufficient cpu" in message, f"{left}: {message}")
    await asyncio.sleep(1.0)
    expect(await c.node_of(left) is None, f"{left} bound without room")
    return {"bound": len(bound), "pending": left, "message": message}


async def gang_compete(c: Check) -> Obj:
    if not await gang_served(c):
        return {"server": "no scheduling.k8s.io/v1alpha2 podgroups"}
    await c.node("compete-1", "4")
    gangs = {"compete-x": ["compete-x-a", "compete-x-b"], "compete-y": ["compete-y-a", "compete-y-b"]}
    for group in gangs:
        await pod_group(c, group, 2)
    for pair in zip(*gangs.values(), strict=True):  # interleaved: each gang's pods arrive in turns
        for name in pair:
            await member(c, name, name.rsplit("-", 1)[0], cpu="2")

    async def settled() -> dict[str, list[str]] | None:
        found = {g: [n for n in names if await c.node_of(n)] for g, names in gangs.items()}
        return found if sum(len(v) for v in found.values()) == 2 else None
    found = await c.until(settled, 15, "one gang bound")
    whole = [g for g, names in found.items() if len(names) == 2]
    expect(len(whole) == 1, f"bound: {found}")
    loser = next(g for g in gangs if g not in whole)
    messages = [await c.failed_not_bound(n) for n in gangs[loser]]
    await asyncio.sleep(2.0)
    expect(not any([await c.node_of(n) for n in gangs[loser]]), f"{loser} partly bound")
    cond = await c.until(lambda: group_condition(c, loser), 5, f"{loser} PodGroupScheduled")
    expect((cond["status"], cond["reason"]) == ("False", "Unschedulable"), f"{loser}: {cond}")
    return {"whole": whole[0], "none": loser, "messages": sorted(set(messages))}


async def gang_basic(c: Check) -> Obj:
    if not await gang_served(c):
        return {"server": "no scheduling.k8s.io/v1alpha2 podgroups"}
    await c.node("basic-1", "2")
    names = ["basic-a", "basic-b", "basic-c"]
    for name in names:
        await member(c, name, "basic")
    await quiet(c, names, 1.5, "basic group not there yet")
    await pod_group(c, "basic", None)

    async def two() -> list[str] | None:
        found = [n for n in names if await c.node_of(n)]
        return found if len(found) == 2 else None
    bound = await c.until(two, 15, "2 of 3 bound")
    left = next(n for n in names if n not in bound)
    message = await c.failed_not_bound(left)
    expect("Insufficient cpu" in message, f"{left}: {message}")
    cond = await c.until(lambda: _true(c, "basic"), 5, "PodGroupScheduled True")
    return {"bound": len(bound), "pending": left, "message": message, "condition": cond}


async def gang_coscheduling(c: Check) -> Obj:
    served = await c.api.call("GET", COSCHEDULING, allow_missing=True)
    expect(served is not None, "scheduler-plugins' PodGroup CRD not served")
    await c.node("cosched-1", "2")
    path = f"{COSCHEDULING}/namespaces/{NS}/podgroups"
    names = ["cosched-a", "cosched-b", "cosched-c"]

    async def labelled(name: str) -> Obj:
        return await c.pod(name, cpu="1", spec={}, labels={COSCHEDULING_LABEL: "cosched"})
    await c.api.call("POST", path, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                    "metadata": {"name": "cosched"},
                                    "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30}})
    for name in names[:2]:
        await labelled(name)
    await quiet(c, names[:2], 2.0, "2 of minMember 3")
    await labelled(names[2])  # room for two: none bound
    messages = {n: await c.failed_not_bound(n) for n in names}
    await asyncio.sleep(1.5)
    expect(not any([await c.node_of(n) for n in names]), "partial scheduler-plugins gang")
    await c.node("cosched-2", "2")
    nodes = await bound_all(c, names)
    group = await c.api.call("GET", f"{path}/cosched")
    expect(not (group.get("status") or {}).get("conditions"), f"status written: {group.get('status')}")
    return {"while_no_room": sorted(set(messages.values())), "nodes": sorted(nodes.values()),
            "status": group.get("status") or {}}


SCENARIOS: dict[str, Callable[[Check], Awaitable[Obj]]] = {
    "bind": bind, "unschedulable": unschedulable, "pod-level": pod_level, "gates": gates,
    "resize": resize, "declared-features": declared_features, "reload": reload, "preemption": preemption,
    "dra": dra, "gang-quorum": gang_quorum, "gang-late": gang_late, "gang-room": gang_room,
    "gang-extras": gang_extras, "gang-compete": gang_compete, "gang-basic": gang_basic,
    "gang-coscheduling": gang_coscheduling,
}


# ----------------------------------------------------------------- the run


def placer_command(source: Path | None) -> tuple[list[str], dict[str, str]]:
    """`placer run` of this checkout's .venv, or of another source tree (its `operator/` first on
    PYTHONPATH, with this .venv's packages), e.g. a `git archive` of a commit."""
    args = ["run", "--no-leader-elect", "--metrics-port", "0"]
    if source is None:
        return [str(ROOT / ".venv" / "bin" / "placer"), *args], {}
    code = "import sys; from placer.cli import main; sys.exit(main(sys.argv[1:]))"
    return [str(ROOT / ".venv" / "bin" / "python"), "-c", code, *args], {"PYTHONPATH": str(source / "operator")}


async def run(kube_bin: Path, names: list[str], port: int, keep_logs: Path | None,
              source: Path | None = None) -> dict[str, Any]:
    version = kube_version(kube_bin)
    minor = int(version.split(".")[1])
    if not port_free(2379) or not port_free(port):
        raise SystemExit(f"port 2379 (etcd) or {port} is taken: another control plane runs (realcluster.sh down?)")
    results: dict[str, Any] = {"kube_version": version, "scenarios": {}}
    gang = [name for name in names if name in GANG_SCENARIOS]
    if gang and minor >= 36:  # the alpha gang API (v1alpha2) is off unless asked for
        os.environ["RC_APISERVER_ARGS"] = " ".join(filter(None, (os.environ.get("RC_APISERVER_ARGS"),
                                                                 GANG_APISERVER_ARGS)))
    with tempfile.TemporaryDirectory(prefix="real-check-") as tmp:
        workdir = Path(tmp)
        state = workdir / "control-plane"
        kubeconfig = control_plane_up(kube_bin, state, port)
        api = Api(f"https://127.0.0.1:{port}")
        placer = None
        try:
            await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
            subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", str(ROOT / "crds")],
                           check=True, capture_output=True)
            subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "wait", "--for=condition=Established",
                            "crd/schedulerprofiles.placer.dev", "--timeout=60s"], check=True, capture_output=True)
            if "gang-coscheduling" in names:  # installed before Placer starts: found by its first discovery
                subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", str(COSCHEDULING_CRD)],
                               check=True, capture_output=True)
                subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "wait", "--for=condition=Established",
                                "crd/podgroups.scheduling.x-k8s.io", "--timeout=60s"], check=True,
                               capture_output=True)
            await api.call("POST", "/apis/placer.dev/v1alpha1/schedulerprofiles", {
                "apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "check"},
                "spec": {"schedulerName": SCHEDULER}})
            log = open(workdir / "placer.log", "wb")  # noqa: SIM115 - the child holds it
            command, extra_env = placer_command(source)
            placer = subprocess.Popen(
                command, env={**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "default", **extra_env},
                stdout=log, stderr=subprocess.STDOUT)
            await asyncio.sleep(3.0)
            check = Check(api, minor)
            for name in names:
                started = time.monotonic()
                try:
                    found = await SCENARIOS[name](check)
                    outcome = {"ok": True, **found}
                except Failed as err:
                    outcome = {"ok": False, "error": str(err)}
                except Exception as err:  # a scenario's crash is its failure, the others still run
                    outcome = {"ok": False, "error": f"{type(err).__name__}: {err}"}
                outcome["seconds"] = round(time.monotonic() - started, 2)
                results["scenarios"][name] = outcome
                mark = "ok  " if outcome["ok"] else "FAIL"
                detail = {k: v for k, v in outcome.items() if k not in ("ok", "seconds")}
                print(f"{mark} {name:18} {json.dumps(detail)}", flush=True)
        finally:
            if placer is not None:
                placer.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    placer.wait(10)
                if placer.poll() is None:
                    placer.kill()
            await api.close()
            control_plane_down(kube_bin, state, port)
            if keep_logs is not None:
                keep_logs.mkdir(parents=True, exist_ok=True)
                for name in ("placer.log", "control-plane/apiserver.log"):
                    if (workdir / name).exists():
                        (keep_logs / Path(name).name).write_bytes((workdir / name).read_bytes())
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-bin", type=Path, default=Path(os.environ["KUBE_BIN"]) if os.environ.get(
        "KUBE_BIN") else ROOT.parent / "kube-bin-1.36", help="folder of build.sh's binaries "
                        "(default: $KUBE_BIN, else ../kube-bin-1.36)")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="run these scenarios only")
    parser.add_argument("--port", type=int, default=16443, help="the API server's port (etcd: 2379)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--logs", type=Path, help="keep Placer's and the API server's logs in this folder")
    parser.add_argument("--placer-src", type=Path, metavar="DIR",
                        help="run the Placer of this source tree (e.g. a `git archive` of a commit) instead of "
                             "this checkout's")
    args = parser.parse_args()
    if not (args.kube_bin / "kube-apiserver").exists():
        parser.error(f"{args.kube_bin}: no kube-apiserver (build one with ../shared/realcluster/build.sh)")
    names = args.only or list(SCENARIOS)
    results = asyncio.run(run(args.kube_bin.resolve(), names, args.port, args.logs, args.placer_src))
    passed = sum(1 for r in results["scenarios"].values() if r["ok"])
    print(f"\n{results['kube_version']}: {passed}/{len(names)} scenarios passed")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if passed == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
