#!/usr/bin/env bash
# Install tlindex with its test dependencies into .venv and run the test suite.
# The browser tests drive Debian's Chromium with Playwright (no browser download);
# as root, this installs it (and the sqlite3 shell) when missing, elsewhere those tests skip. The Spark
# tests (slow: CI runs them) need pyspark and Java 17: TLINDEX_SPARK=1 installs the spark extra (CI sets it).
# Lints with ruff first. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=""
command -v chromium >/dev/null || missing="$missing chromium"
command -v sqlite3 >/dev/null || missing="$missing sqlite3"  # the shell reads the payloads view (a test)
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test${TLINDEX_SPARK:+,spark}]"
# tlindex run's tests run real torch programs: with TLINDEX_TORCH_TESTS=1 (CI sets it) a Python with
# torch 2.13.0 goes into .venv-torch (pinned: pip takes the CPU build these machines hold); else they skip.
if [ "${TLINDEX_TORCH_TESTS:-}" = 1 ] && [ ! -x .venv-torch/bin/python ]; then
  python3 -m venv .venv-torch
  .venv-torch/bin/python -m pip install -q torch==2.13.0 numpy
fi
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
