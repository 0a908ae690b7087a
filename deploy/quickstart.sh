#!/usr/bin/env bash
# From a fresh clone to a live human-in-the-loop run: installs hango with its embedded PostgreSQL and Redis,
# starts everything with `hango standalone`, creates a tenant, and plays the tour in deploy/tour.py — a run that
# pauses on a write to /memories/AGENTS.md, a member's refused approval, an admin's approval, and the run finishing,
# all watched live over Server-Sent Events. The server keeps running until Ctrl-C (HANGO_QUICKSTART_EXIT=1: stop).
# The terminal shows the banners and the tour; the install's and the processes' output go to $data/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

data=${HANGO_QUICKSTART_DATA:-.hango/quickstart}
port=${HANGO_PORT:-8000}
logs=$data/logs
# The data folder holds the owner's token and the services' passwords: private, as `hango standalone` keeps it.
(umask 077 && mkdir -p "$logs")

echo "hango quickstart: installing into .venv (output in $logs/install.log)"
install() {
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[standalone]'
}
(umask 077 && : > "$logs/install.log")  # the log alone: what pip installs keeps the usual modes
install > "$logs/install.log" 2>&1 || { cat "$logs/install.log" >&2; exit 1; }

rm -f "$data/standalone.json"
.venv/bin/hango standalone --data-dir "$data" --port "$port" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 1 240); do
  [ -s "$data/standalone.json" ] && break
  kill -0 $server 2>/dev/null || { echo "hango standalone exited; see $logs" >&2; exit 1; }
  sleep 0.5
done
[ -s "$data/standalone.json" ] || { echo "hango standalone did not start in time; see $logs" >&2; exit 1; }

json() { .venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
if [ ! -s "$data/owner.json" ]; then
  (umask 077 && HANGO_DATABASE_URL=$(json "$data/standalone.json" database_url) \
    .venv/bin/hango tenants create quickstart --owner-email "owner@quickstart.example" --json > "$data/owner.json")
fi

.venv/bin/python deploy/tour.py "http://127.0.0.1:$port" "$(json "$data/owner.json" token)"

if [ "${HANGO_QUICKSTART_EXIT:-0}" = "1" ]; then
  exit 0
fi
echo
echo "hango is serving on http://127.0.0.1:$port (reviewers' inbox: /inbox, API docs: /docs); data and logs in $data. Press Ctrl-C to stop."
wait $server
