"""Wake-ups between the informers and what waits on the cluster: the scheduling queue and loop, and
the binding cycles waiting for a PreBind's condition or a Permit. Cheap to fire while nobody waits.

`Wake` is the one call the informers make when something changed (the composition root,
`placer.controller.state`, wires it): `wake(event, old, new)` with a ClusterEvent (or a catalog
kind's name) and the object before and after when known, for the queue's hints; `wake()` alone
wakes every waiting pod.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

__all__ = ["Signal", "Wake", "WatchedEvents"]


class Wake(Protocol):
    def __call__(self, event: str | None = None, old: Any = None, new: Any = None) -> None: ...


class Signal:
    """Wakes every coroutine waiting on it at each `fire` (an Event that re-arms itself); costs
    nothing while nobody waits."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def fire(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


class WatchedEvents(Signal):
    """A Signal fired by the cluster events its waiters asked for (`wanting`): ClusterEvent names
    (`Node/Update`; a kind alone stands for all its actions) and catalog kinds. `event(None)` (any
    change) and `fire()` wake them whatever they wait for."""

    def __init__(self) -> None:
        super().__init__()
        self._wanted: Counter[str] = Counter()

    def event(self, event: str | None) -> None:
        """A change the watches brought (the SchedulerState's `_wake`)."""
        wanted = self._wanted
        if wanted and (event is None or event in wanted or event.partition("/")[0] in wanted):
            self.fire()

    @contextlib.contextmanager
    def wanting(self, events: Iterable[str]) -> Iterator[None]:
        """While inside, `events` fire the signal."""
        events = tuple(events)
        self._wanted.update(events)
        try:
            yield
        finally:
            self._wanted.subtract(events)
            for event in events:
                if self._wanted[event] <= 0:
                    del self._wanted[event]
