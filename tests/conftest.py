"""Shared pytest fixtures for Placer's tests (keep this file to fixtures and their imports)."""

import sys
from pathlib import Path

# Make `tests.kubeemu` importable however pytest was started (tests/ has no __init__.py).
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.kubeemu.pytest_plugin import (  # noqa: E402
    kube_emulator,
    kube_emulator_kubeconfig,
)

__all__ = ["kube_emulator", "kube_emulator_kubeconfig"]
