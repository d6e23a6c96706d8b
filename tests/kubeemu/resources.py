"""Resource definitions served by the emulator, and the registry used for routing and discovery.

The registry mirrors what a real API server advertises in discovery, because Kopf and
kubernetes_asyncio decide what to call (and with which URL) from that information.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

Obj = dict[str, Any]
Converter = Callable[[Obj], Obj]

ALL_VERBS: tuple[str, ...] = (
    "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
)
READ_VERBS: tuple[str, ...] = ("get", "list")

# Field selectors a real API server accepts beyond metadata.name / metadata.namespace.
# None means "any dotted path" (used where the real set is large and stable, e.g. events).
POD_FIELDS = frozenset({
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
    "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
    "status.nominatedNodeName",
})
NODE_FIELDS = frozenset({"spec.unschedulable"})
NAMESPACE_FIELDS = frozenset({"status.phase"})
SERVICE_FIELDS = frozenset({"spec.clusterIP", "spec.type"})
RESOURCE_SLICE_FIELDS = frozenset({"spec.nodeName", "spec.driver"})


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceDef:
    """One served group/version/plural; several defs may share a storage bucket (events)."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    bucket: str = ""
    tracks_generation: bool = False
    custom: bool = False
    field_selectors: frozenset[str] | None = frozenset()
    to_view: Converter | None = None
    from_view: Converter | None = None
    schema: Obj | None = dataclasses.field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        """The apiVersion written into objects of this resource."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """A unique id of this view, e.g. ``v1/pods`` or ``placer.dev/v1alpha1/schedulerprofiles``."""
        return f"{self.api_version}/{self.plural}"

    @property
    def storage(self) -> str:
        """The bucket holding the objects (shared by the two views of events)."""
        return self.bucket or f"{self.group}/{self.plural}"

    @property
    def has_status(self) -> bool:
        """Whether writes to the main resource must leave ``status`` alone."""
        return "status" in self.subresources

    @property
    def base_path(self) -> str:
        """URL prefix of the group/version, as used by clients."""
        return "/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"


# --- Events: core/v1 and events.k8s.io/v1 are two views of the same objects. ---------------------
# Stored form is core/v1. The mapping follows the apiserver's conversion functions.

_CORE_TO_NEW: tuple[tuple[str, str], ...] = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)


def event_core_to_new(obj: Obj) -> Obj:
    """Render a stored core/v1 Event as events.k8s.io/v1."""
    out = dict(obj)
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    for old, new in _CORE_TO_NEW:
        out.pop(old, None)
        if old in obj:
            out[new] = obj[old]
    return out


def event_new_to_core(obj: Obj) -> Obj:
    """Store an events.k8s.io/v1 Event in the core/v1 form."""
    out = dict(obj)
    out["apiVersion"] = "v1"
    out["kind"] = "Event"
    for old, new in _CORE_TO_NEW:
        out.pop(new, None)
        if new in obj:
            out[old] = obj[new]
    return out


def builtin_resources(minor: int = 36, gang_scheduling: bool = False) -> list[ResourceDef]:
    """The built-in (non-CRD) resources, as an API server of Kubernetes ``1.<minor>`` with
    metrics-server lists them (``pods/resize`` from 1.33, ``resource.k8s.io/v1`` from 1.34; with
    ``gang_scheduling``, a v1.36 server started with ``--feature-gates=GenericWorkload=true,
    GangScheduling=true --runtime-config=scheduling.k8s.io/v1alpha2=true``: its PodGroups)."""
    status = ("status",)
    pod_subresources = ("binding", "status", "resize") if minor >= 33 else ("binding", "status")
    # Dynamic Resource Allocation's resource.k8s.io/v1 (GA and served by default from 1.34)
    dra = [
        ResourceDef("resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", False,
                    tracks_generation=True),
        ResourceDef("resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice",
                    False, tracks_generation=True, field_selectors=RESOURCE_SLICE_FIELDS),
        ResourceDef("resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim",
                    True, subresources=status),
        ResourceDef("resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate",
                    "ResourceClaimTemplate", True),
    ] if minor >= 34 else []
    defs = [
        ResourceDef("", "v1", "namespaces", "namespace", "Namespace", False,
                    short_names=("ns",), subresources=status, field_selectors=NAMESPACE_FIELDS),
        ResourceDef("", "v1", "nodes", "node", "Node", False,
                    short_names=("no",), subresources=status, field_selectors=NODE_FIELDS),
        ResourceDef("", "v1", "pods", "pod", "Pod", True,
                    short_names=("po",), categories=("all",),
                    subresources=pod_subresources, field_selectors=POD_FIELDS),
        ResourceDef("", "v1", "bindings", "binding", "Binding", True, verbs=("create",)),
        ResourceDef("", "v1", "events", "event", "Event", True,
                    short_names=("ev",), bucket="events", field_selectors=None),
        ResourceDef("events.k8s.io", "v1", "events", "event", "Event", True,
                    short_names=("ev",), bucket="events", field_selectors=None,
                    to_view=event_core_to_new, from_view=event_new_to_core),
        ResourceDef("", "v1", "services", "service", "Service", True,
                    short_names=("svc",), categories=("all",), subresources=status,
                    field_selectors=SERVICE_FIELDS),
        ResourceDef("", "v1", "persistentvolumeclaims", "persistentvolumeclaim",
                    "PersistentVolumeClaim", True, short_names=("pvc",), subresources=status),
        ResourceDef("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", False,
                    short_names=("pv",), subresources=status),
        ResourceDef("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True,
                    short_names=("rs",), categories=("all",), subresources=status,
                    tracks_generation=True),
        ResourceDef("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True,
                    short_names=("sts",), categories=("all",), subresources=status,
                    tracks_generation=True),
        ResourceDef("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", False,
                    short_names=("sc",)),
        ResourceDef("storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", False),
        ResourceDef("storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", False,
                    subresources=status),
        ResourceDef("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget",
                    "PodDisruptionBudget", True, short_names=("pdb",), subresources=status,
                    tracks_generation=True),
        ResourceDef("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass",
                    False, short_names=("pc",)),
        ResourceDef("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
        ResourceDef("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                    "customresourcedefinition", "CustomResourceDefinition", False,
                    short_names=("crd", "crds"), categories=("api-extensions",),
                    subresources=status, tracks_generation=True),
        ResourceDef("metrics.k8s.io", "v1beta1", "nodes", "", "NodeMetrics", False,
                    verbs=READ_VERBS),
        ResourceDef("metrics.k8s.io", "v1beta1", "pods", "", "PodMetrics", True,
                    verbs=READ_VERBS),
    ]
    defs.extend(dra)
    if gang_scheduling:
        if minor != 36:
            raise ValueError("kubeemu serves scheduling.k8s.io/v1alpha2 PodGroups as v1.36 does (kube_version 1.36)")
        # no metadata.generation: a v1.36.2 server sets none on PodGroups (measured)
        defs.append(ResourceDef("scheduling.k8s.io", "v1alpha2", "podgroups", "podgroup", "PodGroup", True,
                                subresources=status))
    return defs


def scheduler_plugins_podgroup_crd() -> Obj:
    """scheduler-plugins' PodGroup CRD (``podgroups.scheduling.x-k8s.io``, v1alpha1, its
    Coscheduling plugin's), as a test installs it: ``emu.create("crd", scheduler_plugins_podgroup_crd())``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
        "spec": {
            "group": "scheduling.x-k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup",
                      "listKind": "PodGroupList", "shortNames": ["pg", "pgs"]},
            "versions": [{
                "name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }],
        },
    }


def schedulerprofile_crd() -> Obj:
    """The CRD of ``placer.dev/v1alpha1`` SchedulerProfile, served built-in for Kopf's discovery."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "schedulerprofiles.placer.dev"},
        "spec": {
            "group": "placer.dev",
            "scope": "Cluster",
            "names": {
                "plural": "schedulerprofiles",
                "singular": "schedulerprofile",
                "kind": "SchedulerProfile",
                "listKind": "SchedulerProfileList",
                "shortNames": ["sp"],
            },
            "versions": [{
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                }},
                "additionalPrinterColumns": [
                    {"name": "Scheduler", "type": "string", "jsonPath": ".spec.schedulerName"},
                    {"name": "Ready", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Reason", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    }


def defs_from_crd(crd: Obj) -> list[ResourceDef]:
    """Build the served resources of a CRD (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    plural = names.get("plural", "")
    kind = names.get("kind", "")
    out: list[ResourceDef] = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = ver.get("subresources") or {}
        out.append(ResourceDef(
            group=group,
            version=ver["name"],
            plural=plural,
            singular=names.get("singular") or kind.lower(),
            kind=kind,
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=tuple(s for s in ("status", "scale") if s in subs),
            bucket=f"{group}/{plural}",
            tracks_generation=True,
            custom=True,
            schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
        ))
    return out


class Registry:
    """Lookup of resources by URL parts and by the loose names tests like to use."""

    def __init__(self, defs: Iterable[ResourceDef] = ()) -> None:
        self._by_gvp: dict[tuple[str, str, str], ResourceDef] = {}
        self._order: list[ResourceDef] = []
        self._resolved: dict[str, ResourceDef] = {}  # resolve() answers; reset on any change
        for rdef in defs:
            self.add(rdef)

    def add(self, rdef: ResourceDef) -> None:
        """Register (or replace) a served resource."""
        self._resolved.clear()
        gvp = (rdef.group, rdef.version, rdef.plural)
        if gvp in self._by_gvp:
            self._order.remove(self._by_gvp[gvp])
        self._by_gvp[gvp] = rdef
        self._order.append(rdef)

    def remove(self, group: str, plural: str) -> None:
        """Unregister all versions of a resource (a CRD was deleted)."""
        self._resolved.clear()
        for gvp in [k for k in self._by_gvp if k[0] == group and k[2] == plural]:
            self._order.remove(self._by_gvp.pop(gvp))

    def get(self, group: str, version: str, plural: str) -> ResourceDef | None:
        """Exact lookup, as routing needs."""
        return self._by_gvp.get((group, version, plural))

    def all(self) -> list[ResourceDef]:
        """All served resources in registration order."""
        return list(self._order)

    def group_versions(self) -> dict[str, list[str]]:
        """Group name -> versions, for ``/apis`` (core excluded)."""
        out: dict[str, list[str]] = {}
        for rdef in self._order:
            if rdef.group and rdef.version not in out.setdefault(rdef.group, []):
                out[rdef.group].append(rdef.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceDef]:
        """Resources of one group/version, for its APIResourceList."""
        return [r for r in self._order if r.group == group and r.version == version]

    def resolve(self, name: str) -> ResourceDef:
        """Find a resource by ``plural``, ``group/version/plural``, kind, singular or short name.

        Core v1 wins ties, as in kubectl, so ``"events"`` and ``"pods"`` mean the core ones.
        """
        found = self._resolved.get(name)
        if found is None:
            found = self._resolved[name] = self._resolve(name)
        return found

    def _resolve(self, name: str) -> ResourceDef:
        if name.count("/") >= 1:
            *gv, plural = name.split("/")
            gvs = "/".join(gv)
            for rdef in self._order:
                if rdef.api_version == gvs and rdef.plural == plural:
                    return rdef
                if rdef.group == gvs and rdef.plural == plural:
                    return rdef
            raise KeyError(name)
        low = name.lower()
        if "." in low:  # plural.group, as kubectl accepts
            plural, group = low.split(".", 1)
            for rdef in self._order:
                if rdef.plural == plural and rdef.group == group:
                    return rdef
        candidates = [
            r for r in self._order
            if low in (r.plural, r.singular, r.kind.lower()) or low in r.short_names
        ]
        if not candidates:
            raise KeyError(name)
        candidates.sort(key=lambda r: (r.group != "", r.group))
        return candidates[0]
