"""The operations surface: Flower's login, the token in front of ``/metrics``, and run errors free of internals."""

from __future__ import annotations

import base64
import re
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.support.processes import HANGO, ROOT, free_port, logged, settings_env, stop, wait_until, worker_log_name

LOGIN = "ops:s3cret-flower"


@contextmanager
def _flower(settings: Settings, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], Callable[[], str]]]:
    """``hango flower ARGS`` and a way to read its output; stopped after the block."""
    # An anonymous temporary file keeps Flower's output for the assertion messages and leaves nothing behind.
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            [*HANGO, "flower", *args],
            env=settings_env(settings),
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def read() -> str:
            output.seek(0)
            return output.read().decode(errors="replace")

        try:
            yield process, read
        finally:
            stop(process)


@contextmanager
def _running_flower(settings: Settings) -> Iterator[str]:
    port = free_port()
    with _flower(settings, "--address", "127.0.0.1", "--port", str(port)) as (process, output):
        base = f"http://127.0.0.1:{port}"
        # Flower's health check needs no login, so it tells when the server answers.
        wait_until(lambda: _status(f"{base}/healthcheck") == 200 or process.poll() is not None, timeout=60)
        assert process.poll() is None, output()
        yield base


def _status(url: str, headers: dict[str, str] | None = None) -> int | None:
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310 (loopback http only)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--address", "127.0.0.1"], "HANGO_FLOWER_BASIC_AUTH"),
        (["--address", "0.0.0.0", "--insecure-no-auth"], "loopback"),  # noqa: S104 (refused, never bound)
    ],
    ids=["no-login", "no-login-off-loopback"],
)
def test_flower_refuses_to_start_without_a_login(settings: Settings, args: list[str], reason: str) -> None:
    with _flower(settings, *args, "--port", str(free_port())) as (process, read):
        code = process.wait(timeout=60)
        output = read()
    assert code != 0
    [line] = [line for line in output.splitlines() if line.strip()]
    assert line.startswith("Error: "), output
    assert reason in line, output


def test_flower_asks_for_its_login(settings: Settings) -> None:
    with _running_flower(settings.replace(flower_basic_auth=LOGIN)) as base:
        assert _status(f"{base}/") == 401
        assert _status(f"{base}/api/workers") == 401
        wrong = base64.b64encode(b"ops:guess").decode()
        assert _status(f"{base}/", {"Authorization": f"Basic {wrong}"}) == 401
        right = base64.b64encode(LOGIN.encode()).decode()
        assert _status(f"{base}/", {"Authorization": f"Basic {right}"}) == 200


def test_metrics_need_the_token_when_one_is_set(settings: Settings, db: Database) -> None:
    client = create_app(settings.replace(metrics_token="scrape-me"), db=db).test_client()
    for headers in ({}, {"Authorization": "Bearer scrape-m"}, {"Authorization": "Basic scrape-me"}):
        refused = client.get("/metrics", headers=headers)
        assert refused.status_code == 401, headers
        assert refused.mimetype == "application/problem+json"
        assert refused.json["type"] == "urn:hango:problem:unauthorized"
        assert "flask_http_request" not in refused.get_data(as_text=True)
    allowed = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert allowed.status_code == 200
    assert "hango_runs_by_state" in allowed.get_data(as_text=True)
    # Health checks stay open: load balancers and orchestrators probe them without credentials.
    assert client.get("/healthz").status_code == 200


def test_a_run_failing_in_sql_shows_a_reason_and_logs_the_details(
    settings: Settings, worker_process: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    # The tool's result cannot be stored: the INSERT of the batch's tool message fails in PostgreSQL, whose
    # error text holds the SQL and its parameters (the result itself, which may be anybody's data).
    marker = uuid.uuid4().hex
    script = [{"tool_calls": [{"name": "nul_result", "args": {"marker": marker}}]}]
    agent_id = create_agent(client, tenant.owner, script, tools=["nul_result"])
    run_id = start_run(client, tenant.owner, agent_id)
    run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})
    assert run["state"] == "failed"
    error: str = run["error"]
    for internal in ("INSERT", "SELECT", "UPDATE", "parameters", "Traceback", "psycopg", "jsonb", marker):
        assert internal.lower() not in error.lower(), error
    match = re.fullmatch(r"internal error \(see the worker log, reference (?P<reference>[0-9a-f]{12})\)", error)
    assert match, error
    # The full exception, SQL included, is in the worker's log line carrying the same reference.
    log_name = worker_log_name(settings, "session")
    wait_until(lambda: logged(log_name, match["reference"], "INSERT INTO messages"), timeout=30)
