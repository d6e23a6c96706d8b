"""A PodGroup's `spec.resourceClaims` (kube v1.36's DRAWorkloadResourceClaims): the group's claim is
allocated once for the whole group and reserved for the PodGroup (kube's `BindTo`,
`podGroupStateData.pendingAllocations`, `IsReservedForPod` with PodGroup reservations), through the
group decision of `placer.engine.gang`.

(`device_index` is imported through the plugin: importing `placer.engine.device_index` first would
load the plugin registry half-way through that module.)"""

from __future__ import annotations

from typing import Any

import pytest
from placer.engine.cluster import ClusterState
from placer.engine.devices import DELETE_PROTECTION, ResourceClaimInfo
from placer.engine.gang import Outcome, decide_group
from placer.engine.groups import POD_GROUP_V1ALPHA2, group_of
from placer.engine.kinds import document_kind, upsert_object
from placer.engine.objects import ObjectError
from placer.engine.parsing import parse_pod
from placer.engine.profile import compile_profile
from placer.engine.runtime import Scheduler
from placer.plugins.dynamic_resources import (
    DeviceReservation,
    DynamicResources,
    device_index,
    prebind_writes,
    settle,
)
from placer.testing import cluster_of, make_plugin, node
from placer.testing_devices import allocation, claim_pod, device, device_class, request, resource_claim, resource_slice

Obj = dict[str, Any]
CLAIM = "ResourceClaim"  # the catalog's kind
DRIVER, CLASS, SHARED = "gpu.example.com", "gpu", "shared-gpu"
GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "pg", "uid": "uid-pg"}
PROFILE = compile_profile("default", {"schedulerName": "placer"})


def pod_group(min_count: int, claims: list[Obj] | None = None, status: Obj | None = None) -> Obj:
    spec: Obj = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if claims is not None:
        spec["resourceClaims"] = claims
    obj: Obj = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "default", "uid": "uid-pg"}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


GROUP = pod_group(3, [{"name": "gpu", "resourceClaimName": SHARED}])


def member(name: str, cpu: str = "1", claims: dict[str, str] | None = None, **kwargs: Any) -> Obj:
    """A pod of `pg` whose entry `gpu` names the group's claim (as kube requires: the same entry)."""
    obj = claim_pod(name, claims={"gpu": SHARED} if claims is None else claims, uid=f"uid-{name}", **kwargs)
    obj["spec"]["containers"][0].setdefault("resources", {})["requests"] = {"cpu": cpu}
    obj["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    return obj


def state_of(*objects: Obj, group: Obj = GROUP, nodes: int = 3) -> ClusterState:
    """n1..n3 of 2 cpu; one device, on n2 only (a node-local GPU); the shared claim unallocated."""
    base = [device_class(CLASS), resource_slice("n2-gpu", DRIVER, node="n2", devices=[device("gpu-0")])]
    state = cluster_of([node(f"n{i}", cpu="2") for i in range(1, nodes + 1)], objects=[*base, *objects])
    kind = document_kind(group)
    assert kind is not None
    upsert_object(state.catalog, kind, group)
    return state


def shared_claim(**kwargs: Any) -> Obj:
    return resource_claim(SHARED, requests=[request("req-0", CLASS)], **kwargs)


def decide(state: ClusterState, pods: list[Obj]) -> Any:
    infos = [parse_pod(p) for p in pods]
    ref = group_of(infos[0])
    assert ref is not None
    return decide_group(Scheduler(), PROFILE, state, ref, infos)


def claim_in(state: ClusterState) -> ResourceClaimInfo:
    claim: ResourceClaimInfo = state.catalog.get(CLAIM, SHARED, "default")
    return claim


def reservation_of(decision: Any, index: int) -> DeviceReservation:
    found = decision.decisions[index].reservations["DynamicResources"]
    assert isinstance(found, DeviceReservation)
    return found


# ----------------------------------------------------------------- the PodGroup's claims


def test_group_claims_parsed_and_validated() -> None:
    statuses = {"resourceClaimStatuses": [{"name": "nic", "resourceClaimName": "pg-nic-x"}]}
    group = POD_GROUP_V1ALPHA2.parse(pod_group(2, [{"name": "gpu", "resourceClaimName": SHARED},
                                                   {"name": "nic", "resourceClaimTemplateName": "nic"}], statuses))
    assert [(c.name, c.claim_name, c.template_name, c.generated) for c in group.resource_claims] == [
        ("gpu", SHARED, None, None), ("nic", None, "nic", "pg-nic-x")]
    with pytest.raises(ObjectError, match="must specify exactly one of"):
        POD_GROUP_V1ALPHA2.parse(pod_group(2, [{"name": "x", "resourceClaimName": "a",
                                                "resourceClaimTemplateName": "b"}]))
    with pytest.raises(ObjectError, match="Too many: 5"):
        POD_GROUP_V1ALPHA2.parse(pod_group(2, [{"name": f"c{i}", "resourceClaimName": "a"} for i in range(5)]))
    # a server without the gate drops the field: nothing shared
    assert POD_GROUP_V1ALPHA2.parse(pod_group(2)).resource_claims == ()


# ----------------------------------------------------------------- allocated once for the group


def test_a_gang_shares_its_claim_allocated_once() -> None:
    """Three members, one node-local device: the first allocates it (on n2, the only node with it),
    the next two reuse that pending allocation — kube's pendingAllocations — and go where its node
    selector says. Without sharing they would read `in the process of being allocated`."""
    state = state_of(shared_claim())
    decision = decide(state, [member(f"m{i}", cpu="0.5", created=f"2026-01-01T00:0{i}:00Z") for i in range(3)])
    assert decision.outcome is Outcome.PLACED
    assert [d.node for d in decision.decisions] == ["n2", "n2", "n2"]
    first, *others = (reservation_of(decision, i).claims[0] for i in range(3))
    assert not first.shared and first.consumer.as_json() == GROUP_REF
    assert first.allocation is not None and first.allocation["nodeSelector"] is not None
    assert all(o.shared and o.allocation == first.allocation and o.consumer == first.consumer for o in others)
    assert [len(reservation_of(decision, i).as_json()) for i in range(3)] == [1, 0, 0]  # listed once
    claim = claim_in(state)
    assert claim.pending and claim.sharers == 3 and claim.pending_group == "PodGroup:default/pg"
    assert int(device_index(state).in_use.sum()) == 1


def test_a_pod_outside_the_group_still_waits_for_the_pending_allocation() -> None:
    state = state_of(shared_claim())
    decide(state, [member(f"m{i}", cpu="0.5") for i in range(3)])
    outsider = claim_pod("outsider", claims={"gpu": SHARED}, uid="uid-outsider")
    decision = Scheduler().schedule(parse_pod(outsider), PROFILE, state)
    assert decision.node is None
    assert decision.message == ("0/3 nodes are available: resource claim default/shared-gpu is in the process of "
                                "being allocated.")


def test_a_gang_that_fails_gives_the_claim_back() -> None:
    """minCount 3, but n2 (the device's node) has room for two: nothing is held, the claim is as
    the API server says again (no allocation, nothing in flight)."""
    state = state_of(shared_claim())
    decision = decide(state, [member(f"m{i}", cpu="1") for i in range(3)])
    assert decision.outcome is Outcome.UNSCHEDULABLE
    claim = claim_in(state)
    assert claim.allocation is None and not claim.pending and not state.catalog.assumed(CLAIM, SHARED, "default")
    assert int(device_index(state).in_use.sum()) == 0


def test_forgetting_one_member_keeps_the_allocation_for_the_others() -> None:
    """A member whose binding fails lets go of the pending allocation; the others still hold it
    (kube's in-flight sharers); the last one gives it back."""
    state = state_of(shared_claim())
    pods = [member(f"m{i}", cpu="0.5", created=f"2026-01-01T00:0{i}:00Z") for i in range(3)]
    decision = decide(state, pods)
    scheduler = Scheduler()
    infos = [parse_pod(p) for p in pods]
    scheduler.forget(infos[0], decision.decisions[0], PROFILE, state)
    assert claim_in(state).pending and claim_in(state).sharers == 2
    scheduler.forget(infos[2], decision.decisions[2], PROFILE, state)
    scheduler.forget(infos[1], decision.decisions[1], PROFILE, state)
    assert claim_in(state).allocation is None and not state.catalog.assumed(CLAIM, SHARED, "default")


def test_a_member_of_a_group_whose_claim_is_allocated_only_needs_its_node() -> None:
    """The claim allocated and reserved for the PodGroup (an earlier decision): a new member goes to
    the allocation's node and writes nothing — kube's PreBind skips a claim reserved for the group."""
    allocated = shared_claim(allocated=allocation([("req-0", DRIVER, "n2", "gpu-0")], node="n2"),
                             finalizers=[DELETE_PROTECTION])
    allocated["status"]["reservedFor"] = [dict(GROUP_REF)]
    state = state_of(allocated)
    plugin = make_plugin("DynamicResources")
    assert isinstance(plugin, DynamicResources)
    pod = parse_pod(member("late"))
    decision = Scheduler().schedule(pod, PROFILE, state)
    assert decision.node == "n2"
    assert plugin.reserve(pod, state, "n2") is None


def test_an_entry_that_differs_is_the_pods_own() -> None:
    """kube's BindTo: the same claim under another entry name is reserved for the pod."""
    state = state_of(shared_claim())
    plugin = make_plugin("DynamicResources")
    assert isinstance(plugin, DynamicResources)
    pod = parse_pod(member("solo", claims={"other-name": SHARED}))
    reservation = plugin.reserve(pod, state, "n2")
    assert reservation is not None
    assert reservation.claims[0].consumer.as_json() == {"resource": "pods", "name": "solo", "uid": "uid-solo"}


def test_a_template_claim_owned_by_the_podgroup() -> None:
    """A template's claim made for the PodGroup (its controller) is accepted for the member; one
    owned by someone else reads kube's `neither Pod nor PodGroup` message."""
    group = pod_group(1, [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
                      {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pg-gpu-abc"}]})
    owned = resource_claim("pg-gpu-abc", requests=[request("req-0", CLASS)])
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                                             "name": "pg", "uid": "uid-pg", "controller": True}]
    pod = claim_pod("m0", templates={"gpu": "gpu-template"}, generated={"gpu": "pg-gpu-abc"}, uid="uid-m0")
    pod["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    state = state_of(owned, group=group)
    decision = Scheduler().schedule(parse_pod(pod), PROFILE, state)
    assert decision.node == "n2"
    owned["metadata"]["ownerReferences"][0]["name"] = "another-group"
    other = Scheduler().schedule(parse_pod(pod), PROFILE, state_of(owned, group=group))
    assert other.message == ("0/3 nodes are available: ResourceClaim default/pg-gpu-abc was not created for Pod "
                             "default/m0 (neither Pod nor PodGroup pg is the owner).")


# ----------------------------------------------------------------- PreBind and simulate


def test_prebind_reserves_the_claim_for_the_podgroup_and_never_undoes_it() -> None:
    """What PreBind writes for the group's claim: the finalizer, then the allocation and the
    PodGroup in `reservedFor` (kube's `podGroupReservation`); the members after the first carry the
    same writes (whichever binding comes first lands them). Nothing is undone: kube's Unreserve
    leaves a claim reserved for the PodGroup."""
    state = state_of(shared_claim(resource_version="4"))
    decision = decide(state, [member(f"m{i}", cpu="0.5", created=f"2026-01-01T00:0{i}:00Z") for i in range(3)])
    writes = [prebind_writes(reservation_of(decision, i).claims[0]) for i in range(3)]
    finalizer, status = writes[0]
    assert finalizer.body() == {"metadata": {"finalizers": [DELETE_PROTECTION], "resourceVersion": "4"}}
    ops = {op["path"]: op["value"] for op in status.body() if op["op"] == "add"}
    assert ops["/status/reservedFor"] == [GROUP_REF]
    assert ops["/status/allocation"]["devices"]["results"] == [
        {"request": "req-0", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]
    assert all([w.body() for w in other] == [finalizer.body(), status.body()] for other in writes[1:])
    assert finalizer.undo is None and status.undo is None
    landed = {"metadata": {"finalizers": [DELETE_PROTECTION]},
              "status": {"allocation": ops["/status/allocation"], "reservedFor": [GROUP_REF]}}
    assert status.landed is not None and status.landed(landed)


def test_settle_lists_the_podgroup_once() -> None:
    state = state_of(shared_claim())
    decision = decide(state, [member(f"m{i}", cpu="0.5") for i in range(3)])
    for i in range(3):
        settle(state, reservation_of(decision, i))
    claim = claim_in(state)
    assert not claim.pending and [r.as_json() for r in claim.reserved_for] == [GROUP_REF]


# ----------------------------------------------------------------- a claim of the pods, shared in a group


def test_a_gang_sharing_a_claim_of_its_pods_is_placed() -> None:
    """No PodGroup claims: two members name the same claim as their own. kube's group cycle lets the
    second reuse the first's pending allocation (`pendingAllocations`, whatever the gate); without
    it the gang could never be placed (the second read `in the process of being allocated`). The
    second joins `reservedFor` once the first's allocation is there."""
    state = state_of(shared_claim(), group=pod_group(2))
    decision = decide(state, [member(f"m{i}", cpu="0.5", created=f"2026-01-01T00:0{i}:00Z") for i in range(2)])
    assert decision.outcome is Outcome.PLACED and [d.node for d in decision.decisions] == ["n2", "n2"]
    first, second = (reservation_of(decision, i).claims[0] for i in range(2))
    assert first.consumer.as_json() == {"resource": "pods", "name": "m0", "uid": "uid-m0"} and not first.shared
    assert second.shared and second.consumer.as_json() == {"resource": "pods", "name": "m1", "uid": "uid-m1"}
    assert len(prebind_writes(first)) == 2  # the finalizer, then allocation and reservation
    (join,) = prebind_writes(second)
    assert join.body() == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-shared-gpu"},
        *({"op": "test", "path": f"/status/allocation/devices/results/0/{k}", "value": v}
          for k, v in (("request", "req-0"), ("driver", DRIVER), ("pool", "n2"), ("device", "gpu-0"))),
        {"op": "add", "path": "/status/reservedFor/-", "value": {"resource": "pods", "name": "m1", "uid": "uid-m1"}},
    ]
    assert first.allocation is not None
    both = {"status": {"allocation": first.allocation, "reservedFor": [{"uid": "uid-m0"}, {"uid": "uid-m1"}]}}
    assert join.landed is not None and join.landed(both) and join.undo is not None
    undo = join.undo(both)
    assert undo is not None and undo.patch == {"status": {"reservedFor": [{"uid": "uid-m0"}]}}
