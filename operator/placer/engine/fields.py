"""Reading the fields of Kubernetes JSON, with errors that name the field.

Every parser of the engine (pods, nodes, selectors, relations, the catalog's kinds) reads through
these, so a malformed object yields `FieldError("spec.containers[0].ports", "must be a list, ...")`
rather than a TypeError deep inside a plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FieldError", "is_mapping", "mapping", "section", "sequence"]


class FieldError(ValueError):
    """A field the API server would reject; `path` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def is_mapping(value: Any) -> bool:
    # what YAML and JSON loaders build, checked before the (much slower) ABC check
    return type(value) is dict or isinstance(value, Mapping)


def section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A top-level part of an object (`spec`, `status`), leniently: anything but an object reads as
    empty, as the fields inside it are checked where they are read."""
    value = obj.get(key)
    return value if is_mapping(value) else {}


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    """An object field; absent (None) reads as empty."""
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(path, f"must be an object, not {type(value).__name__}")
    return value


def sequence(value: Any, path: str) -> list[Any]:
    """A list field; absent (None) reads as empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(path, f"must be a list, not {type(value).__name__}")
    return value
