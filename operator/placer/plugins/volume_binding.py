"""VolumeBinding — a pod's PersistentVolumeClaims, as kube-scheduler's plugin of that name.

Pod-level (kube's PreFilter), each making the pod unschedulable on every node:

- a claim that does not exist: `persistentvolumeclaim "NAME" not found` (a generic ephemeral
  volume's: `waiting for ephemeral volume controller to create the persistentvolumeclaim "NAME"`;
  one not owned by the pod: `PVC NS/NAME was not created for pod NS/POD (pod is not owner)`);
- a claim being deleted, or `Lost`;
- a claim not bound yet whose binding is not delayed (no StorageClass, or an `Immediate` one): "pod
  has unbound immediate PersistentVolumeClaims" — the PV controller binds those, not the scheduler.

Per node (kube's Filter, `FindPodVolumes`):

- a bound claim's volume must admit the node (its `nodeAffinity`) — "node(s) didn't match
  PersistentVolume's node affinity"; a volume that does not exist — "node(s) unavailable due to one or more pvc(s)
  bound to non-existent pv(s)";
- an unbound `WaitForFirstConsumer` claim needs, on the node, an Available volume of its class that
  fits it (size, access modes, volume mode, selector, node affinity; one pre-bound to the claim
  first, else the smallest — kube's `FindMatchingVolume`), two claims of the pod never sharing one,
  or else its StorageClass must provision (a provisioner other than `kubernetes.io/no-provisioner`)
  where its `allowedTopologies` admit the node; a claim already annotated with
  `volume.kubernetes.io/selected-node` only fits that node — "node(s) didn't find available
  persistent volumes to bind".

Reserve: on the chosen node, each matched volume is assumed bound to its claim (`claimRef`) and each
claim to provision is assumed annotated with the node, in the catalog (kube's assume cache), so the
next pod never gets the same volume; the `VolumeBindings` go with the decision to PreBind, and to
`placer simulate`'s `volumes`.

PreBind (kube's `BindPodVolumes`), carried out by the operator's binding cycle before the pod is
bound, holding no bind slot while it waits:

- a static binding: the PV's `spec.claimRef` names the claim (apiVersion, kind, namespace, name,
  uid, resourceVersion, as kube's `GetBindVolumeToClaim`), with `pv.kubernetes.io/bound-by-controller`
  when the PV was not pre-bound to it. A JSON merge patch with the resourceVersion the decision saw
  as its precondition: kube Updates the PV it has cached, the same optimistic concurrency in one call
  (a PV taken meanwhile, e.g. by another scheduler, is a 409, never given twice);
- a dynamic one: the claim's `volume.kubernetes.io/selected-node: NODE` annotation (merge patch, same
  precondition), which the external provisioner acts on.

Nothing is written when the API server's copy already says so; a 409 whose object already carries
what was written (a retried write whose first attempt landed) counts as written. Then every claim
must be *fully bound* (`spec.volumeName` and `pv.kubernetes.io/bind-completed`, written by the PV
controller), checked as kube's `checkBindings` against the API server's copies the watches feed
(`Catalog.server_copy`) whenever a claim, volume or the node changes, and once a second. It fails at
once when a provisioner gave up (it removes the annotation: `provisioning failed for PVC "NAME"`), a
PV's claimRef was reset, a volume does not admit the node, or the node is gone; and after the
operator's `pre_bind_timeout` (kube's `bindTimeoutSeconds`, 600 s): `timed out waiting for the
condition`. When the binding fails, the annotations this attempt set are removed again if the claim
still carries them for this node and is not bound yet, so the pod may be placed elsewhere (kube
leaves the annotation, pinning the claim to that node). A PV's claimRef stays, as in kube: the PV
controller completes that binding whatever becomes of the pod.

Not modelled: CSIStorageCapacity (a provisioning class is assumed to have room), and the volume
capacity score (a kube alpha feature).

Args: none.

Example profile (the default profile has it as a filter)::

    spec:
      schedulerName: stateful-scheduler
      filters: [{name: NodeResourcesFit}, {name: VolumeBinding}, {name: VolumeZone}]
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from placer.engine.catalog import Catalog
from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    BATCH_NONE,
    UNSIGNABLE,
    ClusterEvent,
    FilterPlugin,
    NoArgs,
    ObjectRef,
    PreBind,
    PreBindError,
    PreBindPlugin,
    ReservePlugin,
    StaticCache,
    WaitFor,
    Write,
)
from placer.engine.node_selectors import term_mask
from placer.engine.objects import NodeSelectorRequirement, NodeSelectorTerm, PodInfo
from placer.engine.storage import (
    SELECTED_NODE,
    ClaimInfo,
    StorageClassInfo,
    VolumeBindings,
    VolumeInfo,
    find_matching_volume,
)

__all__ = ["BOUND_BY_CONTROLLER", "TIMED_OUT", "VolumeBinding", "claim_reference"]

CLAIM = "PersistentVolumeClaim"
VOLUME = "PersistentVolume"
CLASS = "StorageClass"

UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
TIMED_OUT = "timed out waiting for the condition"  # kube's wait.ErrWaitTimeout
# what may end a wait for the volumes: a claim or volume written, the node changed or gone (the pod
# itself is watched by the binding cycle)
BIND_WAKE = frozenset({CLAIM, VOLUME, ClusterEvent.NODE_UPDATE, ClusterEvent.NODE_DELETE})
# bits of a node's code, in kube's order of reasons
REASON_BITS = ((1, NODE_CONFLICT), (2, BIND_CONFLICT), (4, PV_NOT_EXIST))


@dataclass(slots=True)
class _Plan:
    """One pod's claims against the nodes, for one state of the catalog and the nodes."""

    pod_reason: str | None = None
    to_bind: bool = False  # some claim is not bound yet: there is something to reserve
    codes: np.ndarray | None = None  # per slot: REASON_BITS ORed; None: every node fits
    # per claim to match: its choice per slot (an index into `volumes`, -1: none)
    choices: list[tuple[ClaimInfo, np.ndarray]] = field(default_factory=list)
    volumes: list[VolumeInfo] = field(default_factory=list)
    provision: list[ClaimInfo] = field(default_factory=list)  # claims already annotated for a node


class VolumeBinding(FilterPlugin[NoArgs], ReservePlugin[NoArgs], PreBindPlugin[NoArgs]):
    name: ClassVar[str] = "VolumeBinding"
    events: ClassVar[frozenset[str]] = frozenset(
        {ClusterEvent.NODE, CLAIM, VOLUME, CLASS, "CSINode"}
    )
    metric: ClassVar[str] = "volume_binds"  # placer_volume_binds_total, placer_volume_binds_waiting

    def __init__(self, args: NoArgs) -> None:
        super().__init__(args)
        self._plan_of: tuple[object, ClusterState | None, tuple[int, int], _Plan] | None = None
        self._masks: StaticCache[np.ndarray] = StaticCache()
        # (the catalog itself, not its id: a freed catalog's id may be a new one's)
        self._by_class: tuple[Catalog | None, int, dict[str, list[VolumeInfo]]] = (None, -1, {})

    # ----------------------------------------------------------------- the plan

    def _plan(self, pod: PodInfo, cluster: ClusterState) -> _Plan:
        """Memoised per pod and per state of the catalog and of the nodes (not of the pods: what
        volumes fit a node does not depend on them, so Reserve reuses the Filter's plan)."""
        key = (cluster.catalog.revision, cluster.static_version)
        memo = self._plan_of
        if memo is not None and memo[0] is pod and memo[1] is cluster and memo[2] == key:
            return memo[3]
        plan = self._compute(pod, cluster)
        self._plan_of = (pod, cluster, key, plan)
        return plan

    def _claims(self, pod: PodInfo, cluster: ClusterState) -> tuple[str | None, list[ClaimInfo], list[ClaimInfo]]:
        """(pod-level reason, bound claims, claims to bind), as kube's `podHasPVCs` + `GetPodVolumes`."""
        catalog = cluster.catalog
        bound: list[ClaimInfo] = []
        to_bind: list[ClaimInfo] = []
        immediate = False
        for ref in pod.volumes.claims:
            claim: ClaimInfo | None = catalog.get(CLAIM, ref.name, pod.namespace)
            if claim is None:
                if ref.ephemeral:
                    return (
                        f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{ref.name}"',
                        [], [],
                    )
                return f'persistentvolumeclaim "{ref.name}" not found', [], []
            if claim.phase == "Lost":
                return (
                    f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                    f'"{claim.volume_name}"', [], [],
                )
            if claim.deleting:
                return f'persistentvolumeclaim "{claim.name}" is being deleted', [], []
            # kube's metav1.IsControlledBy: a claim without a controlling owner is no pod's
            if ref.ephemeral and (not claim.owner_uid or claim.owner_uid != pod.uid):
                return (
                    f"PVC {pod.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
                    "(pod is not owner)", [], [],
                )
            if claim.fully_bound:
                bound.append(claim)
                continue
            storage_class = self._class_of(cluster, claim)
            if storage_class is not None and storage_class.delays_binding and not claim.volume_name:
                to_bind.append(claim)
            else:
                immediate = True
        if immediate:
            return UNBOUND_IMMEDIATE, [], []
        return None, bound, to_bind

    def _compute(self, pod: PodInfo, cluster: ClusterState) -> _Plan:
        reason, bound, to_bind = self._claims(pod, cluster)
        if reason is not None:
            return _Plan(pod_reason=reason)
        if not bound and not to_bind:
            return _Plan()
        size = cluster.size
        codes = np.zeros(size, dtype=np.int8)
        plan = _Plan(to_bind=bool(to_bind), codes=codes)
        # bound claims: kube's checkBoundClaims, claim by claim, the first problem decides a node
        undecided = np.ones(size, dtype=bool)
        for claim in bound:
            volume: VolumeInfo | None = cluster.catalog.get(VOLUME, claim.volume_name)
            if volume is None:
                codes[undecided] |= 4
                break
            admits = self._admits(cluster, volume)
            if admits is not None:
                codes[undecided & ~admits] |= 1
                undecided &= admits
        # claims to bind: kube's FindPodVolumes
        unbound_fails = np.zeros(size, dtype=bool)
        names = cluster.names[:size]
        matching: list[ClaimInfo] = []
        for claim in to_bind:
            if claim.selected_node:
                unbound_fails |= names != claim.selected_node
                plan.provision.append(claim)
            else:
                matching.append(claim)
        for claim in plan.provision:
            unbound_fails |= ~self._provisions(cluster, claim)
        index: dict[str, int] = {}
        for claim in sorted(matching, key=lambda c: c.request):  # kube: smallest claims first
            choice = np.full(size, -1, dtype=np.int64)
            candidates = find_matching_volume(claim, self._volumes_of(cluster, claim.storage_class))
            pre_bound = bool(candidates) and candidates[0].bound_to(claim)
            for volume in candidates:
                vid = index.setdefault(volume.name, len(index))
                if vid == len(plan.volumes):
                    plan.volumes.append(volume)
                admits = self._admits(cluster, volume)
                free = choice < 0 if admits is None else (choice < 0) & admits
                if not pre_bound:  # another claim of the pod took it on that node (kube's chosenPVs)
                    for _, earlier in plan.choices:
                        free &= earlier != vid
                choice[free] = vid
            plan.choices.append((claim, choice))
            unbound_fails |= (choice < 0) & ~self._provisions(cluster, claim)
        codes[unbound_fails] |= 2
        if not codes.any():
            plan.codes = None
        return plan

    def _admits(self, cluster: ClusterState, volume: VolumeInfo) -> np.ndarray | None:
        """The nodes a volume's node affinity admits (None: every node)."""
        terms = volume.node_affinity
        if terms is None:
            return None
        mask = self._masks.get(cluster, terms)
        if mask is None:
            mask = np.zeros(cluster.size, dtype=bool)
            for term in terms:
                # kube's CheckNodeAffinity matches a node of labels only (no name): `matchFields`
                # are ignored, and a term of them alone admits every node
                if term.expressions:
                    mask |= term_mask(cluster, NodeSelectorTerm(term.expressions, ()))
                elif term.fields:
                    mask[:] = True
            mask = self._masks.put(terms, mask)
        return mask

    def _provisions(self, cluster: ClusterState, claim: ClaimInfo) -> np.ndarray:
        """The nodes where the claim's class can provision it (kube's `checkVolumeProvisions`)."""
        storage_class = self._class_of(cluster, claim)
        if storage_class is None or not storage_class.provisions:
            return np.zeros(cluster.size, dtype=bool)
        if not storage_class.allowed_topologies:
            return np.ones(cluster.size, dtype=bool)
        key = ("class", storage_class.allowed_topologies)
        mask = self._masks.get(cluster, key)
        if mask is None:
            mask = np.zeros(cluster.size, dtype=bool)
            for topology in storage_class.allowed_topologies:
                term = NodeSelectorTerm(
                    tuple(NodeSelectorRequirement(k, "In", tuple(sorted(v))) for k, v in topology), ()
                )
                mask |= term_mask(cluster, term)
            mask = self._masks.put(key, mask)
        return mask

    @staticmethod
    def _class_of(cluster: ClusterState, claim: ClaimInfo) -> StorageClassInfo | None:
        return cluster.catalog.get(CLASS, claim.storage_class) if claim.storage_class else None

    def _volumes_of(self, cluster: ClusterState, storage_class: str) -> list[VolumeInfo]:
        """The volumes of a class (kube's `pvCache.ListPVs`), indexed again when volumes change."""
        catalog = cluster.catalog
        version = catalog.version(VOLUME)
        seen_catalog, seen_version, index = self._by_class
        if seen_catalog is not catalog or seen_version != version:
            index = {}
            for _, _, volume in catalog.items(VOLUME):
                index.setdefault(volume.storage_class, []).append(volume)
            self._by_class = (catalog, version, index)
        return index.get(storage_class, [])

    # ----------------------------------------------------------------- filter

    batch_reach: ClassVar[str] = BATCH_NONE  # (signs only pods it does not constrain)

    def sign(self, pod: PodInfo, cluster: ClusterState) -> object:
        """Only a pod without volumes, which it does not constrain: the volumes' state (claims,
        volumes, attachments) moves with every such pod placed."""
        return None if not pod.volumes.any else UNSIGNABLE

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | None:
        if not pod.volumes.claims:
            return None
        return self._plan(pod, cluster).pod_reason

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        if not pod.volumes.claims:
            return None
        codes = self._plan(pod, cluster).codes
        return None if codes is None else codes == 0

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        counts: Counter[str] = Counter()
        codes = self._plan(pod, cluster).codes
        if codes is not None:
            for bit, reason in REASON_BITS:
                number = int(np.count_nonzero(codes[rejected] & bit))
                if number:
                    counts[reason] = number
        return counts

    # ----------------------------------------------------------------- reserve

    def reserve(self, pod: PodInfo, cluster: ClusterState, node: str) -> VolumeBindings | None:
        """Assume, in the catalog, the volumes chosen on `node` bound to their claims and the claims
        to provision annotated with it (kube's AssumePodVolumes)."""
        if not pod.volumes.claims:
            return None
        plan = self._plan(pod, cluster)
        slot = cluster.index.get(node)
        if not plan.to_bind or slot is None:
            return None
        catalog = cluster.catalog
        static: list[tuple[ClaimInfo, VolumeInfo]] = []
        dynamic: list[ClaimInfo] = []
        for claim, choice in plan.choices:
            vid = int(choice[slot])
            if vid < 0:
                dynamic.append(claim)
                continue
            volume = plan.volumes[vid]
            if not volume.bound_to(claim) or not volume.claim or not volume.claim[2]:
                volume = dataclasses.replace(volume, claim=(claim.namespace, claim.name, claim.uid))
                catalog.assume(VOLUME, "", volume.name, volume)
            static.append((claim, volume))
        for claim in plan.provision:
            dynamic.append(claim)  # already annotated for this node
        assumed = []
        for claim in dynamic:
            if claim.selected_node != node:
                claim = dataclasses.replace(claim, selected_node=node)
                catalog.assume(CLAIM, claim.namespace, claim.name, claim)
            assumed.append(claim)
        return VolumeBindings(node, tuple(static), tuple(assumed))

    def unreserve(self, pod: PodInfo, cluster: ClusterState, reservation: VolumeBindings) -> None:
        catalog = cluster.catalog
        for _, volume in reservation.static:
            catalog.restore(VOLUME, "", volume.name)
        for claim in reservation.dynamic:
            catalog.restore(CLAIM, claim.namespace, claim.name)

    # ----------------------------------------------------------------- prebind

    def pre_bind(self, pod: PodInfo, cluster: ClusterState, node: str, reservation: Any) -> PreBind | None:
        """The claimRef and selected-node writes of what `reserve` held, then the wait until every
        claim is fully bound (kube's BindPodVolumes)."""
        if not isinstance(reservation, VolumeBindings) or not (reservation.static or reservation.dynamic):
            return None
        catalog = cluster.catalog
        writes: list[Write] = []
        for claim, volume in reservation.static:
            api: VolumeInfo | None = catalog.server_copy(VOLUME, volume.name)
            if api is not None and claim.uid and api.claim == (claim.namespace, claim.name, claim.uid):
                continue  # bound to the claim already: kube's Update would change nothing
            patch: dict[str, Any] = {"spec": {"claimRef": claim_reference(claim)}}
            if api is None or not api.bound_to(claim):
                patch["metadata"] = {"annotations": {BOUND_BY_CONTROLLER: "yes"}}
            writes.append(Write(
                volume_ref(volume.name), patch, resource_version=volume.resource_version,
                landed=functools.partial(_volume_bound_to, claim),
            ))
        for claim in reservation.dynamic:
            api_claim: ClaimInfo | None = catalog.server_copy(CLAIM, claim.name, claim.namespace)
            if api_claim is not None and api_claim.selected_node == node:
                continue  # annotated for this node already (by an earlier attempt, or by hand)
            writes.append(Write(
                claim_ref(claim), {"metadata": {"annotations": {SELECTED_NODE: node}}},
                resource_version=claim.resource_version,
                landed=functools.partial(_selects, node), undo=functools.partial(_unselect, claim, node),
            ))
        check = functools.partial(_check, reservation)
        return PreBind(tuple(writes), WaitFor(check, BIND_WAKE, timeout_message=f"binding volumes: {TIMED_OUT}"))


def volume_ref(name: str) -> ObjectRef:
    return ObjectRef("v1", VOLUME, "persistentvolumes", name)


def claim_ref(claim: ClaimInfo) -> ObjectRef:
    return ObjectRef("v1", CLAIM, "persistentvolumeclaims", claim.name, claim.namespace)


def claim_reference(claim: ClaimInfo) -> dict[str, Any]:
    """The claimRef kube writes (`reference.GetReference` of the claim); `fieldPath: null` so that a
    merge patch replaces a user's pre-binding reference rather than merging into it."""
    ref: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": claim.namespace,
        "name": claim.name,
    }
    if claim.uid:  # (every claim the API server holds has one)
        ref["uid"] = claim.uid
    if claim.resource_version:
        ref["resourceVersion"] = claim.resource_version
    ref["fieldPath"] = None
    return ref


def _section(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name)
    return value if isinstance(value, Mapping) else {}


def _volume_bound_to(claim: ClaimInfo, raw: Mapping[str, Any]) -> bool:
    """Whether the PV (as the API server holds it) is bound to the claim already."""
    ref = _section(_section(raw, "spec"), "claimRef")
    return bool(claim.uid) and (ref.get("namespace"), ref.get("name"), ref.get("uid")) == (
        claim.namespace, claim.name, claim.uid)


def _selects(node: str, raw: Mapping[str, Any]) -> bool:
    """Whether the claim (as the API server holds it) is annotated for `node` already."""
    return _section(_section(raw, "metadata"), "annotations").get(SELECTED_NODE) == node


def _unselect(claim: ClaimInfo, node: str, raw: Mapping[str, Any]) -> Write | None:
    """Undo of the selected-node annotation: only while the claim still carries it for `node` and
    is not bound (else it is not ours any more, or there is nothing to undo)."""
    if not _selects(node, raw) or _section(raw, "spec").get("volumeName"):
        return None
    return Write(claim_ref(claim), {"metadata": {"annotations": {SELECTED_NODE: None}}})


def _older(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is older than `than` (only when both are numbers)."""
    return bool(than) and version.isdigit() and than.isdigit() and int(version) < int(than)


def _check(bindings: VolumeBindings, cluster: ClusterState, written: Mapping[ObjectRef, str]) -> bool:
    """kube's `checkBindings`: True when every claim is fully bound, False while waiting;
    PreBindError when it cannot be any more."""
    catalog = cluster.catalog
    node = bindings.node
    slot = cluster.index.get(node)
    if slot is None or cluster.node(node) is None:
        raise PreBindError(f'binding volumes: failed to get node "{node}": node "{node}" not found')
    for claim, volume in bindings.static:
        pv: VolumeInfo | None = catalog.server_copy(VOLUME, volume.name)
        if pv is None:
            raise PreBindError(
                f'binding volumes: failed to check binding: could not find v1.PersistentVolume "{volume.name}"')
        pvc: ClaimInfo | None = catalog.server_copy(CLAIM, claim.name, claim.namespace)
        if pvc is None:
            raise PreBindError(
                f'binding volumes: failed to check binding: could not find v1.PersistentVolumeClaim "{claim.key}"')
        if _older(pv.resource_version, written.get(volume_ref(volume.name), "")):
            return False  # our write has not come back through the watch yet
        _check_affinity(cluster, pv, node, slot)
        if pv.claim is None or not pv.claim[2]:
            raise PreBindError(f'binding volumes: ClaimRef got reset for pv "{pv.name}"')
        if not pvc.fully_bound:
            return False
    for claim in bindings.dynamic:
        pvc = catalog.server_copy(CLAIM, claim.name, claim.namespace)
        if pvc is None:
            raise PreBindError(
                'binding volumes: failed to check provisioning pvc: could not find '
                f'v1.PersistentVolumeClaim "{claim.key}"')
        if _older(pvc.resource_version, written.get(claim_ref(claim), "")):
            return False
        if pvc.selected_node != node:  # a provisioner that gives up removes it, for a retry
            raise PreBindError(f'binding volumes: provisioning failed for PVC "{pvc.name}"')
        if pvc.volume_name:
            pv = catalog.server_copy(VOLUME, pvc.volume_name)
            if pv is None:
                return False  # not seen yet (or deleted: the claim is unbound then)
            _check_affinity(cluster, pv, node, slot)
        if not pvc.fully_bound:
            return False
    return True


def _check_affinity(cluster: ClusterState, pv: VolumeInfo, node: str, slot: int) -> None:
    """kube's `CheckNodeAffinity`: a node of labels only, so `matchFields` are ignored (a term of
    them alone admits every node), as the filter does."""
    terms = pv.node_affinity
    if terms is None:
        return
    for term in terms:
        if term.expressions:
            if term_mask(cluster, NodeSelectorTerm(term.expressions, ()))[slot]:
                return
        elif term.fields:
            return
    raise PreBindError(f'binding volumes: pv "{pv.name}" node affinity doesn\'t match node "{node}": '
                       "no matching NodeSelectorTerms")
