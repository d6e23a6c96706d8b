"""How Placer reaches the API server: the client configuration (a kubeconfig or in-cluster
credentials), which `placer.controller.transport.client` sets its transport up from (server, TLS,
proxy, the Authorization header); Kopf's credentials come from that same configuration
(`placer.controller.lifecycle.kopf_handlers`).

The configuration is read here, as client-go reads it, into a `Configuration` with the attributes
kubernetes_asyncio's `client.Configuration` has for the same things (`host`, `ssl_ca_cert`,
`cert_file`, `key_file`, `verify_ssl`, `tls_server_name`, `proxy`, `username`, `password`,
`api_key`, `refresh_api_key_hook`, `get_api_key_with_prefix`, `get_basic_auth_token`), plus the
context's `namespace`:

- a kubeconfig (`--kubeconfig`, `$KUBECONFIG`: one file or several joined with `:`, merged as
  kubectl merges them: the first file to name a cluster, user or context wins, and the first
  current-context): the current (or given) context's cluster (`server`, `certificate-authority`
  or `-data`, `insecure-skip-tls-verify`, `tls-server-name`, `proxy-url`) and user (`token`, else
  `tokenFile`, read again every minute as client-go does, so a rotated token is picked up; else
  `username`/`password`; `client-certificate`/`client-key` or their `-data`). Relative paths are
  relative to the file that names them; `-data` wins over a path and is written to a private
  temporary file (TLS and Kopf take files), removed at exit.
- in a pod (no kubeconfig named): `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the
  service account's `ca.crt`, its token (projected tokens rotate: read again every minute) and
  `namespace`.
- a user with an `exec` plugin: run by Placer itself, as client-go runs it
  (`placer.controller.transport.exec_credential`): at load, again once its credential has expired
  or the server answered 401 to it; its token goes in the Authorization header, its client
  certificate to TLS (`KubeClient` makes its new connections with a renewed one). As in client-go,
  the plugin is not used when the user has a token, basic auth or a client certificate of its own.
- a user with an `auth-provider` (client-go's legacy plugins: `oidc`; `gcp` and `azure` are gone
  from client-go, which only says so): read by kubernetes_asyncio's loader, an optional extra
  (`pip install 'placer[auth-provider]'`), imported then and only then. It is optional because Kopf
  imports kubernetes_asyncio's whole generated client whenever it is installed (about 0.4 s of CPU
  and 37 MB of every start); without it, such a kubeconfig is a ConfigError saying so.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placer.controller.transport.private_files import private_file
from placer.controller.transport.proxy_env import parse_proxy_url

if TYPE_CHECKING:  # (imported when a user has an exec plugin: a start without one is spared it)
    from placer.controller.transport.exec_credential import Credential, ExecAuthenticator

__all__ = [
    "SERVICE_ACCOUNT",
    "TOKEN_REFRESH_PERIOD",
    "ConfigError",
    "Configuration",
    "CredentialError",
    "ExecCredentials",
    "TokenFile",
    "load_configuration",
    "load_incluster",
    "load_kubeconfig",
]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = "~/.kube/config"
TOKEN_REFRESH_PERIOD = 60.0  # seconds: client-go's cached token file, kubernetes_asyncio's in-cluster token


class ConfigError(ValueError):
    """A kubeconfig or in-cluster setup that cannot be used; the message says which file and field."""


class CredentialError(Exception):
    """Credentials could not be had when a call needed them (an exec plugin's run failed); the
    message is client-go's."""


class Configuration:
    """Where the API server is and how to authenticate to it (attribute names as kubernetes_asyncio's
    `client.Configuration`, which KubeClient and Kopf's login read)."""

    def __init__(self, host: str, *, source: str = "") -> None:
        self.host = host
        self.source = source  # where it was read from, for messages
        self.namespace = "default"  # the context's (or the service account's) namespace
        self.ssl_ca_cert: str | None = None  # a file
        self.cert_file: str | None = None
        self.key_file: str | None = None
        self.verify_ssl = True
        self.disable_strict_ssl_verification = False
        self.tls_server_name: str | None = None
        self.proxy: str | None = None
        self.username: str | None = None
        self.password: str | None = None
        self.api_key: dict[str, str] = {}  # "BearerToken": "Bearer <token>"
        self.api_key_prefix: dict[str, str] = {}
        # called (and awaited if it returns an awaitable) before each read of the token
        self.refresh_api_key_hook: Callable[[Configuration], Any] | None = None
        # which credentials `api_key`, `cert_file` and `key_file` hold (an exec plugin's run bumps it)
        self.credential_serial = 0
        # told when the server answered 401 to a call made with credentials `serial` (an exec plugin)
        self.rejection_hook: Callable[[int], None] | None = None

    def __repr__(self) -> str:  # never the token or password
        return f"Configuration(host={self.host!r}, source={self.source!r})"

    async def get_api_key_with_prefix(self, identifier: str, alias: str | None = None) -> str | None:
        """The Authorization header's value for `identifier` ("BearerToken"), refreshed first."""
        if self.refresh_api_key_hook is not None:
            result = self.refresh_api_key_hook(self)
            if inspect.isawaitable(result):
                await result
        key = self.api_key.get(identifier, self.api_key.get(alias) if alias is not None else None)
        if not key:
            return None
        prefix = self.api_key_prefix.get(identifier)
        return f"{prefix} {key}" if prefix else key

    def credentials_rejected(self, serial: int) -> None:
        """The server answered 401 to a call made with the credentials of `serial`: a source that can
        fetch new ones (an exec plugin) does so before the next call, as client-go's does."""
        if self.rejection_hook is not None:
            self.rejection_hook(serial)

    def get_basic_auth_token(self) -> str:
        """The Authorization header's value for basic auth."""
        pair = f"{self.username or ''}:{self.password or ''}"
        return "Basic " + base64.b64encode(pair.encode("latin-1", "replace")).decode("ascii")


class TokenFile:
    """A bearer token read from a file, and read again once it is `period` seconds old, so a rotated
    token (kubelet-projected service-account tokens, a `tokenFile` some agent renews) is picked up,
    as client-go's cached file token source does. A read that fails keeps the token it had."""

    def __init__(self, path: str, *, period: float = TOKEN_REFRESH_PERIOD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.period = period
        self._clock = clock
        self._read_at: float | None = None
        self.token = self._read()

    def _read(self) -> str:
        try:
            token = Path(self.path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            why = getattr(error, "strerror", None) or error
            raise ConfigError(f"token file {self.path}: cannot read: {why}") from None
        if not token:
            raise ConfigError(f"token file {self.path} is empty")
        self._read_at = self._clock()
        return token

    def __call__(self, configuration: Configuration) -> None:
        if self._read_at is None or self._clock() - self._read_at >= self.period:
            with contextlib.suppress(ConfigError):  # keep the token it had, as client-go does
                self.token = self._read()
            self._read_at = self._clock()
        configuration.api_key["BearerToken"] = f"Bearer {self.token}"


# ---------------------------------------------------------------------------------------- loading


async def load_configuration(
    kubeconfig: str | None = None, *, environ: Mapping[str, str] = os.environ,
    service_account: Path = SERVICE_ACCOUNT,
) -> Configuration:
    """The client configuration: an explicit kubeconfig (argument or `$KUBECONFIG`), else in-cluster,
    else `~/.kube/config`. An explicit `$KUBECONFIG` wins over in-cluster credentials, so a run
    from inside a pod (a CI runner, a benchmark) talks to the cluster it was pointed at."""
    if kubeconfig or environ.get("KUBECONFIG"):
        return await load_kubeconfig(kubeconfig or environ["KUBECONFIG"])
    try:
        return load_incluster(environ, service_account)
    except ConfigError:  # not in a pod
        return await load_kubeconfig(DEFAULT_KUBECONFIG)


def _join_host_port(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


def load_incluster(environ: Mapping[str, str] = os.environ, service_account: Path = SERVICE_ACCOUNT) -> Configuration:
    """A pod's credentials: the service host and port from the environment, the service account's
    token (read again every minute: projected tokens rotate), CA and namespace."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host is None or port is None:
        raise ConfigError("not in a pod: KUBERNETES_SERVICE_HOST/PORT are not set")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST/PORT are set but empty")
    token_path, ca_path = service_account / "token", service_account / "ca.crt"
    if not token_path.is_file():
        raise ConfigError(f"the service account token {token_path} does not exist")
    if not ca_path.is_file() or not ca_path.stat().st_size:
        raise ConfigError(f"the service account CA {ca_path} does not exist or is empty")
    configuration = Configuration("https://" + _join_host_port(host, port), source="in-cluster")
    configuration.ssl_ca_cert = str(ca_path)
    token = TokenFile(str(token_path))
    token(configuration)
    configuration.refresh_api_key_hook = token
    with contextlib.suppress(OSError, UnicodeDecodeError):
        configuration.namespace = (service_account / "namespace").read_text(encoding="utf-8").strip() or "default"
    return configuration


class _Entry:
    """A cluster, user or context of a kubeconfig, with the folder its relative paths start from."""

    def __init__(self, kind: str, name: str, body: Mapping[str, Any], path: str) -> None:
        self.kind, self.name, self.body, self.path = kind, name, body, path
        self.where = f"{path}: {kind} {name!r}"

    def get(self, key: str) -> Any:
        return self.body.get(key)

    def text(self, key: str) -> str | None:
        value = self.body.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{self.where}: {key} must be a string")
        return value

    def file(self, key: str) -> str | None:
        """A path field, made absolute against the file's folder; it must exist."""
        value = self.text(key)
        if value is None:
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(self.path), os.path.expanduser(value)))
        if not os.path.isfile(path):
            raise ConfigError(f"{self.where}: {key} {path} does not exist")
        return path

    def file_or_data(self, key: str) -> str | None:
        """`<key>-data` (base64, written to a private temporary file) if set, else `<key>` (a path)."""
        data = self.text(key + "-data")
        if data is None:
            return self.file(key)
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{self.where}: {key}-data is not valid base64") from None
        return private_file(content)


def _read_yaml(path: str) -> Mapping[str, Any]:
    import yaml  # only a kubeconfig needs it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, encoding="utf-8") as file:
            document = yaml.load(file, Loader=loader)  # a safe loader
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not a valid kubeconfig: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: not a valid kubeconfig: a mapping is expected")
    return document


class _Merged:
    """One or more kubeconfig files merged as client-go merges them."""

    def __init__(self, paths: str) -> None:
        self.files: list[str] = []
        self.current_context: str | None = None
        self.entries: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
        for raw in paths.split(os.pathsep):
            path = os.path.expanduser(raw.strip())
            if not path or not os.path.exists(path):
                continue
            self.files.append(path)
            document = _read_yaml(path)
            if self.current_context is None and document.get("current-context"):
                self.current_context = str(document["current-context"])
            for section, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
                items = document.get(section) or []
                if not isinstance(items, list):
                    raise ConfigError(f"{path}: {section} must be a list")
                for item in items:
                    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                        raise ConfigError(f"{path}: every entry of {section} needs a name")
                    body = item.get(inner) or {}
                    if not isinstance(body, Mapping):
                        raise ConfigError(f"{path}: {section[:-1]} {item['name']!r}: {inner} must be a mapping")
                    self.entries[section].setdefault(item["name"], _Entry(section[:-1], item["name"], body, path))
        if not self.files:
            raise ConfigError(f"no kubeconfig at {paths}")

    def find(self, section: str, name: str) -> _Entry:
        entry = self.entries[section].get(name)
        if entry is None:
            raise ConfigError(f"{section[:-1]} {name!r} is not in {os.pathsep.join(self.files)}")
        return entry


async def load_kubeconfig(paths: str, context: str | None = None) -> Configuration:
    """The configuration of `context` (default: the current context) in the kubeconfig `paths`."""
    merged = _Merged(paths)
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"no current-context in {os.pathsep.join(merged.files)}")
    chosen = merged.find("contexts", name)
    cluster_name, user_name = chosen.text("cluster"), chosen.text("user")
    if cluster_name is None:
        raise ConfigError(f"{chosen.where}: no cluster")
    cluster = merged.find("clusters", cluster_name)
    user = merged.entries["users"].get(user_name) if user_name else None
    if user is not None and user.get("exec") is not None and user.get("auth-provider") is not None:
        raise ConfigError(f"{user.where}: authProvider cannot be provided in combination with an exec plugin "
                          f"for {user.name}")
    if user is not None and user.get("auth-provider"):
        configuration = await _load_with_client(os.pathsep.join(merged.files), name, user)
    else:
        configuration = _configure(cluster, user)
        if user is not None and user.get("exec") is not None:
            await _configure_exec(configuration, cluster, user)
    configuration.namespace = chosen.text("namespace") or "default"
    return configuration


def _configure(cluster: _Entry, user: _Entry | None) -> Configuration:
    server = cluster.text("server")
    if server is None:
        raise ConfigError(f"{cluster.where}: no server")
    configuration = Configuration(server.rstrip("/"), source=cluster.path)
    if configuration.host.startswith("https"):  # as kubernetes_asyncio: certificates only for TLS
        configuration.ssl_ca_cert = cluster.file_or_data("certificate-authority")
        if user is not None:
            configuration.cert_file = user.file_or_data("client-certificate")
            configuration.key_file = user.file_or_data("client-key")
    insecure = cluster.get("insecure-skip-tls-verify")
    if insecure is not None:
        if not isinstance(insecure, bool):
            raise ConfigError(f"{cluster.where}: insecure-skip-tls-verify must be true or false")
        configuration.verify_ssl = not insecure
    configuration.tls_server_name = cluster.text("tls-server-name")
    proxy_url = cluster.text("proxy-url")
    try:  # checked as client-go checks it (kubectl refuses what it refuses), its password never shown
        configuration.proxy = parse_proxy_url(proxy_url) if proxy_url is not None else None
    except ValueError as error:
        raise ConfigError(f"{cluster.where}: invalid 'proxy-url': {error}") from None
    if user is None:
        return configuration
    token = user.text("token")
    if token is not None:
        configuration.api_key["BearerToken"] = f"Bearer {token}"
    elif user.text("tokenFile") is not None:
        token_file = user.file("tokenFile") or ""
        try:
            refresh = TokenFile(token_file)
        except ConfigError as error:
            raise ConfigError(f"{user.where}: {error}") from None
        refresh(configuration)
        configuration.refresh_api_key_hook = refresh
    elif user.get("username") is not None and user.get("password") is not None:
        configuration.username, configuration.password = str(user.get("username")), str(user.get("password"))
    return configuration


def _has_own_credentials(user: _Entry) -> bool:
    """A token, basic auth or a client certificate and key: client-go then leaves the exec plugin unused."""
    token = user.text("token") is not None or user.text("tokenFile") is not None
    certificate = user.text("client-certificate") is not None or user.text("client-certificate-data") is not None
    key = user.text("client-key") is not None or user.text("client-key-data") is not None
    return token or user.get("username") not in (None, "") or (certificate and key)


def _exec_cluster(cluster: _Entry) -> dict[str, Any]:
    """ExecCredential's `spec.cluster` for a plugin with provideClusterInfo (client-go's
    ConfigToExecCluster: the cluster as the client sees it, and its exec extension as `config`)."""
    from placer.controller.transport.exec_credential import CLUSTER_EXTENSION, ca_data

    info: dict[str, Any] = {"server": cluster.text("server") or ""}
    if cluster.text("tls-server-name") is not None:
        info["tls-server-name"] = cluster.text("tls-server-name")
    if cluster.get("insecure-skip-tls-verify") is True:
        info["insecure-skip-tls-verify"] = True
    data = cluster.text("certificate-authority-data")
    try:
        authority = ca_data(data, None if data else cluster.file("certificate-authority"))
    except ValueError as error:
        raise ConfigError(f"{cluster.where}: {error}") from None
    if authority:
        info["certificate-authority-data"] = authority
    if cluster.text("proxy-url") is not None:
        info["proxy-url"] = cluster.text("proxy-url")
    if cluster.get("disable-compression") is True:
        info["disable-compression"] = True
    extensions = cluster.get("extensions") or []
    if not isinstance(extensions, list):
        raise ConfigError(f"{cluster.where}: extensions must be a list")
    for extension in extensions:
        if isinstance(extension, Mapping) and extension.get("name") == CLUSTER_EXTENSION:
            info["config"] = extension.get("extension")
    return info


async def _configure_exec(configuration: Configuration, cluster: _Entry, user: _Entry) -> None:
    """A user with an exec plugin: the stanza checked, the plugin run once now (its failure is a
    ConfigError at start-up), then again when `ExecCredentials` says."""
    from dataclasses import replace

    from placer.controller.transport.exec_credential import ExecAuthenticator, read_exec_config

    try:
        config = read_exec_config(user.get("exec"), user=user.name, folder=os.path.dirname(user.path))
    except ValueError as error:
        raise ConfigError(f"{user.where}: {error}") from None
    if _has_own_credentials(user):
        return  # client-go: "kubectl --token" and the like win over the plugin
    if config.provide_cluster_info:
        config = replace(config, cluster=_exec_cluster(cluster))
    hook = ExecCredentials(ExecAuthenticator(config))
    try:
        await hook.refresh(configuration)
    except CredentialError as error:
        raise ConfigError(f"{user.where}: {error}") from None
    configuration.refresh_api_key_hook = hook
    configuration.rejection_hook = hook.authenticator.rejected


class ExecCredentials:
    """The refresh hook of a user with an exec plugin: runs it when its credential is missing, has
    expired or was refused (`ExecAuthenticator`), and puts the credential in the configuration: the
    bearer token, the client certificate's files, the serial that tells a 401 which one it refused.
    Cheap when nothing is due (no coroutine): it runs before every call."""

    def __init__(self, authenticator: ExecAuthenticator) -> None:
        self.authenticator = authenticator

    def __call__(self, configuration: Configuration) -> Awaitable[None] | None:
        authenticator = self.authenticator
        if authenticator.needs_refresh():
            return self.refresh(configuration)
        if configuration.credential_serial != authenticator.serial and authenticator.credential is not None:
            self.apply(configuration, authenticator.credential, authenticator.serial)
        return None

    async def refresh(self, configuration: Configuration) -> None:
        """Run the plugin (or wait for the run under way); CredentialError when it gives nothing."""
        from placer.controller.transport.exec_credential import ExecCredentialError

        try:
            credential = await self.authenticator.refresh()
        except ExecCredentialError as error:
            raise CredentialError(f"getting credentials: {error}") from None
        self.apply(configuration, credential, self.authenticator.serial)

    @staticmethod
    def apply(configuration: Configuration, credential: Credential, serial: int) -> None:
        if credential.token:
            configuration.api_key["BearerToken"] = f"Bearer {credential.token}"
        else:
            configuration.api_key.pop("BearerToken", None)
        configuration.cert_file, configuration.key_file = credential.cert_file, credential.key_file
        configuration.credential_serial = serial


AUTH_PROVIDER_EXTRA = (
    "install Placer with its auth-provider extra (pip install 'placer[auth-provider]'), which brings "
    "kubernetes_asyncio to read it; it is optional because Kopf imports kubernetes_asyncio's whole generated "
    "client whenever it is installed (about 0.4 s of CPU and 37 MB of every start). An exec plugin, a token or a "
    "client certificate need nothing more"
)


async def _load_with_client(paths: str, context: str, user: _Entry) -> Configuration:
    """A user with an auth provider: kubernetes_asyncio's loader reads it (the optional extra)."""
    provider = user.get("auth-provider")
    name = provider.get("name") if isinstance(provider, Mapping) else None
    try:
        from kubernetes_asyncio import client as k8s_client
        from kubernetes_asyncio import config as k8s_config
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("kubernetes_asyncio"):
            raise
        raise ConfigError(f"{user.where}: auth-provider {name!r}: {AUTH_PROVIDER_EXTRA}") from None

    source = k8s_client.Configuration()
    try:
        await k8s_config.load_kube_config(config_file=paths, context=context, client_configuration=source)
    except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{user.where}: {error}") from None
    configuration = Configuration(source.host, source=user.path)
    for attribute in ("ssl_ca_cert", "cert_file", "key_file", "verify_ssl", "tls_server_name", "proxy",
                      "username", "password"):
        setattr(configuration, attribute, getattr(source, attribute, None))
    configuration.verify_ssl = bool(source.verify_ssl)
    configuration.api_key = dict(source.api_key)
    return configuration
