"""Schema migrations: thin wrappers over Alembic with the script folder found from the installed package."""

from __future__ import annotations

import os

from alembic import command
from alembic.config import Config

from hango import migrations


def alembic_config(database_url: str) -> Config:
    """An Alembic configuration pointing at hango's migrations and the given database."""
    config = Config()
    config.set_main_option("script_location", os.path.dirname(migrations.__file__))
    # Alembic's ini interpolation treats '%' specially; URLs may contain percent-encoded characters.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate the schema forward to ``revision``."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Migrate the schema back to ``revision`` (``base`` removes every table)."""
    command.downgrade(alembic_config(database_url), revision)


def current(database_url: str) -> None:
    """Print the revision the database is at."""
    command.current(alembic_config(database_url))
