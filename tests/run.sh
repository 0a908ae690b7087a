#!/usr/bin/env bash
# The test command: lint, type-check, then the whole suite against PostgreSQL and Redis on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
[ -x "$bin/python" ] || bin=$(dirname "$(command -v python3)")

"$bin/python" -m ruff check .
"$bin/python" -m ruff format --check .
"$bin/python" -m mypy
"$bin/python" -m pytest "$@"
