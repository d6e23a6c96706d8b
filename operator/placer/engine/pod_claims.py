"""A pod's `spec.resourceClaims` (Dynamic Resource Allocation), parsed once with the pod.

Each entry names a ResourceClaim directly (`resourceClaimName`) or a ResourceClaimTemplate
(`resourceClaimTemplateName`) from which the resourceclaim controller creates a claim for the pod
and records its name in `status.resourceClaimStatuses` (kube's `resourceclaim.Name`). The claims
themselves are catalog objects (`placer.engine.devices`); the DynamicResources plugin resolves
them. Most pods have none: they share `NO_CLAIMS`.

A PodGroup's `spec.resourceClaims` (kube v1.36, the DRAWorkloadResourceClaims gate) has the same
shape, with `status.resourceClaimStatuses` on the PodGroup (`parse_group_claims`): a member's entry
that matches one of them exactly — same name, same `resourceClaimName` or
`resourceClaimTemplateName` (`PodClaim.same_reference`, kube's `resourceclaim.BindTo`) — uses the
group's claim, reserved for the PodGroup rather than for the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placer.engine.fields import FieldError, mapping, sequence
from placer.engine.volumes import required_string

__all__ = ["MAX_GROUP_CLAIMS", "NO_CLAIMS", "PodClaim", "parse_group_claims", "parse_pod_claims"]


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One `spec.resourceClaims` entry, with what `status.resourceClaimStatuses` says of it."""

    name: str
    claim_name: str | None = None  # resourceClaimName
    template_name: str | None = None  # resourceClaimTemplateName
    recorded: bool = False  # a status entry exists for it (template entries only)
    generated: str | None = None  # the status entry's resourceClaimName (None: no claim needed)

    def same_reference(self, other: PodClaim) -> bool:
        """kube's `BindTo` match: a pod's entry refers to a PodGroup's claim when the name and the
        claim or template it names are the same."""
        return (self.name == other.name and self.claim_name == other.claim_name
                and self.template_name == other.template_name)


NO_CLAIMS: tuple[PodClaim, ...] = ()
#: kube's `MaxPodGroupResourceClaims` (`+k8s:maxItems=4` on a PodGroup's spec.resourceClaims)
MAX_GROUP_CLAIMS = 4


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


def parse_group_claims(raw: Any, statuses: Any) -> tuple[PodClaim, ...]:
    """A PodGroup's `spec.resourceClaims` with its `status.resourceClaimStatuses`, validated as the
    API server does (at most 4 entries, unique names, exactly one of `resourceClaimName` and
    `resourceClaimTemplateName`); FieldError names the field."""
    claims = parse_pod_claims(raw, statuses)
    if len(claims) > MAX_GROUP_CLAIMS:
        raise FieldError("spec.resourceClaims", f"Too many: {len(claims)}: must have at most {MAX_GROUP_CLAIMS} items")
    seen: set[str] = set()
    for i, claim in enumerate(claims):
        path = f"spec.resourceClaims[{i}]"
        if claim.name in seen:
            raise FieldError(f"{path}.name", f'Duplicate value: "{claim.name}"')
        seen.add(claim.name)
        if claim.claim_name is None and claim.template_name is None:
            raise FieldError(path, 'Invalid value: "": must specify one of: `resourceClaimName`, '
                                   "`resourceClaimTemplateName`")
        if claim.claim_name is not None and claim.template_name is not None:
            raise FieldError(path, 'Invalid value: "{resourceClaimName, resourceClaimTemplateName}": must '
                                   "specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`")
    return claims
