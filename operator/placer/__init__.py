"""Placer: a Kubernetes scheduler with hot-reloaded profiles, run as a Kopf operator."""

from placer import dataclass_cache as _dataclass_cache

__version__ = "0.1.0"

# before any dataclass of Placer's or its libraries is made: their generated methods come compiled
_dataclass_cache.install()
