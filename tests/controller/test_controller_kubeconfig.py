"""Placer's own kubeconfig and in-cluster loader (`placer.controller.transport.kubeconfig`): what it reads, how
a token rotates, certificates from data, the exec-plugin fallback, and that `placer run` never
imports kubernetes_asyncio's generated client."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from placer.controller.lifecycle.kopf_handlers import connection_info
from placer.controller.transport.client import KubeClient
from placer.controller.transport.kubeconfig import (
    ConfigError,
    Configuration,
    TokenFile,
    load_configuration,
    load_incluster,
    load_kubeconfig,
)


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
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path / "pki"
    folder.mkdir()
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
             "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=folder)
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
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


EXEC_PLUGIN = textwrap.dedent("""\
    import datetime, json, pathlib, sys
    counter = pathlib.Path(sys.argv[1])
    runs = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(runs))
    lifetime = datetime.timedelta(minutes=-1 if runs == 1 else 60)  # the first credential is expired already
    expiry = datetime.datetime.now(datetime.timezone.utc) + lifetime
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                      "status": {"token": f"exec-{runs}",
                                 "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
""")


async def test_an_exec_plugin_user_goes_through_kubernetes_asyncio(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(EXEC_PLUGIN)
    counter = tmp_path / "runs"
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                          "args": [str(plugin), str(counter)], "interactiveMode": "Never"}}
    path = kubeconfig(tmp_path / "kc", cluster={"server": "https://api:6443", "insecure-skip-tls-verify": True},
                      user=exec_user, namespace="ns")
    configuration = await load_kubeconfig(str(path))
    assert isinstance(configuration, Configuration)
    assert (configuration.host, configuration.verify_ssl, configuration.namespace) == (
        "https://api:6443", False, "ns")
    assert counter.read_text() == "1"
    # the credential has expired: fetched again, once, however many ask at the same time
    assert await asyncio.gather(*(header(configuration) for _ in range(3))) == ["Bearer exec-2"] * 3
    assert await header(configuration) == "Bearer exec-2"  # valid for an hour: not run again
    assert counter.read_text() == "2"
    assert (await connection_info(configuration)).token == "exec-2"


def test_the_kubeconfig_loads_without_the_generated_client(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", cluster={"server": "http://api"}, user={"token": "x"})
    script = textwrap.dedent(f"""\
        import asyncio, json, sys
        from placer.controller.transport.kubeconfig import load_kubeconfig
        configuration = asyncio.run(load_kubeconfig({str(path)!r}))
        print(json.dumps([configuration.host, "kubernetes_asyncio" in sys.modules]))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["http://api", False]
