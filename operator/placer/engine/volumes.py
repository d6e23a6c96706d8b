"""A pod's volumes, parsed once into what the volume plugins read.

- `claims`: the PersistentVolumeClaims it mounts, by name in its namespace; a generic ephemeral
  volume is the claim `<pod>-<volume>` the ephemeral volume controller creates for it (kube's
  `ephemeral.VolumeClaimName`), which must be owned by the pod;
- `disks`: inline GCE PD, AWS EBS, RBD and iSCSI volumes, which two pods on one node may not share
  (VolumeRestrictions' disk conflicts);
- `inline_csi`: inline CSI volumes (`spec.volumes[].csi`), which count against a node's CSI volume
  limit (NodeVolumeLimits), as do in-tree disks migrated to CSI (`migratable`).

Most pods have none of these: they share `NO_VOLUMES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placer.engine.fields import FieldError, mapping, sequence

__all__ = ["NO_VOLUMES", "ClaimRef", "InlineDisk", "PodVolumes", "parse_pod_volumes", "required_string"]

GCE_PD = "kubernetes.io/gce-pd"
AWS_EBS = "kubernetes.io/aws-ebs"
AZURE_DISK = "kubernetes.io/azure-disk"
CINDER = "kubernetes.io/cinder"
RBD = "kubernetes.io/rbd"
ISCSI = "kubernetes.io/iscsi"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    name: str
    ephemeral: bool = False  # a generic ephemeral volume's claim: created for (and owned by) the pod


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """An inline in-tree disk: `plugin` (GCE_PD, AWS_EBS, RBD, ISCSI, AZURE_DISK, CINDER) and its id
    (PD name, volume ID, RBD `pool/image`, iSCSI IQN, disk URI, Cinder volume ID)."""

    plugin: str
    id: str
    read_only: bool = False
    monitors: frozenset[str] = frozenset()  # RBD only

    def conflicts(self, other: InlineDisk) -> bool:
        """kube's `isVolumeConflict`: the same disk twice on one node, unless both read it only."""
        if self.plugin != other.plugin or self.id != other.id:
            return False
        if self.plugin == AWS_EBS:
            return True
        if self.plugin == GCE_PD or self.plugin == ISCSI:
            return not (self.read_only and other.read_only)
        if self.plugin == RBD:
            return bool(self.monitors & other.monitors) and not (self.read_only and other.read_only)
        return False  # Azure Disk and Cinder are not conflict-checked by kube


@dataclass(frozen=True, slots=True)
class PodVolumes:
    claims: tuple[ClaimRef, ...] = ()
    disks: tuple[InlineDisk, ...] = ()
    inline_csi: tuple[tuple[str, str], ...] = ()  # (driver, a handle unique to this pod's volume)

    @property
    def any(self) -> bool:
        return bool(self.claims or self.disks or self.inline_csi)


NO_VOLUMES = PodVolumes()


def _read_only(source: Mapping[str, Any]) -> bool:
    return source.get("readOnly") is True


def required_string(source: Mapping[str, Any], key: str, path: str) -> str:
    """A field that must be a non-empty string (a name, an ID): FieldError "Required value" if not."""
    value = source.get(key)
    if not isinstance(value, str) or not value:
        raise FieldError(f"{path}.{key}", "Required value")
    return value


def _disk(volume: Mapping[str, Any], path: str) -> InlineDisk | None:
    if (source := volume.get("gcePersistentDisk")) is not None:
        source = mapping(source, f"{path}.gcePersistentDisk")
        pd = required_string(source, "pdName", f"{path}.gcePersistentDisk")
        return InlineDisk(GCE_PD, pd, _read_only(source))
    if (source := volume.get("awsElasticBlockStore")) is not None:
        source = mapping(source, f"{path}.awsElasticBlockStore")
        volume_id = required_string(source, "volumeID", f"{path}.awsElasticBlockStore")
        return InlineDisk(AWS_EBS, volume_id, _read_only(source))
    if (source := volume.get("rbd")) is not None:
        source = mapping(source, f"{path}.rbd")
        image = required_string(source, "image", f"{path}.rbd")
        pool = source.get("pool") or "rbd"
        monitors = frozenset(str(m) for m in sequence(source.get("monitors"), f"{path}.rbd.monitors"))
        return InlineDisk(RBD, f"{pool}/{image}", _read_only(source), monitors)
    if (source := volume.get("iscsi")) is not None:
        source = mapping(source, f"{path}.iscsi")
        return InlineDisk(ISCSI, required_string(source, "iqn", f"{path}.iscsi"), _read_only(source))
    if (source := volume.get("azureDisk")) is not None:
        source = mapping(source, f"{path}.azureDisk")
        return InlineDisk(AZURE_DISK, required_string(source, "diskURI", f"{path}.azureDisk"), _read_only(source))
    if (source := volume.get("cinder")) is not None:
        source = mapping(source, f"{path}.cinder")
        return InlineDisk(CINDER, required_string(source, "volumeID", f"{path}.cinder"), _read_only(source))
    return None


def parse_pod_volumes(raw: Any, namespace: str, pod_name: str) -> PodVolumes:
    """`spec.volumes`; FieldError names a malformed entry."""
    claims: list[ClaimRef] = []
    disks: list[InlineDisk] = []
    inline_csi: list[tuple[str, str]] = []
    for i, entry in enumerate(sequence(raw, "spec.volumes")):
        path = f"spec.volumes[{i}]"
        volume = mapping(entry, path)
        name = required_string(volume, "name", path)
        if (source := volume.get("persistentVolumeClaim")) is not None:
            source = mapping(source, f"{path}.persistentVolumeClaim")
            claims.append(ClaimRef(required_string(source, "claimName", f"{path}.persistentVolumeClaim")))
        elif volume.get("ephemeral") is not None:
            claims.append(ClaimRef(f"{pod_name}-{name}", ephemeral=True))
        elif (source := volume.get("csi")) is not None:
            source = mapping(source, f"{path}.csi")
            inline_csi.append((required_string(source, "driver", f"{path}.csi"), f"{namespace}/{pod_name}/{name}"))
        elif (disk := _disk(volume, path)) is not None:
            disks.append(disk)
    if not claims and not disks and not inline_csi:
        return NO_VOLUMES
    return PodVolumes(tuple(claims), tuple(disks), tuple(inline_csi))
