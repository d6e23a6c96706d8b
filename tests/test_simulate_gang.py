"""`placer simulate` with PodGroups (gang scheduling) through `placer.cli.main`: the examples
(examples/gang-cluster.yaml, examples/gang-preemption.yaml), a gang member's `group` in the JSON
(API.md §4), PodGroups of both APIs in `--cluster` files, and invalid ones (exit 2 naming the
file, the document and the field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from placer.testing import node, pod

from tests.cli_helpers import run, run_json, write

ROOT = Path(__file__).resolve().parents[1]
GANG_CLUSTER = ROOT / "examples" / "gang-cluster.yaml"
GANG_PREEMPTION = ROOT / "examples" / "gang-preemption.yaml"
DEFAULT_PROFILE = ROOT / "examples" / "profiles" / "default.yaml"
CONTRACT_KEYS = ["pod", "profile", "node", "message", "scores", "volumes", "devices", "preemption"]


def by_pod(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["pod"]: p for p in result["placements"]}


def gang(name: str, min_count: int | None, api: str = "scheduling.k8s.io/v1alpha2", **spec: Any) -> dict[str, Any]:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": policy, **spec}}


def member(name: str, group: str, cpu: str, minute: int, **kwargs: Any) -> dict[str, Any]:
    obj = pod(name, cpu, created=f"2026-01-01T00:{minute:02d}:00Z", **kwargs)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


# ----------------------------------------------------------------- the examples


def test_gang_example(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "--cluster", GANG_CLUSTER, "--profile", DEFAULT_PROFILE)
    placements = by_pod(result)
    assert result["summary"] == {"pods": 19, "scheduled": 12, "unschedulable": 7}
    groups = {key: (p["group"]["name"], p["group"]["placed"]) for key, p in placements.items() if "group" in p}
    assert groups == {
        **{f"training/mnist-{i}": ("training/mnist", True) for i in range(5)},
        **{f"training/resnet-{i}": ("training/resnet", False) for i in range(4)},
        **{f"ml/ray-{i}": ("ml/ray-cluster", True) for i in range(3)},
        **{f"training/sweep-{i}": ("training/sweep", True) for i in range(3)},
        **{f"training/partial-{i}": ("training/partial", False) for i in range(2)},
        "training/late-0": ("training/late", False),
    }
    for p in result["placements"]:
        assert list(p) == ([*CONTRACT_KEYS, "group"] if p["pod"] != "default/solo" else CONTRACT_KEYS)
    # mnist: five workers one a node; resnet: none placed, nothing held
    assert len({placements[f"training/mnist-{i}"]["node"] for i in range(5)}) == 5
    assert all(placements[f"training/resnet-{i}"]["node"] is None for i in range(4))
    assert placements["training/resnet-0"]["message"] == (
        "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, "
        "one or more plugins asked to wait and no plugin rejected pod")
    assert placements["training/resnet-1"]["message"] == "0/6 nodes are available: 6 Insufficient cpu."
    # the room resnet did not hold goes to the next groups
    assert all(placements[f"ml/ray-{i}"]["node"] for i in range(3))
    assert placements["training/partial-0"]["message"] == (
        "waiting for minCount pods from a gang to appear in scheduling queue")
    assert placements["training/late-0"]["message"] == (
        'waiting for pods\'s pod group "late" to appear in scheduling queue')
    assert placements["default/solo"]["node"] is not None


def test_gang_example_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--cluster", GANG_CLUSTER, "--profile", DEFAULT_PROFILE)
    assert code == 0
    assert "19 pods: 12 scheduled, 7 unschedulable" in out
    assert ("groups: training/mnist placed, training/resnet not placed, ml/ray-cluster placed, training/sweep placed, "
            "training/partial not placed, training/late not placed") in out


def test_gang_preemption_example(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "--cluster", GANG_PREEMPTION, "--profile", DEFAULT_PROFILE)
    placements = by_pod(result)
    assert result["summary"] == {"pods": 3, "scheduled": 3, "unschedulable": 0}
    victims: list[str] = []
    for i in range(3):
        p = placements[f"training/llm-{i}"]
        assert p["group"] == {"name": "training/llm", "placed": True}
        assert p["preemption"]["node"] == p["node"]
        assert p["message"] == "0/4 nodes are available: 4 Insufficient cpu."
        victims += p["preemption"]["victims"]
    assert sorted(victims) == [f"batch/filler-{i}" for i in range(1, 7)]


# ----------------------------------------------------------------- hand-written dumps


def test_two_gangs_one_whole_the_other_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "c.yaml", *(node(f"n{i}") for i in range(4)), gang("a", 3), gang("b", 3),
                    *(member(f"a{i}", "a", "3", i) for i in range(3)),
                    *(member(f"b{i}", "b", "3", 10 + i) for i in range(3)))
    profile = write(tmp_path / "p.yaml", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                          "metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    placements = by_pod(run_json(capsys, "--cluster", cluster, "--profile", profile))
    assert [placements[f"default/a{i}"]["node"] is not None for i in range(3)] == [True] * 3
    assert [placements[f"default/b{i}"]["node"] for i in range(3)] == [None] * 3
    assert placements["default/b0"]["group"] == {"name": "default/b", "placed": False}


def test_a_group_is_decided_at_its_first_pods_place_in_the_queue(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A member queued after a plain pod is still decided with the first member, before it."""
    cluster = write(tmp_path / "c.yaml", node("n1"), gang("g", 2),
                    member("g0", "g", "2", 0), pod("plain", "2", created="2026-01-01T00:01:00Z"),
                    member("g1", "g", "2", 2))
    profile = write(tmp_path / "p.yaml", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                          "metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    result = run_json(capsys, "--cluster", cluster, "--profile", profile)
    assert [(p["pod"], p["node"]) for p in result["placements"]] == [
        ("default/g0", "n1"), ("default/g1", "n1"), ("default/plain", None)]


def test_scheduler_plugins_groups_in_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What `kubectl get podgroups.scheduling.x-k8s.io -A -o yaml` prints: a v1 List."""
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "ray", "namespace": "default"}, "spec": {"minMember": 2}}
    pods = [pod(f"r{i}", "1", labels={"scheduling.x-k8s.io/pod-group": "ray"}) for i in range(2)]
    cluster = write(tmp_path / "c.yaml", node("n1"), {"apiVersion": "v1", "kind": "List", "items": [group]}, *pods)
    profile = write(tmp_path / "p.yaml", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                          "metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    placements = by_pod(run_json(capsys, "--cluster", cluster, "--profile", profile))
    assert {p["group"]["name"] for p in placements.values()} == {"default/ray"}
    assert all(p["node"] == "n1" and p["group"]["placed"] for p in placements.values())


def test_only_pods_a_profile_owns_count_toward_the_quorum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path / "c.yaml", node("n1"), gang("g", 2),
                    member("ours", "g", "1", 0), member("theirs", "g", "1", 1, scheduler="default-scheduler"))
    profile = write(tmp_path / "p.yaml", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                          "metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    [placement] = run_json(capsys, "--cluster", cluster, "--profile", profile)["placements"]
    assert placement["pod"] == "default/ours" and placement["node"] is None
    assert placement["message"] == "waiting for minCount pods from a gang to appear in scheduling queue"


@pytest.mark.parametrize(("group", "expected"), [
    (gang("g", 0), "document 2 PodGroup 'g': spec.schedulingPolicy.gang.minCount: Invalid value: 0: "
                   "must be greater than or equal to 1"),
    ({**gang("g", 2), "apiVersion": "scheduling.volcano.sh/v1beta1"},
     'document 2 PodGroup \'g\': apiVersion: Unsupported value: "scheduling.volcano.sh/v1beta1": expected '
     "scheduling.k8s.io/v1beta1, scheduling.k8s.io/v1alpha2, scheduling.x-k8s.io/v1alpha1"),
    ({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"},
      "spec": {"minMember": "two"}}, "document 2 PodGroup 'g': spec.minMember: Invalid value: 'two'"),
])
def test_invalid_podgroups_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], group: dict[str, Any],
                                  expected: str) -> None:
    cluster = write(tmp_path / "c.yaml", node("n1"), group)
    profile = write(tmp_path / "p.yaml", {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile",
                                          "metadata": {"name": "p"}, "spec": {"schedulerName": "placer"}})
    code, _, err = run(capsys, "--cluster", cluster, "--profile", profile)
    assert code == 2
    assert f"{cluster}: {expected}" in err


# ----------------------------------------------------------------- topology (TopologyAwareWorkloadScheduling)

GANG_TOPOLOGY = ROOT / "examples" / "gang-topology.yaml"
RACK = "example.com/rack"
TOPOLOGY_PROFILE = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "topology"},
                    "spec": {"schedulerName": "placer",
                             "filters": [{"name": "NodeResourcesFit"}, {"name": "GangScheduling"},
                                         {"name": "TopologyPlacementGenerator"}],
                             "scores": [{"name": "NodeResourcesFit"}, {"name": "PodGroupPodsCount"}]}}


def rack_node(name: str, rack: str, cpu: str = "2") -> dict[str, Any]:
    return node(name, cpu=cpu, labels={RACK: rack})


def topology_gang(name: str, min_count: int) -> dict[str, Any]:
    return gang(name, min_count, schedulingConstraints={"topology": [{"key": RACK}]})


def test_topology_example_gang_goes_whole_into_one_rack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write(tmp_path / "topology.yaml", TOPOLOGY_PROFILE)
    result = run_json(capsys, "--cluster", GANG_TOPOLOGY, "--profile", profile)
    placements = by_pod(result)
    assert {placements[f"ml/train-{i}"]["node"] for i in range(5)} <= {"b1", "b2", "b3"}
    assert all(placements[f"ml/big-{i}"]["node"] is None for i in range(7))
    train = placements["ml/train-0"]["group"]
    assert train["placement"] == "rack-b" and train["topologyKey"] == RACK
    assert [(t["domain"], t["pods"], t["placed"], t["fits"], t["chosen"]) for t in train["placements"]] == [
        ("rack-a", 5, 4, False, False), ("rack-b", 5, 5, True, True), ("rack-c", 5, 2, False, False)]
    big = placements["ml/big-0"]["group"]
    assert list(big) == ["name", "placed", "topologyKey", "placement", "placements"]
    assert (big["placed"], big["placement"], len(big["placements"])) == (False, None, 3)
    code, out, _ = run(capsys, "--cluster", GANG_TOPOLOGY, "--profile", profile)
    assert code == 0
    assert ("groups: ml/train placed in example.com/rack=rack-b (tried rack-a 4/5, rack-b 5/5, rack-c 2/5), "
            "ml/big not placed (tried rack-a 4/7, rack-b 1/7, rack-c 2/7)") in out


def test_a_sixth_pod_stays_in_its_groups_rack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # five pods of the gang bound in rack-b; rack-a is empty (LeastAllocated would take it)
    bound = [member(f"w{i}", "train", "1", i, node_name=f"b{i % 3 + 1}") for i in range(5)]
    cluster = write(tmp_path / "cluster.yaml", rack_node("a1", "rack-a"), rack_node("a2", "rack-a"),
                    *(rack_node(f"b{i}", "rack-b") for i in (1, 2, 3)), topology_gang("train", 5), *bound,
                    member("w5", "train", "1", 9))
    profile = write(tmp_path / "topology.yaml", TOPOLOGY_PROFILE)
    sixth = by_pod(run_json(capsys, "--cluster", cluster, "--profile", profile))["default/w5"]
    assert sixth["node"] in {"b1", "b2", "b3"}
    assert [t["domain"] for t in sixth["group"]["placements"]] == ["rack-b"]


def test_a_gang_no_rack_fits_then_the_rack_that_grows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [rack_node("a1", "rack-a", "4"), rack_node("b1", "rack-b", "6"), rack_node("c1", "rack-c", "2")]
    pods = [member(f"p{i}", "seven", "1", i) for i in range(7)]
    profile = write(tmp_path / "topology.yaml", TOPOLOGY_PROFILE)
    before = run_json(capsys, "--cluster", write(tmp_path / "a.yaml", *nodes, topology_gang("seven", 7), *pods),
                      "--profile", profile)
    assert before["summary"]["scheduled"] == 0
    grown = [*nodes, rack_node("c2", "rack-c", "6")]
    after = run_json(capsys, "--cluster", write(tmp_path / "b.yaml", *grown, topology_gang("seven", 7), *pods),
                     "--profile", profile)
    assert {p["node"] for p in after["placements"]} <= {"c1", "c2"} and after["summary"]["scheduled"] == 7


def test_topology_groups_by_domain_in_the_html_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write(tmp_path / "topology.yaml", TOPOLOGY_PROFILE)
    page = tmp_path / "report.html"
    code, _, err = run(capsys, "--cluster", GANG_TOPOLOGY, "--profile", profile, "--html", page)
    assert code == 0, err
    text = page.read_text()
    assert '<section id="groups"><h2>Groups by domain' in text
    assert 'data-group="ml/train" data-domain="rack-b" data-chosen="true"' in text
    assert 'data-group="ml/big" data-domain="rack-a" data-chosen="false"' in text
    assert "group ml/train in example.com/rack=rack-b" in text


def test_topology_example_with_the_default_profile(capsys: pytest.CaptureFixture[str]) -> None:
    """A PodGroup with a key is placed by topology in any profile (the server shows the gate on)."""
    result = run_json(capsys, "--cluster", GANG_TOPOLOGY, "--profile", DEFAULT_PROFILE)
    placements = by_pod(result)
    assert {placements[f"ml/train-{i}"]["node"] for i in range(5)} <= {"b1", "b2", "b3"}
    assert placements["ml/big-0"]["group"]["placement"] is None
