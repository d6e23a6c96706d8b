"""Schemas for the Prometheus Operator kinds the chart renders (ServiceMonitor, PrometheusRule).

kubernetes-validate knows only Kubernetes' own kinds, and the Prometheus Operator's CRDs are not
something to fetch in a test. These JSON schemas cover the `monitoring.coreos.com/v1` fields of
those two kinds as the operator's API reference documents them, closed (a misspelt field is an
error, as strict field validation makes it on apply) for the fields Placer's chart can render; the
rules' `expr` are parsed as PromQL (promql-parser, a test dependency) and each rule must be an alert
or a recording rule, as Prometheus requires.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

API_VERSION = "monitoring.coreos.com/v1"

# Prometheus's duration format: units from years down to milliseconds, each at most once, in order
DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                         r"(([0-9]+)s)?(([0-9]+)ms)?)$"}
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1}, "namespace": {"type": "string"},
                   "labels": STRINGS, "annotations": STRINGS},
}
LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": STRINGS,
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "required": ["key", "operator"], "additionalProperties": False,
            "properties": {"key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                           "values": {"type": "array", "items": {"type": "string"}}}}},
    },
}
RELABELING = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "action": {"type": "string"}, "modulus": {"type": "integer"}, "regex": {"type": "string"},
        "replacement": {"type": "string"}, "separator": {"type": "string"},
        "sourceLabels": {"type": "array", "items": {"type": "string"}}, "targetLabel": {"type": "string"},
    },
}
ENDPOINT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "port": {"type": "string"},
        "targetPort": {"type": ["integer", "string"]},
        "path": {"type": "string"},
        "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
        "params": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "interval": DURATION,
        "scrapeTimeout": DURATION,
        "honorLabels": {"type": "boolean"},
        "honorTimestamps": {"type": "boolean"},
        "trackTimestampsStaleness": {"type": "boolean"},
        "followRedirects": {"type": "boolean"},
        "enableHttp2": {"type": "boolean"},
        "filterRunning": {"type": "boolean"},
        "proxyUrl": {"type": "string"},
        "bearerTokenFile": {"type": "string"},
        "tlsConfig": {"type": "object"},
        "authorization": {"type": "object"},
        "basicAuth": {"type": "object"},
        "oauth2": {"type": "object"},
        "relabelings": {"type": "array", "items": RELABELING},
        "metricRelabelings": {"type": "array", "items": RELABELING},
    },
}


def _resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A top-level Prometheus Operator object of `kind`: the same envelope for every kind."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": kind},
            "metadata": METADATA,
            "spec": spec,
        },
    }


SERVICE_MONITOR = _resource("ServiceMonitor", {
    "type": "object",
    "required": ["selector"],
    "additionalProperties": False,
    "properties": {
        "jobLabel": {"type": "string"},
        "targetLabels": {"type": "array", "items": {"type": "string"}},
        "podTargetLabels": {"type": "array", "items": {"type": "string"}},
        "endpoints": {"type": "array", "items": ENDPOINT},
        "selector": LABEL_SELECTOR,
        "namespaceSelector": {"type": "object", "additionalProperties": False,
                              "properties": {"any": {"type": "boolean"},
                                             "matchNames": {"type": "array", "items": {"type": "string"}}}},
        "sampleLimit": {"type": "integer", "minimum": 0},
        "targetLimit": {"type": "integer", "minimum": 0},
        "labelLimit": {"type": "integer", "minimum": 0},
        "labelNameLengthLimit": {"type": "integer", "minimum": 0},
        "labelValueLengthLimit": {"type": "integer", "minimum": 0},
        "attachMetadata": {"type": "object"},
        "scrapeClass": {"type": "string"},
        "scrapeProtocols": {"type": "array", "items": {"type": "string"}},
    },
})
RULE = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "properties": {
        "alert": {"type": "string", "minLength": 1},
        "record": {"type": "string", "minLength": 1},
        "expr": {"type": ["integer", "string"]},
        "for": DURATION,
        "keep_firing_for": DURATION,
        "labels": STRINGS,
        "annotations": STRINGS,
    },
}
PROMETHEUS_RULE = _resource("PrometheusRule", {
    "type": "object",
    "additionalProperties": False,
    "properties": {"groups": {"type": "array", "items": {
        "type": "object",
        "required": ["name"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "interval": DURATION,
            "query_offset": DURATION,
            "limit": {"type": "integer"},
            "labels": STRINGS,
            "partial_response_strategy": {"type": "string"},
            "rules": {"type": "array", "items": RULE},
        },
    }}},
})
SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    (API_VERSION, "ServiceMonitor"): SERVICE_MONITOR,
    (API_VERSION, "PrometheusRule"): PROMETHEUS_RULE,
}


def promql_problem(expr: str) -> str | None:
    """Why `expr` is not PromQL (promql-parser's message); None when it parses, or when the parser is
    not installed (it comes with Placer's test dependencies)."""
    try:
        import promql_parser
    except ImportError:
        return None
    try:
        promql_parser.parse(expr)
    except Exception as error:  # the parser raises plain ValueErrors/RuntimeErrors with its message
        return str(error)
    return None


def problems(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, message) for everything wrong in a ServiceMonitor or PrometheusRule document."""
    import jsonschema

    schema = SCHEMAS[(doc.get("apiVersion", ""), doc.get("kind", ""))]
    validator = jsonschema.Draft7Validator(schema)
    for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path))):
        yield ".".join(str(p) for p in error.path) or "(root)", error.message
    if doc.get("kind") != "PrometheusRule":
        return
    names: set[str] = set()
    for g, group in enumerate((doc.get("spec") or {}).get("groups") or []):
        if not isinstance(group, dict):
            continue
        if group.get("name") in names:
            yield f"spec.groups.{g}.name", f"duplicate group name {group.get('name')!r}"
        names.add(group.get("name"))
        for r, rule in enumerate(group.get("rules") or []):
            if not isinstance(rule, dict):
                continue
            where = f"spec.groups.{g}.rules.{r}"
            if ("alert" in rule) == ("record" in rule):
                yield where, "a rule is either an alert or a recording rule (exactly one of alert, record)"
            if "record" in rule and ("for" in rule or "annotations" in rule):
                yield where, "a recording rule has no for or annotations"
            problem = promql_problem(str(rule.get("expr", "")))
            if problem:
                yield f"{where}.expr", f"not PromQL: {problem}"
