"""kube-scheduler's own performance suite (test/integration/scheduler_perf, read from the Kubernetes
source at run time by bench/perf_suite.py) replayed on a real control plane: Placer, kube-scheduler
and the limit row (bench/limit_client.py, a bare bind-and-event client), each alone on a fresh
plane per run (../shared/realcluster/realcluster.sh; no kubelets, no controller manager).

Per test case, size and mode, each contender runs the workload's ops in order, as kube's executor
does: nodes (with their status, in one POST each, as kube's node preparer), namespaces, objects
(`createAny`, the ResourceSlices of `createResourceDriver`), pods, churn in the background,
barriers, deletions... The contender is the only scheduler: every pod gets its schedulerName; it
schedules the workload's earlier pods too (kube's suite waits for them to be bound before the next
op, and so does this harness). The API server runs with kube's suite's admission (`Priority` off:
kube's templates set `spec.priority` directly) and serves the beta APIs the workload's objects use.
The measured op is the suite's (`createPods` with `collectMetrics`), in one of two modes:

- `waiting` (scheduling alone): the contender is stopped, the measured pods created, then a fresh
  contender process started; the clock runs from its start (its start-up included) to the last
  measured binding;
- `during` (as kube's suite measures): the contender keeps running while the measured pods are
  created as fast as a 32-way loader can; the clock runs from the first creation. A steady state
  (`steadyState`: the pods kept at a count, the bound ones deleted and replaced for a duration)
  and a `startCollectingMetrics` window are measured this way only.

Ops that go on in the background (churn, `deletePods` without waiting) keep going through the
measurement, as in kube's suite. There is no resourceclaim controller: the harness plays it, as
the pods are created (a ResourceClaim from the pod's ResourceClaimTemplate, owned by the pod and
named in its `status.resourceClaimStatuses`), and deletes the claims of the pods it deletes itself.

Measured per run: pods/s (measured pods bound over the clock), first binding, peak RSS (VmHWM), the
CPU time of the contender, kube-apiserver and etcd over the clock per measured pod (and, when the
measured pods preempted others, the contender's per preemptor), kube-scheduler's own metrics over
the measurement (its /metrics scraped at the clock's start and end: the extension points', the
plugins' — sampled by kube-scheduler in 10 % of its cycles —, the algorithm's, preemption's...:
counts, sums and means), and the audit of every binding: bench/audit.py's rules over the final
state (capacity, taints, selectors, node affinity, pod affinity and anti-affinity, DoNotSchedule
skew, devices), every pod that must be bound bound (the measured ones and those kube's suite waits
for, less the ones deleted since), none that cannot be (gated, or asking for more than any node
has), no pod seen on two nodes. Medians over `--runs`; ratios Placer / kube-scheduler and Placer /
limit row per row. The JSON is written after every row.

    python bench/suite_bench.py [--kube-source DIR] [--kube-bin DIR] [--workloads NAME[/ENTRY] ...]
        [--sizes 500 5000] [--scale 0.1] [--modes waiting during] [--schedulers limit kube-scheduler placer]
        [--runs 1] [--timeout 600] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import perf_suite as ps  # noqa: E402
import real_bench as rb  # noqa: E402
from audit import audit  # noqa: E402

from tests.kubeemu.selectors import selector_matches  # noqa: E402

Obj = dict[str, Any]
DEFAULT_KUBE_SOURCE = ROOT.parent / ".mirror" / "openshift+microshift" / "repo"  # the search tool's mirror
# the list: kube's shapes a scheduler without kubelets can run, and ours (PreemptionWithPDB)
DEFAULT_WORKLOADS = (
    "SchedulingBasic", "SchedulingPodAntiAffinity", "SchedulingPodAffinity", "SchedulingPreferredPodAffinity",
    "SchedulingPreferredPodAntiAffinity", "SchedulingNodeAffinity", "TopologySpreading",
    "PreferredTopologySpreading", "Unschedulable", "PreemptionBasic", "PreemptionWithPDB", "SchedulingWhileGated",
    "SchedulingGatedPodsWithPodAffinityImpactForThroughput", "SchedulingWithMixedChurn", "SchedulingDaemonset",
    "SchedulingWithResourceClaimTemplate", "SchedulingWithResourceClaim", "SteadyStateClusterResourceClaimTemplate",
    "ConsumableCapacity")
SCHEDULERS = ("limit", "kube-scheduler", "placer")
MODES = ("waiting", "during")
# kube's suite starts its API server with these admission plugins off (util.go, mustSetupCluster)
KUBE_SUITE_ADMISSION = "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority"
LOADER_CONCURRENCY = 32
POLL = 0.1  # s between checks of a wait
METRICS_FLUSH_S = 1.5  # kube-scheduler's metrics recorder flushes every second (NewMetricsAsyncRecorder)
CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"  # the resourceclaim controller's
# kube-scheduler's metrics kept in the JSON (pkg/scheduler/metrics): histograms (count, sum, mean) ...
KUBE_HISTOGRAMS = (
    "scheduler_framework_extension_point_duration_seconds", "scheduler_plugin_execution_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds", "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_pod_scheduling_sli_duration_seconds", "scheduler_pod_scheduling_attempts",
    "scheduler_preemption_victims", "scheduler_preemption_goroutines_duration_seconds",
    "scheduler_event_handling_duration_seconds", "scheduler_queueing_hint_execution_duration_seconds")
# ... and counters
KUBE_COUNTERS = (
    "scheduler_schedule_attempts_total", "scheduler_preemption_attempts_total", "scheduler_batch_attempts_total",
    "scheduler_batch_cache_flushed_total", "scheduler_pod_scheduled_after_flush_total",
    "scheduler_plugin_evaluation_total", "scheduler_preemption_goroutines_execution_total",
    "scheduler_queue_incoming_pods_total")
ROW_MEDIANS = ("pods_per_s", "first_binding_s", "peak_rss_mb", "cpu_s_scheduler", "cpu_ms_per_pod_scheduler",
               "cpu_ms_per_pod_apiserver", "cpu_ms_per_pod_etcd", "cpu_ms_per_pod_harness", "cpu_ms_per_preemptor",
               "measured", "measured_bound", "victims", "violations", "unbound_expected", "bound_unbindable",
               "duration_s")


class RunFailed(Exception):
    """A run that could not finish (pods never bound, an API error): the row says why."""


# -- metrics ----------------------------------------------------------------------------------------


def metric_series(text: str, histograms: Sequence[str] = KUBE_HISTOGRAMS,
                  counters: Sequence[str] = KUBE_COUNTERS) -> dict[tuple[str, str], float]:
    """(series name, labels) -> value of the histograms' `_sum` and `_count` and the counters in a
    Prometheus text page."""
    wanted = {f"{h}{suffix}" for h in histograms for suffix in ("_sum", "_count")} | set(counters)
    series: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        metric, _, value = line.rpartition(" ")
        name, _, labels = metric.partition("{")
        if name in wanted:
            with contextlib.suppress(ValueError):
                series[(name, labels.rstrip("}"))] = float(value)
    return series


def metrics_delta(before: Mapping[tuple[str, str], float], after: Mapping[tuple[str, str], float],
                  histograms: Sequence[str] = KUBE_HISTOGRAMS,
                  counters: Sequence[str] = KUBE_COUNTERS) -> dict[str, list[dict[str, Any]]]:
    """What the series grew by between two scrapes, per family: a histogram's observations
    (`count`), their total and mean (`sum_s` and `mean_ms` for durations, `sum` and `mean` for the
    others, e.g. victims per preemption), a counter's `value`; label sets that did not grow are left
    out."""
    out: dict[str, list[dict[str, Any]]] = {}
    for family in histograms:
        for (name, labels), count in sorted(after.items()):
            if name != f"{family}_count":
                continue
            grown = count - before.get((name, labels), 0.0)
            if grown <= 0:
                continue
            total = after.get((f"{family}_sum", labels), 0.0) - before.get((f"{family}_sum", labels), 0.0)
            if family.endswith("_seconds"):
                entry = {"count": grown, "sum_s": total, "mean_ms": total / grown * 1000}
            else:  # a count per observation (victims, attempts)
                entry = {"count": grown, "sum": total, "mean": total / grown}
            out.setdefault(family, []).append({"labels": rb._labels(labels), **entry})
    for family in counters:
        for (name, labels), value in sorted(after.items()):
            grown = value - before.get((name, labels), 0.0)
            if name == family and grown > 0:
                out.setdefault(family, []).append({"labels": rb._labels(labels), "value": grown})
    return out


# -- following the pods ---------------------------------------------------------------------------


class PodState:
    """What the watch saw of one pod."""

    __slots__ = ("attempted", "bound_at", "deleted_at", "node", "nodes")

    def __init__(self) -> None:
        self.node: str | None = None
        self.nodes: set[str] = set()  # every node it was seen on (2: bound twice)
        self.bound_at: float | None = None
        self.attempted = False  # a PodScheduled condition: the scheduler tried it (or the API server gated it)
        self.deleted_at: float | None = None


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class PodTracker:
    """Every pod of the cluster through one watch: when it was bound, where, whether it was tried
    or deleted. Listeners hear of each first binding."""

    def __init__(self) -> None:
        self.pods: dict[str, PodState] = {}
        self.on_bound: list[Callable[[str, float], None]] = []
        self.restarts = 0
        self.relists = 0

    def state(self, key: str) -> PodState:
        found = self.pods.get(key)
        if found is None:
            found = self.pods[key] = PodState()
        return found

    def seen(self, kind: str, pod: Mapping[str, Any], now: float | None = None) -> None:
        now = time.time() if now is None else now
        key = pod_key(pod)
        state = self.state(key)
        if kind == "DELETED":
            state.deleted_at = state.deleted_at or now
            return
        node = (pod.get("spec") or {}).get("nodeName")
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" for c in conditions):
            state.attempted = True
        if node:
            state.nodes.add(node)
            state.node = node
            if state.bound_at is None:
                state.bound_at = now
                for listener in self.on_bound:
                    listener(key, now)

    async def follow(self, api: rb.Api, ready: asyncio.Event) -> None:
        """List, then watch every pod until cancelled; a watch the server closes is resumed, from a
        fresh list after a 410 (pods missing from it were deleted meanwhile)."""
        version = await self._relist(api)
        ready.set()
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        while True:
            gone = False
            path = f"/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={version}"
            async with api.session.get(api.server + path, timeout=timeout) as response:
                if response.status == 410:
                    gone = True
                elif response.status != 200:
                    raise RunFailed(f"watch {path}: {response.status} {(await response.text())[:300]}")
                else:
                    async for line in response.content:
                        event = orjson.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            gone = obj.get("code") == 410
                            if not gone:
                                raise RunFailed(f"watch {path}: {obj}")
                            break
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            self.seen(event["type"], obj)
            self.restarts += 1
            if gone:
                self.relists += 1
                version = await self._relist(api)

    async def _relist(self, api: rb.Api) -> str:
        now = time.time()
        present: set[str] = set()
        version, token = "", ""
        while True:
            page = await api.call("GET", "/api/v1/pods?limit=500" + (f"&continue={token}" if token else ""))
            for pod in page["items"]:
                present.add(pod_key(pod))
                self.seen("MODIFIED", pod, now)
            version = page["metadata"].get("resourceVersion") or version
            token = page["metadata"].get("continue") or ""
            if not token:
                break
        for key, state in self.pods.items():
            if key not in present and state.deleted_at is None:
                state.deleted_at = now
        return version


@dataclass
class Measurement:
    """The measured pods (a fixed set, or every pod a predicate admits as it is created) and their
    bindings after the clock's start."""

    keys: set[str] = field(default_factory=set)
    expected: int | None = None  # None: not a fixed number (a steady state, a window)
    start: float = float("nan")
    end: float | None = None  # a window's end: bindings after it do not count
    bound: dict[str, float] = field(default_factory=dict)
    admits: Callable[[Obj], bool] | None = None  # a window: which created pods are measured
    meter: rb.CpuMeter | None = None

    def bound_now(self, key: str, at: float) -> None:
        if key in self.keys and key not in self.bound and (self.end is None or at <= self.end):
            self.bound[key] = at
            if self.meter is not None:
                self.meter.binding(self.expected is not None and len(self.bound) >= self.expected)

    def complete(self) -> bool:
        return self.expected is not None and len(self.bound) >= self.expected


# -- the harness's part of the controllers --------------------------------------------------------


def claim_for(pod: Mapping[str, Any], uid: str, entry: str, template: Mapping[str, Any], suffix: str) -> Obj:
    """The ResourceClaim the resourceclaim controller makes for a pod's template entry: the
    template's spec and metadata, owned by the pod, annotated with the entry's name."""
    meta = pod["metadata"]
    spec = template.get("spec") or {}
    claim_meta = copy.deepcopy(spec.get("metadata") or {})
    claim_meta.update({
        "name": f"{meta['name']}-{entry}-{suffix}"[:253], "namespace": meta["namespace"],
        "annotations": {**(claim_meta.get("annotations") or {}), CLAIM_ANNOTATION: entry},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": uid,
                             "controller": True, "blockOwnerDeletion": True}]})
    return {"apiVersion": template["apiVersion"], "kind": "ResourceClaim", "metadata": claim_meta,
            "spec": copy.deepcopy(spec.get("spec") or {})}


def template_entries(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(entry name, template name) of a pod's `spec.resourceClaims` made from templates."""
    return [(e["name"], e["resourceClaimTemplateName"]) for e in (pod.get("spec") or {}).get("resourceClaims") or []
            if e.get("resourceClaimTemplateName")]


def labels_match(selector: Mapping[str, str], labels: Mapping[str, str] | None) -> bool:
    """kube's suite's `labelSelector` maps (matchLabels only)."""
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


def own_cpu_seconds() -> float:
    """This process's CPU time (the loader's and the watch's), its children's left out."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pdb_selected(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a PodDisruptionBudget of the pod's namespace selects it."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    labels = (pod.get("metadata") or {}).get("labels")
    return any(p["metadata"].get("namespace") == namespace and (p.get("spec") or {}).get("selector")
               and selector_matches(p["spec"]["selector"], labels) for p in pdbs)


# -- one run ----------------------------------------------------------------------------------------


@dataclass
class Settings:
    kube_bin: Path
    timeout: float
    logs: Path | None = None
    #: seconds between the contender's start and the plan's first op (kube's suite starts its
    #: scheduler before any op; 0: the ops start at once, the contender's start-up overlapping them)
    settle: float = 0.0


class Run:
    """One contender on one fresh plane through one workload's plan."""

    def __init__(self, plan: ps.Plan, which: str, mode: str, settings: Settings, api: rb.Api, kubeconfig: Path,
                 state: Path, workdir: Path) -> None:
        self.plan = plan
        self.which = which
        self.mode = mode
        self.settings = settings
        self.api = api
        self.kubeconfig = kubeconfig
        self.state = state
        self.workdir = workdir
        self.scheduler_name = {"kube-scheduler": rb.KUBE_SCHEDULER_NAME, "limit": rb.LIMIT_NAME}.get(
            which, rb.PLACER_NAME)
        self.tracker = PodTracker()
        self.created: dict[str, Obj] = {}  # every pod the harness created, by key
        self.must_bind: set[str] = set()  # kube's suite waits for these (or measures them)
        self.harness_deleted: set[str] = set()
        self.claims_of: dict[str, list[str]] = {}  # pod key -> the claims the harness made for it
        self.claim_templates = plan.claim_templates()
        self.pdbs = [o for step in plan.steps if isinstance(step, ps.CreateObjects) for o in step.objects
                     if o.get("kind") == "PodDisruptionBudget"]
        self.largest = ps.largest_allocatable(plan.nodes)
        self.background: list[asyncio.Task[None]] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.measurement: Measurement | None = None
        self.meter = rb.CpuMeter({"apiserver": rb._pid_file(state, "apiserver"), "etcd": rb._pid_file(state, "etcd")})
        self.metrics_before: dict[tuple[str, str], float] = {}
        self.metrics_after: dict[tuple[str, str], float] = {}
        self.attempts: dict[str, float] = {}
        self.tracker.on_bound.append(self._bound)
        self.deadline = 0.0
        self.harness_cpu: list[float | None] = [None, None]  # this process's CPU at the clock's start and end

    def _bound(self, key: str, at: float) -> None:
        if self.measurement is not None:
            self.measurement.bound_now(key, at)
            if self.measurement.complete() and self.harness_cpu[1] is None:
                self.harness_cpu[1] = own_cpu_seconds()

    def clock_starts(self, measurement: Measurement) -> None:
        """The measurement's clock starts: the processes' CPU readings with it."""
        measurement.start = time.time()
        self.meter.start()
        self.harness_cpu = [own_cpu_seconds(), None]

    # the contender

    def start_scheduler(self) -> None:
        self.port = free_port()
        self.process = rb.start_scheduler(self.which, self.kubeconfig, self.settings.kube_bin, self.workdir,
                                          metrics_port=self.port, namespace="")
        self.meter.pids["scheduler"] = self.process.pid

    def stop_scheduler(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(15)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None
        self.meter.pids.pop("scheduler", None)  # a fresh contender counts from 0

    def log_tail(self, chars: int = 3000) -> str:
        log = self.workdir / f"{self.which}.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else ""

    async def scrape(self) -> dict[tuple[str, str], float]:
        """kube-scheduler's series, once its asynchronous recorder has flushed (it does every second:
        the plugins' and the extension points' observations would otherwise land in the next scrape)."""
        if self.which != "kube-scheduler":
            return {}
        await asyncio.sleep(METRICS_FLUSH_S)
        return metric_series(await rb.metrics_page(self.api, self.port))

    # calls

    async def post(self, path: str, body: Obj) -> Obj:
        reply = await self.api.call("POST", path, body)
        if isinstance(reply, dict) and reply.get("kind") == "Status":
            raise RunFailed(f"POST {path} {body['metadata'].get('name')}: {reply.get('message')}")
        return reply

    async def many(self, items: Sequence[Any], action: Callable[[Any], Any],
                   concurrency: int = LOADER_CONCURRENCY) -> None:
        iterator = iter(items)

        async def worker() -> None:
            for item in iterator:  # shared: each item taken once
                await action(item)

        await asyncio.gather(*(worker() for _ in range(min(concurrency, max(len(items), 1)))))

    async def create_pod(self, pod: Obj, measurement: Measurement | None = None) -> None:
        """Create a pod (a fresh object of the plan's: kept as it is sent) and, for its claim
        templates, the claims, as the resourceclaim controller would."""
        body = pod
        body["spec"]["schedulerName"] = self.scheduler_name
        key = pod_key(body)
        self.created[key] = body
        measurement = measurement or self.measurement
        if measurement is not None and measurement.admits is not None and measurement.admits(body):
            measurement.keys.add(key)  # a steady state's or a window's: measured as created
        namespace = body["metadata"]["namespace"]
        reply = await self.post(f"/api/v1/namespaces/{namespace}/pods", body)
        entries = template_entries(body)
        if entries:  # the resourceclaim controller's part
            statuses, names = [], []
            for entry, template_name in entries:
                template = self.claim_templates.get((namespace, template_name))
                if template is None:
                    raise RunFailed(f"{key}: no ResourceClaimTemplate {namespace}/{template_name} in the workload")
                claim = claim_for(body, reply["metadata"]["uid"], entry, template, secrets.token_hex(3)[:5])
                await self.post(ps.rest_collection(claim, namespace), claim)
                statuses.append({"name": entry, "resourceClaimName": claim["metadata"]["name"]})
                names.append(ps.rest_collection(claim, namespace) + "/" + claim["metadata"]["name"])
            self.claims_of[key] = names
            await self.api.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{body['metadata']['name']}/status",
                                {"status": {"resourceClaimStatuses": statuses}}, "application/merge-patch+json")

    async def create_pods(self, pods: Sequence[Obj], measurement: Measurement | None = None,
                          on_first: Callable[[], None] | None = None) -> None:
        first: list[bool] = []

        async def one(pod: Obj) -> None:
            if not first:
                first.append(True)
                if on_first is not None:
                    on_first()
            await self.create_pod(pod, measurement)

        await self.many(pods, one)

    async def delete_pod(self, key: str, grace: int | None = None) -> None:
        namespace, name = key.split("/", 1)
        self.harness_deleted.add(key)
        query = "" if grace is None else f"?gracePeriodSeconds={grace}"
        await self.api.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}{query}", allow_missing=True)
        for claim in self.claims_of.pop(key, []):  # the garbage collector's part
            await self.api.call("DELETE", claim, allow_missing=True)

    # waits

    async def wait_for(self, done: Callable[[], bool], what: Callable[[], str]) -> None:
        while not done():
            if time.time() > self.deadline:
                raise RunFailed(f"timed out waiting for {what()}")
            if self.process is not None and self.process.poll() is not None:
                raise RunFailed(f"{self.which} exited ({self.process.returncode}) while waiting for {what()}")
            await asyncio.sleep(POLL)

    def bound_count(self, keys: Iterable[str]) -> int:
        return sum(1 for k in keys if (s := self.tracker.pods.get(k)) is not None and s.bound_at is not None)

    # the steps

    async def run(self) -> dict[str, Any]:
        ready = asyncio.Event()
        follower = asyncio.create_task(self.tracker.follow(self.api, ready))
        try:
            await asyncio.wait_for(ready.wait(), 60)
            self.start_scheduler()
            if self.settings.settle:
                await asyncio.sleep(self.settings.settle)
            for step in self.plan.steps:
                self.deadline = time.time() + self.settings.timeout
                await self.step(step)
                if follower.done():
                    follower.result()  # the watch failed: say why
            return await self.finish()
        finally:
            for task in [*self.background, follower]:
                task.cancel()
            await asyncio.gather(*self.background, follower, return_exceptions=True)
            self.stop_scheduler()

    async def step(self, step: ps.Step) -> None:
        if isinstance(step, ps.CreateNodes):
            await self.many(step.nodes, lambda node: self.post("/api/v1/nodes", node))
        elif isinstance(step, ps.CreateNamespaces):
            for namespace in step.namespaces:
                await self.api.call("POST", "/api/v1/namespaces", namespace)  # 409: already there
        elif isinstance(step, ps.CreateObjects):
            await self.many(step.objects, lambda o: self.post(
                ps.rest_collection(o, (o.get("metadata") or {}).get("namespace")), o))
        elif isinstance(step, ps.CreatePods):
            for pod_set in step.sets:
                if pod_set.measured:
                    await self.measure(pod_set)
                else:
                    await self.setup_pods(pod_set)
        elif isinstance(step, ps.Churn):
            self.background.append(asyncio.create_task(self.churn(step)))
        elif isinstance(step, ps.Barrier):
            await self.barrier(step)
        elif isinstance(step, ps.Sleep):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, ps.DeletePods):
            task = asyncio.create_task(self.delete_pods(step))
            if step.wait:
                await task
            else:
                self.background.append(task)
        elif isinstance(step, ps.UpdateObjects):
            await self.update_objects(step)
        elif isinstance(step, ps.StartMeasure):
            await self.start_window(step)
        elif isinstance(step, ps.StopMeasure):
            await self.stop_window()

    async def setup_pods(self, pod_set: ps.PodSet) -> None:
        pods = pod_set.pods()
        keys = [pod_key(p) for p in pods]
        if pod_set.wait:
            self.must_bind.update(keys)
        await self.create_pods(pods)
        if pod_set.wait:
            await self.wait_for(lambda: self.bound_count(keys) >= len(keys),
                                lambda: f"{len(keys) - self.bound_count(keys)} of the {len(keys)} pods of op "
                                        f"{pod_set.op} to be bound")

    async def measure(self, pod_set: ps.PodSet) -> None:
        measurement = Measurement(meter=self.meter)
        self.measurement = measurement
        if pod_set.steady_seconds is not None:
            await self.steady_state(pod_set, measurement)
            return
        pods = pod_set.pods()
        measurement.keys = {pod_key(p) for p in pods}
        measurement.expected = len(pods)
        self.must_bind.update(measurement.keys)
        if self.mode == "waiting":
            self.stop_scheduler()
            await self.create_pods(pods)
            await asyncio.sleep(0.5)  # the watch has seen them
            self.clock_starts(measurement)  # the contender counts from 0: it starts now
            self.start_scheduler()
        else:
            self.metrics_before = await self.scrape()

            await self.create_pods(pods, on_first=lambda: self.clock_starts(measurement))
        await self.wait_for(measurement.complete, lambda: f"{len(pods) - len(measurement.bound)} of the "
                                                          f"{len(pods)} measured pods to be bound")
        await self.end_measurement(measurement)

    async def end_measurement(self, measurement: Measurement) -> None:
        self.metrics_after = await self.scrape()
        if self.which == "placer":
            self.attempts = await rb.placer_attempts(self.api, self.port)

    async def steady_state(self, pod_set: ps.PodSet, measurement: Measurement) -> None:
        """kube's createPodsSteadily: `count` pods; each time `count` more were bound, every pod of
        the namespace deleted (at once) and `count` new ones created, for the duration."""
        assert pod_set.steady_seconds is not None
        self.metrics_before = await self.scrape()
        measurement.admits = lambda pod: pod["metadata"]["namespace"] == pod_set.namespace
        batch = 0

        await self.create_pods([pod_set.pod(i, batch) for i in range(pod_set.count)], measurement,
                               lambda: self.clock_starts(measurement))
        end = measurement.start + pod_set.steady_seconds
        handled = 0
        while time.time() < end:
            if len(measurement.bound) >= handled + pod_set.count:
                handled += pod_set.count
                live = [k for k in self.created if k.startswith(f"{pod_set.namespace}/")
                        and self.tracker.state(k).deleted_at is None and k not in self.harness_deleted]
                await self.many(live, lambda k: self.delete_pod(k, grace=0))
                batch += 1
                await self.create_pods([pod_set.pod(i, batch) for i in range(pod_set.count)], measurement)
            if self.process is not None and self.process.poll() is not None:
                raise RunFailed(f"{self.which} exited during the steady state")
            await asyncio.sleep(POLL)
        measurement.end = end
        self.meter.binding(True)
        await self.end_measurement(measurement)

    async def start_window(self, step: ps.StartMeasure) -> None:
        if self.mode == "waiting":
            raise RunFailed("a measurement window needs the scheduler running (mode during)")
        self.metrics_before = await self.scrape()
        namespaces = set(step.namespaces)
        self.measurement = Measurement(meter=self.meter, admits=lambda pod: (
            pod["metadata"]["namespace"] in namespaces and labels_match(step.selector, pod["metadata"].get("labels"))))
        self.clock_starts(self.measurement)

    async def stop_window(self) -> None:
        assert self.measurement is not None
        self.measurement.end = time.time()
        self.meter.binding(True)
        await self.end_measurement(self.measurement)

    async def churn(self, step: ps.Churn) -> None:
        """kube's churn op: every interval, each template's object created (mode create, `number`
        rounds at most, 0 for no end) or, in turn, created and deleted (mode recreate, `number` of
        each kept); a creation that fails is let go, as kube's."""
        slots: list[list[str | None]] = [[None] * max(step.number, 1) for _ in step.templates]
        round_ = 0
        while step.mode == "recreate" or not step.number or round_ < step.number:
            await asyncio.sleep(step.interval_s)
            for index, template in enumerate(step.templates):
                slot = round_ % max(step.number, 1)
                name = slots[index][slot] if step.mode == "recreate" else None
                if name is not None:
                    slots[index][slot] = None
                    if template.get("kind") == "Pod":
                        await self.delete_pod(name)
                    else:
                        await self.api.call("DELETE", name, allow_missing=True)
                    continue
                made = self.churn_object(step, template, round_, index)
                with contextlib.suppress(RuntimeError, RunFailed):
                    if made.get("kind") == "Pod":
                        await self.create_pod(made, self.measurement)
                        slots[index][slot] = pod_key(made)
                    else:
                        namespace = step.namespace if made.get("kind") not in ps.CLUSTER_SCOPED else None
                        collection = ps.rest_collection(made, namespace)
                        await self.post(collection, made)
                        slots[index][slot] = f"{collection}/{made['metadata']['name']}"
            round_ += 1

    @staticmethod
    def churn_object(step: ps.Churn, template: Obj, round_: int, index: int) -> Obj:
        made = copy.deepcopy(template)
        meta = made.setdefault("metadata", {})
        stem = meta.pop("generateName", None) or f"{meta.get('name') or made.get('kind', 'object').lower()}-"
        meta["name"] = f"{stem}{step.op}-{index}-{round_}"
        if made.get("kind") not in ps.CLUSTER_SCOPED:
            meta["namespace"] = step.namespace
        if made.get("kind") == "Node":
            meta.setdefault("labels", {})["kubernetes.io/hostname"] = meta["name"]
        return made

    async def barrier(self, step: ps.Barrier) -> None:
        def reached(namespace: str) -> int:
            count = 0
            for key, pod in self.created.items():
                if key.startswith(f"{namespace}/") and labels_match(step.selector, pod["metadata"].get("labels")):
                    state = self.tracker.pods.get(key)
                    if state is not None and (state.bound_at is not None
                                              or (step.stage == "Attempted" and state.attempted)):
                        count += 1
            return count

        await self.wait_for(lambda: all(reached(n) >= c for n, c in step.expected.items()),
                            lambda: f"a barrier ({step.stage}): " + ", ".join(
                                f"{n} {reached(n)}/{c}" for n, c in step.expected.items()))

    async def delete_pods(self, step: ps.DeletePods) -> None:
        keys = [k for k, pod in self.created.items() if k.startswith(f"{step.namespace}/")
                and labels_match(step.selector, pod["metadata"].get("labels"))
                and self.tracker.state(k).deleted_at is None]
        if not step.per_second:
            await self.many(keys, self.delete_pod)
            return
        start = time.time()
        for number, key in enumerate(keys):
            await asyncio.sleep(max(0.0, start + (number + 1) / step.per_second - time.time()))
            await self.delete_pod(key)

    async def update_objects(self, step: ps.UpdateObjects) -> None:
        """kube's updateAny: each rendered object PUT (unconditionally, on its subresources when
        given), then its status, `per_second` a second (0: at once)."""
        start = time.time()
        for index in range(step.count):
            if step.per_second:
                await asyncio.sleep(max(0.0, start + (index + 1) / step.per_second - time.time()))
            obj = step.template.make(index, step.count)
            if obj.get("kind") == "Pod":
                obj.setdefault("spec", {})["schedulerName"] = self.scheduler_name
            if step.namespace:
                obj.setdefault("metadata", {})["namespace"] = step.namespace
            path = ps.rest_collection(obj, step.namespace) + "/" + obj["metadata"]["name"]
            for target in [*(f"{path}/{s}" for s in step.subresources), *([] if step.subresources else [path])]:
                reply = await self.api.call("PUT", target, obj)
                if isinstance(reply, dict) and reply.get("kind") == "Status":
                    raise RunFailed(f"PUT {target}: {reply.get('message')}")
                if isinstance(reply, dict) and reply.get("metadata", {}).get("resourceVersion"):
                    obj["metadata"]["resourceVersion"] = reply["metadata"]["resourceVersion"]
            obj["metadata"].pop("resourceVersion", None)
            await self.api.call("PUT", f"{path}/status", obj)

    # the outcome

    async def finish(self) -> dict[str, Any]:
        measurement = self.measurement
        if measurement is None or math.isnan(measurement.start):
            raise RunFailed("the workload measured nothing")
        rss = rb.peak_rss_mb(self.process.pid) if self.process is not None else float("nan")
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        self.background = []
        pods = await self.list_all("/api/v1/pods")
        nodes = await self.list_all("/api/v1/nodes")
        claims = slices = None
        if any(v.startswith("resource.k8s.io/") for v in self.plan.api_versions):
            claims = await self.list_all("/apis/resource.k8s.io/v1/resourceclaims")
            slices = await self.list_all("/apis/resource.k8s.io/v1/resourceslices")
        binds = Counter({key: len(state.nodes) for key, state in self.tracker.pods.items() if state.nodes})
        namespaces = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for step in self.plan.steps
                      if isinstance(step, ps.CreateNamespaces) for n in step.namespaces}
        problems = {} if self.which == "limit" else audit(nodes, pods, binds, claims, slices or (), namespaces)
        times = sorted(measurement.bound.values())
        bound = len(times)
        if measurement.expected is not None:  # a fixed set: to its last binding
            end = times[-1] if times else time.time()
        else:  # a steady state or a window: its length
            end = measurement.end or time.time()
        spent = self.meter.ms_per_pod(bound)
        harness_start, harness_end = self.harness_cpu
        spent["cpu_ms_per_pod_harness"] = ((harness_end or own_cpu_seconds()) - harness_start) * 1000 / bound if (
            bound and harness_start is not None) else float("nan")
        cpu_scheduler = spent["cpu_ms_per_pod_scheduler"] * bound / 1000 if bound else float("nan")
        existing = {pod_key(p) for p in pods}
        victims = [k for k, s in self.tracker.pods.items()
                   if s.deleted_at is not None and k not in self.harness_deleted]
        preemptors = sum(1 for k in measurement.bound if (self.created[k]["spec"].get("priority") or 0) > 0)
        unbindable = {k for k, pod in self.created.items() if ps.cannot_bind(pod, self.largest)}
        outcome: dict[str, Any] = {
            "measured": measurement.expected if measurement.expected is not None else len(measurement.keys),
            "measured_bound": bound,
            "pods_per_s": bound / (end - measurement.start) if bound else 0.0,
            "first_binding_s": times[0] - measurement.start if times else float("nan"),
            "duration_s": end - measurement.start,
            "peak_rss_mb": rss,
            "cpu_s_scheduler": cpu_scheduler,
            **spent,
            "victims": len(victims),
            "victims_under_pdb": sum(1 for k in victims if k in self.created and pdb_selected(self.created[k],
                                                                                              self.pdbs)),
            "cpu_ms_per_preemptor": cpu_scheduler * 1000 / preemptors if victims and preemptors else float("nan"),
            "unbound_expected": sum(1 for k in self.must_bind if k in existing and k not in self.harness_deleted
                                    and self.tracker.state(k).bound_at is None),
            "bound_unbindable": sum(1 for k in unbindable if self.tracker.state(k).bound_at is not None),
            "bound_twice": sum(1 for n in binds.values() if n > 1),
            "violations": sum(problems.values()),
            "problems": problems,
            "watch_restarts": self.tracker.restarts,
        }
        if self.which == "limit":
            outcome["violations"] = float("nan")  # round-robin bindings: not placements, not audited
        if outcome["unbound_expected"] or outcome["measured_bound"] < outcome["measured"]:
            events = await self.list_all("/api/v1/events")
            outcome["failed_scheduling"] = dict(Counter(e.get("message", "") for e in events
                                                        if e.get("reason") == "FailedScheduling").most_common(3))
        if self.metrics_after:
            outcome["kube_scheduler_metrics"] = metrics_delta(self.metrics_before, self.metrics_after)
        if self.attempts:
            outcome["placer_attempts"] = self.attempts
        return outcome

    async def list_all(self, path: str) -> list[Obj]:
        items, token = [], ""
        while True:
            page = await self.api.call("GET", f"{path}?limit=500" + (f"&continue={token}" if token else ""))
            items.extend(page["items"])
            token = page["metadata"].get("continue") or ""
            if not token:
                return items


def apiserver_args(plan: ps.Plan) -> str:
    """kube's suite's admission, and the API versions the plan's objects need that are off by default."""
    off_by_default = sorted(v for v in plan.api_versions if "/" in v and ("alpha" in v or "beta" in v))
    runtime = f" --runtime-config={','.join(f'{v}=true' for v in off_by_default)}" if off_by_default else ""
    return KUBE_SUITE_ADMISSION + runtime


async def one_run(plan: ps.Plan, which: str, mode: str, settings: Settings) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="suite-bench-") as tmp:
        workdir = Path(tmp)
        state = rb.plane_state(workdir / "control-plane")
        api = rb.Api(rb.SERVER)
        run: Run | None = None
        try:
            kubeconfig = rb.control_plane_up(settings.kube_bin, state, apiserver_args=apiserver_args(plan))
            await rb.install_profile(api, kubeconfig)
            run = Run(plan, which, mode, settings, api, kubeconfig, state, workdir)
            return await run.run()
        except Exception as error:  # a run that fails is a row's finding: the suite goes on
            tail = run.log_tail(1500) if run is not None else ""
            where = "" if isinstance(error, RunFailed | RuntimeError | aiohttp.ClientError | TimeoutError) else (
                "\n" + "".join(traceback.format_exception(error)[-3:]))  # a harness bug: where it broke
            log = f"\n{which} log tail:\n{tail}" if tail else ""
            return {"error": f"{type(error).__name__}: {error}{where}{log}"}
        finally:
            await api.close()
            if settings.logs is not None and (workdir / f"{which}.log").exists():
                settings.logs.mkdir(parents=True, exist_ok=True)
                target = settings.logs / f"{plan.choice.case.name}-{mode}-{which}-{int(time.time())}.log"
                target.write_bytes((workdir / f"{which}.log").read_bytes())
            rb.control_plane_down(settings.kube_bin, state)


# -- rows -------------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    numbers = [v for v in values if isinstance(v, int | float) and not math.isnan(v)]
    return statistics.median(numbers) if numbers else float("nan")


def row_medians(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The medians of the runs that finished (kube-scheduler's metrics and the problems of the
    last one); the errors of those that did not."""
    done = [r for r in runs if "error" not in r]
    row: dict[str, Any] = {"runs": len(runs), "errors": [r["error"] for r in runs if "error" in r]}
    if not done:
        return row
    row |= {key: _median([r[key] for r in done if key in r]) for key in ROW_MEDIANS}
    row["all_runs_pods_per_s"] = [round(r["pods_per_s"], 1) for r in done]
    for key in ("problems", "failed_scheduling", "kube_scheduler_metrics", "placer_attempts", "victims_under_pdb",
                "bound_twice"):
        if key in done[-1]:
            row[key] = done[-1][key]
    return row


def ratios(results: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Placer / kube-scheduler (pods/s), Placer / limit row (pods/s) and kube-scheduler / Placer
    (CPU per measured pod), where both sides have a figure."""
    def rate(which: str) -> float:
        return float(results.get(which, {}).get("pods_per_s", float("nan")))

    out: dict[str, float] = {}
    placer = rate("placer")
    if not math.isnan(placer):
        for other, name in (("kube-scheduler", "placer_over_kube"), ("limit", "placer_over_limit")):
            if not math.isnan(rate(other)) and rate(other) > 0:
                out[name] = round(placer / rate(other), 3)
        kube_cpu = results.get("kube-scheduler", {}).get("cpu_ms_per_pod_scheduler", float("nan"))
        placer_cpu = results["placer"].get("cpu_ms_per_pod_scheduler", float("nan"))
        if not math.isnan(kube_cpu) and not math.isnan(placer_cpu) and placer_cpu > 0:
            out["cpu_per_pod_kube_over_placer"] = round(kube_cpu / placer_cpu, 3)
    return out


def print_row(row: Mapping[str, Any]) -> None:
    print(f"\n{row['test_case']} {row['workload']} ({row['nodes']} nodes, {row.get('measured_pods', '?')} measured), "
          f"{row['mode']}", flush=True)
    if "skipped" in row:
        print(f"  skipped: {row['skipped']}", flush=True)
        return
    print(f"  {'':15} {'pods/s':>8} {'first':>7} {'RSS MB':>7} {'CPU s':>7} {'ms/pod':>7} {'apisrv':>7} "
          f"{'loader':>7} {'victims':>7} {'bound':>11} {'missing':>7} {'wrong':>5} {'viol.':>5}")
    for which, result in row["results"].items():
        if "pods_per_s" not in result:
            print(f"  {which:15} failed: {(result.get('errors') or ['?'])[0][:400]}", flush=True)
            continue
        print(f"  {which:15} {result['pods_per_s']:8.1f} {result['first_binding_s']:7.2f} {result['peak_rss_mb']:7.0f} "
              f"{result['cpu_s_scheduler']:7.2f} {result['cpu_ms_per_pod_scheduler']:7.2f} "
              f"{result['cpu_ms_per_pod_apiserver']:7.2f} {result['cpu_ms_per_pod_harness']:7.2f} "
              f"{result['victims']:7.0f} "
              f"{result['measured_bound']:5.0f}/{result['measured']:<5.0f} {result['unbound_expected']:7.0f} "
              f"{result['bound_unbindable']:5.0f} {result['violations']:5.0f}", flush=True)
    if row.get("ratios"):
        print("  " + ", ".join(f"{k} {v:.2f}" for k, v in row["ratios"].items()), flush=True)


def parse_selection(items: Sequence[str]) -> list[tuple[str, str | None]]:
    """`Name` or `Name/Entry` (a workload of the test case by its own name; entries may hold '/')."""
    return [(item.split("/", 1)[0], item.split("/", 1)[1] if "/" in item else None) for item in items]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-source", type=Path,
                        default=Path(os.environ.get("KUBE_SOURCE") or DEFAULT_KUBE_SOURCE),
                        help="the Kubernetes source holding test/integration/scheduler_perf: a folder or a git "
                        "directory (default: $KUBE_SOURCE, else ../.mirror/openshift+microshift/repo)")
    parser.add_argument("--kube-bin", type=Path,
                        default=Path(os.environ.get("KUBE_BIN") or rb.DEFAULT_KUBE_BIN),
                        help="folder of build.sh's kube-apiserver and kube-scheduler (default: $KUBE_BIN, else "
                        "../kube-bin-1.36)")
    parser.add_argument("--workloads", nargs="+", default=list(DEFAULT_WORKLOADS),
                        help="test cases (`Name`, or `Name/Entry` for one of its workloads); `all`: every one")
    parser.add_argument("--sizes", nargs="+", type=int, default=[500], help="nodes: 500, 5000 ...")
    parser.add_argument("--scale", type=float, default=1.0, help="every count scaled further (0.1: a quick check)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--schedulers", nargs="+", choices=SCHEDULERS, default=list(SCHEDULERS))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0, help="s for each op's pods to be bound")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="s between the contender's start and the first op (kube's suite starts its scheduler "
                             "before any op; default 0: the ops start at once)")
    parser.add_argument("--list", action="store_true", help="print the rows that would run, and stop")
    parser.add_argument("--logs", type=Path, help="keep each contender's log here")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        source = ps.KubeSource(args.kube_source)
        suite = ps.load_suite(source)
    except ps.SuiteError as error:
        print(f"the suite: {error}", file=sys.stderr)
        return 2
    if not args.list and not (args.kube_bin / "kube-apiserver").exists():
        parser.error(f"{args.kube_bin}: no kube-apiserver; --kube-bin (or $KUBE_BIN) is the folder of "
                     "../shared/realcluster/build.sh's binaries")
    binaries = (args.kube_bin / "kube-apiserver").exists()
    version = rb.kube_version(args.kube_bin.resolve()) if binaries else "v1.36"  # --list without them: v1.36
    minor = int(version.split(".")[1])
    defaults = ps.feature_defaults(source.read(ps.FEATURES_FILE), minor)
    names = list(suite) if args.workloads == ["all"] else args.workloads
    selection = parse_selection(names)
    unknown = [name for name, _ in selection if name not in suite]
    if unknown:
        parser.error(f"no such test case: {', '.join(unknown)} (the suite has {', '.join(sorted(suite))})")
    settings = Settings(kube_bin=args.kube_bin.resolve(), timeout=args.timeout, logs=args.logs, settle=args.settle)
    summary: dict[str, Any] = {"kube_version": version, "kube_source": source.describe(), "runs": args.runs,
                               "scale": args.scale, "rows": []}
    print(f"Kubernetes {version} ({args.kube_bin}); suite from {source.location} at {source.commit or 'its tree'}",
          flush=True)
    locked = False  # the lock is taken at the first run, held until the process ends
    for (name, entry), size in ((s, z) for s in selection for z in args.sizes):
        case = suite[name]
        try:
            choice = ps.choose(case, size, defaults, args.scale, entry)
            plan = ps.build_plan(source, choice)
        except (ps.Unsupported, ps.SuiteError) as error:  # SuiteError: kube's files malformed for this case
            row = {"test_case": name, "workload": entry or "-", "nodes": size, "mode": "-", "skipped": str(error)}
            summary["rows"].append(row)
            print_row(row)
            continue
        for mode in args.modes:
            row = {"test_case": name, "workload": choice.name, "size": size, "nodes": choice.nodes,
                   "params": dict(choice.params), "measured_pods": sum(s.count for s in plan.measured), "mode": mode}
            why = plan.waiting_unsupported() if mode == "waiting" else None
            if why:
                row["skipped"] = f"mode waiting: {why}"
            elif args.list:
                row["skipped"] = "(--list)"
            else:
                if not locked:
                    globals()["_lock"] = rb.hold_lock()  # its descriptor stays open: the lock is ours
                    locked = True
                    rb.precompile(ROOT)
                runs: dict[str, list[dict[str, Any]]] = {which: [] for which in args.schedulers}
                for _ in range(args.runs):
                    for which in args.schedulers:  # one after the other: all see the same machine
                        runs[which].append(asyncio.run(one_run(plan, which, mode, settings)))
                row["results"] = {which: row_medians(r) for which, r in runs.items()}
                row["ratios"] = ratios(row["results"])
            summary["rows"].append(row)
            print_row(row)
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop the plane
    sys.exit(main())
