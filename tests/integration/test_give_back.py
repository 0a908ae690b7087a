"""A run the database fails for a moment is given back and re-driven, never failed: a session dropped mid-batch, a
lock wait past HANGO_DB_LOCK_TIMEOUT. Driven in this process on the real database, with the tools below registered
on the worker's own runtime."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import select, text

from hango.agent.messages import user_message
from hango.agent.tools.base import Tool, ToolContext
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Agent, Message, Run, RunEvent
from hango.platform.runtime import Runtime
from hango.run import service
from hango.run.worker import execute_run
from hango.services import tenancy

_NO_ARGS = {"type": "object", "additionalProperties": False}


def _session(context: ToolContext) -> Any:
    # The batch's own session: the tool's statements run in the transaction its results commit in.
    return context.files._session  # type: ignore[attr-defined]


def _drop_own_session(context: ToolContext, args: dict[str, Any]) -> str:
    # What a failover, a pooler restart or an operator's pg_terminate_backend does to the worker's connection.
    _session(context).execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
    return "still here"


def _wait_for_a_lock(context: ToolContext, args: dict[str, Any]) -> str:
    # Another session holds the run's row (an API request, a frozen process); the batch's session waits for it.
    session = _session(context)
    holder = session.get_bind().connect()
    try:
        # Without a lock timeout the wait below never ends: the holder is ended after a while, so that the test
        # fails (the run finishes) rather than hangs.
        holder.execute(text("SET idle_in_transaction_session_timeout = '6s'"))
        holder.execute(text("SELECT 1 FROM runs WHERE id = :id FOR UPDATE"), {"id": context.run_id})
        session.execute(text("SELECT 1 FROM runs WHERE id = :id FOR UPDATE"), {"id": context.run_id})
    finally:
        holder.invalidate()
        holder.close()
    return "got the lock"


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    """A worker's runtime on a database pool of its own, with the sessions' timeouts hango sets."""
    own = settings.replace(queue=f"nowhere-{uuid.uuid4().hex[:8]}", max_run_give_backs=2)
    built = Runtime.build(own)
    built.tools.add(Tool("drop_own_session", "Drop this session.", _NO_ARGS, _drop_own_session))
    built.tools.add(Tool("wait_for_a_lock", "Wait for a lock.", _NO_ARGS, _wait_for_a_lock))
    yield built
    built.db.dispose()


def _run_calling(runtime: Runtime, tool: str) -> uuid.UUID:
    created = tenancy.create_tenant(runtime.db, "give-back", f"o-{uuid.uuid4().hex[:6]}@example.com")
    owner = Principal(created.tenant_id, created.user_id, "owner")
    script = [{"tool_calls": [{"id": "t", "name": tool, "args": {}}]}, {"text": "done"}]
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=owner.tenant_id,
        name="faulty",
        created_by=owner.user_id,
        interrupt_on={},
        subagents=[],
        system_prompt="",
        max_turns=5,
        tools=[tool],
        model={"provider": "scripted", "script": script},
    )
    with runtime.db.transaction() as session:
        session.add(agent)
    return service.create_run(runtime, owner, agent.id, [user_message("go")]).id


def _run(runtime: Runtime, run_id: uuid.UUID) -> Run:
    with runtime.db.transaction() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run


def _events(runtime: Runtime, run_id: uuid.UUID) -> list[tuple[str, dict[str, Any]]]:
    with runtime.db.transaction() as session:
        rows = session.scalars(select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.seq))
        return [(row.type, row.data) for row in rows]


def _tool_result(runtime: Runtime, run_id: uuid.UUID) -> dict[str, Any]:
    with runtime.db.transaction() as session:
        rows = session.scalars(select(Message).where(Message.run_id == run_id, Message.role == "tool"))
        [block] = [block for row in rows for block in row.content]
        return dict(block)


@pytest.mark.parametrize("tool", ["drop_own_session", "wait_for_a_lock"])
def test_a_run_the_database_fails_for_a_moment_is_given_back_and_then_succeeds(runtime: Runtime, tool: str) -> None:
    run_id = _run_calling(runtime, tool)

    assert execute_run(runtime, run_id) == "given_back"
    given = _run(runtime, run_id)
    assert (given.state, given.attempts, given.lease_owner, given.error) == ("queued", 0, None, None)
    assert _events(runtime, run_id)[-1] == ("run.queued", {"reason": "transient database error"})

    # Re-driven from what is stored: the call that was cut short is answered as interrupted, not run again.
    assert execute_run(runtime, run_id) == "finished"
    finished = _run(runtime, run_id)
    assert (finished.state, finished.attempts, finished.error) == ("succeeded", 0, None)
    assert _tool_result(runtime, run_id) == {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": "tool call interrupted",
        "is_error": True,
    }
    assert [data for kind, data in _events(runtime, run_id) if kind == "run.started"] == [{"attempt": 1}] * 2


@contextmanager
def _messages_refused(runtime: Runtime, run_id: uuid.UUID) -> Iterator[None]:
    """PostgreSQL refuses every new message of the run with a serialization failure (a trigger): a run that can
    never store its next step."""
    name = f"refuse_{run_id.hex}"
    with runtime.db.transaction() as session:
        session.execute(
            text(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.run_id = '{run_id}' "
                "THEN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END IF; RETURN NEW; END $$"
            )
        )
        session.execute(text(f"CREATE TRIGGER {name} BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION {name}()"))
    try:
        yield
    finally:
        with runtime.db.transaction() as session:
            session.execute(text(f"DROP TRIGGER {name} ON messages"))
            session.execute(text(f"DROP FUNCTION {name}()"))


def test_a_run_the_database_fails_every_time_fails_after_the_give_backs_allowed(runtime: Runtime) -> None:
    run_id = _run_calling(runtime, "drop_own_session")
    with _messages_refused(runtime, run_id):
        assert [execute_run(runtime, run_id) for _ in range(3)] == ["given_back", "given_back", "finished"]
    failed = _run(runtime, run_id)
    assert (failed.state, failed.attempts) == ("failed", 0)
    assert failed.error == "the database failed this run 3 times in a row (see the worker log)"
