"""Shared builders and fakes for the controller tests (imported as `tests.controller.helpers`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from placer.controller.main import operate
from placer.controller.options import Options
from placer.controller.state import SchedulerState
from placer.controller.transport.client import ApiError, BindOutcome, BindResult, Reply
from placer.engine.framework import ObjectRef, Write
from placer.engine.kinds import KINDS as CATALOG_KINDS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

_uids = itertools.count(1)
_rvs = itertools.count(100)


# ----------------------------------------------------------------- object builders


def node(
    name: str,
    cpu: str = "4",
    memory: str = "16Gi",
    *,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    ready: bool = True,
    pods: str = "110",
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{name}", "labels": {"kubernetes.io/hostname": name,
                                                                         **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    scheduler: str = "placer",
    node_name: str | None = None,
    uid: str | None = None,
    rv: int | None = None,
    phase: str = "Pending",
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
    created: str = "2025-01-01T00:00:00Z",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(rv if rv is not None else next(_rvs)),
            "creationTimestamp": created,
            "labels": dict(labels or {}),
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu,
                                                                                       "memory": memory}}}],
            **(spec or {}),
        },
        "status": {"phase": phase},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def profile(
    name: str,
    scheduler: str = "placer",
    *,
    generation: int = 1,
    created: str = "2025-01-01T00:00:00Z",
    uid: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "SchedulerProfile",
        "metadata": {"name": name, "uid": uid or f"uid-profile-{name}", "generation": generation,
                     "creationTimestamp": created},
        "spec": {"schedulerName": scheduler, **spec},
    }


# ----------------------------------------------------------------- fakes


class OnePage:
    """A LIST of one page, as `placer.controller.transport.client.Pages` hands pages out."""

    def __init__(self, path: str, listing: Awaitable[tuple[list[dict[str, Any]], str]]) -> None:
        self.path = path
        self._listing: asyncio.Future[tuple[list[dict[str, Any]], str]] | None = asyncio.ensure_future(listing)

    def __aiter__(self) -> OnePage:
        return self

    async def __anext__(self) -> tuple[list[dict[str, Any]], str, bool]:
        if self._listing is None:
            raise StopAsyncIteration
        listing, self._listing = self._listing, None
        items, version = await listing
        return items, version, False

    def close(self) -> None:
        listing, self._listing = self._listing, None
        if listing is not None and not listing.done():
            listing.cancel()
        elif listing is not None and not listing.cancelled():
            listing.exception()


class FakeKube:
    """Records every call; `bind_result` decides binds (a callable may await to hold them)."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.event_patches: list[tuple[str, dict[str, Any]]] = []
        self.conditions: list[tuple[str, dict[str, Any]]] = []
        self.deletes: list[tuple[str, str]] = []  # (pod key, uid precondition)
        # every write to pods, in order: ("status", key, patch) and ("delete", key, uid)
        self.pod_writes: list[tuple[str, str, Any]] = []
        self.delete_status: Callable[[str], int] = lambda key: 200  # the answer to a pod DELETE
        self.profile_statuses: list[tuple[str, dict[str, Any]]] = []
        self.bind_result: Callable[[str, str], Awaitable[BindOutcome] | BindOutcome] = (
            lambda key, node: BindOutcome(BindResult.BOUND)
        )
        self.in_flight = 0
        self.max_in_flight = 0
        self.status = 201
        self.condition_status = 200
        self.last_answer = None
        self.last_failure = None
        self.lists: dict[str, list[dict[str, Any]]] = {}  # path -> items, for list_objects
        self.objects: dict[str, dict[str, Any]] = {}  # path -> object, for GET (else 404)
        self.gets: list[str] = []
        self.reachable = True  # what ping() answers
        self.pings = 0
        # PersistentVolumes (by name) and claims ("ns/name") for the volume binding calls: merge
        # patches with a resourceVersion precondition, as the API server applies them
        self.volumes: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str, dict[str, Any]]] = []  # (plural, key, patch) of every PATCH
        self.write_status: int | None = None  # answer every PATCH with this status instead
        self.write_error: ApiError | None = None  # raise this (no HTTP answer) on every PATCH instead
        self.on_write: Callable[[str, dict[str, Any]], None] | None = None  # (plural, stored): the watch echo

    async def list_objects(self, path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        return [json.loads(json.dumps(item)) for item in self.lists.get(path, [])], "1000"

    def list_pages(self, path: str, query: Any = (), *, limit: int = 500) -> OnePage:
        """`list_objects` as the one page of a paged LIST (KubeClient.list_pages)."""
        return OnePage(path, self.list_objects(path, query))

    async def request(self, method: str, path: str, **_: Any) -> Reply:
        self.gets.append(path)
        found = self.objects.get(path)
        return Reply(200, json.dumps(found).encode()) if found is not None else Reply(404, b"{}")

    async def list_node_metrics(self) -> list[Any] | None:
        return None

    async def ping(self) -> bool:
        self.pings += 1
        return self.reachable

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        key = f"{namespace}/{name}"
        self.binds.append((key, node))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            result = self.bind_result(key, node)
            if asyncio.iscoroutine(result):
                result = await result
            return result  # type: ignore[return-value]
        finally:
            self.in_flight -= 1

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> Reply:
        self.events.append(dict(event))
        return Reply(self.status, b"{}")

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply:
        self.event_patches.append((name, dict(patch)))
        return Reply(200, b"{}")

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply:
        self.conditions.append((f"{namespace}/{name}", dict(patch)))
        self.pod_writes.append(("status", f"{namespace}/{name}", json.loads(json.dumps(patch))))
        return Reply(self.condition_status, b"{}")

    async def delete_pod(self, namespace: str, name: str, uid: str) -> Reply:
        key = f"{namespace}/{name}"
        self.deletes.append((key, uid))
        self.pod_writes.append(("delete", key, uid))
        status = self.delete_status(key)
        return Reply(status, json.dumps({"message": f"HTTP {status} from the fake"}).encode())

    async def patch_profile_status(self, name: str, patch: Mapping[str, Any]) -> Reply:
        self.profile_statuses.append((name, dict(patch)))
        return Reply(200, b"{}")

    # ----------------------------------------------------------------- claims and volumes

    def store(self, plural: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """File a PV or claim as the API server holds it (a copy; resourceVersion kept or given)."""
        stored = json.loads(json.dumps(obj))
        meta = stored.setdefault("metadata", {})
        meta.setdefault("resourceVersion", str(next(_rvs)))
        if plural == "persistentvolumes":
            self.volumes[meta["name"]] = stored
        else:
            self.claims[f"{meta.get('namespace') or 'default'}/{meta['name']}"] = stored
        return json.loads(json.dumps(stored))

    def _objects(self, plural: str) -> dict[str, dict[str, Any]]:
        return self.volumes if plural == "persistentvolumes" else self.claims

    def _get(self, plural: str, key: str) -> Reply:
        found = self._objects(plural).get(key)
        if found is None:
            return Reply(404, json.dumps({"message": f'{plural} "{key}" not found'}).encode())
        return Reply(200, json.dumps(found).encode())

    def _patch(self, plural: str, key: str, patch: Mapping[str, Any]) -> Reply:
        self.writes.append((plural, key, json.loads(json.dumps(patch))))
        if self.write_error is not None:
            raise self.write_error
        if self.write_status is not None:
            return Reply(self.write_status, json.dumps({"message": f"HTTP {self.write_status} from the fake"}).encode())
        objects = self._objects(plural)
        current = objects.get(key)
        if current is None:
            return Reply(404, json.dumps({"message": f'{plural} "{key}" not found'}).encode())
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            message = f'Operation cannot be fulfilled on {plural} "{key}": the object has been modified'
            return Reply(409, json.dumps({"message": message}).encode())
        patched = merge_patch(current, patch)
        if patched != current:
            patched["metadata"]["resourceVersion"] = str(next(_rvs))
            objects[key] = patched
            if self.on_write is not None:
                self.on_write(plural, json.loads(json.dumps(patched)))
        return Reply(200, json.dumps(patched).encode())

    @staticmethod
    def _key(ref: ObjectRef) -> str:
        return f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name

    async def get_object(self, ref: ObjectRef, *, retries: int | None = None) -> Reply:
        return self._get(ref.resource, self._key(ref))

    async def write(self, write: Write) -> Reply:
        """A `Write` as the API server takes it: pods' status patches and deletes go to the calls
        above (which tests may replace), PVs' and claims' merge patches to `_patch`."""
        ref = write.target
        body = write.body()
        if ref.resource == "pods" and write.delete:
            return await self.delete_pod(ref.namespace, ref.name, (body.get("preconditions") or {}).get("uid", ""))
        if ref.resource == "pods" and write.subresource == "status":
            return await self.patch_pod_status(ref.namespace, ref.name, body)
        assert ref.resource in ("persistentvolumes", "persistentvolumeclaims") and not write.delete, write
        return self._patch(ref.resource, self._key(ref), body)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (the resourceVersion precondition aside)."""
    if not isinstance(patch, Mapping):
        return json.loads(json.dumps(patch))
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeLeaseStore:
    """An in-memory Lease API with resourceVersions and 409s, like the API server's."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = itertools.count(1)
        self.fail: ApiError | None = None  # raise this on every call while set
        self.calls = 0

    def _check(self) -> None:
        self.calls += 1
        if self.fail is not None:
            raise self.fail

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._check()
        lease = self.leases.get((namespace, name))
        return json.loads(json.dumps(lease)) if lease is not None else None

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        self._check()
        key = (namespace, lease["metadata"]["name"])
        if key in self.leases:
            raise ApiError(409, "already exists")
        stored = json.loads(json.dumps(lease))
        stored["metadata"]["resourceVersion"] = str(next(self.rv))
        self.leases[key] = stored
        return json.loads(json.dumps(stored))

    async def update_lease(self, namespace: str, name: str, lease: dict[str, Any]) -> dict[str, Any]:
        self._check()
        current = self.leases.get((namespace, name))
        if current is None:
            raise ApiError(404, "not found")
        if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")
        stored = json.loads(json.dumps(lease))
        stored["metadata"]["resourceVersion"] = str(next(self.rv))
        self.leases[(namespace, name)] = stored
        return json.loads(json.dumps(stored))

    def holder(self, namespace: str = "ns", name: str = "placer") -> str:
        lease = self.leases.get((namespace, name))
        return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


def unit_state(kube: Any = None, **overrides: Any) -> SchedulerState:
    """A state with a fake client and no leader election, for driving the engine by hand."""
    options = Options(leader_elect=False, metrics_port=0, identity="test", lease_namespace="ns", **overrides)
    return SchedulerState(options, kube if kube is not None else FakeKube())


async def until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> Any:
    """Poll until `predicate()` is truthy; TimeoutError after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while True:
            result = predicate()
            if result:
                return result
            await asyncio.sleep(interval)


# ----------------------------------------------------------------- a real operator in a thread


class OperatorThread:
    """`operate()` in its own thread and event loop.

    Kopf cancels every task created in its loop after it started when it exits, so operators
    sharing the test's loop would cancel each other (and the emulator's connections).
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.stop_flag = threading.Event()
        self.ready = threading.Event()
        self.state: SchedulerState | None = None
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.thread = threading.Thread(target=self._main, name=f"operator-{options.identity}", daemon=True)

    def _main(self) -> None:
        async def runner() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()  # type: ignore[assignment]
            await operate(self.options, stop_flag=self.stop_flag, ready_flag=self.ready, on_state=self._keep)

        try:
            asyncio.run(runner())
        except BaseException as error:
            self.error = error

    def _keep(self, state: SchedulerState) -> None:
        self.state = state

    async def start(self, timeout: float = 10.0) -> OperatorThread:
        self.thread.start()
        await asyncio.to_thread(self.ready.wait, timeout)
        if not self.ready.is_set():
            raise TimeoutError(f"operator {self.options.identity} did not start: {self.error!r}")
        return self

    async def stop(self, timeout: float = 15.0) -> None:
        """Graceful: Kopf's stop flag (the Lease is released if `release_on_exit`)."""
        self.stop_flag.set()
        await asyncio.to_thread(self.thread.join, timeout)
        assert not self.thread.is_alive(), f"operator {self.options.identity} did not stop"

    async def kill(self, timeout: float = 15.0) -> None:
        """Cancel the operator's task from outside, as an abrupt end (no graceful shutdown)."""
        if self._loop is not None and self._task is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._task.cancel)
        await asyncio.sleep(0.2)
        # Kopf waits for a threading.Event stop flag in an executor thread, which asyncio.run()
        # joins on exit: release it, or the thread never ends.
        self.stop_flag.set()
        await asyncio.to_thread(self.thread.join, timeout)
        assert not self.thread.is_alive(), f"operator {self.options.identity} did not stop"


async def crash(operator: OperatorThread, timeout: float = 15.0) -> None:
    """As abrupt as it gets in-process: the scheduling loop, every bind in flight and the leader
    election are cancelled at once (nothing more is decided or sent, the Lease is not renewed),
    then the operator is cancelled as `kill()` does. Run it with `release_on_exit=False`: nothing
    is cleaned up. Binds already on the wire may still land, their answers lost, as when a process
    is killed."""
    loop = operator._loop
    assert loop is not None

    def cancel_work() -> None:
        for task in asyncio.all_tasks(loop):
            qualname = getattr(task.get_coro(), "__qualname__", "")
            if task.get_name() in ("placer: scheduling loop", "placer: leader election") or qualname.endswith(
                "BindingCycles._bind"
            ):
                task.cancel()

    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(cancel_work)
    await operator.kill(timeout)


Launch = Callable[..., Awaitable[OperatorThread]]  # the `launch` fixture (conftest.py)


def operator_options(kubeconfig: Path, identity: str = "op-a", **overrides: Any) -> Options:
    """Options for an integration test: short timeouts, no metrics server, no leader election."""
    values: dict[str, Any] = {
        "kubeconfig": str(kubeconfig),
        "metrics_port": 0,
        "leader_elect": False,
        "identity": identity,
        "lease_namespace": "placer-system",
        "api_retries": 3,
        "api_max_backoff": 0.2,
        "report_workers": 4,
        "watch_server_timeout": 60,
        "health_ping_interval": 1.0,
        "watch_backoff": 0.1,
        "watch_max_backoff": 0.5,
    }
    values.update(overrides)
    return Options(**values)


# ----------------------------------------------------------------- what the emulator ends up holding


def bound_node(emu: Any, name: str, namespace: str = "default") -> str | None:
    """The node a pod in the emulator is bound to (None: unbound or gone)."""
    found = emu.get("pods", name, namespace)
    return None if found is None else (found.get("spec") or {}).get("nodeName")


def events_about(emu: Any, name: str, reason: str | None = None) -> list[dict[str, Any]]:
    """events.k8s.io/v1 Events regarding a pod (by name), optionally of one reason."""
    return [e for e in emu.list("events.k8s.io/v1/events")
            if (e.get("regarding") or {}).get("name") == name and (reason is None or e.get("reason") == reason)]


def assert_sound(emu: Any, pods: Iterable[str] = (), namespace: str = "default") -> None:
    """Nothing bound twice, no node over its allocatable, and each of `pods` bound exactly once."""
    assert emu.double_bindings() == [], f"bound more than once: {emu.double_bindings()}"
    assert emu.audit_capacity() == [], f"over allocatable: {emu.audit_capacity()}"
    counts = Counter(record.key for record in emu.bindings)
    unbound = [name for name in pods if not bound_node(emu, name, namespace)]
    assert not unbound, f"never bound: {unbound}"
    wrong = {name: counts[f"{namespace}/{name}"] for name in pods if counts[f"{namespace}/{name}"] != 1}
    assert not wrong, f"bindings per pod (must be 1): {wrong}"


class SlowBindReplies:
    """Make the emulator answer a binding only `delay` seconds *after* it landed.

    A fault's `delay` sleeps before serving, so a client that gives up meanwhile cancels the
    request and nothing is bound; this plays the other case: the server bound the pod, and the
    answer is lost (the client timed out, or died). `only` limits it to some pod names, `times`
    to that many replies; `before` runs just before such a bind lands (e.g. to hold the watch back).
    """

    def __init__(
        self,
        emu: Any,
        delay: float,
        *,
        only: Iterable[str] | None = None,
        times: int | None = None,
        before: Callable[[], None] | None = None,
    ) -> None:
        self.emu = emu
        self.delay = delay
        self.only = set(only) if only is not None else None
        self.times = times
        self.before = before
        self.landed: list[str] = []  # pods whose bind landed and whose reply was held back
        server = emu.server
        self._original = server._resource

        async def resource(request: Any, route: Any) -> Any:
            name = route.name or ""
            slow = (request.method == "POST" and route.sub == "binding" and (self.only is None or name in self.only)
                    and (self.times is None or self.times > 0))
            if slow and self.before is not None:
                self.before()
            response = await self._original(request, route)
            if slow and response.status == 201:
                if self.times is not None:
                    self.times -= 1
                self.landed.append(name)
                await asyncio.sleep(self.delay)
            return response

        server._resource = resource

    def restore(self) -> None:
        self.emu.server._resource = self._original


WATCHED_PATHS = (
    "/api/v1/pods",
    "/api/v1/nodes",
    "/apis/placer.dev/v1alpha1/schedulerprofiles",
    *(kind.path() for kind in CATALOG_KINDS),
)


def watching(emu: Any, paths: Iterable[str] = WATCHED_PATHS) -> bool:
    """Whether a watch stream is open on each of `paths` (an operator past its initial listing)."""
    open_paths = {r.path for r in emu.requests if r.is_watch and r.duration is None and r.status == 200}
    return all(path in open_paths for path in paths)


def profile_ready(emu: Any, name: str) -> dict[str, Any] | None:
    """A SchedulerProfile's Ready condition as the emulator holds it, with its observedGeneration."""
    obj = emu.get("sp", name) or {}
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return {**condition, "observedGeneration": obj["status"].get("observedGeneration")}
    return None
