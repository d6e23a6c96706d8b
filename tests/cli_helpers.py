"""Running `placer simulate` in-process for the CLI tests (test_simulate_cli, test_simulate_gang):
one place for how a test calls the CLI and writes its input files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """`placer simulate ARGS`: (exit code, stdout, stderr)."""
    code = main(["simulate", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> dict[str, Any]:
    """`placer simulate ARGS --output json`, which must succeed: the parsed result."""
    code, out, err = run(capsys, *args, "--output", "json")
    assert code == 0, err
    return json.loads(out)


def write(path: Path, *documents: Any) -> Path:
    """`documents` as a multi-document YAML file at `path`."""
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path
