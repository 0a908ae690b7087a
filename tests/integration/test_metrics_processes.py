"""Metrics of real multi-process servers: ``hango api --workers 2`` and a ``hango worker`` with its prefork pool.

A scrape reaches one process; what it reports must be true of the whole server.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable

from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.models import RUN_STATES
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.support.processes import api_server, free_port, wait_until, worker

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
CLIENTS = 4
REQUESTS_PER_CLIENT = 10
ROUNDS = 10


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback)
        text: str = response.read().decode()
        return text


def _samples(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _total(samples: Samples, name: str) -> float:
    return sum(value for (sample, _), value in samples.items() if sample == name)


def _in_parallel(request: Callable[[], None]) -> None:
    """``CLIENTS`` threads sending ``REQUESTS_PER_CLIENT`` requests each, a new connection every time."""

    def client() -> None:
        for _ in range(REQUESTS_PER_CLIENT):
            request()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def test_request_metrics_are_the_sum_over_every_api_process(settings: Settings) -> None:
    with api_server(settings, workers=2) as base:
        counted = _total(_samples(_scrape(f"{base}/metrics")), "flask_http_request_total")
        readings: list[float] = []
        for _ in range(ROUNDS):
            # Concurrent clients on fresh connections land on both processes; which serves how many varies, so
            # several rounds make sure each has served some (a per-process count then shows within a few rounds).
            _in_parallel(lambda: _scrape(f"{base}/healthz"))
            counted += CLIENTS * REQUESTS_PER_CLIENT
            for _ in range(4):
                text = _scrape(f"{base}/metrics")
                readings.append(_total(_samples(text), "flask_http_request_total"))
                assert readings[-1] == counted, readings  # the whole server's count, whichever process answered
        assert readings == sorted(readings)  # never backwards
        # The stored-state series come from the answering process alone: once, not once per process.
        assert text.count("# TYPE hango_runs_by_state gauge") == 1
        states = [labels for (name, labels) in _samples(text) if name == "hango_runs_by_state"]
        assert sorted(states) == sorted((("state", state),) for state in RUN_STATES)


def test_a_worker_serves_task_model_tool_and_token_metrics_summed_over_its_pool(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    port = free_port()
    own = settings.replace(queue=f"{settings.queue}-metrics", worker_metrics_port=port)
    client: FlaskClient = create_app(own, db=db).test_client()
    url = f"http://127.0.0.1:{port}/metrics"
    with worker(own, concurrency=2, beat=False, name="metrics"):
        wait_until(lambda: _try_scrape(url) is not None, timeout=60)
        before = _samples(_scrape(url))
        # Every series is there before its first event, at 0.
        assert before[("hango_model_tokens_total", (("provider", "scripted"), ("type", "input")))] == 0
        assert before[("hango_tool_call_duration_seconds_count", (("tool", "ls"),))] == 0
        assert before[("hango_task_duration_seconds_count", (("task", "hango.run"),))] == 0
        assert before[("hango_model_call_duration_seconds_count", (("provider", "anthropic"),))] == 0

        script = [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"text": "done"}]
        agent_id = create_agent(client, tenant.owner, script, tools=["ls"])
        run = wait_for_state(client, tenant.owner, start_run(client, tenant.owner, agent_id), {"succeeded", "failed"})
        assert run["state"] == "succeeded", run

        # The run ran in a pool process; the main process's server reports it. The task is observed as it returns,
        # a moment after the run's state was stored.
        def after_the_task() -> Samples | None:
            samples = _samples(_scrape(url))
            return samples if samples[("hango_task_duration_seconds_count", (("task", "hango.run"),))] == 1 else None

        after = wait_until(after_the_task, timeout=30)
        assert after[("hango_model_call_duration_seconds_count", (("provider", "scripted"),))] == 2
        assert after[("hango_tool_call_duration_seconds_count", (("tool", "ls"),))] == 1
        tokens = {
            kind: after[("hango_model_tokens_total", (("provider", "scripted"), ("type", kind)))]
            for kind in ("input", "output")
        }
        assert tokens == {"input": run["usage"]["input_tokens"], "output": run["usage"]["output_tokens"]}
        assert tokens["input"] > 0


def _try_scrape(url: str) -> str | None:
    try:
        return _scrape(url)
    except OSError:
        return None
