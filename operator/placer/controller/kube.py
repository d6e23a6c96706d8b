"""The one place that talks to the API server (Kopf's watches aside).

kubernetes_asyncio reads the kubeconfig or in-cluster credentials (exec plugins, token refresh and
all; `placer.controller.kubeconfig`); the calls themselves go over one plain aiohttp session set up
from that configuration (TLS, pool, proxy, auth header), through `KubeClient.request`: raw JSON
bodies in and out, no model (de)serialization, since a bind returns a `Status` the generated
client cannot parse and the hot path (binds, events) must stay cheap. Transient failures (429
honouring `Retry-After`, 500/502/503/504, timeouts, connection errors) are retried with exponential
backoff and full jitter. Nothing here logs headers or bodies: tokens never reach a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client

from placer.controller.kubeconfig import connection_info, load_configuration, open_session
from placer.engine.framework import JSON_PATCH as JSON_PATCH_TYPE
from placer.engine.framework import MERGE_PATCH as MERGE_PATCH_TYPE
from placer.engine.framework import STRATEGIC_MERGE_PATCH as STRATEGIC_PATCH_TYPE
from placer.engine.framework import ObjectRef, Write

__all__ = [
    "JSON",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "BindOutcome",
    "BindResult",
    "KubeClient",
    "Reply",
    "connection_info",
    "load_configuration",
]

logger = logging.getLogger("placer.kube")

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
CONTENT_TYPES = {
    MERGE_PATCH_TYPE: MERGE_PATCH, JSON_PATCH_TYPE: JSON_PATCH, STRATEGIC_PATCH_TYPE: STRATEGIC_MERGE_PATCH,
}
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
LIST_PAGE = 500
MAX_RETRY_AFTER = 60.0  # honour the server's Retry-After, within reason


class ApiError(Exception):
    """A call that failed for good; `status` is 0 when no HTTP answer came at all."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    data: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.data) if self.data else None

    def message(self) -> str:
        """The `message` of a `Status` body, else the start of the body."""
        try:
            body = self.json()
        except ValueError:
            body = None
        if isinstance(body, Mapping) and isinstance(body.get("message"), str):
            return body["message"]
        return self.data[:200].decode("utf-8", "replace")


class BindResult(enum.Enum):
    BOUND = "bound"
    CONFLICT = "conflict"  # already bound (by someone else) or being deleted: drop from the queue
    GONE = "gone"  # the pod no longer exists: drop from the queue
    FAILED = "failed"  # anything else: requeue with backoff


@dataclass(frozen=True, slots=True)
class BindOutcome:
    result: BindResult
    message: str = ""
    answered: bool = True  # False: the last attempt got no HTTP answer at all (server unreachable)


class KubeClient:
    """Raw-JSON calls with retries; `last_answer` (monotonic) says when the server last answered."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        *,
        pool_size: int = 128,
        retries: int = 5,
        timeout: float = 30.0,
        max_backoff: float = 5.0,
        base_backoff: float = 0.05,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.configuration = configuration
        self._session = open_session(configuration, pool_size)
        self._base = configuration.host.rstrip("/")
        self._proxy = configuration.proxy or None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._authorization: str | None = None  # cached unless the configuration refreshes it
        self.retries = retries
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.base_backoff = base_backoff
        self._sleep = sleep
        self.last_answer: float | None = None
        self.last_failure: str | None = None

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, *, pool_size: int = 128, **kwargs: Any) -> KubeClient:
        return cls(await load_configuration(kubeconfig), pool_size=pool_size, **kwargs)

    async def close(self) -> None:
        await self._session.close()

    async def _auth_header(self) -> str | None:
        """The Authorization header: a bearer token (refreshed by the configuration's hook, e.g. an
        exec plugin's or a rotated service-account token) or basic auth."""
        configuration = self.configuration
        if self._authorization is not None and configuration.refresh_api_key_hook is None:
            return self._authorization
        header = await configuration.get_api_key_with_prefix("BearerToken")
        if not header and configuration.username:
            header = configuration.get_basic_auth_token()
        self._authorization = header or ""
        return header or None

    # ----------------------------------------------------------------- the one request path

    def _backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, base * 2^attempt], capped."""
        return random.uniform(0, min(self.max_backoff, self.base_backoff * 2**attempt))

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retries: int | None = None,
    ) -> Reply:
        """Send one call, retrying transient failures; any final HTTP answer is returned as a Reply."""
        retries = self.retries if retries is None else retries
        headers = {"Content-Type": content_type, "Accept": JSON}
        data = None if body is None else json.dumps(body)
        url = self._base + path
        attempt = 0
        while True:
            delay: float
            try:
                authorization = await self._auth_header()
                if authorization:
                    headers["Authorization"] = authorization
                async with self._session.request(
                    method, url, params=query or None, data=data, headers=headers, proxy=self._proxy,
                    timeout=self._timeout,
                ) as response:
                    payload = await response.read()
                    status = response.status
                    retry_after = response.headers.get("Retry-After")
            except (aiohttp.ClientError, TimeoutError, OSError) as error:
                self.last_failure = f"{method} {path}: {type(error).__name__}"
                if attempt >= retries:
                    raise ApiError(0, f"{method} {path}: {type(error).__name__}: {error}") from None
                delay = self._backoff(attempt)
            else:
                if status < 500:
                    self.last_answer = time.monotonic()
                if status == 401:
                    self._authorization = None  # a rotated token: read it again next time
                if status not in RETRY_STATUSES or attempt >= retries:
                    return Reply(status, payload)
                self.last_failure = f"{method} {path}: HTTP {status}"
                delay = self._backoff(attempt)
                if status == 429 and retry_after:
                    with contextlib.suppress(ValueError):
                        delay = min(max(float(retry_after), delay), MAX_RETRY_AFTER)
            attempt += 1
            logger.debug("retrying %s %s in %.2fs (attempt %d)", method, path, delay, attempt)
            await self._sleep(delay)

    async def _call(self, method: str, path: str, ok: tuple[int, ...] = (200, 201), **kwargs: Any) -> Any:
        reply = await self.request(method, path, **kwargs)
        if reply.status not in ok:
            raise ApiError(reply.status, f"{method} {path}: {reply.message()}")
        return reply.json()

    # ----------------------------------------------------------------- pods

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        """POST pods/{name}/binding. The UID is a precondition: a re-created pod is not bound by mistake."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            reply = await self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body)
        except ApiError as error:  # only raised when no HTTP answer came
            return BindOutcome(BindResult.FAILED, error.message, answered=False)
        if reply.ok:
            return BindOutcome(BindResult.BOUND)
        message = reply.message()
        if reply.status == 409:
            # a retried bind whose first attempt did land answers "already assigned to node <ours>"
            if f'already assigned to node "{node}"' in message:
                return BindOutcome(BindResult.BOUND, message)
            return BindOutcome(BindResult.CONFLICT, message)
        if reply.status == 404:
            return BindOutcome(BindResult.GONE, message)
        return BindOutcome(BindResult.FAILED, f"HTTP {reply.status}: {message}")

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply:
        """Strategic merge on pods/status: conditions merge by `type`, others are left alone."""
        return await self.request(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
        )

    async def list_objects(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Any], str]:
        """Every item of a collection, paged; returns (items, the list's resourceVersion)."""
        items: list[Any] = []
        token = ""
        while True:
            params = [*query, ("limit", str(LIST_PAGE))]
            if token:
                params.append(("continue", token))
            reply = await self.request("GET", path, query=params)
            if reply.status == 410 and token:  # the continue token expired: start over
                items, token = [], ""
                continue
            if not reply.ok:
                raise ApiError(reply.status, f"GET {path}: {reply.message()}")
            body = reply.json() or {}
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    async def watch(
        self, path: str, query: Sequence[tuple[str, str]], *, connect_timeout: float, read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """One watch stream of a collection: its events, decoded, until the server ends it.

        A refusal (any non-200 answer, e.g. 410 for a resourceVersion too old) raises ApiError;
        so does a stream that stays silent longer than `read_timeout` (bookmarks keep it talking).
        """
        headers = {"Accept": JSON}
        authorization = await self._auth_header()
        if authorization:
            headers["Authorization"] = authorization
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        async with self._session.get(
            self._base + path, params=[*query, ("watch", "true")], headers=headers, proxy=self._proxy,
            timeout=timeout,
        ) as response:
            if response.status != 200:
                reply = Reply(response.status, await response.read())
                raise ApiError(reply.status, f"watch {path}: {reply.message()}")
            self.last_answer = time.monotonic()
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)

    # ----------------------------------------------------------------- any object (plugins' writes)

    async def get_object(self, ref: ObjectRef, *, retries: int | None = None) -> Reply:
        return await self.request("GET", ref.path(), retries=retries)

    async def write(self, write: Write) -> Reply:
        """A plugin's (or preemption's) `Write`: a PATCH of the object or its subresource, a
        DELETE, its preconditions in the body (`Write.body`), or a POST creating it."""
        if write.delete:
            return await self.request("DELETE", write.target.path(), body=write.body(), retries=write.retries)
        if write.create:
            return await self.request("POST", write.target.collection_path(), body=write.body(), retries=write.retries)
        return await self.request(
            "PATCH", write.target.path(write.subresource), body=write.body(),
            content_type=CONTENT_TYPES[write.patch_type], retries=write.retries,
        )

    # ----------------------------------------------------------------- events.k8s.io/v1

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> Reply:
        return await self.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=event)

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply:
        return await self.request(
            "PATCH", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}", body=patch,
            content_type=MERGE_PATCH,
        )

    # ----------------------------------------------------------------- SchedulerProfiles

    async def patch_profile_status(self, name: str, patch: Mapping[str, Any]) -> Reply:
        return await self.request(
            "PATCH", f"/apis/placer.dev/v1alpha1/schedulerprofiles/{name}/status", body=patch,
            content_type=MERGE_PATCH,
        )

    # ----------------------------------------------------------------- metrics.k8s.io

    async def list_node_metrics(self) -> list[Any] | None:
        """NodeMetrics items, or None when the cluster has no metrics API (404/503 from discovery)."""
        reply = await self.request("GET", "/apis/metrics.k8s.io/v1beta1/nodes", retries=1)
        if reply.status in (404, 503):
            return None
        if not reply.ok:
            raise ApiError(reply.status, f"GET NodeMetrics: {reply.message()}")
        body = reply.json() or {}
        return list(body.get("items") or [])

    # ----------------------------------------------------------------- coordination.k8s.io/v1

    def _lease_path(self, namespace: str, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return f"{base}/{name}" if name else base

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        reply = await self.request("GET", self._lease_path(namespace, name), retries=1)
        if reply.status == 404:
            return None
        if not reply.ok:
            raise ApiError(reply.status, f"GET lease: {reply.message()}")
        return reply.json()

    async def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """Raises ApiError(409) when someone created it first."""
        return await self._call("POST", self._lease_path(namespace), body=lease, retries=1)

    async def update_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """PUT with the resourceVersion we read: raises ApiError(409) when someone wrote in between."""
        return await self._call("PUT", self._lease_path(namespace, name), ok=(200,), body=lease, retries=1)

    # ----------------------------------------------------------------- liveness

    async def ping(self) -> bool:
        """GET /version: whether the server answers at all."""
        try:
            reply = await self.request("GET", "/version", retries=0)
        except ApiError:
            return False
        return reply.status < 500
