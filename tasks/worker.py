"""The Celery edge: the run and reconcile tasks, and the worker and beat entry points.

Tasks take ids, re-read the truth and are idempotent: the run task's first act is the conditional claim, so a
duplicate or redelivered message does nothing.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import wraps
from typing import Any, TypeVar

from celery import Celery, Task
from celery.signals import worker_process_init, worker_process_shutdown
from prometheus_client import CollectorRegistry, start_http_server

from hango.agent.instruments import instruments
from hango.kernel.config import Settings
from hango.kernel.errors import ConfigError
from hango.kernel.telemetry import configure_tracing
from hango.platform.db import is_transient
from hango.platform.queue import (
    EXPIRE_TASK,
    PING_TASK,
    RECONCILE_TASK,
    RUN_TASK,
    STATS_TASK,
    WEBHOOK_DELIVER_TASK,
    WEBHOOK_SWEEP_TASK,
    make_celery,
    task_options,
)
from hango.platform.runtime import Runtime, tool_registry
from hango.processes import multiprocess_metrics
from hango.run.expiry import sweep
from hango.run.reconciler import reconcile
from hango.run.worker import execute_run
from hango.services.webhooks import delivery

log = logging.getLogger(__name__)
TASKS = (RUN_TASK, RECONCILE_TASK, EXPIRE_TASK, PING_TASK, STATS_TASK, WEBHOOK_DELIVER_TASK, WEBHOOK_SWEEP_TASK)
_Result = TypeVar("_Result")
CLAIM_RETRIES = 5


def _timed(task: str) -> Callable[[Callable[..., _Result]], Callable[..., _Result]]:
    """Observe every execution of the decorated task body in ``hango_task_duration_seconds``."""

    def decorate(body: Callable[..., _Result]) -> Callable[..., _Result]:
        @wraps(body)
        def timed(*args: Any, **kwargs: Any) -> _Result:
            with instruments().task_seconds.labels(task=task).time():
                return body(*args, **kwargs)

        return timed

    return decorate


class _Process:
    """The runtime of this worker process, built lazily so that each forked pool child opens its own pool."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._runtime: Runtime | None = None

    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = Runtime.build(self.settings)
        return self._runtime

    def reset(self) -> None:
        self._runtime = None


def create_worker_app(settings: Settings) -> Celery:
    """The Celery app with hango's tasks registered."""
    app = make_celery(settings)
    process = _Process(settings)
    options = task_options(settings)

    @app.task(name=RUN_TASK, bind=True, **options)  # type: ignore[untyped-decorator]
    @_timed(RUN_TASK)
    def run(task: Task, run_id: str) -> str:
        """Drive one run until it finishes, suspends or stops; a claim the database failed for a moment is tried
        again shortly (a few times: past them, the reconciler enqueues the run again after HANGO_REQUEUE_AFTER)."""
        try:
            return execute_run(process.runtime(), uuid.UUID(run_id))
        except Exception as exc:
            if not is_transient(exc):
                raise
            pause = settings.run_heartbeat_interval.total_seconds()
            raise task.retry(exc=exc, countdown=pause, max_retries=CLAIM_RETRIES) from exc

    @app.task(name=RECONCILE_TASK, **options)  # type: ignore[untyped-decorator]
    @_timed(RECONCILE_TASK)
    def reconcile_runs() -> dict[str, int]:
        """Requeue runs whose worker was lost and re-enqueue runs left waiting."""
        report = reconcile(process.runtime())
        return {"requeued": report.requeued, "failed": report.failed, "reenqueued": report.reenqueued}

    @app.task(name=EXPIRE_TASK, **options)  # type: ignore[untyped-decorator]
    @_timed(EXPIRE_TASK)
    def expire_approvals() -> int:
        """Fail the runs whose approvals outlived HANGO_APPROVAL_TTL, and forget old approval stream events."""
        return sweep(process.runtime())

    @app.task(name=WEBHOOK_DELIVER_TASK, **options)  # type: ignore[untyped-decorator]
    @_timed(WEBHOOK_DELIVER_TASK)
    def deliver_webhook(delivery_id: str) -> str:
        """Make one attempt of a webhook delivery (a duplicate message finds it claimed or done)."""
        return delivery.deliver(process.runtime(), uuid.UUID(delivery_id))

    @app.task(name=WEBHOOK_SWEEP_TASK, **options)  # type: ignore[untyped-decorator]
    @_timed(WEBHOOK_SWEEP_TASK)
    def sweep_webhooks() -> dict[str, int]:
        """Write the approval reminders now due and enqueue due deliveries (retries, lost enqueues)."""
        report = delivery.sweep(process.runtime())
        return {"reminded": report.reminded, "enqueued": report.enqueued, "pruned": report.pruned}

    @app.task(name=PING_TASK, **options)  # type: ignore[untyped-decorator]
    @_timed(PING_TASK)
    def ping(reply_to: str | None = None) -> str:
        """A no-op round trip (health checks, and the baseline of the benchmarks); answers on a Redis list."""
        if reply_to:
            process.runtime().redis.lpush(reply_to, "pong")
        return "pong"

    @app.task(name=STATS_TASK, **options)  # type: ignore[untyped-decorator]
    @_timed(STATS_TASK)
    def worker_stats(reply_to: str) -> dict[str, Any]:
        """What this pool process holds right now: checked-out connections and live threads (answers on Redis)."""
        runtime = process.runtime()
        stats = {
            "pid": os.getpid(),
            "connections_checked_out": runtime.db.checked_out(),
            "threads": sorted(thread.name for thread in threading.enumerate()),
        }
        runtime.redis.lpush(reply_to, json.dumps(stats))
        return stats

    @worker_process_init.connect(weak=False)  # type: ignore[untyped-decorator]
    def _after_fork(**_: object) -> None:
        process.reset()
        configure_tracing(settings, "worker")

    @worker_process_shutdown.connect(weak=False)  # type: ignore[untyped-decorator]
    def _before_exit(pid: int | None = None, **_: object) -> None:
        folder = multiprocess_metrics.current_folder()
        if folder is not None and pid is not None:
            multiprocess_metrics.forget_process(pid, folder)

    return app


def _stdout_to_stderr() -> None:
    # Every hango process logs to stderr; Celery prints its banner straight to the process's stdout.
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


def run_worker(settings: Settings, concurrency: int, *, beat: bool = False) -> None:
    """``hango worker``: a Celery worker on hango's queue, in the foreground until SIGTERM."""
    _stdout_to_stderr()
    argv = [
        "worker",
        f"--concurrency={concurrency}",
        f"--queues={settings.queue}",
        f"--loglevel={settings.log_level}",
        f"--hostname=hango-{uuid.uuid4().hex[:8]}@%h",
        "--without-gossip",
        "--without-mingle",
    ]
    with ExitStack() as stack:
        if settings.worker_metrics_port:
            stack.enter_context(_metrics_server(settings))
        schedule = stack.enter_context(_schedule_file(settings))
        if beat:
            argv += ["--beat", f"--schedule={schedule}"]
        create_worker_app(settings).worker_main(argv)


@contextmanager
def _metrics_server(settings: Settings) -> Iterator[None]:
    """Serve the metrics of this worker and of its pool processes on ``HANGO_WORKER_METRICS_PORT``.

    Started in the main process before Celery forks its pool: the children inherit the shared folder and write
    their values there, and this process's server adds them up at every scrape. Every series starts at 0 here.

    Raises:
        ConfigError: The port cannot be listened on (in use, or a privileged port).
    """
    with multiprocess_metrics.shared_folder(f"hango-worker-metrics-{settings.queue}-") as folder:
        registry = CollectorRegistry()
        multiprocess_metrics.add_shared_values(registry, folder)
        instruments().start_at_zero(TASKS, tool_registry(settings).names())
        address, port = settings.worker_metrics_address, settings.worker_metrics_port
        try:
            server, _ = start_http_server(port, address, registry=registry)
        except OSError as exc:
            raise ConfigError(f"HANGO_WORKER_METRICS_PORT: cannot listen on {address}:{port} ({exc})") from exc
        log.info("worker metrics on http://%s:%s/metrics", address, port)
        try:
            yield
        finally:
            server.shutdown()


def run_beat(settings: Settings) -> None:
    """``hango beat``: the periodic scheduler (the reconciler and the approval sweeper)."""
    _stdout_to_stderr()
    configure_tracing(settings, "beat")
    app = create_worker_app(settings)
    with _schedule_file(settings) as schedule:
        app.start(["beat", f"--loglevel={settings.log_level}", f"--schedule={schedule}"])


def run_flower(settings: Settings, address: str, port: int, *, insecure_no_auth: bool = False) -> None:
    """``hango flower``: Flower's web UI for the workers and tasks on hango's broker.

    Raises:
        ConfigError: No ``HANGO_FLOWER_BASIC_AUTH`` and not explicitly allowed to serve without it on loopback.
    """
    argv = flower_argv(settings, address, port, insecure_no_auth=insecure_no_auth)
    _stdout_to_stderr()
    create_worker_app(settings).start(argv)


def flower_argv(settings: Settings, address: str, port: int, *, insecure_no_auth: bool) -> list[str]:
    """Flower's arguments: basic auth from the settings, or no auth only when asked for on a loopback address.

    Flower shows every task's arguments and can revoke tasks and shut workers down, so serving it without a login
    is allowed only where nobody else can connect.
    """
    argv = ["flower", f"--address={address}", f"--port={port}"]
    if settings.flower_basic_auth:
        # Passed inside this process, so the password never appears in the process list.
        return [*argv, f"--basic-auth={settings.flower_basic_auth}"]
    if not insecure_no_auth:
        raise ConfigError(
            "Flower needs a login: set HANGO_FLOWER_BASIC_AUTH=user:password "
            "(or pass --insecure-no-auth with a loopback --address such as 127.0.0.1)"
        )
    if not _is_loopback(address):
        raise ConfigError(f"--insecure-no-auth is only allowed on a loopback --address, not {address!r}")
    log.warning("Flower is serving without authentication on %s:%s", address, port)
    return argv


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@contextmanager
def _schedule_file(settings: Settings) -> Iterator[str]:
    """A private beat schedule file, removed when the process stops.

    Beat keeps only its last-run times here; losing the file merely runs each job once more. A folder per
    process keeps two schedulers (two standalones, parallel test runs) from sharing one file.
    """
    with tempfile.TemporaryDirectory(prefix=f"hango-beat-{settings.queue}-") as folder:
        yield os.path.join(folder, "schedule")
