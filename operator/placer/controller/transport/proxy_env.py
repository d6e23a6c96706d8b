"""Which proxy a call to the API server goes through, chosen as client-go chooses it.

client-go (`rest.Config.Proxy`, `transport/cache.go`) uses the kubeconfig cluster's `proxy-url` for
every request when it is set (NO_PROXY is not consulted), else `http.ProxyFromEnvironment`, which
is `golang.org/x/net/http/httpproxy`: `FromEnvironment().ProxyFunc()`. This module is a port of
that package (golang/net `http/httpproxy/proxy.go` at 0ca694d2, 2026-07-01), so that Placer and
kube-scheduler or kubectl, started with the same environment, reach the server the same way:

- `HTTPS_PROXY` for https URLs and `HTTP_PROXY` for http URLs, each read uppercase first, then
  lowercase; no `ALL_PROXY`. A set `REQUEST_METHOD` (a CGI handler) refuses `HTTP_PROXY`.
- A value without a scheme or host (`proxy:3128`, `user:pw@proxy`) means `http://` + value.
- `localhost` and loopback addresses (127.0.0.0/8, ::1) are never proxied.
- `NO_PROXY`: comma-separated, case-insensitive: `*` (nothing is proxied), an IP or CIDR, an IP
  with a port (`1.2.3.4:80`, `[::1]:443`), `domain` (the domain and its subdomains), `.domain` or
  `*.domain` (subdomains only), each with an optional `:port`. Entries that fail to parse are skipped.

Where Go would quietly drop a proxy value it cannot parse (the client then connects directly, or to
a junk host named after the scheme), Placer refuses to start with a `ProxyError` naming the variable
and showing the value with its password as `xxxxx`, as Go's `URL.Redacted` shows it. Non-ASCII
names go through the stdlib's IDNA codec (IDNA 2003, Go uses UTS 46: they differ only on a few
letters such as "ß").
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote

__all__ = ["CGI_REFUSAL", "ProxyConfig", "ProxyError", "parse_proxy_url", "proxy_for", "redact"]

CGI_REFUSAL = "refusing to use HTTP_PROXY value in CGI environment; see golang.org/s/cgihttpproxy"
SCHEMES = ("http", "https", "socks5", "socks5h")  # the proxies the transport (`http_proxy.ProxyRoute`) speaks
_PORTS = {"http": "80", "https": "443", "socks5": "1080"}  # Go's portMap
_HOST_OK = frozenset("!$&'()*+,;=:[]<>\"-_.~")  # besides letters and digits (Go's shouldEscape, host mode)
_USERINFO_OK = frozenset("-._:~!$&'()*+,;=%@")  # besides letters and digits (Go's validUserinfo)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a URL's scheme, with its colon
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class ProxyError(ValueError):
    """A proxy setting Placer cannot use: a start-up error (its text never holds a password)."""


class _Url(NamedTuple):
    scheme: str
    userinfo: str | None  # raw, as written
    host: str  # as written between the userinfo and the path, port included


def _parse(raw: str) -> _Url:
    """The parts of `raw` as Go's `url.Parse` finds them, or ValueError with Go's reason (in words
    that quote nothing of the value: a password may sit where a port is expected)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise ValueError("invalid control character in URL")
    rest, _, fragment = raw.partition("#")
    _unescape(fragment)
    scheme = ""
    for i, c in enumerate(rest):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-.") and i > 0:
            continue
        if c == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            scheme, rest = rest[:i].lower(), rest[i + 1:]
        break
    rest = rest.partition("?")[0]
    if not rest.startswith("/"):
        if scheme:
            return _Url(scheme, None, "")  # opaque ("proxy.example:3128" is scheme "proxy.example")
        if ":" in rest.partition("/")[0]:
            raise ValueError("first path segment in URL cannot contain colon")
    userinfo, host = None, ""
    if rest.startswith("//") and (scheme or not rest.startswith("///")):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        userinfo, at, host = authority.rpartition("@")
        _check_host(host)
        if at:
            if not all((c.isascii() and c.isalnum()) or c in _USERINFO_OK for c in userinfo):
                raise ValueError("invalid userinfo")
            _unescape(userinfo)
        else:
            userinfo = None
    _unescape(rest)
    return _Url(scheme, userinfo, host)


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all("0" <= c <= "9" for c in port[1:]))


def _check_host(host: str) -> None:
    """Go's `parseHost`: a bracketed IPv6 literal (zone allowed) or a name, and an optional port."""
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            raise ValueError("missing ']' in host")
        if not _valid_optional_port(host[end + 1:]):
            raise ValueError("invalid port after host")
        literal = host[1:end]
        address, _, zone = literal.partition("%25")
        _unescape(address, host=True)
        _unescape(zone)
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise ValueError("invalid IPv6 host") from None
        return
    colon = host.rfind(":")
    if colon >= 0 and not _valid_optional_port(host[colon:]):
        raise ValueError("invalid port after host")
    _unescape(host, host=True)


def _unescape(text: str, host: bool = False) -> None:
    """Go's `unescape` checks: every `%` starts two hex digits (in a host, only of a non-ASCII
    byte, or `%25`); a host holds no ASCII character that would need escaping."""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            pair = text[i + 1:i + 3]
            if len(pair) < 2 or not all(h in "0123456789abcdefABCDEF" for h in pair):
                raise ValueError("invalid URL escape")
            if host and int(pair[0], 16) < 8 and pair != "25":
                raise ValueError("invalid URL escape in host")
            i += 3
            continue
        if host and c.isascii() and not c.isalnum() and c not in _HOST_OK:
            raise ValueError("invalid character in host name")
        i += 1


def redact(url: str) -> str:
    """`url` with its password shown as "xxxxx" (Go's `URL.Redacted`; the user name is kept). A URL
    that does not parse, or where Go finds no userinfo though an `@` is there (`user:pw@proxy`, a
    `#` in the password), is cut at its last `@` instead: no part of a password can show."""
    try:
        parts = _parse(url)
    except ValueError:
        parts = None
    if parts is not None and parts.userinfo is not None:
        if ":" not in parts.userinfo:
            return url
        start = url.index("//") + 2
        end = start + len(parts.userinfo)
    else:  # unparsed, or no userinfo found though an "@" is there (`user:pw@proxy`, `http://u:p#w@proxy`)
        end = url.rfind("@")
        if end < 0:
            return url
        start = url.find("//", 0, end)
        start = start + 2 if start >= 0 and _SCHEME.fullmatch(url[:start]) else 0
        if ":" not in url[start:end]:
            return url
    user = url[start:end].partition(":")[0]
    return f"{url[:start]}{user}:xxxxx{url[end:]}"


def parse_proxy_url(url: str) -> str:
    """A kubeconfig cluster's `proxy-url`, checked as client-go's `parseProxyURL` checks it (its words),
    the value shown redacted."""
    try:
        scheme = _parse(url).scheme
    except ValueError:
        raise ProxyError(f"could not parse: {redact(url)}") from None
    if scheme not in ("http", "https", "socks5"):
        raise ProxyError(f'unsupported scheme "{scheme}", must be http, https, or socks5')
    return url


def _parse_proxy(name: str, value: str) -> str:
    """Go's `parseProxy`: `value` as a URL, else as `http://` + value; a ProxyError where Go would
    drop it or misread it, or where it gives a scheme the transport does not speak."""
    try:
        parts = _parse(value)
        error = None
    except ValueError as why:
        parts, error = None, why
    if parts is None or not parts.scheme or not parts.host:
        if "://" in value:  # Go's fallback would be a proxy named "<scheme>:"
            reason = error or "no host"
            raise ProxyError(f"{name}: invalid proxy address {redact(value)!r}: {reason}")
        try:
            parts = _parse("http://" + value)
        except ValueError as why:
            raise ProxyError(f"{name}: invalid proxy address {redact(value)!r}: {error or why}") from None
        value = "http://" + value
    if parts.userinfo is None and "@" in value:  # Go would take `user:pw` of `user:pw#x@proxy` for the host
        raise ProxyError(f"{name}: invalid proxy address {redact(value)!r}: an '@' outside the user information "
                         "(percent-encode '#', '?' and '/' in a password)")
    if parts.scheme not in SCHEMES:
        raise ProxyError(f"{name}: unsupported proxy scheme in {redact(value)!r}: only http://, https://, "
                         "socks5:// and socks5h:// are supported")
    return value[:len(parts.scheme)].lower() + value[len(parts.scheme):]


def _split_host_port(hostport: str) -> tuple[str, str] | None:
    """Go's `net.SplitHostPort`; None where it fails."""
    colon = hostport.rfind(":")
    if colon < 0:
        return None
    start, end = 0, 0
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0 or close + 1 != colon:
            return None
        host, start, end = hostport[1:close], 1, close + 1
    else:
        host = hostport[:colon]
        if ":" in host:
            return None
    if "[" in hostport[start:] or "]" in hostport[end:]:
        return None
    return host, hostport[colon + 1:]


def _ip(text: str, zone: bool) -> IPAddress | None:
    """Go's `net.ParseIP` (no zone) or `netip.ParseAddr` (zone allowed, then dropped); an IPv4-mapped
    IPv6 address is its IPv4 address, as Go's `net.IP` compares it."""
    if "%" in text and not zone:
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        return ipaddress.IPv6Address(address.packed)  # the zone dropped (Go's AsSlice)
    return address


def _ascii(name: str) -> str:
    """Go's `idnaASCII`: ASCII names as they are; others in their xn-- form, unless that fails."""
    if name.isascii():
        return name
    try:
        return ".".join(label.encode("idna").decode() if label else "" for label in name.split("."))
    except UnicodeError:
        return name


@dataclass(frozen=True, slots=True)
class _Domain:
    suffix: str  # with its leading "."
    port: str
    whole: bool  # the entry had no leading "." or "*.": the domain itself matches too

    def match(self, host: str, port: str) -> bool:
        named = host.endswith(self.suffix) or (self.whole and host == self.suffix[1:])
        return named and (not self.port or self.port == port)


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Go's `httpproxy.Config`: the three variables' values, and whether this is a CGI handler."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""
    cgi: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ProxyConfig:
        """Go's `FromEnvironment`: uppercase first, then lowercase; an empty value is unset."""
        env = os.environ if environ is None else environ

        def first(*names: str) -> str:
            return next((env[name] for name in names if env.get(name)), "")

        return cls(first("HTTP_PROXY", "http_proxy"), first("HTTPS_PROXY", "https_proxy"),
                   first("NO_PROXY", "no_proxy"), bool(env.get("REQUEST_METHOD")))

    def proxy_for(self, url: str) -> str | None:
        """Go's `ProxyFunc()(url)`: the proxy for `url`, or None for a direct connection."""
        scheme, _, rest = url.partition("://")
        scheme = scheme.lower()
        if scheme == "https":
            name, value = "HTTPS_PROXY", self.https_proxy
        elif scheme == "http":
            name, value = "HTTP_PROXY", self.http_proxy
            if value and self.cgi:
                raise ProxyError(CGI_REFUSAL)
        else:
            return None
        if not value or not self._use_proxy(_canonical_addr(scheme, rest)):
            return None
        return _parse_proxy(name, value)

    def _use_proxy(self, addr: str) -> bool:
        """Go's `useProxy`: False for localhost, loopback addresses and what NO_PROXY names."""
        split = _split_host_port(addr)
        if split is None:
            return False
        host, port = split
        if host == "localhost":
            return False
        ip = _ip(host, zone=True)
        if ip is not None and ip.is_loopback:
            return False
        host = host.strip().lower()
        ips, domains = _no_proxy(self.no_proxy)
        if ips is None:  # "*"
            return False
        if ip is not None:
            for entry, entry_port in ips:
                if isinstance(entry, IPNetwork):
                    if ip in entry:
                        return False
                elif entry == ip and (not entry_port or entry_port == port):
                    return False
            return True  # a name entry never matches an address (CVE-2025-22870)
        return not any(domain.match(host, port) for domain in domains)


def _canonical_addr(scheme: str, rest: str) -> str:
    """Go's `canonicalAddr`: the URL's host (unescaped, IDNA) and port (else the scheme's), joined."""
    authority = rest
    for stop in "/?#":
        authority = authority.partition(stop)[0]
    hostport = authority.rpartition("@")[2]
    host, port = hostport, ""
    colon = host.rfind(":")
    if colon >= 0 and _valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = _ascii(unquote(host) if "%" in host else host)
    port = port or _PORTS.get(scheme, "")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _no_proxy(value: str) -> tuple[list[tuple[IPAddress | IPNetwork, str]] | None, list[_Domain]]:
    """Go's `config.init` for NO_PROXY: (IP and CIDR entries, or None for "*"; domain entries)."""
    ips: list[tuple[IPAddress | IPNetwork, str]] = []
    domains: list[_Domain] = []
    for raw in value.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return None, []
        address, slash, bits = entry.partition("/")
        if slash and "%" not in address and bits.isascii() and bits.isdigit():  # Go's ParseCIDR
            try:
                network: IPNetwork = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                pass
            else:
                mapped = getattr(network.network_address, "ipv4_mapped", None)
                if mapped is not None:  # ::ffff:a.b.c.d/n holds IPv4 addresses for Go's IPNet
                    network = ipaddress.IPv4Network(f"{mapped}/{network.prefixlen - 96}")
                ips.append((network, ""))
                continue
        split = _split_host_port(entry)
        host, port = split if split is not None else (entry, "")
        if split is not None:
            if not host:
                continue
            if host[0] == "[" and host[-1] == "]":
                host = host[1:-1]
        ip = _ip(host, zone=False)
        if ip is not None:
            ips.append((ip, port))
            continue
        if not host:
            continue
        if host.startswith("*."):
            host = host[1:]
        whole = not host.startswith(".")
        domains.append(_Domain(_ascii("." + host if whole else host), port, whole))
    return ips, domains


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy to reach `url` through from the environment (`environ`, default `os.environ`), with
    its scheme; None for a direct connection. ProxyError (a ValueError) for a value that cannot be
    used, its password redacted."""
    return ProxyConfig.from_environment(environ).proxy_for(url)
