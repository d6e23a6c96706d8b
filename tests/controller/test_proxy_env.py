"""placer.controller.transport.proxy_env: the proxy chosen as client-go chooses it (Go's httpproxy rules), and
the KubeClient and `placer run` using it.

The tables are ported from golang/net `http/httpproxy/proxy_test.go` at commit
0ca694d2a5adcce7f36d4d65e5f8d72390d94051 (`proxyForURLTests`, `UseProxyTests` with its `noProxy`,
`TestFromEnvironment*`, `TestInvalidNoProxy`, `TestAllNoProxy`), every row; where Placer differs on
purpose (a scheme its transport cannot speak is a start-up error) the row says so.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from placer.controller.transport.client import KubeClient
from placer.controller.transport.kubeconfig import ConfigError, Configuration, load_kubeconfig
from placer.controller.transport.proxy_env import CGI_REFUSAL, ProxyConfig, ProxyError, proxy_for, redact

from tests.controller.netfixtures import Proxy, make_certs
from tests.kubeemu.emulator import kubeconfig_text

ERROR = "error"  # the row raises ProxyError

# (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, CGI, request URL ("" = http://example.com), wanted proxy or None)
PROXY_FOR_URL = [
    ("127.0.0.1:8080", "", "", False, "", "http://127.0.0.1:8080"),
    ("cache.corp.example.com:1234", "", "", False, "", "http://cache.corp.example.com:1234"),
    ("cache.corp.example.com", "", "", False, "", "http://cache.corp.example.com"),
    ("localhost", "", "", False, "", "http://localhost"),  # a single label parses as a scheme in Go
    ("https://cache.corp.example.com", "", "", False, "", "https://cache.corp.example.com"),
    ("http://127.0.0.1:8080", "", "", False, "", "http://127.0.0.1:8080"),
    ("https://127.0.0.1:8080", "", "", False, "", "https://127.0.0.1:8080"),
    ("socks5://127.0.0.1", "", "", False, "", "socks5://127.0.0.1"),
    # Go keeps an unknown scheme ("foo://host") and its transport then fails every request; Placer
    # says so at start-up
    ("foo://host", "", "", False, "", ERROR),
    ("http.proxy.tld", "secure.proxy.tld", "", False, "http://insecure.tld/", "http://http.proxy.tld"),
    ("http.proxy.tld", "secure.proxy.tld", "", False, "https://secure.tld/", "http://secure.proxy.tld"),
    ("http.proxy.tld", "https://secure.proxy.tld", "", False, "https://secure.tld/", "https://secure.proxy.tld"),
    ("http.proxy.tld", "", "", False, "https://secure.tld/", None),
    ("http.proxy.tld", "", "", False, "ftp://insecure.tld/", None),
    ("http://10.1.2.3:8080", "", "", True, "", ERROR),  # CGI: HTTP_PROXY may be the client's doing
    ("", "https://secure.proxy.tld", "", True, "https://secure.tld/", "https://secure.proxy.tld"),
    ("", "", "", False, "", None),
    ("proxy", "", "example.com", False, "http://example.com/", None),
    ("proxy", "", ".example.com", False, "http://example.com/", "http://proxy"),
    ("proxy", "", "ample.com", False, "http://example.com/", "http://proxy"),
    ("proxy", "", "example.com", False, "http://foo.example.com/", None),
    ("proxy", "", ".foo.com", False, "http://example.com/", "http://proxy"),
    ("proxy", "", ".示例.com", False, "http://www.示例.com", None),
    ("proxy", "", "xn--fsq092h.com", False, "http://www.示例.com", None),
    ("proxy", "", "示例.com", False, "http://www.xn--fsq092h.com", None),
    ("proxy", "", "example.com", False, "http://[1000::%25.example.com]:123", "http://proxy"),
]


@pytest.mark.parametrize(("http_proxy", "https_proxy", "no_proxy", "cgi", "url", "want"), PROXY_FOR_URL)
def test_go_proxy_for_url_table(http_proxy: str, https_proxy: str, no_proxy: str, cgi: bool, url: str,
                                want: str | None) -> None:
    environ = {"HTTP_PROXY": http_proxy, "HTTPS_PROXY": https_proxy, "NO_PROXY": no_proxy}
    if cgi:
        environ["REQUEST_METHOD"] = "GET"
    if want == ERROR:
        with pytest.raises(ProxyError):
            proxy_for(url or "http://example.com", environ)
    else:
        assert proxy_for(url or "http://example.com", environ) == want


def test_cgi_refusal_has_gos_words() -> None:
    with pytest.raises(ProxyError, match=r"^refusing to use HTTP_PROXY value in CGI environment"):
        proxy_for("http://example.com", {"HTTP_PROXY": "http://10.1.2.3:8080", "REQUEST_METHOD": "PUT"})
    assert CGI_REFUSAL.endswith("see golang.org/s/cgihttpproxy")


GO_NO_PROXY = ("foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, 10.0.0.0/30, "
               "2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, 2002:db8:a::45/64")
USE_PROXY = [  # (host, proxied) for host:80
    ("localhost", False), ("127.0.0.1", False), ("127.0.0.2", False), ("[::1]", False),
    ("[::2]", True),  # not a loopback address
    ("192.168.1.1", False),  # matches exact IPv4
    ("192.168.1.2", True),  # ports do not match
    ("192.168.1.3", False),  # matches exact IPv4:port
    ("192.168.1.4", True),  # no match
    ("10.0.0.2", False),  # matches IPv4/CIDR
    ("[2001:db8::52:0:1]", False),  # matches exact IPv6
    ("[2001:db8::52:0:2]", True),  # no match
    ("[2001:db8::52:0:3]", False),  # matches exact [IPv6]:port
    ("[2002:db8:a::123]", False),  # matches IPv6/CIDR
    ("[fe80::424b:c8be:1643:a1b6]", True),  # no match
    ("barbaz.net", True),  # does not match as .barbaz.net
    ("www.barbaz.net", False),  # does match as .barbaz.net
    ("foobar.com", False),  # does match as foobar.com
    ("www.foobar.com", False),  # match because NO_PROXY includes "foobar.com"
    ("foofoobar.com", True),  # not match as a part of foobar.com
    ("baz.com", True),  # not match as a part of barbaz.com
    ("localhost.net", True),  # not match as suffix of address
    ("local.localhost", True),  # not match as prefix as address
    ("barbarbaz.net", True),  # not match, wrong domain
    ("wildcard.io", True),  # does not match as *.wildcard.io
    ("nested.wildcard.io", False),  # match as *.wildcard.io
    ("awildcard.io", True),  # not a match because of '*'
]


@pytest.mark.parametrize(("host", "proxied"), USE_PROXY)
def test_go_use_proxy_table(host: str, proxied: bool) -> None:
    environ = {"HTTP_PROXY": "http://proxy.example.org", "NO_PROXY": GO_NO_PROXY}
    assert (proxy_for(f"http://{host}:80", environ) is not None) is proxied
    assert proxy_for(f"http://{host}:80", {**environ, "NO_PROXY": "*"}) is None  # TestAllNoProxy


def test_a_malformed_no_proxy_entry_is_skipped() -> None:  # TestInvalidNoProxy
    assert proxy_for("http://example.com", {"HTTP_PROXY": "proxy", "NO_PROXY": ":1"}) == "http://proxy"


def test_from_environment_uppercase_first_then_lowercase() -> None:
    upper = {"HTTP_PROXY": "httpproxy", "HTTPS_PROXY": "httpsproxy", "NO_PROXY": "noproxy", "REQUEST_METHOD": ""}
    assert ProxyConfig.from_environment(upper) == ProxyConfig("httpproxy", "httpsproxy", "noproxy", cgi=False)
    lower = {"http_proxy": "httpproxy", "https_proxy": "httpsproxy", "no_proxy": "noproxy"}
    assert ProxyConfig.from_environment(lower) == ProxyConfig("httpproxy", "httpsproxy", "noproxy")
    assert ProxyConfig.from_environment({**upper, "REQUEST_METHOD": "PUT"}).cgi
    both = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"}
    assert proxy_for("https://api.example", both) == "http://upper:1"
    assert proxy_for("https://api.example", {**both, "HTTPS_PROXY": ""}) == "http://lower:1"  # empty is unset
    mixed = {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "", "no_proxy": "api.example"}
    assert proxy_for("https://api.example", mixed) is None


def test_from_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "10.96.0.0/12")
    assert proxy_for("https://api.example:6443") == "http://proxy.example:3128"
    assert proxy_for("https://10.96.0.1:443") is None


@pytest.mark.parametrize(("url", "no_proxy", "want"), [
    ("https://127.0.0.1:6443", "127.0.0.0/8", None),  # the dead-proxy run
    ("https://127.0.0.1:6443", "", None),  # loopback is never proxied, NO_PROXY or not
    ("https://[::1]:6443", "", None),
    ("https://[::ffff:127.0.0.1]:6443", "", None),  # IPv4-mapped loopback is loopback to Go
    ("https://localhost:6443", "", None),
    ("https://10.96.0.1:443", "10.96.0.0/12", None),  # a cluster's service CIDR
    ("https://10.96.0.1", "10.96.0.0/12", None),
    ("https://10.112.0.1:443", "10.96.0.0/12", "http://127.0.0.1:9"),  # just outside it
    ("https://10.96.0.1:443", "10.96.0.1:443", None),  # IP:port
    ("https://10.96.0.1:6443", "10.96.0.1:443", "http://127.0.0.1:9"),
    ("https://10.96.0.1", "10.96.0.1:443", None),  # the scheme's port
    ("https://[fd00::1]:443", "[fd00::1]:443", None),  # [IPv6]:port
    ("https://[fd00::1]:443", "fd00::/8", None),  # IPv6 CIDR
    ("https://[::ffff:10.96.0.1]:443", "10.96.0.0/12", None),  # IPv4-mapped in an IPv4 CIDR
    ("https://10.96.0.1:443", "::ffff:10.96.0.0/108", None),  # an IPv4-mapped CIDR holds IPv4 addresses
    ("https://[fd00::1]:443", "::ffff:0.0.0.0/96", "http://127.0.0.1:9"),
    ("https://api.cluster.local:6443", ".cluster.local", None),
    ("https://cluster.local:6443", ".cluster.local", "http://127.0.0.1:9"),  # ".domain": subdomains only
    ("https://cluster.local:6443", "cluster.local", None),
    ("https://API.Cluster.Local:6443", "cluster.LOCAL", None),  # case-insensitive
    ("https://api.cluster.local:6443", "*.cluster.local:6443", None),
    ("https://api.cluster.local:443", "*.cluster.local:6443", "http://127.0.0.1:9"),
    ("https://kubernetes.default.svc", "kubernetes.default.svc,10.96.0.0/12", None),
    ("https://kubernetes.default.svc", " , example.com , ", "http://127.0.0.1:9"),
    ("https://10.96.0.1", "10.96.0.0/255.240.0.0", "http://127.0.0.1:9"),  # Go's CIDRs are prefix lengths
    ("https://10.0.0.1", "10.0.0.1.example.com", "http://127.0.0.1:9"),  # a name never matches an address
])
def test_cluster_rules(url: str, no_proxy: str, want: str | None) -> None:
    assert proxy_for(url, {"HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": no_proxy}) == want


def test_no_all_proxy_and_https_takes_only_https_proxy() -> None:
    assert proxy_for("https://api.example", {"ALL_PROXY": "http://p:1", "all_proxy": "http://p:1"}) is None
    assert proxy_for("https://api.example", {"HTTP_PROXY": "http://p:1"}) is None
    assert proxy_for("http://api.example", {"HTTPS_PROXY": "http://p:1"}) is None


@pytest.mark.parametrize(("value", "want"), [
    ("proxy.example:3128", "http://proxy.example:3128"),
    ("user:pw@proxy.example:3128", "http://user:pw@proxy.example:3128"),
    ("10.0.0.1:3128", "http://10.0.0.1:3128"),
    ("[fd00::1]:3128", "http://[fd00::1]:3128"),
    ("socks5://127.0.0.1:1080", "socks5://127.0.0.1:1080"),
    ("socks5h://proxy.example", "socks5h://proxy.example"),
    ("SOCKS5://proxy.example", "socks5://proxy.example"),
    ("HTTPS://proxy.example", "https://proxy.example"),
])
def test_scheme_less_and_socks_values(value: str, want: str) -> None:
    assert proxy_for("https://api.example", {"HTTPS_PROXY": value}) == want


@pytest.mark.parametrize("value", [
    "http://user:s3cret@proxy.example:bad",  # a port that is not a number
    "http://user:s3cret%zz@proxy.example",  # a bad escape in the password
    "http://user:s3/cret@proxy.example:1",  # a password cut by "/" (Go sees the port ":s3")
    "http://user:s3 cret@proxy.example",
    "user:s3 cret@proxy.example",  # scheme-less
    "http://user:s3cret@proxy example:1",
    "http://user:s3cret@",
    "ftp://user:s3cret@proxy.example",
    "http://user:s3cret@[::1",
    "http://user:s3cret@proxy.example\n",
    "http://user:s3cret#@proxy.example",  # Go: host "user:s3cret", port "" (the "@" in the fragment)
    "http://user:s3:cret?@proxy.example",
])
def test_a_bad_value_is_a_clear_error_without_the_password(value: str) -> None:
    with pytest.raises(ProxyError) as caught:
        proxy_for("https://api.example", {"HTTPS_PROXY": value})
    message = str(caught.value)
    assert message.startswith("HTTPS_PROXY: ")
    assert "s3" not in message and "cret" not in message
    assert "user:xxxxx@" in message


def test_a_bad_value_not_used_for_this_url_is_no_error() -> None:
    """Go drops a value it cannot parse: one that NO_PROXY or loopback makes moot must not stop Placer."""
    assert proxy_for("https://10.96.0.1", {"HTTPS_PROXY": "http://u:p@proxy:bad", "NO_PROXY": "10.96.0.0/12"}) is None
    assert proxy_for("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://u:p@proxy:bad"}) is None
    assert proxy_for("https://api.example", {"HTTP_PROXY": "http://u:p@proxy:bad"}) is None


@pytest.mark.parametrize(("url", "want"), [  # Go's net/url TestRedacted, plus malformed URLs
    ("http://user:password@host.tld", "http://user:xxxxx@host.tld"),
    ("http://user:@host.tld", "http://user:xxxxx@host.tld"),
    ("http://:password@host.tld", "http://:xxxxx@host.tld"),
    ("http://user@host.tld", "http://user@host.tld"),  # no password
    ("http://host.tld/path?q=a:b@c", "http://host.tld/path?q=a:xxxxx@c"),  # safe rather than exact
    ("http://user:pa#ss@host.tld:1", "http://user:xxxxx@host.tld:1"),  # Go reads host "user:pa"
    ("http://user:pa:#@host.tld", "http://user:xxxxx@host.tld"),  # Go reads host "user:pa:", no userinfo
    ("http://host.tld/a@b", "http://host.tld/a@b"),
    ("socks5://u:p%40ss@host:1080", "socks5://u:xxxxx@host:1080"),
    ("user:password@host.tld:3128", "user:xxxxx@host.tld:3128"),
    ("http://user:pa/ss@host.tld:bad", "http://user:xxxxx@host.tld:bad"),
    ("http://user:pa ss@host.tld", "http://user:xxxxx@host.tld"),
])
def test_redact(url: str, want: str) -> None:
    assert redact(url) == want


def _kubeconfig_with_proxy(tmp_path: Path, proxy_url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', proxy-url: '" + proxy_url + "'}}]\n"
        "users: [{name: c, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: c}}]\n")
    return path


@pytest.mark.parametrize(("proxy_url", "words"), [
    ("socks5h://proxy.example:1080", 'unsupported scheme "socks5h", must be http, https, or socks5'),
    ("proxy.example:3128", 'unsupported scheme "proxy.example", must be http, https, or socks5'),
    ("http://user:s3cret@proxy.example:bad", "could not parse: http://user:xxxxx@proxy.example:bad"),
])
async def test_kubeconfig_proxy_url_checked_as_client_go(tmp_path: Path, proxy_url: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_kubeconfig(str(_kubeconfig_with_proxy(tmp_path, proxy_url)))
    assert f"cluster 'c': invalid 'proxy-url': {words}" in str(caught.value)
    assert "s3cret" not in str(caught.value)


@pytest.fixture
async def https_server(tmp_path: Path) -> AsyncIterator[tuple[int, Path, list[str]]]:
    """An HTTPS server on 127.0.0.1 answering /version: (port, its CA, the paths asked)."""
    certs = make_certs(tmp_path / "certs")
    asked: list[str] = []

    async def version(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.json_response({"major": "1", "minor": "36"})

    app = web.Application()
    app.router.add_get("/version", version)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    yield site._server.sockets[0].getsockname()[1], certs.ca, asked  # type: ignore[union-attr]
    await runner.cleanup()


@pytest.mark.parametrize("no_proxy", ["127.0.0.0/8", ""])
async def test_kube_client_goes_direct_past_a_dead_proxy(
    https_server: tuple[int, Path, list[str]], monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    """The issue's run: HTTPS_PROXY a dead port, NO_PROXY 127.0.0.0/8 (or nothing: loopback is never
    proxied); kube-scheduler and kubectl reach the server directly, and so must Placer."""
    port, ca, asked = https_server
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    configuration = Configuration(f"https://127.0.0.1:{port}")
    configuration.ssl_ca_cert = str(ca)
    client = KubeClient(configuration, retries=0, timeout=5)
    try:
        reply = await client.request("GET", "/version")
    finally:
        await client.close()
    assert (reply.status, asked) == (200, ["/version"])


async def test_kubeconfig_proxy_url_wins_over_the_environment(
    https_server: tuple[int, Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go: the cluster's `proxy-url` for every request, loopback and NO_PROXY not consulted, the
    environment's proxy never read (an unusable one is no error)."""
    port, ca, asked = https_server
    proxy = await Proxy().start()
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy:bad")
    monkeypatch.setenv("NO_PROXY", "*")
    configuration = Configuration(f"https://127.0.0.1:{port}")
    configuration.ssl_ca_cert = str(ca)
    configuration.proxy = f"http://127.0.0.1:{proxy.port}"
    client = KubeClient(configuration, retries=0, timeout=5)
    try:
        reply = await client.request("GET", "/version")
    finally:
        await client.close()
        await proxy.close()
    assert (reply.status, asked, proxy.lines) == (200, ["/version"], [f"CONNECT 127.0.0.1:{port} HTTP/1.1"])


def test_placer_run_reports_a_bad_proxy_once_without_its_password(tmp_path: Path) -> None:
    """`placer run` with an unusable HTTPS_PROXY: one error line, exit 1, no traceback, no password."""
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text("https://10.255.0.1:6443"))
    env = {**os.environ, "KUBECONFIG": str(config), "POD_NAMESPACE": "placer-system",
           "HTTPS_PROXY": "http://admin:s3cret@proxy.example:bad", "NO_PROXY": ""}
    result = subprocess.run([sys.executable, "-m", "placer.cli", "run", "--no-leader-elect", "--metrics-port", "0"],
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    errors = [line for line in output.splitlines() if "level=error" in line]
    assert errors == [line for line in errors if "placer cannot run: HTTPS_PROXY: invalid proxy address "
                      "'http://admin:xxxxx@proxy.example:bad': invalid port after host" in line], output
    assert len(errors) == 1, output
    assert "s3cret" not in output and "Traceback" not in output
