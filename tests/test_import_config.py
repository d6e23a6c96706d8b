"""`placer import-config`: kube-scheduler configurations (kube's own documented examples among them)
become SchedulerProfiles that schedule as kube-scheduler v1.36 would with them; what Placer cannot do
is an exit-2 error naming the plugin and the field, or a comment with --skip-unknown."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.cli import main
from placer.engine.profile import DEFAULT_FILTERS, DEFAULT_POST_FILTERS, DEFAULT_SCORES, compile_profile
from placer.import_config import ConfigError, import_config, import_text
from placer.plugins import REGISTRY
from placer.simulate import render_json, simulate_documents
from placer.testing import node, pod

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
V1 = "kubescheduler.config.k8s.io/v1"
V1BETA3 = "kubescheduler.config.k8s.io/v1beta3"


def config(*profiles: dict[str, Any], api_version: str = V1, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": api_version, "kind": "KubeSchedulerConfiguration", **top}
    if profiles:
        doc["profiles"] = list(profiles)
    return doc


def imported(doc: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    """The profiles' documents; fails the test on any problem."""
    result = import_config(doc, **kwargs)
    assert result.problems == [], result.problems
    return [p.document for p in result.profiles]


def spec_of(doc: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    [profile] = imported(doc, **kwargs)
    return profile["spec"]


def problems(doc: dict[str, Any], **kwargs: Any) -> list[str]:
    return [str(p) for p in import_config(doc, **kwargs).problems]


def names(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["name"] for entry in entries]


def scores(spec: dict[str, Any]) -> dict[str, int]:
    return {entry["name"]: entry["weight"] for entry in spec["scores"]}


def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: Any, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    code = main(["import-config", str(path), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------ the defaults


def test_default_config_is_placers_default_profile() -> None:
    """kube's defaults, expanded from multiPoint, are Placer's defaults (which add NodeReady), read from
    the registry and Placer's default lists at run time."""
    spec = spec_of(config())
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["percentageOfNodesToScore"] == 0
    assert names(spec["filters"]) == names(list(DEFAULT_FILTERS))
    assert scores(spec) == {s["name"]: s["weight"] for s in DEFAULT_SCORES}
    assert names(spec["postFilters"]) == names(list(DEFAULT_POST_FILTERS))
    mine = compile_profile("imported", spec)
    placers = compile_profile("defaults", {"schedulerName": "default-scheduler"})
    assert [(p.name, p.args) for p in mine.filters] == [(p.name, p.args) for p in placers.filters]
    assert sorted((p.name, w, repr(p.args)) for p, w in mine.scores) == sorted(
        (p.name, w, repr(p.args)) for p, w in placers.scores)
    assert [(p.name, p.args) for p in mine.post_filters] == [(p.name, p.args) for p in placers.post_filters]


def _example_cluster(scheduler: str) -> list[dict[str, Any]]:
    """The bundled sample cluster, every pending pod handed to `scheduler`."""
    objects: list[dict[str, Any]] = []
    for doc in yaml.load_all(EXAMPLE_CLUSTER.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        objects.extend(doc["items"] if doc["kind"] == "List" else [doc])
    for obj in objects:
        if obj["kind"] == "Pod" and not obj["spec"].get("nodeName"):
            obj["spec"]["schedulerName"] = scheduler
    return objects


def _simulate_json(cluster: list[dict[str, Any]], profile: dict[str, Any]) -> dict[str, Any]:
    simulation = simulate_documents([(Path("cluster.yaml"), list(enumerate(cluster, 1)))],
                                    [(Path("profile.yaml"), [(1, profile)])], top=5)
    out = io.StringIO()
    render_json(simulation, out)
    return json.loads(out.getvalue())


def test_round_trip_places_the_example_cluster_as_placers_defaults(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The profile printed for kube-scheduler's default configuration places every pending pod of the
    bundled cluster (215 pods: spreading, anti-affinity, volumes, preemption) exactly where, and with
    exactly the scores, Placer's default profile does."""
    code, out, err = cli(capsys, tmp_path, config())
    assert code == 0, err
    [profile] = [d for d in yaml.safe_load_all(out) if d]
    cluster = _example_cluster("default-scheduler")
    with_import = _simulate_json(cluster, profile)
    defaults = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "defaults"},
                "spec": {"schedulerName": "default-scheduler"}}
    with_defaults = _simulate_json(_example_cluster("default-scheduler"), defaults)
    for placement in (*with_import["placements"], *with_defaults["placements"]):
        placement.pop("profile")
    assert with_import["summary"]["pods"] >= 200
    assert with_import["summary"]["scheduled"] > 0 and with_import["summary"]["unschedulable"] > 0
    assert any(p["preemption"] for p in with_import["placements"])
    assert with_import == with_defaults


def test_v1beta3_default_config_imports_alike() -> None:
    assert spec_of(config(api_version=V1BETA3)) == spec_of(config())


# What `kube-scheduler --write-config-to` prints for its defaults (v1.36): every default spelt out,
# multiPoint listed with weights 0 for the non-scoring plugins, every plugin's args at their defaults.
KUBE_DUMP = """\
apiVersion: kubescheduler.config.k8s.io/v1
clientConnection:
  acceptContentTypes: ""
  burst: 100
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 50
enableContentionProfiling: true
enableProfiling: true
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 15s
  renewDeadline: 10s
  resourceLock: leases
  resourceName: kube-scheduler
  resourceNamespace: kube-system
  retryPeriod: 2s
parallelism: 16
percentageOfNodesToScore: 0
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 10
profiles:
- pluginConfig:
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: DefaultPreemptionArgs
      minCandidateNodesAbsolute: 100
      minCandidateNodesPercentage: 10
    name: DefaultPreemption
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      filterTimeout: 10s
      kind: DynamicResourcesArgs
    name: DynamicResources
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      hardPodAffinityWeight: 1
      ignorePreferredTermsOfExistingPods: false
      kind: InterPodAffinityArgs
    name: InterPodAffinity
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeAffinityArgs
    name: NodeAffinity
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesBalancedAllocationArgs
      resources:
      - name: cpu
        weight: 1
      - name: memory
        weight: 1
    name: NodeResourcesBalancedAllocation
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
        type: LeastAllocated
    name: NodeResourcesFit
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      defaultingType: System
      kind: PodTopologySpreadArgs
    name: PodTopologySpread
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      bindTimeoutSeconds: 600
      kind: VolumeBindingArgs
    name: VolumeBinding
  plugins:
    bind: {}
    filter: {}
    multiPoint:
      enabled:
      - name: SchedulingGates
        weight: 0
      - name: PrioritySort
        weight: 0
      - name: NodeUnschedulable
        weight: 0
      - name: NodeName
        weight: 0
      - name: TaintToleration
        weight: 3
      - name: NodeAffinity
        weight: 2
      - name: NodePorts
        weight: 0
      - name: NodeResourcesFit
        weight: 1
      - name: VolumeRestrictions
        weight: 0
      - name: NodeVolumeLimits
        weight: 0
      - name: VolumeBinding
        weight: 0
      - name: VolumeZone
        weight: 0
      - name: PodTopologySpread
        weight: 2
      - name: InterPodAffinity
        weight: 2
      - name: DynamicResources
        weight: 2
      - name: DefaultPreemption
        weight: 0
      - name: NodeResourcesBalancedAllocation
        weight: 1
      - name: ImageLocality
        weight: 1
      - name: DefaultBinder
        weight: 0
      - name: NodeDeclaredFeatures
        weight: 0
    permit: {}
    postBind: {}
    postFilter: {}
    preBind: {}
    preEnqueue: {}
    preFilter: {}
    preScore: {}
    queueSort: {}
    reserve: {}
    score: {}
  schedulerName: default-scheduler
"""


def test_kube_scheduler_dump_imports_as_the_defaults() -> None:
    def compiled(spec: dict[str, Any]) -> tuple[Any, ...]:
        profile = compile_profile("p", spec)
        return ([(p.name, p.args) for p in profile.filters],
                sorted((p.name, w, repr(p.args)) for p, w in profile.scores),
                [(p.name, p.args) for p in profile.post_filters], profile.percentage_of_nodes_to_score)

    result = import_text(KUBE_DUMP)
    assert result.problems == []
    [profile] = result.profiles
    assert compiled(profile.document["spec"]) == compiled(spec_of(config()))
    assert profile.skipped == []


def test_the_dumps_process_settings_become_placer_runs_flags() -> None:
    """`--write-config-to`'s clientConnection and leaderElection: the kubeconfig, and kube-scheduler's own
    Lease with its timings (Placer takes it over: never active beside kube-scheduler)."""
    result = import_text(KUBE_DUMP)
    assert result.run_flags == [
        "--kubeconfig", "/etc/kubernetes/scheduler.conf",
        "--leader-elect-resource-namespace", "kube-system", "--leader-elect-resource-name", "kube-scheduler",
        "--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "10s",
        "--leader-elect-retry-period", "2s"]
    assert result.run_notes == []  # qps 50, burst 100, protobuf: kube's defaults, nothing to say


# A kubeadm cluster's scheduler configuration (kubeadm passes `--config` from `scheduler.extraArgs`, the
# file mounted through `scheduler.extraVolumes`): two profiles, the second packing, a global percentage.
KUBEADM_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 100
  burst: 200
leaderElection:
  leaderElect: true
percentageOfNodesToScore: 50
profiles:
  - schedulerName: default-scheduler
  - schedulerName: bin-packing
    percentageOfNodesToScore: 100
    plugins:
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
    pluginConfig:
      - name: NodeResourcesFit
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: NodeResourcesFitArgs
          scoringStrategy:
            type: MostAllocated
            resources:
              - {name: cpu, weight: 2}
              - {name: memory}
      - name: DefaultPreemption
        args:
          minCandidateNodesPercentage: 20
          minCandidateNodesAbsolute: 50
"""


def test_a_kubeadm_clusters_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = import_text(KUBEADM_CONFIG)
    assert result.problems == []
    default, packing = (p.document for p in result.profiles)
    assert default["metadata"]["name"] == "default-scheduler" and default["spec"]["percentageOfNodesToScore"] == 50
    assert packing["spec"]["schedulerName"] == "bin-packing" and packing["spec"]["percentageOfNodesToScore"] == 100
    fit = next(entry for entry in packing["spec"]["scores"] if entry["name"] == "NodeResourcesFit")
    assert fit["args"]["scoringStrategy"] == {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]}
    assert "NodeResourcesBalancedAllocation" not in scores(packing["spec"])
    [preemption] = packing["spec"]["postFilters"][-1:]
    assert preemption == {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 20,
                                                                "minCandidateNodesAbsolute": 50}}
    for document in (default, packing):
        compile_profile(document["metadata"]["name"], document["spec"])
    # leaderElection without a Lease named: kube-scheduler's, which Placer then takes over
    assert result.run_flags == ["--kubeconfig", "/etc/kubernetes/scheduler.conf",
                                "--leader-elect-resource-namespace", "kube-system",
                                "--leader-elect-resource-name", "kube-scheduler"]
    [note] = result.run_notes
    assert note.startswith("clientConnection.burst, qps: Placer sets no client-side rate limit")
    code, out, err = cli(capsys, tmp_path, KUBEADM_CONFIG)
    assert code == 0 and out.count("kind: SchedulerProfile") == 2
    assert ("# run as: placer run --kubeconfig /etc/kubernetes/scheduler.conf --leader-elect-resource-namespace"
            in out)
    code, out, err = cli(capsys, tmp_path, KUBEADM_CONFIG, "--run-flags")
    assert code == 0 and out.splitlines() == result.run_flags
    assert "note: clientConnection.burst, qps" in err
    code, out, err = cli(capsys, tmp_path, KUBEADM_CONFIG, "--shadow")
    assert code == 0 and "# run as:" not in out  # a shadow runs beside kube-scheduler: not on its Lease


def test_leader_election_settings() -> None:
    assert import_config(config(leaderElection={"leaderElect": False})).run_flags == ["--no-leader-elect"]
    flags = import_config(config(leaderElection={"resourceName": "my-scheduler", "resourceNamespace": "sched",
                                                 "retryPeriod": "500ms"})).run_flags
    assert flags == ["--leader-elect-resource-namespace", "sched", "--leader-elect-resource-name", "my-scheduler",
                     "--leader-elect-retry-period", "500ms"]
    assert import_config(config()).run_flags == ["--leader-elect-resource-namespace", "kube-system",
                                                 "--leader-elect-resource-name", "kube-scheduler"]
    assert problems(config(leaderElection={"resourceLock": "endpoints"})) == [
        "leaderElection.resourceLock: 'endpoints': Placer elects its leader on a Lease (leases)"]
    skipped = import_config(config(leaderElection={"resourceLock": "endpoints"}), skip_unknown=True)
    assert skipped.problems == [] and [str(p) for p in skipped.profiles[0].skipped] == [
        "leaderElection.resourceLock: 'endpoints': Placer elects its leader on a Lease (leases)"]
    assert problems(config(leaderElection={"leaseDuration": "fifteen"})) == [
        "leaderElection.leaseDuration: 'fifteen': not a duration (e.g. 15s)"]
    assert problems(config(leaderElection={"renewDeadline": "0s"})) == [
        "leaderElection.renewDeadline: '0s': not a duration (e.g. 15s)"]
    assert problems(config(leaderElection=["x"])) == ["leaderElection: must be an object, not list"]
    assert problems(config(clientConnection={"kubeconfig": 3})) == [
        "clientConnection.kubeconfig: must be a path, not int"]


# ------------------------------------------------------------------- kube's documented examples


def test_multiple_profiles_one_without_scoring() -> None:
    """kube's docs ("Multiple profiles"): the second profile disables every preScore and score plugin."""
    docs = imported(config(
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "no-scoring-scheduler",
         "plugins": {"preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}}},
    ))
    assert [d["metadata"]["name"] for d in docs] == ["default-scheduler", "no-scoring-scheduler"]
    assert docs[1]["spec"]["scores"] == []
    assert names(docs[1]["spec"]["filters"]) == names(docs[0]["spec"]["filters"])
    assert docs[0]["spec"]["scores"]


def test_bin_packing_most_allocated() -> None:
    """kube's docs ("Resource Bin Packing"): MostAllocated with extended resources weighted."""
    strategy = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                              {"name": "intel.com/foo", "weight": 3}, {"name": "intel.com/bar", "weight": 3}],
                "type": "MostAllocated"}
    spec = spec_of(config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]}))
    [fit] = [s for s in spec["scores"] if s["name"] == "NodeResourcesFit"]
    assert fit == {"name": "NodeResourcesFit", "weight": 1, "args": {"scoringStrategy": strategy}}
    [fit_filter] = [f for f in spec["filters"] if f["name"] == "NodeResourcesFit"]
    assert fit_filter["args"] == {"scoringStrategy": strategy}


def test_requested_to_capacity_ratio() -> None:
    args = {"apiVersion": V1, "kind": "NodeResourcesFitArgs",
            "scoringStrategy": {"type": "RequestedToCapacityRatio",
                                "resources": [{"name": "intel.com/foo", "weight": 3}, {"name": "cpu"}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 10}]}}}
    spec = spec_of(config({"pluginConfig": [{"name": "NodeResourcesFit", "args": args}]}))
    [fit] = [s for s in spec["scores"] if s["name"] == "NodeResourcesFit"]
    # TypeMeta dropped; a resource weight left out is 1, as kube's defaulting makes it
    assert fit["args"]["scoringStrategy"]["resources"] == [{"name": "intel.com/foo", "weight": 3},
                                                           {"name": "cpu", "weight": 1}]
    assert "kind" not in fit["args"]


def test_bin_packing_profile_packs(tmp_path: Path) -> None:
    """A bin-packing config simulates as kube's MostAllocated: the busier node that fits wins."""
    spec = spec_of(config({"schedulerName": "packer", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}))
    profile = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p"},
               "spec": spec}
    cluster = [node("busy", cpu="4", memory="8Gi"), node("empty", cpu="4", memory="8Gi"),
               pod("running", node_name="busy", cpu="2", memory="4Gi"),
               pod("new", cpu="1", memory="1Gi", scheduler="packer")]
    result = _simulate_json(cluster, profile)
    assert [p["node"] for p in result["placements"]] == ["busy"]
    least = _simulate_json(cluster, {**profile, "spec": spec_of(config({"schedulerName": "packer"}))})
    assert [p["node"] for p in least["placements"]] == ["empty"]


def test_disabled_plugins() -> None:
    """Disabling at one point keeps a multiPoint plugin out of that point only; `*` disables all the
    defaults of multiPoint, leaving the plugins enabled there."""
    spec = spec_of(config({"plugins": {
        "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}, {"name": "ImageLocality"}]},
        "filter": {"disabled": [{"name": "NodePorts"}]},
        "postFilter": {"disabled": [{"name": "DefaultPreemption"}]},
    }}))
    assert "NodeResourcesBalancedAllocation" not in scores(spec) and "ImageLocality" not in scores(spec)
    assert "NodePorts" not in names(spec["filters"]) and "NodeResourcesFit" in names(spec["filters"])
    assert spec["postFilters"] == [{"name": "DynamicResources"}]  # kube's other PostFilter stays
    spec = spec_of(config({"plugins": {"multiPoint": {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": "NodeResourcesFit", "weight": 4}, {"name": "TaintToleration"}],
    }}}))
    # no NodeReady without TaintToleration... here TaintToleration is enabled, so NodeReady comes before it
    assert names(spec["filters"]) == ["NodeResourcesFit", "NodeReady", "TaintToleration"]
    assert scores(spec) == {"NodeResourcesFit": 4, "TaintToleration": 1}
    assert spec["postFilters"] == []


def test_disabled_taint_toleration_filter_drops_node_ready(tmp_path: Path) -> None:
    """Without kube's TaintToleration filter nothing keeps pods off NotReady or tainted nodes."""
    spec = spec_of(config({"schedulerName": "s", "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}))
    assert "TaintToleration" not in names(spec["filters"]) and "NodeReady" not in names(spec["filters"])
    profile = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p"},
               "spec": spec}
    cluster = [node("tainted", cpu="4", memory="8Gi", taints=["dedicated=gpu:NoSchedule"]),
               pod("web", cpu="1", memory="1Gi", scheduler="s")]
    assert [p["node"] for p in _simulate_json(cluster, profile)["placements"]] == ["tainted"]
    strict = {**profile, "spec": spec_of(config({"schedulerName": "s"}))}
    assert [p["node"] for p in _simulate_json(cluster, strict)["placements"]] == [None]


def test_score_weight_at_score_wins_over_multi_point() -> None:
    spec = spec_of(config({"plugins": {
        "multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 7}, {"name": "NodeAffinity", "weight": 9}]},
        "score": {"enabled": [{"name": "ImageLocality", "weight": 5}, {"name": "TaintToleration"}]},
    }}))
    # ImageLocality: score's weight; NodeAffinity: multiPoint's replaces the default's in place;
    # TaintToleration named at score without a weight: 1, not multiPoint's 3
    assert scores(spec)["ImageLocality"] == 5
    assert scores(spec)["NodeAffinity"] == 9
    assert scores(spec)["TaintToleration"] == 1
    # explicit score plugins that multiPoint also has come first, in score's order (kube's "part 1")
    assert names(spec["scores"])[:2] == ["ImageLocality", "TaintToleration"]


def test_explicit_filter_order() -> None:
    """Plugins enabled at filter but not in multiPoint come after multiPoint's."""
    spec = spec_of(config({"plugins": {
        "multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeUnschedulable"}]},
        "filter": {"enabled": [{"name": "NodeLabel"}, {"name": "NodePorts"}]},
    }, "pluginConfig": [{"name": "NodeLabel", "args": {"required": {"zone": "a"}}}]}))
    assert spec["filters"] == [{"name": "NodeUnschedulable"},
                               {"name": "NodeLabel", "args": {"required": {"zone": "a"}}}, {"name": "NodePorts"}]
    assert spec["scores"] == [] and spec["postFilters"] == []


def test_plugin_args_of_kube_plugins() -> None:
    spec = spec_of(config({"pluginConfig": [
        {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5, "ignorePreferredTermsOfExistingPods": True}},
        {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]}},
        {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 50}},
        {"name": "NodeResourcesBalancedAllocation", "args": {"resources": [{"name": "cpu", "weight": 0},
                                                                           {"name": "nvidia.com/gpu"}]}},
        {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 600}},  # kube's default: what Placer does
    ]}))
    by_name = {entry["name"]: entry.get("args") for entry in spec["scores"]}
    assert by_name["InterPodAffinity"] == {"hardPodAffinityWeight": 5, "ignorePreferredTermsOfExistingPods": True}
    assert by_name["PodTopologySpread"]["defaultingType"] == "List"
    assert by_name["NodeResourcesBalancedAllocation"] == {"resources": [{"name": "cpu", "weight": 1},
                                                                        {"name": "nvidia.com/gpu", "weight": 1}]}
    assert spec["postFilters"] == [{"name": "DynamicResources"},
                                   {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 20,
                                                                          "minCandidateNodesAbsolute": 50}}]
    assert [f for f in spec["filters"] if f["name"] == "VolumeBinding"] == [{"name": "VolumeBinding"}]
    compile_profile("p", spec)


def test_percentage_of_nodes_to_score_global_and_per_profile() -> None:
    docs = imported(config({"schedulerName": "a"}, {"schedulerName": "b", "percentageOfNodesToScore": 70},
                           percentageOfNodesToScore=30))
    assert [d["spec"]["percentageOfNodesToScore"] for d in docs] == [30, 70]
    assert problems(config(percentageOfNodesToScore=150)) == [
        "percentageOfNodesToScore: 150: not in valid range [0-100]"]


def test_operational_settings_are_ignored_and_backoff_must_match() -> None:
    spec = spec_of(config(parallelism=32, leaderElection={"leaderElect": True}, clientConnection={"qps": 100},
                          podInitialBackoffSeconds=1, podMaxBackoffSeconds=10, enableProfiling=False))
    assert spec["schedulerName"] == "default-scheduler"
    assert problems(config(podMaxBackoffSeconds=60)) == [
        "podMaxBackoffSeconds: 60: Placer's backoff is 1 s doubling to 10 s (kube's defaults)"]
    assert problems(config(extenders=[{"urlPrefix": "http://x"}])) == ["extenders: Placer calls no scheduler extenders"]


def test_implicit_plugins_are_accepted() -> None:
    spec = spec_of(config({"plugins": {
        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
        "bind": {"enabled": [{"name": "DefaultBinder"}]},
        "preEnqueue": {"enabled": [{"name": "SchedulingGates"}]},
        "filter": {"enabled": [{"name": "NodeName"}]},
        "reserve": {"enabled": [{"name": "VolumeBinding"}]},
        "preBind": {"enabled": [{"name": "VolumeBinding"}]},
    }}))
    assert "NodeName" not in names(spec["filters"])
    assert spec == spec_of(config())


def test_gang_scheduling_enabled_under_multi_point_is_placers_permit_plugin() -> None:
    """kube v1.36 appends GangScheduling to multiPoint only with its alpha gate on (off by default,
    so the defaults have none); enabled, its Permit is Placer's GangScheduling, among the filters,
    after kube's filters; its PreEnqueue is Placer's queueing."""
    assert "GangScheduling" not in names(spec_of(config())["filters"])
    doc = config({"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]}},
                  "pluginConfig": [{"name": "GangScheduling", "args": {"permitTimeoutSeconds": 60}}]})
    [profile] = import_config(doc).profiles
    spec = profile.document["spec"]
    defaults = spec_of(config())
    assert spec["filters"] == [*defaults["filters"], {"name": "GangScheduling", "args": {"permitTimeoutSeconds": 60}}]
    assert spec["scores"] == defaults["scores"] and spec["postFilters"] == defaults["postFilters"]
    assert not any(note.startswith("implicit in Placer") and "GangScheduling" in note for note in profile.notes)
    assert any(note.startswith("GangScheduling: its PreEnqueue") for note in profile.notes)
    compiled = compile_profile("p", spec)
    assert [type(plugin).__name__ for plugin in compiled.filters][-1] == "GangScheduling"


def test_gang_scheduling_enabled_under_permit() -> None:
    spec = spec_of(config({"plugins": {"permit": {"enabled": [{"name": "GangScheduling"}]},
                                       "preEnqueue": {"enabled": [{"name": "GangScheduling"}]}}}))
    assert names(spec["filters"]) == [*names(spec_of(config())["filters"]), "GangScheduling"]
    # with filter's own list replaced, permit still comes after it
    spec = spec_of(config({"plugins": {
        "filter": {"enabled": [{"name": "NodeResourcesFit"}], "disabled": [{"name": "*"}]},
        "permit": {"enabled": [{"name": "GangScheduling"}]}}}))
    assert names(spec["filters"]) == ["NodeResourcesFit", "GangScheduling"]
    # at preEnqueue only it is Placer's built-in queueing: nothing to list
    assert spec_of(config({"plugins": {"preEnqueue": {"enabled": [{"name": "GangScheduling"}]}}})) == spec_of(config())


def test_gang_scheduling_disabled_is_left_out() -> None:
    assert spec_of(config({"plugins": {"multiPoint": {"disabled": [{"name": "GangScheduling"}]}}})) == spec_of(config())
    assert spec_of(config({"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]},
                                       "permit": {"disabled": [{"name": "GangScheduling"}]}}})) == spec_of(config())
    assert spec_of(config({"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]},
                                       "permit": {"disabled": [{"name": "*"}]}}})) == spec_of(config())


def test_gang_scheduling_extends_permit_not_filter() -> None:
    """As in kube-scheduler: GangScheduling is no filter plugin, NodeResourcesFit no permit plugin."""
    assert problems(config({"plugins": {"filter": {"enabled": [{"name": "GangScheduling"}]}}})) == [
        "profiles[0].plugins.filter.enabled[0]: GangScheduling: plugin GangScheduling does not extend filter plugin"]
    assert problems(config({"plugins": {"permit": {"enabled": [{"name": "NodeResourcesFit"}]}}})) == [
        "profiles[0].plugins.permit.enabled[0]: NodeResourcesFit: plugin NodeResourcesFit does not extend permit "
        "plugin"]


def test_v1beta3_in_tree_volume_limits() -> None:
    """v1.24's defaults named the in-tree limits; v1 rejects them, as kube-scheduler does."""
    doc = config({"plugins": {"filter": {"enabled": [{"name": "EBSLimits"}, {"name": "GCEPDLimits"}]}}},
                 api_version=V1BETA3)
    [profile] = import_config(doc).profiles
    assert "EBSLimits" not in names(profile.document["spec"]["filters"])
    assert any("counted by NodeVolumeLimits" in note for note in profile.notes)
    found = problems({**doc, "apiVersion": V1})
    assert found[0] == ('profiles[0].plugins.filter.enabled[0]: EBSLimits: was invalid in version '
                        '"kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version '
                        '"kubescheduler.config.k8s.io/v1")')


def test_plugin_packages_and_placer_plugins_import(tmp_path: Path) -> None:
    """Names are looked up in the registry: Placer's own plugins, enabled through multiPoint, take
    the roles their classes have."""
    spec = spec_of(config({"plugins": {"multiPoint": {"enabled": [{"name": "NodeLabel", "weight": 4}]}},
                           "pluginConfig": [{"name": "NodeLabel", "args": {"preferred": {"ssd": "true"}}}]}))
    assert {"name": "NodeLabel", "args": {"preferred": {"ssd": "true"}}} in spec["filters"]
    assert {"name": "NodeLabel", "weight": 4, "args": {"preferred": {"ssd": "true"}}} in spec["scores"]
    if "AnnotationScore" in REGISTRY:  # the example plugin package, installed by `make install`
        spec = spec_of(config({"plugins": {"score": {"enabled": [{"name": "AnnotationScore", "weight": 2}]}}}))
        assert scores(spec)["AnnotationScore"] == 2


# ------------------------------------------------------------------------------ what Placer lacks


def test_unknown_plugin_is_exit_2_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """kube's docs' example of custom score plugins: Placer has neither."""
    doc = config({"plugins": {"score": {"disabled": [{"name": "PodTopologySpread"}],
                                        "enabled": [{"name": "MyCustomPluginA", "weight": 2},
                                                    {"name": "MyCustomPluginB", "weight": 1}]}}})
    code, out, err = cli(capsys, tmp_path, doc)
    assert code == 2 and out == ""
    assert "profiles[0].plugins.score.enabled[0]: MyCustomPluginA: Placer has no plugin \"MyCustomPluginA\"" in err
    assert "profiles[0].plugins.score.enabled[1]: MyCustomPluginB" in err
    assert "--skip-unknown" in err


def test_skip_unknown_writes_comments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = config({"plugins": {"multiPoint": {"enabled": [{"name": "MyPlugin"}]}},
                  "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
                      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                          {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}}]})
    code, out, err = cli(capsys, tmp_path, doc, "--skip-unknown")
    assert code == 0, err
    assert '# skipped: profiles[0].plugins.multiPoint.enabled[0]: MyPlugin: Placer has no plugin "MyPlugin"' in out
    assert "# skipped: profiles[0].pluginConfig[0] NodeAffinity: args.addedAffinity: Placer's NodeAffinity" in out
    [profile] = [d for d in yaml.safe_load_all(out) if d]
    assert "MyPlugin" not in json.dumps(profile)
    assert {"name": "NodeAffinity"} in profile["spec"]["filters"]  # kept, without the arg
    compile_profile("p", profile["spec"])


def test_args_placer_does_not_take() -> None:
    addedAffinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    assert problems(config({"pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": addedAffinity}}]})) == [
        "profiles[0].pluginConfig[0] NodeAffinity: args.addedAffinity: Placer's NodeAffinity does not take this "
        f"arg; it behaves as kube-scheduler's default (none), not {addedAffinity!r}"]
    found = problems(config({"pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 300}}]}))
    assert found == ["profiles[0].pluginConfig[0] VolumeBinding: args.bindTimeoutSeconds: Placer's VolumeBinding "
                     "does not take this arg; it behaves as kube-scheduler's default (600), not 300"]
    found = problems(config({"pluginConfig": [{"name": "ImageLocality", "args": {"typo": 1}}]}))
    assert found == ["profiles[0].pluginConfig[0] ImageLocality: args.typo: Placer's ImageLocality does not take "
                     "this arg (it takes none)"]


def test_invalid_args_name_plugin_and_field() -> None:
    found = problems(config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "Mostallocated"}}}]}))
    assert len(found) == 1
    assert found[0].startswith("profiles[0].pluginConfig[0] NodeResourcesFit: args.scoringStrategy.type: ")
    found = problems(config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"kind": "InterPodAffinityArgs"}}]}))
    assert found == ["profiles[0].pluginConfig[0] NodeResourcesFit: args.kind: args for plugin NodeResourcesFit were "
                     'not of type NodeResourcesFitArgs, got "InterPodAffinityArgs"']


def test_weights_out_of_placers_range() -> None:
    found = problems(config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 150}]}}}))
    assert found == ["profiles[0].plugins.score.enabled[0] ImageLocality: weight: 150: Placer takes a weight of 1..100"]
    spec = spec_of(config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}}))
    assert scores(spec)["ImageLocality"] == 1  # kube: a weight of 0 is 1


def test_queue_sort_and_binder_must_be_placers() -> None:
    found = problems(config({"plugins": {"queueSort": {"enabled": [{"name": "NodeLabel"}],
                                                       "disabled": [{"name": "*"}]}}}))
    assert found == ["profiles[0].plugins.queueSort.enabled[0]: NodeLabel: Placer's queue order is PrioritySort's only"]


def test_plugin_at_a_point_it_does_not_extend() -> None:
    found = problems(config({"plugins": {"filter": {"enabled": [{"name": "ImageLocality"}]}}}))
    assert found == ["profiles[0].plugins.filter.enabled[0]: ImageLocality: plugin ImageLocality does not extend "
                     "filter plugin"]


def test_malformed_configs() -> None:
    assert problems(config({"schedulerName": "a"}, {"schedulerName": "a"})) == [
        'profiles[1].schedulerName: Duplicate value: "a" (profiles[0])']
    assert problems(config({"schedulerName": "a"}, {})) == ["profiles[1].schedulerName: Required value"]
    assert problems(config({"plugins": {"fliter": {}}}))[0].startswith("profiles[0].plugins.fliter: unknown extension")
    assert problems(config(profile=[])) == ["profile: unknown field"]
    assert problems(config({"pluginConfig": [{"name": "NodeAffinity"}, {"name": "NodeAffinity"}]})) == [
        'profiles[0].pluginConfig[1]: NodeAffinity: Duplicate value: "NodeAffinity" (repeated config for plugin '
        'NodeAffinity)']
    with pytest.raises(ConfigError, match="kind/apiVersion"):
        import_config({"apiVersion": "kubescheduler.config.k8s.io/v1beta2", "kind": "KubeSchedulerConfiguration"})
    with pytest.raises(ConfigError, match="expected one KubeSchedulerConfiguration document, found 2"):
        import_text("kind: A\n---\nkind: B\n")


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = cli(capsys, tmp_path, "profiles: [\n")
    assert (code, out) == (2, "") and "invalid YAML" in err
    code, out, err = cli(capsys, tmp_path, {"apiVersion": "v1", "kind": "ConfigMap"})
    assert code == 2 and "kind/apiVersion: expected KubeSchedulerConfiguration" in err
    assert main(["import-config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_output_is_valid_profiles(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every document printed is a SchedulerProfile the CRD and the operator accept."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("placer_hack_manifests", ROOT / "hack" / "manifests.py")
    assert spec is not None and spec.loader is not None
    manifests = sys.modules.get("placer_hack_manifests") or importlib.util.module_from_spec(spec)
    if "placer_hack_manifests" not in sys.modules:
        sys.modules["placer_hack_manifests"] = manifests
        spec.loader.exec_module(manifests)
    doc = config({"schedulerName": "Default Scheduler"}, {"schedulerName": "packer", "percentageOfNodesToScore": 50,
                                                          "pluginConfig": [{"name": "NodeResourcesFit", "args": {
                                                              "scoringStrategy": {"type": "MostAllocated"}}}]})
    code, out, err = cli(capsys, tmp_path, doc)
    assert code == 0, err
    documents = [d for d in yaml.safe_load_all(out) if d]
    assert [d["metadata"]["name"] for d in documents] == ["default-scheduler", "packer"]
    assert [d["spec"]["schedulerName"] for d in documents] == ["Default Scheduler", "packer"]
    validator = manifests.cr_validator()
    for document in documents:
        assert list(validator.iter_errors(document)) == []
        compile_profile(document["metadata"]["name"], document["spec"])


def test_shadow_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = cli(capsys, tmp_path, config(), "--shadow")
    assert code == 0, err
    [profile] = [d for d in yaml.safe_load_all(out) if d]
    assert profile["metadata"]["name"] == "default-scheduler-placer-shadow"
    assert profile["spec"]["mode"] == "Shadow" and profile["spec"]["shadowOf"] == "default-scheduler"
    assert profile["spec"]["schedulerName"] == "default-scheduler-placer-shadow"
    assert compile_profile("s", profile["spec"]).shadow_of == "default-scheduler"


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(config())))
    assert main(["import-config", "-"]) == 0
    assert "from <stdin>, profiles[0]" in capsys.readouterr().out


def test_topology_aware_workload_scheduling_plugins_map_to_filters_and_scores() -> None:
    """kube's TopologyAwareWorkloadScheduling plugins (applyTopologyAwareWorkloadScheduling appends
    them to multiPoint with the gate on): the generator among the filters, PodGroupPodsCount among
    the scores with its placement weight; at placementGenerate / placementScore alike."""
    multi = spec_of(config({"plugins": {"multiPoint": {"enabled": [
        {"name": "GangScheduling"}, {"name": "TopologyPlacementGenerator"},
        {"name": "PodGroupPodsCount", "weight": 1}]}}}))
    assert names(multi["filters"])[-2:] == ["GangScheduling", "TopologyPlacementGenerator"]
    assert scores(multi)["PodGroupPodsCount"] == 1 and scores(multi)["NodeResourcesFit"] == 1
    points = spec_of(config({"plugins": {
        "placementGenerate": {"enabled": [{"name": "TopologyPlacementGenerator"}]},
        "placementScore": {"enabled": [{"name": "PodGroupPodsCount", "weight": 3}]}}}))
    assert "TopologyPlacementGenerator" in names(points["filters"])
    assert scores(points)["PodGroupPodsCount"] == 3
    default = spec_of(config())
    assert "TopologyPlacementGenerator" not in names(default["filters"])  # the gate is off by default
    assert problems(config({"plugins": {"placementScore": {"enabled": [{"name": "TopologyPlacementGenerator"}]}}})) \
        == ["profiles[0].plugins.placementScore.enabled[0]: TopologyPlacementGenerator: plugin "
            "TopologyPlacementGenerator does not extend placementScore plugin"]
