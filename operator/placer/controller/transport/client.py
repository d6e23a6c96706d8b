"""The one place that talks to the API server: `KubeClient`.

`placer.controller.transport.kubeconfig` reads the kubeconfig or in-cluster credentials (token
rotation, exec plugins and all). Every call Placer makes (binds, events, pods/status, leases,
profile status, plugins' writes, the informers' LISTs and watches) goes through `KubeClient.request`
or `KubeClient.watch` over `placer.controller.transport.http`: a lean HTTP/1.1 client with a
keep-alive pool, set up from that same configuration: its TLS (CA, client certificate,
insecure-skip-tls-verify, `tls-server-name`), its proxy (`proxy-url`, else `HTTPS_PROXY`/`NO_PROXY`
from the environment; a CONNECT tunnel for https) and its Authorization header (read again when the
configuration refreshes tokens, and after a 401, which also has an exec plugin's credential
fetched again; a client certificate the plugin renews goes to the transport's new connections).
Not the generated client: a bind returns a `Status` it cannot parse, and its per-call machinery is
not needed; not aiohttp: measured, see `placer.controller.transport.http`.

Bodies are raw JSON in and out, no model (de)serialization, encoded and decoded by orjson (the
stdlib's `json` only for what orjson refuses: non-string keys, integers beyond 64 bits to encode,
NaN or lone surrogates to decode). Failures are retried with exponential backoff and full jitter as
`placer.controller.transport.retry` says: reads after connection errors and timeouts, a write only
when it never left or its caller says it is safe to send again (`Replay`); 429 and 503 for every
call, 500/502/504 for replay-safe ones; `Retry-After` in whole seconds, capped; certificate
failures never. LISTs are paged by `placer.controller.transport.listing`. Nothing here logs headers
or bodies: tokens never reach a log.
"""

from __future__ import annotations

import asyncio
import enum
import json
import re
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from placer.controller.transport.http import HttpClient, tls_context
from placer.controller.transport.kubeconfig import Configuration, CredentialError, load_configuration
from placer.controller.transport.listing import LIST_PAGE, Pages, list_objects
from placer.controller.transport.proxy_env import proxy_for
from placer.controller.transport.retry import (
    ApiError,
    Attempts,
    Replay,
    certificate_error,
    certificate_failure,
    write_replay,
)
from placer.engine.writes import JSON_PATCH as JSON_PATCH_TYPE
from placer.engine.writes import MERGE_PATCH as MERGE_PATCH_TYPE
from placer.engine.writes import STRATEGIC_MERGE_PATCH as STRATEGIC_PATCH_TYPE
from placer.engine.writes import ObjectRef, Write

__all__ = [
    "JSON",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "BindOutcome",
    "BindResult",
    "KubeClient",
    "Pages",
    "Replay",
    "Reply",
    "load_configuration",
]

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
CONTENT_TYPES = {
    MERGE_PATCH_TYPE: MERGE_PATCH, JSON_PATCH_TYPE: JSON_PATCH, STRATEGIC_PATCH_TYPE: STRATEGIC_MERGE_PATCH,
}
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/._~:@!$&'()*+,;=%-]*")  # sent as it is; anything else is quoted


def loads(data: bytes | str) -> Any:
    """JSON from the API server: orjson, or the stdlib for what orjson refuses (NaN, lone surrogates).
    Integers beyond 64 bits come as floats, as the API server itself holds them."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(body: Any) -> bytes:
    """A request body: orjson, or the stdlib for what orjson refuses (non-str keys, big integers)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def request_target(path: str, query: Sequence[tuple[str, str]] | None = None) -> str:
    """The path (percent-encoded where needed) and query string, as the request line carries them."""
    if not _PLAIN_PATH.fullmatch(path):
        path = quote(path, safe="/._~:@!$&'()*+,;=%-")
    return f"{path}?{urlencode(query)}" if query else path


def configured_tls(configuration: Configuration) -> ssl.SSLContext | None:
    """The TLS the configuration asks for (CA, client certificate, verification); None for http."""
    if urlsplit(configuration.host).scheme != "https":
        return None
    return tls_context(
        ca_file=configuration.ssl_ca_cert, cert_file=configuration.cert_file, key_file=configuration.key_file,
        verify=bool(configuration.verify_ssl),
        strict=not getattr(configuration, "disable_strict_ssl_verification", False),
    )


def http_client(configuration: Configuration, pool_size: int) -> HttpClient:
    """The transport, from the configuration: server, TLS, SNI name and proxy."""
    context = configured_tls(configuration)
    return HttpClient(
        configuration.host, ssl_context=context, server_hostname=getattr(configuration, "tls_server_name", None),
        proxy=configuration.proxy or proxy_for(configuration.host),  # as client-go: proxy-url, else the env
        proxy_headers=getattr(configuration, "proxy_headers", None), limit=pool_size,
    )


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    data: bytes
    #: an earlier attempt of this call may have reached the server (no answer came, or a 500, 502
    #: or 504): a 409 may be that attempt's doing (only replay-safe calls are ever sent again)
    resent: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return loads(self.data) if self.data else None

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
        configuration: Configuration,
        *,
        pool_size: int = 128,
        retries: int = 5,
        timeout: float = 30.0,
        max_backoff: float = 5.0,
        base_backoff: float = 0.05,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.configuration = configuration
        self._http = http_client(configuration, pool_size)
        self._base = urlsplit(configuration.host).path.rstrip("/")  # a server URL may have a path prefix
        self._server = urlsplit(configuration.host).netloc.rpartition("@")[2]  # for messages
        self._authorization: str | None = None  # cached unless the configuration refreshes it
        # the client certificate the transport's TLS was made with (an exec plugin may renew it)
        self._client_certificate = (configuration.cert_file, configuration.key_file)
        self._auth_line = ""  # "Authorization: <_authorization>\r\n"
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
        await self._http.close()

    async def _auth_header(self) -> str | None:
        """The Authorization header: a bearer token (refreshed by the configuration's hook, e.g. an
        exec plugin's or a rotated service-account token) or basic auth. A client certificate the
        hook renewed goes to the transport: its new connections present it (as client-go, which
        also closes the connections made with the old one: here the idle ones, the busy ones once
        their reply has ended). ApiError when the hook cannot get credentials."""
        configuration = self.configuration
        if self._authorization is not None and configuration.refresh_api_key_hook is None:
            return self._authorization
        try:
            header = await configuration.get_api_key_with_prefix("BearerToken")
        except CredentialError as error:
            raise ApiError(0, str(error)) from None
        if (configuration.cert_file, configuration.key_file) != self._client_certificate:
            self._client_certificate = (configuration.cert_file, configuration.key_file)
            context = configured_tls(configuration)
            if context is not None:
                self._http.use_tls_context(context)
        if not header and configuration.username:
            header = configuration.get_basic_auth_token()
        header = header or ""
        if header != self._authorization:
            if "\r" in header or "\n" in header or not header.isascii():
                raise ApiError(0, "the configured credentials hold a line break or a non-ASCII character: not sent")
            self._auth_line = f"Authorization: {header}\r\n" if header else ""
        self._authorization = header
        return header or None

    def _headers(self, content_type: str | None) -> str:
        """The header lines of a request (Accept, Authorization, Content-Type), once `_auth_header` ran."""
        if content_type is None:
            return f"Accept: {JSON}\r\n{self._auth_line}"
        return f"Accept: {JSON}\r\n{self._auth_line}Content-Type: {content_type}\r\n"

    # ----------------------------------------------------------------- the one request path

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retries: int | None = None,
        replay: Replay | None = None,
    ) -> Reply:
        """Send one call, retrying what `placer.controller.transport.retry` allows; any final HTTP answer is
        returned as a Reply. `replay`: whether the call may go again once it may have reached the
        server (default: reads yes, writes no)."""
        attempts = Attempts(method, path, Replay.of(method, replay), self.retries if retries is None else retries,
                            self.base_backoff, self.max_backoff)
        data = None if body is None else dumps(body)
        target = self._base + request_target(path, query)
        http = self._http
        while True:
            delay: float | None
            try:
                if self._authorization is None or self.configuration.refresh_api_key_hook is not None:
                    await self._auth_header()
                serial = self.configuration.credential_serial  # which credentials this attempt carries
                headers = self._headers(None if data is None else content_type)
                response = await http.request(http.encode(method, target, headers, data), self.timeout)
            except (TimeoutError, OSError) as error:
                self.last_failure = f"{method} {path}: {type(error).__name__}"
                try:
                    delay = attempts.failed(error, self._server)
                except ApiError as final:
                    raise final from None
            else:
                status = response.status
                if status < 500:
                    self.last_answer = time.monotonic()
                if status == 401:
                    self._authorization = None  # a rotated token: read it again next time
                    self.configuration.credentials_rejected(serial)  # an exec plugin's: fetched again
                delay = attempts.answered(status, response.retry_after)
                if delay is None:
                    return Reply(status, response.body, attempts.resent)
                self.last_failure = f"{method} {path}: HTTP {status}"
            await self._sleep(delay)

    async def _call(self, method: str, path: str, ok: tuple[int, ...] = (200, 201), **kwargs: Any) -> Any:
        reply = await self.request(method, path, **kwargs)
        if reply.status not in ok:
            raise ApiError(reply.status, f"{method} {path}: {reply.message()}")
        return reply.json()

    # ----------------------------------------------------------------- pods

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        """POST pods/{name}/binding. The UID is a precondition: a re-created pod is not bound by mistake.
        Sent again after a connection error: the repeat's 409 says whether the first attempt bound it."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            reply = await self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body,
                                       replay=Replay.SAFE)
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
        """Strategic merge on pods/status: conditions merge by `type`, others are left alone (the
        same patch twice is the patch once: it may be sent again)."""
        return await self.request(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body=patch,
            content_type=STRATEGIC_MERGE_PATCH, replay=Replay.SAFE,
        )

    async def list_objects(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[list[Any], str]:
        """Every item of a collection, paged; returns (items, the list's resourceVersion)."""
        return await list_objects(self.request, path, query)

    def list_pages(self, path: str, query: Sequence[tuple[str, str]] = (), *, limit: int = LIST_PAGE) -> Pages:
        """A collection's LIST page by page (`Pages`), `limit` items a page; its first page is asked
        for at once."""
        return Pages(self.request, path, query, limit)

    async def watch(
        self, path: str, query: Sequence[tuple[str, str]], *, connect_timeout: float, read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """One watch stream of a collection: its events, decoded, until the server ends it.

        A refusal (any non-200 answer, e.g. 410 for a resourceVersion too old) raises ApiError;
        so does a stream that stays silent longer than `read_timeout` (bookmarks keep it talking).
        A connection error or timeout is raised as it is, for the informer to resume after its
        backoff; a certificate failure becomes an ApiError saying so (logged once).
        """
        http = self._http
        target = self._base + request_target(path, [*query, ("watch", "true")])
        await self._auth_header()
        serial = self.configuration.credential_serial
        data = http.encode("GET", target, self._headers(None), None)
        try:
            stream = await http.stream(data, connect_timeout=connect_timeout, read_timeout=read_timeout)
        except OSError as error:
            if certificate_failure(error) is None:
                raise
            raise certificate_error(self._server, "watch", path, error) from None
        try:
            if stream.status != 200:
                if stream.status == 401:
                    self._authorization = None
                    self.configuration.credentials_rejected(serial)
                reply = Reply(stream.status, await stream.read())
                raise ApiError(reply.status, f"watch {path}: {reply.message()}")
            self.last_answer = time.monotonic()
            while (lines := await stream.batch()) is not None:
                for line in lines:
                    if line and not line.isspace():
                        yield loads(line)
        finally:
            stream.close()

    # ----------------------------------------------------------------- any object (plugins' writes)

    async def get_object(self, ref: ObjectRef, *, retries: int | None = None) -> Reply:
        return await self.request("GET", ref.path(), retries=retries)

    async def write(self, write: Write) -> Reply:
        """A plugin's (or preemption's) `Write`: a PATCH of the object or its subresource, a
        DELETE, its preconditions in the body (`Write.body`), or a POST creating it; sent again
        after a connection error only when `write_replay` finds that safe."""
        replay = write_replay(write)
        if write.delete:
            return await self.request("DELETE", write.target.path(), body=write.body(), retries=write.retries,
                                      replay=replay)
        if write.create:
            return await self.request("POST", write.target.collection_path(), body=write.body(),
                                      retries=write.retries, replay=replay)
        return await self.request(
            "PATCH", write.target.path(write.subresource), body=write.body(),
            content_type=CONTENT_TYPES[write.patch_type], retries=write.retries, replay=replay,
        )

    # ----------------------------------------------------------------- events.k8s.io/v1

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> Reply:
        """POST an Event. One with a fixed `metadata.name` is sent again after a connection error
        (a 409 then, `Reply.resent`, is the first attempt having landed); a `generateName` one never
        is: its repeat would be a second Event."""
        named = bool((event.get("metadata") or {}).get("name"))
        return await self.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=event,
                                  replay=Replay.SAFE if named else Replay.NEVER)

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Reply:
        """A merge patch of an Event's `series` (the same values twice: it may be sent again)."""
        return await self.request(
            "PATCH", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}", body=patch,
            content_type=MERGE_PATCH, replay=Replay.SAFE,
        )

    # ----------------------------------------------------------------- SchedulerProfiles

    async def patch_profile_status(self, name: str, patch: Mapping[str, Any]) -> Reply:
        return await self.request(
            "PATCH", f"/apis/placer.dev/v1alpha1/schedulerprofiles/{name}/status", body=patch,
            content_type=MERGE_PATCH, replay=Replay.SAFE,
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
        """Raises ApiError(409) when someone created it first. Sent again after a connection error:
        a 409 then may be our first attempt, so the Lease is read and taken as created when its
        holder is ours (`spec.holderIdentity` of `lease`), else it is someone else's: the 409."""
        reply = await self.request("POST", self._lease_path(namespace), body=lease, retries=1, replay=Replay.SAFE)
        if reply.status == 409 and reply.resent:
            holder = (lease.get("spec") or {}).get("holderIdentity")
            found = await self.get_lease(namespace, str((lease.get("metadata") or {}).get("name") or ""))
            if holder and found is not None and (found.get("spec") or {}).get("holderIdentity") == holder:
                return found
        if reply.status not in (200, 201):
            raise ApiError(reply.status, f"POST {self._lease_path(namespace)}: {reply.message()}")
        return reply.json()

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
