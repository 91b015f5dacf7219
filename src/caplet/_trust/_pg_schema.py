"""The PostgreSQL store's schema: versioned migrations, identity, and its check.

**Version numbers are SQLite's.** A schema version names one set of tables
and columns on both backends (:mod:`caplet._trust._sqlite_schema`): version
4 is approvals with ``version`` and ``requires``, audits keyed by hash and
model, quarantine, the decision log and ``ctx.kv``, whichever database
holds them, version 5 adds the approvals' ``defaults``, version 6 their
``hooks``, version 7 their ``agent_text``, version 8 their ``location`` and
version 9 the ``location`` of ``ctx.kv`` entries and quarantines, version 10
``kv_usage`` and the trigger that keeps it, version 11 the approvals'
``programs``. So "schema 4"
means one thing in a message, in ``doctor`` and in the docs, and a change
to the records is one new version, written for both in the same commit
(tests/_trust/test_pg_schema.py fails when the two drift apart).
PostgreSQL has no history to replay: its first schema is version 4
(:data:`BASELINE`), created in one step; versions 1 to 3 never existed
there.

Everything lives in the PostgreSQL schema ``caplet`` (one caplet
deployment per database), with ``caplet.meta`` holding the version and the
marker ``application = caplet``: a ``caplet`` schema without that marker
belongs to someone else and is refused before anything is written, as is
a version newer than this caplet knows. A migration is one transaction
(PostgreSQL's DDL is transactional) under an advisory lock, so nodes
starting together against a fresh database cannot both create it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from caplet._atomic import write_step
from caplet._errors import StoreError
from caplet._numbers import LATEST_INSTANT
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._rows import (
    APPROVAL_COLUMNS,
    DECISION_PROBLEM,
    LEGACY_PLACES,
    REVIEW_MIGRATION,
    BadRowError,
    RowSource,
    approval_from_row,
    audit_from_row,
    quarantine_from_row,
    unclaimed_problems,
    usage_drift_query,
    usage_problems,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "BASELINE",
    "EXPECTED_COLUMNS",
    "KV_ROW_BYTES",
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "check_records",
    "check_structure",
    "migrate",
    "schema_version",
]

#: The PostgreSQL schema (namespace) caplet's tables live in.
SCHEMA = "caplet"
#: ``pg_advisory_xact_lock`` key of migrations ("cplt", as SQLite's application id).
MIGRATION_LOCK = 0x63706C74
#: The first schema version PostgreSQL has (see the module docstring).
BASELINE = 4

#: What one ``caplet.kv`` row counts toward its plugin's byte quota (as ``kv_put`` counts it).
KV_ROW_BYTES = "octet_length(key) + octet_length(value)"
#: The trigger (and its function) that keeps ``caplet.kv_usage`` (schema 10).
KV_USAGE_TRIGGER = "kv_usage_track"

#: ``MIGRATIONS[n]`` creates version ``n`` from ``n - 1``; ``MIGRATIONS[BASELINE]``
#: creates everything from an empty database.
MIGRATIONS: Mapping[int, tuple[str, ...]] = {
    4: (
        f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
        "CREATE TABLE caplet.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE caplet.approvals (
            name TEXT PRIMARY KEY,
            content_hash TEXT NOT NULL,
            capabilities TEXT NOT NULL,
            approved_at DOUBLE PRECISION NOT NULL,
            risk_level TEXT NOT NULL,
            verdict TEXT NOT NULL,
            version TEXT,
            requires TEXT
        )""",
        """CREATE TABLE caplet.audits (
            content_hash TEXT NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            plugin TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (content_hash, model)
        )""",
        "CREATE INDEX audits_by_plugin ON caplet.audits (plugin)",
        """CREATE TABLE caplet.quarantine (
            name TEXT PRIMARY KEY,
            reason TEXT NOT NULL,
            since DOUBLE PRECISION NOT NULL
        )""",
        """CREATE TABLE caplet.decisions (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at DOUBLE PRECISION NOT NULL,
            plugin TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            allowed BOOLEAN NOT NULL,
            detail TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX decisions_by_plugin ON caplet.decisions (plugin, id)",
        """CREATE TABLE caplet.kv (
            plugin TEXT NOT NULL,
            key TEXT NOT NULL,
            value BYTEA NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (plugin, key)
        )""",
        "INSERT INTO caplet.meta (key, value) VALUES ('application', 'caplet')",
    ),
    # 5: the defaults behind an approval's templated capabilities (red-team
    # finding 8; SQLite's version 5). NULL in older rows: fresh consent.
    5: ("ALTER TABLE caplet.approvals ADD COLUMN defaults TEXT",),
    # 6: the application events an approval subscribed to (red-team round 4;
    # SQLite's version 6). NULL in older rows: no subscription vouched for.
    6: ("ALTER TABLE caplet.approvals ADD COLUMN hooks TEXT",),
    # 7: the text an approval's plugin sends to the agent (textpin; SQLite's
    # version 7). NULL in older rows: no text vouched for.
    7: ("ALTER TABLE caplet.approvals ADD COLUMN agent_text TEXT",),
    # 8: where the approved plugin was (attack13d; SQLite's version 8). NULL in
    # older rows: compared with nothing, as before.
    8: ("ALTER TABLE caplet.approvals ADD COLUMN location TEXT",),
    # 9: ctx.kv and quarantine belong to the plugin's identity, its name and where it is
    # (decide14; SQLite's version 9). Older rows go to the place the approval of that name
    # records; where none is recorded they stay unlocated ('', _store.UNLOCATED). A
    # quarantine also records the content it stopped ('' in older rows).
    9: (
        "ALTER TABLE caplet.kv ADD COLUMN location TEXT NOT NULL DEFAULT ''",
        "UPDATE caplet.kv SET location = a.location FROM caplet.approvals a "
        "WHERE a.name = caplet.kv.plugin AND a.location IS NOT NULL",
        "ALTER TABLE caplet.kv DROP CONSTRAINT kv_pkey",
        "ALTER TABLE caplet.kv ADD PRIMARY KEY (plugin, location, key)",
        "ALTER TABLE caplet.quarantine ADD COLUMN location TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE caplet.quarantine ADD COLUMN content_hash TEXT NOT NULL DEFAULT ''",
        "UPDATE caplet.quarantine SET location = a.location FROM caplet.approvals a "
        "WHERE a.name = caplet.quarantine.name AND a.location IS NOT NULL",
        "ALTER TABLE caplet.quarantine DROP CONSTRAINT quarantine_pkey",
        "ALTER TABLE caplet.quarantine ADD PRIMARY KEY (name, location)",
    ),
    # 10: what each plugin's ctx.kv holds, kept by a trigger in the transaction of every
    # write, so kv_put checks its quota by reading one row instead of aggregating all
    # the plugin's rows on the database server (attack15; SQLite's version 10).
    10: (
        """CREATE TABLE caplet.kv_usage (
            plugin TEXT NOT NULL,
            location TEXT NOT NULL,
            key_count BIGINT NOT NULL,
            byte_count BIGINT NOT NULL,
            PRIMARY KEY (plugin, location)
        )""",
        "INSERT INTO caplet.kv_usage (plugin, location, key_count, byte_count) "  # noqa: S608
        f"SELECT plugin, location, count(*), sum({KV_ROW_BYTES}) FROM caplet.kv "
        "GROUP BY plugin, location",
        # Named as KV_USAGE_TRIGGER (a plain string: nothing is interpolated into the body).
        """CREATE FUNCTION caplet.kv_usage_track() RETURNS trigger
        LANGUAGE plpgsql AS $body$
        BEGIN
            IF TG_OP IN ('DELETE', 'UPDATE') THEN
                UPDATE caplet.kv_usage SET key_count = key_count - 1,
                    byte_count = byte_count - (octet_length(OLD.key) + octet_length(OLD.value))
                WHERE plugin = OLD.plugin AND location = OLD.location;
            END IF;
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                INSERT INTO caplet.kv_usage AS u (plugin, location, key_count, byte_count)
                VALUES (NEW.plugin, NEW.location, 1,
                        octet_length(NEW.key) + octet_length(NEW.value))
                ON CONFLICT (plugin, location) DO UPDATE SET key_count = u.key_count + 1,
                    byte_count = u.byte_count + EXCLUDED.byte_count;
            END IF;
            RETURN NULL;
        END
        $body$""",
        f"CREATE TRIGGER {KV_USAGE_TRIGGER} AFTER INSERT OR UPDATE OR DELETE ON caplet.kv "
        f"FOR EACH ROW EXECUTE FUNCTION caplet.{KV_USAGE_TRIGGER}()",
    ),
    # 11: the files each proc.exec program of an approval brought on the approving host
    # (red team round 19; SQLite's version 11). NULL in older rows: compared with nothing.
    11: ("ALTER TABLE caplet.approvals ADD COLUMN programs TEXT",),
    # 12: what reviewed an approval's content, a model or the static scanner alone
    # (steer33; SQLite's version 12, told from the cached audits the same way).
    12: (
        "ALTER TABLE caplet.approvals ADD COLUMN review TEXT",
        REVIEW_MIGRATION.format(audits="caplet.audits", approvals="caplet.approvals"),
    ),
}

#: The version this caplet writes and understands.
SCHEMA_VERSION = max(MIGRATIONS)

#: The columns of each table at :data:`SCHEMA_VERSION`, as ``doctor`` expects them.
#: The same names as SQLite's (tests compare them), plus ``meta``.
EXPECTED_COLUMNS: Mapping[str, frozenset[str]] = {
    "meta": frozenset({"key", "value"}),
    "approvals": frozenset(
        {
            "name",
            "content_hash",
            "capabilities",
            "approved_at",
            "risk_level",
            "verdict",
            "version",
            "requires",
            "defaults",
            "hooks",
            "agent_text",
            "location",
            "programs",
            "review",
        }
    ),
    "audits": frozenset({"content_hash", "model", "plugin", "created_at", "payload"}),
    "quarantine": frozenset({"name", "reason", "since", "location", "content_hash"}),
    "decisions": frozenset({"id", "at", "plugin", "action", "target", "allowed", "detail"}),
    "kv": frozenset({"plugin", "location", "key", "value", "updated_at"}),
    "kv_usage": frozenset({"plugin", "location", "key_count", "byte_count"}),
}

_MAX_REPORTED = 20


def _foreign(shown: str, detail: str) -> str:
    return (
        f"PostgreSQL store {shown} holds a schema {SCHEMA!r} that is not caplet's ({detail}); "
        "caplet never changes it: point CAPLET_STORE at a database of caplet's own "
        "(createdb caplet) or drop that schema if it is a leftover"
    )


def _newer(shown: str, found: int) -> str:
    return (
        f"PostgreSQL store {shown} was written by a newer caplet (schema version {found}, this "
        f"caplet knows {SCHEMA_VERSION}); upgrade caplet on this node (every node of a fleet "
        "must run a caplet that knows the store's schema)"
    )


def schema_version(conn: psycopg.Connection[tuple[object, ...]], shown: str) -> int:
    """The version of the store on *conn*: 0 when empty; refuses what is not caplet's."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL, "
        "(SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        " ON n.oid = c.relnamespace WHERE n.nspname = %s)",
        ("caplet.meta", SCHEMA),
    ).fetchone()
    assert row is not None
    has_meta, objects = bool(row[0]), int(str(row[1]))
    if not has_meta:
        if objects:
            raise StoreError(_foreign(shown, f"{objects} objects and no caplet.meta"))
        return 0
    meta = {str(k): v for k, v in conn.execute("SELECT key, value FROM caplet.meta").fetchall()}
    if meta.get("application") != "caplet":
        raise StoreError(_foreign(shown, f"application {meta.get('application')!r}"))
    raw = meta.get("schema_version")
    if not isinstance(raw, str) or not raw.isdigit():
        raise StoreError(_foreign(shown, f"schema_version {raw!r}"))
    version = int(raw)
    if version > SCHEMA_VERSION:
        raise StoreError(_newer(shown, version))
    return version


def migrate(conn: psycopg.Connection[tuple[object, ...]], shown: str) -> int:
    """Bring the store to :data:`SCHEMA_VERSION` in one transaction; return it.

    The version is read again under the migration lock, so of several nodes
    opening a fresh database at once the first migrates and the others find
    the work done.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        write_step(f"postgres {shown}: migration begun")
        current = schema_version(conn, shown)
        if current < SCHEMA_VERSION:
            first = BASELINE if current == 0 else current + 1
            for version in range(first, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO caplet.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(SCHEMA_VERSION),),
            )
        write_step(f"postgres {shown}: migration run, not committed")
    write_step(f"postgres {shown}: migration committed")
    return SCHEMA_VERSION


def check_structure(conn: psycopg.Connection[tuple[object, ...]], shown: str) -> list[StateProblem]:
    """The version and every expected table and column; records wait until these hold."""

    def problem(text: str) -> StateProblem:
        return StateProblem(kind=ProblemKind.SCHEMA, path=shown, message=text)

    try:
        version = schema_version(conn, shown)
    except StoreError as exc:
        return [problem(str(exc))]
    if version != SCHEMA_VERSION:
        return [
            problem(
                f"PostgreSQL store {shown} has schema version {version}, expected "
                f"{SCHEMA_VERSION}; it was changed outside caplet: restore a backup (pg_restore) "
                "or run any caplet command to create the schema"
            )
        ]
    found: dict[str, set[str]] = {}
    for table, column in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s",
        (SCHEMA,),
    ).fetchall():
        found.setdefault(str(table), set()).add(str(column))
    missing = sorted(
        f"{table}.{column}"
        for table, columns in EXPECTED_COLUMNS.items()
        for column in columns - found.get(table, set())
    )
    trigger = conn.execute(
        "SELECT count(*) FROM pg_catalog.pg_trigger WHERE tgname = %s "
        "AND tgrelid = to_regclass('caplet.kv') AND tgenabled <> 'D'",
        (KV_USAGE_TRIGGER,),
    ).fetchone()
    if trigger is None or int(str(trigger[0])) != 1:
        missing.append(f"trigger {KV_USAGE_TRIGGER} on kv")
    if missing:
        return [
            problem(
                f"PostgreSQL store {shown} lacks {', '.join(missing)} of schema version "
                f"{SCHEMA_VERSION}; it was changed outside caplet: restore a backup (pg_restore)"
            )
        ]
    return []


def check_records(
    conn: psycopg.Connection[tuple[object, ...]], rows: RowSource
) -> list[StateProblem]:
    """Every approval, audit and quarantine record decoded as the store reads it.

    The decision log's and ``ctx.kv``'s column types are the server's to enforce
    (``BOOLEAN``, ``BYTEA``), where SQLite stores whatever a hand edit put in a column;
    a decision's time is checked here (``DOUBLE PRECISION`` holds NaN and infinities,
    and PostgreSQL orders NaN above every number, so ``NOT (at >= 0 AND at <= x)``
    finds it).
    """
    problems: list[StateProblem] = []

    def decoded(decode: Callable[..., object], *args: object) -> None:
        if len(problems) >= _MAX_REPORTED:
            return
        try:
            decode(rows, *args)
        except BadRowError as exc:
            problems.append(exc.problem)

    for row in conn.execute(
        f"SELECT {APPROVAL_COLUMNS} FROM caplet.approvals "  # noqa: S608
        'ORDER BY name COLLATE "C"'
    ).fetchall():
        decoded(approval_from_row, row)
    for content_hash, model, plugin, payload in conn.execute(
        "SELECT content_hash, model, plugin, payload FROM caplet.audits "
        'ORDER BY content_hash COLLATE "C", model COLLATE "C"'
    ).fetchall():
        decoded(audit_from_row, content_hash, model, plugin, payload)
    for row in conn.execute(
        "SELECT name, reason, since, location, content_hash FROM caplet.quarantine "
        'ORDER BY name COLLATE "C", location COLLATE "C"'
    ).fetchall():
        decoded(quarantine_from_row, row)
    for (row_id,) in conn.execute(
        "SELECT id FROM caplet.decisions WHERE NOT (at >= 0 AND at <= %s) ORDER BY id LIMIT %s",
        (LATEST_INSTANT, _MAX_REPORTED),
    ).fetchall():
        problems.append(
            rows.bad_row("decisions", row_id, DECISION_PROBLEM, rows.edited_log).problem
        )
    kv = conn.execute(
        "SELECT plugin, location, count(*) FROM caplet.kv WHERE location = '' OR "
        "(location LIKE %s AND location NOT LIKE %s) "
        'GROUP BY plugin, location ORDER BY plugin COLLATE "C", location COLLATE "C" LIMIT %s',
        (*LEGACY_PLACES, _MAX_REPORTED),
    ).fetchall()
    quarantined = conn.execute(
        "SELECT name FROM caplet.quarantine WHERE location = '' "
        'ORDER BY name COLLATE "C" LIMIT %s',
        (_MAX_REPORTED,),
    ).fetchall()
    problems += unclaimed_problems(rows, kv, [name for (name,) in quarantined])
    drifted = conn.execute(
        usage_drift_query("caplet.", KV_ROW_BYTES, "%s"), (_MAX_REPORTED,)
    ).fetchall()
    problems += usage_problems(rows, "caplet.", drifted)
    return problems
