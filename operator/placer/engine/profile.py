"""The `SchedulerProfile` spec, validated and compiled into plugin instances.

A profile is compiled once, when it is created or changed; the runtime then only calls the
instances. Compilation either yields a whole `Profile` or raises `ProfileError` whose message
names the profile, the plugin and the field, so the last good profile can keep scheduling
while the status says what is wrong with the new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from placer.engine.cluster import ClusterState
from placer.engine.framework import FilterPlugin, PostFilterPlugin, ScorePlugin
from placer.plugins import REGISTRY, unknown_plugin

__all__ = [
    "API_VERSION",
    "DEFAULT_FILTERS",
    "DEFAULT_POST_FILTERS",
    "DEFAULT_SCORES",
    "KIND",
    "Profile",
    "ProfileError",
    "SchedulerProfileSpec",
    "UnknownPluginError",
    "compile_profile",
    "format_location",
]

API_VERSION = "placer.dev/v1alpha1"
KIND = "SchedulerProfile"

DEFAULT_FILTERS: tuple[dict[str, Any], ...] = tuple(
    {"name": name}
    for name in (
        "NodeUnschedulable",
        "NodeReady",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    )
)
DEFAULT_SCORES: tuple[dict[str, Any], ...] = (
    {"name": "TaintToleration", "weight": 3},
    {"name": "NodeAffinity", "weight": 2},
    {"name": "PodTopologySpread", "weight": 2},
    {"name": "InterPodAffinity", "weight": 2},
    {"name": "DynamicResources", "weight": 2},
    {"name": "NodeResourcesFit", "weight": 1, "args": {"scoringStrategy": {"type": "LeastAllocated"}}},
    {"name": "NodeResourcesBalancedAllocation", "weight": 1},
    {"name": "ImageLocality", "weight": 1},
)


#: kube v1.36's order (`applyDynamicResources`): free an idle claim before evicting a pod. Every
#: unschedulable pod's message then reads `... no new claims to deallocate, preemption: ...`, as
#: kube-scheduler v1.36 writes it (checked on a real v1.36.2 server); silent on servers without DRA.
DEFAULT_POST_FILTERS: tuple[dict[str, Any], ...] = ({"name": "DynamicResources"}, {"name": "DefaultPreemption"})


class ProfileError(ValueError):
    """A profile that cannot be used; `reason` is the status reason (InvalidArgs)."""

    reason = "InvalidArgs"


class UnknownPluginError(ProfileError):
    """A profile naming a plugin no installed package provides: its own reason, so `kubectl get sp`
    tells a missing plugin package apart from a typo in the args."""

    reason = "UnknownPlugin"


class PluginRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    weight: StrictInt = Field(default=1, ge=1, le=100)
    args: dict[str, Any] | None = None


class SchedulerProfileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schedulerName: str = Field(min_length=1)
    percentageOfNodesToScore: StrictInt = Field(default=0, ge=0, le=100)
    filters: list[PluginRef] | None = None
    scores: list[PluginRef] | None = None
    postFilters: list[PluginRef] | None = None
    mode: Literal["Active", "Shadow"] = "Active"
    shadowOf: str | None = Field(default=None, min_length=1)


@dataclass(frozen=True, eq=False)
class Profile:
    """A compiled profile: what the runtime needs, nothing it must look up per pod."""

    name: str
    scheduler_name: str
    percentage_of_nodes_to_score: int
    filters: tuple[FilterPlugin, ...]
    scores: tuple[tuple[ScorePlugin, int], ...]
    generation: int = 0
    post_filters: tuple[PostFilterPlugin, ...] = ()
    #: `spec.shadowOf` of a Shadow profile: whose pods it decides for without binding; None when
    #: Active (a shadow owns no pods: its own scheduler_name is never served)
    shadow_of: str | None = None

    @property
    def shadow(self) -> bool:
        return self.shadow_of is not None

    def warnings(self, cluster: ClusterState) -> list[str]:
        seen: list[str] = []
        for plugin in (*self.filters, *(p for p, _ in self.scores)):
            for warning in plugin.warnings(cluster):
                if warning not in seen:
                    seen.append(warning)
        return seen


def format_location(location: Sequence[int | str]) -> str:
    """pydantic's error location as a field path: `scoringStrategy.resources[0].weight`."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part not in ("function-after", "function-before") and not str(part).startswith(
            ("function-", "tagged-union")
        ):
            path += f".{part}" if path else str(part)
    return path


def _messages(error: ValidationError, prefix: str = "") -> list[str]:
    messages = []
    for item in error.errors(include_url=False):
        where = format_location(item["loc"])
        where = f"{prefix}.{where}" if prefix and where else prefix or where
        message = item["msg"].removeprefix("Value error, ")
        messages.append(f"{where}: {message}" if where else message)
    return messages


def _spec_messages(error: ValidationError, spec: Any) -> list[str]:
    """Errors in the spec; those inside a plugin entry name it: `scores[0] ImageLocality: weight: ...`."""
    messages = []
    for item in error.errors(include_url=False):
        location = item["loc"]
        message = item["msg"].removeprefix("Value error, ")
        if len(location) >= 3 and location[0] in SECTIONS and isinstance(location[1], int):
            section, index = location[0], location[1]
            try:
                plugin = spec[section][index]["name"]
            except (KeyError, IndexError, TypeError):
                plugin = "?"
            messages.append(f"{section}[{index}] {plugin}: {format_location(location[2:])}: {message}")
        else:
            where = format_location(location)
            messages.append(f"spec.{where}: {message}" if where else f"spec: {message}")
    return messages


# each list of a profile: the interface its plugins implement, and what to call one in a message
SECTIONS: dict[str, tuple[type, str]] = {
    "filters": (FilterPlugin, "filter"),
    "scores": (ScorePlugin, "score"),
    "postFilters": (PostFilterPlugin, "postFilter"),
}


def _instantiate(profile: str, section: str, index: int, ref: PluginRef) -> Any:
    where = f'profile "{profile}": {section}[{index}] {ref.name}'
    plugin_class = REGISTRY.get(ref.name)
    if plugin_class is None:
        raise UnknownPluginError(f"{where}: name: {unknown_plugin(ref.name)}")
    wanted, role = SECTIONS[section]
    if not issubclass(plugin_class, wanted):
        raise ProfileError(f"{where}: name: {ref.name} is not a {role} plugin")
    try:
        args = plugin_class.Args.model_validate(ref.args or {})
    except ValidationError as error:
        raise ProfileError(f"{where}: " + "; ".join(_messages(error, "args"))) from None
    return plugin_class(args)


def _duplicates(section: str, refs: Sequence[PluginRef], profile: str) -> None:
    names = [ref.name for ref in refs]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise ProfileError(f'profile "{profile}": {section}[{index}] {name}: name: Duplicate value: "{name}"')


def compile_profile(name: str, spec: Mapping[str, Any] | None, generation: int = 0) -> Profile:
    """Validate a profile's spec and build its plugins; raise ProfileError on any problem."""
    try:
        model = SchedulerProfileSpec.model_validate(spec if spec is not None else {})
    except ValidationError as error:
        raise ProfileError(f'profile "{name}": ' + "; ".join(_spec_messages(error, spec))) from None
    filters = model.filters if model.filters is not None else [PluginRef(**f) for f in DEFAULT_FILTERS]
    scores = model.scores if model.scores is not None else [PluginRef(**s) for s in DEFAULT_SCORES]
    post = model.postFilters if model.postFilters is not None else [PluginRef(**p) for p in DEFAULT_POST_FILTERS]
    if model.mode == "Shadow" and model.shadowOf is None:
        raise ProfileError(f'profile "{name}": spec.shadowOf: Required value: required when spec.mode is Shadow')
    _duplicates("filters", filters, name)
    _duplicates("scores", scores, name)
    _duplicates("postFilters", post, name)
    filter_plugins = tuple(_instantiate(name, "filters", i, ref) for i, ref in enumerate(filters))
    score_plugins = tuple((_instantiate(name, "scores", i, ref), ref.weight) for i, ref in enumerate(scores))
    post_plugins = tuple(_instantiate(name, "postFilters", i, ref) for i, ref in enumerate(post))
    return Profile(
        name=name,
        scheduler_name=model.schedulerName,
        percentage_of_nodes_to_score=model.percentageOfNodesToScore,
        filters=filter_plugins,  # type: ignore[arg-type]
        scores=score_plugins,  # type: ignore[arg-type]
        generation=generation,
        post_filters=post_plugins,
        shadow_of=model.shadowOf if model.mode == "Shadow" else None,
    )
