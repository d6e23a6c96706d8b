"""PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and VolumeAttachments, as the
volume plugins read them (catalog kinds: see `placer.engine.kinds`).

The rules that tie them together are kube's `component-helpers/storage/volume`:
`claim_class`/`volume_class` (the beta annotation wins over `storageClassName`), a claim is *fully
bound* when it names its volume and carries `pv.kubernetes.io/bind-completed`, a volume is *bound to
a claim* when its `claimRef` names it (and its uid, when set), and `find_matching_volume` picks,
among the volumes of a claim's class, the one pre-bound to the claim, else the smallest Available
one that fits (size, access modes, volume mode, selector, node affinity).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from placer.engine.fields import FieldError, mapping, section, sequence
from placer.engine.labels import LabelSelector, parse_label_selector
from placer.engine.objects import NodeSelectorTerm, ObjectError
from placer.engine.parsing import object_meta, parse_node_selector_terms
from placer.engine.quantity import QuantityError, to_units
from placer.engine.volumes import AWS_EBS, AZURE_DISK, CINDER, GCE_PD

__all__ = [
    "BIND_COMPLETED",
    "SELECTED_NODE",
    "ClaimInfo",
    "CsiNodeInfo",
    "StorageClassInfo",
    "VolumeAttachmentInfo",
    "VolumeBindings",
    "VolumeInfo",
    "find_matching_volume",
    "parse_claim",
    "parse_csinode",
    "parse_storage_class",
    "parse_volume",
    "parse_volume_attachment",
]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
# in-tree volume plugins and the CSI drivers they migrate to (kube's csi-translation-lib)
CSI_DRIVER_OF = {
    AWS_EBS: "ebs.csi.aws.com",
    GCE_PD: "pd.csi.storage.gke.io",
    AZURE_DISK: "disk.csi.azure.com",
    CINDER: "cinder.csi.openstack.org",
}


def _annotations(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    value = meta.get("annotations")
    return value if isinstance(value, Mapping) else {}


def _size(raw: Any, path: str) -> int:
    if raw is None:
        return 0
    try:
        return to_units(raw)
    except QuantityError as error:
        raise FieldError(path, str(error)) from None


def _modes(raw: Any, path: str) -> frozenset[str]:
    return frozenset(str(mode) for mode in sequence(raw, path))


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    namespace: str
    name: str
    uid: str = ""
    storage_class: str = ""  # kube's GetPersistentVolumeClaimClass ("" : no class)
    volume_name: str = ""
    phase: str = "Pending"
    access_modes: frozenset[str] = frozenset()
    request: int = 0  # bytes of `resources.requests.storage`
    selector: LabelSelector | None = None
    volume_mode: str = "Filesystem"
    selected_node: str = ""  # the `volume.kubernetes.io/selected-node` annotation
    bind_completed: bool = False
    deleting: bool = False
    owner_uid: str = ""  # the controlling owner's uid (a generic ephemeral volume's pod)
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        """kube's `isPVCFullyBound`: it names its volume and the binding is complete."""
        return bool(self.volume_name) and self.bind_completed


def parse_claim(obj: Mapping[str, Any]) -> ClaimInfo:
    namespace, name, meta = object_meta(obj, "PersistentVolumeClaim", namespaced=True)
    spec, status = section(obj, "spec"), section(obj, "status")
    annotations = _annotations(meta)
    try:
        resources = mapping(spec.get("resources"), "spec.resources")
        requests = mapping(resources.get("requests"), "spec.resources.requests")
        raw_selector = spec.get("selector")
        selector = None if raw_selector is None else parse_label_selector(raw_selector, "spec.selector")
        owner_uid = ""
        for ref in sequence(meta.get("ownerReferences"), "metadata.ownerReferences"):
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                owner_uid = str(ref.get("uid") or "")
        claim = ClaimInfo(
            namespace=namespace,
            name=name,
            uid=str(meta.get("uid") or ""),
            storage_class=str(annotations.get(BETA_CLASS) or spec.get("storageClassName") or ""),
            volume_name=str(spec.get("volumeName") or ""),
            phase=str(status.get("phase") or "Pending"),
            access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
            request=_size(requests.get("storage"), "spec.resources.requests.storage"),
            selector=selector,
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            selected_node=str(annotations.get(SELECTED_NODE) or ""),
            bind_completed=BIND_COMPLETED in annotations,
            deleting=bool(meta.get("deletionTimestamp")),
            owner_uid=owner_uid,
            resource_version=str(meta.get("resourceVersion") or ""),
        )
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return claim


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    name: str
    uid: str = ""
    storage_class: str = ""
    capacity: int = 0
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = "Filesystem"
    claim: tuple[str, str, str] | None = None  # claimRef (namespace, name, uid)
    phase: str = "Available"
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # required terms, ORed
    labels: dict[str, str] = field(default_factory=dict)
    csi_driver: str = ""  # spec.csi, or the driver an in-tree source migrates to
    csi_handle: str = ""
    in_tree: str = ""  # the in-tree plugin (kubernetes.io/aws-ebs, ...) of a migratable source
    deleting: bool = False
    resource_version: str = ""
    namespace: str = ""

    def bound_to(self, claim: ClaimInfo) -> bool:
        """kube's `IsVolumeBoundToClaim`."""
        if self.claim is None:
            return False
        namespace, name, uid = self.claim
        return namespace == claim.namespace and name == claim.name and (not uid or uid == claim.uid)


_IN_TREE_IDS = (("awsElasticBlockStore", AWS_EBS, "volumeID"), ("gcePersistentDisk", GCE_PD, "pdName"),
                ("azureDisk", AZURE_DISK, "diskURI"), ("cinder", CINDER, "volumeID"))


def parse_volume(obj: Mapping[str, Any]) -> VolumeInfo:
    _, name, meta = object_meta(obj, "PersistentVolume", namespaced=False)
    spec, status = section(obj, "spec"), section(obj, "status")
    annotations = _annotations(meta)
    try:
        labels = {str(k): str(v) for k, v in mapping(meta.get("labels"), "metadata.labels").items()}
        capacity = _size(mapping(spec.get("capacity"), "spec.capacity").get("storage"), "spec.capacity.storage")
        claim = None
        if spec.get("claimRef") is not None:
            ref = mapping(spec["claimRef"], "spec.claimRef")
            claim = (str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))
        affinity = None
        node_affinity = mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
        if node_affinity.get("required") is not None:
            affinity = parse_node_selector_terms(node_affinity["required"], "spec.nodeAffinity.required")
        csi_driver = csi_handle = in_tree = ""
        if spec.get("csi") is not None:
            csi = mapping(spec["csi"], "spec.csi")
            csi_driver, csi_handle = str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        for source_key, plugin, id_key in _IN_TREE_IDS:
            if spec.get(source_key) is not None:
                source = mapping(spec[source_key], f"spec.{source_key}")
                in_tree, csi_handle = plugin, str(source.get(id_key) or name)
                csi_driver = CSI_DRIVER_OF[plugin]
        volume = VolumeInfo(
            name=name,
            uid=str(meta.get("uid") or ""),
            storage_class=str(annotations.get(BETA_CLASS) or spec.get("storageClassName") or ""),
            capacity=capacity,
            access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            claim=claim,
            phase=str(status.get("phase") or "Available"),
            node_affinity=affinity,
            labels=labels,
            csi_driver=csi_driver,
            csi_handle=csi_handle,
            in_tree=in_tree,
            deleting=bool(meta.get("deletionTimestamp")),
            resource_version=str(meta.get("resourceVersion") or ""),
        )
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return volume


@dataclass(frozen=True, slots=True)
class StorageClassInfo:
    name: str
    provisioner: str = ""
    binding_mode: str = ""  # "": not set (the API server defaults it to Immediate; VolumeZone tells)
    # allowedTopologies: terms ORed, each a tuple of (label key, allowed values) ANDed
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()
    namespace: str = ""

    @property
    def delays_binding(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NOT_SUPPORTED_PROVISIONER


def parse_storage_class(obj: Mapping[str, Any]) -> StorageClassInfo:
    _, name, _ = object_meta(obj, "StorageClass", namespaced=False)
    try:
        terms = []
        for i, raw_term in enumerate(sequence(obj.get("allowedTopologies"), "allowedTopologies")):
            path = f"allowedTopologies[{i}].matchLabelExpressions"
            expressions = sequence(mapping(raw_term, f"allowedTopologies[{i}]").get("matchLabelExpressions"), path)
            term = []
            for j, raw in enumerate(expressions):
                item = mapping(raw, f"{path}[{j}]")
                key = item.get("key")
                if not isinstance(key, str) or not key:
                    raise FieldError(f"{path}[{j}].key", "Required value")
                term.append((key, frozenset(str(v) for v in sequence(item.get("values"), f"{path}[{j}].values"))))
            terms.append(tuple(term))
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    return StorageClassInfo(
        name=name,
        provisioner=str(obj.get("provisioner") or ""),
        binding_mode=str(obj.get("volumeBindingMode") or ""),
        allowed_topologies=tuple(terms),
    )


@dataclass(frozen=True, slots=True)
class CsiNodeInfo:
    name: str
    limits: dict[str, int | None] = field(default_factory=dict)  # driver -> allocatable.count (None: no limit)
    migrated: frozenset[str] = frozenset()  # in-tree plugins migrated to CSI on this node
    namespace: str = ""


def parse_csinode(obj: Mapping[str, Any]) -> CsiNodeInfo:
    _, name, meta = object_meta(obj, "CSINode", namespaced=False)
    spec = section(obj, "spec")
    limits: dict[str, int | None] = {}
    try:
        for i, raw in enumerate(sequence(spec.get("drivers"), "spec.drivers")):
            driver = mapping(raw, f"spec.drivers[{i}]")
            driver_name = driver.get("name")
            if not isinstance(driver_name, str) or not driver_name:
                raise FieldError(f"spec.drivers[{i}].name", "Required value")
            count = mapping(driver.get("allocatable"), f"spec.drivers[{i}].allocatable").get("count")
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                raise FieldError(f"spec.drivers[{i}].allocatable.count", f"Invalid value: {count!r}")
            limits[driver_name] = count
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    migrated = frozenset(p.strip() for p in str(_annotations(meta).get(MIGRATED_PLUGINS) or "").split(",") if p.strip())
    return CsiNodeInfo(name, limits, migrated)


@dataclass(frozen=True, slots=True)
class VolumeAttachmentInfo:
    """A `storage.k8s.io/v1` VolumeAttachment: a CSI driver (`attacher`) attaching a volume to a
    node — NodeVolumeLimits counts it against the node's limit (kube v1.33+) while no pod there
    uses the volume. `volume`: `spec.source.persistentVolumeName` ("" for an inline volume spec)."""

    name: str
    attacher: str = ""
    node_name: str = ""
    volume: str = ""
    namespace: str = ""


def parse_volume_attachment(obj: Mapping[str, Any]) -> VolumeAttachmentInfo:
    _, name, _ = object_meta(obj, "VolumeAttachment", namespaced=False)
    spec = section(obj, "spec")
    try:
        source = mapping(spec.get("source"), "spec.source")
    except FieldError as error:
        raise ObjectError(error.path, error.message) from None
    fields = {"attacher": spec.get("attacher"), "nodeName": spec.get("nodeName"),
              "source.persistentVolumeName": source.get("persistentVolumeName")}
    for path, value in fields.items():
        if value is not None and not isinstance(value, str):
            raise ObjectError(f"spec.{path}", f"must be a string, not {value!r}")
    return VolumeAttachmentInfo(name, str(spec.get("attacher") or ""), str(spec.get("nodeName") or ""),
                                str(source.get("persistentVolumeName") or ""))


def find_matching_volume(
    claim: ClaimInfo, volumes: Iterable[VolumeInfo], excluded: frozenset[str] | set[str] = frozenset()
) -> list[VolumeInfo]:
    """kube's `FindMatchingVolume` for a delayed-binding claim, node aside: the candidates, best
    first — a volume pre-bound to the claim alone if there is one, else the Available volumes of
    the claim's class that fit it, smallest first. The caller takes the first whose node affinity
    admits the node (a pre-bound volume that does not admit it means no match at all)."""
    fitting: list[VolumeInfo] = []
    for volume in volumes:
        if volume.name in excluded or volume.storage_class != claim.storage_class:  # kube lists a class's
            continue
        if volume.claim is not None and not volume.bound_to(claim):
            continue
        if volume.capacity < claim.request or volume.volume_mode != claim.volume_mode or volume.deleting:
            continue
        if volume.bound_to(claim):
            return [volume]
        if volume.phase != "Available":
            continue
        if claim.selector is not None and not claim.selector.matches(volume.labels):
            continue
        if not claim.access_modes <= volume.access_modes:
            continue
        fitting.append(volume)
    fitting.sort(key=lambda volume: volume.capacity)  # stable: ties keep the catalog's order
    return fitting


@dataclass(frozen=True, slots=True)
class VolumeBindings:
    """What VolumeBinding reserved for a pod on its node (kube's PodVolumes), to be written to the API
    server before the pod is bound (kube's PreBind): each static binding is a claim and the volume
    chosen for it (as assumed: `claimRef` set), each dynamic one a claim to provision on `node` (as
    assumed: `volume.kubernetes.io/selected-node` set)."""

    node: str
    static: tuple[tuple[ClaimInfo, VolumeInfo], ...] = ()
    dynamic: tuple[ClaimInfo, ...] = ()

    def as_json(self) -> list[dict[str, Any]]:
        """`placer simulate`'s `volumes`: `[{"claim": "NS/NAME", "volume": PV or null, "selectedNode"}]`."""
        entries = [(claim, volume.name) for claim, volume in self.static]
        entries += [(claim, None) for claim in self.dynamic]
        return [{"claim": claim.key, "volume": volume, "selectedNode": self.node} for claim, volume in entries]
