"""The SQLite implementation of :class:`~caplet._trust._store.TrustStore`.

One database file, ``<state dir>/caplet.db``, private to the user (``0o600``
in a ``0o700`` directory). Several caplet processes may use it at once
(design.md section 8): the journal is WAL so readers never block the writer,
every write is one ``BEGIN IMMEDIATE`` transaction so writers queue on the
busy timeout up front instead of failing with "database is locked" half-way
through (https://www.sqlite.org/lang_transaction.html), and the schema is
created or migrated inside such a transaction, so processes racing on a
fresh directory cannot both create it.

``PRAGMA quick_check`` is *not* run on open: it reads every page, so its
cost grows with the decision log on every CLI invocation, while SQLite
reports a corrupt page with ``SQLITE_CORRUPT`` whenever one is touched, and
that is translated into the same "corrupt" error. :meth:`SqliteStore.check`
runs the full check on demand (``caplet doctor --check-state``): SQLite's
own integrity and foreign-key checks, the schema, and every record decoded
the way caplet reads it.

Opening the file, SQLite's errors in caplet's words and the locked blocks
every query runs in are :mod:`caplet._trust._sqlite_file`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from caplet._audit._model import AuditResult
from caplet._errors import StoreError
from caplet._trust._codec import audit_to_json
from caplet._trust._paths import ensure_private_dir
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._rows import (
    APPROVAL_COLUMNS,
    PRUNE_ORDER,
    RowSource,
    approval_from_row,
    approval_params,
    audit_from_row,
    decision_filter,
    decision_from_row,
    kv_value,
    quarantine_from_row,
    span_from_row,
)
from caplet._trust._sqlite_check import check_database
from caplet._trust._sqlite_file import SqliteFile, _CorruptError
from caplet._trust._sqlite_schema import (
    APPLICATION_ID,
    KV_ROW_BYTES,
    MIGRATIONS,
    SCHEMA_VERSION,
    migrate,
)
from caplet._trust._store import UNLOCATED, ApprovalRecord, Decision, KvWrite, QuarantineRecord

__all__ = [
    "APPLICATION_ID",
    "DB_FILENAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SqliteStore",
    "migrate",
]

DB_FILENAME = "caplet.db"

#: Seconds a process waits for another one's write transaction to finish.
BUSY_TIMEOUT_S = 10.0


#: The statements reading approvals: the columns in the order ``approval_from_row`` reads them.
_SELECT_APPROVAL = f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE name = ?"  # noqa: S608
_SELECT_APPROVALS = f"SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY name"  # noqa: S608

#: A plugin's kv usage (keys, bytes; from ``kv_usage``, schema 10) and what the entry a
#: write replaces counts (NULL when there is none): two primary-key lookups, whatever the
#: plugin holds.
_KV_USAGE = (
    "SELECT coalesce((SELECT key_count FROM kv_usage WHERE plugin = ?1 AND location = ?2), 0), "  # noqa: S608
    "coalesce((SELECT byte_count FROM kv_usage WHERE plugin = ?1 AND location = ?2), 0), "
    f"(SELECT {KV_ROW_BYTES} FROM kv WHERE plugin = ?1 AND location = ?2 AND key = ?3)"
)
#: The quarantine columns in the order ``quarantine_from_row`` reads them.
_QUARANTINE_COLUMNS = "name, reason, since, location, content_hash"
#: The quarantines that stop a plugin (parameters: its place, UNLOCATED, its content).
_QUARANTINE_MATCH = "(location IN (?, ?) OR (content_hash != '' AND content_hash = ?))"


class SqliteStore(SqliteFile):
    """Approvals, cached audits, quarantine, the decision log and ``ctx.kv`` in SQLite.

    Implements :class:`~caplet._trust._store.TrustStore`. Open one per
    process (or use :meth:`open`); it is also a context manager.
    """

    def __init__(self, state_dir: Path, *, busy_timeout: float = BUSY_TIMEOUT_S) -> None:
        self.busy_timeout = busy_timeout
        self.state_dir = ensure_private_dir(state_dir)
        self.path = state_dir / DB_FILENAME
        self._rows = RowSource(
            what=f"state database {self.path}", path=str(self.path), editor="the sqlite3 shell"
        )
        #: Held for every use of the connection (see the module docstring).
        #: Re-entrant: a nested use by one thread is an SQLite error, not a hang.
        self._lock = threading.RLock()
        self._conn = self._connect()

    @classmethod
    def open(cls, state_dir: Path, *, busy_timeout: float = BUSY_TIMEOUT_S) -> Self:
        """Same as ``SqliteStore(state_dir)``."""
        return cls(state_dir, busy_timeout=busy_timeout)

    # -- approvals ------------------------------------------------------------------

    def get_approval(self, name: str) -> ApprovalRecord | None:
        """The approval of plugin *name*, or ``None``."""
        with self._reading(f"reading the approval of {name!r}") as conn:
            row = conn.execute(_SELECT_APPROVAL, (name,)).fetchone()
        return None if row is None else approval_from_row(self._rows, row)

    def put_approval(self, record: ApprovalRecord) -> None:
        """Insert or replace the approval of ``record.name``."""
        with self._writing(f"writing the approval of {record.name!r}") as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO approvals ({APPROVAL_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                approval_params(record),
            )

    def delete_approval(self, name: str) -> bool:
        """Remove the approval of *name*; ``False`` when there was none."""
        with self._writing(f"deleting the approval of {name!r}") as conn:
            cursor = conn.execute("DELETE FROM approvals WHERE name = ?", (name,))
        return cursor.rowcount > 0

    def list_approvals(self) -> Sequence[ApprovalRecord]:
        """Every approval, ordered by plugin name."""
        with self._reading("listing approvals") as conn:
            rows = conn.execute(_SELECT_APPROVALS).fetchall()
        return [approval_from_row(self._rows, row) for row in rows]

    # -- audits ---------------------------------------------------------------------

    def get_audit(self, content_hash: str, model_id: str = "") -> AuditResult | None:
        """The cached audit of the tree with *content_hash* by *model_id* (``""``: static-only)."""
        key = content_hash if not model_id else f"{content_hash} by {model_id}"
        with self._reading(f"reading the audit of {key}") as conn:
            row = conn.execute(
                "SELECT plugin, payload FROM audits WHERE content_hash = ? AND model = ?",
                (content_hash, model_id),
            ).fetchone()
        if row is None:
            return None
        plugin, payload = row
        return audit_from_row(self._rows, content_hash, model_id, plugin, payload)

    def put_audit(self, audit: AuditResult) -> None:
        """Store *audit*, replacing any audit of the same content hash by the same model."""
        payload = audit_to_json(audit)
        with self._writing(f"writing the audit of {audit.plugin!r}") as conn:
            conn.execute(
                "INSERT OR REPLACE INTO audits (content_hash, model, plugin, created_at, payload) "
                "VALUES (?, ?, ?, ?, ?)",
                (audit.content_hash, audit.model_id, audit.plugin, audit.created_at, payload),
            )

    # -- quarantine -----------------------------------------------------------------

    def get_quarantine(
        self, name: str, location: str = UNLOCATED, content_hash: str = ""
    ) -> QuarantineRecord | None:
        """Why and since when the plugin *name* at *location* (running *content_hash*) is
        quarantined, or ``None``: a quarantine of that place, an unlocated one (it stops
        every plugin of its name), or one of that content anywhere (``_store``)."""
        with self._reading(f"reading the quarantine of {name!r}") as conn:
            row = conn.execute(
                f"SELECT {_QUARANTINE_COLUMNS} FROM quarantine WHERE name = ? AND "  # noqa: S608
                f"{_QUARANTINE_MATCH} ORDER BY location != ?, location = ? LIMIT 1",
                (name, location, UNLOCATED, content_hash, location, UNLOCATED),
            ).fetchone()
        return None if row is None else quarantine_from_row(self._rows, row)

    def put_quarantine(self, record: QuarantineRecord) -> None:
        """Quarantine ``record.name`` at ``record.location`` (replacing an earlier record)."""
        with self._writing(f"quarantining {record.name!r}") as conn:
            conn.execute(
                "INSERT OR REPLACE INTO quarantine (name, location, reason, since, content_hash) "
                "VALUES (?, ?, ?, ?, ?)",
                (record.name, record.location, record.reason, record.since, record.content_hash),
            )

    def delete_quarantine(
        self, name: str, location: str = UNLOCATED, content_hash: str = ""
    ) -> bool:
        """Release every quarantine :meth:`get_quarantine` finds for the plugin *name* at
        *location* running *content_hash*; ``False`` when there was none."""
        with self._writing(f"releasing {name!r} from quarantine") as conn:
            cursor = conn.execute(
                f"DELETE FROM quarantine WHERE name = ? AND {_QUARANTINE_MATCH}",  # noqa: S608
                (name, location, UNLOCATED, content_hash),
            )
        return cursor.rowcount > 0

    def list_quarantine(self) -> Sequence[QuarantineRecord]:
        """Every quarantined plugin, ordered by name and location."""
        with self._reading("listing quarantined plugins") as conn:
            rows = conn.execute(
                f"SELECT {_QUARANTINE_COLUMNS} FROM quarantine ORDER BY name, location"  # noqa: S608
            )
            records = rows.fetchall()
        return [quarantine_from_row(self._rows, row) for row in records]

    # -- decision log ---------------------------------------------------------------

    def log_decision(self, decision: Decision) -> None:
        """Append *decision* to the log; its ``id`` is ignored and assigned here."""
        with self._writing(f"logging a decision about {decision.plugin!r}") as conn:
            conn.execute(
                "INSERT INTO decisions (at, plugin, action, target, allowed, detail) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    decision.at,
                    decision.plugin,
                    decision.action,
                    decision.target,
                    int(decision.allowed),
                    decision.detail,
                ),
            )

    def decisions(
        self,
        plugin: str | None = None,
        limit: int = 100,
        *,
        since: float | None = None,
        allowed: bool | None = None,
        action: str | None = None,
    ) -> Sequence[Decision]:
        """The newest *limit* decisions, newest first: of *plugin* (else all), from *since*
        (a ``time.time()`` value) on, only allowed or refused ones, of one *action*."""
        if limit < 0:
            raise StoreError(f"decision log limit must be 0 or more, got {limit}")
        where, values = decision_filter(
            "?", plugin=plugin, since=since, allowed=allowed, action=action, allowed_value=int
        )
        with self._reading("reading the decision log") as conn:
            # The clauses are caplet's own text; every value is a parameter.
            cursor = conn.execute(
                "SELECT id, at, plugin, action, target, allowed, detail FROM decisions "  # noqa: S608
                f"{where}ORDER BY id DESC LIMIT ?",
                (*values, limit),
            )
            rows = cursor.fetchall()
        return [decision_from_row(self._rows, row) for row in rows]

    def prune_decisions(self, *, before: float, keep: int) -> int:
        """Delete decisions older than *before* (``time.time()``) and all but the newest
        *keep*; return how many rows went (the log's retention, ``Policy.log``)."""
        if keep < 0:
            raise StoreError(f"decision log retention must keep 0 rows or more, got {keep}")
        with self._writing("pruning the decision log") as conn:
            removed = conn.execute("DELETE FROM decisions WHERE at < ?", (before,)).rowcount
            removed += conn.execute(
                f"DELETE FROM decisions WHERE id IN (SELECT id FROM decisions "  # noqa: S608
                f"ORDER BY {PRUNE_ORDER} LIMIT max(0, (SELECT count(*) FROM decisions) - ?))",
                (keep,),
            ).rowcount
        return int(removed)

    def decisions_span(self) -> tuple[int, float | None]:
        """(rows, time of the oldest row): what retention has to look at, read cheaply."""
        with self._reading("reading the decision log") as conn:
            row = conn.execute("SELECT count(*), min(at) FROM decisions").fetchone()
        return span_from_row(self._rows, *row)

    # -- ctx.kv ------------------------------------------------------------------------

    def kv_get(self, plugin: str, key: str, *, location: str = UNLOCATED) -> bytes | None:
        """The value the plugin *plugin* at *location* stored under *key*, or ``None``."""
        with self._reading(f"reading a kv entry of {plugin!r}") as conn:
            row = conn.execute(
                "SELECT value FROM kv WHERE plugin = ? AND location = ? AND key = ?",
                (plugin, location, key),
            ).fetchone()
        return None if row is None else kv_value(self._rows, plugin, key, row[0])

    def kv_put(
        self,
        plugin: str,
        key: str,
        value: bytes,
        *,
        max_keys: int,
        max_bytes: int,
        location: str = UNLOCATED,
    ) -> KvWrite:
        """Store *value* under *key* for the plugin *plugin* at *location* unless that
        breaks a quota.

        The usage is checked inside the write transaction, so two processes
        writing at once cannot both squeeze under the limit. It is read from
        ``kv_usage``, the row the schema's triggers keep (schema 10): summed
        over the plugin's rows on every write, a plugin whose quota was full
        made each ``ctx.kv.set`` read all its rows, in the host and outside
        the worker's CPU cap: 9,000 writes cost the host 9.2 CPU seconds and
        the worker 0.3 (attack15).
        """
        size = len(key.encode("utf-8")) + len(value)
        with self._lock, self._writing(f"writing a kv entry of {plugin!r}") as conn:
            held_keys, held_bytes, old = conn.execute(_KV_USAGE, (plugin, location, key)).fetchone()
            keys = int(held_keys) + (old is None)
            total = int(held_bytes) - int(old or 0) + size
            stored = keys <= max_keys and total <= max_bytes
            if stored:
                conn.execute(
                    "INSERT INTO kv (plugin, location, key, value, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (plugin, location, key) DO UPDATE SET "
                    "value = excluded.value, updated_at = excluded.updated_at",
                    (plugin, location, key, value, time.time()),
                )
        return KvWrite(stored=stored, keys=keys, total_bytes=total)

    def kv_delete(self, plugin: str, key: str, *, location: str = UNLOCATED) -> bool:
        """Remove the *key* of the plugin *plugin* at *location*; ``False`` if it was not there."""
        with self._lock, self._writing(f"deleting a kv entry of {plugin!r}") as conn:
            cursor = conn.execute(
                "DELETE FROM kv WHERE plugin = ? AND location = ? AND key = ?",
                (plugin, location, key),
            )
        return cursor.rowcount > 0

    def kv_keys(self, plugin: str, prefix: str = "", *, location: str = UNLOCATED) -> Sequence[str]:
        """The keys of the plugin *plugin* at *location* starting with *prefix*, sorted.

        ``substr`` rather than LIKE: a prefix holding ``%`` or ``_`` is
        matched literally, with no escaping to get wrong.
        """
        with self._reading(f"listing the kv keys of {plugin!r}") as conn:
            rows = conn.execute(
                "SELECT key FROM kv WHERE plugin = ? AND location = ? "
                "AND substr(key, 1, length(?)) = ? ORDER BY key",
                (plugin, location, prefix, prefix),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def claim_unlocated(self, plugin: str, location: str, *, from_location: str = UNLOCATED) -> int:
        """Give the plugin *plugin* at *location* the ``ctx.kv`` entries of its name that
        are unlocated (``_store.UNLOCATED``, or *from_location*: a place caplet no longer
        gives any plugin); return how many moved. A key it already holds at *location*
        keeps its value (the other one stays, claimed by nobody)."""
        if location in (UNLOCATED, from_location):
            return 0
        with self._lock, self._writing(f"claiming the unlocated kv entries of {plugin!r}") as conn:
            cursor = conn.execute(
                "UPDATE OR IGNORE kv SET location = ? WHERE plugin = ? AND location = ?",
                (location, plugin, from_location),
            )
        return int(cursor.rowcount)

    # -- maintenance and lifetime -----------------------------------------------------

    def integrity_check(self) -> tuple[str, ...]:
        """``PRAGMA integrity_check``: ``("ok",)`` for a healthy database.

        Returns the problems SQLite lists otherwise, or raises the "corrupt"
        :class:`StoreError` when the file is too damaged to be checked.

        Reads every page, so it is for ``caplet doctor`` and tests, not for
        every open (see the module docstring).
        """
        with self._reading("checking integrity") as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        return tuple(str(row[0]) for row in rows)

    def check(self) -> tuple[StateProblem, ...]:
        """Everything ``caplet doctor --check-state`` checks in the database; ``()`` when healthy.

        SQLite's ``integrity_check`` and ``foreign_key_check``, the schema
        version and objects, then every approval, audit and quarantine record
        decoded exactly as caplet reads it (plus the hash format), and the
        column types of the decision log and ``ctx.kv``. Reads only, in one
        snapshot. Pages SQLite cannot read are a ``CORRUPT`` problem too;
        only an error that is not about the file (a lock held past the busy
        timeout) raises :class:`StoreError`. Reads every page: on demand only
        (see the module docstring).
        """
        try:
            with self._reading("checking the state database") as conn:
                conn.execute("BEGIN")  # one read snapshot for every query below
                try:
                    return check_database(conn, self.path, self._rows)
                finally:
                    conn.execute("ROLLBACK")
        except _CorruptError as exc:
            # Pages so damaged that SQLite stops reading them: still a finding, not a crash.
            return (StateProblem(kind=ProblemKind.CORRUPT, path=str(self.path), message=str(exc)),)

    def close(self) -> None:
        """Close the connection (after another thread's statement); closing twice is fine."""
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error as exc:
                raise self._translate_error("closing", exc) from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
