"""`placer simulate` through `placer.cli.main`: the bundled example, small hand-written clusters,
the JSON of API.md §4, the table, and invalid input (exit 2 naming the file, document and field)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.cli import main
from placer.engine.parsing import parse_node, parse_pod, parse_timestamp
from placer.engine.profile import DEFAULT_SCORES
from placer.testing import node, node_metrics, pod
from placer.testing_devices import claim_pod, device, device_class, request, resource_claim, resource_slice

from tests.cli_helpers import run, run_json, write

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
EXAMPLE_PROFILES = ROOT / "examples" / "profiles" / "all.yaml"


def profile_doc(name: str, scheduler: str = "placer", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, **spec}}


# ------------------------------------------------------------------------ the bundled example


@pytest.fixture(scope="module")
def example_docs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cluster: list[dict[str, Any]] = []
    for doc in yaml.load_all(EXAMPLE_CLUSTER.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        cluster.extend(doc["items"] if doc["kind"] == "List" else [doc])
    profiles = [d for d in yaml.safe_load_all(EXAMPLE_PROFILES.read_text()) if d]
    return cluster, profiles


@pytest.fixture(scope="module")
def example_result(example_docs: Any) -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["simulate", "--cluster", str(EXAMPLE_CLUSTER), "--profile", str(EXAMPLE_PROFILES),
                     "--output", "json"]) == 0
    return json.loads(out.getvalue())


def test_example_json_shape(example_result: dict[str, Any]) -> None:
    assert set(example_result) == {"placements", "summary"}
    assert example_result["summary"] == {"pods": 207, "scheduled": 200, "unschedulable": 7}
    for placement in example_result["placements"]:
        assert list(placement) == ["pod", "profile", "node", "message", "scores", "volumes", "devices", "preemption"]
        if placement["node"] is None:
            assert placement["scores"] == []
            assert placement["message"].startswith("0/50 nodes are available: ")
            assert placement["message"].endswith(".")
        else:
            assert placement["message"] is None
            assert 1 <= len(placement["scores"]) <= 3
            assert placement["scores"][0]["node"] == placement["node"]
            for score in placement["scores"]:
                assert list(score) == ["node", "total", "plugins"]
                assert all(0 <= v <= 100 for v in score["plugins"].values())


def test_example_totals_are_weighted_sums_best_first(example_result: dict[str, Any], example_docs: Any) -> None:
    _, profiles = example_docs
    weights: dict[str, dict[str, int]] = {}
    for doc in profiles:
        listed = doc["spec"].get("scores")
        refs = listed if listed is not None else DEFAULT_SCORES
        weights[doc["metadata"]["name"]] = {ref["name"]: ref.get("weight", 1) for ref in refs}
    for placement in example_result["placements"]:
        expected_plugins = weights[placement["profile"]]
        keys = []
        for score in placement["scores"]:
            assert set(score["plugins"]) == set(expected_plugins)
            assert score["total"] == sum(expected_plugins[n] * v for n, v in score["plugins"].items())
            keys.append((-score["total"], score["node"]))
        assert keys == sorted(keys), placement["pod"]


def test_example_queue_order_profiles_and_skipped_pods(example_result: dict[str, Any], example_docs: Any) -> None:
    cluster, profiles = example_docs
    owner = {d["spec"]["schedulerName"]: d["metadata"]["name"] for d in profiles}
    pending = [
        d for d in cluster
        if d["kind"] == "Pod" and not d["spec"].get("nodeName") and d["spec"].get("schedulerName") in owner
    ]
    pending.sort(key=lambda d: (-d["spec"].get("priority", 0), parse_timestamp(d["metadata"]["creationTimestamp"]),
                                f"{d['metadata']['namespace']}/{d['metadata']['name']}"))
    placements = example_result["placements"]
    assert [p["pod"] for p in placements] == [f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in pending]
    assert [p["profile"] for p in placements] == [owner[d["spec"]["schedulerName"]] for d in pending]
    others = [d for d in cluster if d["kind"] == "Pod" and not d["spec"].get("nodeName")
              and d["spec"].get("schedulerName") == "default-scheduler"]
    assert len(others) == 5
    other_keys = {f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in others}
    assert not other_keys & {p["pod"] for p in placements}


def test_example_placements_respect_capacity_and_constraints(example_result: dict[str, Any], example_docs: Any) -> None:
    cluster, _ = example_docs
    nodes = {d["metadata"]["name"]: parse_node(d) for d in cluster if d["kind"] == "Node"}
    pods = {f"{d['metadata']['namespace']}/{d['metadata']['name']}": d for d in cluster if d["kind"] == "Pod"}
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def count(info: Any, node_name: str) -> None:
        for resource, amount in info.requests.items():
            used[node_name][resource] += amount
        used[node_name]["pods"] += 1

    for raw in pods.values():
        info = parse_pod(raw)
        if info.node_name and not info.terminal:
            count(info, info.node_name)
    busy = {"small-03", "medium-07", "large-02"}
    for placement in example_result["placements"]:
        if placement["node"] is None:
            continue
        raw = pods[placement["pod"]]
        info = parse_pod(raw)
        target = nodes[placement["node"]]
        count(info, target.name)
        assert target.ready and not target.unschedulable, placement
        if target.name.startswith("gpu-"):
            assert any(t.key == "dedicated" for t in info.tolerations), placement
        for key, value in info.node_selector.items():
            assert target.labels.get(key) == value
        if placement["profile"] == "require-label":
            assert target.labels.get("cpu") == "true"
        if placement["profile"] == "avoid-busy":
            assert target.name not in busy
    for name, totals in used.items():
        for resource, amount in totals.items():
            assert amount <= nodes[name].allocatable.get(resource, 0), (name, resource)


def test_example_table(capsys: pytest.CaptureFixture[str], example_result: dict[str, Any]) -> None:
    code, out, _ = run(capsys, "--cluster", EXAMPLE_CLUSTER, "--profile", EXAMPLE_PROFILES)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["POD", "PROFILE", "NODE", "SCORE", "REASON"]
    assert len(lines) == 1 + 207 + 2
    assert lines[-2:] == ["", "207 pods: 200 scheduled, 7 unschedulable"]
    # the same decisions as the JSON, row by row
    for line, placement in zip(lines[1:-2], example_result["placements"], strict=True):
        cells = line.split(maxsplit=4)
        assert cells[:2] == [placement["pod"], placement["profile"]]
        if placement["node"] is None:
            assert cells[2:] == ["unschedulable", "-", placement["message"]]
        else:
            assert cells[2:4] == [placement["node"], str(placement["scores"][0]["total"])]


# ------------------------------------------------------------------------ small hand-written files


def two_nodes() -> list[dict[str, Any]]:
    return [node("a", cpu="4", memory="8Gi"), node("b", cpu="8", memory="8Gi"),
            pod("x", cpu="1", memory="2Gi", node_name="a")]


PACK = profile_doc(
    "pack",
    filters=[{"name": "NodeResourcesFit"}],
    scores=[
        {"name": "NodeResourcesFit", "weight": 2, "args": {"scoringStrategy": {"type": "MostAllocated"}}},
        {"name": "PreferNode", "weight": 3, "args": {"nodes": ["b"]}},
    ],
)


def test_hand_computed_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", *two_nodes(), pod("p", cpu="1", memory="1Gi"))
    profiles = write(tmp_path / "profiles.yaml", PACK)
    # MostAllocated: a (2 cpu of 4, 3Gi of 8Gi) 43, b (1 of 8, 1Gi of 8Gi) 12; PreferNode b 100
    assert run_json(capsys, "--cluster", cluster, "--profile", profiles) == {
        "placements": [
            {
                "pod": "default/p",
                "profile": "pack",
                "node": "b",
                "message": None,
                "scores": [
                    {"node": "b", "total": 2 * 12 + 3 * 100, "plugins": {"NodeResourcesFit": 12, "PreferNode": 100}},
                    {"node": "a", "total": 2 * 43, "plugins": {"NodeResourcesFit": 43, "PreferNode": 0}},
                ],
                "volumes": [],
                "devices": [],
                "preemption": None,
            }
        ],
        "summary": {"pods": 1, "scheduled": 1, "unschedulable": 0},
    }


def test_table_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", *two_nodes(),
                    pod("p", cpu="1", memory="1Gi", created="2025-01-01T00:00:00Z"),
                    pod("big", cpu="64", created="2025-01-02T00:00:00Z"))
    profiles = write(tmp_path / "profiles.yaml", PACK)
    code, out, err = run(capsys, "--cluster", cluster, "--profile", profiles)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "POD          PROFILE  NODE           SCORE  REASON",
        "default/p    pack     b              324    PreferNode 100, NodeResourcesFit 12",
        "default/big  pack     unschedulable  -      0/2 nodes are available: 2 Insufficient cpu.",
        "",
        "2 pods: 1 scheduled, 1 unschedulable",
    ]


def test_each_placement_counts_against_its_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods = [pod(f"p{i}", cpu="1", created=f"2025-01-01T00:00:0{i}Z") for i in range(1, 4)]
    pods.append(pod("p4", cpu="4", created="2025-01-01T00:00:04Z"))
    cluster = write(tmp_path / "cluster.yaml", node("a", cpu="2"), node("b", cpu="4"), *pods)
    profiles = write(tmp_path / "profiles.yaml", profile_doc("pref", scores=[{"name": "PreferNode",
                                                                               "args": {"nodes": ["a"]}}]))
    result = run_json(capsys, "--cluster", cluster, "--profile", profiles)
    assert [(p["pod"], p["node"], p["message"]) for p in result["placements"]] == [
        ("default/p1", "a", None),
        ("default/p2", "a", None),
        ("default/p3", "b", None),  # a is full now
        ("default/p4", None, "0/2 nodes are available: 2 Insufficient cpu."),  # b has 3 cpu left
    ]
    assert result["placements"][1]["scores"] == [
        {"node": "a", "total": 100, "plugins": {"PreferNode": 100}},
        {"node": "b", "total": 0, "plugins": {"PreferNode": 0}},
    ]
    assert result["placements"][2]["scores"] == [{"node": "b", "total": 0, "plugins": {"PreferNode": 0}}]
    assert result["summary"] == {"pods": 4, "scheduled": 3, "unschedulable": 1}


def test_queue_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods = [
        pod("old-low", priority=0, created="2025-01-01T00:00:00Z"),
        pod("new-high", priority=1000, created="2025-01-05T00:00:00Z"),
        pod("mid-b", priority=100, created="2025-01-03T00:00:00Z"),
        pod("mid-a", priority=100, created="2025-01-03T00:00:00Z"),
        pod("mid-a", priority=100, created="2025-01-03T00:00:00Z", namespace="aaa"),
        pod("mid-old", priority=100, created="2025-01-02T00:00:00Z"),
        pod("no-priority", created="2024-12-31T00:00:00Z"),
    ]
    cluster = write(tmp_path / "cluster.yaml", node("a"), *pods)
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d"))
    result = run_json(capsys, "--cluster", cluster, "--profile", profiles)
    assert [p["pod"] for p in result["placements"]] == [
        "default/new-high", "default/mid-old", "aaa/mid-a", "default/mid-a", "default/mid-b", "default/no-priority",
        "default/old-low",
    ]


def test_only_pending_pods_of_our_schedulers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deleting = pod("deleting")
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    cluster = write(
        tmp_path / "cluster.yaml",
        node("a"),
        pod("ours"),
        pod("theirs", scheduler="default-scheduler"),
        pod("other", scheduler="someone-else"),
        pod("bound", cpu="1", node_name="a"),
        pod("failed", phase="Failed"),
        deleting,
        pod("second", scheduler="second-scheduler"),
    )
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d"), profile_doc("two", "second-scheduler"))
    result = run_json(capsys, "--cluster", cluster, "--profile", profiles)
    assert [(p["pod"], p["profile"]) for p in result["placements"]] == [("default/ours", "d"),
                                                                       ("default/second", "two")]


def test_list_documents_and_several_cluster_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = write(tmp_path / "nodes.yaml", {"apiVersion": "v1", "kind": "List",
                                             "items": [node("a", cpu="1"), node("b", cpu="2")]})
    pods = write(tmp_path / "pods.yaml",
                 {"apiVersion": "v1", "kind": "PodList", "items": [pod("bound", cpu="1500m", node_name="b")]},
                 pod("p", cpu="800m"))
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d"))
    result = run_json(capsys, "--cluster", nodes, "--cluster", pods, "--profile", profiles)
    # b has only 500m left after the bound pod, which came in another file
    assert [(p["pod"], p["node"]) for p in result["placements"]] == [("default/p", "a")]


def test_node_metrics_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(
        tmp_path / "cluster.yaml",
        node("busy", cpu="4"), node("idle", cpu="4"), node("quiet", cpu="4"),
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetricsList",
         "items": [node_metrics("busy", "3900m", "1Gi"), node_metrics("idle", "100m", "1Gi")]},
        node_metrics("quiet", "2", "1Gi"),
        pod("p", cpu="100m"),
    )
    profiles = write(tmp_path / "profiles.yaml", profile_doc(
        "avoid-busy",
        filters=[{"name": "NodeUtilization", "args": {"cpuThreshold": 0.8}}],
        scores=[{"name": "NodeUtilization", "weight": 3}, {"name": "PreferNode", "args": {"nodes": ["quiet"]}}],
    ))
    code, out, err = run(capsys, "--cluster", cluster, "--profile", profiles, "--output", "json")
    assert (code, err) == (0, "")
    placement = json.loads(out)["placements"][0]
    # busy (97.5% cpu) is filtered; idle scores 100 x 3 against quiet's 0 x 3 + 100
    assert placement["node"] == "idle"
    assert [(s["node"], s["total"]) for s in placement["scores"]] == [("idle", 300), ("quiet", 100)]


def test_no_metrics_warning_and_profile_conflict_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", node("a"), pod("p"))
    profiles = write(
        tmp_path / "profiles.yaml",
        profile_doc("first", scores=[{"name": "NodeUtilization"}]),
        profile_doc("second"),
    )
    code, out, err = run(capsys, "--cluster", cluster, "--profile", profiles, "--output", "json")
    assert code == 0
    assert json.loads(out)["placements"][0]["profile"] == "first"
    assert err.splitlines() == [
        'warning: profile "second": Conflict: schedulerName "placer" is already served by profile "first"; ignored',
        'warning: profile "first": NodeUtilization: no NodeMetrics are available; every node passes and scores alike',
    ]


def test_the_older_profile_keeps_a_contested_scheduler_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    newer = profile_doc("aaa-newer")
    newer["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    older = profile_doc("zzz-older")
    older["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    cluster = write(tmp_path / "cluster.yaml", node("a"), pod("p", cpu="1"))
    profiles = write(tmp_path / "profiles.yaml", newer, older)
    code = main(["simulate", "--cluster", str(cluster), "--profile", str(profiles), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["placements"][0]["profile"] == "zzz-older"
    assert 'profile "aaa-newer": Conflict: schedulerName "placer" is already served by profile "zzz-older"' in err


def test_a_shadow_profile_places_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """API.md §5: a Shadow profile's own schedulerName owns no pods, and claims it from no one."""
    shadow = profile_doc("a-shadow", mode="Shadow", shadowOf="default-scheduler")
    shadow["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    active = profile_doc("b-active")
    active["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    cluster = write(tmp_path / "cluster.yaml", node("a"), pod("p", cpu="1"))
    profiles = write(tmp_path / "profiles.yaml", shadow, active)
    code = main(["simulate", "--cluster", str(cluster), "--profile", str(profiles), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["placements"][0]["profile"] == "b-active"
    assert 'profile "a-shadow": mode Shadow (shadowOf "default-scheduler") owns no pods; ignored' in err


def test_invalid_pod_is_reported_as_unschedulable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", node("a"), pod("bad", cpu="1.2.3"), pod("good", cpu="1"))
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d"))
    result = run_json(capsys, "--cluster", cluster, "--profile", profiles)
    by_pod = {p["pod"]: p for p in result["placements"]}
    assert by_pod["default/bad"]["node"] is None
    assert by_pod["default/bad"]["message"].startswith(
        "invalid pod default/bad: spec.containers[0].resources.requests.cpu: '1.2.3' is not a valid quantity"
    )
    assert by_pod["default/good"]["node"] == "a"
    assert result["summary"] == {"pods": 2, "scheduled": 1, "unschedulable": 1}


def test_empty_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", pod("p"))
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d"))
    result = run_json(capsys, "--cluster", cluster, "--profile", profiles)
    assert result["placements"][0]["message"] == "no nodes available to schedule pods"


def test_top_n(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", *[node(f"n{i}", cpu=str(i)) for i in range(1, 7)], pod("p", cpu="1"))
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d", scores=[{"name": "NodeResourcesFit"}]))
    # LeastAllocated on cpu and memory (8Gi, 1 cpu request and 200Mi default): the biggest first
    default = run_json(capsys, "--cluster", cluster, "--profile", profiles)["placements"][0]["scores"]
    assert [s["node"] for s in default] == ["n6", "n5", "n4"]
    five = run_json(capsys, "--cluster", cluster, "--profile", profiles, "--top", "5")["placements"][0]["scores"]
    assert [s["node"] for s in five] == ["n6", "n5", "n4", "n3", "n2"]
    # n6: cpu (6000-1000)*100/6000 = 83, memory (8Gi-200Mi)*100/8Gi = 97: 90
    assert five[0]["plugins"] == {"NodeResourcesFit": 90}
    many = run_json(capsys, "--cluster", cluster, "--profile", profiles, "--top", "50")["placements"][0]["scores"]
    assert len(many) == 6


def test_top_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "cluster.yaml", node("a"), pod("p"))
    profiles = write(tmp_path / "profiles.yaml", profile_doc("d"))
    assert run_json(capsys, "--cluster", cluster, "--profile", profiles, "--top", "0")["placements"][0]["scores"] == []
    code, out, _ = run(capsys, "--cluster", cluster, "--profile", profiles, "--top", "0")
    assert code == 0
    assert out.splitlines()[1].split() == ["default/p", "d", "a", "-"]


def test_a_plugin_package_places_pods_as_its_annotation_dictates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AnnotationScore comes from examples/plugins/annotation-score, installed in the venv (make install)."""

    def placed(scores_c: str, *profiles: dict[str, Any]) -> dict[str, str | None]:
        nodes = [node("a"), node("b", annotations={"placer.dev/score": "3"}),
                 node("c", annotations={"placer.dev/score": scores_c})]
        cluster = write(tmp_path / "cluster.yaml", *nodes, pod("p1"), pod("p2", scheduler="annotated"))
        result = run_json(capsys, "--cluster", cluster, "--profile", write(tmp_path / "profiles.yaml", *profiles))
        return {p["pod"]: p["node"] for p in result["placements"]}

    annotated = profile_doc("annotated", "annotated", scores=[
        {"name": "AnnotationScore", "weight": 10, "args": {"annotationKey": "placer.dev/score"}}])
    assert placed("9", profile_doc("d"), annotated) == {"default/p1": "a", "default/p2": "c"}
    assert placed("not a number", profile_doc("d"), annotated) == {"default/p1": "a", "default/p2": "b"}
    result = run_json(capsys, "--cluster", tmp_path / "cluster.yaml", "--profile", tmp_path / "profiles.yaml")
    [scored] = [p for p in result["placements"] if p["profile"] == "annotated"]
    assert [(s["node"], s["plugins"]["AnnotationScore"], s["total"]) for s in scored["scores"]] == [
        ("b", 100, 1000), ("a", 0, 0), ("c", 0, 0)]


# ------------------------------------------------------------------------ invalid input


GOOD_CLUSTER = [node("a"), pod("p")]
GOOD_PROFILE = profile_doc("d")


@pytest.mark.parametrize(
    ("cluster_text", "profile_docs", "which", "expected"),
    [
        ("kind: Node\nmetadata: {name: a\n", [GOOD_PROFILE], "cluster", ["invalid YAML (line "]),
        (None, [profile_doc("d", filters=[{"name": "Nope"}])], "profiles",
         ["document 1", 'profile "d"', 'filters[0] Nope: name: unknown plugin "Nope" (installed: ']),
        (None, [GOOD_PROFILE, profile_doc("bad", "x", scores=[{"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": "Tightest"}}}])], "profiles",
         ["document 2", 'profile "bad"', "scores[0] NodeResourcesFit", "args.scoringStrategy.type"]),
        (None, [{"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "d"},
                 "spec": {"filters": []}}], "profiles",
         ["document 1", 'profile "d"', "spec.schedulerName: Field required"]),
        (None, [profile_doc("d", scores=[{"name": "ImageLocality", "weight": 0}])], "profiles",
         ["document 1", "scores[0] ImageLocality: weight"]),
        (None, [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}], "profiles",
         ["document 1", "kind/apiVersion: expected SchedulerProfile placer.dev/v1alpha1"]),
        (None, [GOOD_PROFILE, profile_doc("d", "other")], "profiles",
         ["document 2", 'metadata.name: Duplicate value: profile "d"']),
        (None, [["a", "list"]], "profiles", ["document 1", "must be a SchedulerProfile, not list"]),
        (None, [], "profiles", ["no SchedulerProfile documents"]),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: 1.2.3}}\n", [GOOD_PROFILE],
         "cluster", ["document 1", "Node 'a'", "status.allocatable.cpu", "'1.2.3' is not a valid quantity"]),
        ("---\n" + yaml.safe_dump(pod("p")) + "---\n- just\n- a list\n", [GOOD_PROFILE], "cluster",
         ["document 2", "must be a Kubernetes object, not list"]),
        ("---\nkind: List\nitems:\n- " + json.dumps(node("a")) + "\n- " + json.dumps(node("b", memory="lots")) + "\n",
         [GOOD_PROFILE], "cluster", ["document 1", "items[1]", "Node 'b'", "status.allocatable.memory"]),
        ("kind: List\nitems: {a: 1}\n", [GOOD_PROFILE], "cluster", ["document 1", "items: must be a list"]),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n", [GOOD_PROFILE], "cluster",
         ["document 1", "kind: Unsupported value: \"ConfigMap\""]),
        ("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\nspec: {selector: {matchLabels: {'a b': c}}}\n",
         [GOOD_PROFILE], "cluster", ["document 1", "ReplicaSet 'rs'", "spec.selector.matchLabels"]),
        ("kind: Node\nmetadata: {labels: {a: b}}\n", [GOOD_PROFILE], "cluster", ["document 1", "metadata.name"]),
        ("kind: Node\nmetadata: {name: a}\nspec: {taints: [{key: k, effect: Sometimes}]}\n", [GOOD_PROFILE],
         "cluster", ["document 1", "Node 'a'", "spec.taints[0].effect"]),
        (yaml.safe_dump_all([pod("p"), pod("p")]), [GOOD_PROFILE], "cluster",
         ["document 2", 'metadata.name: Duplicate value: pod "default/p"']),
        ("kind: NodeMetrics\nmetadata: {name: a}\nusage: {cpu: fast}\n", [GOOD_PROFILE], "cluster",
         ["document 1", "NodeMetrics 'a'", "usage.cpu"]),
    ],
)
def test_invalid_input_exits_2_naming_file_document_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cluster_text: str | None,
    profile_docs: list[Any],
    which: str,
    expected: list[str],
) -> None:
    cluster = tmp_path / "cluster.yaml"
    if cluster_text is None:
        write(cluster, *GOOD_CLUSTER)
    else:
        cluster.write_text(cluster_text)
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(yaml.safe_dump_all(profile_docs) if profile_docs else "# nothing here\n")
    code, out, err = run(capsys, "--cluster", cluster, "--profile", profiles)
    assert code == 2
    assert out == ""
    assert err.startswith(f"placer simulate: {cluster if which == 'cluster' else profiles}")
    assert err.count("\n") == 1
    for part in expected:
        assert part in err


def test_missing_and_unreadable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profiles = write(tmp_path / "profiles.yaml", GOOD_PROFILE)
    code, _, err = run(capsys, "--cluster", tmp_path / "nope.yaml", "--profile", profiles)
    assert code == 2
    assert err.startswith(f"placer simulate: {tmp_path / 'nope.yaml'}: cannot read: No such file or directory")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind: Node")
    code, _, err = run(capsys, "--cluster", binary, "--profile", profiles)
    assert code == 2
    assert err.startswith(f"placer simulate: {binary}: cannot read:")


def test_required_arguments() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["simulate", "--cluster", "x.yaml"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        main(["simulate", "--cluster", "x.yaml", "--profile", "p.yaml", "--top", "-1"])
    assert caught.value.code == 2


def test_shared_devices_and_devices_with_binding_conditions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Placements taking shares of one GPU's memory: each share's consumed capacity and ID, and the
    device's capacity used and left after it; the third does not fit. A device that must be prepared
    shows its binding conditions. The table lists both under the pods."""
    gpus = "gpu.example.com"
    docs = [
        node("n1", cpu="8", memory="16Gi"),
        device_class("shared", f'device.driver == "{gpus}" && device.allowMultipleAllocations'),
        device_class("fabric", 'device.driver == "fabric.example.com"'),
        resource_slice("n1-gpus", gpus, node="n1",
                       devices=[device("gpu-0", capacity={"memory": "80Gi"}, multiple=True)]),
        resource_slice("n1-fabric", "fabric.example.com", node="n1", devices=[
            device("accel-0", binding_conditions=["Attached"], binding_failure_conditions=["Failed"])]),
        *(resource_claim(f"m{i}", requests=[request("mem", "shared", capacity={"memory": "30Gi"})]) for i in range(3)),
        resource_claim("a", requests=[request("acc", "fabric")]),
        *(claim_pod(f"p{i}", claims={"gpu": f"m{i}"}, created=f"2025-01-0{i + 1}T00:00:00Z") for i in range(3)),
        claim_pod("job", claims={"acc": "a"}, created="2025-01-09T00:00:00Z"),
    ]
    cluster = write(tmp_path / "cluster.yaml", *docs)
    profiles = write(tmp_path / "profiles.yaml", profile_doc("default"))
    result = run_json(capsys, "--cluster", cluster, "--profile", profiles)
    placed = {p["pod"]: p for p in result["placements"]}
    shares = [placed[f"default/p{i}"]["devices"][0] for i in range(2)]
    for share, used, left in zip(shares, ("30Gi", "60Gi"), ("50Gi", "20Gi"), strict=True):
        assert share["consumedCapacity"] == {"memory": "30Gi"} and len(share["shareID"]) == 36
        assert share["capacity"] == {"memory": {"used": used, "left": left}}
    assert shares[0]["shareID"] != shares[1]["shareID"]
    assert placed["default/p2"]["node"] is None
    assert placed["default/p2"]["message"].startswith("0/1 nodes are available: 1 cannot allocate all claims.")
    (accel,) = placed["default/job"]["devices"]
    assert (accel["bindingConditions"], accel["bindingFailureConditions"]) == (["Attached"], ["Failed"])
    assert "shareID" not in accel and "capacity" not in accel
    code, out, _ = run(capsys, "--cluster", cluster, "--profile", profiles)
    assert code == 0
    lines = out.splitlines()
    assert lines[lines.index("devices shared or to be prepared:") + 1:] == [
        "  default/p0: default/m0 mem: gpu.example.com/n1/gpu-0, share of 30Gi memory (30Gi used, 50Gi left)",
        "  default/p1: default/m1 mem: gpu.example.com/n1/gpu-0, share of 30Gi memory (60Gi used, 20Gi left)",
        "  default/job: default/a acc: fabric.example.com/n1/accel-0, binding conditions Attached",
    ]
