"""The PostgreSQL schema keeps SQLite's version numbers and columns (one schema, two databases)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from caplet._trust import _pg_schema, _sqlite_schema
from caplet._trust._postgres import PostgresStore


def sqlite_columns() -> dict[str, set[str]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _sqlite_schema.migrate(conn, Path(":memory:"))
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {t: {str(r[1]) for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    finally:
        conn.close()


def test_one_version_number_for_both_backends() -> None:
    """A new SQLite migration without its PostgreSQL twin (or the reverse) fails here."""
    assert _pg_schema.SCHEMA_VERSION == _sqlite_schema.SCHEMA_VERSION
    assert _pg_schema.BASELINE <= _pg_schema.SCHEMA_VERSION
    assert sorted(_pg_schema.MIGRATIONS) == list(
        range(_pg_schema.BASELINE, _pg_schema.SCHEMA_VERSION + 1)
    )


def test_expected_columns_are_sqlites_plus_meta() -> None:
    expected = {t: set(c) for t, c in _pg_schema.EXPECTED_COLUMNS.items() if t != "meta"}
    assert expected == sqlite_columns()


def test_migrations_create_exactly_the_expected_columns(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'caplet'"
        ).fetchall()
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    assert found == {t: set(c) for t, c in _pg_schema.EXPECTED_COLUMNS.items()}
