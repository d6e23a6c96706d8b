"""When the scheduling loop runs: while this replica leads and every informer is synced (kube-scheduler
waits for its informers' caches the same way before its first `scheduleOne`).

A term is a span of leadership. Each term starts from fresh LISTs: the informers list again
(consistently) before the term's first decision, so binds another leader made moments ago, whose
watch events have not arrived yet, are counted. The first term of a process that leads from its
start takes the informers' first LISTs instead (they were asked for after this replica's first
election attempt, so they already hold what any earlier leader did). Then the term's start
(`start_term`): nominations as the pods' status says, every pending pod of an owned schedulerName
queued, shadow recorders restarted, profile statuses re-evaluated; and the loop may run
(`may_schedule`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["Terms"]

logger = logging.getLogger("placer.terms")


class Terms:
    def __init__(
        self,
        *,
        synced: Callable[[], Awaitable[None]],
        relist: Callable[[], Awaitable[None]],
        start_term: Callable[[], None],
        is_leader: Callable[[], bool],
        may_schedule: asyncio.Event,
        elected: asyncio.Event,
    ) -> None:
        self.synced_once = False  # every informer listed once (for /healthz)
        self._synced = synced  # every informer listed once
        self._relist = relist  # every informer lists again
        self._start_term = start_term
        self._is_leader = is_leader
        self._may_schedule = may_schedule
        self._elected = elected  # the first election attempt is over (set at once without election)
        self.term = 0  # bumps at every start of leadership
        self._changed = asyncio.Event()

    def started_leading(self) -> None:
        self.term += 1
        self._changed.set()

    def stopped_leading(self) -> None:
        self._may_schedule.clear()
        self._changed.set()

    async def run(self) -> None:
        await self._elected.wait()
        await self._synced()
        self.synced_once = True
        fresh = True  # the first LISTs serve a term that started with them
        while True:
            self._changed.clear()
            term = self.term
            if self._is_leader():
                if not fresh:
                    await self._relist()
                if self._is_leader() and self.term == term:
                    self._start_term()
                    self._may_schedule.set()
            fresh = False
            await self._changed.wait()
