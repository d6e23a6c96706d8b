"""The three patch flavours the API server accepts: merge, strategic merge, and JSON patch.

Merge and strategic merge are functional (they return new containers and share untouched
sub-trees with the input), because stored objects are immutable snapshots that watch events
and list responses keep referring to.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# patchMergeKey of the k8s Go types that use patchStrategy=merge, keyed by field name.
# Field names are unique enough across the built-in types served here.
MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
}
# Kinds whose field names clash with the table above (ServiceSpec.ports merge on ``port``).
KIND_MERGE_KEYS: dict[str, dict[str, str]] = {
    "Service": {**MERGE_KEYS, "ports": "port"},
    "CSINode": {**MERGE_KEYS, "drivers": "name"},
}
# Lists of scalars with patchStrategy=merge (set union on patch).
PRIMITIVE_MERGE_LISTS: frozenset[str] = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge recursively, ``null`` deletes, lists replace."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _strip_directives(value: Any) -> Any:
    """Drop ``$patch``-style keys from a new sub-tree that is inserted as a whole."""
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _merge_keyed_list(current: list[Any], patch: list[Any], key: str,
                      keys: dict[str, str]) -> list[Any]:
    """Merge two lists of maps by their merge key, keeping the existing order."""
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip_directives(i) for i in patch
                if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(_strip_directives(item))
            continue
        idx = next((n for n, cur in enumerate(out)
                    if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
        elif idx is None:
            out.append(_strip_directives(item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item, keys)
    return out


def strategic_merge_patch(target: Any, patch: Any, keys: dict[str, str] = MERGE_KEYS) -> Any:
    """Kubernetes strategic merge patch, for the list strategies of the built-in types.

    Supports merge-keyed lists (conditions by ``type``, containers by ``name``, ...), merged
    scalar lists (finalizers), ``$patch: replace|delete``, ``$retainKeys``,
    ``$deleteFromPrimitiveList/<field>``, and ignores ``$setElementOrder/<field>``.
    """
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
            continue
        current = out.get(key)
        if isinstance(value, dict):
            if value.get("$patch") == "delete":
                out.pop(key, None)
            else:
                out[key] = strategic_merge_patch(current, value, keys)
        elif isinstance(value, list) and isinstance(current, list):
            if key in keys:
                out[key] = _merge_keyed_list(current, value, keys[key], keys)
            elif key in PRIMITIVE_MERGE_LISTS:
                out[key] = current + [v for v in value if v not in current]
            else:
                out[key] = _strip_directives(value)
        else:
            out[key] = _strip_directives(value)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _pointer(path: str) -> list[str]:
    """Split a JSON pointer (RFC 6901) into unescaped tokens."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, tokens: list[str], path: str) -> tuple[Any, str]:
    """Walk to the container of the pointed-to location."""
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict) and tok in cur:
            cur = cur[tok]
        elif isinstance(cur, list) and tok.isdigit() and int(tok) < len(cur):
            cur = cur[int(tok)]
        else:
            raise ApiError(422, f"the server rejected our request due to an error in our "
                                f"request: doc is missing path: {path!r}")
    return cur, tokens[-1]


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens, path)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise ApiError(422, f"the server rejected our request due to an error in our request: "
                        f"doc is missing key: {path!r}")


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    parent, last = _parent(doc, tokens, path)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError(422, f"the server rejected our request due to an error in our request: "
                        f"unable to remove nonexistent key: {path!r}")


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, path)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"the server rejected our request due to an error in our "
                                f"request: replace operation does not apply: doc is missing "
                                f"key: {path!r}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise ApiError(422, f"the server rejected our request due to an error in our "
                                f"request: index out of range: {path!r}")
    else:
        raise ApiError(422, f"the server rejected our request due to an error in our request: "
                            f"doc is missing path: {path!r}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch on a deep copy; a failed ``test`` is a 422, as on a real server."""
    if not isinstance(ops, list):
        raise ApiError.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch "
            "(a JSON patch must be a list of operations; for a dict use "
            "application/merge-patch+json)")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError.bad_request(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            value = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            try:
                actual = _get(doc, path)
            except ApiError:
                actual = None
            if actual != op.get("value"):
                raise ApiError(422, f"the server rejected our request due to an error in our "
                                    f"request: testing value {path} failed")
        else:
            raise ApiError.bad_request(f"Unexpected kind: {kind}")
    return doc


def apply_patch(target: Any, patch: Any, content_type: str, custom: bool,
                kind: str = "") -> Any:
    """Dispatch on the Content-Type; CRs reject strategic merge (415), as a real server does."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise ApiError.bad_request("a merge patch must be a JSON object")
        return merge_patch(target, patch)
    if ctype == STRATEGIC_MERGE_PATCH:
        if custom:
            raise ApiError(415, "strategic merge patch is not supported for custom resources; "
                                "use application/merge-patch+json", "UnsupportedMediaType")
        if not isinstance(patch, dict):
            raise ApiError.bad_request("a strategic merge patch must be a JSON object")
        return strategic_merge_patch(target, patch, KIND_MERGE_KEYS.get(kind, MERGE_KEYS))
    if ctype == JSON_PATCH:
        return json_patch(target, patch)
    raise ApiError(415, f"the body of the request was in an unknown format - accepted media "
                        f"types include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}",
                   "UnsupportedMediaType")
