"""The SQLite implementation of :class:`~caplet._trust._store.TrustStore`.

One database file, ``<state dir>/caplet.db``, private to the user (``0o600``
in a ``0o700`` directory). Several caplet processes may use it at once
(design.md section 8): the journal is WAL so readers never block the writer,
every write is one ``BEGIN IMMEDIATE`` transaction so writers queue on the
busy timeout up front instead of failing with "database is locked" half-way
through (https://www.sqlite.org/lang_transaction.html), and the schema is
created or migrated inside such a transaction, so processes racing on a
fresh directory cannot both create it.

caplet never rewrites a database it does not understand: a file that is not
SQLite, is corrupt, belongs to another program, or was written by a newer
caplet is refused with :class:`~caplet._errors.StoreError` before anything
is written to it.

``PRAGMA quick_check`` is *not* run on open: it reads every page, so its
cost grows with the decision log on every CLI invocation, while SQLite
reports a corrupt page with ``SQLITE_CORRUPT`` whenever one is touched, and
that is translated into the same "corrupt" error. :meth:`SqliteStore.check`
runs the full check on demand (``caplet doctor --check-state``): SQLite's
own integrity and foreign-key checks, the schema, and every record decoded
the way caplet reads it.

A full disk is an error that says so (SQLite reports ``SQLITE_FULL``, or an
I/O error while the file system has no free block left): the transaction
is rolled back, so the state is the one before the command.

Threads: one connection per store, opened with ``check_same_thread=False``
and used only under the store's lock, so a :class:`~caplet.PluginHost`
can be called from any application thread (the soak test found the
default binding to the creating thread failing every call from another
one). One locked connection rather than one per thread: a transaction is
a block of statements on one connection, so holding the lock for the
whole block (:func:`_serialized`) keeps another thread's statements out
of it; SQLite's default serialized threading mode makes sharing the
connection itself safe (https://www.sqlite.org/threadsafe.html); threads
of one process queue on a lock instead of on SQLite's busy timeout; and
:meth:`SqliteStore.close` closes the only connection there is, where
connections owned by other threads could not be closed from here. The
statements are short, so the lock costs little concurrency.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Self

from caplet._atomic import fsync_directory, write_step
from caplet._audit._model import AuditResult
from caplet._errors import StoreError
from caplet._trust._codec import audit_to_json
from caplet._trust._paths import ensure_private_dir
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._rows import (
    PRUNE_ORDER,
    RowSource,
    approval_from_row,
    approval_params,
    audit_from_row,
    decision_filter,
    decision_from_row,
    kv_value,
    quarantine_from_row,
)
from caplet._trust._sqlite_check import check_database
from caplet._trust._sqlite_schema import (
    APPLICATION_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    corrupt_message,
    migrate,
    newer_message,
)
from caplet._trust._store import ApprovalRecord, Decision, KvWrite, QuarantineRecord

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
_SELECT_APPROVAL = (
    "SELECT name, content_hash, capabilities, approved_at, risk_level, verdict, version, "
    "requires, defaults, hooks FROM approvals WHERE name = ?"
)
_SELECT_APPROVALS = (
    "SELECT name, content_hash, capabilities, approved_at, risk_level, verdict, version, "
    "requires, defaults, hooks FROM approvals ORDER BY name"
)

_FILE_MODE = 0o600
_GROUP_OTHER = 0o077
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class _CorruptError(StoreError):
    """SQLite found the file corrupt (or not a database): ``check`` reports it as a problem."""


def _disk_full(directory: Path) -> bool:
    """True when the file system holding *directory* has no block left for us.

    SQLite reports a full disk as ``SQLITE_FULL`` only where it notices it
    itself; a failed write of the WAL index or a page reaches us as a plain
    I/O error, so the free space is asked directly.
    """
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False


_Use = Callable[["SqliteStore", str], AbstractContextManager[sqlite3.Connection]]


def _serialized(use: _Use) -> _Use:
    """Hold the store's lock for the whole of *use*: every statement of a read,
    from ``BEGIN`` to ``COMMIT`` of a write, and the caller's fetches in between."""

    @contextmanager
    def serialized(store: SqliteStore, doing: str) -> Iterator[sqlite3.Connection]:
        with store._lock, use(store, doing) as conn:
            yield conn

    return serialized


def _tighten(path: Path) -> None:
    """Drop group/other bits from *path* if it exists and we own it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & _GROUP_OTHER:
        path.chmod(stat.S_IMODE(st.st_mode) & ~_GROUP_OTHER)


class SqliteStore:
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

    # -- opening -----------------------------------------------------------------

    def _probe_file(self) -> None:
        """Open the file (creating it whole when missing), prove it is read-write, tighten it.

        A missing database is created complete, schema included, under a
        temporary name and then linked into place (:meth:`_create`), so the
        real path never holds a file caplet is still writing: an empty
        ``caplet.db`` with no write-ahead log beside it is then always damage
        (something truncated it, and every approval went with it), reported
        and never re-created over the loss (issue 15). Probing with
        ``os.open`` also turns a permission problem into an ``errno`` that can
        be explained, where SQLite only says "unable to open".
        """
        try:
            fd = self._open_existing()
        except FileNotFoundError:
            self._create()
            fd = self._open_existing()
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StoreError(
                    f"state database {self.path} is not a regular file; "
                    "move it aside or use another --state-dir"
                )
            if st.st_size == 0 and not self._wal_holds_data():
                raise _CorruptError(
                    f"state database {self.path} is empty (0 bytes) and has no write-ahead "
                    "log: its content (approvals, audits, the decision log) was lost, truncated "
                    "by something other than caplet, which never re-creates it over the loss; "
                    f"restore it from a backup, or move it aside (mv {self.path} "
                    f"{self.path}.bak) to start from an empty state and approve again"
                )
            if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & _GROUP_OTHER:
                # Changes permissions only, never a byte of the file.
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_GROUP_OTHER)
        finally:
            os.close(fd)

    def _open_existing(self) -> int:
        """The database file opened read-write; FileNotFoundError when there is none."""
        try:
            return os.open(self.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StoreError(
                f"cannot open the state database {self.path} for reading and writing "
                f"({exc.strerror}); fix its permissions (chmod 600 {self.path}) "
                "or use another --state-dir"
            ) from exc

    def _wal_holds_data(self) -> bool:
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            return wal.stat().st_size > 0
        except OSError:
            return False

    def _create(self) -> None:
        """Write a new database, schema included, beside the real path and link it into place.

        The temporary name is the one :func:`caplet._atomic.atomic_write` uses
        (``.caplet.db.<random>.tmp``, mode 0600), so one left by a kill is a
        leftover ``caplet doctor --check-state`` reports. Its journal is kept
        in memory: a half-written temporary file is discarded, never used.
        ``link`` does not replace: when another process created the database
        first, its file is the one used.
        """
        try:
            fd, name = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".tmp", dir=self.state_dir
            )
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise StoreError(
                    f"cannot create the state database {self.path}: no space left on device; "
                    f"free space on the file system holding {self.state_dir} and run the "
                    "command again"
                ) from exc
            raise StoreError(
                f"cannot create the state database in {self.state_dir} ({exc.strerror}); "
                "make the state directory writable or use another --state-dir"
            ) from exc
        os.close(fd)
        temp = Path(name)
        try:
            try:
                conn = sqlite3.connect(temp, isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode = MEMORY")
                    migrate(conn, temp)
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                raise self._translate_error("creating", exc) from exc
            try:
                os.link(temp, self.path)
            except FileExistsError:
                pass  # another process created it meanwhile: that one is used
            except OSError as exc:
                raise StoreError(
                    f"cannot create the state database {self.path} ({exc.strerror}); make "
                    f"{self.state_dir} writable or use another --state-dir"
                ) from exc
            fsync_directory(self.state_dir)
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()

    def _check_identity(self, conn: sqlite3.Connection) -> int:
        """Refuse, before writing anything, a database that is not ours or is too new.

        Returns the schema version found.
        """
        # One statement reads all three from one snapshot: another process
        # may be creating the schema right now, and separate reads could see
        # version 0 from before its commit and its tables from after.
        row = conn.execute(
            "SELECT (SELECT user_version FROM pragma_user_version),"
            " (SELECT application_id FROM pragma_application_id),"
            " (SELECT count(*) FROM sqlite_master)"
        ).fetchone()
        version, app_id, objects = (int(value) for value in row)
        if version > SCHEMA_VERSION:
            raise StoreError(newer_message(self.path, version, SCHEMA_VERSION))
        if app_id not in (0, APPLICATION_ID):
            raise StoreError(corrupt_message(self.path, f"application id {app_id:#x}"))
        if version == 0 and objects:
            # Migration is atomic, so a version-0 file holding tables was
            # never written by caplet: some other program's database.
            raise StoreError(corrupt_message(self.path, f"{objects} foreign schema objects"))
        return version

    def _connect(self) -> sqlite3.Connection:
        self._probe_file()
        try:
            # isolation_level=None: the module never opens transactions on its
            # own; every write below says BEGIN IMMEDIATE itself.
            # check_same_thread=False: any thread may use it, under self._lock.
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._translate_error("opening", exc) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            version = self._check_identity(conn)
            # WAL persists in the file; on a file system without shared
            # memory SQLite keeps the rollback journal, still safe to share.
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            if version < SCHEMA_VERSION:
                # An up-to-date database is opened without taking the write lock.
                migrate(conn, self.path)
            for suffix in ("", "-wal", "-shm"):
                _tighten(self.path.with_name(self.path.name + suffix))
        except sqlite3.Error as exc:
            conn.close()
            raise self._translate_error("opening", exc) from exc
        except OSError as exc:
            conn.close()
            raise StoreError(
                f"cannot secure the state database {self.path} ({exc.strerror}); "
                f"run chmod 600 {self.path}*"
            ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    # -- error translation and transactions ----------------------------------------

    def _translate_error(self, doing: str, exc: sqlite3.Error) -> StoreError:
        code = exc.sqlite_errorcode & 0xFF if hasattr(exc, "sqlite_errorcode") else -1
        text = str(exc)
        if code in _CORRUPT_CODES or "not a database" in text or "malformed" in text:
            return _CorruptError(corrupt_message(self.path, text))
        if code == sqlite3.SQLITE_FULL or (
            code == sqlite3.SQLITE_IOERR and _disk_full(self.state_dir)
        ):
            return StoreError(
                f"state database {self.path}: {doing} failed: no space left on device "
                f"(SQLite: {text}); nothing was written: free space on the file system "
                f"holding {self.state_dir} and run the command again"
            )
        if code in _BUSY_CODES:
            return StoreError(
                f"state database {self.path} stayed locked for more than "
                f"{self.busy_timeout:g} s while {doing}; another caplet process is "
                "holding it; retry when it has finished"
            )
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in text:
            return StoreError(
                f"state database {self.path} was already closed when {doing}; "
                "open a new SqliteStore"
            )
        return StoreError(
            f"state database {self.path}: {doing} failed ({text}); check free space "
            f"and permissions of {self.state_dir}"
        )

    @_serialized
    @contextmanager
    def _reading(self, doing: str) -> Iterator[sqlite3.Connection]:
        try:
            yield self._conn
        except sqlite3.Error as exc:
            raise self._translate_error(doing, exc) from exc

    @_serialized
    @contextmanager
    def _writing(self, doing: str) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                write_step(f"sqlite {self.path}: {doing}: transaction begun")
                yield conn
                write_step(f"sqlite {self.path}: {doing}: statements run, not committed")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._translate_error(doing, exc) from exc
        write_step(f"sqlite {self.path}: {doing}: committed")

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
                "INSERT OR REPLACE INTO approvals (name, content_hash, capabilities, "
                "approved_at, risk_level, verdict, version, requires, defaults, hooks) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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

    def get_quarantine(self, name: str) -> QuarantineRecord | None:
        """Why and since when *name* is quarantined, or ``None``."""
        with self._reading(f"reading the quarantine of {name!r}") as conn:
            row = conn.execute(
                "SELECT name, reason, since FROM quarantine WHERE name = ?", (name,)
            ).fetchone()
        return None if row is None else quarantine_from_row(self._rows, row)

    def put_quarantine(self, record: QuarantineRecord) -> None:
        """Quarantine ``record.name`` (replacing an earlier record)."""
        with self._writing(f"quarantining {record.name!r}") as conn:
            conn.execute(
                "INSERT OR REPLACE INTO quarantine (name, reason, since) VALUES (?, ?, ?)",
                (record.name, record.reason, record.since),
            )

    def delete_quarantine(self, name: str) -> bool:
        """Release *name*; ``False`` when it was not quarantined."""
        with self._writing(f"releasing {name!r} from quarantine") as conn:
            cursor = conn.execute("DELETE FROM quarantine WHERE name = ?", (name,))
        return cursor.rowcount > 0

    def list_quarantine(self) -> Sequence[QuarantineRecord]:
        """Every quarantined plugin, ordered by name."""
        with self._reading("listing quarantined plugins") as conn:
            rows = conn.execute("SELECT name, reason, since FROM quarantine ORDER BY name")
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
        count, oldest = row
        return int(count), None if oldest is None else float(oldest)

    # -- ctx.kv ------------------------------------------------------------------------

    def kv_get(self, plugin: str, key: str) -> bytes | None:
        """The value *plugin* stored under *key*, or ``None``."""
        with self._reading(f"reading a kv entry of {plugin!r}") as conn:
            row = conn.execute(
                "SELECT value FROM kv WHERE plugin = ? AND key = ?", (plugin, key)
            ).fetchone()
        return None if row is None else kv_value(self._rows, plugin, key, row[0])

    def kv_put(
        self, plugin: str, key: str, value: bytes, *, max_keys: int, max_bytes: int
    ) -> KvWrite:
        """Store *value* under *key* for *plugin* unless that breaks a quota.

        The usage is computed inside the write transaction, so two processes
        writing at once cannot both squeeze under the limit.
        """
        size = len(key.encode("utf-8")) + len(value)
        with self._writing(f"writing a kv entry of {plugin!r}") as conn:
            others_keys, others_bytes = conn.execute(
                "SELECT count(*), coalesce(sum(length(CAST(key AS BLOB)) + length(value)), 0) "
                "FROM kv WHERE plugin = ? AND key != ?",
                (plugin, key),
            ).fetchone()
            keys, total = int(others_keys) + 1, int(others_bytes) + size
            if keys > max_keys or total > max_bytes:
                return KvWrite(stored=False, keys=keys, total_bytes=total)
            conn.execute(
                "INSERT OR REPLACE INTO kv (plugin, key, value, updated_at) VALUES (?, ?, ?, ?)",
                (plugin, key, value, time.time()),
            )
        return KvWrite(stored=True, keys=keys, total_bytes=total)

    def kv_delete(self, plugin: str, key: str) -> bool:
        """Remove *plugin*'s *key*; ``False`` when it was not there."""
        with self._writing(f"deleting a kv entry of {plugin!r}") as conn:
            cursor = conn.execute("DELETE FROM kv WHERE plugin = ? AND key = ?", (plugin, key))
        return cursor.rowcount > 0

    def kv_keys(self, plugin: str, prefix: str = "") -> Sequence[str]:
        """*plugin*'s keys starting with *prefix*, sorted.

        ``substr`` rather than LIKE: a prefix holding ``%`` or ``_`` is
        matched literally, with no escaping to get wrong.
        """
        with self._reading(f"listing the kv keys of {plugin!r}") as conn:
            rows = conn.execute(
                "SELECT key FROM kv WHERE plugin = ? AND substr(key, 1, length(?)) = ? "
                "ORDER BY key",
                (plugin, prefix, prefix),
            ).fetchall()
        return [str(row[0]) for row in rows]

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
