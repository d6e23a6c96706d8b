"""kubeemu: an emulated Kubernetes API server for Placer's integration tests and benchmark.

In-process::

    async with KubeEmulator() as emu:
        emu.add_node("node-a", cpu="4", memory="16Gi")
        emu.write_kubeconfig(tmp_path / "kubeconfig")

Out of process: ``python -m tests.kubeemu --port 0 --port-file PORTFILE`` (see ``__main__``),
or :class:`EmulatorProcess` which does that and offers the ``/_emu`` controls.
"""

from .capacity import CapacityViolation, audit_capacity, parse_quantity, pod_requests
from .emulator import KubeEmulator, kubeconfig_text
from .errors import ApiError
from .faults import FaultRule
from .process import EmulatorProcess
from .server import RequestRecord
from .store import BindingRecord

__all__ = [
    "ApiError",
    "BindingRecord",
    "CapacityViolation",
    "EmulatorProcess",
    "FaultRule",
    "KubeEmulator",
    "RequestRecord",
    "audit_capacity",
    "kubeconfig_text",
    "parse_quantity",
    "pod_requests",
]
