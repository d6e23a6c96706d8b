"""KubeClient against the emulator: bind outcomes, retries, leases, events, pods/status, watches;
over TLS (CA, client certificates, server names), through proxies, with credentials."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from placer.controller.lifecycle.leader import micro_time
from placer.controller.transport import client as kube_module
from placer.controller.transport import http as http_module
from placer.controller.transport.client import ApiError, BindResult, KubeClient

from tests.controller.netfixtures import Certs, Proxy, TlsFront, make_certs
from tests.kubeemu import KubeEmulator

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
async def kube(kube_emulator: KubeEmulator, tmp_path: Path) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(str(kube_emulator.write_kubeconfig(tmp_path / "kc")), retries=3,
                                      max_backoff=0.05)
    yield client
    await client.close()


async def test_bind_outcomes(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    emu.add_node("n2")
    uid = emu.add_pod("p1")["metadata"]["uid"]
    assert (await kube.bind("default", "p1", uid, "n1")).result is BindResult.BOUND
    assert emu.get("pods", "p1")["spec"]["nodeName"] == "n1"
    # a retried bind whose first attempt landed: the 409 names our own node
    assert (await kube.bind("default", "p1", uid, "n1")).result is BindResult.BOUND
    conflict = await kube.bind("default", "p1", uid, "n2")
    assert conflict.result is BindResult.CONFLICT and "already assigned" in conflict.message
    assert (await kube.bind("default", "missing", "", "n1")).result is BindResult.GONE
    uid2 = emu.add_pod("p2")["metadata"]["uid"]
    stale = await kube.bind("default", "p2", "not-" + uid2, "n1")  # the UID is a precondition
    assert stale.result is BindResult.CONFLICT
    assert emu.double_bindings() == []


async def test_transient_failures_are_retried_with_backoff(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_node("n1")
    uid = emu.add_pod("p1")["metadata"]["uid"]
    emu.inject("POST", r"/binding$", status=503, count=2)
    assert (await kube.bind("default", "p1", uid, "n1")).result is BindResult.BOUND
    assert emu.bind_attempts["default/p1"] == 3
    emu.inject("GET", r"/version$", status=429, retry_after=1, count=1)
    started = time.monotonic()
    assert (await kube.request("GET", "/version")).ok
    assert time.monotonic() - started >= 1.0  # Retry-After honoured, beyond our own max backoff
    emu.inject("GET", r"/version$", reset=True, count=2)
    assert (await kube.request("GET", "/version")).ok  # connection resets too
    emu.inject("GET", r"/version$", status=500, count=None)
    reply = await kube.request("GET", "/version")
    assert reply.status == 500  # given up after the retries, the last answer is returned
    emu.clear_faults()
    assert kube.last_answer is not None


async def test_no_answer_at_all_is_an_error(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    async with kube_emulator.unreachable():
        with pytest.raises(ApiError) as error:
            await kube.request("GET", "/version")
    assert error.value.status == 0
    assert await kube.ping()


async def test_leases_use_optimistic_concurrency(kube: KubeClient) -> None:
    assert await kube.get_lease("placer-system", "placer") is None
    body = {"metadata": {"name": "placer", "namespace": "placer-system"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": micro_time()}}
    created = await kube.create_lease("placer-system", body)
    with pytest.raises(ApiError) as exists:
        await kube.create_lease("placer-system", body)
    assert exists.value.status == 409
    renewed = await kube.update_lease("placer-system", "placer", {**created, "spec": {**created["spec"],
                                                                                        "renewTime": micro_time()}})
    with pytest.raises(ApiError) as stale:
        await kube.update_lease("placer-system", "placer", created)  # the old resourceVersion
    assert stale.value.status == 409
    assert (await kube.get_lease("placer-system", "placer")) == renewed


async def test_events_and_their_series(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    pod = emu.add_pod("p1")
    event = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "p1.abc", "namespace": "default"},
        "eventTime": micro_time(), "reportingController": "placer.dev/scheduler",
        "reportingInstance": "placer-me", "action": "Scheduling", "reason": "FailedScheduling",
        "note": "0/1 nodes are available: 1 Insufficient cpu.", "type": "Warning",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p1",
                      "uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"]},
    }
    assert (await kube.create_event("default", event)).status == 201
    reply = await kube.patch_event("default", "p1.abc", {"series": {"count": 4, "lastObservedTime": micro_time()}})
    assert reply.ok
    [stored] = emu.list("events.k8s.io/v1/events")
    assert stored["series"]["count"] == 4 and stored["note"] == event["note"]


async def test_the_condition_patch_merges_by_type(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_pod("p1")
    emu.patch("pods", "p1", {"status": {"conditions": [{"type": "Other", "status": "True"}]}})
    patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": "no", "lastProbeTime": None,
                                        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}
    assert (await kube.patch_pod_status("default", "p1", patch)).ok
    conditions = {c["type"]: c for c in emu.get("pods", "p1")["status"]["conditions"]}
    assert set(conditions) == {"Other", "PodScheduled"} and conditions["PodScheduled"]["message"] == "no"


async def test_lists_are_paged(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    for index in range(1203):
        kube_emulator.add_pod(f"p{index}")
    items, version = await kube.list_objects("/api/v1/pods")
    assert len(items) == 1203 and version
    assert len(kube_emulator.requests_matching("GET", r"^/api/v1/pods$")) == 3


async def test_list_pages_prefetch_and_start_over(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    for index in range(1203):
        kube_emulator.add_pod(f"p{index}")
    pages = kube.list_pages("/api/v1/pods", limit=500)
    seen: list[str] = []
    async for items, version, restarted in pages:
        assert version and not restarted
        await asyncio.sleep(0.05)  # the next page was asked for before this one was handed out
        assert len(kube_emulator.requests_matching("GET", r"^/api/v1/pods$")) == min(len(seen) // 500 + 2, 3)
        seen += [item["metadata"]["name"] for item in items]
    assert len(seen) == len(set(seen)) == 1203
    # an expired continue token (410): the listing starts over, and says so
    kube_emulator.inject("GET", r"^/api/v1/pods$", status=410, query="continue=", count=1)
    pages = kube.list_pages("/api/v1/pods", limit=500)
    outcome = [(len(items), restarted) async for items, _, restarted in pages]
    assert outcome == [(500, False), (500, True), (500, False), (203, False)]
    # abandoned half-way: the page in flight is dropped, nothing is left behind
    pages = kube.list_pages("/api/v1/pods", limit=500)
    await anext(pages)
    pages.close()
    assert [page async for page in pages] == []


async def test_node_metrics(kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    kube_emulator.set_node_metrics("n1", cpu="500m", memory="1Gi")
    items = await kube.list_node_metrics()
    assert items is not None and [item["metadata"]["name"] for item in items] == ["n1"]


# ----------------------------------------------------------------- watches


async def test_a_watch_yields_decoded_events_and_a_refusal_is_an_api_error(
        kube_emulator: KubeEmulator, kube: KubeClient) -> None:
    emu = kube_emulator
    emu.add_pod("p1")
    _, version = await kube.list_objects("/api/v1/namespaces/default/pods")
    events = kube.watch("/api/v1/namespaces/default/pods", [("resourceVersion", version)],
                        connect_timeout=5, read_timeout=5)
    emu.add_pod("p2", labels={"n": "9223372036854775808"})  # a label value, not a number: decoded as sent
    event = await asyncio.wait_for(anext(events), 5)
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "p2"
    assert event["object"]["metadata"]["labels"] == {"n": "9223372036854775808"}
    await events.aclose()  # type: ignore[attr-defined]
    emu.inject("GET", r"/pods$", query="watch=true", status=503, message="try later", count=None)
    with pytest.raises(ApiError) as refused:
        async for _ in kube.watch("/api/v1/pods", [], connect_timeout=5, read_timeout=5):
            pass
    assert refused.value.status == 503 and "try later" in refused.value.message


def test_json_beyond_what_orjson_takes_falls_back_to_the_stdlib() -> None:
    assert kube_module.loads(b'[NaN, "\\ud800", 1e400]')[1:] == ["\ud800", float("inf")]  # as json reads them
    assert kube_module.loads(b'{"n": 18446744073709551615}') == {"n": 2**64 - 1}
    with pytest.raises(ValueError):
        kube_module.loads(b"{not json")
    with pytest.raises(ValueError):
        kube_module.loads(b'["\xff"]')
    assert kube_module.dumps({1: "a", "b": [True, None]}) == b'{"1": "a", "b": [true, null]}'
    assert kube_module.dumps({"note": "é"}) == '{"note":"é"}'.encode()


def test_request_targets_are_quoted_only_where_needed() -> None:
    assert kube_module.request_target("/api/v1/namespaces/a/pods/b-1.x") == "/api/v1/namespaces/a/pods/b-1.x"
    role = "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:admin"
    assert kube_module.request_target(role) == role
    assert kube_module.request_target("/x/a b\r\n") == "/x/a%20b%0D%0A"
    assert kube_module.request_target("/p", [("labelSelector", "a in (b,c)"), ("limit", "5")]) == (
        "/p?labelSelector=a+in+%28b%2Cc%29&limit=5")


# ----------------------------------------------------------------- TLS, proxies, credentials


def kubeconfig(path: Path, server: str, *, cluster: str = "", user: str = "{}") -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'{', ' + cluster if cluster else ''}}}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    return path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PROXY_VARIABLES, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


async def connect(path: Path) -> KubeClient:
    return await KubeClient.connect(str(path), retries=0, max_backoff=0.01, timeout=5)


async def bind_one(emu: KubeEmulator, client: KubeClient, name: str) -> None:
    if "n1" not in {node["metadata"]["name"] for node in emu.list("nodes")}:
        emu.add_node("n1")
    uid = emu.add_pod(name)["metadata"]["uid"]
    assert (await client.bind("default", name, uid, "n1")).result is BindResult.BOUND


@pytest.mark.usefixtures("no_proxy_variables")
async def test_tls_verified_by_the_clusters_ca_with_a_client_certificate(
        kube_emulator: KubeEmulator, certs: Certs, tmp_path: Path) -> None:
    front = await TlsFront(kube_emulator.port, certs, require_client_cert=True).start()
    try:
        url = f"https://127.0.0.1:{front.port}"
        client = await connect(kubeconfig(
            tmp_path / "kc", url, cluster=f"certificate-authority: {certs.ca}",
            user=f"{{client-certificate: {certs.client_cert}, client-key: {certs.client_key}}}"))
        try:
            await bind_one(kube_emulator, client, "p1")
            events = client.watch("/api/v1/pods", [("resourceVersion", "0")], connect_timeout=5, read_timeout=5)
            assert (await asyncio.wait_for(anext(events), 5))["type"] == "ADDED"
            await events.aclose()  # type: ignore[attr-defined]
        finally:
            await client.close()
        assert set(front.client_names) == {"placer-test"}
        anonymous = await connect(kubeconfig(tmp_path / "kc2", url, cluster=f"certificate-authority: {certs.ca}"))
        try:
            with pytest.raises(ApiError) as refused:  # the front wants a client certificate
                await anonymous.request("GET", "/version")
            assert refused.value.status == 0
        finally:
            await anonymous.close()
    finally:
        await front.close()


@pytest.mark.usefixtures("no_proxy_variables")
async def test_tls_names_ca_and_insecure_skip_verify(kube_emulator: KubeEmulator, certs: Certs, tmp_path: Path) -> None:
    front = await TlsFront(kube_emulator.port, certs).start()
    cases = [  # (server, cluster fields, answers)
        (f"https://127.0.0.1:{front.port}", f"certificate-authority: {certs.ca}", True),
        (f"https://127.0.0.1:{front.port}", f"certificate-authority: {certs.other_ca}", False),  # not our CA
        (f"https://localhost:{front.port}", f"certificate-authority: {certs.ca}", False),  # not a name of the cert
        (f"https://localhost:{front.port}", f"certificate-authority: {certs.ca}, tls-server-name: kubernetes", True),
        (f"https://localhost:{front.port}", "insecure-skip-tls-verify: true", True),
    ]
    try:
        for index, (server, cluster, answers) in enumerate(cases):
            client = await connect(kubeconfig(tmp_path / f"kc{index}", server, cluster=cluster))
            try:
                if answers:
                    assert (await client.request("GET", "/version")).ok, (server, cluster)
                else:
                    with pytest.raises(ApiError, match=r"SSL|certificate"):
                        await client.request("GET", "/version")
            finally:
                await client.close()
    finally:
        await front.close()


@pytest.mark.usefixtures("no_proxy_variables")
async def test_through_a_proxy_connect_for_https_absolute_form_for_http(
        kube_emulator: KubeEmulator, certs: Certs, tmp_path: Path) -> None:
    front = await TlsFront(kube_emulator.port, certs).start()
    proxy = await Proxy(credentials="user:s3cret").start()
    try:
        https = await connect(kubeconfig(
            tmp_path / "kc", f"https://127.0.0.1:{front.port}",
            cluster=f"certificate-authority: {certs.ca}, proxy-url: 'http://user:s3cret@127.0.0.1:{proxy.port}'"))
        http_ = await connect(kubeconfig(tmp_path / "kc2", kube_emulator.url,
                                         cluster=f"proxy-url: 'http://user:s3cret@127.0.0.1:{proxy.port}'"))
        try:
            await bind_one(kube_emulator, https, "p1")
            await bind_one(kube_emulator, http_, "p2")
        finally:
            await https.close()
            await http_.close()
        assert proxy.lines == [f"CONNECT 127.0.0.1:{front.port} HTTP/1.1",
                               f"POST {kube_emulator.url}/api/v1/namespaces/default/pods/p2/binding HTTP/1.1"]
        denied = await connect(kubeconfig(tmp_path / "kc3", f"https://127.0.0.1:{front.port}",
                                          cluster=f"certificate-authority: {certs.ca}, "
                                                  f"proxy-url: 'http://127.0.0.1:{proxy.port}'"))
        try:
            with pytest.raises(ApiError, match=r"proxy refused the tunnel.*407"):
                await denied.request("GET", "/version")
        finally:
            await denied.close()
    finally:
        await proxy.close()
        await front.close()


@pytest.mark.usefixtures("no_proxy_variables")
async def test_an_https_proxy_tls_inside_tls(
        kube_emulator: KubeEmulator, certs: Certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system_store = http_module.tls_context

    def trusting_the_test_ca(**kwargs: Any) -> ssl.SSLContext:  # the proxy's certificate, as a public CA's
        return system_store(**{**kwargs, "ca_file": kwargs["ca_file"] or str(certs.ca)})

    monkeypatch.setattr(http_module, "tls_context", trusting_the_test_ca)
    front = await TlsFront(kube_emulator.port, certs).start()
    proxy = await Proxy(tls=certs).start()
    try:
        client = await connect(kubeconfig(
            tmp_path / "kc", f"https://127.0.0.1:{front.port}",
            cluster=f"certificate-authority: {certs.ca}, proxy-url: 'https://127.0.0.1:{proxy.port}'"))
        try:
            await bind_one(kube_emulator, client, "p1")
        finally:
            await client.close()
        assert proxy.lines == [f"CONNECT 127.0.0.1:{front.port} HTTP/1.1"]
    finally:
        await proxy.close()
        await front.close()


@pytest.mark.usefixtures("no_proxy_variables")
async def test_the_proxy_from_the_environment_and_no_proxy(
        kube_emulator: KubeEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server named `placer-emu.test` (resolved to the emulator here): a loopback address is
    never proxied, as client-go never proxies it (placer.controller.transport.proxy_env)."""
    name, resolve = "placer-emu.test", socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo",
                        lambda host, *args, **kwargs: resolve("127.0.0.1" if host == name else host, *args, **kwargs))
    named = kube_emulator.write_kubeconfig(tmp_path / "kc")
    named.write_text(named.read_text().replace("127.0.0.1", name))
    proxy = await Proxy().start()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        for path in (named, kube_emulator.write_kubeconfig(tmp_path / "loopback")):
            client = await connect(path)
            try:
                assert (await client.request("GET", "/version")).ok
            finally:
                await client.close()
        assert proxy.lines == [f"GET {kube_emulator.url.replace('127.0.0.1', name)}/version HTTP/1.1"]
        monkeypatch.setenv("NO_PROXY", name)
        client = await connect(named)
        try:
            assert (await client.request("GET", "/version")).ok
        finally:
            await client.close()
        assert len(proxy.lines) == 1  # not through the proxy this time
    finally:
        await proxy.close()


async def test_the_bearer_token_is_sent_and_never_logged(
        kube_emulator: KubeEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    proxy = await Proxy().start()  # here as a recorder of what is sent
    caplog.set_level(logging.DEBUG)
    try:
        client = await connect(kubeconfig(tmp_path / "kc", kube_emulator.url,
                                          cluster=f"proxy-url: 'http://127.0.0.1:{proxy.port}'",
                                          user="{token: s3cret-token}"))
        try:
            kube_emulator.inject("GET", r"/version$", status=503, count=1)
            client.retries = 1
            assert (await client.request("GET", "/version")).ok  # a retry, logged
        finally:
            await client.close()
    finally:
        await proxy.close()
    assert b"\r\nAuthorization: Bearer s3cret-token\r\n" in proxy.heads[0]
    assert "retrying GET /version" in caplog.text and "s3cret-token" not in caplog.text
