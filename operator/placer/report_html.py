"""`placer simulate --html FILE`: the simulation as one self-contained web page.

A table of 200 placements is read; a page is looked at. This one shows, with nothing fetched from
anywhere (styles and the small filter script are inline, no fonts, images or links out):

- the run in numbers: pods placed, unschedulable, preempted, the cluster's cpu/memory/pods before
  and after;
- why the unschedulable pods could not go: each reason with how many of them it stopped;
- every node's cpu, memory and pod count before the simulated placements and after them (bars),
  with what it is (cordoned, NotReady, tainted, its zone) and the pods it received or lost;
- every placement: where the pod went, its total, kube-scheduler's message when it went nowhere,
  the victims of a preemption, and (unfolded) each plugin's score for the best `--top` nodes.

The numbers are simulate's own (`placer.simulate.placement`, the JSON of API.md §4) and the node
columns of the cluster, read before and after `place`; each element carries them as `data-*`
attributes too, so tools (and the tests) can read the page as data.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from placer.engine.cluster import CPU, MEMORY, PODS, ZONE_LABELS, ClusterState
from placer.simulate import Documents, Simulation, place, placement, prepare, read_documents, summary

__all__ = ["NodeUsage", "render_html", "simulate_with_report", "snapshot"]


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node's columns at one moment: cpu in millicores, memory in bytes, pods in pods."""

    name: str
    zone: str
    allocatable: tuple[int, int, int]
    requested: tuple[int, int, int]
    unschedulable: bool
    ready: bool
    taints: tuple[str, ...]


def snapshot(cluster: ClusterState) -> dict[str, NodeUsage]:
    """Every node's allocatable and requested cpu, memory and pods, by name."""
    usage: dict[str, NodeUsage] = {}
    for name in sorted(cluster.node_names()):
        slot = cluster.index[name]
        info = cluster.node(name)
        labels = info.labels if info is not None else {}
        usage[name] = NodeUsage(
            name=name,
            zone=next((labels[key] for key in ZONE_LABELS if key in labels), ""),
            allocatable=tuple(int(cluster.allocatable[slot, c]) for c in (CPU, MEMORY, PODS)),  # type: ignore[arg-type]
            requested=tuple(int(cluster.requested[slot, c]) for c in (CPU, MEMORY, PODS)),  # type: ignore[arg-type]
            unschedulable=bool(cluster.unschedulable[slot]),
            ready=bool(cluster.ready[slot]),
            taints=tuple(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in info.taints) if info else (),
        )
    return usage


def simulate_with_report(
    cluster_files: Sequence[Documents], profile_files: Sequence[Documents], top: int = 3
) -> tuple[Simulation, dict[str, NodeUsage]]:
    """`simulate_documents`, keeping the nodes' columns as they were before the first placement."""
    simulation = prepare(cluster_files, profile_files)
    before = snapshot(simulation.cluster)
    return place(simulation, top=top), before


def simulate_paths(
    cluster_paths: Sequence[Path], profile_paths: Sequence[Path], top: int = 3
) -> tuple[Simulation, dict[str, NodeUsage]]:
    return simulate_with_report([(p, read_documents(p)) for p in cluster_paths],
                                [(p, read_documents(p)) for p in profile_paths], top=top)


# ----------------------------------------------------------------------------------- formatting

RESOURCES = (("cpu", 0), ("memory", 1), ("pods", 2))


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _cpu(milli: int) -> str:
    cores = milli / 1000
    return f"{cores:.0f}" if cores == int(cores) else f"{cores:.2f}".rstrip("0")


def _memory(size: int) -> str:
    for unit, scale in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f}".removesuffix(".0") + unit
    return str(size)


def _amount(resource: str, value: int) -> str:
    return _cpu(value) if resource == "cpu" else _memory(value) if resource == "memory" else str(value)


def _percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def _bar(resource: str, before: int, after: int, allocatable: int) -> str:
    """Two segments on one track: what was requested before, and what the placements added (or, hatched,
    what evictions freed); the label says both in percent of allocatable."""
    b, a = _percent(before, allocatable), _percent(after, allocatable)
    low, high = min(b, a), max(b, a)
    over = " over" if a > 100 else ""
    change = "added" if a >= b else "freed"
    unit = " cores" if resource == "cpu" else ""
    title = (f"{resource}: {_amount(resource, before)} → {_amount(resource, after)} of "
             f"{_amount(resource, allocatable)}{unit} requested")
    label = f"{b:.0f}%" if round(a) == round(b) else f"{b:.0f}% → {a:.0f}%"
    return (
        f'<div class="bar{over}" title="{_e(title)}" data-resource="{resource}" data-before="{before}" '
        f'data-after="{after}" data-allocatable="{allocatable}"><div class="track">'
        f'<span class="seg base" style="width:{min(low, 100):.2f}%"></span>'
        f'<span class="seg {change}" style="width:{max(min(high, 100) - min(low, 100), 0):.2f}%"></span>'
        f'</div><span class="label">{label}</span></div>'
    )


PALETTE = ("#4a7bd0", "#2f9e77", "#e8a33d", "#9b59b6", "#d64545", "#16a2b8", "#7c8ea8", "#c2185b", "#8d6e63",
           "#5c6bc0", "#43a047", "#f4511e")


def _stack(scores: Mapping[str, int], weights: Mapping[str, int], colors: Mapping[str, str]) -> str:
    """The winner's total as one bar: each plugin's weighted score a segment, out of the most it could be."""
    most = sum(100 * weights.get(name, 1) for name in scores) or 1
    parts = sorted(scores.items(), key=lambda item: (-item[1] * weights.get(item[0], 1), item[0]))
    segments = "".join(
        f'<span class="{colors.get(name, "k")}" style="width:{100 * score * weights.get(name, 1) / most:.2f}%" '
        f'title="{_e(name)}: {score} &times; {weights.get(name, 1)}"></span>' for name, score in parts if score)
    keys = "".join(f'<b class="{colors.get(name, "k")}"></b>{_e(name)} {score}'
                   + (f"&times;{weights.get(name, 1)}" if weights.get(name, 1) != 1 else "")
                   for name, score in parts[:3] if score)
    return f'<div class="stack">{segments}</div><div class="keys">{keys}</div>'


def _badges(node: NodeUsage) -> str:
    badges = []
    if node.unschedulable:
        badges.append('<span class="badge warn" title="spec.unschedulable">cordoned</span>')
    if not node.ready:
        badges.append('<span class="badge bad" title="Ready condition is not True">NotReady</span>')
    if node.taints:
        badges.append(f'<span class="badge info" title="{_e(", ".join(node.taints))}">tainted</span>')
    return "".join(badges)


CSS = """
:root { --bg:#f6f7f9; --card:#fff; --ink:#1d2430; --muted:#5f6b7a; --line:#e3e7ec; --base:#7c8ea8;
  --added:#2f9e77; --freed:#e8a33d; --bad:#d64545; --warn:#e8a33d; --info:#4a7bd0; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); background: var(--bg); }
header { background: #1d2430; color: #fff; padding: 20px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; font-weight: 600; }
header .sources { color: #b8c2d0; font-size: 13px; }
main { padding: 20px 32px 48px; max-width: 1500px; }
h2 { font-size: 17px; margin: 28px 0 10px; }
h2 .hint { font-weight: normal; color: var(--muted); font-size: 13px; margin-left: 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.cards.wide { grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); margin-top: 12px; }
.card.resource .value { font-size: 18px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.card .value { font-size: 26px; font-weight: 650; }
.card .key { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card.good .value { color: var(--added); } .card.bad .value { color: var(--bad); }
.card.warn .value { color: var(--warn); }
.card .bar { margin-top: 6px; }
table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line);
  border-radius: 8px; overflow: hidden; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #eef1f5; font-weight: 600; font-size: 12px; color: var(--muted); text-transform: uppercase;
  letter-spacing: .03em; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:last-child td { border-bottom: none; }
.bar { display: flex; align-items: center; gap: 8px; min-width: 190px; }
.bar .track { flex: 1; height: 12px; background: #e6eaf0; border-radius: 6px; overflow: hidden; white-space: nowrap;
  font-size: 0; }
.bar .seg { display: inline-block; height: 100%; vertical-align: top; }
.bar .seg.base { background: var(--base); }
.bar .seg.added { background: var(--added); }
.bar .seg.freed { background: repeating-linear-gradient(45deg, var(--freed), var(--freed) 3px, #f6d49c 3px,
  #f6d49c 6px); }
.bar.over .track { box-shadow: 0 0 0 2px var(--bad); }
.bar.over .label { color: var(--bad); font-weight: 600; }
.bar .label { min-width: 78px; font-size: 12px; color: var(--ink); font-variant-numeric: tabular-nums; }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 9px; margin-left: 6px;
  color: #fff; vertical-align: 1px; }
.badge.bad { background: var(--bad); } .badge.warn { background: var(--warn); } .badge.info { background: var(--info); }
.badge.good { background: var(--added); }
.legend { color: var(--muted); font-size: 12px; margin: 0 0 8px; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -2px;
  margin: 0 4px 0 12px; }
.reasons td.count { width: 90px; }
.reasons .rbar { height: 10px; background: var(--bad); border-radius: 3px; }
.node-name, .pod { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px;
  white-space: nowrap; }
.stack { display: flex; height: 10px; width: 260px; background: #e6eaf0; border-radius: 5px; overflow: hidden;
  margin: 3px 0 2px; }
.stack span { display: block; height: 100%; }
.keys { font-size: 12px; color: var(--muted); }
.keys b { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin: 0 3px 0 8px; }
.keys b:first-child { margin-left: 0; }
.unschedulable .where { color: var(--bad); font-weight: 600; }
.preempted .where { color: var(--warn); font-weight: 600; }
.message { color: var(--muted); font-size: 13px; }
details summary { cursor: pointer; color: var(--info); font-size: 13px; }
table.scores { margin: 6px 0 4px; font-size: 12px; width: auto; max-width: 100%; }
table.scores td, table.scores th { padding: 3px 7px; }
table.scores th { text-transform: none; letter-spacing: 0; font-size: 11px; line-height: 1.2; position: static; }
.mini { height: 6px; background: #edf0f4; border-radius: 3px; margin-top: 2px; }
.mini i { display: block; height: 100%; border-radius: 3px; }
td.c { min-width: 52px; text-align: right; font-variant-numeric: tabular-nums; }
.k { background: #999; }
.scroll { overflow-x: auto; max-width: 100%; }
.best td { font-weight: 600; }
.controls { margin: 0 0 10px; display: flex; gap: 14px; align-items: center; color: var(--muted); }
.controls input[type=search] { padding: 5px 9px; border: 1px solid var(--line); border-radius: 6px; width: 280px; }
.empty { color: var(--muted); font-style: italic; }
"""

SCRIPT = """
(function () {
  var box = document.getElementById('filter'), only = document.getElementById('only-unschedulable');
  document.body.setAttribute('data-ready', 'true');  // the page's script ran (hack/browser_check.py reads it)
  if (!box || !only) return;
  function apply() {
    var q = box.value.toLowerCase();
    document.querySelectorAll('tr.placement').forEach(function (row) {
      var show = (!q || row.textContent.toLowerCase().indexOf(q) >= 0) &&
        (!only.checked || row.classList.contains('unschedulable'));
      row.style.display = show ? '' : 'none';
    });
  }
  box.addEventListener('input', apply); only.addEventListener('change', apply);
})();
"""


def _card(key: str, label: str, value: object, kind: str = "", extra: str = "") -> str:
    cls = f"card {kind}".strip()
    return (f'<div class="{cls}" data-key="{key}"><div class="value">{_e(value)}</div>'
            f'<div class="key">{_e(label)}</div>{extra}</div>')


def _totals(nodes: Iterable[NodeUsage]) -> tuple[list[int], list[int]]:
    allocatable, requested = [0, 0, 0], [0, 0, 0]
    for node in nodes:
        for i in range(3):
            allocatable[i] += node.allocatable[i]
            requested[i] += node.requested[i]
    return allocatable, requested


def _reasons(message: str | None, decision_reasons: Mapping[str, int]) -> list[str]:
    """The reasons that kept a pod off the nodes: the decision's own, else what its message says."""
    if decision_reasons:
        return list(decision_reasons)
    if not message:
        return []
    text = message.split(": ", 1)[1] if ": " in message else message
    return [text.rstrip(".")]


def _breakable(name: str) -> str:
    """A CamelCase plugin name that may wrap between its words in a narrow column."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "<wbr>", _e(name))


def _scores_table(
    scores: Sequence[Mapping[str, Any]], weights: Mapping[str, int], chosen: str | None, colors: Mapping[str, str]
) -> str:
    if not scores:
        return '<div class="empty">no feasible node was scored</div>'
    plugins = list(dict.fromkeys(name for s in scores for name in s["plugins"]))
    head = "".join(f'<th class="num" title="{_e(p)}, weight {weights.get(p, 1)}">{_breakable(p)}'
                   f'<br><small>&times;{weights.get(p, 1)}</small></th>' for p in plugins)
    rows = []
    for score in scores:
        cells = "".join(
            f'<td class="c" data-plugin="{_e(p)}" data-score="{score["plugins"].get(p, 0)}">'
            f'{score["plugins"].get(p, 0)}<div class="mini"><i class="{colors.get(p, "k")}" '
            f'style="width:{score["plugins"].get(p, 0)}%"></i></div></td>' for p in plugins)
        best = ' class="best"' if score["node"] == chosen else ""
        rows.append(f'<tr{best} data-node="{_e(score["node"])}" data-total="{score["total"]}">'
                    f'<td class="node-name">{_e(score["node"])}</td><td class="num">{score["total"]}</td>{cells}</tr>')
    return (f'<div class="scroll"><table class="scores"><thead><tr><th>node</th><th class="num">total</th>{head}</tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table></div>")


def _verdict(tried: Mapping[str, Any]) -> str:
    if tried["chosen"]:
        return "chosen"
    if tried["fits"]:
        return "fits, lower placement score"
    return "too few of the group fit" if tried["nodes"] else "no domain"


def _groups_section(placements: Sequence[Mapping[str, Any]], add: Any) -> None:
    """Groups with a topology key, by domain: each placement tried (nodes, pods that fit, score),
    the one chosen marked; nothing when no group has one."""
    groups: dict[str, Mapping[str, Any]] = {}
    for p in placements:
        group = p.get("group")
        if group and group.get("topologyKey") and group["name"] not in groups:
            groups[group["name"]] = group
    if not groups:
        return
    add('<section id="groups"><h2>Groups by domain<span class="hint">each pod group with a topology key: the '
        'domains it was tried in, how many of its pods fit there, the placement score where enough did '
        '(placer explain names who did not fit and why)</span></h2>')
    add('<table class="groups"><thead><tr><th>group</th><th>key</th><th>domain</th><th class="num">nodes</th>'
        '<th class="num">fit</th><th class="num">score</th><th>verdict</th></tr></thead><tbody>')
    for name, group in groups.items():
        tried = group["placements"] or [{"domain": "(none)", "nodes": 0, "pods": 0, "placed": 0, "fits": False,
                                    "chosen": False}]
        for t in tried:
            state = "chosen" if t["chosen"] else ("fits" if t["fits"] else "no")
            add(f'<tr class="group-placement {state}" data-group="{_e(name)}" data-domain="{_e(t["domain"])}" '
                f'data-chosen="{str(t["chosen"]).lower()}"><td>{_e(name)}'
                f'{"" if group["placed"] else " (not placed)"}</td><td>{_e(group["topologyKey"])}</td>'
                f'<td class="node-name">{_e(t["domain"])}{" ✓" if t["chosen"] else ""}</td>'
                f'<td class="num">{t["nodes"]}</td><td class="num">{t["placed"]}/{t["pods"]}</td>'
                f'<td class="num">{t.get("score", "")}</td><td>{_e(_verdict(t))}</td></tr>')
    add("</tbody></table></section>")


def render_html(
    simulation: Simulation, before: Mapping[str, NodeUsage], out: TextIO, *, sources: Sequence[str] = ()
) -> None:
    """The page, written to `out`."""
    after = snapshot(simulation.cluster)
    placements = [placement(d, simulation.groups.get(d.pod)) for d in simulation.decisions]
    totals = summary(simulation)
    weights_by_profile = {
        profile.name: {plugin.name: weight for plugin, weight in profile.scores}
        for profile in simulation.profiles.values()
    }
    received: Counter[str] = Counter(p["node"] for p in placements if p["node"])
    evicted: Counter[str] = Counter()
    victims = 0
    for p in placements:
        if p["preemption"]:
            victims += len(p["preemption"]["victims"])
            evicted[p["preemption"]["node"]] += len(p["preemption"]["victims"])
    preempting = sum(1 for p in placements if p["preemption"])
    plugin_names = sorted({name for p in placements for s in p["scores"] for name in s["plugins"]})
    colors = {name: f"k{i % len(PALETTE)}" for i, name in enumerate(plugin_names)}

    parts: list[str] = []
    add = parts.append
    add("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
    add('<meta name="viewport" content="width=device-width, initial-scale=1">')
    add("<title>Placer simulation</title>")
    palette = "".join(f".k{i} {{ background: {color}; }}" for i, color in enumerate(PALETTE))
    add(f"<style>{CSS}{palette}</style></head><body>")
    add("<header><h1>Placer simulation</h1>")
    if sources:
        add(f'<div class="sources">{" · ".join(_e(s) for s in sources)}</div>')
    add("</header><main>")

    # --- the run in numbers
    alloc_before, req_before = _totals(before.values())
    alloc_after, req_after = _totals(after.values())
    add('<section id="summary"><div class="cards">')
    add(_card("pods", "pending pods placed in order", totals["pods"]))
    add(_card("scheduled", "scheduled", totals["scheduled"], "good"))
    add(_card("unschedulable", "unschedulable", totals["unschedulable"], "bad" if totals["unschedulable"] else ""))
    add(_card("preemptions", f"by preemption ({victims} victims)", preempting, "warn" if preempting else ""))
    add(_card("nodes", "nodes", len(after)))
    add('</div><div class="cards wide">')
    for resource, i in RESOURCES:
        extra = _bar(resource, req_before[i], req_after[i], alloc_after[i] or alloc_before[i])
        value = f"{_percent(req_before[i], alloc_before[i]):.0f}% → {_percent(req_after[i], alloc_after[i]):.0f}%"
        add(_card(f"cluster-{resource}", f"cluster {resource} requested", value, "resource", extra))
    add("</div></section>")

    # --- why the unschedulable pods could not go
    stopped: Counter[str] = Counter()
    for d, p in zip(simulation.decisions, placements, strict=True):
        if p["node"] is None:
            for reason in _reasons(p["message"], d.reasons):
                stopped[reason] += 1
    add('<section id="reasons"><h2>Why pods could not go<span class="hint">each reason: how many unschedulable '
        "pods at least one node refused for it</span></h2>")
    if stopped:
        most = max(stopped.values())
        add('<table class="reasons"><thead><tr><th>reason</th><th class="num">pods</th><th></th></tr></thead><tbody>')
        for reason, count in sorted(stopped.items(), key=lambda item: (-item[1], item[0])):
            add(f'<tr data-reason="{_e(reason)}" data-pods="{count}"><td>{_e(reason)}</td><td class="num count">'
                f'{count}</td><td style="width:30%"><div class="rbar" style="width:{100 * count / most:.1f}%"></div>'
                "</td></tr>")
        add("</tbody></table>")
    else:
        add('<p class="empty">every pending pod found a node</p>')
    add("</section>")

    # --- nodes
    add('<section id="nodes"><h2>Nodes<span class="hint">requested before the simulated placements and after them, '
        "in percent of allocatable</span></h2>")
    add('<p class="legend"><i style="background:var(--base)"></i>before<i style="background:var(--added)"></i>'
        'added by the placements<i style="background:var(--freed)"></i>freed by preemption'
        '<i style="box-shadow:0 0 0 2px var(--bad);background:#fff"></i>over allocatable</p>')
    add('<table class="nodes"><thead><tr><th>node</th><th>zone</th><th>cpu</th><th>memory</th><th>pods</th>'
        '<th class="num">placed</th><th class="num">evicted</th></tr></thead><tbody>')
    for name, now in after.items():
        then = before.get(name, now)
        bars = "".join(f"<td>{_bar(resource, then.requested[i], now.requested[i], now.allocatable[i])}</td>"
                       for resource, i in RESOURCES)
        add(f'<tr class="node" data-node="{_e(name)}" data-placed="{received[name]}" data-evicted="{evicted[name]}">'
            f'<td><span class="node-name">{_e(name)}</span>{_badges(now)}</td><td>{_e(now.zone)}</td>{bars}'
            f'<td class="num">{received[name] or ""}</td><td class="num">{evicted[name] or ""}</td></tr>')
    add("</tbody></table></section>")

    _groups_section(placements, add)

    # --- placements
    add('<section id="placements"><h2>Placements<span class="hint">in queue order; unfold a row for each plugin\'s '
        "score on the best nodes</span></h2>")
    add('<div class="controls"><input type="search" id="filter" placeholder="filter pods, nodes, reasons…">'
        '<label><input type="checkbox" id="only-unschedulable"> only unschedulable</label></div>')
    add('<table class="placements"><thead><tr><th class="num">#</th><th>pod</th><th>profile</th><th>node</th>'
        '<th class="num">total</th><th>why</th></tr></thead><tbody>')
    for number, p in enumerate(placements, start=1):
        weights = weights_by_profile.get(p["profile"], {})
        best = p["scores"][0] if p["scores"] else None
        if p["node"] is None:
            status, where = "unschedulable", "unschedulable"
            why = f'<div class="message">{_e(p["message"] or "")}</div>'
        elif p["preemption"]:
            status, where = "preempted", f"{p['node']}"
            victims_list = ", ".join(_e(v) for v in p["preemption"]["victims"])
            why = (f'<span class="badge warn">preemption</span> evicts {victims_list}'
                   f'<div class="message">{_e(p["message"] or "")}</div>')
        else:
            status, where = "scheduled", p["node"]
            why = _stack(best["plugins"], weights, colors) if best else ""
        extras = []
        for volume in p.get("volumes") or []:
            target = volume["volume"] or "a new volume"
            extras.append(f'binds {_e(volume["claim"])} to {_e(target)}')
        for device in p.get("devices") or []:
            line = (f'allocates {"a share of " if "shareID" in device else ""}{_e(device.get("driver", ""))}/'
                    f'{_e(device.get("device", ""))} for {_e(device.get("claim", ""))}')
            usage = device.get("capacity") or {}
            taken = [f'{_e(amount)} {_e(name)}' + (f' ({_e(usage[name]["left"])} left)' if name in usage else "")
                     for name, amount in (device.get("consumedCapacity") or {}).items()]
            if taken:
                line += f' ({", ".join(taken)})'
            if device.get("bindingConditions"):
                line += f' (to be prepared: {_e(", ".join(device["bindingConditions"]))})'
            extras.append(line)
        group = p.get("group")
        if group:
            domain = group.get("placement")
            extras.append(f'group {_e(group.get("name", ""))}' + ("" if group.get("placed") else " (not placed)")
                          + (f' in {_e(group["topologyKey"])}={_e(domain)}' if domain is not None else ""))
        if extras:
            why += f'<div class="message">{"; ".join(extras)}</div>'
        details = ""
        if p["scores"]:
            details = (f"<details><summary>scores of the best {len(p['scores'])} node(s)</summary>"
                       f"{_scores_table(p['scores'], weights, p['node'], colors)}</details>")
        total = best["total"] if best and p["node"] is not None and not p["preemption"] else ""
        add(f'<tr class="placement {status}" data-pod="{_e(p["pod"])}" data-profile="{_e(p["profile"])}" '
            f'data-node="{_e(p["node"] or "")}" data-total="{total}">'
            f'<td class="num">{number}</td><td class="pod">{_e(p["pod"])}</td><td>{_e(p["profile"])}</td>'
            f'<td class="where node-name">{_e(where)}</td><td class="num">{total}</td><td>{why}{details}</td></tr>')
    if not placements:
        add('<tr><td colspan="6" class="empty">no pending pod is owned by these profiles</td></tr>')
    add("</tbody></table></section>")

    if simulation.warnings:
        add('<section id="warnings"><h2>Warnings</h2><ul>')
        add("".join(f"<li>{_e(w)}</li>" for w in simulation.warnings))
        add("</ul></section>")
    data = json.dumps({"placements": placements, "summary": totals}).replace("</", "<\\/")
    add(f'<script type="application/json" id="simulation">{data}</script>')
    add(f"<script>{SCRIPT}</script>")
    add("</main></body></html>\n")
    out.write("".join(parts))
