"""Concurrent requests on real PostgreSQL: the constraints pick exactly one winner."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

from flask import Flask

from tests.integration.conftest import TenantFixture

ROUNDS = 25


def test_two_concurrent_creations_of_the_same_user_yield_one_201_and_one_409(app: Flask, tenant: TenantFixture) -> None:
    for _ in range(ROUNDS):
        email = f"race-{uuid.uuid4().hex[:8]}@example.com"
        barrier = threading.Barrier(2)

        def create(role: str, email: str = email, barrier: threading.Barrier = barrier) -> int:
            client = app.test_client()
            barrier.wait()
            response = client.post("/v1/users", json={"email": email, "role": role}, headers=tenant.owner.headers)
            return response.status_code

        with ThreadPoolExecutor(2) as pool:
            statuses = sorted(pool.map(create, ["member", "admin"]))
        assert statuses == [201, 409]
        listed = app.test_client().get("/v1/users?limit=200", headers=tenant.owner.headers).json["items"]
        assert sum(item["email"] == email for item in listed) == 1
