"""The ``hango`` command as a user runs it: real processes, a real gunicorn server, SIGTERM."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from hango.processes import migrate
from tests.conftest import REDIS_URL, create_database, drop_database

HANGO = [sys.executable, "-m", "hango"]


def _run(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HANGO, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _env(**values: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HANGO_")}
    return {**env, **values}


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database with no schema yet."""
    url = create_database("hango_cli_empty")
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def cli_database() -> Iterator[str]:
    """A database at the newest schema, migrated in this process (test_db_upgrade_and_downgrade runs the command)."""
    url = create_database("hango_cli")
    migrate.upgrade(url)
    yield url
    drop_database(url)


def test_db_upgrade_and_downgrade(empty_database: str) -> None:
    env = _env(HANGO_DATABASE_URL=empty_database)
    assert _run(["db", "upgrade"], env).returncode == 0
    assert "0016 (head)" in _run(["db", "current"], env).stdout
    assert _run(["db", "downgrade", "0001"], env).returncode == 0
    assert "0001" in _run(["db", "current"], env).stdout
    assert _run(["db", "downgrade", "base"], env).returncode == 0
    assert "000" not in _run(["db", "current"], env).stdout
    assert _run(["db", "upgrade"], env).returncode == 0


def test_tenants_create_json_prints_one_object_and_nothing_else(cli_database: str) -> None:
    env = _env(HANGO_DATABASE_URL=cli_database)
    result = _run(["tenants", "create", "acme", "--owner-email", "boss@acme.io", "--json"], env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == {"tenant_id", "user_id", "token"}
    assert result.stdout.strip().count("\n") == 0


@pytest.mark.parametrize(("name", "email", "field"), [("acme", "not-an-email", "owner_email"), (" ", "a@b.io", "name")])
def test_tenants_create_refuses_bad_input_naming_the_field(
    cli_database: str, name: str, email: str, field: str
) -> None:
    env = _env(HANGO_DATABASE_URL=cli_database)
    result = _run(["tenants", "create", name, "--owner-email", email, "--json"], env)
    assert result.returncode != 0
    assert field in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("variable", "value"), [("HANGO_APPROVAL_TTL", "forever"), ("HANGO_DATABASE_URL", "sqlite:///x.db")]
)
def test_a_malformed_setting_stops_the_process_naming_it(variable: str, value: str) -> None:
    result = _run(["db", "upgrade"], _env(**{variable: value}))
    assert result.returncode != 0
    assert variable in result.stderr
    assert "Traceback" not in result.stderr


def test_version_prints_the_installed_distributions_version() -> None:
    result = _run(["--version"], _env())
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"hango {importlib.metadata.version('hango')}\n"


def test_a_missing_database_url_stops_the_process_naming_it() -> None:
    result = _run(["api"], _env())
    assert result.returncode != 0
    assert "HANGO_DATABASE_URL" in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _request(url: str, *, method: str = "GET", token: str | None = None, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (loopback only)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _wait_until_healthy(base: str, server: subprocess.Popen[str], deadline: float) -> None:
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[1]
        try:
            if _request(f"{base}/healthz")[0] == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the API did not become healthy")


def test_the_api_serves_real_http_and_stops_cleanly_on_sigterm(cli_database: str) -> None:
    env = _env(HANGO_DATABASE_URL=cli_database, HANGO_REDIS_URL=REDIS_URL)
    owner = json.loads(_run(["tenants", "create", "web", "--owner-email", "web@acme.io", "--json"], env).stdout)
    port = _free_port()
    server = subprocess.Popen(
        [*HANGO, "api", "--port", str(port), "--workers", "1"], env=env, stderr=subprocess.PIPE, text=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_healthy(base, server, time.monotonic() + 30)
        assert _request(f"{base}/readyz")[0] == 200
        status, created = _request(
            f"{base}/v1/users", method="POST", token=owner["token"], body={"email": "m@acme.io", "role": "member"}
        )
        assert status == 201
        status, listed = _request(f"{base}/v1/users", token=owner["token"])
        assert status == 200
        assert created["id"] in {item["id"] for item in listed["items"]}
        assert _request(f"{base}/v1/users", token="hango_wrong")[0] == 401
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            returncode = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert returncode == 0


def test_flower_serves_its_ui_on_hangos_broker(cli_database: str) -> None:
    env = _env(HANGO_DATABASE_URL=cli_database, HANGO_REDIS_URL=REDIS_URL)
    port = _free_port()
    # Without HANGO_FLOWER_BASIC_AUTH Flower starts only when told it serves loopback alone (the default address).
    flower = subprocess.Popen(
        [*HANGO, "flower", "--port", str(port), "--insecure-no-auth"], env=env, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        status = 0
        while time.monotonic() < deadline and status != 200:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    status = response.status
                    page = response.read().decode()
            except OSError:
                time.sleep(0.2)
        assert status == 200
        assert "Flower" in page
    finally:
        flower.send_signal(signal.SIGTERM)
        flower.wait(timeout=30)


def test_the_worker_logs_to_stderr_only_and_stops_on_sigterm(cli_database: str) -> None:
    env = _env(HANGO_DATABASE_URL=cli_database, HANGO_REDIS_URL=REDIS_URL, HANGO_QUEUE=f"probe-{os.getpid()}")
    worker = subprocess.Popen(
        [*HANGO, "worker", "--concurrency", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    seen = ""
    while time.monotonic() < deadline and "ready" not in seen:
        line = worker.stderr.readline() if worker.stderr else ""
        seen += line
        if not line and worker.poll() is not None:
            break
    worker.send_signal(signal.SIGTERM)
    stdout, _ = worker.communicate(timeout=30)
    assert "ready" in seen
    assert stdout == ""
    assert worker.returncode == 0


def test_database_failures_are_one_clear_line(empty_database: str) -> None:
    created = _run(["tenants", "create", "x", "--owner-email", "a@b.io"], _env(HANGO_DATABASE_URL=empty_database))
    unreachable = _run(["db", "upgrade"], _env(HANGO_DATABASE_URL="postgresql://postgres@127.0.0.1:1/nothing"))
    for result in (created, unreachable):
        assert result.returncode != 0
        assert "database error" in result.stderr
        assert "Traceback" not in result.stderr
