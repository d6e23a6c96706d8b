"""A resync's LISTs in steps, for the log (`placer.resync`): at a cold start, the way to the first
binding — when each LIST was filed, the process's CPU by then, how long filing its pages took, and
how long after the process's start the resync began."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

__all__ = ["StartupTiming", "process_age"]

logger = logging.getLogger("placer.resync")


class StartupTiming:
    """A resync in steps, for the log: when each LIST was filed (wall time from the start, and the
    process's CPU by then) and how long filing its pages took (parse and index; the rest of a
    LIST's time is the server, the transfer and the decoding). Logged at INFO for the first resync
    (a cold start: the way to the first binding), at DEBUG for the others."""

    def __init__(self, first: bool) -> None:
        self.first = first
        self.started = time.perf_counter()
        self.cpu = time.process_time()
        self.age = process_age() if first else None
        self.items: dict[str, int] = {}
        self.filing: dict[str, float] = {}
        self.steps: list[str] = []

    def filed(self, kind: str, items: int, seconds: float) -> None:
        self.items[kind] = self.items.get(kind, 0) + items
        self.filing[kind] = self.filing.get(kind, 0.0) + seconds

    def step(self, what: str, label: str | None = None) -> None:
        """`what` (its filing so far, if any) is done, logged as `label` (`what` by default)."""
        seconds, cpu = time.perf_counter() - self.started, time.process_time() - self.cpu
        done = f"{label or what} by {seconds:.2f} s (CPU {cpu:.2f} s)"
        if what in self.items:
            done += f": {self.items[what]} filed in {self.filing[what]:.2f} s"
        self.steps.append(done)

    def report(self, what: str = "done") -> None:
        began = "" if self.age is None else (
            f" (the resync began {self.age:.2f} s after the process started, its CPU {self.cpu:.2f} s by then)")
        logger.log(logging.INFO if self.first else logging.DEBUG, "%s LISTs %s: %s%s",
                   "start-up" if self.first else "resync", what, "; ".join(self.steps), began)


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc, to its 10 ms clock ticks); None elsewhere."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(uptime - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
