"""Node declared features: which features of a node a pod needs, after kube v1.36's
`component-helpers/nodedeclaredfeatures` (the library kube-scheduler's NodeDeclaredFeatures plugin
and the API server share).

A kubelet publishes in `status.declaredFeatures` the features it implements (sorted, unique: the API
server enforces it). A pod needs a feature when its spec uses something only such a node can run:
`hostNetwork: true` with `hostUsers: false` needs `UserNamespacesHostNetworkSupport`; a container or
init container with a `restartPolicyRules` entry whose action is `RestartAllContainers` needs
`RestartAllContainersOnContainerExits`. The other registered features concern updates (in-place
resize), never scheduling.

A feature may carry a `max_version`: once every node a scheduler of that version may meet
implements it (the version-skew policy), it is no longer required. Kube computes the requirements
against the scheduler's own version; Placer against the kube-scheduler version it follows
(`SCHEDULER_VERSION`). No v1.36 feature has a max version yet.

A node without `status.declaredFeatures` (every node before v1.35, and v1.35 nodes with the gate
off) declares nothing, so a pod that needs any feature fits none of them: kube gives such nodes no
benefit of the doubt. Names a node declares that no registered feature has are ignored (kube's
`TryMap`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import total_ordering
from typing import Any

from placer.engine.fields import mapping, sequence

__all__ = [
    "ALL_FEATURES",
    "DEFAULT_FRAMEWORK",
    "EXTEND_WEBSOCKETS_TO_KUBELET",
    "IN_PLACE_POD_LEVEL_RESOURCES_VERTICAL_SCALING",
    "IN_PLACE_POD_VERTICAL_SCALING_INIT_CONTAINERS",
    "RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS",
    "SCHEDULER_VERSION",
    "USER_NAMESPACES_HOST_NETWORK_SUPPORT",
    "Feature",
    "FeatureFramework",
    "MatchResult",
    "Version",
    "required_features",
]

RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK_SUPPORT = "UserNamespacesHostNetworkSupport"
IN_PLACE_POD_LEVEL_RESOURCES_VERTICAL_SCALING = "InPlacePodLevelResourcesVerticalScaling"
IN_PLACE_POD_VERTICAL_SCALING_INIT_CONTAINERS = "InPlacePodVerticalScalingInitContainers"
EXTEND_WEBSOCKETS_TO_KUBELET = "ExtendWebSocketsToKubelet"
RESTART_ALL_CONTAINERS_ACTION = "RestartAllContainers"

_VERSION = re.compile(
    r"^v?(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)(?:\.(?P<patch>0|[1-9][0-9]*))?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)


@total_ordering
@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version as kube's `util/version` compares them: major, minor, patch, then a
    pre-release sorts before its release (`1.39.0-alpha.2 > 1.38.0`, `1.30.0-alpha.1 < 1.30.0`);
    build metadata is ignored."""

    major: int
    minor: int
    patch: int = 0
    pre_release: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _VERSION.match(text)
        if match is None:
            raise ValueError(f'could not parse "{text}" as version')
        pre = match.group("pre")
        return cls(int(match.group("major")), int(match.group("minor")), int(match.group("patch") or 0),
                   tuple(pre.split(".")) if pre else ())

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        core, other_core = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if core != other_core:
            return core < other_core
        if not self.pre_release or not other.pre_release:
            return bool(self.pre_release) and not other.pre_release
        return _pre_release_key(self.pre_release) < _pre_release_key(other.pre_release)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return f"{text}-{'.'.join(self.pre_release)}" if self.pre_release else text


def _pre_release_key(identifiers: tuple[str, ...]) -> tuple[tuple[int, int, str], ...]:
    # semver: numeric identifiers compare numerically and sort before alphanumeric ones
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in identifiers)


#: the kube-scheduler whose rules Placer follows (API.md: v1.36)
SCHEDULER_VERSION = Version(1, 36, 2)

PodSpec = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Feature:
    """One declared feature: its name, whether scheduling a pod with this spec needs it, and the last
    version it matters to (None: no bound)."""

    name: str
    infer_for_scheduling: Callable[[PodSpec], bool]
    max_version: Version | None = None


def _never(spec: PodSpec) -> bool:
    """Features that concern updates (in-place resize) or the API server, not scheduling."""
    return False


def _restart_all_containers(spec: PodSpec) -> bool:
    """A container or init container with a restart rule whose action is RestartAllContainers."""
    for field in ("containers", "initContainers"):
        for i, raw in enumerate(sequence(spec.get(field), f"spec.{field}")):
            container = raw if type(raw) is dict else mapping(raw, f"spec.{field}[{i}]")
            if container.get("restartPolicyRules") is None:  # (every container but a few: no path built)
                continue
            rules = sequence(container.get("restartPolicyRules"), f"spec.{field}[{i}].restartPolicyRules")
            for j, rule in enumerate(rules):
                path = f"spec.{field}[{i}].restartPolicyRules[{j}]"
                if mapping(rule, path).get("action") == RESTART_ALL_CONTAINERS_ACTION:
                    return True
    return False


def _user_namespaces_host_network(spec: PodSpec) -> bool:
    """`hostNetwork: true` with `hostUsers: false` (a user namespace on the host's network)."""
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


#: kube v1.36's `features.AllFeatures`
ALL_FEATURES: tuple[Feature, ...] = (
    Feature(RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS, _restart_all_containers),
    Feature(IN_PLACE_POD_LEVEL_RESOURCES_VERTICAL_SCALING, _never),
    Feature(EXTEND_WEBSOCKETS_TO_KUBELET, _never),
    Feature(IN_PLACE_POD_VERTICAL_SCALING_INIT_CONTAINERS, _never),
    Feature(USER_NAMESPACES_HOST_NETWORK_SUPPORT, _user_namespaces_host_network),
)


@dataclass(frozen=True, slots=True)
class MatchResult:
    """Whether a node's declared features satisfy a pod's requirements, and which do not."""

    is_match: bool
    unsatisfied: tuple[str, ...] = ()


class FeatureFramework:
    """kube's `nodedeclaredfeatures.Framework` for scheduling: a registry of features, sorted by name."""

    def __init__(self, registry: Iterable[Feature]) -> None:
        self.registry: tuple[Feature, ...] = tuple(sorted(registry, key=lambda feature: feature.name))
        self.names: frozenset[str] = frozenset(feature.name for feature in self.registry)

    def infer_for_scheduling(self, spec: PodSpec, target_version: Version | None) -> tuple[str, ...]:
        """The features scheduling a pod with `spec` needs on a node of `target_version`, sorted."""
        if target_version is None:
            raise ValueError("target version cannot be nil")
        return tuple(
            feature.name
            for feature in self.registry
            if (feature.max_version is None or not target_version > feature.max_version)
            and feature.infer_for_scheduling(spec)
        )

    def known(self, declared: Iterable[str]) -> frozenset[str]:
        """What a node declares, limited to registered features (the rest cannot be required)."""
        return self.names.intersection(declared)

    def match_node(self, required: Sequence[str], declared: Iterable[str]) -> MatchResult:
        """kube's `MatchNodeFeatureSet`: every required feature must be declared."""
        have = self.known(declared)
        missing = tuple(name for name in required if name not in have)
        return MatchResult(not missing, missing)


DEFAULT_FRAMEWORK = FeatureFramework(ALL_FEATURES)

# what `DEFAULT_FRAMEWORK.infer_for_scheduling(spec, SCHEDULER_VERSION)` asks, sorted by name, taken
# once: (name, its check) of the features still required at that version whose check may say yes
_FOR_SCHEDULING: tuple[tuple[str, Callable[[PodSpec], bool]], ...] = tuple(
    (feature.name, feature.infer_for_scheduling)
    for feature in DEFAULT_FRAMEWORK.registry
    if (feature.max_version is None or feature.max_version >= SCHEDULER_VERSION)
    and feature.infer_for_scheduling is not _never
)


def required_features(spec: PodSpec) -> tuple[str, ...]:
    """The node features a pod with this spec needs, for the kube-scheduler version Placer follows
    (`DEFAULT_FRAMEWORK.infer_for_scheduling` at `SCHEDULER_VERSION`, parsed pod after pod).
    Raises FieldError on a malformed container or restart rule."""
    return tuple(name for name, infer in _FOR_SCHEDULING if infer(spec))
