"""The tenant approval stream's numbers are given in commit order, under real concurrency on PostgreSQL.

Many transactions of one tenant take numbers and commit after a random delay, while a reader follows the log the
way a stream does (everything after the last number it saw, and the number the read got to). If a number could
become visible after a larger one, the reader would skip it for ever: it must see every number, once, in order.
"""

from __future__ import annotations

import random
import threading
import time
import uuid

from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.service import approval_events_after
from hango.store import approval_events as store
from tests.integration.conftest import TenantFixture

WRITERS = 8
EACH = 15


def _write(db: Database, tenant_id: uuid.UUID, creator: uuid.UUID, failures: list[BaseException]) -> None:
    try:
        for _ in range(EACH):
            with db.transaction() as session:
                first = store.reserve(session, tenant_id, 1)
                time.sleep(random.uniform(0, 0.01))
                row = {
                    "tenant_id": tenant_id,
                    "seq": first,
                    "type": "approval.requested",
                    "approval_id": uuid.uuid4(),
                    "run_creator": creator,
                    "data": {"n": first},
                }
                store.insert_events(session, [row])
    except BaseException as exc:
        failures.append(exc)


def test_a_reader_following_the_log_sees_every_number_once_and_in_order(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    runtime = Runtime.build(settings, db=db)
    owner = Principal(tenant_id=tenant.id, user_id=tenant.owner.user_id, role="owner", token_id=None)
    failures: list[BaseException] = []
    writers = [
        threading.Thread(target=_write, args=(db, tenant.id, tenant.owner.user_id, failures)) for _ in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    seen: list[int] = []
    last = 0
    while any(writer.is_alive() for writer in writers) or last < WRITERS * EACH:
        notices, reached = approval_events_after(runtime, owner, last, limit=7)
        seen.extend(notice.seq for notice in notices)
        last = reached
        assert not failures, failures
        if not notices:
            time.sleep(0.001)
    for writer in writers:
        writer.join()
    assert not failures, failures
    assert seen == list(range(1, WRITERS * EACH + 1))
