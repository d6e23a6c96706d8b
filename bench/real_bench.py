"""Placer against kube-scheduler on a real control plane (etcd + kube-apiserver on loopback, no
kubelets: `../shared/realcluster/`), one scheduler after the other on the same workload.

The Kubernetes version is that of the binaries given: `../kube-bin-1.36` by default (v1.36.2, the
reference), any folder `../shared/realcluster/build.sh` filled with `--kube-bin` or `$KUBE_BIN`
(v1.24 is the oldest supported); the version is read from `kube-apiserver --version`, recorded
in the results, and picks kube-scheduler's configuration API (`kubescheduler.config.k8s.io/v1`
from v1.25, `v1beta3` before).

The control plane's ports and state folder are realcluster.sh's variables, read from the
environment: `RC_PORT` (the API server, 6443 by default), `RC_ETCD_PORT` (etcd's client port, 2379;
its peer port is the next one) and `RC_DIR` (by default a fresh temporary folder per plane). One
control plane per API-server port at a time: the script holds an exclusive `flock` on
`/tmp/placer-realcluster.lock` (port 6443; `/tmp/placer-realcluster-<port>.lock` for another port)
for its whole run, the file anyone else running a control plane on that port locks too
(`flock /tmp/placer-realcluster.lock COMMAND`); started under such a `flock`, it goes on under its
lock (the descriptor it inherits), otherwise it waits for the holder, saying who.

Per scheduler and run: a fresh control plane (`realcluster.sh up` wipes etcd), the nodes of
`bench/synthetic.py` (created, then their status written) and the workload's other objects, then
either

- `backlog`: every pending pod created first, then the scheduler started (the clock runs from its
  start), or
- `stream`: the scheduler started first and given a moment, then the pods created as fast as a
  32-way client can (the clock runs from the first creation),

and the bindings counted through a watch of the bound pods until every pod is bound (or the
timeout; a watch the API server closes for falling behind is resumed, and the run says so). A run
that leaves pods unbound says how many and the scheduler's commonest FailedScheduling messages.
Afterwards the API server's pods and nodes are audited (`bench/audit.py`: capacity, readiness,
cordons, taints, selectors, required anti-affinity, DoNotSchedule skew, double bindings; for
`devices` also no device allocated twice and every bound pod's claim allocated on its node and
reserved for it). kube-scheduler runs with raised client limits (QPS 5000, burst 10000, as BENCHMARKS.md) and
its own schedulerName; Placer is `placer run --no-leader-elect` with the default profile.

Workloads (`--workload`, `bench/synthetic.py`; every one the same nodes and pod sizes):

- `plain`: BENCHMARKS.md's pods (some with a nodeSelector or a toleration);
- `relations`: every pod required anti-affinity on hostname and a DoNotSchedule zone spread
  against its app's pods (20 apps);
- `antiaffinity`: groups of 100 pods, each pod a required podAntiAffinity on
  `kubernetes.io/hostname` against its group (scheduler_perf's SchedulingPodAntiAffinity);
- `spread`: groups of 100, each pod one topologySpreadConstraint on `topology.kubernetes.io/zone`,
  maxSkew 1, DoNotSchedule, against its group (no nodeSelectors, so that the audit's final skew
  is exact);
- `preferred`: groups of 100, a preferred podAffinity (even groups) or podAntiAffinity (odd
  groups) on hostname, weight 1 (SchedulingPreferredPodAffinity / ...AntiAffinity);
- `devices`: Dynamic Resource Allocation, one device claim per pod; needs `resource.k8s.io/v1`
  (Kubernetes v1.34+; refused before, exit status 3). The script plays the DRA driver: a
  DeviceClass for driver `gpu.example.com`, one ResourceSlice per node with 8 GPUs, and per pod
  a ResourceClaim for one GPU, created before the pods (no controller manager: no claim
  templates) and named by the pod's `spec.resourceClaims[].resourceClaimName`; the scheduler
  allocates and reserves each claim itself before binding.

Measured per run: pods/s (bound pods over the time from the clock's start to the last binding),
first binding, peak RSS (the scheduler's VmHWM) and CPU per bound pod: the process CPU time
(utime + stime, /proc/PID/stat) of the scheduler, kube-apiserver and etcd (pids from
realcluster.sh's `apiserver.pid` and `etcd.pid`) between the clock's start and the last binding,
in ms per bound pod. In backlog mode the scheduler's share includes its start-up and the
API server's includes serving the initial lists; in stream mode the scheduler was already up, and
the API server's and etcd's shares include creating the pods (the same for both schedulers).
The CPU at the last binding is read as the watch sees it (when not every pod was bound, at a
binding no more than 50 ms before the last one). The table gives medians of the runs.

`--prototype` adds a row for bench/pipeline_prototype.py (issue 25's design for bigger machines:
reading, deciding and writing in three processes). Its CPU and peak RSS are its process tree's;
each stage's CPU per bound pod after its start-up, split by step, is read from the
`pipeline-stage` lines the stages print when stopped, and goes into the JSON (`stages`).

Needs the binaries of `../shared/realcluster/build.sh` and etcd (`realcluster.sh` installs
Debian's); never part of `make test` or CI.

    python bench/real_bench.py [--kube-bin DIR] [--nodes 1000] [--pods 5000] [--mode backlog|stream]
        [--runs 3] [--workload plain|relations|antiaffinity|spread|preferred|devices] [--prototype]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import fcntl
import json
import math
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from audit import audit  # noqa: E402
from synthetic import WORKLOADS as SYNTHETIC_WORKLOADS  # noqa: E402
from synthetic import cluster as synthetic_cluster  # noqa: E402

REALCLUSTER = ROOT.parent / "shared" / "realcluster" / "realcluster.sh"
DEFAULT_KUBE_BIN = ROOT.parent / "kube-bin-1.36"  # ../shared/realcluster/build.sh's v1.36.2 build
PORT = int(os.environ.get("RC_PORT") or 6443)  # realcluster.sh's variables: two planes side by side
ETCD_PORT = int(os.environ.get("RC_ETCD_PORT") or 2379)
SERVER = f"https://127.0.0.1:{PORT}"
TOKEN = "admintoken"  # realcluster.sh's admin token (system:masters), loopback only
NAMESPACE = "bench"
KUBE_SCHEDULER_NAME = "kube-bench"
PLACER_NAME = "placer"
LIMIT_NAME = "limit-client"  # bench/limit_client.py's pods
PIPELINE_NAME = "pipeline-prototype"  # bench/pipeline_prototype.py's pods (`--prototype`)
TARGET_RATIO = 2.0
TARGET_LIMIT_SHARE = 0.8  # Placer's rate as a share of the limit row's
METRICS_PORT = 10259  # kube-scheduler's secure port (its /metrics, scraped at the end of a run)
PLACER_METRICS_PORT = 10261  # Placer's /metrics (its attempts by result, scraped at the end of a run)
# kube-scheduler's histograms in the JSON: per label set, observations and mean ms
SCHEDULER_METRICS = ("scheduler_framework_extension_point_duration_seconds",
                     "scheduler_scheduling_attempt_duration_seconds",
                     "scheduler_scheduling_algorithm_duration_seconds",
                     "scheduler_pod_scheduling_sli_duration_seconds")
STREAM_RATE = 250.0  # pods/s the stream mode's loader creates (both schedulers sustain it here)
CLEANUP_TIMEOUT = 600.0  # s for a reused control plane's namespace to be emptied between runs
# one control plane at a time per API-server port on this machine
LOCK = Path("/tmp/placer-realcluster.lock" if PORT == 6443 else f"/tmp/placer-realcluster-{PORT}.lock")
# synthetic.py's workloads a real API server takes as they are (`claims` needs a PV controller)
WORKLOADS = tuple(w for w in SYNTHETIC_WORKLOADS if w != "claims")
DRA = "/apis/resource.k8s.io/v1"
DRA_MINOR = 34  # resource.k8s.io/v1 is served from Kubernetes v1.34
EXIT_UNSUPPORTED = 3  # the workload needs an API this Kubernetes version does not serve
CPU_PROCESSES = ("scheduler", "apiserver", "etcd")
CPU_EVERY = 0.05  # s between CPU readings while bindings come (and always at the last one expected)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
Obj = dict[str, Any]


def kube_version(kube_bin: Path) -> str:
    """`v1.36.2` from `kube-apiserver --version` ("Kubernetes v1.36.2")."""
    done = subprocess.run([str(kube_bin / "kube-apiserver"), "--version"], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()[-1].split("+")[0]


def kube_minor(kube_bin: Path) -> int:
    return int(kube_version(kube_bin).split(".")[1])


def _lock_holders() -> list[int]:
    """Pids /proc/locks names for a lock on LOCK's inode."""
    try:
        inode = os.stat(LOCK).st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    holders = []
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        with contextlib.suppress(IndexError, ValueError):
            if int(fields[5].rsplit(":", 1)[1]) == inode:
                holders.append(int(fields[4]))
    return holders


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def placer_command() -> Path:
    """`placer` as the image installs it (`make`'s `.venv-run`: the lock and Placer's wheel, no test
    tools, no example plugin: the shipped start-up), else this checkout's development `.venv`;
    `$PLACER_BIN` wins."""
    chosen = os.environ.get("PLACER_BIN")
    if chosen:
        return Path(chosen)
    shipped = ROOT / ".venv-run" / "bin" / "placer"
    return shipped if shipped.exists() else ROOT / ".venv" / "bin" / "placer"


def precompile(tree: Path) -> None:
    """Placer's sources in `tree` byte-compiled, as the image's build leaves them (`compileall`): an
    editable install under PYTHONDONTWRITEBYTECODE would otherwise compile them at every start."""
    package = tree / "operator" / "placer"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)


def hold_lock() -> int | None:
    """An exclusive flock on LOCK for the process's life (the descriptor stays open; the kernel
    drops the lock when the process ends). Under `flock LOCK COMMAND` the lock is already ours
    through the descriptor the wrapper passed down: locking that one again succeeds at once
    (locking a second descriptor of the file would wait for ourselves forever). When an ancestor
    holds it through a descriptor we did not inherit (`flock -o`), it covers us too. Otherwise wait,
    saying who holds it. Returns the descriptor, or None under an ancestor's lock."""
    with contextlib.suppress(OSError):
        for entry in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.path.realpath(entry) == str(LOCK):
                    fd = int(entry.name)
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
    fd = os.open(LOCK, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError as error:
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
    holders = _lock_holders()
    if set(holders) & _ancestors():
        os.close(fd)
        return None
    described = ", ".join(f"{pid} ({_command(pid)})" for pid in holders) or "another process"
    print(f"waiting for {LOCK} (held by {described}): one control plane at a time", flush=True)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` in 0..1) of `values`; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = min(len(ordered), max(1, math.ceil(share * len(ordered) - 1e-9)))
    return ordered[rank - 1]


def latency_ms(created: dict[str, float], bound: dict[str, float]) -> dict[str, float]:
    """Scheduling latency, a pod's creation (its POST sent) to its binding (seen through the watch),
    in ms: p50, p90, p99, max over the pods both know; NaN-valued when none."""
    latencies = [(bound[name] - at) * 1000 for name, at in created.items() if name in bound]
    return {"latency_ms_p50": percentile(latencies, 0.50), "latency_ms_p90": percentile(latencies, 0.90),
            "latency_ms_p99": percentile(latencies, 0.99), "latency_ms_max": max(latencies, default=float("nan"))}


def limit_shares(table: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each scheduler's rate as a share of the limit row's (the bare bind-and-event client's)."""
    limit = table.get("limit", {}).get("pods_per_s")
    if not limit:
        return {}
    return {which: row["pods_per_s"] / limit for which, row in table.items() if which != "limit"}


def histograms(text: str, names: Sequence[str] = SCHEDULER_METRICS) -> dict[str, list[dict[str, Any]]]:
    """Prometheus histograms of `names` from a /metrics page: per label set, the observations
    (`_count`), their total (`_sum`, s) and the mean in ms."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        metric, _, value = line.rpartition(" ")
        name, _, labels = metric.partition("{")
        for wanted in names:
            if name in (f"{wanted}_sum", f"{wanted}_count"):
                entry = found.setdefault((wanted, labels.rstrip("}")), {"labels": _labels(labels.rstrip("}"))})
                entry["sum_s" if name.endswith("_sum") else "count"] = float(value)
    out: dict[str, list[dict[str, Any]]] = {}
    for (wanted, _), entry in sorted(found.items()):
        count = entry.get("count", 0.0)
        entry["mean_ms"] = entry.get("sum_s", 0.0) / count * 1000 if count else float("nan")
        out.setdefault(wanted, []).append(entry)
    return out


def _labels(text: str) -> dict[str, str]:
    """`a="x",b="y"` as a dict (label values here hold no commas or quotes)."""
    pairs = (item.split("=", 1) for item in text.split(",") if "=" in item)
    return {key.strip(): value.strip().strip('"') for key, value in pairs}


class Api:
    """A bare aiohttp client for the control plane (no model classes: the benchmark's own cost)."""

    def __init__(self, server: str = SERVER) -> None:
        self.server = server
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=64),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )

    async def close(self) -> None:
        await self.session.close()

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json", *,
                   allow_missing: bool = False, allow_status: tuple[int, ...] = ()) -> Any:
        """One call; a 5xx or 429 (etcd hiccups on a loaded 2-core machine) is retried a few times.
        A 409 (and any of `allow_status`) returns the Status; a 404 returns None if `allow_missing`."""
        data = None if body is None else orjson.dumps(body)  # orjson: the loader's own CPU, on the same cores
        for attempt in range(5):
            async with self.session.request(method, self.server + path, data=data,
                                            headers={"Content-Type": content_type}) as response:
                raw = await response.read()
                if (response.status >= 500 or response.status == 429) and attempt < 4:
                    await asyncio.sleep(0.2 * 2**attempt)
                    continue
                if response.status == 404 and allow_missing:
                    return None
                if response.status >= 300 and response.status != 409 and response.status not in allow_status:
                    raise RuntimeError(f"{method} {path}: {response.status} {raw[:300].decode(errors='replace')}")
                return orjson.loads(raw) if raw else None
        return None

    async def many(self, calls: list[tuple[str, str, Any, str]], concurrency: int = 32,
                   on_first: Callable[[], None] | None = None) -> float | None:
        """Run calls 32 at a time; returns when the first one was sent (and calls `on_first` then)."""
        queue: asyncio.Queue[tuple[str, str, Any, str]] = asyncio.Queue()
        for call in calls:
            queue.put_nowait(call)
        first: list[float] = []

        async def worker() -> None:
            while not queue.empty():
                method, path, body, content_type = queue.get_nowait()
                if not first:
                    first.append(time.time())
                    if on_first is not None:
                        on_first()
                await self.call(method, path, body, content_type)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return first[0] if first else None

    async def paced(self, calls: list[tuple[str, str, Any, str]], rate: float, created: dict[str, float],
                    on_first: Callable[[], None] | None = None, concurrency: int = 64) -> float:
        """Pod creations at `rate` per second (the i-th sent at start + i / rate, up to
        `concurrency` in flight), each pod's sending time noted in `created` (by name); returns
        the start (when the first was sent; `on_first` is called then)."""
        start = time.time()
        order = iter(range(len(calls)))

        async def worker() -> None:
            for index in order:  # one iterator shared by the workers: each call is sent once
                delay = start + index / rate - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                method, path, body, content_type = calls[index]
                created[body["metadata"]["name"]] = time.time()
                if index == 0 and on_first is not None:
                    on_first()
                await self.call(method, path, body, content_type)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return start


def plane_state(default: Path) -> Path:
    """The control plane's state folder: $RC_DIR when set, else `default`."""
    return Path(os.environ["RC_DIR"]) if os.environ.get("RC_DIR") else default


def _plane_env(kube_bin: Path, state: Path, port: int, apiserver_args: str = "") -> dict[str, str]:
    env = {**os.environ, "KUBE_BIN": str(kube_bin), "RC_DIR": str(state), "RC_PORT": str(port),
           "RC_ETCD_PORT": str(ETCD_PORT)}
    if apiserver_args:
        env["RC_APISERVER_ARGS"] = f"{os.environ.get('RC_APISERVER_ARGS', '')} {apiserver_args}".strip()
    return env


def control_plane_up(kube_bin: Path, state: Path, port: int = PORT, apiserver_args: str = "") -> Path:
    """etcd and the API server started afresh (etcd wiped); `apiserver_args` adds flags."""
    env = _plane_env(kube_bin, state, port, apiserver_args)
    subprocess.run(["bash", str(REALCLUSTER), "down"], env=env, check=False, capture_output=True)
    done = subprocess.run(["bash", str(REALCLUSTER), "up"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["bash", str(REALCLUSTER), "down"], env=env, check=False, capture_output=True)
        raise RuntimeError(f"realcluster.sh up failed:\n{done.stdout}\n{done.stderr}")
    return state / "admin.kubeconfig"


def control_plane_down(kube_bin: Path, state: Path, port: int = PORT) -> None:
    """Stop etcd and the API server and wait until both processes are gone and their ports free
    (SIGKILL after 3 s: a v1.36 API server takes 20 s to let its port go, and would keep the next
    run's from it; the control plane is thrown away anyway)."""
    pids = []
    for name in ("apiserver", "etcd"):
        with contextlib.suppress(OSError, ValueError):
            pids.append(int((state / f"{name}.pid").read_text().strip()))
    env = _plane_env(kube_bin, state, port)
    subprocess.run(["bash", str(REALCLUSTER), "down"], env=env, check=False, capture_output=True)
    deadline = time.monotonic() + 3
    while any(_alive(pid) for pid in pids) or not all(port_free(p) for p in (port, ETCD_PORT)):
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            pids = [pid for pid in pids if _alive(pid)]
            if not pids:
                break
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie, already exited, does not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def object_calls(objects: list[Obj]) -> list[list[tuple[str, str, Any, str]]]:
    """POSTs for the workload's other objects, in the order they must exist: cluster-scoped ones
    (DeviceClass, ResourceSlices) first, then the namespaced ones (ResourceClaims)."""
    paths = {("resource.k8s.io/v1", "DeviceClass"): f"{DRA}/deviceclasses",
             ("resource.k8s.io/v1", "ResourceSlice"): f"{DRA}/resourceslices",
             ("resource.k8s.io/v1", "ResourceClaim"): f"{DRA}/namespaces/{NAMESPACE}/resourceclaims"}
    cluster_scoped, namespaced = [], []
    for obj in objects:
        path = paths.get((obj["apiVersion"], obj["kind"]))
        if path is None:
            raise ValueError(f"the real-cluster benchmark cannot create {obj['apiVersion']} {obj['kind']}")
        body = json.loads(json.dumps(obj))
        body["metadata"].pop("uid", None)
        body.pop("status", None)
        if "namespace" in body["metadata"]:
            body["metadata"]["namespace"] = NAMESPACE
            namespaced.append(("POST", path, body, "application/json"))
        else:
            cluster_scoped.append(("POST", path, body, "application/json"))
    return [batch for batch in (cluster_scoped, namespaced) if batch]


async def populate(api: Api, nodes: list[Obj], kubeconfig: Path, objects: Sequence[Obj] = ()) -> None:
    if any(obj["apiVersion"].startswith("resource.k8s.io/") for obj in objects) and (
            await api.call("GET", DRA, allow_missing=True)) is None:
        raise RuntimeError(f"the API server does not serve {DRA.removeprefix('/apis/')} (Kubernetes v1.{DRA_MINOR}+): "
                           "no Dynamic Resource Allocation workload on it")
    await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await api.many([("POST", "/api/v1/nodes", {k: v for k, v in n.items() if k != "status"}, "application/json")
                    for n in nodes])
    await api.many([("PATCH", f"/api/v1/nodes/{n['metadata']['name']}/status", {"status": n["status"]},
                     "application/merge-patch+json") for n in nodes])
    await install_profile(api, kubeconfig)
    for batch in object_calls(list(objects)):
        await api.many(batch)


async def install_profile(api: Api, kubeconfig: Path) -> None:
    """Placer's CRDs and the benchmark's SchedulerProfile: schedulerName PLACER_NAME, no plugins
    named, so kube's default profile's (API.md)."""
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", str(ROOT / "crds")],
                   check=True, capture_output=True)
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "wait", "--for=condition=Established",
                    "crd/schedulerprofiles.placer.dev", "--timeout=60s"], check=True, capture_output=True)
    profile = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "bench"},
               "spec": {"schedulerName": PLACER_NAME}}
    await api.call("POST", "/apis/placer.dev/v1alpha1/schedulerprofiles", profile)


def pod_calls(pods: list[Obj], scheduler_name: str) -> list[tuple[str, str, Any, str]]:
    calls = []
    for pod in pods:
        body = json.loads(json.dumps(pod))
        body["metadata"]["namespace"] = NAMESPACE
        body["metadata"].pop("uid", None)
        body["metadata"].pop("creationTimestamp", None)
        body.pop("status", None)
        body["spec"]["schedulerName"] = scheduler_name
        calls.append(("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body, "application/json"))
    return calls


def process_tree(pid: int) -> list[int]:
    """A process and its descendants (bench/pipeline_prototype.py's stages are children)."""
    tree, index = [pid], 0
    while index < len(tree):
        with contextlib.suppress(OSError):
            tree.extend(int(child) for child in
                        Path(f"/proc/{tree[index]}/task/{tree[index]}/children").read_text().split())
        index += 1
    return tree


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far with its living descendants' (utime + stime in /proc/PID/stat),
    NaN once it is gone."""
    total = 0.0
    for number, member in enumerate(process_tree(pid)):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            if number == 0:
                return float("nan")
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


class CpuMeter:
    """CPU time of the scheduler, kube-apiserver and etcd from the clock's start to the last binding."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.read_at = float("-inf")

    def sample(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def start(self) -> None:
        """The clock starts: a process not started yet (the scheduler, in backlog mode) counts from 0."""
        self.first = {name: 0.0 for name in CPU_PROCESSES} | self.sample()

    def binding(self, last: bool) -> None:
        """A binding was seen: read the CPU at the last one expected, else at most every CPU_EVERY s."""
        now = time.monotonic()
        if last or now - self.read_at >= CPU_EVERY:
            self.last = self.sample()
            self.read_at = now

    def ms_per_pod(self, bound: int) -> dict[str, float]:
        return {f"cpu_ms_per_pod_{name}": (self.last.get(name, float("nan")) - self.first.get(name, float("nan")))
                * 1000 / bound if bound else float("nan") for name in CPU_PROCESSES}


class Watch:
    """What the bindings' watch saw: when each pod was first seen bound, and on which node."""

    def __init__(self, expected: int, meter: CpuMeter | None = None) -> None:
        self.expected = expected
        self.meter = meter
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.binds: Counter[str] = Counter()  # distinct nodes a pod was seen on (2: bound twice)
        self.restarts = 0  # watches the API server closed, resumed
        self.relists = 0  # resumed by a fresh list (the resourceVersion was too old)

    def seen(self, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        name = (pod.get("metadata") or {}).get("name")
        if not node or not name:
            return
        if name not in self.bound_at:
            self.bound_at[name] = time.time()
            self.node_of[name] = node
            self.binds[name] += 1
            if self.meter is not None:
                self.meter.binding(self.done())
        elif self.node_of[name] != node:
            self.node_of[name] = node
            self.binds[name] += 1

    def done(self) -> bool:
        return len(self.bound_at) >= self.expected


BOUND_PODS = f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=spec.nodeName%21%3D"  # spec.nodeName!=""


async def count_bindings(api: Api, watch: Watch, deadline: float) -> None:
    """Watch the namespace's bound pods (a field selector: only bindings and later changes come),
    noting when each is first seen with a node (and the CPU then), until all are or the deadline.
    The API server closes a watch whose reader falls behind ("Forcing pods watcher close due to
    unresponsiveness", on a loaded 2-core machine): the watch is resumed from the last
    resourceVersion seen, and after a 410 (too old) from a fresh list."""
    listing = await api.call("GET", f"{BOUND_PODS}&limit=1")
    version = listing["metadata"]["resourceVersion"]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    while True:
        gone = False
        path = f"{BOUND_PODS}&watch=1&allowWatchBookmarks=true&resourceVersion={version}"
        async with api.session.get(api.server + path, timeout=timeout) as response:
            if response.status == 410:
                gone = True
            elif response.status != 200:
                raise RuntimeError(f"watch {path}: {response.status} {(await response.text())[:300]}")
            else:
                async for line in response.content:
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        gone = obj.get("code") == 410
                        if not gone:
                            raise RuntimeError(f"watch {path}: {obj}")
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        watch.seen(obj)
                    if watch.done() or time.time() > deadline:
                        return
        if time.time() > deadline:
            return
        watch.restarts += 1
        if gone:
            watch.relists += 1
            listing = await api.call("GET", BOUND_PODS)
            for pod in listing["items"]:
                watch.seen(pod)
            version = listing["metadata"]["resourceVersion"]
            if watch.done():
                return


def peak_rss_mb(pid: int) -> float:
    """The process's peak RSS (VmHWM), plus its living descendants' (an upper bound of the tree's)."""
    total = float("nan")
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total = (0.0 if math.isnan(total) else total) + int(line.split()[1]) / 1024
    return total


def pipeline_stages(log: Path, bound: int) -> dict[str, dict[str, Any]]:
    """bench/pipeline_prototype.py's `pipeline-stage` lines: each stage's CPU ms per bound pod
    after its start-up, split by step, with its start-up CPU and peak RSS."""
    stages: dict[str, dict[str, Any]] = {}
    if not log.exists() or not bound:
        return stages
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("pipeline-stage "):
            stage = json.loads(line.removeprefix("pipeline-stage "))
            stages[stage["stage"]] = {
                "cpu_ms_per_pod": (stage["last_cpu_s"] - stage["startup_cpu_s"]) * 1000 / bound,
                "startup_cpu_s": stage["startup_cpu_s"], "items": stage["items"],
                "peak_rss_mb": stage["peak_rss_mb"],
                "steps_ms_per_pod": {step: seconds * 1000 / bound for step, seconds in stage["steps"].items()},
            }
    return stages


def start_scheduler(which: str, kubeconfig: Path, kube_bin: Path, workdir: Path, metrics_port: int = 0,
                    namespace: str = NAMESPACE) -> subprocess.Popen[bytes]:
    """kube-scheduler (raised client limits, its /metrics served on `metrics_port`, METRICS_PORT by
    default), Placer (its /metrics on `metrics_port`, PLACER_METRICS_PORT by default), or the limit
    row's bare client (bench/limit_client.py) for the pods of `namespace` ("": every namespace)."""
    log = open(workdir / f"{which}.log", "wb")  # noqa: SIM115 - the child holds it
    if which == "kube-scheduler":
        config = workdir / "kube-scheduler.yaml"
        # the configuration API went v1 in 1.25 (v1beta3 was removed in 1.29)
        api_version = "v1" if kube_minor(kube_bin) >= 25 else "v1beta3"
        config.write_text(yaml.safe_dump({
            "apiVersion": f"kubescheduler.config.k8s.io/{api_version}",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 10000},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": KUBE_SCHEDULER_NAME}],
        }))
        # its secure port with a self-signed certificate, /metrics open to anyone on loopback
        command = [str(kube_bin / "kube-scheduler"), f"--config={config}",
                   f"--secure-port={metrics_port or METRICS_PORT}", "--bind-address=127.0.0.1",
                   f"--cert-dir={workdir}", "--authentication-skip-lookup",
                   f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
                   "--authorization-always-allow-paths=/metrics,/healthz", "--v=0"]
        env = dict(os.environ)
    elif which == "limit":
        command = [sys.executable, str(ROOT / "bench" / "limit_client.py"), str(kubeconfig), namespace, LIMIT_NAME]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    elif which == "pipeline":
        command = [sys.executable, str(ROOT / "bench" / "pipeline_prototype.py"), str(kubeconfig), NAMESPACE,
                   PIPELINE_NAME]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    else:
        command = [str(placer_command()), "run", "--no-leader-elect", "--metrics-port",
                   str(metrics_port or PLACER_METRICS_PORT)]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "default"}
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


async def scrape_metrics(api: Api, port: int = METRICS_PORT) -> dict[str, list[dict[str, Any]]]:
    """kube-scheduler's histograms (SCHEDULER_METRICS) from its /metrics; empty if it does not answer."""
    text = await metrics_page(api, port)
    return histograms(text) if text else {}


async def metrics_page(api: Api, port: int = METRICS_PORT) -> str:
    """kube-scheduler's /metrics page (on its secure port); "" if it does not answer."""
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with api.session.get(f"https://127.0.0.1:{port}/metrics",
                                   timeout=aiohttp.ClientTimeout(total=20)) as response:
            if response.status == 200:
                return await response.text()
            print(f"  kube-scheduler /metrics: HTTP {response.status}", flush=True)
    return ""


def attempts_by_result(text: str) -> dict[str, float]:
    """Placer's scheduling attempts by result (`placer_schedule_attempts_total`, every profile) in
    a /metrics page: more attempts than pods means some were retried."""
    attempts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("placer_schedule_attempts_total{"):
            result = _labels(line[line.index("{") + 1:line.index("}")]).get("result", "?")
            attempts[result] = attempts.get(result, 0.0) + float(line.rsplit(" ", 1)[1])
    return attempts


async def placer_attempts(api: Api, port: int = PLACER_METRICS_PORT) -> dict[str, float]:
    """`attempts_by_result` of Placer's /metrics; empty if it does not answer."""
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with api.session.get(f"http://127.0.0.1:{port}/metrics",
                                   timeout=aiohttp.ClientTimeout(total=20)) as response:
            return attempts_by_result(await response.text())
    return {}


def start_profiler(pid: int, folder: Path, which: str) -> subprocess.Popen[bytes]:
    """py-spy attached to the scheduler (`--profile DIR`): collapsed stacks, idle frames left out."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{which}-{int(time.time())}.txt"
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))  # PATH, else beside python
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "100", "--format", "raw",
                             "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _pid_file(state: Path, name: str) -> int:
    return int((state / f"{name}.pid").read_text().strip())


class Plane:
    """A control plane kept for several runs (`--reuse-plane`): filled once with the nodes and the
    workload's objects, its namespace emptied of pods and events between runs (`empty_namespace`)."""

    def __init__(self, kube_bin: Path, folder: Path) -> None:
        self.kube_bin = kube_bin
        self.state = plane_state(folder / "control-plane")
        self.kubeconfig: Path | None = None

    async def ready(self, api: Api, nodes: list[Obj], objects: Sequence[Obj]) -> Path:
        """Up and filled on first use; emptied of the previous run's pods and events after."""
        if self.kubeconfig is None:
            self.kubeconfig = control_plane_up(self.kube_bin, self.state)
            await populate(api, nodes, self.kubeconfig, objects)
        else:
            started = time.monotonic()
            removed = await empty_namespace(api, CLEANUP_TIMEOUT)
            print(f"  clean-up: {removed} objects deleted in {time.monotonic() - started:.0f} s", flush=True)
        return self.kubeconfig

    def down(self) -> None:
        if self.kubeconfig is not None:
            control_plane_down(self.kube_bin, self.state)
            self.kubeconfig = None


async def empty_namespace(api: Api, timeout: float, resources: Sequence[str] = ("pods", "events")) -> int:
    """Delete every pod (forced: gracePeriodSeconds=0, as no kubelet will confirm) and event of the
    namespace a page of 500 names at a time, 32 deletions in flight, until a LIST finds none;
    returns how many were deleted. Not a collection DELETE: on 30,000 pods the API server's
    request times out (and it goes on deleting, behind the next run's back). Raises after
    `timeout` seconds if the namespace is still not empty."""
    deadline = time.monotonic() + timeout
    removed = 0
    semaphore = asyncio.Semaphore(32)

    async def delete(path: str) -> None:
        async with semaphore:
            await api.call("DELETE", f"{path}?gracePeriodSeconds=0", allow_missing=True)

    for resource in resources:
        collection = f"/api/v1/namespaces/{NAMESPACE}/{resource}"
        while True:
            page = await api.call("GET", f"{collection}?limit=500")
            names = [item["metadata"]["name"] for item in page["items"]]
            if not names:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{collection}: still not empty after {timeout:.0f} s")
            await asyncio.gather(*(delete(f"{collection}/{name}") for name in names))
            removed += len(names)
    return removed


async def one_run(which: str, nodes: list[Obj], pods: list[Obj], mode: str, kube_bin: Path,
                  timeout: float, profile_to: Path | None = None, objects: Sequence[Obj] = (),
                  plane: Plane | None = None, rate: float = STREAM_RATE) -> dict[str, Any]:
    """One scheduler (or the limit client) on the workload: on a fresh control plane, or on `plane`."""
    with tempfile.TemporaryDirectory(prefix="real-bench-") as tmp:
        workdir = Path(tmp)
        state = plane.state if plane is not None else plane_state(workdir / "control-plane")
        api = Api()
        process = None
        metrics: dict[str, list[dict[str, Any]]] = {}
        attempts: dict[str, float] = {}
        created: dict[str, float] = {}
        try:
            if plane is not None:
                kubeconfig = await plane.ready(api, nodes, objects)
            else:
                kubeconfig = control_plane_up(kube_bin, state)
                await populate(api, nodes, kubeconfig, objects)
            meter = CpuMeter({"apiserver": _pid_file(state, "apiserver"), "etcd": _pid_file(state, "etcd")})
            name = {"kube-scheduler": KUBE_SCHEDULER_NAME, "limit": LIMIT_NAME,
                    "pipeline": PIPELINE_NAME}.get(which, PLACER_NAME)
            calls = pod_calls(pods, name)
            watch = Watch(len(pods), meter)
            deadline = time.time() + timeout
            if mode == "backlog":
                await api.many(calls)
                watcher = asyncio.create_task(count_bindings(api, watch, deadline))
                await asyncio.sleep(0.5)  # the watch is open
                start = time.time()
                meter.start()  # the scheduler counts from 0: it starts now
                process = start_scheduler(which, kubeconfig, kube_bin, workdir)
                meter.pids["scheduler"] = process.pid
            else:
                watcher = asyncio.create_task(count_bindings(api, watch, deadline))
                process = start_scheduler(which, kubeconfig, kube_bin, workdir)
                meter.pids["scheduler"] = process.pid
                await asyncio.sleep(5.0)  # started and listing: the clock starts with the first pod
                if rate > 0:
                    start = await api.paced(calls, rate, created, on_first=meter.start)
                else:
                    start = await api.many(calls, on_first=meter.start) or time.time()
            spy = start_profiler(process.pid, profile_to, which) if profile_to else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher, timeout=max(deadline - time.time(), 1.0))
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
                spy.wait(30)
            rss = peak_rss_mb(process.pid)
            if which == "kube-scheduler":
                metrics = await scrape_metrics(api)
            attempts = await placer_attempts(api) if which == "placer" else {}
            bound_pods = (await api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
            node_objs = (await api.call("GET", "/api/v1/nodes"))["items"]
            pending_why: Counter[str] = Counter()
            if not watch.done():  # say why, from the scheduler's FailedScheduling events
                events = (await api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/events"))["items"]
                pending_why.update(e.get("message", "") for e in events if e.get("reason") == "FailedScheduling")
            claims = slices = None
            if any(obj["kind"] == "ResourceClaim" for obj in objects):
                claims = (await api.call("GET", f"{DRA}/namespaces/{NAMESPACE}/resourceclaims"))["items"]
                slices = (await api.call("GET", f"{DRA}/resourceslices"))["items"]
        finally:
            if process is not None:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
                if process.poll() is None:
                    process.kill()
            await api.close()
            if plane is None:
                control_plane_down(kube_bin, state)
            if profile_to is not None and (workdir / f"{which}.log").exists():
                shutil.copy(workdir / f"{which}.log", profile_to / f"{which}-{int(time.time())}.log")
        bound_at = watch.bound_at
        stages = pipeline_stages(workdir / f"{which}.log", len(bound_at)) if which == "pipeline" else {}
        if not bound_at:
            log_file = workdir / f"{which}.log"
            log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise RuntimeError(f"{which}: no binding at all; log tail:\n{log}")
    # the limit client's bindings are round-robin, not placements: nothing to audit
    problems = {} if which == "limit" else audit(node_objs, bound_pods, watch.binds, claims, slices or ())
    times = sorted(bound_at.values())
    outcome = {
        "bound": len(bound_at),
        "bound_in_api": sum(1 for pod in bound_pods if pod["spec"].get("nodeName")),
        "failed_scheduling": dict(pending_why.most_common(3)),
        "watch_restarts": watch.restarts,
        "watch_relists": watch.relists,
        "pods_per_s": len(bound_at) / (times[-1] - start),
        "first_binding_s": times[0] - start,
        "peak_rss_mb": rss,
        **meter.ms_per_pod(len(bound_at)),
        **latency_ms(created, bound_at),
        "arrival_rate": len(created) / (max(created.values()) - start) if len(created) > 1 else float("nan"),
        "violations": sum(problems.values()),
        "problems": problems,
    }
    if metrics:
        outcome["kube_scheduler_metrics"] = metrics
    if stages:
        outcome["stages"] = stages
    if attempts:
        outcome["placer_attempts"] = attempts
    return outcome


MEDIANS = ("pods_per_s", "first_binding_s", "peak_rss_mb", *(f"cpu_ms_per_pod_{name}" for name in CPU_PROCESSES),
           "latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_max", "arrival_rate",
           "bound", "violations")


def _median(values: Sequence[float]) -> float:
    """The median of the values that are numbers (NaN when none is)."""
    numbers = [v for v in values if not math.isnan(v)]
    return statistics.median(numbers) if numbers else float("nan")


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The table's row: the median of each measure over the runs (and every run's pods/s), and
    kube-scheduler's metrics of its last run."""
    row: dict[str, Any] = {key: _median([r[key] for r in runs]) for key in MEDIANS}
    row["all_runs_pods_per_s"] = [round(r["pods_per_s"], 1) for r in runs]
    if "kube_scheduler_metrics" in runs[-1]:
        row["kube_scheduler_metrics"] = runs[-1]["kube_scheduler_metrics"]
    if "stages" in runs[-1]:  # the prototype's stages: each figure the median over the runs
        row["stages"] = {
            stage: {"cpu_ms_per_pod": _median([r["stages"].get(stage, {}).get("cpu_ms_per_pod", math.nan)
                                               for r in runs]),
                    "steps_ms_per_pod": {step: _median([r["stages"].get(stage, {}).get("steps_ms_per_pod", {})
                                                        .get(step, math.nan) for r in runs])
                                         for step in values["steps_ms_per_pod"]}}
            for stage, values in runs[-1]["stages"].items()}
    return row


def print_table(table: dict[str, dict[str, Any]], stream: bool = False) -> None:
    latency = f" {'latency p50/p99 ms':>19}" if stream else ""
    print(f"{'':16} {'pods/s':>8} {'first binding':>14} {'peak RSS':>9} "
          f"{'CPU ms/pod: scheduler':>22} {'apiserver':>9} {'etcd':>6} {'bound':>7} {'violations':>11}{latency}")
    for which, row in table.items():
        latency = f" {row['latency_ms_p50']:9.0f} / {row['latency_ms_p99']:6.0f}" if stream else ""
        violations = "-" if which == "limit" else f"{row['violations']:.0f}"
        print(f"{which:16} {row['pods_per_s']:8.1f} {row['first_binding_s']:12.2f} s {row['peak_rss_mb']:6.0f} MB "
              f"{row['cpu_ms_per_pod_scheduler']:22.2f} {row['cpu_ms_per_pod_apiserver']:9.2f} "
              f"{row['cpu_ms_per_pod_etcd']:6.2f} {row['bound']:7.0f} {violations:>11}{latency}")


def extension_points(metrics: dict[str, list[dict[str, Any]]]) -> str:
    """kube-scheduler's mean ms per extension point (status Success), for the summary line."""
    means = [f"{entry['labels'].get('extension_point')} {entry['mean_ms']:.2f}"
             for entry in metrics.get("scheduler_framework_extension_point_duration_seconds", [])
             if entry["labels"].get("status") == "Success" and entry.get("count")]
    attempts = [f"attempt ({entry['labels'].get('result')}) {entry['mean_ms']:.2f}"
                for entry in metrics.get("scheduler_scheduling_attempt_duration_seconds", []) if entry.get("count")]
    algorithm = [f"algorithm {entry['mean_ms']:.2f}"
                 for entry in metrics.get("scheduler_scheduling_algorithm_duration_seconds", []) if entry.get("count")]
    return ", ".join(means + attempts + algorithm)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-bin", type=Path, default=Path(os.environ["KUBE_BIN"]) if os.environ.get(
        "KUBE_BIN") else DEFAULT_KUBE_BIN, help="folder of build.sh's kube-apiserver and kube-scheduler "
                        "(default: $KUBE_BIN, else ../kube-bin-1.36)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--mode", choices=("backlog", "stream"), default="backlog")
    parser.add_argument("--rate", type=float, default=STREAM_RATE,
                        help="stream mode: pods created per second (0: as fast as the loader can)")
    parser.add_argument("--workload", choices=WORKLOADS, default="plain",
                        help="the pods' constraints (the module's docstring); `devices` needs Kubernetes v1.34+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", choices=("kube-scheduler", "placer", "limit", "pipeline"),
                        help="run one scheduler only")
    parser.add_argument("--prototype", action="store_true",
                        help="add bench/pipeline_prototype.py's row (the decision, the reading and the writing "
                        "in three processes): each stage's CPU per pod")
    parser.add_argument("--no-limit", action="store_true", help="leave out the limit row (bench/limit_client.py)")
    parser.add_argument("--reuse-plane", action="store_true",
                        help="one control plane for every run, its namespace emptied between runs (saves "
                        "filling 15,000 nodes each time; not for `devices`, whose claims get allocated)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="attach py-spy to Placer and write its collapsed stacks here (slows it a little)")
    args = parser.parse_args()
    if not (args.kube_bin / "kube-apiserver").exists():
        parser.error(f"{args.kube_bin}: no kube-apiserver; --kube-bin (or $KUBE_BIN) is the folder of "
                     "../shared/realcluster/build.sh's binaries")
    if args.reuse_plane and args.workload == "devices":
        parser.error("--reuse-plane: the devices workload's claims are allocated by a run; use a fresh plane")
    args.kube_bin = args.kube_bin.resolve()  # realcluster.sh starts the API server from its state folder
    version = kube_version(args.kube_bin)
    print(f"Kubernetes {version} ({args.kube_bin})", flush=True)
    if args.workload == "devices" and int(version.split(".")[1]) < DRA_MINOR:
        print(f"workload devices refused: Kubernetes {version} does not serve resource.k8s.io/v1 (Dynamic Resource "
              f"Allocation's API, served from v1.{DRA_MINOR}); run it on v1.{DRA_MINOR}+ (e.g. ../kube-bin-1.36)",
              file=sys.stderr, flush=True)
        return EXIT_UNSUPPORTED
    nodes, pods, objects = synthetic_cluster(args.nodes, args.pods, workload=args.workload)
    precompile(ROOT)
    lock = hold_lock()  # noqa: F841 - held until the process ends
    schedulers = [args.only] if args.only else [*([] if args.no_limit else ["limit"]), "kube-scheduler", "placer",
                                                 *(["pipeline"] if args.prototype else [])]
    results: dict[str, list[dict[str, Any]]] = {which: [] for which in schedulers}
    rate = args.rate if args.mode == "stream" else 0.0
    with tempfile.TemporaryDirectory(prefix="real-bench-plane-") as folder:
        plane = Plane(args.kube_bin, Path(folder)) if args.reuse_plane else None
        try:
            for run in range(args.runs):
                for which in schedulers:  # one after the other in each run: all see the same machine
                    profile_to = args.profile if which == "placer" else None
                    outcome = asyncio.run(one_run(which, nodes, pods, args.mode, args.kube_bin, args.timeout,
                                                  profile_to, objects, plane, rate))
                    results[which].append(outcome)
                    report_run(run, which, outcome, len(pods), args.mode == "stream")
        finally:
            if plane is not None:
                plane.down()
    table = {which: medians(runs) for which, runs in results.items()}
    paced = f" at {rate:g} pods/s" if rate else ""
    print(f"\n{args.nodes} nodes, {args.pods} pods, {args.mode}{paced}, {args.workload}, Kubernetes {version} "
          f"(medians of {args.runs} runs)")
    print_table(table, args.mode == "stream")
    summary: dict[str, Any] = {"kube_version": version, "nodes": args.nodes, "pods": args.pods, "mode": args.mode,
                               "arrival_rate": rate or None, "workload": args.workload, "runs": args.runs,
                               "results": table}
    shares = limit_shares(table)
    if shares:
        summary["share_of_limit"] = {which: round(share, 3) for which, share in shares.items()}
        print("share of the limit row's rate: " + ", ".join(f"{w} {v:.0%}" for w, v in shares.items()))
    if "kube-scheduler" in table and "placer" in table:
        placer, kube = table["placer"], table["kube-scheduler"]
        ratio = placer["pods_per_s"] / kube["pods_per_s"]
        summary["ratio"] = round(ratio, 2)
        checks = [placer["first_binding_s"] <= kube["first_binding_s"], placer["peak_rss_mb"] <= kube["peak_rss_mb"],
                  placer["violations"] == 0]
        if args.mode == "stream" and rate:  # a paced stream: latency, not a rate the loader sets, is the measure
            checks.append(placer["latency_ms_p99"] <= kube["latency_ms_p99"])
        else:
            checks.append(ratio >= TARGET_RATIO)
        if "placer" in shares:
            checks.append(shares["placer"] >= TARGET_LIMIT_SHARE)
        summary["meets_target"] = all(checks)
        print(f"Placer / kube-scheduler: {ratio:.2f}x (target: >= {TARGET_RATIO}x or, paced streaming, p99 latency "
              f"no higher; >= {TARGET_LIMIT_SHARE:.0%} of the limit row; first binding and RSS no worse; "
              f"0 violations): {'met' if summary['meets_target'] else 'NOT met'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def report_run(run: int, which: str, outcome: dict[str, Any], pods: int, stream: bool) -> None:
    latency = (f", latency p50/p99 {outcome['latency_ms_p50']:.0f}/{outcome['latency_ms_p99']:.0f} ms at "
               f"{outcome['arrival_rate']:.0f} pods/s" if stream and not math.isnan(outcome["latency_ms_p50"]) else "")
    print(f"run {run + 1} {which:>14}: {outcome['pods_per_s']:7.1f} pods/s, first binding "
          f"{outcome['first_binding_s']:.2f} s, peak RSS {outcome['peak_rss_mb']:.0f} MB, CPU ms/pod "
          f"scheduler {outcome['cpu_ms_per_pod_scheduler']:.2f} apiserver "
          f"{outcome['cpu_ms_per_pod_apiserver']:.2f} etcd {outcome['cpu_ms_per_pod_etcd']:.2f}, "
          f"{outcome['bound']}/{pods} bound, violations {outcome['violations']} {outcome['problems']}{latency}",
          flush=True)
    if "kube_scheduler_metrics" in outcome:
        print(f"  kube-scheduler's mean ms: {extension_points(outcome['kube_scheduler_metrics'])}", flush=True)
    if outcome.get("placer_attempts"):
        print("  Placer's scheduling attempts: " + ", ".join(
            f"{result} {count:.0f}" for result, count in sorted(outcome["placer_attempts"].items())), flush=True)
    for stage, values in outcome.get("stages", {}).items():
        steps = ", ".join(f"{step} {ms:.3f}" for step, ms in values["steps_ms_per_pod"].items())
        print(f"  {stage}: {values['cpu_ms_per_pod']:.3f} CPU ms per pod after a start-up of "
              f"{values['startup_cpu_s']:.2f} s ({steps}); peak RSS {values['peak_rss_mb']:.0f} MB", flush=True)
    if outcome["watch_restarts"]:
        print(f"  the API server closed the bindings' watch {outcome['watch_restarts']} time(s) (resumed; "
              f"{outcome['watch_relists']} by a fresh list)", flush=True)
    if outcome["bound"] < pods:
        print(f"  not bound: {pods - outcome['bound']} ({outcome['bound_in_api']} bound in the API server "
              f"at the end); FailedScheduling: {outcome['failed_scheduling'] or 'none'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
