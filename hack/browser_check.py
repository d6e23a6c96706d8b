#!/usr/bin/env python3
"""Open `placer simulate --html`'s page in a real headless browser: `make html-check`.

    python hack/browser_check.py [--out build/report] [--chromium chromium]

1. Runs `placer simulate` on the bundled sample cluster (every example profile, preemption included)
   with `-o json --html OUT/simulation.html`.
2. Has headless Chromium load the page from disk with the network cut off and print the DOM it
   built: the page's own script must have run (`<body data-ready="true">`), with one node row per
   node and one placement row per pod of the JSON, each showing the JSON's node and total.
3. Has Chromium screenshot it to OUT/simulation.png, for a person to look at.

Chromium is Debian's (`apt-get install chromium`); without it this says so and exits 2. The same
structure is checked without a browser by tests/test_simulate_html.py, which runs with the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
PROFILES = [ROOT / "examples" / "profiles" / "all.yaml", ROOT / "examples" / "profiles" / "priority.yaml"]
WINDOW = "1400,2600"


class Rows(HTMLParser):
    """The `data-*` of the rows a browser's DOM dump holds, and the body's."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.nodes: list[dict[str, str | None]] = []
        self.placements: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if tag == "body":
            self.body = found
        elif tag == "tr" and "node" in classes:
            self.nodes.append(found)
        elif tag == "tr" and "placement" in classes:
            self.placements.append(found)


def chromium(args: list[str], binary: str, profile_dir: str) -> subprocess.CompletedProcess[str]:
    command = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
        f"--user-data-dir={profile_dir}",
        # nothing may come from the network: any request would fail to resolve
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--virtual-time-budget=5000",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "report")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "chromium"))
    args = parser.parse_args(argv)

    binary = shutil.which(args.chromium)
    if binary is None:
        print(f"{args.chromium}: not found; install Debian's: apt-get update && apt-get install -y chromium",
              file=sys.stderr)
        return 2
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    page, shot = args.out / "simulation.html", args.out / "simulation.png"
    placer = Path(sys.executable).parent / "placer"
    profiles = [a for p in PROFILES for a in ("--profile", str(p))]
    command = [str(placer), "simulate", "--cluster", str(CLUSTER), *profiles, "-o", "json", "--html", str(page)]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        print(f"placer simulate failed ({run.returncode}):\n{run.stderr}", file=sys.stderr)
        return 1
    result = json.loads(run.stdout)

    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="placer-chromium-") as profile_dir:
        dom = chromium(["--dump-dom", page.as_uri()], binary, profile_dir)
        if dom.returncode != 0 or "<body" not in dom.stdout:
            print(f"chromium --dump-dom failed ({dom.returncode}):\n{dom.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows = Rows()
        rows.feed(dom.stdout)
        if rows.body.get("data-ready") != "true":
            problems.append("the page's script did not run in the browser (no <body data-ready=\"true\">)")
        placements = result["placements"]
        if len(rows.placements) != len(placements):
            problems.append(f"{len(rows.placements)} placement rows, simulate placed {len(placements)} pods")
        for row, placement in zip(rows.placements, placements, strict=False):
            if (row.get("data-pod"), row.get("data-node") or None) != (placement["pod"], placement["node"]):
                problems.append(f"row {row.get('data-pod')} -> {row.get('data-node')!r}, JSON: {placement['pod']} -> "
                                f"{placement['node']!r}")
        if not rows.nodes:
            problems.append("no node rows")
        shot.unlink(missing_ok=True)
        taken = chromium([f"--window-size={WINDOW}", f"--screenshot={shot}", page.as_uri()], binary, profile_dir)
        if taken.returncode != 0 or not shot.exists() or shot.stat().st_size < 10_000:
            problems.append(f"no screenshot ({taken.returncode}): {taken.stderr[-1000:]}")
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"ok: {len(rows.nodes)} nodes and {len(rows.placements)} placements rendered by {binary}; "
          f"page {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}, "
          f"screenshot {shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
