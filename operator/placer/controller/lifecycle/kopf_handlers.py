"""Kopf runs the operator: these handlers are its hooks, a few lines each.

- `on.startup`: Kopf's settings (`placer.controller.lifecycle.kopf_settings`), then the scheduler's
  own tasks start (leader election, the informers, the scheduling loop, the writers, /healthz);
- `on.cleanup`: the scheduler stops gracefully: no new decision, the binds in flight answered, the
  Lease released at once (a follower takes over without waiting for it to expire), every task
  stopped. Kopf runs cleanup handlers before it waits for the tasks it did not start, so nothing of
  the scheduler's is left for that wait;
- `on.login`: Kopf's credentials are the scheduler's own (the same kubeconfig or in-cluster
  configuration, `placer.controller.transport.kubeconfig`).

Kopf watches nothing of Placer's: every kind the scheduler reads, SchedulerProfiles included, comes
through its informers (`placer.controller.informers`). The handlers are registered on a
per-operator registry so that several operators can run in one process (tests).
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

import kopf

from placer.controller.lifecycle.kopf_settings import configure_settings
from placer.controller.options import Options
from placer.controller.transport import Configuration

__all__ = ["KopfLogin", "Operated", "connection_info", "register"]


class Operated(Protocol):
    """What Kopf's hooks start and stop (`memo.placer`)."""

    configuration: Configuration

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def register(registry: kopf.OperatorRegistry, options: Options) -> None:
    """The hooks of one operator instance; what they run is `memo.placer`."""

    @kopf.on.startup(registry=registry)
    async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        configure_settings(settings, options)
        operated: Operated = memo.placer
        await operated.start()

    @kopf.on.cleanup(registry=registry)
    async def stop(memo: kopf.Memo, **_: Any) -> None:
        operated: Operated = memo.placer
        await operated.stop()

    credentials = KopfLogin()

    @kopf.on.login(registry=registry)
    async def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
        operated: Operated = memo.placer
        return await credentials(operated.configuration)


class KopfLogin:
    """Kopf's credentials at each of its logins: at start, and again after a 401, when the credential
    it had was refused. The configuration is told so first, and an exec plugin's credential is
    fetched anew (a token not yet expired would otherwise come back, refused again)."""

    def __init__(self) -> None:
        self._handed: int | None = None  # the credential handed at the last login

    async def __call__(self, configuration: Configuration) -> kopf.ConnectionInfo:
        if self._handed is not None:
            configuration.credentials_rejected(self._handed)
        info = await connection_info(configuration)
        self._handed = configuration.credential_serial
        return info


async def connection_info(configuration: Configuration) -> kopf.ConnectionInfo:
    """Kopf's credentials from the very configuration placer's own client uses (one source of truth).

    For in-cluster configs the token is re-read from its file when it rotates; Kopf calls the login
    handler again on a 401, which lands here again.
    """
    header = configuration.get_api_key_with_prefix("BearerToken")
    if inspect.isawaitable(header):
        header = await header
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        username=configuration.username or None,
        password=configuration.password or None,
        scheme=scheme,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        proxy_url=configuration.proxy,
    )
