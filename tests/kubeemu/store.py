"""The object store: dict-based buckets, one global resourceVersion, bounded watch history.

Stored objects are immutable snapshots: every write builds a new dict (sharing untouched
sub-trees with the previous version), so list responses and watch events can reference them
without copying, and a watch event's JSON line is serialized once for all watchers.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import calendar
import collections
import contextlib
import dataclasses
import ipaddress
import json
import logging
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from . import dra, kinds, pods
from .capacity import TERMINAL_PHASES
from .errors import ApiError
from .patching import apply_patch
from .resources import Obj, Registry, ResourceDef, defs_from_crd
from .schema import apply_schema
from .selectors import FieldSelector, LabelSelector
from .versions import NEWEST, Features

logger = logging.getLogger("kubeemu")

# Pod spec fields that a real API server lets an update change (all else is immutable).
MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds",
                    "schedulingGates")
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")  # kubeadm's default; .1 is `kubernetes`

STOP = object()  # queue sentinel: end the watch stream cleanly
ABORT = object()  # queue sentinel: reset the watch connection

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def now_rfc3339(at: float | None = None) -> str:
    """Second-precision UTC timestamp (of now, or of ``at``), as metadata timestamps are."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def parse_rfc3339(text: str) -> float:
    """The epoch seconds of a second-precision UTC timestamp."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


def now_micro() -> str:
    """Microsecond-precision UTC timestamp (MicroTime)."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


@dataclasses.dataclass(slots=True)
class WatchEvent:
    """One change in a bucket's history; ``old`` lets selector watches see transitions."""

    rv: int
    type: str
    obj: Obj
    old: Obj | None
    cache: dict[tuple[str, str], bytes] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class BindingRecord:
    """One successful binding, for the audit log."""

    namespace: str
    name: str
    node: str
    time: float
    resource_version: str
    uid: str

    @property
    def key(self) -> str:
        """``namespace/name`` of the pod."""
        return f"{self.namespace}/{self.name}"


QueueItem = tuple[str, Obj, WatchEvent | None, float] | object
# A reaction to a committed change: (bucket name, event type, new object, previous object).
Reactor = Callable[[str, str, Obj, Obj | None], None]


class Watcher:
    """One open watch: a queue fed synchronously by writes, filtered by namespace and selectors."""

    __slots__ = ("clock", "fields", "labels", "namespace", "queue", "rdef")

    def __init__(self, rdef: ResourceDef, namespace: str | None,
                 labels: LabelSelector, fields: FieldSelector) -> None:
        self.rdef = rdef
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.queue: asyncio.Queue[QueueItem] = asyncio.Queue()
        self.clock = asyncio.get_running_loop().time  # stamps items, for injected watch lag

    def put(self, etype: str, obj: Obj, ev: WatchEvent | None) -> None:
        """Queue one event for the stream."""
        self.queue.put_nowait((etype, obj, ev, self.clock()))

    def matches(self, obj: Obj) -> bool:
        """Whether an object (in stored form) passes this watch's filters."""
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.labels and not self.labels.matches(meta.get("labels")):
            return False
        if self.fields:
            view = self.rdef.to_view(obj) if self.rdef.to_view else obj
            if not self.fields.matches(view):
                return False
        return True

    def offer(self, ev: WatchEvent) -> None:
        """Queue an event, turning selector entries/exits into ADDED/DELETED as a real server."""
        if self.namespace is None and not self.labels and not self.fields:
            self.put(ev.type, ev.obj, ev)
            return
        now = self.matches(ev.obj)
        if ev.type == "MODIFIED":
            before = ev.old is not None and self.matches(ev.old)
            if now and before:
                self.put("MODIFIED", ev.obj, ev)
            elif now:
                self.put("ADDED", ev.obj, ev)
            elif before:
                self.put("DELETED", ev.obj, ev)
        elif now:
            self.put(ev.type, ev.obj, ev)

    def line(self, etype: str, obj: Obj, ev: WatchEvent | None) -> bytes:
        """The JSON line for an event; cached on the event, shared by all watchers of a view."""
        if ev is not None:
            ckey = (self.rdef.key, etype)
            cached = ev.cache.get(ckey)
            if cached is None:
                view = self.rdef.to_view(obj) if self.rdef.to_view else obj
                cached = ev.cache[ckey] = (
                    _dumps({"type": etype, "object": view}).encode() + b"\n")
            return cached
        view = self.rdef.to_view(obj) if self.rdef.to_view else obj
        return _dumps({"type": etype, "object": view}).encode() + b"\n"


class Bucket:
    """Objects of one storage kind, keyed by (namespace, name); cluster-scoped use ``""``."""

    __slots__ = ("_sorted", "compacted_rv", "history", "name", "objects", "watchers")

    def __init__(self, name: str, history_size: int) -> None:
        self.name = name
        self.objects: dict[tuple[str, str], Obj] = {}
        self.history: collections.deque[WatchEvent] = collections.deque(maxlen=history_size)
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        self._sorted: list[tuple[str, str]] | None = None

    def sorted_keys(self) -> list[tuple[str, str]]:
        """Keys in etcd order (namespace, then name); rebuilt only after inserts/deletes."""
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def put(self, key: tuple[str, str], obj: Obj) -> None:
        if key not in self.objects:
            self._sorted = None
        self.objects[key] = obj

    def pop(self, key: tuple[str, str]) -> None:
        del self.objects[key]
        self._sorted = None


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = _dumps({"v": 1, "rv": rv, "ns": key[0], "name": key[1]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        return int(data["rv"]), (str(data["ns"]), str(data["name"]))
    except (ValueError, KeyError, TypeError):
        raise ApiError.bad_request(f"continue key is not valid: {token!r}") from None


def _view(rdef: ResourceDef, obj: Obj) -> Obj:
    return rdef.to_view(obj) if rdef.to_view else obj


def _strip_for_compare(obj: Obj) -> Obj:
    """The parts of an object whose change bumps ``metadata.generation``."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


_DECLARED_FEATURE = re.compile(r"^[A-Z][a-zA-Z0-9]*(/[a-zA-Z][a-zA-Z0-9]*)*$")


def _validate_node(node: Obj) -> list[str]:
    """``validateNodeDeclaredFeatures``: valid names, sorted, no duplicates."""
    features = (node.get("status") or {}).get("declaredFeatures")
    if not features:
        return []
    if not isinstance(features, list):
        return [f"status.declaredFeatures: Invalid value: {features!r}: must be a list"]
    errors: list[str] = []
    for index, name in enumerate(features):
        if not isinstance(name, str) or len(name) > 253 or not _DECLARED_FEATURE.match(name):
            errors.append(f'status.declaredFeatures[{index}]: Invalid value: "{name}": invalid '
                          f'feature name "{name}": must start with an UpperCamelCase segment, '
                          "with subsequent segments separated by '/' (e.g., MyFeature or "
                          "MyFeature/mySubFeature), and contain only alphanumeric characters "
                          "and slashes")
        if index + 1 < len(features):
            after = features[index + 1]
            if after == name:
                errors.append(f'status.declaredFeatures[{index + 1}]: Duplicate value: "{after}"')
            elif isinstance(name, str) and isinstance(after, str) and name > after:
                errors.append(f'status.declaredFeatures[{index + 1}]: Invalid value: "{after}": '
                              "list must be sorted alphabetically")
    return errors


def _default_pod(obj: Obj) -> None:
    """Apply the API server's pod defaulting that a scheduler can observe."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            res = container.get("resources")
            if isinstance(res, dict) and res.get("limits"):
                requests = dict(res.get("limits") or {})
                requests.update(res.get("requests") or {})
                container["resources"] = {**res, "requests": requests}


class Store:
    """All objects, their history, the watchers, and the binding audit."""

    def __init__(self, registry: Registry, *, history_size: int = 50_000,
                 strict_namespaces: bool = False, graceful_pod_deletion: bool = False,
                 features: Features | None = None) -> None:
        self.registry = registry
        self.features = features or Features(NEWEST)  # the Kubernetes minor played
        #: PodGroup gates on beyond GenericWorkload and GangScheduling (WorkloadAwarePreemption,
        #: TopologyAwareWorkloadScheduling, DRAWorkloadResourceClaims): their fields are served
        self.workload_gates: frozenset[str] = frozenset()
        self.history_size = history_size
        self.strict_namespaces = strict_namespaces
        self.graceful_pod_deletion = graceful_pod_deletion
        self.rv = 0
        self.buckets: dict[str, Bucket] = {}
        self.bindings: list[BindingRecord] = []
        self.bind_attempts: collections.Counter[str] = collections.Counter()
        self.on_change: list[Callable[[], None]] = []
        # Emulated controllers: run after each commit, their own writes queued behind it, so
        # watchers see the triggering event first, as with a (very fast) real controller.
        self.reactors: list[Reactor] = []
        self._reactions: collections.deque[tuple[str, str, Obj, Obj | None]] = collections.deque()
        self._reacting = False
        self._next_service_ip = int(SERVICE_CIDR.network_address) + 10

    # --- internals ---------------------------------------------------------------------------

    def bucket(self, rdef: ResourceDef) -> Bucket:
        """The bucket of a resource, created on first use."""
        name = rdef.storage
        bucket = self.buckets.get(name)
        if bucket is None:
            bucket = self.buckets[name] = Bucket(name, self.history_size)
        return bucket

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _commit(self, bucket: Bucket, etype: str, obj: Obj, old: Obj | None) -> None:
        ev = WatchEvent(int(obj["metadata"]["resourceVersion"]), etype, obj, old)
        if len(bucket.history) == bucket.history.maxlen:
            bucket.compacted_rv = bucket.history[0].rv
        bucket.history.append(ev)
        for watcher in bucket.watchers:
            watcher.offer(ev)
        for callback in self.on_change:
            callback()
        if self.reactors:
            self._reactions.append((bucket.name, etype, obj, old))
            if not self._reacting:
                self._react()

    def _react(self) -> None:
        """Run the reactors over queued changes until none are left (their writes queue more)."""
        self._reacting = True
        try:
            while self._reactions:
                item = self._reactions.popleft()
                for reactor in list(self.reactors):
                    try:
                        reactor(*item)
                    except ApiError as err:  # a controller's write lost a race: as in a cluster
                        logger.debug("kubeemu: reaction to %s failed: %s", item[0], err)
                    except Exception:  # never fail the write that triggered it
                        logger.exception("kubeemu: reaction to a change of %s failed", item[0])
        finally:
            self._reacting = False

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Hold reactions back until the block's writes are all done (a controller's steps)."""
        if self._reacting:
            yield
            return
        self._reacting = True
        try:
            yield
        finally:
            self._reacting = False
            if self._reactions:
                self._react()

    def _key(self, rdef: ResourceDef, namespace: str | None, name: str) -> tuple[str, str]:
        if rdef.namespaced:
            if not namespace:
                raise ApiError.bad_request(f"a namespace is required for {rdef.plural}")
            return (namespace, name)
        return ("", name)

    def _existing(self, rdef: ResourceDef, namespace: str | None, name: str) -> Obj:
        obj = self.bucket(rdef).objects.get(self._key(rdef, namespace, name))
        if obj is None:
            raise ApiError.not_found(rdef.plural, name, rdef.group)
        return obj

    def _generate_name(self, bucket: Bucket, namespace: str, prefix: str) -> str:
        while True:
            name = prefix + "".join(random.choices(_NAME_CHARS, k=5))
            if (namespace, name) not in bucket.objects:
                return name

    # --- reads -------------------------------------------------------------------------------

    def get(self, rdef: ResourceDef, namespace: str | None, name: str) -> Obj:
        """One object in the resource's view (a shared snapshot: do not mutate)."""
        return _view(rdef, self._existing(rdef, namespace, name))

    def iter_objects(self, rdef: ResourceDef, namespace: str | None = None) -> Iterator[Obj]:
        """Stored objects of a bucket in key order, without filters or views (for audits)."""
        bucket = self.bucket(rdef)
        for key in bucket.sorted_keys():
            if namespace is None or key[0] == namespace:
                yield bucket.objects[key]

    def list(
        self,
        rdef: ResourceDef,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[Obj], str, str, int | None]:
        """A page of objects: (items, list resourceVersion, continue token, remaining count)."""
        bucket = self.bucket(rdef)
        keys = bucket.sorted_keys()
        lo, hi = 0, len(keys)
        if rdef.namespaced and namespace:
            lo = bisect.bisect_left(keys, (namespace,))
            hi = bisect.bisect_left(keys, (namespace + "\x00",))
        list_rv = self.rv
        if continue_token:
            token_rv, after = _decode_continue(continue_token)
            if token_rv < bucket.compacted_rv:
                raise ApiError.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.")
            list_rv = token_rv
            lo = max(lo, bisect.bisect_right(keys, after))
        objects = bucket.objects
        convert = rdef.to_view
        items: list[Obj] = []
        token = ""
        remaining: int | None = None
        for idx in range(lo, hi):
            obj = objects[keys[idx]]
            if labels and not labels.matches(obj["metadata"].get("labels")):
                continue
            view = convert(obj) if convert else obj
            if fields and not fields.matches(view):
                continue
            items.append(view)
            if limit and len(items) >= limit:
                if idx + 1 < hi:
                    token = _encode_continue(list_rv, keys[idx])
                    if not labels and not fields:
                        remaining = hi - idx - 1
                break
        return items, str(list_rv), token, remaining

    # --- writes ------------------------------------------------------------------------------

    def create(self, rdef: ResourceDef, namespace: str | None, body: Any, *,
               http: bool = True) -> Obj:
        """Create an object; over HTTP status is reset as the resource's strategy does."""
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        if rdef.from_view:
            body = rdef.from_view(body)
        bucket = self.bucket(rdef)
        obj: Obj = {"apiVersion": rdef.api_version, "kind": rdef.kind}  # first, for readers
        obj.update(body)
        meta = dict(obj.get("metadata") or {})
        if rdef.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request")
            namespace = namespace or body_ns or "default"
            if self.strict_namespaces and ("", namespace) not in self.buckets.get(
                    "/namespaces", Bucket("", 1)).objects:
                raise ApiError.not_found("namespaces", namespace)
            meta["namespace"] = namespace
        else:
            namespace = ""
            meta.pop("namespace", None)
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["name"] = self._generate_name(bucket, namespace, meta["generateName"])
        if not name:
            raise ApiError.invalid(rdef.kind, "", "metadata.name: Required value: name or "
                                                  "generateName is required")
        key = (namespace, name)
        if key in bucket.objects:
            raise ApiError.already_exists(rdef.plural, name, rdef.group)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rdef.tracks_generation:
            meta["generation"] = 1
        if not rdef.from_view:
            obj["apiVersion"] = rdef.api_version
            obj["kind"] = rdef.kind
        obj["metadata"] = meta
        self._on_create(rdef, obj, http)
        obj = self._conform(rdef, obj)
        meta = obj["metadata"] = dict(obj["metadata"])
        meta["resourceVersion"] = self._next_rv()
        bucket.put(key, obj)
        self._commit(bucket, "ADDED", obj, None)
        return _view(rdef, obj)

    def _on_create(self, rdef: ResourceDef, obj: Obj, http: bool) -> None:
        """Per-resource create strategy: defaults and status resets."""
        group, plural = rdef.group, rdef.plural
        if group == "" and plural == "pods":
            trusted = not http and "priority" in (obj.get("spec") or {})
            features = self.features
            features.drop_pod_fields(obj)
            _default_pod(obj)
            if "PodLevelResources" in features:
                pods.default_pod_requests(obj)
            self._check(rdef, obj, pods.validate_create(obj, features))
            if not trusted:
                self._admit_pod(obj)
            if http or not obj.get("status"):
                obj["status"] = {"phase": "Pending"}
            else:
                obj["status"] = {"phase": "Pending", **obj["status"]}
            if "PodSchedulingReadiness" in features:
                pods.apply_scheduling_gated_condition(obj, now_rfc3339())
        elif group == "" and plural == "nodes":
            self.features.drop_node_fields(obj)
            self._check(rdef, obj, _validate_node(obj))
        elif group == "resource.k8s.io":
            self._dra_fields(rdef, obj, None)
            if plural == "resourceclaims":  # (reset on create; an empty status is still shown)
                obj["status"] = {} if http else dict(obj.get("status") or {})
        elif rdef.custom:
            if rdef.has_status and http:
                obj.pop("status", None)
        elif group == "apiextensions.k8s.io":
            self._register_crd(obj)
        else:
            kind = rdef.kind
            if kind == "Namespace" and (http or not obj.get("status")):
                obj["status"] = {"phase": "Active"}
            elif kind == "PersistentVolumeClaim":
                self._admit_pvc(obj)
            kinds.apply_defaults(kind, obj, self.workload_gates)
            if kind == "PodGroup" and "WorkloadAwarePreemption" in self.workload_gates:
                self._admit_pod_group(obj, trusted=not http and "priority" in (obj.get("spec") or {}))
            kinds.initial_status(kind, obj, http, now_rfc3339())
            self._check(rdef, obj, kinds.validate(kind, obj))
            if kind == "Service":
                self._allocate_cluster_ip(obj)
            elif kind == "PriorityClass":
                self._admit_priority_class(obj)
            elif kind == "PodGroup":  # its strategy: deleting it waits for the protection controller
                meta = obj["metadata"] = dict(obj["metadata"])
                meta["finalizers"] = [*(meta.get("finalizers") or []),
                                      *([] if kinds.PODGROUP_FINALIZER in (meta.get("finalizers") or [])
                                        else [kinds.PODGROUP_FINALIZER])]

    @staticmethod
    def _check(rdef: ResourceDef, obj: Obj, errors: list[str]) -> None:
        if errors:
            raise ApiError.invalid(rdef.kind, obj["metadata"].get("name", ""), errors, rdef.group)

    def _objects(self, group: str, plural: str) -> dict[tuple[str, str], Obj]:
        """The stored objects of a built-in resource, without creating its bucket."""
        bucket = self.buckets.get(f"{group}/{plural}")
        return bucket.objects if bucket is not None else {}

    def _admit_pod(self, obj: Obj) -> None:
        """The Priority admission plugin: resolve ``priorityClassName`` (or the global default)
        into ``spec.priority`` and ``spec.preemptionPolicy``; 403 for an unknown class.

        God mode does not call this for a pod that already carries a priority (as if admitted
        before), so that recorded clusters load without their PriorityClasses.
        """
        spec = obj["spec"]
        classes = self._objects("scheduling.k8s.io", "priorityclasses")
        name = spec.get("priorityClassName")
        policy: str | None = "PreemptLowerPriority"
        if not name:
            default = self._global_default_class(classes)
            priority = 0
            if default is not None:
                spec["priorityClassName"] = default["metadata"]["name"]
                priority = int(default.get("value", 0))
                policy = default.get("preemptionPolicy")
        else:
            pclass = classes.get(("", name))
            if pclass is None:
                raise ApiError.forbidden("pods", obj["metadata"].get("name", ""),
                                         f"no PriorityClass with name {name} was found")
            priority = int(pclass.get("value", 0))
            policy = pclass.get("preemptionPolicy")
        given = spec.get("priority")
        if given is not None and given != priority:
            raise ApiError.forbidden("pods", obj["metadata"].get("name", ""),
                                     f"the integer value of priority ({given}) must not be "
                                     f"provided in pod spec; priority admission controller "
                                     f"computed {priority} from the given PriorityClass name")
        spec["priority"] = priority
        if policy is not None:
            if spec.get("preemptionPolicy") not in (None, policy):
                raise ApiError.forbidden("pods", obj["metadata"].get("name", ""),
                                         f"the string value of PreemptionPolicy "
                                         f"({spec['preemptionPolicy']}) must not be provided in "
                                         f"pod spec; priority admission controller computed "
                                         f"{policy} from the given PriorityClass name")
            spec["preemptionPolicy"] = policy

    def _admit_pod_group(self, obj: Obj, trusted: bool) -> None:
        """The Priority admission plugin for a PodGroup (WorkloadAwarePreemption on, kube's
        `admitPodGroup`): `priorityClassName` (or the global default class) resolved into
        `spec.priority` (0 without either); 403 for an unknown class or a priority that differs."""
        if trusted:
            return
        spec = obj["spec"] = dict(obj["spec"])
        classes = self._objects("scheduling.k8s.io", "priorityclasses")
        name = spec.get("priorityClassName")
        what = obj["metadata"].get("name", "")
        priority = 0
        if not name:
            default = self._global_default_class(classes)
            if default is not None:
                name, priority = default["metadata"]["name"], int(default.get("value", 0))
        else:
            pclass = classes.get(("", name))
            if pclass is None:
                raise ApiError.forbidden("podgroups", what, f"no PriorityClass with name {name} was found",
                                         "scheduling.k8s.io")
            priority = int(pclass.get("value", 0))
        given = spec.get("priority")
        if given is not None and given != priority:
            raise ApiError.forbidden("podgroups", what, f"priority set in the pod group ({given}) must match the "
                                     f"priority computed ({priority}) based on the priority class set in the spec",
                                     "scheduling.k8s.io")
        spec["priority"] = priority
        if name:
            spec["priorityClassName"] = name

    @staticmethod
    def _global_default_class(classes: dict[tuple[str, str], Obj]) -> Obj | None:
        """The globalDefault PriorityClass; with several (a race), the lowest value wins."""
        defaults = [c for c in classes.values() if c.get("globalDefault")]
        return min(defaults, key=lambda c: int(c.get("value", 0))) if defaults else None

    def _admit_priority_class(self, obj: Obj) -> None:
        """Only one PriorityClass may be the global default (403 otherwise)."""
        if not obj.get("globalDefault"):
            return
        name = obj["metadata"]["name"]
        for other in self._objects("scheduling.k8s.io", "priorityclasses").values():
            if other.get("globalDefault") and other["metadata"]["name"] != name:
                raise ApiError.forbidden("priorityclasses", name,
                                         f"PriorityClass {other['metadata']['name']} is already "
                                         f"marked as default. Only one default can exist",
                                         "scheduling.k8s.io")

    def _admit_pvc(self, obj: Obj) -> None:
        """The DefaultStorageClass admission plugin: a claim without ``storageClassName`` (not
        ``""``) gets the default class, the newest one if several are marked."""
        spec = obj.get("spec") or {}
        if spec.get("storageClassName") is not None:
            return
        defaults = [c for c in self._objects("storage.k8s.io", "storageclasses").values()
                    if (c["metadata"].get("annotations") or {}).get(kinds.ANN_DEFAULT_CLASS)
                    == "true"]
        if defaults:
            newest = max(defaults, key=lambda c: (c["metadata"].get("creationTimestamp", ""),
                                                  c["metadata"]["name"]))
            obj["spec"] = {**spec, "storageClassName": newest["metadata"]["name"]}

    def _allocate_cluster_ip(self, obj: Obj) -> None:
        """Give a ClusterIP/NodePort/LoadBalancer service an address, as the allocator does."""
        spec = obj["spec"]
        if spec.get("type") == "ExternalName":
            return
        if not spec.get("clusterIP"):
            taken = {s["spec"].get("clusterIP") for s in self._objects("", "services").values()}
            while True:
                addr = str(ipaddress.ip_address(self._next_service_ip))
                self._next_service_ip += 1
                if addr not in taken:
                    break
            spec["clusterIP"] = addr
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")

    def _register_crd(self, crd: Obj) -> None:
        """Serve a CRD's resources, and report it Established as the real controller would."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        expected = f"{names.get('plural')}.{spec.get('group')}"
        if crd["metadata"].get("name") != expected:
            raise ApiError.invalid("CustomResourceDefinition", crd["metadata"].get("name", ""),
                                   f'metadata.name: Invalid value: must be spec.names.plural+"."'
                                   f'+spec.group ({expected})')
        for rdef in defs_from_crd(crd):
            self.registry.add(rdef)
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now_rfc3339()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted",
                 "lastTransitionTime": now_rfc3339()},
            ],
        }

    @staticmethod
    def _conform(rdef: ResourceDef, obj: Obj) -> Obj:
        """Prune/default/validate a custom resource against its CRD schema (422 if invalid)."""
        if rdef.schema is None:
            return obj
        out, errors = apply_schema(obj, rdef.schema)
        if errors:
            raise ApiError.invalid(rdef.kind, obj["metadata"].get("name", ""), errors,
                                   rdef.group)
        return out

    def _prepare_update(self, rdef: ResourceDef, old: Obj, cand: Obj,
                        subresource: str | None) -> Obj:
        """Build the next version from a candidate, honouring the subresource split."""
        new = self._next_version(rdef, old, cand, subresource)
        if not rdef.custom and rdef.kind in kinds.BUILTIN_KINDS:
            kinds.apply_defaults(rdef.kind, new, self.workload_gates)
            kinds.prepare_update(rdef.kind, old, new, now_rfc3339())
            errors = kinds.validate(rdef.kind, new)
            if subresource is None:
                errors += kinds.validate_update(rdef.kind, old, new)
            self._check(rdef, new, errors)
            if rdef.kind == "PriorityClass":
                self._admit_priority_class(new)
        new = self._conform(rdef, new)
        if rdef.tracks_generation and _strip_for_compare(new) != _strip_for_compare(old):
            new["metadata"] = {**new["metadata"],
                               "generation": int(old["metadata"].get("generation", 1)) + 1}
        return new

    def _next_version(self, rdef: ResourceDef, old: Obj, cand: Obj,
                      subresource: str | None) -> Obj:
        if not rdef.custom and rdef.group == "" and rdef.plural in ("pods", "nodes"):
            cand = dict(cand)
            if rdef.plural == "pods":
                self.features.drop_pod_fields(cand)
            else:
                self.features.drop_node_fields(cand)
                self._check(rdef, cand, _validate_node(cand))
        if subresource == "resize":  # pods/resize: container (and pod-level) resources only
            new = pods.resize_candidate(old, cand, self.features)
            self._check(rdef, new, pods.validate_resize(old, new, self.features)
                        + pods.validate_pod(new, self.features))
            return new
        if subresource == "status":
            new = dict(old)
            if "status" in cand:
                new["status"] = cand["status"]
            else:
                new.pop("status", None)
            if rdef.group == "resource.k8s.io" and rdef.plural == "resourceclaims":
                dra.drop_claim_status_fields(new, old, self.features.on)
                self._check(rdef, new, dra.validate_claim_status_update(new, old))
            if not rdef.custom:  # built-in status strategies let labels/annotations through
                cmeta = cand.get("metadata") or {}
                meta = dict(old["metadata"])
                for field in ("labels", "annotations"):
                    if field in cmeta:
                        meta[field] = cmeta[field]
                new["metadata"] = meta
            return new
        new = dict(cand)
        if rdef.group == "resource.k8s.io":
            self._dra_fields(rdef, new, old)
        if subresource is None and rdef.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        meta = dict(new.get("metadata") or {})
        ometa = old["metadata"]
        for field in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "namespace", "name", "generation"):
            if field in ometa:
                meta[field] = ometa[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = ometa["resourceVersion"]
        new["metadata"] = meta
        new["apiVersion"] = old["apiVersion"]
        new["kind"] = old["kind"]
        if ometa.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or ()) - set(ometa.get("finalizers") or ())
            if added:
                raise ApiError.invalid(rdef.kind, ometa["name"],
                                       "metadata.finalizers: Forbidden: no new finalizers can "
                                       "be added if the object is being deleted")
        if subresource is None and rdef.group == "" and rdef.plural == "pods":
            ospec, nspec = old.get("spec") or {}, new.get("spec")
            if isinstance(nspec, dict):  # admission keeps what it resolved on create
                missing = {k: ospec[k] for k in ("priority", "preemptionPolicy")
                           if k in ospec and k not in nspec}
                if missing:
                    new["spec"] = {**nspec, **missing}
            self._check_pod_spec_update(rdef, old, new)
        return new

    def _dra_fields(self, rdef: ResourceDef, obj: Obj, old: Obj | None) -> None:
        """The DRA fields a server whose gates are off drops (``kubeemu.dra``), in place."""
        on = self.features.on
        if rdef.plural == "resourceslices":
            dra.drop_slice_fields(obj, old, on)
        elif rdef.plural == "resourceclaims" and isinstance(obj.get("spec"), dict):
            obj["spec"] = dra.drop_claim_spec_fields(obj["spec"], (old or {}).get("spec"), on)
        elif rdef.plural == "resourceclaimtemplates" and isinstance((obj.get("spec") or {}).get("spec"), dict):
            old_spec = ((old or {}).get("spec") or {}).get("spec")
            obj["spec"] = {**obj["spec"], "spec": dra.drop_claim_spec_fields(obj["spec"]["spec"], old_spec, on)}

    def _check_pod_spec_update(self, rdef: ResourceDef, old: Obj, new: Obj) -> None:
        """Pod specs are immutable but for a few fields, so nodeName can only come via binding;
        scheduling gates may only be removed; a gated pod's node selection may still change."""
        features = self.features
        errors: list[str] = []
        nspec = new.get("spec") or {}
        if "PodSchedulingReadiness" in features:
            errors += pods.validate_gate_update(old, new)
            nspec, more = pods.gated_mutable(old, new)
            errors += more
        errors += pods.validate_pod(new, features)
        self._check(rdef, new, errors)

        def masked(spec: Obj) -> Obj:
            out = {k: v for k, v in spec.items() if k not in MUTABLE_POD_SPEC}
            for field in ("containers", "initContainers"):
                if field in out:
                    out[field] = [{k: v for k, v in c.items() if k != "image"}
                                  for c in out[field]]
            return out
        if masked(nspec) != masked(old.get("spec") or {}):
            name = old["metadata"]["name"]
            raise ApiError.invalid("Pod", name, "spec: Forbidden: pod updates may not change "
                                   "fields other than `spec.containers[*].image`, "
                                   "`spec.initContainers[*].image`, "
                                   "`spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                                   "additions to existing tolerations), "
                                   "`spec.terminationGracePeriodSeconds`")

    def _write(self, rdef: ResourceDef, old: Obj, new: Obj) -> Obj:
        """Store the next version (no-ops keep the old one), or finish a finalized deletion."""
        if new == old:
            return _view(rdef, old)
        bucket = self.bucket(rdef)
        meta = new["metadata"] = dict(new["metadata"])  # never touch the old snapshot's dict
        key = (meta.get("namespace", ""), meta["name"])
        meta["resourceVersion"] = self._next_rv()
        if (meta.get("deletionTimestamp") and not meta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds")):  # a graceful one waits
            bucket.pop(key)
            self._after_delete(rdef, new)
            self._commit(bucket, "DELETED", new, old)
        else:
            bucket.put(key, new)
            if rdef.group == "apiextensions.k8s.io" and rdef.plural == "customresourcedefinitions":
                for crd_def in defs_from_crd(new):
                    self.registry.add(crd_def)
            self._commit(bucket, "MODIFIED", new, old)
        return _view(rdef, new)

    def replace(self, rdef: ResourceDef, namespace: str | None, name: str, body: Any,
                subresource: str | None = None) -> Obj:
        """PUT: optimistic concurrency when the body carries a resourceVersion."""
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        old = self._existing(rdef, namespace, name)
        if rdef.from_view:
            body = rdef.from_view(body)
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not "
                                       f"match the name on the URL ({name})")
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise ApiError.stale(rdef.plural, name, rdef.group)
        return self._write(rdef, old, self._prepare_update(rdef, old, body, subresource))

    def patch(self, rdef: ResourceDef, namespace: str | None, name: str, patch: Any,
              content_type: str, subresource: str | None = None) -> Obj:
        """PATCH in any of the three flavours; a resourceVersion in the result is a precondition."""
        old = self._existing(rdef, namespace, name)
        patched = apply_patch(_view(rdef, old), patch, content_type, rdef.custom, rdef.kind)
        if not isinstance(patched, dict):
            raise ApiError.invalid(rdef.kind, name, "the patched object is not an object")
        if rdef.from_view:
            patched = rdef.from_view(patched)
        rv = (patched.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise ApiError.stale(rdef.plural, name, rdef.group)
        return self._write(rdef, old, self._prepare_update(rdef, old, patched, subresource))

    def delete(self, rdef: ResourceDef, namespace: str | None, name: str,
               preconditions: dict[str, Any] | None = None,
               grace_period_seconds: int | None = None) -> Obj:
        """DELETE: immediate, or a deletionTimestamp while finalizers remain; with
        ``graceful_pod_deletion``, a bound pod gets a grace period (see :meth:`_pod_grace`)."""
        old = self._existing(rdef, namespace, name)
        ometa = old["metadata"]
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != ometa.get("uid"):
            raise ApiError.conflict(rdef.plural, name, f"Precondition failed: UID in "
                                    f"precondition: {pre['uid']}, UID in object meta: "
                                    f"{ometa.get('uid')}", rdef.group)
        if pre.get("resourceVersion") and pre["resourceVersion"] != ometa["resourceVersion"]:
            raise ApiError.conflict(rdef.plural, name, f"Precondition failed: ResourceVersion "
                                    f"in precondition: {pre['resourceVersion']}, ResourceVersion "
                                    f"in object meta: {ometa['resourceVersion']}", rdef.group)
        if (rdef.group == "scheduling.k8s.io" and rdef.plural == "priorityclasses"
                and name in kinds.SYSTEM_PRIORITY_CLASSES):
            raise ApiError.forbidden(rdef.plural, name, "this is a system priority class and "
                                     "cannot be deleted", rdef.group)
        grace = 0
        if self.graceful_pod_deletion and rdef.group == "" and rdef.plural == "pods":
            grace = self._pod_grace(old, grace_period_seconds)
        return self._delete(rdef, old, grace)

    @staticmethod
    def _pod_grace(pod: Obj, requested: int | None) -> int:
        """The pod strategy's grace period: 0 for unbound or terminated pods, else the request
        or ``terminationGracePeriodSeconds`` (negative means 1)."""
        spec = pod.get("spec") or {}
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
        grace = int(requested if requested is not None
                    else spec.get("terminationGracePeriodSeconds", 30))
        return 1 if grace < 0 else grace

    def _delete(self, rdef: ResourceDef, old: Obj, grace: int) -> Obj:
        """Remove now, or mark (a grace period, or finalizers pending); a repeated DELETE may only
        shorten a pending grace period, as in the registry's ``BeforeDelete``."""
        ometa = old["metadata"]
        key = (ometa.get("namespace", ""), ometa["name"])
        bucket = self.bucket(rdef)
        marked_at = ometa.get("deletionTimestamp")
        current = int(ometa.get("deletionGracePeriodSeconds") or 0)
        if marked_at and (current == 0 or grace >= current):
            return _view(rdef, old)  # already being deleted: nothing to do
        new = dict(old)
        meta = new["metadata"] = dict(ometa)
        if marked_at:  # shorten: the deadline moves back by the difference
            meta["deletionTimestamp"] = now_rfc3339(parse_rfc3339(marked_at) - current + grace)
        else:
            meta["deletionTimestamp"] = now_rfc3339(time.time() + grace)
            if "generation" in meta:
                meta["generation"] = int(meta["generation"]) + 1
        meta["deletionGracePeriodSeconds"] = grace
        meta["resourceVersion"] = self._next_rv()
        if grace > 0 or ometa.get("finalizers"):
            bucket.put(key, new)
            self._commit(bucket, "MODIFIED", new, old)
            return _view(rdef, new)
        if not marked_at:  # a plain delete: the object leaves as it was
            meta.pop("deletionTimestamp")
            meta.pop("deletionGracePeriodSeconds")
            if "generation" in meta:
                meta["generation"] = ometa["generation"]
        bucket.pop(key)
        self._after_delete(rdef, new)
        self._commit(bucket, "DELETED", new, old)
        return _view(rdef, new)

    def finish_pod_deletion(self, namespace: str, name: str) -> Obj | None:
        """What the kubelet does once a terminating pod's containers have stopped: delete it
        with grace 0 (it stays while finalizers remain). None if it does not exist."""
        rdef = self.registry.get("", "v1", "pods")
        assert rdef is not None
        old = self.bucket(rdef).objects.get((namespace, name))
        return None if old is None else self._delete(rdef, old, 0)

    def _after_delete(self, rdef: ResourceDef, obj: Obj) -> None:
        if rdef.group == "apiextensions.k8s.io" and rdef.plural == "customresourcedefinitions":
            spec = obj.get("spec") or {}
            self.registry.remove(spec.get("group", ""), (spec.get("names") or {}).get("plural"))

    def delete_collection(self, rdef: ResourceDef, namespace: str | None,
                          labels: LabelSelector | None = None,
                          fields: FieldSelector | None = None,
                          grace_period_seconds: int | None = None) -> list[Obj]:
        """DELETE on a collection: each matching object as by a single DELETE."""
        items, *_ = self.list(rdef, namespace, labels, fields)
        out = []
        for obj in items:
            meta = obj["metadata"]
            out.append(self.delete(rdef, meta.get("namespace"), meta["name"],
                                   grace_period_seconds=grace_period_seconds))
        return out

    # --- binding -----------------------------------------------------------------------------

    def note_bind_attempt(self, namespace: str, name: str) -> None:
        """Count a binding request for a pod, whatever its outcome (faults included)."""
        self.bind_attempts[f"{namespace}/{name}"] += 1

    def bind(self, namespace: str, name: str, node: str, *,
             annotations: dict[str, str] | None = None, uid: str | None = None) -> Obj:
        """Assign a pod to a node as the pods/binding subresource does; 409 if already bound."""
        rdef = self.registry.get("", "v1", "pods")
        assert rdef is not None
        if not node:
            raise ApiError.invalid("Binding", name, "target.name: Required value")
        bucket = self.bucket(rdef)
        old = bucket.objects.get((namespace, name))
        if old is None:
            raise ApiError.not_found("pods", name)
        ometa = old["metadata"]
        if uid and uid != ometa.get("uid"):
            raise ApiError.conflict("pods/binding", name, f"Precondition failed: UID in "
                                    f"precondition: {uid}, UID in object meta: {ometa.get('uid')}")
        if ometa.get("deletionTimestamp"):
            raise ApiError.conflict("pods/binding", name,
                                    f"pod {name} is being deleted, cannot be assigned to a host")
        ospec = old.get("spec") or {}
        if ospec.get("nodeName"):
            raise ApiError.conflict("pods/binding", name,
                                    f'pod {name} is already assigned to node '
                                    f'"{ospec["nodeName"]}"')
        if ospec.get("schedulingGates"):  # "Reject binding to a scheduling un-ready Pod."
            raise ApiError.conflict("pods/binding", name,
                                    f"pod {name} has non-empty .spec.schedulingGates")
        new = dict(old)
        new["spec"] = {**ospec, "nodeName": node}
        status = dict(old.get("status") or {})
        if "ClearingNominatedNodeNameAfterBinding" in self.features:
            status.pop("nominatedNodeName", None)
        cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339()}
        conditions = list(status.get("conditions") or [])
        for idx, existing in enumerate(conditions):
            if existing.get("type") == "PodScheduled":
                conditions[idx] = cond
                break
        else:
            conditions.append(cond)
        status["conditions"] = conditions
        new["status"] = status
        meta = new["metadata"] = dict(ometa)
        if annotations:
            meta["annotations"] = {**(ometa.get("annotations") or {}), **annotations}
        meta["resourceVersion"] = self._next_rv()
        bucket.put((namespace, name), new)
        self.bindings.append(BindingRecord(namespace, name, node, time.time(),
                                           meta["resourceVersion"], meta["uid"]))
        self._commit(bucket, "MODIFIED", new, old)
        return new

    # --- watching ----------------------------------------------------------------------------

    def watch(
        self,
        rdef: ResourceDef,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        since: str | None = None,
        send_initial: bool = False,
        bookmarks: bool = False,
    ) -> Watcher:
        """Open a watch: synthetic ADDED for the current state, or a replay after ``since``.

        Registration and replay happen without yielding to the loop, so no write can slip
        between the snapshot and the live stream. Raises 410 if ``since`` was compacted.
        """
        bucket = self.bucket(rdef)
        watcher = Watcher(rdef, namespace if rdef.namespaced and namespace else None,
                          labels or LabelSelector(None), fields or FieldSelector(None))
        if send_initial or since in (None, "", "0"):
            for key in bucket.sorted_keys():
                obj = bucket.objects[key]
                if watcher.matches(obj):
                    watcher.put("ADDED", obj, None)
            if send_initial and bookmarks:
                mark = {"kind": rdef.kind, "apiVersion": rdef.api_version, "metadata": {
                    "resourceVersion": str(self.rv),
                    "annotations": {INITIAL_EVENTS_END: "true"}}}
                watcher.put("BOOKMARK", mark, None)
        else:
            try:
                after = int(since)
            except ValueError:
                raise ApiError.bad_request(f"invalid resource version: {since!r}") from None
            if after < bucket.compacted_rv:
                raise ApiError.expired(
                    f"too old resource version: {after} ({bucket.compacted_rv + 1})")
            for ev in bucket.history:
                if ev.rv > after:
                    watcher.offer(ev)
        bucket.watchers.add(watcher)
        return watcher

    def unwatch(self, rdef: ResourceDef, watcher: Watcher) -> None:
        """Forget a watcher (its stream ended)."""
        self.bucket(rdef).watchers.discard(watcher)

    def bookmark(self, rdef: ResourceDef) -> Obj:
        """A BOOKMARK object at the current resourceVersion."""
        return {"kind": rdef.kind, "apiVersion": rdef.api_version,
                "metadata": {"resourceVersion": str(self.rv)}}

    def drop_watches(self, abort: bool = False) -> int:
        """End every open watch stream (cleanly, or by resetting the connection)."""
        count = 0
        for bucket in self.buckets.values():
            for watcher in bucket.watchers:
                watcher.queue.put_nowait(ABORT if abort else STOP)
                count += 1
        return count

    def compact(self) -> None:
        """Forget all history, so resuming from any earlier resourceVersion gives 410."""
        for bucket in self.buckets.values():
            bucket.history.clear()
            bucket.compacted_rv = self.rv
