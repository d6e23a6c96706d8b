"""The engine's catalog (namespaces, services, workloads, claims, volumes, classes, budgets, PodGroups)
fed by its informers: one path for every kind of `placer.engine.kinds.KINDS` and the PodGroup kinds.

An added, changed or listed object is parsed and filed (`upsert`); a deleted one removed (`delete`);
a change that filed something new wakes the pods waiting on that kind (the kind's name is the cluster
event). A kind the API server does not serve (an older release) is marked so (`served`): plugins
tell "not there" from "not served" (DynamicResources' message). An object that cannot be parsed is
logged and left out (what was filed under its name is removed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from placer.engine.catalog import Catalog, Kind
from placer.engine.kinds import delete_object
from placer.engine.objects import ObjectError

__all__ = ["CatalogFeed"]

logger = logging.getLogger("placer.catalog")


class CatalogFeed:
    """Files the objects of one kind into the catalog."""

    def __init__(self, catalog: Catalog, kind: Kind, wake: Callable[[str], None]) -> None:
        self.catalog = catalog
        self.kind = kind
        self._wake = wake

    def upsert(self, raw: Mapping[str, Any]) -> None:
        kind = self.kind
        try:
            value = kind.parse(raw)
        except ObjectError as error:
            meta = raw.get("metadata") if isinstance(raw, Mapping) else None
            name = meta.get("name") if isinstance(meta, Mapping) else None
            logger.warning("%s %s cannot be used: %s", kind.name, name, error)
            changed = delete_object(self.catalog, kind, raw)
        else:
            changed = self.catalog.put(kind.name, value.namespace, value.name, value)
        if changed:
            self._wake(kind.name)

    def delete(self, raw: Mapping[str, Any]) -> None:
        if delete_object(self.catalog, self.kind, raw):
            self._wake(self.kind.name)

    def served(self, served: bool) -> None:
        """Whether the API server serves the kind (a LIST answered, or a 404/403)."""
        kind = self.kind
        if self.catalog.set_served(kind.name, served):
            if not served:
                logger.info("%s (%s) is not served by this API server: none are used", kind.plural, kind.api_version)
            self._wake(kind.name)
