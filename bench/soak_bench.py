"""Soak: steady pod churn with injected faults against two `placer run` replicas (leader election).

Bounded in time (`--minutes`, default 3). While pods are created and deleted at a steady rate,
the harness injects, in turn: 500s and 503s on bindings, 429s with Retry-After, dropped watch
streams, a compacted watch history (resumes get 410), a short outage of the API server, and a
SIGKILL of the current leader (restarted a moment later). At the end it lets the replicas
drain the queue, then audits what the API server holds:

- lost: a pod created, never deleted, still unbound although it fits (the engine, replayed on
  what the API server holds, would place it; a pod that fits nowhere in a full cluster is not);
- double: a pod with more than one successful binding;
- overcommitted: a node whose bound pods request more than its allocatable.

    python bench/soak_bench.py [--minutes 3] [--nodes 100] [--rate 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from e2e_bench import PROFILE, populate  # noqa: E402
from placer.engine.cluster import ClusterState  # noqa: E402
from placer.engine.parsing import parse_node, parse_pod  # noqa: E402
from placer.engine.profile import compile_profile  # noqa: E402
from placer.engine.queue import queue_order  # noqa: E402
from placer.engine.runtime import Scheduler  # noqa: E402
from synthetic import make_node, make_pod  # noqa: E402

from tests.kubeemu import EmulatorProcess  # noqa: E402

FAULTS = ("bind-500", "bind-503", "throttle-429", "drop-watches", "compact", "outage", "kill-leader")


class Replica:
    """One `placer run` process with its own identity."""

    def __init__(self, name: str, kubeconfig: Path, logs: Path) -> None:
        self.name = name
        self.kubeconfig = kubeconfig
        self.log_path = logs / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "POD_NAME": self.name,
            "POD_NAMESPACE": "placer-system",
        }
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "placer.cli", "run", "--metrics-port", "0"], env=env, stdout=log, stderr=log
        )
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def lease_holder(emu: EmulatorProcess) -> str | None:
    try:
        lease = emu.request("GET", "/apis/coordination.k8s.io/v1/namespaces/placer-system/leases/placer")
    except Exception:
        return None
    return (lease.get("spec") or {}).get("holderIdentity") or None


def inject(emu: EmulatorProcess, fault: str, replicas: dict[str, Replica]) -> None:
    if fault == "bind-500":
        emu.control("POST", "faults", {"method": "POST", "path": "/binding$", "status": 500, "count": 20})
    elif fault == "bind-503":
        emu.control("POST", "faults", {"method": "POST", "path": "/binding$", "status": 503, "count": 20})
    elif fault == "throttle-429":
        emu.control("POST", "faults", {"path": ".*", "status": 429, "count": 30, "retryAfter": 1})
    elif fault == "drop-watches":
        emu.control("POST", "watches/drop", {"abort": True})
    elif fault == "compact":
        emu.control("POST", "compact", {})
        emu.control("POST", "watches/drop", {"abort": False})
    elif fault == "outage":
        emu.control("POST", "unreachable", {"seconds": 3, "mode": "refuse"})
    elif fault == "kill-leader":
        holder = lease_holder(emu)
        victim = replicas.get(holder or "") or next(iter(replicas.values()))
        victim.kill()
        time.sleep(1.0)
        victim.start()


def lost_pods(emu: EmulatorProcess, live: set[str]) -> list[str]:
    """Live pods still unbound although they fit: the engine, replayed on what the API server
    holds now, would place them (a pod that fits nowhere because the cluster is full is not lost)."""
    cluster = ClusterState()
    for obj in emu.request("GET", "/api/v1/nodes")["items"]:
        cluster.upsert_node(parse_node(obj))
    pending = []
    for obj in emu.request("GET", "/api/v1/namespaces/bench/pods")["items"]:
        pod = parse_pod(obj)
        if pod.node_name:
            cluster.add_pod(pod)
        elif pod.key in live:
            pending.append(pod)
    profile = compile_profile("soak", PROFILE["spec"])
    scheduler = Scheduler()
    lost = []
    for pod in sorted(pending, key=queue_order):
        decision = scheduler.schedule(pod, profile, cluster)
        if decision.node is not None:
            cluster.assume(pod, decision.node)
            lost.append(pod.key)
    return lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="pods created per second")
    parser.add_argument("--delete-ratio", type=float, default=0.9, help="pods deleted per pod created")
    parser.add_argument("--fault-every", type=float, default=10.0, help="seconds between faults")
    parser.add_argument("--drain", type=float, default=60.0, help="seconds allowed to drain at the end")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(11)
    nodes = [make_node(i, rng) for i in range(args.nodes)]
    created: list[str] = []
    deleted: set[str] = set()
    faults: Counter[str] = Counter()
    with EmulatorProcess("--no-record-requests") as emu, tempfile.TemporaryDirectory() as tmp:
        populate(emu, nodes, [])
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        replicas = {name: Replica(name, kubeconfig, Path(tmp)) for name in ("placer-a", "placer-b")}
        for replica in replicas.values():
            replica.start()
        begin = time.monotonic()
        deadline = begin + args.minutes * 60
        next_fault = begin + args.fault_every
        index = 0
        fault_cycle = 0
        while time.monotonic() < deadline:
            tick = time.monotonic()
            for _ in range(max(1, int(args.rate))):
                pod = make_pod(index, rng, namespace="bench")
                index += 1
                try:
                    emu.request("POST", "/api/v1/namespaces/bench/pods", pod)
                    created.append(f"bench/{pod['metadata']['name']}")
                except Exception:
                    pass  # during an injected outage: that pod was simply never created
            # churn: delete a few older pods, bound or not
            for key in rng.sample(created[:-50], k=min(len(created[:-50]), max(1, int(args.rate * args.delete_ratio)))):
                if key in deleted:
                    continue
                try:
                    emu.request("DELETE", f"/api/v1/namespaces/bench/pods/{key.split('/')[1]}")
                    deleted.add(key)
                except Exception:
                    pass
            if tick >= next_fault:
                fault = FAULTS[fault_cycle % len(FAULTS)]
                fault_cycle += 1
                try:
                    inject(emu, fault, replicas)
                    faults[fault] += 1
                except Exception as error:  # the control call itself failed: say so, keep going
                    print(f"fault {fault} not injected: {error}", flush=True)
                next_fault = tick + args.fault_every
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        # drain
        emu.control("DELETE", "faults")
        emu.control("POST", "reachable", {})
        live = set(created) - deleted
        drain_deadline = time.monotonic() + args.drain
        while (left := lost_pods(emu, live)) and time.monotonic() < drain_deadline:
            time.sleep(1.0)
        bindings = emu.control("GET", "bindings")
        overcommitted = emu.control("GET", "capacity")
        for replica in replicas.values():
            replica.stop()
        restarts = sum(r.starts - 1 for r in replicas.values())
    per_pod = Counter(f"{b['namespace']}/{b['name']}" for b in bindings)
    result = {
        "minutes": args.minutes,
        "nodes": args.nodes,
        "pods_created": len(created),
        "pods_deleted": len(deleted),
        "pods_scheduled": len(per_pod),
        "pending_unfit_at_end": len(set(created) - deleted - set(per_pod)) - len(left),
        "faults_injected": dict(faults),
        "leader_restarts": restarts,
        "lost": len(left),
        "double": sum(1 for count in per_pod.values() if count > 1),
        "overcommitted": len(overcommitted),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["lost"] == result["double"] == result["overcommitted"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
