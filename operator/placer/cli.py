"""The `placer` command: `placer simulate` (no cluster needed), `placer explain` (read-only, on a
cluster), `placer import-config` (a kube-scheduler config as profiles) and `placer run` (the operator)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from placer.controller.options import Options

EXIT_INVALID_INPUT = 2


def _positive(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return number


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration(value: str) -> float:
    """Seconds, from a Go duration as kube-scheduler's flags take it (`15s`, `1m30s`, `500ms`) or a
    plain number of seconds."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(number + unit for number, unit in parts) != text:
            raise argparse.ArgumentTypeError(f"{value!r}: not a duration (e.g. 15s, 1m30s, 500ms)") from None
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: must be more than 0")
    return seconds


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
    simulate.add_argument("--html", type=Path, metavar="FILE",
                          help="also write a self-contained HTML report of the run to FILE")

    importer = commands.add_parser(
        "import-config", help="print a KubeSchedulerConfiguration's profiles as SchedulerProfiles")
    importer.add_argument("file", type=Path, metavar="FILE",
                          help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1 or v1beta3); - for stdin")
    importer.add_argument("--skip-unknown", action="store_true",
                          help="leave out plugins and args Placer does not have, as comments, instead of failing")
    importer.add_argument("--shadow", action="store_true",
                          help="emit each profile as a Shadow of the kube-scheduler profile it came from")
    importer.add_argument("--run-flags", action="store_true",
                          help="print instead the `placer run` flags for the file's clientConnection and "
                               "leaderElection (kube-scheduler's Lease unless it names another), one per line")

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
    run.add_argument("--kubeconfig", metavar="FILE",
                     help="the API server and credentials (default: $KUBECONFIG, in-cluster, ~/.kube/config); "
                          "as the cluster's scheduler: /etc/kubernetes/scheduler.conf")
    run.add_argument("--metrics-port", type=int, default=8080,
                     help="port of /healthz, /livez, /readyz and /metrics (0: off)")
    run.add_argument("--bind-address", default="0.0.0.0", metavar="ADDR",
                     help="address that port listens on (default 0.0.0.0; 127.0.0.1 as a static pod on the host "
                          "network, as kubeadm runs kube-scheduler)")
    run.add_argument("--no-leader-elect", action="store_true", help="run as the single instance, without a Lease")
    run.add_argument("--leader-elect-resource-name", default="placer", metavar="NAME",
                     help="the Lease to hold (default placer; kube-scheduler as the cluster's scheduler: taking "
                          "over kube-scheduler's own Lease, never both active)")
    run.add_argument("--leader-elect-resource-namespace", metavar="NS",
                     help="its namespace (default $POD_NAMESPACE, else the service account's, else placer-system; "
                          "kube-system as the cluster's scheduler)")
    run.add_argument("--leader-elect-lease-duration", type=duration, default=15.0, metavar="DURATION",
                     help="how long followers wait after the last renewal before taking over (default 15s)")
    run.add_argument("--leader-elect-renew-deadline", type=duration, default=10.0, metavar="DURATION",
                     help="how long the leader tries to renew before it stops leading (default 10s)")
    run.add_argument("--leader-elect-retry-period", type=duration, default=2.0, metavar="DURATION",
                     help="between two attempts to acquire or renew (default 2s)")
    run.add_argument("--kubelet-settle", type=duration, default=30.0, metavar="DURATION",
                     help="how long a node whose kubelet refused a pod is counted as the kubelet counts it, at "
                          "most (default 30s)")
    run.add_argument("--verbose", "-v", action="store_true", help="debug logs: where each pod went, top scores")
    return parser


def _simulate(args: argparse.Namespace) -> int:
    from placer.simulate import InputError, render_json, render_table, simulate

    try:
        if args.html is None:
            result = simulate(args.cluster, args.profile, top=args.top)
        else:  # the page shows the nodes before the placements too
            from placer.report_html import simulate_paths

            result, before = simulate_paths(args.cluster, args.profile, top=args.top)
    except InputError as error:
        print(f"placer simulate: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    (render_json if args.output == "json" else render_table)(result, sys.stdout)
    if args.html is not None:
        from placer.report_html import render_html

        try:
            with args.html.open("w", encoding="utf-8") as page:
                render_html(result, before, page, sources=[str(p) for p in (*args.cluster, *args.profile)])
        except OSError as error:
            print(f"placer simulate: --html {args.html}: cannot write: {error.strerror or error}", file=sys.stderr)
            return EXIT_INVALID_INPUT
    return 0


def _import_config(args: argparse.Namespace) -> int:
    from placer.import_config import ConfigError, describe, import_text, render

    source = "<stdin>" if str(args.file) == "-" else str(args.file)
    try:
        text = sys.stdin.read() if source == "<stdin>" else args.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"placer import-config: {source}: cannot read: {getattr(error, 'strerror', None) or error}",
              file=sys.stderr)
        return EXIT_INVALID_INPUT
    try:
        result = import_text(text, skip_unknown=args.skip_unknown, source=source)
    except ConfigError as error:
        print(f"placer import-config: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if result.problems:
        hint = "" if args.skip_unknown else " (--skip-unknown leaves out plugins and args Placer does not have)"
        print(f"placer import-config: {source} cannot be imported{hint}:\n{describe(result.problems)}",
              file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.run_flags:
        sys.stdout.write("".join(flag + "\n" for flag in result.run_flags))
        for note in result.run_notes:
            print(f"placer import-config: note: {note}", file=sys.stderr)
        return 0
    sys.stdout.write(render(result, source, shadow=args.shadow))
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


def run_options(args: argparse.Namespace) -> Options:
    """`placer run`'s flags as the operator's Options; exits 2 (argparse) on an impossible combination."""
    from placer.controller.options import Options

    extra = {} if args.leader_elect_resource_namespace is None else {
        "lease_namespace": args.leader_elect_resource_namespace}
    if not 0 < args.leader_elect_retry_period < args.leader_elect_renew_deadline < args.leader_elect_lease_duration:
        build_parser().error("run: need --leader-elect-retry-period < --leader-elect-renew-deadline < "
                             "--leader-elect-lease-duration")
    return Options(
        namespaces=tuple(args.namespace),
        kubeconfig=args.kubeconfig,
        metrics_port=args.metrics_port,
        metrics_host=args.bind_address,
        leader_elect=not args.no_leader_elect,
        lease_name=args.leader_elect_resource_name,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        kubelet_settle=args.kubelet_settle,
        verbose=args.verbose,
        **extra,
    )


def _run(args: argparse.Namespace) -> int:
    try:
        from placer.controller.main import run
    except ImportError as error:  # PluginsNotInstalled: a source tree, not installed
        print(f"placer run: {error}", file=sys.stderr)
        return 1

    return run(run_options(args))


def _load_plugins(command: str) -> bool:
    """Register the plugins (entry points) before a command; False when Placer is not installed.

    A plugin package that cannot be loaded is skipped, told once on stderr here, and the command
    goes on with the other plugins. Not for `placer run`: it logs what could not be loaded
    (`placer.controller.main.operate`).
    """
    try:
        from placer import plugins
    except ImportError as error:  # PluginsNotInstalled: run from a source tree, not installed
        print(f"placer {command}: {error}", file=sys.stderr)
        return False
    for problem in plugins.LOAD_ERRORS:
        print(f"placer {command}: error: {problem}", file=sys.stderr)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    if not _load_plugins(args.command):
        return 1
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "explain":
        return _explain(args)
    return _import_config(args)


if __name__ == "__main__":
    sys.exit(main())
