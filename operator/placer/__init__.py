"""Placer: a Kubernetes scheduler with hot-reloaded profiles, run as a Kopf operator."""

__version__ = "0.1.0"
