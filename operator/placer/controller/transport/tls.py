"""TLS for `placer.controller.transport.http`: the context a kubeconfig asks for, and a connection doing TLS
itself on memory BIOs over a plain transport.

Why not asyncio's SSL transport: its buffered protocol, app transport and flow-control states (in
Python) cost about 15 % more CPU per call than one `ssl.SSLObject` between the socket and the
parser; OpenSSL does the same work either way.

A certificate that does not verify, or names another host, is a `TlsVerificationError` naming the
host and OpenSSL's reason (no retry can help); any other handshake failure is a `NotSentError`
(the request was not written). Only a close_notify ends a read-until-close body well: a TCP close
without one may be an attacker cutting the body short (`placer.controller.transport.reply.Connection.clean_eof`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from placer.controller.transport.reply import Connection, HttpError, NotSentError, Pool, TlsVerificationError

__all__ = ["ascii_hostname", "handshake_error", "tls_context"]


def tls_context(
    *, ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool, strict: bool = True
) -> ssl.SSLContext:
    """TLS as kubernetes_asyncio's REST client sets it up from a kubeconfig: the cluster's CA (the
    system's store without one), an optional client certificate, and insecure-skip-tls-verify.
    Without verification no CA store is loaded at all (loading the system's costs ~50 ms)."""
    if verify:
        context = ssl.create_default_context(cafile=ca_file)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, keyfile=key_file)
    if not strict:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def ascii_hostname(hostname: str | None) -> str | bytes | None:
    """The name for SNI and the certificate check, as `ssl` wants it: an ASCII name as bytes, which
    `ssl` takes as it is, where a str goes through the IDNA codec, whose first use imports
    `encodings.idna`, `stringprep` and `unicodedata` (a few ms of a cold start). For an ASCII name
    the two give the same name; any other goes through IDNA as before."""
    if hostname is not None and hostname.isascii():
        return hostname.encode("ascii")
    return hostname


def handshake_error(error: BaseException, what: str) -> NotSentError:
    """The error a failed TLS handshake with `what` ("the server 10.0.0.1", "the proxy p:3128") is
    reported as: verification (certificate or name) apart, with OpenSSL's reason."""
    failure: NotSentError
    if isinstance(error, NotSentError):
        return error
    if isinstance(error, ssl.SSLCertVerificationError):  # (ssl.CertificateError is the same class)
        reason = error.verify_message or error.reason or str(error)
        failure = TlsVerificationError(f"the TLS certificate of {what} did not verify: {reason}")
    else:
        reason = getattr(error, "reason", None) or str(error) or type(error).__name__
        failure = NotSentError(f"the TLS handshake with {what} failed: {reason}")
    failure.__cause__ = error  # (the retry policy reads OpenSSL's words there)
    return failure


class TlsConnection(Connection):
    """A connection with TLS done here, on the bytes of a plain transport: one `SSLObject` between
    the socket and the parser, no buffering protocol, app transport and flow-control layers."""

    __slots__ = ("handshake", "shaken", "tls", "tls_in", "tls_out")

    def __init__(self, client: Pool, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(client, loop)
        self.tls_in = ssl.MemoryBIO()
        self.tls_out = ssl.MemoryBIO()
        assert client._ssl is not None
        self.tls = client._ssl.wrap_bio(self.tls_in, self.tls_out, server_side=False,
                                        server_hostname=ascii_hostname(client._server_hostname))
        self.handshake: asyncio.Future[None] = loop.create_future()
        self.shaken = False
        self.clean_eof = False  # until the server's close_notify

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._shake()

    def _shake(self) -> None:
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except (ssl.SSLError, ssl.CertificateError, OSError) as error:
            with contextlib.suppress(OSError):
                self._flush()  # the alert, if any
            if not self.handshake.done():
                self.handshake.set_exception(handshake_error(error, f"the server {self.client._server_hostname}"))
            return
        self._flush()
        self.shaken = True
        if not self.handshake.done():
            self.handshake.set_result(None)

    def _flush(self) -> None:
        if self.tls_out.pending:
            self.transport.write(self.tls_out.read())  # type: ignore[union-attr]

    def send(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise NotSentError("the connection closed before the request was written")
        try:
            self.tls.write(data)
        except ssl.SSLError as error:
            raise NotSentError(f"TLS refused to write the request: {error}") from error
        transport.write(self.tls_out.read())

    def data_received(self, data: bytes) -> None:
        self.tls_in.write(data)
        if not self.shaken:
            self._shake()
            if not self.shaken:
                return
        chunks = []
        closed = False
        tls = self.tls
        try:
            while chunk := tls.read(262144):
                chunks.append(chunk)
            closed = True  # b"": the server's close_notify
        except ssl.SSLWantReadError:
            pass  # no whole record left
        except ssl.SSLZeroReturnError:
            closed = True
        except ssl.SSLError as error:
            self._fail(HttpError(f"TLS: {error}"))
            return
        if self.tls_out.pending:  # (TLS 1.3 key updates and the like)
            self._flush()
        if chunks:
            super().data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if closed and self.transport is not None:
            self.clean_eof = True
            self.transport.close()  # connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(
                NotSentError(f"the connection closed during the TLS handshake{f': {exc}' if exc else ''}"))
        super().connection_lost(exc)
