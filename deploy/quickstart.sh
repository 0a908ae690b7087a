#!/usr/bin/env bash
# From a fresh clone to a running hango API: virtualenv, PostgreSQL and Redis on 127.0.0.1, schema, a tenant
# with its owner, the API server, and a short tour of it. The server keeps running until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
source deploy/local-services.sh
ensure_postgres
ensure_redis

database=${HANGO_QUICKSTART_DB:-hango}
export HANGO_DATABASE_URL=${HANGO_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/$database}
export HANGO_REDIS_URL=${HANGO_REDIS_URL:-redis://127.0.0.1:6379/0}
port=${HANGO_PORT:-8000}
hango=.venv/bin/hango

psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$database'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE \"$database\""
$hango db upgrade

mkdir -p .hango
if [ ! -s .hango/quickstart-owner.json ]; then
  $hango tenants create quickstart --owner-email "owner-$(date +%s)@example.com" --json > .hango/quickstart-owner.json
fi
token=$(.venv/bin/python -c 'import json; print(json.load(open(".hango/quickstart-owner.json"))["token"])')

$hango api --host 127.0.0.1 --port "$port" --workers 1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server' EXIT INT TERM

.venv/bin/python deploy/tour.py "http://127.0.0.1:$port" "$token"
echo
echo "hango is serving on http://127.0.0.1:$port (API docs: /docs). The owner's token is in .hango/quickstart-owner.json."
echo "Press Ctrl-C to stop."
wait $server
