"""DynamicResources' PostFilter against kube v1.36's `dynamicresources_test.go` `TestPlugin` rows
(names kept) and its integration test's message: what is deallocated or deleted, with which
preconditions, and kube's words — joined with DefaultPreemption's when both run, in kube's order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from placer.engine.cluster import ClusterState
from placer.engine.device_index import CLAIM
from placer.engine.framework import PostFilterContext, PostFilterWrites
from placer.engine.profile import compile_profile
from placer.engine.runtime import Decision, Scheduler
from placer.plugins.dynamic_resources import (
    DEALLOCATED,
    DELETED,
    NO_CLAIMS,
    STILL_UNSCHEDULABLE,
)
from placer.plugins.dynamic_resources_test import (
    CLAIM_NAME,
    CLASS,
    DEVICE_CLASS,
    DRIVER,
    EXTENDED_CLASS,
    GPU,
    OTHER_ALLOCATED,
    POD_UID,
    TAINT,
    WORKER,
    WORKER2,
    allocated_claim,
    cluster,
    extended_cluster,
    extended_pod,
    pending_claim,
    plugin,
    pod_with_claim_name,
    worker_slice,
)
from placer.testing import cluster_of, node, pod, pod_info
from placer.testing_devices import allocation, device, request, resource_claim

WRONG_TOPOLOGY = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}]}
# kube v1.36's default profile: DynamicResources' PostFilter before DefaultPreemption
KUBE_ORDER = ({"name": "DynamicResources"}, {"name": "DefaultPreemption"})
GOOD_TOPOLOGY = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "kubernetes.io/hostname", "operator": "In", "values": [WORKER]}]}]}


def topology_claim(selector: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """kube's `allocatedClaimWithWrongTopology` / `...GoodTopology`: allocated, pinned by a selector."""
    return allocated_claim(allocated=allocation([], node_selector=selector), resource_version="7", **kwargs)


def post_filter(pod_obj: dict[str, Any], state: ClusterState) -> PostFilterWrites | str:
    """The plugin's PostFilter as kube's test calls it: every node reached its Filter."""
    present = state.present[: state.size].copy()
    context = PostFilterContext(np.empty(0, dtype=np.int64), len(state.index), lambda slot, gone: None,
                                lambda slot, gone: False, reached=lambda name: present)
    return plugin().post_filter(pod_info(pod_obj), state, context)


def message(outcome: PostFilterWrites | str) -> str:
    return outcome.message if isinstance(outcome, PostFilterWrites) else outcome


def decide_with(pod_obj: dict[str, Any], state: ClusterState, filters: list[str],
                post_filters: tuple[dict[str, Any], ...] = KUBE_ORDER) -> Decision:
    profile = compile_profile("test", {"schedulerName": "placer", "filters": [{"name": f} for f in filters],
                                       "scores": [], "postFilters": [dict(p) for p in post_filters]})
    return Scheduler().schedule(pod_info(pod_obj), profile, state, top=0)


# ---------------------------------------------------------------------- kube's TestPlugin rows


@pytest.mark.parametrize(("name", "pod_obj", "objects", "expected"), [
    ("empty", pod("foo", uid=POD_UID), [], NO_CLAIMS),
    ("empty-with-extended-resources-enabled", pod("foo", uid=POD_UID), [EXTENDED_CLASS], NO_CLAIMS),
    ("no-resources", pod_with_claim_name(), [pending_claim(), DEVICE_CLASS], STILL_UNSCHEDULABLE),
    ("exhausted-resources-in-informer-cache", pod_with_claim_name(),
     [pending_claim(), OTHER_ALLOCATED, DEVICE_CLASS, worker_slice(WORKER)], STILL_UNSCHEDULABLE),
    ("tainted-device-enabled", pod_with_claim_name(),
     [pending_claim(), DEVICE_CLASS, worker_slice(WORKER, device("instance-1", taints=[TAINT]))],
     STILL_UNSCHEDULABLE),
    ("missing-class", pod_with_claim_name(), [pending_claim()], NO_CLAIMS),
    ("claim-with-request-with-unknown-device-class", pod_with_claim_name(),
     [pending_claim(CLAIM_NAME, request("req-1", "does-not-exist"))], NO_CLAIMS),
    ("extended-resource-name-no-resource", extended_pod({GPU: "1"}), [EXTENDED_CLASS], STILL_UNSCHEDULABLE),
])
def test_kube_post_filter_statuses(name: str, pod_obj: dict[str, Any], objects: list[dict[str, Any]],
                                   expected: str) -> None:
    assert post_filter(pod_obj, extended_cluster(*objects)) == expected


def test_kube_wrong_topology_deallocates_the_claim() -> None:
    """"wrong-topology": the claim's allocation admits no node; reserved for nobody, it is
    deallocated — a status update clearing allocation, reservedFor and devices, at the
    resourceVersion read."""
    state = cluster(topology_claim(WRONG_TOPOLOGY), DEVICE_CLASS)
    outcome = post_filter(pod_with_claim_name(), state)
    assert isinstance(outcome, PostFilterWrites) and outcome.message == DEALLOCATED
    (write,) = outcome.writes
    assert write.target.path(write.subresource) == \
        f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{CLAIM_NAME}/status"
    assert write.body() == {"status": {"reservedFor": None, "allocation": None, "devices": None},
                            "metadata": {"resourceVersion": "7", "uid": f"uid-{CLAIM_NAME}"}}
    assert write.landed is not None and write.landed({"status": {}}) and not write.landed(
        {"status": {"allocation": {"devices": {}}}})


def test_a_claim_reserved_for_this_pod_only_is_deallocated_another_pods_is_not() -> None:
    mine = cluster(topology_claim(WRONG_TOPOLOGY, reserved_for=[("my-pod", POD_UID)]), DEVICE_CLASS)
    assert message(post_filter(pod_with_claim_name(), mine)) == DEALLOCATED
    shared = cluster(topology_claim(WRONG_TOPOLOGY, reserved_for=[("my-pod", POD_UID), ("other", "9")]),
                     DEVICE_CLASS)
    assert post_filter(pod_with_claim_name(), shared) == STILL_UNSCHEDULABLE


def test_good_topology_is_not_deallocated() -> None:
    """"good-topology" (the pod fits; here another filter rejects the node): the claim is available
    wherever DynamicResources' Filter looked, so nothing is freed."""
    state = cluster(topology_claim(GOOD_TOPOLOGY), DEVICE_CLASS)
    assert post_filter(pod_with_claim_name(), state) == STILL_UNSCHEDULABLE


@pytest.mark.parametrize("node_name", [WORKER, WORKER2], ids=["extended-resource-name-with-resources-has-claim",
                                                             "extended-resource-name-with-resources-delete-claim"])
def test_kube_stale_extended_resource_claim_is_deleted(node_name: str) -> None:
    """A special claim left by an earlier attempt is deleted (its finalizer removed first), by UID."""
    stale = resource_claim("my-pod-extended-resources-0", requests=[request("container-0-request-0", CLASS)],
                           owner=("my-pod", POD_UID), finalizers=["resource.kubernetes.io/delete-protection"],
                           allocated=allocation([("container-0-request-0", DRIVER, node_name, "instance-1")],
                                                node=node_name), resource_version="5")
    stale["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    state = extended_cluster(EXTENDED_CLASS, worker_slice(WORKER), stale)
    outcome = post_filter(extended_pod({GPU: "1"}), state)
    assert isinstance(outcome, PostFilterWrites) and outcome.message == DELETED
    unprotect, delete = outcome.writes
    assert unprotect.body() == {"metadata": {"finalizers": None, "resourceVersion": "5",
                                             "uid": "uid-my-pod-extended-resources-0"}}
    assert delete.delete and delete.body()["preconditions"] == {"uid": "uid-my-pod-extended-resources-0"}
    assert 404 in delete.tolerate


# ---------------------------------------------------------------------- through the runtime


def test_kube_integration_message_for_a_pod_without_claims() -> None:
    """test/integration/dra/extendedresource.go: `0/8 nodes are available: 8 Insufficient X. no new
    claims to deallocate, preemption: 0/8 nodes are available: 8 Preemption is not helpful for
    scheduling.` — DynamicResources runs first, both sentences joined."""
    state = cluster_of([node(f"n{i}", allocatable={"cpu": "1", "memory": "1Gi", "pods": "10"}) for i in range(8)])
    decision = decide_with(pod("p", cpu="2"), state, ["NodeResourcesFit", "DynamicResources"])
    # kube's FitError: the filters' sentence, then the PostFilters' statuses joined
    assert decision.message == "0/8 nodes are available: 8 Insufficient cpu."
    assert decision.post_filter_message == ("no new claims to deallocate, preemption: 0/8 nodes are available: "
                                            "8 Preemption is not helpful for scheduling.")
    assert decision.post_filter_writes == ()


def test_deallocation_through_the_runtime_and_preemption_after_it() -> None:
    state = cluster(topology_claim(WRONG_TOPOLOGY), DEVICE_CLASS)
    decision = decide_with(pod_with_claim_name(), state, ["NodeResourcesFit", "DynamicResources"])
    assert decision.message == "0/1 nodes are available: 1 resourceclaim not available on the node."
    assert decision.post_filter_message == (
        "deallocation of ResourceClaim completed, preemption: 0/1 nodes are available: 1 Preemption is not "
        "helpful for scheduling.")
    assert [w.call for w in decision.post_filter_writes] == ["patch_resourceclaim_status"]
    assert not decision.clears_nomination or decision.preemption is None
    # DefaultPreemption alone (the profile lists only it): no claim is touched
    alone = decide_with(pod_with_claim_name(), state, ["DynamicResources"], ({"name": "DefaultPreemption"},))
    assert alone.post_filter_writes == () and "deallocation" not in (alone.full_message or "")


def test_only_nodes_that_reached_the_filter_count() -> None:
    """kube marks a claim unavailable only on nodes its Filter ran on: where an earlier filter
    (NodeResourcesFit) rejected every node the claim's selector excludes, nothing is freed."""
    state = cluster_of([node(WORKER, cpu="1"), node(WORKER2, cpu="1", labels={"kubernetes.io/hostname": WORKER2})],
                       objects=[topology_claim(GOOD_TOPOLOGY), DEVICE_CLASS])
    big = pod_with_claim_name(cpu="2")
    decision = decide_with(big, state, ["NodeResourcesFit", "DynamicResources"], ({"name": "DynamicResources"},))
    assert decision.post_filter_message == STILL_UNSCHEDULABLE and decision.post_filter_writes == ()
    decision = decide_with(pod_with_claim_name(), state, ["NodeResourcesFit", "DynamicResources"],
                           ({"name": "DynamicResources"},))
    assert decision.node == WORKER  # (worker-2 lacks the hostname label the selector asks: not admitted)


def test_nothing_on_an_api_server_without_resource_claims() -> None:
    """A server older than v1.34 (no `resource.k8s.io/v1`): kube-scheduler of that release has no
    DynamicResources, so the message is DefaultPreemption's alone."""
    state = cluster_of([node("n0", cpu="1")])
    state.catalog.unserved = frozenset({CLAIM})
    decision = decide_with(pod("p", cpu="2"), state, ["NodeResourcesFit", "DynamicResources"])
    assert decision.post_filter_message == ("preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                                            "scheduling.")


def test_nomination_is_left_as_it_is() -> None:
    """kube's DynamicResources returns no PostFilterResult: a nomination is not dropped for it."""
    assert not plugin().clears_nomination(DEALLOCATED)
