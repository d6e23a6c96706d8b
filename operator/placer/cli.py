"""The `placer` command: `placer simulate` (no cluster needed) and `placer run` (the operator)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_INVALID_INPUT = 2


def _positive(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="placer", description="A Kubernetes scheduler with hot-reloaded profiles.")
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser("simulate", help="place pending pods of a cluster dump, no cluster needed")
    simulate.add_argument("--cluster", action="append", required=True, type=Path, metavar="FILE",
                          help="Nodes, Pods, NodeMetrics or Lists of them (kubectl get nodes,pods -A -o yaml)")
    simulate.add_argument("--profile", action="append", required=True, type=Path, metavar="FILE",
                          help="SchedulerProfile documents")
    simulate.add_argument("--output", "-o", choices=("table", "json"), default="table")
    simulate.add_argument("--top", type=_positive, default=3, metavar="N", help="feasible nodes to list per pod")

    run = commands.add_parser("run", help="run the scheduler against the cluster")
    run.add_argument("--namespace", "-n", action="append", default=[], metavar="NS",
                     help="schedule pods of this namespace only (repeatable; default: all)")
    run.add_argument("--metrics-port", type=int, default=8080, help="port of /healthz and /metrics (0: off)")
    run.add_argument("--no-leader-elect", action="store_true", help="run as the single instance, without a Lease")
    run.add_argument("--verbose", "-v", action="store_true", help="debug logs: where each pod went, top scores")
    return parser


def _simulate(args: argparse.Namespace) -> int:
    from placer.simulate import InputError, render_json, render_table, simulate

    try:
        result = simulate(args.cluster, args.profile, top=args.top)
    except InputError as error:
        print(f"placer simulate: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    (render_json if args.output == "json" else render_table)(result, sys.stdout)
    return 0


def _run(args: argparse.Namespace) -> int:
    from placer.controller.main import run

    return run(
        namespaces=args.namespace,
        metrics_port=args.metrics_port,
        leader_elect=not args.no_leader_elect,
        verbose=args.verbose,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "simulate":
        return _simulate(args)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
