"""LangGraph's own API server (``langgraph dev``: langgraph-api with its in-memory runtime) for ``bench/peers.py``.

The server runs in a venv of its own, made from ``bench/langgraph_api_requirements.txt`` (pinned) under
``~/.cache/hango/bench/langgraph-api`` on first use, since langgraph-api's pins cannot meet hango's dev venv (the
requirements file says which). ``python -m bench.langgraph_api_server`` installs it ahead of time.

:func:`server` starts ``langgraph dev --no-browser --no-reload`` as a process of its own on a free port, in a
temporary folder holding the ``langgraph.json`` that names :mod:`bench.langgraph_graph` by its path (the in-memory
runtime writes its pickled state there too), and stops it afterwards, Ctrl-C included. The server is given no
environment of the caller's but ``PATH``, ``HOME`` and ``LANG``, and whatever would reach the network is switched
off: the CLI's usage analytics (``LANGGRAPH_CLI_NO_ANALYTICS``), the server's PyPI version check
(``LANGGRAPH_NO_VERSION_CHECK``), LangSmith tracing and with it the Studio organisation lookup
(``LANGSMITH_TRACING``), the browser opening Studio (``--no-browser``); with no license or LangSmith key, the
server's metadata beacon does not start.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.common import free_port, stop

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "langgraph_api_requirements.txt"
GRAPH_FILE = HERE / "langgraph_graph.py"
GRAPH = "approval"  # the graph's id in langgraph.json, which the SDK's runs name as their assistant
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hango" / "bench"
VENV = CACHE / "langgraph-api"
STAMP = ".hango-pins"
QUIET = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


def install_missing() -> None:
    """Make the server's venv unless it holds exactly the pinned requirements already (a no-op then)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another clone installing the same folder finishes first
        digest = hashlib.sha256(REQUIREMENTS.read_bytes() + base_python().encode()).hexdigest()
        stamp = VENV / STAMP
        if stamp.is_file() and stamp.read_text() == digest:
            return
        print(f"installing langgraph-api's venv into {VENV}", file=sys.stderr, flush=True)
        shutil.rmtree(VENV, ignore_errors=True)
        _install(VENV)
        stamp.write_text(digest)  # last, so that a broken install is never taken for a finished one


def _install(folder: Path) -> None:
    if importlib.util.find_spec("uv") is not None:
        uv = [sys.executable, "-m", "uv"]
        _run([*uv, "venv", "--quiet", "--python", base_python(), str(folder)])
        _run([*uv, "pip", "sync", "--quiet", "--python", str(folder / "bin" / "python"), str(REQUIREMENTS)])
    else:
        _run([base_python(), "-m", "venv", str(folder)])
        _run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)])


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def base_python() -> str:
    """The interpreter this process's venv was made from."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def versions() -> dict[str, str]:
    """The pinned versions of the server's own packages, as the requirements file gives them."""
    wanted = ("langgraph-api", "langgraph-runtime-inmem", "langgraph-cli", "langgraph")
    pins = dict(
        line.split("==", 1) for line in REQUIREMENTS.read_text().splitlines() if "==" in line and line[0] != "#"
    )
    return {name: pins[name] for name in wanted}


@contextmanager
def server(startup_timeout: float = 120) -> Iterator[str]:
    """``langgraph dev`` serving :mod:`bench.langgraph_graph` as ``approval`` for the block; yields its URL."""
    install_missing()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hango-bench-langgraph-") as folder:
        config = Path(folder) / "langgraph.json"
        config.write_text(json.dumps({"dependencies": ["."], "graphs": {GRAPH: f"{GRAPH_FILE}:graph"}}))
        log = Path(folder) / "server.log"
        command = [str(VENV / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port)]
        with open(log, "wb") as output:
            child = subprocess.Popen(
                [*command, "--config", str(config)],
                cwd=folder,
                env=_environment(),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, child, log, startup_timeout)
            yield url
        finally:
            stop(child, own_group=True)


def _environment() -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home())}
    env["LANG"] = os.environ.get("LANG", "C.UTF-8")
    return {**env, **QUIET}


def _wait_ready(url: str, child: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"langgraph dev exited ({child.returncode}):\n{_tail(log)}")
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"langgraph dev did not answer {url}/ok within {timeout:.0f} s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


if __name__ == "__main__":
    install_missing()
