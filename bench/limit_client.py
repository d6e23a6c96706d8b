"""The limit row of bench/real_bench.py: a bare client that binds pods and writes one event each,
with no decisions at all, as fast as the API server takes them.

What a scheduler must do per pod at the least, on the same control plane and the same two cores:
one POST pods/binding and one events.k8s.io/v1 `Scheduled` event, MAX_IN_FLIGHT bindings in flight
and, apart from them (a binding does not wait for the event of the one before, as Placer's do not),
EVENT_WORKERS events, over Placer's own transport (`placer.controller.transport.KubeClient`, the leanest
client here). Its
start-up is what any scheduler's is at the least too: a LIST of the nodes (from the watch cache,
`resourceVersion=0`, as client-go's first LIST), then the pending pods in pages of 500 (as Placer
reads them: binding starts with the first page, while the server prepares the next), then a watch
of the namespace's unbound pods for those created later (stream mode). Started before there is
any ready node, it lists them again until there is; the nodes it binds to are those of that LIST.
Pods go to the ready, schedulable nodes round-robin: the bindings are not valid placements (nothing is checked), so
bench/real_bench.py does not audit this row; its rate is the ceiling a scheduler's own rate is
read against ("Placer's rate as a share of the limit"). Pods a scheduler would not touch either
are left alone: those with scheduling gates, and those being deleted. NAMESPACE "" reads and binds
the pods of every namespace (bench/suite_bench.py: kube's suite spreads its pods over many).

Run as its own process by bench/real_bench.py (its CPU and RSS are measured as a scheduler's):

    python bench/limit_client.py KUBECONFIG NAMESPACE SCHEDULER_NAME    (NAMESPACE "": every namespace)
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from placer.controller.transport import KubeClient

MAX_IN_FLIGHT = 64  # Placer's default binds in flight (Options.max_binds_in_flight) and more
EVENT_WORKERS = 16  # events in flight, apart from the bindings (Placer's report workers: 8)
NODE_POLL_S = 0.2  # s between LISTs of the nodes while there is none ready


def schedulable(node: Mapping[str, Any]) -> bool:
    """Ready and not cordoned: the least a binding's node should be."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def event(namespace: str, name: str, node: str) -> dict[str, Any]:
    """The `Scheduled` event a scheduler writes per pod (kube-scheduler's words)."""
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": f"{name}.{random.getrandbits(64):x}", "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "limit-client",
        "reportingInstance": "limit-client", "action": "Binding", "reason": "Scheduled", "type": "Normal",
        "note": f"Successfully assigned {namespace}/{name} to {node}",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name},
    }


async def run(kubeconfig: str, namespace: str, scheduler_name: str) -> None:
    kube = await KubeClient.connect(kubeconfig, pool_size=MAX_IN_FLIGHT + EVENT_WORKERS + 8)
    queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
    events: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
    seen: set[tuple[str, str]] = set()

    def offer(pod: Mapping[str, Any]) -> None:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        key = (meta.get("namespace") or namespace, meta.get("name") or "")
        if (spec.get("schedulerName") == scheduler_name and not spec.get("nodeName") and key not in seen
                and not spec.get("schedulingGates") and not meta.get("deletionTimestamp")):
            seen.add(key)
            queue.put_nowait((*key, meta.get("uid") or ""))

    cached = [("resourceVersion", "0")]  # the watch cache, as client-go's first LIST (no etcd scan)
    while True:  # started before the workload's nodes exist (bench/suite_bench.py): wait for the first
        nodes, _ = await kube.list_objects("/api/v1/nodes", cached)
        ready = [n["metadata"]["name"] for n in nodes if schedulable(n)]
        if ready:
            break
        await asyncio.sleep(NODE_POLL_S)
    names: Iterator[str] = itertools.cycle(ready)
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    unbound = [("fieldSelector", "spec.nodeName=")]

    async def follow() -> None:
        version = ""
        async for pods, listed, _ in kube.list_pages(path, unbound):  # Placer's pending read: binding
            version = listed  # starts with the first page, while the server prepares the next
            for pod in pods:
                offer(pod)
        while True:  # the server ends a watch now and then: resume where it ended
            query = [*unbound, ("resourceVersion", version), ("allowWatchBookmarks", "true")]
            async for change in kube.watch(path, query, connect_timeout=10, read_timeout=600):
                obj = change.get("object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if change.get("type") in ("ADDED", "MODIFIED"):  # MODIFIED: a gate lifted
                    offer(obj)

    async def worker() -> None:
        while True:
            pod_namespace, name, uid = await queue.get()
            node = next(names)
            outcome = await kube.bind(pod_namespace, name, uid, node)
            if outcome.result.value == "bound":
                events.put_nowait((pod_namespace, name, node))

    async def reporter() -> None:
        while True:
            pod_namespace, name, node = await events.get()
            await kube.create_event(pod_namespace, event(pod_namespace, name, node))

    await asyncio.gather(follow(), *(worker() for _ in range(MAX_IN_FLIGHT)),
                         *(reporter() for _ in range(EVENT_WORKERS)))


def main() -> int:
    kubeconfig, namespace, scheduler_name = sys.argv[1:4]
    os.environ.pop("HTTPS_PROXY", None)
    asyncio.run(run(kubeconfig, namespace, scheduler_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
