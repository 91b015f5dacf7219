"""SqliteStore.check: SQLite's own checks, the schema, and every record as caplet reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._errors import StoreError
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._sqlite import DB_FILENAME, SCHEMA_VERSION, SqliteStore
from caplet._trust._store import Decision, QuarantineRecord
from tests._trust.storekit import HASH_A, approval, raw
from tests._trust.test_sqlite import audit


@pytest.fixture
def store(state_dir: Path) -> SqliteStore:
    store = SqliteStore(state_dir)
    store.put_approval(approval())
    store.put_audit(audit())
    store.put_quarantine(
        QuarantineRecord(name="weather", reason="tripped", since=1.0, location="/p/weather")
    )
    store.log_decision(Decision(at=1.0, plugin="weather", action="call", target="t", allowed=True))
    store.kv_put("weather", "k", b"v", max_keys=10, max_bytes=1000, location="/p/weather")
    return store


def only(problems: tuple[StateProblem, ...], kind: ProblemKind) -> StateProblem:
    assert len(problems) == 1, problems
    assert problems[0].kind is kind
    assert problems[0].damaged
    return problems[0]


def test_a_healthy_database_has_no_problem(store: SqliteStore) -> None:
    assert store.check() == ()


def test_an_empty_database_has_no_problem(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        assert store.check() == ()


def test_corrupt_pages_fail_the_integrity_check(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        for i in range(300):
            store.log_decision(
                Decision(at=float(i), plugin="p" * 50, action="call", target="t" * 80, allowed=True)
            )
    db = state_dir / DB_FILENAME
    data = bytearray(db.read_bytes())
    page = 4096
    # Damage the middle of the decisions table (not page 1, which opening reads).
    data[10 * page : 12 * page] = b"\x42" * (2 * page)
    db.write_bytes(bytes(data))
    with SqliteStore(state_dir) as store:
        problem = only(store.check(), ProblemKind.CORRUPT)
    assert f"state database {db} is corrupt" in problem.message
    assert "malformed" in problem.message
    assert f"mv {db} {db}.bak" in problem.message
    assert db.read_bytes() == bytes(data), "checking never writes"


def test_rows_breaking_a_constraint_fail_the_integrity_check(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("UPDATE decisions SET allowed = 7")
    conn.close()
    problem = only(store.check(), ProblemKind.CORRUPT)
    assert "integrity check: CHECK constraint failed in decisions" in problem.message


def test_an_approval_with_a_malformed_hash(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("UPDATE approvals SET content_hash = 'sha256-xyz'")
    conn.close()
    problem = only(store.check(), ProblemKind.RECORD)
    assert problem.path == str(store.path)
    assert "row 'weather' of table approvals is invalid" in problem.message
    assert "content_hash 'sha256-xyz' is not 'sha256-' and 64 hex digits" in problem.message
    assert "caplet unapprove weather && caplet approve weather" in problem.message
    with pytest.raises(StoreError, match="is not 'sha256-' and 64 hex digits"):
        store.get_approval("weather")


def test_an_audit_that_does_not_decode(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("UPDATE audits SET payload = '{\"plugin\": 3}'")
    conn.close()
    problem = only(store.check(), ProblemKind.RECORD)
    assert f"row '{HASH_A} by anthropic:claude-test' of table audits is invalid" in problem.message
    assert "audit payload does not decode" in problem.message
    assert "caplet audit weather --fresh" in problem.message


def test_an_audit_keyed_by_something_that_is_not_text(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("UPDATE audits SET model = x'07'")
    conn.close()
    problem = only(store.check(), ProblemKind.RECORD)
    assert "content_hash or model is not text" in problem.message


def test_a_mistyped_quarantine_record(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("UPDATE quarantine SET since = 'yesterday'")
    conn.close()
    problem = only(store.check(), ProblemKind.RECORD)
    assert (
        "row 'weather' of table quarantine is invalid (reason, location or content_hash "
        "mistyped, or since not a time caplet wrote)"
    ) in problem.message
    assert "caplet release weather" in problem.message


def test_a_mistyped_decision_and_kv_row(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("UPDATE decisions SET at = 'noon'")
    conn.execute("UPDATE kv SET value = 'text, not a blob'")
    conn.close()
    problems = store.check()
    assert [p.kind for p in problems] == [ProblemKind.RECORD, ProblemKind.RECORD]
    assert "row 1 of table decisions is invalid" in problems[0].message
    assert "row 'weather/k' of table kv is invalid" in problems[1].message
    assert "delete that row with the sqlite3 shell" in problems[1].message


# Times no clock of caplet's wrote: past year 9999 (``time.localtime`` of it raised
# OverflowError in `caplet log`, exit 70), negative, infinite (9e999 is SQLite's literal
# for it), the largest integer SQLite holds.
FOREIGN_TIMES = ("1e308", "-1", "9e999", "9223372036854775807")


@pytest.mark.parametrize("value", FOREIGN_TIMES)
def test_a_stored_time_caplet_never_wrote_is_a_record_problem(
    store: SqliteStore, value: str
) -> None:
    conn = raw(store.path)
    conn.execute(f"UPDATE decisions SET at = {value}")
    conn.execute(f"UPDATE approvals SET approved_at = {value}")
    conn.execute(f"UPDATE quarantine SET since = {value}")
    conn.close()
    messages = [p.message for p in store.check()]
    assert len(messages) == 3, messages
    assert any(
        "row 'weather' of table approvals is invalid (content_hash mistyped, or approved_at "
        "not a time caplet wrote)" in m
        for m in messages
    ), messages
    assert any("since not a time caplet wrote" in m for m in messages), messages
    assert any(
        "row 1 of table decisions is invalid (a column holds a value of the wrong type, or a "
        "time caplet did not write)" in m
        for m in messages
    ), messages
    with pytest.raises(StoreError, match="approved_at not a time caplet wrote"):
        store.get_approval("weather")
    with pytest.raises(StoreError, match="time caplet did not write"):
        store.decisions()


def test_the_logs_span_refuses_an_oldest_time_that_is_text(store: SqliteStore) -> None:
    # SQLite's min() of a column whose every row holds text is that text (its type
    # order): retention read it with float() and raised ValueError (exit 70).
    conn = raw(store.path)
    conn.execute("UPDATE decisions SET at = x'ff00fe'")
    conn.close()
    with pytest.raises(StoreError, match=r"row 'min\(at\)' of table decisions is invalid"):
        store.decisions_span()


def test_an_honest_log_span_reads_back(store: SqliteStore) -> None:
    assert store.decisions_span() == (1, 1.0)


def test_an_audit_dated_past_year_9999_is_a_record_problem(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("UPDATE audits SET payload = json_set(payload, '$.created_at', 1e308)")
    conn.close()
    problem = only(store.check(), ProblemKind.RECORD)
    assert "created_at: 1e+308 is no time caplet wrote" in problem.message
    assert "caplet audit weather --fresh" in problem.message


def test_a_missing_table_is_a_schema_problem(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute("DROP TABLE kv")
    conn.close()
    problem = only(store.check(), ProblemKind.SCHEMA)
    # A table's triggers go with it.
    assert (
        f"state database {store.path} lacks kv, kv_usage_delete, kv_usage_insert, "
        f"kv_usage_update of schema version {SCHEMA_VERSION}"
    ) in problem.message
    assert f"mv {store.path} {store.path}.bak" in problem.message


def test_a_missing_trigger_is_a_schema_problem(store: SqliteStore) -> None:
    """Without it a kv write would no longer count toward its plugin's quota."""
    conn = raw(store.path)
    conn.execute("DROP TRIGGER kv_usage_insert")
    conn.close()
    problem = only(store.check(), ProblemKind.SCHEMA)
    assert (
        f"state database {store.path} lacks kv_usage_insert of schema version {SCHEMA_VERSION}"
    ) in problem.message


def test_a_version_changed_behind_the_open_connection(store: SqliteStore) -> None:
    conn = raw(store.path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    conn.close()
    problem = only(store.check(), ProblemKind.SCHEMA)
    assert f"has schema version {SCHEMA_VERSION - 1}, expected {SCHEMA_VERSION}" in (
        problem.message
    )


def test_many_bad_rows_are_reported_up_to_a_limit(store: SqliteStore) -> None:
    for i in range(30):
        store.log_decision(Decision(at=float(i), plugin="p", action="a", target="t", allowed=True))
    conn = raw(store.path)
    conn.execute("UPDATE decisions SET at = 'noon'")
    conn.close()
    problems = store.check()
    assert len(problems) == 20
    assert all(p.kind is ProblemKind.RECORD for p in problems)
