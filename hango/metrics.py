"""Prometheus metrics that describe stored state, computed from PostgreSQL at scrape time.

Computing them from the database, rather than counting in memory, makes them correct however many API and worker
processes run, and across restarts: every process exposes the same numbers. The names follow the instrumentation
list of the human-in-the-loop requirement.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hango.db import Database
from hango.models import RUN_STATES, PendingApproval, Run

log = logging.getLogger(__name__)
WAIT_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


class StoredStateCollector(Collector):
    """Runs by state and the approval series, read in one short transaction per scrape."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def collect(self) -> Iterator[Metric]:
        """The metric families; nothing when the database cannot be read (the scrape still succeeds)."""
        try:
            with self._db.transaction() as session:
                families = [
                    _runs_by_state(session),
                    _pending(session),
                    _decisions(session),
                    _expired(session),
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


def _by_tool(session: Session, *conditions: object) -> list[tuple[str, int]]:
    statement = select(PendingApproval.tool_name, func.count()).where(*conditions).group_by(PendingApproval.tool_name)  # type: ignore[arg-type]
    return [(tool, count) for tool, count in session.execute(statement)]


def _pending(session: Session) -> Metric:
    family = GaugeMetricFamily("hango_approvals_pending", "Tool calls waiting for a human, by tool.", labels=["tool"])
    for tool, count in _by_tool(session, PendingApproval.state == "pending"):
        family.add_metric([tool], count)
    return family


def _decisions(session: Session) -> Metric:
    family = CounterMetricFamily(
        "hango_approvals_decisions", "Human decisions, by decision and tool.", labels=["decision", "tool"]
    )
    statement = (
        select(PendingApproval.decision, PendingApproval.tool_name, func.count())
        .where(PendingApproval.state == "decided")
        .group_by(PendingApproval.decision, PendingApproval.tool_name)
    )
    for decision, tool, count in session.execute(statement):
        family.add_metric([decision, tool], count)
    return family


def _expired(session: Session) -> Metric:
    family = CounterMetricFamily(
        "hango_approvals_expired", "Approvals nobody decided in time, by tool.", labels=["tool"]
    )
    for tool, count in _by_tool(session, PendingApproval.state == "expired"):
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
