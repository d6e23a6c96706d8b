"""Run the emulator as a process: ``python -m tests.kubeemu --port 0 --port-file F``.

The port file is written atomically once the server listens, so a parent process can
poll for it; SIGTERM/SIGINT stop the server cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .emulator import KubeEmulator


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m tests.kubeemu",
                                     description="An emulated Kubernetes API server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the bound port here")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig here")
    parser.add_argument("--history-size", type=int, default=50_000,
                        help="watch events kept per resource for resuming watches")
    parser.add_argument("--bookmark-interval", type=float, default=30.0)
    parser.add_argument("--no-record-requests", action="store_true",
                        help="do not keep the request log (saves memory in long benchmarks)")
    parser.add_argument("--graceful-pod-deletion", action="store_true",
                        help="deleting a bound pod only marks it (POST /_emu/finish-deletion)")
    parser.add_argument("--pv-controller", action="store_true",
                        help="complete volume bindings as kube's PV controller does")
    parser.add_argument("--pdb-controller", action="store_true",
                        help="keep PodDisruptionBudget statuses current")
    parser.add_argument("--auto-provision", action="append", default=[],
                        metavar="PROVISIONER=TOPOLOGY_KEY",
                        help="play this provisioner for claims of its classes (repeatable)")
    parser.add_argument("--kube-version", default="1.36",
                        help="the Kubernetes API server to play, 1.24 to 1.36 (default 1.36)")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def serve(args: argparse.Namespace) -> None:
    """Start, announce the port, and wait for a termination signal."""
    emu = KubeEmulator(args.host, args.port, history_size=args.history_size,
                       bookmark_interval=args.bookmark_interval,
                       record_requests=not args.no_record_requests,
                       graceful_pod_deletion=args.graceful_pod_deletion,
                       pv_controller=args.pv_controller, pdb_controller=args.pdb_controller,
                       auto_provision=dict(item.split("=", 1) for item in args.auto_provision),
                       kube_version=args.kube_version)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with emu:
        if args.kubeconfig:
            emu.write_kubeconfig(args.kubeconfig)
        if args.port_file:
            _write_atomically(args.port_file, f"{emu.port}\n")
        print(f"kubeemu listening on {emu.url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
