"""A PostgreSQL cluster and a Redis server of the tests' own, for fault tests that stop, restart and cut them.

Both run on free ports of 127.0.0.1 from a temporary folder that :meth:`close` removes, so the machine's own
services (PostgreSQL on 5432, Redis on 6379) are never touched. PostgreSQL refuses to run as root: under root its
programs run as the ``postgres`` user (``runuser``), which owns the cluster's folder.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

from hango.platform.db import engine_url
from tests.support.processes import free_port, wait_until

# Durability is worthless for a cluster that lives as long as a test module: it is traded for speed.
_FAST = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
    # Dynamic shared memory in the data folder, not /dev/shm: removing the folder removes all of it.
    "dynamic_shared_memory_type": "mmap",
}


def postgres_bindir() -> Path:
    """The folder of PostgreSQL's server programs: ``pg_config --bindir``, else the newest Debian install."""
    found = shutil.which("pg_config")
    if found:
        bindir = Path(subprocess.run([found, "--bindir"], capture_output=True, text=True, check=True).stdout.strip())
        if (bindir / "initdb").exists():
            return bindir
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(path.split("/")[4]))
    if not candidates:
        raise RuntimeError("no PostgreSQL server programs found (pg_config --bindir, /usr/lib/postgresql/*/bin)")
    return Path(candidates[-1]).parent


def _scratch_folder(prefix: str) -> Path:
    """A new folder in /dev/shm (else /tmp) that another user may enter: TMPDIR may sit under root-only folders."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    folder.chmod(0o755)
    return folder


class PrivatePostgres:
    """A fresh PostgreSQL cluster (trust authentication, no fsync) on a free port, with stop and start."""

    def __init__(self) -> None:
        self.root = _scratch_folder("hango-pg-")
        self.data = self.root / "data"
        self.port = free_port()
        self._bindir = postgres_bindir()
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        settings = {**_FAST, "port": str(self.port), "unix_socket_directories": f"'{self.root}'"}
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self.start()

    def url(self, database: str = "postgres") -> str:
        """The URL of ``database`` on this cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        with self._admin() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        return self.url(name)

    def start(self) -> None:
        """Start the server (same port, same data) and wait until it accepts connections."""
        log = self.root / "postgres.log"
        self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(log), "-w", "-t", "30", "-s")

    def stop(self) -> None:
        """Stop the server as an operator would (``pg_ctl stop -m fast``): sessions end, the data stays."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "-s")

    def running(self) -> bool:
        """Whether the server's postmaster is up."""
        status = self._run("pg_ctl", "status", "-D", str(self.data), check=False)
        return status.returncode == 0

    def sessions(self, database: str) -> int:
        """How many sessions are open on ``database``."""
        return self._count("SELECT count(*) FROM pg_stat_activity WHERE datname = :database", database)

    def activity(self, database: str) -> list[tuple[str, str]]:
        """The state and last statement of each session on ``database`` (``pg_stat_activity``)."""
        query = "SELECT coalesce(state, ''), query FROM pg_stat_activity WHERE datname = :database"
        with self._admin() as connection:
            return [(state, statement) for state, statement in connection.execute(text(query), {"database": database})]

    def terminate_sessions(self, database: str) -> int:
        """End every session on ``database`` (``pg_terminate_backend``) except this call's own; how many ended."""
        return self._count(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = :database AND pid <> pg_backend_pid()",
            database,
        )

    def close(self) -> None:
        """Stop the server and remove the cluster."""
        if self.running():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-s", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def _count(self, query: str, database: str) -> int:
        with self._admin() as connection:
            return int(connection.execute(text(query), {"database": database}).scalar_one())

    @contextmanager
    def _admin(self) -> Iterator[Connection]:
        """A superuser's connection to the ``postgres`` database, of its own (closed after), in autocommit."""
        engine = create_engine(engine_url(self.url()), poolclass=NullPool, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                yield connection
        finally:
            engine.dispose()

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [*self._as_postgres, str(self._bindir / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done


class PrivateRedis:
    """A ``redis-server`` holding nothing on disk, on a free port; :meth:`stop` kills it, :meth:`start` brings it
    back on the same port, empty."""

    def __init__(self) -> None:
        self.root = _scratch_folder("hango-redis-")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None
        self.start()

    def client(self) -> redis.Redis:
        """A client of this server."""
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def start(self) -> None:
        """Start the server and wait until it answers ``PING``."""
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", str(self.root), "--logfile", str(self.root / "redis.log")]
        self._process = subprocess.Popen(["redis-server", *args], start_new_session=True)
        wait_until(self._answers, timeout=30)

    def stop(self) -> None:
        """Kill the server, as a crash or an out-of-memory kill would: everything it held is gone."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=30)
        self._process = None

    def close(self) -> None:
        """Kill the server and remove its folder."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _answers(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1).ping())
        except redis.RedisError:
            return False


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A :class:`PrivatePostgres` for the duration of the block, removed after."""
    cluster = PrivatePostgres()
    try:
        yield cluster
    finally:
        cluster.close()


@contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    """A :class:`PrivateRedis` for the duration of the block, removed after."""
    server = PrivateRedis()
    try:
        yield server
    finally:
        server.close()
