"""``bash deploy/quickstart.sh`` as a newcomer runs it, with a data folder and a port of the test's own.

The script installs nothing here: the .venv the tests run in is the one it uses, recorded as up to date by
tests/run.sh. One test serves, plays the tour (its thread and its MCP call included, the latter through the demo
server the script declares), meets a second quickstart, decides the run the tour leaves in the inbox, and stops on
Ctrl-C; the other finds the port taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hango.client import Client, Run
from tests.e2e.test_standalone import _mentions, _status
from tests.support.processes import free_port, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ["bash", str(ROOT / "deploy" / "quickstart.sh")]
TOUR_WIDTH = 160  # deploy/tour.py's WIDTH: the tests give it no terminal


def _environment(data: Path, port: int) -> dict[str, str]:
    """The user's environment with no HANGO_* (standalone embeds both services) and no terminal width."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("HANGO_") and key not in ("COLUMNS", "LINES")
    }
    return {**kept, "HANGO_QUICKSTART_DATA": str(data), "HANGO_PORT": str(port)}


def _processes_naming(data: Path) -> list[int]:
    """The live processes whose command line or environment names the data folder."""
    needle = str(data).encode()
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and _mentions(int(name), needle)]


@contextmanager
def quickstart(data: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The quickstart in a process group of its own, as a terminal runs it; all of it is killed at the end."""
    with open(log, "ab") as output:
        process = subprocess.Popen(
            QUICKSTART, env=_environment(data, port), stdout=output, stderr=output, start_new_session=True
        )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for pid in _processes_naming(data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder of the test's own with a short path (PostgreSQL's socket lives in it), removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="hango-qs-")).resolve()
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process, whose pid stands in for a killed supervisor's, reused since."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def _venv_is_recorded_up_to_date() -> bool:
    """Whether tests/run.sh recorded .venv as installed from this setup.cfg, pyproject.toml and constraints."""
    sources = ("setup.cfg", "pyproject.toml", "deploy/constraints.txt")
    digest = hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in sources)).hexdigest()
    stamp = ROOT / ".venv" / ".hango-dev-install"
    return stamp.exists() and stamp.read_text().strip() == digest


def _section(lines: list[str], heading: str) -> list[str]:
    """The lines the tour printed under the narrated step that starts with ``heading``, up to the next blank line."""
    start = next(index for index, line in enumerate(lines) if line.startswith(f"== {heading}")) + 1
    end = next((index for index in range(start, len(lines)) if not lines[index]), len(lines))
    return lines[start:end]


def _check_events_are_whole_lines(lines: list[str]) -> None:
    """Every event on one line: whole compact JSON, or shortened to the width and ending in "…"."""
    events = [line for line in lines if line.startswith("  event ")]
    assert '  event run.finished: {"state":"succeeded","error":null}' in events, events
    shortened = [line for line in events if line.endswith("…")]
    assert shortened, "the tour's assistant message with its tool call is longer than the width"
    assert {len(line) for line in shortened} == {TOUR_WIDTH}
    for line in events:
        if line not in shortened:
            assert len(line) <= TOUR_WIDTH, line
            json.loads(line.split(": ", 1)[1])  # the whole of the data


def _check_the_mcp_call(output: str, data: Path) -> None:
    """The tour's MCP call: the operator's file names the demo server, save_note alone waits, the reviewer sees a
    destructive tool of a trusted server, and once the admin approves, the server writes the note with the approval
    id as its idempotency key; read_note runs unreviewed and reads it back."""
    config = json.loads((data / "mcp.json").read_text())
    assert config["mcpServers"]["notes"]["command"] == str(ROOT / ".venv" / "bin" / "python")
    assert "\n== an agent takes the tools of the MCP server notes" in output, output
    lines = output.splitlines()
    waiting = json.loads("\n".join(_section(lines, "an agent takes the tools of the MCP server notes")))
    assert list(waiting) == ["mcp__notes__save_note"], waiting
    shown = _section(lines, "paused: mcp__notes__save_note")
    assert "  server: notes (trusted)" in shown, shown
    assert "  annotations: DESTRUCTIVE" in shown, shown
    approved = re.search(r"the approval id ([0-9a-f-]+) as its idempotency key", output)
    assert approved is not None, output
    results = _section(lines, "the run is succeeded; read_note ran without a reviewer")
    assert results == [
        f"  mcp__notes__save_note: saved note tea.md (20 characters) to {data / 'notes' / 'tea.md'} "
        f"(idempotency key {approved[1]})",
        "  mcp__notes__read_note: Green tea, no sugar.",
    ], results
    assert (data / "notes" / "tea.md").read_text() == "Green tea, no sugar."


def _check_the_thread(output: str) -> None:
    """The tour's conversation on a thread: the first message pauses and the admin approves, the follow-up answers
    from the earlier turns, and the command printed to read it names the thread."""
    lines = output.splitlines()
    first = _section(lines, 'the member says "Remember I like tea." on the thread')
    assert first == ["  assistant: Saving a note to memory. (calls write_file)"], first
    resumed = _section(lines, 'the run pauses: write_file {"content":"Prefer tea.","file_path":"/memories/AGENTS.md"}')
    assert resumed == ["  assistant: Done: I will remember that.", "  run succeeded"], resumed
    follow_up = _section(lines, 'the member follows up on the same thread: "What do I like to drink?"')
    assert follow_up == [
        "  assistant: Tea: you told me so earlier in this conversation, and I saved it to my notes.",
        "  run succeeded",
    ], follow_up
    [command] = _section(lines, "the thread is idle: 6 messages over two runs")
    shown = r"  HANGO_URL=\S+ HANGO_TOKEN=\S+ \.venv/bin/hango threads show [0-9a-f-]{36}"
    assert re.fullmatch(shown, command), command


def _audit_rows(output: str) -> list[dict[str, object]]:
    """The audit rows the tour printed, each a line of compact JSON."""
    lines = _section(output.splitlines(), "the audit trail")
    assert all(": " not in line and line.startswith("  {") for line in lines), lines
    return [json.loads(line) for line in lines]


def test_the_quickstart_serves_the_tour_and_leaves_a_running_hango_alone(
    folder: Path, decoy: subprocess.Popen[bytes]
) -> None:
    assert _venv_is_recorded_up_to_date(), "set .venv up with tests/run.sh, so that the quickstart installs nothing"
    data, port, log = folder / "data", free_port(), folder / "quickstart.log"
    base = f"http://127.0.0.1:{port}"
    # A killed earlier run left its state behind: its pid belongs to another program by now, its services are gone.
    data.mkdir(mode=0o700)
    stale = {"api_url": f"http://127.0.0.1:{free_port()}", "database_url": "postgresql://gone/x", "pid": decoy.pid}
    (data / "standalone.json").write_text(json.dumps(stale))

    with quickstart(data, port, log) as first:
        wait_until(lambda: "Press Ctrl-C" in log.read_text() or first.poll() is not None, timeout=300)
        output = log.read_text()
        assert first.poll() is None, output
        lines = output.splitlines()
        assert lines[0] == (
            "hango quickstart: .venv is up to date with setup.cfg, pyproject.toml and deploy/constraints.txt; "
            "not installing"
        )
        assert lines[1] == (
            f"hango standalone: API at {base}, data in {data} (reviewers' inbox {base}/inbox, API docs {base}/docs, "
            f"logs in {data}/logs/, URLs in {data}/standalone.json)"
        )
        assert lines[-2] == (
            f"hango is serving: the reviewers' inbox at {base}/inbox, the API docs at {base}/docs; "
            f"data in {data}, logs in {data}/logs."
        )
        _check_events_are_whole_lines(lines)
        audit = _audit_rows(output)
        assert [(row["action"], row["outcome"]) for row in audit] == [
            ("approval.decide", "denied"),
            ("approval.decide", "success"),
        ]
        assert len({row["target_id"] for row in audit}) == 1, audit
        _check_the_thread(output)
        _check_the_mcp_call(output, data)

        # The tour again on the same tenant: the audit it prints is its own run's, not the tenant's history.
        token = json.loads((data / "owner.json").read_text())["token"]
        tour = [sys.executable, str(ROOT / "deploy" / "tour.py"), base, token]
        again = subprocess.run(tour, env=_environment(data, port), capture_output=True, text=True, timeout=180)
        assert again.returncode == 0, again.stderr
        audit_again = _audit_rows(again.stdout)
        assert [row["outcome"] for row in audit_again] == ["denied", "success"]
        assert {row["target_id"] for row in audit_again}.isdisjoint({row["target_id"] for row in audit})

        # A second quickstart says where hango runs, in one line, and touches nothing.
        state = (data / "standalone.json").read_bytes()
        second = subprocess.run(
            QUICKSTART, env=_environment(data, free_port()), capture_output=True, text=True, timeout=120
        )
        assert (second.returncode, second.stderr) == (0, ""), second.stderr
        assert second.stdout.splitlines() == [f"hango is already running at {base}/inbox (data in {data})"]
        assert (data / "standalone.json").read_bytes() == state
        assert first.poll() is None
        assert _status(f"{base}/readyz") == 200

        # The run the tour left in the inbox edits the note the first run saved: its diff is real, and approving
        # it changes the note.
        match = re.search(r"one more run \(([0-9a-f-]+)\) waits for a decision", output)
        assert match is not None, output
        with Client(base, token) as owner:
            [card] = owner.list_run_approvals(match[1])["items"]
            preview = owner.approval_preview(card["id"])
            assert (preview["exists"], preview["error"]) == (True, None), preview
            assert preview["diff"] is not None
            diff = preview["diff"].splitlines()
            assert "-Prefer tea." in diff, diff
            assert "+Prefer green tea, no sugar." in diff, diff
            owner.decide(match[1], [{"tool_call_id": card["tool_call_id"], "decision": "approve"}])
            run = wait_until(lambda: _finished(owner, match[1]), timeout=60)
            assert run["state"] == "succeeded", run
            assert owner.read_file(run["agent_id"], "/memories/AGENTS.md")["content"] == "Prefer green tea, no sugar."

        # Ctrl-C in the terminal stops everything.
        os.killpg(first.pid, signal.SIGINT)
        first.wait(timeout=90)
        wait_until(lambda: not _processes_naming(data), timeout=60)
    assert decoy.poll() is None, "the stale state's pid belongs to another program, which must be left alone"


def _finished(client: Client, run_id: str) -> Run | None:
    run = client.get_run(run_id)
    return run if run["state"] in {"succeeded", "failed", "cancelled"} else None


def test_a_busy_port_gets_one_line_before_anything_is_installed(folder: Path) -> None:
    data = folder / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(QUICKSTART, env=_environment(data, port), capture_output=True, text=True, timeout=600)

    assert done.returncode == 1, done.stdout
    assert (done.stdout + done.stderr).splitlines() == [
        f"port {port} is in use by another program; set HANGO_PORT to a free port"
    ]
    assert sorted(path.name for path in data.iterdir()) == ["logs", "standalone.lock"]
    assert list((data / "logs").iterdir()) == [], "nothing was installed or started"
