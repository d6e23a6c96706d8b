"""The API transport: how Placer talks to the API server, and its public face.

Everything outside this package imports from here, nothing deeper:

- `KubeClient`: one request with client-go's retry rules (`request`), a LIST page by page
  (`list_pages`, `Pages`), a watch stream (`watch`), and the calls Placer makes by name (`bind`,
  events, pods' status, leases, profile status, plugins' `write`s), answers as `Reply`;
- `load_configuration` and `Configuration`: a kubeconfig or in-cluster credentials, as client-go
  reads them;
- the errors: `ApiError` (a call that failed for good), `ConfigError`, `ProxyError`.

Inside, one module per layer: `client` (the calls), `retry` (what may be sent again), `listing`
(LIST pages), `kubeconfig` and `proxy_env` (configuration; `exec_credential`: exec plugins run as
client-go runs them; `private_files`: certificates TLS takes as files), then the HTTP/1.1 client
`http` over its connections (`reply`: llhttp's parsing and the bounds; `stream`: watch lines;
`tls`; `proxy`).
Why a client of Placer's own rather than aiohttp's is measured in `placer.controller.transport.http`.
"""

from placer.controller.transport.client import BindOutcome, BindResult, KubeClient, Reply
from placer.controller.transport.kubeconfig import ConfigError, Configuration, load_configuration
from placer.controller.transport.listing import Page, Pages
from placer.controller.transport.proxy_env import ProxyError
from placer.controller.transport.retry import ApiError, Replay

__all__ = [
    "ApiError",
    "BindOutcome",
    "BindResult",
    "ConfigError",
    "Configuration",
    "KubeClient",
    "Page",
    "Pages",
    "ProxyError",
    "Replay",
    "Reply",
    "load_configuration",
]
