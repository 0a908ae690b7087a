"""The ``hango`` command: database migrations, tenant bootstrap and the server processes.

The commands that talk to a running server (``agents``, ``runs``, ``threads``, ``approvals``, ``mcp``) need only the
client: the server's settings, its database layer and its processes are imported, and its settings read, by the
commands that use them, so a reviewer's command starts in a fraction of the time.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hango.processes import cli_agents, cli_mcp, cli_reviewer, cli_runs, cli_threads

if TYPE_CHECKING:
    from hango.kernel.config import Settings


def _settings(ctx: click.Context) -> Settings:
    """The server's settings, read from the environment by the first command that asks (a malformed one stops it
    with one line, and so does a malformed ``HANGO_MCP_CONFIG`` file), with logging configured by them."""
    from hango.kernel.config import Settings
    from hango.kernel.errors import ConfigError
    from hango.kernel.logs import configure_logging
    from hango.mcp.config import load_operator_servers

    root = ctx.find_root()
    if root.obj is None:
        try:
            root.obj = Settings.from_env(os.environ)
            load_operator_servers(root.obj.mcp_config, os.environ)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
        configure_logging(root.obj.log_level)
    settings: Settings = root.obj
    return settings


def _database_url(ctx: click.Context) -> str:
    from hango.kernel.errors import ConfigError

    try:
        return _settings(ctx).require_database_url()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


class _Group(click.Group):
    """Turns database failures into a one-line error instead of a stack trace."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            # Only a command that imported SQLAlchemy can have raised one of its errors.
            errors = sys.modules.get("sqlalchemy.exc")
            if errors is None or not isinstance(exc, errors.SQLAlchemyError):
                raise
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise click.ClickException(
                f"database error: {reason} (is HANGO_DATABASE_URL right, and migrated?)"
            ) from exc


@click.group(cls=_Group)
@click.version_option(package_name="hango", prog_name="hango", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context) -> None:
    """hango: a multi-tenant agent runtime server with durable human-in-the-loop approvals."""


@main.group()
def db() -> None:
    """Schema migrations (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the schema forward (to the newest revision by default)."""
    from hango.processes import migrate

    migrate.upgrade(_database_url(ctx), revision)


@db.command("downgrade")
@click.argument("revision")
@click.pass_context
def db_downgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the schema back to REVISION (``base`` drops everything)."""
    from hango.processes import migrate

    migrate.downgrade(_database_url(ctx), revision)


@db.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Show the revision the database is at."""
    from hango.processes import migrate

    migrate.current(_database_url(ctx))


@main.group()
def tenants() -> None:
    """Tenant bootstrap."""


@tenants.command("create")
@click.argument("name")
@click.option("--owner-email", required=True, help="Email of the tenant's first owner.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.pass_context
def tenants_create(ctx: click.Context, name: str, owner_email: str, as_json: bool) -> None:
    """Create a tenant and its owner, and print the owner's token (shown only once)."""
    from hango.kernel.errors import HangoError
    from hango.platform.db import Database
    from hango.services import tenancy

    database = Database(_database_url(ctx), pool_size=1)
    try:
        created = tenancy.create_tenant(database, name, owner_email)
    except HangoError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        database.dispose()
    if as_json:
        payload = {"tenant_id": str(created.tenant_id), "user_id": str(created.user_id), "token": created.token}
        click.echo(json.dumps(payload))
        return
    click.echo(f"tenant  {created.tenant_id}")
    click.echo(f"owner   {created.user_id} <{owner_email}>")
    click.echo(f"token   {created.token}")
    click.echo("The token is shown only now: keep it somewhere safe.", err=True)


@main.command("api")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--workers", default=2, show_default=True, type=int, help="gunicorn worker processes")
@click.option(
    "--connections",
    type=click.IntRange(min=2),
    help="client connections per worker [default: HANGO_API_CONNECTIONS, 8192]; open event streams hold at most "
    "three quarters of them (or HANGO_MAX_STREAMS_PER_PROCESS), the rest serve ordinary requests",
)
@click.pass_context
def api_command(ctx: click.Context, host: str, port: int, workers: int, connections: int | None) -> None:
    """Serve the HTTP API with gunicorn's gevent workers (an open event stream costs a greenlet, not a thread)."""
    from hango.kernel.errors import ConfigError
    from hango.processes.server import serve  # gunicorn is only needed by this command

    settings = _settings(ctx)
    _require_services(settings)
    connections = connections or settings.api_connections
    try:
        settings.replace(api_connections=connections).check()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    options: dict[str, Any] = {"bind": f"{host}:{port}", "workers": workers, "worker_connections": connections}
    # The workers build their settings from the environment: they must size their stream capacity by the
    # connections gunicorn really gives them.
    options["raw_env"] = [f"HANGO_API_CONNECTIONS={connections}"]
    serve(options)


def _edge(module: str) -> Any:
    # The worker and beat live in the Celery edge; the CLI names it by module so the domain never imports it.
    return importlib.import_module(module)


def _require_services(settings: Settings) -> None:
    from hango.kernel.errors import ConfigError

    try:
        settings.require_database_url()
        settings.require_redis_url()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command("worker")
@click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 256), help="runs at once")
@click.option("--beat", "with_beat", is_flag=True, help="Also run the periodic scheduler in this process.")
@click.pass_context
def worker_command(ctx: click.Context, concurrency: int, with_beat: bool) -> None:
    """Execute runs from the queue (a Celery worker)."""
    from hango.kernel.errors import ConfigError

    settings = _settings(ctx)
    _require_services(settings)
    try:
        _edge("hango.tasks.worker").run_worker(settings, concurrency, beat=with_beat)
    except ConfigError as exc:  # the worker's metrics port cannot be listened on
        raise click.ClickException(str(exc)) from exc


@main.command("beat")
@click.pass_context
def beat_command(ctx: click.Context) -> None:
    """Schedule the periodic jobs: the reconciler and the approval sweeper."""
    settings = _settings(ctx)
    _require_services(settings)
    _edge("hango.tasks.worker").run_beat(settings)


@main.command("standalone")
@click.option(
    "--data-dir",
    default=".hango",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the embedded PostgreSQL and Redis data, their logs and standalone.json.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 256), help="runs at once")
@click.pass_context
def standalone_command(ctx: click.Context, data_dir: Path, host: str, port: int, concurrency: int) -> None:
    """Run the API, a worker and beat on an embedded PostgreSQL and Redis (needs the "standalone" extra).

    HANGO_DATABASE_URL and HANGO_REDIS_URL, when set, are used instead of the embedded services. The URLs in use
    are written to DATA_DIR/standalone.json, e.g. for "hango tenants create" with HANGO_DATABASE_URL set from it.
    DATA_DIR is made private (0700); every process logs into DATA_DIR/logs/, and the terminal shows only the
    banner, warnings and errors.
    """
    from hango.kernel.errors import HangoError
    from hango.processes import standalone

    options = standalone.Options(data_dir=data_dir, host=host, port=port, concurrency=concurrency)
    try:
        code = standalone.run(options, _settings(ctx), announce=click.echo)
    except HangoError as exc:
        raise click.ClickException(str(exc)) from exc
    ctx.exit(code)


@main.command("flower")
@click.option("--port", default=5555, show_default=True, type=int)
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve without a login; accepted only with a loopback --address (127.0.0.1, ::1, localhost).",
)
@click.pass_context
def flower_command(ctx: click.Context, port: int, address: str, insecure_no_auth: bool) -> None:
    """Flower, the Celery monitoring UI, on hango's broker.

    Flower asks for the HTTP basic-auth login in HANGO_FLOWER_BASIC_AUTH ("user:password") and refuses to start
    without one, unless --insecure-no-auth is given with a loopback --address.
    """
    from hango.kernel.errors import ConfigError

    settings = _settings(ctx)
    _require_services(settings)
    try:
        _edge("hango.tasks.worker").run_flower(settings, address, port, insecure_no_auth=insecure_no_auth)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


# The commands that talk to a server through hango.client live in modules of their own.
main.add_command(cli_agents.agents)
main.add_command(cli_runs.runs)
main.add_command(cli_reviewer.approvals)
main.add_command(cli_mcp.mcp)
main.add_command(cli_threads.threads)
