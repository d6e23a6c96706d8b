"""`render_json` writes what `json.dump(..., indent=2)` of API.md §4's object writes: the same content
in the same key order (the layout may differ: one placement a line), and valid JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import yaml
from placer.simulate import Simulation, placement, render_json, simulate, summary
from placer.testing import node, pod


def reference(simulation: Simulation) -> str:
    """The same object through the pure-Python encoder, as `json.dump(..., indent=2)` printed it."""
    placements = [placement(d) for d in simulation.decisions]
    return json.dumps({"placements": placements, "summary": summary(simulation)}, indent=2) + "\n"


def rendered(simulation: Simulation) -> str:
    out = io.StringIO()
    render_json(simulation, out)
    return out.getvalue()


def run(tmp_path: Path, objects: list[dict[str, Any]], top: int = 3) -> Simulation:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False))
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(yaml.safe_dump({"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                        "metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}}))
    return simulate([cluster], [profiles], top=top)


def same_json(text: str, expected: str) -> None:
    assert text.endswith("\n")
    parsed = json.loads(text)
    assert parsed == json.loads(expected)
    # the same keys in the same order, all the way down
    assert json.dumps(parsed) == json.dumps(json.loads(expected))


def test_placements_scores_and_unschedulable_pods(tmp_path: Path) -> None:
    simulation = run(tmp_path, [
        node("a", cpu="2"), node("b", cpu="4", labels={"disktype": "ssd"}),
        node("c", cpu="1", taints=["dedicated=gpu:NoSchedule"]),
        pod("web", cpu="500m", memory="256Mi"), pod("db", cpu="1", node_selector={"disktype": "ssd"}),
        pod("big", cpu="64"), pod("gpu", cpu="100m", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        pod("bad", cpu="lots"),
    ])
    assert [d.node is None for d in simulation.decisions].count(True) == 2
    text = rendered(simulation)
    same_json(text, reference(simulation))
    assert len(text.splitlines()) == len(simulation.decisions) + 5  # a placement a line


def test_top_zero_and_no_pending_pods(tmp_path: Path) -> None:
    simulation = run(tmp_path, [node("a"), pod("web", cpu="1")], top=0)
    same_json(rendered(simulation), reference(simulation))
    empty = run(tmp_path, [node("a"), pod("bound", cpu="1", node_name="a")])
    assert not empty.decisions
    text = rendered(empty)
    same_json(text, reference(empty))
    assert json.loads(text) == {"placements": [], "summary": {"pods": 0, "scheduled": 0, "unschedulable": 0}}
