"""Client-go credential plugins: a kubeconfig user's `exec` stanza, run by Placer itself as client-go
v1.36 runs it (`plugin/pkg/client/auth/exec`), its rules and messages included.

Why here and not kubernetes_asyncio's loader: Kopf imports kubernetes_asyncio's whole generated client
whenever that package is installed (about 0.4 s of CPU and 37 MB of every start), and a plugin is one
process whose output is one small JSON document.

- The stanza (`read_exec_config`): `command` (a path with a separator is relative to the kubeconfig
  that names it; a bare name is looked up in Placer's own PATH, as Go does), `args`, `env` (added
  to Placer's environment, the stanza's value winning), `apiVersion`
  (`client.authentication.k8s.io/v1` or `v1beta1`; `v1alpha1` is gone from client-go and refused
  with its message), `installHint`, `provideClusterInfo`, `interactiveMode` (`Never`,
  `IfAvailable`, `Always`; required with v1, `IfAvailable` by default with v1beta1).
- A run (`ExecAuthenticator.refresh`): the command gets `KUBERNETES_EXEC_INFO`, an ExecCredential of
  the stanza's apiVersion whose `spec.interactive` says whether standard input is the user's
  terminal (never so for `placer run` in a pod: `IfAvailable` then runs without it and `Always`
  fails as client-go fails), and, with `provideClusterInfo`, `spec.cluster` (the cluster's server,
  `tls-server-name`, `insecure-skip-tls-verify`, CA data, `proxy-url`, `disable-compression`, and
  its `client.authentication.k8s.io/exec` extension as `config`). Its standard output must be an
  ExecCredential of the same apiVersion with a `status`: a `token`, or `clientCertificateData` and
  `clientKeyData` (PEM, both or neither), or both, and an optional `expirationTimestamp`. The
  command runs as an asyncio subprocess (the event loop goes on meanwhile) and is killed after
  `EXEC_TIMEOUT` seconds (client-go waits forever: a hung plugin would stop every call).
- Failures say what client-go says (`exec: executable X not found` with the install hint,
  `exec: executable X failed with exit code N`, `decoding stdout: ...`, ...), plus the end of what
  the command wrote to its standard error. Standard output is never quoted: it holds secrets.
- The credential: one without an expiry is kept for the process's life; one past its expiry is
  fetched again before the next call, and a 401 answered to a call made with it (`rejected`) has
  it fetched again too, unless a newer one came meanwhile. Callers asking at the same time wait
  for the one run, and share its outcome, failure included.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime as dt
import json
import logging
import os
import re
import ssl
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from placer.controller.transport.private_files import discard_private_file, private_file

__all__ = [
    "API_VERSIONS",
    "CLUSTER_EXTENSION",
    "EXEC_INFO_ENV",
    "EXEC_TIMEOUT",
    "Credential",
    "ExecAuthenticator",
    "ExecConfig",
    "ExecCredentialError",
    "ca_data",
    "clean_install_hint",
    "read_exec_config",
]

logger = logging.getLogger("placer.kubeconfig")

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
API_VERSIONS = (V1, V1BETA1)
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
#: the cluster extension handed to the plugin as `spec.cluster.config` (client-go's clusterExtensionKey)
CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"
#: seconds a plugin may run: a cloud CLI's cold start takes a few, a hung one would hold every call
EXEC_TIMEOUT = 60.0
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
STDERR_SHOWN = 2000  # characters of a plugin's standard error kept in a message
INSTALL_HINT_HELP = """

It looks like you are trying to use a client-go credential plugin that is not installed.

To learn more about this feature, consult the documentation available at:
      https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins"""
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


class ExecCredentialError(Exception):
    """The plugin could not give a credential; the message is client-go's (never the plugin's output)."""


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """A kubeconfig user's `exec` stanza, checked."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = V1
    install_hint: str = ""
    interactive_mode: str = "Never"
    provide_cluster_info: bool = False
    #: ExecCredential's `spec.cluster` (JSON-ready), given to the plugin only with provideClusterInfo
    cluster: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Credential:
    """What a plugin's run gave: a bearer token and/or a client certificate (in private files)."""

    token: str
    cert_file: str | None
    key_file: str | None
    expiry: float | None  # POSIX seconds; None: valid for the process's life


def _quoted(value: Any) -> str:
    """A value as Go's %q shows it in client-go's messages (double quotes, escapes)."""
    return json.dumps(str(value), ensure_ascii=False)


def _string(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"exec: {what} must be a string")
    return value


def clean_install_hint(hint: str) -> str:
    """The hint without escape sequences that could put a terminal in a weird state: anything but
    letters, marks, numbers, punctuation, symbols, separators and \\t-\\r becomes U+XXXX (client-go's
    cleanANSIEscapeCodes)."""
    return "".join(c if unicodedata.category(c)[0] in "LMNPSZ" or "\t" <= c <= "\r" else f"U+{ord(c):04X}"
                   for c in hint)


def read_exec_config(stanza: Any, *, user: str, folder: str) -> ExecConfig:
    """The `exec` stanza of user `user` in a kubeconfig in `folder`, checked as clientcmd's validation
    and the exec authenticator check it; ValueError says what is wrong (client-go's words)."""
    if not isinstance(stanza, Mapping):
        raise ValueError("exec must be a mapping")
    command = _string(stanza.get("command"), "command")
    if not command:
        raise ValueError(f"command must be specified for {user} to use exec authentication plugin")
    api_version = _string(stanza.get("apiVersion"), "apiVersion")
    if not api_version:
        raise ValueError(f"apiVersion must be specified for {user} to use exec authentication plugin")
    args = stanza.get("args") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise ValueError("exec: args must be a list of strings")
    env: list[tuple[str, str]] = []
    raw_env = stanza.get("env") or []
    if not isinstance(raw_env, list):
        raise ValueError("exec: env must be a list of name and value")
    for item in raw_env:
        if not isinstance(item, Mapping):
            raise ValueError("exec: env must be a list of name and value")
        name = _string(item.get("name"), "env name")
        if not name:
            raise ValueError(f"env variable name must be specified for {user} to use exec authentication plugin")
        value = item.get("value")
        env.append((name, "" if value is None else str(value)))
    mode = _string(stanza.get("interactiveMode"), "interactiveMode")
    if not mode and api_version in (V1BETA1, "client.authentication.k8s.io/v1alpha1"):
        mode = "IfAvailable"  # the kubeconfig's default for these versions (clientcmd's SetDefaults_ExecConfig)
    if not mode:
        raise ValueError(f"interactiveMode must be specified for {user} to use exec authentication plugin")
    if mode not in INTERACTIVE_MODES:
        raise ValueError(f"invalid interactiveMode for {user}: {_quoted(mode)}")
    if api_version not in API_VERSIONS:
        raise ValueError(f"exec plugin: invalid apiVersion {_quoted(api_version)}")
    provide = stanza.get("provideClusterInfo")
    if provide is not None and not isinstance(provide, bool):
        raise ValueError("exec: provideClusterInfo must be true or false")
    if os.sep in command:  # a path: relative to the kubeconfig naming it (a bare name goes by PATH)
        command = os.path.normpath(os.path.join(folder, os.path.expanduser(command)))
    return ExecConfig(
        command=command, args=tuple(args), env=tuple(env), api_version=api_version,
        install_hint=clean_install_hint(_string(stanza.get("installHint"), "installHint")),
        interactive_mode=mode, provide_cluster_info=bool(provide),
    )


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


class _Sometimes:
    """At most `threshold` yeses an `interval` (client-go shows the install help 10 times an hour)."""

    def __init__(self, threshold: int, interval: float, clock: Callable[[], float]) -> None:
        self.threshold, self.interval, self._clock = threshold, interval, clock
        self._window: float | None = None
        self._count = 0

    def __call__(self) -> bool:
        now = self._clock()
        if self._window is None or now - self._window >= self.interval:
            self._window, self._count = now, 0
        if self._count < self.threshold:
            self._count += 1
            return True
        return False


def _expiry(value: Any) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ExecCredentialError(
            f"decoding stdout: status.expirationTimestamp: not an RFC 3339 time: {_quoted(value)}")
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _status_text(status: Mapping[str, Any], key: str) -> str:
    value = status.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ExecCredentialError(f"decoding stdout: status.{key} must be a string")
    return value


class ExecAuthenticator:
    """Runs one user's exec plugin and keeps its credential (module docstring: when it runs again)."""

    def __init__(
        self,
        config: ExecConfig,
        *,
        timeout: float = EXEC_TIMEOUT,
        environ: Mapping[str, str] = os.environ,
        stdin_is_terminal: Callable[[], bool] = _stdin_is_terminal,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self._environ = environ
        self._stdin_is_terminal = stdin_is_terminal
        self._clock = clock
        self._install_help = _Sometimes(10, 3600.0, time.monotonic)
        self.credential: Credential | None = None
        self.serial = 0  # bumped by each credential: which one a call was made with
        self._rejected = False
        self._running: asyncio.Task[Credential] | None = None

    def __repr__(self) -> str:  # never the credential
        return f"ExecAuthenticator(command={self.config.command!r})"

    # -- when

    def needs_refresh(self) -> bool:
        """No credential yet, it has expired (client-go: now is after the expiry), or it was refused."""
        credential = self.credential
        if credential is None or self._rejected:
            return True
        return credential.expiry is not None and self._clock() > credential.expiry

    def rejected(self, serial: int) -> None:
        """The server answered 401 to a call made with credential `serial`: fetch again before the
        next call, unless that credential has been replaced already."""
        if serial == self.serial and self.credential is not None:
            self._rejected = True

    async def refresh(self) -> Credential:
        """A new credential: one run of the plugin, shared by whoever asks while it runs."""
        task = self._running
        if task is None:
            task = self._running = asyncio.get_running_loop().create_task(self._run())
            task.add_done_callback(self._ran)
        return await asyncio.shield(task)  # a caller given up does not stop the run for the others

    def _ran(self, task: asyncio.Task[Credential]) -> None:
        if self._running is task:
            self._running = None
        if not task.cancelled():
            task.exception()  # (retrieved: a failure nobody awaited is not "never retrieved")

    # -- one run

    def interactive(self) -> bool:
        """Whether the plugin gets standard input (client-go's isInteractive)."""
        mode = self.config.interactive_mode
        if mode == "Never":
            return False
        if mode == "IfAvailable":
            return self._stdin_is_terminal()
        if mode == "Always":
            if not self._stdin_is_terminal():
                raise ExecCredentialError(
                    "exec plugin cannot support interactive mode: standard input is not a terminal")
            return True
        raise ExecCredentialError(
            f"exec plugin cannot support interactive mode: unknown interactiveMode: {_quoted(mode)}")

    def exec_info(self, interactive: bool) -> str:
        """`KUBERNETES_EXEC_INFO`: the ExecCredential the plugin is asked for."""
        spec: dict[str, Any] = {}
        if self.config.provide_cluster_info and self.config.cluster is not None:
            spec["cluster"] = self.config.cluster
        spec["interactive"] = interactive
        return json.dumps({"kind": "ExecCredential", "apiVersion": self.config.api_version, "spec": spec},
                          separators=(",", ":"))

    def _executable(self) -> str:
        command = self.config.command
        if os.sep in command:
            return command
        import shutil

        found = shutil.which(command, path=self._environ.get("PATH", ""))  # Placer's PATH, as Go's LookPath
        if found is None:
            raise ExecCredentialError(self._not_found())
        return found

    def _not_found(self) -> str:
        message = f"exec: executable {self.config.command} not found"
        if self._install_help():
            message += INSTALL_HINT_HELP
            if self.config.install_hint:
                message += f"\n\n{self.config.install_hint}"
        return message

    async def _run(self) -> Credential:
        config = self.config
        interactive = self.interactive()
        env = {**self._environ, **dict(config.env), EXEC_INFO_ENV: self.exec_info(interactive)}
        executable = self._executable()
        try:
            process = await asyncio.create_subprocess_exec(
                executable, *config.args, env=env,
                stdin=None if interactive else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=None if interactive else asyncio.subprocess.PIPE,  # an interactive one prompts there
            )
        except FileNotFoundError:
            raise ExecCredentialError(self._not_found()) from None
        except OSError as error:
            raise ExecCredentialError(f"exec: {config.command}: {error.strerror or error}") from None
        try:
            async with asyncio.timeout(self.timeout):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            raise ExecCredentialError(
                f"exec: executable {config.command} did not finish within {self.timeout:g}s: killed") from None
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        said = (stderr or b"").decode("utf-8", "replace").strip()
        if process.returncode != 0:
            code = process.returncode if process.returncode is not None and process.returncode >= 0 else -1
            message = f"exec: executable {config.command} failed with exit code {code}"
            if said:
                message += f": {said[-STDERR_SHOWN:]}"
            raise ExecCredentialError(message)
        if said:
            logger.info("exec plugin %s wrote to its standard error: %s", config.command, said[-STDERR_SHOWN:])
        credential = self.parse(stdout)
        self.credential = credential
        self.serial += 1
        self._rejected = False
        return credential

    def parse(self, stdout: bytes) -> Credential:
        """The plugin's standard output as client-go reads it (its messages; the output never quoted)."""
        try:
            document = json.loads(stdout)
        except (ValueError, UnicodeDecodeError) as error:
            raise ExecCredentialError(f"decoding stdout: not JSON: {error}") from None
        if not isinstance(document, Mapping):
            raise ExecCredentialError("decoding stdout: not a JSON object")
        api_version, kind = document.get("apiVersion"), document.get("kind")
        if not api_version:
            raise ExecCredentialError("decoding stdout: Object 'apiVersion' is missing")
        if not kind:
            raise ExecCredentialError("decoding stdout: Object 'Kind' is missing")
        if api_version != self.config.api_version:
            raise ExecCredentialError(f"exec plugin is configured to use API version {self.config.api_version}, "
                                      f"plugin returned version {api_version}")
        if kind != "ExecCredential":
            raise ExecCredentialError(
                f"decoding stdout: no kind {_quoted(kind)} is registered for version {_quoted(api_version)}")
        status = document.get("status")
        if status is None:
            raise ExecCredentialError("exec plugin didn't return a status field")
        if not isinstance(status, Mapping):
            raise ExecCredentialError("decoding stdout: status must be an object")
        token = _status_text(status, "token")
        cert, key = _status_text(status, "clientCertificateData"), _status_text(status, "clientKeyData")
        if not token and not cert and not key:
            raise ExecCredentialError("exec plugin didn't return a token or cert/key pair")
        if bool(cert) != bool(key):
            raise ExecCredentialError("exec plugin returned only certificate or key, not both")
        expiry = _expiry(status.get("expirationTimestamp"))
        cert_file = key_file = None
        if cert:
            cert_file, key_file = self._key_pair(cert, key)
        return Credential(token=token, cert_file=cert_file, key_file=key_file, expiry=expiry)

    @staticmethod
    def _key_pair(cert: str, key: str) -> tuple[str, str]:
        """The certificate and key in private files, checked to load as a pair."""
        cert_file = private_file(cert.encode(), prefix="placer-exec-")
        key_file = private_file(key.encode(), prefix="placer-exec-")
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert_file, key_file)
        except (ssl.SSLError, OSError, ValueError) as error:
            discard_private_file(cert_file)
            discard_private_file(key_file)
            reason = getattr(error, "reason", None) or str(error)
            raise ExecCredentialError(f"failed parsing client key/certificate: {reason}") from None
        return cert_file, key_file


def ca_data(data: str | None, path: str | None) -> str | None:
    """A cluster's CA as base64 for `spec.cluster` (certificate-authority-data, else the file's bytes);
    ValueError as client-go says it."""
    try:
        if data:
            return base64.b64encode(base64.b64decode(data, validate=True)).decode("ascii")
        if path:
            with open(path, "rb") as file:
                return base64.b64encode(file.read()).decode("ascii")
    except (OSError, binascii.Error) as error:
        raise ValueError(f"failed to load CA bundle for execProvider: {getattr(error, 'strerror', None) or error}") \
            from None
    return None
