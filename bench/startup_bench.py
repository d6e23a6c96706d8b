"""Start-up benchmark: time from `placer run`'s process start to its first binding, cold, with a backlog.

Per run: a fresh emulator process (tests/kubeemu) is filled with NODES nodes, the `bench`
SchedulerProfile and PODS pending pods (bench/synthetic.py's workload, as bench/e2e_bench.py);
then `placer run --no-leader-elect --metrics-port 0` starts and the clock runs from just before
its process is spawned to the emulator's timestamp of the first binding. The operator is stopped
at once after that. Its log's milestones are reported too, relative to the process start:
"starting placer" (imports done), the profile loaded, "scheduling (...)" (everything listed).

With `--source DIR` a second tree's `operator/` (e.g. `git archive HEAD operator | tar -x -C DIR`)
is run too, interleaved with this one (A/B in the same run, alternating which goes first):
its `placer` package comes first on PYTHONPATH, the plugins' entry points stay the installed ones.
`--this DIR` runs another tree in place of the checkout, e.g. a copy byte-compiled with
`python -m compileall` (an editable install under PYTHONDONTWRITEBYTECODE=1 compiles Placer's
modules at every start, which an installed wheel, the image's, never does).

    python bench/startup_bench.py [--runs 5] [--nodes 1000] [--pods 5000] [--source DIR] [--this DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from e2e_bench import populate  # noqa: E402
from synthetic import cluster as synthetic_cluster  # noqa: E402

from tests.kubeemu import EmulatorProcess  # noqa: E402

MILESTONES = {
    "started": re.compile(r'msg="starting placer'),
    "profile": re.compile(r'msg="profile \S+ generation \d+ loaded'),
    "scheduling": re.compile(r'msg="scheduling \('),
}
STAMP = re.compile(r"^ts=(\S+)")


def milestones(log: str, start: float) -> dict[str, float]:
    """Seconds from the process start to the first log line of each milestone."""
    found: dict[str, float] = {}
    for line in log.splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        for name, pattern in MILESTONES.items():
            if name not in found and pattern.search(line):
                when = dt.datetime.strptime(stamp.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
                found[name] = when.timestamp() - start
    return found


def one_run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], source: Path | None,
            timeout: float) -> dict[str, Any]:
    with EmulatorProcess("--no-record-requests") as emu, tempfile.TemporaryDirectory() as tmp:
        populate(emu, nodes, pods)
        kubeconfig = emu.write_kubeconfig(Path(tmp) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": "placer-system"}
        if source is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(source / "operator"), *filter(None, [env.get("PYTHONPATH")])])
        log_path = Path(tmp) / "placer.log"
        time.sleep(1.0)  # the emulator settles after the population (its own GC, sockets)
        with log_path.open("wb") as log:
            start = time.time()
            operator = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "placer"), "run", "--no-leader-elect", "--metrics-port", "0"],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )
            try:
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and operator.poll() is None:
                    if emu.control("GET", "stats").get("bindings", 0):
                        break
                    time.sleep(0.02)
            finally:
                operator.terminate()
                try:
                    operator.wait(10)
                except subprocess.TimeoutExpired:
                    operator.kill()
        bindings = emu.control("GET", "bindings")
        text = log_path.read_text(errors="replace")
    if not bindings:
        raise RuntimeError(f"no binding; log tail:\n{text[-2000:]}")
    return {"first_binding_s": min(b["time"] for b in bindings) - start, **milestones(text, start)}


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("started", "profile", "scheduling", "first_binding_s")
    return {k: round(statistics.median(r[k] for r in runs if k in r), 3) for k in keys if any(k in r for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--source", type=Path, help="another tree to compare with (its operator/ first on PYTHONPATH)")
    parser.add_argument("--this", type=Path, help="run this tree instead of the checkout's (e.g. a byte-compiled copy)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    nodes, pods, _ = synthetic_cluster(args.nodes, args.pods)
    trees: dict[str, Path | None] = {"this": args.this, **({"other": args.source} if args.source else {})}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for run in range(args.runs):
        order = list(trees) if run % 2 == 0 else list(reversed(trees))
        for name in order:
            outcome = one_run(nodes, pods, trees[name], args.timeout)
            results[name].append(outcome)
            print(f"run {run + 1} {name:>5}: " + ", ".join(f"{k} {v:.3f}" for k, v in outcome.items()), flush=True)
    table = {name: summary(runs) for name, runs in results.items()}
    for name, row in table.items():
        print(f"median {name:>5} ({args.runs} runs): " + ", ".join(f"{k} {v:.3f} s" for k, v in row.items()))
    if args.json:
        args.json.write_text(json.dumps({"medians": table, "runs": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
