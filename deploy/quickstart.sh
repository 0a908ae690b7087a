#!/usr/bin/env bash
# From a fresh clone to a live human-in-the-loop run: installs hango with its embedded PostgreSQL and Redis,
# starts everything with `hango standalone`, creates a tenant, and plays the tour in deploy/tour.py — a run that
# pauses on a write to /memories/AGENTS.md, a member's refused approval, an admin's approval, and the run finishing,
# all watched live over Server-Sent Events. The server keeps running until Ctrl-C (HANGO_QUICKSTART_EXIT=1: stop).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[standalone]'

data=${HANGO_QUICKSTART_DATA:-.hango/quickstart}
port=${HANGO_PORT:-8000}
mkdir -p "$data"
rm -f "$data/standalone.json"

.venv/bin/hango standalone --data-dir "$data" --port "$port" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 1 240); do
  [ -s "$data/standalone.json" ] && break
  kill -0 $server 2>/dev/null || { echo "hango standalone exited; see $data/logs" >&2; exit 1; }
  sleep 0.5
done
[ -s "$data/standalone.json" ] || { echo "hango standalone did not start in time" >&2; exit 1; }

json() { .venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
if [ ! -s "$data/owner.json" ]; then
  HANGO_DATABASE_URL=$(json "$data/standalone.json" database_url) \
    .venv/bin/hango tenants create quickstart --owner-email "owner@quickstart.example" --json > "$data/owner.json"
fi

.venv/bin/python deploy/tour.py "http://127.0.0.1:$port" "$(json "$data/owner.json" token)"

if [ "${HANGO_QUICKSTART_EXIT:-0}" = "1" ]; then
  exit 0
fi
echo
echo "hango is serving on http://127.0.0.1:$port (API docs: /docs); data in $data. Press Ctrl-C to stop."
wait $server
