"""The plugin interfaces, in one place, after kube-scheduler's `framework/interface.go`.

A plugin is a class with a `name`, an `Args` model (pydantic, validated when a profile is
loaded) and one or both of the extension points below. Plugins work on whole columns: a filter
returns a boolean mask over every node slot, a score returns one value per candidate slot. They
never see the queue or the API server; the runtime (`placer.engine.runtime`) calls them.

Adding a plugin: write `placer/plugins/<name>.py` with the class and its docstring (what it
does, its args, an example profile), a `<name>_test.py` beside it, and one line in
`placer/plugins/__init__.py`'s registry.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Hashable
from typing import ClassVar, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from placer.engine.cluster import ClusterState
from placer.engine.objects import PodInfo

__all__ = [
    "MAX_NODE_SCORE",
    "FilterPlugin",
    "NoArgs",
    "Plugin",
    "PluginArgs",
    "ScorePlugin",
    "StaticCache",
    "default_normalize",
    "minmax_normalize",
]

MAX_NODE_SCORE = 100

ArgsT = TypeVar("ArgsT", bound="PluginArgs")


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

    @abstractmethod
    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        """A bool mask over slots `[0, cluster.size)`: True where the pod fits. None: all fit."""

    def reason_counts(self, pod: PodInfo, cluster: ClusterState, rejected: np.ndarray) -> Counter[str]:
        """For the slots this filter rejected, how many nodes gave each reason.

        Asked only when a pod is unschedulable, to build kube-scheduler's message.
        """
        return Counter({self.reason: len(rejected)})


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
