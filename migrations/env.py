"""Alembic environment: the URL comes from the Config built by ``hango.processes.migrate``, never from a file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from hango.kernel.models import Base
from hango.platform.db import engine_url

config = context.config


def run_migrations_online() -> None:
    """Run the migrations on a live connection; each revision runs in its own transaction."""
    engine = create_engine(engine_url(config.get_main_option("sqlalchemy.url", "")), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            compare_type=True,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
