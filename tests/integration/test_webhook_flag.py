"""``tenants.has_webhooks``: an event's transaction asks for the tenant's subscriptions only when it is set, so it
must never be clear while the tenant has a webhook, whatever creations and deletions run at once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Tenant, Webhook
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.services import tenancy
from hango.services.webhooks import service as webhooks

ROUNDS = 15
URL = "http://127.0.0.1:9/hook"


@pytest.fixture(scope="module")
def runtime(settings: Settings, db: Database) -> Runtime:
    return Runtime.build(settings, db=db)


def _owner(runtime: Runtime) -> Principal:
    created = tenancy.create_tenant(runtime.db, "flag", f"flag-{uuid.uuid4().hex[:8]}@example.com")
    return Principal(created.tenant_id, created.user_id, "owner")


def _state(runtime: Runtime, principal: Principal) -> tuple[bool, int]:
    """The tenant's flag and how many webhooks it has."""
    with runtime.db.read() as session:
        flag = session.get_one(Tenant, principal.tenant_id).has_webhooks
        count = session.query(Webhook).filter(Webhook.tenant_id == principal.tenant_id).count()
    return flag, count


def _at_once(*calls: Callable[[], Any]) -> None:
    """Run the calls in threads released together; re-raise the first failure."""
    barrier = threading.Barrier(len(calls))
    failures: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    if failures:
        raise failures[0]


def test_the_flag_is_set_by_the_first_webhook_and_cleared_with_the_last(runtime: Runtime) -> None:
    owner = _owner(runtime)
    assert _state(runtime, owner) == (False, 0)
    first, second = (webhooks.create(runtime, owner, URL, ["run.finished"], "").webhook for _ in range(2))
    assert _state(runtime, owner) == (True, 2)
    webhooks.delete(runtime, owner, first.id)
    assert _state(runtime, owner) == (True, 1)
    webhooks.delete(runtime, owner, second.id)
    assert _state(runtime, owner) == (False, 0)


def _create(runtime: Runtime, owner: Principal) -> Callable[[], Any]:
    return partial(webhooks.create, runtime, owner, URL, ["run.finished"], "")


def _delete(runtime: Runtime, owner: Principal, webhook_id: uuid.UUID) -> Callable[[], Any]:
    return partial(webhooks.delete, runtime, owner, webhook_id)


def test_deleting_the_last_two_webhooks_at_once_clears_the_flag(runtime: Runtime) -> None:
    for _ in range(ROUNDS):
        owner = _owner(runtime)
        hooks = [_create(runtime, owner)().webhook for _ in range(2)]
        _at_once(*(_delete(runtime, owner, hook.id) for hook in hooks))
        assert _state(runtime, owner) == (False, 0)


def test_a_webhook_created_while_the_last_one_is_deleted_keeps_the_flag_set(runtime: Runtime) -> None:
    for _ in range(ROUNDS):
        owner = _owner(runtime)
        last = _create(runtime, owner)().webhook
        _at_once(_delete(runtime, owner, last.id), _create(runtime, owner))
        assert _state(runtime, owner) == (True, 1)
