"""``KubeEmulator``: lifecycle, the test-side API, and helpers to build cluster fixtures."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from .capacity import CapacityViolation, audit_capacity
from .errors import ApiError
from .faults import FaultInjector, FaultRule
from .patching import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from .resources import Obj, Registry, ResourceDef, builtin_resources, schedulerprofile_crd
from .selectors import FieldSelector, LabelSelector
from .server import ApiServer, RequestRecord
from .store import BindingRecord, Store, now_rfc3339

T = TypeVar("T")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_PATCH_TYPES = {"merge": MERGE_PATCH, "strategic": STRATEGIC_MERGE_PATCH, "json": JSON_PATCH}


def kubeconfig_text(url: str, namespace: str = "default") -> str:
    """A no-auth kubeconfig for ``url`` that Kopf and kubernetes_asyncio both load."""
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: kubeemu\n"
        "  cluster:\n"
        f"    server: {url}\n"
        "users:\n"
        "- name: kubeemu\n"
        "  user: {}\n"
        "contexts:\n"
        "- name: kubeemu\n"
        "  context:\n"
        "    cluster: kubeemu\n"
        "    user: kubeemu\n"
        f"    namespace: {namespace}\n"
        "current-context: kubeemu\n"
        "preferences: {}\n"
    )


class KubeEmulator:
    """An in-memory Kubernetes API server on 127.0.0.1, for tests and benchmarks.

    Use as ``async with KubeEmulator() as emu:``; ``emu.url`` is the server address.
    The direct methods (:meth:`create`, :meth:`patch`, ...) act on the store as if via HTTP
    (same resourceVersions and watch events) but in "god mode": they may write ``status``
    together with the rest, unless ``subresource=None``/``"status"`` asks for HTTP semantics.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history_size: int = 50_000,
        bookmark_interval: float = 30.0,
        watch_delay: float = 0.0,
        strict_namespaces: bool = False,
        record_requests: bool = True,
        builtin_crds: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.registry = Registry(builtin_resources())
        self.store = Store(self.registry, history_size=history_size,
                           strict_namespaces=strict_namespaces)
        self.faults = FaultInjector()
        self.server = ApiServer(self.store, self.registry, self.faults,
                                bookmark_interval=bookmark_interval, watch_delay=watch_delay,
                                record_requests=record_requests, control=self._control)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._changed: asyncio.Event | None = None
        self._offline_task: asyncio.Task[None] | None = None
        self._control_tasks: set[asyncio.Task[None]] = set()
        self.store.on_change.append(self._notify)
        for ns in DEFAULT_NAMESPACES:
            self.create("namespaces", {"metadata": {"name": ns}})
        if builtin_crds:
            self.create("customresourcedefinitions", schedulerprofile_crd())

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` once started."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> KubeEmulator:
        """Bind the port (0 = any free one) and start serving."""
        self._runner = web.AppRunner(self.server.make_app(), access_log=None,
                                     handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        await self._listen()
        return self

    async def _listen(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await self._site.start()
        server = self._site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = sockets[0].getsockname()[1]
        self.server.address = f"{self.host}:{self.port}"

    async def stop(self) -> None:
        """End all watches, close all connections, release the port."""
        for task in [self._offline_task, *self._control_tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.store.drop_watches()
        await asyncio.sleep(0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._site = None

    async def __aenter__(self) -> KubeEmulator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def write_kubeconfig(self, path: str | os.PathLike[str], namespace: str = "default") -> Path:
        """Write a kubeconfig pointing at this emulator; returns the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(kubeconfig_text(self.url, namespace))
        return out

    # --- reachability ------------------------------------------------------------------------

    async def set_unreachable(self, seconds: float | None = None, mode: str = "refuse") -> None:
        """Make the server unreachable: ``refuse`` closes the port (connection refused),
        ``reset`` keeps it open but resets every request. Open connections are cut either way.
        With ``seconds``, it comes back by itself.
        """
        if mode not in ("refuse", "reset"):
            raise ValueError(f"unknown mode: {mode!r}")
        self.store.drop_watches(abort=True)
        if mode == "refuse" and self._site is not None:
            await self._site.stop()
            self._site = None
        else:
            self.server.resetting = True
        if self._runner is not None and self._runner.server is not None:
            for conn in self._runner.server.connections:
                transport = conn.transport
                if transport is not None:
                    transport.abort()
        if seconds is not None:
            async def later() -> None:
                await asyncio.sleep(seconds)
                await self.set_reachable()
            self._offline_task = asyncio.create_task(later())

    async def set_reachable(self) -> None:
        """Serve again after :meth:`set_unreachable` (same port)."""
        self.server.resetting = False
        if self._site is None and self._runner is not None:
            await self._listen()

    @contextlib.asynccontextmanager
    async def unreachable(self, mode: str = "refuse") -> AsyncIterator[None]:
        """``async with emu.unreachable(): ...`` — down inside the block, back after it."""
        await self.set_unreachable(mode=mode)
        try:
            yield
        finally:
            await self.set_reachable()

    async def _control(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """``/_emu/unreachable`` and ``/_emu/reachable``: act after the reply has gone out."""
        if op == "reachable":
            await self.set_reachable()
            return {"ok": True}
        seconds = body.get("seconds")
        mode = str(body.get("mode", "refuse"))
        if mode not in ("refuse", "reset"):
            raise ValueError(f"unknown mode: {mode!r}")

        async def soon() -> None:
            await asyncio.sleep(0.05)  # let the control request's reply go out first
            await self.set_unreachable(float(seconds) if seconds is not None else None, mode)

        task = asyncio.create_task(soon())
        self._control_tasks.add(task)
        task.add_done_callback(self._control_tasks.discard)
        return {"ok": True, "mode": mode, "seconds": seconds}

    # --- waiting -----------------------------------------------------------------------------

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def wait_for(self, predicate: Callable[[], T], timeout: float = 5.0) -> T:
        """Re-check ``predicate`` after every store change until truthy; TimeoutError after."""
        async with asyncio.timeout(timeout):
            while True:
                result = predicate()
                if result:
                    return result
                if self._changed is None:
                    self._changed = asyncio.Event()
                self._changed.clear()
                await self._changed.wait()

    async def wait_for_request(self, method: str | None = None, path: str = ".*",
                               count: int = 1, timeout: float = 5.0) -> list[RequestRecord]:
        """Wait until ``count`` requests matching method/path regex have been received."""
        async with asyncio.timeout(timeout):
            while True:
                found = self.requests_matching(method, path)
                if len(found) >= count:
                    return found
                await asyncio.sleep(0.01)

    # --- direct store access -----------------------------------------------------------------

    def resource(self, name: str) -> ResourceDef:
        """Resolve ``pods``, ``v1/pods``, ``sp``, ``events.k8s.io/v1/events``..."""
        return self.registry.resolve(name)

    @staticmethod
    def _ns(rdef: ResourceDef, namespace: str | None, obj: Obj | None = None) -> str | None:
        if not rdef.namespaced:
            return None
        return namespace or ((obj or {}).get("metadata") or {}).get("namespace") or "default"

    def create(self, resource: str, obj: Obj, namespace: str | None = None) -> Obj:
        """Create an object (status kept as given); emits ADDED like a POST would."""
        rdef = self.resource(resource)
        return copy.deepcopy(self.store.create(rdef, self._ns(rdef, namespace, obj),
                                               copy.deepcopy(obj), http=False))

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        """A copy of the object, or None if it does not exist."""
        rdef = self.resource(resource)
        try:
            return copy.deepcopy(self.store.get(rdef, self._ns(rdef, namespace), name))
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    def list(self, resource: str, namespace: str | None = None, *,
             label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        """Copies of all matching objects (all namespaces unless ``namespace``)."""
        rdef = self.resource(resource)
        items, *_ = self.store.list(rdef, namespace, LabelSelector(label_selector),
                                    FieldSelector(field_selector))
        return copy.deepcopy(items)

    def patch(self, resource: str, name: str, patch: Any, namespace: str | None = None, *,
              patch_type: str = "merge", subresource: str | None = "*") -> Obj:
        """Patch (``merge``/``strategic``/``json`` or a Content-Type); emits MODIFIED."""
        rdef = self.resource(resource)
        ctype = _PATCH_TYPES.get(patch_type, patch_type)
        return copy.deepcopy(self.store.patch(rdef, self._ns(rdef, namespace), name,
                                              copy.deepcopy(patch), ctype, subresource))

    def replace(self, resource: str, obj: Obj, namespace: str | None = None, *,
                subresource: str | None = "*") -> Obj:
        """Replace the object (optimistic concurrency if it carries a resourceVersion)."""
        rdef = self.resource(resource)
        return copy.deepcopy(self.store.replace(rdef, self._ns(rdef, namespace, obj),
                                                obj["metadata"]["name"], copy.deepcopy(obj),
                                                subresource))

    def delete(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        """Delete (or mark for deletion if finalizers remain); None if it did not exist."""
        rdef = self.resource(resource)
        try:
            return copy.deepcopy(self.store.delete(rdef, self._ns(rdef, namespace), name))
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    def install_crd(self, crd: Obj) -> Obj:
        """Create or replace a CRD (e.g. one loaded from ``crds/``); its schema then applies."""
        name = crd["metadata"]["name"]
        existing = self.get("customresourcedefinitions", name)
        if existing is None:
            return self.create("customresourcedefinitions", crd)
        body = copy.deepcopy(crd)
        body["metadata"] = {**existing["metadata"], **body["metadata"]}
        body["metadata"].pop("resourceVersion", None)
        return self.replace("customresourcedefinitions", body, subresource=None)

    def bind(self, namespace: str, name: str, node: str) -> Obj:
        """Bind as ``pods/binding`` would (audited; not counted as a scheduler's attempt)."""
        return copy.deepcopy(self.store.bind(namespace, name, node))

    # --- cluster-building helpers ------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        cpu: str | int = "4",
        memory: str = "16Gi",
        pods: int = 110,
        ephemeral_storage: str | None = "100Gi",
        extended: dict[str, str | int] | None = None,
        labels: dict[str, str] | None = None,
        taints: Iterable[Obj] = (),
        unschedulable: bool = False,
        ready: bool = True,
        images: Iterable[Obj] = (),
        allocatable: dict[str, str] | None = None,
    ) -> Obj:
        """Create a Node with allocatable == capacity and a Ready condition."""
        alloc: dict[str, str] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
        if ephemeral_storage is not None:
            alloc["ephemeral-storage"] = ephemeral_storage
        for key, value in (extended or {}).items():
            alloc[key] = str(value)
        if allocatable is not None:
            alloc = dict(allocatable)
        node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
        node_labels.update(labels or {})
        spec: Obj = {}
        if taints:
            spec["taints"] = list(taints)
        if unschedulable:
            spec["unschedulable"] = True
        now = now_rfc3339()
        return self.create("nodes", {
            "metadata": {"name": name, "labels": node_labels},
            "spec": spec,
            "status": {
                "capacity": dict(alloc),
                "allocatable": alloc,
                "conditions": [{
                    "type": "Ready", "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status" if ready else "not ready",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                }],
                "images": list(images),
                "nodeInfo": {"kubeletVersion": "v1.31.0", "architecture": "amd64",
                             "operatingSystem": "linux"},
            },
        })

    def add_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        cpu: str | None = "100m",
        memory: str | None = "128Mi",
        extended: dict[str, str | int] | None = None,
        scheduler_name: str = "default-scheduler",
        node_name: str | None = None,
        labels: dict[str, str] | None = None,
        priority: int | None = None,
        phase: str | None = None,
        spec: Obj | None = None,
    ) -> Obj:
        """Create a one-container Pod; ``spec`` entries override the generated ones."""
        requests: dict[str, str] = {}
        if cpu is not None:
            requests["cpu"] = cpu
        if memory is not None:
            requests["memory"] = memory
        for key, value in (extended or {}).items():
            requests[key] = str(value)
        pod_spec: Obj = {
            "schedulerName": scheduler_name,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": requests} if requests else {}}],
        }
        if node_name:
            pod_spec["nodeName"] = node_name
        if priority is not None:
            pod_spec["priority"] = priority
        pod_spec.update(spec or {})
        body: Obj = {"metadata": {"name": name, "namespace": namespace,
                                  "labels": dict(labels or {})},
                     "spec": pod_spec}
        if phase:
            body["status"] = {"phase": phase}
        return self.create("pods", body)

    def set_node_metrics(self, name: str, cpu: str, memory: str, window: str = "10s") -> Obj:
        """Create or replace the ``metrics.k8s.io`` NodeMetrics of a node."""
        body = {"metadata": {"name": name, "labels": {}}, "timestamp": now_rfc3339(),
                "window": window, "usage": {"cpu": cpu, "memory": memory}}
        if self.get("metrics.k8s.io/v1beta1/nodes", name) is not None:
            return self.replace("metrics.k8s.io/v1beta1/nodes", body)
        return self.create("metrics.k8s.io/v1beta1/nodes", body)

    # --- observations ------------------------------------------------------------------------

    @property
    def bindings(self) -> list[BindingRecord]:
        """Every successful binding, in order (HTTP and :meth:`bind`)."""
        return self.store.bindings

    @property
    def bind_attempts(self) -> dict[str, int]:
        """Binding requests per ``namespace/name`` pod, successful or not (faults included)."""
        return self.store.bind_attempts

    @property
    def requests(self) -> list[RequestRecord]:
        """All API requests received (controls under ``/_emu`` excluded)."""
        return self.server.requests

    def requests_matching(self, method: str | None = None, path: str = ".*",
                          status: int | None = None) -> list[RequestRecord]:
        """Requests filtered by method, path regex (``re.search``) and status."""
        regex = re.compile(path)
        return [r for r in self.server.requests
                if (method is None or r.method == method.upper())
                and regex.search(r.path) and (status is None or r.status == status)]

    def audit_capacity(self) -> list[CapacityViolation]:
        """Nodes whose bound pods request more than allocatable; empty when all is well."""
        nodes = self.resource("nodes")
        pods = self.resource("pods")
        return audit_capacity(self.store.iter_objects(nodes), self.store.iter_objects(pods))

    def double_bindings(self) -> list[str]:
        """Pods that were successfully bound more than once (must be empty)."""
        seen: dict[str, int] = {}
        for record in self.store.bindings:
            seen[record.key] = seen.get(record.key, 0) + 1
        return sorted(k for k, v in seen.items() if v > 1)

    # --- faults and history ------------------------------------------------------------------

    def inject(
        self,
        method: str | None = None,
        path: str = ".*",
        *,
        status: int | None = None,
        count: int | None = 1,
        delay: float = 0.0,
        reset: bool = False,
        retry_after: float | None = None,
        message: str | None = None,
        query: str | None = None,
    ) -> FaultRule:
        """Fail the next ``count`` matching requests (``None`` = until removed)."""
        return self.faults.add(FaultRule(method=method, path=path, status=status, count=count,
                                         delay=delay, reset=reset, retry_after=retry_after,
                                         message=message, query=query))

    def clear_faults(self) -> None:
        """Remove all fault rules."""
        self.faults.clear()

    @property
    def watch_delay(self) -> float:
        """Seconds every watch event is held back before delivery (emulates a lagging cache)."""
        return self.server.watch_delay

    @watch_delay.setter
    def watch_delay(self, seconds: float) -> None:
        self.server.watch_delay = seconds

    def drop_watches(self, abort: bool = False) -> int:
        """End every open watch stream now; returns how many."""
        return self.store.drop_watches(abort=abort)

    def compact(self) -> None:
        """Forget the watch history: resuming from an older resourceVersion gives 410."""
        self.store.compact()

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion."""
        return str(self.store.rv)

    def __repr__(self) -> str:
        return f"<KubeEmulator {self.url} rv={self.store.rv} t={time.time():.0f}>"
