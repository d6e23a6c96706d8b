"""Kopf's settings for Placer, each chosen for a measured or verified reason (kopf 1.45).

- Standalone (no KopfPeering objects) and no Kopf-posted events: leader election is ours, and
  Kopf's log-to-event posting would cost an API call per handled object.
- Kopf does not watch pods or nodes: Placer's own informers do (`placer.controller.informers.informer`).
- Watches ask the server to end each stream after `watch_server_timeout` (Kopf re-lists nothing
  on such an end, it just resumes from the last resourceVersion); the client gives up a stream a
  minute later, and a connect attempt after `watch_connect_timeout`.
- No diff-base: only `@kopf.on.event` handlers are registered, for which Kopf neither reads nor
  writes the last-handled-configuration annotation, but it still deep-copies every object to
  build a diff nobody uses. `NoDiffBase` makes that a no-op. Progress storage is left as it is:
  on.event handlers never write it (`process_watching_cause` stores no progress, and a handler
  returning None stores no result), so no PATCH ever reaches a pod from Kopf.
- `queueing.worker_limit` stays unset (one worker per object, as many as needed).
- `networking.error_backoffs` never runs out (`EndlessBackoff`): Kopf retries a failed list or
  watch request (5xx, 429, 403, connection errors, timeouts) with these delays, and once they are
  exhausted (Kopf's default: 8 retries, ~54 s) it re-raises, which ends that resource's watcher
  and with it the whole operator: an API server down for a minute would crash every replica
  (restarted by the kubelet with a growing CrashLoopBackOff delay). With an endless sequence the
  watchers keep retrying, at most every `watch_max_backoff` seconds, and resume on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from placer.controller._kopf import kopf
from placer.controller.options import Options

__all__ = ["EndlessBackoff", "NoDiffBase", "configure_settings"]


class EndlessBackoff:
    """Delays doubling from `initial` to `maximum`, then `maximum` forever; a fresh run per request.

    Not `Sized`, so Kopf counts no attempts and never gives up; iterable again and again, so each
    request starts from `initial`.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = max(initial, maximum)

    def __iter__(self) -> Iterator[float]:
        delay = self.initial
        while True:
            yield delay
            delay = min(delay * 2, self.maximum)


class NoDiffBase(kopf.DiffBaseStorage):
    """A diff-base that is never stored nor read: Placer has no change-detecting handlers."""

    def build(self, *, body: Any, extra_fields: Iterable[Any] | None = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


def configure_settings(settings: kopf.OperatorSettings, options: Options) -> None:
    settings.peering.standalone = True
    settings.posting.enabled = False
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.watching.server_timeout = options.watch_server_timeout
    settings.watching.client_timeout = options.watch_server_timeout + 60
    settings.watching.connect_timeout = options.watch_connect_timeout
    settings.networking.connect_timeout = options.watch_connect_timeout
    settings.networking.request_timeout = max(options.api_timeout, 60.0)
    settings.networking.error_backoffs = EndlessBackoff(options.watch_backoff, options.watch_max_backoff)
