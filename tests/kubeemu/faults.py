"""Fault injection: canned failures for requests matching a method and a path regex."""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

_ids = itertools.count(1)


@dataclasses.dataclass
class FaultRule:
    """What to do to matching requests, and how many times.

    ``status`` answers with that code (a Status body; 429 also with ``Retry-After``),
    ``delay`` sleeps first (then answers ``status`` or serves the request normally),
    ``reset`` aborts the TCP connection instead of answering. ``count=None`` never runs out.
    """

    method: str | None = None
    path: str = ".*"
    status: int | None = None
    count: int | None = 1
    delay: float = 0.0
    reset: bool = False
    retry_after: float | None = None
    message: str | None = None
    query: str | None = None
    hits: int = 0
    id: int = dataclasses.field(default_factory=lambda: next(_ids))

    def __post_init__(self) -> None:
        self._path_re = re.compile(self.path)
        self._query_re = re.compile(self.query) if self.query else None
        self.method = self.method.upper() if self.method else None

    @property
    def exhausted(self) -> bool:
        """Whether this rule has fired ``count`` times already."""
        return self.count is not None and self.hits >= self.count

    def matches(self, method: str, path: str, query: str) -> bool:
        """Whether a request is targeted by this rule (ignoring exhaustion)."""
        if self.method is not None and self.method != method.upper():
            return False
        if not self._path_re.search(path):
            return False
        return self._query_re is None or bool(self._query_re.search(query))

    def to_json(self) -> dict[str, Any]:
        """For the ``/_emu/faults`` listing."""
        return {
            "id": self.id, "method": self.method, "path": self.path, "query": self.query,
            "status": self.status, "count": self.count, "delay": self.delay,
            "reset": self.reset, "retryAfter": self.retry_after, "message": self.message,
            "hits": self.hits,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultRule:
        """From the ``/_emu/faults`` POST body (camelCase or snake_case keys)."""
        return cls(
            method=data.get("method"),
            path=data.get("path", ".*"),
            status=data.get("status"),
            count=data.get("count", 1),
            delay=float(data.get("delay", 0.0)),
            reset=bool(data.get("reset", False)),
            retry_after=data.get("retryAfter", data.get("retry_after")),
            message=data.get("message"),
            query=data.get("query"),
        )


class FaultInjector:
    """An ordered list of rules; the first live matching rule fires."""

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        self.fired: list[tuple[int, str, str]] = []

    def add(self, rule: FaultRule) -> FaultRule:
        """Install a rule (after the existing ones)."""
        self.rules.append(rule)
        return rule

    def remove(self, rule: FaultRule | int) -> None:
        """Uninstall a rule by object or id."""
        rid = rule if isinstance(rule, int) else rule.id
        self.rules = [r for r in self.rules if r.id != rid]

    def clear(self) -> None:
        """Uninstall all rules."""
        self.rules.clear()

    def match(self, method: str, path: str, query: str) -> FaultRule | None:
        """The rule to apply to this request, counting the hit; None if none applies."""
        if not self.rules:
            return None
        for rule in self.rules:
            if not rule.exhausted and rule.matches(method, path, query):
                rule.hits += 1
                self.fired.append((rule.id, method, path))
                return rule
        return None
