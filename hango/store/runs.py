"""Runs: the visibility rule every run-scoped read goes through, and the statements behind the run state machine
(:mod:`hango.run.transitions` is their only caller that changes a run's state)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, bindparam, exists, null, select, update
from sqlalchemy.orm import Session, aliased

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import ACTIVE_RUN_STATES, Run, RunState, Tenant
from hango.kernel.pagination import Page, PageRequest, paginate


def visible_to(principal: Principal) -> ColumnElement[bool]:
    """The runs a principal may see: the tenant's, and for a member only the ones they created."""
    return _visible(principal.tenant_id, principal.user_id, members_own=not principal.is_manager)


def visible_to_bound(*, members_own: bool) -> ColumnElement[bool]:
    """:func:`visible_to` for a statement built once: the caller is bound as parameters ``tenant_id`` and
    ``user_id``; ``members_own`` for a member's statement."""
    return _visible(bindparam("tenant_id"), bindparam("user_id"), members_own=members_own)


def _visible(tenant_id: Any, user_id: Any, *, members_own: bool) -> ColumnElement[bool]:
    clause: ColumnElement[bool] = (Run.tenant_id == tenant_id) & Run.deleted_at.is_(None)
    if members_own:
        clause = clause & (Run.created_by == user_id)
    return clause


def get_run(session: Session, principal: Principal, run_id: uuid.UUID, *, for_update: bool = False) -> Run:
    """A run the principal may see; :class:`NotFound` otherwise, so existence is never revealed."""
    statement = select(Run).where(Run.id == run_id, visible_to(principal))
    if for_update:
        statement = statement.with_for_update()
    run = session.scalar(statement)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def visible_head(session: Session, principal: Principal, run_id: uuid.UUID) -> tuple[str, int] | None:
    """A run's state and last event number, or ``None`` when the principal may not see it."""
    statement = select(Run.state, Run.event_seq).where(Run.id == run_id, visible_to(principal))
    row = session.execute(statement).one_or_none()
    return None if row is None else (row.state, row.event_seq)


def list_runs(session: Session, principal: Principal, page: PageRequest, state: str | None = None) -> Page[Run]:
    """The runs a principal may see, newest first, optionally in one state."""
    statement = select(Run).where(visible_to(principal))
    if state is not None:
        statement = statement.where(Run.state == state)
    return paginate(session, statement, [Run.created_at, Run.id], page, descending=True)


def _first_of_thread() -> ColumnElement[bool]:
    """No earlier run of the run's thread is still active (always true of a run without a thread).

    The claim's statement evaluates it on the row it updates, so of a thread's runs only the oldest active one can
    move to ``running``: the runs of a thread never run at the same time, whatever the number of workers.
    """
    earlier = aliased(Run)
    return ~exists().where(
        earlier.thread_id == Run.thread_id,
        earlier.thread_position < Run.thread_position,
        earlier.state.in_(ACTIVE_RUN_STATES),
    )


FIRST_OF_THREAD = _first_of_thread()


def list_thread_runs(session: Session, thread_id: uuid.UUID, page: PageRequest) -> Page[Run]:
    """A thread's runs (the caller checked it may see the thread), newest first."""
    statement = select(Run).where(Run.thread_id == thread_id, Run.deleted_at.is_(None))
    return paginate(session, statement, [Run.created_at, Run.id], page, descending=True)


@dataclass(frozen=True)
class Add:
    """A value of :func:`move` that raises the column by ``amount`` (``column + amount``, the amount bound)."""

    amount: int


@dataclass(frozen=True, eq=False)
class Sql:
    """A value of :func:`move` given as SQL built once (a module constant): statements holding it are kept by its
    identity, and its bound parameters come with each call (``bound``)."""

    expression: ColumnElement[Any]


class RunCounters(NamedTuple):
    """What a worker's fenced write needs back: where the run's message and event numbers now end, whose run it
    is (who may see its approvals), its thread, and whether its end starts the thread's next run."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    message_seq: int
    event_seq: int
    created_by: uuid.UUID
    thread_id: uuid.UUID | None = None
    followed: bool = False  # another run of its thread was added while it was active
    # The tenant's ``has_webhooks``, read in the same statement (``None``: not read).
    tenant_webhooks: bool | None = None


_COUNTERS = (
    Run.id,
    Run.tenant_id,
    Run.message_seq,
    Run.event_seq,
    Run.created_by,
    Run.thread_id,
    Run.followed,
    select(Tenant.has_webhooks).where(Tenant.id == Run.tenant_id).scalar_subquery(),
)
_OPTIONS = {"synchronize_session": False, "populate_existing": True}


def move(
    session: Session,
    run_id: uuid.UUID,
    source: Collection[RunState],
    values: Mapping[str, Any],
    *,
    owner: str | None = None,
    lease_expired_before: datetime | None = None,
    events: int = 0,
    bound: Mapping[str, Any] | None = None,
    first_of_thread: bool = False,
) -> Run | None:
    """Change a run's row in one conditional ``UPDATE … RETURNING``: only while it is in ``source`` (and, given an
    ``owner``, under that worker's lease). ``None`` when the guard did not hold; the loaded row is refreshed.

    A value is a plain value, an :class:`Add`, a :class:`Sql` (with its parameters in ``bound``) or a SQL
    expression. ``events`` takes that many event numbers in the same statement; they end at the returned
    ``event_seq``.
    """
    statement, parameters = _guarded(
        run_id, source, values, owner, lease_expired_before, events, returning=None, first_of_thread=first_of_thread
    )
    parameters.update(bound or {})
    return session.scalars(statement, parameters, execution_options=_OPTIONS).one_or_none()


def advance(
    session: Session,
    run_id: uuid.UUID,
    owner: str,
    values: Mapping[str, Any],
    *,
    events: int = 0,
) -> RunCounters | None:
    """Write a running run's row under this worker's lease in one fenced statement, returning only its counters
    (a worker's writes, and its transitions, read nothing else back); ``None`` when the lease is no longer held."""
    running: tuple[RunState, ...] = ("running",)
    statement, parameters = _guarded(run_id, running, values, owner, None, events, returning=_COUNTERS)
    row = session.execute(statement, parameters, execution_options={"synchronize_session": False}).one_or_none()
    return None if row is None else RunCounters(*row)


# Built statements by shape: the columns written and how (bound value, bound increment), the guards and what is
# returned. Building and keying an UPDATE costs more Python than PostgreSQL takes to run it. The shapes are those
# of the transitions' and fenced writes' call sites, a few dozen; a value given as SQL is never cached.
_Shape = tuple[Any, ...]
_STATEMENTS: dict[_Shape, Any] = {}
_MOST_STATEMENTS = 256  # past this many shapes, statements are built each time instead


def _guarded(
    run_id: uuid.UUID,
    source: Collection[RunState],
    values: Mapping[str, Any],
    owner: str | None,
    lease_expired_before: datetime | None,
    events: int,
    *,
    returning: tuple[Any, ...] | None,
    first_of_thread: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """The conditional UPDATE and its parameters; built once per shape unless a value is a SQL expression."""
    if events:
        values = {**values, "event_seq": Add(events)}
    parameters: dict[str, Any] = {"run_id": run_id, "owner": owner, "lease_expired_before": lease_expired_before}
    kinds: list[tuple[str, object]] = []
    for name, value in sorted(values.items()):
        if isinstance(value, ColumnElement):
            kinds.append((name, "sql"))
        elif isinstance(value, Sql):
            kinds.append((name, value))
        elif value is None:
            kinds.append((name, "null"))
        else:
            kinds.append((name, "add" if isinstance(value, Add) else "value"))
            parameters[f"value_{name}"] = value.amount if isinstance(value, Add) else value
    shape = (
        tuple(sorted(source)),
        owner is not None,
        lease_expired_before is not None,
        tuple(kinds),
        returning,
        first_of_thread,
    )
    cacheable = all(kind != "sql" for _, kind in kinds)
    statement = _STATEMENTS.get(shape) if cacheable else None
    if statement is None:
        statement = _build(source, values, owner, lease_expired_before, returning, first_of_thread)
        if cacheable and len(_STATEMENTS) < _MOST_STATEMENTS:
            _STATEMENTS[shape] = statement
    return statement, parameters


def _build(
    source: Collection[RunState],
    values: Mapping[str, Any],
    owner: str | None,
    lease_expired_before: datetime | None,
    returning: tuple[Any, ...] | None,
    first_of_thread: bool,
) -> Any:
    columns = Run.__table__.c
    statement = update(Run).where(Run.id == bindparam("run_id"), Run.state.in_(sorted(source)))
    if first_of_thread:
        statement = statement.where(FIRST_OF_THREAD)
    if owner is not None:
        statement = statement.where(Run.lease_owner == bindparam("owner"))
    if lease_expired_before is not None:
        statement = statement.where(Run.lease_expires_at < bindparam("lease_expired_before"))
    written: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, ColumnElement | Sql):
            written[name] = value.expression if isinstance(value, Sql) else value
            continue
        if value is None:  # SQL NULL, in a JSON column too (where a bound None would be JSON null)
            written[name] = null()
            continue
        bound = bindparam(f"value_{name}", type_=columns[name].type)
        written[name] = getattr(Run, name) + bound if isinstance(value, Add) else bound
    statement = statement.values(**written)
    return statement.returning(*returning) if returning is not None else statement.returning(Run)


def lock_run(session: Session, run_id: uuid.UUID) -> Run | None:
    """The run row, locked for this transaction (any tenant: the worker and beat tasks act for the system)."""
    return session.scalar(select(Run).where(Run.id == run_id).with_for_update())


def lock_lost_runs(session: Session, now: datetime, limit: int) -> list[Run]:
    """``running`` runs whose lease ended before ``now``, oldest lease first, skipping rows others hold."""
    statement = (
        select(Run)
        .where(Run.state == "running", Run.lease_expires_at < now)
        .order_by(Run.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(statement))


def lock_waiting_runs(session: Session, updated_before: datetime, limit: int) -> list[Run]:
    """``queued`` runs untouched since ``updated_before``, longest waiting first, skipping rows others hold (and a
    thread's runs waiting for an earlier one: that one's end enqueues them)."""
    statement = (
        select(Run)
        .where(Run.state == "queued", Run.updated_at < updated_before, FIRST_OF_THREAD)
        .order_by(Run.updated_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(statement))
