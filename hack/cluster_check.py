"""Placer's whole-cluster scenarios on hollow nodes with the real kube-controller-manager
(`make check-cluster`; never part of `make test`: a fresh machine cannot build the plane).

A plane of `../shared/realcluster/` (etcd, kube-apiserver), `NODES` hollow nodes (kubemark: the real
kubelet code, fake runtime: admission, Running, graceful termination, node leases) and the real
kube-controller-manager (Deployments, ReplicaSets, StatefulSets, DaemonSets, the PV binder, node
lifecycle and taint-based evictions, disruption budgets). One fresh plane per configuration:

- `second`: kube-scheduler schedules `default-scheduler`; the scheduler under test schedules the
  workloads' `schedulerName: placer-check` (Placer with a SchedulerProfile, or a second kube-scheduler
  with that profile, for comparison);
- `only`: the scheduler under test is the cluster's only scheduler: Placer with a profile owning
  `default-scheduler` on kube-scheduler's own Lease (`kube-system/kube-scheduler`, as the static-pod
  manifest runs it), or kube-scheduler itself; the workloads set no `schedulerName`.

The scenarios (each in its own namespace, asserting on what the API server and the kubelets end up
holding: pods Running on their nodes, controllers' status, no kubelet rejection, no node over its
allocatable):

- `deployment`: a Deployment rolled out, scaled up and down;
- `full-capacity`: a Deployment filling the nodes exactly; one replica more stays Pending with
  kube-scheduler's message; a rolling update (maxSurge 0) at full capacity completes;
- `statefulset`: a StatefulSet on `WaitForFirstConsumer` local volumes: each pod on its volume's node,
  its claim bound by the PV controller;
- `drain`: a node cordoned and drained through the Eviction API under a PodDisruptionBudget (the
  budget refuses what it must, is never broken), the pods replaced elsewhere;
- `preemption`: a `system-cluster-critical` pod preempts one of the low-priority pods filling the
  nodes; the victim terminates through its kubelet (a preStop sleep); the preemptor runs there;
- `daemonset`: a DaemonSet's pods (the controller's `matchFields metadata.name` affinity, its
  tolerations) on every node, a cordoned one too;
- `kubelet-refusal`: a pod its kubelet refuses (`PodOSSelectorNodeLabelDoesNotMatch`): Placer reports
  it (a `RejectedByKubelet` event, its metric), the node stays usable;
- `profile-edit` (Placer only: kube-scheduler reads its configuration at start): the profile edited
  while the Deployment scales: later pods follow the new version;
- `node-dies` (last): a hollow kubelet killed; the node goes NotReady, its pods are evicted
  (`tolerationSeconds: 5`) and replaced on the live nodes, never on the dead one.

`--handover`: the switch of docs/replace-kube-scheduler.md measured: kube-scheduler leading on its
Lease, Placer following on the same Lease, pods streamed while kube-scheduler stops (Placer takes
over) and, back, while Placer stops (kube-scheduler takes over): every pod bound once, none left
pending, the longest creation-to-binding time and the gap from the stop to the next binding.

`--bursts RUNS`: the second-scheduler case counted: bursts of 20 pods (10 per scheduler, 200m) that
exactly fill four 1-cpu hollow nodes, three per run; the kubelet's rejections counted per run, for
kube-scheduler beside Placer, beside a second kube-scheduler, with the node pools split (kube's
profile by `addedAffinity`, Placer's by `NodeLabel`), and with Placer as the one scheduler.

    python hack/cluster_check.py [--kube-bin DIR] [--config second-placer ...] [--only NAME ...]
        [--handover] [--bursts RUNS] [--json FILE] [--logs DIR]

The plane's state folder and ports come from `RC_DIR`, `RC_PORT`, `RC_ETCD_PORT`, `RC_HOLLOW_PORT`
(defaults: /tmp/rc-cluster, 6743, 2679, 21000); every process started is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "bench"))

from real_bench import Api  # noqa: E402

Obj = dict[str, Any]

NODES = 4
NODE_CPU_MILLI = 1000  # a hollow node's allocatable cpu
SECOND_NAME = "placer-check"
DEFAULT_NAME = "default-scheduler"
PAUSE = "registry.k8s.io/pause:3.10"
LOW = "cluster-check-low"
CONFIGS = ("second-placer", "second-kube", "only-placer", "only-kube")
# a profile's default filters (API.md §2b), for a profile that adds one before them
DEFAULT_FILTERS = ("NodeUnschedulable", "NodeReady", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                   "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
                   "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures")
BURST_CONFIGS = ("second-placer", "second-kube", "split-pools", "split-taints", "one-scheduler")


class Failed(AssertionError):
    """What the cluster ended up holding is not what the scenario expects."""


def expect(condition: Any, message: str) -> None:
    if not condition:
        raise Failed(message)


# ----------------------------------------------------------------- pure helpers (unit-tested)


def milli(quantity: str | int | None) -> int:
    """A cpu quantity in millicores ("250m", "1", "0.5")."""
    if quantity is None:
        return 0
    text = str(quantity)
    if text.endswith("m"):
        return int(text[:-1])
    return round(float(text) * 1000)


def pod_cpu(pod: Mapping[str, Any]) -> int:
    """The pod's cpu request in millicores (its containers', as these scenarios write them)."""
    return sum(milli(((c.get("resources") or {}).get("requests") or {}).get("cpu"))
               for c in (pod.get("spec") or {}).get("containers") or [])


def rejections(pods: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(pod, node, reason) of every pod a kubelet refused: Failed, "Pod was rejected: ..."."""
    found = []
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") == "Failed" and str(status.get("message") or "").startswith("Pod was rejected: "):
            found.append((pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName") or "",
                          str(status.get("reason") or "")))
    return found


def overcommitted(pods: Iterable[Mapping[str, Any]], allocatable: Mapping[str, int]) -> dict[str, int]:
    """Nodes whose running (not ended) pods request more cpu than their allocatable: node -> millicores."""
    used: Counter[str] = Counter()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] += pod_cpu(pod)
    return {node: amount for node, amount in sorted(used.items()) if amount > allocatable.get(node, 0)}


def running_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp"):
            counts[pod["spec"]["nodeName"]] += 1
    return dict(sorted(counts.items()))


def pod_condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def burst_pods(burst: int, schedulers: tuple[str, str], per_scheduler: int, cpu: str,
               tolerations: Mapping[str, list[Obj]] | None = None) -> list[Obj]:
    """One burst's bare pods, the two schedulers' interleaved (created at once, they race);
    `tolerations` by schedulerName (node pools split by taints)."""
    pods = []
    for index in range(per_scheduler):
        for which, name in enumerate(schedulers):
            spec: Obj = {"schedulerName": name, "terminationGracePeriodSeconds": 0, "containers": [
                {"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}]}
            if tolerations and tolerations.get(name):
                spec["tolerations"] = tolerations[name]
            pods.append({"metadata": {"name": f"b{burst}-{'ab'[which]}-{index:02d}", "labels": {"burst": str(burst)}},
                         "spec": spec})
    return pods


def kube_scheduler_config(kubeconfig: Path, profiles: list[Obj], *, leader_elect: bool = False) -> Obj:
    """kube-scheduler's configuration: raised client limits (a fair fight), leader election only when
    it is the cluster's scheduler (on its own Lease, kube-system/kube-scheduler)."""
    election: Obj = {"leaderElect": leader_elect}
    if leader_elect:
        election.update(resourceNamespace="kube-system", resourceName="kube-scheduler")
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 10000},
            "leaderElection": election, "profiles": profiles}


def latency_summary(created: Mapping[str, float], bound: Mapping[str, float]) -> dict[str, Any]:
    """Creation-to-binding seconds: the longest and the median; which pods were never bound."""
    waits = sorted(bound[name] - created[name] for name in created if name in bound)
    return {"pods": len(created), "bound": len(waits), "unbound": sorted(set(created) - set(bound)),
            "max_s": round(waits[-1], 2) if waits else None,
            "median_s": round(waits[len(waits) // 2], 2) if waits else None}


def summary_table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """Scenario rows, configuration columns: ok / FAIL / n/a."""
    configs = list(results)
    names: list[str] = []
    for outcome in results.values():
        for name in outcome.get("scenarios", {}):
            if name not in names:
                names.append(name)
    lines = ["| scenario | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    for name in names:
        cells = []
        for config in configs:
            found = results[config].get("scenarios", {}).get(name)
            cells.append("" if found is None else "n/a" if found.get("skipped") else "ok" if found["ok"] else "FAIL")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------- the plane


def _realcluster_dir() -> Path:
    """`shared/realcluster` beside the checkout (or an ancestor's: a worktree is one level deeper)."""
    for base in (ROOT.parent, *ROOT.parents):
        candidate = base / "shared" / "realcluster"
        if (candidate / "realcluster.sh").exists():
            return candidate
    raise SystemExit("no shared/realcluster/realcluster.sh beside this checkout")


class Plane:
    """etcd, kube-apiserver, the hollow nodes and kube-controller-manager, in RC_DIR on RC_* ports."""

    def __init__(self, kube_bin: Path) -> None:
        self.kube_bin = kube_bin
        self.scripts = _realcluster_dir()
        self.dir = Path(os.environ.get("RC_DIR", "/tmp/rc-cluster"))
        self.port = int(os.environ.get("RC_PORT", "6743"))
        self.etcd_port = int(os.environ.get("RC_ETCD_PORT", "2679"))
        self.hollow_port = int(os.environ.get("RC_HOLLOW_PORT", "21000"))
        self.env = {**os.environ, "KUBE_BIN": str(kube_bin), "RC_DIR": str(self.dir), "RC_PORT": str(self.port),
                    "RC_ETCD_PORT": str(self.etcd_port), "RC_HOLLOW_PORT": str(self.hollow_port)}
        self.kubeconfig = self.dir / "admin.kubeconfig"

    def script(self, name: str, *args: str, check: bool = True) -> str:
        done = subprocess.run(["bash", str(self.scripts / name), *args], env=self.env, capture_output=True,
                              text=True)
        if check and done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def up(self) -> None:
        self.down()
        self.script("realcluster.sh", "up")
        self.script("hollownodes.sh", "up", str(NODES))
        self.script("hollownodes.sh", "kcm")

    def down(self) -> None:
        self.script("hollownodes.sh", "down", check=False)
        self.script("realcluster.sh", "down", check=False)

    def kill_node(self, name: str) -> None:
        """Stop one hollow kubelet (the node object stays, as when a machine dies)."""
        pid_file = self.dir / "hollow" / f"{name}.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
        pid_file.unlink(missing_ok=True)

    def kubectl(self, *args: str) -> str:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args], check=True,
                              capture_output=True, text=True).stdout


class Processes:
    """The schedulers started for a configuration, stopped (and their logs kept) at the end."""

    def __init__(self, plane: Plane, logs: Path) -> None:
        self.plane = plane
        self.logs = logs
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        logs.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, command: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - the child holds it
        process = subprocess.Popen(command, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
        self.running[name] = process
        return process

    def kube_scheduler(self, name: str, profiles: list[Obj], port: int, *, leader_elect: bool = False
                       ) -> subprocess.Popen[bytes]:
        config = self.logs / f"{name}.yaml"
        config.write_text(yaml.safe_dump(kube_scheduler_config(self.plane.kubeconfig, profiles,
                                                               leader_elect=leader_elect)))
        kubeconfig = str(self.plane.kubeconfig)
        return self.start(name, [str(self.plane.kube_bin / "kube-scheduler"), f"--config={config}",
                                 f"--secure-port={port}", "--bind-address=127.0.0.1",
                                 f"--cert-dir={self.logs / (name + '-certs')}", "--authentication-skip-lookup",
                                 f"--authentication-kubeconfig={kubeconfig}",
                                 f"--authorization-kubeconfig={kubeconfig}", "--v=1"])

    def placer(self, name: str, port: int, *, lease: tuple[str, str] | None = None) -> subprocess.Popen[bytes]:
        """`placer run` as the static-pod manifest runs it (kube-scheduler's Lease when `lease`)."""
        command = [str(ROOT / ".venv" / "bin" / "placer"), "run", "--kubeconfig", str(self.plane.kubeconfig),
                   "--metrics-port", str(port), "--bind-address", "127.0.0.1"]
        if lease is None:
            command.append("--no-leader-elect")
        else:
            command += ["--leader-elect-resource-namespace", lease[0], "--leader-elect-resource-name", lease[1]]
        return self.start(name, command, {"POD_NAMESPACE": "kube-system", "POD_NAME": name})

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 20) -> float:
        """Stop one (SIGTERM: its graceful exit, the Lease released); the seconds it took."""
        process = self.running.pop(name, None)
        if process is None:
            return 0.0
        started = time.monotonic()
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return time.monotonic() - started

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)


# ----------------------------------------------------------------- the scenarios' client


class Cluster:
    """The API client, the configuration under test, and what the scenarios share."""

    def __init__(self, api: Api, plane: Plane, config: str, processes: Processes) -> None:
        self.api = api
        self.plane = plane
        self.config = config
        self.mode, self.who = config.split("-")
        self.processes = processes
        # the workloads' schedulerName: the second scheduler's, or none at all (the API server's default)
        self.scheduler = SECOND_NAME if self.mode == "second" else None
        self.profile = SECOND_NAME if self.mode == "second" else DEFAULT_NAME
        self.allocatable: dict[str, int] = {}

    async def until(self, what: Callable[[], Awaitable[Any]], timeout: float, label: str,
                    interval: float = 0.25) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = await what()
            if found:
                return found
            if time.monotonic() > deadline:
                raise Failed(f"{label}: not within {timeout:g} s")
            await asyncio.sleep(interval)

    async def get(self, path: str) -> Any:
        return await self.api.call("GET", path, allow_missing=True)

    async def create(self, path: str, body: Obj) -> Any:
        return await self.api.call("POST", path, body)

    async def patch(self, path: str, body: Obj, kind: str = "application/merge-patch+json") -> Any:
        return await self.api.call("PATCH", path, body, kind)

    async def pods(self, namespace: str, selector: str = "") -> list[Obj]:
        query = f"?labelSelector={selector}" if selector else ""
        found = await self.get(f"/api/v1/namespaces/{namespace}/pods{query}")
        return list((found or {}).get("items") or [])

    async def nodes(self) -> list[Obj]:
        return list(((await self.get("/api/v1/nodes")) or {}).get("items") or [])

    async def live_nodes(self) -> list[str]:
        names = []
        for node in await self.nodes():
            ready = next((c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"), {})
            if ready.get("status") == "True":
                names.append(node["metadata"]["name"])
        return sorted(names)

    async def namespace(self, name: str) -> str:
        await self.create("/api/v1/namespaces", {"metadata": {"name": name}})
        return name

    async def drop_namespace(self, name: str) -> None:
        """Delete it and wait until it is gone; pods stuck Terminating on a dead node are force-deleted."""
        await self.api.call("DELETE", f"/api/v1/namespaces/{name}", allow_missing=True)

        async def gone() -> bool:
            for pod in await self.pods(name):
                if pod["metadata"].get("deletionTimestamp") and (pod.get("spec") or {}).get("nodeName") not in (
                        await self.live_nodes()):
                    await self.api.call("DELETE", f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}",
                                        {"gracePeriodSeconds": 0}, allow_missing=True)
            return await self.get(f"/api/v1/namespaces/{name}") is None

        await self.until(gone, 120, f"namespace {name} deleted")

    def template(self, labels: Mapping[str, str], cpu: str, **spec: Any) -> Obj:
        pod_spec: Obj = {"terminationGracePeriodSeconds": 5, "containers": [
            {"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}}}], **spec}
        if self.scheduler:
            pod_spec["schedulerName"] = self.scheduler
        return {"metadata": {"labels": dict(labels)}, "spec": pod_spec}

    async def deployment(self, namespace: str, name: str, replicas: int, cpu: str, **extra: Any) -> Obj:
        spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": self.template({"app": name}, cpu, **extra.pop("pod", {})), **extra}
        return await self.create(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                                 {"metadata": {"name": name}, "spec": spec})

    async def scale(self, namespace: str, name: str, replicas: int) -> None:
        await self.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", {"spec": {"replicas": replicas}})

    async def rolled_out(self, namespace: str, name: str, replicas: int, timeout: float = 90) -> list[Obj]:
        """Until the Deployment's status says every replica is updated and available and exactly
        `replicas` of its pods run; returns them."""
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"

        async def done() -> list[Obj] | None:
            deployment = await self.get(path)
            status = deployment.get("status") or {}
            if (status.get("observedGeneration") != deployment["metadata"]["generation"]
                    or status.get("updatedReplicas") != replicas or status.get("availableReplicas") != replicas
                    or status.get("replicas") != replicas):
                return None
            pods = [p for p in await self.pods(namespace, f"app={name}") if not p["metadata"].get("deletionTimestamp")]
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            return running if len(running) == replicas == len(pods) else None

        return await self.until(done, timeout, f"deployment {name} at {replicas} replicas")

    async def sound(self, namespace: str) -> dict[str, Any]:
        """What every scenario ends with: no kubelet rejection, no node over its allocatable."""
        pods = await self.pods(namespace)
        refused = rejections(pods)
        expect(not refused, f"kubelet rejections: {refused}")
        over = overcommitted(await self.all_pods(), self.allocatable)
        expect(not over, f"nodes over their allocatable cpu: {over}")
        return {"running_by_node": running_by_node(pods)}

    async def all_pods(self) -> list[Obj]:
        return list(((await self.get("/api/v1/pods")) or {}).get("items") or [])

    async def scheduled_by(self, namespace: str) -> set[str]:
        """Who wrote the Scheduled events of the namespace's pods (events.k8s.io reportingController)."""
        events = (await self.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")) or {}
        return {e.get("reportingController") or "" for e in events.get("items") or [] if e.get("reason") == "Scheduled"}


# ----------------------------------------------------------------- scenarios


async def deployment_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-deployment")
    await c.deployment(ns, "web", 6, "200m")
    started = time.monotonic()
    await c.rolled_out(ns, "web", 6)
    rolled = time.monotonic() - started
    await c.scale(ns, "web", 12)
    pods = await c.rolled_out(ns, "web", 12)
    spread = running_by_node(pods)
    expect(len(spread) == NODES, f"12 replicas on {len(spread)} of {NODES} nodes: {spread}")
    await c.scale(ns, "web", 3)
    await c.rolled_out(ns, "web", 3)
    facts = await c.sound(ns)
    return {"rollout_s": round(rolled, 1), "spread_at_12": spread, "scheduled_by": sorted(await c.scheduled_by(ns)),
            **facts}


async def full_capacity_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-full")
    replicas = NODES * NODE_CPU_MILLI // 500 - 0  # 500m each: the nodes' cpu exactly (no other pod holds any)
    rolling = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    await c.deployment(ns, "full", replicas, "500m", strategy=rolling)
    await c.rolled_out(ns, "full", replicas)
    await c.scale(ns, "full", replicas + 1)

    async def pending_message() -> str | None:
        for pod in await c.pods(ns, "app=full"):
            condition = pod_condition(pod, "PodScheduled")
            if not pod["spec"].get("nodeName") and condition and condition.get("reason") == "Unschedulable":
                return str(condition.get("message"))
        return None

    message = await c.until(pending_message, 30, "the extra replica's Unschedulable condition")
    # kube-scheduler v1.36.2's words (DynamicResources' PostFilter speaks before DefaultPreemption's)
    expected = (f"0/{NODES} nodes are available: {NODES} Insufficient cpu. no new claims to deallocate, preemption: "
                f"0/{NODES} nodes are available: {NODES} No preemption victims found for incoming pod.")
    expect(message == expected, f"message {message!r}, kube-scheduler's is {expected!r}")
    await c.scale(ns, "full", replicas)
    await c.rolled_out(ns, "full", replicas)
    started = time.monotonic()
    await c.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/full",
                  {"spec": {"template": {"metadata": {"annotations": {"check/rev": "2"}}}}})
    pods = await c.rolled_out(ns, "full", replicas, timeout=180)
    expect(all((p["metadata"].get("annotations") or {}).get("check/rev") == "2" for p in pods), "old pods remain")
    facts = await c.sound(ns)
    return {"replicas": replicas, "unschedulable_message": message,
            "rolling_update_s": round(time.monotonic() - started, 1), **facts}


async def statefulset_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-sts")
    nodes = (await c.live_nodes())[1:4]  # three of them hold a local volume each
    await c.create("/apis/storage.k8s.io/v1/storageclasses", {
        "metadata": {"name": "cc-local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"})
    for node in nodes:
        await c.create("/api/v1/persistentvolumes", {"metadata": {"name": f"cc-local-{node}"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "cc-local",
            "persistentVolumeReclaimPolicy": "Retain", "local": {"path": "/tmp"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}})
    await c.create(f"/api/v1/namespaces/{ns}/services", {"metadata": {"name": "db"}, "spec": {
        "clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]}})
    template = c.template({"app": "db"}, "100m")
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    await c.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", {"metadata": {"name": "db"}, "spec": {
        "replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": template,
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "cc-local",
            "resources": {"requests": {"storage": "1Gi"}}}}]}})

    async def placed() -> dict[str, str] | None:
        pods = await c.pods(ns, "app=db")
        running = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["status"].get("phase") == "Running"}
        return running if len(running) == 3 else None

    where = await c.until(placed, 120, "3 StatefulSet pods Running")
    claims = {}
    for index in range(3):
        claim = await c.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data-db-{index}")
        expect(claim["status"].get("phase") == "Bound", f"claim data-db-{index}: {claim['status']}")
        volume = claim["spec"]["volumeName"]
        claims[f"db-{index}"] = volume
        expect(volume == f"cc-local-{where[f'db-{index}']}", f"db-{index} on {where[f'db-{index}']}, volume {volume}")
    facts = await c.sound(ns)
    await c.drop_namespace(ns)
    for node in nodes:
        await c.api.call("DELETE", f"/api/v1/persistentvolumes/cc-local-{node}", allow_missing=True)
    await c.api.call("DELETE", "/apis/storage.k8s.io/v1/storageclasses/cc-local", allow_missing=True)
    return {"pods": where, "volumes": claims, **facts}


READY_GATE = "cluster-check/ready"


async def mark_ready(c: Cluster, ns: str, after: float, stop: asyncio.Event) -> None:
    """The readiness gate's condition set True on each pod Running for `after` seconds (hollow kubelets
    ignore probes and make pods Ready at once: the gate holds a replacement unready a while, as a
    real application's probe would, so the budget has something to refuse)."""
    seen: dict[str, float] = {}
    while not stop.is_set():
        for pod in await c.pods(ns):
            name = pod["metadata"]["name"]
            gate = pod_condition(pod, READY_GATE) or {}
            if pod["status"].get("phase") != "Running" or gate.get("status") == "True":
                continue
            first = seen.setdefault(name, time.monotonic())
            if time.monotonic() - first >= after:
                await c.api.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {"conditions": [
                    {"type": READY_GATE, "status": "True", "lastTransitionTime": _now()}]}},
                    "application/strategic-merge-patch+json", allow_missing=True)
        await asyncio.sleep(0.2)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def evict(c: Cluster, ns: str, name: str) -> int:
    """POST the pod's eviction once (no retry: a 429 is the budget's refusal); the status."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    async with c.api.session.post(f"{c.api.server}/api/v1/namespaces/{ns}/pods/{name}/eviction",
                                  json=body) as response:
        await response.read()
        return response.status


async def drain_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-drain")
    stop = asyncio.Event()
    marker = asyncio.create_task(mark_ready(c, ns, 3.0, stop))
    node = ""
    try:
        await c.deployment(ns, "app", 6, "200m", pod={"readinessGates": [{"conditionType": READY_GATE}]})
        pods = await c.rolled_out(ns, "app", 6)
        await c.create(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {"metadata": {"name": "app"},
                       "spec": {"minAvailable": 5, "selector": {"matchLabels": {"app": "app"}}}})
        await c.until(lambda: _pdb_allows(c, ns, "app"), 30, "the budget's status")
        node = max(running_by_node(pods).items(), key=lambda item: (item[1], item[0]))[0]
        expect(running_by_node(pods)[node] >= 2, f"no node holds two pods: {running_by_node(pods)}")
        await c.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
        refused = 0
        least_ready = 6
        deadline = time.monotonic() + 120
        while True:  # kubectl drain's loop: evict what is left, the budget refusing with 429
            pods = await c.pods(ns, "app=app")
            ready = sum(1 for p in pods if (pod_condition(p, "Ready") or {}).get("status") == "True"
                        and not p["metadata"].get("deletionTimestamp"))
            least_ready = min(least_ready, ready)
            left = [p for p in pods if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")]
            if not left:
                break
            expect(time.monotonic() < deadline, f"node {node} not drained within 120 s")
            for pod in left:
                status = await evict(c, ns, pod["metadata"]["name"])
                expect(status in (201, 200, 429), f"eviction of {pod['metadata']['name']}: {status}")
                refused += status == 429
            await asyncio.sleep(0.5)
        pods = await c.rolled_out(ns, "app", 6)
        on_node = [p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] == node]
        expect(not on_node, f"pods placed on the cordoned node {node}: {on_node}")
        expect(refused > 0, "the budget refused no eviction")
        expect(least_ready >= 5, f"the budget was broken: {least_ready} ready")
        facts = await c.sound(ns)
    finally:
        stop.set()
        await marker
        if node:
            await c.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
    return {"drained": node, "evictions_refused_by_budget": refused, "least_ready": least_ready, **facts}


async def _pdb_allows(c: Cluster, ns: str, name: str) -> bool:
    budget = await c.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}")
    return (budget.get("status") or {}).get("observedGeneration") == budget["metadata"]["generation"]


async def preemption_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-preempt")
    await c.api.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                     {"metadata": {"name": LOW}, "value": 100}, allow_status=(409,))
    fillers = NODES * NODE_CPU_MILLI // 500
    for index in range(fillers):
        body = c.template({"app": "low"}, "500m", priorityClassName=LOW, terminationGracePeriodSeconds=10)
        body["spec"]["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 3}}}
        body["metadata"]["name"] = f"low-{index}"
        await c.create(f"/api/v1/namespaces/{ns}/pods", body)

    async def all_running() -> bool:
        return sum(1 for p in await c.pods(ns, "app=low") if p["status"].get("phase") == "Running") == fillers

    await c.until(all_running, 60, f"{fillers} low-priority pods Running")
    critical = c.template({"app": "critical"}, "500m", priorityClassName="system-cluster-critical")
    critical["metadata"]["name"] = f"critical-{c.config}"
    system = "kube-system"  # (the system classes are kube-system's)
    await c.create(f"/api/v1/namespaces/{system}/pods", critical)
    path = f"/api/v1/namespaces/{system}/pods/critical-{c.config}"
    nominated: set[str] = set()
    terminating: dict[str, str] = {}

    async def running() -> Obj | None:
        pod = await c.get(path)
        if pod["status"].get("nominatedNodeName"):
            nominated.add(pod["status"]["nominatedNodeName"])
        for low in await c.pods(ns, "app=low"):
            if low["metadata"].get("deletionTimestamp"):
                terminating[low["metadata"]["name"]] = low["spec"]["nodeName"]
        return pod if pod["status"].get("phase") == "Running" else None

    try:
        pod = await c.until(running, 90, "the critical pod Running", interval=0.1)
        node = pod["spec"]["nodeName"]
        lows = await c.pods(ns, "app=low")
        gone = [f"low-{i}" for i in range(fillers) if not any(p["metadata"]["name"] == f"low-{i}" for p in lows)]
        victims = sorted(set(gone) | set(terminating))
        expect(len(victims) == 1, f"victims {victims}")
        expect(terminating.get(victims[0], node) == node, f"the victim ran on {terminating}, the pod went to {node}")
        expect(not nominated or nominated == {node}, f"nominated {nominated}, bound to {node}")
        events = (await c.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")) or {}
        preempted = [e for e in events.get("items") or [] if e.get("reason") == "Preempted"]
        expect(preempted, "no Preempted event")
        still = sum(1 for p in lows
                    if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))
        expect(still == fillers - 1, f"{still} low-priority pods still run")
        facts = await c.sound(ns)
    finally:
        await c.api.call("DELETE", path, allow_missing=True)
    return {"node": node, "victim": victims[0], "seen_terminating": bool(terminating), "nominated": sorted(nominated),
            **facts}


async def daemonset_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-ds")
    cordoned = (await c.live_nodes())[-1]
    await c.patch(f"/api/v1/nodes/{cordoned}", {"spec": {"unschedulable": True}})
    try:
        await c.create(f"/apis/apps/v1/namespaces/{ns}/daemonsets", {"metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "agent"}}, "template": c.template({"app": "agent"}, "100m")}})
        live = await c.live_nodes()

        async def everywhere() -> list[Obj] | None:
            ds = await c.get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/agent")
            status = ds.get("status") or {}
            pods = [p for p in await c.pods(ns, "app=agent") if p["status"].get("phase") == "Running"]
            if status.get("numberAvailable") == len(live) == len(pods) == status.get("desiredNumberScheduled"):
                return pods
            return None

        pods = await c.until(everywhere, 90, f"a DaemonSet pod Running on each of {len(live)} nodes")
        where = running_by_node(pods)
        expect(where == dict.fromkeys(live, 1), f"one per node: {where}")
        for pod in pods:
            terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            fields = terms["nodeSelectorTerms"][0]["matchFields"][0]
            expect(fields["key"] == "metadata.name" and fields["values"] == [pod["spec"]["nodeName"]],
                   f"{pod['metadata']['name']}: {fields}")
        facts = await c.sound(ns)
    finally:
        await c.patch(f"/api/v1/nodes/{cordoned}", {"spec": {"unschedulable": None}})
    return {"nodes": where, "cordoned_node_covered": cordoned in where, **facts}


async def kubelet_refusal_scenario(c: Cluster) -> Obj:
    """A pod whose `kubernetes.io/os` label its node's kubelet refuses (PodOSSelectorNodeLabelDoesNotMatch:
    no scheduler reads pod labels for that): Failed by the kubelet; Placer reports it (a
    RejectedByKubelet event naming the node and the reason, its metric); kube-scheduler says nothing."""
    ns = await c.namespace("cc-refusal")
    body = c.template({"app": "refused", "kubernetes.io/os": "windows"}, "100m")
    body["metadata"]["name"] = "refused"
    await c.create(f"/api/v1/namespaces/{ns}/pods", body)

    async def failed() -> Obj | None:
        pod = await c.get(f"/api/v1/namespaces/{ns}/pods/refused")
        return pod if pod["status"].get("phase") == "Failed" else None

    pod = await c.until(failed, 60, "the pod refused by its kubelet")
    node, reason = pod["spec"]["nodeName"], pod["status"].get("reason")
    expect(reason == "PodOSSelectorNodeLabelDoesNotMatch", f"the kubelet's reason: {reason}")
    expect(str(pod["status"].get("message")).startswith("Pod was rejected: "), pod["status"].get("message"))
    found: Obj = {"node": node, "reason": reason}
    if c.who == "placer":
        async def reported() -> list[Obj]:
            events = (await c.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")) or {}
            return [e for e in events.get("items") or [] if e.get("reason") == "RejectedByKubelet"]

        [event] = await c.until(reported, 30, "Placer's RejectedByKubelet event")
        expect(event["note"].startswith(f"Rejected by the kubelet on node {node}: {reason}: "), event["note"])
        expect(event["type"] == "Warning" and event["reportingController"] == "placer.dev/scheduler", event)
        metric = await _placer_metric(c.plane.hollow_port + PLACER_PORT_OFFSET)
        expect(metric >= 1, f"placer_kubelet_rejections_total {metric}")
        found.update(event=event["note"], metric=metric)
    # the node is as the scheduler sees it: the next pod may go there
    other = c.template({"app": "next"}, "100m", nodeSelector={"kubernetes.io/hostname": node})
    other["metadata"]["name"] = "next"
    await c.create(f"/api/v1/namespaces/{ns}/pods", other)

    async def running() -> bool:
        return (await c.get(f"/api/v1/namespaces/{ns}/pods/next"))["status"].get("phase") == "Running"

    await c.until(running, 30, f"the next pod Running on {node}")
    await c.api.call("DELETE", f"/api/v1/namespaces/{ns}/pods/refused", allow_missing=True)
    facts = await c.sound(ns)
    return {**found, **facts}


async def profile_edit_scenario(c: Cluster) -> Obj:
    if c.who != "placer":
        return {"skipped": "kube-scheduler reads its configuration at start only"}
    ns = await c.namespace("cc-edit")
    path = f"/apis/placer.dev/v1alpha1/schedulerprofiles/{c.profile}"
    before = await c.get(path)
    await c.deployment(ns, "app", 4, "100m")
    await c.rolled_out(ns, "app", 4)
    zone0 = sorted(n["metadata"]["name"] for n in await c.nodes()
                   if n["metadata"]["labels"].get("topology.kubernetes.io/zone") == "zone-0")
    filters = [*({"name": name} for name in DEFAULT_FILTERS),
               {"name": "NodeLabel", "args": {"forbidden": {"topology.kubernetes.io/zone": "zone-0"}}}]
    try:
        await c.patch(path, {"spec": {"filters": filters}})
        generation = (await c.get(path))["metadata"]["generation"]

        async def loaded() -> bool:
            status = (await c.get(path)).get("status") or {}
            return any(cond.get("type") == "Ready" and cond.get("status") == "True"
                       and cond.get("observedGeneration") == generation for cond in status.get("conditions") or [])

        await c.until(loaded, 30, f"profile generation {generation} Ready")
        old = {p["metadata"]["name"] for p in await c.pods(ns, "app=app")}
        await c.scale(ns, "app", 10)
        pods = await c.rolled_out(ns, "app", 10)
        new = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] not in old}
        expect(len(new) == 6, f"{len(new)} new pods")
        expect(not set(new.values()) & set(zone0), f"pods placed after the edit in zone-0 ({zone0}): {new}")
        facts = await c.sound(ns)
    finally:
        await c.api.call("PUT", path, {**before, "metadata": {**before["metadata"], "resourceVersion": (
            await c.get(path))["metadata"]["resourceVersion"]}})
    return {"generation": generation, "after_edit": new, **facts}


async def node_dies_scenario(c: Cluster) -> Obj:
    ns = await c.namespace("cc-dies")
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
                   for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
    await c.deployment(ns, "app", 4, "200m", pod={"tolerations": tolerations})
    pods = await c.rolled_out(ns, "app", 4)
    dead = max(running_by_node(pods).items(), key=lambda item: (item[1], item[0]))[0]
    there_before = {p["metadata"]["uid"] for p in await c.all_pods() if p["spec"].get("nodeName") == dead}
    started = time.monotonic()
    c.plane.kill_node(dead)

    async def not_ready() -> bool:
        return dead not in await c.live_nodes()

    await c.until(not_ready, 120, f"{dead} NotReady")
    noticed = time.monotonic() - started
    # a node agent tolerating everything (a CNI's DaemonSet pod does) still goes to the NotReady node
    agent = c.template({"app": "agent"}, "10m", tolerations=[{"operator": "Exists"}],
                       nodeSelector={"kubernetes.io/hostname": dead})
    agent["metadata"]["name"] = "agent"
    await c.create(f"/api/v1/namespaces/{ns}/pods", agent)

    async def agent_bound() -> str | None:
        return ((await c.get(f"/api/v1/namespaces/{ns}/pods/agent")).get("spec") or {}).get("nodeName")

    expect(await c.until(agent_bound, 30, "the pod tolerating everything bound") == dead, "agent not on the dead node")

    async def replaced() -> list[Obj] | None:
        running = [p for p in await c.pods(ns, "app=app") if p["status"].get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp") and p["spec"]["nodeName"] != dead]
        return running if len(running) == 4 else None

    await c.until(replaced, 120, "4 pods Running on the live nodes")
    recovered = time.monotonic() - started
    late = [p["metadata"]["name"] for p in await c.all_pods() if p["spec"].get("nodeName") == dead
            and p["metadata"]["uid"] not in there_before and p["metadata"]["name"] != "agent"]
    expect(not late, f"pods bound to the dead node {dead} after it died: {late}")
    facts = await c.sound(ns)
    return {"dead": dead, "not_ready_after_s": round(noticed, 1), "replaced_after_s": round(recovered, 1),
            "tolerating_pod_bound_there": True, **facts}


SCENARIOS: dict[str, Callable[[Cluster], Awaitable[Obj]]] = {
    "deployment": deployment_scenario,
    "full-capacity": full_capacity_scenario,
    "statefulset": statefulset_scenario,
    "drain": drain_scenario,
    "preemption": preemption_scenario,
    "daemonset": daemonset_scenario,
    "kubelet-refusal": kubelet_refusal_scenario,
    "profile-edit": profile_edit_scenario,
    "node-dies": node_dies_scenario,
}

# ports on loopback: kube-scheduler's secure ports and Placer's health/metrics port, above the kubelets'
KUBE_PORT_OFFSET, SECOND_KUBE_PORT_OFFSET, PLACER_PORT_OFFSET, SECOND_PLACER_PORT_OFFSET = 800, 801, 802, 803


async def wait_plane(c: Cluster) -> None:
    async def ready() -> bool:
        return len(await c.live_nodes()) == NODES

    await c.until(ready, 120, f"{NODES} hollow nodes Ready")
    for node in await c.nodes():
        c.allocatable[node["metadata"]["name"]] = milli(node["status"]["allocatable"]["cpu"])
    c.plane.kubectl("apply", "-f", str(ROOT / "crds"))
    c.plane.kubectl("wait", "--for=condition=Established", "crd/schedulerprofiles.placer.dev", "--timeout=60s")


async def profile(c: Cluster, scheduler_name: str, spec: Obj | None = None) -> None:
    await c.api.call("POST", "/apis/placer.dev/v1alpha1/schedulerprofiles", {
        "apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": scheduler_name},
        "spec": {"schedulerName": scheduler_name, **(spec or {})}})


async def start_schedulers(c: Cluster) -> None:
    """The configuration's schedulers, started once the plane is up."""
    base = c.plane.hollow_port
    p = c.processes
    if c.mode == "second":
        p.kube_scheduler("kube-scheduler", [{"schedulerName": DEFAULT_NAME}], base + KUBE_PORT_OFFSET)
        if c.who == "placer":
            await profile(c, SECOND_NAME)
            p.placer("placer", base + PLACER_PORT_OFFSET)
        else:
            p.kube_scheduler("kube-scheduler-second", [{"schedulerName": SECOND_NAME}], base + SECOND_KUBE_PORT_OFFSET)
    elif c.who == "placer":
        await profile(c, DEFAULT_NAME)
        p.placer("placer", base + PLACER_PORT_OFFSET, lease=("kube-system", "kube-scheduler"))
    else:
        p.kube_scheduler("kube-scheduler", [{"schedulerName": DEFAULT_NAME}], base + KUBE_PORT_OFFSET,
                         leader_elect=True)
    await asyncio.sleep(5)  # started and synced (Placer: its first resync; kube-scheduler: its informers)


async def run_config(kube_bin: Path, config: str, names: list[str], logs: Path) -> Obj:
    plane = Plane(kube_bin)
    processes = Processes(plane, logs / config)
    outcome: Obj = {"scenarios": {}}
    try:
        plane.up()
        api = Api(f"https://127.0.0.1:{plane.port}")
        try:
            c = Cluster(api, plane, config, processes)
            await wait_plane(c)
            await start_schedulers(c)
            for name in names:
                started = time.monotonic()
                try:
                    found = await SCENARIOS[name](c)
                    result = {"ok": True, **found}
                except Failed as error:
                    result = {"ok": False, "error": str(error)}
                except Exception as error:  # a scenario's crash is its failure; the others still run
                    result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
                result["seconds"] = round(time.monotonic() - started, 1)
                with contextlib.suppress(Exception):
                    await c.drop_namespace(f"cc-{_ns(name)}")
                outcome["scenarios"][name] = result
                mark = "n/a " if result.get("skipped") else "ok  " if result["ok"] else "FAIL"
                detail = {k: v for k, v in result.items() if k not in ("ok",)}
                print(f"{config:14} {mark} {name:14} {json.dumps(detail)}", flush=True)
        finally:
            await api.close()
    finally:
        processes.stop_all()
        plane.down()
    return outcome


def _ns(name: str) -> str:
    return {"deployment": "deployment", "full-capacity": "full", "statefulset": "sts", "drain": "drain",
            "preemption": "preempt", "daemonset": "ds", "kubelet-refusal": "refusal", "profile-edit": "edit",
            "node-dies": "dies"}[name]


# ----------------------------------------------------------------- the switch, measured


async def stream(c: Cluster, ns: str, prefix: str, count: int, rate: float, created: dict[str, float]) -> None:
    for index in range(count):
        name = f"{prefix}-{index:03d}"
        body = c.template({"app": prefix}, "10m")
        body["metadata"]["name"] = name
        created[name] = time.time()
        await c.create(f"/api/v1/namespaces/{ns}/pods", body)
        await asyncio.sleep(1 / rate)


async def bound_times(c: Cluster, ns: str, bound: dict[str, float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        now = time.time()
        for pod in await c.pods(ns):
            if pod["spec"].get("nodeName") and pod["metadata"]["name"] not in bound:
                bound[pod["metadata"]["name"]] = now
        await asyncio.sleep(0.1)


async def handover(kube_bin: Path, logs: Path, rate: float = 4.0, count: int = 40) -> Obj:
    """kube-scheduler -> Placer and back on kube-scheduler's Lease, pods streamed meanwhile."""
    plane = Plane(kube_bin)
    processes = Processes(plane, logs / "handover")
    results: Obj = {}
    base = plane.hollow_port
    try:
        plane.up()
        api = Api(f"https://127.0.0.1:{plane.port}")
        try:
            c = Cluster(api, plane, "only-placer", processes)
            await wait_plane(c)
            await profile(c, DEFAULT_NAME)
            lease = ("kube-system", "kube-scheduler")
            for direction, first, second in (("kube-scheduler -> placer", "kube-scheduler", "placer"),
                                             ("placer -> kube-scheduler", "placer", "kube-scheduler")):
                for which in (first, second):  # the one leading now first, the other following
                    if which == "placer":
                        processes.placer("placer", base + PLACER_PORT_OFFSET, lease=lease)
                    else:
                        processes.kube_scheduler("kube-scheduler", [{"schedulerName": DEFAULT_NAME}],
                                                 base + KUBE_PORT_OFFSET, leader_elect=True)
                    await asyncio.sleep(6)
                ns = await c.namespace(f"cc-handover-{len(results)}")
                created: dict[str, float] = {}
                bound: dict[str, float] = {}
                stop = asyncio.Event()
                watcher = asyncio.create_task(bound_times(c, ns, bound, stop))
                streaming = asyncio.create_task(stream(c, ns, "p", count, rate, created))
                await asyncio.sleep(count / rate / 3)
                stopped_at = time.time()
                took = processes.stop(first)  # SIGTERM: it releases the Lease
                await streaming
                await c.until(lambda ns=ns: _all_bound(c, ns, count), 60, "every streamed pod bound")
                stop.set()
                await watcher
                holder = ((await c.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"))
                          or {}).get("spec", {}).get("holderIdentity", "")
                facts = await c.sound(ns)
                events = (await c.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")) or {}
                by_pod = {e["regarding"]["name"]: e.get("reportingController") or "" for e in events.get("items") or []
                          if e.get("reason") == "Scheduled"}
                scheduled_by = Counter(by_pod.values())
                new_leader = "placer.dev/scheduler" if second == "placer" else DEFAULT_NAME
                # the new leader's first binding (the stopped one may still finish binds in flight)
                after = sorted(t for name, t in bound.items() if by_pod.get(name) == new_leader)
                results[direction] = {"scheduled_by": dict(scheduled_by),
                    **latency_summary(created, bound), "stop_took_s": round(took, 2),
                    "new_leader_first_bind_s": round(after[0] - stopped_at, 2) if after else None,
                    "lease_holder": holder, **facts}
                print(f"handover {direction}: {json.dumps(results[direction])}", flush=True)
                processes.stop_all()
                await c.drop_namespace(ns)
        finally:
            await api.close()
    finally:
        processes.stop_all()
        plane.down()
    return results


async def _all_bound(c: Cluster, ns: str, count: int) -> bool:
    pods = await c.pods(ns)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


# ----------------------------------------------------------------- the bursts, counted


async def bursts(kube_bin: Path, config: str, runs: int, logs: Path, per_scheduler: int = 10,
                 cpu: str = "200m") -> Obj:
    """`runs` runs of three bursts on a fresh plane; the kubelet's rejections per run."""
    plane = Plane(kube_bin)
    processes = Processes(plane, logs / f"bursts-{config}")
    base = plane.hollow_port
    per_run: list[Obj] = []
    try:
        plane.up()
        api = Api(f"https://127.0.0.1:{plane.port}")
        try:
            c = Cluster(api, plane, "second-placer", processes)
            await wait_plane(c)
            nodes = await c.live_nodes()
            kube_profile: Obj = {"schedulerName": DEFAULT_NAME}
            tolerations: dict[str, list[Obj]] = {}
            if config == "split-taints":  # each pool tainted; each scheduler's pods tolerate their pool's taint
                for index, node in enumerate(nodes):
                    pool = "kube" if index < len(nodes) // 2 else "placer"
                    await c.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": [
                        {"key": "pool", "value": pool, "effect": "NoSchedule"}]}})
                tolerations = {name: [{"key": "pool", "operator": "Equal", "value": pool, "effect": "NoSchedule"}]
                               for name, pool in ((DEFAULT_NAME, "kube"), (SECOND_NAME, "placer"))}
            if config == "split-pools":
                for index, node in enumerate(nodes):
                    await c.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {
                        "pool": "kube" if index < len(nodes) // 2 else "placer"}}})
                kube_profile["pluginConfig"] = [{"name": "NodeAffinity", "args": {"addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "pool", "operator": "In", "values": ["kube"]}]}]}}}}]
            if config == "one-scheduler":
                await profile(c, DEFAULT_NAME)
                await profile(c, SECOND_NAME)
                processes.placer("placer", base + PLACER_PORT_OFFSET)
            else:
                processes.kube_scheduler("kube-scheduler", [kube_profile], base + KUBE_PORT_OFFSET)
                if config == "second-kube":
                    processes.kube_scheduler("kube-scheduler-second", [{"schedulerName": SECOND_NAME}],
                                             base + SECOND_KUBE_PORT_OFFSET)
                else:
                    spec: Obj = {}
                    if config == "split-pools":  # NodeLabel before the default filters
                        spec = {"filters": [{"name": "NodeLabel", "args": {"required": {"pool": "placer"}}},
                                            *({"name": name} for name in DEFAULT_FILTERS)]}
                    await profile(c, SECOND_NAME, spec)
                    processes.placer("placer", base + PLACER_PORT_OFFSET)
            await asyncio.sleep(6)
            ns = await c.namespace("cc-bursts")
            for run in range(runs):
                run_facts: Obj = {"rejected": 0, "by_scheduler": {}, "pending": 0, "overcommitted": {}}
                for burst in range(3):
                    pods = burst_pods(burst, (DEFAULT_NAME, SECOND_NAME), per_scheduler, cpu, tolerations)
                    await asyncio.gather(*(c.create(f"/api/v1/namespaces/{ns}/pods", pod) for pod in pods))
                    await c.until(lambda pods=pods: _settled(c, ns, len(pods)), 60, "the burst settled")
                    await asyncio.sleep(2)  # late refusals
                    found = await c.pods(ns)
                    refused = rejections(found)
                    run_facts["rejected"] += len(refused)
                    for pod_name, _, _ in refused:
                        who = DEFAULT_NAME if "-a-" in pod_name else SECOND_NAME
                        run_facts["by_scheduler"][who] = run_facts["by_scheduler"].get(who, 0) + 1
                    run_facts["pending"] += sum(1 for p in found if not p["spec"].get("nodeName"))
                    over = overcommitted(found, c.allocatable)
                    run_facts["overcommitted"].update(over)
                    await c.api.call("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0", None)
                    await c.until(lambda: _empty(c, ns), 60, "the burst's pods gone")
                    await asyncio.sleep(1)  # the kubelets free what they held
                per_run.append(run_facts)
                print(f"bursts {config} run {run + 1}: {json.dumps(run_facts)}", flush=True)
            if config in ("second-placer", "split-pools") and "placer" in processes.running:
                metrics = await _placer_metric(base + PLACER_PORT_OFFSET)
                per_run[-1]["placer_kubelet_rejections_metric"] = metrics
        finally:
            await api.close()
    finally:
        processes.stop_all()
        plane.down()
    counts = [run["rejected"] for run in per_run]
    return {"runs": per_run, "rejected_per_run": counts, "min": min(counts), "max": max(counts),
            "total": sum(counts), "pods_per_run": 3 * 2 * per_scheduler}


async def _settled(c: Cluster, ns: str, count: int) -> bool:
    pods = await c.pods(ns)
    if len(pods) < count:
        return False
    return all(p["status"].get("phase") in ("Running", "Failed") or (
        not p["spec"].get("nodeName") and (pod_condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable")
        for p in pods)


async def _empty(c: Cluster, ns: str) -> bool:
    return not await c.pods(ns) and not any(
        p for p in await c.all_pods() if p["metadata"]["namespace"] == ns)


async def _placer_metric(port: int) -> float:
    """placer_kubelet_rejections_total summed, from Placer's /metrics."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("placer_kubelet_rejections_total{"))


# ----------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-bin", type=Path, default=Path(os.environ["KUBE_BIN"]) if os.environ.get("KUBE_BIN")
                        else ROOT.parent / "kube-bin-1.36",
                        help="build.sh's folder with kube-apiserver, kube-scheduler, kube-controller-manager, kubemark")
    parser.add_argument("--config", nargs="+", choices=CONFIGS, help="configurations (default: all four)")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="these scenarios only")
    parser.add_argument("--handover", action="store_true", help="also measure the switch to Placer and back")
    parser.add_argument("--handover-runs", type=int, default=1, metavar="N", help="the switch measured N times")
    parser.add_argument("--no-scenarios", action="store_true", help="only the switch (with --handover)")
    parser.add_argument("--bursts", type=int, metavar="RUNS", default=0,
                        help="instead of the scenarios: the second-scheduler bursts, RUNS runs per configuration")
    parser.add_argument("--burst-config", nargs="+", choices=BURST_CONFIGS, help="bursts' configurations")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--logs", type=Path, default=Path(os.environ.get("RC_DIR", "/tmp/rc-cluster")) / "logs",
                        help="the schedulers' logs (default: $RC_DIR/logs)")
    args = parser.parse_args()
    kube_bin = args.kube_bin.resolve()
    missing = [b for b in ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubemark")
               if not (kube_bin / b).exists()]
    if missing:
        parser.error(f"{kube_bin}: no {', '.join(missing)} (build.sh with RC_EXTRA_CMDS=\"kube-controller-manager "
                     f"kubemark\")")
    results: Obj = {"kube_version": subprocess.run([str(kube_bin / "kube-apiserver"), "--version"],
                                                   capture_output=True, text=True).stdout.strip()}
    failed = 0
    if args.bursts:
        results["bursts"] = {}
        for config in args.burst_config or BURST_CONFIGS:
            results["bursts"][config] = asyncio.run(bursts(kube_bin, config, args.bursts, args.logs))
    else:
        if not args.no_scenarios:
            names = args.only or list(SCENARIOS)
            results["configs"] = {}
            for config in args.config or CONFIGS:
                outcome = asyncio.run(run_config(kube_bin, config, names, args.logs))
                results["configs"][config] = outcome
                failed += sum(1 for r in outcome["scenarios"].values() if not r["ok"])
            print("\n" + summary_table(results["configs"]))
        if args.handover:
            results["handover"] = [asyncio.run(handover(kube_bin, args.logs)) for _ in range(args.handover_runs)]
            failed += sum(1 for run in results["handover"] for r in run.values() if r["unbound"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
