"""Compiling SchedulerProfile specs: defaults, empty lists, and every way a spec is refused."""

from __future__ import annotations

import pytest
from placer.engine.profile import DEFAULT_FILTERS, ProfileError, UnknownPluginError, compile_profile


def names(plugins: tuple) -> list[str]:
    return [p.name for p in plugins]


def test_omitted_lists_get_the_defaults() -> None:
    profile = compile_profile("default", {"schedulerName": "placer"}, generation=4)
    assert profile.name == "default"
    assert profile.scheduler_name == "placer"
    assert profile.generation == 4
    assert profile.percentage_of_nodes_to_score == 0
    # API.md §2b: kube-scheduler's default profile plus NodeReady
    assert names(profile.filters) == [
        "NodeUnschedulable", "NodeReady", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
        "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures",
    ]
    assert names(profile.post_filters) == ["DynamicResources", "DefaultPreemption"]
    assert names(profile.filters) == [f["name"] for f in DEFAULT_FILTERS]
    assert [(p.name, w) for p, w in profile.scores] == [
        ("TaintToleration", 3), ("NodeAffinity", 2), ("PodTopologySpread", 2), ("InterPodAffinity", 2),
        ("DynamicResources", 2), ("NodeResourcesFit", 1), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
    ]
    assert profile.scores[5][0].args.scoringStrategy.type == "LeastAllocated"
    assert profile.scores[2][0].args.defaultingType == "System"
    assert profile.scores[3][0].args.hardPodAffinityWeight == 1


def test_empty_lists_mean_none() -> None:
    profile = compile_profile("bare", {"schedulerName": "s", "filters": [], "scores": []})
    assert profile.filters == ()
    assert profile.scores == ()


def test_one_list_given_leaves_the_other_default() -> None:
    profile = compile_profile("p", {"schedulerName": "s", "scores": [{"name": "PreferNode", "args": {"nodes": ["a"]}}]})
    assert names(profile.filters) == [f["name"] for f in DEFAULT_FILTERS]
    assert [(p.name, w) for p, w in profile.scores] == [("PreferNode", 1)]


def test_each_compile_makes_fresh_plugin_instances() -> None:
    spec = {"schedulerName": "s"}
    assert compile_profile("a", spec).filters[0] is not compile_profile("a", spec).filters[0]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, 'profile "p": spec.schedulerName: Field required'),
        ({"schedulerName": ""}, 'profile "p": spec.schedulerName: String should have at least 1 character'),
        ({"schedulerName": "s", "filters": [{"name": "PreferNode"}]},
         'profile "p": filters[0] PreferNode: name: PreferNode is not a filter plugin'),
        ({"schedulerName": "s", "scores": [{"name": "NodePorts"}]},
         'profile "p": scores[0] NodePorts: name: NodePorts is not a score plugin'),
        ({"schedulerName": "s", "filters": [{"name": "NodeReady"}, {"name": "NodePorts"}, {"name": "NodeReady"}]},
         'profile "p": filters[2] NodeReady: name: Duplicate value: "NodeReady"'),
        ({"schedulerName": "s", "scores": [{"name": "ImageLocality"}, {"name": "ImageLocality", "weight": 2}]},
         'profile "p": scores[1] ImageLocality: name: Duplicate value: "ImageLocality"'),
        ({"schedulerName": "s", "scores": [{"name": "ImageLocality", "weight": 0}]},
         'profile "p": scores[0] ImageLocality: weight: Input should be greater than or equal to 1'),
        ({"schedulerName": "s", "scores": [{"name": "ImageLocality", "weight": 101}]},
         'profile "p": scores[0] ImageLocality: weight: Input should be less than or equal to 100'),
        ({"schedulerName": "s", "scores": [{"name": "ImageLocality", "weight": "5"}]},
         'profile "p": scores[0] ImageLocality: weight: Input should be a valid integer'),
        ({"schedulerName": "s", "scores": [{"name": "ImageLocality", "weight": 2.5}]},
         'profile "p": scores[0] ImageLocality: weight: Input should be a valid integer'),
        ({"schedulerName": "s", "percentageOfNodesToScore": 101},
         'profile "p": spec.percentageOfNodesToScore: Input should be less than or equal to 100'),
        ({"schedulerName": "s", "percentageOfNodesToScore": -1},
         'profile "p": spec.percentageOfNodesToScore: Input should be greater than or equal to 0'),
        ({"schedulerName": "s", "percentageOfNodesToScore": "50"},
         'profile "p": spec.percentageOfNodesToScore: Input should be a valid integer'),
        ({"schedulerName": "s", "extra": 1}, 'profile "p": spec.extra: Extra inputs are not permitted'),
        ({"schedulerName": "s", "scores": [{"name": "ImageLocality", "bogus": 1}]},
         'profile "p": scores[0] ImageLocality: bogus: Extra inputs are not permitted'),
        ({"schedulerName": "s", "filters": [{"weight": 1}]}, 'profile "p": filters[0] ?: name: Field required'),
        ({"schedulerName": "s", "filters": {"name": "NodeReady"}},
         'profile "p": spec.filters: Input should be a valid list'),
        ({"schedulerName": "s", "scores": [{"name": "PreferNode", "args": ["a"]}]},
         'profile "p": scores[0] PreferNode: args: Input should be a valid dictionary'),
        ({"schedulerName": "s", "scores": [{"name": "PreferNode", "args": {"nodes": []}}]},
         'profile "p": scores[0] PreferNode: args.nodes: '),
    ],
)
def test_refused(spec: dict, message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        compile_profile("p", spec)
    assert str(caught.value).startswith(message)
    assert caught.value.reason == "InvalidArgs"


@pytest.mark.parametrize("section", ["filters", "scores", "postFilters"])
def test_unknown_plugin_is_its_own_reason(section: str) -> None:
    with pytest.raises(UnknownPluginError) as caught:
        compile_profile("p", {"schedulerName": "s", section: [{"name": "Nope"}]})
    assert str(caught.value).startswith(f'profile "p": {section}[0] Nope: name: unknown plugin "Nope" (installed: ')
    assert "DefaultPreemption, DynamicResources, GangScheduling, ImageLocality, " in str(caught.value)
    assert caught.value.reason == "UnknownPlugin"


def test_none_spec_is_refused() -> None:
    with pytest.raises(ProfileError, match="schedulerName: Field required"):
        compile_profile("p", None)


def test_several_errors_are_all_reported() -> None:
    with pytest.raises(ProfileError) as caught:
        compile_profile("p", {"percentageOfNodesToScore": 500, "bogus": True})
    message = str(caught.value)
    for part in ("spec.schedulerName", "spec.percentageOfNodesToScore", "spec.bogus"):
        assert part in message


def test_warnings_are_collected_once() -> None:
    from placer.engine.cluster import ClusterState

    profile = compile_profile("p", {"schedulerName": "s", "filters": [{"name": "NodeUtilization"}],
                                    "scores": [{"name": "NodeUtilization"}]})
    assert len(profile.warnings(ClusterState())) == 1
    assert compile_profile("q", {"schedulerName": "s"}).warnings(ClusterState()) == []


def test_mode_defaults_to_active_and_shadow_names_its_scheduler() -> None:
    active = compile_profile("a", {"schedulerName": "s"})
    assert (active.shadow, active.shadow_of) == (False, None)
    # shadowOf means nothing to an Active profile: it serves its schedulerName as ever
    assert compile_profile("a", {"schedulerName": "s", "shadowOf": "default-scheduler"}).shadow_of is None
    shadow = compile_profile("b", {"schedulerName": "s", "mode": "Shadow", "shadowOf": "default-scheduler"})
    assert (shadow.shadow, shadow.shadow_of, shadow.scheduler_name) == (True, "default-scheduler", "s")


@pytest.mark.parametrize(("spec", "message"), [
    ({"schedulerName": "s", "mode": "Shadow"},
     'profile "p": spec.shadowOf: Required value: required when spec.mode is Shadow'),
    ({"schedulerName": "s", "mode": "Passive", "shadowOf": "x"}, 'profile "p": spec.mode: Input should be'),
    ({"schedulerName": "s", "mode": "Shadow", "shadowOf": ""}, 'profile "p": spec.shadowOf: String should have'),
])
def test_shadow_mode_refused(spec: dict, message: str) -> None:
    with pytest.raises(ProfileError) as raised:
        compile_profile("p", spec)
    assert str(raised.value).startswith(message)
    assert raised.value.reason == "InvalidArgs"
