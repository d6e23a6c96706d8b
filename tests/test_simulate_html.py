"""`placer simulate --html FILE`: one self-contained page whose numbers are simulate's JSON, read
here without a browser (`make html-check` opens it in headless Chromium)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.cli import main
from placer.testing import node, pod
from placer.testing_devices import claim_pod, device, device_class, request, resource_claim, resource_slice

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
PROFILES = [ROOT / "examples" / "profiles" / "all.yaml", ROOT / "examples" / "profiles" / "priority.yaml"]


class Element:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.text: list[str] = []

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def all_text(self) -> str:
        return "".join(self.text) + "".join(child.all_text() for child in self.children)

    def find(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and (cls is None or cls in child.classes):
                found.append(child)
            found.extend(child.find(tag, cls))
        return found


class Page(HTMLParser):
    """The page as a tree (void elements closed at once), its doctype and every raw attribute."""

    VOID = {"meta", "br", "input", "wbr", "img", "link", "hr"}

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {}, None)
        self.current = self.root
        self.doctype = ""
        self.attributes: list[tuple[str, str, str | None]] = []
        self.feed(text)
        self.close()

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs), self.current)
        self.attributes.extend((tag, key, value) for key, value in attrs)
        self.current.children.append(element)
        if tag not in self.VOID:
            self.current = element

    def handle_endtag(self, tag: str) -> None:
        node_ = self.current
        while node_ is not self.root and node_.tag != tag:
            node_ = node_.parent  # type: ignore[assignment]
        assert node_ is not self.root, f"</{tag}> closes nothing"
        self.current = node_.parent  # type: ignore[assignment]

    def handle_data(self, data: str) -> None:
        self.current.text.append(data)


def simulate_html(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clusters: list[Path], profiles: list[Path]
) -> tuple[dict[str, Any], str, Page]:
    page_path = tmp_path / "simulation.html"
    args = ["simulate", *(a for c in clusters for a in ("--cluster", str(c))),
            *(a for p in profiles for a in ("--profile", str(p))), "-o", "json", "--html", str(page_path)]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = page_path.read_text(encoding="utf-8")
    return json.loads(captured.out), text, Page(text)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Page]:
    """The bundled sample cluster with every example profile (preemption included)."""
    page_path = tmp_path_factory.mktemp("html") / "simulation.html"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["simulate", "--cluster", str(EXAMPLE_CLUSTER), "--profile", str(PROFILES[0]), "--profile",
                     str(PROFILES[1]), "-o", "json", "--html", str(page_path)])
    assert code == 0
    text = page_path.read_text(encoding="utf-8")
    return json.loads(out.getvalue()), text, Page(text)


def test_page_is_self_contained(example: tuple[dict[str, Any], str, Page]) -> None:
    _, text, page = example
    assert page.doctype.lower() == "doctype html"
    assert page.root.find("html") and page.root.find("title")
    # nothing is fetched: no src/href/srcset/action attributes at all, no CSS url() or @import, no scheme
    assert [(tag, key) for tag, key, _ in page.attributes if key in {"src", "href", "srcset", "action", "data",
                                                                     "poster", "formaction"}] == []
    assert not page.root.find("link") and not page.root.find("iframe") and not page.root.find("img")
    assert not re.search(r"url\s*\(|@import|https?:|//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE)
    for script in page.root.find("script"):
        assert "src" not in script.attrs
    assert not re.search(r"\b(fetch|XMLHttpRequest|WebSocket|EventSource|importScripts)\b", text)


def test_placements_match_the_json(example: tuple[dict[str, Any], str, Page]) -> None:
    result, _, page = example
    rows = page.root.find("tr", "placement")
    placements = result["placements"]
    assert len(rows) == len(placements) > 200
    assert any(p["preemption"] for p in placements) and any(p["node"] is None for p in placements)
    for row, placement in zip(rows, placements, strict=True):
        assert row.attrs["data-pod"] == placement["pod"]
        assert row.attrs["data-profile"] == placement["profile"]
        assert (row.attrs["data-node"] or None) == placement["node"]
        cells = row.find("td")
        assert cells[1].all_text() == placement["pod"]
        if placement["node"] is None:
            assert "unschedulable" in row.classes
            assert cells[3].all_text() == "unschedulable"
            assert placement["message"] in row.all_text()
        elif placement["preemption"]:
            assert "preempted" in row.classes and cells[3].all_text() == placement["node"]
            for victim in placement["preemption"]["victims"]:
                assert victim in row.all_text()
        else:
            total = placement["scores"][0]["total"]
            assert row.attrs["data-total"] == str(total) and cells[4].all_text() == str(total)
            assert cells[3].all_text() == placement["node"]
        # the unfolded table: each of the top nodes with its total and every plugin's score
        score_rows = [r for table in row.find("table", "scores") for r in table.find("tr") if "data-node" in r.attrs]
        assert len(score_rows) == len(placement["scores"])
        for score_row, score in zip(score_rows, placement["scores"], strict=True):
            assert score_row.attrs["data-node"] == score["node"]
            assert score_row.attrs["data-total"] == str(score["total"])
            shown = {c.attrs["data-plugin"]: int(c.attrs["data-score"] or "-1") for c in score_row.find("td")
                     if "data-plugin" in c.attrs}
            assert shown == score["plugins"]
            for cell in score_row.find("td"):
                if "data-plugin" in cell.attrs:
                    assert cell.all_text().strip() == cell.attrs["data-score"]


def test_summary_and_embedded_json(example: tuple[dict[str, Any], str, Page]) -> None:
    result, _, page = example
    cards = {c.attrs["data-key"]: c for c in page.root.find("div", "card")}
    for key in ("pods", "scheduled", "unschedulable"):
        assert cards[key].find("div", "value")[0].all_text() == str(result["summary"][key])
    preempted = [p for p in result["placements"] if p["preemption"]]
    assert cards["preemptions"].find("div", "value")[0].all_text() == str(len(preempted))
    [blob] = [s for s in page.root.find("script") if s.attrs.get("type") == "application/json"]
    assert json.loads(blob.all_text()) == result


def test_nodes_before_and_after(example: tuple[dict[str, Any], str, Page]) -> None:
    result, _, page = example
    rows = page.root.find("tr", "node")
    nodes = [d for d in yaml.load_all(EXAMPLE_CLUSTER.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
             for d in (d["items"] if d["kind"] == "List" else [d]) if d["kind"] == "Node"]
    assert sorted(r.attrs["data-node"] for r in rows) == sorted(n["metadata"]["name"] for n in nodes)
    placed: dict[str, int] = {}
    evicted: dict[str, int] = {}
    for p in result["placements"]:
        if p["node"]:
            placed[p["node"]] = placed.get(p["node"], 0) + 1
        if p["preemption"]:
            evicted[p["node"]] = evicted.get(p["node"], 0) + len(p["preemption"]["victims"])
    for row in rows:
        name = row.attrs["data-node"]
        assert row.attrs["data-placed"] == str(placed.get(name, 0))
        assert row.attrs["data-evicted"] == str(evicted.get(name, 0))
        bars = {b.attrs["data-resource"]: b for b in row.find("div", "bar")}
        assert set(bars) == {"cpu", "memory", "pods"}
        pods = bars["pods"]
        assert int(pods.attrs["data-after"]) - int(pods.attrs["data-before"]) == placed.get(name, 0) - evicted.get(
            name, 0)
    reasons = {r.attrs["data-reason"]: int(r.attrs["data-pods"])
               for r in page.root.find("tr") if "data-reason" in r.attrs}
    unschedulable = [p for p in result["placements"] if p["node"] is None]
    for reason, count in reasons.items():
        assert count == sum(1 for p in unschedulable if reason in p["message"]), reason


def test_small_cluster_numbers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Exact before/after columns on a cluster small enough to work out by hand."""
    cluster = tmp_path / "cluster.yaml"
    objects = [
        node("a", cpu="4", memory="8Gi", labels={"topology.kubernetes.io/zone": "z1"}),
        node("b", cpu="2", memory="4Gi", unschedulable=True),
        pod("running", node_name="a", cpu="1", memory="2Gi"),
        pod("web", cpu="2", memory="1Gi"),
        pod("huge", cpu="16", memory="1Gi"),
    ]
    cluster.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                       "metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}}))
    result, text, page = simulate_html(capsys, tmp_path, [cluster], [profile])
    assert [(p["pod"], p["node"]) for p in result["placements"]] == [("default/huge", None), ("default/web", "a")]
    rows = {r.attrs["data-node"]: r for r in page.root.find("tr", "node")}
    bars = {k: b.attrs for k, b in ((b.attrs["data-resource"], b) for b in rows["a"].find("div", "bar"))}
    assert (bars["cpu"]["data-before"], bars["cpu"]["data-after"], bars["cpu"]["data-allocatable"]) == (
        "1000", "3000", "4000")
    assert (bars["memory"]["data-before"], bars["memory"]["data-after"]) == (str(2 * 2**30), str(3 * 2**30))
    assert (bars["pods"]["data-before"], bars["pods"]["data-after"], bars["pods"]["data-allocatable"]) == (
        "1", "2", "110")
    assert "25% → 75%" in rows["a"].all_text()  # cpu, in percent of allocatable
    assert "z1" in rows["a"].all_text() and "cordoned" in rows["b"].all_text()
    reasons = {r.attrs["data-reason"]: r.attrs["data-pods"] for r in page.root.find("tr") if "data-reason" in r.attrs}
    assert reasons == {"Insufficient cpu": "1", "node(s) were unschedulable": "1"}
    assert "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable." in text


def test_unwritable_html_path_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["simulate", "--cluster", str(EXAMPLE_CLUSTER), "--profile", str(PROFILES[0]),
                 "--html", str(tmp_path / "missing" / "page.html")])
    assert code == 2
    assert "--html" in capsys.readouterr().err


def test_shared_and_prepared_devices(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A placement taking a share of a GPU says what it takes and what is left; one whose device must
    be prepared says which conditions."""
    gpus = "gpu.example.com"
    objects = [
        node("a", cpu="4", memory="8Gi"),
        device_class("shared", f'device.driver == "{gpus}"'),
        resource_slice("a-gpus", gpus, node="a", devices=[
            device("gpu-0", capacity={"memory": "80Gi"}, multiple=True),
            device("accel-0", binding_conditions=["Attached"])]),
        resource_claim("m", requests=[request("mem", "shared", capacity={"memory": "30Gi"})]),
        resource_claim("acc", requests=[request("any", "shared")]),  # all of gpu-0's memory: no room, so accel-0
        claim_pod("p", claims={"gpu": "m"}, created="2025-01-01T00:00:00Z"),
        claim_pod("q", claims={"dev": "acc"}, created="2025-01-02T00:00:00Z"),
    ]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                       "metadata": {"name": "default"}, "spec": {"schedulerName": "placer"}}))
    _, text, _ = simulate_html(capsys, tmp_path, [cluster], [profile])
    assert "allocates a share of gpu.example.com/gpu-0 for default/m (30Gi memory (50Gi left))" in text
    assert "allocates gpu.example.com/accel-0 for default/acc (to be prepared: Attached)" in text
