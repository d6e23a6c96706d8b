"""PriorityClasses and PodDisruptionBudgets as the catalog reads them: `parse_priority_class`,
`resolve_priority` (what the API server's Priority admission does for a pod without
`spec.priority`) and `parse_pdb` (what kube-scheduler's preemption reads of a budget)."""

from __future__ import annotations

from typing import Any

import pytest
from placer.engine.catalog import Catalog
from placer.engine.kinds import (
    KINDS_BY_NAME,
    DisruptionBudget,
    PriorityClassInfo,
    parse_pdb,
    parse_priority_class,
    resolve_priority,
    upsert_object,
)
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_pod
from placer.testing import pod

Obj = dict[str, Any]


def priority_class(name: str, value: Any, *, global_default: bool | None = None, policy: str | None = None) -> Obj:
    obj: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value}
    if global_default is not None:
        obj["globalDefault"] = global_default
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def budget(name: str = "web", *, namespace: str | None = "shop", selector: Any = None, status: Obj | None = None,
           drop_selector: bool = False) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    spec: Obj = {"minAvailable": 1}
    if not drop_selector:
        spec["selector"] = {"matchLabels": {"app": "web"}} if selector is None else selector
    obj: Obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def catalog_of(*objects: Obj) -> Catalog:
    catalog = Catalog()
    for obj in objects:
        assert upsert_object(catalog, KINDS_BY_NAME[obj["kind"]], obj)
    return catalog


def resolved(pod_obj: Obj, *objects: Obj) -> PodInfo:
    info = parse_pod(pod_obj)
    resolve_priority(info, catalog_of(*objects))
    return info


def with_spec(obj: Obj, **fields: Any) -> Obj:
    obj["spec"].update(fields)
    return obj


# ----------------------------------------------------------------------------- PriorityClass


def test_priority_class_fields() -> None:
    assert parse_priority_class(priority_class("urgent", 1000, global_default=True, policy="Never")) == (
        PriorityClassInfo("urgent", 1000, True, "Never")
    )
    # kube's defaults: not the global default, PreemptLowerPriority
    assert parse_priority_class(priority_class("batch", -5)) == PriorityClassInfo("batch", -5, False,
                                                                                   "PreemptLowerPriority")


@pytest.mark.parametrize("value", [None, "100", 1.5, True])
def test_priority_class_value_must_be_an_integer(value: Any) -> None:
    obj = priority_class("bad", value)
    if value is None:
        del obj["value"]
    with pytest.raises(ObjectError) as error:
        parse_priority_class(obj)
    assert error.value.path == "value"


def test_priority_class_is_cluster_scoped() -> None:
    catalog = catalog_of({**priority_class("urgent", 1000), "metadata": {"name": "urgent", "namespace": "x"}})
    assert catalog.get("PriorityClass", "urgent") == PriorityClassInfo("urgent", 1000)


# ----------------------------------------------------------------------------- resolve_priority


def test_spec_priority_wins_over_every_class() -> None:
    info = resolved(with_spec(pod("p", priority=7), priorityClassName="urgent"),
                    priority_class("urgent", 1000, policy="Never"), priority_class("default", 50, global_default=True))
    assert (info.priority, info.preemption_policy, info.error) == (7, "", None)
    # an explicit 0 is a priority too
    info = resolved(pod("p", priority=0), priority_class("default", 50, global_default=True))
    assert info.priority == 0


def test_the_named_class_gives_value_and_policy() -> None:
    info = resolved(with_spec(pod("p"), priorityClassName="batch"),
                    priority_class("batch", 10, policy="Never"), priority_class("default", 50, global_default=True))
    assert (info.priority, info.preemption_policy, info.error) == (10, "Never", None)
    info = resolved(with_spec(pod("p"), priorityClassName="urgent"), priority_class("urgent", 1000))
    assert (info.priority, info.preemption_policy) == (1000, "PreemptLowerPriority")


def test_the_pods_own_policy_is_kept() -> None:
    info = resolved(with_spec(pod("p"), priorityClassName="batch", preemptionPolicy="PreemptLowerPriority"),
                    priority_class("batch", 10, policy="Never"))
    assert (info.priority, info.preemption_policy) == (10, "PreemptLowerPriority")


def test_a_missing_class_is_the_pods_error() -> None:
    info = resolved(with_spec(pod("p"), priorityClassName="gone"), priority_class("default", 50, global_default=True))
    assert info.error == "invalid pod default/p: no PriorityClass with name gone was found"
    assert info.priority == 0


def test_the_global_default_and_the_lowest_of_several() -> None:
    """kube's admission: with more than one globalDefault class (a race), the lowest value."""
    assert resolved(pod("p"), priority_class("default", 50, global_default=True),
                    priority_class("urgent", 1000)).priority == 50
    info = resolved(pod("p"), priority_class("high-default", 500, global_default=True),
                    priority_class("low-default", 20, global_default=True, policy="Never"),
                    priority_class("negative", -10, global_default=False))
    assert (info.priority, info.preemption_policy) == (20, "Never")


def test_no_class_at_all_is_zero() -> None:
    info = resolved(pod("p"), priority_class("urgent", 1000), priority_class("off", 5, global_default=False))
    assert (info.priority, info.preemption_policy, info.error) == (0, "", None)


def test_an_invalid_pod_is_left_alone() -> None:
    info = resolved(with_spec(pod("p"), priorityClassName="batch", priority="high"), priority_class("batch", 10))
    assert info.error is not None and "spec.priority" in info.error
    assert info.priority == 0


# ----------------------------------------------------------------------------- PodDisruptionBudget


def test_budget_fields() -> None:
    value = parse_pdb(budget(status={"disruptionsAllowed": 2, "disruptedPods": {"web-1": "2025-01-01T00:00:00Z"},
                                     "currentHealthy": 3}))
    assert isinstance(value, DisruptionBudget)
    assert (value.namespace, value.name, value.disruptions_allowed, value.disrupted_pods) == (
        "shop", "web", 2, frozenset({"web-1"}))
    assert value.selector.matches({"app": "web", "tier": "x"})
    assert not value.selector.matches({"app": "db"})


def test_budget_defaults() -> None:
    value = parse_pdb(budget(namespace=None))
    assert (value.namespace, value.disruptions_allowed, value.disrupted_pods) == ("default", 0, frozenset())


def test_budget_selectors_nil_and_empty() -> None:
    """Preemption skips both: a nil selector matches nothing, and kube-scheduler treats an empty one
    (which policy/v1 reads as every pod) as matching nothing too."""
    nil = parse_pdb(budget(drop_selector=True)).selector
    assert nil.nothing and not nil.matches({"app": "web"})
    empty = parse_pdb(budget(selector={})).selector
    assert empty.empty
    expressions = parse_pdb(budget(selector={"matchExpressions": [{"key": "app", "operator": "In",
                                                                     "values": ["web", "api"]}]})).selector
    assert expressions.matches({"app": "api"}) and not expressions.matches({"app": "db"})


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (budget(status={"disruptionsAllowed": "1"}), "status.disruptionsAllowed"),
        (budget(status={"disruptionsAllowed": True}), "status.disruptionsAllowed"),
        (budget(selector={"matchExpressions": [{"key": "app", "operator": "Near"}]}),
         "spec.selector.matchExpressions[0].operator"),
        (budget(selector={"matchLabels": ["app"]}), "spec.selector.matchLabels"),
        (budget(name=""), "metadata.name"),
    ],
)
def test_invalid_budgets(obj: Obj, path: str) -> None:
    with pytest.raises(ObjectError) as error:
        parse_pdb(obj)
    assert error.value.path == path


def test_budgets_are_filed_by_namespace() -> None:
    catalog = catalog_of(budget("web", namespace="shop"), budget("web", namespace="blog"))
    assert sorted(ns for ns, _, _ in catalog.items("PodDisruptionBudget")) == ["blog", "shop"]
    # disruptedPods as written by the eviction API is a map; anything else is read as none
    assert parse_pdb(budget(status={"disruptedPods": ["web-1"]})).disrupted_pods == frozenset()
