"""Which API calls may be sent again, after what, and how long to wait first.

client-go's rules (rest/request.go, with_retry.go) are the reference:

- A read (GET: an object, a LIST page, discovery; the watches resume in `placer.controller.informers.informer`)
  is sent again after any connection error or timeout, as client-go's `IsRetryableError` does for GETs.
- A write is sent again after a connection error only when it never left (`NotSentError`: the
  connection was refused, the proxy said no, the TLS handshake failed), or when it is
  `Replay.SAFE`: sending it twice does what sending it once does (a merge patch; a DELETE whose UID
  precondition keeps it from deleting a successor), or the server's answer to the repeat tells what
  happened (a binding's 409 `already assigned to node <ours>`; a create of a fixed name, whose 409
  the caller checks; a `Write` whose `landed` recognises its own result). Every other write fails
  at once: a POST that may have landed is not posted twice (client-go resends no write at all).
- A 429 or 503 (the server did not act on it) is retried for every call; a 500, 502 or 504 (it
  may have) only for reads and `Replay.SAFE` writes. `Retry-After` counts when it is whole seconds,
  as client-go's `retryAfterSeconds` reads it (`nan`, `inf`, `-1`, `1e400`, an HTTP date: ignored, our
  backoff applies), and never beyond `MAX_RETRY_AFTER`.
- A certificate or host name that does not verify is never retried: the call fails at once, its
  message in x509's words naming the server, logged once per server rather than once per call.
"""

from __future__ import annotations

import enum
import logging
import random
import re
import socket
import ssl
from typing import TYPE_CHECKING

from placer.controller.transport.http import BodyTooLargeError, NotSentError, TlsVerificationError
from placer.engine.writes import MERGE_PATCH, STRATEGIC_MERGE_PATCH

if TYPE_CHECKING:
    from placer.engine.writes import Write

__all__ = [
    "MAX_RETRY_AFTER",
    "NOT_ACTED",
    "RETRY_STATUSES",
    "ApiError",
    "Attempts",
    "Replay",
    "certificate_error",
    "certificate_failure",
    "never_sent",
    "resendable",
    "retry_after",
    "status_retried",
    "write_replay",
]

logger = logging.getLogger("placer.kube")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
NOT_ACTED = frozenset({429, 503})  # the server turned the call away without acting on it
MAX_RETRY_AFTER = 60.0  # seconds: honour the server's Retry-After, within reason
READS = frozenset({"GET", "HEAD"})
_SECONDS = re.compile(r"[0-9]+")
# OpenSSL's verification failures (as its messages word them), in Go's crypto/x509 words (client-go's)
_X509 = (
    ("unable to get local issuer certificate", "x509: certificate signed by unknown authority"),
    ("self-signed certificate", "x509: certificate signed by unknown authority"),  # (in the chain too)
    ("self signed certificate", "x509: certificate signed by unknown authority"),  # (OpenSSL 1.1's spelling)
    ("unable to verify the first certificate", "x509: certificate signed by unknown authority"),
    ("unable to get issuer certificate", "x509: certificate signed by unknown authority"),
    ("certificate has expired", "x509: certificate has expired or is not yet valid"),
    ("certificate is not yet valid", "x509: certificate has expired or is not yet valid"),
)
_reported: set[str] = set()  # servers whose certificate failure was logged already


class ApiError(Exception):
    """A call that failed for good; `status` is 0 when no HTTP answer came at all."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class Replay(enum.Enum):
    """Whether a call that may have reached the server can be sent again (each caller says)."""

    NEVER = "never"  # a second copy could act again, or its answer could not tell: only if never sent
    SAFE = "safe"  # a read, an idempotent write, or one whose repeat's answer tells what happened

    @classmethod
    def of(cls, method: str, replay: Replay | None) -> Replay:
        """The caller's choice, else SAFE for reads and NEVER for writes."""
        if replay is not None:
            return replay
        return cls.SAFE if method in READS else cls.NEVER


def retry_after(value: str | None) -> float | None:
    """A `Retry-After` in whole seconds, capped at MAX_RETRY_AFTER; None for anything else."""
    if not value:
        return None
    value = value.strip()
    if not _SECONDS.fullmatch(value):
        return None  # (an HTTP date, a fraction, a sign, nan, inf: client-go's Atoi refuses them too)
    return MAX_RETRY_AFTER if len(value) > 6 else min(float(int(value)), MAX_RETRY_AFTER)


def status_retried(status: int, replay: Replay) -> bool:
    """Whether an HTTP answer is worth trying again: 429/503 always, 500/502/504 when replay-safe."""
    return status in NOT_ACTED or (status in RETRY_STATUSES and replay is Replay.SAFE)


def never_sent(error: BaseException) -> bool:
    """Whether a failed call certainly never reached the server (any call may then go again)."""
    return isinstance(error, (NotSentError, ConnectionRefusedError, socket.gaierror))


def resendable(error: BaseException, replay: Replay) -> bool:
    """Whether a call that failed with `error` (no HTTP answer) may be sent again."""
    if isinstance(error, BodyTooLargeError) or certificate_failure(error) is not None:
        return False  # the same again
    return replay is Replay.SAFE or never_sent(error)


def certificate_failure(error: BaseException) -> BaseException | None:
    """The certificate or host name verification failure behind `error` (itself or a cause), if any."""
    seen: BaseException | None = error
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, (TlsVerificationError, ssl.SSLCertVerificationError)):
            return seen
        seen = seen.__cause__
    return None


def certificate_error(server: str, method: str, path: str, error: BaseException) -> ApiError:
    """The ApiError for a certificate failure, logged the first time for `server` only."""
    failure = certificate_failure(error) or error
    cause = failure if isinstance(failure, ssl.SSLCertVerificationError) else failure.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        detail = cause.verify_message or str(cause)
    else:
        detail = str(failure) or type(failure).__name__
    if "mismatch" in detail.lower():  # the host name (or IP address) is not one the certificate names
        words = f"x509: certificate is not valid for {server.rsplit(':', 1)[0]}"
    else:
        words = next((go for openssl, go in _X509 if openssl in detail.lower()), "")
    detail = f"{words} ({detail})" if words else f"x509: {detail}"
    message = (f"{method} {path}: tls: failed to verify the certificate of the API server {server}: {detail}; "
               "not retried (check the kubeconfig's certificate-authority and tls-server-name)")
    if server not in _reported:
        _reported.add(server)
        logger.error("%s", message)
    else:
        logger.debug("%s", message)
    return ApiError(0, message)


class Attempts:
    """One call's attempts: whether to try again after a failure or an answer, and after how long
    (full jitter: uniform in [0, base * 2^attempt], capped; at least the server's Retry-After)."""

    __slots__ = ("attempt", "base", "cap", "method", "path", "replay", "resent", "retries")

    def __init__(self, method: str, path: str, replay: Replay, retries: int, base: float, cap: float) -> None:
        self.method, self.path, self.replay = method, path, replay
        self.retries, self.base, self.cap = retries, base, cap
        self.attempt = 0
        self.resent = False  # an attempt may have reached the server (see `Reply.resent`)

    def _delay(self, floor: float = 0.0) -> float:
        delay = max(random.uniform(0, min(self.cap, self.base * 2**self.attempt)), floor)
        self.attempt += 1
        logger.debug("retrying %s %s in %.2fs (attempt %d)", self.method, self.path, delay, self.attempt)
        return delay

    def failed(self, error: BaseException, server: str) -> float:
        """The wait before the next attempt after `error` (no answer came); raises the ApiError
        that ends the call when there is none."""
        call = f"{self.method} {self.path}"
        if certificate_failure(error) is not None:
            raise certificate_error(server, self.method, self.path, error)
        if self.attempt >= self.retries:
            raise ApiError(0, f"{call}: {type(error).__name__}: {error}")
        if not resendable(error, self.replay):
            sent = self.replay is Replay.NEVER and not isinstance(error, BodyTooLargeError)
            held = " (not sent again: it may have reached the server)" if sent else ""
            raise ApiError(0, f"{call}: {type(error).__name__}: {error}{held}")
        self.resent = self.resent or not never_sent(error)
        return self._delay()

    def answered(self, status: int, after: str | None) -> float | None:
        """The wait before the next attempt after an HTTP answer; None: that answer is the result."""
        if self.attempt >= self.retries or not status_retried(status, self.replay):
            return None
        self.resent = self.resent or status not in NOT_ACTED  # a 500/502/504: it may have acted
        return self._delay(retry_after(after) or 0.0)


def write_replay(write: Write) -> Replay:
    """A plugin's (or preemption's) `Write`: safe to send again when the repeat cannot do harm and
    its answer can be read: it knows its own result (`landed`: a 409 or other refusal of the repeat
    reads the object), it is a DELETE with a UID or resourceVersion precondition (a 404 on the
    repeat: done), or a merge or strategic merge patch (applying it twice is applying it once).
    A JSON patch or a create that cannot recognise its own result is not sent twice."""
    if write.landed is not None:
        return Replay.SAFE
    if write.delete:
        return Replay.SAFE if (write.uid or write.resource_version) else Replay.NEVER
    if write.create:
        return Replay.NEVER
    return Replay.SAFE if write.patch_type in (MERGE_PATCH, STRATEGIC_MERGE_PATCH) else Replay.NEVER
