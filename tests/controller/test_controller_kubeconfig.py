"""Placer's own kubeconfig and in-cluster loader (`placer.controller.transport.kubeconfig`): what it reads, how
a token rotates, certificates from data, exec credential plugins run natively (tokens, certificates,
expiry, 401, the stanza's rules, bad output, timeouts), the auth-provider extra, and that nothing of
Placer's imports kubernetes_asyncio on `placer run`'s way."""

from __future__ import annotations

import ast
import asyncio
import base64
import datetime as dt
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from placer.controller.lifecycle.kopf_handlers import KopfLogin, connection_info
from placer.controller.transport.client import KubeClient
from placer.controller.transport.exec_credential import ExecAuthenticator, ExecCredentialError, read_exec_config
from placer.controller.transport.http import HttpClient, tls_context
from placer.controller.transport.kubeconfig import (
    ConfigError,
    Configuration,
    CredentialError,
    ExecCredentials,
    TokenFile,
    load_configuration,
    load_incluster,
    load_kubeconfig,
)
from placer.controller.transport.retry import ApiError


def kubeconfig(path: Path, *, cluster: dict[str, Any], user: dict[str, Any] | None = None,
               namespace: str | None = None, name: str = "c") -> Path:
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user or {}}],
        "contexts": [{"name": name, "context": context}],
    }))
    return path


async def header(configuration: Configuration) -> str | None:
    """The Authorization header KubeClient sends."""
    value = await configuration.get_api_key_with_prefix("BearerToken")
    if not value and configuration.username:
        value = configuration.get_basic_auth_token()
    return value


# ----------------------------------------------------------------------------------- kubeconfig


async def test_a_token_and_the_contexts_namespace(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", cluster={"server": "http://127.0.0.1:1/", "proxy-url": "http://proxy:3128"},
                      user={"token": "abc"}, namespace="team-a")
    configuration = await load_kubeconfig(str(path))
    assert configuration.host == "http://127.0.0.1:1"  # the trailing slash dropped, as kubernetes_asyncio
    assert configuration.namespace == "team-a"
    assert configuration.proxy == "http://proxy:3128"
    assert await header(configuration) == "Bearer abc"
    assert configuration.refresh_api_key_hook is None  # a static token: KubeClient may cache the header
    info = await connection_info(configuration)
    assert (info.server, info.scheme, info.token, info.proxy_url) == ("http://127.0.0.1:1", "Bearer", "abc",
                                                                      "http://proxy:3128")
    assert "abc" not in repr(configuration)


async def test_a_token_file_is_read_again_when_it_rotates(tmp_path: Path) -> None:
    (tmp_path / "tokens").mkdir()
    (tmp_path / "tokens" / "t").write_text("first\n")
    path = kubeconfig(tmp_path / "kc", cluster={"server": "https://api:6443", "insecure-skip-tls-verify": True},
                      user={"tokenFile": "tokens/t"})  # relative to the kubeconfig's folder
    configuration = await load_kubeconfig(str(path))
    assert await header(configuration) == "Bearer first"  # whitespace trimmed, as client-go
    (tmp_path / "tokens" / "t").write_text("second")
    assert await header(configuration) == "Bearer first"  # read again only once a minute
    hook = configuration.refresh_api_key_hook
    assert isinstance(hook, TokenFile)
    hook.period = 0.0
    assert await header(configuration) == "Bearer second"
    assert (await connection_info(configuration)).token == "second"
    (tmp_path / "tokens" / "t").unlink()  # a failed read keeps the token it had
    assert await header(configuration) == "Bearer second"


def test_token_file_timing(tmp_path: Path) -> None:
    now = [100.0]
    token_path = tmp_path / "token"
    token_path.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        TokenFile(str(token_path))
    token_path.write_text("a")
    token = TokenFile(str(token_path), period=60.0, clock=lambda: now[0])
    configuration = Configuration("https://x")
    token_path.write_text("b")
    now[0] = 159.9
    token(configuration)
    assert configuration.api_key["BearerToken"] == "Bearer a"
    now[0] = 160.0
    token(configuration)
    assert configuration.api_key["BearerToken"] == "Bearer b"


async def test_basic_auth(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", cluster={"server": "http://api"}, user={"username": "u", "password": "p:w"})
    configuration = await load_kubeconfig(str(path))
    assert await header(configuration) == "Basic " + base64.b64encode(b"u:p:w").decode()
    info = await connection_info(configuration)
    assert (info.username, info.password, info.token) == ("u", "p:w", None)


async def test_insecure_and_tls_server_name(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", cluster={
        "server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True, "tls-server-name": "api.local"})
    configuration = await load_kubeconfig(str(path))
    assert (configuration.verify_ssl, configuration.tls_server_name, configuration.ssl_ca_cert) == (
        False, "api.local", None)
    assert (await connection_info(configuration)).insecure is True


async def test_several_files_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "one", cluster={"server": "http://one"}, user={"token": "t1"}, name="a")
    second = tmp_path / "two"
    second.write_text(yaml.safe_dump({
        "current-context": "b",  # the first file's current-context wins
        "clusters": [{"name": "a", "cluster": {"server": "http://shadowed"}}, {"name": "b", "cluster": {
            "server": "http://two"}}],
        "users": [{"name": "b", "user": {"token": "t2"}}],
        "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
    }))
    paths = os.pathsep.join([str(tmp_path / "absent"), str(first), str(second)])
    configuration = await load_kubeconfig(paths)
    assert (configuration.host, await header(configuration)) == ("http://one", "Bearer t1")
    other = await load_kubeconfig(paths, context="b")
    assert (other.host, await header(other), other.namespace) == ("http://two", "Bearer t2", "default")


@pytest.mark.parametrize(("document", "message"), [
    ("clusters: [", "not a valid kubeconfig"),
    ("- a list", "a mapping is expected"),
    ("clusters: []\ncontexts: []\nusers: []\n", "no current-context"),
    ("current-context: x\ncontexts: []\n", "context 'x' is not in"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\nclusters: [{name: c, cluster: {}}]\n",
     "cluster 'c': no server"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://a', certificate-authority-data: '%%%'}}]\n",
     "certificate-authority-data is not valid base64"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://a', certificate-authority: missing.crt}}]\n",
     "certificate-authority .*missing.crt does not exist"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://a'}}]\nusers: [{name: u, user: {tokenFile: nope}}]\n",
     "user 'u': tokenFile .*nope does not exist"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://a', insecure-skip-tls-verify: 'yes'}}]\n",
     "insecure-skip-tls-verify must be true or false"),
])
async def test_bad_kubeconfigs_say_what_is_wrong(tmp_path: Path, document: str, message: str) -> None:
    path = tmp_path / "kc"
    path.write_text(document)
    with pytest.raises(ConfigError, match=message):
        await load_kubeconfig(str(path))


async def test_no_kubeconfig_at_all(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no kubeconfig at"):
        await load_kubeconfig(str(tmp_path / "absent"))


# ----------------------------------------------------------------------------------- in-cluster


def service_account(folder: Path, token: str = "sa-token") -> Path:
    folder.mkdir()
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (folder / "namespace").write_text("placer-system\n")
    return folder


async def test_in_cluster(tmp_path: Path) -> None:
    folder = service_account(tmp_path / "sa")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    configuration = await load_configuration(environ=environ, service_account=folder)
    assert (configuration.host, configuration.ssl_ca_cert, configuration.namespace) == (
        "https://10.96.0.1:443", str(folder / "ca.crt"), "placer-system")
    assert await header(configuration) == "Bearer sa-token"
    (folder / "token").write_text("rotated")  # the kubelet rotates projected tokens
    hook = configuration.refresh_api_key_hook
    assert isinstance(hook, TokenFile)
    hook.period = 0.0
    assert await header(configuration) == "Bearer rotated"
    ipv6 = load_incluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, folder)
    assert ipv6.host == "https://[fd00::1]:443"


async def test_in_cluster_problems(tmp_path: Path) -> None:
    folder = service_account(tmp_path / "sa")
    with pytest.raises(ConfigError, match="not in a pod"):
        load_incluster({}, folder)
    with pytest.raises(ConfigError, match="set but empty"):
        load_incluster({"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": "443"}, folder)
    (folder / "ca.crt").write_text("")
    with pytest.raises(ConfigError, match=r"CA .* is empty"):
        load_incluster({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "443"}, folder)


async def test_an_explicit_kubeconfig_wins_over_in_cluster_and_home_is_the_last_resort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = service_account(tmp_path / "sa")
    path = kubeconfig(tmp_path / "kc", cluster={"server": "http://pointed-at"})
    pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert (await load_configuration(environ={**pod, "KUBECONFIG": str(path)}, service_account=folder)).host == (
        "http://pointed-at")
    assert (await load_configuration(str(path), environ=pod, service_account=folder)).host == "http://pointed-at"
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", cluster={"server": "http://home"})
    assert (await load_configuration(environ={}, service_account=folder)).host == "http://home"


# ----------------------------------------------------------------------------------- certificates from data


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A CA, a server certificate for 127.0.0.1 and two client certificates (CN client, client2), all
    signed by the CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path / "pki"
    folder.mkdir()
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
             "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=folder)
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth"),
                            ("client2", "extendedKeyUsage=clientAuth")):
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
                 f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=folder)
        (folder / f"{name}.ext").write_text(extension + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=folder)
    return folder


@pytest.fixture
async def tls_server(pki: Path) -> AsyncIterator[tuple[str, list[str]]]:
    """An HTTPS server that requires a client certificate of the CA; answers /version with the
    client certificate's subject and records each request's Authorization header."""
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        return web.json_response({"major": "1", "minor": "36", "peer": str(peer)})

    app = web.Application()
    app.router.add_get("/version", version)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    context.verify_mode = ssl.CERT_REQUIRED
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"https://127.0.0.1:{port}", seen
    await runner.cleanup()


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


async def test_certificates_from_data_reach_a_tls_server(
    tmp_path: Path, pki: Path, tls_server: tuple[str, list[str]]
) -> None:
    url, seen = tls_server
    path = kubeconfig(tmp_path / "kc", cluster={"server": url, "certificate-authority-data": b64(pki / "ca.crt")},
                      user={"client-certificate-data": b64(pki / "client.crt"),
                            "client-key-data": b64(pki / "client.key"), "token": "t"})
    configuration = await load_kubeconfig(str(path))
    for name, source in ((configuration.ssl_ca_cert, "ca.crt"), (configuration.cert_file, "client.crt"),
                         (configuration.key_file, "client.key")):
        assert name is not None and Path(name).read_bytes() == (pki / source).read_bytes()
        assert Path(name).stat().st_mode & 0o077 == 0  # private: the key is in one of them
    client = KubeClient(configuration, retries=0)
    try:
        assert await client.ping()
    finally:
        await client.close()
    assert seen == ["Bearer t"]
    # the same files by path work too (relative to the kubeconfig)
    path = kubeconfig(tmp_path / "pki" / "kc", cluster={"server": url, "certificate-authority": "ca.crt"},
                      user={"client-certificate": "client.crt", "client-key": "client.key"})
    by_path = await load_kubeconfig(str(path))
    assert by_path.ssl_ca_cert == str(pki / "ca.crt")
    client = KubeClient(by_path, retries=0)
    try:
        assert await client.ping()
    finally:
        await client.close()


# ----------------------------------------------------------------------------------- exec plugins

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"

# The plugin of these tests: each run records what it was given (KUBERNETES_EXEC_INFO, the PLUGIN_*
# variables, its arguments, its pid), then answers with the next of the replies in replies.json (the
# last one again once they run out): stdout (a string as it is, else as JSON), stderr, exit code,
# seconds to sleep first.
PLUGIN = textwrap.dedent("""\
    import json, os, pathlib, sys, time
    folder = pathlib.Path(sys.argv[1])
    run = len(list(folder.glob("run-*.json"))) + 1
    (folder / f"run-{run}.json").write_text(json.dumps({
        "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]), "args": sys.argv[2:], "pid": os.getpid(),
        "env": {name: value for name, value in os.environ.items() if name.startswith("PLUGIN_")}}))
    replies = json.loads((folder / "replies.json").read_text())
    reply = replies[min(run, len(replies)) - 1]
    time.sleep(reply.get("sleep", 0))
    sys.stderr.write(reply.get("stderr", ""))
    out = reply.get("stdout", "")
    sys.stdout.write(out if isinstance(out, str) else json.dumps(out))
    sys.exit(reply.get("exit", 0))
""")


def timestamp(seconds_from_now: float) -> str:
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def credential(token: str | None = None, *, version: str = V1, expires_in: float | None = None,
               cert: str | None = None, key: str | None = None) -> dict[str, Any]:
    """An ExecCredential as a plugin prints it."""
    status: dict[str, Any] = {}
    if token is not None:
        status["token"] = token
    if cert is not None:
        status["clientCertificateData"] = cert
    if key is not None:
        status["clientKeyData"] = key
    if expires_in is not None:
        status["expirationTimestamp"] = timestamp(expires_in)
    return {"apiVersion": version, "kind": "ExecCredential", "status": status}


def plugin(folder: Path, replies: list[dict[str, Any]]) -> dict[str, Any]:
    """The exec stanza of the test plugin answering `replies` (records in `folder`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugin.py").write_text(PLUGIN)
    (folder / "replies.json").write_text(json.dumps(replies))
    return {"apiVersion": V1, "command": sys.executable,
            "args": [str(folder / "plugin.py"), str(folder), "--audience=placer"],
            "interactiveMode": "Never"}


def runs(folder: Path) -> list[dict[str, Any]]:
    """What each run of the plugin was given, in order."""
    count = len(list(folder.glob("run-*.json")))
    return [json.loads((folder / f"run-{n}.json").read_text()) for n in range(1, count + 1)]


async def load_exec(tmp_path: Path, replies: list[dict[str, Any]], *, cluster: dict[str, Any] | None = None,
                    **stanza: Any) -> tuple[Configuration, Path]:
    folder = tmp_path / "plugin"
    user = {"exec": {**plugin(folder, replies), **stanza}}
    path = kubeconfig(tmp_path / "kc", cluster=cluster or {"server": "http://127.0.0.1:1"}, user=user)
    return await load_kubeconfig(str(path)), folder


@pytest.mark.parametrize("version", [V1, V1BETA1])
async def test_an_exec_plugin_token(tmp_path: Path, version: str) -> None:
    configuration, folder = await load_exec(
        tmp_path, [{"stdout": credential("exec-1", version=version)}], apiVersion=version)
    assert isinstance(configuration.refresh_api_key_hook, ExecCredentials)
    assert await header(configuration) == "Bearer exec-1"
    assert await header(configuration) == "Bearer exec-1"  # no expiry: kept for the process's life
    assert (await connection_info(configuration)).token == "exec-1"  # Kopf's login too
    [only] = runs(folder)
    assert only["info"] == {"kind": "ExecCredential", "apiVersion": version, "spec": {"interactive": False}}
    assert only["args"] == ["--audience=placer"]
    assert "exec-1" not in repr(configuration) and "exec-1" not in repr(configuration.refresh_api_key_hook)


async def test_an_expired_credential_is_fetched_again_once_for_callers_at_the_same_time(tmp_path: Path) -> None:
    configuration, folder = await load_exec(tmp_path, [
        {"stdout": credential("exec-1", expires_in=-60)},  # expired already
        {"stdout": credential("exec-2", expires_in=3600), "sleep": 0.3},  # callers pile up meanwhile
    ])
    assert len(runs(folder)) == 1
    assert await asyncio.gather(*(header(configuration) for _ in range(5))) == ["Bearer exec-2"] * 5
    assert await header(configuration) == "Bearer exec-2"  # valid for an hour: not run again
    assert len(runs(folder)) == 2


async def test_a_failed_run_is_shared_by_its_waiters_then_tried_again(tmp_path: Path) -> None:
    configuration, folder = await load_exec(tmp_path, [
        {"stdout": credential("exec-1", expires_in=-60)},
        {"exit": 2, "stderr": "the identity provider is down\n", "sleep": 0.2},
        {"stdout": credential("exec-3")},
    ])
    results = await asyncio.gather(*(header(configuration) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(result, CredentialError) for result in results)
    message = str(results[0])
    assert message.startswith(f"getting credentials: exec: executable {sys.executable} failed with exit code 2")
    assert message.endswith("the identity provider is down")
    assert len(runs(folder)) == 2  # one run for the three
    assert await header(configuration) == "Bearer exec-3"  # the next call runs it again


async def start_server(app: web.Application, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"


async def test_a_401_has_the_plugin_run_again_before_the_next_call(tmp_path: Path) -> None:
    """client-go: a 401 to a call made with the plugin's credential has it fetched again; a 401 to
    a credential already replaced does not. Calls and watches alike."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") in ("Bearer exec-1", "Bearer exec-2"):  # revoked
            return web.json_response({"kind": "Status", "message": "Unauthorized"}, status=401)
        return web.json_response({"items": []})

    app = web.Application()
    app.router.add_get("/version", answer)
    app.router.add_get("/api/v1/pods", answer)
    runner, url = await start_server(app)
    try:
        configuration, folder = await load_exec(tmp_path, [{"stdout": credential(f"exec-{n}")} for n in (1, 2, 3)],
                                                cluster={"server": url})
        client = KubeClient(configuration, retries=0)
        try:
            assert (await client.request("GET", "/version")).status == 401
            assert len(runs(folder)) == 1
            refused_serial = configuration.credential_serial
            with pytest.raises(ApiError) as refused:  # a watch refused: the same rule
                async for _ in client.watch("/api/v1/pods", [], connect_timeout=5, read_timeout=5):
                    pass
            assert refused.value.status == 401
            assert len(runs(folder)) == 2  # the 401 above had exec-1 fetched again before this watch
            assert (await client.request("GET", "/version")).status == 200
            assert len(runs(folder)) == 3
            configuration.credentials_rejected(refused_serial)  # a late 401 of a replaced credential
            assert (await client.request("GET", "/version")).status == 200
            assert len(runs(folder)) == 3
        finally:
            await client.close()
    finally:
        await runner.cleanup()
    assert seen == ["Bearer exec-1", "Bearer exec-2", "Bearer exec-3", "Bearer exec-3"]


async def test_kopfs_login_after_a_401_has_the_plugin_run_again(tmp_path: Path) -> None:
    """Kopf logs in again after its own call got a 401: the credential it was handed is told refused,
    so the plugin runs again and Kopf gets the new one (not the same, not-yet-expired token)."""
    configuration, folder = await load_exec(tmp_path, [{"stdout": credential(f"exec-{n}")} for n in (1, 2)])
    login = KopfLogin()
    assert (await login(configuration)).token == "exec-1"
    assert len(runs(folder)) == 1
    assert (await login(configuration)).token == "exec-2"  # Kopf's second login: after a 401
    assert len(runs(folder)) == 2


async def test_exec_client_certificates_reach_tls_and_a_renewed_one_is_used_by_new_connections(
    tmp_path: Path, pki: Path
) -> None:
    """The plugin gives a certificate (no token); the server refuses the first one (401); the
    plugin's second certificate goes to the transport, whose next connection presents it."""
    peers: list[str] = []
    connections: set[int] = set()

    async def version(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        common_name = dict(item[0] for item in (peer or {}).get("subject", ()))["commonName"]
        peers.append(common_name)
        connections.add(id(request.transport))
        assert "Authorization" not in request.headers
        if common_name == "client":
            return web.json_response({"kind": "Status", "message": "Unauthorized"}, status=401)
        return web.json_response({"major": "1", "minor": "36"})

    app = web.Application()
    app.router.add_get("/version", version)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    context.verify_mode = ssl.CERT_REQUIRED
    runner, url = await start_server(app, context)
    try:
        pair = {name: ((pki / f"{name}.crt").read_text(), (pki / f"{name}.key").read_text())
                for name in ("client", "client2")}
        configuration, folder = await load_exec(
            tmp_path, [{"stdout": credential(cert=cert, key=key)} for cert, key in (pair["client"], pair["client2"])],
            cluster={"server": url, "certificate-authority-data": b64(pki / "ca.crt")})
        assert configuration.cert_file is not None and configuration.key_file is not None
        assert Path(configuration.cert_file).read_text() == pair["client"][0]
        assert Path(configuration.key_file).stat().st_mode & 0o077 == 0
        info = await connection_info(configuration)
        assert (info.certificate_path, info.private_key_path, info.token) == (
            configuration.cert_file, configuration.key_file, None)
        client = KubeClient(configuration, retries=0)
        try:
            assert (await client.request("GET", "/version")).status == 401
            assert (await client.request("GET", "/version")).status == 200
            assert (await client.request("GET", "/version")).status == 200  # the new connection, kept alive
        finally:
            await client.close()
    finally:
        await runner.cleanup()
    assert peers == ["client", "client2", "client2"]
    assert len(connections) == 2  # the first certificate's connection was not reused
    assert len(runs(folder)) == 2
    assert Path(configuration.cert_file).read_text() == pair["client2"][0]


async def test_a_busy_connection_of_a_replaced_tls_context_ends_its_reply_then_closes(pki: Path) -> None:
    """HttpClient.use_tls_context while a request is in flight: its reply comes whole on the old
    connection, which is then closed rather than reused; the next request opens one with the new
    certificate."""
    peers: list[tuple[str, int]] = []

    async def answer(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        peers.append((dict(item[0] for item in peer["subject"])["commonName"], id(request.transport)))
        if request.path == "/slow":
            await asyncio.sleep(0.3)
        return web.json_response({"path": request.path})

    app = web.Application()
    app.router.add_get("/{name}", answer)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    server_context.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    server_context.verify_mode = ssl.CERT_REQUIRED
    runner, url = await start_server(app, server_context)

    def context(name: str) -> ssl.SSLContext:
        return tls_context(ca_file=str(pki / "ca.crt"), cert_file=str(pki / f"{name}.crt"),
                           key_file=str(pki / f"{name}.key"), verify=True)

    client = HttpClient(url, ssl_context=context("client"))
    try:
        slow = asyncio.ensure_future(client.request(client.encode("GET", "/slow", "", None), 5.0))
        await asyncio.sleep(0.1)  # in flight
        client.use_tls_context(context("client2"))
        assert (await slow).status == 200
        assert (await client.request(client.encode("GET", "/version", "", None), 5.0)).status == 200
        assert (await client.request(client.encode("GET", "/version", "", None), 5.0)).status == 200
    finally:
        await client.close()
        await runner.cleanup()
    assert [name for name, _ in peers] == ["client", "client2", "client2"]
    assert peers[0][1] != peers[1][1] == peers[2][1]


@pytest.mark.parametrize(("mode", "terminal", "expected"), [
    ("Never", True, False),
    ("IfAvailable", False, False),  # `placer run` in a pod: no terminal, run without one
    ("IfAvailable", True, True),
    ("Always", True, True),
    ("Always", False, "exec plugin cannot support interactive mode: standard input is not a terminal"),
])
async def test_interactive_mode(tmp_path: Path, mode: str, terminal: bool, expected: bool | str) -> None:
    stanza = {**plugin(tmp_path / "plugin", [{"stdout": credential("t")}]), "interactiveMode": mode}
    authenticator = ExecAuthenticator(read_exec_config(stanza, user="u", folder=str(tmp_path)),
                                      stdin_is_terminal=lambda: terminal)
    if isinstance(expected, str):
        with pytest.raises(ExecCredentialError, match=expected):
            await authenticator.refresh()
        assert runs(tmp_path / "plugin") == []
        return
    assert (await authenticator.refresh()).token == "t"
    assert runs(tmp_path / "plugin")[0]["info"]["spec"] == {"interactive": expected}


def test_v1beta1_defaults_to_if_available_and_v1_requires_a_mode(tmp_path: Path) -> None:
    stanza = {"command": "p", "apiVersion": V1BETA1}
    assert read_exec_config(stanza, user="u", folder="/").interactive_mode == "IfAvailable"
    with pytest.raises(ValueError, match="interactiveMode must be specified for u to use exec authentication plugin"):
        read_exec_config({**stanza, "apiVersion": V1}, user="u", folder="/")


@pytest.mark.parametrize(("stanza", "message"), [
    ({"apiVersion": "client.authentication.k8s.io/v1alpha1"},
     'exec plugin: invalid apiVersion "client.authentication.k8s.io/v1alpha1"'),
    ({"apiVersion": "example.com/v1"}, 'exec plugin: invalid apiVersion "example.com/v1"'),
    ({"apiVersion": None}, "apiVersion must be specified for c to use exec authentication plugin"),
    ({"command": ""}, "command must be specified for c to use exec authentication plugin"),
    ({"interactiveMode": "Sometimes"}, 'invalid interactiveMode for c: "Sometimes"'),
    ({"env": [{"value": "x"}]}, "env variable name must be specified for c to use exec authentication plugin"),
    ({"args": "--one"}, "args must be a list of strings"),
    ({"provideClusterInfo": "yes"}, "provideClusterInfo must be true or false"),
])
async def test_bad_exec_stanzas_say_what_client_go_says(tmp_path: Path, stanza: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        await load_exec(tmp_path, [{"stdout": credential("t")}], **stanza)
    assert str(error.value).startswith(f"{tmp_path / 'kc'}: user 'c': ")
    assert runs(tmp_path / "plugin") == []


async def test_exec_and_auth_provider_together_are_refused(tmp_path: Path) -> None:
    user = {"exec": plugin(tmp_path / "plugin", []), "auth-provider": {"name": "oidc", "config": {}}}
    path = kubeconfig(tmp_path / "kc", cluster={"server": "http://api"}, user=user)
    with pytest.raises(ConfigError, match="authProvider cannot be provided in combination with an exec plugin for c"):
        await load_kubeconfig(str(path))


async def test_a_user_with_a_token_of_its_own_does_not_run_its_plugin(tmp_path: Path) -> None:
    """client-go: `kubectl --token` and the like win over the plugin (it is not run at all)."""
    stanza = plugin(tmp_path / "plugin", [{"stdout": credential("from-plugin")}])
    path = kubeconfig(tmp_path / "kc", cluster={"server": "http://api"}, user={"token": "own", "exec": stanza})
    configuration = await load_kubeconfig(str(path))
    assert (await header(configuration), runs(tmp_path / "plugin")) == ("Bearer own", [])


async def test_a_missing_command_says_so_with_its_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    hint = "Install it with: brew install placer-login\x1b[1m"
    with pytest.raises(ConfigError) as error:
        await load_exec(tmp_path, [], command="placer-login", installHint=hint)
    message = str(error.value)
    assert "getting credentials: exec: executable placer-login not found" in message
    assert "It looks like you are trying to use a client-go credential plugin that is not installed." in message
    assert message.endswith("Install it with: brew install placer-loginU+001B[1m")  # escapes made harmless
    with pytest.raises(ConfigError, match=f"exec: executable {re.escape(str(tmp_path / 'bin' / 'nope'))} not found"):
        await load_exec(tmp_path, [], command="bin/nope")  # a path: relative to the kubeconfig


async def test_a_command_by_path_relative_to_the_kubeconfig_or_by_name_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plugin"
    stanza = plugin(folder, [{"stdout": credential("t")}])
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "placer-test-login"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for command in ("bin/placer-test-login", "placer-test-login"):
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
        user = {"exec": {**stanza, "command": command}}
        configuration = await load_kubeconfig(str(kubeconfig(tmp_path / "kc", cluster={"server": "http://a"},
                                                             user=user)))
        assert await header(configuration) == "Bearer t"
    assert len(runs(folder)) == 2


async def test_a_failing_command_reports_its_exit_code_and_standard_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        await load_exec(tmp_path, [{"exit": 3, "stderr": "error: you must log in first (run: acme login)\n",
                                    "stdout": credential("half-written")}])
    message = str(error.value)
    assert f"getting credentials: exec: executable {sys.executable} failed with exit code 3: " in message
    assert message.endswith("error: you must log in first (run: acme login)")
    assert "half-written" not in message


CERT_ONLY_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(("stdout", "message"), [
    ("token: s3cret", "decoding stdout: not JSON"),
    ("[]", "decoding stdout: not a JSON object"),
    (credential("s3cret", version=V1BETA1),
     f"exec plugin is configured to use API version {V1}, plugin returned version {V1BETA1}"),
    ({"kind": "ExecCredential", "status": {"token": "s3cret"}}, "decoding stdout: Object 'apiVersion' is missing"),
    ({"apiVersion": V1, "status": {"token": "s3cret"}}, "decoding stdout: Object 'Kind' is missing"),
    ({"apiVersion": V1, "kind": "Secret", "status": {"token": "s3cret"}},
     f'decoding stdout: no kind "Secret" is registered for version "{V1}"'),
    ({"apiVersion": V1, "kind": "ExecCredential"}, "exec plugin didn't return a status field"),
    (credential(), "exec plugin didn't return a token or cert/key pair"),
    (credential(cert=CERT_ONLY_PEM), "exec plugin returned only certificate or key, not both"),
    (credential("s3cret", key="-----BEGIN PRIVATE KEY-----\n"),
     "exec plugin returned only certificate or key, not both"),
    (credential(cert=CERT_ONLY_PEM, key="not a key"), "failed parsing client key/certificate"),
    ({**credential("s3cret"), "status": {"token": "s3cret", "expirationTimestamp": "tomorrow"}},
     'decoding stdout: status.expirationTimestamp: not an RFC 3339 time: "tomorrow"'),
    ({**credential(), "status": {"token": 42}}, "decoding stdout: status.token must be a string"),
])
async def test_bad_plugin_output_is_refused_without_quoting_it(
    tmp_path: Path, stdout: str | dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        await load_exec(tmp_path, [{"stdout": stdout}])
    assert f"getting credentials: {message}" in str(error.value)
    assert "s3cret" not in str(error.value)


async def test_the_plugins_environment_is_placers_with_the_stanzas_on_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGIN_FROM_PLACER", "placer")
    monkeypatch.setenv("PLUGIN_BOTH", "placer")
    _, folder = await load_exec(tmp_path, [{"stdout": credential("t")}], env=[
        {"name": "PLUGIN_FROM_STANZA", "value": "stanza"}, {"name": "PLUGIN_BOTH", "value": "stanza"},
        {"name": "PLUGIN_EMPTY"}])
    assert runs(folder)[0]["env"] == {"PLUGIN_FROM_PLACER": "placer", "PLUGIN_FROM_STANZA": "stanza",
                                      "PLUGIN_BOTH": "stanza", "PLUGIN_EMPTY": ""}


async def test_provide_cluster_info(tmp_path: Path) -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"
    (tmp_path / "ca.crt").write_bytes(ca)
    cluster = {
        "server": "https://api.example:6443", "tls-server-name": "api.internal", "certificate-authority": "ca.crt",
        "proxy-url": "http://proxy:3128", "disable-compression": True,
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "placer"}},
                       {"name": "other", "extension": {"ignored": True}}],
    }
    _, folder = await load_exec(tmp_path, [{"stdout": credential("t")}], cluster=cluster, provideClusterInfo=True)
    assert runs(folder)[0]["info"] == {"kind": "ExecCredential", "apiVersion": V1, "spec": {
        "cluster": {"server": "https://api.example:6443", "tls-server-name": "api.internal",
                    "certificate-authority-data": base64.b64encode(ca).decode(), "proxy-url": "http://proxy:3128",
                    "disable-compression": True, "config": {"audience": "placer"}},
        "interactive": False}}
    insecure = {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}
    _, folder = await load_exec(tmp_path / "insecure", [{"stdout": credential("t")}], cluster=insecure,
                                provideClusterInfo=True)
    assert runs(folder)[0]["info"]["spec"]["cluster"] == {"server": "https://10.0.0.1:6443",
                                                          "insecure-skip-tls-verify": True}
    (tmp_path / "without").mkdir()
    (tmp_path / "without" / "ca.crt").write_bytes(ca)
    _, folder = await load_exec(tmp_path / "without", [{"stdout": credential("t")}], cluster=cluster)
    assert runs(folder)[0]["info"]["spec"] == {"interactive": False}  # not asked for: not given


async def test_a_plugin_that_hangs_is_killed_after_the_timeout(tmp_path: Path) -> None:
    stanza = plugin(tmp_path / "plugin", [{"stdout": credential("t"), "sleep": 60}])
    authenticator = ExecAuthenticator(read_exec_config(stanza, user="u", folder=str(tmp_path)), timeout=0.5)
    started = time.monotonic()
    with pytest.raises(ExecCredentialError, match=r"did not finish within 0.5s: killed"):
        await authenticator.refresh()
    assert time.monotonic() - started < 10
    for _ in range(100):  # (the record is written as the plugin starts)
        if runs(tmp_path / "plugin"):
            break
        await asyncio.sleep(0.05)
    with pytest.raises(ProcessLookupError):
        os.kill(runs(tmp_path / "plugin")[0]["pid"], 0)  # killed and reaped
    assert authenticator.credential is None and authenticator.needs_refresh()


# ----------------------------------------------------------------------------------- auth-provider, the extra


def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.signature"


async def test_an_auth_provider_user_goes_through_kubernetes_asyncio(tmp_path: Path) -> None:
    id_token = jwt({"sub": "placer", "exp": int(time.time()) + 3600})
    path = kubeconfig(tmp_path / "kc", cluster={"server": "https://api:6443", "insecure-skip-tls-verify": True},
                      user={"auth-provider": {"name": "oidc", "config": {
                          "client-id": "placer", "idp-issuer-url": "https://idp.example", "id-token": id_token}}},
                      namespace="ns")
    configuration = await load_kubeconfig(str(path))
    assert (configuration.host, configuration.verify_ssl, configuration.namespace) == (
        "https://api:6443", False, "ns")
    assert await header(configuration) == f"Bearer {id_token}"


def test_without_the_extra_placer_never_imports_kubernetes_asyncio(tmp_path: Path) -> None:
    """In a fresh interpreter where kubernetes_asyncio cannot be imported (as when the extra is not
    installed; a finder refuses it and records who asked): importing `placer run`'s modules and Kopf,
    then loading a kubeconfig with an exec plugin, never has a module of Placer's ask for it (Kopf
    does: it would import the generated client if it could); an auth-provider user is a ConfigError
    telling which extra to install."""
    exec_path = kubeconfig(tmp_path / "exec", cluster={"server": "http://api"},
                           user={"exec": plugin(tmp_path / "plugin", [{"stdout": credential("t")}])})
    provider_path = kubeconfig(tmp_path / "provider", cluster={"server": "http://api"},
                               user={"auth-provider": {"name": "oidc", "config": {"id-token": "x.y.z"}}})
    script = textwrap.dedent(f"""\
        import asyncio, importlib.abc, json, sys

        asked = []

        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] != "kubernetes_asyncio":
                    return None
                frame = sys._getframe(1)
                while frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
                    frame = frame.f_back
                asked.append(frame.f_globals.get("__name__"))
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

        sys.meta_path.insert(0, Refuse())
        import kopf
        import placer.controller.main
        from placer.controller.transport import ConfigError, load_configuration

        configuration = asyncio.run(load_configuration({str(exec_path)!r}))
        try:
            asyncio.run(load_configuration({str(provider_path)!r}))
            provider_error = None
        except ConfigError as error:
            provider_error = str(error)
        print(json.dumps({{"asked": asked, "loaded": "kubernetes_asyncio" in sys.modules,
                          "token": configuration.api_key.get("BearerToken"), "provider_error": provider_error}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["loaded"] is False
    assert report["token"] == "Bearer t"
    assert "kopf._cogs.helpers.thirdparty" in report["asked"]  # the finder works: Kopf probed for it
    placer_asked = [name for name in report["asked"] if name.startswith("placer")]
    assert placer_asked == ["placer.controller.transport.kubeconfig"]  # for the auth-provider user only, then
    assert "auth-provider 'oidc'" in report["provider_error"]
    assert "pip install 'placer[auth-provider]'" in report["provider_error"]


def kubernetes_asyncio_imports(node: ast.AST, enclosing: str = "<module>") -> Iterator[str]:
    """The function (or "<module>") around each import of kubernetes_asyncio under `node`."""
    for child in ast.iter_child_nodes(node):
        names = ([alias.name for alias in child.names] if isinstance(child, ast.Import)
                 else [child.module or ""] if isinstance(child, ast.ImportFrom) else [])
        if any(name.split(".")[0] == "kubernetes_asyncio" for name in names):
            yield enclosing
        inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else enclosing
        yield from kubernetes_asyncio_imports(child, inner)


def test_only_the_auth_provider_loader_imports_kubernetes_asyncio() -> None:
    """Nothing of Placer's imports kubernetes_asyncio at module level: only the auth-provider loader,
    inside its function, so that `placer run` without the extra never needs it."""
    package = Path(__file__).resolve().parents[2] / "operator" / "placer"
    found = {(path.name, where) for path in package.rglob("*.py")
             for where in kubernetes_asyncio_imports(ast.parse(path.read_text(encoding="utf-8")))}
    assert found == {("kubeconfig.py", "_load_with_client")}
