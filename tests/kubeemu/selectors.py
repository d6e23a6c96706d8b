"""Label and field selectors with the API server's syntax and semantics.

Parsed once per request into small predicate lists, so that filtering thousands of
objects in a list or a watch fan-out costs a few dict lookups per object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ApiError

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` -> two requirements)."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


class LabelSelector:
    """A parsed ``labelSelector``: all requirements must hold (comma means AND)."""

    __slots__ = ("_reqs", "text")

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self._reqs: list[tuple[str, str, Any]] = [self._parse(p) for p in _split_top(self.text)]

    @staticmethod
    def _parse(req: str) -> tuple[str, str, Any]:
        bad = ApiError.bad_request(f"unable to parse requirement: {req!r}")
        if req.startswith("!"):
            key = req[1:].strip()
            if not key:
                raise bad
            return (key, "!exists", None)
        for word in (" notin ", " in "):
            idx = req.find(word)
            if idx > 0:
                key = req[:idx].strip()
                rest = req[idx + len(word):].strip()
                if not (rest.startswith("(") and rest.endswith(")")):
                    raise bad
                values = frozenset(v.strip() for v in rest[1:-1].split(","))
                return (key, word.strip(), values)
        for op in ("==", "!=", "=", ">", "<"):
            idx = req.find(op)
            if idx > 0:
                key, value = req[:idx].strip(), req[idx + len(op):].strip()
                if op in (">", "<"):
                    try:
                        return (key, op, int(value))
                    except ValueError:
                        raise bad from None
                return (key, "!=" if op == "!=" else "=", value)
        if any(c in req for c in " ()=!<>"):
            raise bad
        return (req, "exists", None)

    def __bool__(self) -> bool:
        return bool(self._reqs)

    def matches(self, labels: dict[str, str] | None) -> bool:
        """Whether a ``metadata.labels`` mapping satisfies every requirement."""
        labels = labels or {}
        for key, op, value in self._reqs:
            present = key in labels
            if op == "=":
                if labels.get(key) != value:
                    return False
            elif op == "!=":
                if present and labels[key] == value:
                    return False
            elif op == "in":
                if not present or labels[key] not in value:
                    return False
            elif op == "notin":
                if present and labels[key] in value:
                    return False
            elif op == "exists":
                if not present:
                    return False
            elif op == "!exists":
                if present:
                    return False
            else:  # > and <
                try:
                    num = int(labels[key]) if present else None
                except ValueError:
                    return False
                if num is None or (num <= value if op == ">" else num >= value):
                    return False
        return True


def _unescape(value: str) -> str:
    """Undo the ``\\,`` / ``\\=`` / ``\\\\`` escaping of field selector values."""
    if "\\" not in value:
        return value
    out: list[str] = []
    it = iter(value)
    for ch in it:
        out.append(next(it, "") if ch == "\\" else ch)
    return "".join(out)


def _split_unescaped(text: str) -> list[str]:
    """Split a field selector on commas that are not backslash-escaped."""
    parts: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _field_value(obj: Obj, path: tuple[str, ...]) -> str:
    """Stringify a field as the API server's field sets do; absent fields are ``""``."""
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


class FieldSelector:
    """A parsed ``fieldSelector``; ``allowed`` limits the labels the way a real server does."""

    __slots__ = ("_reqs", "text")

    def __init__(self, text: str | None, allowed: frozenset[str] | None = None) -> None:
        self.text = text or ""
        self._reqs: list[tuple[tuple[str, ...], bool, str]] = []
        for req in _split_unescaped(self.text):
            for op in ("!=", "==", "="):
                idx = req.find(op)
                if idx > 0:
                    field, value = req[:idx].strip(), _unescape(req[idx + len(op):].strip())
                    break
            else:
                raise ApiError.bad_request(f"invalid selector: {req!r}; can't understand {req!r}")
            if (allowed is not None and field not in allowed
                    and field not in ("metadata.name", "metadata.namespace")):
                raise ApiError.bad_request(
                    f'"{field}" is not a known field selector: only "metadata.name", '
                    f'"metadata.namespace"' + "".join(f', "{f}"' for f in sorted(allowed)))
            self._reqs.append((tuple(field.split(".")), op == "!=", value))

    def __bool__(self) -> bool:
        return bool(self._reqs)

    def matches(self, obj: Obj) -> bool:
        """Whether an object satisfies every requirement."""
        return all((_field_value(obj, path) == value) != negate
                   for path, negate, value in self._reqs)


def selector_matches(selector: Obj, labels: dict[str, str] | None) -> bool:
    """Whether labels satisfy a ``metav1.LabelSelector`` object (matchLabels AND matchExpressions).

    An empty selector matches everything; callers decide what a missing one means (a PDB's
    matches nothing, a Service's selects nothing).
    """
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = expr.get("values") or []
        present = key in labels
        if op == "In":
            ok = present and labels[key] in values
        elif op == "NotIn":
            ok = not present or labels[key] not in values
        elif op == "Exists":
            ok = present
        elif op == "DoesNotExist":
            ok = not present
        else:
            raise ApiError.bad_request(f"{op!r} is not a valid label selector operator")
        if not ok:
            return False
    return True
