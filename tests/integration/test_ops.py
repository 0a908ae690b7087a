"""Health, readiness, metrics and the API documents."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database


def test_healthz_answers_without_credentials(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"status": "ok"}


def test_readyz_checks_the_database_and_redis(client: FlaskClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json["checks"] == {"database": "ok", "redis": "ok"}


def test_readyz_is_a_503_problem_naming_what_is_down(settings: Settings, db: Database) -> None:
    app = create_app(settings.replace(redis_url="redis://127.0.0.1:1/0"), db=db)
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert response.json["checks"] == {"database": "ok", "redis": "unreachable"}
    assert "redis" in response.json["detail"]


def test_the_openapi_document_describes_the_endpoints(client: FlaskClient) -> None:
    document = client.get("/openapi.json").json
    assert document["openapi"].startswith("3.")
    assert {"/v1/users", "/v1/users/{user_id}/tokens", "/v1/tokens/{token_id}", "/v1/audit-events"} <= set(
        document["paths"]
    )
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_the_docs_page_loads_only_local_assets(client: FlaskClient) -> None:
    page = client.get("/docs", follow_redirects=True)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "/openapi.json" in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources
    assert all(source.startswith("/docs/") for source in sources), sources
    for source in sources:
        assert client.get(source).status_code == 200, source


def test_metrics_are_exposed_for_prometheus(client: FlaskClient) -> None:
    client.get("/healthz")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert "flask_http_request_total" in response.get_data(as_text=True)
