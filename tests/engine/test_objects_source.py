"""`PodSource`: the MODIFIED of a pod's binding recognised without a parse, giving exactly what
`parse_pod` gives for that version, and nothing when anything `parse_pod` reads changed."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from placer.engine.objects import PodInfo
from placer.engine.parsing import PodSource, parse_pod
from placer.testing import affinity_term, container, pod, spread_constraint

Obj = dict[str, Any]


def decoded(obj: Obj) -> Obj:
    """As a watch event gives it: decoded afresh, sharing nothing with earlier versions."""
    return json.loads(json.dumps(obj))


def bound_version(obj: Obj, node: str = "n1", version: str = "200") -> Obj:
    """What the API server sends after a pods/binding: nodeName set, a new resourceVersion, the
    PodScheduled condition, and what the scheduler never reads (managed fields, annotations)."""
    new = decoded(obj)
    new["metadata"]["resourceVersion"] = version
    new["metadata"]["managedFields"] = [{"manager": "kube-scheduler", "operation": "Update"}]
    new["metadata"]["annotations"] = {"note": "irrelevant"}
    new["spec"]["nodeName"] = node
    status = new.setdefault("status", {})
    status["conditions"] = [*status.get("conditions", []), {"type": "PodScheduled", "status": "True"}]
    return new


def source_of(obj: Obj) -> tuple[PodSource, PodInfo]:
    raw = decoded(obj)
    parsed = parse_pod(raw)
    source = PodSource.of(raw, parsed)
    assert source is not None
    return source, parsed


def with_meta(obj: Obj, version: str = "100") -> Obj:
    obj["metadata"].update(uid=f"uid-{obj['metadata']['name']}", resourceVersion=version,
                           creationTimestamp="2026-01-01T00:00:00Z")
    obj["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return obj


SHAPES: dict[str, Obj] = {
    "plain": with_meta(pod("plain", "500m", "256Mi", priority=0, labels={"app": "a"})),
    "no priority": with_meta(pod("bare", "100m")),
    "tolerations and selector": with_meta(pod(
        "tol", "1", priority=10, node_selector={"disk": "ssd"},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                     {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                      "tolerationSeconds": 300}])),
    "relations": with_meta(pod(
        "rel", "250m", priority=0, labels={"app": "web"},
        pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [
            affinity_term("kubernetes.io/hostname", {"app": "web"})]},
        spread=[spread_constraint(1, "topology.kubernetes.io/zone", match_labels={"app": "web"})],
        owner=("ReplicaSet", "web-1"))),
    "containers, sidecar, ports": with_meta(pod(
        "multi", priority=0, host_ports=[8080],
        containers=[container("a", "1", "1Gi", host_ports=[8080]), container("b", "500m")],
        init_containers=[container("side", "100m", restart_policy="Always"), container("init", "2")],
        overhead={"cpu": "50m"})),
    "volumes": with_meta(pod("vol", "100m", priority=0, claims=["data"])),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_bound_version_is_what_a_parse_gives(name: str) -> None:
    source, parsed = source_of(SHAPES[name])
    new = bound_version(SHAPES[name], node="n7", version="321")
    bound = source.bound(new)
    assert bound is not None
    assert bound == parse_pod(new)
    assert (bound.node_name, bound.resource_version) == ("n7", "321")
    assert parsed.node_name == "" and parsed.resource_version == "100"  # the parsed version is left alone


def test_a_pod_without_priority_is_left_to_resolve_as_after_a_parse() -> None:
    obj = SHAPES["no priority"]
    obj_policy = decoded(obj)
    obj_policy["spec"]["preemptionPolicy"] = "Never"
    for raw in (obj, obj_policy):
        source, parsed = source_of(raw)
        parsed.priority, parsed.preemption_policy = 1000, parsed.preemption_policy or "PreemptLowerPriority"
        new = bound_version(raw)
        assert source.bound(new) == parse_pod(new)  # priority 0 and the spec's policy: resolved again


def _set(path: str, value: Any) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        *parents, last = path.split(".")
        target = obj
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        target[last] = value
    return change


CHANGES: dict[str, Callable[[Obj], None]] = {
    "labels": _set("metadata.labels", {"app": "other"}),
    "labels added": _set("metadata.labels.extra", "x"),
    "uid": _set("metadata.uid", "another"),
    "deletion": _set("metadata.deletionTimestamp", "2026-01-01T00:05:00Z"),
    "created": _set("metadata.creationTimestamp", "2026-01-01T00:00:01Z"),
    "owner": _set("metadata.ownerReferences", [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r",
                                                "uid": "u", "controller": True}]),
    "image": _set("spec.containers.0.image", "other:2"),
    "requests": _set("spec.containers.0.resources.requests.cpu", "2"),
    "tolerations": _set("spec.tolerations", [{"key": "k", "operator": "Exists"}]),
    "priority": _set("spec.priority", 5),
    "scheduler name": _set("spec.schedulerName", "other"),
    "phase": _set("status.phase", "Running"),
    "start time": _set("status.startTime", "2026-01-01T00:02:00Z"),
    "nominated node": _set("status.nominatedNodeName", "n2"),
    "claim statuses": _set("status.resourceClaimStatuses", [{"name": "c", "resourceClaimName": "x"}]),
    "container statuses": _set("status.containerStatuses", [{"name": "main", "resources": {}}]),
    "status not an object": _set("status", ["broken"]),
    "preempted by a scheduler": _set("status.conditions", [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_anything_parse_pod_reads_changed_means_a_parse(change: str) -> None:
    source, _ = source_of(SHAPES["plain"])
    new = bound_version(SHAPES["plain"])
    CHANGES[change](new)
    assert source.bound(new) is None


def test_only_a_bound_version_is_recognised() -> None:
    obj = SHAPES["plain"]
    raw = decoded(obj)
    source = PodSource.of(raw, parse_pod(raw))
    assert source is not None
    unbound = decoded(obj)
    unbound["metadata"]["resourceVersion"] = "101"
    assert source.bound(unbound) is None  # not bound: a pending update is parsed
    empty_node = bound_version(obj, node="")
    assert source.bound(empty_node) is None
    reordered = bound_version(obj)  # the same fields in another order: parsed (texts differ), never wrong
    reordered["spec"] = dict(reversed(reordered["spec"].items()))
    assert source.bound(reordered) is None
    typed = bound_version(obj)  # 0 and false are equal in Python, not in JSON: parse_pod tells them apart
    typed["spec"]["priority"] = False
    assert source.bound(typed) is None
    raw["spec"]["nodeName"] = "n1"  # the same object changed in place: compared with what was read then
    raw["metadata"]["resourceVersion"] = "102"
    assert source.bound(raw) == parse_pod(raw)
    raw["spec"]["containers"][0]["image"] = "other:1"
    assert source.bound(raw) is None
    extra = bound_version(obj)
    extra["spec"]["hostname"] = "x"  # a spec field added besides nodeName
    assert source.bound(extra) is None


def test_no_source_for_pods_a_later_version_could_not_be_compared_with() -> None:
    bound = decoded(SHAPES["plain"])
    bound["spec"]["nodeName"] = "n1"
    resizing = decoded(SHAPES["plain"])
    resizing["status"]["containerStatuses"] = [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]
    invalid = copy.deepcopy(SHAPES["plain"])
    invalid["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    for raw in (bound, resizing, invalid):
        parsed = parse_pod(raw)
        assert PodSource.of(raw, parsed) is None
    assert parse_pod(invalid).error is not None
