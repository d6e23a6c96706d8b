"""VolumeZone: kube's volume_zone_test tables (single zone, multi zone `__` lists, GA/beta labels,
unbound claims), messages, and what a change of volumes, claims or nodes does."""

from __future__ import annotations

from typing import Any

import pytest

from placer.engine.framework import ClusterEvent
from placer.engine.kinds import KINDS_BY_NAME, delete_object, upsert_object
from placer.engine.parsing import parse_node, parse_pod
from placer.plugins.volume_zone import label_zones
from placer.testing import claim, cluster_of, decide, filter_result, make_plugin, make_profile, node, pod, volume
from placer.testing import storage_class as storage_class_obj

ZONE = make_plugin("VolumeZone")
REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
GA_ZONE = "topology.kubernetes.io/zone"
GA_REGION = "topology.kubernetes.io/region"

# kube's TestSingleZone / TestMultiZone volumes, each with a claim PVC_<suffix> bound to it
VOLUMES: dict[str, dict[str, str]] = {
    "Vol_1": {BETA_ZONE: "us-west1-a"},
    "Vol_2": {BETA_REGION: "us-west1", "uselessLabel": "none"},
    "Vol_3": {BETA_ZONE: "us-west1-c__us-west1-a"},
    "Vol_Stable_1": {GA_ZONE: "us-west1-a"},
    "Vol_Stable_2": {GA_REGION: "us-west1", "uselessLabel": "none"},
    "Vol_Stable_3": {GA_ZONE: "us-west1-a", GA_REGION: "us-west1-a"},
    "Vol_Stable_4": {GA_ZONE: "us-west1-c__us-west1-a"},
}


def objects(volumes: dict[str, dict[str, str]] = VOLUMES) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name, labels in volumes.items():
        suffix = name.removeprefix("Vol_")
        found.append(volume(name, labels=labels, claim_ref=("default", f"PVC_{suffix}")))
        found.append(claim(f"PVC_{suffix}", volume_name=name))
    found.append(claim("PVC_4", volume_name="Vol_not_exist"))
    return found


def fits(claim_name: str, labels: dict[str, str]) -> bool:
    cluster = cluster_of([node("host1", labels=labels)], objects=objects())
    return filter_result(ZONE, pod("pod_1", claims=[claim_name]), cluster)["host1"]


@pytest.mark.parametrize(
    ("claim_name", "labels", "expected"),
    [
        # TestSingleZone
        ("PVC_1", {}, True),  # node without labels
        ("PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
        ("PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, True),
        ("PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"}, False),
        ("PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, False),
        ("PVC_Stable_1", {GA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
        ("PVC_Stable_2", {GA_REGION: "us-west1", "uselessLabel": "none"}, True),
        ("PVC_Stable_2", {GA_REGION: "no_us-west1", "uselessLabel": "none"}, False),
        ("PVC_Stable_1", {GA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, False),
        ("PVC_Stable_3", {GA_ZONE: "us-west1-a"}, False),  # pv with zone and region, node with only zone
        ("PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, False),  # GA label on the pv, beta on the node
        ("PVC_1", {GA_ZONE: "us-west1-a"}, True),  # beta label on the pv, GA on the node
        ("PVC_1", {GA_ZONE: "us-west1-b"}, False),
        ("PVC_1", {BETA_ZONE: "us-west1-b", GA_ZONE: "us-west1-a"}, False),  # the node's beta label is read first
        ("PVC_1", {"uselessLabel": "none"}, True),  # labels, but none of the zone/region ones
        ("PVC_2", {BETA_ZONE: "us-west1-a"}, False),  # a zone label, but not the region the pv names
        # TestMultiZone
        ("PVC_3", {}, True),
        ("PVC_3", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
        ("PVC_3", {BETA_ZONE: "us-west1-c"}, True),
        ("PVC_3", {BETA_ZONE: "us-west1-b"}, False),
        ("PVC_1", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}, False),
        ("PVC_Stable_4", {GA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
        ("PVC_Stable_4", {GA_ZONE: "us-west1-c__us-west1-a"}, False),  # the node's value is one zone
        ("PVC_Stable_1", {GA_ZONE: "us-west1-b", "uselessLabel": "none"}, False),
    ],
)
def test_kube_tables(claim_name: str, labels: dict[str, str], expected: bool) -> None:
    assert fits(claim_name, labels) is expected


def test_label_zones() -> None:
    assert label_zones("us-west1-a") == {"us-west1-a"}
    assert label_zones("us-west1-c__us-west1-a") == {"us-west1-c", "us-west1-a"}
    assert label_zones(" a __ b ") == {"a", "b"}
    assert label_zones("a____b") is None
    assert label_zones("") is None
    assert label_zones("a__") is None


def test_a_malformed_zone_list_is_ignored() -> None:
    cluster = cluster_of([node("host1", labels={GA_ZONE: "us-west1-b"})],
                         objects=objects({"Vol_X": {GA_ZONE: "us-west1-a____us-west1-c"}}))
    assert filter_result(ZONE, pod("p", claims=["PVC_X"]), cluster) == {"host1": True}


def test_vectorised_over_nodes_and_every_claim_counts() -> None:
    nodes = [
        node("a1", labels={GA_ZONE: "us-west1-a", GA_REGION: "us-west1"}),
        node("b1", labels={GA_ZONE: "us-west1-b", GA_REGION: "us-west1"}),
        node("c1", labels={GA_ZONE: "us-west1-c", GA_REGION: "us-west1"}),
        node("bare"),
        node("east", labels={GA_ZONE: "us-west1-a", GA_REGION: "us-east1"}),
    ]
    cluster = cluster_of(nodes, objects=objects())
    # Vol_Stable_4 allows a or c; Vol_Stable_2 allows region us-west1
    assert filter_result(ZONE, pod("p", claims=["PVC_Stable_4", "PVC_Stable_2"]), cluster) == {
        "a1": True, "b1": False, "bare": True, "c1": True, "east": False}
    # and Vol_Stable_1 narrows it to a
    assert filter_result(ZONE, pod("p", claims=["PVC_Stable_4", "PVC_Stable_1"]), cluster) == {
        "a1": True, "b1": False, "bare": True, "c1": False, "east": True}


def test_message() -> None:
    cluster = cluster_of([node("b1", labels={GA_ZONE: "us-west1-b"}), node("c1", labels={GA_ZONE: "us-west1-c"}),
                          node("a1", labels={GA_ZONE: "us-west1-a"})], objects=objects())
    profile = make_profile(filters=[{"name": "VolumeZone"}], scores=[])
    decision = decide(profile, pod("p", claims=["PVC_Stable_1"]), cluster)
    assert decision.node == "a1"
    decision = decide(profile, pod("p", claims=["PVC_Stable_3"]), cluster)  # region us-west1-a: nowhere
    assert decision.node is None
    assert decision.message == f"0/3 nodes are available: 3 {REASON}."


def test_missing_claim_and_missing_volume_are_pod_level() -> None:
    cluster = cluster_of([node("a", labels={GA_ZONE: "us-west1-a"}), node("b")], objects=objects())
    profile = make_profile(filters=[{"name": "VolumeZone"}], scores=[])
    missing_claim = pod("p", claims=["PVC_1", "nope"])
    assert ZONE.pre_filter(parse_pod(missing_claim), cluster) == 'persistentvolumeclaim "nope" not found'
    assert decide(profile, missing_claim, cluster).message == (
        '0/2 nodes are available: persistentvolumeclaim "nope" not found.')
    missing_volume = pod("p", claims=["PVC_4"])
    assert ZONE.pre_filter(parse_pod(missing_volume), cluster) == 'persistentvolume "Vol_not_exist" not found'
    assert decide(profile, missing_volume, cluster).message == (
        '0/2 nodes are available: persistentvolume "Vol_not_exist" not found.')
    # kube's Filter, asked without its PreFilter, gives the same on every node
    info = parse_pod(missing_volume)
    assert filter_result(ZONE, info, cluster) == {"a": False, "b": False}
    rejected = ZONE.filter(info, cluster)
    assert rejected is not None
    assert ZONE.reason_counts(info, cluster, (~rejected).nonzero()[0]) == {
        'persistentvolume "Vol_not_exist" not found': 2}


def with_binding_cluster(*extra: dict[str, Any]) -> Any:
    """kube's TestWithBinding: Class_Immediate has no volumeBindingMode, Class_Wait waits, Class_0
    does not exist."""
    immediate = storage_class_obj("Class_Immediate")
    del immediate["volumeBindingMode"]
    return cluster_of(
        [node("host1", labels={BETA_ZONE: "us-west1-a", "uselessLabel": "none"})],
        objects=[*objects(), immediate, storage_class_obj("Class_Wait"), claim("PVC_NoSC", "Class_0"),
                 claim("PVC_EmptySC", None), claim("PVC_WaitSC", "Class_Wait"),
                 claim("PVC_ImmediateSC", "Class_Immediate"), *extra],
    )


# TestWithBinding (kube v1.36): an unbound claim is the pod's problem unless its class waits
@pytest.mark.parametrize(
    ("claim_name", "pod_reason"),
    [
        ("PVC_1", None),  # label zone failure domain matched
        ("PVC_EmptySC", "PersistentVolumeClaim had no pv name and storageClass name"),
        ("PVC_NoSC", 'storageclasses.storage.k8s.io "Class_0" not found'),
        ("PVC_ImmediateSC", 'VolumeBindingMode not set for StorageClass "Class_Immediate"'),
        ("PVC_WaitSC", None),  # Skip: the zone comes with the node VolumeBinding picks
    ],
)
def test_kube_with_binding_rows(claim_name: str, pod_reason: str | None) -> None:
    cluster = with_binding_cluster()
    info = parse_pod(pod("pod_1", claims=[claim_name]))
    assert ZONE.pre_filter(info, cluster) == pod_reason
    assert filter_result(ZONE, info, cluster) == {"host1": pod_reason is None}
    if claim_name == "PVC_WaitSC":
        assert ZONE.filter(info, cluster) is None
    if pod_reason is not None:
        decision = decide(make_profile(filters=[{"name": "VolumeZone"}], scores=[]), info, cluster)
        assert decision.message == f"0/1 nodes are available: {pod_reason}."
        rejected = ZONE.filter(info, cluster)
        assert rejected is not None
        assert ZONE.reason_counts(info, cluster, (~rejected).nonzero()[0]) == {pod_reason: 1}


def test_unbound_claim_of_an_immediate_class() -> None:
    """A class the API server defaulted to Immediate: the PV controller has not bound the claim."""
    cluster = with_binding_cluster(storage_class_obj("fast", wait_for_first_consumer=False), claim("PVC_Fast", "fast"))
    assert ZONE.pre_filter(parse_pod(pod("pod_1", claims=["PVC_Fast"])), cluster) == "PersistentVolume had no name"
    # in the default profile VolumeBinding, before it, rejects the pod with its own words
    decision = decide(make_profile(), pod("pod_1", claims=["PVC_Fast"]), cluster)
    assert decision.message == "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_waiting_claims_beside_bound_ones() -> None:
    cluster = with_binding_cluster()
    # beside a bound claim, only the bound one decides
    assert filter_result(ZONE, pod("pod_1", claims=["PVC_WaitSC", "PVC_Stable_1"]), cluster) == {"host1": False}
    assert filter_result(ZONE, pod("pod_1", claims=["PVC_WaitSC", "PVC_1"]), cluster) == {"host1": True}
    # the first claim that is the pod's problem decides, in the pod's order
    assert ZONE.pre_filter(parse_pod(pod("pod_1", claims=["PVC_1", "PVC_NoSC", "PVC_EmptySC"])), cluster) == (
        'storageclasses.storage.k8s.io "Class_0" not found')


def test_pods_without_claims_and_ephemeral_volumes_are_not_filtered() -> None:
    cluster = cluster_of([node("host1", labels={BETA_ZONE: "us-west1-b"})], objects=objects())
    assert ZONE.filter(parse_pod(pod("plain")), cluster) is None
    assert ZONE.pre_filter(parse_pod(pod("plain")), cluster) is None
    # kube reads `persistentVolumeClaim` volumes only: a generic ephemeral volume is VolumeBinding's
    ephemeral = parse_pod(pod("eph", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]))
    assert ephemeral.volumes.claims
    assert ZONE.pre_filter(ephemeral, cluster) is None
    assert ZONE.filter(ephemeral, cluster) is None


def put(cluster: Any, obj: dict[str, Any]) -> None:
    upsert_object(cluster.catalog, KINDS_BY_NAME[obj["kind"]], obj)


def test_catalog_changes_apply_at_once() -> None:
    cluster = cluster_of([node("a1", labels={GA_ZONE: "us-west1-a"}), node("b1", labels={GA_ZONE: "us-west1-b"})],
                         objects=objects())
    wants = pod("p", claims=["PVC_Stable_1"])
    assert filter_result(ZONE, wants, cluster) == {"a1": True, "b1": False}
    # the volume relabelled
    put(cluster, volume("Vol_Stable_1", labels={GA_ZONE: "us-west1-b"}, claim_ref=("default", "PVC_Stable_1")))
    assert filter_result(ZONE, wants, cluster) == {"a1": False, "b1": True}
    # the claim rebound to a volume without zone labels
    put(cluster, volume("Vol_free"))
    put(cluster, claim("PVC_Stable_1", volume_name="Vol_free"))
    assert ZONE.filter(parse_pod(wants), cluster) is None
    # the volume it names deleted: pod-level error
    delete_object(cluster.catalog, KINDS_BY_NAME["PersistentVolume"], volume("Vol_free"))
    assert ZONE.pre_filter(parse_pod(wants), cluster) == 'persistentvolume "Vol_free" not found'
    # the claim deleted
    delete_object(cluster.catalog, KINDS_BY_NAME["PersistentVolumeClaim"], claim("PVC_Stable_1"))
    assert ZONE.pre_filter(parse_pod(wants), cluster) == 'persistentvolumeclaim "PVC_Stable_1" not found'


def test_node_changes_apply_at_once() -> None:
    cluster = cluster_of([node("a1", labels={GA_ZONE: "us-west1-a"}), node("b1", labels={GA_ZONE: "us-west1-b"})],
                         objects=objects())
    info = parse_pod(pod("p", claims=["PVC_Stable_1"]))
    assert filter_result(ZONE, info, cluster) == {"a1": True, "b1": False}
    cluster.upsert_node(parse_node(node("b1", labels={GA_ZONE: "us-west1-a"})))
    assert filter_result(ZONE, info, cluster) == {"a1": True, "b1": True}
    cluster.upsert_node(parse_node(node("c1", labels={GA_ZONE: "us-west1-c"})))
    cluster.remove_node("a1")
    assert filter_result(ZONE, info, cluster) == {"b1": True, "c1": False}
    cluster.upsert_node(parse_node(node("a1", labels={GA_ZONE: "us-west1-b"})))  # back, in another zone
    assert filter_result(ZONE, info, cluster) == {"a1": False, "b1": True, "c1": False}


def test_events_and_not_resolvable() -> None:
    assert ZONE.events == {ClusterEvent.NODE, "PersistentVolume", "PersistentVolumeClaim", "StorageClass"}
    assert ZONE.resolvable is False  # kube: UnschedulableAndUnresolvable, preemption cannot help
