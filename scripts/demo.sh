#!/usr/bin/env bash
# Install tlindex into .venv, ingest the bundled sample traces (tests/data) and serve them.
# Extra arguments go to `tlindex serve` (that is, `datasette serve`), e.g. --port 8002.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/tlindex ingest tests/data --db sample.db
exec .venv/bin/tlindex serve sample.db "$@"
