"""The chart's monitoring: a ServiceMonitor, a PrometheusRule and a Grafana dashboard ConfigMap, off
by default; every query of the alerts and of the dashboard parsed as PromQL, and every metric it names
one `placer run` exports (read from `placer.controller.metrics`, not listed here)."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
from placer.controller.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "manifests" / "chart" / "placer"
DASHBOARD = CHART / "dashboards" / "placer.json"
NAMESPACE = "placer-system"
SWITCHES = ("serviceMonitor.enabled=true", "prometheusRule.enabled=true", "grafanaDashboard.enabled=true")
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}

Doc = dict[str, Any]


def _load(name: str, path: Path) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


manifests = _load("placer_hack_manifests", ROOT / "hack" / "manifests.py")
dashboard_generator = _load("placer_hack_grafana_dashboard", ROOT / "hack" / "grafana_dashboard.py")


@pytest.fixture(scope="module")
def helm() -> str:
    try:
        return manifests.helm_binary()
    except RuntimeError as exc:
        pytest.skip(f"helm cannot be obtained (hack/get-helm.sh): {exc}")


def render(helm: str, *sets: str) -> list[Doc]:
    return manifests.load_docs(manifests.render(sets=list(sets), namespace=NAMESPACE, helm=helm))


@pytest.fixture(scope="module")
def docs(helm: str) -> list[Doc]:
    return render(helm, *SWITCHES)


def one(docs: list[Doc], kind: str, name_suffix: str = "") -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def exported() -> set[str]:
    """Every series name `/metrics` can carry: each family of `Metrics`, a histogram's with its
    _bucket, _sum and _count."""
    names: set[str] = set()
    for line in Metrics().render().splitlines():
        match = re.match(r"# TYPE (\S+) (\w+)$", line)
        if match:
            name, kind = match.groups()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def selectors(node: Any) -> Iterator[Any]:
    """Every vector selector of a parsed PromQL expression."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        yield node
        return
    for attribute in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(node, attribute, None)
        if child is not None:
            yield from selectors(child)
    for child in getattr(node, "args", None) or ():
        yield from selectors(child)


def grafana_to_promql(expr: str) -> str:
    """A dashboard query as Prometheus receives it: Grafana's variables replaced."""
    return (expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
            .replace("$namespace", NAMESPACE).replace("$profile", ".*"))


def metric_names(expr: str) -> list[str]:
    found = list(selectors(promql_parser.parse(expr)))
    assert found, f"no metric in {expr!r}"
    names = []
    for selector in found:
        assert selector.name, f"a selector without a metric name in {expr!r}"
        names.append(selector.name)
    return names


def matchers(selector: Any) -> dict[str, str]:
    return {m.name: m.value for m in selector.matchers.matchers}


# ------------------------------------------------------------------------------------ switches


def test_off_by_default(helm: str) -> None:
    kinds = {d["kind"] for d in render(helm)}
    assert not kinds & MONITORING_KINDS
    assert not [d for d in render(helm) if d["kind"] == "ConfigMap"]


def test_each_switch_alone(helm: str) -> None:
    for switch, kind in zip(SWITCHES, ("ServiceMonitor", "PrometheusRule", "ConfigMap"), strict=True):
        found = {d["kind"] for d in render(helm, switch)} & (MONITORING_KINDS | {"ConfigMap"})
        assert found == {kind}, switch


def test_rendered_monitoring_objects_validate(docs: list[Doc]) -> None:
    monitoring = [d for d in docs if d["kind"] in MONITORING_KINDS | {"ConfigMap"}]
    assert len(monitoring) == 3
    assert [str(f) for f in manifests.validate_docs(monitoring, "switches on")] == []
    broken = copy.deepcopy(one(docs, "PrometheusRule"))
    broken["spec"]["groups"][0]["rules"][0]["expr"] = "sum(rate(placer_bindings_total[5m])"
    broken["spec"]["groups"][0]["rules"][1]["severity"] = "critical"
    findings = [str(f) for f in manifests.validate_docs([broken], "broken")]
    assert len(findings) == 2 and "not PromQL" in findings[1] and "'severity' was unexpected" in findings[0]
    monitor = copy.deepcopy(one(docs, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["interval"] = "30 seconds"
    assert [str(f) for f in manifests.validate_docs([monitor], "m")]


# ------------------------------------------------------------------------------ ServiceMonitor


def test_service_monitor_scrapes_the_metrics_service(docs: list[Doc], helm: str) -> None:
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert monitor["metadata"]["namespace"] == NAMESPACE
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("30s", "10s")
    # the Deployment's pods are what the Service selects
    deployment = one(docs, "Deployment")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    labelled = one(render(helm, "serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom",
                          "serviceMonitor.interval=15s"), "ServiceMonitor")
    assert labelled["metadata"]["labels"]["release"] == "prom"
    assert labelled["spec"]["endpoints"][0]["interval"] == "15s"


# ------------------------------------------------------------------------------ PrometheusRule


def rules(docs: list[Doc]) -> list[Doc]:
    rule = one(docs, "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def test_alerts_cover_what_operators_page_for(docs: list[Doc]) -> None:
    alerts = {r["alert"]: r for r in rules(docs)}
    assert {"PlacerDown", "PlacerNoLeader", "PlacerPendingPodsGrowing", "PlacerBindingErrors",
            "PlacerProfileNotReady", "PlacerVolumeBindsTimingOut"} <= set(alerts)
    metrics_of = {name: set(metric_names(r["expr"])) for name, r in alerts.items()}
    assert metrics_of["PlacerNoLeader"] == {"placer_leader"}
    assert "placer_pending_pods" in metrics_of["PlacerPendingPodsGrowing"]
    assert metrics_of["PlacerBindingErrors"] == {"placer_bindings_total"}
    # exact: the leader's Ready condition per profile (Conflict included), not compilations
    assert metrics_of["PlacerProfileNotReady"] == {"placer_profile_ready", "placer_leader"}
    assert "by (profile, reason)" in alerts["PlacerProfileNotReady"]["expr"]
    assert "$labels.reason" in alerts["PlacerProfileNotReady"]["annotations"]["summary"]
    assert metrics_of["PlacerVolumeBindsTimingOut"] == {"placer_volume_binds_total"}
    assert 'result=~"timeout|failed"' in alerts["PlacerVolumeBindsTimingOut"]["expr"]
    for name, alert in alerts.items():
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert alert["annotations"]["summary"] and alert["annotations"]["description"], name
    assert alerts["PlacerNoLeader"]["labels"]["severity"] == "critical"


def test_every_rule_names_exported_metrics_in_the_release_namespace(docs: list[Doc]) -> None:
    names = exported()
    assert {"placer_schedule_attempts_total", "placer_scheduling_attempt_duration_seconds_bucket"} <= names
    for rule in rules(docs):
        for selector in selectors(promql_parser.parse(rule["expr"])):
            assert selector.name in names, f"{rule['alert']}: {selector.name} is not a metric Placer exports"
            assert matchers(selector).get("namespace") == NAMESPACE, f"{rule['alert']}: {selector.name}"


def test_rule_values_and_alert_labels(helm: str) -> None:
    docs = render(helm, "prometheusRule.enabled=true", "prometheusRule.pendingPodsThreshold=50",
                  "prometheusRule.bindingErrorRatio=0.2", "prometheusRule.alertLabels.team=platform",
                  "prometheusRule.labels.release=prom")
    assert one(docs, "PrometheusRule")["metadata"]["labels"]["release"] == "prom"
    alerts = {r["alert"]: r for r in rules(docs)}
    assert "> 50" in alerts["PlacerPendingPodsGrowing"]["expr"]
    assert "> 0.2" in alerts["PlacerBindingErrors"]["expr"]
    assert all(r["labels"]["team"] == "platform" for r in alerts.values())


def test_rules_use_the_release_namespace(helm: str) -> None:
    docs = manifests.load_docs(manifests.render(sets=["prometheusRule.enabled=true"], namespace="sched", helm=helm))
    for rule in rules(docs):
        for selector in selectors(promql_parser.parse(rule["expr"])):
            assert matchers(selector)["namespace"] == "sched"


# ------------------------------------------------------------------------------ Grafana dashboard


def test_dashboard_config_map_for_the_sidecar(docs: list[Doc], helm: str) -> None:
    config_map = one(docs, "ConfigMap", "-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert json.loads(config_map["data"]["placer.json"]) == json.loads(DASHBOARD.read_text())
    moved = one(render(helm, "grafanaDashboard.enabled=true", "grafanaDashboard.namespace=monitoring",
                       "grafanaDashboard.annotations.grafana_folder=Scheduling"), "ConfigMap", "-dashboard")
    assert moved["metadata"]["namespace"] == "monitoring"
    assert moved["metadata"]["annotations"] == {"grafana_folder": "Scheduling"}


def test_dashboard_is_what_the_generator_writes() -> None:
    assert DASHBOARD.read_text(encoding="utf-8") == dashboard_generator.text(), "run `make dashboard`"


def dashboard_queries(board: Doc) -> Iterator[tuple[str, str]]:
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            inner = re.fullmatch(r"label_values\((.*), *\w+\)", query)
            assert inner, query
            yield f"variable {variable['name']}", inner.group(1)


def test_dashboard_queries_name_exported_metrics() -> None:
    board = json.loads(DASHBOARD.read_text())
    names = exported()
    seen: set[str] = set()
    for title, expr in dashboard_queries(board):
        for selector in selectors(promql_parser.parse(grafana_to_promql(expr))):
            assert selector.name in names, f"{title}: {selector.name} is not a metric Placer exports"
            seen.add(selector.name)
            if not title.startswith("variable namespace"):
                assert matchers(selector).get("namespace") == NAMESPACE, f"{title}: {selector.name} unscoped"
    # the families worth a look are all on the dashboard
    assert {"placer_schedule_attempts_total", "placer_scheduling_attempt_duration_seconds_bucket",
            "placer_pending_pods", "placer_preemptions_total", "placer_shadow_decisions_total",
            "placer_bindings_total", "placer_leader"} <= seen


def test_dashboard_panels() -> None:
    board = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in board["panels"]}
    wanted = {
        "Scheduling attempts by result": "rate(placer_schedule_attempts_total",
        "Attempt latency": "histogram_quantile(0.99",
        "Queue sizes by queue": "sum by (queue) (placer_pending_pods",
        "Results by profile": "sum by (profile, result)",
        "Preemptions by profile": "placer_preemptions_total",
        "Shadow agreement": 'outcome=~"same|equal"',
    }
    for title, fragment in wanted.items():
        assert title in panels, title
        assert any(fragment in t["expr"] for t in panels[title]["targets"]), title
    quantiles = {t["legendFormat"] for t in panels["Attempt latency"]["targets"]}
    assert quantiles == {"p50", "p90", "p99"}
    assert panels["Shadow agreement"]["fieldConfig"]["defaults"]["unit"] == "percentunit"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:  # nothing overlaps on Grafana's 24-column grid
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
    cells = set()
    for panel in board["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "namespace", "profile"}
    assert all(p.get("datasource", {}).get("uid") == "${datasource}" for p in board["panels"] if p["type"] != "row")


def test_exported_names_come_from_the_code() -> None:
    """The check above is only as good as this list: it is the metrics module's own."""
    names = exported()
    assert "placer_scheduling_attempt_duration_seconds_count" in names
    assert "placer_no_such_metric" not in names
    assert len([n for n in names if n.startswith("placer_")]) >= 15
    with pytest.raises(AssertionError, match="not a metric Placer exports"):
        for selector in selectors(promql_parser.parse("rate(placer_schedule_attempt_total[5m])")):
            assert selector.name in names, f"{selector.name} is not a metric Placer exports"
