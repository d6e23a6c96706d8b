"""The plugin interfaces, in one place, after kube-scheduler's `framework/interface.go`.

A plugin is a class with a `name`, an `Args` model (pydantic, validated when a profile is
loaded) and one or both of the extension points below. Plugins work on whole columns: a filter
returns a boolean mask over every node slot, a score returns one value per candidate slot. They
never see the queue or the API server; the runtime (`placer.engine.runtime`) calls them.

Adding a plugin: write `placer/plugins/<name>.py` with the class and its docstring (what it
does, its args, an example profile), a `<name>_test.py` beside it, and its entry point in the
group `placer.plugins` of pyproject.toml (`Name = module:Class`), as any plugin package does;
`placer/plugins/__init__.py` loads and checks them.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from placer.engine.cluster import ClusterState, PodRecord
from placer.engine.objects import PodInfo

__all__ = [
    "MAX_NODE_SCORE",
    "ClusterEvent",
    "CycleMemo",
    "FilterPlugin",
    "NoArgs",
    "Plugin",
    "PluginArgs",
    "PostFilterContext",
    "PostFilterPlugin",
    "Preemption",
    "ReservePlugin",
    "ScorePlugin",
    "StaticCache",
    "default_normalize",
    "fit_error_message",
    "minmax_normalize",
]

MAX_NODE_SCORE = 100

ArgsT = TypeVar("ArgsT", bound="PluginArgs")


class ClusterEvent:
    """Changes that may make a pod schedulable again (kube's `ClusterEvent`s).

    A filter lists in `events` those that may undo its rejections; a pod it rejected waits for
    one of them (or its backoff), so a busy cluster does not retry every pending pod on every
    change. `"Node"` stands for every node event, and a catalog kind's name (`"Namespace"`,
    `"PersistentVolumeClaim"`, ...) for every change of that kind.
    """

    NODE = "Node"
    NODE_ADD = "Node/Add"
    NODE_UPDATE = "Node/Update"  # labels, taints, allocatable, conditions, images
    NODE_DELETE = "Node/Delete"
    POD = "Pod"
    POD_ADD = "Pod/Add"  # a pod counted on a node (bound, or assumed by this scheduler)
    POD_UPDATE = "Pod/Update"  # a counted pod's labels or requests changed
    POD_DELETE = "Pod/Delete"  # a counted pod is gone: what it held is free
    NODE_METRICS = "NodeMetrics"

    @staticmethod
    def matches(event: str, wanted: frozenset[str]) -> bool:
        """Whether `event` is one of `wanted` (a kind stands for all its actions)."""
        return event in wanted or event.partition("/")[0] in wanted


class PluginArgs(BaseModel):
    """Base of every plugin's args: unknown fields are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoArgs(PluginArgs):
    """For plugins that take no arguments."""


class Plugin(ABC, Generic[ArgsT]):
    """What every plugin has: a name and validated args."""

    name: ClassVar[str]
    Args: ClassVar[type[PluginArgs]] = NoArgs

    def __init__(self, args: ArgsT) -> None:
        self.args = args

    def warnings(self, cluster: ClusterState) -> list[str]:
        """Conditions worth reporting in the profile status (e.g. missing metrics)."""
        return []


class FilterPlugin(Plugin[ArgsT]):
    """Decides which nodes can run the pod at all."""

    #: the reason given for every rejected node, for plugins that have only one
    reason: ClassVar[str] = ""
    #: cluster events that may make a pod this plugin rejected schedulable (see ClusterEvent)
    events: ClassVar[frozenset[str]] = frozenset({ClusterEvent.NODE})
    #: whether evicting pods may undo this plugin's rejections (kube's Unschedulable, as against
    #: UnschedulableAndUnresolvable): preemption looks only at nodes such filters rejected
    resolvable: ClassVar[bool] = False

    def pre_filter(self, pod: PodInfo, cluster: ClusterState) -> str | None:
        """A reason that concerns the pod rather than any node (kube's PreFilter rejection, e.g. a
        missing claim): the pod fits nowhere, and the message reads `0/N nodes are available: <it>.`"""
        return None

    @abstractmethod
    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        """A bool mask over slots `[0, cluster.size)`: True where the pod fits. None: all fit."""

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        """For the slots this filter rejected, how many nodes gave each reason.

        Asked only when a pod is unschedulable, to build kube-scheduler's message.
        """
        return Counter({self.reason: len(rejected)})

    def resolvable_nodes(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> np.ndarray:
        """For the slots this filter rejected, whether evicting pods may undo it (a plugin with both
        kinds of reasons, such as InterPodAffinity, tells them apart per node)."""
        return np.full(len(rejected), self.resolvable, dtype=bool)

    def fits_without(self, pod: PodInfo, cluster: ClusterState, slot: int, removed: Sequence[PodRecord]) -> bool:
        """Whether the pod would pass this filter on `slot` if the `removed` pods were gone — what
        preemption asks, victim by victim. This default takes them out of the cluster, asks
        `filter`, and puts them back; plugins whose answer is local to a node do it cheaper.
        (`filter` returning None must mean the plugin does not constrain this pod at all, whatever
        runs where: then no pod needs to move.)"""
        if self.filter(pod, cluster) is None:
            return True
        with cluster.without(removed):
            mask = self.filter(pod, cluster)
            return mask is None or bool(mask[slot])


class ReservePlugin(Plugin[ArgsT]):
    """Holds, on the chosen node, what the plugin's filter found there (kube's Reserve), so the next
    pod does not take it while this one is being bound: e.g. the volumes VolumeBinding will bind,
    assumed in the catalog. A filter plugin that is also a ReservePlugin is reserved for every pod
    placed (and unreserved when its binding fails); what `reserve` returns travels with the
    decision (`Decision.reservations[name]`) to whatever binds the pod."""

    @abstractmethod
    def reserve(self, pod: PodInfo, cluster: ClusterState, node: str) -> Any:
        """Assume what the pod needs on `node`; None when there is nothing to hold."""

    def unreserve(self, pod: PodInfo, cluster: ClusterState, reservation: Any) -> None:
        """Undo `reserve` (the binding failed or was abandoned)."""


@dataclass(frozen=True, slots=True)
class Preemption:
    """Where a pod may go once `victims` (lower-priority pods of that node) are evicted."""

    node: str
    victims: tuple[PodInfo, ...]
    #: lower-priority pods nominated to that node before, whose nomination no longer holds
    displaced: tuple[str, ...] = ()


@dataclass(slots=True)
class PostFilterContext:
    """What a PostFilter plugin gets from the runtime when no node fits (kube's `NodeToStatusMap`
    and framework handle): the nodes evicting pods may help, in the order to try them, how many
    nodes there are, and the profile's filters on one node with some pods gone."""

    candidates: np.ndarray  # slots rejected only by resolvable filters, in node-tree order
    all_nodes: int
    #: (slot, pods gone) -> None when the pod fits there, else that node's reasons
    check: Callable[[int, Sequence[PodRecord]], list[str] | None]
    #: a cheaper yes/no of `check`, for the many tries of picking victims
    fits: Callable[[int, Sequence[PodRecord]], bool]


class PostFilterPlugin(Plugin[ArgsT]):
    """Runs when no node fits (kube's PostFilter): DefaultPreemption finds a node where evicting
    lower-priority pods makes room."""

    @abstractmethod
    def post_filter(self, pod: PodInfo, cluster: ClusterState, context: PostFilterContext) -> Preemption | str:
        """A nomination, or why there is none: the sentence kube's FitError ends with
        (DefaultPreemption's `preemption: 0/5 nodes are available: ...`)."""


class ScorePlugin(Plugin[ArgsT]):
    """Ranks the feasible nodes; the runtime multiplies by the profile's weight."""

    def pre_score(self, pod: PodInfo, cluster: ClusterState) -> bool:
        """False when the plugin does not apply to this pod: it then scores 0 everywhere."""
        return True

    @abstractmethod
    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        """Raw scores (int64 or float64), one per slot in `slots`."""

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """Map raw scores onto 0..100; the default is for scores computed in that range."""
        return raw.astype(np.int64, copy=False)


def fit_error_message(all_nodes: int, reasons: Counter[str], pod_reason: str | None = None) -> str:
    """kube-scheduler's FitError: `0/5 nodes are available: 1 node(s) ..., 4 Insufficient cpu.`, or,
    when a PreFilter rejected the pod itself, `0/5 nodes are available: <that reason>.`"""
    if pod_reason is not None:
        return f"0/{all_nodes} nodes are available: {pod_reason}."
    pairs = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{all_nodes} nodes are available: {', '.join(pairs)}."


def default_normalize(raw: np.ndarray, reverse: bool = False) -> np.ndarray:
    """kube-scheduler's `helper.DefaultNormalizeScore`: scale by the maximum, optionally reversed."""
    raw = raw.astype(np.int64, copy=False)
    top = int(raw.max()) if raw.size else 0
    if top <= 0:
        return np.full(raw.shape, MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scores = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - scores if reverse else scores


def minmax_normalize(raw: np.ndarray) -> np.ndarray:
    """Placer's own plugins: the lowest raw value maps to 0, the highest to 100, rounding down.

    When every candidate has the same raw value the plugin cannot tell them apart, and each
    scores 0 (as a plugin that does not apply).
    """
    if raw.size == 0:
        return raw.astype(np.int64)
    low, high = raw.min(), raw.max()
    if high == low:
        return np.zeros(raw.shape, dtype=np.int64)
    if raw.dtype.kind in "iu":
        return (raw - low) * MAX_NODE_SCORE // (high - low)
    return np.floor((raw - low) * MAX_NODE_SCORE / (high - low)).astype(np.int64)


T = TypeVar("T")


class CycleMemo(Generic[T]):
    """One plugin's state for the pod being scheduled (kube's CycleState entry): computed once, then
    shared by its pre_filter, filter, reasons and score calls of that cycle. Valid while the pod is
    the same object and the cluster (pods, nodes, catalog) has not changed since."""

    __slots__ = ("_cluster", "_key", "_pod", "_value")

    def __init__(self) -> None:
        self._pod: PodInfo | None = None
        self._cluster: ClusterState | None = None
        self._key: tuple[int, int] = (-1, -1)
        self._value: T | None = None

    def get(self, pod: PodInfo, cluster: ClusterState) -> T | None:
        if (
            self._pod is pod
            and self._cluster is cluster
            and self._key == (cluster.version, cluster.catalog.revision)
        ):
            return self._value
        return None

    def put(self, pod: PodInfo, cluster: ClusterState, value: T) -> T:
        self._pod, self._cluster, self._value = pod, cluster, value
        self._key = (cluster.version, cluster.catalog.revision)
        return value


class StaticCache(Generic[T]):
    """Per-pod-shape results that depend only on node facts (labels, taints, metrics).

    Valid until the cluster's `static_version` moves; pods with the same selector or
    tolerations share one entry, so a backlog of similar pods costs one computation.
    """

    def __init__(self, limit: int = 512) -> None:
        self._version = -1
        self._cluster: weakref.ref[ClusterState] | None = None
        self._limit = limit
        self._entries: dict[Hashable, T] = {}

    def get(self, cluster: ClusterState, key: Hashable) -> T | None:
        # versions count per ClusterState: another cluster at the same version is not this one
        owner = self._cluster() if self._cluster is not None else None
        if cluster.static_version != self._version or owner is not cluster:
            self._entries.clear()
            self._version = cluster.static_version
            self._cluster = weakref.ref(cluster)
            return None
        return self._entries.get(key)

    def put(self, key: Hashable, value: T) -> T:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = value
        return value
