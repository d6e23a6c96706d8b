"""Which Kubernetes API server the emulator plays: v1.24 (the oldest Placer supports) to v1.36.

A real API server of an older minor silently drops the fields it does not know (and a newer one
drops those whose feature gate is off by default), so a client that writes a v1.36 pod to a v1.24
server reads back a pod without them. The emulator does the same, per the table below (the
minor in which each feature became on by default), and turns on the server-side behaviours of
the newer minors (the ``SchedulingGated`` condition, the ``pods/resize`` subresource,
``nominatedNodeName`` cleared on binding) from the same table.
"""

from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]

OLDEST = 24
NEWEST = 36
DEFAULT = f"1.{NEWEST}"

# feature -> the first minor in which kube's feature gate is on by default (pkg/features).
SINCE: dict[str, int] = {
    "PodSchedulingReadiness": 27,  # spec.schedulingGates, the SchedulingGated condition
    "SidecarContainers": 29,  # initContainers[].restartPolicy
    "InPlacePodVerticalScaling": 33,  # resizePolicy, containerStatuses[].resources, pods/resize
    "UserNamespacesSupport": 33,  # spec.hostUsers
    "PodLevelResources": 34,  # spec.resources
    "ContainerRestartRules": 35,  # containers[].restartPolicy, restartPolicyRules
    "ClearingNominatedNodeNameAfterBinding": 35,  # a binding clears status.nominatedNodeName
    "InPlacePodLevelResourcesVerticalScaling": 36,  # status.resources/allocatedResources
    "NodeDeclaredFeatures": 36,  # node status.declaredFeatures
    "DRAConsumableCapacity": 36,  # devices shared by claims (resource.k8s.io/v1 fields: kubeemu.dra)
    "DRADeviceBindingConditions": 36,  # devices prepared before the pod binds (kubeemu.dra)
}

_VERSION = re.compile(r"^v?1\.(\d+)(?:\.\d+)?$")


def parse_minor(version: str | int) -> int:
    """``"1.36"``, ``"v1.24.17"`` or ``36`` -> the minor; ValueError outside v1.24..v1.36."""
    if isinstance(version, int):
        minor = version
    else:
        match = _VERSION.match(str(version).strip())
        if match is None:
            raise ValueError(f"not a Kubernetes version: {version!r} (expected e.g. '1.36')")
        minor = int(match.group(1))
    if not OLDEST <= minor <= NEWEST:
        raise ValueError(f"kubeemu plays Kubernetes v1.{OLDEST} to v1.{NEWEST}, not v1.{minor}")
    return minor


def version_info(minor: int) -> dict[str, str]:
    """What ``GET /version`` answers."""
    return {
        "major": "1",
        "minor": str(minor),
        "gitVersion": f"v1.{minor}.0+kubeemu",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


class Features:
    """The features on in one minor, and the field dropping that goes with the others."""

    def __init__(self, minor: int) -> None:
        self.minor = minor
        self.on = frozenset(name for name, since in SINCE.items() if minor >= since)

    def __contains__(self, feature: str) -> bool:
        return feature in self.on

    @property
    def everything(self) -> bool:
        """True when no field needs dropping (the newest minor)."""
        return len(self.on) == len(SINCE)

    def drop_pod_fields(self, pod: Obj) -> None:
        """Drop (in place; ``pod`` must be owned, its sub-trees are copied before writing) the pod
        fields this minor does not know, as its decoder or ``DropDisabledPodFields`` would."""
        if self.everything:
            return
        spec = pod.get("spec")
        if isinstance(spec, dict):
            spec = pod["spec"] = dict(spec)
            self._drop_spec(spec)
        status = pod.get("status")
        if isinstance(status, dict):
            status = pod["status"] = dict(status)
            if "InPlacePodLevelResourcesVerticalScaling" not in self:
                status.pop("resources", None)
                status.pop("allocatedResources", None)
            if "InPlacePodVerticalScaling" not in self:
                for field in ("containerStatuses", "initContainerStatuses"):
                    if isinstance(status.get(field), list):
                        status[field] = [
                            {k: v for k, v in cs.items() if k not in ("resources", "allocatedResources")}
                            if isinstance(cs, dict) else cs for cs in status[field]]

    def _drop_spec(self, spec: Obj) -> None:
        if "PodSchedulingReadiness" not in self:
            spec.pop("schedulingGates", None)
        if "PodLevelResources" not in self:
            spec.pop("resources", None)
        if "UserNamespacesSupport" not in self:
            spec.pop("hostUsers", None)
        for field in ("containers", "initContainers"):
            if not isinstance(spec.get(field), list):
                continue
            out = []
            for container in spec[field]:
                if isinstance(container, dict):
                    container = dict(container)
                    if "InPlacePodVerticalScaling" not in self:
                        container.pop("resizePolicy", None)
                    if "ContainerRestartRules" not in self:
                        container.pop("restartPolicyRules", None)
                        if field == "containers":
                            container.pop("restartPolicy", None)
                    if field == "initContainers" and "SidecarContainers" not in self:
                        container.pop("restartPolicy", None)
                out.append(container)
            spec[field] = out

    def drop_node_fields(self, node: Obj) -> None:
        """Drop the node fields this minor does not know (``status.declaredFeatures``)."""
        if "NodeDeclaredFeatures" in self:
            return
        status = node.get("status")
        if isinstance(status, dict) and "declaredFeatures" in status:
            node["status"] = {k: v for k, v in status.items() if k != "declaredFeatures"}
