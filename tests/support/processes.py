"""Real hango processes for tests: workers and API servers started as a user would, and stopped after."""

from __future__ import annotations

import contextlib
import http.client
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hango.kernel.config import Settings
from hango.platform.queue import PING_TASK

if TYPE_CHECKING:
    from hango.platform.runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]
HANGO = [sys.executable, "-m", "hango"]


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment a hango process needs to run with exactly these settings.

    Every ``HANGO_*`` setting comes from ``settings``; the tests' own ``HANGO_TEST_*`` variables (the Redis and
    PostgreSQL the tests use, the log folder) pass through, since test tools in the process read them.
    """
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("HANGO_") or key.startswith("HANGO_TEST_")
    }
    for name, value in vars(settings).items():
        if value is None:
            continue
        if isinstance(value, timedelta):
            text = f"{value.total_seconds()}"
        elif isinstance(value, tuple):
            text = ",".join(value)
        else:
            text = str(value)
        env[f"HANGO_{name.upper()}"] = text
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def log_path(log_name: str) -> Path:
    """Where a test process writes its output: the session's log folder (tests/conftest.py), else TMPDIR."""
    return Path(os.environ.get("HANGO_TEST_LOG_DIR") or tempfile.gettempdir()) / f"{log_name}.log"


def start(args: list[str], settings: Settings, log_name: str) -> subprocess.Popen[bytes]:
    """Start ``hango ARGS`` in its own process group, logging to :func:`log_path`."""
    log = open(log_path(log_name), "wb")  # noqa: SIM115 (owned by the child)
    return subprocess.Popen(
        [*HANGO, *args], env=settings_env(settings), cwd=ROOT, stdout=log, stderr=log, start_new_session=True
    )


def logged(log_name: str, *needles: str) -> bool:
    """Whether one line of a process's log holds every needle."""
    path = log_path(log_name)
    if not path.exists():
        return False
    return any(all(needle in line for needle in needles) for line in path.read_text(errors="replace").splitlines())


def stop(process: subprocess.Popen[bytes], *, kill: bool = False, timeout: float = 30) -> int:
    """Stop a process group: SIGTERM (a clean stop) or SIGKILL (a crash); returns the exit code."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait(timeout=timeout)


def worker_log_name(settings: Settings, name: str) -> str:
    """The log name of a worker started by :func:`worker`."""
    return f"hango-test-{name}-{settings.queue}"


@contextmanager
def worker(
    settings: Settings, *, concurrency: int = 2, beat: bool = True, name: str = "worker"
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``hango worker`` process for the duration of the block."""
    args = ["worker", "--concurrency", str(concurrency)] + (["--beat"] if beat else [])
    process = start(args, settings, worker_log_name(settings, name))
    try:
        yield process
    finally:
        stop(process)


def worker_answer(runtime: Runtime, task: str = PING_TASK, *, timeout: float = 60) -> bytes:
    """Send ``task`` (``hango.ping`` or ``hango.worker_stats``) to the runtime's queue and return what the worker that
    takes it pushes to the task's reply key: once a worker answers a ping, it consumes that queue.

    The wait is a series of short ``BLPOP``s: the runtime's Redis client gives up reading after 5 s (its socket
    timeout), so one long ``BLPOP`` would fail while a worker is still starting on a loaded machine.
    """
    reply = f"hango:test:reply:{uuid.uuid4().hex}"
    runtime.queue._celery.send_task(task, args=[reply], queue=runtime.settings.queue)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = runtime.redis.blpop([reply], timeout=2)
        if answer is not None:
            return bytes(answer[1])
    raise AssertionError(f"no worker answered {task} on {runtime.settings.queue} within {timeout:.0f}s")


# The ports a test process hands out. Under pytest-xdist each process (gw0, gw1, ...) takes them from a range of
# its own, below the kernel's ephemeral range, so two processes never pick the same free port at once; alone, a
# process asks the kernel for any free one.
_PORTS_PER_PROCESS = 1000
_FIRST_PORT = 20000
# Each test process starts at a random place in its range: two test sessions run side by side (two checkouts on one
# machine) then rarely pick the same port between one's probe and its server's bind.
_next_port = itertools.count(random.randrange(_PORTS_PER_PROCESS))


def free_port() -> int:
    """A TCP port free on the loopback interface, from this test process's own range under pytest-xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return _bind_to_find(0)
    first = _FIRST_PORT + int(worker.removeprefix("gw")) * _PORTS_PER_PROCESS
    for _ in range(_PORTS_PER_PROCESS):
        port = first + next(_next_port) % _PORTS_PER_PROCESS
        with contextlib.suppress(OSError):
            return _bind_to_find(port)
    raise AssertionError(f"no free port in {first}-{first + _PORTS_PER_PROCESS - 1}")


def _bind_to_find(port: int) -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))
        found: int = probe.getsockname()[1]
        return found


@contextmanager
def api_server(settings: Settings, *, workers: int = 1, connections: int = 32) -> Iterator[str]:
    """A ``hango api`` server of ``workers`` gunicorn processes; yields its base URL once it is healthy."""
    with api_process(settings, workers=workers, connections=connections) as (base, _):
        yield base


# How long a test's API server has to stop on SIGTERM before it is killed. gunicorn waits up to its graceful timeout
# (10 s) for requests in flight, and an event stream the test left open is one until the client goes: its wait is
# no part of what these tests check (tests/integration/test_cli.py checks a clean stop with a server of its own).
API_STOP_GRACE = 3.0


@contextmanager
def api_process(
    settings: Settings, *, workers: int = 1, connections: int = 32
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`api_server`, yielding the gunicorn arbiter's process too."""
    port = free_port()
    args = ["api", "--port", str(port), "--workers", str(workers), "--connections", str(connections)]
    process = start(args, settings, f"hango-test-api-{port}")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(base) or _died(process), timeout=30)
        assert process.poll() is None, "the API server exited at start"
        yield base, process
    finally:
        stop(process, timeout=API_STOP_GRACE)


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:  # noqa: S310 (loopback)
            return bool(response.status == 200)
    except OSError:
        return False


def _died(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is not None


def wait_until(condition, timeout: float = 30, interval: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def get_status(base: str, path: str, token: str, *, timeout: float = 30) -> int:
    """The status of a GET of ``path`` on a server, with a bearer token (the body is read and dropped)."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def remote_cli(settings: Settings, base: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run(person, *args, stdin=None)``: ``hango ARGS`` as the holder of ``person.token`` against the API server at
    ``base`` (``HANGO_URL`` and ``HANGO_TOKEN`` in its environment), ``stdin`` on its input."""

    def run(person: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**settings_env(settings), "HANGO_URL": base, "HANGO_TOKEN": person.token}
        command = [*HANGO, *args]
        return subprocess.run(command, env=env, input=stdin, capture_output=True, text=True, timeout=120, check=False)

    return run
