"""Approval and run metrics, computed from PostgreSQL at scrape time, through /metrics."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from hango.kernel.config import Settings
from hango.kernel.models import DECISIONS
from hango.platform.db import Database
from hango.platform.runtime import Runtime, tool_registry
from hango.run.expiry import expire_stale
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, suspended_run, write_memory

pytestmark = pytest.mark.usefixtures("worker_process")
SETTLING = ("hango_runs_by_state", "hango_approvals_pending")


def _samples(client: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").get_data(as_text=True)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _settled_samples(
    client: FlaskClient, tenant: TenantFixture
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples once the session worker is up and the runs' states stop moving: the gauges count the whole
    database, and the session worker, when this test is the first to start it, still takes up the runs earlier
    tests only created. A run of this test finishing says the worker is consuming; the states then settle. (Runs
    queued for a test's own worker, long gone, stay queued: waiting for no queued run at all would never end.)"""
    sentinel = start_run(client, tenant.owner, create_agent(client, tenant.owner, [{"text": "up"}]))
    wait_for_state(client, tenant.owner, sentinel, {"succeeded"})
    deadline = time.monotonic() + 30
    previous = None
    while True:
        samples = _samples(client)
        states = {key: value for key, value in samples.items() if key[0] in SETTLING}
        if states == previous or time.monotonic() > deadline:
            return samples
        previous = states
        time.sleep(0.5)


def test_the_approval_series_follow_suspensions_decisions_and_expiries(
    client: FlaskClient, tenant: TenantFixture, db: Database, settings: Settings
) -> None:
    before = _settled_samples(client, tenant)
    assert ("hango_runs_by_state", (("state", "awaiting_approval"),)) in before
    first = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    second = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    during = _samples(client)
    assert (
        _value(during, "hango_approvals_pending", tool="write_file")
        == _value(before, "hango_approvals_pending", tool="write_file") + 2
    )
    assert _value(during, "hango_runs_by_state", state="awaiting_approval") >= 2

    assert decide(client, tenant.owner, first, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    wait_for_state(client, tenant.owner, first, {"succeeded"})
    expire_stale(Runtime.build(settings.replace(approval_ttl=timedelta(0)), db=db))
    after = _samples(client)
    assert _value(after, "hango_approvals_decisions_total", decision="approve", tool="write_file") == (
        _value(before, "hango_approvals_decisions_total", decision="approve", tool="write_file") + 1
    )
    assert (
        _value(after, "hango_approvals_expired_total", action="fail", tool="write_file")
        >= _value(before, "hango_approvals_expired_total", action="fail", tool="write_file") + 1
    )
    assert (
        _value(after, "hango_approvals_wait_time_seconds_count")
        == _value(before, "hango_approvals_wait_time_seconds_count") + 1
    )
    assert _value(after, "hango_approvals_wait_time_seconds_bucket", le="+Inf") == _value(
        after, "hango_approvals_wait_time_seconds_count"
    )
    assert client.get(f"/v1/runs/{second}", headers=tenant.owner.headers).json["error"] == "approval expired"


def test_every_approval_series_of_a_known_tool_exists_at_zero_before_its_first_event(
    client: FlaskClient, tenant: TenantFixture, db: Database, settings: Settings
) -> None:
    before = _samples(client)
    tools = tool_registry(settings).names()
    assert {"write_file", "task", "explode"} <= tools
    for tool in tools:
        assert ("hango_approvals_pending", (("tool", tool),)) in before, tool
        for action in ("fail", "reject"):
            assert ("hango_approvals_expired_total", (("action", action), ("tool", tool))) in before, tool
        assert ("hango_approvals_escalated_total", (("tool", tool),)) in before, tool
        for decision in DECISIONS:
            assert ("hango_approvals_decisions_total", (("decision", decision), ("tool", tool))) in before
    # No test interrupts ``explode`` but this one: its series are 0 until the first event, then count it.
    assert before[("hango_approvals_pending", (("tool", "explode"),))] == 0
    assert before[("hango_approvals_expired_total", (("action", "fail"), ("tool", "explode")))] == 0
    script = [{"tool_calls": [{"name": "explode", "args": {}, "id": "x"}]}]
    suspended_run(client, tenant, script, tools=["explode"], interrupt_on={"explode": True})
    assert _samples(client)[("hango_approvals_pending", (("tool", "explode"),))] == 1

    expire_stale(Runtime.build(settings.replace(approval_ttl=timedelta(0)), db=db))
    after = _samples(client)
    assert after[("hango_approvals_pending", (("tool", "explode"),))] == 0
    assert after[("hango_approvals_expired_total", (("action", "fail"), ("tool", "explode")))] == 1
    assert after[("hango_approvals_expired_total", (("action", "reject"), ("tool", "explode")))] == 0


def test_the_dashboard_and_alert_rules_use_only_series_hango_exposes(client: FlaskClient) -> None:
    import re
    from pathlib import Path

    deploy = Path(__file__).resolve().parents[2] / "deploy"
    grafana = deploy / "grafana"
    text = "".join(
        path.read_text()
        for path in (
            grafana / "dashboards" / "hango-runs.json",
            grafana / "provisioning" / "alerting.yaml",
            deploy / "prometheus" / "alerts.yml",
        )
    )
    used = set(re.findall(r"\bhango_[a-z_]+", text))
    families = re.findall(r"^# TYPE (\S+) (\S+)$", client.get("/metrics").get_data(as_text=True), re.MULTILINE)
    suffixes = {"counter": ["", "_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    exposed = {name + suffix for name, kind in families for suffix in suffixes.get(kind, [""])}
    assert used
    assert used <= exposed, used - exposed
