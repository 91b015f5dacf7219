"""The SQLite store's schema: its migrations, and how it tells its own file.

``MIGRATIONS[n]`` turns version ``n - 1`` into ``n``; ``PRAGMA user_version``
holds the version and ``PRAGMA application_id`` marks the file as caplet's.
:mod:`caplet._trust._pg_schema` keeps the PostgreSQL schema at the same
version numbers (a version names the same tables and columns on both).
Split from :mod:`caplet._trust._sqlite` so that the store, its schema and
its check (:mod:`caplet._trust._sqlite_check`) each stay one concern.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from caplet._atomic import write_step
from caplet._errors import StoreError
from caplet._trust._rows import REVIEW_MIGRATION

__all__ = [
    "APPLICATION_ID",
    "KV_ROW_BYTES",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "corrupt_message",
    "expected_objects",
    "migrate",
    "newer_message",
]

#: ``PRAGMA application_id`` marks the file as caplet's ("cplt" in ASCII),
#: so a database of another program is never mistaken for an empty one.
APPLICATION_ID = 0x63706C74

#: What one ``ctx.kv`` row counts toward its plugin's byte quota (as ``kv_put`` counts it).
KV_ROW_BYTES = "length(CAST(key AS BLOB)) + length(value)"
_ADD_NEW = (
    "INSERT INTO kv_usage (plugin, location, key_count, byte_count) VALUES "
    "(NEW.plugin, NEW.location, 1, length(CAST(NEW.key AS BLOB)) + length(NEW.value)) "
    "ON CONFLICT (plugin, location) DO UPDATE SET key_count = key_count + 1, "
    "byte_count = byte_count + excluded.byte_count"
)
_REMOVE_OLD = (
    "UPDATE kv_usage SET key_count = key_count - 1, "
    "byte_count = byte_count - (length(CAST(OLD.key AS BLOB)) + length(OLD.value)) "
    "WHERE plugin = OLD.plugin AND location = OLD.location"
)

#: Schema migrations; ``MIGRATIONS[n]`` turns version ``n - 1`` into version
#: ``n`` (entry 0 is the empty database). Adding version 2 is one entry.
#: Statements run one by one inside the caller's transaction: the sqlite3
#: module's ``executescript`` would first COMMIT it (sqlite3 docs).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (),
    (
        f"PRAGMA application_id = {APPLICATION_ID}",
        """CREATE TABLE approvals (
            name TEXT PRIMARY KEY NOT NULL,
            content_hash TEXT NOT NULL,
            capabilities TEXT NOT NULL,
            approved_at REAL NOT NULL,
            risk_level TEXT NOT NULL,
            verdict TEXT NOT NULL
        )""",
        """CREATE TABLE audits (
            content_hash TEXT PRIMARY KEY NOT NULL,
            plugin TEXT NOT NULL,
            created_at REAL NOT NULL,
            payload TEXT NOT NULL
        )""",
        "CREATE INDEX audits_by_plugin ON audits (plugin)",
        """CREATE TABLE quarantine (
            name TEXT PRIMARY KEY NOT NULL,
            reason TEXT NOT NULL,
            since REAL NOT NULL
        )""",
        """CREATE TABLE decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            plugin TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            allowed INTEGER NOT NULL CHECK (allowed IN (0, 1)),
            detail TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX decisions_by_plugin ON decisions (plugin, id)",
    ),
    # 2: audits are keyed by content hash *and* auditor model (issue 5), so a
    # static-only audit and each model's audit of one tree are cached side by
    # side. SQLite cannot change a primary key in place: copy, drop, rename
    # (https://www.sqlite.org/lang_altertable.html, "other kinds of table
    # schema changes"). Every version-1 audit was static-only, so its model
    # id is "" and its payload (without the new fields, which have
    # defaults) still decodes.
    (
        """CREATE TABLE audits_v2 (
            content_hash TEXT NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            plugin TEXT NOT NULL,
            created_at REAL NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (content_hash, model)
        )""",
        "INSERT INTO audits_v2 (content_hash, model, plugin, created_at, payload) "
        "SELECT content_hash, '', plugin, created_at, payload FROM audits",
        "DROP INDEX audits_by_plugin",
        "DROP TABLE audits",
        "ALTER TABLE audits_v2 RENAME TO audits",
        "CREATE INDEX audits_by_plugin ON audits (plugin)",
    ),
    # 3: each plugin's ctx.kv entries (issue 6). The plugin name is part of
    # the primary key and every statement filters on it, so one plugin's
    # keys are invisible to another. WITHOUT ROWID: the rows are looked up
    # by that key only (https://www.sqlite.org/withoutrowid.html).
    (
        """CREATE TABLE kv (
            plugin TEXT NOT NULL,
            key TEXT NOT NULL,
            value BLOB NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (plugin, key)
        ) WITHOUT ROWID""",
    ),
    # 4: an approval records the version and the requirements approved, so a
    # changed plugin can be compared with what was consented to (issue 14).
    # NULL in older rows: such an approval cannot vouch for any other content.
    (
        "ALTER TABLE approvals ADD COLUMN version TEXT",
        "ALTER TABLE approvals ADD COLUMN requires TEXT",
    ),
    # 5: an approval records the defaults behind its templated capabilities
    # (fs.read:${config.root} with root's default), so a later content that
    # keeps the capability string and moves only the default is compared
    # with what was approved (red-team finding 8). NULL in older rows: such
    # an approval vouches for no default of other content.
    ("ALTER TABLE approvals ADD COLUMN defaults TEXT",),
    # 6: an approval records the application events it subscribed to, so a
    # later content that adds a hook is compared with them (red-team round
    # 4). NULL in older rows: such an approval vouches for no subscription.
    ("ALTER TABLE approvals ADD COLUMN hooks TEXT",),
    # 7: an approval records the text the plugin sends to the agent, so a later
    # content that rewrites only that text is compared with it (textpin). NULL
    # in older rows: such an approval vouches for no text of other content.
    ("ALTER TABLE approvals ADD COLUMN agent_text TEXT",),
    # 8: an approval records where its plugin was (the folder, or the distribution
    # that installs it), so a plugin of the same name elsewhere (another project's
    # plugins directory) does not carry it over as a new version of the same plugin
    # would (attack13d). NULL in older rows: compared with nothing, as before.
    ("ALTER TABLE approvals ADD COLUMN location TEXT",),
    # 9: ctx.kv entries and quarantines belong to the plugin's identity, its name *and*
    # where it is (the location approvals record since 8), so another project's plugin of
    # the same name neither reads the first one's kv nor shares its quarantine (decide14).
    # Older rows go to the place the approval of that name records (the plugin that wrote
    # them, in the obvious case); where none is recorded they stay unlocated ('': see
    # _store.UNLOCATED for who may claim them). A quarantine also records the content it
    # stopped, which it stops wherever it runs (a fleet's nodes keep their plugins at
    # other paths; '' in older rows). A primary key cannot change in place: copy, drop,
    # rename, as in 2.
    (
        """CREATE TABLE kv_v9 (
            plugin TEXT NOT NULL,
            location TEXT NOT NULL DEFAULT '',
            key TEXT NOT NULL,
            value BLOB NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (plugin, location, key)
        ) WITHOUT ROWID""",
        "INSERT INTO kv_v9 (plugin, location, key, value, updated_at) "
        "SELECT plugin, coalesce((SELECT a.location FROM approvals a WHERE a.name = kv.plugin), "
        "''), key, value, updated_at FROM kv",
        "DROP TABLE kv",
        "ALTER TABLE kv_v9 RENAME TO kv",
        """CREATE TABLE quarantine_v9 (
            name TEXT NOT NULL,
            location TEXT NOT NULL DEFAULT '',
            reason TEXT NOT NULL,
            since REAL NOT NULL,
            content_hash TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (name, location)
        )""",
        "INSERT INTO quarantine_v9 (name, location, reason, since) "
        "SELECT name, coalesce((SELECT a.location FROM approvals a WHERE a.name = "
        "quarantine.name), ''), reason, since FROM quarantine",
        "DROP TABLE quarantine",
        "ALTER TABLE quarantine_v9 RENAME TO quarantine",
    ),
    # 10: what each plugin's ctx.kv holds (keys, and bytes as the quota counts them:
    # the key's UTF-8 plus the value), kept by triggers in every transaction that
    # writes kv, so a write checks its quota by reading one row instead of summing
    # all the plugin's rows (attack15: with its quota full, 9,000 ctx.kv.set calls
    # cost the host 9.2 CPU seconds against the worker's 0.3; PostgreSQL ran the
    # same aggregate on the database server). Triggers rather than the store's code,
    # so no path that writes kv (a put, a delete, a claim, a hand edit in sqlite3)
    # can leave the count behind. kv_put writes with an upsert: INSERT OR REPLACE
    # deletes the old row without firing the delete trigger unless
    # recursive_triggers is on (https://www.sqlite.org/lang_conflict.html).
    (
        """CREATE TABLE kv_usage (
            plugin TEXT NOT NULL,
            location TEXT NOT NULL,
            key_count INTEGER NOT NULL,
            byte_count INTEGER NOT NULL,
            PRIMARY KEY (plugin, location)
        ) WITHOUT ROWID""",
        "INSERT INTO kv_usage (plugin, location, key_count, byte_count) "  # noqa: S608
        f"SELECT plugin, location, count(*), sum({KV_ROW_BYTES}) FROM kv "
        "GROUP BY plugin, location",
        f"""CREATE TRIGGER kv_usage_insert AFTER INSERT ON kv BEGIN
            {_ADD_NEW};
        END""",
        f"""CREATE TRIGGER kv_usage_delete AFTER DELETE ON kv BEGIN
            {_REMOVE_OLD};
        END""",
        f"""CREATE TRIGGER kv_usage_update AFTER UPDATE ON kv BEGIN
            {_REMOVE_OLD};
            {_ADD_NEW};
        END""",
    ),
    # 11: an approval records the files each proc.exec program brought on this host (the
    # program, its #! interpreter, its ELF loader), so a script whose interpreter changed
    # since needs fresh consent (red team round 19). NULL in older rows: compared with
    # nothing, as before.
    ("ALTER TABLE approvals ADD COLUMN programs TEXT",),
    # 12: an approval records what reviewed the approved content (a model, or the static
    # scanner alone), so a new version audited static-only does not carry over an
    # approval a model's audit was given on (steer33). Older rows are told from the
    # audits the store cached of their content (an audit is never deleted, and every
    # model's audit is cached): the one model that audited it, or static-only when only
    # a static audit of it is cached. Several models, or no audit: NULL, which vouches
    # for no other content's review (consent once, or approve again).
    (
        "ALTER TABLE approvals ADD COLUMN review TEXT",
        REVIEW_MIGRATION.format(audits="audits", approvals="approvals"),
    ),
)

#: The version this caplet writes and understands.
SCHEMA_VERSION = len(MIGRATIONS) - 1


def corrupt_message(path: Path, detail: str) -> str:
    return (
        f"state database {path} is corrupt or not a caplet database ({detail}); "
        f"move it aside (e.g. mv {path} {path}.bak) and run again; "
        "caplet never overwrites it"
    )


def migrate(
    conn: sqlite3.Connection,
    path: Path,
    migrations: Sequence[Sequence[str]] = MIGRATIONS,
) -> int:
    """Bring the database on *conn* to ``len(migrations) - 1``; return that version.

    Runs in one ``BEGIN IMMEDIATE`` transaction and re-reads the version
    inside it, so when several processes open a fresh directory at once the
    first migrates and the others find the work done. A version newer than
    *migrations* knows raises :class:`StoreError` and writes nothing.
    """
    target = len(migrations) - 1
    conn.execute("BEGIN IMMEDIATE")
    try:
        write_step(f"sqlite {path}: migration begun")
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if current > target:
            raise StoreError(newer_message(path, current, target))
        for version in range(current + 1, target + 1):
            for statement in migrations[version]:
                conn.execute(statement)
        if current != target:
            # PRAGMA does not take parameters; target is an int we computed.
            conn.execute(f"PRAGMA user_version = {target}")
        write_step(f"sqlite {path}: migration run, not committed")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    write_step(f"sqlite {path}: migration committed")
    return target


def expected_objects(migrations: Sequence[Sequence[str]] = MIGRATIONS) -> frozenset[str]:
    """The tables, indexes and triggers a database migrated by *migrations* holds.

    Derived by running the migrations on an empty in-memory database, so
    the check can never drift from the schema it checks.
    """
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn, Path(":memory:"), migrations)
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') "
            "AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    finally:
        conn.close()
    return frozenset(str(row[0]) for row in rows)


def newer_message(path: Path, found: int, known: int) -> str:
    return (
        f"state database {path} was written by a newer caplet (schema version {found}, "
        f"this caplet knows {known}); upgrade caplet or use another --state-dir"
    )
