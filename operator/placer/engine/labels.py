"""Label selectors of pods and workloads, as apimachinery's `metav1.LabelSelectorAsSelector` reads them.

A selector is parsed once into an immutable, hashable value: pods that share a selector (the
replicas of one workload) share every cache keyed on it. Three shapes matter, as in kube:

- `EVERYTHING` (`{}`): matches every label set;
- `NOTHING` (a missing selector, `nil` in Go): matches no label set;
- a conjunction of requirements (`matchLabels` are `key In (value)`).

Parsing validates what the API server validates (operators, values, label key and value syntax),
so a malformed selector in a hand-written pod is an error naming the field, not a wrong answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from placer.engine.fields import FieldError

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "LabelSelector",
    "Requirement",
    "parse_label_selector",
    "selector_from_labels",
    "validate_label_key",
]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_label_key(key: Any, path: str) -> str:
    """A qualified name, `[prefix/]name`, as `validation.IsQualifiedName` checks label keys."""
    if not isinstance(key, str) or not key:
        raise FieldError(path, "Required value")
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise FieldError(path, f'Invalid value: "{key}": prefix part must be a DNS subdomain')
    if len(name) > 63 or not _NAME.match(name):
        raise FieldError(
            path,
            f'Invalid value: "{key}": name part must consist of alphanumeric characters, "-", "_" or ".", '
            "and must start and end with an alphanumeric character (at most 63 characters)",
        )
    return key


def _validate_value(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise FieldError(path, f"Invalid value: {value!r}: must be a string")
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise FieldError(
            path,
            f'Invalid value: "{value}": a valid label must be an empty string or consist of alphanumeric '
            'characters, "-", "_" or ".", and must start and end with an alphanumeric character',
        )
    return value


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; `nothing` is the selector of a missing (nil) LabelSelector."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # kept: selectors key the caches of every cycle (queries, terms, pod shapes)
        value = self._hash
        if not value:
            value = hash((self.requirements, self.nothing))
            object.__setattr__(self, "_hash", value)
        return value

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> LabelSelector:
        """Requirements in a canonical order, so equal selectors are equal values."""
        unique = sorted(set(requirements), key=lambda r: (r.key, r.operator, sorted(r.values)))
        return cls(tuple(unique))

    @property
    def empty(self) -> bool:
        """Matches everything (kube's `Selector.Empty()`)."""
        return not self.requirements and not self.nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for requirement in self.requirements:  # noqa: SIM110 - a hot path: a loop beats all(genexpr)
            if not requirement.matches(labels):
                return False
        return True

    def anchor(self) -> tuple[str, str] | None:
        """A `key=value` every matching label set carries, if any: lets indexes skip most pods."""
        for requirement in self.requirements:
            if requirement.operator == "In" and len(requirement.values) == 1:
                return requirement.key, next(iter(requirement.values))
        return None

    def merged(self, extra: Iterable[Requirement]) -> LabelSelector:
        """This selector AND `extra` (how matchLabelKeys / mismatchLabelKeys join a selector)."""
        extra = tuple(extra)
        if self.nothing or not extra:
            return self
        return LabelSelector.of((*self.requirements, *extra))

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        parts = []
        for r in self.requirements:
            values = ",".join(sorted(r.values))
            if r.operator == "In":
                parts.append(f"{r.key}={values}" if len(r.values) == 1 else f"{r.key} in ({values})")
            elif r.operator == "NotIn":
                parts.append(f"{r.key} notin ({values})")
            elif r.operator == "Exists":
                parts.append(r.key)
            else:
                parts.append(f"!{r.key}")
        return ",".join(parts) or "<everything>"


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def selector_from_labels(labels: Mapping[str, str]) -> LabelSelector:
    """`labels.Set(m).AsSelector()`: every pair must match (an empty map matches everything)."""
    return LabelSelector.of(Requirement(k, "In", frozenset((v,))) for k, v in labels.items())


def parse_label_selector(raw: Any, path: str) -> LabelSelector:
    """A `metav1.LabelSelector` (None: NOTHING, `{}`: EVERYTHING); FieldError when invalid."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise FieldError(path, f"must be an object, not {type(raw).__name__}")
    requirements: list[Requirement] = []
    match_labels = raw.get("matchLabels")
    if match_labels is not None:
        if not isinstance(match_labels, Mapping):
            raise FieldError(f"{path}.matchLabels", f"must be an object, not {type(match_labels).__name__}")
        for key, value in match_labels.items():
            validate_label_key(key, f"{path}.matchLabels")
            value = _validate_value(value, f"{path}.matchLabels.{key}")
            requirements.append(Requirement(key, "In", frozenset((value,))))
    expressions = raw.get("matchExpressions")
    if expressions is not None and not isinstance(expressions, list):
        raise FieldError(f"{path}.matchExpressions", f"must be a list, not {type(expressions).__name__}")
    for i, item in enumerate(expressions or ()):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(item, Mapping):
            raise FieldError(where, f"must be an object, not {type(item).__name__}")
        key = validate_label_key(item.get("key"), f"{where}.key")
        operator = item.get("operator")
        if operator not in OPERATORS:
            raise FieldError(
                f"{where}.operator",
                f'Unsupported value: "{operator}": supported values: "In", "NotIn", "Exists", "DoesNotExist"',
            )
        values = item.get("values")
        if values is not None and not isinstance(values, list):
            raise FieldError(f"{where}.values", f"must be a list, not {type(values).__name__}")
        values = [_validate_value(v, f"{where}.values[{j}]") for j, v in enumerate(values or ())]
        if operator in ("In", "NotIn") and not values:
            raise FieldError(
                f"{where}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )
        if operator in ("Exists", "DoesNotExist") and values:
            raise FieldError(
                f"{where}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        requirements.append(Requirement(key, operator, frozenset(values)))
    return LabelSelector.of(requirements)
