"""VolumeBinding, against kube-scheduler's own tables (`volumebinding/volume_binding_test.go`, the
`FindPodVolumes` / `AssumePodVolumes` cases of `binder_test.go`, and `FindMatchingVolume` of
`component-helpers/storage/volume`), re-expressed with the builders:

- pod level (PreFilter): no claims (skipped), a missing claim, a generic ephemeral volume's claim
  missing or not owned by the pod, a claim being deleted, a `Lost` one, unbound claims whose binding
  is immediate (an `Immediate` class, no class, a missing class, a pre-bound claim);
- per node (Filter): a bound claim's PV node affinity, a bound claim's PV that does not exist,
  `WaitForFirstConsumer` claims matched against PVs (the node affinity, the smallest fitting PV, a
  pre-bound PV first, each mismatch that rules a PV out, two claims of a pod never sharing one, the
  claims taken smallest first), the selected-node annotation, dynamic provisioning (allowed
  topologies, `kubernetes.io/no-provisioner`), several reasons on one node, the exact messages;
- Reserve / Unreserve through `Scheduler.assume` / `forget`: the `VolumeBindings` (`as_json`), the
  catalog while assumed, the race of two pods for one PV, `forget` restoring both kinds, an API
  server copy replacing (or not) an assumption;
- `placer simulate`'s `volumes`;
- PreBind (`BindPodVolumes`): the writes it asks for (claimRef, selected-node, nothing the API server
  already shows), how each is recognised on a 409 and undone, and the wait's check (`checkBindings`).

Every node here has room for every pod: NodeResourcesFit only shows that a node's reasons come from
the first filter that rejects it.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState
from placer.engine.framework import PreBindError
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_node
from placer.engine.profile import API_VERSION, KIND, Profile
from placer.engine.runtime import Decision, Scheduler
from placer.engine.storage import (
    VolumeBindings,
    find_matching_volume,
    parse_claim,
    parse_volume,
)
from placer.plugins.volume_binding import VolumeBinding
from placer.simulate import render_json, simulate_documents
from placer.testing import (
    claim,
    cluster_of,
    decide,
    filter_result,
    make_plugin,
    make_profile,
    node,
    pod,
    pod_info,
    storage_class,
    volume,
)

BIND = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
PV, PVC = "PersistentVolume", "PersistentVolumeClaim"

NODES = [node("a", labels={ZONE: "z1"}), node("b", labels={ZONE: "z1"}), node("c", labels={ZONE: "z2"})]
LOCAL = storage_class("local", "kubernetes.io/no-provisioner")  # static PVs only
STANDARD = storage_class("standard")  # WaitForFirstConsumer, provisions
FAST = storage_class("fast", wait_for_first_consumer=False)  # Immediate


def profile() -> Profile:
    """NodeResourcesFit and VolumeBinding, no scores: among feasible nodes the smallest name wins."""
    return make_profile(filters=[{"name": "NodeResourcesFit"}, {"name": "VolumeBinding"}], scores=[])


def cluster(*objects: dict[str, Any], nodes: list[dict[str, Any]] | None = None) -> ClusterState:
    return cluster_of(NODES if nodes is None else nodes, objects=objects)


def feasible(pod_obj: dict[str, Any], state: ClusterState) -> list[str]:
    """The nodes VolumeBinding's filter lets the pod onto (a fresh plugin)."""
    return [name for name, ok in filter_result(make_plugin("VolumeBinding"), pod_obj, state).items() if ok]


def binding_plugin() -> VolumeBinding:
    plugin = make_plugin("VolumeBinding")
    assert isinstance(plugin, VolumeBinding)
    return plugin


def reasons(pod_obj: dict[str, Any], state: ClusterState) -> dict[str, int]:
    """The filter's reasons, counted over the nodes it rejects (as a FitError counts them)."""
    plugin, info = binding_plugin(), pod_info(pod_obj)
    mask = plugin.filter(info, state)
    rejected = np.flatnonzero(~mask) if mask is not None else np.empty(0, dtype=np.int64)
    return dict(plugin.reason_counts(info, state, rejected))


def message(pod_obj: dict[str, Any], *objects: dict[str, Any], nodes: list[dict[str, Any]] | None = None) -> str | None:
    return decide(profile(), pod_obj, cluster(*objects, nodes=nodes)).message


def web(*claims: str, **kwargs: Any) -> dict[str, Any]:
    return pod("web", "100m", claims=claims, **kwargs)


def deleting(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["deletionTimestamp"] = "2025-03-10T10:00:00Z"
    return obj


def with_version(obj: dict[str, Any], version: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = version
    return obj


def bound_claim(name: str, pv: str, storage: str = "local") -> dict[str, Any]:
    return claim(name, storage, volume_name=pv)


def claim_ref(obj: dict[str, Any], name: str, uid: str | None = None, namespace: str = "default") -> dict[str, Any]:
    """A PV pre-bound to a claim (still Available: the PV controller has not bound it yet)."""
    obj = copy.deepcopy(obj)
    obj["spec"]["claimRef"] = {"namespace": namespace, "name": name, **({"uid": uid} if uid else {})}
    return obj


class Placed:
    """One pod scheduled, then assumed on its node (kube's assume + Reserve), to forget later."""

    def __init__(self, state: ClusterState, pod_obj: dict[str, Any], node_name: str | None = None) -> None:
        self.state, self.profile, self.pod = state, profile(), pod_info(pod_obj)
        self.decision: Decision = Scheduler().schedule(self.pod, self.profile, state)
        assert self.decision.node is not None, self.decision.message
        if node_name is not None:  # another feasible node than the one scores would pick
            assert node_name in feasible(pod_obj, state)
            self.decision.node = node_name
        Scheduler.assume(self.pod, self.decision, self.profile, state)

    @property
    def bindings(self) -> VolumeBindings | None:
        return self.decision.reservations.get("VolumeBinding")

    def as_json(self) -> list[dict[str, Any]]:
        assert self.bindings is not None
        return self.bindings.as_json()

    def forget(self) -> None:
        Scheduler.forget(self.pod, self.decision, self.profile, self.state)


def entry(claim_name: str, pv: str | None, node_name: str) -> dict[str, Any]:
    return {"claim": f"default/{claim_name}", "volume": pv, "selectedNode": node_name}


# ------------------------------------------------------------------------------- pod level


def test_pod_without_claims_is_skipped() -> None:
    plugin = binding_plugin()
    state = cluster(LOCAL)
    for pod_obj in (pod("plain"), pod("scratch", volumes=[{"name": "tmp", "emptyDir": {}}])):
        info = pod_info(pod_obj)
        assert plugin.pre_filter(info, state) is None
        assert plugin.filter(info, state) is None
        assert plugin.reserve(info, state, "a") is None
    placed = Placed(cluster(LOCAL), pod("plain"))
    assert placed.decision.reservations == {}


def test_missing_claim() -> None:
    decision = decide(profile(), web("data"), cluster(LOCAL))
    assert decision.node is None
    assert decision.message == '0/3 nodes are available: persistentvolumeclaim "data" not found.'
    assert decision.reasons == {}
    assert decision.rejected_by == ("VolumeBinding",)
    assert PVC in decision.wake_on and PV in decision.wake_on
    # claims are looked up in the pod's namespace
    assert decide(profile(), web("data", namespace="prod"), cluster(LOCAL, claim("data", "local"))).message == (
        '0/3 nodes are available: persistentvolumeclaim "data" not found.')
    assert decide(profile(), web("data"), cluster(STANDARD, claim("data"))).node == "a"


def test_part_of_the_claims_missing() -> None:
    # kube: "Part of PVCs do not exist"
    objects = (LOCAL, bound_claim("pvc-a", "pv-a"), volume("pv-a", "local", claim_ref=("default", "pvc-a")))
    assert message(web("pvc-a", "pvc-b"), *objects) == (
        '0/3 nodes are available: persistentvolumeclaim "pvc-b" not found.')
    assert message(web("pvc-a"), *objects) is None


def test_claims_are_all_checked_before_their_binding_mode() -> None:
    # kube's podHasPVCs looks every claim up before GetPodVolumes sorts them: a missing claim after
    # an unbound immediate one is what the pod is told
    objects = (FAST, claim("quick", "fast"))
    assert message(web("quick", "gone"), *objects) == (
        '0/3 nodes are available: persistentvolumeclaim "gone" not found.')
    assert message(web("quick"), *objects) == f"0/3 nodes are available: {IMMEDIATE}."


EPHEMERAL = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
    "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
    "resources": {"requests": {"storage": "1Gi"}}}}}}


def ephemeral_claim(owner_uid: str | None) -> dict[str, Any]:
    obj = claim("web-scratch", "standard")
    if owner_uid is not None:
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": owner_uid, "controller": True}]
    return obj


@pytest.mark.parametrize(
    ("pod_uid", "objects", "expected"),
    [
        ("uid-web", [], 'waiting for ephemeral volume controller to create the persistentvolumeclaim "web-scratch"'),
        ("uid-web", [ephemeral_claim("uid-other")],
         "PVC default/web-scratch was not created for pod default/web (pod is not owner)"),
        ("uid-web", [ephemeral_claim(None)],
         "PVC default/web-scratch was not created for pod default/web (pod is not owner)"),
        # kube's metav1.IsControlledBy: a claim with no controller is owned by no pod, a pod without
        # a uid included
        (None, [ephemeral_claim(None)],
         "PVC default/web-scratch was not created for pod default/web (pod is not owner)"),
        ("uid-web", [ephemeral_claim("uid-web")], None),
    ],
)
def test_generic_ephemeral_volume(pod_uid: str | None, objects: list[dict[str, Any]], expected: str | None) -> None:
    decision = decide(profile(), pod("web", volumes=[EPHEMERAL], uid=pod_uid), cluster(STANDARD, *objects))
    if expected is None:
        assert decision.node == "a"
        assert decision.message is None
    else:
        assert decision.node is None
        assert decision.message == f"0/3 nodes are available: {expected}."


def test_claim_being_deleted() -> None:
    assert message(web("data"), STANDARD, deleting(claim("data"))) == (
        '0/3 nodes are available: persistentvolumeclaim "data" is being deleted.')
    assert message(web("data"), STANDARD, claim("data")) is None


def test_lost_claim() -> None:
    # kube: "pv not found claim lost" (Lost is told before being deleted)
    lost = deleting(claim("pvc-a", "local", volume_name="pv-a", phase="Lost"))
    assert message(web("pvc-a"), LOCAL, lost) == (
        '0/3 nodes are available: persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a".')


def _not_bind_completed(name: str, pv: str) -> dict[str, Any]:
    obj = claim(name, "standard", volume_name=pv, phase="Pending")
    del obj["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"]
    return obj


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param([FAST, claim("data", "fast")], id="Immediate class"),
        pytest.param([claim("data", None)], id="no class"),
        pytest.param([claim("data", "")], id="empty class"),
        pytest.param([claim("data", "missing")], id="class missing"),
        # kube: "immediate-unbound-pvc,delayed-mode-unbound": one immediate claim is enough
        pytest.param([FAST, STANDARD, claim("data", "fast"), claim("later", "standard")], id="with a delayed one"),
        # a claim naming its PV whose binding is not complete: kube's "Prebound PVCs are treated
        # as unbound immediate binding", even in a WaitForFirstConsumer class
        pytest.param([STANDARD, _not_bind_completed("data", "pv-a"), volume("pv-a")], id="pre-bound claim"),
    ],
)
def test_unbound_immediate_claims(objects: list[dict[str, Any]]) -> None:
    claims = [obj["metadata"]["name"] for obj in objects if obj["kind"] == PVC]
    decision = decide(profile(), web(*claims), cluster(*objects))
    assert decision.node is None
    assert decision.message == f"0/3 nodes are available: {IMMEDIATE}."
    assert decision.rejected_by == ("VolumeBinding",)


def test_bound_claims_need_no_class() -> None:
    # a fully bound claim is checked against its PV only: its class may be gone, or Immediate
    objects = (bound_claim("one", "pv-1", "missing"), volume("pv-1", "missing", claim_ref=("default", "one")),
               FAST, bound_claim("two", "pv-2", "fast"), volume("pv-2", "fast", claim_ref=("default", "two")))
    placed = Placed(cluster(*objects), web("one", "two"))
    assert placed.decision.node == "a"
    assert placed.decision.reservations == {}  # nothing to bind: nothing reserved


# ------------------------------------------------------------------------------- bound claims


def test_bound_claim_volume_node_affinity() -> None:
    pv = volume("pv-a", "local", nodes=["b"], claim_ref=("default", "data"))
    state = cluster(LOCAL, bound_claim("data", "pv-a"), pv)
    assert feasible(web("data"), state) == ["b"]
    assert decide(profile(), web("data"), state).node == "b"
    # any label, several values
    zonal = volume("pv-a", "local", node_affinity={ZONE: ["z2", "z9"]}, claim_ref=("default", "data"))
    assert feasible(web("data"), cluster(LOCAL, bound_claim("data", "pv-a"), zonal)) == ["c"]


def test_bound_claim_volume_node_affinity_conflict() -> None:
    # kube: "bound and unbound unsatisfied" without the unbound claim
    pv = volume("pv-a", "local", node_affinity={"foo": ["bar"]}, claim_ref=("default", "data"))
    decision = decide(profile(), web("data"), cluster(LOCAL, bound_claim("data", "pv-a"), pv))
    assert decision.reasons == {NODE_CONFLICT: 3}
    assert decision.message == f"0/3 nodes are available: 3 {NODE_CONFLICT}."
    assert decision.rejected_by == ("VolumeBinding",)


def test_bound_claim_volume_affinity_with_empty_terms_admits_no_node() -> None:
    pv = volume("pv-a", "local", claim_ref=("default", "data"))
    pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": []}}
    assert feasible(web("data"), cluster(LOCAL, bound_claim("data", "pv-a"), pv)) == []
    del pv["spec"]["nodeAffinity"]
    assert feasible(web("data"), cluster(LOCAL, bound_claim("data", "pv-a"), pv)) == ["a", "b", "c"]


def _with_terms(obj: dict[str, Any], *terms: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": list(terms)}}
    return obj


def test_volume_node_affinity_reads_labels_only() -> None:
    # kube's CheckNodeAffinity matches a Node made of the labels alone: a `matchFields` requirement
    # has no name to read and is passed over (a term of them alone admits every node)
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
    in_z1 = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}
    bound = (LOCAL, bound_claim("data", "pv-a"))
    pv = claim_ref(volume("pv-a", "local"), "data")
    assert feasible(web("data"), cluster(*bound, _with_terms(pv, by_name))) == ["a", "b", "c"]
    assert feasible(web("data"), cluster(*bound, _with_terms(pv, {**in_z1, **by_name}))) == ["a", "b"]
    assert feasible(web("data"), cluster(*bound, _with_terms(pv, in_z1))) == ["a", "b"]
    # the same for a PV to bind
    unbound = (LOCAL, claim("data", "local"))
    assert feasible(web("data"), cluster(*unbound, _with_terms(volume("pv-a", "local"), by_name))) == ["a", "b", "c"]
    empty_term = {"matchExpressions": []}
    assert feasible(web("data"), cluster(*unbound, _with_terms(volume("pv-a", "local"), empty_term))) == []


def test_bound_claim_volume_missing() -> None:
    # kube: "pv not found"
    decision = decide(profile(), web("pvc-a"), cluster(LOCAL, bound_claim("pvc-a", "pv-a")))
    assert decision.message == f"0/3 nodes are available: 3 {PV_NOT_EXIST}."


def test_bound_claims_first_problem_decides_a_node() -> None:
    # kube's checkBoundClaims returns at a node's first claim whose PV conflicts or is missing
    objects = (LOCAL, bound_claim("one", "pv-1"), bound_claim("two", "pv-2"),
               volume("pv-1", "local", nodes=["a", "c"], claim_ref=("default", "one")))
    decision = decide(profile(), web("one", "two"), cluster(*objects))
    assert decision.reasons == {PV_NOT_EXIST: 2, NODE_CONFLICT: 1}
    assert decision.message == f"0/3 nodes are available: 1 {NODE_CONFLICT}, 2 {PV_NOT_EXIST}."
    # the other order: the missing PV decides every node
    decision = decide(profile(), web("two", "one"), cluster(*objects))
    assert decision.message == f"0/3 nodes are available: 3 {PV_NOT_EXIST}."


def test_bound_and_unbound_unsatisfied_gives_both_reasons_on_one_node() -> None:
    # kube: "bound and unbound unsatisfied": one node with both reasons
    objects = (LOCAL, bound_claim("pvc-a", "pv-a"), claim("pvc-b", "local"),
               volume("pv-a", "local", node_affinity={"foo": ["bar"]}, claim_ref=("default", "pvc-a")))
    nodes = [node("node-a", labels={"foo": "barbar"})]
    decision = decide(profile(), web("pvc-a", "pvc-b"), cluster(*objects, nodes=nodes))
    assert decision.reasons == {NODE_CONFLICT: 1, BIND: 1}
    assert decision.message == f"0/1 nodes are available: 1 {BIND}, 1 {NODE_CONFLICT}."
    # a missing PV and no PV to bind
    decision = decide(profile(), web("pvc-a", "pvc-b"), cluster(LOCAL, bound_claim("pvc-a", "pv-a"),
                                                                 claim("pvc-b", "local"), nodes=nodes))
    assert decision.message == f"0/1 nodes are available: 1 {BIND}, 1 {PV_NOT_EXIST}."


def test_a_nodes_reasons_come_from_the_first_filter_rejecting_it() -> None:
    nodes = [node("a"), node("b"), node("small", cpu="50m")]
    decision = decide(profile(), web("data"), cluster(LOCAL, claim("data", "local"), nodes=nodes))
    assert decision.message == f"0/3 nodes are available: 1 Insufficient cpu, 2 {BIND}."


# ------------------------------------------------------------------------------- claims to bind


def test_no_matching_volume() -> None:
    # kube: "unbound claims no matches"
    decision = decide(profile(), web("pvc-a"), cluster(LOCAL, claim("pvc-a", "local")))
    assert decision.reasons == {BIND: 3}
    assert decision.message == f"0/3 nodes are available: 3 {BIND}."
    assert decision.rejected_by == ("VolumeBinding",)


def test_matching_volume_on_some_nodes_only() -> None:
    # kube: "unbound-pvc,pv-same-node" / "unbound-pvc,pv-different-node"
    objects = (LOCAL, claim("data", "local"), volume("pv-b", "local", nodes=["b"]),
               volume("pv-z2", "local", node_affinity={ZONE: ["z2"]}))
    assert feasible(web("data"), cluster(*objects)) == ["b", "c"]
    decision = decide(profile(), web("data"), cluster(*objects))
    assert decision.node == "b"
    assert decision.feasible == 2


def test_smallest_fitting_volume_is_chosen() -> None:
    # kube: "local volumes with close capacity are preferred"; FindMatchingVolume's smallest
    objects = (LOCAL, claim("data", "local", "50Gi"), volume("pv-200", "local", "200Gi"),
               volume("pv-100", "local", "100Gi"), volume("pv-40", "local", "40Gi"),
               volume("pv-100b", "local", "100Gi"))
    placed = Placed(cluster(*objects), web("data"))
    assert placed.as_json() == [entry("data", "pv-100", "a")]  # ties: the first listed


def test_smallest_volume_admitting_the_node() -> None:
    objects = (LOCAL, claim("data", "local", "50Gi"), volume("pv-small-b", "local", "60Gi", nodes=["b"]),
               volume("pv-big-a", "local", "200Gi", nodes=["a"]), volume("pv-mid", "local", "100Gi"))
    assert Placed(cluster(*objects), web("data"), "a").as_json() == [entry("data", "pv-mid", "a")]
    assert Placed(cluster(*objects), web("data"), "b").as_json() == [entry("data", "pv-small-b", "b")]


def test_pre_bound_volume_is_chosen_first() -> None:
    # kube: "one-prebound,one-unbound": a PV whose claimRef names the claim wins over a smaller one
    objects = (LOCAL, claim("data", "local"), volume("pv-small", "local", "1Gi"),
               claim_ref(volume("pv-pre", "local", "100Gi"), "data"))
    assert Placed(cluster(*objects), web("data")).as_json() == [entry("data", "pv-pre", "a")]


def test_pre_bound_volume_skips_phase_selector_and_access_modes_but_not_size() -> None:
    # FindMatchingVolume returns a pre-bound PV before looking at its phase, labels, access modes
    pre = claim_ref(volume("pv-pre", "local", "10Gi", phase="Released", access_modes=["ReadOnlyMany"],
                           labels={"tier": "slow"}), "data")
    wanted = claim("data", "local", "5Gi", selector={"matchLabels": {"tier": "fast"}},
                   access_modes=["ReadWriteOnce"])
    assert Placed(cluster(LOCAL, wanted, pre), web("data")).as_json() == [entry("data", "pv-pre", "a")]
    # too small: not a match; the claim takes another PV if there is one
    small = claim_ref(volume("pv-pre", "local", "1Gi"), "data")
    assert message(web("data"), LOCAL, claim("data", "local", "5Gi"), small) == f"0/3 nodes are available: 3 {BIND}."
    other = volume("pv-other", "local", "5Gi")
    assert Placed(cluster(LOCAL, claim("data", "local", "5Gi"), small, other), web("data")).as_json() == [
        entry("data", "pv-other", "a")]


def test_pre_bound_volume_not_admitting_the_node_means_no_match_there() -> None:
    objects = (LOCAL, claim("data", "local"), claim_ref(volume("pv-pre", "local", nodes=["b"]), "data"),
               volume("pv-any", "local"))
    assert feasible(web("data"), cluster(*objects)) == ["b"]
    assert Placed(cluster(*objects), web("data")).as_json() == [entry("data", "pv-pre", "b")]


def test_volume_pre_bound_to_another_claim_is_not_a_match() -> None:
    for other in (claim_ref(volume("pv-a", "local"), "data", uid="uid-another-data"),
                  claim_ref(volume("pv-a", "local"), "else"),
                  claim_ref(volume("pv-a", "local"), "data", namespace="prod")):
        assert message(web("data"), LOCAL, claim("data", "local"), other) == f"0/3 nodes are available: 3 {BIND}."
    # the claim's own uid is a match
    mine = claim_ref(volume("pv-a", "local", phase="Bound"), "data", uid="uid-claim-data")
    assert Placed(cluster(LOCAL, claim("data", "local"), mine), web("data")).as_json() == [entry("data", "pv-a", "a")]


def _mismatch(change: str, obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    if change == "volume mode":
        obj["spec"]["volumeMode"] = "Block"
    elif change == "deleting":
        obj = deleting(obj)
    return obj


@pytest.mark.parametrize(
    ("wanted", "pv"),
    [
        pytest.param(claim("data", "local", access_modes=["ReadWriteMany"]), volume("pv-a", "local"),
                     id="access modes"),
        pytest.param(claim("data", "local", access_modes=["ReadWriteOnce", "ReadOnlyMany"]),
                     volume("pv-a", "local"), id="one access mode missing"),
        pytest.param(claim("data", "local", "20Gi"), volume("pv-a", "local", "10Gi"), id="size"),
        pytest.param(claim("data", "local"), _mismatch("volume mode", volume("pv-a", "local")), id="PV volume mode"),
        pytest.param(_mismatch("volume mode", claim("data", "local")), volume("pv-a", "local"), id="claim volume mode"),
        pytest.param(claim("data", "local", selector={"matchLabels": {"tier": "fast"}}),
                     volume("pv-a", "local", labels={"tier": "slow"}), id="selector"),
        pytest.param(claim("data", "local", selector={"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                     volume("pv-a", "local"), id="selector expression"),
        pytest.param(claim("data", "local"), volume("pv-a", "other"), id="class"),
        pytest.param(claim("data", "local"), volume("pv-a", "local", phase="Released"), id="not Available"),
        pytest.param(claim("data", "local"), volume("pv-a", "local", phase="Pending"), id="Pending"),
        pytest.param(claim("data", "local"), _mismatch("deleting", volume("pv-a", "local")), id="PV being deleted"),
    ],
)
def test_volume_mismatch(wanted: dict[str, Any], pv: dict[str, Any]) -> None:
    assert message(web("data"), LOCAL, wanted, pv) == f"0/3 nodes are available: 3 {BIND}."
    # and the PV kube would take, beside it
    fitting = volume("pv-fits", "local", "20Gi", access_modes=["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"],
                     labels={"tier": "fast"})
    if wanted["spec"].get("volumeMode") == "Block":
        fitting["spec"]["volumeMode"] = "Block"
    assert Placed(cluster(LOCAL, wanted, pv, fitting), web("data")).as_json() == [entry("data", "pv-fits", "a")]


def test_matching_fields_that_fit() -> None:
    # the same fields, fitting: a superset of access modes, a bigger PV, Block with Block, a selector
    wanted = claim("data", "local", "5Gi", access_modes=["ReadWriteOnce"],
                   selector={"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fast", "ssd"]}]})
    wanted["spec"]["volumeMode"] = "Block"
    pv = volume("pv-a", "local", "5Gi", access_modes=["ReadWriteOnce", "ReadWriteMany"], labels={"tier": "ssd"})
    pv["spec"]["volumeMode"] = "Block"
    assert Placed(cluster(LOCAL, wanted, pv), web("data")).as_json() == [entry("data", "pv-a", "a")]


def test_two_claims_never_share_a_volume_on_a_node() -> None:
    # kube: "two-unbound-pvcs", "two-unbound-pvcs,partial-match" (FindMatchingVolume's chosenPVs)
    objects = (LOCAL, claim("one", "local"), claim("two", "local"),
               volume("pv-a1", "local", nodes=["a"]), volume("pv-b1", "local", nodes=["b"]),
               volume("pv-b2", "local", nodes=["b"]))
    state = cluster(*objects)
    assert feasible(web("one", "two"), state) == ["b"]
    assert reasons(web("one", "two"), state) == {BIND: 2}
    assert Placed(state, web("one", "two")).as_json() == [entry("one", "pv-b1", "b"), entry("two", "pv-b2", "b")]
    # one PV: one claim matched, the other not
    assert message(web("one", "two"), LOCAL, claim("one", "local"), claim("two", "local"),
                   volume("pv-a1", "local")) == f"0/3 nodes are available: 3 {BIND}."


def test_claims_are_matched_smallest_first() -> None:
    # kube's findMatchingVolumes sorts the claims by request ("two-unbound-pvcs,order-by-size"): the
    # small claim takes the smallest PV that fits it, even where the big claim needed that one
    big = claim("big", "local", "5Gi", access_modes=["ReadWriteMany"])
    small = claim("small", "local", "1Gi")
    shared = volume("pv-5", "local", "5Gi", access_modes=["ReadWriteOnce", "ReadWriteMany"])
    assert message(web("big", "small"), LOCAL, big, small, shared, volume("pv-10", "local", "10Gi")) == (
        f"0/3 nodes are available: 3 {BIND}.")
    roomy = volume("pv-10", "local", "10Gi", access_modes=["ReadWriteOnce", "ReadWriteMany"])
    assert Placed(cluster(LOCAL, big, small, shared, roomy), web("big", "small")).as_json() == [
        entry("small", "pv-5", "a"), entry("big", "pv-10", "a")]


def test_selected_node_annotation() -> None:
    # kube's fast path: a claim annotated for a node goes to provisioning there, and only there
    annotated = claim("data", "standard", selected_node="b")
    state = cluster(STANDARD, annotated)
    assert feasible(web("data"), state) == ["b"]
    decision = decide(profile(), web("data"), state)
    assert decision.node == "b"
    decision = decide(profile(), web("data"), cluster(STANDARD, annotated, nodes=[node("a"), node("c")]))
    assert decision.message == f"0/2 nodes are available: 2 {BIND}."


def test_selected_node_claim_is_not_matched_against_volumes() -> None:
    # on its node too, a matching PV does not help a claim already annotated: its class must provision
    objects = (LOCAL, claim("data", "local", selected_node="b"), volume("pv-b", "local", nodes=["b"]))
    assert message(web("data"), *objects) == f"0/3 nodes are available: 3 {BIND}."
    zonal = storage_class("standard", allowed_topologies={ZONE: ["z2"]})
    assert message(web("data"), zonal, claim("data", "standard", selected_node="b")) == (
        f"0/3 nodes are available: 3 {BIND}.")
    assert feasible(web("data"), cluster(zonal, claim("data", "standard", selected_node="c"))) == ["c"]


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        pytest.param(storage_class("standard"), ["a", "b", "c"], id="provisions everywhere"),
        pytest.param(storage_class("standard", allowed_topologies={ZONE: ["z2"]}), ["c"], id="allowed topologies"),
        pytest.param(storage_class("standard", allowed_topologies={ZONE: ["z1", "z2"], HOSTNAME: ["b"]}),
                     ["b"], id="expressions ANDed"),
        pytest.param(storage_class("standard", allowed_topologies={ZONE: ["z9"]}), [], id="no topology"),
        pytest.param(storage_class("standard", "kubernetes.io/no-provisioner"), [], id="no-provisioner"),
        pytest.param(storage_class("standard", ""), [], id="no provisioner"),
    ],
)
def test_dynamic_provisioning(storage: dict[str, Any], expected: list[str]) -> None:
    state = cluster(storage, claim("data", "standard"))
    assert feasible(web("data"), state) == expected
    decision = decide(profile(), web("data"), state)
    if expected:
        assert decision.node == expected[0]
    else:
        assert decision.message == f"0/3 nodes are available: 3 {BIND}."


def test_allowed_topologies_terms_are_ored() -> None:
    topology = storage_class("standard")
    topology["allowedTopologies"] = [
        {"matchLabelExpressions": [{"key": HOSTNAME, "values": ["a"]}]},
        {"matchLabelExpressions": [{"key": ZONE, "values": ["z2"]}]},
    ]
    assert feasible(web("data"), cluster(topology, claim("data", "standard"))) == ["a", "c"]


def test_matching_volume_first_else_provisioning() -> None:
    objects = (STANDARD, claim("data", "standard"), volume("pv-b", "standard", nodes=["b"]))
    assert feasible(web("data"), cluster(*objects)) == ["a", "b", "c"]
    assert Placed(cluster(*objects), web("data"), "b").as_json() == [entry("data", "pv-b", "b")]
    assert Placed(cluster(*objects), web("data"), "a").as_json() == [entry("data", None, "a")]


def test_one_claim_provisioned_one_matched() -> None:
    # kube: "one-binding, one-pvc-provisioned"; the static bindings come first
    objects = (LOCAL, STANDARD, claim("dyn", "standard"), claim("static", "local"),
               volume("pv-c", "local", nodes=["c"]))
    placed = Placed(cluster(*objects), web("dyn", "static"))
    assert placed.decision.node == "c"
    assert placed.as_json() == [entry("static", "pv-c", "c"), entry("dyn", None, "c")]


def test_bound_claim_and_claim_to_bind() -> None:
    # kube: "one-bound,one-unbound": only the claim to bind is reserved
    objects = (LOCAL, bound_claim("old", "pv-old"), claim("new", "local"),
               volume("pv-old", "local", nodes=["b", "c"], claim_ref=("default", "old")),
               volume("pv-a", "local", nodes=["a"]), volume("pv-c", "local", nodes=["c"]))
    state = cluster(*objects)
    assert feasible(web("old", "new"), state) == ["c"]
    assert reasons(web("old", "new"), state) == {NODE_CONFLICT: 1, BIND: 1}
    assert Placed(state, web("old", "new")).as_json() == [entry("new", "pv-c", "c")]


def test_beta_storage_class_annotation_wins() -> None:
    wanted = claim("data", "standard", annotations={"volume.beta.kubernetes.io/storage-class": "local"})
    pv = volume("pv-a", "standard", nodes=["b"])
    pv["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "local"}
    assert parse_claim(wanted).storage_class == "local"
    assert parse_volume(pv).storage_class == "local"
    assert feasible(web("data"), cluster(LOCAL, STANDARD, wanted, pv)) == ["b"]


def test_changes_are_seen_by_the_same_plugin_and_pod() -> None:
    # the plan is memoised per pod and per state of the catalog and of the nodes
    prof, info = profile(), pod_info(web("data"))
    state = cluster(LOCAL, claim("data", "local"))
    scheduler = Scheduler()
    assert scheduler.schedule(info, prof, state).node is None
    upsert_object(state.catalog, KINDS_BY_NAME[PV], volume("pv-a", "local", node_affinity={"disk": ["ssd"]}))
    assert scheduler.schedule(info, prof, state).message == f"0/3 nodes are available: 3 {BIND}."
    state.upsert_node(parse_node(node("b", labels={ZONE: "z1", "disk": "ssd"})))
    assert scheduler.schedule(info, prof, state).node == "b"
    upsert_object(state.catalog, KINDS_BY_NAME[PV], volume("pv-a", "local", node_affinity={"disk": ["hdd"]}))
    assert scheduler.schedule(info, prof, state).node is None


def test_a_new_catalog_is_read_afresh() -> None:
    # what the plugin keeps of a catalog's volumes is that catalog's: a new one (which CPython puts
    # where the freed one was, at the same version) is read again
    plugin = make_plugin("VolumeBinding")
    state = cluster_of(NODES)
    for expected in ("a", "b", "c", "a"):
        state.catalog = None  # type: ignore[assignment]  # the old catalog is freed first
        state.catalog = Catalog()
        for obj in (LOCAL, claim("data", "local"), volume("pv-a", "local", nodes=[expected])):
            upsert_object(state.catalog, KINDS_BY_NAME[obj["kind"]], obj)
        assert filter_result(plugin, web("data"), state) == {n: n == expected for n in "abc"}


# ------------------------------------------------------------------------------- reserve / unreserve


def test_reserve_static_binding_and_forget() -> None:
    state = cluster(LOCAL, claim("data", "local"), volume("pv-b", "local", nodes=["b"]))
    placed = Placed(state, web("data"))
    assert placed.decision.node == "b"
    assert placed.as_json() == [entry("data", "pv-b", "b")]
    bindings = placed.bindings
    assert bindings is not None and bindings.node == "b" and bindings.dynamic == ()
    [(bound, pv)] = bindings.static
    assert bound.key == "default/data" and pv.claim == ("default", "data", "uid-claim-data")
    # the catalog shows the PV bound to the claim (kube's assume cache), the claim unchanged
    shown = state.catalog.get(PV, "pv-b")
    assert shown.claim == ("default", "data", "uid-claim-data") and shown.name == "pv-b"
    assert state.catalog.assumed(PV, "pv-b")
    assert not state.catalog.assumed(PVC, "data", "default")
    assert state.is_assumed("default/web")
    placed.forget()
    assert state.catalog.get(PV, "pv-b").claim is None
    assert not state.catalog.assumed(PV, "pv-b")
    assert not state.is_assumed("default/web")
    assert placed.decision.reservations == {}


def test_reserve_dynamic_provisioning_and_forget() -> None:
    state = cluster(STANDARD, claim("data", "standard"))
    placed = Placed(state, web("data"), "c")
    assert placed.as_json() == [entry("data", None, "c")]
    shown = state.catalog.get(PVC, "data", "default")
    assert shown.selected_node == "c" and state.catalog.assumed(PVC, "data", "default")
    # another pod of the claim (RWX, say) now goes where it is being provisioned
    assert feasible(pod("other", claims=["data"]), state) == ["c"]
    placed.forget()
    assert state.catalog.get(PVC, "data", "default").selected_node == ""
    assert not state.catalog.assumed(PVC, "data", "default")
    assert feasible(pod("other", claims=["data"]), state) == ["a", "b", "c"]


def test_reserve_claim_already_annotated_for_the_node() -> None:
    state = cluster(STANDARD, claim("data", "standard", selected_node="b"))
    placed = Placed(state, web("data"))
    assert placed.as_json() == [entry("data", None, "b")]
    assert not state.catalog.assumed(PVC, "data", "default")  # nothing to change
    placed.forget()
    assert state.catalog.get(PVC, "data", "default").selected_node == "b"


def test_reserve_pre_bound_volume() -> None:
    # kube's GetBindVolumeToClaim: a claimRef without the claim's uid is completed; one with it is
    # left as it is
    state = cluster(LOCAL, claim("data", "local"), claim_ref(volume("pv-a", "local"), "data"))
    placed = Placed(state, web("data"))
    assert placed.as_json() == [entry("data", "pv-a", "a")]
    assert state.catalog.get(PV, "pv-a").claim == ("default", "data", "uid-claim-data")
    placed.forget()
    assert state.catalog.get(PV, "pv-a").claim == ("default", "data", "")
    state = cluster(LOCAL, claim("data", "local"), claim_ref(volume("pv-a", "local"), "data", uid="uid-claim-data"))
    placed = Placed(state, web("data"))
    assert placed.as_json() == [entry("data", "pv-a", "a")]
    assert not state.catalog.assumed(PV, "pv-a")


def test_two_pods_racing_for_one_volume() -> None:
    state = cluster(LOCAL, claim("c1", "local"), claim("c2", "local"), volume("pv-a", "local", nodes=["a"]))
    first = Placed(state, pod("first", claims=["c1"]))
    assert first.decision.node == "a" and first.as_json() == [entry("c1", "pv-a", "a")]
    second = decide(profile(), pod("second", claims=["c2"]), state)
    assert second.node is None
    assert second.message == f"0/3 nodes are available: 3 {BIND}."
    first.forget()
    again = Placed(state, pod("second", claims=["c2"]))
    assert again.as_json() == [entry("c2", "pv-a", "a")]
    # and now the first one finds nothing
    assert decide(profile(), pod("first", claims=["c1"]), state).message == f"0/3 nodes are available: 3 {BIND}."


def test_two_claims_of_two_pods_share_nothing_across_nodes() -> None:
    # two pods, two claims, two PVs: each gets its own, whatever the order
    state = cluster(LOCAL, claim("c1", "local"), claim("c2", "local"),
                    volume("pv-1", "local"), volume("pv-2", "local", nodes=["c"]))
    first = Placed(state, pod("first", claims=["c1"]))
    assert first.as_json() == [entry("c1", "pv-1", "a")]
    second = Placed(state, pod("second", claims=["c2"]))
    assert second.as_json() == [entry("c2", "pv-2", "c")]


def test_newer_api_server_copy_replaces_the_assumption() -> None:
    base = with_version(volume("pv-a", "local", nodes=["a"]), "5")
    state = cluster(LOCAL, claim("c1", "local"), claim("c2", "local"), base)
    first = Placed(state, pod("first", claims=["c1"]))
    # the PV controller bound it: a newer version, with the claim's uid
    bound = with_version(claim_ref(base, "c1", uid="uid-claim-c1"), "6")
    bound["status"]["phase"] = "Bound"
    assert state.catalog.put(PV, "", "pv-a", parse_volume(bound)) is True
    assert not state.catalog.assumed(PV, "pv-a")
    assert state.catalog.get(PV, "pv-a").phase == "Bound"
    first.forget()  # nothing to restore any more
    assert state.catalog.get(PV, "pv-a").claim == ("default", "c1", "uid-claim-c1")
    assert decide(profile(), pod("second", claims=["c2"]), state).message == f"0/3 nodes are available: 3 {BIND}."


def test_same_or_older_api_server_copy_keeps_the_assumption() -> None:
    base = with_version(volume("pv-a", "local", nodes=["a"]), "5")
    state = cluster(LOCAL, claim("c1", "local"), claim("c2", "local"), base)
    first = Placed(state, pod("first", claims=["c1"]))
    relabelled = with_version(base, "5")
    relabelled["metadata"]["labels"] = {"seen": "again"}
    assert state.catalog.put(PV, "", "pv-a", parse_volume(relabelled)) is False
    assert state.catalog.put(PV, "", "pv-a", parse_volume(with_version(base, "4"))) is False
    assert state.catalog.assumed(PV, "pv-a")
    assert state.catalog.get(PV, "pv-a").claim == ("default", "c1", "uid-claim-c1")
    assert decide(profile(), pod("second", claims=["c2"]), state).node is None
    first.forget()  # the last copy the API server sent is shown again
    assert state.catalog.get(PV, "pv-a").claim is None
    assert decide(profile(), pod("second", claims=["c2"]), state).node == "a"


def test_newer_claim_copy_replaces_the_assumed_annotation() -> None:
    base = with_version(claim("data", "standard"), "10")
    state = cluster(STANDARD, base)
    placed = Placed(state, web("data"), "b")
    assert state.catalog.get(PVC, "data", "default").selected_node == "b"
    written = with_version(claim("data", "standard", selected_node="b"), "11")
    state.catalog.put(PVC, "default", "data", parse_claim(written))
    assert not state.catalog.assumed(PVC, "data", "default")
    placed.forget()
    assert state.catalog.get(PVC, "data", "default").selected_node == "b"


def test_as_json() -> None:
    wanted = parse_claim(claim("data", "local"))
    pv = parse_volume(volume("pv-a", "local"))
    cache = parse_claim(claim("cache", "standard", namespace="prod"))
    bindings = VolumeBindings("n1", ((wanted, pv),), (cache,))
    assert bindings.as_json() == [
        {"claim": "default/data", "volume": "pv-a", "selectedNode": "n1"},
        {"claim": "prod/cache", "volume": None, "selectedNode": "n1"},
    ]
    assert VolumeBindings("n1").as_json() == []


# ------------------------------------------------------------------------------- find_matching_volume


def test_find_matching_volume() -> None:
    wanted = parse_claim(claim("data", "local", "5Gi"))
    volumes = [parse_volume(v) for v in (
        volume("pv-10", "local", "10Gi"), volume("pv-6", "local", "6Gi"), volume("pv-other", "other", "5Gi"),
        volume("pv-4", "local", "4Gi"), volume("pv-6b", "local", "6Gi"))]
    assert [v.name for v in find_matching_volume(wanted, volumes)] == ["pv-6", "pv-6b", "pv-10"]
    assert [v.name for v in find_matching_volume(wanted, volumes, {"pv-6"})] == ["pv-6b", "pv-10"]
    pre = parse_volume(claim_ref(volume("pv-pre", "local", "50Gi"), "data"))
    assert [v.name for v in find_matching_volume(wanted, [*volumes, pre])] == ["pv-pre"]
    assert [v.name for v in find_matching_volume(wanted, [*volumes, pre], {"pv-pre"})] == ["pv-6", "pv-6b", "pv-10"]


# ------------------------------------------------------------------------------- placer simulate


def test_simulate_lists_the_volumes() -> None:
    zonal = storage_class("zonal", allowed_topologies={ZONE: ["z2"]})
    cluster_docs = [*NODES, LOCAL, zonal,
                    claim("data", "local"), claim("cache", "zonal"), claim("logs", "local"),
                    volume("pv-local", "local", nodes=["b"]),
                    pod("p1-static", claims=["data"]), pod("p2-dynamic", claims=["cache"]),
                    pod("p3-late", claims=["logs"])]
    profile_doc = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "volumes"},
                   "spec": {"schedulerName": "placer", "filters": [{"name": "NodeResourcesFit"},
                                                                  {"name": "VolumeBinding"}],
                            "scores": [], "postFilters": []}}
    simulation = simulate_documents([(Path("cluster.yaml"), list(enumerate(cluster_docs, 1)))],
                                    [(Path("profile.yaml"), [(1, profile_doc)])])
    out = io.StringIO()
    render_json(simulation, out)
    result = json.loads(out.getvalue())
    placements = {p["pod"]: p for p in result["placements"]}
    assert list(placements) == ["default/p1-static", "default/p2-dynamic", "default/p3-late"]
    assert placements["default/p1-static"]["node"] == "b"
    assert [list(v) for v in placements["default/p1-static"]["volumes"]] == [["claim", "volume", "selectedNode"]]
    assert placements["default/p1-static"]["volumes"] == [
        {"claim": "default/data", "volume": "pv-local", "selectedNode": "b"}]
    assert placements["default/p2-dynamic"]["node"] == "c"
    assert placements["default/p2-dynamic"]["volumes"] == [
        {"claim": "default/cache", "volume": None, "selectedNode": "c"}]
    # the PV went to the first pod: the third finds none
    assert placements["default/p3-late"]["node"] is None
    assert placements["default/p3-late"]["message"] == f"0/3 nodes are available: 3 {BIND}."
    assert placements["default/p3-late"]["volumes"] == []
    assert result["summary"] == {"pods": 3, "scheduled": 2, "unschedulable": 1}
    assert simulation.cluster.catalog.get(PV, "pv-local").claim == ("default", "data", "uid-claim-data")


# ----------------------------------------------------------------------------- PreBind (BindPodVolumes)


def pre_bind(placed: Placed) -> Any:
    plan = binding_plugin().pre_bind(placed.pod, placed.state, placed.decision.node or "", placed.bindings)
    assert plan is not None and plan.wait is not None
    return plan


def served(state: ClusterState, obj: dict[str, Any]) -> None:
    """What the watch brings: the API server's copy of an object (it replaces an older assumption)."""
    upsert_object(state.catalog, KINDS_BY_NAME[obj["kind"]], obj)


def test_pre_bind_has_nothing_to_do_without_claims_to_bind() -> None:
    state = cluster(LOCAL, bound_claim("data", "pv-a"), volume("pv-a", "local", nodes=["a"]))
    placed = Placed(state, web("data"))
    assert placed.bindings is None
    assert binding_plugin().pre_bind(placed.pod, state, "a", None) is None


def test_pre_bind_writes_the_claim_ref_then_waits_for_the_pv_controller() -> None:
    state = cluster(LOCAL, claim("data", "local"), with_version(volume("pv-b", "local", nodes=["b"]), "7"))
    placed = Placed(state, web("data"))
    plan = pre_bind(placed)
    [write] = plan.writes
    assert (write.target.path(), write.patch_type, write.resource_version) == (
        "/api/v1/persistentvolumes/pv-b", "merge", "7")
    assert write.body() == {
        "spec": {"claimRef": {"apiVersion": "v1", "kind": PVC, "namespace": "default", "name": "data",
                              "uid": "uid-claim-data", "fieldPath": None}},
        "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}, "resourceVersion": "7"},
    }
    assert write.undo is None  # a claimRef stays, as in kube
    bound_pv = {"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "uid-claim-data"}}}
    assert write.landed is not None and write.landed(bound_pv) and not write.landed({"spec": {}})
    written = {write.target: "8"}  # what our write left the PV at
    assert plan.wait.check(state, written) is False  # not back through the watch yet
    served(state, with_version(claim_ref(volume("pv-b", "local", nodes=["b"]), "data", "uid-claim-data"), "8"))
    assert plan.wait.check(state, written) is False  # the claim is not bound yet
    served(state, bound_claim("data", "pv-b"))
    assert plan.wait.check(state, written) is True
    assert plan.wait.timeout_message == "binding volumes: timed out waiting for the condition"


def test_pre_bind_annotates_a_claim_to_provision_and_undoes_only_its_own_annotation() -> None:
    state = cluster(STANDARD, claim("data", "standard"))
    placed = Placed(state, web("data"), "c")
    [write] = pre_bind(placed).writes
    assert write.target.path() == "/api/v1/namespaces/default/persistentvolumeclaims/data"
    assert write.body()["metadata"]["annotations"] == {"volume.kubernetes.io/selected-node": "c"}
    assert write.undo is not None
    ours = {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "c"}}, "spec": {}}
    undo = write.undo(ours)
    assert undo is not None
    assert undo.patch == {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": None}}}
    assert write.undo({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "a"}}}) is None
    assert write.undo({**ours, "spec": {"volumeName": "pvc-1"}}) is None  # bound meanwhile: it stays


def test_pre_bind_writes_nothing_the_api_server_already_shows() -> None:
    state = cluster(STANDARD, claim("data", "standard", selected_node="b"))
    placed = Placed(state, web("data"))
    plan = pre_bind(placed)
    assert plan.writes == () and plan.wait is not None


def test_pre_bind_wait_fails_when_the_provisioner_gives_up_or_the_node_goes() -> None:
    state = cluster(STANDARD, claim("data", "standard"))
    placed = Placed(state, web("data"), "c")
    plan = pre_bind(placed)
    served(state, with_version(claim("data", "standard", selected_node="c"), "20"))
    assert plan.wait.check(state, {}) is False  # provisioning
    served(state, with_version(claim("data", "standard"), "21"))  # the annotation removed: it gave up
    with pytest.raises(PreBindError, match=r'^binding volumes: provisioning failed for PVC "data"$'):
        plan.wait.check(state, {})
    state.remove_node("c")
    with pytest.raises(PreBindError, match='failed to get node "c": node "c" not found'):
        plan.wait.check(state, {})
