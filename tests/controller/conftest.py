"""Fixtures for the controller's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.controller.helpers import Launch, OperatorThread, operator_options
from tests.kubeemu import KubeEmulator


@pytest.fixture
async def launch(kube_emulator: KubeEmulator, tmp_path: Path) -> AsyncIterator[Launch]:
    """`await launch(**options)`: an operator against `kube_emulator` in its own thread; every one
    still running is stopped after the test."""
    started: list[OperatorThread] = []
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")

    async def start(**overrides: Any) -> OperatorThread:
        operator = await OperatorThread(operator_options(kubeconfig, **overrides)).start()
        started.append(operator)
        return operator

    yield start
    for operator in started:
        if operator.thread.is_alive():
            await operator.stop()
