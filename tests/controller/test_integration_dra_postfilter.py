"""DynamicResources' PostFilter end to end (kube v1.36's default order: before DefaultPreemption),
the real operator over HTTP against the emulator: a claim allocated where its pod cannot run is
deallocated (a status update at the resourceVersion read), and the pod, woken by the claim's change,
gets a fresh allocation and is bound; a VolumeAttachment is watched and counts against a node's
CSI volume limit."""

from __future__ import annotations

from placer.testing_devices import allocation

from tests.controller.helpers import Launch, assert_sound, bound_node, events_about, until
from tests.controller.test_integration_dra import (
    CLAIMS,
    DRIVER,
    add_claim_pod,
    allocated,
    claim_body,
    claim_of,
    request_index,
    setup_cluster,
)
from tests.kubeemu import KubeEmulator

KUBE_POST_FILTERS = [{"name": "DynamicResources"}, {"name": "DefaultPreemption"}]


def stale_claim(emu: KubeEmulator, name: str, node: str) -> None:
    """A claim allocated (by an earlier scheduler) to a device of `node`, a node that is gone now."""
    emu.create(CLAIMS, claim_body(name))
    stale = allocation([("gpu", DRIVER, node, "gpu-0")], node=node)
    emu.patch(CLAIMS, name, {"status": {"allocation": stale}}, namespace="default", subresource="status")


def failed_notes(emu: KubeEmulator, pod: str) -> list[str]:
    return [e["note"] for e in events_about(emu, pod, "FailedScheduling")]


async def test_a_claim_allocated_where_the_pod_cannot_run_is_freed_and_allocated_again(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-a": 1})
    emu.patch("sp", "default", {"spec": {"postFilters": KUBE_POST_FILTERS}})
    stale_claim(emu, "stale", "gone-node")
    add_claim_pod(emu, "p", claim="stale")
    await launch()
    await until(lambda: bound_node(emu, "p"), timeout=15)
    assert bound_node(emu, "p") == "gpu-a"
    notes = failed_notes(emu, "p")
    assert notes and notes[0].startswith(
        "0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of ResourceClaim "
        "completed, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."), notes
    # the deallocation (a status write), then the new allocation's, then the binding
    status_writes = request_index(emu, "PATCH", r"/resourceclaims/stale/status$")
    binding = request_index(emu, "POST", r"/pods/p/binding$")
    assert len(status_writes) >= 2 and status_writes[-1] < binding[0]
    assert allocated(emu, "stale")
    assert claim_of(emu, "stale")["status"]["allocation"]["devices"]["results"][0]["pool"] == "gpu-a"
    assert_sound(emu, ["p"])


async def test_without_dynamic_resources_in_post_filters_the_claim_is_left_alone(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    emu = kube_emulator
    setup_cluster(emu, {"gpu-a": 1})
    emu.patch("sp", "default", {"spec": {"postFilters": [{"name": "DefaultPreemption"}]}})
    stale_claim(emu, "stale", "gone-node")
    add_claim_pod(emu, "p", claim="stale")
    await launch()
    await until(lambda: failed_notes(emu, "p"), timeout=10)
    assert failed_notes(emu, "p")[0].startswith(
        "0/1 nodes are available: 1 resourceclaim not available on the node. preemption: ")
    assert request_index(emu, "PATCH", r"/resourceclaims/stale/status$") == []
    assert bound_node(emu, "p") is None


async def test_a_volume_attachment_counts_against_the_nodes_limit(
    kube_emulator: KubeEmulator, launch: Launch
) -> None:
    """The operator watches VolumeAttachments: one attaching a volume no pod uses fills the node's
    only slot for the driver; once it is deleted (the volume detached) the pod goes there."""
    emu = kube_emulator
    emu.add_node("n1")
    emu.create("sp", {"metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}})
    emu.create("storage.k8s.io/v1/csinodes", {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "ebs.csi.aws.com", "nodeID": "n1", "allocatable": {"count": 1}}]}})
    for name in ("data", "other"):
        emu.create("persistentvolumes", {"metadata": {"name": name}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
            "claimRef": {"namespace": "default", "name": name}}})
    emu.create("persistentvolumeclaims", {"metadata": {"name": "data", "namespace": "default", "annotations": {
        "pv.kubernetes.io/bind-completed": "yes"}}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": "data"}})
    emu.create("storage.k8s.io/v1/volumeattachments", {"metadata": {"name": "va-other"}, "spec": {
        "attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {"persistentVolumeName": "other"}}})
    emu.add_pod("p", scheduler_name="placer", spec={"volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]})
    await launch()
    await until(lambda: failed_notes(emu, "p"), timeout=10)
    assert failed_notes(emu, "p")[0].startswith("0/1 nodes are available: 1 node(s) exceed max volume count.")
    emu.delete("storage.k8s.io/v1/volumeattachments", "va-other")
    await until(lambda: bound_node(emu, "p"), timeout=10)
    assert bound_node(emu, "p") == "n1"
