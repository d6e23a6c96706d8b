"""Leader election on a `coordination.k8s.io/v1` Lease, after client-go's `leaderelection`.

Only the leader binds and writes; followers keep their caches warm. As in client-go:

- a Lease held by someone else counts as expired only when *we* have seen it unchanged for its
  `leaseDurationSeconds` (local observation time, so clocks need not agree);
- every write carries the resourceVersion we read (optimistic concurrency: a 409 means we lost);
- the leader renews every `retry_period`; when no renewal succeeded for `renew_deadline`, it stops
  leading at once (`is_leader` turns False by the clock even while a renewal hangs);
- on shutdown the leader releases the Lease (empty holder, duration 1 s) so a follower takes over
  without waiting for the lease to expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import random
from collections.abc import Callable
from typing import Any, Protocol

from placer.controller.transport import ApiError

__all__ = ["LeaderElector", "LeaseStore", "micro_time"]

logger = logging.getLogger("placer.leader")


class LeaseStore(Protocol):
    """What leader election needs of the API (KubeClient has it; tests fake it)."""

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]: ...

    async def update_lease(self, namespace: str, name: str, lease: dict[str, Any]) -> dict[str, Any]: ...


def micro_time(now: dt.datetime | None = None) -> str:
    """A MicroTime: RFC 3339 with microseconds, UTC."""
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] | None = None,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self.store = store
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self._leading = False
        self._renewed_at = -math.inf
        self._observed: dict[str, Any] | None = None
        self._observed_key: tuple[Any, ...] | None = None
        self._observed_at = -math.inf
        self.attempted = asyncio.Event()  # the first attempt to acquire the Lease is over

    # ----------------------------------------------------------------- state

    def now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    @property
    def is_leader(self) -> bool:
        """True while we hold the Lease and renewed it within the renew deadline."""
        return self._leading and self.now() - self._renewed_at < self.renew_deadline

    @property
    def holder(self) -> str:
        """The holder as last observed ("" for none)."""
        spec = (self._observed or {}).get("spec") or {}
        return str(spec.get("holderIdentity") or "")

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        key = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
               (lease.get("metadata") or {}).get("resourceVersion"))
        if key != self._observed_key:
            self._observed_key = key
            self._observed_at = self.now()
        self._observed = lease

    def _start_leading(self) -> None:
        if not self._leading:
            self._leading = True
            logger.info("became the leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
            if self.on_started_leading is not None:
                self.on_started_leading()

    def _stop_leading(self, why: str, level: int = logging.WARNING) -> None:
        if self._leading:
            self._leading = False
            self._renewed_at = -math.inf
            logger.log(level, "stopped leading: %s", why)
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()

    # ----------------------------------------------------------------- one attempt

    def _spec(self, old: dict[str, Any], now: str) -> dict[str, Any]:
        spec = dict(old)
        if old.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + (1 if old else 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = max(1, math.ceil(self.lease_duration))
        spec["renewTime"] = now
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's tryAcquireOrRenew; True when we hold the Lease after it."""
        stamp = micro_time()
        try:
            lease = await self.store.get_lease(self.namespace, self.name)
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec({}, stamp),
                }
                self._observe(await self.store.create_lease(self.namespace, body))
                return True
            self._observe(lease)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and self.now() < self._observed_at + duration:
                return False  # someone else holds it and we have not seen it expire
            body = {**lease, "spec": self._spec(spec, stamp)}
            self._observe(await self.store.update_lease(self.namespace, self.name, body))
            return True
        except ApiError as error:
            if error.status != 409:
                logger.warning("lease %s/%s: %s", self.namespace, self.name, error)
            return False

    # ----------------------------------------------------------------- the loop

    async def _acquire(self) -> None:
        while not await self.try_acquire_or_renew():
            self.attempted.set()
            await asyncio.sleep(self.retry_period * random.uniform(1.0, 1.2))
        self.attempted.set()
        self._renewed_at = self.now()
        self._start_leading()

    async def _renew(self) -> bool:
        """Retry every retry_period until renewed, or give up when the renew deadline passes."""
        deadline = self._renewed_at + self.renew_deadline
        while True:
            remaining = deadline - self.now()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):
                    renewed = await self.try_acquire_or_renew()
            except TimeoutError:
                return False
            if renewed:
                self._renewed_at = self.now()
                return True
            if self.holder and self.holder != self.identity:
                return False  # someone else holds it now: we lost
            await asyncio.sleep(min(self.retry_period, max(deadline - self.now(), 0)))

    async def run(self) -> None:
        """Acquire, renew until lost, repeat; cancel to stop (then call `release`)."""
        while True:
            await self._acquire()
            while True:
                await asyncio.sleep(self.retry_period)
                if not await self._renew():
                    self._stop_leading("could not renew the lease within the renew deadline")
                    break

    async def release(self) -> None:
        """Give the Lease up (if ours) so that a follower takes over at once."""
        was_leading = self._leading
        self._stop_leading("shutting down", logging.INFO)
        lease = self._observed
        if not was_leading or lease is None or self.holder != self.identity:
            return
        stamp = micro_time()
        spec = dict(lease.get("spec") or {})
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=stamp, acquireTime=stamp)
        with contextlib.suppress(ApiError, OSError, TimeoutError):
            async with asyncio.timeout(max(self.retry_period, 1.0)):
                self._observe(await self.store.update_lease(self.namespace, self.name, {**lease, "spec": spec}))
                logger.info("released the lease %s/%s", self.namespace, self.name)
