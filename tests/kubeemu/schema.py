"""Structural-schema handling of custom resources: pruning, defaulting, OpenAPI validation.

A real API server silently drops fields a CRD schema does not declare, fills ``default``s, and
rejects invalid objects with 422. Doing the same here keeps tests honest once the real CRD
(``crds/``) is installed into the emulator; the built-in CRD preserves unknown fields.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

_TYPE_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
               float: "number", type(None): "null"}
_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def _type_of(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _is_type(value: Any, expected: str) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else json.dumps(value, default=str)


def _walk(value: Any, schema: dict[str, Any], path: str, errors: list[str]) -> Any:
    """Return the pruned and defaulted value, appending validation errors on the way."""
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            errors.append(f'{path}: Invalid value: "null": {path} in body must be of type '
                          f'{schema["type"]}: "null"')
        return value
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _is_type(value, "integer")):
            errors.append(f'{path}: Invalid value: "{_type_of(value)}": {path} in body must be '
                          f'of type int-or-string: "{_type_of(value)}"')
            return value
    elif expected and not _is_type(value, expected):
        errors.append(f'{path}: Invalid value: "{_type_of(value)}": {path} in body must be of '
                      f'type {expected}: "{_type_of(value)}"')
        return value

    if isinstance(value, dict):
        value = _walk_object(value, schema, path, errors)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            value = [_walk(v, items, f"{path}[{i}]", errors) for i, v in enumerate(value)]
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: Too many: {len(value)}: must have at most "
                          f"{schema['maxItems']} items")
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: Invalid value: {len(value)}: {path} in body should have at "
                          f"least {schema['minItems']} items")
    elif isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: Too long: may not be more than {schema['maxLength']} bytes")
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f'{path}: Invalid value: "{value}": {path} in body should be at least '
                          f'{schema["minLength"]} chars long')
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f'{path}: Invalid value: "{value}": {path} in body should match '
                          f"'{schema['pattern']}'")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "maximum" in schema:
            if schema.get("exclusiveMaximum") and value >= schema["maximum"]:
                errors.append(f"{path}: Invalid value: {value}: {path} in body should be less "
                              f"than {schema['maximum']}")
            elif value > schema["maximum"]:
                errors.append(f"{path}: Invalid value: {value}: {path} in body should be less "
                              f"than or equal to {schema['maximum']}")
        if "minimum" in schema:
            if schema.get("exclusiveMinimum") and value <= schema["minimum"]:
                errors.append(f"{path}: Invalid value: {value}: {path} in body should be "
                              f"greater than {schema['minimum']}")
            elif value < schema["minimum"]:
                errors.append(f"{path}: Invalid value: {value}: {path} in body should be "
                              f"greater than or equal to {schema['minimum']}")
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_show(v) for v in schema["enum"])
        errors.append(f"{path}: Unsupported value: {_show(value)}: supported values: "
                      f"{supported}")
    for sub in schema.get("allOf") or []:
        _walk(value, sub, path, errors)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            passing = sum(1 for sub in schema[key] if not _errors_of(value, sub, path))
            if passing == 0 or (key == "oneOf" and passing > 1):
                errors.append(f"{path}: Invalid value: {_show(value)}: {path} in body must "
                              f"validate {'one and only one' if key == 'oneOf' else 'any'} "
                              f"schema ({key})")
    if isinstance(schema.get("not"), dict) and not _errors_of(value, schema["not"], path):
        errors.append(f"{path}: Invalid value: {_show(value)}: {path} in body should not "
                      f"validate the given schema")
    return value


def _errors_of(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    _walk(copy.deepcopy(value), schema, path, errors)
    return errors


def _walk_object(value: dict[str, Any], schema: dict[str, Any], path: str,
                 errors: list[str]) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or extra is True
    out: dict[str, Any] = {}
    for key, sub in value.items():
        sub_path = f"{path}.{key}" if path else key
        if key in props:
            out[key] = _walk(sub, props[key], sub_path, errors)
        elif isinstance(extra, dict):
            out[key] = _walk(sub, extra, sub_path, errors)
        elif keep_unknown:
            out[key] = sub
    for key, sub in props.items():
        if key not in out and isinstance(sub, dict) and "default" in sub:
            sub_path = f"{path}.{key}" if path else key
            out[key] = _walk(copy.deepcopy(sub["default"]), sub, sub_path, errors)
    for key in schema.get("required") or []:
        if key not in out:
            errors.append(f"{path + '.' if path else ''}{key}: Required value")
    if "maxProperties" in schema and len(out) > schema["maxProperties"]:
        errors.append(f"{path}: Too many: {len(out)}: must have at most "
                      f"{schema['maxProperties']} items")
    if "minProperties" in schema and len(out) < schema["minProperties"]:
        errors.append(f"{path}: Invalid value: {len(out)}: {path} in body should have at least "
                      f"{schema['minProperties']} properties")
    return out


def apply_schema(obj: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any],
                                                                        list[str]]:
    """Prune, default and validate a whole custom resource; returns (new object, errors)."""
    errors: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get("properties"):
        return obj, errors
    body = {k: v for k, v in obj.items() if k not in _ROOT_KEEP}
    walked = _walk_object(body, schema, "", errors)
    out = {k: obj[k] for k in _ROOT_KEEP if k in obj}
    out.update(walked)
    return out, errors
