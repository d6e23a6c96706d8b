"""Pytest fixtures: ``kube_emulator`` (a started emulator) and ``kube_emulator_kubeconfig``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from .emulator import KubeEmulator


@pytest_asyncio.fixture
async def kube_emulator() -> AsyncIterator[KubeEmulator]:
    """A started :class:`KubeEmulator` on a free port, stopped after the test."""
    async with KubeEmulator() as emu:
        yield emu


@pytest.fixture
def kube_emulator_kubeconfig(kube_emulator: KubeEmulator, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig for ``kube_emulator``, also exported as ``$KUBECONFIG``."""
    path = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path
