"""VolumeRestrictions: kube's disk conflict tables (GCE PD, AWS EBS, RBD, iSCSI), ReadWriteOncePod
claims used by bound, assumed and deleted pods, messages, and the incremental trackers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from placer.engine.cluster import PodRecord
from placer.engine.framework import ClusterEvent
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.plugins.volume_restrictions import ClaimUsers, DisksInUse
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
)

RESTRICTIONS = make_plugin("VolumeRestrictions")
DISK = "node(s) had no available disk"
RWOP = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)


def gce(pd: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": f"gce-{pd}", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}


def ebs(volume_id: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": f"ebs-{volume_id}", "awsElasticBlockStore": {"volumeID": volume_id, "readOnly": read_only}}


def rbd(image: str, monitors: list[str], pool: str | None = None, read_only: bool = False) -> dict[str, Any]:
    source: dict[str, Any] = {"image": image, "monitors": monitors, "readOnly": read_only}
    if pool is not None:
        source["pool"] = pool
    return {"name": f"rbd-{image}", "rbd": source}


def iscsi(iqn: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": "iscsi", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0,
                                      "readOnly": read_only}}


def azure(uri: str) -> dict[str, Any]:
    return {"name": "azure", "azureDisk": {"diskName": "d", "diskURI": uri}}


def holder_cluster(*volumes: dict[str, Any]) -> Any:
    """Node a runs a pod mounting `volumes`; node b is empty."""
    return cluster_of([node("a"), node("b")], [pod("holder", node_name="a", volumes=volumes)])


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    [
        # kube's TestGCEDiskConflicts: the same PD conflicts unless both mount it read-only
        (gce("foo"), gce("foo"), True),
        (gce("foo"), gce("bar"), False),
        (gce("foo", read_only=True), gce("foo", read_only=True), False),
        (gce("foo", read_only=True), gce("foo"), True),
        (gce("foo"), gce("foo", read_only=True), True),
        # kube's TestAWSDiskConflicts: the same EBS volume always conflicts
        (ebs("foo"), ebs("foo"), True),
        (ebs("foo"), ebs("bar"), False),
        (ebs("foo", read_only=True), ebs("foo", read_only=True), True),
        # kube's TestRBDDiskConflicts: same pool and image through a common monitor, unless both read-only
        (rbd("foo", ["a", "b"]), rbd("foo", ["a", "b"]), True),
        (rbd("foo", ["a", "b"]), rbd("foo", ["b", "c"]), True),
        (rbd("foo", ["a", "b"]), rbd("foo", ["c", "d"]), False),
        (rbd("foo", ["a", "b"]), rbd("bar", ["a", "b"]), False),
        (rbd("foo", ["a"], pool="one"), rbd("foo", ["a"], pool="two"), False),
        (rbd("foo", ["a"]), rbd("foo", ["a"], pool="rbd"), True),  # "rbd" is the default pool
        (rbd("foo", ["a"], read_only=True), rbd("foo", ["a"], read_only=True), False),
        (rbd("foo", ["a"], read_only=True), rbd("foo", ["a"]), True),
        # kube's TestISCSIDiskConflicts: the same IQN, unless both read-only
        (iscsi("iqn.2016-12.server:storage.target01"), iscsi("iqn.2016-12.server:storage.target01"), True),
        (iscsi("iqn.2016-12.server:storage.target01"), iscsi("iqn.2017-12.server:storage.target01"), False),
        (iscsi("iqn.a", read_only=True), iscsi("iqn.a", read_only=True), False),
        (iscsi("iqn.a", read_only=True), iscsi("iqn.a"), True),
        # different kinds of disk with the same id, and kinds kube does not check
        (ebs("foo"), gce("foo"), False),
        (azure("uri://disk"), azure("uri://disk"), False),
    ],
)
def test_disk_conflicts(held: dict[str, Any], wanted: dict[str, Any], conflict: bool) -> None:
    cluster = holder_cluster(held)
    assert filter_result(RESTRICTIONS, pod("p", volumes=[wanted]), cluster) == {"a": not conflict, "b": True}


def test_one_conflicting_disk_among_several_is_enough() -> None:
    cluster = holder_cluster(gce("one", read_only=True), ebs("vol-1"))
    wanted = pod("p", volumes=[gce("one", read_only=True), gce("two"), ebs("vol-1")])
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": True}
    assert filter_result(RESTRICTIONS, pod("p", volumes=[gce("one", read_only=True), gce("two")]), cluster) == {
        "a": True, "b": True}


def test_pods_without_disks_or_claims_are_not_filtered() -> None:
    cluster = holder_cluster(gce("foo"))
    assert RESTRICTIONS.filter(parse_pod(pod("p")), cluster) is None
    assert RESTRICTIONS.pre_filter(parse_pod(pod("p")), cluster) is None
    # disks that conflict nowhere: None as well, every node fits
    assert RESTRICTIONS.filter(parse_pod(pod("p", volumes=[gce("bar")])), cluster) is None


def test_disk_message() -> None:
    cluster = cluster_of([node("a"), node("b"), node("c")], [pod("x", node_name="a", volumes=[ebs("vol-1")]),
                                                             pod("y", node_name="b", volumes=[ebs("vol-1")])])
    profile = make_profile(filters=[{"name": "VolumeRestrictions"}], scores=[])
    wanted = pod("p", volumes=[ebs("vol-1")])
    assert decide(profile, wanted, cluster).node == "c"
    cluster.remove_node("c")
    decision = decide(profile, wanted, cluster)
    assert decision.node is None
    assert decision.message == f"0/2 nodes are available: 2 {DISK}."


def test_disks_follow_assume_forget_and_removal() -> None:
    cluster = cluster_of([node("a"), node("b")])
    wanted = pod("p", volumes=[gce("pd")])
    cluster.assume(parse_pod(pod("first", volumes=[gce("pd")])), "a")
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": True}
    cluster.forget("default/first")
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": True, "b": True}
    # two read-only holders: the disk stays held read-only until both are gone
    cluster.add_pod(parse_pod(pod("x", node_name="b", volumes=[gce("pd", read_only=True)])))
    cluster.add_pod(parse_pod(pod("y", node_name="b", volumes=[gce("pd", read_only=True)])))
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": True, "b": False}
    assert filter_result(RESTRICTIONS, pod("p", volumes=[gce("pd", read_only=True)]), cluster) == {"a": True, "b": True}
    cluster.remove_pod("default/x")
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": True, "b": False}
    cluster.remove_pod("default/y")
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": True, "b": True}
    tracker = cluster.tracker(DisksInUse)
    assert tracker._by_disk == {} and tracker._by_slot == {}


def test_disks_follow_nodes_going_and_coming_back() -> None:
    cluster = holder_cluster(ebs("vol-1"))
    wanted = pod("p", volumes=[ebs("vol-1")])
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": True}
    cluster.remove_node("a")
    cluster.upsert_node(parse_node(node("c")))  # takes a's slot
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"b": True, "c": True}
    cluster.upsert_node(parse_node(node("a")))  # its pod counts again
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": True, "c": True}


def test_terminal_pods_hold_no_disk() -> None:
    cluster = cluster_of([node("a")], [pod("done", node_name="a", volumes=[ebs("vol-1")], phase="Succeeded")])
    assert filter_result(RESTRICTIONS, pod("p", volumes=[ebs("vol-1")]), cluster) == {"a": True}


# ----------------------------------------------------------------- ReadWriteOncePod


def rwop(name: str, namespace: str = "default") -> dict[str, Any]:
    return claim(name, access_modes=["ReadWriteOncePod"], namespace=namespace)


def claims_cluster(bound: Sequence[dict[str, Any]] = ()) -> Any:
    return cluster_of([node("a"), node("b")], bound,
                      objects=[rwop("solo"), claim("shared", access_modes=["ReadWriteOnce"]), rwop("solo", "other")])


def test_read_write_once_pod_claim_used_by_a_bound_pod() -> None:
    cluster = claims_cluster([pod("user", node_name="a", claims=["solo"])])
    assert filter_result(RESTRICTIONS, pod("p", claims=["solo"]), cluster) == {"a": False, "b": False}
    decision = decide(make_profile(filters=[{"name": "VolumeRestrictions"}], scores=[]), pod("p", claims=["solo"]),
                      cluster)
    assert decision.message == f"0/2 nodes are available: 2 {RWOP}."
    # a claim without the mode may be shared; one of the same name in another namespace is another claim
    assert RESTRICTIONS.filter(parse_pod(pod("p", claims=["shared"])), cluster) is None
    assert RESTRICTIONS.filter(parse_pod(pod("p", namespace="other", claims=["solo"])), cluster) is None


def test_read_write_once_pod_claim_used_by_an_assumed_pod_then_forgotten() -> None:
    cluster = claims_cluster()
    wanted = pod("p", claims=["solo"])
    assert RESTRICTIONS.filter(parse_pod(wanted), cluster) is None
    cluster.assume(parse_pod(pod("first", claims=["solo"])), "b")
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": False}
    cluster.forget("default/first")
    assert RESTRICTIONS.filter(parse_pod(wanted), cluster) is None


def test_the_pod_itself_is_no_conflict() -> None:
    cluster = claims_cluster()
    me = parse_pod(pod("p", claims=["solo"]))
    cluster.assume(me, "a")
    assert RESTRICTIONS.filter(me, cluster) is None
    cluster.add_pod(parse_pod(pod("other", node_name="b", claims=["solo"])))
    assert filter_result(RESTRICTIONS, me, cluster) == {"a": False, "b": False}


def test_read_write_once_pod_claim_free_after_its_pod_is_deleted() -> None:
    cluster = claims_cluster([pod("user", node_name="a", claims=["solo", "solo"])])  # mounted twice
    wanted = pod("p", claims=["solo"])
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": False}
    cluster.remove_pod("default/user")
    assert RESTRICTIONS.filter(parse_pod(wanted), cluster) is None
    assert cluster.tracker(ClaimUsers)._users == {}


def test_read_write_once_pod_follows_nodes() -> None:
    cluster = claims_cluster([pod("user", node_name="a", claims=["solo"])])
    wanted = pod("p", claims=["solo"])
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": False}
    cluster.remove_node("a")  # its pods no longer count, as in kube's snapshot
    assert RESTRICTIONS.filter(parse_pod(wanted), cluster) is None
    cluster.upsert_node(parse_node(node("a")))
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": False}


def test_the_claim_becoming_read_write_once_pod() -> None:
    cluster = claims_cluster([pod("user", node_name="a", claims=["shared"])])
    wanted = pod("p", claims=["shared"])
    assert RESTRICTIONS.filter(parse_pod(wanted), cluster) is None
    upsert_object(cluster.catalog, KINDS_BY_NAME["PersistentVolumeClaim"],
                  claim("shared", access_modes=["ReadWriteOncePod"]))
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": False}


def test_disk_conflicts_come_first() -> None:
    cluster = claims_cluster([pod("user", node_name="a", claims=["solo"], volumes=[ebs("vol-1")])])
    wanted = pod("p", claims=["solo"], volumes=[ebs("vol-1")])
    decision = decide(make_profile(filters=[{"name": "VolumeRestrictions"}], scores=[]), wanted, cluster)
    assert decision.reasons == {DISK: 1, RWOP: 1}
    # the pairs sorted as strings, as kube: "1 node(s) had" before "1 node(s) unavailable"
    assert decision.message == f"0/2 nodes are available: 1 {DISK}, 1 {RWOP}."


def test_a_generic_ephemeral_volumes_claim_is_not_counted_as_in_use() -> None:
    # kube counts `persistentVolumeClaim` volumes only (its snapshot's usedPVCSet): a pod mounting the
    # claim through a generic ephemeral volume does not hold it against one that names it
    owner = pod("owner", node_name="a", volumes=[{"name": "data", "ephemeral": {"volumeClaimTemplate": {}}}])
    cluster = cluster_of([node("a"), node("b")], [owner], objects=[rwop("owner-data")])
    assert RESTRICTIONS.filter(parse_pod(pod("p", claims=["owner-data"])), cluster) is None
    cluster.add_pod(parse_pod(pod("named", node_name="b", claims=["owner-data"])))
    assert filter_result(RESTRICTIONS, pod("p", claims=["owner-data"]), cluster) == {"a": False, "b": False}


def test_missing_claim_is_pod_level() -> None:
    cluster = claims_cluster()
    wanted = pod("p", claims=["solo", "gone"])
    assert RESTRICTIONS.pre_filter(parse_pod(wanted), cluster) == 'persistentvolumeclaim "gone" not found'
    decision = decide(make_profile(filters=[{"name": "VolumeRestrictions"}], scores=[]), wanted, cluster)
    assert decision.message == '0/2 nodes are available: persistentvolumeclaim "gone" not found.'
    assert filter_result(RESTRICTIONS, wanted, cluster) == {"a": False, "b": False}
    # kube reads `persistentVolumeClaim` volumes only: a generic ephemeral volume's claim is not looked up
    ephemeral = parse_pod(pod("e", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]))
    assert RESTRICTIONS.pre_filter(ephemeral, cluster) is None
    assert RESTRICTIONS.filter(ephemeral, cluster) is None


def test_evicting_the_user_of_the_claim_resolves_it_on_its_node() -> None:
    cluster = claims_cluster([pod("user", node_name="a", claims=["solo"])])
    info = parse_pod(pod("p", claims=["solo"]))
    rejected = (~RESTRICTIONS.filter(info, cluster)).nonzero()[0]
    assert RESTRICTIONS.resolvable_nodes(info, cluster, rejected).all()
    user = cluster.pods["default/user"]
    assert RESTRICTIONS.fits_without(info, cluster, cluster.index["a"], [user])
    assert not RESTRICTIONS.fits_without(info, cluster, cluster.index["b"], [])
    assert filter_result(RESTRICTIONS, info, cluster) == {"a": False, "b": False}  # put back
    # and a disk holder likewise
    disks = holder_cluster(ebs("vol-1"))
    wanted = parse_pod(pod("q", volumes=[ebs("vol-1")]))
    holder: PodRecord = disks.pods["default/holder"]
    assert RESTRICTIONS.fits_without(wanted, disks, disks.index["a"], [holder])
    assert not RESTRICTIONS.fits_without(wanted, disks, disks.index["a"], [])


@pytest.mark.parametrize(
    ("wanted", "answers"),
    [
        (pod("p", volumes=[gce("pd")]), {True, False}),
        (pod("p", volumes=[gce("pd", read_only=True)]), {True, False}),
        (pod("p", volumes=[ebs("vol-1"), rbd("img", ["m2"])]), {True, False}),
        (pod("p", claims=["solo"]), {True, False}),
        (pod("p", claims=["solo", "shared"], volumes=[gce("pd", read_only=True)]), {True, False}),
        (pod("p", claims=["both"]), {False}),  # used on a and on b: no single node's evictions free it
        (pod("p", claims=["gone"], volumes=[gce("pd")]), {False}),  # a missing claim: nothing helps
        (pod("p", volumes=[azure("uri://disk")]), {True}),
    ],
)
def test_fits_without_agrees_with_filter_with_the_pods_gone(wanted: dict[str, Any], answers: set[bool]) -> None:
    bound = [
        pod("ro1", node_name="a", volumes=[gce("pd", read_only=True)]),
        pod("ro2", node_name="a", volumes=[gce("pd", read_only=True), ebs("vol-1")]),
        pod("user", node_name="a", claims=["solo", "both"]),
        pod("rw", node_name="b", volumes=[gce("pd"), rbd("img", ["m1", "m2"])]),
        pod("user2", node_name="b", claims=["shared", "both"]),
        pod("idle", node_name="c", volumes=[azure("uri://disk")]),
    ]
    cluster = cluster_of([node("a"), node("b"), node("c")], bound,
                         objects=[rwop("solo"), rwop("both"), claim("shared", access_modes=["ReadWriteOnce"])])
    assert fits_without_answers(RESTRICTIONS, wanted, cluster) == answers  # both answers (or the one there is)
    assert len(cluster.pods) == len(bound)  # every pod counted, and put back


def test_preemption_evicts_the_holder_where_it_runs() -> None:
    cluster = cluster_of([node("a"), node("b"), node("c")],
                         [pod("user", node_name="b", claims=["solo"], priority=1),
                          pod("writer", node_name="c", volumes=[gce("pd")], priority=1),
                          pod("keeper", node_name="c", volumes=[gce("pd", read_only=True)], priority=1)],
                         objects=[rwop("solo")])
    profile = make_profile(filters=[{"name": "VolumeRestrictions"}], scores=[])
    decision = decide(profile, pod("p", claims=["solo"], priority=10), cluster)
    assert decision.message == f"0/3 nodes are available: 3 {RWOP}."
    assert decision.preemption is not None
    assert (decision.preemption.node, [v.name for v in decision.preemption.victims]) == ("b", ["user"])
    # the disk: a and b are free, so no preemption is needed; with a and b gone, only the writer goes
    cluster.remove_node("a")
    cluster.remove_node("b")
    decision = decide(profile, pod("q", volumes=[gce("pd", read_only=True)], priority=10), cluster)
    assert decision.preemption is not None
    assert (decision.preemption.node, [v.name for v in decision.preemption.victims]) == ("c", ["writer"])


def test_events() -> None:
    assert RESTRICTIONS.events == {ClusterEvent.POD_DELETE, ClusterEvent.NODE_ADD, "PersistentVolumeClaim"}
