"""The suite harness's parts that need neither the Kubernetes source nor a control plane:
bench/perf_suite.py over a small tree written in the shape of kube's (tests/fixtures/kube-tree/),
bench/audit.py's rules the suite needs, and bench/suite_bench.py's metrics, claims and rows."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import audit  # noqa: E402
import perf_suite as ps  # noqa: E402
import suite_bench as sb  # noqa: E402

TREE = ROOT / "tests" / "fixtures" / "kube-tree"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def source() -> ps.KubeSource:
    return ps.KubeSource(TREE)


@pytest.fixture(scope="module")
def suite(source: ps.KubeSource) -> dict[str, ps.TestCase]:
    return ps.load_suite(source)


@pytest.fixture(scope="module")
def defaults(source: ps.KubeSource) -> dict[str, bool]:
    return ps.feature_defaults(source.read(ps.FEATURES_FILE), 36)


# -- the source ---------------------------------------------------------------------------------------


def test_source_lists_kubes_configs_then_ours(source: ps.KubeSource) -> None:
    assert source.config_files() == [f"{ps.SUITE_DIR}/dra/performance-config.yaml",
                                     f"{ps.SUITE_DIR}/misc/performance-config.yaml",
                                     f"{ps.SUITE_DIR}/placer/performance-config.yaml"]
    assert source.describe() == {"location": str(TREE), "rev": "HEAD", "commit": "", "tree": "/"}
    assert "generateName: perf-node-" in source.read(f"{ps.SUITE_DIR}/templates/node-default.yaml")
    assert "PreemptionWithPDB" in source.read(f"{ps.SUITE_DIR}/placer/performance-config.yaml")  # bench/suite/


def test_source_missing_says_where_to_point(tmp_path: Path) -> None:
    with pytest.raises(ps.SuiteError, match=r"no Kubernetes source there .*--kube-source or \$KUBE_SOURCE"):
        ps.KubeSource(tmp_path / "nowhere")
    with pytest.raises(ps.SuiteError, match=f"no {ps.SUITE_DIR} in it"):
        ps.KubeSource(tmp_path)
    with pytest.raises(ps.SuiteError, match="no such file"):
        ps.KubeSource(TREE).read(f"{ps.SUITE_DIR}/templates/absent.yaml")


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_source_from_a_git_directory_with_the_fork_layout(tmp_path: Path) -> None:
    """A bare repository holding the tree under deps/github.com/openshift/kubernetes/ (the
    openshift/microshift mirror's layout), read at HEAD without a work tree."""
    work = tmp_path / "work"
    shutil.copytree(TREE, work / "deps" / "github.com" / "openshift" / "kubernetes")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "tree"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(tmp_path / "mirror")], check=True)
    shutil.rmtree(work)
    source = ps.KubeSource(tmp_path / "mirror", overlay=None)
    assert source.prefix == "deps/github.com/openshift/kubernetes/"
    assert len(source.commit) == 40
    assert f"{ps.SUITE_DIR}/misc/performance-config.yaml" in source.config_files()
    assert not any("placer/" in f for f in source.config_files())  # no overlay given
    assert "name: the-node" in source.read(f"{ps.SUITE_DIR}/templates/node-with-name.yaml")
    with pytest.raises(ps.SuiteError, match="not in"):
        source.read(f"{ps.SUITE_DIR}/templates/absent.yaml")


# -- feature gates and templates ------------------------------------------------------------------------


def test_feature_defaults_per_release(source: ps.KubeSource) -> None:
    text = source.read(ps.FEATURES_FILE)
    assert ps.feature_defaults(text, 36) == {"DRAConsumableCapacity": True, "SchedulerAsyncAPICalls": False,
                                             "SchedulerQueueingHints": True}  # FutureGate: from 1.37
    assert ps.feature_defaults(text, 35)["DRAConsumableCapacity"] is False
    assert ps.feature_defaults(text, 31)["SchedulerQueueingHints"] is False
    assert "DRAConsumableCapacity" not in ps.feature_defaults(text, 33)


def test_render_kubes_template_functions() -> None:
    assert ps.render("n-{{.Index}} of {{ .Count }}", 7, 9) == "n-7 of 9"
    assert ps.render("{{DivideInt .Index 5}} {{Mod .Index 25}} {{MultiplyInt .Index 2 3}}", 27, 1) == "5 2 162"
    assert ps.render("{{DivideFloat .Index 4}} {{AddFloat .Index 0.5}} {{SubtractInt 3 .Index}}", 6, 1) == "1.5 6.5 -3"
    assert ps.render("{{DivideFloat .Index 2}}", 6, 1) == "3"  # Go prints a whole float64 without a fraction
    assert ps.render("{{Mod -7 3}} {{DivideInt -7 2}}", 0, 1) == "-1 -3"  # Go's % and int(): toward zero
    for bad, why in (("{{if .Index}}x{{end}}", "unsupported template function 'if'"),
                     ("{{.Name}}", "unsupported template argument '.Name'"),
                     ("{{- .Index}}", "unsupported template action"),
                     ("{{Mod .Index 0}}", "Mod by zero"), ("{{}}", "empty template action")):
        with pytest.raises(ps.SuiteError, match=why):
            ps.render(bad, 1, 1)


def test_object_template_parsed_once_when_static() -> None:
    static = ps.ObjectTemplate("x.yaml", "kind: Pod\nmetadata: {name: a}\n")
    first, second = static.make(0), static.make(1)
    assert first == second and first is not second
    first["metadata"]["name"] = "changed"
    assert static.make(2)["metadata"]["name"] == "a"
    with pytest.raises(ps.SuiteError, match=r"x\.yaml: not an object"):
        ps.ObjectTemplate("x.yaml", "- a list")


# -- test cases and sizes -------------------------------------------------------------------------------


def test_config_parsed_with_gates_and_template_paths(suite: dict[str, ps.TestCase]) -> None:
    basic = suite["Basic"]
    assert basic.config == f"{ps.SUITE_DIR}/misc/performance-config.yaml"
    assert basic.default_pod_template == f"{ps.SUITE_DIR}/templates/pod-default.yaml"
    assert [op["opcode"] for op in basic.ops] == ["createNodes", "createPods", "createPods"]
    assert basic.workload("5000Nodes_10000Pods_Hints").feature_gates == {"SchedulerQueueingHints": True}
    assert basic.workload("5Nodes").labels == ("integration-test", "short")
    assert ps.suite_path(f"{ps.SUITE_DIR}/dra/performance-config.yaml", "templates/claim.yaml") == \
        f"{ps.SUITE_DIR}/dra/templates/claim.yaml"
    with pytest.raises(ps.SuiteError, match="no workload 'nope'"):
        basic.workload("nope")


@pytest.mark.parametrize(("text", "why"), [
    ("name: x", "a list of test cases"),
    ("- workloadTemplate: []", "test case 0: no name"),
    ("- name: A\n  workloadTemplate: [{count: 1}]", "A: workloadTemplate must be a list of ops with an opcode"),
    ("- name: A\n  workloadTemplate: []\n  featureGates: {X: yes-please}", "featureGates must map"),
    ("- name: A\n  workloadTemplate: []\n  workloads: [{params: {}}]", "a workload without a name"),
])
def test_malformed_config_named(text: str, why: str) -> None:
    with pytest.raises(ps.SuiteError, match=why):
        ps.parse_config(text, "some/performance-config.yaml")


def test_choose_kubes_row_at_the_size(suite: dict[str, ps.TestCase], defaults: dict[str, bool]) -> None:
    basic = suite["Basic"]
    small = ps.choose(basic, 500, defaults)
    assert (small.name, small.scale, small.nodes, small.params["measurePods"]) == ("500Nodes", 1.0, 500, 1000)
    # at 5,000: the CI row (performance) whose gates are the defaults, not the plain row nor the
    # row that turns SchedulerAsyncAPICalls on (off by default in 1.36)
    large = ps.choose(basic, 5000, defaults)
    assert large.name == "5000Nodes_10000Pods_Hints" and large.params["measurePods"] == 10000
    assert ps.choose(basic, 5000, defaults | {"SchedulerAsyncAPICalls": True}).name == "5000Nodes_10000Pods_Hints"
    named = ps.choose(basic, 500, defaults, workload="5Nodes")
    assert (named.name, named.nodes) == ("5Nodes", 5)


def test_choose_scales_the_largest_row_when_kube_has_no_such_size(suite: dict[str, ps.TestCase],
                                                                  defaults: dict[str, bool]) -> None:
    preempt = ps.choose(suite["Preempt"], 500, defaults)  # 1000Nodes_Future needs a gate of 1.37
    assert preempt.name == "1000Nodes x0.5"
    assert (preempt.params["initNodes"], preempt.params["initPods"], preempt.params["measurePods"]) == (500, 2000, 500)
    assert ps.choose(suite["Preempt"], 5000, defaults).params["initPods"] == 20000
    checked = ps.choose(suite["Basic"], 500, defaults, scale=0.1)  # a quick check of a workload
    assert (checked.name, checked.nodes, checked.params["measurePods"]) == ("500Nodes x0.1", 50, 100)


def test_choose_a_one_node_case_against_kubes_ci_size(suite: dict[str, ps.TestCase],
                                                      defaults: dict[str, bool]) -> None:
    gated = ps.choose(suite["WhileGated"], 500, defaults)
    assert gated.name == "1Node_1000 x0.1" and gated.nodes == 1
    assert (gated.params["gatedPods"], gated.params["deletingPods"], gated.params["measurePods"]) == (100, 200, 200)
    assert ps.choose(suite["WhileGated"], 5000, defaults).name == "1Node_1000"


def test_choose_refuses_coverage_only_and_off_default_gates(suite: dict[str, ps.TestCase],
                                                            defaults: dict[str, bool]) -> None:
    with pytest.raises(ps.Unsupported, match="CoverageOnly as an integration test only"):
        ps.choose(suite["CoverageOnly"], 500, defaults)
    only_future = ps.TestCase("Future", "x", suite["Preempt"].ops, (suite["Preempt"].workload("1000Nodes_Future"),))
    with pytest.raises(ps.Unsupported, match=r"feature gates off their defaults .*FutureGate"):
        ps.choose(only_future, 500, defaults)


def test_scale_params_only_counts() -> None:
    assert ps.scale_params({"a": 10, "b": 3, "c": 0, "d": "10s", "e": True}, ["a", "b", "c", "d", "e"], 0.1) == {
        "a": 1, "b": 1, "c": 0, "d": "10s", "e": True}
    assert ps.count_params([{"countParam": "$a"}, {"createPodsOp": {"countParam": "$b"}}, {"count": 3}]) == {"a", "b"}


# -- plans ----------------------------------------------------------------------------------------------


def _plan(source: ps.KubeSource, suite: dict[str, ps.TestCase], defaults: dict[str, bool], name: str,
          size: int = 500, **kwargs: Any) -> ps.Plan:
    return ps.build_plan(source, ps.choose(suite[name], size, defaults, **kwargs))


def test_plan_of_basic_nodes_pods_and_the_measured_op(source: ps.KubeSource, suite: dict[str, ps.TestCase],
                                                      defaults: dict[str, bool]) -> None:
    plan = _plan(source, suite, defaults, "Basic", scale=0.01)
    nodes_step, namespaces, init, measured = plan.steps[0], plan.steps[1], plan.steps[2], plan.steps[4]
    assert isinstance(nodes_step, ps.CreateNodes) and len(plan.nodes) == 5
    first = plan.nodes[0]
    assert first["metadata"]["name"] == "perf-node-0" and "generateName" not in first["metadata"]
    assert first["metadata"]["labels"] == {"kubernetes.io/hostname": "perf-node-0",
                                           "topology.kubernetes.io/zone": "zone-a"}
    assert [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in plan.nodes] == [
        "zone-a", "zone-b", "zone-c", "zone-a", "zone-b"]  # labelNodePrepareStrategy: round-robin
    assert first["status"]["capacity"]["cpu"] == "4"
    assert isinstance(namespaces, ps.CreateNamespaces) and namespaces.namespaces[0]["metadata"]["name"] == "namespace-1"
    assert isinstance(init, ps.CreatePods) and isinstance(measured, ps.CreatePods)
    (init_set,), (measured_set,) = init.sets, measured.sets
    assert (init_set.namespace, init_set.count, init_set.wait, init_set.measured) == ("namespace-1", 5, True, False)
    assert (measured_set.namespace, measured_set.count, measured_set.measured) == ("namespace-2", 10, True)
    pod = measured_set.pods()[3]
    assert pod["metadata"]["name"] == "pod-2-3" and pod["metadata"]["namespace"] == "namespace-2"
    assert pod["metadata"]["labels"] == {"color": "green"} and "generateName" not in pod["metadata"]
    assert plan.measured == [measured_set] and plan.waiting_unsupported() is None


def test_plan_of_gated_pods_barrier_deletions_and_rendered_pods(source: ps.KubeSource,
                                                                suite: dict[str, ps.TestCase],
                                                                defaults: dict[str, bool]) -> None:
    plan = _plan(source, suite, defaults, "WhileGated", scale=0.1)  # 10 gated, 20 deleted, 20 measured
    kinds = [type(step).__name__ for step in plan.steps]
    assert kinds == ["CreateNodes", "CreateNamespaces", "CreatePods", "Barrier", "CreateNamespaces", "CreatePods",
                     "DeletePods", "CreateNamespaces", "CreatePods"]
    assert plan.nodes[0]["metadata"]["name"] == "the-node"  # a fixed name kept
    gated = plan.steps[2].sets[0]
    assert (gated.wait, gated.count) == (False, 10) and gated.pods()[0]["spec"]["schedulingGates"]
    barrier = plan.steps[3]
    assert barrier == ps.Barrier(expected={"namespace-1": 10}, stage="Attempted", selector={})
    deleting = plan.steps[6]
    assert deleting == ps.DeletePods(namespace="namespace-3", selector={}, per_second=50, wait=False)
    measured = plan.steps[8].sets[0]
    pods = measured.pods()
    assert [p["metadata"]["name"] for p in pods[:2]] == ["indexed-0", "indexed-1"]  # the template names them
    assert pods[4]["metadata"]["labels"] == {"group": "g1", "of": "20"}
    assert pods[6]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1.5"


def test_a_scheduled_barrier_resets_its_counts(source: ps.KubeSource) -> None:
    ops = ({"opcode": "createNodes", "count": 1},
           {"opcode": "createPods", "count": 3, "skipWaitToCompletion": True},
           {"opcode": "barrier"},
           {"opcode": "createPods", "count": 2, "skipWaitToCompletion": True, "namespace": "namespace-1"},
           {"opcode": "barrier", "namespaces": ["namespace-1"]},
           {"opcode": "createPods", "count": 1, "collectMetrics": True})
    case = ps.TestCase("Barriers", f"{ps.SUITE_DIR}/misc/performance-config.yaml", ops,
                       (ps.Workload("one", {}),))
    plan = ps.build_plan(source, ps.choose(case, 1, {}, workload="one"))
    barriers = [s for s in plan.steps if isinstance(s, ps.Barrier)]
    assert [b.expected for b in barriers] == [{"namespace-1": 3}, {"namespace-1": 2}]
    assert all(b.stage == "Scheduled" for b in barriers)
    default_pod = plan.measured[0].pod(0)
    assert default_pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "500Mi"}


def test_plan_of_churn_and_scaled_preemption(source: ps.KubeSource, suite: dict[str, ps.TestCase],
                                             defaults: dict[str, bool]) -> None:
    plan = _plan(source, suite, defaults, "Preempt")
    churn = next(s for s in plan.steps if isinstance(s, ps.Churn))
    assert (churn.mode, churn.number, churn.interval_s, churn.namespace) == ("recreate", 1, 0.25, "namespace-2")
    assert [t["kind"] for t in churn.templates] == ["Node", "Pod"]
    assert plan.nodes[0]["metadata"]["name"] == "node-0-0"  # kube's makeBaseNode: node-<op>-
    assert plan.nodes[0]["status"]["allocatable"]["cpu"] == "4"
    assert plan.measured[0].pod(0)["spec"]["priority"] == 10


def test_plan_of_a_claim_template_workload(source: ps.KubeSource, suite: dict[str, ps.TestCase],
                                           defaults: dict[str, bool]) -> None:
    plan = _plan(source, suite, defaults, "WithClaimTemplate")
    slices = next(s for s in plan.steps if isinstance(s, ps.CreateObjects)).objects
    assert len(slices) == 400  # only the nodes the glob names
    assert all(s["spec"]["nodeName"].startswith("perf-dra-") for s in slices)
    first = slices[0]
    assert first["metadata"]["name"] == first["spec"]["nodeName"] == first["spec"]["pool"]["name"]
    assert [d["name"] for d in first["spec"]["devices"]] == ["instance-0", "instance-1", "instance-2", "instance-3"]
    assert first["spec"]["devices"][2]["attributes"]["dra.example.com/numa"] == {"int": 2}
    assert plan.claim_templates()[("test", "one-device")]["apiVersion"] == "resource.k8s.io/v1beta2"
    assert {"resource.k8s.io/v1", "resource.k8s.io/v1beta2", "v1"} <= plan.api_versions
    assert sb.apiserver_args(plan).endswith(" --runtime-config=resource.k8s.io/v1beta2=true")
    assert "Priority" in sb.apiserver_args(plan)


def test_plan_refusals_name_the_reason(source: ps.KubeSource, suite: dict[str, ps.TestCase],
                                       defaults: dict[str, bool]) -> None:
    with pytest.raises(ps.Unsupported, match="persistent volumes"):
        _plan(source, suite, defaults, "WithVolumes")
    with pytest.raises(ps.Unsupported, match="allocating 100 claims beforehand"):
        ps.build_plan(source, ps.choose(suite["WithAllocatedClaims"], 500, defaults, workload="half_500nodes"))
    empty = ps.build_plan(source, ps.choose(suite["WithAllocatedClaims"], 500, defaults, workload="empty_500nodes"))
    assert len(empty.measured) == 1  # no claim to allocate: nothing to refuse
    odd = ps.TestCase("Odd", f"{ps.SUITE_DIR}/misc/performance-config.yaml",
                      ({"opcode": "createNodes", "count": 1}, {"opcode": "teleport"}), (ps.Workload("w", {}),))
    with pytest.raises(ps.Unsupported, match="opcode teleport"):
        ps.build_plan(source, ps.choose(odd, 1, {}, workload="w"))
    missing = ps.TestCase("Missing", f"{ps.SUITE_DIR}/misc/performance-config.yaml",
                          ({"opcode": "createNodes", "countParam": "$nodes"},), (ps.Workload("w", {}),))
    with pytest.raises(ps.SuiteError, match="parameter \\$nodes is not in the workload's params"):
        ps.choose(missing, 1, {}, workload="w")


def test_steady_state_is_measured_during_only(source: ps.KubeSource, suite: dict[str, ps.TestCase],
                                              defaults: dict[str, bool]) -> None:
    plan = _plan(source, suite, defaults, "Steady")
    (steady,) = plan.measured
    assert (steady.steady_seconds, steady.count, steady.wait, steady.namespace) == (90.0, 10, False, "test")
    assert plan.waiting_unsupported() == "its measured pods are a steady state (created as others are bound)"
    assert steady.pod(3, batch=2)["metadata"]["name"] == "pod-1-2-3"
    assert ps.go_duration("1m30s", "x") == 90.0 and ps.go_duration("500ms", "x") == 0.5
    with pytest.raises(ps.SuiteError, match="not a duration"):
        ps.go_duration("10 s", "x")


def test_our_pdb_preemption_uses_kubes_templates(source: ps.KubeSource, suite: dict[str, ps.TestCase],
                                                 defaults: dict[str, bool]) -> None:
    plan = _plan(source, suite, defaults, "PreemptionWithPDB")
    assert plan.choice.name == "500Nodes" and len(plan.nodes) == 500
    (pdb,) = [o for s in plan.steps if isinstance(s, ps.CreateObjects) for o in s.objects]
    assert pdb["kind"] == "PodDisruptionBudget" and pdb["metadata"]["namespace"] == "victims-0"
    victims = next(s for s in plan.steps if isinstance(s, ps.CreatePods)).sets[0]
    assert (victims.count, victims.namespace) == (2000, "victims-0")
    pods = victims.pods()
    assert Counter(p["metadata"]["labels"]["protected"] for p in pods) == {"0": 1000, "1": 1000}
    assert [sb.pdb_selected(p, [pdb]) for p in pods[:2]] == [False, True]
    other_namespace = {**pods[1], "metadata": {**pods[1]["metadata"], "namespace": "elsewhere"}}
    assert not sb.pdb_selected(other_namespace, [pdb])
    assert plan.measured[0].pod(0)["spec"]["priority"] == 10  # kube's ../templates/pod-high-priority.yaml


def test_rest_collections() -> None:
    assert ps.rest_collection({"apiVersion": "v1", "kind": "Node"}) == "/api/v1/nodes"
    assert ps.rest_collection({"apiVersion": "v1", "kind": "Service"}, "ns") == "/api/v1/namespaces/ns/services"
    assert ps.rest_collection({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"}) == \
        "/apis/resource.k8s.io/v1/deviceclasses"
    assert ps.rest_collection({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"}, "v") == \
        "/apis/policy/v1/namespaces/v/poddisruptionbudgets"
    assert ps.rest_collection({"apiVersion": "x/v1", "kind": "Policy"}) == "/apis/x/v1/policies"
    with pytest.raises(ps.SuiteError, match="without apiVersion and kind"):
        ps.rest_collection({"kind": "Pod"})


def test_cannot_bind_gated_or_too_big() -> None:
    nodes = [{"status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"}}},
             {"status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}]
    largest = ps.largest_allocatable(nodes)

    def pod(cpu: str, gates: bool = False) -> Obj:
        spec: Obj = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        if gates:
            spec["schedulingGates"] = [{"name": "g"}]
        return {"metadata": {"name": "p"}, "spec": spec}

    assert ps.cannot_bind(pod("8"), largest) is None
    assert ps.cannot_bind(pod("9"), largest) == "requests cpu beyond every node"
    assert ps.cannot_bind(pod("1", gates=True), largest) == "scheduling gates"
    gpu = pod("1")
    gpu["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    assert ps.cannot_bind(gpu, largest) == "requests example.com/gpu beyond every node"


# -- the audit's rules for the suite ----------------------------------------------------------------------


def _node(name: str, zone: str) -> Obj:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
            "spec": {}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str, namespace: str = "a", labels: Obj | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c"}], **spec}}


NODES = [_node("n1", "z1"), _node("n2", "z1"), _node("n3", "z2")]


def test_audit_required_node_affinity_with_match_fields_and_gates() -> None:
    on_n1 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    zone = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]}]}}}
    pods = [_pod("a", "n1", affinity=on_n1), _pod("b", "n2", affinity=zone)]
    assert audit.audit(NODES, pods)["node_affinity"] == 0
    pods += [_pod("c", "n2", affinity=on_n1), _pod("d", "n3", affinity=zone)]
    assert audit.audit(NODES, pods)["node_affinity"] == 2
    assert audit.audit(NODES, [_pod("g", "n1", schedulingGates=[{"name": "x"}])])["gated"] == 1


def _affine(name: str, node: str, namespace: str = "a", **term: Any) -> Obj:
    rule = {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": "topology.kubernetes.io/zone", **term}
    return _pod(name, node, namespace, {"color": "blue"},
                affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [rule]}})


def test_audit_required_pod_affinity() -> None:
    assert audit.audit(NODES, [_affine("first", "n3")])["affinity"] == 0  # alone, matching itself: kube's rule
    together = [_affine("p1", "n1"), _affine("p2", "n2"), _affine("p3", "n1")]
    assert audit.audit(NODES, together)["affinity"] == 0
    assert audit.audit(NODES, [*together, _affine("away", "n3")])["affinity"] == 1
    plain = _pod("plain", "n3", labels={"color": "red"},
                 affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    assert audit.audit(NODES, [*together, plain])["affinity"] == 1  # no blue pod on its node
    other_namespace = _affine("elsewhere", "n1", namespace="b")  # its term looks in its own namespace only
    assert audit.audit(NODES, [_affine("q", "n3"), other_namespace])["affinity"] == 0


def test_audit_namespace_selectors_need_the_namespaces_labels() -> None:
    selector = {"namespaceSelector": {"matchLabels": {"team": "x"}}}
    pods = [_affine("p1", "n1", **selector), _affine("p2", "n3", namespace="b", **selector)]
    assert audit.audit(NODES, pods)["affinity"] == 0  # not checked without the labels
    labels = {"a": {"team": "x"}, "b": {"team": "x"}}
    assert audit.audit(NODES, pods, namespaces=labels)["affinity"] == 2  # two blue pods, two zones
    assert audit.audit(NODES, pods, namespaces={"a": {"team": "x"}, "b": {}})["affinity"] == 1


def test_audit_shared_device_capacity() -> None:
    device = {"name": "shared", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "80Gi"}}}
    slices = [{"spec": {"driver": "d", "pool": {"name": "p", "generation": 1}, "nodeName": "n1",
                        "devices": [device]}}]

    def claim(name: str, uid: str, amount: str) -> Obj:
        return {"metadata": {"name": name, "namespace": "a"}, "status": {
            "allocation": {"devices": {"results": [{"driver": "d", "pool": "p", "device": "shared",
                                                    "shareID": f"s-{name}", "consumedCapacity": {"memory": amount}}]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": uid}]}}

    pods = [_pod("x", "n1", resourceClaims=[{"name": "c", "resourceClaimName": "cx"}]),
            _pod("y", "n1", resourceClaims=[{"name": "c", "resourceClaimName": "cy"}])]
    pods[0]["metadata"]["uid"], pods[1]["metadata"]["uid"] = "ux", "uy"
    fits = [claim("cx", "ux", "40Gi"), claim("cy", "uy", "40Gi")]
    problems = audit.audit(NODES, pods, None, fits, slices)
    assert (problems["device_double"], problems["device_capacity"], problems["claim"]) == (0, 0, 0)
    over = [claim("cx", "ux", "40Gi"), claim("cy", "uy", "41Gi")]
    assert audit.audit(NODES, pods, None, over, slices)["device_capacity"] == 1


# -- the runner's pure parts ------------------------------------------------------------------------------

EXTENSION = "scheduler_framework_extension_point_duration_seconds"


def _page(filter_count: int, filter_sum: float, attempts: int) -> str:
    return "\n".join([
        f"# TYPE {EXTENSION} histogram",
        f'{EXTENSION}_bucket{{extension_point="Filter",profile="p",status="Success",le="0.001"}} 3',
        f'{EXTENSION}_sum{{extension_point="Filter",profile="p",status="Success"}} {filter_sum}',
        f'{EXTENSION}_count{{extension_point="Filter",profile="p",status="Success"}} {filter_count}',
        f'{EXTENSION}_sum{{extension_point="Score",profile="p",status="Success"}} 0.5',
        f'{EXTENSION}_count{{extension_point="Score",profile="p",status="Success"}} 100',
        f'scheduler_schedule_attempts_total{{profile="p",result="scheduled"}} {attempts}',
        f"scheduler_preemption_victims_sum {attempts * 3}",
        f"scheduler_preemption_victims_count {attempts}",
        'scheduler_pending_pods{queue="active"} 7',
    ])


def test_kube_metrics_over_the_measurement() -> None:
    before = sb.metric_series(_page(100, 0.2, 100))
    after = sb.metric_series(_page(1100, 1.2, 1100))
    assert (EXTENSION + "_bucket", 'extension_point="Filter",profile="p",status="Success",le="0.001"') not in after
    assert not any(name == "scheduler_pending_pods" for name, _ in after)  # a gauge: not kept
    delta = sb.metrics_delta(before, after)
    (filter_point,) = delta[EXTENSION]  # Score did not grow: left out
    assert filter_point["labels"] == {"extension_point": "Filter", "profile": "p", "status": "Success"}
    assert filter_point["count"] == 1000 and filter_point["mean_ms"] == pytest.approx(1.0)
    assert delta["scheduler_schedule_attempts_total"] == [{"labels": {"profile": "p", "result": "scheduled"},
                                                           "value": 1000}]
    assert delta["scheduler_preemption_victims"] == [{"labels": {}, "count": 1000, "sum": 3000, "mean": 3.0}]
    fresh = sb.metrics_delta({}, after)  # a fresh process (mode waiting): everything it did
    assert {p["labels"]["extension_point"] for p in fresh[EXTENSION]} == {"Filter", "Score"}


def test_claim_from_a_template_as_the_resourceclaim_controller_makes_it() -> None:
    template = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "test"},
                "spec": {"metadata": {"labels": {"from": "template"}},
                         "spec": {"devices": {"requests": [{"name": "r"}]}}}}
    pod = {"metadata": {"name": "pod-1", "namespace": "test"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"},
                                       {"name": "other", "resourceClaimName": "shared"}]}}
    assert sb.template_entries(pod) == [("gpu", "t")]
    claim = sb.claim_for(pod, "uid-1", "gpu", template, "ab12c")
    assert claim["apiVersion"] == "resource.k8s.io/v1beta2" and claim["kind"] == "ResourceClaim"
    assert claim["metadata"]["name"] == "pod-1-gpu-ab12c" and claim["metadata"]["namespace"] == "test"
    assert claim["metadata"]["labels"] == {"from": "template"}
    assert claim["metadata"]["annotations"] == {sb.CLAIM_ANNOTATION: "gpu"}
    assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "pod-1",
                                                     "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}]
    assert claim["spec"] == {"devices": {"requests": [{"name": "r"}]}}
    claim["spec"]["devices"]["requests"].clear()
    assert template["spec"]["spec"]["devices"]["requests"]  # the template is untouched


def test_tracker_bindings_deletions_and_double_binding() -> None:
    tracker = sb.PodTracker()
    heard: list[tuple[str, float]] = []
    tracker.on_bound.append(lambda key, at: heard.append((key, at)))

    def pod(name: str, node: str | None = None, scheduled: bool = False) -> Obj:
        status = {"conditions": [{"type": "PodScheduled", "status": "False"}]} if scheduled else {}
        return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeName": node} if node else {},
                "status": status}

    tracker.seen("ADDED", pod("a"), now=1.0)
    tracker.seen("MODIFIED", pod("b", scheduled=True), now=1.5)
    tracker.seen("MODIFIED", pod("a", "n1"), now=2.0)
    tracker.seen("MODIFIED", pod("a", "n1"), now=3.0)
    assert heard == [("ns/a", 2.0)]
    assert tracker.pods["ns/b"].attempted and not tracker.pods["ns/a"].attempted
    tracker.seen("MODIFIED", pod("a", "n2"), now=4.0)
    assert tracker.pods["ns/a"].nodes == {"n1", "n2"} and tracker.pods["ns/a"].bound_at == 2.0
    tracker.seen("DELETED", pod("b"), now=5.0)
    assert tracker.pods["ns/b"].deleted_at == 5.0


def test_measurement_counts_its_pods_until_its_end() -> None:
    measurement = sb.Measurement(keys={"ns/a", "ns/b"}, expected=2, start=0.0)
    measurement.bound_now("ns/other", 1.0)
    measurement.bound_now("ns/a", 1.0)
    assert not measurement.complete()
    measurement.bound_now("ns/a", 2.0)  # seen once
    measurement.bound_now("ns/b", 3.0)
    assert measurement.complete() and measurement.bound == {"ns/a": 1.0, "ns/b": 3.0}
    window = sb.Measurement(keys={"ns/c", "ns/d"}, start=0.0, end=5.0)
    window.bound_now("ns/c", 4.0)
    window.bound_now("ns/d", 6.0)  # after the window
    assert window.bound == {"ns/c": 4.0} and not window.complete()


def test_rows_medians_errors_and_ratios() -> None:
    def run(rate: float, cpu: float) -> Obj:
        return {key: 1.0 for key in sb.ROW_MEDIANS} | {"pods_per_s": rate, "cpu_ms_per_pod_scheduler": cpu,
                                                       "problems": {"capacity": 0}}

    placer = sb.row_medians([run(300.0, 1.0), run(500.0, 2.0), run(400.0, 1.5), {"error": "RunFailed: late"}])
    assert placer["pods_per_s"] == 400.0 and placer["all_runs_pods_per_s"] == [300.0, 500.0, 400.0]
    assert placer["runs"] == 4 and placer["errors"] == ["RunFailed: late"]
    kube = sb.row_medians([run(200.0, 3.0)])
    limit = sb.row_medians([run(800.0, 0.5)])
    assert sb.ratios({"limit": limit, "kube-scheduler": kube, "placer": placer}) == {
        "placer_over_kube": 2.0, "placer_over_limit": 0.5, "cpu_per_pod_kube_over_placer": 2.0}
    failed = sb.row_medians([{"error": "x"}])
    assert "pods_per_s" not in failed
    assert sb.ratios({"kube-scheduler": kube, "placer": failed}) == {}
    assert math.isnan(sb._median([float("nan")]))


def test_selection_of_test_cases_and_workloads() -> None:
    assert sb.parse_selection(["SchedulingBasic", "Unschedulable/500Nodes/10Init/1kPods"]) == [
        ("SchedulingBasic", None), ("Unschedulable", "500Nodes/10Init/1kPods")]
    assert sb.labels_match({"a": "1"}, {"a": "1", "b": "2"}) and not sb.labels_match({"a": "1"}, None)
