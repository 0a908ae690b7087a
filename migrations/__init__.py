"""Alembic migrations for hango's PostgreSQL schema (run them with ``hango db upgrade``)."""
