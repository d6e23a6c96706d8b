"""`placer import-config`: a kube-scheduler `KubeSchedulerConfiguration` as SchedulerProfiles.

A platform team already runs kube-scheduler with a config file; this turns each of its profiles into
the `SchedulerProfile` that schedules as it does, so adopting Placer starts from what they have.

The file is read as kube-scheduler v1.36 reads it (`kubescheduler.config.k8s.io/v1`; `v1beta3`, as
written for v1.24, is read the same way, with v1.36's default plugins):

1. Defaulting (kube's `pkg/scheduler/apis/config/v1/default_plugins.go`): the profile's `multiPoint`
   set is merged into the default one — the defaults in order, less those `disabled` (all of them
   with `"*"`), a default the profile enables again replaced in place (its weight too), then the
   profile's other plugins appended.
2. Expansion (kube's `framework.go`, `expandMultiPointPlugins`): for each extension point, the
   plugins enabled there explicitly that are also in multiPoint come first, then multiPoint's
   other plugins that implement that point and are not disabled there, then the rest of the
   explicit ones; `disabled: ["*"]` at a point keeps multiPoint out of it. A score plugin's weight
   is the one given at `score`, else at multiPoint, 0 or none meaning 1.
3. Mapping: kube's `filter` becomes `spec.filters`, `score` `spec.scores`, `postFilter`
   `spec.postFilters` (a Placer plugin runs its own PreFilter/PreScore/Reserve/PreBind steps);
   `permit` is appended to `spec.filters`, where Placer lists a binding-point plugin (one that admits
   every node: kube's Permit-only `GangScheduling` is Placer's `GangScheduling` there), and so is
   `placementGenerate` (`TopologyPlacementGenerator`); `placementScore` goes to `spec.scores` with
   its weight there (`PodGroupPodsCount`; NodeResourcesFit's placement score is its `scores` entry's);
   `pluginConfig` args go on each entry of that plugin; `percentageOfNodesToScore` is the profile's,
   else the global one.

The file's process settings become `placer run`'s flags (`ImportResult.run_flags`, a `# run as:`
comment above the first profile, or `--run-flags` alone): `clientConnection.kubeconfig` is
`--kubeconfig`, and `leaderElection` is kube-scheduler's Lease (`kube-system/kube-scheduler` unless
the file names another) with its timings, so that Placer run with them takes over the Lease
kube-scheduler held and the two are never active together (`docs/replace-kube-scheduler.md`);
`leaderElect: false` is `--no-leader-elect`; a lock other than `leases` is a problem. A client-side
rate limit (`qps`, `burst`) has no counterpart in Placer: said in a note. `parallelism`, profiling
and the other process settings are left out.

What Placer does by itself (`IMPLICIT`) is accepted and left out (so is kube's `GangScheduling` at
`preEnqueue` only: Placer's queue holds every group's pods until `minCount` exist); `NodeReady` is put before
`TaintToleration` (kube keeps NotReady nodes out through the node lifecycle controller's
`node.kubernetes.io/not-ready` taint, which only TaintToleration honours). Plugin names are looked up
in the plugin registry at run time, so plugin packages and new built-ins import with no change here;
a plugin kube enables by default behind a feature gate (`DynamicResources`, `NodeDeclaredFeatures`)
that this Placer lacks is left out as kube leaves it out with the gate off. A plugin Placer does not
have, or an arg it does not take (an arg at kube's default value is accepted: it is what Placer
does), is an `ImportProblem` naming the profile, the plugin and the field; with `skip_unknown` it is
left out and said in a comment instead.
"""

from __future__ import annotations

import copy
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from placer.engine.framework import (
    FilterPlugin,
    PermitPlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    PostFilterPlugin,
    ScorePlugin,
)
from placer.engine.profile import API_VERSION, KIND, ProfileError, compile_profile, format_location
from placer.plugins import REGISTRY

__all__ = [
    "API_VERSIONS",
    "IMPLICIT",
    "KUBE_DEFAULT_PLUGINS",
    "ConfigError",
    "ImportProblem",
    "ImportResult",
    "ImportedProfile",
    "as_shadow",
    "describe",
    "import_config",
    "import_text",
    "render",
]

GROUP = "kubescheduler.config.k8s.io"
API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta3")
CONFIG_KIND = "KubeSchedulerConfiguration"

#: kube-scheduler v1.36's default multiPoint set (`getDefaultPlugins`, with the gates on by default in
#: v1.36 applied: DynamicResources before DefaultPreemption, NodeDeclaredFeatures appended), weights
#: as there (None: 1 where the plugin scores)
KUBE_DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
)

#: defaults kube adds only with a feature gate on: left out, as with the gate off, when Placer lacks them.
#: (GangScheduling, appended with the alpha gate GangScheduling, and TopologyPlacementGenerator and
#: PodGroupPodsCount, with TopologyAwareWorkloadScheduling, are off by default in v1.36: not defaults.)
GATED_DEFAULTS = frozenset({"DynamicResources", "NodeDeclaredFeatures"})

#: kube plugins whose work Placer does without being listed, and why
IMPLICIT: dict[str, str] = {
    "PrioritySort": "Placer's queue is always in PrioritySort's order (priority, then age)",
    "SchedulingGates": "Placer never attempts a pod with spec.schedulingGates",
    "DefaultBinder": "Placer binds through pods/binding, as DefaultBinder",
    "NodeName": "a pod with spec.nodeName is bound already: Placer never places it",
}

#: v1beta3's in-tree volume limits, invalid in v1 since CSI migration: NodeVolumeLimits counts those volumes
LEGACY_VOLUME_LIMITS = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})

# The extension points of kube v1.36's in-tree plugins (their `var _ fwk.XPlugin` assertions).
_F, _S = ("preFilter", "filter"), ("preScore", "score")
KUBE_POINTS: dict[str, frozenset[str]] = {
    name: frozenset(points)
    for name, points in {
        "PrioritySort": ("queueSort",),
        "SchedulingGates": ("preEnqueue",),
        "DefaultBinder": ("bind",),
        "NodeName": ("filter",),
        "NodeUnschedulable": ("filter",),
        "TaintToleration": ("filter", *_S),
        "NodeAffinity": (*_F, *_S),
        "NodePorts": _F,
        "NodeResourcesFit": (*_F, *_S, "placementScore"),
        "NodeResourcesBalancedAllocation": _S,
        "ImageLocality": ("score",),
        "VolumeRestrictions": _F,
        "NodeVolumeLimits": _F,
        "VolumeBinding": (*_F, "reserve", "preBind", *_S),
        "VolumeZone": _F,
        "PodTopologySpread": (*_F, *_S),
        "InterPodAffinity": (*_F, *_S),
        "DefaultPreemption": ("preEnqueue", "postFilter"),
        "DynamicResources": ("preEnqueue", *_F, "postFilter", "score", "reserve", "preBind"),
        "NodeDeclaredFeatures": _F,
        "GangScheduling": ("preEnqueue", "permit"),
        "TopologyPlacementGenerator": ("placementGenerate",),
        "PodGroupPodsCount": ("placementScore",),
    }.items()
}

#: why an extension point of a kube plugin has no counterpart in Placer's plugin of that name
KUBE_ONLY_POINTS: dict[tuple[str, str], str] = {
    ("VolumeBinding", "score"): "kube scores volumes only with the alpha gate StorageCapacityScoring",
    ("NodeResourcesFit", "placementScore"): "Placer's NodeResourcesFit scores placements from its scores entry",
}

EXTENSION_POINTS = (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
    "preBind", "bind", "postBind", "multiPoint", "placementGenerate", "placementScore",
)
# Placer's lists, and the kube extension points each comes from, in that order: a Permit plugin is
# listed among the filters (it admits every node), after kube's filters (kube permits after filtering)
SECTIONS = {"filters": ("filter", "permit", "placementGenerate"), "scores": ("score", "placementScore"),
            "postFilters": ("postFilter",)}
ROLES = {"filter": FilterPlugin, "score": ScorePlugin, "postFilter": PostFilterPlugin, "permit": PermitPlugin,
         "placementGenerate": PlacementGeneratePlugin, "placementScore": PlacementScorePlugin}
_PRE = {"preFilter": "filter", "preScore": "score"}

#: kube args' fields Placer's plugin of that name does not take, at the value Placer behaves as
#: (kube's default); any other value is a problem
KUBE_ARG_DEFAULTS: dict[str, dict[str, Any]] = {
    "NodeAffinity": {"addedAffinity": None},
    "VolumeBinding": {"bindTimeoutSeconds": 600, "shape": None},
    "DynamicResources": {"filterTimeout": 10.0, "bindingTimeout": 600.0},
}
_DURATIONS = {("DynamicResources", "filterTimeout"), ("DynamicResources", "bindingTimeout")}

# top-level fields that configure the kube-scheduler process, not a profile: nothing to import
OPERATIONAL = frozenset({
    "parallelism", "leaderElection", "clientConnection", "enableProfiling", "enableContentionProfiling",
    "delayCacheUntilActive", "healthzBindAddress", "metricsBindAddress",
})
# kube-scheduler's leader election defaults (`pkg/scheduler/apis/config/v1/defaults.go`): as the
# cluster's scheduler, Placer holds the same Lease, so the two are never active together
KUBE_LEADER_ELECTION = {"resourceNamespace": "kube-system", "resourceName": "kube-scheduler"}
_LEASE_TIMINGS = (("leaseDuration", "--leader-elect-lease-duration"),
                  ("renewDeadline", "--leader-elect-renew-deadline"), ("retryPeriod", "--leader-elect-retry-period"))
# clientConnection fields Placer has no counterpart of (it sets no client-side rate limit, speaks JSON)
_CLIENT_DEFAULTS = {"qps": 50, "burst": 100, "contentType": "application/vnd.kubernetes.protobuf",
                    "acceptContentTypes": ""}
# Placer's queue backoff (API.md §3): 1 s doubling to 10 s, as kube's defaults
BACKOFF = {"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10}


class ConfigError(ValueError):
    """The file cannot be imported at all (unreadable, not a KubeSchedulerConfiguration, malformed)."""


@dataclass(frozen=True)
class ImportProblem:
    """Something Placer cannot do as the file says: where (a field path) and what."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class ImportedProfile:
    """One SchedulerProfile document, and the comments that go above it."""

    document: dict[str, Any]
    source: str  # profiles[i]
    notes: list[str] = field(default_factory=list)
    skipped: list[ImportProblem] = field(default_factory=list)


@dataclass
class ImportResult:
    api_version: str
    profiles: list[ImportedProfile]
    problems: list[ImportProblem]  # not skipped: the import fails
    # `placer run`'s flags for the file's process settings (clientConnection, leaderElection), and
    # what of them Placer does otherwise
    run_flags: list[str] = field(default_factory=list)
    run_notes: list[str] = field(default_factory=list)


@dataclass
class _Plugin:
    name: str
    weight: int | None
    where: str  # field path of the entry, "" for kube's defaults

    @property
    def default(self) -> bool:
        return not self.where


@dataclass
class _Set:
    enabled: list[_Plugin] = field(default_factory=list)
    disabled: set[str] = field(default_factory=set)


def _placer_points(name: str) -> frozenset[str]:
    """The kube extension points a plugin implements: kube's own table for kube's plugins, else its
    Placer class's roles (a plugin package's, or Placer's own)."""
    if name in KUBE_POINTS:
        return KUBE_POINTS[name]
    cls = REGISTRY.get(name)
    if cls is None:
        return frozenset()
    points: set[str] = set()
    if issubclass(cls, FilterPlugin):
        points |= {"preFilter", "filter"}
    if issubclass(cls, ScorePlugin):
        points |= {"preScore", "score"}
    if issubclass(cls, PostFilterPlugin):
        points.add("postFilter")
    if issubclass(cls, PermitPlugin):
        points.add("permit")
    if issubclass(cls, PlacementGeneratePlugin):
        points.add("placementGenerate")
    if issubclass(cls, PlacementScorePlugin):
        points.add("placementScore")
    return frozenset(points)


class _Importer:
    """One profile's import: problems either collected as errors or, skipped, as comments."""

    def __init__(self, api_version: str, skip_unknown: bool) -> None:
        self.api_version = api_version
        self.skip_unknown = skip_unknown
        self.problems: list[ImportProblem] = []
        self.skipped: list[ImportProblem] = []
        self.notes: list[str] = []

    # --- problems: `fatal` ones are malformed input (never skipped); the others what Placer lacks
    def fail(self, where: str, message: str) -> None:
        self.problems.append(ImportProblem(where, message))

    def unsupported(self, where: str, message: str) -> None:
        (self.skipped if self.skip_unknown else self.problems).append(ImportProblem(where, message))

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    # --- reading -------------------------------------------------------------------------------
    def plugin_set(self, raw: Any, where: str) -> _Set:
        result = _Set()
        if raw is None:
            return result
        if not isinstance(raw, Mapping):
            self.fail(where, f"must be an object with enabled/disabled, not {_type(raw)}")
            return result
        for key in raw:
            if key not in ("enabled", "disabled"):
                self.fail(f"{where}.{key}", 'unknown field (a plugin set has "enabled" and "disabled")')
        for index, entry in enumerate(_list(self, raw.get("enabled"), f"{where}.enabled")):
            plugin = self.plugin(entry, f"{where}.enabled[{index}]")
            if plugin is None:
                continue
            if any(p.name == plugin.name for p in result.enabled):
                self.fail(plugin.where, f'{plugin.name}: Duplicate value: "{plugin.name}" is enabled twice')
                continue
            result.enabled.append(plugin)
        for index, entry in enumerate(_list(self, raw.get("disabled"), f"{where}.disabled")):
            plugin = self.plugin(entry, f"{where}.disabled[{index}]")
            if plugin is not None:
                result.disabled.add(plugin.name)
        return result

    def plugin(self, raw: Any, where: str) -> _Plugin | None:
        if not isinstance(raw, Mapping):
            self.fail(where, f"must be an object with a name, not {_type(raw)}")
            return None
        unknown = [key for key in raw if key not in ("name", "weight")]
        for key in unknown:
            self.fail(f"{where}.{key}", 'unknown field (a plugin has "name" and "weight")')
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            self.fail(f"{where}.name", "Required value")
            return None
        weight = raw.get("weight")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int)):
            self.fail(f"{where} {name}: weight", f"must be an integer, not {weight!r}")
            return None
        return _Plugin(name, weight, where)

    # --- names ---------------------------------------------------------------------------------
    def known(self, plugin: _Plugin) -> bool:
        """Whether Placer can follow this enabled entry; says why not (or notes it) otherwise."""
        name = plugin.name
        if name in IMPLICIT:
            return True
        if name in LEGACY_VOLUME_LIMITS:
            if self.api_version.endswith("/v1"):
                self.fail(plugin.where, f'{name}: was invalid in version "{GROUP}/v1" '
                          f'(KubeSchedulerConfiguration is version "{self.api_version}")')
            return True
        if name in REGISTRY:
            return True
        if plugin.default:
            if name in GATED_DEFAULTS:
                self.note(f"{name}: kube-scheduler's default behind a feature gate; this Placer has no such plugin, "
                          "so it is left out, as kube-scheduler leaves it out with the gate off")
            else:
                self.note(f"{name}: kube-scheduler's default; this Placer has no such plugin: left out")
            return False
        self.unsupported(plugin.where, f'{name}: Placer has no plugin "{name}" '
                         f"(installed: {', '.join(sorted(REGISTRY))})")
        return False


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _list(importer: _Importer, raw: Any, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        importer.fail(where, f"must be a list, not {_type(raw)}")
        return []
    return raw


def _merge(defaults: _Set, custom: _Set) -> _Set:
    """kube's `mergePluginSet`: the defaults less the disabled, re-enabled ones replaced in place,
    then the other custom plugins."""
    disabled = custom.disabled | defaults.disabled
    custom_by_name = {plugin.name: index for index, plugin in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[_Plugin] = []
    if "*" not in disabled:
        for plugin in defaults.enabled:
            if plugin.name in disabled:
                continue
            index = custom_by_name.get(plugin.name)
            if index is not None:
                plugin = custom.enabled[index]
                replaced.add(index)
            enabled.append(plugin)
    enabled.extend(plugin for index, plugin in enumerate(custom.enabled) if index not in replaced)
    return _Set(enabled, disabled)


def _expand(point: str, specific: _Set, multi_point: _Set, importer: _Importer) -> list[_Plugin]:
    """kube's `expandMultiPointPlugins` for one extension point."""
    if "*" in specific.disabled:
        return list(specific.enabled)
    explicit = {plugin.name for plugin in specific.enabled}
    overrides: set[str] = set()
    from_multi_point: list[_Plugin] = []
    for plugin in multi_point.enabled:
        if point not in _placer_points(plugin.name) or plugin.name in specific.disabled:
            continue
        if plugin.name in explicit:
            overrides.add(plugin.name)
            continue
        if any(p.name == plugin.name for p in from_multi_point):
            importer.fail(plugin.where, f'{plugin.name}: plugin "{plugin.name}" already registered as {point}')
            continue
        from_multi_point.append(plugin)
    first = [plugin for plugin in specific.enabled if plugin.name in overrides]
    rest = [plugin for plugin in specific.enabled if plugin.name not in overrides]
    return first + from_multi_point + rest


def _go_duration(value: Any) -> float | None:
    """Seconds of a Go duration string ("10s", "1m30s", "600ms"), None when it is not one."""
    if not isinstance(value, str) or not value:  # metav1.Duration is a string in YAML and JSON
        return None
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    parts = re.findall(r"(\d+(?:\.\d*)?)(h|ms|m|s|us|µs|ns)", value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return sum(float(number) * units[unit] for number, unit in parts)


def _omit_empty(value: Any) -> Any:
    """Go's `omitempty` reading: null, [] and {} are as if absent."""
    if isinstance(value, Mapping):
        return {k: _omit_empty(v) for k, v in value.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_omit_empty(item) for item in value]
    return value


def _weights_default_to_one(resources: Any) -> Any:
    """kube's args defaulting: a resource weight left out or 0 is 1."""
    if not isinstance(resources, list):
        return resources
    return [{**r, "weight": 1} if isinstance(r, Mapping) and not r.get("weight") else r for r in resources]


def _kube_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """kube's defaulting of a plugin's args, where it differs from reading them as they stand."""
    if name == "NodeResourcesFit" and isinstance(args.get("scoringStrategy"), Mapping):
        strategy = dict(args["scoringStrategy"])
        if "resources" in strategy:
            strategy["resources"] = _weights_default_to_one(strategy["resources"])
        args["scoringStrategy"] = strategy
    if name == "NodeResourcesBalancedAllocation" and "resources" in args:
        args["resources"] = _weights_default_to_one(args["resources"])
    if name == "PodTopologySpread" and args.get("defaultingType") == "":
        del args["defaultingType"]
    return args


class _Args:
    """A profile's `pluginConfig`: each plugin's args, converted and checked once, by name."""

    def __init__(self, raw: Any, where: str, importer: _Importer) -> None:
        self.importer = importer
        self.raw: dict[str, tuple[str, Any]] = {}
        self.converted: dict[str, dict[str, Any] | None] = {}
        for index, entry in enumerate(_list(importer, raw, where)):
            here = f"{where}[{index}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                importer.fail(here, "must be an object with a name and args")
                continue
            for key in entry:
                if key not in ("name", "args"):
                    importer.fail(f"{here}.{key}", 'unknown field (a pluginConfig entry has "name" and "args")')
            name = entry["name"]
            if name in self.raw:
                importer.fail(here, f'{name}: Duplicate value: "{name}" (repeated config for plugin {name})')
                continue
            self.raw[name] = (here, entry.get("args"))

    def of(self, name: str) -> dict[str, Any] | None:
        """The args to give Placer's plugin `name`; None when there are none (or they are skipped)."""
        if name not in self.converted:
            self.converted[name] = self._convert(name)
        return self.converted[name]

    def _convert(self, name: str) -> dict[str, Any] | None:
        if name not in self.raw:
            return None
        where, raw = self.raw[name]
        where = f"{where} {name}"
        importer = self.importer
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            importer.fail(f"{where}: args", f"must be an object, not {_type(raw)}")
            return None
        args = dict(raw)
        api_version, kind = args.pop("apiVersion", None), args.pop("kind", None)
        if kind is not None and kind != f"{name}Args":
            importer.fail(f"{where}: args.kind", f'args for plugin {name} were not of type {name}Args, got "{kind}"')
            return None
        if api_version is not None and api_version not in API_VERSIONS:
            importer.fail(f"{where}: args.apiVersion", f'unsupported "{api_version}" (expected one of '
                          f"{', '.join(API_VERSIONS)})")
            return None
        plugin_class = REGISTRY[name]
        args = _kube_args(name, _omit_empty(args))
        taken = set(plugin_class.Args.model_fields)
        defaults = KUBE_ARG_DEFAULTS.get(name, {})
        for key in list(args):
            if key in taken:
                continue
            value = args.pop(key)
            if key in defaults and _same(name, key, value, defaults[key]):
                continue
            if key in defaults:
                importer.unsupported(f"{where}: args.{key}", f"Placer's {name} does not take this arg; it behaves "
                                     f"as kube-scheduler's default ({_describe_default(defaults[key])}), "
                                     f"not {raw.get(key, value)!r}")
            else:
                importer.unsupported(f"{where}: args.{key}", f"Placer's {name} does not take this arg"
                                     + (f" (its args: {', '.join(sorted(taken))})" if taken else " (it takes none)"))
        try:
            plugin_class.Args.model_validate(args)
        except ValidationError as error:
            for item in error.errors(include_url=False):
                path = format_location(item["loc"])
                message = item["msg"].removeprefix("Value error, ")
                importer.fail(f"{where}: args{'.' + path if path else ''}", message)
            return None
        return args or None


def _same(plugin: str, key: str, value: Any, default: Any) -> bool:
    if (plugin, key) in _DURATIONS:
        return _go_duration(value) == default
    return value == default


def _describe_default(value: Any) -> str:
    return "none" if value is None else str(value)


def _profile_name(scheduler_name: str) -> str:
    """A SchedulerProfile name (a DNS subdomain) for a schedulerName, which may be any string."""
    name = re.sub(r"[^a-z0-9.-]+", "-", scheduler_name.lower()).strip("-.")
    return name[:253] or "imported"


def _profile(
    raw: Any, index: int, global_percentage: Any, api_version: str, skip_unknown: bool, single: bool
) -> tuple[ImportedProfile | None, list[ImportProblem]]:
    where = f"profiles[{index}]"
    importer = _Importer(api_version, skip_unknown)
    if not isinstance(raw, Mapping):
        importer.fail(where, f"must be an object, not {_type(raw)}")
        return None, importer.problems
    for key in raw:
        if key not in ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"):
            importer.fail(f"{where}.{key}", "unknown field")
    scheduler_name = raw.get("schedulerName")
    if scheduler_name is None and single:
        scheduler_name = "default-scheduler"
    if not isinstance(scheduler_name, str) or not scheduler_name:
        importer.fail(f"{where}.schedulerName", "Required value")
        return None, importer.problems
    percentage = raw.get("percentageOfNodesToScore", global_percentage)
    percentage_where = f"{where}.percentageOfNodesToScore" if "percentageOfNodesToScore" in raw else (
        "percentageOfNodesToScore")
    if percentage is None:
        percentage = 0
    if isinstance(percentage, bool) or not isinstance(percentage, int) or not 0 <= percentage <= 100:
        importer.fail(percentage_where, f"{percentage!r}: not in valid range [0-100]")
        percentage = 0

    plugins = raw.get("plugins")
    if plugins is not None and not isinstance(plugins, Mapping):
        importer.fail(f"{where}.plugins", f"must be an object, not {_type(plugins)}")
        plugins = None
    plugins = plugins or {}
    for key in plugins:
        if key not in EXTENSION_POINTS:
            importer.fail(f"{where}.plugins.{key}",
                          f"unknown extension point (kube-scheduler has {', '.join(EXTENSION_POINTS)})")
    sets = {point: importer.plugin_set(plugins.get(point), f"{where}.plugins.{point}") for point in EXTENSION_POINTS}
    defaults = _Set([_Plugin(name, weight, "") for name, weight in KUBE_DEFAULT_PLUGINS])
    multi_point = _merge(defaults, sets["multiPoint"])
    args = _Args(raw.get("pluginConfig"), f"{where}.pluginConfig", importer)

    # every plugin enabled anywhere must be one Placer can follow
    usable: dict[str, bool] = {}
    for plugin in multi_point.enabled:
        usable.setdefault(plugin.name, importer.known(plugin))
    for point in EXTENSION_POINTS:
        if point == "multiPoint":
            continue
        for plugin in sets[point].enabled:
            ok = importer.known(plugin)
            usable.setdefault(plugin.name, ok)
            if ok and point == "queueSort" and plugin.name != "PrioritySort":
                importer.unsupported(plugin.where, f"{plugin.name}: Placer's queue order is PrioritySort's only")
            elif ok and point == "bind" and plugin.name != "DefaultBinder":
                importer.unsupported(plugin.where, f"{plugin.name}: Placer binds as DefaultBinder only")
            elif ok and plugin.name not in IMPLICIT and plugin.name not in LEGACY_VOLUME_LIMITS:
                _check_point(importer, plugin, point)

    spec: dict[str, Any] = {"schedulerName": scheduler_name, "percentageOfNodesToScore": percentage}
    for section, points in SECTIONS.items():
        entries: list[dict[str, Any]] = []
        for point, plugin in ((at, plugin) for at in points for plugin in _expand(at, sets[at], multi_point, importer)):
            name = plugin.name
            if not usable.get(name, False) or name in IMPLICIT or name in LEGACY_VOLUME_LIMITS:
                continue
            if any(entry["name"] == name for entry in entries):
                continue  # a plugin enabled at filter and permit: one entry does both
            if not issubclass(REGISTRY[name], ROLES[point]):
                if plugin.where and (name, point) not in KUBE_ONLY_POINTS:
                    continue  # said by _check_point
                # kube's default set reaches points Placer's plugin of that name does not have
                # (VolumeBinding's score, DynamicResources' postFilter): left out, documented; said
                # in a note only when the file enables them there itself
                if plugin.where:
                    reason = KUBE_ONLY_POINTS.get((name, point), f"Placer's {name} has no {point}")
                    importer.note(f"{name} as {point} left out: {reason}")
                continue
            entry: dict[str, Any] = {"name": name}
            if point in ("score", "placementScore"):
                weight = _weight(name, sets[point], multi_point)
                if not 1 <= weight <= 100:
                    source = next((p.where for p in (*sets[point].enabled, *multi_point.enabled)
                                   if p.name == name and p.where), where)
                    importer.fail(f"{source} {name}: weight", f"{weight}: Placer takes a weight of 1..100")
                    continue
                entry["weight"] = weight
            plugin_args = args.of(name)
            if plugin_args is not None:
                entry["args"] = copy.deepcopy(plugin_args)  # each entry its own (no YAML anchors)
            entries.append(entry)
        if section == "filters" and "NodeReady" in REGISTRY:
            names = [entry["name"] for entry in entries]
            if "TaintToleration" in names and "NodeReady" not in names:
                entries.insert(names.index("TaintToleration"), {"name": "NodeReady"})
                importer.note("NodeReady added before TaintToleration: kube-scheduler keeps NotReady nodes out "
                              "through their node.kubernetes.io/not-ready taint, Placer through this filter")
        spec[section] = entries
    if any(entry["name"] == "GangScheduling" for entry in spec["filters"]):
        importer.note("GangScheduling: its PreEnqueue (a gang's pods wait until minCount exist) is Placer's queueing "
                      "of every group; its Permit (bound together once minCount are placed) is Placer's "
                      "GangScheduling, listed in filters")
    for name, (here, _) in args.raw.items():
        if name not in usable and name not in REGISTRY and name not in IMPLICIT:
            importer.note(f"{here} {name}: args of a plugin the profile does not enable: ignored")

    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": _profile_name(scheduler_name)},
        "spec": spec,
    }
    if not importer.problems:
        try:  # what Placer itself checks of a profile, so the output always loads
            compile_profile(document["metadata"]["name"], spec)
        except ProfileError as error:
            importer.fail(where, str(error))
    implicit = sorted({p.name for p in multi_point.enabled if p.name in IMPLICIT}
                      | {p.name for s in sets.values() for p in s.enabled if p.name in IMPLICIT})
    if implicit:
        importer.notes.insert(0, f"implicit in Placer: {', '.join(implicit)}")
    legacy = sorted({p.name for s in sets.values() for p in s.enabled if p.name in LEGACY_VOLUME_LIMITS})
    if legacy and not api_version.endswith("/v1"):
        importer.note(f"{', '.join(legacy)}: in-tree volume limits, counted by NodeVolumeLimits since CSI migration")
    imported = ImportedProfile(document, where, importer.notes, importer.skipped)
    return imported, importer.problems


def _check_point(importer: _Importer, plugin: _Plugin, point: str) -> None:
    """An explicitly enabled plugin must extend that point, as kube-scheduler requires."""
    name = plugin.name
    if point in ROLES:
        if (name, point) in KUBE_ONLY_POINTS:
            return
        # kube's plugins extend kube's points (Placer's GangScheduling is also a filter; kube's is not)
        if issubclass(REGISTRY[name], ROLES[point]) and (name not in KUBE_POINTS or point in KUBE_POINTS[name]):
            return
        importer.fail(plugin.where, f"{name}: plugin {name} does not extend {point} plugin")
    elif point in _PRE and point not in _placer_points(name):
        importer.fail(plugin.where, f"{name}: plugin {name} does not extend {point} plugin")


def _weight(name: str, score: _Set, multi_point: _Set) -> int:
    """kube's `getValidScoreWeights`: score's entry first, then multiPoint's; 0 or none is 1."""
    for plugin in (*score.enabled, *multi_point.enabled):
        if plugin.name == name:
            return plugin.weight or 1
    return 1


def _section(top: _Importer, document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        top.fail(key, f"must be an object, not {_type(value)}")
        return {}
    return value


def _run_flags(top: _Importer, document: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """`placer run`'s flags that reproduce the file's process settings: its kubeconfig, and its leader
    election (kube-scheduler's Lease unless the file names another: Placer then takes over the Lease
    kube-scheduler held, never active beside it); and notes on the settings Placer does otherwise."""
    flags: list[str] = []
    notes: list[str] = []
    client = _section(top, document, "clientConnection")
    kubeconfig = client.get("kubeconfig")
    if isinstance(kubeconfig, str) and kubeconfig:
        flags += ["--kubeconfig", kubeconfig]
    elif kubeconfig not in (None, ""):
        top.fail("clientConnection.kubeconfig", f"must be a path, not {_type(kubeconfig)}")
    different = sorted(key for key, default in _CLIENT_DEFAULTS.items() if key in client and client[key] != default)
    if different:
        notes.append(f"clientConnection.{', '.join(different)}: Placer sets no client-side rate limit and speaks "
                     "JSON; the API server's priority and fairness applies to it as to any client")
    election = _section(top, document, "leaderElection")
    if election.get("leaderElect") is False:
        return [*flags, "--no-leader-elect"], notes
    lock = election.get("resourceLock")
    if lock not in (None, "", "leases"):
        top.unsupported("leaderElection.resourceLock", f"{lock!r}: Placer elects its leader on a Lease (leases)")
    for key, flag in (("resourceNamespace", "--leader-elect-resource-namespace"),
                      ("resourceName", "--leader-elect-resource-name")):
        value = election.get(key) or KUBE_LEADER_ELECTION[key]
        if not isinstance(value, str):
            top.fail(f"leaderElection.{key}", f"must be a string, not {_type(value)}")
            continue
        flags += [flag, value]
    for key, flag in _LEASE_TIMINGS:
        value = election.get(key)
        if value is None:
            continue
        if not _go_duration(value):
            top.fail(f"leaderElection.{key}", f"{value!r}: not a duration (e.g. 15s)")
            continue
        flags += [flag, value]
    return flags, notes


def import_config(document: Any, *, skip_unknown: bool = False, where: str = "") -> ImportResult:
    """A parsed KubeSchedulerConfiguration as SchedulerProfiles; ConfigError when it is not one."""
    prefix = f"{where}: " if where else ""
    if not isinstance(document, Mapping):
        raise ConfigError(f"{prefix}must be a {CONFIG_KIND}, not {_type(document)}")
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if kind != CONFIG_KIND or api_version not in API_VERSIONS:
        raise ConfigError(f"{prefix}kind/apiVersion: expected {CONFIG_KIND} {' or '.join(API_VERSIONS)}, "
                           f"got {kind!r} {api_version!r}")
    top = _Importer(api_version, skip_unknown)
    for key, value in document.items():
        if key in ("apiVersion", "kind", "profiles", "percentageOfNodesToScore") or key in OPERATIONAL:
            continue
        if key in BACKOFF:
            if value is not None and value != BACKOFF[key]:
                top.unsupported(key, f"{value!r}: Placer's backoff is 1 s doubling to 10 s (kube's defaults)")
        elif key == "extenders":
            if value:
                top.unsupported(key, "Placer calls no scheduler extenders")
        else:
            top.fail(key, "unknown field")
    run_flags, run_notes = _run_flags(top, document)
    profiles_raw = document.get("profiles")
    if profiles_raw is None or profiles_raw == []:
        profiles_raw = [{}]
    if not isinstance(profiles_raw, list):
        raise ConfigError(f"{prefix}profiles: must be a list, not {_type(profiles_raw)}")
    problems = list(top.problems)
    profiles: list[ImportedProfile] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(profiles_raw):
        imported, found = _profile(raw, index, document.get("percentageOfNodesToScore"), api_version, skip_unknown,
                                   single=len(profiles_raw) == 1)
        problems.extend(found)
        if imported is None:
            continue
        scheduler_name = imported.document["spec"]["schedulerName"]
        if scheduler_name in seen:
            problems.append(ImportProblem(f"profiles[{index}].schedulerName",
                                          f'Duplicate value: "{scheduler_name}" (profiles[{seen[scheduler_name]}])'))
        seen[scheduler_name] = index
        profiles.append(imported)
    if profiles:
        profiles[0].skipped[:0] = top.skipped
    if where:
        problems = [ImportProblem(f"{where}: {p.where}", p.message) for p in problems]
    return ImportResult(api_version, profiles, problems, run_flags, run_notes)


def import_text(text: str, *, skip_unknown: bool = False, source: str = "<config>") -> ImportResult:
    """`import_config` on YAML text: exactly one document, the configuration."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{source}: invalid YAML{at}: {getattr(error, 'problem', None) or error}") from None
    if len(documents) != 1:
        raise ConfigError(f"{source}: expected one {CONFIG_KIND} document, found {len(documents)}")
    return import_config(documents[0], skip_unknown=skip_unknown, where=source)


def as_shadow(document: dict[str, Any]) -> dict[str, Any]:
    """The profile as a Shadow of the kube-scheduler profile it came from (API.md §5): it decides for
    that scheduler's pods and compares, binding nothing."""
    spec = dict(document["spec"])
    original = spec["schedulerName"]
    spec = {"schedulerName": f"{original}-placer-shadow", "mode": "Shadow", "shadowOf": original,
            **{k: v for k, v in spec.items() if k != "schedulerName"}}
    name = _profile_name(f"{original}-placer-shadow")
    return {**document, "metadata": {"name": name}, "spec": spec}


def render(result: ImportResult, source: str, *, shadow: bool = False) -> str:
    """The profiles as YAML documents, each under comments saying where it came from and what was
    left out or added."""
    out: list[str] = []
    for index, imported in enumerate(result.profiles):
        document = as_shadow(imported.document) if shadow else imported.document
        lines = [f"# Imported by `placer import-config` from {source}, {imported.source} ({result.api_version}),",
                 "# with kube-scheduler v1.36's default plugins and multiPoint expansion."]
        if index == 0 and result.run_flags and not shadow:
            lines += textwrap.wrap("placer run " + " ".join(result.run_flags), 100, initial_indent="# run as: ",
                                   subsequent_indent="#   ", break_on_hyphens=False, break_long_words=False)
            for note in result.run_notes:
                lines += textwrap.wrap(note, 100, initial_indent="# run note: ", subsequent_indent="#   ",
                                       break_on_hyphens=False, break_long_words=False)
        for label, items in (("note", imported.notes), ("skipped", [str(p) for p in imported.skipped])):
            for item in items:
                lines += textwrap.wrap(item, 100, initial_indent=f"# {label}: ", subsequent_indent="#   ",
                                       break_on_hyphens=False, break_long_words=False)
        body = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=100)
        out.append("\n".join(lines) + "\n" + body)
    return "---\n".join(out)


def describe(problems: Sequence[ImportProblem]) -> str:
    return "\n".join(f"  {problem}" for problem in problems)
