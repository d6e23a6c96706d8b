"""The writes a plugin asks the operator to make (kube's PreBind and preemption calls): pure data.

Kept apart from `placer.engine.framework` (which re-exports every name here, the plugins' one
import) so that the API client (`placer.controller.transport.client`) needs no numpy or pydantic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JSON_PATCH", "MERGE_PATCH", "STRATEGIC_MERGE_PATCH", "ObjectRef", "Write"]

MERGE_PATCH = "merge"  # application/merge-patch+json (RFC 7386)
JSON_PATCH = "json"  # application/json-patch+json (RFC 6902)
STRATEGIC_MERGE_PATCH = "strategic"  # built-in kinds only


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """An API object of any kind: group/version, kind and resource (plural), namespace, name."""

    api_version: str  # "v1", "resource.k8s.io/v1"
    kind: str  # "PersistentVolumeClaim"
    resource: str  # "persistentvolumeclaims"
    name: str
    namespace: str = ""  # "" for a cluster-scoped kind

    def path(self, subresource: str = "") -> str:
        base = f"/apis/{self.api_version}" if "/" in self.api_version else f"/api/{self.api_version}"
        scope = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{base}{scope}/{self.resource}/{self.name}" + (f"/{subresource}" if subresource else "")

    def collection_path(self) -> str:
        """Where a POST creates an object of this kind (in this namespace)."""
        return self.path().rsplit("/", 1)[0]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class Write:
    """One change to an API object, for the operator to make (a PATCH, a DELETE or a POST): the data of
    kube's PreBind and preemption calls, with their preconditions."""

    target: ObjectRef
    #: a merge patch (mapping), a JSON patch (list of operations) or a strategic merge patch
    patch: Any = None
    patch_type: str = MERGE_PATCH
    subresource: str = ""  # "status": the status subresource
    #: preconditions: the object must still be at this resourceVersion (a 409 if it changed since),
    #: and be this incarnation (UID: a re-created object of that name is never written)
    resource_version: str = ""
    uid: str = ""
    delete: bool = False  # a DELETE (the UID its precondition) rather than a PATCH
    create: bool = False  # a POST of `patch` (the whole object) to the target's collection
    #: on a 409, whether the object (as a GET returns it) already holds what this write makes (an
    #: earlier attempt of ours landed): then it counts as written
    landed: Callable[[Mapping[str, Any]], bool] | None = None
    #: when the binding fails after this write landed: given the object as a GET returns it, the
    #: write that undoes it (None: nothing to undo); sent with that GET's resourceVersion as its
    #: precondition, read again and retried on a 409
    undo: Callable[[Mapping[str, Any]], Write | None] | None = None
    #: on a 409 that did not land (the object changed meanwhile): given the object as a GET returns
    #: it, the same change made again on it, or None to give up — kube's `retry.RetryOnConflict`
    #: for a benign concurrent change, such as another pod joining a shared claim's `reservedFor`
    #: (without it, the binding fails and the pod goes round a scheduling cycle again)
    rebase: Callable[[Mapping[str, Any]], Write | None] | None = None
    #: HTTP statuses that are an answer, not an error (e.g. 404: the object is gone already)
    tolerate: frozenset[int] = frozenset()
    retries: int | None = None  # the client's default when None

    def body(self) -> Any:
        """The request body: the patch with the preconditions in it (a merge patch's
        `metadata.resourceVersion`/`uid`, a JSON patch's `test` operations), or DeleteOptions."""
        if self.create:
            return self.patch
        if self.delete:
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
            conditions = {k: v for k, v in (("uid", self.uid), ("resourceVersion", self.resource_version)) if v}
            if conditions:
                body["preconditions"] = conditions
            return body
        if self.patch_type == JSON_PATCH:  # (a `replace` of the resourceVersion: a 409 when it moved)
            checks = [{"op": "test", "path": "/metadata/uid", "value": self.uid}] if self.uid else []
            if self.resource_version:
                checks.append({"op": "replace", "path": "/metadata/resourceVersion", "value": self.resource_version})
            return [*checks, *(self.patch or [])]
        if not (self.resource_version or self.uid):
            return self.patch
        patch = dict(self.patch or {})
        meta = dict(patch.get("metadata") or {})
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        if self.uid:
            meta["uid"] = self.uid
        patch["metadata"] = meta
        return patch

    @property
    def call(self) -> str:
        """The name the operator's `placer_api_errors_total{call}` gives it (`patch_pod_status`)."""
        verb = "delete" if self.delete else "create" if self.create else "patch"
        return f"{verb}_{self.target.kind.lower()}" + (f"_{self.subresource}" if self.subresource else "")
