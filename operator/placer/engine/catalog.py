"""The cluster's other objects — namespaces, services, workloads, claims, volumes, classes, budgets —
each kind in a cache of its own, all filled through one generic path.

A `Kind` says what the object is called on the API server (for the operator's watches and the
simulator's `--cluster` files) and how one is parsed into the immutable value plugins read. The
`Catalog` holds one cache per kind, keyed by namespace and name, and a version per kind that moves
on every change, so a plugin can cache what it derives from a kind until that kind changes.
Nodes and pods are not here: the engine keeps them in columns (`placer.engine.cluster`).

Adding a kind: a parser and one `Kind(...)` line in `placer.engine.kinds.KINDS`; the operator
then watches it and `placer simulate` reads it, with no other change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Catalog", "Kind"]


@dataclass(frozen=True)
class Kind:
    """One kind of object the engine reads, as the API server serves it."""

    name: str  # "Namespace"
    api_version: str  # "v1", "apps/v1", ...
    plural: str  # "namespaces"
    namespaced: bool
    #: the raw object -> the immutable value plugins read; raises ObjectError when unusable
    parse: Callable[[Mapping[str, Any]], Any]

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def path(self, namespace: str | None = None) -> str:
        """The collection's URL path (all namespaces when `namespace` is None)."""
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


class Catalog:
    """One cache per kind: `{namespace: {name: value}}` ("" is the namespace of cluster-scoped kinds)."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, dict[str, Any]]] = {}
        self._versions: dict[str, int] = {}
        self.revision = 0  # moves on every change of any kind
        # assumed objects: (kind, namespace, name) -> the API server's version under the assumption
        self._assumed: dict[tuple[str, str, str], Any] = {}
        self._observers: dict[str, list[Callable[[str, str, Any, Any], None]]] = {}
        # kinds the API server does not serve (an older release: the operator's LIST got a 404), so
        # a plugin can tell "not there" from "not served" (DynamicResources' message)
        self.unserved: frozenset[str] = frozenset()

    def _changed(self, kind: str, namespace: str = "", name: str = "", old: Any = None, new: Any = None) -> None:
        self._versions[kind] = self.version(kind) + 1
        self.revision += 1
        for observer in self._observers.get(kind, ()):
            observer(namespace, name, old, new)

    def observe(self, kind: str, observer: Callable[[str, str, Any, Any], None]) -> None:
        """Call `observer(namespace, name, old, new)` on every change of what the catalog shows of an
        object of `kind` (None: absent), for indexes kept in step instead of rebuilt from every object
        (DynamicResources' allocated devices)."""
        self._observers.setdefault(kind, []).append(observer)

    def version(self, kind: str) -> int:
        """Moves on every change of that kind: what a plugin derives from it is valid while it stays."""
        return self._versions.get(kind, 0)

    def put(self, kind: str, namespace: str, name: str, value: Any) -> bool:
        """Add or replace (what the API server says); False when the same value was there already.

        An object this scheduler assumed keeps its assumed value until the API server's copy is
        newer than the one the assumption was made on (kube's assume cache)."""
        slot = (kind, namespace, name)
        names = self._objects.setdefault(kind, {}).setdefault(namespace, {})
        old = names.get(name)
        if slot in self._assumed:
            if not _newer(value, self._assumed[slot]) or _outlasts(old, value):
                self._assumed[slot] = value
                return False
            del self._assumed[slot]
        elif _outlasts(old, value):  # put as this scheduler's before it existed (a claim it creates)
            self._assumed[slot] = value
            return False
        if old == value:
            return False
        names[name] = value
        self._changed(kind, namespace, name, old, value)
        return True

    def remove(self, kind: str, namespace: str, name: str) -> Any | None:
        self._assumed.pop((kind, namespace, name), None)
        names = self._objects.get(kind, {}).get(namespace)
        if names is None or name not in names:
            return None
        value = names.pop(name)
        if not names:
            del self._objects[kind][namespace]
        self._changed(kind, namespace, name, value, None)
        return value

    def assume(self, kind: str, namespace: str, name: str, value: Any) -> None:
        """Show `value` in place of the API server's copy until `restore` or a newer copy arrives
        (a volume bound to a claim by this scheduler, before the API server says so)."""
        slot = (kind, namespace, name)
        current = self.get(kind, name, namespace)
        if current is None:
            raise KeyError(f"{kind} {namespace}/{name} is not in the catalog")
        self._assumed.setdefault(slot, current)
        self._objects[kind][namespace][name] = value
        self._changed(kind, namespace, name, current, value)

    def restore(self, kind: str, namespace: str, name: str) -> None:
        """Drop an assumption: the API server's copy is shown again."""
        base = self._assumed.pop((kind, namespace, name), None)
        if base is not None:
            shown = self._objects[kind][namespace][name]
            self._objects[kind][namespace][name] = base
            self._changed(kind, namespace, name, shown, base)

    def assumed(self, kind: str, name: str, namespace: str = "") -> bool:
        return (kind, namespace, name) in self._assumed

    def server_copy(self, kind: str, name: str, namespace: str = "") -> Any | None:
        """What the API server last said of an object, assumed or not (kube's `GetAPIPV`/`GetAPIPVC`):
        waiting for a binding to complete reads this, not the assumption."""
        base = self._assumed.get((kind, namespace, name))
        return base if base is not None else self.get(kind, name, namespace)

    def get(self, kind: str, name: str, namespace: str = "") -> Any | None:
        return self._objects.get(kind, {}).get(namespace, {}).get(name)

    def in_namespace(self, kind: str, namespace: str = "") -> Mapping[str, Any]:
        """Every object of a kind in one namespace, by name."""
        return self._objects.get(kind, {}).get(namespace, {})

    def items(self, kind: str) -> Iterator[tuple[str, str, Any]]:
        """(namespace, name, value) of every object of a kind."""
        for namespace, names in self._objects.get(kind, {}).items():
            for name, value in names.items():
                yield namespace, name, value

    def count(self, kind: str) -> int:
        return sum(len(names) for names in self._objects.get(kind, {}).values())

    def set_served(self, kind: str, served: bool) -> bool:
        """Whether the API server serves `kind`; True when that changed (a change of the kind)."""
        unserved = self.unserved - {kind} if served else self.unserved | {kind}
        if unserved == self.unserved:
            return False
        self.unserved = unserved
        self._changed(kind)
        return True


def _outlasts(assumed: Any, server: Any) -> bool:
    """Whether an assumption holds against a newer server copy: an object may say so (its
    `outlasts(server)`), e.g. a claim this scheduler allocated whose PreBind wrote the finalizer
    first: that copy shows no allocation yet, and dropping the assumption would free its devices
    for another claim (kube keeps such claims among its in-flight allocations)."""
    outlasts = getattr(assumed, "outlasts", None)
    return outlasts is not None and bool(outlasts(server))


def _newer(value: Any, than: Any) -> bool:
    """Whether the API server's `value` is a later version than `than` (numeric resourceVersions
    compare; otherwise any other version counts as newer)."""
    new, old = getattr(value, "resource_version", ""), getattr(than, "resource_version", "")
    if new.isdigit() and old.isdigit():
        return int(new) > int(old)
    return new != old
