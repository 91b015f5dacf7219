"""The state database's file and connection, under :class:`~caplet._trust._sqlite.SqliteStore`.

:class:`SqliteFile` opens ``caplet.db`` (creating it whole when missing),
checks it is caplet's and not too new, migrates it and keeps the one
connection; it translates SQLite's errors into caplet's words and gives the
store its locked read and write blocks. The queries are the store's.

caplet never rewrites a database it does not understand: a file that is not
SQLite, is corrupt, belongs to another program, or was written by a newer
caplet is refused with :class:`~caplet._errors.StoreError` before anything
is written to it.

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
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from caplet._atomic import fsync_directory, write_step
from caplet._errors import StoreError
from caplet._trust._sqlite_schema import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    corrupt_message,
    migrate,
    newer_message,
)

__all__ = ["SqliteFile"]

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


_Use = Callable[["SqliteFile", str], AbstractContextManager[sqlite3.Connection]]


def _serialized(use: _Use) -> _Use:
    """Hold the store's lock for the whole of *use*: every statement of a read,
    from ``BEGIN`` to ``COMMIT`` of a write, and the caller's fetches in between."""

    @contextmanager
    def serialized(store: SqliteFile, doing: str) -> Iterator[sqlite3.Connection]:
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


class SqliteFile:
    """The database file and its one connection; :class:`~caplet._trust._sqlite.SqliteStore`
    is this plus the queries (it sets the attributes below, then connects)."""

    path: Path
    state_dir: Path
    busy_timeout: float
    _lock: threading.RLock
    _conn: sqlite3.Connection

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
