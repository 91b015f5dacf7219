"""The state database's file: privacy, refusal of foreign or damaged files, creation, locking."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from caplet._errors import StoreError
from caplet._trust._sqlite import (
    APPLICATION_ID,
    DB_FILENAME,
    SCHEMA_VERSION,
    SqliteStore,
)
from caplet._trust._store import Decision
from tests._trust.storekit import approval, raw


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_fresh_store_is_private(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        store.log_decision(Decision(at=1.0, plugin="p", action="call", target="f", allowed=True))
        assert mode_of(state_dir) == 0o700
        db = state_dir / DB_FILENAME
        assert store.path == db
        assert mode_of(db) == 0o600
        for suffix in ("-wal", "-shm"):
            side = state_dir / (DB_FILENAME + suffix)
            if side.exists():
                assert mode_of(side) == 0o600


def test_fresh_store_schema(state_dir: Path) -> None:
    SqliteStore(state_dir).close()
    conn = raw(state_dir / DB_FILENAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"approvals", "audits", "quarantine", "decisions", "kv"} <= tables
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "decisions_by_plugin" in indexes
    conn.close()


def test_loose_existing_file_is_tightened(state_dir: Path) -> None:
    SqliteStore(state_dir).close()
    db = state_dir / DB_FILENAME
    db.chmod(0o666)
    state_dir.chmod(0o755)
    SqliteStore(state_dir).close()
    assert mode_of(db) == 0o600
    assert mode_of(state_dir) == 0o700


def test_database_path_is_a_directory(state_dir: Path) -> None:
    (state_dir / DB_FILENAME).mkdir(parents=True)
    with pytest.raises(StoreError) as info:
        SqliteStore(state_dir)
    assert f"state database {state_dir / DB_FILENAME}" in str(info.value)
    assert "--state-dir" in str(info.value)


@pytest.mark.usefixtures("obey_file_permissions")
def test_unreadable_database(state_dir: Path) -> None:
    SqliteStore(state_dir).close()
    db = state_dir / DB_FILENAME
    db.chmod(0)
    with pytest.raises(StoreError) as info:
        SqliteStore(state_dir)
    assert f"cannot open the state database {db}" in str(info.value)
    assert f"chmod 600 {db}" in str(info.value)
    assert isinstance(info.value.__cause__, PermissionError)


def test_corrupt_file_is_refused_and_untouched(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_FILENAME
    junk = b"this is not an SQLite database\n" * 200
    db.write_bytes(junk)
    db.chmod(0o600)
    with pytest.raises(StoreError) as info:
        SqliteStore(state_dir)
    message = str(info.value)
    assert f"state database {db} is corrupt or not a caplet database" in message
    assert f"mv {db} {db}.bak" in message
    assert "caplet never overwrites it" in message
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert db.read_bytes() == junk
    assert sorted(p.name for p in state_dir.iterdir()) == [DB_FILENAME]


def test_corrupt_pages_are_reported_and_untouched(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        for i in range(300):
            store.log_decision(
                Decision(
                    at=float(i), plugin="p" * 50, action="call", target="t" * 100, allowed=True
                )
            )
    db = state_dir / DB_FILENAME
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 20 * page
    data[10 * page : 20 * page] = b"\x42" * (10 * page)
    db.write_bytes(bytes(data))
    with SqliteStore(state_dir) as store, pytest.raises(StoreError) as info:
        store.decisions(limit=1_000)
    assert f"state database {db} is corrupt" in str(info.value)
    assert f"mv {db} {db}.bak" in str(info.value)
    assert db.read_bytes() == bytes(data)


def test_foreign_sqlite_database_is_refused_and_untouched(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_FILENAME
    conn = raw(db)
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('ada')")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError) as info:
        SqliteStore(state_dir)
    assert "is corrupt or not a caplet database" in str(info.value)
    assert f"mv {db} {db}.bak" in str(info.value)
    assert db.read_bytes() == before


def test_other_application_id_is_refused(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_FILENAME
    conn = raw(db)
    conn.execute("PRAGMA application_id = 1234")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match=r"application id 0x4d2"):
        SqliteStore(state_dir)
    assert db.read_bytes() == before


def test_newer_schema_is_refused_and_untouched(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_FILENAME
    conn = raw(db)
    conn.execute("CREATE TABLE future (x)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError) as info:
        SqliteStore(state_dir)
    assert str(info.value) == (
        f"state database {db} was written by a newer caplet (schema version "
        f"{SCHEMA_VERSION + 1}, this caplet knows {SCHEMA_VERSION}); "
        "upgrade caplet or use another --state-dir"
    )
    assert db.read_bytes() == before


def test_locked_database_reports_the_other_process(state_dir: Path) -> None:
    SqliteStore(state_dir).close()
    other = raw(state_dir / DB_FILENAME)
    other.execute("BEGIN IMMEDIATE")
    try:
        with SqliteStore(state_dir, busy_timeout=0) as store:
            with pytest.raises(StoreError) as info:
                store.put_approval(approval())
            assert f"state database {store.path} stayed locked" in str(info.value)
            assert "another caplet process is holding it" in str(info.value)
            # Readers are not blocked by the writer (WAL).
            assert store.list_approvals() == []
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_an_empty_database_without_a_wal_is_damage_never_re_created(state_dir: Path) -> None:
    """Issue 15: a zero-byte caplet.db was silently re-created (every approval gone) and
    `doctor --check-state` said ok."""
    with SqliteStore(state_dir) as store:
        store.log_decision(Decision(at=1.0, plugin="p", action="call", target="f", allowed=True))
    db = state_dir / DB_FILENAME
    db.write_bytes(b"")
    for side in ("-wal", "-shm"):
        (state_dir / (DB_FILENAME + side)).unlink(missing_ok=True)
    with pytest.raises(StoreError) as info:
        SqliteStore(state_dir)
    message = str(info.value)
    assert message.startswith(
        f"state database {db} is empty (0 bytes) and has no write-ahead log: its content "
        "(approvals, audits, the decision log) was lost"
    )
    assert f"mv {db} {db}.bak" in message
    assert db.read_bytes() == b"", "never re-created over the loss"
    assert sorted(p.name for p in state_dir.iterdir()) == [DB_FILENAME]


def test_a_new_database_is_created_whole_and_never_seen_half_made(state_dir: Path) -> None:
    """Created under a temporary name and linked into place: no empty file at the real
    path at any moment, and nothing left beside it."""
    seen: list[int] = []
    original = SqliteStore._create

    def watched(self: SqliteStore) -> None:
        seen.append(-1 if not self.path.exists() else self.path.stat().st_size)
        original(self)
        seen.append(self.path.stat().st_size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SqliteStore, "_create", watched)
        SqliteStore(state_dir).close()
    assert seen[0] == -1
    assert seen[1] > 0
    assert [p.name for p in state_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_two_stores_creating_the_same_database_at_once_share_it(state_dir: Path) -> None:
    """The second creator's link finds the first one's file and uses it."""
    state_dir.mkdir(mode=0o700)
    first = SqliteStore(state_dir)
    first.log_decision(Decision(at=1.0, plugin="p", action="call", target="f", allowed=True))
    second = SqliteStore.__new__(SqliteStore)
    second.busy_timeout = 1.0
    second.state_dir = state_dir
    second.path = state_dir / DB_FILENAME
    second._create()  # as if it had found no file a moment before the first created it
    assert [d.plugin for d in first.decisions()] == ["p"]
    first.close()
