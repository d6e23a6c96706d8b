"""The benchmarks' audit of a run's bindings, written apart from the engine it checks.

Given the nodes and the bound pods as the API server holds them, count every broken rule: a node
over its allocatable (`tests/kubeemu/capacity.py`, its own quantity parser), not Ready, cordoned,
a NoSchedule/NoExecute taint not tolerated, a nodeSelector not matched, a required pod
anti-affinity broken in either direction, a DoNotSchedule spread constraint whose skew exceeds
maxSkew (on the final placement, over the domains of the nodes carrying the key), and a pod bound
twice (when the caller saw the bindings happen).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from tests.kubeemu.capacity import audit_capacity
from tests.kubeemu.selectors import selector_matches

Obj = dict[str, Any]
PROBLEMS = ("capacity", "not_ready", "cordoned", "taint", "selector", "anti_affinity", "spread", "double")


def _tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        if toleration.get("key") and toleration["key"] != taint["key"]:
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _required_anti(pod: Obj) -> list[Obj]:
    anti = ((pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {})
    return list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def audit(nodes: Iterable[Obj], pods: Iterable[Obj], bind_counts: Counter[str] | None = None) -> dict[str, int]:
    """Problem -> how many bindings break it (0 everywhere: a clean run)."""
    nodes = list(nodes)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    problems = dict.fromkeys(PROBLEMS, 0)
    problems["capacity"] = len(audit_capacity(nodes, bound))
    if bind_counts is not None:
        problems["double"] = sum(count - 1 for count in bind_counts.values() if count > 1)
    for pod in bound:
        node = by_name.get(pod["spec"]["nodeName"])
        if node is None:
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            problems["not_ready"] += 1
        if (node.get("spec") or {}).get("unschedulable"):
            problems["cordoned"] += 1
        tolerations = pod["spec"].get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint["effect"] in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
                problems["taint"] += 1
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
            problems["selector"] += 1
    problems["anti_affinity"] = _anti_affinity(bound, by_name)
    problems["spread"] = _spread(bound, nodes)
    return problems


def _anti_affinity(bound: list[Obj], by_name: dict[str, Obj]) -> int:
    """Pairs of pods in one topology domain where one's required anti-affinity term selects the other."""
    def label(pod: Obj, key: str) -> str | None:
        return ((by_name.get(pod["spec"]["nodeName"]) or {}).get("metadata", {}).get("labels") or {}).get(key)

    keys = {term.get("topologyKey") for pod in bound for term in _required_anti(pod)}
    in_domain: dict[tuple[str, str], list[Obj]] = defaultdict(list)  # (key, value) -> the pods there
    for key in keys:
        for pod in bound:
            value = label(pod, key)
            if value is not None:
                in_domain[(key, value)].append(pod)
    broken = 0
    for pod in bound:
        for term in _required_anti(pod):
            key = term.get("topologyKey")
            here = label(pod, key)
            if here is None:
                continue
            namespaces = set(term.get("namespaces") or [pod["metadata"].get("namespace", "default")])
            for other in in_domain[(key, here)]:
                if other is not pod and other["metadata"].get("namespace", "default") in namespaces and (
                    selector_matches(term.get("labelSelector") or {}, other["metadata"].get("labels"))
                ):
                    broken += 1
    return broken


def _spread(bound: list[Obj], nodes: list[Obj]) -> int:
    """DoNotSchedule constraints whose final skew over the eligible domains exceeds maxSkew."""
    checked: set[tuple[str, str, str]] = set()
    broken = 0
    for pod in bound:
        for constraint in pod["spec"].get("topologySpreadConstraints") or []:
            if constraint.get("whenUnsatisfiable") != "DoNotSchedule":
                continue
            key, selector = constraint["topologyKey"], constraint.get("labelSelector") or {}
            namespace = pod["metadata"].get("namespace", "default")
            ident = (namespace, key, repr(sorted(selector.items())))
            if ident in checked:
                continue
            checked.add(ident)
            counts: dict[str, int] = defaultdict(int)
            domain_of = {}
            for node in nodes:
                value = (node["metadata"].get("labels") or {}).get(key)
                if value is not None:
                    counts[value] += 0
                    domain_of[node["metadata"]["name"]] = value
            for other in bound:
                if other["metadata"].get("namespace", "default") == namespace and selector_matches(
                    selector, other["metadata"].get("labels")
                ):
                    domain = domain_of.get(other["spec"]["nodeName"])
                    if domain is not None:
                        counts[domain] += 1
            if counts and max(counts.values()) - min(counts.values()) > constraint["maxSkew"]:
                broken += 1
    return broken
