"""StampNamespace — a test plugin: a PreBind that writes to an object of another kind and waits on
the watch for a third party to answer, as VolumeBinding waits for the PV controller and Dynamic
Resource Allocation for its claims; to show the operator carries out any plugin's PreBind with no
change to it (tests/controller/test_integration_binding_cycle.py runs it end to end).

PreBind: the pod's Namespace gets the label `placer.dev/stamp: NODE` (a merge patch); then the pod
waits until the Namespace, as the watch shows it, carries `placer.dev/ack: NODE` — fails at once if
the namespace is gone, and after `timeoutSeconds` with `namespace not acknowledged: timed out waiting
for the condition`. When the binding fails, the stamp is taken back (a JSON patch removing the label,
with the resourceVersion read as its precondition) if it still names that node.

Filter: none (it admits every node).

Args: `timeoutSeconds` (> 0, default 30).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from placer.engine.cluster import ClusterState
from placer.engine.framework import (
    JSON_PATCH,
    FilterPlugin,
    ObjectRef,
    PluginArgs,
    PreBind,
    PreBindError,
    PreBindPlugin,
    WaitFor,
    Write,
)
from placer.engine.objects import PodInfo
from pydantic import Field

__all__ = ["ACK", "STAMP", "StampNamespace", "StampNamespaceArgs"]

STAMP = "placer.dev/stamp"
ACK = "placer.dev/ack"


class StampNamespaceArgs(PluginArgs):
    timeoutSeconds: float = Field(default=30.0, gt=0)


def namespace_ref(name: str) -> ObjectRef:
    return ObjectRef("v1", "Namespace", "namespaces", name)


def _labels(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = raw.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _stamped(node: str, raw: Mapping[str, Any]) -> bool:
    return _labels(raw).get(STAMP) == node


def _unstamp(namespace: str, node: str, raw: Mapping[str, Any]) -> Write | None:
    if not _stamped(node, raw):
        return None  # not ours any more
    return Write(namespace_ref(namespace), [{"op": "remove", "path": "/metadata/labels/placer.dev~1stamp"}], JSON_PATCH)


def _acknowledged(namespace: str, node: str, cluster: ClusterState, written: Mapping[ObjectRef, str]) -> bool:
    found = cluster.catalog.get("Namespace", namespace)
    if found is None:
        raise PreBindError(f'namespace "{namespace}" not found')
    return bool(found.labels.get(ACK) == node)


class StampNamespace(FilterPlugin[StampNamespaceArgs], PreBindPlugin[StampNamespaceArgs]):
    name: ClassVar[str] = "StampNamespace"
    Args: ClassVar[type[PluginArgs]] = StampNamespaceArgs
    events: ClassVar[frozenset[str]] = frozenset({"Namespace"})

    def filter(self, pod: PodInfo, cluster: ClusterState) -> np.ndarray | None:
        return None

    def pre_bind(self, pod: PodInfo, cluster: ClusterState, node: str, reservation: Any) -> PreBind | None:
        stamp = Write(
            namespace_ref(pod.namespace), {"metadata": {"labels": {STAMP: node}}},
            landed=functools.partial(_stamped, node), undo=functools.partial(_unstamp, pod.namespace, node),
        )
        wait = WaitFor(
            functools.partial(_acknowledged, pod.namespace, node), self.events, timeout=self.args.timeoutSeconds,
            timeout_message="namespace not acknowledged: timed out waiting for the condition",
        )
        return PreBind((stamp,), wait)
