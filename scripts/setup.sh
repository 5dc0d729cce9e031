#!/usr/bin/env bash
# Create ./.venv with tb-diagnostics installed (editable). Idempotent.
#   scripts/setup.sh          the tab and the CLI (no torch: reading traces never needs it)
#   scripts/setup.sh --test   plus torch (CPU, pinned), pytest, ruff, Playwright
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)

if [ "${1:-}" = "--test" ]; then
  # torch first and pinned: an unpinned torch makes pip fetch a multi-GB CUDA build,
  # while 2.13.0 is the CPU build these machines carry.
  "${PIP[@]}" "torch==2.13.0"
  "${PIP[@]}" -c scripts/constraints-test.txt -e ".[test]"
else
  "${PIP[@]}" -e .
fi
