#!/usr/bin/env bash
# The test command: sets up what the tests need, then runs the whole suite against PostgreSQL and Redis on 127.0.0.1,
# with lint, type-check and the import layers beside it. Arguments go to pytest (`bash tests/run.sh -q -k foo`).
#
# Set-up, each step skipped when already done, so that a second run starts at once:
#   1. .venv with `pip install -c deploy/constraints.txt -e '.[dev]'` (through uv, which pip installs first, or else
#      pip itself; the constraints pin the versions main is tested with): created when missing; installed again when
#      a requirement of hango or of its dev extra is missing (a `.venv` from deploy/quickstart.sh has only
#      `.[standalone]`) or when setup.cfg, pyproject.toml or the constraints changed since the last install (their
#      hash is kept in .venv/.hango-dev-install).
#   2. Programs the tests need beyond Python packages: promtool (the alerting rules' tests), taken from PATH or
#      .venv/bin, else extracted into .venv/bin from Debian's prometheus package (`apt-get download`, so nothing is
#      installed system-wide and no Prometheus server gets started) and kept in ~/.cache/hango for other clones; Debian's chromium (the inbox's browser tests),
#      installed with apt-get when /usr/bin/chromium is missing; real third-party MCP servers (npm packages and a venv
#      of mcp-server-git, pinned in tests/support/), installed into ~/.cache/hango/mcp by
#      tests/support/mcp_third_party.py when missing or when their pins changed.
#   3. PostgreSQL and Redis started when they are installed but down (deploy/local-services.sh), unless
#      HANGO_TEST_ADMIN_URL / HANGO_TEST_REDIS_URL point the tests elsewhere.
# Whatever the tests and their processes write to a temporary folder (pytest's tmp_path, process logs, Celery beat
# schedules, ...) goes to one folder of this run, removed at the end; kept, and named, when pytest fails.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
python=$venv/bin/python
stamp=$venv/.hango-dev-install

# 1. Python packages.
setup_hash() {
  cat setup.cfg pyproject.toml deploy/constraints.txt | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'
}

# Prints what .venv lacks for `.[dev]` of this checkout; nothing when all is there.
venv_missing() {
  "$python" -I - <<'EOF'  # -I: not the hango.egg-info in the working directory
import importlib.metadata as metadata
import json
import os
import urllib.parse
import urllib.request


def missing() -> list[str]:
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        return ["pip"]
    try:
        dist = metadata.distribution("hango")
    except metadata.PackageNotFoundError:
        return ["hango"]
    origin = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    source = urllib.request.url2pathname(urllib.parse.urlparse(origin).path) if origin.startswith("file:") else ""
    if not (source and os.path.exists(source) and os.path.samefile(source, ".")):
        return [f"hango from this checkout (installed from {origin or 'an index'})"]
    found = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker and not requirement.marker.evaluate({"extra": "dev"}):
            continue
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            found.append(requirement.name)
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            found.append(f"{requirement.name}{requirement.specifier} (found {version})")
    return found


print(", ".join(missing()))
EOF
}

mkdir -p .hango
exec 9>.hango/tests-setup.lock
command -v flock >/dev/null && flock 9  # two runs at once on a fresh clone: the second waits for the first's set-up
if [ ! -x "$python" ]; then
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: hango needs Python 3.11 or newer as python3" >&2; exit 1; }
  echo "creating $venv" >&2
  python3 -m venv "$venv" || { rm -rf "$venv"; echo "error: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
want=$(setup_hash)
missing=$(venv_missing)
if [ -n "$missing" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if [ -n "$missing" ]; then
    echo "installing hango and its dev extra into $venv; missing: $missing" >&2
  elif [ -f "$stamp" ]; then
    echo "installing hango and its dev extra into $venv: setup.cfg, pyproject.toml or deploy/constraints.txt changed since the last install" >&2
  else
    echo "installing hango and its dev extra into $venv: no install by tests/run.sh recorded there yet" >&2
  fi
  # uv installs the same requirements as pip in a few seconds instead of most of a minute; pip when uv cannot.
  if ! { "$python" -m pip install --quiet uv >/dev/null 2>&1 && "$python" -m uv pip install --quiet --python "$python" -c deploy/constraints.txt -e '.[dev]'; }; then
    "$python" -m pip install --quiet -c deploy/constraints.txt -e '.[dev]'
  fi
  echo "$want" > "$stamp"
fi

# 2. Programs the tests need beyond Python packages. Each is looked for first, installed when missing, or the run
#    stops with a hint.
promtool_hint="install Prometheus's promtool (Debian: apt-get install prometheus; elsewhere the prometheus release tarball) and put it on PATH"
install_promtool() {  # promtool alone, from Debian's prometheus package, into .venv/bin
  local folder
  folder=$(mktemp -d)
  if ! (cd "$folder" && apt-get download prometheus >/dev/null 2>&1); then
    # Stale package lists are the usual reason; only root may refresh them.
    [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 || true
    (cd "$folder" && apt-get download prometheus >/dev/null 2>&1) || { rm -rf "$folder"; return 1; }
  fi
  dpkg-deb --fsys-tarfile "$folder"/prometheus_*.deb | tar -x -C "$folder" ./usr/bin/promtool || { rm -rf "$folder"; return 1; }
  mv "$folder/usr/bin/promtool" "$venv/bin/promtool"
  rm -rf "$folder"
}
# Kept in the user's cache too, so that another clone on this machine links it instead of downloading it again.
promtool_cache=${XDG_CACHE_HOME:-$HOME/.cache}/hango/promtool
if ! command -v promtool >/dev/null && [ ! -x "$venv/bin/promtool" ]; then
  if [ -x "$promtool_cache" ]; then
    ln -sf "$promtool_cache" "$venv/bin/promtool"
  else
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { echo "error: promtool is missing: $promtool_hint" >&2; exit 1; }
    echo "installing promtool into $venv/bin from Debian's prometheus package" >&2
    install_promtool || { echo "error: could not get promtool with apt-get download prometheus: $promtool_hint" >&2; exit 1; }
    mkdir -p "$(dirname "$promtool_cache")" && cp "$venv/bin/promtool" "$promtool_cache.$$" && mv "$promtool_cache.$$" "$promtool_cache" || true
  fi
fi

# Chromium for the inbox's browser tests: Debian's package (Playwright drives /usr/bin/chromium; its own browser
# download cannot be used here), installed with apt-get when missing.
chromium_hint="install Debian's chromium (apt-get install chromium) as root"
if [ ! -x /usr/bin/chromium ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || { echo "error: chromium is missing: $chromium_hint" >&2; exit 1; }
  echo "installing chromium with apt-get (the inbox's browser tests)" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || { echo "error: apt-get install chromium failed: $chromium_hint" >&2; exit 1; }
  fi
fi

# Third-party MCP servers for the MCP tests: pinned npm packages and mcp-server-git's own venv, kept in
# ~/.cache/hango/mcp for every clone. tests/support/mcp_third_party.py installs what is missing or pinned anew, and
# takes a few milliseconds when all is there. Node.js with npm must be there already.
"$python" -m tests.support.mcp_third_party || exit 1

# 3. Services.
# shellcheck source=deploy/local-services.sh
source deploy/local-services.sh
[ -n "${HANGO_TEST_ADMIN_URL:-}" ] || ensure_postgres
[ -n "${HANGO_TEST_REDIS_URL:-}" ] || ensure_redis
exec 9>&-  # the end of set-up: releases the lock

# This run's temporary folder: TMPDIR for pytest and all it starts, and its --basetemp (tmp_path's folders;
# tests/conftest.py puts the processes' logs in its logs/ and points the tests' TMPDIR at its tmp/).
# Short names: a standalone test's PostgreSQL socket path is built under it and may not exceed 107 bytes.
run=$(mktemp -d "${TMPDIR:-/tmp}/hango-run-XXXXXX")
pytest_status=running
finish() {  # keeps the folder only after pytest failed or was stopped, and only when the tests wrote something there
  [ -n "${static_pid:-}" ] && kill "$static_pid" 2>/dev/null || true
  rm -rf "$run/pycache"
  if [[ $pytest_status =~ ^(0|5)$ ]] || [ -z "$(find "$run" -type f -print -quit)" ]; then
    rm -rf "$run"
  else
    local what="exited with $pytest_status"
    [ "$pytest_status" = running ] && what="was stopped"
    echo "tests/run.sh: pytest $what; its temporary files are kept in $run (process logs: $run/p/*/logs)" >&2
  fi
}
trap finish EXIT

# The static checks run beside the tests: they keep a core busy for ~20 s while the tests mostly wait on the
# processes they start. Their output is shown, and their verdict counted, once pytest is done.
static_checks() {
  "$python" -m ruff check . && "$python" -m ruff format --check . && "$python" -m mypy \
    && "$venv/bin/lint-imports"  # hango's layers (pyproject.toml [tool.importlinter])
}
static_checks > "$run/static-checks.log" 2>&1 &
static_pid=$!
# In parallel: HANGO_TEST_PROCESSES pytest-xdist processes (4 by default; most tests wait on processes they
# started, so twice the cores pays), each with a database, a Celery queue and a port range of its own (the session
# fixtures and tests/support/processes.py), a test file's tests in one process. `-n 0` after it runs them in one.
processes=${HANGO_TEST_PROCESSES:-4}
# The files in the order collected (tests/conftest.py puts the slow tier first), not xdist's "most tests first".
# Compiled bytecode is kept for this run, under its folder, even where PYTHONDONTWRITEBYTECODE asks for none: the
# hundreds of processes the tests start (API servers, workers, CLI calls) then compile hango and its libraries
# once, not each time, and nothing is written into the checkout.
TMPDIR=$run PYTHONPYCACHEPREFIX=$run/pycache PYTHONDONTWRITEBYTECODE= \
  "$python" -m pytest --basetemp="$run/p" -n "$processes" --dist loadfile --no-loadscope-reorder "$@" \
  && pytest_status=0 || pytest_status=$?
wait "$static_pid" && static_status=0 || static_status=$?
if [ "$static_status" = 0 ]; then
  echo "static checks passed: ruff, ruff format, mypy, lint-imports"
else
  sed 's/^/  /' "$run/static-checks.log" >&2
  echo "tests/run.sh: the static checks failed (ruff, ruff format, mypy, lint-imports; their output above)" >&2
fi
rm -f "$run/static-checks.log"
[ "$pytest_status" = 0 ] && [ "$static_status" != 0 ] && exit 1
exit "$pytest_status"
