"""The benchmarks' audit of a run's bindings, written apart from the engine it checks.

Given the nodes and the bound pods as the API server holds them, count every broken rule: a node
over its allocatable (the pods' requests as kube-scheduler v1.36 counts them — `pod_requests`
below, on the emulator's own quantity parser), not Ready, cordoned, a NoSchedule/NoExecute taint
not tolerated, a nodeSelector not matched, a required pod anti-affinity broken in either
direction, a DoNotSchedule spread constraint whose skew exceeds maxSkew (on the final placement,
over the domains of the nodes carrying the key), and a pod bound twice (when the caller saw the
bindings happen).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from tests.kubeemu.capacity import TERMINAL_PHASES, parse_quantity
from tests.kubeemu.selectors import selector_matches

Obj = dict[str, Any]
Amounts = dict[str, Fraction]
PROBLEMS = ("capacity", "not_ready", "cordoned", "taint", "selector", "anti_affinity", "spread", "double")


def _counted(name: str) -> bool:
    """The resources kube-scheduler's NodeInfo keeps: the base four, huge pages, extended ones."""
    return name in ("cpu", "memory", "ephemeral-storage", "pods") or name.startswith("hugepages-") or "/" in name


def _amounts(raw: Any) -> Amounts:
    return {k: parse_quantity(v) for k, v in (raw or {}).items() if _counted(k)}


def _pod_level(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _largest(*lists: Amounts) -> Amounts:
    result: Amounts = {}
    for amounts in lists:
        for key, value in amounts.items():
            if key not in result or value > result[key]:
                result[key] = value
    return result


def _sum_into(total: Amounts, more: Amounts) -> None:
    for key, value in more.items():
        total[key] = total.get(key, Fraction(0)) + value


def pod_requests(pod: Obj) -> Amounts:
    """What a bound pod holds on its node in kube-scheduler v1.36 (component-helpers PodRequests with
    UseStatusResources, as NodeInfo counts it), written from the KEPs rather than from Placer:
    containers and sidecars add up, an init container needs itself plus the sidecars before it;
    while a resize is under way a container holds the largest of its spec, status.resources and
    allocatedResources (an Infeasible one: of the last two); pod-level requests (spec.resources,
    requests defaulted from limits as the API server does) replace the containers' total for cpu,
    memory and huge pages; overhead on top; one pod."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    infeasible = next((c.get("reason") == "Infeasible" for c in status.get("conditions") or []
                       if c.get("type") == "PodResizePending"), False)
    running = {s.get("name"): s for s in [*(status.get("containerStatuses") or []),
                                           *(status.get("initContainerStatuses") or [])]
               if s.get("resources") is not None}

    def requests(container: Obj, use_status: bool) -> Amounts:
        resources = container.get("resources") or {}
        wanted = {**_amounts(resources.get("limits")), **_amounts(resources.get("requests"))}
        seen = running.get(container.get("name")) if use_status else None
        if seen is None:
            return wanted
        actual = (_amounts((seen.get("resources") or {}).get("requests")), _amounts(seen.get("allocatedResources")))
        return _largest(*actual) if infeasible else _largest(wanted, *actual)

    total: Amounts = {}
    for container in spec.get("containers") or []:
        _sum_into(total, requests(container, True))
    sidecars: Amounts = {}
    peak: Amounts = {}
    for container in spec.get("initContainers") or []:
        sidecar = container.get("restartPolicy") == "Always"
        own = requests(container, sidecar)
        if sidecar:
            _sum_into(total, own)
            _sum_into(sidecars, own)
            peak = _largest(peak, sidecars)
        else:
            step = dict(own)
            _sum_into(step, sidecars)
            peak = _largest(peak, step)
    total = _largest(total, peak)
    level = spec.get("resources") or {}
    level_requests = _amounts(level.get("requests"))
    for key, value in _amounts(level.get("limits")).items():
        if _pod_level(key) and key not in level_requests:
            # the API server's defaultPodRequests: the containers' total for cpu and memory they ask
            level_requests[key] = total[key] if key in ("cpu", "memory") and key in total else value
    level_requests = {k: v for k, v in level_requests.items() if _pod_level(k)}
    if level_requests and status.get("resources") is not None:
        actual = (_amounts(status["resources"].get("requests")), _amounts(status.get("allocatedResources")))
        effective = _largest(*actual) if infeasible else _largest(level_requests, *actual)
        level_requests = {k: effective.get(k, Fraction(0)) for k in level_requests}
    total.update(level_requests)
    _sum_into(total, _amounts(spec.get("overhead")))
    total["pods"] = Fraction(1)
    return total


def _capacity(nodes: list[Obj], bound: list[Obj]) -> int:
    """(node, resource) pairs whose non-terminal pods hold more than the node's allocatable."""
    used: dict[str, Amounts] = defaultdict(dict)
    for pod in bound:
        if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
            _sum_into(used[pod["spec"]["nodeName"]], pod_requests(pod))
    allocatable = {}
    for node in nodes:
        status = node.get("status") or {}
        allocatable[node["metadata"]["name"]] = _amounts(status.get("allocatable") or status.get("capacity"))
    return sum(1 for name, amounts in used.items() for key, value in amounts.items()
               if value > allocatable.get(name, {}).get(key, Fraction(0)))


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
    problems["capacity"] = _capacity(nodes, bound)
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
