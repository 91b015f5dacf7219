"""The SQLite trust store: migrations, round trips, concurrency.

The database file itself (privacy, foreign or damaged files, creation,
locking): tests/_trust/test_sqlite_file.py.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from caplet._audit._model import AuditResult, Verdict
from caplet._errors import StoreError
from caplet._findings import Finding, RiskLevel, Severity
from caplet._trust._codec import audit_to_json
from caplet._trust._problems import ProblemKind
from caplet._trust._sqlite import (
    DB_FILENAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    SqliteStore,
    migrate,
)
from caplet._trust._store import ApprovalRecord, Decision, KvWrite, QuarantineRecord, TrustStore
from tests._trust.storekit import HASH_A, HASH_B, KvLimits, approval, raw

#: The model id the audit() fixture is keyed by.
MODEL = "anthropic:claude-test"


def audit(content_hash: str = HASH_A, summary: str = "fine") -> AuditResult:
    return AuditResult(
        plugin="weather",
        content_hash=content_hash,
        risk_level=RiskLevel.HIGH,
        verdict=Verdict.REJECT,
        summary=summary,
        findings=(
            Finding(
                rule_id="net-socket",
                severity=Severity.DANGER,
                message="imports socket",
                file="weather/x.py",
                line=3,
                column=1,
                excerpt="import socket",
                capability="net.http",
                covered=False,
            ),
        ),
        provider="anthropic",
        created_at=1_700_000_001.0,
        description_accurate=True,
        risk_reasons=("socket",),
        model="claude-test",
    )


@pytest.fixture
def store(state_dir: Path) -> SqliteStore:
    return SqliteStore(state_dir)


# -- migrations ---------------------------------------------------------------------


def test_reopen_at_current_version_keeps_data(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        store.put_approval(approval())
    with SqliteStore.open(state_dir) as store:
        assert store.get_approval("weather") == approval()
    conn = raw(state_dir / DB_FILENAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_migrate_runs_only_the_missing_steps(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = raw(path)
    v1 = [(), ("CREATE TABLE a (x)",)]
    assert migrate(conn, path, v1) == 1
    conn.execute("INSERT INTO a VALUES (1)")
    # Re-running step 1 would fail with "table a already exists".
    v2 = [*v1, ("CREATE TABLE b (y)", "INSERT INTO b SELECT x FROM a")]
    assert migrate(conn, path, v2) == 2
    assert migrate(conn, path, v2) == 2
    assert conn.execute("SELECT y FROM b").fetchall() == [(1,)]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()


def test_failed_migration_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = raw(path)
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, path, [(), ("CREATE TABLE a (x)", "THIS IS NOT SQL")])
    assert not conn.in_transaction
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    conn.close()


def test_migrate_refuses_newer(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = raw(path)
    conn.execute("PRAGMA user_version = 5")
    with pytest.raises(StoreError, match=r"schema version 5, this caplet knows 1"):
        migrate(conn, path, [(), ()])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
    conn.close()


# -- round trips ------------------------------------------------------------------------


def test_store_satisfies_the_protocol(store: SqliteStore) -> None:
    typed: TrustStore = store
    assert typed.list_approvals() == []


def test_approval_round_trip_replace_delete(store: SqliteStore) -> None:
    assert store.get_approval("weather") is None
    store.put_approval(approval())
    assert store.get_approval("weather") == approval()
    store.put_approval(approval(content_hash=HASH_B))
    assert store.get_approval("weather") == approval(content_hash=HASH_B)
    store.put_approval(approval(name="alpha"))
    assert [a.name for a in store.list_approvals()] == ["alpha", "weather"]
    assert store.delete_approval("weather") is True
    assert store.delete_approval("weather") is False
    assert store.get_approval("weather") is None


def test_empty_capabilities_round_trip(store: SqliteStore) -> None:
    record = ApprovalRecord("bare", HASH_A, (), 0.0, RiskLevel.LOW, Verdict.APPROVE)
    store.put_approval(record)
    assert store.get_approval("bare") == record


def test_audit_round_trip_and_replace(store: SqliteStore) -> None:
    assert store.get_audit(HASH_A, MODEL) is None
    store.put_audit(audit())
    assert store.get_audit(HASH_A, MODEL) == audit()
    store.put_audit(audit(summary="second opinion"))
    got = store.get_audit(HASH_A, MODEL)
    assert got is not None
    assert got.summary == "second opinion"
    assert store.get_audit(HASH_B, MODEL) is None


def test_quarantine_round_trip(store: SqliteStore) -> None:
    record = QuarantineRecord(name="flaky", reason="circuit breaker tripped 3 times", since=42.5)
    assert store.get_quarantine("flaky") is None
    store.put_quarantine(record)
    store.put_quarantine(QuarantineRecord(name="another", reason="r", since=1.0))
    assert store.get_quarantine("flaky") == record
    assert [q.name for q in store.list_quarantine()] == ["another", "flaky"]
    assert store.delete_quarantine("flaky") is True
    assert store.delete_quarantine("flaky") is False
    assert store.get_quarantine("flaky") is None


def test_decisions_newest_first_with_filter_and_limit(store: SqliteStore) -> None:
    for i in range(6):
        store.log_decision(
            Decision(
                at=100.0 + i,
                plugin="a" if i % 2 == 0 else "b",
                action="call",
                target=f"t{i}",
                allowed=i % 3 != 0,
                detail=f"d{i}",
                id=999,
            )
        )
    everything = store.decisions()
    assert [d.target for d in everything] == ["t5", "t4", "t3", "t2", "t1", "t0"]
    ids = [d.id for d in everything]
    assert ids == sorted(ids, reverse=True)
    assert 999 not in ids
    assert everything[-1] == Decision(
        at=100.0, plugin="a", action="call", target="t0", allowed=False, detail="d0", id=ids[-1]
    )
    assert [d.target for d in store.decisions(plugin="a")] == ["t4", "t2", "t0"]
    assert [d.target for d in store.decisions(limit=2)] == ["t5", "t4"]
    assert [d.target for d in store.decisions(plugin="b", limit=1)] == ["t5"]
    assert store.decisions(limit=0) == []
    assert store.decisions(plugin="nobody") == []
    with pytest.raises(StoreError, match="limit must be 0 or more"):
        store.decisions(limit=-1)


def test_reopen_persists_everything(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        store.put_approval(approval())
        store.put_audit(audit())
        store.put_quarantine(QuarantineRecord("flaky", "crashed", 3.0))
        store.log_decision(
            Decision(at=1.0, plugin="weather", action="approve", target="x", allowed=True)
        )
    with SqliteStore(state_dir) as store:
        assert store.get_approval("weather") == approval()
        assert store.get_audit(HASH_A, MODEL) == audit()
        assert store.get_quarantine("flaky") == QuarantineRecord("flaky", "crashed", 3.0)
        [decision] = store.decisions()
        assert (decision.plugin, decision.action, decision.allowed) == ("weather", "approve", True)


# -- rows that do not decode ----------------------------------------------------------------


def test_undecodable_audit_payload(store: SqliteStore) -> None:
    store.put_audit(audit())
    conn = raw(store.path)
    conn.execute("UPDATE audits SET payload = '{\"plugin\": 1}'")
    conn.close()
    with pytest.raises(StoreError) as info:
        store.get_audit(HASH_A, MODEL)
    message = str(info.value)
    assert f"row '{HASH_A} by {MODEL}' of table audits is invalid" in message
    assert "caplet audit weather --fresh" in message


def test_audit_payload_for_another_hash(store: SqliteStore) -> None:
    store.put_audit(audit(content_hash=HASH_B))
    conn = raw(store.path)
    conn.execute("UPDATE audits SET content_hash = ?", (HASH_A,))
    conn.close()
    with pytest.raises(StoreError, match=f"its payload is the audit of {HASH_B} by {MODEL}"):
        store.get_audit(HASH_A, MODEL)


# -- audits keyed by content hash and model (issue 5) ---------------------------------------


def static_audit_of(content_hash: str = HASH_A) -> AuditResult:
    return AuditResult(
        plugin="weather",
        content_hash=content_hash,
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="static-only audit",
        findings=(),
        created_at=1_700_000_000.0,
    )


def test_static_and_model_audits_of_one_hash_live_side_by_side(store: SqliteStore) -> None:
    store.put_audit(static_audit_of())
    store.put_audit(audit())
    assert store.get_audit(HASH_A) == static_audit_of()
    assert store.get_audit(HASH_A, MODEL) == audit()
    assert store.get_audit(HASH_A, "openai:other-model") is None
    store.put_audit(audit(summary="again"))
    rows = raw(store.path).execute("SELECT content_hash, model FROM audits ORDER BY model")
    assert rows.fetchall() == [(HASH_A, ""), (HASH_A, MODEL)]


def test_audit_payload_of_another_model_is_refused(store: SqliteStore) -> None:
    store.put_audit(audit())
    conn = raw(store.path)
    conn.execute("UPDATE audits SET model = 'openai:forged'")
    conn.close()
    with pytest.raises(StoreError) as info:
        store.get_audit(HASH_A, "openai:forged")
    assert f"its payload is the audit of {HASH_A} by {MODEL}" in str(info.value)


def test_version_1_audits_stay_readable_after_migration(state_dir: Path) -> None:
    """A database written before audits had a model column migrates, rows intact."""
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:2]) == 1
    # Exactly what the version-1 codec wrote: no model, canary or capability fields.
    old_payload = (
        '{"plugin": "weather", "content_hash": "' + HASH_A + '", "risk_level": "MEDIUM", '
        '"verdict": "approve-with-conditions", "summary": "static-only audit: 0 danger", '
        '"findings": [{"rule_id": "CPL-ENV-001", "severity": "warning", "message": "reads env", '
        '"file": "plugin.py", "line": 3, "column": 1, "excerpt": "os.environ", '
        '"capability": "env.read", "covered": false}], "provider": "static-only", '
        '"created_at": 1700000000.0, "description_accurate": null, "risk_reasons": ["env"]}'
    )
    conn.execute(
        "INSERT INTO audits (content_hash, plugin, created_at, payload) VALUES (?, ?, ?, ?)",
        (HASH_A, "weather", 1_700_000_000.0, old_payload),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        got = store.get_audit(HASH_A)
    assert got is not None
    assert (got.plugin, got.risk_level, got.verdict) == (
        "weather",
        RiskLevel.MEDIUM,
        Verdict.APPROVE_WITH_CONDITIONS,
    )
    assert got.findings[0].rule_id == "CPL-ENV-001"
    assert (got.model, got.canary_status, got.injection_attempts) == ("", None, ())
    assert got.static_only
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    columns = [row[1] for row in conn.execute("PRAGMA table_info(audits)")]
    assert columns == ["content_hash", "model", "plugin", "created_at", "payload"]
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "audits_by_plugin" in indexes
    conn.close()


def test_undecodable_approval_row(store: SqliteStore) -> None:
    store.put_approval(approval())
    conn = raw(store.path)
    conn.execute("UPDATE approvals SET risk_level = 'EXTREME'")
    conn.close()
    with pytest.raises(StoreError) as info:
        store.get_approval("weather")
    assert "row 'weather' of table approvals is invalid" in str(info.value)
    assert "caplet approve weather" in str(info.value)


def test_approval_capabilities_not_a_list(store: SqliteStore) -> None:
    store.put_approval(approval())
    conn = raw(store.path)
    conn.execute("UPDATE approvals SET capabilities = '{\"a\": 1}'")
    conn.close()
    with pytest.raises(StoreError, match="capabilities is not a JSON array of strings"):
        store.list_approvals()


# -- lifetime ---------------------------------------------------------------------------------


def test_close_is_idempotent_and_use_after_close_fails(state_dir: Path) -> None:
    store = SqliteStore(state_dir)
    store.close()
    store.close()
    with pytest.raises(StoreError) as info:
        store.list_approvals()
    assert "was already closed" in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.ProgrammingError)


def test_context_manager_closes(state_dir: Path) -> None:
    with SqliteStore(state_dir) as store:
        pass
    with pytest.raises(StoreError, match="closed"):
        store.put_approval(approval())


def test_integrity_check(store: SqliteStore) -> None:
    assert store.integrity_check() == ("ok",)


# -- several processes at once -------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from caplet._audit._model import Verdict
    from caplet._findings import RiskLevel
    from caplet._trust._sqlite import SqliteStore
    from caplet._trust._store import ApprovalRecord, Decision

    state_dir, worker = Path(sys.argv[1]), sys.argv[2]
    sys.stdin.read()  # start together: the parent closes every stdin at once
    with SqliteStore(state_dir) as store:
        for i in range(200):
            store.log_decision(
                Decision(at=float(i), plugin=worker, action="call", target=str(i), allowed=True)
            )
            if i % 4 == 0:
                store.put_approval(
                    ApprovalRecord(
                        f"{worker}-{i // 4}", "sha256-" + "0" * 64, ("fs.read",), float(i),
                        RiskLevel.LOW, Verdict.APPROVE,
                    )
                )
                store.list_approvals()
    """
)


def test_concurrent_processes_lose_nothing(tmp_path: Path, state_dir: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [f"w{n}" for n in range(4)]
    logs = [tmp_path / f"{worker}.err" for worker in workers]
    procs = []
    for worker, log_path in zip(workers, logs, strict=True):
        with log_path.open("wb") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(script), str(state_dir), worker],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    for proc, log_path in zip(procs, logs, strict=True):
        # A generous safety net against a hang, not a timing assertion.
        assert proc.wait(timeout=120) == 0, log_path.read_text()
    with SqliteStore(state_dir) as store:
        assert store.integrity_check() == ("ok",)
        log = store.decisions(limit=10_000)
        assert len(log) == 4 * 200
        for worker in workers:
            mine = store.decisions(plugin=worker, limit=1_000)
            assert [d.target for d in mine] == [str(i) for i in reversed(range(200))]
        names = {a.name for a in store.list_approvals()}
        assert names == {f"{w}-{k}" for w in workers for k in range(50)}


# -- ctx.kv (schema version 3) ----------------------------------------------------------------


def test_kv_entries_are_per_plugin(store: SqliteStore) -> None:
    limits: KvLimits = {"max_keys": 10, "max_bytes": 1000}
    assert store.kv_put("a", "k", b"1", **limits) == KvWrite(stored=True, keys=1, total_bytes=2)
    assert store.kv_put("b", "k", b"22", **limits).stored
    assert store.kv_put("a", "k%_", b"3", **limits) == KvWrite(True, 2, 6)
    assert (store.kv_get("a", "k"), store.kv_get("b", "k"), store.kv_get("c", "k")) == (
        b"1",
        b"22",
        None,
    )
    assert store.kv_keys("a") == ["k", "k%_"]
    assert store.kv_keys("a", "k%") == ["k%_"], "the prefix is literal, not a LIKE pattern"
    assert store.kv_keys("a", "x") == []
    assert store.kv_delete("a", "k")
    assert not store.kv_delete("a", "k")
    assert store.kv_get("b", "k") == b"22"


def test_kv_quotas_count_keys_and_bytes_and_keep_the_old_value(store: SqliteStore) -> None:
    assert store.kv_put("a", "one", b"x" * 10, max_keys=2, max_bytes=30).stored
    assert store.kv_put("a", "two", b"y" * 10, max_keys=2, max_bytes=30).stored
    assert store.kv_put("a", "three", b"", max_keys=2, max_bytes=30) == KvWrite(False, 3, 31)
    assert store.kv_put("a", "two", b"z" * 20, max_keys=2, max_bytes=30) == KvWrite(False, 2, 36)
    assert store.kv_get("a", "two") == b"y" * 10
    assert store.kv_put("a", "two", b"z" * 14, max_keys=2, max_bytes=30) == KvWrite(True, 2, 30)
    assert store.kv_put("b", "three", b"", max_keys=2, max_bytes=30).stored, "quotas are per plugin"
    assert store.kv_put("a", "é", b"", max_keys=9, max_bytes=100).total_bytes == 30 + 2, "UTF-8"


def _steps(store: SqliteStore, write: Callable[[], object]) -> int:
    """How much work SQLite did for *write*: hundreds of its virtual machine's
    instructions (a progress handler; a count, not a clock)."""
    ticks = 0

    def tick() -> int:
        nonlocal ticks
        ticks += 1
        return 0

    store._conn.set_progress_handler(tick, 100)
    try:
        write()
    finally:
        store._conn.set_progress_handler(None, 0)
    return ticks


def test_a_kv_write_does_not_read_every_entry_the_plugin_holds(store: SqliteStore) -> None:
    """attack15: each kv_put summed the plugin's rows to check its quota, in the host,
    outside the worker's CPU cap: with its quota full (1,000 keys of 1 KB) 9,000
    ctx.kv.set calls cost the host 9.2 CPU seconds and the worker 0.3. A write now
    costs the same whatever the plugin holds."""
    limits: KvLimits = {"max_keys": 1000, "max_bytes": 1024 * 1024}
    for index in range(1000):
        assert store.kv_put("full", f"k{index}", b"x" * 1000, **limits).stored
    assert store.kv_put("small", "k0", b"x" * 1000, **limits).stored
    full = _steps(store, lambda: store.kv_put("full", "k1", b"y" * 1000, **limits))
    small = _steps(store, lambda: store.kv_put("small", "k0", b"y" * 1000, **limits))
    assert full <= small + 5, (full, small)
    refused = _steps(store, lambda: store.kv_put("full", "new", b"", **limits))
    assert refused <= small + 5, (refused, small)
    assert store.kv_put("full", "new", b"", **limits) == KvWrite(False, 1001, 1_003_893)


def test_kv_quotas_stay_exact_across_connections_deletes_and_claims(state_dir: Path) -> None:
    """Near misses of the above: what another connection (another caplet process)
    wrote counts at this one's next write; deletes, refusals and claims keep the count."""
    limits: KvLimits = {"max_keys": 3, "max_bytes": 100}
    with SqliteStore(state_dir) as ours, SqliteStore(state_dir) as theirs:
        assert ours.kv_put("a", "one", b"x", **limits) == KvWrite(True, 1, 4)
        assert theirs.kv_put("a", "two", b"x" * 10, **limits) == KvWrite(True, 2, 17)
        assert ours.kv_put("a", "three", b"", **limits) == KvWrite(True, 3, 22)
        assert ours.kv_put("a", "four", b"", **limits) == KvWrite(False, 4, 26)
        assert theirs.kv_delete("a", "two")
        assert ours.kv_put("a", "four", b"", **limits) == KvWrite(True, 3, 13)
        assert ours.kv_delete("a", "one")
        assert not ours.kv_delete("a", "one")
        assert ours.kv_put("a", "one", b"y" * 80, **limits) == KvWrite(True, 3, 92)
        assert ours.kv_put("a", "one", b"y" * 90, **limits) == KvWrite(False, 3, 102)
        assert ours.kv_get("a", "one") == b"y" * 80
        # Rows written before places, claimed: they count at the place from then on.
        assert ours.kv_put("b", "old", b"z" * 50, **limits).stored
        assert ours.kv_put("b", "mine", b"", location="/p", **limits) == KvWrite(True, 1, 4)
        assert ours.claim_unlocated("b", "/p") == 1
        assert ours.kv_put("b", "more", b"z" * 50, location="/p", **limits) == KvWrite(
            False, 3, 111
        )


def test_a_kv_write_checks_its_quota_against_the_usage_row(store: SqliteStore) -> None:
    """Schema 10 keeps each plugin's usage in kv_usage, by triggers: a row edited by
    hand to say the quota is full refuses a write that would fit, and doctor names the
    drift with the statements that repair it."""
    limits: KvLimits = {"max_keys": 10, "max_bytes": 1000}
    assert store.kv_put("p", "a", b"x" * 10, location="/srv/p", **limits) == KvWrite(True, 1, 11)
    conn = raw(store.path)
    conn.execute("UPDATE kv_usage SET byte_count = 995 WHERE plugin = 'p'")
    conn.close()
    assert store.kv_put("p", "b", b"y" * 10, location="/srv/p", **limits) == KvWrite(False, 2, 1006)
    (problem,) = store.check()
    assert problem.kind is ProblemKind.RECORD
    assert problem.message == (
        f"state database {store.path}: the ctx.kv usage of plugin 'p' at '/srv/p' says 1 keys "
        "and 995 bytes, but its entries are 1 keys and 11 bytes (table kv_usage was edited "
        "outside caplet), so its quota is checked against the wrong count; with the sqlite3 "
        "shell run: DELETE FROM kv_usage WHERE plugin = 'p' AND location = '/srv/p'; INSERT "
        "INTO kv_usage (plugin, location, key_count, byte_count) VALUES ('p', '/srv/p', 1, 11)"
    )
    conn = raw(store.path)
    for statement in problem.message.split("shell run: ")[1].split("; "):
        conn.execute(statement)
    conn.close()
    assert store.check() == ()
    assert store.kv_put("p", "b", b"y" * 10, location="/srv/p", **limits) == KvWrite(True, 2, 22)


def test_a_version_9_database_counts_the_kv_it_holds(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:10]) == 9
    for key, value in (("a", b"12345"), ("bb", b""), ("c", b"x" * 100)):
        conn.execute(
            "INSERT INTO kv (plugin, location, key, value, updated_at) VALUES ('p', '/x', ?, ?, 1)",
            (key, value),
        )
    conn.close()
    with SqliteStore(state_dir) as store:
        limits: KvLimits = {"max_keys": 4, "max_bytes": 110}
        assert store.kv_put("p", "d", b"", location="/x", **limits) == KvWrite(True, 4, 110)
        assert store.kv_put("p", "e", b"", location="/x", **limits) == KvWrite(False, 5, 111)
        assert store.check() == ()


def test_version_2_databases_gain_the_kv_table(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:3]) == 2
    conn.execute("INSERT INTO quarantine (name, reason, since) VALUES ('weather', 'kept', 1.0)")
    conn.close()
    with SqliteStore(state_dir) as store:
        assert store.get_quarantine("weather") is not None
        assert store.kv_put("weather", "k", b"v", max_keys=1, max_bytes=10).stored
        assert store.kv_get("weather", "k") == b"v"
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_version_3_approvals_keep_working_without_a_version_or_requires(
    state_dir: Path,
) -> None:
    """Schema 4 (issue 14): approvals record the version and requirements approved."""
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:4]) == 3
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict) VALUES ('old', ?, '[\"env.read:A\"]', 1.0, 'LOW', 'approve')",
        ("sha256-" + "a" * 64,),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.capabilities, old.version, old.requires) == (("env.read:A",), None, None)
        store.put_approval(replace(old, name="new", version="1.2.0", requires=("db",)))
        new = store.get_approval("new")
        assert new is not None
        assert (new.version, new.requires) == ("1.2.0", ("db",))
        assert [a.name for a in store.list_approvals()] == ["new", "old"]
        assert store.check() == ()


#: Defaults of every kind a config field has, and a field without one (red-team finding 8).
DEFAULTS = (
    ("root", "/srv/data"),
    ("port", 8443.0),
    ("retries", 3),
    ("verbose", False),
    ("tags", ("a", "b")),
    ("host", None),
)


def test_approval_defaults_round_trip_with_their_types(store: SqliteStore) -> None:
    record = replace(approval(), version="1.0.0", requires=(), defaults=DEFAULTS)
    store.put_approval(record)
    assert store.get_approval("weather") == record
    got = store.get_approval("weather")
    assert got is not None
    assert got.defaults is not None
    assert [type(v) for _, v in got.defaults] == [str, float, int, bool, tuple, type(None)]
    store.put_approval(replace(record, defaults=()))
    again = store.get_approval("weather")
    assert again is not None
    assert again.defaults == (), "no templated capability: recorded as none, not unknown"


def test_approval_hooks_round_trip(store: SqliteStore) -> None:
    record = replace(approval(), version="1.0.0", requires=(), defaults=(), hooks=("a:b", "c"))
    store.put_approval(record)
    assert store.get_approval("weather") == record
    store.put_approval(replace(record, hooks=()))
    again = store.get_approval("weather")
    assert again is not None
    assert again.hooks == (), "no subscription: recorded as none, not unknown"


def test_version_5_approvals_open_without_hooks(state_dir: Path) -> None:
    """Schema 6 (red-team round 4): approvals record the events subscribed to.

    A database of schema 5 opens, its approvals read with ``hooks`` None
    (the consent model then asks again for any subscription), and new
    approvals record them.
    """
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:6]) == 5
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict, version, requires, defaults) VALUES ('old', ?, '[]', 1.0, "
        "'LOW', 'approve', '1.0.0', '[]', '{}')",
        (HASH_A,),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.version, old.requires, old.defaults, old.hooks) == ("1.0.0", (), (), None)
        store.put_approval(replace(old, name="new", hooks=("content:afterSave",)))
        new = store.get_approval("new")
        assert new is not None
        assert new.hooks == ("content:afterSave",)
        assert store.check() == ()
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_approval_agent_text_round_trips_as_written(store: SqliteStore) -> None:
    """Textpin: the text itself, non-ASCII, escapes and newlines included."""
    text = ('description: Ünïcode \\x00 "quoted"', "hints.overview: two\nlines", "")
    record = replace(approval(), version="1.0.0", requires=(), defaults=(), hooks=())
    store.put_approval(replace(record, agent_text=text))
    assert store.get_approval("weather") == replace(record, agent_text=text)
    store.put_approval(replace(record, agent_text=()))
    again = store.get_approval("weather")
    assert again is not None
    assert again.agent_text == (), "recorded as empty, not unknown"


def test_version_6_approvals_open_without_agent_text(state_dir: Path) -> None:
    """Schema 7 (textpin): approvals record the text a plugin sends to the agent.

    A database of schema 6 opens, its approvals read with ``agent_text``
    None (the consent model then asks again for any changed content), and
    new approvals record it.
    """
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:7]) == 6
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict, version, requires, defaults, hooks) VALUES ('old', ?, '[]', 1.0, "
        "'LOW', 'approve', '1.0.0', '[]', '{}', '[]')",
        (HASH_A,),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.version, old.hooks, old.agent_text) == ("1.0.0", (), None)
        store.put_approval(replace(old, name="new", agent_text=("description: d",)))
        new = store.get_approval("new")
        assert new is not None
        assert new.agent_text == ("description: d",)
        assert store.check() == ()
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    conn.close()


def test_version_7_approvals_open_without_a_location(state_dir: Path) -> None:
    """Schema 8 (attack13d): approvals record where the approved plugin was. A database
    of schema 7 opens, its approvals read with ``location`` None (compared with no
    place), and new approvals record it."""
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:8]) == 7
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict, version, requires, defaults, hooks, agent_text) VALUES ('old', ?, '[]', "
        "1.0, 'LOW', 'approve', '1.0.0', '[]', '{}', '[]', '[]')",
        (HASH_A,),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.agent_text, old.location) == ((), None)
        store.put_approval(replace(old, name="new", location="/srv/plugins/old"))
        new = store.get_approval("new")
        assert new is not None
        assert new.location == "/srv/plugins/old"
        assert store.check() == ()
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    conn.close()


def test_version_10_approvals_open_without_programs(state_dir: Path) -> None:
    """Schema 11 (red team round 19): approvals record the files each proc.exec program
    brought. A database of schema 10 opens, its approvals read with ``programs`` None
    (compared with nothing), and new approvals record them."""
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:11]) == 10
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict, version, requires, defaults, hooks, agent_text, location) VALUES ('old', ?, "
        "'[]', 1.0, 'LOW', 'approve', '1.0.0', '[]', '{}', '[]', '[]', '/srv/plugins/old')",
        (HASH_A,),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.location, old.programs) == ("/srv/plugins/old", None)
        shown = ("proc.exec:tool: /opt/tool, a script for /usr/bin/python3",)
        store.put_approval(replace(old, name="new", programs=shown))
        new = store.get_approval("new")
        assert new is not None
        assert new.programs == shown
        assert store.check() == ()
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    conn.close()


def test_version_8_kv_and_quarantine_go_to_the_place_their_approval_records(
    state_dir: Path,
) -> None:
    """Schema 9 (decide14): ctx.kv entries and quarantines belong to a plugin's name *and*
    place. A schema 8 database opens; a row of a plugin whose approval records its place
    goes to that place (the plugin that wrote it, in the obvious case); a row of a plugin
    whose approval records none (or that has none) stays unlocated: read by no plugin
    until one claims it, and such a quarantine stops every plugin of its name."""
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:9]) == 8
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict, location) VALUES ('placed', ?, '[]', 1.0, 'LOW', 'approve', '/x/notes'), "
        "('unplaced', ?, '[]', 1.0, 'LOW', 'approve', NULL)",
        (HASH_A, HASH_B),
    )
    for name in ("placed", "unplaced", "unapproved"):
        conn.execute(
            "INSERT INTO kv (plugin, key, value, updated_at) VALUES (?, 'token', ?, 1.0)",
            (name, name.encode()),
        )
        conn.execute(
            "INSERT INTO quarantine (name, reason, since) VALUES (?, 'tripped', 2.0)", (name,)
        )
    conn.close()
    with SqliteStore(state_dir) as store:
        assert store.kv_get("placed", "token", location="/x/notes") == b"placed"
        assert store.kv_get("placed", "token", location="/y/notes") is None
        assert store.kv_get("unplaced", "token", location="/x/notes") is None
        assert store.kv_get("unplaced", "token") == b"unplaced", "unlocated, not lost"
        assert store.get_quarantine("placed", "/x/notes") == QuarantineRecord(
            "placed", "tripped", 2.0, "/x/notes"
        )
        assert store.get_quarantine("placed", "/y/notes") is None
        # An unlocated quarantine stops every plugin of its name (the safe answer).
        assert store.get_quarantine("unplaced", "/y/notes") == QuarantineRecord(
            "unplaced", "tripped", 2.0
        )
        assert store.claim_unlocated("unplaced", "/x/notes") == 1
        assert store.kv_get("unplaced", "token", location="/x/notes") == b"unplaced"
        assert store.claim_unlocated("unplaced", "/y/notes") == 0, "claimed once"
        assert store.delete_quarantine("unapproved", "/z/notes"), "a release lifts it"
        assert store.get_quarantine("unapproved", "/z/notes") is None
        # What is still unclaimed, `caplet doctor --check-state` names, as warnings.
        warnings = store.check()
        assert [(w.kind, w.damaged) for w in warnings] == [(ProblemKind.UNCLAIMED, False)] * 2
        assert (
            "1 ctx.kv entries of plugin 'unapproved' were written before caplet kept plugin "
            "places and belong to no plugin yet (no plugin reads them); they go to the plugin "
            "enabled on the approval of that name: caplet approve unapproved where it is, then "
            "enable it"
        ) in warnings[0].message
        assert (
            "the quarantine of plugin 'unplaced' was recorded before caplet kept plugin "
            "places, so it stops every plugin of that name; caplet release unplaced when the "
            "cause is fixed"
        ) in warnings[1].message
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    conn.close()


def test_a_claim_never_overwrites_a_value_the_plugin_holds_at_its_place(
    state_dir: Path,
) -> None:
    with SqliteStore(state_dir) as store:
        limits: KvLimits = {"max_keys": 9, "max_bytes": 99}
        store.kv_put("notes", "k", b"old", **limits)
        store.kv_put("notes", "only-old", b"1", **limits)
        store.kv_put("notes", "k", b"new", location="/x/notes", **limits)
        assert store.claim_unlocated("notes", "/x/notes") == 1
        assert store.kv_get("notes", "k", location="/x/notes") == b"new"
        assert store.kv_keys("notes", location="/x/notes") == ["k", "only-old"]
        assert store.claim_unlocated("notes", "") == 0


def test_version_4_approvals_open_without_defaults(state_dir: Path) -> None:
    """Schema 5 (red-team finding 8): approvals record the defaults behind templates.

    A database written by a caplet of schema 4 opens, its approvals read
    with ``defaults`` None (the consent model then asks again for a grant
    that takes a default), and new approvals record them.
    """
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:5]) == 4
    conn.execute(
        "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
        "verdict, version, requires) VALUES ('old', ?, '[\"fs.read:${config.root}\"]', 1.0, "
        "'LOW', 'approve', '1.0.0', '[]')",
        (HASH_A,),
    )
    conn.close()
    with SqliteStore(state_dir) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.capabilities, old.version, old.requires, old.defaults) == (
            ("fs.read:${config.root}",),
            "1.0.0",
            (),
            None,
        )
        store.put_approval(replace(old, name="new", defaults=(("root", "/srv/data"),)))
        new = store.get_approval("new")
        assert new is not None
        assert new.defaults == (("root", "/srv/data"),)
        assert store.check() == ()
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    conn.close()


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("version", "x'00'", "version is not text"),
        ("requires", "'not json'", "requires is not JSON"),
        ("requires", "'[1]'", "requires is not a JSON array of strings"),
        ("defaults", "x'00'", "defaults is not text"),
        ("defaults", "'not json'", "defaults is not JSON"),
        ("defaults", "'[1]'", "defaults is not a JSON object of config field names to defaults"),
        ("defaults", "'{\"root\": {}}'", "defaults holds dict '{}', not a config value"),
        ("defaults", "'{\"tags\": [[1]]}'", "defaults holds list '[[1]]', not a config value"),
        ("hooks", "'not json'", "hooks is not JSON"),
        ("hooks", "'[\"a\", 1]'", "hooks is not a JSON array of strings"),
        ("agent_text", "'not json'", "agent_text is not JSON"),
        ("agent_text", "'{}'", "agent_text is not a JSON array of strings"),
    ],
)
def test_undecodable_approval_version_or_requires(
    store: SqliteStore, column: str, value: str, problem: str
) -> None:
    store.put_approval(
        ApprovalRecord("p", "sha256-" + "b" * 64, (), 1.0, RiskLevel.LOW, Verdict.APPROVE)
    )
    conn = raw(store.path)
    conn.execute(f"UPDATE approvals SET {column} = {value}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=re.escape(problem)):
        store.get_approval("p")


def test_undecodable_kv_row(store: SqliteStore) -> None:
    store.kv_put("a", "k", b"v", max_keys=1, max_bytes=10)
    conn = raw(store.path)
    conn.execute("UPDATE kv SET value = 'text'")
    conn.close()
    with pytest.raises(
        StoreError, match=r"row 'a/k' of table kv is invalid \(value is not a blob\)"
    ):
        store.kv_get("a", "k")


def test_decisions_filter_by_time_verdict_and_action(store: SqliteStore) -> None:
    for at, plugin, action, allowed in (
        (10.0, "a", "http", False),
        (20.0, "a", "call", True),
        (30.0, "b", "http", True),
        (40.0, "a", "http", True),
    ):
        store.log_decision(
            Decision(at=at, plugin=plugin, action=action, target="t", allowed=allowed)
        )
    assert [d.at for d in store.decisions(since=20.0)] == [40.0, 30.0, 20.0]
    assert [d.at for d in store.decisions(allowed=False)] == [10.0]
    assert [d.at for d in store.decisions("a", action="http")] == [40.0, 10.0]
    assert [d.at for d in store.decisions("a", since=15.0, allowed=True, action="call")] == [20.0]
    assert store.decisions(action="nothing") == []


def test_prune_decisions_by_age_and_count(store: SqliteStore) -> None:
    for n in range(6):
        store.log_decision(
            Decision(at=float(n), plugin="p", action="a", target=str(n), allowed=True)
        )
    assert store.decisions_span() == (6, 0.0)
    assert store.prune_decisions(before=2.0, keep=100) == 2
    assert store.prune_decisions(before=0.0, keep=3) == 1
    assert [d.target for d in store.decisions()] == ["5", "4", "3"]
    assert store.decisions_span() == (3, 3.0)
    with pytest.raises(StoreError, match="keep 0 rows or more"):
        store.prune_decisions(before=0.0, keep=-1)


def assert_retention_keeps_refusals(store: TrustStore) -> None:
    """Beyond max_rows the oldest allowed rows go first; refusals and the policy's rows
    stay until they alone fill the log (red-team round 3: evidence erasure)."""
    store.log_decision(
        Decision(at=1.0, plugin="(policy)", action="policy", target="f", allowed=True)
    )
    store.log_decision(
        Decision(at=2.0, plugin="p", action="http", target="refused-1", allowed=False)
    )
    for n in range(10):
        store.log_decision(
            Decision(at=3.0 + n, plugin="p", action="host.call", target=f"ok-{n}", allowed=True)
        )
    store.log_decision(
        Decision(at=20.0, plugin="p", action="http", target="refused-2", allowed=False)
    )
    assert store.prune_decisions(before=0.0, keep=5) == 8
    kept = [d.target for d in reversed(store.decisions(None, 100))]
    assert kept == ["f", "refused-1", "ok-8", "ok-9", "refused-2"]
    # Refusals alone over the limit: then the oldest of them go too.
    assert store.prune_decisions(before=0.0, keep=1) == 4
    assert [d.target for d in store.decisions(None, 100)] == ["refused-2"]


def test_retention_deletes_allowed_rows_before_refusals(store: SqliteStore) -> None:
    assert_retention_keeps_refusals(store)


def test_version_11_approvals_are_told_their_review_from_the_audits_of_their_content(
    state_dir: Path,
) -> None:
    """Schema 12 (steer33): approvals record what reviewed the approved content. A real
    file written at schema 11 opens, and each approval's review is told from the audits
    cached of its content: the one model that audited it, static-only when only a static
    audit is cached; several models' audits or none leave it unrecorded (None: vouching
    for no other content's review). New approvals record theirs."""
    hashes = {name: "sha256-" + digit * 64 for name, digit in zip("mstn", "1234", strict=True)}
    state_dir.mkdir(mode=0o700)
    path = state_dir / DB_FILENAME
    conn = raw(path)
    assert migrate(conn, path, MIGRATIONS[:12]) == 11
    cached = {
        "m": ("", "openai:m"),  # a static audit and one model's: the model read it
        "s": ("",),  # a static audit alone: no model ever read it
        "t": ("openai:m", "anthropic:c"),  # two models: which one the person read is unknown
        "n": (),  # no audit cached: unknown
    }
    for name, models in cached.items():
        conn.execute(
            "INSERT INTO approvals (name, content_hash, capabilities, approved_at, risk_level, "
            "verdict, version, requires, defaults, hooks, agent_text, location, programs) "
            "VALUES (?, ?, '[]', 1.0, 'LOW', 'approve', '1.0.0', '[]', '{}', '[]', '[]', "
            "'/srv/plugins/x', '[]')",
            (name, hashes[name]),
        )
        for model in models:
            provider, _, model_name = model.partition(":")
            made = replace(
                audit(hashes[name]),
                plugin=name,
                provider=provider or "static-only",
                model=model_name,
            )
            conn.execute(
                "INSERT INTO audits (content_hash, model, plugin, created_at, payload) "
                "VALUES (?, ?, ?, 1.0, ?)",
                (hashes[name], model, name, audit_to_json(made)),
            )
    conn.close()
    with SqliteStore(state_dir) as store:
        reviews = {a.name: a.review for a in store.list_approvals()}
        assert reviews == {"m": "openai:m", "s": "static-only", "t": None, "n": None}
        old = store.get_approval("s")
        assert old is not None
        store.put_approval(replace(old, name="new", review="anthropic:c"))
        new = store.get_approval("new")
        assert new is not None
        assert new.review == "anthropic:c"
        assert store.check() == ()
    conn = raw(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
    conn.close()
