#!/usr/bin/env bash
# Install tlindex into .venv, ingest the bundled sample traces (tests/data) and serve them.
# Extra arguments go to `tlindex serve` (that is, `datasette serve`), e.g. --port 8002.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/tlindex ingest tests/data --db sample.db
port=8001
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    -p|--port) port="${args[$((i + 1))]:-$port}" ;;
    --port=*) port="${args[$i]#--port=}" ;;
  esac
done
echo "tlindex: http://127.0.0.1:${port}/sample/-/tlindex  (runs, findings, stack tries; Datasette's home page links it too)"
exec .venv/bin/tlindex serve sample.db "$@"
