"""The `placer` command: `placer simulate` (no cluster needed), `placer explain` (read-only, on a
cluster) and `placer run` (the operator)."""

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

    explain = commands.add_parser(
        "explain", help="why a pod is pending or where it is, on the kubeconfig's cluster (read-only)")
    explain.add_argument("pod", nargs="?", metavar="NS/NAME", help="the pod (not with --shadow)")
    explain.add_argument("--profile", metavar="NAME",
                         help="the SchedulerProfile to explain with (default: the one serving the pod)")
    explain.add_argument("--output", "-o", choices=("table", "json"), default="table")
    explain.add_argument("--all-nodes", action="store_true",
                         help="list every rejected node (default: the first 20 by name)")
    explain.add_argument("--top", type=_positive, default=3, metavar="N", help="best feasible nodes to list")
    explain.add_argument("--shadow", metavar="PROFILE", help="a shadow profile's counts and disagreements")
    explain.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, in-cluster, ~/.kube/config")

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


def _explain(args: argparse.Namespace) -> int:
    import asyncio

    from placer.explain import ExplainOptions, run_explain

    if (args.shadow is None) == (args.pod is None):
        problem = "give NS/NAME or --shadow PROFILE, not both" if args.pod else "give NS/NAME or --shadow PROFILE"
        print(f"placer explain: {problem}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.shadow is not None and (args.profile or args.all_nodes):
        print("placer explain: --shadow takes no --profile or --all-nodes", file=sys.stderr)
        return EXIT_INVALID_INPUT
    options = ExplainOptions(
        pod=args.pod, profile=args.profile, output=args.output, all_nodes=args.all_nodes, top=args.top,
        shadow=args.shadow, kubeconfig=args.kubeconfig,
    )
    return asyncio.run(run_explain(options, sys.stdout, sys.stderr))


def _run(args: argparse.Namespace) -> int:
    from placer.controller.main import run

    return run(
        namespaces=args.namespace,
        metrics_port=args.metrics_port,
        leader_elect=not args.no_leader_elect,
        verbose=args.verbose,
    )


def _load_plugins(command: str) -> bool:
    """Register the plugins (entry points) before any command; False when Placer is not installed.

    A plugin package that cannot be loaded is skipped, told once on stderr here (`placer run` logs
    it instead), and the command goes on with the other plugins.
    """
    try:
        from placer import plugins
    except ImportError as error:  # PluginsNotInstalled: run from a source tree, not installed
        print(f"placer {command}: {error}", file=sys.stderr)
        return False
    if command != "run":
        for problem in plugins.LOAD_ERRORS:
            print(f"placer {command}: error: {problem}", file=sys.stderr)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not _load_plugins(args.command):
        return 1
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "explain":
        return _explain(args)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
