"""A pod's `spec.resourceClaims` (Dynamic Resource Allocation), parsed once with the pod.

Each entry names a ResourceClaim directly (`resourceClaimName`) or a ResourceClaimTemplate
(`resourceClaimTemplateName`) from which the resourceclaim controller creates a claim for the pod
and records its name in `status.resourceClaimStatuses` (kube's `resourceclaim.Name`). The claims
themselves are catalog objects (`placer.engine.devices`); the DynamicResources plugin resolves
them. Most pods have none: they share `NO_CLAIMS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placer.engine.fields import FieldError, mapping, sequence
from placer.engine.volumes import required_string

__all__ = ["NO_CLAIMS", "PodClaim", "parse_pod_claims"]


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One `spec.resourceClaims` entry, with what `status.resourceClaimStatuses` says of it."""

    name: str
    claim_name: str | None = None  # resourceClaimName
    template_name: str | None = None  # resourceClaimTemplateName
    recorded: bool = False  # a status entry exists for it (template entries only)
    generated: str | None = None  # the status entry's resourceClaimName (None: no claim needed)


NO_CLAIMS: tuple[PodClaim, ...] = ()


def _optional_name(item: Mapping[str, Any], key: str, path: str) -> str | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise FieldError(f"{path}.{key}", f"must be a non-empty string, not {value!r}")
    return value


def parse_pod_claims(raw: Any, statuses: Any) -> tuple[PodClaim, ...]:
    """`spec.resourceClaims` with `status.resourceClaimStatuses`; FieldError names a malformed entry."""
    recorded: dict[str, str | None] = {}
    for i, entry in enumerate(sequence(statuses, "status.resourceClaimStatuses")):
        path = f"status.resourceClaimStatuses[{i}]"
        item = mapping(entry, path)
        name = required_string(item, "name", path)
        recorded[name] = _optional_name(item, "resourceClaimName", path)
    claims: list[PodClaim] = []
    for i, entry in enumerate(sequence(raw, "spec.resourceClaims")):
        path = f"spec.resourceClaims[{i}]"
        item = mapping(entry, path)
        name = required_string(item, "name", path)
        claims.append(
            PodClaim(
                name=name,
                claim_name=_optional_name(item, "resourceClaimName", path),
                template_name=_optional_name(item, "resourceClaimTemplateName", path),
                recorded=name in recorded,
                generated=recorded.get(name),
            )
        )
    return tuple(claims) if claims else NO_CLAIMS
