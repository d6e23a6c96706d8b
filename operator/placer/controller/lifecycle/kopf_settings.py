"""Kopf's settings for Placer, each for a reason (kopf 1.45).

- Standalone (no KopfPeering objects) and no Kopf-posted events: leader election is Placer's own
  (`placer.controller.lifecycle.leader`), and Placer posts its own events.
- No scanning: Kopf watches no resource of Placer's (the informers do), so it need not follow
  CRDs and namespaces as they come and go.
- `networking.error_backoffs` never runs out (`EndlessBackoff`): Kopf's own start-up requests (its
  API discovery) are retried with these delays, and once they are exhausted (Kopf's default: 8
  retries, ~54 s) Kopf re-raises, which stops the whole operator: an API server down for a minute
  while Placer starts would crash it (restarted by the kubelet with a growing CrashLoopBackOff
  delay). With an endless sequence it waits for the server, at most `watch_max_backoff` apart.
"""

from __future__ import annotations

from collections.abc import Iterator

import kopf

from placer.controller.options import Options

__all__ = ["EndlessBackoff", "configure_settings"]


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


def configure_settings(settings: kopf.OperatorSettings, options: Options) -> None:
    settings.peering.standalone = True
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.networking.connect_timeout = options.watch_connect_timeout
    settings.networking.request_timeout = max(options.api_timeout, 60.0)
    settings.networking.error_backoffs = EndlessBackoff(options.watch_backoff, options.watch_max_backoff)
