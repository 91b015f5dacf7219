"""What ``caplet doctor --check-state`` checks in the SQLite state database.

SQLite's own integrity and foreign-key checks, the schema version and
objects, then every record decoded exactly as the store reads it
(:mod:`caplet._trust._rows`) and the column types of the decision log and
``ctx.kv``. Split from :mod:`caplet._trust._sqlite`; the store runs it in
one read transaction (:meth:`~caplet._trust._sqlite.SqliteStore.check`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from caplet._numbers import LATEST_INSTANT
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._rows import (
    APPROVAL_COLUMNS,
    DECISION_PROBLEM,
    LEGACY_PLACES,
    BadRowError,
    RowSource,
    approval_from_row,
    audit_from_row,
    quarantine_from_row,
    unclaimed_problems,
    usage_drift_query,
    usage_problems,
)
from caplet._trust._sqlite_schema import (
    KV_ROW_BYTES,
    SCHEMA_VERSION,
    corrupt_message,
    expected_objects,
)

__all__ = ["MAX_REPORTED", "check_database"]

#: At most this many problems are reported per check and table: enough to
#: see the pattern, without burying the summary under a damaged log.
MAX_REPORTED = 20


def check_database(
    conn: sqlite3.Connection, path: Path, rows: RowSource
) -> tuple[StateProblem, ...]:
    """Every problem of the database on *conn* (inside the caller's read transaction)."""
    problems = _check_structure(conn, path)
    if not problems:
        problems = _check_records(conn, rows)
    return tuple(problems)


def _problem(path: Path, kind: ProblemKind, text: str) -> StateProblem:
    return StateProblem(kind=kind, path=str(path), message=text)


def _check_structure(conn: sqlite3.Connection, path: Path) -> list[StateProblem]:
    """SQLite's own checks and the schema; records are not worth decoding if these fail."""
    problems: list[StateProblem] = []
    integrity = [
        str(row[0]) for row in conn.execute(f"PRAGMA integrity_check({MAX_REPORTED})").fetchall()
    ]
    if integrity != ["ok"]:
        detail = "integrity check: " + "; ".join(integrity[:5])
        problems.append(_problem(path, ProblemKind.CORRUPT, corrupt_message(path, detail)))
        return problems
    violations = conn.execute("PRAGMA foreign_key_check").fetchall()
    if violations:
        shown = "; ".join(f"table {row[0]} row {row[1]}" for row in violations[:5])
        problems.append(
            _problem(
                path,
                ProblemKind.CORRUPT,
                corrupt_message(path, f"foreign key check: {shown}"),
            )
        )
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version != SCHEMA_VERSION:
        # Opening migrated an older one and refused a newer one, so this
        # is a file changed behind the open connection's back.
        problems.append(
            _problem(
                path,
                ProblemKind.SCHEMA,
                f"state database {path} has schema version {version}, expected "
                f"{SCHEMA_VERSION}; it was changed outside caplet: restore a backup or "
                f"move it aside (mv {path} {path}.bak) and approve again",
            )
        )
    found = {
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') "
            "AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    }
    missing = sorted(expected_objects() - found)
    if missing:
        problems.append(
            _problem(
                path,
                ProblemKind.SCHEMA,
                f"state database {path} lacks {', '.join(missing)} of schema version "
                f"{SCHEMA_VERSION}; it was changed outside caplet: restore a backup or move "
                f"it aside (mv {path} {path}.bak) and approve again",
            )
        )
    return problems


def _check_records(conn: sqlite3.Connection, rows: RowSource) -> list[StateProblem]:
    problems: list[StateProblem] = []

    def decoded(decode: Callable[..., object], *args: object) -> None:
        if len(problems) >= MAX_REPORTED:
            return
        try:
            decode(rows, *args)
        except BadRowError as exc:
            problems.append(exc.problem)

    for row in conn.execute(
        f"SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY name"  # noqa: S608
    ).fetchall():
        decoded(approval_from_row, row)
    for content_hash, model, plugin, payload in conn.execute(
        "SELECT content_hash, model, plugin, payload FROM audits ORDER BY content_hash, model"
    ).fetchall():
        if not isinstance(content_hash, str) or not isinstance(model, str):
            problems.append(
                rows.bad_row(
                    "audits",
                    content_hash,
                    "content_hash or model is not text",
                    f"delete that row with {rows.editor}, then re-run the audit",
                ).problem
            )
            continue
        decoded(audit_from_row, content_hash, model, plugin, payload)
    for row in conn.execute(
        "SELECT name, reason, since, location, content_hash FROM quarantine ORDER BY name, location"
    ).fetchall():
        decoded(quarantine_from_row, row)
    for (row_id,) in conn.execute(
        "SELECT id FROM decisions WHERE typeof(at) NOT IN ('real', 'integer') "
        "OR NOT (at >= 0 AND at <= ?) "
        "OR typeof(plugin) != 'text' OR typeof(action) != 'text' "
        "OR typeof(target) != 'text' OR typeof(detail) != 'text' "
        "OR allowed NOT IN (0, 1) ORDER BY id LIMIT ?",
        (LATEST_INSTANT, MAX_REPORTED),
    ).fetchall():
        problems.append(
            rows.bad_row("decisions", row_id, DECISION_PROBLEM, rows.edited_log).problem
        )
    for plugin, key in conn.execute(
        "SELECT plugin, key FROM kv WHERE typeof(value) != 'blob' "
        "OR typeof(plugin) != 'text' OR typeof(key) != 'text' OR typeof(location) != 'text' "
        "OR typeof(updated_at) NOT IN ('real', 'integer') LIMIT ?",
        (MAX_REPORTED,),
    ).fetchall():
        problems.append(
            rows.bad_row(
                "kv",
                f"{plugin}/{key}",
                "a column holds a value of the wrong type",
                rows.edited_table,
            ).problem
        )
    kv = conn.execute(
        "SELECT plugin, location, count(*) FROM kv WHERE location = '' OR "
        "(location LIKE ? AND location NOT LIKE ?) "
        "GROUP BY plugin, location ORDER BY plugin, location LIMIT ?",
        (*LEGACY_PLACES, MAX_REPORTED),
    ).fetchall()
    quarantined = conn.execute(
        "SELECT name FROM quarantine WHERE location = '' ORDER BY name LIMIT ?", (MAX_REPORTED,)
    ).fetchall()
    problems += unclaimed_problems(rows, kv, [name for (name,) in quarantined])
    drifted = conn.execute(usage_drift_query("", KV_ROW_BYTES, "?"), (MAX_REPORTED,)).fetchall()
    problems += usage_problems(rows, "", drifted)
    return problems
