"""A pod's relations to other pods, parsed once: inter-pod (anti-)affinity terms and topology spread
constraints, as kube-scheduler's `framework.PodInfo` and the PodTopologySpread plugin prepare them.

- An affinity term's namespaces are those it lists, or the pod's own when it lists none and has
  no `namespaceSelector` (kube's `getNamespacesFromPodAffinityTerm`); a `namespaceSelector` is
  kept to be evaluated against Namespace labels when the term is matched.
- `matchLabelKeys` / `mismatchLabelKeys` join the term's selector as `key in (v)` / `key notin (v)`
  with the pod's own label values, as the API server does at admission (doing it again is harmless:
  a selector is a set of requirements).
- A spread constraint's `matchLabelKeys` join its selector the same way; `minDomains` defaults to 1,
  `nodeAffinityPolicy` to Honor, `nodeTaintsPolicy` to Ignore.

Terms and constraints are frozen and hashable: the replicas of one workload carry equal values,
so indexes and caches keyed on them are shared by the whole workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from placer.engine.fields import FieldError, mapping, sequence
from placer.engine.labels import (
    LabelSelector,
    Requirement,
    parse_label_selector,
    validate_label_key,
)

__all__ = [
    "AffinityTerm",
    "ControllerRef",
    "PodRelations",
    "SpreadConstraint",
    "parse_controller",
    "parse_pod_affinity",
    "parse_spread_constraints",
]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """kube's `framework.AffinityTerm`: which pods (namespaces, selector) in which topology."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None  # None: not set (kube's labels.Nothing())
    topology_key: str
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # kept: a term is a key of the per-node term counts, looked up several times a pod
        value = self._hash
        if not value:
            value = hash((self.selector, self.namespaces, self.namespace_selector, self.topology_key))
            object.__setattr__(self, "_hash", value)
        return value

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        """kube's `AffinityTerm.Matches`: the pod's namespace is listed or selected, and its labels match."""
        if namespace in self.namespaces or (
            self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels)
        ):
            return self.selector.matches(labels)
        return False


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


@dataclass(frozen=True, slots=True)
class ControllerRef:
    """The pod's controlling owner (`ownerReferences[].controller: true`)."""

    api_version: str
    kind: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PodRelations:
    """Everything of a pod's spec that ties it to other pods; `NONE` for the many pods without any."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    preferred_anti_affinity: tuple[tuple[int, AffinityTerm], ...] = ()

    @property
    def any(self) -> bool:
        return bool(
            self.required_affinity or self.required_anti_affinity or self.preferred_affinity
            or self.preferred_anti_affinity
        )


NONE = PodRelations()



def _label_keys(raw: Any, path: str) -> tuple[str, ...]:
    return tuple(validate_label_key(key, f"{path}[{i}]") for i, key in enumerate(sequence(raw, path)))


def _key_requirements(keys: tuple[str, ...], operator: str, labels: Mapping[str, str]) -> list[Requirement]:
    return [Requirement(key, operator, frozenset((labels[key],))) for key in keys if key in labels]


def _term(raw: Any, path: str, namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    item = mapping(raw, path)
    topology_key = item.get("topologyKey")
    if not isinstance(topology_key, str) or not topology_key:
        raise FieldError(f"{path}.topologyKey", "Required value: can not be empty")
    validate_label_key(topology_key, f"{path}.topologyKey")
    selector = parse_label_selector(item.get("labelSelector"), f"{path}.labelSelector")
    match_keys = _label_keys(item.get("matchLabelKeys"), f"{path}.matchLabelKeys")
    mismatch_keys = _label_keys(item.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")
    both = set(match_keys) & set(mismatch_keys)
    if both:
        raise FieldError(
            f"{path}.matchLabelKeys", f'Invalid value: "{sorted(both)[0]}": exists in both matchLabelKeys and '
            "mismatchLabelKeys"
        )
    selector = selector.merged(
        _key_requirements(match_keys, "In", labels) + _key_requirements(mismatch_keys, "NotIn", labels)
    )
    names = tuple(sequence(item.get("namespaces"), f"{path}.namespaces"))
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise FieldError(f"{path}.namespaces[{i}]", f"Invalid value: {name!r}: must be a namespace name")
    raw_ns_selector = item.get("namespaceSelector")
    ns_selector = (
        None if raw_ns_selector is None else parse_label_selector(raw_ns_selector, f"{path}.namespaceSelector")
    )
    namespaces = frozenset((namespace,)) if not names and ns_selector is None else frozenset(names)
    return AffinityTerm(selector, namespaces, ns_selector, topology_key)


def _terms(raw: Any, path: str, namespace: str, labels: Mapping[str, str]) -> tuple[AffinityTerm, ...]:
    return tuple(_term(t, f"{path}[{i}]", namespace, labels) for i, t in enumerate(sequence(raw, path)))


def _weighted(raw: Any, path: str, namespace: str, labels: Mapping[str, str]) -> tuple[tuple[int, AffinityTerm], ...]:
    result = []
    for i, entry in enumerate(sequence(raw, path)):
        item = mapping(entry, f"{path}[{i}]")
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise FieldError(f"{path}[{i}].weight", f"Invalid value: {weight!r}: must be in the range 1-100")
        if item.get("podAffinityTerm") is None:
            raise FieldError(f"{path}[{i}].podAffinityTerm", "Required value")
        result.append((weight, _term(item["podAffinityTerm"], f"{path}[{i}].podAffinityTerm", namespace, labels)))
    return tuple(result)


def parse_pod_affinity(affinity: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodRelations:
    """`spec.affinity.podAffinity` and `podAntiAffinity`; FieldError names the bad field."""
    if "podAffinity" not in affinity and "podAntiAffinity" not in affinity:
        return NONE
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    path = "spec.affinity.podAffinity"
    pod_affinity = mapping(affinity.get("podAffinity"), path)
    anti_path = "spec.affinity.podAntiAffinity"
    anti = mapping(affinity.get("podAntiAffinity"), anti_path)
    relations = PodRelations(
        required_affinity=_terms(pod_affinity.get(required), f"{path}.{required}", namespace, labels),
        required_anti_affinity=_terms(anti.get(required), f"{anti_path}.{required}", namespace, labels),
        preferred_affinity=_weighted(pod_affinity.get(preferred), f"{path}.{preferred}", namespace, labels),
        preferred_anti_affinity=_weighted(anti.get(preferred), f"{anti_path}.{preferred}", namespace, labels),
    )
    return relations if relations.any else NONE


def _policy(value: Any, path: str, default: str) -> str:
    if value is None:
        return default
    if value not in (HONOR, IGNORE):
        raise FieldError(path, f'Unsupported value: "{value}": supported values: "Honor", "Ignore"')
    return value


def parse_spread_constraint(raw: Any, path: str, labels: Mapping[str, str]) -> SpreadConstraint:
    item = mapping(raw, path)
    max_skew = item.get("maxSkew")
    if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew <= 0:
        raise FieldError(f"{path}.maxSkew", f"Invalid value: {max_skew!r}: must be greater than zero")
    topology_key = item.get("topologyKey")
    if not isinstance(topology_key, str) or not topology_key:
        raise FieldError(f"{path}.topologyKey", "Required value: can not be empty")
    validate_label_key(topology_key, f"{path}.topologyKey")
    when = item.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise FieldError(
            f"{path}.whenUnsatisfiable", f'Unsupported value: "{when}": supported values: "DoNotSchedule", '
            '"ScheduleAnyway"'
        )
    min_domains = item.get("minDomains")
    if min_domains is not None:
        if isinstance(min_domains, bool) or not isinstance(min_domains, int) or min_domains <= 0:
            raise FieldError(f"{path}.minDomains", f"Invalid value: {min_domains!r}: must be greater than zero")
        if when != DO_NOT_SCHEDULE:
            raise FieldError(
                f"{path}.minDomains", f"Invalid value: {min_domains}: can only use minDomains if "
                "whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"
            )
    selector = parse_label_selector(item.get("labelSelector"), f"{path}.labelSelector")
    match_keys = _label_keys(item.get("matchLabelKeys"), f"{path}.matchLabelKeys")
    selector = selector.merged(_key_requirements(match_keys, "In", labels))
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        selector=selector,
        min_domains=min_domains or 1,
        node_affinity_policy=_policy(item.get("nodeAffinityPolicy"), f"{path}.nodeAffinityPolicy", HONOR),
        node_taints_policy=_policy(item.get("nodeTaintsPolicy"), f"{path}.nodeTaintsPolicy", IGNORE),
    )


#: parsed `topologySpreadConstraints` by their text and the pod's values of their matchLabelKeys:
#: the pods of a workload repeat one list, about 24 µs of a pod's 50 µs parse (once per pod: its
#: binding's MODIFIED event is recognised without a parse, `parsing.PodSource`). A dict, not
#: `lru_cache`: a miss parses the decoded object itself (`repr` is its key, exact for every type)
_SPREAD_PARSED: dict[tuple[str, tuple[tuple[str, str | None], ...]], tuple[SpreadConstraint, ...]] = {}
_SPREAD_PARSED_LIMIT = 4096
_SPREAD_TEXT_LIMIT = 4096  # longer lists are parsed each time: the memo's size stays bounded


def parse_spread_constraints(raw: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """`spec.topologySpreadConstraints`; a (topologyKey, whenUnsatisfiable) pair may appear once.
    The result (immutable) is shared by the pods whose constraints read the same: the same text
    (`repr` of the decoded JSON) and the same values of the labels their matchLabelKeys name. An
    invalid list is never kept: its error is raised anew each time."""
    if not isinstance(raw, list):
        return _parse_spread_constraints(raw, labels)
    text = repr(raw)
    if len(text) > _SPREAD_TEXT_LIMIT:
        return _parse_spread_constraints(raw, labels)
    keys = [key for item in raw if isinstance(item, Mapping) and isinstance(item.get("matchLabelKeys"), list)
            for key in item["matchLabelKeys"] if isinstance(key, str)]
    memo = (text, tuple((key, labels.get(key)) for key in keys))
    parsed = _SPREAD_PARSED.get(memo)
    if parsed is None:
        parsed = _parse_spread_constraints(raw, labels)
        if len(_SPREAD_PARSED) >= _SPREAD_PARSED_LIMIT:
            _SPREAD_PARSED.clear()
        _SPREAD_PARSED[memo] = parsed
    return parsed


def _parse_spread_constraints(raw: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    path = "spec.topologySpreadConstraints"
    constraints = tuple(parse_spread_constraint(c, f"{path}[{i}]", labels) for i, c in enumerate(sequence(raw, path)))
    seen: set[tuple[str, str]] = set()
    for i, constraint in enumerate(constraints):
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in seen:
            raise FieldError(
                f"{path}[{i}]", f'Duplicate value: "{{{pair[0]}, {pair[1]}}}"'
            )
        seen.add(pair)
    return constraints


def parse_controller(meta: Mapping[str, Any]) -> ControllerRef | None:
    """The owner reference with `controller: true`, as `metav1.GetControllerOf` finds it."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ControllerRef(
                str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("name") or ""),
                str(ref.get("uid") or ""),
            )
    return None
