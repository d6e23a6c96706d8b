"""The controllers a scheduler's tests need played: PV binding, a provisioner, PDB status.

A scheduler binds volumes the way kube-scheduler does (sets a PV's ``claimRef``, or asks for
provisioning with the ``selected-node`` annotation) and then waits for the PV controller and a
provisioner; it reads ``disruptionsAllowed`` that the disruption controller maintains. Without
kube-controller-manager, these stand in. Each is opt-in and reacts to the store's commits, its
writes going through the store like any client's, so watchers see the events a cluster shows.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

from . import kinds
from .capacity import TERMINAL_PHASES, parse_quantity
from .errors import ApiError
from .patching import MERGE_PATCH
from .resources import Obj, ResourceDef
from .selectors import selector_matches
from .store import Store, now_rfc3339

logger = logging.getLogger("kubeemu")

PODS = "/pods"
PVS = "/persistentvolumes"
PVCS = "/persistentvolumeclaims"
PDBS = "policy/poddisruptionbudgets"
HOSTNAME = "kubernetes.io/hostname"


def claim_ref(claim: Obj) -> Obj:
    """An ObjectReference to a claim, as ``reference.GetReference`` builds it."""
    meta = claim["metadata"]
    return {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
            "uid": meta["uid"], "apiVersion": "v1", "resourceVersion": meta["resourceVersion"]}


def is_bound_to(pv: Obj, claim: Obj) -> bool:
    """``IsVolumeBoundToClaim``: the claimRef names the claim (and its uid, if it has one)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    meta = claim["metadata"]
    if ref.get("name") != meta["name"] or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref["uid"] == meta["uid"]


def _storage(obj: Obj, *path: str) -> Any:
    cur: Any = obj
    for part in path:
        cur = (cur or {}).get(part)
    return parse_quantity(cur) if cur is not None else None


def _volume_mode(obj: Obj) -> str:
    return (obj.get("spec") or {}).get("volumeMode") or "Filesystem"


def _scaled(value: int | str, total: int) -> int:
    """``GetScaledValueFromIntOrPercent`` rounding up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


class Controllers:
    """The opt-in controllers of a :class:`~.emulator.KubeEmulator` (see its flags)."""

    def __init__(self, store: Store, *, pv_controller: bool = False,
                 pv_controller_delay: float = 0.0, pdb_controller: bool = False,
                 auto_provision: dict[str, str] | None = None) -> None:
        self.store = store
        self._pv_controller = pv_controller
        self.pv_controller_delay = pv_controller_delay
        self._pdb_controller = pdb_controller
        self.auto_provision: dict[str, str] = dict(auto_provision or {})
        self._timers: set[asyncio.TimerHandle] = set()
        store.reactors.append(self.react)

    # --- flags -------------------------------------------------------------------------------

    @property
    def pv_controller(self) -> bool:
        """Complete bindings as kube's PV controller does."""
        return self._pv_controller

    @pv_controller.setter
    def pv_controller(self, on: bool) -> None:
        self._pv_controller = on
        if on:  # catch up on what happened while off
            with self.store.batch():
                for pv in list(self.store.iter_objects(self._rdef("", "persistentvolumes"))):
                    self._sync_volume(pv["metadata"]["name"])
                for pvc in list(self.store.iter_objects(self._rdef("", "persistentvolumeclaims"))):
                    self._sync_claim(pvc["metadata"]["namespace"], pvc["metadata"]["name"])

    @property
    def pdb_controller(self) -> bool:
        """Recompute PDB statuses whenever a pod or a PDB changes."""
        return self._pdb_controller

    @pdb_controller.setter
    def pdb_controller(self, on: bool) -> None:
        self._pdb_controller = on
        if on:
            with self.store.batch():
                for pdb in list(self.store.iter_objects(self._rdef("policy", "poddisruptionbudgets"))):
                    self.update_pdb_status(pdb["metadata"]["namespace"], pdb["metadata"]["name"])

    def close(self) -> None:
        """Cancel delayed reactions (the emulator stops)."""
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()

    # --- plumbing ----------------------------------------------------------------------------

    def _rdef(self, group: str, plural: str) -> ResourceDef:
        rdef = self.store.registry.get(group, "v1", plural)
        assert rdef is not None
        return rdef

    def _get(self, group: str, plural: str, namespace: str, name: str) -> Obj | None:
        return self.store.bucket(self._rdef(group, plural)).objects.get((namespace, name))

    def _patch(self, group: str, plural: str, obj: Obj, patch: Obj,
               subresource: str | None = None) -> Obj:
        meta = obj["metadata"]
        return self.store.patch(self._rdef(group, plural), meta.get("namespace"), meta["name"],
                                patch, MERGE_PATCH, subresource)

    def _soon(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a PV-controller/provisioner step now, or after ``pv_controller_delay``."""
        if self.pv_controller_delay > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                handle: asyncio.TimerHandle | None = None

                def fire() -> None:
                    self._timers.discard(handle)  # type: ignore[arg-type]
                    try:
                        with self.store.batch():
                            fn(*args)
                    except ApiError as err:
                        logger.debug("kubeemu: delayed controller step failed: %s", err)
                    except Exception:
                        logger.exception("kubeemu: delayed controller step failed")

                handle = loop.call_later(self.pv_controller_delay, fire)
                self._timers.add(handle)
                return
        fn(*args)

    def react(self, bucket: str, etype: str, obj: Obj, old: Obj | None) -> None:
        """The store's reactor: route a committed change to the controllers that are on."""
        meta = obj["metadata"]
        if bucket == PVS:
            if self._pv_controller and etype != "DELETED":
                self._soon(self._sync_volume, meta["name"])
        elif bucket == PVCS:
            if etype == "DELETED":
                if self._pv_controller:
                    self._soon(self._release_volumes, obj)
                return
            if self._pv_controller:
                self._soon(self._sync_claim, meta["namespace"], meta["name"])
            if self.auto_provision:
                self._soon(self._auto_provision, meta["namespace"], meta["name"])
        elif bucket == PODS and self._pdb_controller:
            for pdb in list(self.store.iter_objects(self._rdef("policy", "poddisruptionbudgets"),
                                                    meta["namespace"])):
                self.update_pdb_status(meta["namespace"], pdb["metadata"]["name"])
        elif bucket == PDBS and self._pdb_controller and etype != "DELETED":
            self.update_pdb_status(meta["namespace"], meta["name"])

    # --- PV controller -----------------------------------------------------------------------

    def _sync_volume(self, pv_name: str) -> None:
        """A PV whose claimRef names an existing, unbound claim: complete the binding."""
        pv = self._get("", "persistentvolumes", "", pv_name)
        ref = ((pv or {}).get("spec") or {}).get("claimRef")
        if pv is None or not ref or not ref.get("namespace") or not ref.get("name"):
            return
        claim = self._get("", "persistentvolumeclaims", ref["namespace"], ref["name"])
        if claim is None or (claim.get("spec") or {}).get("volumeName"):
            return
        if is_bound_to(pv, claim):
            self.bind(pv, claim)

    def _sync_claim(self, namespace: str, name: str) -> None:
        """``syncUnboundClaim``: a claim naming a volume, a volume pre-bound to the claim, or
        (outside WaitForFirstConsumer classes) the smallest Available volume that matches."""
        claim = self._get("", "persistentvolumeclaims", namespace, name)
        if claim is None or (claim.get("status") or {}).get("phase") == "Bound":
            return
        volumes = self.store.bucket(self._rdef("", "persistentvolumes")).objects
        wanted = (claim.get("spec") or {}).get("volumeName")
        if wanted:
            pv = volumes.get(("", wanted))
            if pv is not None and (not (pv.get("spec") or {}).get("claimRef")
                                   or is_bound_to(pv, claim)):
                self.bind(pv, claim)
            return
        match = next((pv for pv in volumes.values() if is_bound_to(pv, claim)), None)
        if match is None and not self._delay_binding(claim):
            match = self._find_match(claim, volumes.values())
        if match is not None:
            self.bind(match, claim)

    def _storage_class(self, claim: Obj) -> Obj | None:
        name = (claim.get("spec") or {}).get("storageClassName")
        return self._get("storage.k8s.io", "storageclasses", "", name) if name else None

    def _delay_binding(self, claim: Obj) -> bool:
        sclass = self._storage_class(claim)
        return sclass is not None and sclass.get("volumeBindingMode") == "WaitForFirstConsumer"

    @staticmethod
    def _find_match(claim: Obj, volumes: Any) -> Obj | None:
        """``FindMatchingVolume`` on the controller's path: the smallest Available fit."""
        spec = claim.get("spec") or {}
        want = _storage(claim, "spec", "resources", "requests", "storage")
        modes = set(spec.get("accessModes") or ())
        best: Obj | None = None
        for pv in volumes:
            pspec = pv.get("spec") or {}
            size = _storage(pv, "spec", "capacity", "storage")
            if (pspec.get("claimRef") or (pv.get("status") or {}).get("phase") != "Available"
                    or pv["metadata"].get("deletionTimestamp") or size is None
                    or want is None or size < want or _volume_mode(pv) != _volume_mode(claim)
                    or (pspec.get("storageClassName") or "") != (spec.get("storageClassName") or "")
                    or not modes <= set(pspec.get("accessModes") or ())
                    or (spec.get("selector") is not None
                        and not selector_matches(spec["selector"], pv["metadata"].get("labels")))):
                continue
            if best is None or size < _storage(best, "spec", "capacity", "storage"):
                best = pv
        return best

    def bind(self, pv: Obj, claim: Obj) -> bool:
        """The PV controller's ``bind``: PV claimRef, PV Bound, claim volumeName, claim Bound,
        each its own write. False when the volume cannot hold the claim (too small, another
        volumeMode, being deleted), as ``FindMatchingVolume`` refuses a pre-bound volume then."""
        want = _storage(claim, "spec", "resources", "requests", "storage")
        size = _storage(pv, "spec", "capacity", "storage")
        if (size is None or (want is not None and size < want) or pv["metadata"].get(
                "deletionTimestamp") or _volume_mode(pv) != _volume_mode(claim)):
            return False
        with self.store.batch():
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            cmeta = claim["metadata"]
            if (ref.get("name"), ref.get("namespace"), ref.get("uid")) != (
                    cmeta["name"], cmeta["namespace"], cmeta["uid"]):
                patch: Obj = {"spec": {"claimRef": {**claim_ref(claim), "fieldPath": None}}}
                if not is_bound_to(pv, claim):
                    patch["metadata"] = {"annotations": {kinds.ANN_BOUND_BY_CONTROLLER: "yes"}}
                pv = self._patch("", "persistentvolumes", pv, patch)
            if (pv.get("status") or {}).get("phase") != "Bound":
                pv = self._patch("", "persistentvolumes", pv, {"status": {"phase": "Bound"}},
                                 "status")
            annotations = dict(cmeta.get("annotations") or {})
            cpatch: Obj = {}
            if (claim.get("spec") or {}).get("volumeName") != pv["metadata"]["name"]:
                cpatch["spec"] = {"volumeName": pv["metadata"]["name"]}
                annotations.setdefault(kinds.ANN_BOUND_BY_CONTROLLER, "yes")
            annotations.setdefault(kinds.ANN_BIND_COMPLETED, "yes")
            if annotations != (cmeta.get("annotations") or {}):
                cpatch["metadata"] = {"annotations": annotations}
            if cpatch:
                claim = self._patch("", "persistentvolumeclaims", claim, cpatch)
            pspec = pv.get("spec") or {}
            self._patch("", "persistentvolumeclaims", claim, {"status": {
                "phase": "Bound", "accessModes": list(pspec.get("accessModes") or ()),
                "capacity": dict(pspec.get("capacity") or {})}}, "status")
        return True

    def _release_volumes(self, claim: Obj) -> None:
        """A deleted claim releases its volumes: Released (Retain) or deleted (Delete)."""
        rdef = self._rdef("", "persistentvolumes")
        for pv in list(self.store.iter_objects(rdef)):
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if not ref.get("uid") or not is_bound_to(pv, claim):
                continue
            if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
                self.store.delete(rdef, None, pv["metadata"]["name"])
            else:
                self._patch("", "persistentvolumes", pv, {"status": {"phase": "Released"}},
                            "status")

    # --- provisioner -------------------------------------------------------------------------

    def provision(self, namespace: str, claim_name: str, *, pv_name: str | None = None,
                  node_affinity: dict[str, Any] | None = None,
                  csi_driver: str | None = None) -> Obj:
        """Create a PV for a claim as an external provisioner does, then bind both."""
        claim = self._get("", "persistentvolumeclaims", namespace, claim_name)
        if claim is None:
            raise ApiError.not_found("persistentvolumeclaims", claim_name)
        spec = claim.get("spec") or {}
        if spec.get("volumeName"):
            raise ValueError(f"claim {namespace}/{claim_name} is already bound to "
                             f"{spec['volumeName']}")
        sclass = self._storage_class(claim) or {}
        driver = csi_driver or sclass.get("provisioner")
        if not driver:
            raise ValueError(f"claim {namespace}/{claim_name} has no StorageClass with a "
                             f"provisioner; pass csi_driver")
        name = pv_name or f"pvc-{claim['metadata']['uid']}"
        pv_spec: Obj = {
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})
                         .get("storage", "1Gi")},
            "accessModes": list(spec.get("accessModes") or ("ReadWriteOnce",)),
            "persistentVolumeReclaimPolicy": sclass.get("reclaimPolicy", "Delete"),
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": _volume_mode(claim),
            "claimRef": claim_ref(claim),
            "csi": {"driver": driver, "volumeHandle": name},
        }
        if sclass.get("mountOptions"):
            pv_spec["mountOptions"] = list(sclass["mountOptions"])
        affinity = kinds.node_affinity(node_affinity)
        if affinity is not None:
            pv_spec["nodeAffinity"] = affinity
        pv_rdef = self._rdef("", "persistentvolumes")
        with self.store.batch():
            annotations = claim["metadata"].get("annotations") or {}
            if annotations.get(kinds.ANN_STORAGE_PROVISIONER) != driver:
                claim = self._patch("", "persistentvolumeclaims", claim, {"metadata": {
                    "annotations": {kinds.ANN_STORAGE_PROVISIONER: driver,
                                    kinds.ANN_BETA_STORAGE_PROVISIONER: driver}}})
                pv_spec["claimRef"] = claim_ref(claim)
            pv = self.store.create(pv_rdef, None, {
                "metadata": {"name": name, "annotations": {kinds.ANN_PROVISIONED_BY: driver}},
                "spec": pv_spec}, http=False)
            claim = self._get("", "persistentvolumeclaims", namespace, claim_name) or claim
            if not (claim.get("spec") or {}).get("volumeName"):
                self.bind(pv, claim)
        return self.store.get(pv_rdef, None, name)

    def _auto_provision(self, namespace: str, name: str) -> None:
        """Provision for a claim whose class's provisioner is in ``auto_provision``: at once for
        Immediate classes, once the scheduler selects a node for WaitForFirstConsumer ones."""
        claim = self._get("", "persistentvolumeclaims", namespace, name)
        if claim is None or (claim.get("spec") or {}).get("volumeName"):
            return
        sclass = self._storage_class(claim)
        if sclass is None or sclass.get("provisioner") not in self.auto_provision:
            return
        volumes = self.store.bucket(self._rdef("", "persistentvolumes")).objects
        if any(is_bound_to(pv, claim) for pv in volumes.values()):
            return  # already provisioned (or pre-bound): the PV controller's business
        key = self.auto_provision[sclass["provisioner"]]
        allowed: list[str] | None = None
        for term in sclass.get("allowedTopologies") or []:
            for expr in term.get("matchLabelExpressions") or []:
                if expr.get("key") == key:
                    allowed = (allowed or []) + list(expr.get("values") or [])
        if sclass.get("volumeBindingMode") != "WaitForFirstConsumer":
            self.provision(namespace, name,
                           node_affinity={key: [allowed[0]]} if allowed else None)
            return
        selected = (claim["metadata"].get("annotations") or {}).get(kinds.ANN_SELECTED_NODE)
        if not selected:
            return
        node = self._get("", "nodes", "", selected)
        labels = (node or {}).get("metadata", {}).get("labels") or {}
        value = labels.get(key) or (selected if key == HOSTNAME and node is not None else None)
        if value is None or (allowed is not None and value not in allowed):
            # the external-provisioner's "reschedule": drop the annotation, the scheduler retries
            self._patch("", "persistentvolumeclaims", claim,
                        {"metadata": {"annotations": {kinds.ANN_SELECTED_NODE: None}}})
            return
        self.provision(namespace, name, node_affinity={key: [value]})

    # --- disruption controller ---------------------------------------------------------------

    def pdb_status(self, pdb: Obj) -> Obj:
        """A PDB's status as the disruption controller computes it, for pods without kubelets.

        Matching pods are expected; healthy are those not terminal, not being deleted and not
        explicitly unready (a ``Ready`` condition that is not ``True``). ``maxUnavailable`` and
        a percentage scale with the matching pods (not with the owners' replicas).
        """
        meta = pdb["metadata"]
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        pods: list[Obj] = []
        if selector is not None:  # policy/v1: no selector selects nothing, {} all
            pods = [p for p in self.store.iter_objects(self._rdef("", "pods"), meta["namespace"])
                    if selector_matches(selector, p["metadata"].get("labels"))]
        healthy = sum(1 for p in pods if self._healthy(p))
        expected = len(pods)
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        elif spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        else:
            expected = desired = 0
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = pdb.get("status") or {}
        generation = meta.get("generation", 1)
        cond = {"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "", "observedGeneration": generation}
        conditions = [c for c in old.get("conditions") or [] if c.get("type") != cond["type"]]
        previous = next((c for c in old.get("conditions") or []
                         if c.get("type") == cond["type"]), None)
        cond["lastTransitionTime"] = (previous["lastTransitionTime"]
                                      if previous and previous.get("status") == cond["status"]
                                      else now_rfc3339())
        return {**old, "observedGeneration": generation, "disruptionsAllowed": allowed,
                "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
                "conditions": [*conditions, cond]}

    @staticmethod
    def _healthy(pod: Obj) -> bool:
        status = pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or status.get("phase") in TERMINAL_PHASES:
            return False
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"),
                     None)
        return ready is None or ready.get("status") == "True"

    def update_pdb_status(self, namespace: str, name: str) -> Obj:
        """Write a PDB's computed status (a no-op write when nothing changed)."""
        rdef = self._rdef("policy", "poddisruptionbudgets")
        pdb = self.store.bucket(rdef).objects.get((namespace, name))
        if pdb is None:
            raise ApiError.not_found("poddisruptionbudgets", name, "policy")
        return self.store.patch(rdef, namespace, name, {"status": self.pdb_status(pdb)},
                                MERGE_PATCH, "status")
