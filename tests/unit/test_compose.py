"""docker-compose.yml publishes no admin surface beyond loopback and holds no admin password of its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
# The HTTP API is the one public port; it authenticates every /v1 request itself.
PUBLIC_SERVICES = {"api"}
CREDENTIAL = re.compile(r"PASSWORD|BASIC_AUTH|TOKEN|SECRET|API_KEY")
# The database publishes no port: its password only guards the compose network, and hango's URL repeats it.
INTERNAL_CREDENTIALS = {"POSTGRES_PASSWORD"}
# "${NAME}", "${NAME:-}" or "${NAME:?message}": taken from the environment, with no value of the file's own.
FROM_ENVIRONMENT = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)(?::?-|:?\?[^}]*)?\}")


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _host_ip(port: str | int | dict[str, Any]) -> str | None:
    """The host address a published port binds; ``None`` means every interface."""
    if isinstance(port, dict):
        host_ip: str | None = port.get("host_ip")
        return host_ip
    parts = str(port).split(":")
    return parts[0] if len(parts) == 3 else None


def _environment(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment)
    return {str(key): str(value) for key, value in environment.items()}


def test_only_the_api_is_published_beyond_loopback() -> None:
    published = {name: service["ports"] for name, service in _services().items() if service.get("ports")}
    assert set(published) >= {"flower", "prometheus", "grafana", "otel-collector"}
    for name, ports in published.items():
        if name in PUBLIC_SERVICES:
            continue
        for port in ports:
            assert _host_ip(port) == "127.0.0.1", f"{name} publishes {port!r} beyond loopback"


def test_no_credential_has_a_value_in_the_file() -> None:
    for name, service in _services().items():
        for key, value in _environment(service).items():
            if not CREDENTIAL.search(key) or key in INTERNAL_CREDENTIALS:
                continue
            assert FROM_ENVIRONMENT.fullmatch(value), f"{name}.{key} holds a value of its own: {value!r}"


def test_flower_and_grafana_take_their_logins_from_the_environment() -> None:
    services = _services()
    flower = _environment(services["flower"])["HANGO_FLOWER_BASIC_AUTH"]
    assert FROM_ENVIRONMENT.fullmatch(flower)
    grafana = services["grafana"]
    password = _environment(grafana)["GF_SECURITY_ADMIN_PASSWORD"]
    match = FROM_ENVIRONMENT.fullmatch(password)
    assert match
    assert match["name"] == "GRAFANA_ADMIN_PASSWORD"
    # An empty password would make Grafana fall back to admin/admin: unless the variable is required by Compose
    # itself, the entrypoint must refuse to start without it.
    if ":?" not in password:
        assert "$$GF_SECURITY_ADMIN_PASSWORD" in " ".join(grafana["entrypoint"])
        assert "exit 1" in " ".join(grafana["entrypoint"])
    assert _environment(grafana)["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_prometheus_sends_the_metrics_token() -> None:
    services = _services()
    assert _environment(services["api"])["HANGO_METRICS_TOKEN"] == "${HANGO_METRICS_TOKEN:-}"
    prometheus = services["prometheus"]
    assert _environment(prometheus)["HANGO_METRICS_TOKEN"] == "${HANGO_METRICS_TOKEN:-}"
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    [job] = [job for job in config["scrape_configs"] if job["job_name"] == "hango-api"]
    credentials = job["authorization"]["credentials_file"]
    assert job["authorization"].get("type", "Bearer") == "Bearer"
    assert credentials in " ".join(prometheus["entrypoint"])
