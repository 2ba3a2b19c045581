#!/usr/bin/env bash
# Install tlindex into .venv, ingest the bundled sample traces (tests/data, versions/ aside) and serve them.
# `tlindex serve` prints the URL to open (the runs page) and takes a free port when 8001 is taken.
# Extra arguments go to `tlindex serve` (and on to `datasette serve`), e.g. --open or --port 8002.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
# The sample set (torch 2.13.0): tests/data's scenario folders; versions/ holds the same scenarios per torch version
sample=()
for folder in tests/data/*/; do
  [ "$folder" = tests/data/versions/ ] || sample+=("$folder")
done
.venv/bin/tlindex ingest "${sample[@]}" --db sample.db
exec .venv/bin/tlindex serve sample.db "$@"
