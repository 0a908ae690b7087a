#!/usr/bin/env bash
# From a fresh clone to a live human-in-the-loop run: installs hango with its embedded PostgreSQL and Redis,
# starts everything with `hango standalone`, creates a tenant, and plays the tour in deploy/tour.py — a run that
# pauses on a write to /memories/AGENTS.md, a member's refused approval, an admin's approval, and the run finishing,
# all watched live over Server-Sent Events; then a conversation on a thread, whose follow-up run answers from the
# earlier turns; then a call to a tool of an MCP server (examples/mcp/notes_server.py, named in $data/mcp.json) that
# waits for the admin's approval before it writes a note under $data/notes. The server keeps running until Ctrl-C
# (HANGO_QUICKSTART_EXIT=1: stop).
# The terminal shows the banners and the tour; the install's and the processes' output go to $data/logs/.
#
# HANGO_PORT (8000) is the API's port, HANGO_QUICKSTART_DATA (.hango/quickstart) the data folder. Before installing
# anything or touching a file, the script takes the data folder's lock (standalone.lock, which the running
# `hango standalone` and its processes hold): when a hango already serves the folder it prints where, in one line,
# and leaves it alone; a port another program listens on gets one line too. .venv is installed again only when
# setup.cfg, pyproject.toml or deploy/constraints.txt (the pinned versions) changed since its last install (their
# hash is kept in .venv/.hango-quickstart-install; tests/run.sh's stamp of the dev extra, which holds the standalone
# one, counts as well).
set -euo pipefail
cd "$(dirname "$0")/.."

port=${HANGO_PORT:-8000}
# The data folder holds the owner's token and the services' passwords: private, as `hango standalone` keeps it.
(umask 077 && mkdir -p "${HANGO_QUICKSTART_DATA:-.hango/quickstart}/logs")
data=$(cd "${HANGO_QUICKSTART_DATA:-.hango/quickstart}" && pwd -P)
logs=$data/logs
venv=.venv
stamp=$venv/.hango-quickstart-install

# `check lock` takes the data folder's lock for this script on its descriptor 9 (a lock belongs to the open file, so
# it outlives the check), or says who holds it; `check port` tries the port. The system's python3, as .venv may not
# exist yet. Each prints one line and fails (3: hango already serves the folder) when the answer is no.
check() {
  python3 - "$1" "$data" "$port" <<'EOF'
import errno
import fcntl
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

what, data, port = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])


def command_line(pid: int) -> list[str]:
    if not Path("/proc/self").exists():
        found = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True)
        return found.stdout.split()
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def serving_at() -> str | None:
    """The API's URL when standalone.json names a live supervisor (a killed one's pid may serve another program)."""
    try:
        state = json.loads((data / "standalone.json").read_text())
        pid, url = int(state["pid"]), str(state["api_url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if "standalone" in command_line(pid) else None


if what == "lock":
    try:
        fcntl.flock(9, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        url = serving_at()
        if url:
            print(f"hango is already running at {url}/inbox (data in {data})")
            sys.exit(3)
        sys.exit(f"hango is starting or stopping in {data} (its standalone.lock is taken); run this again when it is done")
elif what == "port":
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                sys.exit(f"port {port} is in use by another program; set HANGO_PORT to a free port")
            sys.exit(f"cannot use port {port} ({exc.strerror}); set HANGO_PORT to a free port")
EOF
}

# 1. The folder's lock, kept while installing so that a second quickstart cannot install beside this one, then the
#    port: before anything else happens.
(umask 077 && : >> "$data/standalone.lock")
exec 9< "$data/standalone.lock"
status=0
check lock || status=$?
[ "$status" = 3 ] && exit 0
[ "$status" = 0 ] || exit "$status"
check port

# 2. .venv.
setup_hash() {
  cat setup.cfg pyproject.toml deploy/constraints.txt | python3 -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'
}
install() {
  python3 -m venv "$venv"
  # uv installs the same requirements as pip in seconds instead of a minute or more; pip itself when uv cannot.
  if "$venv/bin/python" -m pip install --quiet uv \
    && "$venv/bin/python" -m uv pip install --quiet --python "$venv/bin/python" -c deploy/constraints.txt -e '.[standalone]'; then
    return 0
  fi
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -c deploy/constraints.txt -e '.[standalone]'
}
want=$(setup_hash)
if [ -x "$venv/bin/hango" ] && { [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
  || [ "$(cat "$venv/.hango-dev-install" 2>/dev/null)" = "$want" ]; }; then
  echo "hango quickstart: .venv is up to date with setup.cfg, pyproject.toml and deploy/constraints.txt; not installing"
else
  echo "hango quickstart: installing into .venv (output in $logs/install.log)"
  (umask 077 && : > "$logs/install.log")  # the log alone: what pip installs keeps the usual modes
  install > "$logs/install.log" 2>&1 || { cat "$logs/install.log" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# 3. The operator's MCP servers (HANGO_MCP_CONFIG): one, the demo notes server of examples/mcp/notes_server.py,
#    which a worker starts with the venv's Python, keeping its notes in $data/notes. `hango standalone` hands its
#    environment on to the API and the worker it starts, so they all read this file. It is written afresh at each
#    start (the checkout may have moved); a HANGO_MCP_CONFIG of your own is replaced here, so start
#    `hango standalone` yourself to use it.
.venv/bin/python - "$data" "$PWD" <<'EOF'
import json
import sys
from pathlib import Path

data, checkout = Path(sys.argv[1]), Path(sys.argv[2])
notes = {
    "command": str(checkout / ".venv" / "bin" / "python"),
    "args": [str(checkout / "examples" / "mcp" / "notes_server.py"), str(data / "notes")],
    "description": "the quickstart's demo: notes kept as files in the data folder",
}
(data / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": notes}}, indent=2) + "\n")
EOF
export HANGO_MCP_CONFIG=$data/mcp.json

# 4. hango standalone, which takes the lock itself. It writes standalone.json once its API answers, so the file is
#    this run's once it names this run's pid (one a killed run left behind names another).
exec 9<&-
.venv/bin/hango standalone --data-dir "$data" --port "$port" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT INT TERM

json() { .venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
started() { [ "$(json "$data/standalone.json" pid 2>/dev/null)" = "$server" ]; }
for _ in $(seq 1 240); do
  started && break
  kill -0 $server 2>/dev/null || { echo "hango quickstart: hango standalone stopped; see $logs" >&2; exit 1; }
  sleep 0.5
done
started || { echo "hango quickstart: hango standalone did not start in time; see $logs" >&2; exit 1; }
base=$(json "$data/standalone.json" api_url)

if [ ! -s "$data/owner.json" ]; then
  (umask 077 && HANGO_DATABASE_URL=$(json "$data/standalone.json" database_url) \
    .venv/bin/hango tenants create quickstart --owner-email "owner@quickstart.example" --json > "$data/owner.json")
fi

.venv/bin/python deploy/tour.py "$base" "$(json "$data/owner.json" token)"

if [ "${HANGO_QUICKSTART_EXIT:-0}" = "1" ]; then
  exit 0
fi
echo
echo "hango is serving: the reviewers' inbox at $base/inbox, the API docs at $base/docs; data in $data, logs in $logs."
echo "Press Ctrl-C to stop; a second run of this script meanwhile only says where hango runs."
wait $server
