"""A prototype of Placer as three processes (issue 25's design for machines with more cores),
run as a row of bench/real_bench.py (`--prototype`) to measure each stage's CPU per pod.

Placer today is one Python thread: the watches' decoding and parsing, the decisions and the
writes share one core, so its rate can never pass one core's worth of all three. This prototype
splits them and keeps only the decision on the deciding core:

- **reader** (its own process): the LISTs and the pod watch over Placer's transport; decodes
  (orjson), parses (`parse_pod`, `parse_node`), recognises a pod bound where it was assumed
  (`PodSource.bound`, as Placer's informer: no second parse) and sends the decider what a decision
  reads, already parsed, in batches through a pipe (pickled).
- **decider** (the main process): the cluster state, a priority queue, `Scheduler.schedule` and
  `assume` for each pod, the bound pods confirmed; sends (pod, node) pairs to the writer in batches.
- **writer** (its own process): POST pods/binding and one events.k8s.io/v1 `Scheduled` event per
  pod (Placer's event), 64 calls in flight; a failed binding goes back to the decider, which
  forgets the pod's assumption.

It is not Placer: one default profile, no preemption, no conditions for unschedulable pods, no
profiles or catalog kinds watched, no leader election, no retries of a failed binding. It is the
least each stage must do per pod, measured, so the model in docs/performance.md can be read off
stages instead of one process's total.

On SIGTERM every stage prints one line, `pipeline-stage {json}`: its CPU seconds in all
(`cpu_s`), at the end of its start-up (imports and the first connection, `startup_cpu_s`), at the
last item it handled (`last_cpu_s`), the items handled, its peak RSS, and its CPU split by step
(`steps`, `time.process_time` around each step).

    python bench/pipeline_prototype.py KUBECONFIG NAMESPACE SCHEDULER_NAME
"""

from __future__ import annotations

import asyncio
import heapq
import json
import multiprocessing
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from placer.controller.binding.reporting import scheduled_event
from placer.controller.transport.client import KubeClient
from placer.engine.cluster import ClusterState
from placer.engine.objects import PodInfo
from placer.engine.parsing import PodSource, parse_node, parse_pod, pod_key
from placer.engine.profile import compile_profile
from placer.engine.runtime import Scheduler

MAX_IN_FLIGHT = 64  # the writer's binds in flight (Placer's default is 64 too)
BATCH = 256  # items per pipe message at most; fewer when nothing else is waiting
DECIDE_BETWEEN_READS = 64  # pods decided before the decider looks at its pipes again
CACHED = ("resourceVersion", "0")  # the watch cache, as client-go's first LIST


class Stage:
    """One stage's CPU accounting: where its process time went, step by step."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps: defaultdict[str, float] = defaultdict(float)
        self.items = 0
        self.startup_cpu = 0.0
        self.last_cpu = 0.0

    def ready(self) -> None:
        self.startup_cpu = time.process_time()

    def timed(self, step: str, started: float) -> float:
        """Add the CPU since `started` to `step`; return the clock now (the next step's start)."""
        now = time.process_time()
        self.steps[step] += now - started
        return now

    def handled(self, count: int = 1) -> None:
        self.items += count
        self.last_cpu = time.process_time()

    def report(self) -> None:
        peak = 0.0
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
        line = "pipeline-stage " + json.dumps({
            "stage": self.name, "pid": os.getpid(), "cpu_s": time.process_time(), "startup_cpu_s": self.startup_cpu,
            "last_cpu_s": self.last_cpu, "items": self.items, "peak_rss_mb": peak,
            "steps": {step: round(seconds, 4) for step, seconds in sorted(self.steps.items())},
        }) + "\n"
        # one write: the three stages share stdout and report at once (print's separate writes of
        # the text and its newline could interleave with another stage's line)
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), line.encode())


def _exit_reporting(stage: Stage) -> None:
    def handler(signum: int, frame: Any) -> None:
        stage.report()
        os._exit(0)
    signal.signal(signal.SIGTERM, handler)


class Batcher:
    """Items sent through a pipe in batches: at BATCH items, or when the loop next comes round
    (what one read of the socket delivered goes as one message)."""

    def __init__(self, conn: Connection, stage: Stage, step: str) -> None:
        self.conn, self.stage, self.step = conn, stage, step
        self.items: list[Any] = []
        self.scheduled = False

    def add(self, item: Any) -> None:
        self.items.append(item)
        if len(self.items) >= BATCH:
            self.flush()
        elif not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        if self.items:
            started = time.process_time()
            self.conn.send(self.items)
            self.items = []
            self.stage.timed(self.step, started)


# --- the reader -------------------------------------------------------------------------------

async def _read(conn: Connection, kubeconfig: str, namespace: str, scheduler_name: str, stage: Stage) -> None:
    kube = await KubeClient.connect(kubeconfig, pool_size=4)
    await kube.request("GET", "/version")
    stage.ready()
    out = Batcher(conn, stage, "send (pickle + pipe)")
    sources: dict[str, PodSource] = {}  # pending pods sent, to recognise their binding without a parse

    started = time.process_time()
    nodes, _ = await kube.list_objects("/api/v1/nodes", [CACHED])
    started = stage.timed("receive + decode", started)
    parsed_nodes = [parse_node(node) for node in nodes]
    stage.timed("parse", started)
    out.add(("nodes", parsed_nodes))
    stage.handled(len(parsed_nodes))

    def file(obj: Mapping[str, Any], kind: str) -> None:
        started = time.process_time()
        key = pod_key(obj)  # as PodInfo.key, so that the decider's keys match
        if kind == "DELETED":
            sources.pop(key, None)
            out.add(("deleted", key))
            return
        source = sources.get(key)
        bound = source.bound(obj) if source is not None else None
        if bound is not None:
            del sources[key]
            stage.timed("recognise a binding", started)
            out.add(("bound", key, bound.node_name, bound.resource_version))
        else:
            pod = parse_pod(obj)
            if not pod.node_name and pod.scheduler_name == scheduler_name:
                made = PodSource.of(obj, pod)
                if made is not None:
                    sources[key] = made
            stage.timed("parse", started)
            out.add(("pod", pod))
        stage.handled()

    path = f"/api/v1/namespaces/{namespace}/pods"
    started = time.process_time()
    pods, version = await kube.list_objects(path, [CACHED])
    stage.timed("receive + decode", started)
    for pod in pods:
        file(pod, "ADDED")
    out.add(("synced",))
    out.flush()
    while True:  # the server ends a watch now and then: resume where it ended
        query = [("resourceVersion", version), ("allowWatchBookmarks", "true")]
        started = time.process_time()
        async for change in kube.watch(path, query, connect_timeout=10, read_timeout=600):
            stage.timed("receive + decode", started)
            obj = change.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            if change.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                file(obj, change["type"])
            started = time.process_time()


def reader(conn: Connection, kubeconfig: str, namespace: str, scheduler_name: str) -> None:
    stage = Stage("reader")
    _exit_reporting(stage)
    asyncio.run(_read(conn, kubeconfig, namespace, scheduler_name, stage))


# --- the writer -------------------------------------------------------------------------------

async def _write(conn: Connection, results: Connection, kubeconfig: str, instance: str, stage: Stage) -> None:
    kube = await KubeClient.connect(kubeconfig, pool_size=MAX_IN_FLIGHT + 8)
    await kube.request("GET", "/version")
    stage.ready()
    queue: asyncio.Queue[tuple[str, str, str, str, str]] = asyncio.Queue()
    failed = Batcher(results, stage, "send failures")

    def receive() -> None:
        started = time.process_time()
        try:
            message = conn.recv()
        except EOFError:  # the decider is gone
            stage.report()
            os._exit(0)
        for item in message:
            queue.put_nowait(item)
        stage.timed("receive (pipe + unpickle)", started)

    asyncio.get_running_loop().add_reader(conn.fileno(), receive)

    async def worker() -> None:
        while True:
            namespace, name, uid, version, node = await queue.get()
            outcome = await kube.bind(namespace, name, uid, node)
            if outcome.result.value == "bound":
                pod = PodInfo(namespace=namespace, name=name, uid=uid, resource_version=version)
                await kube.create_event(namespace, scheduled_event(pod, node, instance))
            else:
                failed.add(f"{namespace}/{name}")
            stage.handled()

    await asyncio.gather(*(worker() for _ in range(MAX_IN_FLIGHT)))


def writer(conn: Connection, results: Connection, kubeconfig: str, instance: str) -> None:
    stage = Stage("writer")
    _exit_reporting(stage)
    asyncio.run(_write(conn, results, kubeconfig, instance, stage))


# --- the decider ------------------------------------------------------------------------------

class Decider:
    """The deciding core: the cluster state, the queue and the engine, nothing else."""

    def __init__(self, scheduler_name: str, to_writer: Connection, stage: Stage) -> None:
        self.scheduler_name = scheduler_name
        self.to_writer = to_writer
        self.stage = stage
        self.cluster = ClusterState()
        self.profile = compile_profile("prototype", {"schedulerName": scheduler_name})
        self.scheduler = Scheduler()
        self.queue: list[tuple[int, float, int, PodInfo]] = []
        self.assumed: dict[str, PodInfo] = {}
        self.synced = False
        self.sequence = 0
        self.unschedulable = 0

    def take(self, message: list[tuple[Any, ...]]) -> None:
        """A batch from the reader: nodes, pods (pending: queued; assigned: counted), bindings."""
        started = time.process_time()
        for item in message:
            kind = item[0]
            if kind == "pod":
                pod: PodInfo = item[1]
                if pod.node_name:
                    self.cluster.add_pod(pod)
                elif pod.scheduler_name == self.scheduler_name and pod.key not in self.assumed:
                    self.sequence += 1
                    heapq.heappush(self.queue, (-pod.priority, pod.created, self.sequence, pod))
            elif kind == "bound":
                _, key, node, version = item
                mine = self.assumed.pop(key, None)
                if mine is not None:  # the assumed pod confirmed: Placer's informer files a copy
                    self.cluster.add_pod(replace(mine, node_name=node, resource_version=version))
            elif kind == "deleted":
                self.cluster.remove_pod(item[1])
            elif kind == "nodes":
                for node in item[1]:
                    self.cluster.upsert_node(node)
            elif kind == "synced":
                self.synced = True
        self.stage.timed("file (state, queue)", started)

    def failed(self, keys: list[str]) -> None:
        for key in keys:
            pod = self.assumed.pop(key, None)
            if pod is not None:
                self.cluster.forget(key, pod)

    def decide(self) -> None:
        """Up to DECIDE_BETWEEN_READS pods from the queue; the chosen nodes go to the writer."""
        out: list[tuple[str, str, str, str, str]] = []
        for _ in range(min(DECIDE_BETWEEN_READS, len(self.queue))):
            started = time.process_time()
            pod = heapq.heappop(self.queue)[3]
            decision = self.scheduler.schedule(pod, self.profile, self.cluster)
            started = self.stage.timed("decide (schedule)", started)
            if decision.node is None:
                self.unschedulable += 1
                continue
            self.scheduler.assume(pod, decision, self.profile, self.cluster)
            self.assumed[pod.key] = pod
            out.append((pod.namespace, pod.name, pod.uid, pod.resource_version, decision.node))
            self.stage.timed("assume", started)
        if out:
            started = time.process_time()
            self.to_writer.send(out)
            self.stage.timed("send (pickle + pipe)", started)
            self.stage.handled(len(out))

    def run(self, from_reader: Connection, from_writer: Connection) -> None:
        while True:
            busy = self.synced and bool(self.queue)
            for conn in wait([from_reader, from_writer], timeout=0 if busy else None):
                started = time.process_time()
                message = conn.recv()  # type: ignore[union-attr]
                self.stage.timed("receive (pipe + unpickle)", started)
                if conn is from_reader:
                    self.take(message)
                else:
                    self.failed(message)
            if self.synced:
                self.decide()


def main() -> int:
    kubeconfig, namespace, scheduler_name = sys.argv[1:4]
    os.environ.pop("HTTPS_PROXY", None)
    context = multiprocessing.get_context("fork")  # the children share the imports already done
    decider_in, reader_out = context.Pipe(duplex=False)  # (the receiving end, the sending end)
    writer_in, decider_out = context.Pipe(duplex=False)
    results_in, writer_results = context.Pipe(duplex=False)
    children = [
        context.Process(target=reader, args=(reader_out, kubeconfig, namespace, scheduler_name), name="reader"),
        context.Process(target=writer, args=(writer_in, writer_results, kubeconfig, f"{scheduler_name}-prototype"),
                        name="writer"),
    ]
    stage = Stage("decider")

    def stop(signum: int, frame: Any) -> None:
        for child in children:
            if child.pid is not None:
                os.kill(child.pid, signal.SIGTERM)
        for child in children:
            child.join(10)
        stage.report()
        os._exit(0)

    for child in children:
        child.start()
    signal.signal(signal.SIGTERM, stop)
    stage.ready()
    Decider(scheduler_name, decider_out, stage).run(decider_in, results_in)
    return 0


if __name__ == "__main__":
    sys.exit(main())
