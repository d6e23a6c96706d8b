"""Network pieces for the transport's tests: certificates, a TLS front for the emulator, a proxy.

- `make_certs(dir)`: a CA, a server certificate it signed (SANs `DNS:kubernetes` and
  `IP:127.0.0.1`, not `localhost`) and a client certificate (CN `placer-test`), made with the
  `openssl` command (tests using them skip without it).
- `TlsFront`: TLS in front of a plain-HTTP server (the emulator), optionally requiring a client
  certificate of the CA; it records the client certificates' common names.
- `Proxy`: an HTTP proxy: CONNECT tunnels and absolute-form requests, both piped to their target;
  it records what it was asked (request lines, Proxy-Authorization) and can require credentials.
- `Socks5Proxy`: a SOCKS5 proxy (user and password optional) recording the destinations asked for.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def make_certs(directory: Path) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name in ("ca", "other-ca"):
        run("req", "-x509", *ec, "-days", "2", "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt")
    for name, subject, extensions in (
        ("server", "/CN=kubernetes", "subjectAltName=DNS:kubernetes,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "/CN=placer-test", "extendedKeyUsage=clientAuth\n"),
    ):
        (directory / f"{name}.ext").write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nsubjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid\n" + extensions)
        run("req", *ec, "-subj", subject, "-keyout", f"{name}.key", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt")
    return Certs(directory / "ca.crt", directory / "server.crt", directory / "server.key",
                 directory / "client.crt", directory / "client.key", directory / "other-ca.crt")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int,
                  first: bytes = b"") -> None:
    upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
    if first:
        upstream_writer.write(first)
    await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


class _Server:
    server: asyncio.AbstractServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


@dataclass
class TlsFront(_Server):
    """TLS on 127.0.0.1 in front of `target_port` (plain HTTP)."""

    target_port: int
    certs: Certs
    require_client_cert: bool = False
    client_names: list[str] = field(default_factory=list)

    async def start(self) -> TlsFront:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certs.server_cert, self.certs.server_key)
        if self.require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.certs.ca)
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert")
        if peer:
            self.client_names += [value for rdn in peer["subject"] for key, value in rdn if key == "commonName"]
        await _splice(reader, writer, "127.0.0.1", self.target_port)


@dataclass
class Proxy(_Server):
    """An HTTP(S) proxy on 127.0.0.1 (CONNECT and absolute-form); `credentials` "user:pass" if required."""

    credentials: str | None = None
    tls: Certs | None = None  # listen with TLS (the server certificate), as an https:// proxy
    lines: list[str] = field(default_factory=list)  # the first request line of every connection
    heads: list[bytes] = field(default_factory=list)  # and the whole head
    authorizations: list[str | None] = field(default_factory=list)

    async def start(self) -> Proxy:
        context = None
        if self.tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.tls.server_cert, self.tls.server_key)
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            writer.close()
            return
        self.heads.append(head)
        line, *fields = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (f.partition(":") for f in fields if f)}
        self.lines.append(line)
        authorization = headers.get("proxy-authorization")
        self.authorizations.append(authorization)
        if self.credentials is not None:
            expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
            if authorization != expected:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                writer.close()
                return
        method, target, _ = line.split(" ", 2)
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await _splice(reader, writer, host, int(port))
        else:  # absolute-form: to the server it names, as it was sent
            parts = urlsplit(target)
            await _splice(reader, writer, parts.hostname or "", parts.port or 80, head)


@dataclass
class Socks5Proxy(_Server):
    """A SOCKS5 proxy on 127.0.0.1 (RFC 1928 CONNECT; RFC 1929 user and password if `credentials`
    "user:pass" is set); it records the destinations asked for, as (address type, host, port)."""

    credentials: str | None = None
    destinations: list[tuple[int, str, int]] = field(default_factory=list)

    async def start(self) -> Socks5Proxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            _, count = await reader.readexactly(2)
            methods = await reader.readexactly(count)
            method = 2 if self.credentials is not None else 0
            if method not in methods:
                writer.write(b"\x05\xff")
                return
            writer.write(bytes([5, method]))
            if method == 2:
                _, size = await reader.readexactly(2)
                user = await reader.readexactly(size)
                password = await reader.readexactly((await reader.readexactly(1))[0])
                granted = f"{user.decode()}:{password.decode()}" == self.credentials
                writer.write(b"\x01\x00" if granted else b"\x01\x01")
                if not granted:
                    return
            _, _, _, kind = await reader.readexactly(4)  # (version, CONNECT, reserved)
            if kind == 1:
                host = ".".join(str(byte) for byte in await reader.readexactly(4))
            elif kind == 3:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            else:
                writer.write(b"\x05\x08\x00\x01\x00\x00\x00\x00\x00\x00")  # address type not supported
                return
            port = int.from_bytes(await reader.readexactly(2), "big")
            self.destinations.append((kind, host, port))
            writer.write(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
            await _splice(reader, writer, host, port)
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
