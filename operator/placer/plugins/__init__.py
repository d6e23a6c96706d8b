"""The built-in plugins and the registry that maps their names to classes.

One module per plugin, its docstring says what it does, its args and an example profile;
its tests sit beside it in `<module>_test.py`. To add a plugin, write the module and the
test and add one line to `REGISTRY`.
"""

from __future__ import annotations

from placer.engine.framework import FilterPlugin, Plugin, PostFilterPlugin, ScorePlugin
from placer.plugins.default_preemption import DefaultPreemption
from placer.plugins.image_locality import ImageLocality
from placer.plugins.inter_pod_affinity import InterPodAffinity
from placer.plugins.node_affinity import NodeAffinity
from placer.plugins.node_label import NodeLabel
from placer.plugins.node_ports import NodePorts
from placer.plugins.node_ready import NodeReady
from placer.plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from placer.plugins.node_resources_fit import NodeResourcesFit
from placer.plugins.node_unschedulable import NodeUnschedulable
from placer.plugins.node_utilization import NodeUtilization
from placer.plugins.node_volume_limits import NodeVolumeLimits
from placer.plugins.pod_topology_spread import PodTopologySpread
from placer.plugins.prefer_node import PreferNode
from placer.plugins.spread_by_label import SpreadByLabel
from placer.plugins.taint_toleration import TaintToleration
from placer.plugins.volume_binding import VolumeBinding
from placer.plugins.volume_restrictions import VolumeRestrictions
from placer.plugins.volume_zone import VolumeZone

REGISTRY: dict[str, type[Plugin]] = {
    plugin.name: plugin
    for plugin in (
        NodeUnschedulable,
        NodeReady,
        TaintToleration,
        NodeAffinity,
        NodePorts,
        NodeResourcesFit,
        NodeResourcesBalancedAllocation,
        ImageLocality,
        NodeLabel,
        PreferNode,
        SpreadByLabel,
        NodeUtilization,
        PodTopologySpread,
        InterPodAffinity,
        VolumeRestrictions,
        NodeVolumeLimits,
        VolumeZone,
        VolumeBinding,
        DefaultPreemption,
    )
}

FILTER_NAMES: frozenset[str] = frozenset(name for name, cls in REGISTRY.items() if issubclass(cls, FilterPlugin))
SCORE_NAMES: frozenset[str] = frozenset(name for name, cls in REGISTRY.items() if issubclass(cls, ScorePlugin))
POST_FILTER_NAMES: frozenset[str] = frozenset(
    name for name, cls in REGISTRY.items() if issubclass(cls, PostFilterPlugin)
)

__all__ = ["FILTER_NAMES", "POST_FILTER_NAMES", "REGISTRY", "SCORE_NAMES"]
