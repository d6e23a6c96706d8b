"""The benchmarks' audit of a run's bindings, written apart from the engine it checks.

Given the nodes and the bound pods as the API server holds them, count every broken rule: a node
over its allocatable (the pods' requests as kube-scheduler v1.36 counts them — `pod_requests`
below, on the emulator's own quantity parser), not Ready, cordoned, a NoSchedule/NoExecute taint
not tolerated, a nodeSelector not matched, a required node affinity not matched (`node_affinity`,
matchFields included), a pod bound with scheduling gates (`gated`), a required pod anti-affinity
broken in either direction, a required pod affinity with no matching pod in the pod's domain
(`affinity`; the first pod of a group, which matches its own term, may stand alone: kube's rule),
a DoNotSchedule spread constraint whose skew exceeds maxSkew (on the final placement, over the
domains of the nodes carrying the key: exact when every pod of a group may go to the same nodes, as
in synthetic.py's `spread` workload), and a pod bound twice (when the caller saw the bindings
happen). Terms with a namespaceSelector are checked when the namespaces' labels are given. Given
the ResourceClaims and ResourceSlices too (Dynamic Resource Allocation), also a device allocated
to two claims (`device_double`), a shareable device (consumable capacity) whose claims consume more
than it has (`device_capacity`), and a bound pod whose claim is missing, unallocated, not reserved
for it, or holding a device (or an allocation.nodeSelector) that is not on the pod's node (`claim`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from tests.kubeemu.capacity import TERMINAL_PHASES, parse_quantity
from tests.kubeemu.selectors import selector_matches

Obj = dict[str, Any]
Amounts = dict[str, Fraction]
PROBLEMS = ("capacity", "not_ready", "cordoned", "taint", "selector", "node_affinity", "gated", "anti_affinity",
            "affinity", "spread", "double")
DEVICE_PROBLEMS = ("device_double", "device_capacity", "claim")  # only when audit() is given the claims


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


def audit(nodes: Iterable[Obj], pods: Iterable[Obj], bind_counts: Counter[str] | None = None,
          claims: Iterable[Obj] | None = None, slices: Iterable[Obj] = (),
          namespaces: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, int]:
    """Problem -> how many bindings break it (0 everywhere: a clean run). `claims` (ResourceClaims)
    and `slices` (ResourceSlices) add DEVICE_PROBLEMS; `namespaces` (name -> labels) lets terms
    with a namespaceSelector be checked."""
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
        required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if required and not _node_selector_matches(required, node):
            problems["node_affinity"] += 1
        if pod["spec"].get("schedulingGates"):
            problems["gated"] += 1
    problems["anti_affinity"] = _anti_affinity(bound, by_name, namespaces)
    problems["affinity"] = _affinity(bound, by_name, namespaces)
    problems["spread"] = _spread(bound, nodes)
    if claims is not None:
        problems["device_double"], problems["device_capacity"], problems["claim"] = _devices(
            bound, by_name, list(claims), list(slices))
    return problems


def _term_namespaces(term: Obj, pod: Obj, namespaces: Mapping[str, Mapping[str, str]] | None) -> set[str] | None:
    """The namespaces a pod (anti-)affinity term looks in: its list and those its namespaceSelector
    selects (an empty selector: all of them), else the pod's own; None when a selector needs the
    namespaces' labels and they were not given (the term is then not checked)."""
    named = set(term.get("namespaces") or [])
    selector = term.get("namespaceSelector")
    if selector is None:
        return named or {pod["metadata"].get("namespace", "default")}
    if namespaces is None:
        return None
    return named | {name for name, labels in namespaces.items() if selector_matches(selector, labels)}


def _node_selector_matches(selector: Obj, node: Obj) -> bool:
    """A core/v1 NodeSelector: any term, each term all its matchExpressions (labels) and matchFields
    (metadata.name)."""
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}

    def holds(requirement: Obj, values: dict[str, str]) -> bool:
        key, operator, wanted = requirement["key"], requirement["operator"], requirement.get("values") or []
        if operator == "In":
            return key in values and values[key] in wanted
        if operator == "NotIn":
            return values.get(key) not in wanted
        if operator == "Exists":
            return key in values
        if operator == "DoesNotExist":
            return key not in values
        if operator in ("Gt", "Lt") and key in values and wanted:
            try:
                have, bound = int(values[key]), int(wanted[0])
            except ValueError:
                return False
            return have > bound if operator == "Gt" else have < bound
        return False

    return any(all(holds(r, labels) for r in term.get("matchExpressions") or [])
               and all(holds(r, fields) for r in term.get("matchFields") or [])
               for term in selector.get("nodeSelectorTerms") or [])


def _devices(bound: list[Obj], by_name: dict[str, Obj], claims: list[Obj],
             slices: list[Obj]) -> tuple[int, int, int]:
    """(devices allocated to more than one claim — each extra claim counts —, shareable devices whose
    claims' consumedCapacity exceeds a capacity of theirs, bound pods whose claims are not all
    allocated on their node and reserved for them). A device is known by (driver, pool, device) from
    the slices of its pool's newest generation; admin-access and shared (shareID) results may
    legitimately repeat and are not counted as doubles."""
    newest: dict[tuple[str, str], int] = {}
    for piece in slices:
        pool = piece["spec"]["pool"]
        key = (piece["spec"]["driver"], pool["name"])
        newest[key] = max(newest.get(key, 0), int(pool.get("generation", 0)))
    where: dict[tuple[str, str, str], Obj] = {}  # device -> its slice's spec
    for piece in slices:
        spec = piece["spec"]
        if int(spec["pool"].get("generation", 0)) != newest[(spec["driver"], spec["pool"]["name"])]:
            continue
        for device in spec.get("devices") or []:
            where[(spec["driver"], spec["pool"]["name"], device["name"])] = spec

    def results(claim: Obj) -> list[Obj]:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        return list((allocation.get("devices") or {}).get("results") or [])

    held: Counter[tuple[str, str, str]] = Counter()
    consumed: dict[tuple[str, str, str], Amounts] = defaultdict(dict)
    for claim in claims:
        for result in results(claim):
            device = (result["driver"], result["pool"], result["device"])
            if not result.get("adminAccess") and not result.get("shareID"):
                held[device] += 1
            _sum_into(consumed[device],
                      {k: parse_quantity(v) for k, v in (result.get("consumedCapacity") or {}).items()})
    doubles = sum(count - 1 for count in held.values() if count > 1)
    over = 0
    for device, amounts in consumed.items():
        spec = where.get(device)
        published = next((d for d in (spec or {}).get("devices") or [] if d.get("name") == device[2]), {})
        capacity = {k: parse_quantity((v or {}).get("value", 0)) for k, v in (published.get("capacity") or {}).items()}
        if any(value > capacity.get(key, Fraction(0)) for key, value in amounts.items()):
            over += 1

    by_claim = {(c["metadata"].get("namespace", "default"), c["metadata"]["name"]): c for c in claims}

    def on_node(spec: Obj | None, node: Obj) -> bool:
        if spec is None:
            return False  # a device no slice publishes
        if spec.get("nodeName"):
            return spec["nodeName"] == node["metadata"]["name"]
        if spec.get("nodeSelector"):
            return _node_selector_matches(spec["nodeSelector"], node)
        return bool(spec.get("allNodes"))

    broken = 0
    for pod in bound:
        node = by_name.get(pod["spec"]["nodeName"])
        # a claim made from a template is named in the pod's status (no name there: none was needed)
        generated = {s.get("name"): s.get("resourceClaimName")
                     for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        wanted = [ref.get("resourceClaimName") or generated.get(ref.get("name"))
                  for ref in pod["spec"].get("resourceClaims") or []
                  if ref.get("resourceClaimName") or generated.get(ref.get("name"), "") is not None]
        if node is None or not wanted:
            continue
        namespace = pod["metadata"].get("namespace", "default")
        uid = pod["metadata"].get("uid")
        for name in wanted:
            claim = by_claim.get((namespace, name)) if name else None
            status = (claim or {}).get("status") or {}
            allocation = status.get("allocation") or {}
            fine = (
                claim is not None
                and bool(results(claim))
                and all(on_node(where.get((r["driver"], r["pool"], r["device"])), node) for r in results(claim))
                and (not allocation.get("nodeSelector") or _node_selector_matches(allocation["nodeSelector"], node))
                and any(ref.get("uid") == uid for ref in status.get("reservedFor") or [])
            )
            if not fine:
                broken += 1
                break
    return doubles, over, broken


def _anti_affinity(bound: list[Obj], by_name: dict[str, Obj],
                   namespaces: Mapping[str, Mapping[str, str]] | None = None) -> int:
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
            looked_in = _term_namespaces(term, pod, namespaces)
            if looked_in is None:
                continue
            for other in in_domain[(key, here)]:
                if other is not pod and other["metadata"].get("namespace", "default") in looked_in and (
                    selector_matches(term.get("labelSelector") or {}, other["metadata"].get("labels"))
                ):
                    broken += 1
    return broken


def _required_affinity(pod: Obj) -> list[Obj]:
    affinity = ((pod["spec"].get("affinity") or {}).get("podAffinity") or {})
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _affinity(bound: list[Obj], by_name: dict[str, Obj],
              namespaces: Mapping[str, Mapping[str, str]] | None = None) -> int:
    """Bound pods with a required pod-affinity term that no other pod in their topology domain
    matches, unless no other bound pod matches it anywhere and the pod matches it itself (the first
    pod of a group: kube lets it go anywhere). Each distinct term's matching pods are counted per
    domain once."""
    def label(pod: Obj, key: str) -> str | None:
        return ((by_name.get(pod["spec"]["nodeName"]) or {}).get("metadata", {}).get("labels") or {}).get(key)

    counted: dict[tuple[str, str, str], tuple[Counter[str | None], set[int]]] = {}
    broken = 0
    for pod in bound:
        for term in _required_affinity(pod):
            key = term.get("topologyKey") or ""
            looked_in = _term_namespaces(term, pod, namespaces)
            if looked_in is None:
                continue
            ident = (repr(sorted((term.get("labelSelector") or {}).items())), repr(sorted(looked_in)), key)
            if ident not in counted:
                matching = [o for o in bound if o["metadata"].get("namespace", "default") in looked_in
                            and selector_matches(term.get("labelSelector") or {}, o["metadata"].get("labels"))]
                counted[ident] = (Counter(label(o, key) for o in matching), {id(o) for o in matching})
            per_domain, members = counted[ident]
            itself = 1 if id(pod) in members else 0
            here = label(pod, key)
            if here is not None and per_domain[here] - itself > 0:
                continue
            if itself and len(members) == 1 and here is not None:
                continue
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
