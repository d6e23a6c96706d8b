"""Pods and nodes as the engine reads them: requests summed as kube's resourcehelper.PodRequests,
kube-scheduler's non-zero defaults, and invalid specs that fail scheduling instead of raising."""

from __future__ import annotations

import pytest
from placer.engine.objects import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, ObjectError, Taint
from placer.engine.parsing import parse_node, parse_node_metrics, parse_pod
from placer.testing import GiB, MiB, cluster_of, container, decide, make_profile, node, node_metrics, pod


def requests_of(**kwargs: object) -> dict[str, int]:
    info = parse_pod(pod("p", **kwargs))  # type: ignore[arg-type]
    assert info.error is None, info.error
    return info.requests


def test_containers_are_summed() -> None:
    containers = [container("a", cpu="1", memory="1Gi"), container("b", cpu="500m", requests={"example.com/x": "2"})]
    assert requests_of(containers=containers) == {"cpu": 1500, "memory": GiB, "example.com/x": 2}


def test_init_containers_take_the_maximum() -> None:
    containers = [container("a", cpu="1", memory="1Gi"), container("b", cpu="1", memory="1Gi")]
    inits = [container("i1", cpu="3", memory="512Mi"), container("i2", cpu="500m", memory="3Gi")]
    # cpu max(2, 3, 0.5) = 3; memory max(2Gi, 512Mi, 3Gi) = 3Gi
    assert requests_of(containers=containers, init_containers=inits) == {"cpu": 3000, "memory": 3 * GiB}


def test_restartable_sidecars_add_up() -> None:
    # the KEP-753 example: sidecar 1 cpu, then a regular init of 3 cpu runs beside it, then the
    # app of 2 cpu beside the sidecar: max(1 + 3, 2 + 1) = 4
    inits = [container("sidecar", cpu="1", restart_policy="Always"), container("init", cpu="3")]
    assert requests_of(containers=[container("app", cpu="2")], init_containers=inits) == {"cpu": 4000}
    # a regular init before the sidecar does not run beside it: max(5, 2 + 1) = 5
    inits = [container("init", cpu="5"), container("sidecar", cpu="1", restart_policy="Always")]
    assert requests_of(containers=[container("app", cpu="2")], init_containers=inits) == {"cpu": 5000}
    # a small init: the sum of app and sidecars wins: 2 + 1 + 1
    inits = [container("s1", cpu="1", restart_policy="Always"), container("i", cpu="1500m"),
             container("s2", cpu="1", restart_policy="Always")]
    assert requests_of(containers=[container("app", cpu="2")], init_containers=inits) == {"cpu": 4000}


def test_overhead_is_added() -> None:
    assert requests_of(cpu="1", memory="1Gi", overhead={"cpu": "250m", "memory": "120Mi"}) == {
        "cpu": 1250,
        "memory": GiB + 120 * MiB,
    }


def test_limits_default_missing_requests() -> None:
    assert requests_of(limits={"cpu": "2", "memory": "1Gi"}) == {"cpu": 2000, "memory": GiB}
    assert requests_of(cpu="500m", limits={"cpu": "2", "memory": "1Gi"}) == {"cpu": 500, "memory": GiB}
    assert requests_of(limits={"nvidia.com/gpu": "1"}) == {"nvidia.com/gpu": 1}


def test_unknown_resources_are_ignored_and_pods_is_not_a_request() -> None:
    assert requests_of(requests={"cpu": "1", "funky": "3", "pods": "2"}) == {"cpu": 1000}


def test_non_zero_defaults_for_scoring() -> None:
    info = parse_pod(pod("p"))
    assert info.requests == {}
    assert (info.nonzero_cpu, info.nonzero_memory) == (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    assert (100, 200 * MiB) == (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    # per container: one with cpu only, one with nothing
    info = parse_pod(pod("p", containers=[container("a", cpu="1"), container("b")]))
    assert (info.nonzero_cpu, info.nonzero_memory) == (1100, 400 * MiB)
    # an explicit zero is kept
    info = parse_pod(pod("p", cpu="0", memory="0"))
    assert (info.nonzero_cpu, info.nonzero_memory) == (0, 0)


def test_non_zero_defaults_apply_to_sidecars_and_init_containers() -> None:
    # kube's NonMissingContainerRequests covers init containers too: a request-less sidecar runs
    # beside the app and counts 100m / 200Mi as well
    info = parse_pod(pod("p", containers=[container("app")], init_containers=[container("s", restart_policy="Always")]))
    assert (info.nonzero_cpu, info.nonzero_memory) == (200, 400 * MiB)
    info = parse_pod(pod("p", containers=[container("app", cpu="1", memory="1Gi")],
                         init_containers=[container("s", memory="64Mi", restart_policy="Always")]))
    assert (info.nonzero_cpu, info.nonzero_memory) == (1100, GiB + 64 * MiB)
    # a regular init container with only memory: its default cpu (100m) is below the app's
    info = parse_pod(pod("p", containers=[container("app", cpu="1", memory="1Gi")],
                         init_containers=[container("i", memory="4Gi")]))
    assert (info.nonzero_cpu, info.nonzero_memory) == (1000, 4 * GiB)
    assert info.requests == {"cpu": 1000, "memory": 4 * GiB}


def test_identity_and_defaults() -> None:
    raw = pod("web", namespace="", scheduler="", priority=7, created="2025-03-10T10:00:00Z", labels={"app": "w"})
    info = parse_pod(raw)
    assert info.key == "default/web"
    assert info.scheduler_name == "default-scheduler"
    assert info.priority == 7
    assert info.created == 1741600800.0
    assert info.labels == {"app": "w"}
    assert not info.terminal
    assert parse_pod(pod("done", phase="Succeeded")).terminal
    assert parse_pod(pod("failed", phase="Failed")).terminal
    deleting = pod("bye")
    deleting["metadata"]["deletionTimestamp"] = "2025-03-10T10:00:00Z"
    assert parse_pod(deleting).deleting
    assert not parse_pod(deleting).preempted


@pytest.mark.parametrize(
    ("conditions", "preempted"),
    [
        ([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], True),
        ([{"type": "Ready", "status": "True"},
          {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], True),
        ([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}], False),
        ([{"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}], False),
        # kube reads the first DisruptionTarget condition only
        ([{"type": "DisruptionTarget", "status": "False"},
          {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], False),
        ("not a list", False),
        (["not an object", {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], True),
    ],
)
def test_a_schedulers_victim_is_known_by_its_disruption_target(conditions: object, preempted: bool) -> None:
    """kube's podTerminatingByPreemption reads the DisruptionTarget condition (preemption waits for
    such victims on the nominated node); malformed conditions are no victim's."""
    raw = pod("victim", node_name="a")
    raw["status"]["conditions"] = conditions
    info = parse_pod(raw)
    assert info.preempted is preempted
    assert info.error is None


def test_images_are_normalised_and_include_init_containers() -> None:
    info = parse_pod(pod("p", containers=[container("a", image="nginx"), container("b", image="reg:5000/x/y:2")],
                         init_containers=[container("i", image="reg:5000/init")]))
    assert info.images == ("reg:5000/init:latest", "nginx:latest", "reg:5000/x/y:2")
    assert info.container_count == 3


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["spec"].update(priority="high"), "spec.priority"),
        (lambda p: p["spec"].update(containers={"name": "x"}), "spec.containers"),
        (lambda p: p["spec"]["containers"][0].update(resources=[1]), "spec.containers[0].resources"),
        (lambda p: p["spec"].update(tolerations=[{"key": "k", "operator": "Maybe"}]), "spec.tolerations[0].operator"),
        (lambda p: p["spec"].update(tolerations=[{"operator": "Equal", "value": "v"}]), "spec.tolerations[0].operator"),
        (lambda p: p["spec"].update(tolerations=[{"key": "k", "effect": "Never"}]), "spec.tolerations[0].effect"),
        (lambda p: p["spec"].update(nodeSelector={"zone": 1}), "spec.nodeSelector.zone"),
        (lambda p: p["metadata"].update(labels={"a": None}), "metadata.labels.a"),
        (lambda p: p["spec"].update(overhead={"cpu": "x"}), "spec.overhead.cpu"),
        (lambda p: p["spec"].update(initContainers=[{"name": "i", "resources": {"limits": {"memory": "lots"}}}]),
         "spec.initContainers[0].resources.limits.memory"),
    ],
)
def test_invalid_spec_sets_error_naming_the_field(mutate: object, field: str) -> None:
    raw = pod("p", cpu="1")
    mutate(raw)  # type: ignore[operator]
    info = parse_pod(raw)
    assert info.error is not None
    assert info.error.startswith(f"invalid pod default/p: {field}: ")


def test_invalid_pod_fails_scheduling_with_its_error() -> None:
    cluster = cluster_of([node("a"), node("b")])
    info = parse_pod(pod("p", cpu="1.2.3"))
    decision = decide(make_profile(), info, cluster)
    assert decision.node is None
    assert decision.message == info.error
    assert decision.reasons == {}
    assert decision.top == []


def test_pod_without_usable_identity_raises() -> None:
    with pytest.raises(ObjectError) as caught:
        parse_pod({"metadata": {"namespace": "x"}})
    assert caught.value.path == "metadata.name"
    with pytest.raises(ObjectError):
        parse_pod(["not", "a", "pod"])  # type: ignore[arg-type]


def test_node_parsing() -> None:
    raw = node("n", cpu="3920m", memory="16Gi", taints=["a=1:NoSchedule", "b:PreferNoSchedule"], unschedulable=True)
    info = parse_node(raw)
    assert info.allocatable == {"cpu": 3920, "memory": 16 * GiB, "pods": 110}
    assert info.taints == (Taint("a", "1", "NoSchedule"), Taint("b", "", "PreferNoSchedule"))
    assert info.unschedulable and info.ready
    # capacity stands in for a missing allocatable
    raw = node("n")
    raw["status"]["capacity"] = raw["status"].pop("allocatable")
    assert parse_node(raw).allocatable["cpu"] == 4000


def test_node_annotations_are_kept_and_a_change_is_a_node_update() -> None:
    raw = node("n", annotations={"placer.dev/score": "5"})
    info = parse_node(raw)
    assert info.annotations == {"placer.dev/score": "5"} and parse_node(node("m")).annotations == {}
    raw["metadata"]["annotations"]["placer.dev/score"] = "6"
    assert info.annotations == {"placer.dev/score": "5"}  # a copy: the watch's object may be reused
    cluster = cluster_of([node("n", annotations={"placer.dev/score": "5"})])
    before = cluster.static_version
    assert not cluster.upsert_node(parse_node(node("n", annotations={"placer.dev/score": "5"})))
    assert cluster.upsert_node(parse_node(raw)) and cluster.static_version > before
    assert cluster.node("n").annotations == {"placer.dev/score": "6"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda n: n["spec"].update(taints=[{"key": "a", "effect": "Sometimes"}]), "spec.taints[0].effect"),
        (lambda n: n["spec"].update(taints=[{"effect": "NoSchedule"}]), "spec.taints[0].key"),
        (lambda n: n["status"].update(images=[{"names": ["x"], "sizeBytes": "big"}]), "status.images[0].sizeBytes"),
        (lambda n: n["metadata"].update(labels={"a": 1}), "metadata.labels.a"),
        (lambda n: n["metadata"].update(annotations={"placer.dev/score": 5}), "metadata.annotations.placer.dev/score"),
        (lambda n: n["metadata"].update(annotations=["a"]), "metadata.annotations"),
        (lambda n: n["metadata"].pop("name"), "metadata.name"),
    ],
)
def test_invalid_node_raises_naming_the_field(mutate: object, path: str) -> None:
    raw = node("n")
    mutate(raw)  # type: ignore[operator]
    with pytest.raises(ObjectError) as caught:
        parse_node(raw)
    assert caught.value.path == path


def test_node_metrics_units() -> None:
    assert parse_node_metrics(node_metrics("n", "1500000000n", "2097152Ki")) == ("n", {"cpu": 1500, "memory": 2 * GiB})
    assert parse_node_metrics(node_metrics("n", "250m", "1Gi")) == ("n", {"cpu": 250, "memory": GiB})
    with pytest.raises(ObjectError) as caught:
        parse_node_metrics(node_metrics("n", "lots", "1Gi"))
    assert caught.value.path == "usage.cpu"


def test_equal_spread_constraints_are_parsed_once_and_match_label_keys_keep_pods_apart() -> None:
    """`parse_spread_constraints` shares one parse between pods whose constraints read the same
    (a workload's pods), never between pods whose matchLabelKeys name
    different label values, and never keeps an invalid list (its error comes every time)."""
    from placer.engine.fields import FieldError
    from placer.engine.relations import parse_spread_constraints

    def constraints(group: str) -> list[dict[str, object]]:  # a fresh decode each time, as from JSON
        return [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"group": group}}, "matchLabelKeys": ["hash"]}]

    first = parse_spread_constraints(constraints("a"), {"group": "a", "hash": "1"})
    again = parse_spread_constraints(constraints("a"), {"group": "a", "hash": "1", "other": "x"})
    assert again is first
    other_hash = parse_spread_constraints(constraints("a"), {"group": "a", "hash": "2"})
    assert other_hash is not first and other_hash[0].selector != first[0].selector
    assert other_hash[0].selector.matches({"group": "a", "hash": "2"})
    assert not other_hash[0].selector.matches({"group": "a", "hash": "1"})
    other_group = parse_spread_constraints(constraints("b"), {"group": "b", "hash": "1"})
    assert other_group[0].selector.matches({"group": "b", "hash": "1"})
    invalid = [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    for _ in range(2):
        with pytest.raises(FieldError, match="maxSkew"):
            parse_spread_constraints(invalid, {})
    long = [{"maxSkew": 1, "topologyKey": f"key-{index}", "whenUnsatisfiable": "DoNotSchedule"}
            for index in range(80)]  # past the memo's bound on a list's text: parsed each time
    assert parse_spread_constraints(long, {}) is not parse_spread_constraints(long, {})
