"""A run's log lines carry its ``run_id``, so filtering logs by run id (Loki: ``| run_id="..."``) tells its story."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.kernel.logs import JsonFormatter, run_logging
from tests.integration.conftest import TenantFixture
from tests.integration.hitl_helpers import decide, finished, suspended_run, write_memory
from tests.support.processes import log_path, logged, worker_log_name


def _record(message: str, **extra: Any) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "hango.test", "levelname": "INFO", "msg": message, **extra})


def test_a_line_logged_while_a_run_executes_carries_its_run_id_and_an_explicit_one_wins() -> None:
    run_id, other = uuid.uuid4(), uuid.uuid4()
    formatter = JsonFormatter()
    with run_logging(run_id):
        inside = json.loads(formatter.format(_record("inside")))
        explicit = json.loads(formatter.format(_record("about another run", run_id=str(other))))
    outside = json.loads(formatter.format(_record("outside")))
    assert inside["run_id"] == str(run_id)
    assert explicit["run_id"] == str(other)
    assert "run_id" not in outside


@pytest.mark.usefixtures("worker_process")
def test_the_decision_applied_by_the_worker_is_logged_with_the_run_id(
    client: FlaskClient, tenant: TenantFixture, settings: Settings
) -> None:
    call_id = f"w-{uuid.uuid4().hex[:12]}"
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory("noted", call_id)]}, {"text": "Done."}])
    response = decide(client, tenant.owner, run_id, {"tool_call_id": call_id, "decision": "approve"})
    assert response.status_code == 200, response.json
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"

    # The line is written (and flushed) before the run's results commit, so it is in the log once the run is done.
    log_name = worker_log_name(settings, "session")
    assert logged(log_name, "applying approval decision", call_id)
    assert logged(log_name, "applying approval decision", call_id, f'"run_id": "{run_id}"')
    lines = [line for line in log_path(log_name).read_text(errors="replace").splitlines() if call_id in line]
    assert {json.loads(line).get("run_id") for line in lines} == {run_id}
