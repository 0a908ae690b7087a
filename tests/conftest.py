"""Shared fixtures: a uniquely named PostgreSQL database per test session, migrated to head and dropped after."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis.configuration import set_hypothesis_home_dir
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hango.kernel.config import Settings
from hango.platform.db import Database, engine_url
from hango.processes import migrate

SCRATCH: dict[str, str] = {}  # where this session keeps temporary files, for the summary of a failed run

ADMIN_URL = os.environ.get("HANGO_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("HANGO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_under_basetemp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep what the tests and the processes they start write under pytest's base folder, not in /tmp.

    TMPDIR (inherited by every process the tests start: Celery beat's schedule folders, multiprocessing's pymp-*,
    pgserver's lock file) becomes its ``tmp/``; the logs of tests/support/processes.py go to its ``logs/``.
    tests/run.sh removes the whole base folder after a successful run.
    """
    base = tmp_path_factory.getbasetemp()
    SCRATCH.update(TMPDIR=str(base / "tmp"), HANGO_TEST_LOG_DIR=str(base / "logs"))
    for path in SCRATCH.values():
        os.makedirs(path, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in SCRATCH.items():
            patch.setenv(name, value)
        patch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        yield


HYPOTHESIS_HOME: list[str] = []  # this session's folder for Hypothesis' caches and examples


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis' caches and examples go to a folder of this session, not to .hypothesis/ in the checkout.

    Set before collection: Hypothesis reads the constants of the tests' modules into its cache then.
    """
    HYPOTHESIS_HOME.append(tempfile.mkdtemp(prefix="hango-hypothesis-"))
    set_hypothesis_home_dir(HYPOTHESIS_HOME[-1])


def pytest_unconfigure(config: pytest.Config) -> None:
    """Forget this session's Hypothesis folder."""
    set_hypothesis_home_dir(None)
    shutil.rmtree(HYPOTHESIS_HOME.pop(), ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked ``slow`` first, each file's tests kept in their order.

    Under ``--dist loadfile`` each test process takes a whole file at a time, in the order collected: a long file
    that happened to come last alphabetically would keep the whole run waiting for it alone at the end.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    """After a failure, say where the processes' logs are."""
    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) and SCRATCH:
        terminalreporter.write_line(f"process logs: {SCRATCH['HANGO_TEST_LOG_DIR']}")


def create_database(prefix: str = "hango_test") -> str:
    """Create an empty database with a unique name and return its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = create_engine(engine_url(ADMIN_URL), isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop a database created by :func:`create_database`, closing whatever still uses it."""
    name = make_url(url).database
    engine = create_engine(engine_url(ADMIN_URL), isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A fresh database at the newest schema, for the whole session."""
    url = create_database()
    try:
        migrate.upgrade(url)
        yield url
    finally:
        drop_database(url)


@pytest.fixture(scope="session")
def db(database_url: str) -> Iterator[Database]:
    """The session's connection pool."""
    database = Database(database_url)
    yield database
    database.dispose()


# A Fernet key for the tests' webhook secrets (never a deployment's).
WEBHOOK_SECRET_KEY = "a-23vwZYtRvhdmpUj-syTeJGuyN4AYh7mi3ZWuzr1kM="


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    """Settings for the test database, the local Redis, a queue of this session's own, and short timings."""
    return Settings(
        database_url=database_url,
        redis_url=REDIS_URL,
        max_body_bytes=64 * 1024,
        queue=f"hango-test-{uuid.uuid4().hex[:10]}",
        tool_modules=("tests.support.tools",),
        run_lease=timedelta(seconds=3),
        run_heartbeat_interval=timedelta(seconds=0.5),
        reconcile_interval=timedelta(seconds=1),
        requeue_after=timedelta(seconds=2),
        enqueue_dedup_ttl=timedelta(seconds=2),
        sse_keepalive=timedelta(seconds=1),
        model_retry_base_delay=timedelta(seconds=0.01),
        # Webhook tests deliver to a receiver on 127.0.0.1, and any worker of the session may send a retry.
        webhook_allow_private_urls=True,
        webhook_secret_keys=(WEBHOOK_SECRET_KEY,),
        webhook_retry_base=timedelta(seconds=0.2),
        webhook_sweep_interval=timedelta(seconds=0.5),
        webhook_timeout=timedelta(seconds=5),
        public_url="https://hango.example",
    )
