#!/usr/bin/env bash
# Set up and run every check: ruff, then the whole pytest suite (browser tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test

# Browser tests drive Debian's Chromium through Playwright (never `playwright install`).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: chromium is not installed (and this is not root): browser tests will be skipped"
  fi
fi

.venv/bin/ruff check plugin tests workloads bench fuzz
.venv/bin/python -m pytest "$@"
