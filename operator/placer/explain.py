"""`placer explain`: why a pod of a live cluster is pending, or why it is where it is (API.md §5).

Read-only, with the user's kubeconfig: GETs and LISTs of what `placer simulate --cluster` accepts
(nodes, pods, every kind of `placer.engine.kinds.KINDS`, NodeMetrics when the profile uses
NodeUtilization) and of the SchedulerProfiles. The listed objects go to the engine exactly as
simulate reads a dump (`cluster_from_documents`, `compile_profile_documents`, `assign_owners`), so
explain and simulate can never disagree about the same cluster; `placer.engine.explain` does the rest.

`--shadow PROFILE` prints what a shadow profile recorded in its `status.shadow` instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from placer.controller.profiles.registry import uses_node_utilization
from placer.controller.transport import ApiError, ConfigError, KubeClient
from placer.engine.cluster import ClusterState
from placer.engine.explain import Explanation, explain
from placer.engine.gang import Outcome, decide_group
from placer.engine.groups import GROUP_KINDS, group_of, lookup, scheduled_members
from placer.engine.kinds import KINDS, resolve_priority
from placer.engine.objects import ObjectError, PodInfo
from placer.engine.parsing import parse_pod
from placer.engine.profile import API_VERSION, KIND, Profile
from placer.engine.runtime import Scheduler
from placer.plugins.dynamic_resources import claimed_devices
from placer.simulate import (
    Documents,
    InputError,
    assign_owners,
    cluster_from_documents,
    compile_profile_documents,
    device_line,
)

__all__ = [
    "REJECTED_LIMIT",
    "ExplainError",
    "ExplainOptions",
    "Inputs",
    "ReadOnlyKube",
    "choose_profile",
    "explanation_json",
    "gather",
    "group_view",
    "render_explanation",
    "render_shadow",
    "run_explain",
    "shadow_report",
]

PROFILES_PATH = f"/apis/{API_VERSION}/schedulerprofiles"
DEFAULT_KUBECONFIG = Path("~/.kube/config").expanduser()
METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"
# as the operator lists them: terminal pods hold nothing on their nodes
ACTIVE_PODS = (("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed"),)
#: rejected nodes listed without --all-nodes (the first by name)
REJECTED_LIMIT = 20
SHADOW_COUNTS = ("decisions", "same", "equal", "different", "unschedulable")


class ExplainError(Exception):
    """Input explain cannot use (exit 2): no such pod or profile, a kubeconfig that does not load."""


class ReadOnlyKube:
    """The only calls explain makes, all GETs, through the operator's client (its TLS, auth and
    retries): nothing here can write to the cluster."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> ReadOnlyKube:
        """A client from the kubeconfig as `placer run` loads it (`load_configuration`)."""
        named = kubeconfig or os.environ.get("KUBECONFIG")
        source = named or "the in-cluster config or ~/.kube/config"
        if named and not any(Path(path).is_file() for path in named.split(os.pathsep) if path):
            raise ExplainError(f"cannot load the kubeconfig ({source}): no such file")
        if not named and not os.environ.get("KUBERNETES_SERVICE_HOST") and not DEFAULT_KUBECONFIG.is_file():
            raise ExplainError(f"no kubeconfig: {DEFAULT_KUBECONFIG} does not exist (--kubeconfig or $KUBECONFIG)")
        try:
            return cls(await KubeClient.connect(kubeconfig, pool_size=16, retries=2, timeout=60.0))
        except (ConfigError, OSError, ValueError, KeyError, TypeError) as error:
            raise ExplainError(f"cannot load the kubeconfig ({source}): {error}") from None

    async def close(self) -> None:
        await self._client.close()

    async def get(self, path: str) -> dict[str, Any] | None:
        """One object; None when it does not exist."""
        reply = await self._client.request("GET", path)
        if reply.status == 404:
            return None
        if not reply.ok:
            raise ApiError(reply.status, f"GET {path}: {reply.message()}")
        body = reply.json()
        return body if isinstance(body, dict) else None

    async def list(self, path: str, query: Sequence[tuple[str, str]] = ()) -> list[Any]:
        return (await self._client.list_objects(path, query))[0]

    async def list_served(self, path: str) -> list[Any] | None:
        """A collection the API server may not serve (PodGroups): None when it does not (404), or
        when the user may not list it (403: explain still explains, without it)."""
        try:
            return await self.list(path)
        except ApiError as error:
            if error.status in (403, 404):
                return None
            raise

    async def node_metrics(self) -> list[Any] | None:
        """NodeMetrics, or None when the cluster serves no metrics API."""
        reply = await self._client.request("GET", METRICS_PATH, retries=1)
        if reply.status in (404, 503):
            return None
        if not reply.ok:
            raise ApiError(reply.status, f"GET {METRICS_PATH}: {reply.message()}")
        return list((reply.json() or {}).get("items") or [])


@dataclass(frozen=True, slots=True)
class ExplainOptions:
    pod: str | None = None  # NS/NAME
    profile: str | None = None
    output: str = "table"
    all_nodes: bool = False
    top: int = 3
    shadow: str | None = None
    kubeconfig: str | None = None


@dataclass(slots=True)
class Inputs:
    cluster: ClusterState
    pod: PodInfo
    profile: Profile
    warnings: list[str]
    #: every pod without a node, for the pending members of the pod's group
    unbound: list[PodInfo] = field(default_factory=list)


def _typed(items: Iterable[Any], kind: str, api_version: str) -> list[Any]:
    """List items with their kind: the API server leaves it out of a list's items, a dump has it."""
    return [{"apiVersion": api_version, "kind": kind, **item} if isinstance(item, dict) else item for item in items]


def _as_list(path: str, items: list[Any], kind: str, api_version: str) -> Documents:
    """One LIST as one `v1` List document of a file named by the collection's path."""
    return Path(path), [(1, {"apiVersion": "v1", "kind": "List", "items": _typed(items, kind, api_version)})]


def _split(reference: str) -> tuple[str, str]:
    namespace, slash, name = reference.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ExplainError(f'"{reference}": expected NAMESPACE/NAME of a pod')
    return namespace, name


def choose_profile(items: list[Any], pod: PodInfo, wanted: str | None) -> tuple[Profile, list[str]]:
    """The profile named `wanted`, else the one serving the pod's schedulerName as the operator
    decides (compiled as simulate does; the oldest claimant wins), and warnings about that choice."""
    invalid: dict[str, str] = {}
    documents = list(enumerate(_typed(items, KIND, API_VERSION), start=1))
    try:
        claimants = compile_profile_documents([(Path(PROFILES_PATH), documents)], invalid)
    except InputError as error:
        raise ExplainError(str(error)) from None
    owners, _ = assign_owners(claimants)
    if wanted is not None:
        by_name = {name: profile for _, name, profile in claimants}
        if wanted in invalid:
            raise ExplainError(f'SchedulerProfile "{wanted}" cannot be used: {invalid[wanted]}')
        if wanted not in by_name:
            raise ExplainError(f'SchedulerProfile "{wanted}" not found')
        chosen = by_name[wanted]
    else:
        owner = owners.get(pod.scheduler_name)
        broken = [name for name in invalid if _scheduler_name(items, name) == pod.scheduler_name]
        if owner is None and broken:  # e.g. a plugin no installed package provides (UnknownPlugin)
            raise ExplainError(f'SchedulerProfile "{broken[0]}" cannot be used: {invalid[broken[0]]}')
        if owner is None:
            raise ExplainError(
                f'no SchedulerProfile serves schedulerName "{pod.scheduler_name}" of pod {pod.key}; '
                "name one with --profile"
            )
        chosen = owner
    warnings = [f"{message}; it serves no pods" for name, message in invalid.items()
                if _scheduler_name(items, name) == chosen.scheduler_name]
    owner = owners.get(chosen.scheduler_name)
    if owner is not None and owner is not chosen:
        warnings.append(f'profile "{chosen.name}" does not serve schedulerName "{chosen.scheduler_name}": '
                        f'the older profile "{owner.name}" does (Conflict)')
    return chosen, warnings


def _scheduler_name(items: list[Any], name: str) -> str | None:
    for item in items:
        if isinstance(item, Mapping) and (item.get("metadata") or {}).get("name") == name:
            spec = item.get("spec")
            return spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return None


async def gather(kube: ReadOnlyKube, reference: str, wanted_profile: str | None) -> Inputs:
    """The pod, its profile and the cluster around it, read from the API server."""
    namespace, name = _split(reference)
    raw_pod = await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    if raw_pod is None:
        raise ExplainError(f'pod "{namespace}/{name}" not found')
    raw_pod = _typed([raw_pod], "Pod", "v1")[0]
    try:
        target = parse_pod(raw_pod)
    except ObjectError as error:
        raise ExplainError(f"pod {namespace}/{name}: {error}") from None
    profile, warnings = choose_profile(await kube.list(PROFILES_PATH), target, wanted_profile)
    files = await _list_cluster(kube, raw_pod, uses_node_utilization(profile), warnings)
    try:
        cluster, unbound = cluster_from_documents(files)
    except InputError as error:
        raise ExplainError(str(error)) from None
    _unserved(cluster, warnings)
    warnings.extend(f'profile "{profile.name}": {warning}' for warning in profile.warnings(cluster))
    return Inputs(cluster, _find(cluster, unbound, target), profile, warnings, unbound)


async def _list_cluster(kube: ReadOnlyKube, raw_pod: dict[str, Any], metrics: bool, warnings: list[str]) -> list[
    Documents
]:
    """Every collection simulate's `--cluster` takes, each LIST as one List document, the pod
    explained among the pods even when the LIST leaves it out (terminal, or created since)."""
    collections = [("Node", "v1", "/api/v1/nodes", ()), ("Pod", "v1", "/api/v1/pods", ACTIVE_PODS)]
    collections += [(kind.name, kind.api_version, kind.path(), ()) for kind in KINDS]
    unserved: list[str] = []
    listed = await asyncio.gather(*(kube.list(path, query) for _, _, path, query in collections[:2]),
                                  *(_list_kind(kube, kind, path, unserved) for kind, _, path, _ in collections[2:]))
    order = {UNSERVED.format(path=path): index for index, (_, _, path, _) in enumerate(collections)}
    warnings.extend(sorted(unserved, key=order.__getitem__))  # in the kinds' order, not the replies'
    if _key(raw_pod) not in {_key(item) for item in listed[1]}:
        listed[1].append(raw_pod)
    files = [_as_list(path, items, kind, version)
             for (kind, version, path, _), items in zip(collections, listed, strict=True)]
    files += await _list_groups(kube)
    if metrics:
        usage = await kube.node_metrics()
        if usage is None:
            warnings.append(f"{METRICS_PATH} is not served (no metrics-server?): NodeUtilization has no usage")
        else:
            files.append(_as_list(METRICS_PATH, usage, "NodeMetrics", "metrics.k8s.io/v1beta1"))
    return files


UNSERVED = "{path} is not served by this API server: none are used"


async def _list_kind(kube: ReadOnlyKube, kind: str, path: str, warnings: list[str]) -> list[Any]:
    """A catalog kind's LIST; a kind an older API server does not serve (a 404: resource.k8s.io/v1
    before Kubernetes 1.34) is absent, with a warning, as in the operator (`_unserved`)."""
    try:
        return await kube.list(path)
    except ApiError as error:
        if error.status != 404:
            raise
        warnings.append(UNSERVED.format(path=path))
        return []


def _unserved(cluster: ClusterState, warnings: list[str]) -> None:
    """The kinds the API server does not serve, as the operator records them (DynamicResources then
    says why a pod with claims cannot go, rather than that its claim is missing)."""
    for kind in KINDS:
        if UNSERVED.format(path=kind.path()) in warnings:
            cluster.catalog.set_served(kind.name, False)


async def _list_groups(kube: ReadOnlyKube) -> list[Documents]:
    """The PodGroups of both APIs where served: the upstream kind in the first version discovery
    offers (v1beta1, else v1alpha2), and scheduler-plugins' CRD."""
    files: list[Documents] = []
    upstream_found = False
    for kind in GROUP_KINDS:
        if kind.group == "scheduling.k8s.io" and upstream_found:
            continue
        items = await kube.list_served(kind.path())
        if items is None:
            continue
        upstream_found = upstream_found or kind.group == "scheduling.k8s.io"
        files.append(_as_list(kind.path(), items, "PodGroup", kind.api_version))
    return files


def group_view(inputs: Inputs, explanation: Explanation, top: int = 3) -> dict[str, Any] | None:
    """For a pod of a PodGroup: its group, decided as the scheduler decides it (every pending
    member together, placed whole or not at all), with the pod's node, message and scores from that
    decision written into `explanation`; None for a pod of no group."""
    pod, cluster = inputs.pod, inputs.cluster
    ref = group_of(pod)
    if ref is None:
        return None
    group = lookup(cluster.catalog, ref)
    view: dict[str, Any] = {"name": ref.key, "placed": False, "outcome": None, "message": None}
    if pod.node_name:
        scheduled = scheduled_members(cluster, ref)
        view["placed"] = group is not None and (group.scheduled or scheduled >= group.quorum)
        return view
    members = [p for p in inputs.unbound if group_of(p) == ref and p.scheduler_name == pod.scheduler_name
               and not p.terminal and not p.deleting and p.key != pod.key]
    decision = decide_group(Scheduler(), inputs.profile, cluster, ref, [pod, *members], top=top)
    mine = next(d for d in decision.decisions if d.pod == pod.key)
    view.update(placed=decision.now_placed or decision.outcome is Outcome.PREEMPTING,
                outcome=decision.outcome.value, message=decision.message or None)
    if decision.placements or (group is not None and group.topology_key):
        # every placement tried (TopologyPlacementGenerator in the profile), docs/gang.md
        view["placement"] = decision.placement
        view["placements"] = [t.as_json() for t in decision.placements]
        view["topologyKey"] = group.topology_key if group is not None else ""
    explanation.node = mine.preemption.node if mine.preemption is not None else mine.node
    explanation.message = mine.message
    explanation.preemption = mine.preemption
    explanation.scores = list(mine.top)
    explanation.scored = mine.feasible
    explanation.node_rank = 1 if mine.node is not None and mine.top else None
    return view


def _key(item: Any) -> str:
    meta = (item.get("metadata") if isinstance(item, Mapping) else None) or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _find(cluster: ClusterState, unbound: list[PodInfo], target: PodInfo) -> PodInfo:
    """The pod as the cluster was built with it (its priority resolved as simulate resolves it)."""
    record = cluster.pods.get(target.key)
    if record is not None:
        return record.pod
    for pod in unbound:
        if pod.key == target.key:
            return pod
    resolve_priority(target, cluster.catalog)  # a terminal pod on a node: counted nowhere
    return target


# ----------------------------------------------------------------- output


def _preemption(explanation: Explanation) -> dict[str, Any] | None:
    preemption = explanation.preemption
    if preemption is None:
        return None
    return {"node": preemption.node, "victims": [victim.key for victim in preemption.victims]}


def explanation_json(explanation: Explanation, all_nodes: bool = False,
                     group: Mapping[str, Any] | None = None,
                     devices: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """API.md §5's object, keys in the contract's order, then Placer's additions (a group member's
    `group`: see `group_view`; `devices`: what the pod's claims are allocated,
    `dynamic_resources.claimed_devices`)."""
    names = list(explanation.rejected)
    shown = names if all_nodes else names[:REJECTED_LIMIT]
    result = {
        "pod": explanation.pod,
        "profile": explanation.profile,
        "node": explanation.node,
        "message": explanation.message,
        "rejected": {name: explanation.rejected[name] for name in shown},
        "scores": [score.as_dict() for score in explanation.scores],
        "truncated": len(names) - len(shown),
        "bound": explanation.bound,
        "nodes": explanation.nodes,
        "feasible": explanation.feasible,
        "scored": explanation.scored,
        "nodeRank": explanation.node_rank,
        "preemption": _preemption(explanation),
        "devices": [dict(d) for d in devices],
    }
    if group is not None:
        result["group"] = dict(group)
    return result


def _rows(rows: list[tuple[str, ...]], out: TextIO, indent: str = "  ") -> None:
    """Left-aligned columns, the last one as long as it is."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.write((indent + "  ".join([*cells, row[-1]])).rstrip() + "\n")


def _headline(e: Explanation) -> str:
    where = f"pod {e.pod}, profile {e.profile}: "
    if e.bound:
        rank = f" (rank {e.node_rank} of {e.scored} nodes scored)" if e.node_rank is not None else ""
        return where + f"bound to {e.node}{rank}"
    if e.preemption is not None:
        victims = ", ".join(victim.key for victim in e.preemption.victims)
        return where + f"pending; fits {e.node} once it preempts {victims}"
    if e.node is not None:
        return where + f"pending; would go to {e.node} ({e.feasible} of {e.nodes} nodes feasible)"
    return where + "pending; no node fits"


def _render_placements(group: Mapping[str, Any], out: TextIO) -> None:
    """Each placement the group was tried in: its nodes, how many of the group fitted, who did not
    and why, the score of those that fitted, the one chosen."""
    tried = group.get("placements")
    if tried is None:
        return
    key = group.get("topologyKey") or ""
    out.write(f"placements{f' ({key})' if key else ''}: {len(tried)} tried"
              f"{', chosen ' + repr(group['placement']) if group.get('placement') is not None else ''}\n")
    for t in tried:
        line = f"  {t['domain'] or '(all nodes)'}: {t['nodes']} node{'' if t['nodes'] == 1 else 's'}, " \
               f"{t['placed']}/{t['pods']} fit"
        if "score" in t:
            parts = ", ".join(f"{name} {score}" for name, score in t["scores"].items())
            line += f", score {t['score']}" + (f" ({parts})" if parts else "")
        if "leftover" in t:
            line += f", leftover {t['leftover']}"
        out.write(line + ("  <- chosen" if t["chosen"] else "") + "\n")
        for pod, why in t.get("misses", {}).items():
            out.write(f"    {pod}: {why}\n")


def render_explanation(e: Explanation, out: TextIO, all_nodes: bool = False,
                       group: Mapping[str, Any] | None = None, devices: Sequence[Mapping[str, Any]] = ()) -> None:
    """The table: a headline, kube's message, the pod's devices, every refused node's reasons, the
    scores."""
    out.write(_headline(e) + "\n")
    if group is not None:
        state = "placed" if group["placed"] else "not placed"
        detail = f" ({group['message']})" if group.get("message") else ""
        out.write(f"group {group['name']}: {state}{detail}\n")
        _render_placements(group, out)
    if e.message:
        out.write(e.message + "\n")
    if devices:
        out.write("\ndevices of its claims\n")
        for device in devices:
            out.write(f"  {device_line(device)}\n")
    names = list(e.rejected)
    shown = names if all_nodes else names[:REJECTED_LIMIT]
    if shown:
        out.write(f"\nrejected: {len(names)} of {e.nodes} nodes, every filter's reasons\n")
        _rows([("NODE", "REASONS"), *((name, "; ".join(e.rejected[name])) for name in shown)], out)
        if len(shown) < len(names):
            out.write(f"  ... and {len(names) - len(shown)} more (--all-nodes lists them)\n")
    if e.scores:
        out.write("\nscores, best first" + (" (* the pod's node)" if e.node is not None else "") + "\n")
        rows = [("", "NODE", "TOTAL", "PLUGINS")]
        for score in e.scores:
            plugins = ", ".join(f"{name} {value}" for name, value in score.plugins.items())
            rows.append(("*" if score.node == e.node else "", score.node, str(score.total), plugins))
        _rows(rows, out, indent="")


def render_json(document: Mapping[str, Any], out: TextIO) -> None:
    out.write(json.dumps(document, indent=2) + "\n")


# ----------------------------------------------------------------- shadow profiles


async def shadow_report(kube: ReadOnlyKube, name: str) -> dict[str, Any]:
    """A shadow profile's `status.shadow` as written by the operator, with its name first."""
    raw = await kube.get(f"{PROFILES_PATH}/{name}")
    if raw is None:
        raise ExplainError(f'SchedulerProfile "{name}" not found')
    spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
    mode = spec.get("mode") or "Active"
    if mode != "Shadow":
        raise ExplainError(f'SchedulerProfile "{name}" is not a shadow profile (spec.mode: {mode})')
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    shadow = status.get("shadow")
    if not isinstance(shadow, Mapping):  # nothing recorded yet
        shadow = {**dict.fromkeys(SHADOW_COUNTS, 0), "disagreements": []}
    return {"profile": name, **shadow}


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def render_shadow(report: Mapping[str, Any], out: TextIO) -> None:
    """The counts, then one row per disagreement (oldest first, as recorded)."""
    counts = "  ".join(f"{key} {_cell(report.get(key, 0))}" for key in SHADOW_COUNTS)
    agreement = f": agreement {report['agreement']}" if report.get("agreement") else ""
    out.write(f"shadow profile {report['profile']}{agreement}\n{counts}\n")
    disagreements = [d for d in report.get("disagreements") or () if isinstance(d, Mapping)]
    if not disagreements:
        out.write("\nno disagreements recorded\n")
        return
    out.write(f"\nlast {len(disagreements)} disagreements, newest last\n")
    rows = [("TIME", "POD", "OUTCOME", "BOUND TO", "TOTAL", "PLACER", "TOTAL", "MESSAGE")]
    keys = ("time", "pod", "outcome", "boundTo", "boundTotal", "placer", "placerTotal")
    rows += [(*(_cell(d.get(key)) for key in keys), d.get("message") or "") for d in disagreements]
    _rows(rows, out, indent="")


# ----------------------------------------------------------------- the command


async def run_explain(options: ExplainOptions, out: TextIO, err: TextIO) -> int:
    """`placer explain`: 0 once printed, 2 for input it cannot use, 1 when the API server fails."""
    try:
        kube = await ReadOnlyKube.connect(options.kubeconfig)
    except ExplainError as error:
        err.write(f"placer explain: {error}\n")
        return 2
    try:
        if options.shadow is not None:
            report = await shadow_report(kube, options.shadow)
            (render_json if options.output == "json" else render_shadow)(report, out)
            return 0
        assert options.pod is not None
        inputs = await gather(kube, options.pod, options.profile)
        for warning in inputs.warnings:
            err.write(f"warning: {warning}\n")
        explanation = explain(inputs.pod, inputs.profile, inputs.cluster, top=options.top)
        group = group_view(inputs, explanation, options.top)
        devices = claimed_devices(inputs.pod, inputs.cluster, time.time())
        if options.output == "json":
            render_json(explanation_json(explanation, options.all_nodes, group, devices), out)
        else:
            render_explanation(explanation, out, options.all_nodes, group, devices)
        return 0
    except ExplainError as error:
        err.write(f"placer explain: {error}\n")
        return 2
    except ApiError as error:
        hint = " (explain needs get and list on the kinds docs/cli.md lists)" if error.status == 403 else ""
        err.write(f"placer explain: the API server: {error}{hint}\n")
        return 1
    finally:
        await kube.close()
