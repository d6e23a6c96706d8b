"""KubeClient's retry policy (`placer.controller.transport.retry`) against small hostile servers on 127.0.0.1
that count what they are sent: reads are sent again after connection errors, a write only when
it never left or its repeat's answer tells what happened; 429/503 for every call, 500/502/504 for
replay-safe ones; Retry-After in whole seconds, capped; certificate failures never retried."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from placer.controller.binding.effects import Effects
from placer.controller.binding.reporting import Reporter
from placer.controller.metrics import Metrics
from placer.controller.transport import retry as retry_module
from placer.controller.transport.client import ApiError, BindResult, KubeClient, Replay
from placer.controller.transport.http import BodyTooLargeError, NotSentError, TlsVerificationError
from placer.controller.transport.kubeconfig import Configuration
from placer.controller.transport.retry import (
    MAX_RETRY_AFTER,
    certificate_failure,
    resendable,
    retry_after,
    write_replay,
)
from placer.engine.framework import JSON_PATCH, STRATEGIC_MERGE_PATCH, ObjectRef, Write
from placer.engine.parsing import parse_pod

from tests.controller.helpers import pod
from tests.controller.netfixtures import Certs, make_certs

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                   "no_proxy")


@dataclass
class Seen:
    method: str
    target: str
    body: bytes


Action = Callable[[Seen], "bytes | None"]  # the reply's bytes; None: reset the connection; b"": never answer


def answer(status: int, body: Any = None, *headers: str) -> Action:
    data = b"" if body is None else orjson.dumps(body)
    head = "".join(f"{h}\r\n" for h in headers)
    raw = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{head}Content-Length: {len(data)}\r\n\r\n"
    return lambda seen: raw.encode() + data


def reset(seen: Seen) -> bytes | None:
    """Reset the connection once the request is in."""
    return None


def silent(seen: Seen) -> bytes | None:
    """Never answer."""
    return b""


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}


@dataclass
class Hostile:
    """An HTTP/1.1 server that reads each request whole, then does the next of `actions` (the last
    one again once they run out); `seen` counts the requests, `connections` the connections."""

    actions: list[Action]
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    tls: ssl.SSLContext | None = None
    server: asyncio.AbstractServer | None = None

    async def start(self, port: int = 0) -> Hostile:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def methods(self) -> list[str]:
        return [seen.method for seen in self.seen]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            if self.tls is not None:
                await writer.start_tls(self.tls)
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                length = next((int(f.split(":", 1)[1]) for f in fields if f.lower().startswith("content-length:")), 0)
                method, target, _ = line.split(" ", 2)
                seen = Seen(method, target, await reader.readexactly(length))
                self.seen.append(seen)
                reply = self.actions[min(len(self.seen), len(self.actions)) - 1](seen)
                if reply is None:  # a reset once the request is in: it may have been acted on
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if not reply:  # never answered: until the client gives up
                    await reader.read()
                    return
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def servers() -> AsyncIterator[list[Hostile]]:
    started: list[Hostile] = []
    yield started
    for server in started:
        await server.close()


@pytest.fixture
def serve(servers: list[Hostile]) -> Callable[..., Any]:
    async def start(*actions: Action) -> Hostile:
        server = await Hostile(list(actions)).start()
        servers.append(server)
        return server
    return start


class Sleeps:
    """A `sleep` that records the delays and returns at once (then runs `then`, if set)."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.then: Callable[[], Any] | None = None

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.then is not None:
            then, self.then = self.then, None
            await then()


def client(url: str, *, sleep: Any = None, ca: Path | None = None, **kwargs: Any) -> KubeClient:
    configuration = Configuration(url)
    configuration.ssl_ca_cert = str(ca) if ca else None
    options: dict[str, Any] = {"retries": 3, "timeout": 5.0, "base_backoff": 0.01, "max_backoff": 0.02, **kwargs}
    if sleep is not None:
        options["sleep"] = sleep
    return KubeClient(configuration, **options)


@contextlib.asynccontextmanager
async def using(kube: KubeClient) -> AsyncIterator[KubeClient]:
    try:
        yield kube
    finally:
        await kube.close()


EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def event(**metadata: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"namespace": "default", **metadata},
            "reason": "Scheduled", "note": "Successfully assigned default/p to n1"}


# ----------------------------------------------------------------- writes after a connection error


async def test_a_post_reset_after_it_was_read_is_not_sent_again(serve: Callable[..., Any]) -> None:
    server = await serve(reset, reset, answer(201, {}))
    async with using(client(server.url)) as kube:
        with pytest.raises(ApiError) as failed:
            await kube.request("POST", EVENTS, body=event(name="p.1"))
        assert failed.value.status == 0 and "not sent again" in failed.value.message
        with pytest.raises(ApiError):  # an Event named by the server: its repeat would be a second one
            await kube.create_event("default", event(generateName="p."))
    assert server.methods() == ["POST", "POST"]  # one each


async def test_a_post_that_timed_out_is_not_sent_again_a_get_is(serve: Callable[..., Any]) -> None:
    server = await serve(silent, answer(200, {"kind": "Pod"}))
    async with using(client(server.url, timeout=0.3)) as kube:
        with pytest.raises(ApiError, match="TimeoutError"):
            await kube.request("POST", EVENTS, body=event(name="p.1"))
        assert len(server.seen) == 1
        server.actions = [silent, answer(200, {"kind": "Pod"})]
        server.seen.clear()
        assert (await kube.request("GET", "/api/v1/namespaces/default/pods/p")).ok
    assert server.methods() == ["GET", "GET"]


async def test_a_refused_connection_lets_a_write_wait_for_the_server(serve: Callable[..., Any]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps = Sleeps()
    late = Hostile([answer(201, {"metadata": {"name": "p.1"}})])

    async def come_up() -> None:
        await late.start(port)

    sleeps.then = come_up
    try:
        async with using(client(f"http://127.0.0.1:{port}", sleep=sleeps)) as kube:
            reply = await kube.request("POST", EVENTS, body=event(generateName="p."))  # a write that never left
        assert reply.status == 201 and not reply.resent
        assert len(sleeps.delays) == 1 and late.methods() == ["POST"]
    finally:
        await late.close()


async def test_a_binding_reset_after_it_was_read_is_sent_again_and_its_409_read(serve: Callable[..., Any]) -> None:
    landed = status(409, "Conflict", 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned '
                                     'to node "n1"')
    server = await serve(reset, answer(409, landed))
    async with using(client(server.url)) as kube:
        outcome = await kube.bind("default", "p", "uid-p", "n1")
    assert outcome.result is BindResult.BOUND
    assert server.methods() == ["POST", "POST"]


async def test_an_event_create_409_after_a_resend_is_the_first_attempt(serve: Callable[..., Any]) -> None:
    exists = status(409, "AlreadyExists", 'events.events.k8s.io "p.1" already exists')
    server = await serve(reset, answer(409, exists))
    async with using(client(server.url)) as kube:
        reply = await kube.create_event("default", event(name="p.1"))
    assert (reply.status, reply.resent) == (409, True)
    assert server.methods() == ["POST", "POST"]


async def test_the_reporter_counts_an_event_whose_first_attempt_landed_as_created(serve: Callable[..., Any]) -> None:
    exists = status(409, "AlreadyExists", "already exists")
    server = await serve(reset, answer(409, exists), answer(200, {}))
    async with using(client(server.url)) as kube:
        metrics = Metrics()
        reporter = Reporter(kube, metrics, identity="me", series_interval=0.0)
        info = parse_pod(pod("p", "default"))
        worker = asyncio.create_task(reporter.worker())
        try:
            reporter.failed(info, "default-scheduler", "0/1 nodes are available", condition=False)
            await reporter.drain(5)
            reporter.failed(info, "default-scheduler", "0/1 nodes are available", condition=False)
            await reporter.drain(5)
        finally:
            worker.cancel()
    assert metrics.api_errors.get(call="create_event") == 0
    assert server.methods() == ["POST", "POST", "PATCH"]  # the repeat bumps the series of the Event there


@pytest.mark.parametrize(("holder", "ours"), [("me", True), ("someone-else", False)])
async def test_a_lease_create_409_after_a_resend_is_ours_only_with_our_holder(
        serve: Callable[..., Any], holder: str, ours: bool) -> None:
    there = {"metadata": {"name": "placer", "namespace": "placer-system", "resourceVersion": "7"},
             "spec": {"holderIdentity": holder}}
    server = await serve(reset, answer(409, status(409, "AlreadyExists", "already exists")), answer(200, there))
    lease = {"metadata": {"name": "placer", "namespace": "placer-system"}, "spec": {"holderIdentity": "me"}}
    async with using(client(server.url)) as kube:
        if ours:
            assert await kube.create_lease("placer-system", lease) == there
        else:
            with pytest.raises(ApiError) as taken:
                await kube.create_lease("placer-system", lease)
            assert taken.value.status == 409
    assert server.methods() == ["POST", "POST", "GET"]
    assert server.seen[2].target == "/apis/coordination.k8s.io/v1/namespaces/placer-system/leases/placer"


async def test_a_lease_create_409_at_the_first_attempt_is_someone_elses(serve: Callable[..., Any]) -> None:
    server = await serve(answer(409, status(409, "AlreadyExists", "already exists")))
    async with using(client(server.url)) as kube:
        with pytest.raises(ApiError) as taken:
            await kube.create_lease("ns", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}})
    assert taken.value.status == 409 and server.methods() == ["POST"]  # (no GET: nothing was resent)


async def test_plugin_writes_are_resent_only_when_their_repeat_is_safe(serve: Callable[..., Any]) -> None:
    target = ObjectRef("v1", "Pod", "pods", "p", "default")
    server = await serve(reset, answer(200, {}))
    async with using(client(server.url)) as kube:
        assert (await kube.write(Write(target, {"status": {}}, STRATEGIC_MERGE_PATCH, subresource="status"))).ok
        assert server.methods() == ["PATCH", "PATCH"]
        server.seen.clear()
        operations = [{"op": "add", "path": "/metadata/finalizers/-", "value": "x"}]  # twice is not once
        with pytest.raises(ApiError, match="not sent again"):
            await kube.write(Write(target, operations, JSON_PATCH))
        assert server.methods() == ["PATCH"]


async def test_a_delete_whose_repeat_finds_nothing_is_done(serve: Callable[..., Any]) -> None:
    server = await serve(reset, answer(404, status(404, "NotFound", 'pods "p" not found')))
    async with using(client(server.url)) as kube:
        effects = Effects(kube, Metrics())
        delete = Write(ObjectRef("v1", "Pod", "pods", "p", "default"), delete=True, uid="uid-p")
        written = await effects.write(delete, "default/p")
    assert written.ok and written.status == 404
    assert server.methods() == ["DELETE", "DELETE"]


async def test_a_resent_write_refused_by_its_own_result_counts_as_written(serve: Callable[..., Any]) -> None:
    """A JSON patch whose `test` fails on the repeat (422: its first attempt changed the object)."""
    claim = {"metadata": {"name": "c", "resourceVersion": "9"}, "status": {"reservedFor": [{"uid": "u"}]}}
    server = await serve(reset, answer(422, status(422, "Invalid", "testing value /status failed")),
                         answer(200, claim))
    write = Write(ObjectRef("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", "c", "default"),
                  [{"op": "test", "path": "/status", "value": {}},
                   {"op": "add", "path": "/status/reservedFor", "value": [{"uid": "u"}]}],
                  JSON_PATCH, subresource="status",
                  landed=lambda raw: raw["status"].get("reservedFor") == [{"uid": "u"}])
    async with using(client(server.url)) as kube:
        written = await Effects(kube, Metrics()).write(
            write, "default/p")
    assert written.ok and written.resource_version == "9"
    assert server.methods() == ["PATCH", "PATCH", "GET"]


async def test_a_conflict_is_written_again_on_the_object_as_it_is_now(serve: Callable[..., Any]) -> None:
    """kube's RetryOnConflict: another pod joined the shared claim's reservedFor meanwhile (409);
    the claim is read and the write made again on it, until it lands or the write gives up."""
    target = ObjectRef("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", "c", "default")
    conflict = answer(409, status(409, "Conflict", "the object has been modified"))
    def claim(version: str, *uids: str) -> dict[str, Any]:
        return {"metadata": {"name": "c", "resourceVersion": version},
                "status": {"reservedFor": [{"uid": uid} for uid in uids]}}

    def again(raw: Any) -> Write | None:
        reserved = raw["status"]["reservedFor"]
        if len(reserved) > 2:
            return None  # (a write may give up on what it finds)
        return Write(target, {"status": {"reservedFor": [*reserved, {"uid": "me"}]}}, subresource="status",
                     resource_version=raw["metadata"]["resourceVersion"])

    write = Write(target, {"status": {"reservedFor": [{"uid": "me"}]}}, subresource="status", resource_version="1",
                  landed=lambda raw: {"uid": "me"} in raw["status"]["reservedFor"], rebase=again)
    server = await serve(conflict, answer(200, claim("2", "a")), conflict, answer(200, claim("3", "a", "b")),
                         answer(200, claim("4", "a", "b", "me")))
    async with using(client(server.url)) as kube:
        written = await Effects(kube, Metrics()).write(write, "default/p")
    assert written.ok and written.resource_version == "4"
    assert server.methods() == ["PATCH", "GET", "PATCH", "GET", "PATCH"]
    assert orjson.loads(server.seen[4].body)["status"]["reservedFor"] == [{"uid": "a"}, {"uid": "b"}, {"uid": "me"}]
    assert orjson.loads(server.seen[4].body)["metadata"]["resourceVersion"] == "3"

    server = await serve(conflict, answer(200, claim("5", "a", "b", "c")))  # it gives up: the failure stands
    async with using(client(server.url)) as kube:
        written = await Effects(kube, Metrics()).write(write, "default/p")
    assert not written.ok and written.status == 409
    assert server.methods() == ["PATCH", "GET"]


# ----------------------------------------------------------------- reads after a connection error


async def test_a_get_reset_is_sent_again(serve: Callable[..., Any]) -> None:
    server = await serve(reset, reset, answer(200, {"items": [], "metadata": {"resourceVersion": "5"}}))
    async with using(client(server.url)) as kube:
        assert await kube.list_objects("/api/v1/nodes") == ([], "5")
    assert server.methods() == ["GET", "GET", "GET"]


# ----------------------------------------------------------------- statuses


async def test_429_and_503_are_retried_for_writes_500_502_504_only_when_safe(serve: Callable[..., Any]) -> None:
    ok = answer(201, {})
    server = await serve(answer(429, {}), answer(503, {}), ok)
    async with using(client(server.url)) as kube:
        assert (await kube.request("POST", EVENTS, body=event(generateName="p."))).status == 201
        assert len(server.seen) == 3  # the server turned it away twice without acting
        for code in (500, 502, 504):
            server.seen.clear()
            server.actions = [answer(code, {}), ok]
            reply = await kube.request("POST", EVENTS, body=event(generateName="p."))
            assert (reply.status, len(server.seen)) == (code, 1)  # it may have acted: not sent again
            server.seen.clear()
            reply = await kube.patch_pod_status("default", "p", {"status": {}})
            assert (reply.status, len(server.seen), reply.resent) == (201, 2, True)  # a safe repeat
            server.seen.clear()
            assert (await kube.request("GET", "/version")).status == 201 and len(server.seen) == 2


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e400", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "+3", "٣"])
async def test_a_retry_after_not_in_whole_seconds_is_ignored(serve: Callable[..., Any], value: str) -> None:
    server = await serve(answer(429, {}, f"Retry-After: {value}"), answer(429, {}, f"Retry-After: {value}"),
                         answer(200, {"major": "1"}))
    async with using(client(server.url, retries=5)) as kube:  # the real asyncio.sleep
        started = time.monotonic()
        async with asyncio.timeout(5):
            reply = await kube.request("GET", "/version")
    assert reply.ok and len(server.seen) == 3
    assert time.monotonic() - started < 1.0  # our own backoff (0.02 s at most), not the header's


async def test_a_retry_after_in_seconds_is_honoured_and_capped(serve: Callable[..., Any]) -> None:
    server = await serve(answer(429, {}, "Retry-After: 2"), answer(503, {}, "Retry-After: 86400"),
                         answer(503, {}, "Retry-After: 99999999999999999999"), answer(200, {}))
    sleeps = Sleeps()
    async with using(client(server.url, sleep=sleeps)) as kube:
        assert (await kube.request("POST", EVENTS, body=event(name="p.1"))).ok
    assert sleeps.delays == [2.0, MAX_RETRY_AFTER, MAX_RETRY_AFTER]


def test_retry_after_parsing() -> None:
    assert [retry_after(v) for v in ("0", " 7 ", "60", "61", None, "", "1e3", "-0", "0x10")] == [
        0.0, 7.0, 60.0, MAX_RETRY_AFTER, None, None, None, None, None]


# ----------------------------------------------------------------- certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def tls_server(servers: list[Hostile], certs: Certs) -> Hostile:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    server = await Hostile([answer(200, {"major": "1"})], tls=context).start()
    servers.append(server)
    return server


async def test_a_certificate_from_another_ca_fails_at_once_and_is_logged_once(
        servers: list[Hostile], certs: Certs, caplog: pytest.LogCaptureFixture) -> None:
    server = await tls_server(servers, certs)
    caplog.set_level(logging.DEBUG, logger="placer.kube")
    async with using(client(server.url, ca=certs.other_ca, retries=5)) as kube:
        for _ in range(3):
            with pytest.raises(ApiError) as failed:
                await kube.request("GET", "/version")
            assert failed.value.status == 0
        assert server.connections == 3  # one attempt per call, none retried
        message = failed.value.message
        assert f"the API server 127.0.0.1:{server.port}" in message
        assert "x509: certificate signed by unknown authority" in message and "not retried" in message
        with pytest.raises(ApiError, match="x509: certificate signed by unknown authority"):
            watch = kube.watch("/api/v1/pods", [], connect_timeout=5, read_timeout=5)
            await anext(watch)
    assert len([r for r in caplog.records if r.levelno == logging.ERROR and "x509" in r.getMessage()]) == 1
    async with using(client(server.url, ca=certs.ca)) as trusting:  # the right CA: it answers
        assert (await trusting.request("GET", "/version")).ok


async def test_a_host_name_the_certificate_does_not_name_fails_at_once(servers: list[Hostile], certs: Certs) -> None:
    server = await tls_server(servers, certs)
    async with using(client(f"https://localhost:{server.port}", ca=certs.ca, retries=5)) as kube:
        with pytest.raises(ApiError, match="x509: certificate is not valid for localhost"):
            await kube.request("POST", EVENTS, body=event(name="p.1"), replay=Replay.SAFE)
    assert server.connections == 1


# ----------------------------------------------------------------- the policy's pieces


def test_what_may_be_sent_again() -> None:
    refused = ConnectionRefusedError(111, "Connect call failed")
    reset = ConnectionResetError(104, "Connection reset by peer")
    verification = ssl.SSLCertVerificationError(1, "certificate verify failed")
    wrapped = OSError("handshake")
    wrapped.__cause__ = verification
    assert resendable(refused, Replay.NEVER) and resendable(NotSentError("proxy said no"), Replay.NEVER)
    assert not resendable(reset, Replay.NEVER) and not resendable(TimeoutError(), Replay.NEVER)
    assert resendable(reset, Replay.SAFE) and resendable(TimeoutError(), Replay.SAFE)
    assert not resendable(BodyTooLargeError("too long"), Replay.SAFE)  # the same again
    for failure in (TlsVerificationError("bad certificate"), verification, wrapped):
        assert certificate_failure(failure) is not None and not resendable(failure, Replay.SAFE)
    assert certificate_failure(reset) is None
    assert Replay.of("GET", None) is Replay.SAFE and Replay.of("POST", None) is Replay.NEVER
    assert Replay.of("POST", Replay.SAFE) is Replay.SAFE


def test_which_plugin_writes_are_replay_safe() -> None:
    target = ObjectRef("v1", "Pod", "pods", "p", "default")
    assert write_replay(Write(target, {"a": 1})) is Replay.SAFE  # a merge patch
    assert write_replay(Write(target, {"a": 1}, STRATEGIC_MERGE_PATCH)) is Replay.SAFE
    assert write_replay(Write(target, [{"op": "add", "path": "/a", "value": 1}], JSON_PATCH)) is Replay.NEVER
    assert write_replay(Write(target, [], JSON_PATCH, landed=lambda raw: True)) is Replay.SAFE
    assert write_replay(Write(target, delete=True, uid="u")) is Replay.SAFE
    assert write_replay(Write(target, delete=True)) is Replay.NEVER  # it could delete a successor
    assert write_replay(Write(target, {"kind": "Pod"}, create=True)) is Replay.NEVER
    assert write_replay(Write(target, {"kind": "Pod"}, create=True, landed=lambda raw: True)) is Replay.SAFE


def test_the_certificate_failure_is_reported_once_per_server(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="placer.kube")
    verification = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verification.verify_code, verification.verify_message = 10, "certificate has expired"
    first = retry_module.certificate_error("example.test:6443", "GET", "/version", verification)
    retry_module.certificate_error("example.test:6443", "GET", "/version", verification)
    assert "x509: certificate has expired or is not yet valid (certificate has expired)" in first.message
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.DEBUG]
