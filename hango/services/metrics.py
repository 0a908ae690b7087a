"""Prometheus metrics that describe stored state, computed from PostgreSQL at scrape time.

Computing them from the database, rather than counting in memory, makes them correct however many API and worker
processes run, and across restarts: every process exposes the same numbers. The names follow the instrumentation
list of the human-in-the-loop requirement.

Every labelled series exists before its first event, at 0: a run state, a decision, and a tool of the known tools
(the process's tool registry: the built-in tools and ``HANGO_TOOL_MODULES``, plus any tool already found in the
stored approvals). Prometheus's ``increase()`` needs a series that was 0 to see its first expiry, and an alert on
an empty queue needs a 0 to compare with. The labels come from the operator's registry, not from agents'
interrupt rules: those are tenant input, and a tenant must not be able to mint series.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hango.kernel.models import DECISIONS, EXPIRY_ACTIONS, RUN_STATES, PendingApproval, Run
from hango.platform.db import Database

log = logging.getLogger(__name__)
WAIT_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


class StoredStateCollector(Collector):
    """Runs by state and the approval series, read in one short transaction per scrape."""

    def __init__(self, db: Database, tools: Iterable[str] = ()) -> None:
        self._db = db
        self._tools = frozenset(tools)

    def collect(self) -> Iterator[Metric]:
        """The metric families; nothing when the database cannot be read (the scrape still succeeds)."""
        try:
            with self._db.transaction() as session:
                families = [
                    _runs_by_state(session),
                    _pending(session, self._tools),
                    _decisions(session, self._tools),
                    _expired(session, self._tools),
                    _escalated(session, self._tools),
                    _wait_time(session),
                ]
        except SQLAlchemyError:
            log.warning("could not read stored-state metrics", exc_info=True)
            return
        yield from families


def _runs_by_state(session: Session) -> Metric:
    counts = dict(session.execute(select(Run.state, func.count()).group_by(Run.state)).all())
    family = GaugeMetricFamily("hango_runs_by_state", "Runs in each state.", labels=["state"])
    for state in RUN_STATES:
        family.add_metric([state], counts.get(state, 0))
    return family


def _by_tool(session: Session, tools: frozenset[str], *conditions: object) -> dict[str, int]:
    """Rows by tool name, with a 0 for every known tool that has none."""
    statement = select(PendingApproval.tool_name, func.count()).where(*conditions).group_by(PendingApproval.tool_name)  # type: ignore[arg-type]
    counts = dict.fromkeys(tools, 0)
    counts.update((tool, count) for tool, count in session.execute(statement))
    return counts


def _pending(session: Session, tools: frozenset[str]) -> Metric:
    family = GaugeMetricFamily("hango_approvals_pending", "Tool calls waiting for a human, by tool.", labels=["tool"])
    for tool, count in sorted(_by_tool(session, tools, PendingApproval.state == "pending").items()):
        family.add_metric([tool], count)
    return family


def _decisions(session: Session, tools: frozenset[str]) -> Metric:
    family = CounterMetricFamily(
        "hango_approvals_decisions", "Human decisions, by decision and tool.", labels=["decision", "tool"]
    )
    statement = (
        select(PendingApproval.decision, PendingApproval.tool_name, func.count())
        .where(PendingApproval.state == "decided")
        .group_by(PendingApproval.decision, PendingApproval.tool_name)
    )
    counts: dict[tuple[str, str], int] = {(decision, tool): 0 for decision in DECISIONS for tool in tools}
    counts.update({(decision, tool): count for decision, tool, count in session.execute(statement)})
    for (decision, tool), count in sorted(counts.items()):
        family.add_metric([decision, tool], count)
    return family


def _expired(session: Session, tools: frozenset[str]) -> Metric:
    family = CounterMetricFamily(
        "hango_approvals_expired",
        "Approvals nobody decided in time, by tool and by what the deadline did (fail the run, reject the call).",
        labels=["tool", "action"],
    )
    # Approvals expired before the action was recorded (migration 0008) all failed their run.
    action = func.coalesce(PendingApproval.expiry_action, "fail")
    statement = (
        select(PendingApproval.tool_name, action, func.count())
        .where(PendingApproval.state == "expired")
        .group_by(PendingApproval.tool_name, action)
    )
    counts: dict[tuple[str, str], int] = {(tool, done): 0 for tool in tools for done in EXPIRY_ACTIONS}
    counts.update({(tool, done): count for tool, done, count in session.execute(statement)})
    for (tool, done), count in sorted(counts.items()):
        family.add_metric([tool, done], count)
    return family


def _escalated(session: Session, tools: frozenset[str]) -> Metric:
    family = CounterMetricFamily(
        "hango_approvals_escalated",
        "Approvals whose first deadline handed them to other reviewers, by tool.",
        labels=["tool"],
    )
    for tool, count in sorted(_by_tool(session, tools, PendingApproval.escalated_at.is_not(None)).items()):
        family.add_metric([tool], count)
    return family


def _wait_time(session: Session) -> Metric:
    wait = func.extract("epoch", PendingApproval.decided_at - PendingApproval.created_at)
    columns = [func.count().filter(wait <= bound) for bound in WAIT_BUCKETS]
    row = session.execute(
        select(*columns, func.count(), func.coalesce(func.sum(wait), 0)).where(PendingApproval.state == "decided")
    ).one()
    *cumulative, total, seconds = row
    buckets = [(str(bound), count) for bound, count in zip(WAIT_BUCKETS, cumulative, strict=True)]
    return HistogramMetricFamily(
        "hango_approvals_wait_time_seconds",
        "Seconds from an approval request to its decision.",
        buckets=[*buckets, ("+Inf", total)],
        sum_value=float(seconds),
    )
