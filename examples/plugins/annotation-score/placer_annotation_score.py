"""AnnotationScore — prefer nodes by a number in one of their annotations (an example plugin package).

Score: each node's value of the annotation `annotationKey`, read as a number (`"7"`, `"2.5"`,
`"-1"`); a node without it, or whose value is not a finite number, counts 0, and values beyond
±10^12 count as ±10^12. Values map onto 0..100 across the feasible nodes as Placer's own plugins
do: the lowest 0, the highest 100, rounding down; all alike: 0 everywhere. An operator (or a
controller) steers pods by annotating nodes, with no relabelling and no profile change.

The values are read once per node change (an annotation change is a node update) into a column
shared by every pod until the next one, so scoring a pod is one numpy take.

Args::

    annotationKey: placer.dev/score      # the default; any annotation key

Example profile::

    apiVersion: placer.dev/v1alpha1
    kind: SchedulerProfile
    metadata:
      name: annotated
    spec:
      schedulerName: annotated-scheduler
      scores:
        - name: AnnotationScore
          weight: 5
          args: {annotationKey: placer.dev/score}

Installed beside Placer (`pip install examples/plugins/annotation-score`), it is found through
its entry point `AnnotationScore = placer_annotation_score:AnnotationScore` in the group
`placer.plugins` (its pyproject.toml).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from placer.engine.cluster import ClusterState
from placer.engine.framework import PluginArgs, ScorePlugin, StaticCache, minmax_normalize
from placer.engine.objects import PodInfo
from pydantic import Field

__all__ = ["LIMIT", "AnnotationScore", "AnnotationScoreArgs", "annotation_value"]

#: values are clipped to ±LIMIT, so the spread of two extremes stays finite when normalised
LIMIT = 1e12
# a Kubernetes annotation key: an optional DNS-subdomain prefix and `/`, then a name of up to 63
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_KEY = rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?$"


class AnnotationScoreArgs(PluginArgs):
    annotationKey: str = Field(default="placer.dev/score", max_length=317, pattern=_KEY)


def annotation_value(raw: object) -> float:
    """An annotation's value as a score: a finite number (clipped to ±LIMIT), else 0."""
    if not isinstance(raw, str):
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        return 0.0
    if not math.isfinite(value):
        return 0.0
    return min(max(value, -LIMIT), LIMIT)


class AnnotationScore(ScorePlugin[AnnotationScoreArgs]):
    name: ClassVar[str] = "AnnotationScore"
    Args: ClassVar[type[PluginArgs]] = AnnotationScoreArgs

    def __init__(self, args: AnnotationScoreArgs) -> None:
        super().__init__(args)
        self._values: StaticCache[np.ndarray] = StaticCache(limit=1)

    def _column(self, cluster: ClusterState) -> np.ndarray:
        """Every slot's value, rebuilt only when a node changed (StaticCache follows static_version)."""
        column = self._values.get(cluster, None)
        if column is None:
            key = self.args.annotationKey
            column = np.zeros(cluster.size, dtype=np.float64)
            for slot, node in enumerate(cluster.nodes[: cluster.size]):
                if node is not None:
                    column[slot] = annotation_value(node.annotations.get(key))
            self._values.put(None, column)
        return column

    def score(self, pod: PodInfo, cluster: ClusterState, slots: np.ndarray) -> np.ndarray:
        return self._column(cluster)[slots]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return minmax_normalize(raw)
