"""``hango standalone`` as a user runs it: one command on an embedded PostgreSQL and Redis, with no HANGO_* set.

Each test starts the real command in its own process group, talks to it through :mod:`hango.client` and the CLI,
and checks that no process it started outlives it. Each works in a folder of its own that it removes at the end, so
that no data, socket or log is left in /tmp.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from hango.client import Client, Run
from tests.support.processes import free_port, wait_until

pytestmark = pytest.mark.slow

HANGO = [sys.executable, "-m", "hango"]
START_TIMEOUT = 60
SCRIPT = [
    {"text": "Saving.", "tool_calls": [{"name": "write_file", "args": {"file_path": "/notes.txt", "content": "hi"}}]},
    {"text": "Done."},
]
AGENT: dict[str, Any] = {"name": "demo", "model": {"provider": "scripted", "script": SCRIPT}, "tools": ["write_file"]}


def _environment() -> dict[str, str]:
    """The user's environment without any HANGO_* variable, so that standalone embeds both services."""
    return {key: value for key, value in os.environ.items() if not key.startswith("HANGO_")}


@dataclass
class Standalone:
    """A running ``hango standalone`` and how to reach it."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    log: Path
    base: str

    def state(self) -> dict[str, Any]:
        """What the command wrote to ``standalone.json``."""
        state: dict[str, Any] = json.loads((self.data_dir / "standalone.json").read_text())
        return state

    def output(self) -> str:
        """Everything the command printed so far (for assertion messages)."""
        return self.log.read_text(errors="replace")[-4000:]


def command(data_dir: Path, port: int) -> list[str]:
    """The argv of ``hango standalone`` on ``data_dir`` and ``port``."""
    return [*HANGO, "standalone", "--data-dir", str(data_dir), "--port", str(port)]


def start(data_dir: Path, port: int, log: Path) -> Standalone:
    """Start ``hango standalone`` in its own process group and wait until it says its API is ready.

    It says so by writing ``standalone.json`` with its pid (one left by a killed run names another).
    """
    with open(log, "ab") as output:
        process = subprocess.Popen(
            command(data_dir, port), env=_environment(), stdout=output, stderr=output, start_new_session=True
        )
    standalone = Standalone(process, data_dir, log, f"http://127.0.0.1:{port}")
    wait_until(lambda: _state_pid(data_dir) == process.pid or process.poll() is not None, START_TIMEOUT)
    assert process.poll() is None, standalone.output()
    assert _status(f"{standalone.base}/readyz") == 200, standalone.output()
    return standalone


def _state_pid(data_dir: Path) -> int | None:
    try:
        return int(json.loads((data_dir / "standalone.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


@contextmanager
def running(data_dir: Path, port: int, log: Path) -> Iterator[Standalone]:
    """A standalone for the block; whatever the block leaves running is killed at the end, even after a failure."""
    standalone = start(data_dir, port, log)
    try:
        yield standalone
    finally:
        for pid in alive(processes_of(standalone)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        standalone.process.wait(timeout=30)


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback http)
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def create_tenant(standalone: Standalone) -> str:
    """Bootstrap a tenant with the CLI on the embedded database; returns the owner's token."""
    env = {**_environment(), "HANGO_DATABASE_URL": standalone.state()["database_url"]}
    created = subprocess.run(
        [*HANGO, "tenants", "create", "acme", "--owner-email", "owner@example.com", "--json"],
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    token: str = json.loads(created.stdout)["token"]
    return token


def finished_run(standalone: Standalone, token: str, agent_id: str) -> Run:
    """Create a run and wait until it leaves the queue and the worker."""
    with Client(standalone.base, token) as client:
        run = client.create_run(agent_id, "go")
        settled: Run = wait_until(lambda: _settled(client, run["id"]), timeout=60)
    return settled


def _settled(client: Client, run_id: str) -> Run | None:
    run = client.get_run(run_id)
    return run if run["state"] in {"succeeded", "failed", "cancelled"} else None


# Processes


Process = tuple[int, str]
"""A pid with its start time, so that a reused pid is not mistaken for the process."""


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]  # a zombie has already exited


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _mentions(pid: int, needle: bytes) -> bool:
    for name in ("cmdline", "environ"):
        try:
            if needle in Path(f"/proc/{pid}/{name}").read_bytes():
                return True
        except OSError:
            continue
    return False


def processes_of(standalone: Standalone) -> set[Process]:
    """The standalone, its descendants, and every process whose command line or environment names its data."""
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    parents = {pid: _parent(pid) for pid in pids}
    ours = {standalone.process.pid}
    while True:
        more = {pid for pid, parent in parents.items() if parent in ours} - ours
        if not more:
            break
        ours |= more
    needle = str(standalone.data_dir).encode()
    ours |= {pid for pid in pids if _mentions(pid, needle)}
    return {(pid, started) for pid in ours if (started := _start_time(pid)) is not None}


def alive(processes: set[Process]) -> dict[int, str]:
    """Those of ``processes`` still running, with their command lines."""
    return {pid: _command(pid) for pid, started in processes if _start_time(pid) == started}


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def folder() -> Iterator[Path]:
    """A private folder of the test's own in the temporary folder, removed with everything in it at the end."""
    path = Path(tempfile.mkdtemp(prefix="hango-standalone-"))
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process, whose pid stands in for one reused since a crash."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def test_survives_kill_9_and_restarts_on_the_same_data(folder: Path, decoy: subprocess.Popen[bytes]) -> None:
    data_dir, port, log = folder / "data", free_port(), folder / "standalone.log"

    with running(data_dir, port, log) as first:
        wait_until(lambda: f"API at {first.base}, data in {data_dir}" in first.output(), timeout=10)
        # A second standalone on the folder in use stops at once, names the first, and leaves its state alone.
        state = (data_dir / "standalone.json").read_bytes()
        again = subprocess.run(
            command(data_dir, free_port()), env=_environment(), capture_output=True, text=True, timeout=120
        )
        assert again.returncode == 1, again.stderr
        refusal = f"Error: hango standalone is already running on {data_dir}: API at {first.base}"
        assert again.stderr.splitlines() == [f"{refusal} (pid {first.process.pid})"]
        assert again.stdout == ""
        assert (data_dir / "standalone.json").read_bytes() == state
        token = create_tenant(first)
        with Client(first.base, token) as client:
            agent = client.create_agent(AGENT)
        run = finished_run(first, token, agent["id"])
        assert run["state"] == "succeeded", run

        # A crash of everything (a container killed, the machine losing power): every process gets SIGKILL, the
        # supervisor's process group last, so that none has time to stop cleanly when its parent goes.
        before = processes_of(first)
        for pid, _ in sorted(before, key=lambda process: process[0] == first.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.killpg(first.process.pid, signal.SIGKILL)
        wait_until(lambda: not alive(before), timeout=30)

    # The killed PostgreSQL left its postmaster.pid; make its pid one that is now in use, as after a reboot.
    postmaster_pid = data_dir / "postgres" / "postmaster.pid"
    assert postmaster_pid.exists(), "PostgreSQL was meant to die without cleaning up"
    lines = postmaster_pid.read_text().splitlines()
    postmaster_pid.write_text("\n".join([str(decoy.pid), *lines[1:]]) + "\n")
    # The killed supervisor's standalone.json is stale too: its pid is now the decoy's, which is no standalone.
    stale = first.state() | {"pid": decoy.pid}
    (data_dir / "standalone.json").write_text(json.dumps(stale))

    with running(data_dir, port, log) as second:
        assert second.state()["pid"] == second.process.pid
        with Client(second.base, token) as client:
            assert client.get_agent(agent["id"])["name"] == "demo"
            assert client.get_run(run["id"])["state"] == "succeeded"
        assert finished_run(second, token, agent["id"])["state"] == "succeeded"
        assert decoy.poll() is None, "standalone must not touch a process that merely reuses a stale pid"

        started = processes_of(second)
        os.kill(second.process.pid, signal.SIGTERM)
        assert second.process.wait(timeout=60) == 0, second.output()
        assert alive(started) == {}
        assert alive(processes_of(second)) == {}


def test_stops_everything_and_fails_when_a_child_dies(folder: Path) -> None:
    data_dir, log = folder / "data", folder / "standalone.log"
    with running(data_dir, free_port(), log) as standalone:
        started = processes_of(standalone)
        children = [pid for pid, _ in started if _parent(pid) == standalone.process.pid]
        worker = [pid for pid in children if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
        assert len(worker) == 1, children
        os.kill(worker[0], signal.SIGKILL)

        assert standalone.process.wait(timeout=60) == 1, standalone.output()
        assert alive(started) == {}


# Privacy


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _modes_up_to_the_root(path: Path) -> dict[Path, int]:
    """The permission bits of ``path`` and of each folder above it."""
    return {folder: _mode(folder) for folder in (path, *path.parents)}


def _accounts() -> tuple[str, str]:
    return Path("/etc/passwd").read_text(), Path("/etc/group").read_text()


def _socket_folder(data_dir: Path) -> Path:
    """Where the running PostgreSQL put its Unix socket (the fifth line of its ``postmaster.pid``)."""
    return Path((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[4])


def test_keeps_its_folder_private_and_changes_nothing_outside_it(folder: Path) -> None:
    data_dir, log = folder / "data", folder / "standalone.log"
    data_dir.mkdir()
    data_dir.chmod(0o755)  # as the quickstart's ``mkdir -p`` leaves it
    above, accounts = _modes_up_to_the_root(folder), _accounts()

    with running(data_dir, free_port(), log) as standalone:
        assert _mode(data_dir) == 0o700
        logs = {path.name: _mode(path) for path in (data_dir / "logs").iterdir()}
        names = ("standalone", "api", "worker", "postgres", "redis")
        assert logs == {f"{name}.log": 0o600 for name in names}

        socket_dir = _socket_folder(data_dir)
        assert socket_dir.is_relative_to(data_dir), socket_dir
        assert (socket_dir / ".s.PGSQL.5432").is_socket()
        [host] = parse_qs(urlsplit(standalone.state()["database_url"]).query)["host"]
        assert Path(host) == socket_dir
        # The worker's beat keeps its schedule in the data folder too, not in /tmp.
        wait_until(lambda: any((data_dir / "tmp").iterdir()), timeout=30)

        os.kill(standalone.process.pid, signal.SIGTERM)
        assert standalone.process.wait(timeout=60) == 0, standalone.output()

    assert _modes_up_to_the_root(folder) == above
    assert _accounts() == accounts, "no account may be created"
    # The terminal got the banner alone: every process logs into the data folder.
    [banner] = standalone.output().splitlines()
    base, logs, state = standalone.base, data_dir / "logs", data_dir / "standalone.json"
    assert banner == (
        f"hango standalone: API at {base}, data in {data_dir} (reviewers' inbox {base}/inbox, "
        f"API docs {base}/docs, logs in {logs}/, URLs in {state})"
    )


def test_refuses_in_one_line_a_port_another_server_answers_on(folder: Path) -> None:
    # Another program's web server holds the port, and even answers /readyz: it must not pass for hango's API.
    site, port = folder / "site", free_port()
    site.mkdir()
    (site / "readyz").write_text("ok")
    server = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)]
    other = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _status(f"http://127.0.0.1:{port}/readyz") == 200, timeout=30)
        data_dir = folder / "data"
        done = subprocess.run(command(data_dir, port), env=_environment(), capture_output=True, text=True, timeout=120)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()

    assert done.returncode == 1, done.stdout
    assert done.stdout == ""  # no banner
    assert done.stderr.splitlines() == [
        f"Error: port {port} on 127.0.0.1 is in use by another program; choose a free port with --port"
    ]
    assert sorted(path.name for path in data_dir.iterdir()) == ["logs", "standalone.lock"], "nothing was started"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's PostgreSQL must do without root's capabilities")
def test_refuses_clearly_as_root_a_folder_postgres_could_not_reach(folder: Path) -> None:
    # Root enters another account's private folder only by overriding its mode, which its PostgreSQL cannot.
    nobody = pwd.getpwnam("nobody")
    private = folder / "private"
    private.mkdir(mode=0o700)
    os.chown(private, nobody.pw_uid, nobody.pw_gid)
    command = [*HANGO, "standalone", "--data-dir", str(private / "data"), "--port", str(free_port())]

    done = subprocess.run(command, env=_environment(), capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 1, done.stderr
    assert f"root may enter {private} only by overriding its mode" in done.stderr, done.stderr
    assert "run hango standalone as a normal user, or point HANGO_DATABASE_URL" in done.stderr, done.stderr
    assert _mode(private) == 0o700
