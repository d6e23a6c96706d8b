#!/usr/bin/env python3
"""Write Placer's Grafana dashboard: manifests/chart/placer/dashboards/placer.json.

    python hack/grafana_dashboard.py          # (re)write it (`make dashboard`)
    python hack/grafana_dashboard.py --check  # fail if it differs from what this writes

The chart ships the file as a ConfigMap for Grafana's dashboard sidecar (values `grafanaDashboard.*`).
Panels are laid out here, not by hand in JSON, so ids and grid positions stay consistent; every query
names only metrics `placer run` exports (tests/test_chart_observability.py checks them against
`placer.controller.metrics`). Variables: the Prometheus data source, the namespace Placer runs in,
and its profiles.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "manifests" / "chart" / "placer" / "dashboards" / "placer.json"
UID = "placer-scheduler"

NS = 'namespace="$namespace"'
PROFILE = 'profile=~"$profile"'
# the leader's value of a per-replica gauge (followers keep queues too, but only the leader binds)
LEADER = f'on (instance) group_left () placer_leader{{{NS}}}'
RATE = "$__rate_interval"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

Panel = dict[str, Any]


def target(expr: str, legend: str = "", ref: str = "A") -> dict[str, Any]:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto", "refId": ref,
            "range": True, "editorMode": "code"}


def timeseries(title: str, description: str, targets: list[dict[str, Any]], unit: str = "short",
               stack: bool = False, minimum: float | None = 0) -> Panel:
    defaults: dict[str, Any] = {
        "unit": unit,
        "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 20 if stack else 8, "showPoints": "never",
                   "stacking": {"mode": "normal" if stack else "none", "group": "A"}},
    }
    if minimum is not None:
        defaults["min"] = minimum
    return {"type": "timeseries", "title": title, "description": description, "datasource": DATASOURCE,
            "targets": targets, "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom",
                                   "calcs": ["mean", "max", "lastNotNull"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title: str, description: str, expr: str, unit: str = "short",
         thresholds: list[tuple[float | None, str]] | None = None,
         mappings: list[dict[str, Any]] | None = None) -> Panel:
    steps = [{"color": color, "value": value} for value, color in (thresholds or [(None, "green")])]
    return {"type": "stat", "title": title, "description": description, "datasource": DATASOURCE,
            "targets": [target(expr, ref="A")],
            "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps},
                                         "mappings": mappings or []}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "area", "textMode": "auto"}}


def row(title: str) -> Panel:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def panels() -> list[Panel]:
    attempts = f"placer_schedule_attempts_total{{{NS}, {PROFILE}}}"
    buckets = f"placer_scheduling_attempt_duration_seconds_bucket{{{NS}, {PROFILE}}}"
    return [
        row("Overview"),
        stat("Leader", "Replicas holding the `placer` Lease: exactly 1 while Placer binds pods.",
             f"sum(placer_leader{{{NS}}})", thresholds=[(None, "red"), (1, "green"), (2, "red")],
             mappings=[{"type": "value", "options": {"0": {"text": "none"}}}]),
        stat("Pending pods", "Pods in the leader's queue (active, backoff and in flight).",
             f"sum(placer_pending_pods{{{NS}}} * {LEADER})", thresholds=[(None, "green"), (100, "orange")]),
        stat("Scheduled / s", "Pods placed per second (last 5 minutes).",
             f'sum(rate(placer_schedule_attempts_total{{{NS}, {PROFILE}, result="scheduled"}}[5m]))', unit="ops"),
        stat("Unschedulable / s", "Attempts that found no node per second (last 5 minutes).",
             f'sum(rate(placer_schedule_attempts_total{{{NS}, {PROFILE}, result="unschedulable"}}[5m]))',
             unit="ops", thresholds=[(None, "green"), (0.5, "orange")]),
        stat("Attempt p99", "99th percentile of the time to decide for one pod (last 5 minutes).",
             f"histogram_quantile(0.99, sum by (le) (rate({buckets}[5m])))", unit="s",
             thresholds=[(None, "green"), (0.1, "orange"), (1, "red")]),
        stat("Binding failures", "Binding calls that failed in the last hour (conflicts and gone pods excluded).",
             f'sum(increase(placer_bindings_total{{{NS}, result="failed"}}[1h]))',
             thresholds=[(None, "green"), (1, "orange")]),
        row("Throughput and latency"),
        timeseries("Scheduling attempts by result", "Attempts per second: scheduled, unschedulable, error.",
                   [target(f"sum by (result) (rate({attempts}[{RATE}]))", "{{result}}")], unit="ops", stack=True),
        timeseries("Bindings by result", "pods/binding calls per second: bound, conflict (already bound or "
                   "being deleted), gone, failed.",
                   [target(f"sum by (result) (rate(placer_bindings_total{{{NS}}}[{RATE}]))", "{{result}}")],
                   unit="ops", stack=True),
        timeseries("Attempt latency", "Time to decide for one pod (filter, score, select): percentiles.",
                   [target(f"histogram_quantile({q}, sum by (le) (rate({buckets}[{RATE}])))", f"p{int(q * 100)}", ref)
                    for q, ref in ((0.5, "A"), (0.9, "B"), (0.99, "C"))], unit="s"),
        timeseries("Attempt latency p99 by profile", "99th percentile of the time to decide, per profile.",
                   [target(f"histogram_quantile(0.99, sum by (le, profile) (rate({buckets}[{RATE}])))",
                           "{{profile}}")], unit="s"),
        row("Queue and profiles"),
        timeseries("Queue sizes by queue", "The leader's scheduling queue: active (ready to schedule), backoff "
                   "(waiting to retry), in_flight (decided, binding).",
                   [target(f"sum by (queue) (placer_pending_pods{{{NS}}} * {LEADER})", "{{queue}}")], stack=True),
        timeseries("Results by profile", "Attempts per second by profile and result.",
                   [target(f"sum by (profile, result) (rate({attempts}[{RATE}]))", "{{profile}} {{result}}")],
                   unit="ops"),
        timeseries("Profile reloads", "SchedulerProfile changes compiled, by result: invalid ones leave the "
                   "profile Ready=False while its last good version keeps scheduling.",
                   [target(f"sum by (profile, result) (increase(placer_profile_reloads_total{{{NS}, {PROFILE}}}"
                           f"[{RATE}]))", "{{profile}} {{result}}")]),
        timeseries("API errors by call", "Failed API calls Placer made (events, status patches, bindings of "
                   "volumes, evictions).",
                   [target(f"sum by (call) (rate(placer_api_errors_total{{{NS}}}[{RATE}]))", "{{call}}")],
                   unit="ops"),
        row("Preemption and volumes"),
        timeseries("Preemptions by profile", "Preemptions decided per second: a node nominated, its victims chosen.",
                   [target(f"sum by (profile) (rate(placer_preemptions_total{{{NS}, {PROFILE}}}[{RATE}]))",
                           "{{profile}}")], unit="ops"),
        timeseries("Preemption victims by result", "Victims per second: deleted, gone, failed, abandoned.",
                   [target(f"sum by (result) (rate(placer_preemption_victims_total{{{NS}}}[{RATE}]))",
                           "{{result}}")], unit="ops", stack=True),
        timeseries("Volume binds by result", "Volume bindings written before a pod's binding: bound, failed, "
                   "timeout (10 minutes without a provisioner's answer), gone, abandoned.",
                   [target(f"sum by (result) (rate(placer_volume_binds_total{{{NS}}}[{RATE}]))", "{{result}}"),
                    target(f"sum(placer_volume_binds_waiting{{{NS}}} * {LEADER})", "waiting", "B")]),
        row("Shadow profiles"),
        timeseries("Shadow agreement", "Share of a shadow profile's decisions that chose the node the other "
                   "scheduler bound (same) or one of the same best total (equal), over the last hour.",
                   [target(f'sum by (profile) (rate(placer_shadow_decisions_total{{{NS}, {PROFILE}, '
                           f'outcome=~"same|equal"}}[1h])) / sum by (profile) (rate(placer_shadow_decisions_total'
                           f'{{{NS}, {PROFILE}}}[1h]))', "{{profile}}")], unit="percentunit"),
        timeseries("Shadow decisions by outcome", "Shadow comparisons per second: same, equal, different, "
                   "unschedulable.",
                   [target(f"sum by (profile, outcome) (rate(placer_shadow_decisions_total{{{NS}, {PROFILE}}}"
                           f"[{RATE}]))", "{{profile}} {{outcome}}")], unit="ops", stack=True),
        timeseries("Shadowed pods waiting", "Shadowed pods waiting for a decision, and those decided only after "
                   "they were bound (active work goes first).",
                   [target(f"sum by (profile) (placer_shadow_waiting_pods{{{NS}, {PROFILE}}} * {LEADER})",
                           "{{profile}} waiting"),
                    target(f"sum by (profile) (rate(placer_shadow_late_decisions_total{{{NS}, {PROFILE}}}[{RATE}]))",
                           "{{profile}} late", "B")]),
    ]


def layout(items: list[Panel]) -> list[Panel]:
    """Grid positions: rows full width; stats six to a line; graphs two to a line."""
    x = y = 0
    height = 0
    out = []
    for number, panel in enumerate(items, start=1):
        panel = {"id": number, **panel}
        if panel["type"] == "row":
            if x:
                y, x = y + height, 0
            panel["gridPos"] = {"h": 1, "w": 24, "x": 0, "y": y}
            y += 1
            height = 0
        else:
            width, h = (4, 4) if panel["type"] == "stat" else (12, 8)
            if x + width > 24:
                y, x = y + height, 0
            panel["gridPos"] = {"h": h, "w": width, "x": x, "y": y}
            x += width
            height = max(height, h)
        out.append(panel)
    return out


def dashboard() -> dict[str, Any]:
    return {
        "uid": UID,
        "title": "Placer scheduler",
        "description": "Placer (a Kubernetes scheduler): throughput, latency, queues, profiles, preemption, "
                       "volume binding and shadow profiles.",
        "tags": ["placer", "scheduler", "kubernetes"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1, "options": [], "regex": ""},
            {"name": "namespace", "label": "Namespace", "type": "query", "datasource": DATASOURCE,
             "query": {"query": "label_values(placer_leader, namespace)", "refId": "namespace"},
             "definition": "label_values(placer_leader, namespace)", "refresh": 2, "current": {}, "hide": 0,
             "includeAll": False, "multi": False, "options": [], "sort": 1, "regex": ""},
            {"name": "profile", "label": "Profile", "type": "query", "datasource": DATASOURCE,
             "query": {"query": f"label_values(placer_schedule_attempts_total{{{NS}}}, profile)", "refId": "profile"},
             "definition": f"label_values(placer_schedule_attempts_total{{{NS}}}, profile)", "refresh": 2,
             "current": {}, "hide": 0, "includeAll": True, "allValue": ".*", "multi": True, "options": [],
             "sort": 1, "regex": ""},
        ]},
        "panels": layout(panels()),
    }


def text() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the file differs from what would be written")
    args = parser.parse_args(argv)
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text():
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run `make dashboard`", file=sys.stderr)
            return 1
        print(f"{OUTPUT.relative_to(ROOT)} is up to date")
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text(), encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
