"""Real third-party MCP servers for the tests, from the package registries, pinned and kept in ~/.cache/hango/mcp.

=========================================  =========================  ============================================
server (registry, version)                 transport, protocol        a write tool / a read tool
=========================================  =========================  ============================================
@modelcontextprotocol/server-filesystem    stdio, 2025-11-25          ``write_file`` / ``read_text_file``
(npm, 2026.8.31)                           (TypeScript SDK 1.32)
mcp-server-git (PyPI, 2026.10.19)          stdio, 2026-07-28          ``git_add`` + ``git_commit`` / ``git_log``
                                           (Python SDK 2.3)
@cyanheads/git-mcp-server (npm, 2.15.3)    streamable HTTP, served    ``git_add`` + ``git_commit`` / ``git_log``
                                           natively, 2025-11-25
=========================================  =========================  ============================================

``python -m tests.support.mcp_third_party`` installs what is missing (tests/run.sh runs it at set-up): ``npm ci``
of tests/support/mcp_npm/ (package.json and its lock) into ``npm/``, and a venv of its own for mcp-server-git (it
brings its own ``mcp``, which must not meet hango's) from tests/support/mcp_git_requirements.txt into
``git-venv/``. Each part is installed again only when its pins changed (their digest is written in the part's
folder last, so a broken install is never taken for a finished one), under a lock, since every clone on the
machine shares the folder. Done, it costs a few milliseconds: this module imports only the standard library.

For the tests: :func:`filesystem_entry` and :func:`git_entry` (operator-config entries), :func:`git_http_server`
(a running server's URL).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NPM_PINS = (HERE / "mcp_npm" / "package.json", HERE / "mcp_npm" / "package-lock.json")
GIT_PINS = (HERE / "mcp_git_requirements.txt",)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hango" / "mcp"
NPM = CACHE / "npm"
GIT_VENV = CACHE / "git-venv"
FILESYSTEM_SERVER = NPM / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
GIT_HTTP_SERVER = NPM / "node_modules" / "@cyanheads" / "git-mcp-server" / "dist" / "index.js"
STAMP = ".hango-pins"
NODE_HINT = "install Node.js 20 or newer with npm (Debian: apt-get install nodejs npm)"

# Who the git servers commit as, and no git configuration of the machine's (a signing rule, say) in the way.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "hango tests",
    "GIT_AUTHOR_EMAIL": "tests@hango.example",
    "GIT_COMMITTER_NAME": "hango tests",
    "GIT_COMMITTER_EMAIL": "tests@hango.example",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


class InstallError(Exception):
    """A server could not be installed; the message says what to do."""


def install_missing() -> None:
    """Install each part whose pins are not installed yet; a no-op when all are."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits for the first's install, then finds it done
        ensure("the npm packages", NPM, NPM_PINS, install_npm)
        ensure("mcp-server-git's venv", GIT_VENV, GIT_PINS, install_git_venv, extra=base_python())


def ensure(
    what: str, folder: Path, pins: tuple[Path, ...], install: Callable[[Path], None], *, extra: str = ""
) -> None:
    """Install into ``folder`` afresh unless it holds an install of exactly these pins (and ``extra``)."""
    digest = hashlib.sha256(b"".join(pin.read_bytes() for pin in pins) + extra.encode()).hexdigest()
    stamp = folder / STAMP
    if stamp.is_file() and stamp.read_text() == digest:
        return
    print(f"installing the test MCP servers: {what}, into {folder}", file=sys.stderr)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    install(folder)
    stamp.write_text(digest)


def install_npm(folder: Path) -> None:
    """``npm ci`` of the pinned packages: exactly the lock's versions, no install scripts."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise InstallError(f"node or npm is missing: {NODE_HINT}")
    for pin in NPM_PINS:
        shutil.copy(pin, folder / pin.name)
    run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder)


def install_git_venv(folder: Path) -> None:
    """A venv of mcp-server-git's own, on the interpreter below hango's venv (which another clone may delete)."""
    requirements = str(GIT_PINS[0])
    if importlib.util.find_spec("uv") is not None:  # tests/run.sh installs uv: seconds instead of a minute
        uv = [sys.executable, "-m", "uv"]
        run([*uv, "venv", "--quiet", "--python", base_python(), str(folder)])
        run([*uv, "pip", "sync", "--quiet", "--python", str(folder / "bin" / "python"), requirements])
    else:
        run([base_python(), "-m", "venv", str(folder)])
        run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", requirements])


def base_python() -> str:
    """The interpreter this process's venv was made from."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def run(command: list[str], cwd: Path | None = None) -> None:
    """Run an install command; its output shows only when it fails."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InstallError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def node() -> str:
    """The node program, by its full path (hango gives a stdio server only PATH, HOME and LANG)."""
    found = shutil.which("node")
    if found is None:
        raise InstallError(f"node is missing: {NODE_HINT}")
    return found


def filesystem_entry(root: Path) -> dict[str, Any]:
    """The operator-config entry of the filesystem server (stdio), allowed to touch ``root`` and nothing else."""
    return {"command": node(), "args": [str(FILESYSTEM_SERVER), str(root)]}


def git_entry(repository: Path) -> dict[str, Any]:
    """The operator-config entry of mcp-server-git (stdio), on ``repository``."""
    return {
        "command": str(GIT_VENV / "bin" / "mcp-server-git"),
        "args": ["--repository", str(repository)],
        "env": dict(GIT_ENV),
    }


@contextmanager
def git_http_server(base_dir: Path) -> Iterator[str]:
    """@cyanheads/git-mcp-server over streamable HTTP for the block, on the repositories under ``base_dir``.

    Yields its URL once it answers; stopped after the block.
    """
    # Imported here: they bring the SDK and hango's settings, and this module's own command must stay quick.
    from tests.support.mcp import serving
    from tests.support.processes import free_port

    port = free_port()
    env = {
        "MCP_TRANSPORT_TYPE": "http",
        "MCP_HTTP_HOST": "127.0.0.1",
        "MCP_HTTP_PORT": str(port),
        "MCP_LOG_LEVEL": "warn",
        "GIT_BASE_DIR": str(base_dir),
        "GIT_SIGN_COMMITS": "false",
        **GIT_ENV,
    }
    url = f"http://127.0.0.1:{port}/mcp"
    with serving([node(), str(GIT_HTTP_SERVER)], env, url, f"git-http-{port}"):
        yield url


def main() -> int:
    """Install what is missing; 1 with the reason on stderr when that fails."""
    try:
        install_missing()
    except InstallError as exc:
        print(f"error: the test MCP servers: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
