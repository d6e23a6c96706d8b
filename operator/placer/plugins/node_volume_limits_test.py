"""NodeVolumeLimits: kube's csi_test table (PV-backed claims, shared volumes, unbound claims through
their class, in-tree volumes migrated to CSI, ephemeral volumes, nodes without CSINode), messages,
and the per-node volumes kept in step with pods, claims, volumes and CSINodes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from placer.engine.cluster import ClusterState
from placer.engine.framework import ClusterEvent
from placer.engine.kinds import KINDS_BY_NAME, delete_object, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.plugins.node_volume_limits import VolumesInUse
from placer.simulate import simulate_documents
from placer.testing import (
    claim,
    cluster_of,
    decide,
    filter_result,
    fits_without_answers,
    make_plugin,
    make_profile,
    node,
    pod,
    volume,
)
from placer.testing import storage_class as storage_class_obj

LIMITS = make_plugin("NodeVolumeLimits")
REASON = "node(s) exceed max volume count"
EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
SC = "csi-sc"

Obj = dict[str, Any]


def csinode(name: str, limits: dict[str, int | None], migrated: Sequence[str] = ()) -> Obj:
    """A CSINode: per driver its `allocatable.count` (None: the driver reports no limit)."""
    drivers = []
    for driver, count in limits.items():
        entry: Obj = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    meta: Obj = {"name": name}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated)}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": drivers}}


def in_tree_volume(name: str, source: str, volume_id: str) -> Obj:
    """A PV with an in-tree source, e.g. ("awsElasticBlockStore", "vol-1")."""
    obj = volume(name, claim_ref=("default", name))
    key = {"awsElasticBlockStore": "volumeID", "gcePersistentDisk": "pdName"}.get(source, "path")
    obj["spec"][source] = {key: volume_id}
    return obj


def bound(name: str, driver: str | None) -> list[Obj]:
    """A claim `name` bound to a PV `name` of that CSI driver (handle `handle-<name>`), or to an NFS PV."""
    pv = volume(name, claim_ref=("default", name), csi_driver=driver)
    if driver is None:
        pv["spec"]["nfs"] = {"server": "nfs", "path": f"/{name}"}
    return [pv, claim(name, volume_name=name)]


def inline_ebs(volume_id: str) -> Obj:
    return {"name": f"inline-{volume_id}", "awsElasticBlockStore": {"volumeID": volume_id}}


def catalog(extra: Sequence[Obj] = ()) -> list[Obj]:
    """kube's fake listers, after csi_test: csi-ebs-0..3 and csi-gce-1..2 bound to CSI volumes,
    intree-ebs-0..2 to in-tree EBS volumes, csi-4 unbound (class csi-sc, provisioned by the EBS
    driver), csi-6 naming a volume that does not exist, csi-5 of a class that does not exist,
    hostpath-0 bound to a volume no CSI driver handles."""
    objects: list[Obj] = [storage_class_obj(SC, EBS)]
    for i in range(4):
        objects += bound(f"csi-ebs-{i}", EBS)
    for i in (1, 2):
        objects += bound(f"csi-gce-{i}", GCE)
    for i in range(3):
        objects += [in_tree_volume(f"intree-ebs-{i}", "awsElasticBlockStore", f"vol-intree-{i}"),
                    claim(f"intree-ebs-{i}", volume_name=f"intree-ebs-{i}")]
    objects += [claim("csi-4", SC), claim("csi-6", SC, volume_name="missing-pv"), claim("csi-5", "no-such-class")]
    objects += [in_tree_volume("hostpath-0", "hostPath", "/data"), claim("hostpath-0", volume_name="hostpath-0")]
    return [*objects, *extra]


def one_node(existing: Sequence[Obj], limits: dict[str, int | None] | None, extra: Sequence[Obj] = ()) -> ClusterState:
    """Node `n` running the `existing` pods, with a CSINode of those limits (None: no CSINode)."""
    csi = [] if limits is None else [csinode("n", limits)]
    return cluster_of([node("n")], [{**p, "spec": {**p["spec"], "nodeName": "n"}} for p in existing],
                      objects=[*catalog(extra), *csi])


def uses(*claims: str, name: str | None = None, volumes: Sequence[Obj] = ()) -> Obj:
    return pod(name or "-".join(claims) or "pod", claims=claims, volumes=volumes)


def fits(new: Obj, existing: Sequence[Obj], limits: dict[str, int | None] | None, extra: Sequence[Obj] = ()) -> bool:
    return filter_result(LIMITS, new, one_node(existing, limits, extra))["n"]


RUNNING = uses("csi-ebs-3", name="running")
TWO_EBS = uses("csi-ebs-1", "csi-ebs-2", name="two-ebs")
ONE_EBS = uses("csi-ebs-0", name="one-ebs")


@pytest.mark.parametrize(
    ("new", "existing", "limits", "expected"),
    [
        (ONE_EBS, [RUNNING, TWO_EBS], {EBS: 4}, True),  # fits when the limit >= the volumes
        (ONE_EBS, [RUNNING, TWO_EBS], {EBS: 3}, False),  # 3 in use + 1
        (ONE_EBS, [RUNNING, TWO_EBS], {EBS: 2}, False),
        (ONE_EBS, [RUNNING, TWO_EBS], {EBS: None}, True),  # the driver reports no limit
        (ONE_EBS, [RUNNING, TWO_EBS], None, True),  # no CSINode: no limit
        (ONE_EBS, [RUNNING, TWO_EBS], {GCE: 1}, True),  # a limit for another driver only
        # an unbound claim counts through its class's provisioner
        (ONE_EBS, [uses("csi-4", name="pending"), TWO_EBS], {EBS: 3}, False),
        # two pods sharing an unbound claim count it once
        (ONE_EBS, [uses("csi-4", name="pending"), uses("csi-4", name="pending2"), TWO_EBS], {EBS: 4}, True),
        (ONE_EBS, [uses("csi-4", name="pending"), uses("csi-4", name="pending2"), TWO_EBS], {EBS: 3}, False),
        # a claim naming a volume that does not exist counts through its class too
        (ONE_EBS, [uses("csi-6", name="missing-pv"), TWO_EBS], {EBS: 3}, False),
        # a claim whose class does not exist does not count
        (ONE_EBS, [RUNNING, uses("csi-5", name="no-sc")], {EBS: 2}, True),
        # volumes of another driver do not count
        (ONE_EBS, [uses("csi-gce-1", "csi-gce-2"), TWO_EBS], {EBS: 3, GCE: 2}, True),
        (ONE_EBS, [uses("csi-gce-1", "csi-gce-2"), TWO_EBS], {EBS: 2, GCE: 2}, False),
        (uses("csi-gce-1", "csi-gce-2"), [TWO_EBS, RUNNING], {EBS: 2, GCE: 2}, True),
        (uses("csi-gce-1", "csi-gce-2"), [TWO_EBS, RUNNING], {EBS: 2, GCE: 1}, False),
        # a volume already in use on the node adds nothing; one shared by two pods counts once
        (uses("csi-ebs-1", name="again"), [RUNNING, TWO_EBS], {EBS: 3}, True),
        (uses("csi-ebs-1", "csi-ebs-0", name="again"), [RUNNING, TWO_EBS], {EBS: 3}, False),
        (ONE_EBS, [TWO_EBS, uses("csi-ebs-1", name="shares")], {EBS: 3}, True),
        (uses("csi-ebs-0", "csi-ebs-0", name="twice"), [TWO_EBS], {EBS: 3}, True),  # the same claim twice
        (uses("csi-ebs-0", "csi-ebs-3", name="two-new"), [TWO_EBS], {EBS: 3}, False),
        # in-tree volumes count under the CSI driver they migrate to (modern kube: always, given a CSINode)
        (uses("intree-ebs-0"), [uses("intree-ebs-1", "intree-ebs-2")], {EBS: 2}, False),
        (uses("intree-ebs-0"), [uses("intree-ebs-1", "intree-ebs-2")], {EBS: 3}, True),
        (uses("intree-ebs-0"), [uses("intree-ebs-1", "intree-ebs-2")], {EBS: None}, True),
        (uses("intree-ebs-0"), [TWO_EBS], {EBS: 2}, False),  # in-tree and CSI alike
        (ONE_EBS, [uses("intree-ebs-1", "intree-ebs-2")], {EBS: 2}, False),
        (uses("csi-4", name="pending"), [uses("intree-ebs-1", "intree-ebs-2")], {EBS: 2}, False),
        # inline in-tree volumes count too; one with the id of a CSI volume in use is that volume
        (uses(volumes=[inline_ebs("aws-inline1")]), [uses("intree-ebs-1", "intree-ebs-2")], {EBS: 2}, False),
        (uses(volumes=[inline_ebs("aws-inline1")]), [TWO_EBS, uses("intree-ebs-0")], {EBS: 3}, False),
        (uses(volumes=[inline_ebs("handle-csi-ebs-1")]), [TWO_EBS, uses("intree-ebs-0")], {EBS: 3}, True),
        (ONE_EBS, [uses(volumes=[inline_ebs("a")], name="x"), uses(volumes=[inline_ebs("a")], name="y")],
         {EBS: 2}, True),
        # volumes no CSI driver handles do not count
        (uses("hostpath-0"), [TWO_EBS], {EBS: 2}, True),
        (ONE_EBS, [uses("hostpath-0"), RUNNING], {EBS: 2}, True),
        # a pod already placed whose claim is gone: not counted
        (ONE_EBS, [uses("deleted-claim", name="orphan"), RUNNING], {EBS: 2}, True),
    ],
)
def test_kube_table(new: Obj, existing: list[Obj], limits: dict[str, int | None] | None, expected: bool) -> None:
    assert fits(new, existing, limits) is expected


def test_inline_csi_and_other_volumes_are_not_counted() -> None:
    # kube's PreFilter skips pods without claims or migratable inline disks: inline CSI (ephemeral)
    # volumes are never attached, and configMaps, secrets, RBD or iSCSI are no CSI volumes
    inline_csi = {"name": "scratch", "csi": {"driver": EBS}}
    others = [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "rbd", "rbd": {"image": "i", "monitors": ["m"]}}]
    cluster = one_node([uses(volumes=[inline_csi], name="x"), uses(volumes=[inline_csi], name="y")], {EBS: 1})
    assert LIMITS.filter(parse_pod(uses(volumes=[inline_csi, *others])), cluster) is None
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}  # the inline CSI volumes in use count nothing
    # a pod with a claim among other volumes is evaluated
    assert filter_result(LIMITS, uses("csi-ebs-0", "csi-ebs-1", volumes=others), cluster) == {"n": False}


def test_pod_without_volumes_is_not_filtered() -> None:
    assert LIMITS.filter(parse_pod(pod("p")), one_node([RUNNING], {EBS: 1})) is None


def test_no_limit_for_the_pods_drivers_is_not_filtered() -> None:
    # nothing to check anywhere: no mask, and the pods placed are not even looked at
    cluster = one_node([RUNNING, TWO_EBS], {GCE: 1})
    assert LIMITS.filter(parse_pod(ONE_EBS), cluster) is None
    assert LIMITS.filter(parse_pod(ONE_EBS), one_node([RUNNING], None)) is None


def ephemeral_pod(name: str = "abc", uid: str = "12345", volumes: Sequence[str] = ("xyz",)) -> Obj:
    return pod(name, namespace="test", uid=uid,
               volumes=[{"name": v, "ephemeral": {"volumeClaimTemplate": {}}} for v in volumes])


def ephemeral_claim(pod_name: str, volume_name: str, owner_uid: str | None) -> Obj:
    obj = claim(f"{pod_name}-{volume_name}", SC, namespace="test")
    if owner_uid:
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": owner_uid, "controller": True}]
    return obj


def test_ephemeral_volumes() -> None:
    profile = make_profile(filters=[{"name": "NodeVolumeLimits"}], scores=[])
    missing = one_node([], {EBS: None})
    assert decide(profile, ephemeral_pod(), missing).message == (
        '0/1 nodes are available: 1 looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found.')
    not_owned = one_node([], {EBS: None}, [ephemeral_claim("abc", "xyz", None)])
    assert decide(profile, ephemeral_pod(), not_owned).message == (
        "0/1 nodes are available: 1 PVC test/abc-xyz was not created for pod test/abc (pod is not owner).")
    owned = [ephemeral_claim("abc", "xyz", "12345")]
    assert fits(ephemeral_pod(), [], {EBS: None}, owned)
    assert fits(ephemeral_pod(), [RUNNING], {EBS: 2}, owned)
    assert not fits(ephemeral_pod(), [RUNNING, TWO_EBS], {EBS: 3}, owned)
    # an ephemeral pod in place counts its claims
    two = [ephemeral_claim("abc", "x", "12345II"), ephemeral_claim("abc", "y", "12345II")]
    assert not fits(ONE_EBS, [RUNNING, ephemeral_pod(uid="12345II", volumes=("x", "y"))], {EBS: 3}, two)
    assert fits(ONE_EBS, [RUNNING, ephemeral_pod(uid="12345II", volumes=("x", "y"))], {EBS: 4}, two)
    # one not owned by the pod in place does not count
    assert fits(ONE_EBS, [RUNNING, ephemeral_pod(uid="other", volumes=("x", "y"))], {EBS: 2}, two)


def test_messages_and_resolvability() -> None:
    cluster = cluster_of([node("a"), node("b"), node("c")],
                         [{**RUNNING, "spec": {**RUNNING["spec"], "nodeName": "a"}},
                          {**TWO_EBS, "spec": {**TWO_EBS["spec"], "nodeName": "b"}}],
                         objects=[*catalog(), csinode("a", {EBS: 1}), csinode("b", {EBS: 2}), csinode("c", {EBS: 0})])
    profile = make_profile(filters=[{"name": "NodeVolumeLimits"}], scores=[])
    decision = decide(profile, ONE_EBS, cluster)
    assert decision.node is None
    assert decision.message == f"0/3 nodes are available: 3 {REASON}."
    info = parse_pod(ONE_EBS)
    mask = LIMITS.filter(info, cluster)
    assert mask is not None
    assert LIMITS.resolvable_nodes(info, cluster, (~mask).nonzero()[0]).all()  # evicting pods frees volumes
    # the volume already in use on b needs no room there
    assert filter_result(LIMITS, uses("csi-ebs-1", name="q"), cluster) == {"a": False, "b": True, "c": False}
    missing = parse_pod(uses("nope"))
    assert decide(profile, missing, cluster).message == (
        '0/3 nodes are available: 3 looking up PVC default/nope: persistentvolumeclaim "nope" not found.')
    rejected = (~LIMITS.filter(missing, cluster)).nonzero()[0]
    assert not LIMITS.resolvable_nodes(missing, cluster, rejected).any()


def test_preemption_asks_with_pods_gone() -> None:
    cluster = one_node([RUNNING, TWO_EBS], {EBS: 3})
    info = parse_pod(ONE_EBS)
    assert filter_result(LIMITS, info, cluster) == {"n": False}
    slot = cluster.index["n"]
    assert LIMITS.fits_without(info, cluster, slot, [cluster.pods["default/running"]])
    assert not LIMITS.fits_without(info, cluster, slot, [])
    assert filter_result(LIMITS, info, cluster) == {"n": False}


@pytest.mark.parametrize(
    ("new", "answers"),
    [
        (ONE_EBS, {True, False}),
        (uses("csi-ebs-1", name="in-use"), {True, False}),  # in use on a: fits there until all its users go
        (uses("csi-ebs-0", "csi-gce-2", name="both"), {True, False}),
        (uses("csi-4", name="pending-too"), {True, False}),  # the unbound claim, under the class's driver
        (uses(volumes=[inline_ebs("vol-inline")], name="inline"), {True, False}),
        (uses("hostpath-0", name="no-csi"), {True}),
        (uses("nope", name="missing"), {False}),  # a missing claim: nothing helps
    ],
)
def test_fits_without_agrees_with_filter_with_the_pods_gone(new: Obj, answers: set[bool]) -> None:
    placed = {
        "a": [RUNNING, TWO_EBS, uses("csi-ebs-1", name="shares"), uses("csi-4", name="pending"),
              uses(volumes=[inline_ebs("vol-inline")], name="inline-user")],
        "b": [uses("csi-gce-1", name="gce"), uses("csi-ebs-0", "csi-ebs-1", name="ebs")],
        "c": [uses("csi-ebs-2", name="unlimited")],
    }
    bound_pods = [{**p, "spec": {**p["spec"], "nodeName": name}} for name, pods in placed.items() for p in pods]
    cluster = cluster_of([node("a"), node("b"), node("c")], bound_pods,
                         objects=[*catalog(), csinode("a", {EBS: 4, GCE: 1}), csinode("b", {EBS: 2, GCE: 1})])
    assert fits_without_answers(LIMITS, new, cluster) == answers  # both answers (or the one there is)
    assert len(cluster.pods) == len(bound_pods)  # every pod counted, and put back


def test_preemption_evicts_the_fewest_lower_priority_pods() -> None:
    low = [{**RUNNING, "spec": {**RUNNING["spec"], "priority": 1}},
           {**TWO_EBS, "spec": {**TWO_EBS["spec"], "priority": 2}}]
    cluster = one_node(low, {EBS: 3})
    profile = make_profile(filters=[{"name": "NodeVolumeLimits"}], scores=[])
    decision = decide(profile, {**ONE_EBS, "spec": {**ONE_EBS["spec"], "priority": 10}}, cluster)
    assert decision.message == f"0/1 nodes are available: 1 {REASON}."
    assert decision.preemption is not None
    # kube reprieves the higher-priority pod first: its two volumes and the new one fit in 3
    assert [victim.name for victim in decision.preemption.victims] == ["running"]


def put(cluster: ClusterState, obj: Obj) -> None:
    upsert_object(cluster.catalog, KINDS_BY_NAME[obj["kind"]], obj)


def test_assume_forget_and_remove() -> None:
    cluster = one_node([RUNNING], {EBS: 2})
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    cluster.assume(parse_pod(uses("csi-ebs-1", name="assumed")), "n")
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    cluster.forget("default/assumed")
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    cluster.add_pod(parse_pod(pod("x", node_name="n", claims=["csi-ebs-1"])))
    cluster.add_pod(parse_pod(pod("y", node_name="n", claims=["csi-ebs-1"])))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    cluster.remove_pod("default/x")  # y still holds the volume
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    cluster.remove_pod("default/y")
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    cluster.remove_pod("default/running")
    tracker = cluster.tracker(VolumesInUse)
    assert tracker._users == {} and tracker._pods == {} and tracker._slot_pods == {}


def test_a_claim_bound_after_its_pod_was_counted() -> None:
    # the pod in place was counted while its claim was unbound (under the class, with a handle of its
    # own); once bound to csi-ebs-0's volume the incoming pod's volume is the one in use
    cluster = one_node([uses("late", name="early")], {EBS: 1}, [claim("late", SC)])
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    tracker = cluster.tracker(VolumesInUse)
    assert tracker._unsettled == {"default/early"}
    put(cluster, claim("late", SC, volume_name="csi-ebs-0"))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    assert filter_result(LIMITS, uses("csi-ebs-1", name="q"), cluster) == {"n": False}
    assert tracker._unsettled == set()  # bound for good: not resolved again on later changes
    cluster.remove_pod("default/early")
    assert tracker._users == {} and tracker._pods == {}


def test_claims_volumes_and_classes_arriving_after_their_pod() -> None:
    cluster = one_node([uses("c-new", name="early"), uses("c-pv", name="early2")], {EBS: 2},
                       [claim("c-pv", volume_name="pv-new")])
    # c-new does not exist; c-pv names a volume not there yet, of a class not there: nothing counts
    assert filter_result(LIMITS, uses("csi-ebs-0", "csi-ebs-1", name="q"), cluster) == {"n": True}
    put(cluster, claim("c-new", SC))  # counts under its class now
    assert filter_result(LIMITS, uses("csi-ebs-0", "csi-ebs-1", name="q"), cluster) == {"n": False}
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    put(cluster, volume("pv-new", claim_ref=("default", "c-pv"), csi_driver=EBS))  # its volume arrives
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    # a pod naming that volume's claim adds nothing
    put(cluster, claim("c-pv2", volume_name="pv-new"))
    assert filter_result(LIMITS, uses("c-pv2", name="q"), cluster) == {"n": True}
    # a class created after the claim that names it
    cluster = one_node([uses("c-late-class", name="early")], {EBS: 1}, [claim("c-late-class", "late-class")])
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    put(cluster, storage_class_obj("late-class", EBS))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}


@pytest.mark.parametrize("migrated", [(), ("kubernetes.io/aws-ebs",), ("kubernetes.io/gce-pd", "kubernetes.io/cinder")])
def test_in_tree_volumes_count_wherever_the_node_has_a_csinode(migrated: tuple[str, ...]) -> None:
    # modern kube's isCSIMigrationOn: migration of the GCE PD, AWS EBS, Azure Disk and Cinder plugins is
    # on wherever the node has a CSINode, whatever its migrated-plugins annotation lists
    cluster = cluster_of([node("n")], [pod("x", node_name="n", claims=["intree-ebs-1", "intree-ebs-2"])],
                         objects=[*catalog(), csinode("n", {EBS: 2}, migrated)])
    assert filter_result(LIMITS, uses("intree-ebs-0"), cluster) == {"n": False}
    assert filter_result(LIMITS, uses(volumes=[inline_ebs("vol-x")]), cluster) == {"n": False}
    assert filter_result(LIMITS, uses("intree-ebs-1", name="q"), cluster) == {"n": True}


def test_ebs_ids_written_as_urls() -> None:
    # kube's translation: aws://<zone>/<vol-id> is <vol-id>, for PVs and inline volumes alike
    url_pv = in_tree_volume("url-ebs", "awsElasticBlockStore", "aws://us-east-1a/vol-intree-1")
    cluster = one_node([uses("intree-ebs-1", name="early")], {EBS: 1},
                       [url_pv, claim("url-ebs", volume_name="url-ebs")])
    assert filter_result(LIMITS, uses("url-ebs", name="q"), cluster) == {"n": True}
    assert filter_result(LIMITS, uses(volumes=[inline_ebs("aws://us-east-1a/vol-intree-1")]), cluster) == {"n": True}
    assert filter_result(LIMITS, uses(volumes=[inline_ebs("aws://us-east-1a/vol-other")]), cluster) == {"n": False}


def test_class_changes_move_unbound_claims() -> None:
    cluster = one_node([uses("csi-4", name="pending")], {EBS: 1, GCE: 1})
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    put(cluster, storage_class_obj(SC, GCE))  # the class re-created with another provisioner
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    assert filter_result(LIMITS, uses("csi-gce-1"), cluster) == {"n": False}
    put(cluster, storage_class_obj(SC, "kubernetes.io/aws-ebs"))  # an in-tree provisioner: its CSI driver
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}


def test_csinode_changes() -> None:
    cluster = one_node([RUNNING, TWO_EBS], None)
    assert LIMITS.filter(parse_pod(ONE_EBS), cluster) is None
    put(cluster, csinode("n", {EBS: 3}))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    put(cluster, csinode("n", {EBS: 4}))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    delete_object(cluster.catalog, KINDS_BY_NAME["CSINode"], csinode("n", {}))
    assert LIMITS.filter(parse_pod(ONE_EBS), cluster) is None


def test_nodes_going_and_coming() -> None:
    others = [csinode("m", {EBS: 1}), csinode("o", {EBS: 1}), csinode("q", {EBS: 0})]
    cluster = one_node([RUNNING, TWO_EBS], {EBS: 3}, others)
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    cluster.upsert_node(parse_node(node("m")))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"m": True, "n": False}
    cluster.remove_node("n")
    cluster.upsert_node(parse_node(node("o")))  # takes n's slot: n's volumes are not o's
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"m": True, "o": True}
    cluster.remove_node("o")
    cluster.upsert_node(parse_node(node("q")))  # takes it again: q's limit, not o's
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"m": True, "q": False}
    cluster.upsert_node(parse_node(node("n")))  # back, with its pods
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"m": True, "n": False, "q": False}
    assert filter_result(LIMITS, uses("csi-ebs-3", name="r"), cluster) == {"m": True, "n": True, "q": False}
    # relabelling a node keeps the limits
    cluster.upsert_node(parse_node(node("n", labels={"disk": "ssd"})))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"m": True, "n": False, "q": False}


def test_events() -> None:
    assert LIMITS.events == {ClusterEvent.POD_DELETE, ClusterEvent.NODE_ADD, "CSINode", "PersistentVolumeClaim",
                             "PersistentVolume", "VolumeAttachment"}
    assert LIMITS.resolvable is True


# ------------------------------------------------- VolumeAttachments (kube v1.33+, csi_test.go rows)
# kube's buildFakeClientWithVALister: VolumeAttachment j of a driver attaches PV `csi-<driver>-j` to
# the test node; here the PVs of `catalog()` (csi-ebs-0..3, handle `handle-<name>`).


def attachment(name: str, volume_name: str | None, node_name: str = "n", attacher: str = EBS) -> Obj:
    source = {} if volume_name is None else {"persistentVolumeName": volume_name}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node_name, "source": source}}


def attachments(count: int) -> list[Obj]:
    return [attachment(f"va-{EBS}-{j}", f"csi-ebs-{j}") for j in range(count)]


@pytest.mark.parametrize(("name", "count", "expected"), [
    # the attachments' 2 volumes, and the pod's own (attached already, but no pod uses it: new, as kube counts)
    ("should count VolumeAttachments towards volume limit when no pods exist", 2, False),
    ("should schedule pod when VolumeAttachments count does not exceed limit", 1, True),
])
def test_kube_volume_attachment_rows(name: str, count: int, expected: bool) -> None:
    assert fits(ONE_EBS, [], {EBS: 2}, attachments(count)) is expected
    assert fits(ONE_EBS, [], {EBS: 2}) is True  # without them: 1 of 2


def test_an_attached_volume_a_pod_uses_counts_once() -> None:
    # two-ebs holds csi-ebs-1 and -2 on n; an attachment of csi-ebs-1 adds nothing, one of csi-ebs-3 one
    assert fits(ONE_EBS, [TWO_EBS], {EBS: 3}, [attachment("va-1", "csi-ebs-1")]) is True
    assert fits(ONE_EBS, [TWO_EBS], {EBS: 3}, [attachment("va-3", "csi-ebs-3")]) is False
    # two attachments of one volume (same attacher and handle) count once
    assert fits(ONE_EBS, [TWO_EBS], {EBS: 4},
                [attachment("va-3", "csi-ebs-3"), attachment("va-3b", "csi-ebs-3")]) is True


@pytest.mark.parametrize(("objects", "counted"), [
    ([attachment("other-node", "csi-ebs-3", node_name="m")], False),
    ([attachment("no-attacher", "csi-ebs-3", attacher="")], False),
    ([attachment("inline-spec", None)], False),
    ([attachment("no-pv", "missing-pv")], False),
    ([attachment("in-tree", "intree-ebs-0")], False),  # kube reads only a PV's spec.csi here
    ([attachment("other-driver", "csi-ebs-3", attacher=GCE)], False),  # counted under gce, not ebs
    ([attachment("counted", "csi-ebs-3")], True),
])
def test_which_attachments_count(objects: list[Obj], counted: bool) -> None:
    assert fits(ONE_EBS, [TWO_EBS], {EBS: 3}, objects) is not counted


def test_an_attachment_counts_under_its_attacher() -> None:
    # an attachment by the GCE driver of an EBS volume: its volume is (gce, handle-csi-ebs-3)
    assert fits(uses("csi-gce-1"), [], {GCE: 1}, [attachment("gce", "csi-ebs-3", attacher=GCE)]) is False
    assert fits(uses("csi-gce-1"), [], {GCE: 2}, [attachment("gce", "csi-ebs-3", attacher=GCE)]) is True


def test_attachments_follow_the_catalog_and_wake_the_pod() -> None:
    cluster = one_node([TWO_EBS], {EBS: 3}, [attachment("va-3", "csi-ebs-3")])
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    delete_object(cluster.catalog, KINDS_BY_NAME["VolumeAttachment"], attachment("va-3", "csi-ebs-3"))
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": True}
    put(cluster, attachment("va-0", "csi-ebs-0"))  # the pod's own volume: still new (kube), and attached
    assert filter_result(LIMITS, ONE_EBS, cluster) == {"n": False}
    assert "VolumeAttachment" in LIMITS.events


def test_preemption_keeps_attached_volumes_counted() -> None:
    """With the pods gone the volumes they used stay counted while an attachment holds them (kube's
    filter on the node without them): evicting two-ebs frees only csi-ebs-2."""
    cluster = one_node([RUNNING, TWO_EBS], {EBS: 3}, [attachment("va-1", "csi-ebs-1")])
    info = parse_pod(ONE_EBS)
    slot = cluster.index["n"]
    assert not LIMITS.fits_without(info, cluster, slot, [])
    assert LIMITS.fits_without(info, cluster, slot, [cluster.pods["default/two-ebs"]])  # 1 + 1 (va) + 1
    three = one_node([RUNNING, TWO_EBS], {EBS: 2}, [attachment("va-1", "csi-ebs-1")])
    assert not LIMITS.fits_without(info, three, slot, [three.pods["default/two-ebs"]])  # 3 > 2
    assert LIMITS.fits_without(info, three, slot, [three.pods["default/two-ebs"], three.pods["default/running"]])


def test_simulate_reads_volume_attachments() -> None:
    """`placer simulate`'s `--cluster` documents take VolumeAttachments like any catalog kind."""
    pending = {**ONE_EBS, "spec": {**ONE_EBS["spec"], "schedulerName": "placer"}}
    documents = [node("n"), csinode("n", {EBS: 2}), *catalog(attachments(2)), pending]
    profile = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p"},
               "spec": {"schedulerName": "placer"}}
    result = simulate_documents([(Path("cluster.yaml"), list(enumerate(documents)))],
                                [(Path("profile.yaml"), [(0, profile)])])
    (decision,) = result.decisions
    assert decision.node is None and decision.reasons == {REASON: 1}
