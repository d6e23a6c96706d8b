"""The HTTP face of the emulator: Kubernetes REST paths, watch streams, and ``/_emu`` controls."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from .capacity import audit_capacity
from .errors import ApiError
from .faults import FaultInjector, FaultRule
from .resources import Registry, ResourceDef
from .selectors import FieldSelector, LabelSelector
from .store import ABORT, STOP, Store, now_rfc3339
from .versions import NEWEST, version_info

logger = logging.getLogger("kubeemu")

JSON = "application/json"
_dumps = json.JSONEncoder(separators=(",", ":")).encode

SUCCESS_201: dict[str, Any] = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201,
}
_SUB_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "status": ("", ("get", "patch", "update")),
    "binding": ("Binding", ("create",)),
    "scale": ("Scale", ("get", "patch", "update")),
    "resize": ("", ("get", "patch", "update")),
}


@dataclasses.dataclass(slots=True)
class RequestRecord:
    """One request as the server saw it; ``status`` is 0 for a reset, None while streaming."""

    method: str
    path: str
    query: str
    status: int | None
    started: float
    duration: float | None = None
    fault: int | None = None

    @property
    def is_watch(self) -> bool:
        """Whether this was a watch request."""
        return any(v.lower() in ("true", "1") for v in parse_qs(self.query).get("watch", []))

    def to_json(self) -> dict[str, Any]:
        """For ``/_emu/requests``."""
        return dataclasses.asdict(self)


RECORD_KEY = web.RequestKey("kubeemu.record", RequestRecord)


def _json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None
                   ) -> web.Response:
    return web.Response(body=_dumps(body).encode(), status=status, content_type=JSON,
                        headers=headers)


def _error_response(err: ApiError) -> web.Response:
    return _json_response(err.body(), err.code, err.headers or None)


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


@dataclasses.dataclass(slots=True)
class Route:
    """A parsed resource URL."""

    rdef: ResourceDef
    namespace: str | None
    name: str | None
    sub: str | None


class ApiServer:
    """Request handling over a :class:`Store`; owned by :class:`~.emulator.KubeEmulator`."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        faults: FaultInjector,
        *,
        bookmark_interval: float = 30.0,
        watch_delay: float = 0.0,
        record_requests: bool = True,
        control: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None,
        minor: int = NEWEST,
    ) -> None:
        self.version_info = version_info(minor)  # what GET /version answers
        self.store = store
        self.registry = registry
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.watch_delay = watch_delay
        self.record_requests = record_requests
        self.requests: list[RequestRecord] = []
        self.resetting = False
        self.address = "127.0.0.1:0"
        self._control = control

    # --- application -------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """The aiohttp application with the fault/recording middleware and a catch-all route."""
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 2**20)
        app.router.add_route("*", "/_emu/{op:.*}", self._emu)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                          ) -> web.StreamResponse:
        path = request.path
        if path.startswith("/_emu/"):
            return await handler(request)
        if self.resetting:
            self._reset(request)
            return web.Response(status=503)
        method = request.method
        query = request.query_string
        record = RequestRecord(method, path, query, None, time.time())
        request[RECORD_KEY] = record
        if self.record_requests:
            self.requests.append(record)
        if method == "POST" and path.endswith("/binding"):
            parts = path.split("/")
            if len(parts) == 8 and parts[1:3] == ["api", "v1"] and parts[5] == "pods":
                self.store.note_bind_attempt(parts[4], parts[6])
        try:
            rule = self.faults.match(method, path, query)
            if rule is not None:
                record.fault = rule.id
                if rule.delay:
                    await asyncio.sleep(rule.delay)
                if rule.reset:
                    record.status = 0
                    self._reset(request)
                    return web.Response(status=503)
                if rule.status:
                    err = ApiError(rule.status, rule.message or f"injected fault #{rule.id}")
                    if rule.retry_after is not None:
                        err.headers["Retry-After"] = str(int(rule.retry_after))
                        err.details = {"retryAfterSeconds": int(rule.retry_after)}
                    response = _error_response(err)
                    record.status = response.status
                    return response
            try:
                response = await handler(request)
            except ApiError as err:
                response = _error_response(err)
            except web.HTTPException:
                raise
            except (ConnectionError, asyncio.CancelledError):
                record.status = record.status or 0  # a watch that had started keeps its 200
                raise
            except Exception as exc:
                logger.exception("kubeemu: internal error on %s %s", method, path)
                response = _error_response(ApiError(500, f"kubeemu internal error: {exc!r}"))
            record.status = response.status
            return response
        finally:
            record.duration = time.time() - record.started

    @staticmethod
    def _reset(request: web.Request) -> None:
        """Drop the connection without an answer, as a crashed or partitioned server would."""
        transport = request.transport
        if transport is not None:
            transport.abort()

    # --- routing -----------------------------------------------------------------------------

    def _parse(self, path: str) -> tuple[str, str, str | None, Route | None] | None:
        """Split a path into (group, version, discovery-kind, route); None if not an API path."""
        parts = [p for p in path.split("/") if p]
        if not parts:
            return None
        if parts[0] == "api":
            if len(parts) == 1:
                return ("", "", "api", None)
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return ("", "", "apis", None)
            if len(parts) == 2:
                return (parts[1], "", "group", None)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return (group, version, "resources", None)
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            cand = self.registry.get(group, version, rest[2])
            if cand is not None and cand.namespaced:
                namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        rdef = self.registry.get(group, version, rest[0])
        if rdef is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rdef.subresources:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return (group, version, None, Route(rdef, namespace, name, sub))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/version" or path == "/version/":
            return _json_response(self.version_info)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        parsed = self._parse(path)
        if parsed is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        group, version, discovery, route = parsed
        if discovery is not None:
            if request.method != "GET":
                raise ApiError(405, f"the server does not allow this method on the requested "
                                    f"resource: {request.method}", "MethodNotAllowed")
            return _json_response(self._discovery(discovery, group, version))
        assert route is not None
        return await self._resource(request, route)

    # --- discovery ---------------------------------------------------------------------------

    def _group_json(self, group: str, versions: list[str]) -> dict[str, Any]:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def _discovery(self, what: str, group: str, version: str) -> dict[str, Any]:
        if what == "api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}]}
        groups = self.registry.group_versions()
        if what == "apis":
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group_json(g, vs) for g, vs in groups.items()]}
        if what == "group":
            if group not in groups:
                raise ApiError(404, "the server could not find the requested resource")
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group_json(group,
                                                                                groups[group])}
        rdefs = self.registry.in_group_version(group, version)
        if not rdefs:
            raise ApiError(404, "the server could not find the requested resource")
        resources: list[dict[str, Any]] = []
        for rdef in rdefs:
            entry: dict[str, Any] = {
                "name": rdef.plural, "singularName": rdef.singular,
                "namespaced": rdef.namespaced, "kind": rdef.kind, "verbs": list(rdef.verbs),
            }
            if rdef.short_names:
                entry["shortNames"] = list(rdef.short_names)
            if rdef.categories:
                entry["categories"] = list(rdef.categories)
            resources.append(entry)
            for sub in rdef.subresources:
                kind, verbs = _SUB_KINDS[sub]
                sub_entry: dict[str, Any] = {
                    "name": f"{rdef.plural}/{sub}", "singularName": "",
                    "namespaced": rdef.namespaced, "kind": kind or rdef.kind,
                    "verbs": list(verbs),
                }
                if sub == "scale":
                    sub_entry.update(group="autoscaling", version="v1")
                resources.append(sub_entry)
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": rdefs[0].api_version, "resources": resources}

    # --- resources ---------------------------------------------------------------------------

    @staticmethod
    async def _body(request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError.bad_request(f"the body is not valid JSON: {exc}") from None

    @staticmethod
    def _require_verb(rdef: ResourceDef, verb: str) -> None:
        if verb not in rdef.verbs:
            raise ApiError(405, f"the server does not allow this method on the requested "
                                f"resource ({verb} {rdef.plural})", "MethodNotAllowed")

    async def _resource(self, request: web.Request, route: Route) -> web.StreamResponse:
        rdef, ns, name, sub = route.rdef, route.namespace, route.name, route.sub
        method = request.method
        q = request.query
        store = self.store
        if rdef.namespaced and name is not None and ns is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if method == "GET":
            if name is None:
                if _truthy(q.get("watch")):
                    self._require_verb(rdef, "watch")
                    return await self._watch(request, route)
                self._require_verb(rdef, "list")
                return self._list(route, q)
            self._require_verb(rdef, "get")
            return _json_response(store.get(rdef, ns, name))
        if method == "POST":
            if sub == "binding" and name is not None:
                return self._bind(ns or "", name, await self._body(request))
            if name is not None:
                raise ApiError(405, "the server does not allow this method on the requested "
                                    "resource", "MethodNotAllowed")
            if rdef.group == "" and rdef.plural == "bindings":
                body = await self._body(request) or {}
                pod = (body.get("metadata") or {}).get("name", "")
                store.note_bind_attempt(ns or "", pod)
                return self._bind(ns or "", pod, body)
            self._require_verb(rdef, "create")
            return _json_response(store.create(rdef, ns, await self._body(request)), 201)
        if method == "PUT" and name is not None:
            self._require_verb(rdef, "update")
            return _json_response(store.replace(rdef, ns, name, await self._body(request), sub))
        if method == "PATCH" and name is not None:
            self._require_verb(rdef, "patch")
            ctype = request.headers.get("Content-Type", "")
            return _json_response(store.patch(rdef, ns, name, await self._body(request),
                                              ctype, sub))
        if method == "DELETE":
            body = await self._body(request) or {}
            grace = self._grace_period(body, q)
            if name is None:
                self._require_verb(rdef, "deletecollection")
                items = store.delete_collection(
                    rdef, ns, LabelSelector(q.get("labelSelector")),
                    FieldSelector(q.get("fieldSelector"), rdef.field_selectors), grace)
                return _json_response({"kind": f"{rdef.kind}List",
                                       "apiVersion": rdef.api_version,
                                       "metadata": {"resourceVersion": str(store.rv)},
                                       "items": items})
            self._require_verb(rdef, "delete")
            return _json_response(store.delete(rdef, ns, name, body.get("preconditions"), grace))
        raise ApiError(405, "the server does not allow this method on the requested resource",
                       "MethodNotAllowed")

    @staticmethod
    def _grace_period(body: Any, q: Any) -> int | None:
        """``gracePeriodSeconds`` of DeleteOptions, from the body or the query (the body wins)."""
        raw = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
        if raw is None:
            raw = q.get("gracePeriodSeconds")
        if raw is None or raw == "":
            return None
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ApiError.bad_request(f"invalid gracePeriodSeconds: {raw!r}") from None

    def _list(self, route: Route, q: Any) -> web.Response:
        rdef = route.rdef
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise ApiError.bad_request(f"invalid limit: {q.get('limit')!r}") from None
        items, rv, token, remaining = self.store.list(
            rdef, route.namespace,
            LabelSelector(q.get("labelSelector")),
            FieldSelector(q.get("fieldSelector"), rdef.field_selectors),
            limit, q.get("continue") or None)
        meta: dict[str, Any] = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        return _json_response({"kind": f"{rdef.kind}List", "apiVersion": rdef.api_version,
                               "metadata": meta, "items": items})

    def _bind(self, namespace: str, name: str, body: Any) -> web.Response:
        if not isinstance(body, dict):
            raise ApiError.bad_request("a Binding object is required")
        target = body.get("target") or {}
        if target.get("kind") not in (None, "", "Node"):
            raise ApiError.invalid("Binding", name, "target.kind: Invalid value: must be "
                                                    "empty or 'Node'")
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, "", name):
            raise ApiError.bad_request("the name of the Binding does not match the pod")
        self.store.bind(namespace, name, target.get("name") or "",
                        annotations=meta.get("annotations"), uid=meta.get("uid"))
        return _json_response(SUCCESS_201, 201)

    async def _watch(self, request: web.Request, route: Route) -> web.StreamResponse:
        """Stream events as newline-delimited JSON until timeout, drop, or disconnect."""
        rdef = route.rdef
        q = request.query
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        timeout: float | None = None
        if q.get("timeoutSeconds"):
            try:
                timeout = float(q["timeoutSeconds"])
            except ValueError:
                raise ApiError.bad_request("invalid timeoutSeconds") from None
        labels = LabelSelector(q.get("labelSelector"))
        fields = FieldSelector(q.get("fieldSelector"), rdef.field_selectors)
        response = web.StreamResponse(status=200)
        response.content_type = JSON
        try:
            watcher = self.store.watch(rdef, route.namespace, labels, fields,
                                       q.get("resourceVersion"),
                                       _truthy(q.get("sendInitialEvents")), bookmarks)
        except ApiError as err:
            if err.code != 410:
                raise
            await response.prepare(request)
            await response.write(_dumps({"type": "ERROR", "object": err.body()}).encode() + b"\n")
            await response.write_eof()
            return response
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        queue = watcher.queue
        try:
            await response.prepare(request)
            record = request.get(RECORD_KEY)
            if record is not None:
                record.status = 200
            while True:
                wait: float | None = None
                if deadline is not None:
                    wait = deadline - loop.time()
                    if wait <= 0:
                        break
                if bookmarks:
                    wait = self.bookmark_interval if wait is None else min(
                        wait, self.bookmark_interval)
                try:
                    if wait is None or not queue.empty():
                        item = await queue.get()
                    else:
                        async with asyncio.timeout(wait):
                            item = await queue.get()
                except TimeoutError:
                    if deadline is not None and loop.time() >= deadline:
                        break
                    await response.write(watcher.line("BOOKMARK", self.store.bookmark(rdef),
                                                      None))
                    continue
                chunks: list[bytes] = []
                end: object | None = None
                while True:
                    if item is STOP or item is ABORT:
                        end = item
                        break
                    etype, obj, ev, stamp = item  # type: ignore[misc]
                    if self.watch_delay > 0:
                        lag = stamp + self.watch_delay - loop.time()
                        if lag > 0:
                            if chunks:
                                await response.write(b"".join(chunks))
                                chunks = []
                            await asyncio.sleep(lag)
                    chunks.append(watcher.line(etype, obj, ev))
                    if len(chunks) >= 256 or queue.empty():
                        break
                    item = queue.get_nowait()
                if chunks:
                    await response.write(b"".join(chunks))
                if end is ABORT:
                    self._reset(request)
                    return response
                if end is STOP:
                    break
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away; nothing to tell it
        finally:
            self.store.unwatch(rdef, watcher)
        return response

    # --- /_emu controls ----------------------------------------------------------------------

    async def _emu(self, request: web.Request) -> web.StreamResponse:
        """Test controls for out-of-process use; never subject to faults or recording."""
        op = request.match_info["op"].strip("/")
        method = request.method
        body = await self._body(request) if method in ("POST", "PUT") else None
        body = body or {}
        store = self.store
        try:
            if op == "health":
                return _json_response({"ok": True, "resourceVersion": str(store.rv)})
            if op == "faults" and method == "POST":
                rule = self.faults.add(FaultRule.from_json(body))
                return _json_response(rule.to_json(), 201)
            if op == "faults" and method == "GET":
                return _json_response([r.to_json() for r in self.faults.rules])
            if op == "faults" and method == "DELETE":
                self.faults.clear()
                return _json_response({"ok": True})
            if op == "watches/drop" and method == "POST":
                count = store.drop_watches(abort=bool(body.get("abort"))
                                           or _truthy(request.query.get("abort")))
                return _json_response({"dropped": count})
            if op == "watch-delay" and method == "POST":
                self.watch_delay = float(body.get("seconds", 0.0))
                return _json_response({"seconds": self.watch_delay})
            if op == "compact" and method == "POST":
                store.compact()
                return _json_response({"compactedTo": str(store.rv)})
            if op == "finish-deletion" and method == "POST":
                gone = store.finish_pod_deletion(str(body["namespace"]), str(body["name"]))
                return _json_response({"found": gone is not None})
            if op == "bindings":
                return _json_response([dataclasses.asdict(b) for b in store.bindings])
            if op == "bind-attempts":
                return _json_response(dict(store.bind_attempts))
            if op == "requests" and method == "DELETE":
                self.requests.clear()
                return _json_response({"ok": True})
            if op == "requests":
                return _json_response([r.to_json() for r in self.requests])
            if op == "capacity":
                nodes = self.registry.get("", "v1", "nodes")
                pods = self.registry.get("", "v1", "pods")
                assert nodes is not None and pods is not None
                violations = audit_capacity(store.iter_objects(nodes), store.iter_objects(pods))
                return _json_response([
                    {"node": v.node, "resource": v.resource, "requested": str(v.requested),
                     "allocatable": str(v.allocatable), "pods": list(v.pods)}
                    for v in violations])
            if op == "stats":
                return _json_response({
                    "resourceVersion": str(store.rv),
                    "objects": {b.name: len(b.objects) for b in store.buckets.values()},
                    "watchers": sum(len(b.watchers) for b in store.buckets.values()),
                    "requests": len(self.requests),
                    "bindings": len(store.bindings),
                    "time": now_rfc3339(),
                })
            if op in ("unreachable", "reachable") and method == "POST" and self._control:
                result = await self._control(op, body)
                return _json_response(result or {"ok": True})
        except ApiError as err:
            return _error_response(err)
        except (ValueError, TypeError, KeyError) as exc:
            return _error_response(ApiError.bad_request(f"bad control request: {exc!r}"))
        return _error_response(ApiError(404, f"unknown control: {method} /_emu/{op}"))
