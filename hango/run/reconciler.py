"""The reconciler (beat-scheduled): nothing is left stuck.

- A ``running`` run whose lease expired lost its worker (killed, out of memory, partitioned). It goes back to
  ``queued`` under a new generation and is enqueued again — unless it already lost workers
  ``HANGO_MAX_RUN_ATTEMPTS`` times, in which case it fails with that reason.
- A ``queued`` run that has waited longer than ``HANGO_REQUEUE_AFTER`` may have lost its message (the process died
  between commit and enqueue, a frozen worker's broker read took it, the broker was flushed); it is enqueued again
  under a new generation, so the dedup key of the lost enqueue does not swallow this one. A run that is merely
  waiting its turn gets one more message per ``HANGO_REQUEUE_AFTER``; the claim (``queued → running``) lets the
  first message through and makes every other a no-op.

Rows are taken with ``FOR UPDATE SKIP LOCKED`` in bounded batches, so reconcilers running at once never fight.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import transitions
from hango.store import runs as run_store

log = logging.getLogger(__name__)
BATCH = 100


@dataclass(frozen=True)
class ReconcileReport:
    """What one pass did."""

    requeued: int = 0
    failed: int = 0
    reenqueued: int = 0


def reconcile(runtime: Runtime) -> ReconcileReport:
    """One reconciliation pass."""
    requeued, failed = reclaim_lost_runs(runtime)
    reenqueued = reenqueue_waiting_runs(runtime)
    report = ReconcileReport(requeued, failed, reenqueued)
    if requeued or failed or reenqueued:
        log.info("reconciled runs", extra={"requeued": requeued, "failed": failed, "reenqueued": reenqueued})
    return report


def reclaim_lost_runs(runtime: Runtime) -> tuple[int, int]:
    """Requeue or fail ``running`` runs whose lease expired; returns ``(requeued, failed)``."""
    with unit_of_work(runtime) as work:
        lost = run_store.lock_lost_runs(work.session, datetime.now(UTC), BATCH)
        outcomes = [transitions.reclaim_lost(work, run, runtime.settings.max_run_attempts) for run in lost]
    return outcomes.count("requeued"), outcomes.count("failed")


def reenqueue_waiting_runs(runtime: Runtime) -> int:
    """Enqueue again, under a new generation, the ``queued`` runs that have waited too long; returns how many.

    Their messages are sent after the commit; one the broker refuses is sent again ``HANGO_REQUEUE_AFTER`` later.
    """
    cutoff = datetime.now(UTC) - runtime.settings.requeue_after
    with unit_of_work(runtime) as work:
        waiting = run_store.lock_waiting_runs(work.session, cutoff, BATCH * 5)
        moved = [transitions.requeue_waiting(work, run) for run in waiting]
    return sum(run is not None for run in moved)
