"""NodeDeclaredFeatures: the features a pod needs (kube's component-helpers/nodedeclaredfeatures),
the version gating, and the filter against `status.declaredFeatures` — kube v1.36's test rows
(nodedeclaredfeatures_test.go, framework_test.go, restart_all_containers_test.go) and the cluster
around them."""

from __future__ import annotations

from typing import Any

import pytest

from placer.engine.framework import ClusterEvent
from placer.engine.node_features import (
    ALL_FEATURES,
    DEFAULT_FRAMEWORK,
    RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS,
    SCHEDULER_VERSION,
    USER_NAMESPACES_HOST_NETWORK_SUPPORT,
    Feature,
    FeatureFramework,
    Version,
    required_features,
)
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.profile import ProfileError
from placer.plugins.node_declared_features import REASON, NodeDeclaredFeatures
from placer.testing import cluster_of, container, decide, filter_result, make_plugin, make_profile, node, pod

PLUGIN = make_plugin("NodeDeclaredFeatures")
ONLY = make_profile(filters=[{"name": "NodeDeclaredFeatures"}], scores=[])


def featured_node(name: str, features: list[str] | None, **kwargs: Any) -> dict:
    result = node(name, **kwargs)
    if features is not None:
        result["status"]["declaredFeatures"] = features
    return result


def needing(name: str, *features: str) -> PodInfo:
    """A pod whose requirements are given directly (kube's tests write the PreFilter state)."""
    info = parse_pod(pod(name))
    info.required_features = tuple(sorted(features))
    return info


def host_network_pod(
    name: str = "p", host_users: bool | None = False, host_network: bool = True, **kwargs: Any
) -> dict:
    result = pod(name, **kwargs)
    result["spec"]["hostNetwork"] = host_network
    if host_users is not None:
        result["spec"]["hostUsers"] = host_users
    return result


def restart_all(name: str = "main") -> dict:
    """kube's `containerWithRestartAllContainersAction`."""
    result = container(name)
    result["restartPolicy"] = "Never"
    result["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}
    ]
    return result


# ------------------------------------------------------------------ the library (component-helpers)


def mock(name: str, infer: bool, max_version: str | None = None) -> Feature:
    return Feature(name, lambda spec: infer, Version.parse(max_version) if max_version else None)


# TestPreFilter (nodedeclaredfeatures_test.go): what a pod requires, by registry and scheduler version
@pytest.mark.parametrize(
    ("features", "version", "expected"),
    [
        ([mock("TestFeature1", True), mock("TestFeature2", False)], "1.35.0", ("TestFeature1",)),
        ([mock("TestFeature1", True, "1.38.0"), mock("TestFeature2", True, "1.38.0")], "1.35.0",
         ("TestFeature1", "TestFeature2")),
        ([mock("TestFeature1", False), mock("TestFeature2", False)], "1.35.0", ()),  # Skip
        ([mock("TestFeature1", True, "1.33.0"), mock("TestFeature2", False)], "1.34.0", ()),  # version > MaxVersion
    ],
    ids=["feature requirements", "multiple requirements", "no requirements", "version above max version"],
)
def test_pre_filter_rows(features: list[Feature], version: str, expected: tuple[str, ...]) -> None:
    assert FeatureFramework(features).infer_for_scheduling({}, Version.parse(version)) == expected


def pod_level_resources(spec: dict) -> bool:
    return spec.get("resources") is not None


WITH_RESOURCES = {"resources": {"requests": {"cpu": "500m"}}}


# TestInferForPodScheduling (framework_test.go)
@pytest.mark.parametrize(
    ("spec", "max_version", "target", "expected"),
    [
        (WITH_RESOURCES, None, "1.30.0", ("PodLevelResources",)),
        ({}, None, "1.30.0", ()),
        (WITH_RESOURCES, "1.30.0", "1.31.0", ()),  # universally available, not inferred
        (WITH_RESOURCES, "1.30.0", "0.0.0-alpha.2.39+049eafd34dfbd2", ("PodLevelResources",)),  # pre-release
        (WITH_RESOURCES, "1.30.0", "1.40.0", ()),  # exceeds max version
    ],
)
def test_infer_for_pod_scheduling_rows(spec: dict, max_version: str | None, target: str, expected: tuple) -> None:
    limit = Version.parse(max_version) if max_version else None
    framework = FeatureFramework([Feature("PodLevelResources", pod_level_resources, limit)])
    assert framework.infer_for_scheduling(spec, Version.parse(target)) == expected


def test_target_version_cannot_be_nil() -> None:
    framework = FeatureFramework([Feature("PodLevelResources", pod_level_resources)])
    with pytest.raises(ValueError, match="target version cannot be nil"):
        framework.infer_for_scheduling(WITH_RESOURCES, None)


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.38.0", "1.39.0-alpha.2.39+049eafd34dfbd2"),  # framework_test: past max version, pre-release
        ("1.30.0-alpha.1", "1.30.0"),  # a pre-release comes before its release
        ("1.30.0-alpha.2", "1.30.0-alpha.10"),  # numeric identifiers compare as numbers
        ("1.30.0-alpha.10", "1.30.0-beta"),
        ("1.9.9", "1.10.0"),
        ("1.36", "1.36.1"),
    ],
)
def test_versions_compare_as_kube_util_version(lower: str, higher: str) -> None:
    assert Version.parse(lower) < Version.parse(higher)
    assert Version.parse(higher) > Version.parse(lower)
    assert not Version.parse(higher) > Version.parse(higher)


def test_version_parsing() -> None:
    assert Version.parse("v1.36.2") == SCHEDULER_VERSION
    assert Version.parse("1.30.0+build.5") == Version.parse("1.30.0")
    assert str(Version.parse("1.39.0-alpha.2")) == "1.39.0-alpha.2"
    for bad in ("", "1", "1.x.0", "01.2.3", "1.2.3-"):
        with pytest.raises(ValueError, match="could not parse"):
            Version.parse(bad)


# TestMatchNode (framework_test.go), registry feature-a, feature-b, feature-c
@pytest.mark.parametrize(
    ("required", "declared", "match", "unsatisfied"),
    [
        (["feature-a", "feature-b"], ["feature-a", "feature-b", "feature-c"], True, ()),
        (["feature-a", "feature-b"], ["feature-a", "feature-c"], False, ("feature-b",)),
        (["feature-a", "feature-b"], ["feature-c"], False, ("feature-a", "feature-b")),
        (["feature-a", "feature-b"], [], False, ("feature-a", "feature-b")),
        ([], ["feature-a", "feature-b", "feature-c"], True, ()),
    ],
    ids=["all match", "some missing", "all missing", "no node features", "no requirements"],
)
def test_match_node_rows(required: list[str], declared: list[str], match: bool, unsatisfied: tuple) -> None:
    framework = FeatureFramework(mock(name, False) for name in ("feature-a", "feature-b", "feature-c"))
    result = framework.match_node(required, declared)
    assert (result.is_match, result.unsatisfied) == (match, unsatisfied)


def test_unknown_declared_names_are_ignored() -> None:
    """kube's TryMap: a feature no registry entry has cannot satisfy anything, nor break the match."""
    assert DEFAULT_FRAMEWORK.known(["FutureFeature", USER_NAMESPACES_HOST_NETWORK_SUPPORT]) == {
        USER_NAMESPACES_HOST_NETWORK_SUPPORT}


def test_registry_is_kube_v1_36s() -> None:
    assert sorted(feature.name for feature in ALL_FEATURES) == [
        "ExtendWebSocketsToKubelet",
        "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers",
        "RestartAllContainersOnContainerExits",
        "UserNamespacesHostNetworkSupport",
    ]
    assert all(feature.max_version is None for feature in ALL_FEATURES)


# restart_all_containers_test.go TestInferForScheduling
@pytest.mark.parametrize(
    ("init_containers", "containers", "expected"),
    [
        ([restart_all("container")], [container("name")], True),  # init container with rules
        ([container("name")], [restart_all("container")], True),  # regular container with rules
        ([container("name")], [container("name2")], False),  # no rules
    ],
    ids=["init container with rules", "regular container with rules", "no rules"],
)
def test_restart_all_containers_rows(init_containers: list, containers: list, expected: bool) -> None:
    spec = {"initContainers": init_containers, "containers": containers}
    assert (RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS in required_features(spec)) is expected


def test_other_restart_rule_actions_need_nothing() -> None:
    rule_container = container("c")
    rule_container["restartPolicyRules"] = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
    assert required_features({"containers": [rule_container]}) == ()


@pytest.mark.parametrize(
    ("host_network", "host_users", "expected"),
    [
        (True, False, (USER_NAMESPACES_HOST_NETWORK_SUPPORT,)),
        (True, True, ()),
        (True, None, ()),  # hostUsers unset: the host's user namespace
        (False, False, ()),
    ],
)
def test_user_namespaces_with_host_network(host_network: bool, host_users: bool | None, expected: tuple) -> None:
    info = parse_pod(host_network_pod(host_users=host_users, host_network=host_network))
    assert info.error is None
    assert info.required_features == expected


def test_a_pod_needing_both_features_lists_both_sorted() -> None:
    info = parse_pod(host_network_pod(containers=[restart_all()]))
    assert info.required_features == (RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS, USER_NAMESPACES_HOST_NETWORK_SUPPORT)


# ------------------------------------------------------------------ the filter


# TestFilter (nodedeclaredfeatures_test.go), registry FeatureA, FeatureB, FeatureC
@pytest.mark.parametrize(
    ("declared", "required", "fits"),
    [
        (["FeatureA", "FeatureB"], ["FeatureA"], True),  # node matches requirements
        (["FeatureB"], ["FeatureA"], False),  # node does not match requirements
        (["FeatureA", "FeatureB", "FeatureC"], ["FeatureA", "FeatureC"], True),  # subset
        (None, ["FeatureA"], False),  # node has no declared features
        (["FeatureA"], ["FeatureA", "FeatureB"], False),  # some but not all
        (["FeatureA", "FeatureB"], [], True),  # no requirements (kube's Skip)
    ],
    ids=["matches", "does not match", "subset", "no declared features", "some but not all", "no requirements"],
)
def test_filter_rows(declared: list[str] | None, required: list[str], fits: bool) -> None:
    plugin = make_plugin("NodeDeclaredFeatures")
    assert isinstance(plugin, NodeDeclaredFeatures)
    plugin.features = FeatureFramework(mock(name, False) for name in ("FeatureA", "FeatureB", "FeatureC"))
    cluster = cluster_of([featured_node("node-1", declared)])
    assert filter_result(plugin, needing("test-pod", *required), cluster) == {"node-1": fits}
    if required:  # with kube's registry, these made-up names are never declared
        assert filter_result(PLUGIN, needing("test-pod", *required), cluster) == {"node-1": False}
    profile = make_profile(filters=[{"name": "NodeDeclaredFeatures"}], scores=[])
    profile.filters[0].features = plugin.features  # type: ignore[attr-defined]
    decision = decide(profile, needing("test-pod", *required), cluster)
    if fits:
        assert decision.node == "node-1"
    else:
        assert decision.reasons == {REASON: 1}
        assert decision.message == "0/1 nodes are available: 1 node(s) didn't match Pod's required features."


def test_pod_without_requirements_is_not_constrained() -> None:
    assert PLUGIN.filter(parse_pod(pod("p")), cluster_of([node("a")])) is None


def test_host_network_pod_goes_only_where_the_feature_is_declared() -> None:
    cluster = cluster_of([
        featured_node("declares", [RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS, USER_NAMESPACES_HOST_NETWORK_SUPPORT]),
        featured_node("other-feature", [RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS]),
        featured_node("old-kubelet", None),
    ])
    assert filter_result(PLUGIN, host_network_pod(), cluster) == {
        "declares": True, "other-feature": False, "old-kubelet": False}
    assert decide(make_profile(), host_network_pod(), cluster).node == "declares"
    # the same pod in the host's user namespace needs nothing
    assert filter_result(PLUGIN, host_network_pod(host_users=True), cluster) == dict.fromkeys(
        ("declares", "other-feature", "old-kubelet"), True)


def test_default_profile_message_and_no_preemption() -> None:
    """The default profile has it last; no node declaring the feature is UnschedulableAndUnresolvable,
    so preemption does not evict anything for it."""
    cluster = cluster_of(
        [featured_node("a", None, cpu="1"), featured_node("b", [], cpu="1")],
        [pod("low", cpu="1", node_name="a", priority=0), pod("low2", cpu="1", node_name="b", priority=0)],
    )
    decision = decide(make_profile(), host_network_pod(priority=1000, containers=[restart_all()]), cluster)
    assert decision.node is None
    assert decision.message == "0/2 nodes are available: 2 node(s) didn't match Pod's required features."
    assert decision.preemption is None
    assert decision.rejected_by == ("NodeDeclaredFeatures",)
    assert decision.wake_on == {ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE}


def test_earlier_filters_take_the_node_first() -> None:
    cluster = cluster_of([featured_node("cordoned", None, unschedulable=True), featured_node("plain", None)])
    decision = decide(make_profile(), host_network_pod(), cluster)
    assert decision.reasons == {"node(s) were unschedulable": 1, REASON: 1}


# TestEnqueueExtensionsNodeUpdate: a node added with features, or its features changed, is an event;
# the same features again are not
def test_declared_features_changes_are_node_updates() -> None:
    cluster = cluster_of([featured_node("node-1", None)])
    assert filter_result(PLUGIN, host_network_pod(), cluster) == {"node-1": False}
    assert cluster.upsert_node(parse_node(featured_node("node-1", [USER_NAMESPACES_HOST_NETWORK_SUPPORT])))
    assert filter_result(PLUGIN, host_network_pod(), cluster) == {"node-1": True}
    assert not cluster.upsert_node(parse_node(featured_node("node-1", [USER_NAMESPACES_HOST_NETWORK_SUPPORT])))
    assert cluster.upsert_node(parse_node(featured_node("node-2", ["FeatureA"])))
    assert filter_result(PLUGIN, host_network_pod(), cluster) == {"node-1": True, "node-2": False}


def test_malformed_fields_are_named() -> None:
    with pytest.raises(ObjectError, match=r"status.declaredFeatures: must be a list"):
        parse_node(featured_node("n", "UserNamespacesHostNetworkSupport"))  # type: ignore[arg-type]
    with pytest.raises(ObjectError, match=r"status.declaredFeatures\[1\]: must be a string"):
        parse_node(featured_node("n", ["A", 3]))  # type: ignore[list-item]
    broken = pod("p")
    broken["spec"]["containers"][0]["restartPolicyRules"] = {"action": "RestartAllContainers"}
    info = parse_pod(broken)
    assert info.error is not None and "spec.containers[0].restartPolicyRules: must be a list" in info.error
    decision = decide(make_profile(), info, cluster_of([node("a")]))
    assert decision.node is None


def test_not_a_score_and_no_args() -> None:
    with pytest.raises(ProfileError, match="NodeDeclaredFeatures is not a score plugin"):
        make_profile(scores=[{"name": "NodeDeclaredFeatures"}])
    with pytest.raises(ProfileError, match=r"filters\[0\] NodeDeclaredFeatures: args.x: Extra inputs"):
        make_profile(filters=[{"name": "NodeDeclaredFeatures", "args": {"x": 1}}])


def test_profile_without_it_places_the_pod_anywhere() -> None:
    """kube's "plugin disabled" rows: without the plugin, declared features do not matter."""
    profile = make_profile(filters=[{"name": "NodeUnschedulable"}], scores=[])
    assert decide(profile, host_network_pod(), cluster_of([featured_node("a", None)])).node == "a"
