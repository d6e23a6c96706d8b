"""`placer simulate`: the engine on a cluster dump, no API server.

Reads what `kubectl get nodes,pods,ns,svc,rs,sts -A -o yaml` prints (plus NodeMetrics; every kind
of `placer.engine.kinds.KINDS`) and SchedulerProfile documents, then places every pending pod a
profile owns, in queue order, each placement counting against its node before the next pod is placed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from placer.engine.cluster import ClusterState
from placer.engine.gang import GroupDecision, Outcome, decide_group
from placer.engine.groups import GROUP_KINDS, GroupRef, group_of, pending_by_group
from placer.engine.kinds import KINDS_BY_NAME, document_kind, resolve_priority, upsert_object
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_node, parse_node_metrics, parse_pod, parse_timestamp
from placer.engine.profile import API_VERSION, KIND, Profile, ProfileError, compile_profile
from placer.engine.queue import queue_order
from placer.engine.runtime import Decision, Scheduler
from placer.plugins.dynamic_resources import DeviceReservation, release_pod, settle

__all__ = [
    "Claimant",
    "Documents",
    "InputError",
    "Simulation",
    "assign_owners",
    "cluster_from_documents",
    "compile_profile_documents",
    "device_line",
    "load_cluster",
    "load_profiles",
    "place",
    "prepare",
    "profiles_from_documents",
    "read_documents",
    "render_json",
    "render_table",
    "simulate",
    "simulate_documents",
]


# libyaml's loader when PyYAML was built with it: several times faster on large dumps
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(ValueError):
    """Invalid input: the message names the file, the document and the field."""


@dataclass
class Simulation:
    cluster: ClusterState
    pending: list[PodInfo]
    profiles: dict[str, Profile]  # by schedulerName
    decisions: list[Decision] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: pod key -> the group it belongs to and whether that group is placed (API.md §4's `group`)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)


# One input file and its documents: (number in the file, from 1; the document), `null` documents
# left out. `read_documents` yields them lazily, so that the `*_from_documents` functions report a
# file's errors in the order they occur; a caller that wants the YAML loading done (and timed) apart
# passes lists instead.
Documents = tuple[Path, Iterable[tuple[int, Any]]]


def read_documents(path: Path) -> Iterator[tuple[int, Any]]:
    """The documents of a YAML file, loaded lazily; InputError when it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: cannot read: not UTF-8 text (byte {error.start})") from None
    try:
        for number, document in enumerate(yaml.load_all(text, Loader=_LOADER), start=1):
            if document is not None:
                yield number, document
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"{path}: invalid YAML{where}: {getattr(error, 'problem', None) or error}") from None


def _objects(path: Path, documents: Iterable[tuple[int, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, object) for every object in a file, unpacking `List` documents."""
    for number, document in documents:
        where = f"{path}: document {number}"
        if not isinstance(document, Mapping):
            raise InputError(f"{where}: must be a Kubernetes object, not {type(document).__name__}")
        if str(document.get("kind", "")).endswith("List"):
            items = document.get("items")
            if not isinstance(items, list):
                raise InputError(f"{where}: items: must be a list")
            for index, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise InputError(f"{where}: items[{index}]: must be a Kubernetes object")
                yield f"{where}: items[{index}] ({item.get('kind', '?')})", item
        else:
            yield where, document


def _object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name")) if isinstance(meta, Mapping) and meta.get("name") else "?"


def load_cluster(paths: Sequence[Path]) -> tuple[ClusterState, list[PodInfo]]:
    """Nodes, bound pods and metrics into a ClusterState; every pod without a node in a list."""
    return cluster_from_documents([(path, read_documents(path)) for path in paths])


def cluster_from_documents(files: Iterable[Documents]) -> tuple[ClusterState, list[PodInfo]]:
    """`load_cluster` on documents already read (or read lazily) from their files."""
    cluster = ClusterState()
    unbound: list[PodInfo] = []
    seen: set[str] = set()
    for path, documents in files:
        for where, obj in _objects(path, documents):
            kind = obj.get("kind")
            try:
                if kind == "Node":
                    cluster.upsert_node(parse_node(obj))
                elif kind == "Pod":
                    pod = parse_pod(obj)
                    if pod.key in seen:
                        raise ObjectError("metadata.name", f'Duplicate value: pod "{pod.key}"')
                    seen.add(pod.key)
                    if pod.node_name:
                        cluster.add_pod(pod)
                    else:
                        unbound.append(pod)
                elif kind == "NodeMetrics":
                    cluster.set_node_metrics(*parse_node_metrics(obj))
                elif (catalog_kind := document_kind(obj)) is not None:
                    upsert_object(cluster.catalog, catalog_kind, obj)
                elif kind == "PodGroup":
                    versions = ", ".join(k.api_version for k in GROUP_KINDS)
                    given = obj.get("apiVersion")
                    raise ObjectError("apiVersion", f'Unsupported value: "{given}": expected {versions}')
                else:
                    names = ", ".join(KINDS_BY_NAME)
                    expected = f"expected Node, Pod, NodeMetrics, {names}, PodGroup or a List of them"
                    raise ObjectError("kind", f'Unsupported value: "{kind}": {expected}')
            except ObjectError as error:
                raise InputError(f"{where} {kind or ''} {_object_name(obj)!r}: {error}") from None
    # a pod naming a PriorityClass but no spec.priority gets it as the API server's admission would
    for pod in (*unbound, *(record.pod for record in cluster.pods.values())):
        resolve_priority(pod, cluster.catalog)
    return cluster, unbound


def load_profiles(paths: Sequence[Path]) -> tuple[dict[str, Profile], list[str]]:
    """Profiles by schedulerName, and conflict warnings: as in the operator, the older profile
    (creationTimestamp, then name) keeps a schedulerName that two profiles claim."""
    return profiles_from_documents([(path, read_documents(path)) for path in paths])


def profiles_from_documents(files: Sequence[Documents]) -> tuple[dict[str, Profile], list[str]]:
    """`load_profiles` on documents already read (or read lazily) from their files."""
    by_scheduler, warnings = assign_owners(compile_profile_documents(files))
    if not by_scheduler:
        raise InputError(f"{', '.join(str(path) for path, _ in files)}: no SchedulerProfile documents")
    return by_scheduler, warnings


# A compiled profile with what ownership is decided on: (creationTimestamp, name, profile).
Claimant = tuple[float, str, Profile]


def compile_profile_documents(files: Sequence[Documents], invalid: dict[str, str] | None = None) -> list[Claimant]:
    """Every SchedulerProfile document compiled. An invalid spec is an InputError, unless `invalid`
    collects its message by profile name instead (`placer explain`: on a live cluster a broken profile is the
    operator's to report, and claims nothing until it compiles, as there)."""
    names: set[str] = set()
    claimants: list[Claimant] = []
    for path, documents in files:
        for number, document in documents:
            where = f"{path}: document {number}"
            if not isinstance(document, Mapping):
                raise InputError(f"{where}: must be a SchedulerProfile, not {type(document).__name__}")
            if document.get("kind") != KIND or document.get("apiVersion") != API_VERSION:
                raise InputError(
                    f"{where}: kind/apiVersion: expected {KIND} {API_VERSION}, "
                    f"got {document.get('kind')!r} {document.get('apiVersion')!r}"
                )
            name = _object_name(document)
            if name == "?":
                raise InputError(f"{where}: metadata.name: Required value")
            if name in names:
                raise InputError(f'{where}: metadata.name: Duplicate value: profile "{name}"')
            names.add(name)
            try:
                profile = compile_profile(name, document.get("spec"))
            except ProfileError as error:
                if invalid is None:
                    raise InputError(f"{where}: {error}") from None
                invalid[name] = str(error)
                continue
            claimants.append((parse_timestamp(document["metadata"].get("creationTimestamp")), name, profile))
    return claimants


def assign_owners(claimants: Iterable[Claimant]) -> tuple[dict[str, Profile], list[str]]:
    """schedulerName -> the profile serving it, and a warning per profile left out: as the operator
    decides, the older (creationTimestamp, then name) keeps a schedulerName two profiles claim."""
    by_scheduler: dict[str, Profile] = {}
    warnings: list[str] = []
    for _, name, profile in sorted(claimants, key=lambda claimant: claimant[:2]):
        if profile.shadow:  # API.md §5: a Shadow profile owns no pods
            warnings.append(f'profile "{name}": mode Shadow (shadowOf "{profile.shadow_of}") owns no pods; ignored')
            continue
        holder = by_scheduler.get(profile.scheduler_name)
        if holder is not None:
            warnings.append(
                f'profile "{name}": Conflict: schedulerName "{profile.scheduler_name}" '
                f'is already served by profile "{holder.name}"; ignored'
            )
            continue
        by_scheduler[profile.scheduler_name] = profile
    return by_scheduler, warnings


def simulate(cluster_paths: Sequence[Path], profile_paths: Sequence[Path], top: int = 3) -> Simulation:
    return simulate_documents(
        [(path, read_documents(path)) for path in cluster_paths],
        [(path, read_documents(path)) for path in profile_paths],
        top=top,
    )


def simulate_documents(
    cluster_files: Sequence[Documents], profile_files: Sequence[Documents], top: int = 3
) -> Simulation:
    """`simulate` on documents already read (or read lazily, as `simulate` passes them)."""
    return place(prepare(cluster_files, profile_files), top=top)


def prepare(cluster_files: Sequence[Documents], profile_files: Sequence[Documents]) -> Simulation:
    """The cluster, the profiles and the pending pods in queue order; nothing placed yet."""
    cluster, unbound = cluster_from_documents(cluster_files)
    profiles, warnings = profiles_from_documents(profile_files)
    pending = sorted(
        (p for p in unbound if p.scheduler_name in profiles and not p.terminal and not p.deleting),
        key=queue_order,
    )
    simulation = Simulation(cluster, pending, profiles, warnings=warnings)
    for profile in profiles.values():
        simulation.warnings.extend(f'profile "{profile.name}": {w}' for w in profile.warnings(cluster))
    return simulation


def place(simulation: Simulation, top: int = 3) -> Simulation:
    """Place the pending pods in order, each counting against its node before the next."""
    cluster, profiles = simulation.cluster, simulation.profiles
    scheduler = Scheduler()
    groups = pending_by_group(simulation.pending)
    for pod in simulation.pending:
        if pod.key in simulation.groups:
            continue  # decided with its group
        profile = profiles[pod.scheduler_name]
        ref = group_of(pod)
        if ref is not None:
            _place_group(simulation, scheduler, profile, ref, groups[ref], top)
            continue
        decision = scheduler.schedule(pod, profile, cluster, top=top)
        if decision.preemption is not None:
            # the victims are gone at once here (the operator evicts them and waits), and the pod
            # takes the room they leave on its nominated node
            _evict(cluster, decision.preemption.victims)
            decision.node = decision.preemption.node
        if decision.node is not None:
            scheduler.assume(pod, decision, profile, cluster)
            _settle(cluster, decision)
        simulation.decisions.append(decision)
    return simulation


def _evict(cluster: ClusterState, victims: Iterable[PodInfo]) -> None:
    for victim in victims:
        cluster.remove_pod(victim.key)
        release_pod(cluster, victim)  # a claim it alone held is deallocated (its devices free)


def _settle(cluster: ClusterState, decision: Decision) -> None:
    devices = decision.reservations.get("DynamicResources")
    if isinstance(devices, DeviceReservation):
        settle(cluster, devices)  # its claims allocated and reserved, as PreBind leaves them


def _place_group(
    simulation: Simulation, scheduler: Scheduler, profile: Profile, ref: GroupRef, pods: list[PodInfo], top: int
) -> None:
    """A group's pending pods decided together (placer.engine.gang), at the place of its first pod
    in the queue: a gang placed whole or not at all, a preempting gang's victims evicted at once."""
    cluster = simulation.cluster
    outcome = decide_group(scheduler, profile, cluster, ref, pods, top=top)
    if outcome.outcome is Outcome.PREEMPTING:
        _evict(cluster, outcome.victims)
    placed = outcome.now_placed or outcome.outcome is Outcome.PREEMPTING
    for pod, decision in zip(outcome.pods, outcome.decisions, strict=True):
        if decision.node is not None:
            if outcome.outcome is Outcome.PREEMPTING:
                scheduler.assume(pod, decision, profile, cluster)
            _settle(cluster, decision)
        simulation.groups[pod.key] = _group_view(ref, outcome, placed)
        simulation.decisions.append(decision)


def _group_view(ref: GroupRef, outcome: GroupDecision, placed: bool) -> dict[str, Any]:
    """A member's `group` (API.md §4): name and placed, and for a group with a topology key the
    key, the domain chosen (`placement`, null: none) and every placement tried (docs/cli.md), as
    `placer explain` gives them."""
    view: dict[str, Any] = {"name": ref.key, "placed": placed}
    key = outcome.group.topology_key if outcome.group is not None else ""
    if key:
        view.update(topologyKey=key, placement=outcome.placement,
                    placements=[t.as_json(misses=False) for t in outcome.placements])
    return view


def _summary(decisions: Sequence[Decision]) -> dict[str, int]:
    scheduled = sum(1 for d in decisions if d.node is not None)
    return {"pods": len(decisions), "scheduled": scheduled, "unschedulable": len(decisions) - scheduled}


def _preemption(decision: Decision) -> dict[str, Any] | None:
    """API.md §4: the nominated node and the victims evicted for the pod; null without preemption."""
    preemption = decision.preemption
    if preemption is None:
        return None
    return {"node": preemption.node, "victims": [victim.key for victim in preemption.victims]}


def _volumes(decision: Decision) -> list[dict[str, Any]]:
    """The claims a placement binds (API.md §4), empty when it binds none."""
    bindings = decision.reservations.get("VolumeBinding")
    return [] if bindings is None else bindings.as_json()


def _devices(decision: Decision) -> list[dict[str, Any]]:
    """The devices a placement allocates to its claims (API.md §4), empty when none."""
    devices = decision.reservations.get("DynamicResources")
    return devices.as_json() if isinstance(devices, DeviceReservation) else []


def placement(d: Decision, group: dict[str, Any] | None = None) -> dict[str, Any]:
    """One placement of API.md §4's JSON, keys in the contract's order; a group member's carries
    `group` too (`Simulation.groups`)."""
    result = {
        "pod": d.pod,
        "profile": d.profile,
        "node": d.node,
        "message": d.message,
        "scores": [s.as_dict() for s in d.top],
        "volumes": _volumes(d),
        "devices": _devices(d),
        "preemption": _preemption(d),
    }
    if group is not None:
        result["group"] = dict(group)
    return result


def summary(simulation: Simulation) -> dict[str, int]:
    return _summary(simulation.decisions)


def render_json(simulation: Simulation, out: TextIO) -> None:
    """API.md §4: `{"placements": [...], "summary": {...}}`, one placement a line.

    Each placement goes through json's C encoder (`json.dumps` without indent; `json.dump` with an
    indent runs the pure-Python encoder and writes every token apart), and the text is written at once.
    """
    encode = json.dumps
    lines = [encode(placement(d, simulation.groups.get(d.pod))) for d in simulation.decisions]
    placements = "[\n    " + ",\n    ".join(lines) + "\n  ]" if lines else "[]"
    out.write(f'{{\n  "placements": {placements},\n  "summary": {encode(_summary(simulation.decisions))}\n}}\n')


def render_table(simulation: Simulation, out: TextIO) -> None:
    rows = [("POD", "PROFILE", "NODE", "SCORE", "REASON")]
    for d in simulation.decisions:
        if d.preemption is not None:
            victims = ", ".join(victim.key for victim in d.preemption.victims)
            reason = f"preempts {victims}" if victims else "fits once its gang's victims are gone"
            rows.append((d.pod, d.profile, d.node or "", "-", reason))
        elif d.node is not None and not d.top:  # --top 0: no scores kept
            rows.append((d.pod, d.profile, d.node, "-", ""))
        elif d.node is not None:
            best = d.top[0]
            leaders = sorted(best.plugins.items(), key=lambda item: -item[1])[:2]
            reason = ", ".join(f"{name} {score}" for name, score in leaders)
            rows.append((d.pod, d.profile, d.node, str(best.total), reason))
        else:
            rows.append((d.pod, d.profile, "unschedulable", "-", d.message or ""))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[4] + "\n")
    summary = _summary(simulation.decisions)
    out.write(
        f"\n{summary['pods']} pods: {summary['scheduled']} scheduled, "
        f"{summary['unschedulable']} unschedulable\n"
    )
    groups: dict[str, str] = {}
    for group in simulation.groups.values():
        groups.setdefault(group["name"], group_line(group))
    if groups:
        out.write("groups: " + ", ".join(groups.values()) + "\n")
    shown = [(d.pod, device) for d in simulation.decisions for device in _devices(d)
             if "shareID" in device or "bindingConditions" in device]
    if shown:  # shares of a device (its capacity used and left then), devices to be prepared
        out.write("devices shared or to be prepared:\n")
        for pod, device in shown:
            out.write(f"  {pod}: {device_line(device)}\n")


def device_line(device: Mapping[str, Any]) -> str:
    """One allocated device as explain and simulate print it: the claim's request and the device, a
    share's consumed capacity and what the device has left, where its binding conditions stand."""
    line = f"{device['claim']} {device['request']}: {device['driver']}/{device['pool']}/{device['device']}"
    consumed = device.get("consumedCapacity")
    if consumed:
        usage = device.get("capacity") or {}
        shares = []
        for name, amount in consumed.items():
            left = usage.get(name)
            shares.append(f"{amount} {name}" + (f" ({left['used']} used, {left['left']} left)" if left else ""))
        line += ", share of " + ", ".join(shares)
    elif "shareID" in device:
        line += ", a share"
    binding = device.get("binding")
    if binding is not None:
        if binding["failed"]:
            line += f", binding failed: {', '.join(binding['failed'])}"
        elif binding["ready"]:
            line += ", binding conditions met"
        else:
            since = f" since {binding['since']}" if binding.get("since") else ""
            until = " (timed out)" if binding.get("timedOut") else (
                f" (times out at {binding['timeout']})" if binding.get("timeout") else "")
            line += f", waiting for binding conditions {', '.join(binding['pending'])}{since}{until}"
    elif device.get("bindingConditions"):
        line += f", binding conditions {', '.join(device['bindingConditions'])}"
    return line


def group_line(group: dict[str, Any]) -> str:
    """`NS/NAME placed`, and for a group with a topology key its domain and each placement tried
    (`pods that fit/pods tried`): `ml/train placed in rack=rack-b (tried rack-a 4/5, rack-b 5/5)`."""
    line = f"{group['name']} {'placed' if group['placed'] else 'not placed'}"
    key = group.get("topologyKey")
    if not key:
        return line
    if group["placement"] is not None:
        line += f" in {key}={group['placement']}"
    tried = [f"{t['domain']} {t['placed']}/{t['pods']}" for t in group["placements"]]
    return line + (f" (tried {', '.join(tried)})" if tried else " (no placement tried)")
