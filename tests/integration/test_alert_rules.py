"""The alerting rules: promtool runs their tests on recorded series, and Grafana's copy says the same thing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
GRAFANA_ALERTS = ROOT / "deploy" / "grafana" / "provisioning" / "alerting.yaml"


def _promtool() -> str:
    # tests/run.sh puts promtool into .venv/bin when PATH has none.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("promtool", path=path)
    assert found, "promtool is missing: bash tests/run.sh installs it (or install Prometheus's promtool on PATH)"
    return found


def _prometheus_rules() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}


def test_the_alerting_rules_pass_their_tests_on_recorded_series() -> None:
    result = subprocess.run(
        [_promtool(), "test", "rules", "alerts_test.yml"],
        cwd=PROMETHEUS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_test_that_sees_it_fire() -> None:
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yml").read_text())["tests"]
    firing = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert firing == set(_prometheus_rules())


def _uid(alert: str) -> str:
    """``HangoApprovalsPilingUp`` is Grafana's ``hango-approvals-piling-up``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", alert).lower()


def _seconds(duration: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()  # type: ignore[union-attr]
    return int(number) * {"s": 1, "m": 60, "h": 3600}[unit]


def test_grafana_alerts_on_the_same_expressions_thresholds_and_durations() -> None:
    grafana = {
        rule["uid"]: rule for group in yaml.safe_load(GRAFANA_ALERTS.read_text())["groups"] for rule in group["rules"]
    }
    rules = _prometheus_rules()
    assert set(grafana) == {_uid(alert) for alert in rules}
    for alert, rule in rules.items():
        mine = grafana[_uid(alert)]
        steps = {step["refId"]: step["model"] for step in mine["data"]}
        [condition] = steps["threshold"]["conditions"]
        assert condition["evaluator"]["type"] == "gt"
        [threshold] = condition["evaluator"]["params"]
        assert f"{steps['query']['expr']} > {threshold}" == rule["expr"], alert
        assert _seconds(mine["for"]) == _seconds(rule["for"]), alert
        assert mine["labels"] == rule["labels"], alert


def test_the_prometheus_configuration_is_valid_and_loads_the_rules(tmp_path: Path) -> None:
    # The container paths of deploy/prometheus.yml, pointed at this checkout and an empty token file.
    (tmp_path / "token").write_text("")
    text = (ROOT / "deploy" / "prometheus.yml").read_text()
    text = text.replace("/etc/prometheus/alerts.yml", str(PROMETHEUS / "alerts.yml"))
    text = text.replace("/tmp/hango-metrics-token", str(tmp_path / "token"))
    (tmp_path / "prometheus.yml").write_text(text)
    result = subprocess.run(
        [_promtool(), "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout
