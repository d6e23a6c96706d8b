"""Placer against kube-scheduler on a real control plane (etcd + kube-apiserver on loopback, no
kubelets: `../shared/realcluster/`), one scheduler after the other on the same workload.

The Kubernetes version is that of the binaries given: `../kube-bin-1.36` by default (v1.36.2, the
reference), any folder `../shared/realcluster/build.sh` filled with `--kube-bin` or `$KUBE_BIN`
(v1.24 is the oldest supported); the version is read from `kube-apiserver --version`, recorded
in the results, and picks kube-scheduler's configuration API (`kubescheduler.config.k8s.io/v1`
from v1.25, `v1beta3` before).

Per scheduler and run: a fresh control plane (`realcluster.sh up` wipes etcd), the nodes of
`bench/synthetic.py` (created, then their status written), then either

- `backlog`: every pending pod created first, then the scheduler started (the clock runs from its
  start), or
- `stream`: the scheduler started first and given a moment, then the pods created as fast as a
  32-way client can (the clock runs from the first creation),

and the bindings counted through a watch until every pod is bound (or the timeout). Afterwards
the API server's pods and nodes are audited (`bench/audit.py`: capacity, readiness, cordons,
taints, selectors, required anti-affinity, DoNotSchedule skew). kube-scheduler runs with raised
client limits (QPS 5000, burst 10000, as BENCHMARKS.md) and its own schedulerName; Placer is
`placer run --no-leader-elect` with the default profile. Peak RSS is each process's VmHWM.

Needs the binaries of `../shared/realcluster/build.sh` and etcd (`realcluster.sh` installs
Debian's); never part of `make test` or CI.

    python bench/real_bench.py [--kube-bin DIR] [--nodes 1000] [--pods 5000] [--mode backlog|stream]
        [--runs 3] [--workload plain|relations] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from audit import audit  # noqa: E402
from synthetic import cluster as synthetic_cluster  # noqa: E402

REALCLUSTER = ROOT.parent / "shared" / "realcluster" / "realcluster.sh"
DEFAULT_KUBE_BIN = ROOT.parent / "kube-bin-1.36"  # ../shared/realcluster/build.sh's v1.36.2 build
PORT = 6443
SERVER = f"https://127.0.0.1:{PORT}"
TOKEN = "admintoken"  # realcluster.sh's admin token (system:masters), loopback only
NAMESPACE = "bench"
KUBE_SCHEDULER_NAME = "kube-bench"
PLACER_NAME = "placer"
TARGET_RATIO = 2.0
Obj = dict[str, Any]


def kube_version(kube_bin: Path) -> str:
    """`v1.36.2` from `kube-apiserver --version` ("Kubernetes v1.36.2")."""
    done = subprocess.run([str(kube_bin / "kube-apiserver"), "--version"], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()[-1].split("+")[0]


def kube_minor(kube_bin: Path) -> int:
    return int(kube_version(kube_bin).split(".")[1])


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
        data = None if body is None else json.dumps(body)
        for attempt in range(5):
            async with self.session.request(method, self.server + path, data=data,
                                            headers={"Content-Type": content_type}) as response:
                text = await response.text()
                if (response.status >= 500 or response.status == 429) and attempt < 4:
                    await asyncio.sleep(0.2 * 2**attempt)
                    continue
                if response.status == 404 and allow_missing:
                    return None
                if response.status >= 300 and response.status != 409 and response.status not in allow_status:
                    raise RuntimeError(f"{method} {path}: {response.status} {text[:300]}")
                return json.loads(text) if text else None
        return None

    async def many(self, calls: list[tuple[str, str, Any, str]], concurrency: int = 32) -> float | None:
        """Run calls 32 at a time; returns when the first one was sent."""
        queue: asyncio.Queue[tuple[str, str, Any, str]] = asyncio.Queue()
        for call in calls:
            queue.put_nowait(call)
        first: list[float] = []

        async def worker() -> None:
            while not queue.empty():
                method, path, body, content_type = queue.get_nowait()
                if not first:
                    first.append(time.time())
                await self.call(method, path, body, content_type)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return first[0] if first else None


def control_plane_up(kube_bin: Path, state: Path, port: int = PORT) -> Path:
    env = {**os.environ, "KUBE_BIN": str(kube_bin), "RC_DIR": str(state), "RC_PORT": str(port)}
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
    env = {**os.environ, "KUBE_BIN": str(kube_bin), "RC_DIR": str(state)}
    subprocess.run(["bash", str(REALCLUSTER), "down"], env=env, check=False, capture_output=True)
    deadline = time.monotonic() + 3
    while any(_alive(pid) for pid in pids) or not all(port_free(p) for p in (port, 2379)):
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


async def populate(api: Api, nodes: list[Obj], kubeconfig: Path) -> None:
    await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await api.many([("POST", "/api/v1/nodes", {k: v for k, v in n.items() if k != "status"}, "application/json")
                    for n in nodes])
    await api.many([("PATCH", f"/api/v1/nodes/{n['metadata']['name']}/status", {"status": n["status"]},
                     "application/merge-patch+json") for n in nodes])
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


async def count_bindings(api: Api, expected: int, deadline: float, bound_at: dict[str, float],
                         binds: Counter[str]) -> None:
    """Watch the namespace's pods; note when each is first seen with a node."""
    listing = await api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
    version = listing["metadata"]["resourceVersion"]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&allowWatchBookmarks=true&resourceVersion={version}"
    async with api.session.get(api.server + path, timeout=timeout) as response:
        async for line in response.content:
            event = json.loads(line)
            obj = event.get("object") or {}
            node = (obj.get("spec") or {}).get("nodeName")
            name = (obj.get("metadata") or {}).get("name")
            if node and name and name not in bound_at:
                bound_at[name] = time.time()
                binds[name] += 1
            if len(bound_at) >= expected or time.time() > deadline:
                return


def peak_rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def start_scheduler(which: str, kubeconfig: Path, kube_bin: Path, workdir: Path) -> subprocess.Popen[bytes]:
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
        command = [str(kube_bin / "kube-scheduler"), f"--config={config}", "--secure-port=0", "--v=0"]
        env = dict(os.environ)
    else:
        command = [str(ROOT / ".venv" / "bin" / "placer"), "run", "--no-leader-elect", "--metrics-port", "0"]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "default"}
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def start_profiler(pid: int, folder: Path, which: str) -> subprocess.Popen[bytes]:
    """py-spy attached to the scheduler (`--profile DIR`): collapsed stacks, idle frames left out."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{which}-{int(time.time())}.txt"
    return subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", "100", "--format", "raw",
                             "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def one_run(which: str, nodes: list[Obj], pods: list[Obj], mode: str, kube_bin: Path,
                  timeout: float, profile_to: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="real-bench-") as tmp:
        workdir = Path(tmp)
        state = workdir / "control-plane"
        kubeconfig = control_plane_up(kube_bin, state)
        api = Api()
        process = None
        try:
            await populate(api, nodes, kubeconfig)
            name = KUBE_SCHEDULER_NAME if which == "kube-scheduler" else PLACER_NAME
            calls = pod_calls(pods, name)
            bound_at: dict[str, float] = {}
            binds: Counter[str] = Counter()
            deadline = time.time() + timeout
            if mode == "backlog":
                await api.many(calls)
                watcher = asyncio.create_task(count_bindings(api, len(pods), deadline, bound_at, binds))
                await asyncio.sleep(0.5)  # the watch is open
                start = time.time()
                process = start_scheduler(which, kubeconfig, kube_bin, workdir)
            else:
                watcher = asyncio.create_task(count_bindings(api, len(pods), deadline, bound_at, binds))
                process = start_scheduler(which, kubeconfig, kube_bin, workdir)
                await asyncio.sleep(5.0)  # started and listing: the clock starts with the first pod
                start = await api.many(calls) or time.time()
            spy = start_profiler(process.pid, profile_to, which) if profile_to else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher, timeout=max(deadline - time.time(), 1.0))
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
                spy.wait(30)
            rss = peak_rss_mb(process.pid)
            bound_pods = (await api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
            node_objs = (await api.call("GET", "/api/v1/nodes"))["items"]
        finally:
            if process is not None:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
                if process.poll() is None:
                    process.kill()
            await api.close()
            control_plane_down(kube_bin, state)
            if profile_to is not None and (workdir / f"{which}.log").exists():
                shutil.copy(workdir / f"{which}.log", profile_to / f"{which}-{int(time.time())}.log")
        if not bound_at:
            log_file = workdir / f"{which}.log"
            log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise RuntimeError(f"{which}: no binding at all; log tail:\n{log}")
    problems = audit(node_objs, bound_pods, binds)
    times = sorted(bound_at.values())
    return {
        "bound": len(bound_at),
        "pods_per_s": len(bound_at) / (times[-1] - start),
        "first_binding_s": times[0] - start,
        "peak_rss_mb": rss,
        "violations": sum(problems.values()),
        "problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kube-bin", type=Path, default=Path(os.environ["KUBE_BIN"]) if os.environ.get(
        "KUBE_BIN") else DEFAULT_KUBE_BIN, help="folder of build.sh's kube-apiserver and kube-scheduler "
                        "(default: $KUBE_BIN, else ../kube-bin-1.36)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--mode", choices=("backlog", "stream"), default="backlog")
    parser.add_argument("--workload", choices=("plain", "relations"), default="plain")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", choices=("kube-scheduler", "placer"), help="run one scheduler only")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="attach py-spy to Placer and write its collapsed stacks here (slows it a little)")
    args = parser.parse_args()
    if not (args.kube_bin / "kube-apiserver").exists():
        parser.error(f"{args.kube_bin}: no kube-apiserver; --kube-bin (or $KUBE_BIN) is the folder of "
                     "../shared/realcluster/build.sh's binaries")
    args.kube_bin = args.kube_bin.resolve()  # realcluster.sh starts the API server from its state folder
    version = kube_version(args.kube_bin)
    print(f"Kubernetes {version} ({args.kube_bin})", flush=True)
    nodes, pods, _ = synthetic_cluster(args.nodes, args.pods, workload=args.workload)
    schedulers = [args.only] if args.only else ["kube-scheduler", "placer"]
    results: dict[str, list[dict[str, Any]]] = {which: [] for which in schedulers}
    for run in range(args.runs):
        for which in schedulers:  # one after the other in each run: both see the same machine
            profile_to = args.profile if which == "placer" else None
            outcome = asyncio.run(one_run(which, nodes, pods, args.mode, args.kube_bin, args.timeout, profile_to))
            results[which].append(outcome)
            print(f"run {run + 1} {which:>14}: {outcome['pods_per_s']:7.1f} pods/s, first binding "
                  f"{outcome['first_binding_s']:.2f} s, peak RSS {outcome['peak_rss_mb']:.0f} MB, "
                  f"{outcome['bound']}/{len(pods)} bound, violations {outcome['violations']} {outcome['problems']}",
                  flush=True)
    table = {}
    for which, runs in results.items():
        table[which] = {key: statistics.median(r[key] for r in runs)
                        for key in ("pods_per_s", "first_binding_s", "peak_rss_mb", "violations")}
        table[which]["all_runs_pods_per_s"] = [round(r["pods_per_s"], 1) for r in runs]
    print(f"\n{args.nodes} nodes, {args.pods} pods, {args.mode}, {args.workload}, Kubernetes {version} "
          f"(medians of {args.runs} runs)")
    print(f"{'':16} {'pods/s':>8} {'first binding':>14} {'peak RSS':>9} {'violations':>11}")
    for which, row in table.items():
        print(f"{which:16} {row['pods_per_s']:8.1f} {row['first_binding_s']:12.2f} s {row['peak_rss_mb']:6.0f} MB "
              f"{row['violations']:11.0f}")
    summary: dict[str, Any] = {"kube_version": version, "nodes": args.nodes, "pods": args.pods, "mode": args.mode,
                               "workload": args.workload, "runs": args.runs, "results": table}
    if len(table) == 2:
        ratio = table["placer"]["pods_per_s"] / table["kube-scheduler"]["pods_per_s"]
        summary["ratio"] = round(ratio, 2)
        summary["meets_target"] = bool(
            ratio >= TARGET_RATIO
            and table["placer"]["first_binding_s"] <= table["kube-scheduler"]["first_binding_s"]
            and table["placer"]["peak_rss_mb"] <= table["kube-scheduler"]["peak_rss_mb"]
            and table["placer"]["violations"] == 0
        )
        print(f"Placer / kube-scheduler: {ratio:.2f}x (target >= {TARGET_RATIO}x, first binding and RSS no worse, "
              f"0 violations): {'met' if summary['meets_target'] else 'NOT met'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
