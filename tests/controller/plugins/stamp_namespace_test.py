"""StampNamespace in the engine alone: the write it asks for, how it is recognised and undone, and
its wait's check against the cluster."""

from __future__ import annotations

import pytest
from placer.engine.framework import PreBindError
from placer.engine.kinds import KINDS_BY_NAME, upsert_object
from placer.testing import cluster_of, namespace, node, pod, pod_info

from tests.controller.plugins.stamp_namespace import ACK, STAMP, StampNamespace, StampNamespaceArgs


def test_it_stamps_the_namespace_waits_for_the_ack_and_undoes_only_its_own_stamp() -> None:
    cluster = cluster_of([node("n1")], objects=[namespace("team")])
    plugin = StampNamespace(StampNamespaceArgs(timeoutSeconds=2))
    plan = plugin.pre_bind(pod_info(pod("p", namespace="team")), cluster, "n1", None)
    assert plan is not None and plan.wait is not None
    [stamp] = plan.writes
    assert stamp.target.path() == "/api/v1/namespaces/team" and stamp.body() == {
        "metadata": {"labels": {STAMP: "n1"}}}
    ours = {"metadata": {"name": "team", "labels": {STAMP: "n1"}}}
    assert stamp.landed is not None and stamp.landed(ours)
    assert stamp.undo is not None
    undo = stamp.undo(ours)
    assert undo is not None and undo.patch_type == "json"
    assert undo.patch == [{"op": "remove", "path": "/metadata/labels/placer.dev~1stamp"}]
    assert stamp.undo({"metadata": {"labels": {STAMP: "n2"}}}) is None
    assert (plan.wait.timeout, plan.wait.events) == (2, frozenset({"Namespace"}))
    assert plan.wait.check(cluster, {}) is False
    upsert_object(cluster.catalog, KINDS_BY_NAME["Namespace"], namespace("team", labels={ACK: "n1"}))
    assert plan.wait.check(cluster, {}) is True
    cluster.catalog.remove("Namespace", "", "team")
    with pytest.raises(PreBindError, match='namespace "team" not found'):
        plan.wait.check(cluster, {})
