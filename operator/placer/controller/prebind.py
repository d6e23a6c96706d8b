"""A pod's volumes bound before the pod itself: kube-scheduler's VolumeBinding PreBind
(`BindPodVolumes`), run by the operator between the decision and the binding.

VolumeBinding's Reserve assumed in the catalog each volume it chose bound to its claim, and each
claim to provision annotated with the node; the `VolumeBindings` it returned are written here:

- a static binding: the PV's `spec.claimRef` names the claim (apiVersion, kind, namespace, name,
  uid, resourceVersion, as kube's `GetBindVolumeToClaim`), with `pv.kubernetes.io/bound-by-controller`
  when the PV was not pre-bound to it. A JSON merge patch carrying the resourceVersion the decision
  saw as a precondition: kube Updates the PV it has cached, the same optimistic concurrency in one
  call (a PV that changed since, e.g. taken by another scheduler, is a 409, never given twice);
- a dynamic one: the claim's `volume.kubernetes.io/selected-node: NODE` annotation (merge patch,
  same precondition), which the external provisioner acts on.

Nothing is written when the API server's copy already says so. A 409 whose object already carries
what was written (a retried write whose first attempt landed) counts as written.

Then every claim must be *fully bound* (`spec.volumeName` and `pv.kubernetes.io/bind-completed`,
written by the PV controller), checked as kube's `checkBindings` against the API server's copies the
watches feed (`Catalog.server_copy`), never by polling the API server: the check runs whenever a
claim, volume, the pod or its node changes (`SchedulerState.volumes_changed`), and once a second. It
fails at once when a provisioner gave up (it removes the annotation: `provisioning failed for PVC
"NAME"`), a PV's claimRef was reset, a volume does not admit the node, or the node is gone; and
after `Options.volume_bind_timeout` (kube's `bindTimeoutSeconds`, 600 s): `timed out waiting for
the condition`.

When it fails, the annotations this attempt set are removed again if the claim still carries them
for this node and is not bound yet: the pod goes back to the queue and may be placed elsewhere
(kube leaves the annotation, pinning the claim, and so the pod, to that node). A PV's claimRef
stays, as in kube: the PV controller completes that binding whatever becomes of the pod, and the
claim, bound, then sends the pod where the volume is.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placer.controller.kube import ApiError, Reply
from placer.engine.objects import NodeSelectorTerm, PodInfo
from placer.engine.storage import SELECTED_NODE, ClaimInfo, VolumeBindings, VolumeInfo
from placer.plugins._selectors import term_mask

if TYPE_CHECKING:
    from placer.controller.state import SchedulerState

__all__ = [
    "BOUND_BY_CONTROLLER",
    "PLUGIN",
    "RECHECK",
    "TIMED_OUT",
    "VolumeBinder",
    "VolumeOutcome",
    "VolumeResult",
    "claim_reference",
]

logger = logging.getLogger("placer.volumes")

PLUGIN = "VolumeBinding"
CLAIM = "PersistentVolumeClaim"
VOLUME = "PersistentVolume"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
TIMED_OUT = "timed out waiting for the condition"  # kube's wait.ErrWaitTimeout
RECHECK = 1.0  # seconds: the longest a wait goes without looking (kube polls its cache every second)
CLEANUP_ATTEMPTS = 3


class VolumeResult(enum.Enum):
    BOUND = "bound"  # every claim is fully bound: the pod may be bound
    FAILED = "failed"  # a write was rejected, or a check failed (a provisioner gave up, ...)
    TIMEOUT = "timeout"  # not bound within `volume_bind_timeout`
    GONE = "gone"  # the pod was deleted, or bound by someone else, meanwhile
    ABANDONED = "abandoned"  # leadership lost, or the operator is stopping


@dataclass(frozen=True, slots=True)
class VolumeOutcome:
    result: VolumeResult
    message: str = ""  # the FailedScheduling note (kube's wording) or why it was dropped
    answered: bool = True  # False: a write got no HTTP answer at all (server unreachable)


class _CheckFailed(Exception):
    """A condition that makes the binding fail now (kube's checkBindings error)."""


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


def _older(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is older than `than` (only when both are numbers)."""
    return bool(than) and version.isdigit() and than.isdigit() and int(version) < int(than)


def _version(reply: Reply) -> str:
    try:
        body = reply.json()
    except ValueError:
        return ""
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def _prebind_error(message: str) -> str:
    """How kube reports a PreBind failure (its framework wraps the plugin's error)."""
    return f'running PreBind plugin "{PLUGIN}": {message}'


class VolumeBinder:
    """Writes and waits for the volume bindings of one pod at a time (many pods side by side)."""

    def __init__(self, state: SchedulerState, stopping: asyncio.Event) -> None:
        self.state = state
        self.stopping = stopping

    async def bind(self, pod: PodInfo, bindings: VolumeBindings) -> VolumeOutcome:
        """Write the bindings, wait until every claim is fully bound; on any other outcome, remove
        the selected-node annotations this attempt set. Cancelling it writes nothing more."""
        annotated: list[ClaimInfo] = []
        written: dict[tuple[str, str], str] = {}  # (kind, key) -> the resourceVersion our write made
        outcome = await self._write(pod, bindings, annotated, written)
        if outcome is None:
            outcome = await self._wait(pod, bindings, written)
        if outcome.result is not VolumeResult.BOUND and annotated:
            await self._unannotate(pod, annotated, bindings.node)
        return outcome

    def _abandoned(self) -> VolumeOutcome | None:
        if self.stopping.is_set():
            return VolumeOutcome(VolumeResult.ABANDONED, "the operator is stopping")
        if not self.state.is_leader():
            return VolumeOutcome(VolumeResult.ABANDONED, "not the leader any more")
        return None

    # ----------------------------------------------------------------- the writes (bindAPIUpdate)

    async def _write(
        self, pod: PodInfo, bindings: VolumeBindings, annotated: list[ClaimInfo], written: dict[tuple[str, str], str]
    ) -> VolumeOutcome | None:
        """None when everything was written; else why not."""
        feed = self.state.catalog
        for claim, volume in bindings.static:
            api: VolumeInfo | None = feed.catalog.server_copy(VOLUME, volume.name)
            if api is not None and claim.uid and api.claim == (claim.namespace, claim.name, claim.uid):
                continue  # bound to the claim already: kube's Update would change nothing
            patch: dict[str, Any] = {"spec": {"claimRef": claim_reference(claim)}}
            meta: dict[str, Any] = {}
            if volume.resource_version:
                meta["resourceVersion"] = volume.resource_version
            if api is None or not api.bound_to(claim):
                meta["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
            if meta:
                patch["metadata"] = meta
            failure = await self._send(
                pod, lambda p=patch, n=volume.name: self.kube.patch_volume(n, p),
                lambda n=volume.name, c=claim: self._volume_bound_to(n, c), written, (VOLUME, volume.name),
            )
            if failure is not None:
                return failure
            logger.debug("volume %s bound to claim %s for pod %s", volume.name, claim.key, pod.key)
        for claim in bindings.dynamic:
            api_claim: ClaimInfo | None = feed.catalog.server_copy(CLAIM, claim.name, claim.namespace)
            if api_claim is not None and api_claim.selected_node == bindings.node:
                continue  # annotated for this node already (by an earlier attempt, or by hand)
            meta = {"annotations": {SELECTED_NODE: bindings.node}}
            if claim.resource_version:
                meta["resourceVersion"] = claim.resource_version
            failure = await self._send(
                pod, lambda p={"metadata": meta}, c=claim: self.kube.patch_claim(c.namespace, c.name, p),
                lambda c=claim: self._claim_selects(c, bindings.node), written, (CLAIM, claim.key),
            )
            if failure is not None:
                return failure
            annotated.append(claim)
            logger.debug("claim %s to be provisioned on %s for pod %s", claim.key, bindings.node, pod.key)
        return None

    @property
    def kube(self) -> Any:
        assert self.state.kube is not None
        return self.state.kube

    async def _send(
        self,
        pod: PodInfo,
        write: Callable[[], Awaitable[Reply]],
        landed: Callable[[], Awaitable[str | None]],
        written: dict[tuple[str, str], str],
        slot: tuple[str, str],
    ) -> VolumeOutcome | None:
        """One write; on a 409, `landed` says whether the object holds what we wrote already (our own
        retried write landed): its resourceVersion, else None."""
        abandoned = self._abandoned()
        if abandoned is not None:
            return abandoned
        try:
            reply: Reply = await write()
            if reply.ok:
                written[slot] = _version(reply)
                return None
            if reply.status == 409:  # changed since the decision, or our own retried write landed
                version = await landed()
                if version is not None:
                    written[slot] = version
                    return None
        except ApiError as error:  # no HTTP answer at all
            self.state.metrics.api_errors.inc(call="patch_" + slot[0].lower())
            return VolumeOutcome(VolumeResult.FAILED, _prebind_error(error.message), answered=False)
        self.state.metrics.api_errors.inc(call="patch_" + slot[0].lower())
        logger.info("binding the volumes of %s: %s %s: HTTP %d %s", pod.key, slot[0], slot[1], reply.status,
                    reply.message())
        return VolumeOutcome(VolumeResult.FAILED, _prebind_error(reply.message()))

    async def _volume_bound_to(self, name: str, claim: ClaimInfo) -> str | None:
        """The resourceVersion of the PV if it is bound to the claim already, else None."""
        reply = await self.kube.get_volume(name)
        raw = reply.json() if reply.ok else None
        spec = raw.get("spec") if isinstance(raw, Mapping) else None
        ref = spec.get("claimRef") if isinstance(spec, Mapping) else None
        if isinstance(ref, Mapping) and claim.uid and (ref.get("namespace"), ref.get("name"), ref.get("uid")) == (
            claim.namespace, claim.name, claim.uid
        ):
            return _version(reply)
        return None

    async def _claim_selects(self, claim: ClaimInfo, node: str) -> str | None:
        """The resourceVersion of the claim if it is annotated for `node` already, else None."""
        reply = await self.kube.get_claim(claim.namespace, claim.name)
        raw = reply.json() if reply.ok else None
        meta = raw.get("metadata") if isinstance(raw, Mapping) else None
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        if isinstance(annotations, Mapping) and annotations.get(SELECTED_NODE) == node:
            return _version(reply)
        return None

    # ----------------------------------------------------------------- the wait (checkBindings)

    async def _wait(
        self, pod: PodInfo, bindings: VolumeBindings, written: dict[tuple[str, str], str]
    ) -> VolumeOutcome:
        state = self.state
        loop = asyncio.get_running_loop()
        deadline = loop.time() + state.options.volume_bind_timeout
        while True:
            abandoned = self._abandoned()
            if abandoned is not None:
                return abandoned
            gone = self._pod_gone(pod)
            if gone is not None:
                return VolumeOutcome(VolumeResult.GONE, gone)
            try:
                if self._check(bindings, written):
                    return VolumeOutcome(VolumeResult.BOUND)
            except _CheckFailed as error:
                return VolumeOutcome(VolumeResult.FAILED, _prebind_error(f"binding volumes: {error}"))
            remaining = deadline - loop.time()
            if remaining <= 0:
                return VolumeOutcome(VolumeResult.TIMEOUT, _prebind_error(f"binding volumes: {TIMED_OUT}"))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(RECHECK, remaining)):
                    await state.volumes_changed.wait()

    def _pod_gone(self, pod: PodInfo) -> str | None:
        record = self.state.cluster.pods.get(pod.key)
        if record is None or (pod.uid and record.pod.uid and record.pod.uid != pod.uid):
            return f'pod does not exist any more: pods "{pod.name}" not found'
        if not record.assumed:
            return f"pod was bound to {record.node} meanwhile"
        return None

    def _check(self, bindings: VolumeBindings, written: dict[tuple[str, str], str]) -> bool:
        """True when every claim is fully bound; False while waiting; _CheckFailed when it cannot be."""
        cluster, feed = self.state.cluster, self.state.catalog
        node = bindings.node
        slot = cluster.index.get(node)
        if slot is None or cluster.node(node) is None:
            raise _CheckFailed(f'failed to get node "{node}": node "{node}" not found')
        for claim, volume in bindings.static:
            pv: VolumeInfo | None = feed.catalog.server_copy(VOLUME, volume.name)
            if pv is None:
                raise _CheckFailed(f'failed to check binding: could not find v1.PersistentVolume "{volume.name}"')
            pvc: ClaimInfo | None = feed.catalog.server_copy(CLAIM, claim.name, claim.namespace)
            if pvc is None:
                raise _CheckFailed(f'failed to check binding: could not find v1.PersistentVolumeClaim "{claim.key}"')
            if _older(pv.resource_version, written.get((VOLUME, volume.name), "")):
                return False  # our write has not come back through the watch yet
            self._check_affinity(pv, node, slot)
            if pv.claim is None or not pv.claim[2]:
                raise _CheckFailed(f'ClaimRef got reset for pv "{pv.name}"')
            if not pvc.fully_bound:
                return False
        for claim in bindings.dynamic:
            pvc = feed.catalog.server_copy(CLAIM, claim.name, claim.namespace)
            if pvc is None:
                raise _CheckFailed(
                    f'failed to check provisioning pvc: could not find v1.PersistentVolumeClaim "{claim.key}"')
            if _older(pvc.resource_version, written.get((CLAIM, claim.key), "")):
                return False
            if pvc.selected_node != node:  # a provisioner that gives up removes it, for a retry
                raise _CheckFailed(f'provisioning failed for PVC "{pvc.name}"')
            if pvc.volume_name:
                pv = feed.catalog.server_copy(VOLUME, pvc.volume_name)
                if pv is None:
                    return False  # not seen yet (or deleted: the claim is unbound then)
                self._check_affinity(pv, node, slot)
            if not pvc.fully_bound:
                return False
        return True

    def _check_affinity(self, pv: VolumeInfo, node: str, slot: int) -> None:
        """kube's `CheckNodeAffinity`: a node of labels only, so `matchFields` are ignored (a term of
        them alone admits every node), as VolumeBinding's filter does."""
        terms = pv.node_affinity
        if terms is None:
            return
        cluster = self.state.cluster
        for term in terms:
            if term.expressions:
                if term_mask(cluster, NodeSelectorTerm(term.expressions, ()))[slot]:
                    return
            elif term.fields:
                return
        raise _CheckFailed(f'pv "{pv.name}" node affinity doesn\'t match node "{node}": '
                           "no matching NodeSelectorTerms")

    # ----------------------------------------------------------------- undoing the annotations

    async def _unannotate(self, pod: PodInfo, claims: list[ClaimInfo], node: str) -> None:
        """Remove the selected-node annotations this attempt set, from the claims that still carry
        them for `node` and are not bound yet (each GET, then a merge patch with its resourceVersion:
        a claim the provisioner is writing meanwhile is read again)."""
        for claim in claims:
            for _ in range(CLEANUP_ATTEMPTS):
                try:
                    reply = await self.kube.get_claim(claim.namespace, claim.name, retries=1)
                    if not reply.ok:
                        break  # 404: gone; anything else: leave it
                    raw = reply.json() or {}
                    meta = raw.get("metadata") or {}
                    annotations = meta.get("annotations") or {}
                    if annotations.get(SELECTED_NODE) != node or (raw.get("spec") or {}).get("volumeName"):
                        break  # not ours any more, or bound: nothing to undo
                    patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                          "annotations": {SELECTED_NODE: None}}}
                    reply = await self.kube.patch_claim(claim.namespace, claim.name, patch, retries=1)
                except ApiError as error:
                    logger.warning("claim %s keeps %s=%s (pod %s): %s", claim.key, SELECTED_NODE, node, pod.key,
                                   error)
                    break
                if reply.ok:
                    logger.info("claim %s: %s=%s removed (the volumes of pod %s were not bound)", claim.key,
                                SELECTED_NODE, node, pod.key)
                    break
                if reply.status != 409:
                    self.state.metrics.api_errors.inc(call="patch_persistentvolumeclaim")
                    logger.warning("claim %s keeps %s=%s (pod %s): HTTP %d %s", claim.key, SELECTED_NODE, node,
                                   pod.key, reply.status, reply.message())
                    break
