"""The engine's catalog (namespaces, services, workloads, ...) fed from the API server: one path for
every kind of `placer.engine.kinds.KINDS`.

Kopf's watch events and the resync LISTs both land in `observe` / `deleted`; a change that filed
something new wakes the pods waiting on that kind (the kind's name is the cluster event). Like
nodes and profiles, each object's last resourceVersion is kept, so a resync removes exactly what
its LIST proves gone.

A copy older than the one already filed (a resync's LIST racing the watch) is ignored, so the
catalog, and `Catalog.server_copy` behind an assumption, never go back in time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from placer.engine.catalog import Catalog, Kind
from placer.engine.kinds import KINDS, delete_object
from placer.engine.objects import ObjectError

__all__ = ["CatalogFeed", "object_key"]

logger = logging.getLogger("placer.state")


def _older(version: str, than: str) -> bool:
    return version.isdigit() and than.isdigit() and int(version) < int(than)


def object_key(kind: Kind, raw: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced kinds, `name` otherwise."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name"))
    return f"{meta.get('namespace') or 'default'}/{name}" if kind.namespaced else name


class CatalogFeed:
    def __init__(self, catalog: Catalog, wake: Callable[[str], None], kinds: tuple[Kind, ...] = KINDS) -> None:
        self.catalog = catalog
        self.kinds = {kind.plural: kind for kind in kinds}
        self._wake = wake
        self._versions: dict[str, dict[str, str]] = {plural: {} for plural in self.kinds}

    def observe(self, kind: Kind, raw: Mapping[str, Any]) -> None:
        """An added, changed or listed object."""
        key = object_key(kind, raw)
        version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        versions = self._versions[kind.plural]
        if key in versions and _older(version, versions[key]):
            return  # a resync's LIST older than what the watch already said
        versions[key] = version
        try:
            value = kind.parse(raw)
        except ObjectError as error:
            logger.warning("%s %s cannot be used: %s", kind.name, key, error)
            changed = delete_object(self.catalog, kind, raw)
        else:
            changed = self.catalog.put(kind.name, value.namespace, value.name, value)
        if changed:
            self._wake(kind.name)

    def served(self, kind: Kind, served: bool) -> None:
        """Whether the API server serves `kind` (a LIST answered, or a 404: an older release)."""
        if self.catalog.set_served(kind.name, served):
            if not served:
                logger.info("%s (%s) is not served by this API server: none are used", kind.plural, kind.api_version)
            self._wake(kind.name)

    def deleted(self, kind: Kind, raw: Mapping[str, Any]) -> None:
        self._versions[kind.plural].pop(object_key(kind, raw), None)
        if delete_object(self.catalog, kind, raw):
            self._wake(kind.name)

    def prune(self, kind: Kind, listed: list[Any], list_version: str, gone: Callable[[str, str], bool]) -> None:
        """Remove what a LIST at `list_version` proves gone (absent, last seen no later than it)."""
        present = {object_key(kind, raw) for raw in listed}
        for key, version in list(self._versions[kind.plural].items()):
            if key not in present and gone(version, list_version):
                logger.info("%s %s is gone (no deletion event reached us)", kind.name, key)
                namespace, _, name = key.rpartition("/")
                self.deleted(kind, {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}})
