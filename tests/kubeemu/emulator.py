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

from . import kinds
from .capacity import CapacityViolation, audit_capacity
from .controllers import Controllers
from .errors import ApiError
from .faults import FaultInjector, FaultRule
from .patching import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from .resources import Obj, Registry, ResourceDef, builtin_resources, schedulerprofile_crd
from .selectors import FieldSelector, LabelSelector
from .server import ApiServer, RequestRecord
from .store import BindingRecord, Store, now_rfc3339
from .versions import DEFAULT as DEFAULT_VERSION
from .versions import Features, parse_minor

T = TypeVar("T")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_PATCH_TYPES = {"merge": MERGE_PATCH, "strategic": STRATEGIC_MERGE_PATCH, "json": JSON_PATCH}


def label_selector(selector: Obj) -> Obj:
    """A ``metav1.LabelSelector``: given as is, or built from a plain ``{label: value}`` map."""
    if "matchLabels" in selector or "matchExpressions" in selector:
        return copy.deepcopy(selector)
    return {"matchLabels": dict(selector)}


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


def _running_statuses(pod: Obj, from_spec: bool) -> Obj:
    """What a kubelet reports for a running pod: per container the allocated and running
    resources (``allocatedResources``, ``resources``), and the pod-level ones if set; taken from
    the spec, or (``from_spec=False``) kept where the status already reports them."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    given = {cs.get("name"): cs for cs in (pod.get("status") or {}).get("containerStatuses") or []}
    statuses = []
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        reqs = dict(res.get("requests") or {})
        running = {k: dict(v) for k, v in res.items() if k in ("requests", "limits") and v}
        base = given.get(container.get("name")) or {
            "name": container.get("name"), "image": container.get("image", ""),
            "imageID": "", "ready": True, "started": True, "restartCount": 0,
            "state": {"running": {"startedAt": now_rfc3339()}}}
        if not from_spec and "allocatedResources" in base:
            reqs, running = base["allocatedResources"], base.get("resources") or running
        statuses.append({**base, "allocatedResources": reqs, "resources": running})
    out: Obj = {"containerStatuses": statuses}
    pod_res = spec.get("resources")
    if isinstance(pod_res, dict) and pod_res:
        out["allocatedResources"] = dict(pod_res.get("requests") or {})
        out["resources"] = {k: dict(v) for k, v in pod_res.items()
                            if k in ("requests", "limits") and v}
        if not from_spec and "allocatedResources" in status:
            out["allocatedResources"] = status["allocatedResources"]
            out["resources"] = status.get("resources") or out["resources"]
    return out


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
        graceful_pod_deletion: bool = False,
        pv_controller: bool = False,
        pv_controller_delay: float = 0.0,
        pdb_controller: bool = False,
        auto_provision: dict[str, str] | None = None,
        kube_version: str = DEFAULT_VERSION,
        gang_scheduling: bool = False,
        workload_gates: Iterable[str] = (),
    ) -> None:
        self.host = host
        self.port = port
        self.kube_minor = parse_minor(kube_version)  # the Kubernetes minor played (24..36)
        self.features = Features(self.kube_minor)
        # gang_scheduling: the GenericWorkload and GangScheduling gates on, scheduling.k8s.io/v1alpha2 served
        self.registry = Registry(builtin_resources(self.kube_minor, gang_scheduling))
        self.store = Store(self.registry, history_size=history_size,
                           strict_namespaces=strict_namespaces,
                           graceful_pod_deletion=graceful_pod_deletion, features=self.features)
        # workload_gates: more PodGroup gates on (WorkloadAwarePreemption, DRAWorkloadResourceClaims,
        # TopologyAwareWorkloadScheduling): the PodGroup fields behind them are served
        self.store.workload_gates = frozenset(workload_gates)
        self.controllers = Controllers(self.store, pv_controller=pv_controller,
                                       pv_controller_delay=pv_controller_delay,
                                       pdb_controller=pdb_controller,
                                       auto_provision=auto_provision)
        self.faults = FaultInjector()
        self.server = ApiServer(self.store, self.registry, self.faults,
                                bookmark_interval=bookmark_interval, watch_delay=watch_delay,
                                record_requests=record_requests, control=self._control,
                                minor=self.kube_minor)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._changed: asyncio.Event | None = None
        self._offline_task: asyncio.Task[None] | None = None
        self._control_tasks: set[asyncio.Task[None]] = set()
        self.store.on_change.append(self._notify)
        for ns in DEFAULT_NAMESPACES:
            self.create("namespaces", {"metadata": {"name": ns}})
        for pc_name, (value, description) in kinds.SYSTEM_PRIORITY_CLASSES.items():
            self.create("priorityclasses", {"metadata": {"name": pc_name}, "value": value,
                                            "description": description})
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
        self.controllers.close()
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

    def delete(self, resource: str, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None) -> Obj | None:
        """Delete like a DELETE (marked only while finalizers remain or, with
        ``graceful_pod_deletion``, a bound pod's grace period runs); None if it did not exist."""
        rdef = self.resource(resource)
        try:
            return copy.deepcopy(self.store.delete(rdef, self._ns(rdef, namespace), name,
                                                   grace_period_seconds=grace_period_seconds))
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
        declared_features: Iterable[str] | None = None,
    ) -> Obj:
        """Create a Node with allocatable == capacity and a Ready condition; ``declared_features``
        become ``status.declaredFeatures`` (sorted, as the kubelet writes them)."""
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
                "nodeInfo": {"kubeletVersion": f"v1.{self.kube_minor}.0",
                             "architecture": "amd64", "operatingSystem": "linux"},
                **({"declaredFeatures": sorted(declared_features)}
                   if declared_features is not None else {}),
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
        priority_class: str | None = None,
        pvcs: Iterable[str] = (),
        owner: Obj | None = None,
        metadata: Obj | None = None,
        pod_resources: Obj | None = None,
        scheduling_gates: Iterable[str] = (),
    ) -> Obj:
        """Create a one-container Pod; ``spec``/``metadata`` entries override the generated ones.

        ``priority_class`` is resolved by admission (403 if missing) unless ``priority`` is
        given too; ``pvcs`` become volumes; ``owner`` (a ReplicaSet, StatefulSet...) becomes
        the controller ownerReference; ``pod_resources`` (``{"requests": {...}, "limits":
        {...}}``) is ``spec.resources``, the pod-level resources; ``scheduling_gates`` names
        ``spec.schedulingGates`` (the server adds the ``SchedulingGated`` condition).
        """
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
        if priority_class is not None:
            pod_spec["priorityClassName"] = priority_class
        if pod_resources is not None:
            pod_spec["resources"] = copy.deepcopy(pod_resources)
        gates = list(scheduling_gates)
        if gates:
            pod_spec["schedulingGates"] = [{"name": gate} for gate in gates]
        claims = list(pvcs)
        if claims:
            pod_spec["volumes"] = [{"name": f"pvc-{idx}", "persistentVolumeClaim": {"claimName": c}}
                                   for idx, c in enumerate(claims)]
        pod_spec.update(spec or {})
        meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
        if owner is not None:
            meta["ownerReferences"] = [self.owner_reference(owner)]
        meta.update(metadata or {})
        body: Obj = {"metadata": meta, "spec": pod_spec}
        if phase:
            body["status"] = {"phase": phase}
        return self.create("pods", body)

    @staticmethod
    def owner_reference(obj: Obj, controller: bool = True) -> Obj:
        """An ownerReference to ``obj`` (a ReplicaSet, StatefulSet...), for the pods it owns."""
        meta = obj["metadata"]
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
                "uid": meta["uid"], "controller": controller, "blockOwnerDeletion": True}

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> Obj:
        """Create a Namespace (the server adds ``kubernetes.io/metadata.name``)."""
        return self.create("namespaces", {"metadata": {"name": name, "labels": dict(labels or {})}})

    def add_service(self, name: str, namespace: str = "default",
                    selector: dict[str, str] | None = None, *, ports: Iterable[int] = (80,)
                    ) -> Obj:
        """Create a ClusterIP Service selecting pods by ``selector`` (an IP is allocated)."""
        spec: Obj = {"ports": [{"name": f"tcp-{port}", "port": port} for port in ports]}
        if selector is not None:
            spec["selector"] = dict(selector)
        return self.create("services", {"metadata": {"name": name, "namespace": namespace},
                                        "spec": spec})

    def _workload(self, resource: str, name: str, namespace: str, selector: Obj, replicas: int,
                  labels: dict[str, str] | None, spec: Obj | None, extra: Obj) -> Obj:
        sel = label_selector(selector)
        template_labels = dict(labels if labels is not None else sel.get("matchLabels") or {})
        body_spec: Obj = {
            "replicas": replicas, "selector": sel, **extra,
            "template": {"metadata": {"labels": template_labels}, "spec": {"containers": [
                {"name": "main", "image": "registry.k8s.io/pause:3.9"}]}},
        }
        body_spec.update(spec or {})
        return self.create(resource, {"metadata": {"name": name, "namespace": namespace},
                                      "spec": body_spec})

    def add_replicaset(self, name: str, namespace: str = "default", *, selector: Obj,
                       replicas: int = 1, labels: dict[str, str] | None = None,
                       spec: Obj | None = None) -> Obj:
        """Create a ReplicaSet (no controller runs: add its pods with ``add_pod(owner=rs)``).

        ``selector`` is ``{label: value}`` or a full LabelSelector; the template carries
        ``labels``, by default the selector's matchLabels.
        """
        return self._workload("replicasets", name, namespace, selector, replicas, labels, spec,
                              {})

    def add_statefulset(self, name: str, namespace: str = "default", *, selector: Obj,
                        replicas: int = 1, labels: dict[str, str] | None = None,
                        service_name: str | None = None, spec: Obj | None = None) -> Obj:
        """Create a StatefulSet, like :meth:`add_replicaset` (``serviceName`` defaults to it)."""
        return self._workload("statefulsets", name, namespace, selector, replicas, labels, spec,
                              {"serviceName": service_name or name})

    def add_storage_class(self, name: str, provisioner: str, *, binding_mode: str = "Immediate",
                          allowed_topologies: Iterable[Obj] | None = None,
                          parameters: dict[str, str] | None = None,
                          reclaim_policy: str = "Delete", default: bool = False) -> Obj:
        """Create a StorageClass; ``allowed_topologies`` is a list of ``{key, values}`` (one
        term, all required); ``default`` marks it the class claims without one get."""
        body: Obj = {"metadata": {"name": name}, "provisioner": provisioner,
                     "reclaimPolicy": reclaim_policy, "volumeBindingMode": binding_mode}
        if default:
            body["metadata"]["annotations"] = {kinds.ANN_DEFAULT_CLASS: "true"}
        if parameters:
            body["parameters"] = dict(parameters)
        if allowed_topologies:
            body["allowedTopologies"] = [{"matchLabelExpressions": [
                {"key": t["key"], "values": list(t["values"])} for t in allowed_topologies]}]
        return self.create("storageclasses", body)

    def add_pv(self, name: str, *, capacity: str = "10Gi",
               access_modes: Iterable[str] = ("ReadWriteOnce",), storage_class: str = "",
               node_affinity: dict[str, Iterable[str]] | None = None,
               labels: dict[str, str] | None = None, csi_driver: str | None = None,
               claim_ref: tuple[str, str] | None = None, phase: str | None = None,
               reclaim_policy: str | None = None) -> Obj:
        """Create a static PersistentVolume (status Available unless ``phase``).

        ``node_affinity`` maps label keys to allowed values; the source is CSI with
        ``csi_driver``, else ``local`` (with affinity) or ``hostPath``. ``claim_ref`` pre-binds
        it to ``(namespace, name)`` (no uid, as an admin writes it).
        """
        spec: Obj = {"capacity": {"storage": capacity}, "accessModes": list(access_modes)}
        if storage_class:
            spec["storageClassName"] = storage_class
        if reclaim_policy:
            spec["persistentVolumeReclaimPolicy"] = reclaim_policy
        if csi_driver:
            spec["csi"] = {"driver": csi_driver, "volumeHandle": name}
        elif node_affinity:
            spec["local"] = {"path": f"/mnt/disks/{name}"}
        else:
            spec["hostPath"] = {"path": f"/mnt/data/{name}"}
        affinity = kinds.node_affinity(node_affinity)
        if affinity is not None:
            spec["nodeAffinity"] = affinity
        if claim_ref is not None:
            spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                "namespace": claim_ref[0], "name": claim_ref[1]}
        body: Obj = {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec}
        if phase:
            body["status"] = {"phase": phase}
        self.create("persistentvolumes", body)
        return self.get("persistentvolumes", name) or {}

    def add_pvc(self, name: str, namespace: str = "default", *, storage_class: str | None,
                size: str = "1Gi", access_modes: Iterable[str] = ("ReadWriteOnce",),
                volume_name: str | None = None, selector: Obj | None = None,
                annotations: dict[str, str] | None = None) -> Obj:
        """Create a PersistentVolumeClaim (Pending); ``storage_class=None`` leaves the class to
        the default StorageClass, ``""`` asks for none. With ``volume_name`` it is created
        Bound, as the PV controller leaves a pre-bound pair (the PV, if it exists and is free,
        gets the claimRef and Bound too)."""
        spec: Obj = {"accessModes": list(access_modes),
                     "resources": {"requests": {"storage": size}}}
        if storage_class is not None:
            spec["storageClassName"] = storage_class
        if selector is not None:
            spec["selector"] = label_selector(selector)
        meta: Obj = {"name": name, "namespace": namespace,
                     "annotations": dict(annotations or {})}
        body: Obj = {"metadata": meta, "spec": spec}
        pv = self.get("persistentvolumes", volume_name) if volume_name else None
        with self.store.batch():
            if volume_name:
                spec["volumeName"] = volume_name
                meta["annotations"].setdefault(kinds.ANN_BIND_COMPLETED, "yes")
                pspec = (pv or {}).get("spec") or {}
                body["status"] = {"phase": "Bound",
                                  "accessModes": list(pspec.get("accessModes") or access_modes),
                                  "capacity": dict(pspec.get("capacity") or {"storage": size})}
            claim = self.create("persistentvolumeclaims", body)
            if pv is not None:
                ref = pv["spec"].get("claimRef")
                if not ref or (ref.get("namespace"), ref.get("name")) == (namespace, name):
                    self.patch("persistentvolumes", volume_name or "", {
                        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                              "namespace": namespace, "name": name,
                                              "uid": claim["metadata"]["uid"]}},
                        "status": {"phase": "Bound"}})
        return self.get("persistentvolumeclaims", name, namespace) or {}

    def add_csinode(self, node_name: str, drivers: dict[str, int | None]) -> Obj:
        """Create the CSINode of a node: driver name -> volume limit (None = no limit)."""
        entries: list[Obj] = []
        for driver, count in drivers.items():
            entry: Obj = {"name": driver, "nodeID": node_name}
            if count is not None:
                entry["allocatable"] = {"count": count}
            entries.append(entry)
        meta: Obj = {"name": node_name}
        node = self.get("nodes", node_name)
        if node is not None:  # the kubelet makes its Node the owner
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                        "uid": node["metadata"]["uid"]}]
        return self.create("csinodes", {"metadata": meta, "spec": {"drivers": entries}})

    def add_pdb(self, name: str, namespace: str = "default", *, selector: Obj,
                min_available: int | str | None = None,
                max_unavailable: int | str | None = None) -> Obj:
        """Create a PodDisruptionBudget (status zeroed until :meth:`update_pdb_status`, or kept
        current with ``pdb_controller``)."""
        spec: Obj = {"selector": label_selector(selector)}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        self.create("poddisruptionbudgets", {"metadata": {"name": name, "namespace": namespace},
                                             "spec": spec})
        return self.get("poddisruptionbudgets", name, namespace) or {}

    def update_pdb_status(self, name: str, namespace: str = "default") -> Obj:
        """Compute and write a PDB's status as the disruption controller would (see
        :meth:`.controllers.Controllers.pdb_status`); emits MODIFIED if it changed."""
        return copy.deepcopy(self.controllers.update_pdb_status(namespace, name))

    def add_priority_class(self, name: str, value: int, *, global_default: bool = False,
                           preemption_policy: str | None = None,
                           description: str | None = None) -> Obj:
        """Create a PriorityClass (preemptionPolicy defaults to PreemptLowerPriority)."""
        body: Obj = {"metadata": {"name": name}, "value": value}
        if global_default:
            body["globalDefault"] = True
        if preemption_policy is not None:
            body["preemptionPolicy"] = preemption_policy
        if description is not None:
            body["description"] = description
        return self.create("priorityclasses", body)

    def set_node_metrics(self, name: str, cpu: str, memory: str, window: str = "10s") -> Obj:
        """Create or replace the ``metrics.k8s.io`` NodeMetrics of a node."""
        body = {"metadata": {"name": name, "labels": {}}, "timestamp": now_rfc3339(),
                "window": window, "usage": {"cpu": cpu, "memory": memory}}
        if self.get("metrics.k8s.io/v1beta1/nodes", name) is not None:
            return self.replace("metrics.k8s.io/v1beta1/nodes", body)
        return self.create("metrics.k8s.io/v1beta1/nodes", body)

    # --- emulated kubelet and controllers -----------------------------------------------------

    def remove_scheduling_gates(self, name: str, namespace: str = "default",
                                gates: Iterable[str] | None = None) -> Obj:
        """Remove some (default: all) of a pod's ``spec.schedulingGates`` as a client's PATCH
        would (validated: gates may only be removed)."""
        pod = self.get("pods", name, namespace)
        if pod is None:
            raise ApiError.not_found("pods", name)
        drop = None if gates is None else set(gates)
        keep = [g for g in pod["spec"].get("schedulingGates") or []
                if drop is not None and g.get("name") not in drop]
        return self.patch("pods", name, {"spec": {"schedulingGates": keep or None}}, namespace,
                          subresource=None)

    def resize_pod(self, name: str, namespace: str = "default", *,
                   requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
                   container: str | None = None, pod_level: bool = False,
                   state: str | None = "Done") -> Obj:
        """Resize a pod in place: a PATCH of ``pods/resize`` (validated as the real subresource)
        setting ``requests``/``limits`` of one container (default: the first) or, with
        ``pod_level``, of ``spec.resources``; then the kubelet's answer in the status:

        - ``"Done"``: allocated and running resources are the new ones, no resize condition;
        - ``"InProgress"``: allocated the new ones, still running with the old ones,
          ``PodResizeInProgress``;
        - ``"Deferred"``/``"Infeasible"``: allocated and running stay the old ones,
          ``PodResizePending`` with that reason;
        - ``None``: no kubelet (only the spec changes).

        Container statuses the pod lacks are written first as a running pod's (allocated and
        running = the spec before the resize).
        """
        if state not in (None, "Done", "InProgress", "Deferred", "Infeasible"):
            raise ValueError(f"unknown resize state: {state!r}")
        before = self.get("pods", name, namespace)
        if before is None:
            raise ApiError.not_found("pods", name)
        spec = before["spec"]
        if pod_level:
            res = dict(spec.get("resources") or {})
            if requests is not None:
                res["requests"] = {**(res.get("requests") or {}), **requests}
            if limits is not None:
                res["limits"] = {**(res.get("limits") or {}), **limits}
            body: Obj = {"spec": {"resources": res}}
        else:
            containers = copy.deepcopy(spec.get("containers") or [])
            target = container or (containers[0]["name"] if containers else "")
            found = [c for c in containers if c.get("name") == target]
            if not found:
                raise ApiError.invalid("Pod", name, f"spec.containers: no container {target!r}")
            res = found[0].setdefault("resources", {})
            if requests is not None:
                res["requests"] = {**(res.get("requests") or {}), **requests}
            if limits is not None:
                res["limits"] = {**(res.get("limits") or {}), **limits}
            body = {"spec": {"containers": containers}}
        rdef = self.resource("pods")
        after = self.store.patch(rdef, namespace, name, body, _PATCH_TYPES["merge"], "resize")
        if state is None:
            return copy.deepcopy(after)
        status = copy.deepcopy(after.get("status") or {})
        old_status = _running_statuses(before, from_spec=False)
        new_status = _running_statuses(after, from_spec=True)
        allocated_new = state in ("Done", "InProgress")
        running_new = state == "Done"
        statuses = []
        for old_cs, new_cs in zip(old_status["containerStatuses"], new_status["containerStatuses"],
                                  strict=True):
            cs = {**new_cs, "allocatedResources": (new_cs if allocated_new else old_cs)[
                "allocatedResources"], "resources": (new_cs if running_new else old_cs)["resources"]}
            statuses.append(cs)
        status["containerStatuses"] = statuses
        if "resources" in new_status:
            status["allocatedResources"] = (new_status if allocated_new else old_status
                                            ).get("allocatedResources")
            status["resources"] = (new_status if running_new else old_status).get("resources")
        now = now_rfc3339()
        conditions = [c for c in status.get("conditions") or []
                      if c.get("type") not in ("PodResizePending", "PodResizeInProgress")]
        if state == "InProgress":
            conditions.append({"type": "PodResizeInProgress", "status": "True",
                               "lastProbeTime": None, "lastTransitionTime": now})
        elif state in ("Deferred", "Infeasible"):
            what = "capacity" if state == "Infeasible" else "resource"
            conditions.append({"type": "PodResizePending", "status": "True", "reason": state,
                               "message": f"Node didn't have enough {what}",
                               "lastProbeTime": None, "lastTransitionTime": now})
        status["conditions"] = conditions
        status.setdefault("phase", "Running")
        if status["phase"] == "Pending" and spec.get("nodeName"):
            status["phase"] = "Running"
        return self.patch("pods", name, {"status": status}, namespace, subresource="status")


    @property
    def graceful_pod_deletion(self) -> bool:
        """Deleting a bound pod only marks it (deletionTimestamp, grace period) until
        :meth:`finish_deletion` or a DELETE with ``gracePeriodSeconds: 0``."""
        return self.store.graceful_pod_deletion

    @graceful_pod_deletion.setter
    def graceful_pod_deletion(self, on: bool) -> None:
        self.store.graceful_pod_deletion = on

    def finish_deletion(self, namespace: str, name: str) -> Obj | None:
        """Play the kubelet: a terminating pod's containers stopped, delete it with grace 0
        (it stays while finalizers remain). Returns the last state; None if it did not exist."""
        return copy.deepcopy(self.store.finish_pod_deletion(namespace, name))

    @property
    def pv_controller(self) -> bool:
        """Complete volume bindings as kube's PV controller does (turning it on catches up)."""
        return self.controllers.pv_controller

    @pv_controller.setter
    def pv_controller(self, on: bool) -> None:
        self.controllers.pv_controller = on

    @property
    def pv_controller_delay(self) -> float:
        """Seconds the PV controller and auto-provisioning wait before acting (0: at once)."""
        return self.controllers.pv_controller_delay

    @pv_controller_delay.setter
    def pv_controller_delay(self, seconds: float) -> None:
        self.controllers.pv_controller_delay = seconds

    @property
    def auto_provision(self) -> dict[str, str]:
        """Provisioner name -> topology label key, for the provisioners to play."""
        return self.controllers.auto_provision

    @auto_provision.setter
    def auto_provision(self, provisioners: dict[str, str] | None) -> None:
        self.controllers.auto_provision = dict(provisioners or {})

    @property
    def pdb_controller(self) -> bool:
        """Keep every PDB's status current as pods and PDBs change (turning it on catches up)."""
        return self.controllers.pdb_controller

    @pdb_controller.setter
    def pdb_controller(self, on: bool) -> None:
        self.controllers.pdb_controller = on

    def provision(self, namespace: str, claim_name: str, *, pv_name: str | None = None,
                  node_affinity: dict[str, Iterable[str]] | None = None,
                  csi_driver: str | None = None) -> Obj:
        """Play a provisioner for a claim: create a PV of its class, size and access modes
        (``pvc-<uid>``, CSI source of the class's provisioner, claimRef to it), then bind both
        as the PV controller does. Returns the PV."""
        return copy.deepcopy(self.controllers.provision(
            namespace, claim_name, pv_name=pv_name, node_affinity=node_affinity,
            csi_driver=csi_driver))

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
