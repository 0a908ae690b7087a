"""The checks ``hango standalone`` makes before it trusts a port, an answer on it, or a ``standalone.json``.

Real sockets and processes, no services: the e2e tests (tests/e2e/test_standalone.py) run the whole command.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hango.processes import standalone
from hango.processes.standalone import StandaloneError
from tests.support.processes import wait_until

LISTEN = """
import socket, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
print(server.getsockname()[1], flush=True)
time.sleep(60)
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket of this process listening on a loopback port, as another program's server would."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def _spawn(*argv: str) -> subprocess.Popen[bytes]:
    """A child running ``argv``, returned once it has replaced its image: until then its command line is still
    this test process's own, which may name the test (and so "standalone")."""
    process = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE)
    wait_until(lambda: any("time.sleep" in part for part in standalone._command_line(process.pid)), timeout=10)
    return process


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The processes a test starts, killed at its end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_a_port_another_program_listens_on_is_refused_in_one_line(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    with pytest.raises(StandaloneError) as refused:
        standalone._check_port_free("127.0.0.1", port)
    assert str(refused.value) == (
        f"port {port} on 127.0.0.1 is in use by another program; choose a free port with --port"
    )


def test_a_free_port_passes(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    listener.close()
    standalone._check_port_free("127.0.0.1", port)


def test_only_the_process_that_listens_on_the_port_counts_as_the_api(
    listener: socket.socket, processes: list[subprocess.Popen[bytes]]
) -> None:
    server = _spawn("-c", LISTEN)
    bystander = _spawn("-c", "import time; time.sleep(60)")
    processes += [server, bystander]
    assert server.stdout is not None
    port = int(server.stdout.readline())

    assert standalone._listens(server, port)
    # Alive, but another program (here: the test) holds the port it was meant to serve.
    assert not standalone._listens(bystander, listener.getsockname()[1])
    assert not standalone._listens(server, listener.getsockname()[1])
    server.kill()
    server.wait()
    assert not standalone._listens(server, port)


def _write_state(data_dir: Path, pid: int) -> None:
    state = {"api_url": "http://127.0.0.1:8123", "database_url": "postgresql://x", "pid": pid}
    (data_dir / "standalone.json").write_text(json.dumps(state))


def test_a_state_file_names_a_running_standalone_only_while_its_supervisor_runs(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    assert standalone._running_instance(tmp_path) is None  # no file

    supervisor = _spawn("-c", "import time; time.sleep(60)", "standalone", "--data-dir", str(tmp_path))
    processes.append(supervisor)
    _write_state(tmp_path, supervisor.pid)
    assert standalone._running_instance(tmp_path) == (
        f"hango standalone is already running on {tmp_path}: API at http://127.0.0.1:8123 (pid {supervisor.pid})"
    )

    # Left by a killed supervisor: its pid is gone, or serves an unrelated program by now.
    unrelated = _spawn("-c", "import time; time.sleep(60)")
    processes.append(unrelated)
    _write_state(tmp_path, unrelated.pid)
    assert standalone._running_instance(tmp_path) is None
    supervisor.kill()
    supervisor.wait()
    _write_state(tmp_path, supervisor.pid)
    assert standalone._running_instance(tmp_path) is None
    (tmp_path / "standalone.json").write_text("{")  # cut short
    assert standalone._running_instance(tmp_path) is None
