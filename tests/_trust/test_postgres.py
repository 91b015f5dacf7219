"""The PostgreSQL trust store against a real server: the SQLite store's contract, and a fleet's.

Every test gets an empty database of its own on the session's server
(tests/pgserver.py); the restart tests start a server of their own.
"""

from __future__ import annotations

import concurrent.futures
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from caplet._audit._model import STATIC_ONLY
from caplet._errors import StoreError
from caplet._trust._codec import audit_to_json
from caplet._trust._pg_schema import MIGRATIONS, SCHEMA_VERSION
from caplet._trust._postgres import PostgresStore
from caplet._trust._problems import ProblemKind
from caplet._trust._store import Decision, KvWrite, QuarantineRecord, TrustStore
from tests._trust.storekit import HASH_A, HASH_B, KvLimits, approval
from tests._trust.test_sqlite import (
    DEFAULTS,
    MODEL,
    assert_retention_keeps_refusals,
    audit,
)
from tests.pgserver import PgServer, running_server


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


def sql(url: str, statement: str) -> list[tuple[object, ...]]:
    """Run one statement as the superuser, outside caplet (a hand edit)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement.encode("utf-8"))
        return cursor.fetchall() if cursor.description else []


def test_is_a_trust_store(store: PostgresStore) -> None:
    typed: TrustStore = store
    assert typed.list_approvals() == []


# -- round trips -----------------------------------------------------------------------------


def test_approvals_round_trip_and_replace(store: PostgresStore) -> None:
    record = replace(approval(), version="1.2.0", requires=("base", "util"), defaults=DEFAULTS)
    store.put_approval(record)
    assert store.get_approval("weather") == record
    legacy = approval(content_hash=HASH_B)  # version and requires None: a legacy approval
    store.put_approval(legacy)
    assert store.get_approval("weather") == legacy
    store.put_approval(approval("Zeta"))
    store.put_approval(approval("alpha"))
    # Code point order whatever the database's collation: "Z" before "a" before "w".
    assert [a.name for a in store.list_approvals()] == ["Zeta", "alpha", "weather"]
    assert store.delete_approval("weather") is True
    assert store.delete_approval("weather") is False
    assert store.get_approval("weather") is None


def test_audits_are_keyed_by_hash_and_model(store: PostgresStore) -> None:
    static = replace(audit(summary="static"), provider=STATIC_ONLY, model="")
    by_model = audit(summary="deep")
    store.put_audit(static)
    store.put_audit(by_model)
    assert store.get_audit(HASH_A) == static
    assert store.get_audit(HASH_A, MODEL) == by_model
    assert store.get_audit(HASH_B) is None
    store.put_audit(replace(by_model, summary="again"))
    again = store.get_audit(HASH_A, MODEL)
    assert again is not None
    assert again.summary == "again"


def test_quarantine_round_trip(store: PostgresStore) -> None:
    store.put_quarantine(QuarantineRecord("b", "tripped", 1.5))
    store.put_quarantine(QuarantineRecord("a", "by hand", 2.0))
    assert store.get_quarantine("b") == QuarantineRecord("b", "tripped", 1.5)
    assert [q.name for q in store.list_quarantine()] == ["a", "b"]
    assert store.delete_quarantine("a") is True
    assert store.delete_quarantine("a") is False


def test_decision_log_newest_first_with_filter_and_limit(store: PostgresStore) -> None:
    for index in range(5):
        plugin = "a" if index % 2 == 0 else "b"
        store.log_decision(Decision(float(index), plugin, "call", f"t{index}", index % 3 == 0))
    everything = store.decisions()
    assert [d.target for d in everything] == ["t4", "t3", "t2", "t1", "t0"]
    assert [d.allowed for d in everything] == [False, True, False, False, True]
    assert all(isinstance(d.allowed, bool) and d.id > 0 for d in everything)
    assert [d.target for d in store.decisions("a", limit=2)] == ["t4", "t2"]
    assert store.decisions(limit=0) == []
    with pytest.raises(StoreError, match="limit must be 0 or more"):
        store.decisions(limit=-1)


def test_kv_round_trip_prefix_and_order(store: PostgresStore) -> None:
    limits: KvLimits = {"max_keys": 10, "max_bytes": 1000}
    for key in ("b", "a%", "a_", "A", "ab"):
        assert store.kv_put("p", key, key.encode() * 2, **limits).stored
    store.kv_put("other", "a1", b"x", **limits)
    assert store.kv_get("p", "ab") == b"abab"
    assert store.kv_get("other", "ab") is None
    # Code point order; % and _ in a prefix are literal characters.
    assert store.kv_keys("p") == ["A", "a%", "a_", "ab", "b"]
    assert store.kv_keys("p", "a%") == ["a%"]
    assert store.kv_keys("p", "a_") == ["a_"]
    assert store.kv_delete("p", "ab") is True
    assert store.kv_delete("p", "ab") is False
    assert store.kv_get("p", "\x00binary") is None


def test_kv_quota_counts_the_replaced_value_once(store: PostgresStore) -> None:
    assert store.kv_put("p", "k", b"12345", max_keys=1, max_bytes=6).stored
    replaced = store.kv_put("p", "k", b"abcde", max_keys=1, max_bytes=6)
    assert (replaced.stored, replaced.keys, replaced.total_bytes) == (True, 1, 6)
    refused = store.kv_put("p", "k2", b"x", max_keys=1, max_bytes=100)
    assert (refused.stored, refused.keys) == (False, 2)
    over = store.kv_put("p", "k", b"abcdef", max_keys=1, max_bytes=6)
    assert (over.stored, over.total_bytes) == (False, 7)
    assert store.kv_get("p", "k") == b"abcde"


def test_kv_quota_holds_across_concurrent_writers(pg_url: str) -> None:
    """Eight connections racing to fill one plugin's quota never take it over."""
    stores = [PostgresStore(pg_url) for _ in range(4)]
    try:

        def put(index: int) -> bool:
            store = stores[index % len(stores)]
            return store.kv_put("p", f"k{index:02}", b"v" * 7, max_keys=100, max_bytes=50).stored

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            stored = list(pool.map(put, range(24)))
        # Each entry is 3 + 7 = 10 bytes: exactly five fit in 50.
        assert sum(stored) == 5
        assert len(stores[0].kv_keys("p")) == 5
    finally:
        for opened in stores:
            opened.close()


def _usage(url: str) -> dict[tuple[str, str], tuple[int, int]]:
    """caplet.kv_usage as the trigger left it, rows of no entry left out."""
    rows = sql(url, "SELECT plugin, location, key_count, byte_count FROM caplet.kv_usage")
    return {
        (str(plugin), str(location)): (int(str(keys)), int(str(total)))
        for plugin, location, keys, total in rows
        if keys != 0
    }


def _held(url: str) -> dict[tuple[str, str], tuple[int, int]]:
    """What caplet.kv holds per plugin and place, summed by hand."""
    rows = sql(
        url,
        "SELECT plugin, location, count(*), sum(octet_length(key) + octet_length(value)) "
        "FROM caplet.kv GROUP BY plugin, location",
    )
    return {
        (str(plugin), str(location)): (int(str(keys)), int(str(total)))
        for plugin, location, keys, total in rows
    }


def test_a_kv_write_checks_its_quota_against_the_usage_row(
    store: PostgresStore, pg_url: str
) -> None:
    """attack15's open row: each kv_put aggregated all the plugin's rows on the database
    server, 1,000 rows per ctx.kv.set with the quota full. It now reads the plugin's
    kv_usage row: one edited by hand to say the quota is full refuses a write that
    would fit, and doctor names the drift with the statement that repairs it."""
    limits: KvLimits = {"max_keys": 10, "max_bytes": 1000}
    assert store.kv_put("p", "a", b"x" * 10, location="/srv/p", **limits) == KvWrite(True, 1, 11)
    sql(pg_url, "UPDATE caplet.kv_usage SET byte_count = 995 WHERE plugin = 'p'")
    assert store.kv_put("p", "b", b"y" * 10, location="/srv/p", **limits) == KvWrite(False, 2, 1006)
    (problem,) = store.check()
    assert problem.kind is ProblemKind.RECORD
    assert (
        f"PostgreSQL store {store.shown}: the ctx.kv usage of plugin 'p' at '/srv/p' says 1 "
        "keys and 995 bytes, but its entries are 1 keys and 11 bytes (table caplet.kv_usage "
        "was edited outside caplet), so its quota is checked against the wrong count; "
        "with psql run: DELETE FROM caplet.kv_usage WHERE plugin = 'p' AND location = "
        "'/srv/p'; INSERT INTO caplet.kv_usage (plugin, location, key_count, byte_count) "
        "VALUES ('p', '/srv/p', 1, 11)"
    ) == problem.message
    for statement in problem.message.split("with psql run: ")[1].split("; "):
        sql(pg_url, statement)
    assert store.check() == ()
    assert store.kv_put("p", "b", b"y" * 10, location="/srv/p", **limits) == KvWrite(True, 2, 22)


@pytest.mark.parametrize(
    "edit",
    ["DROP TRIGGER kv_usage_track ON caplet.kv", "ALTER TABLE caplet.kv DISABLE TRIGGER ALL"],
)
def test_a_store_without_the_usage_trigger_is_a_schema_problem(
    store: PostgresStore, pg_url: str, edit: str
) -> None:
    """Without it a kv write would no longer count toward its plugin's quota."""
    sql(pg_url, edit)
    (problem,) = store.check()
    assert problem.kind is ProblemKind.SCHEMA
    assert (
        f"PostgreSQL store {store.shown} lacks trigger kv_usage_track on kv of schema version "
        f"{SCHEMA_VERSION}"
    ) in problem.message


def test_the_usage_row_follows_every_kind_of_write(store: PostgresStore, pg_url: str) -> None:
    """Near miss: puts, replacements, refusals, deletes, claims and another node's writes
    all leave kv_usage equal to what kv holds, and the quota exact."""
    limits: KvLimits = {"max_keys": 3, "max_bytes": 100}
    with PostgresStore(pg_url) as theirs:
        assert store.kv_put("a", "one", b"x", **limits) == KvWrite(True, 1, 4)
        assert theirs.kv_put("a", "two", b"x" * 10, **limits) == KvWrite(True, 2, 17)
        assert store.kv_put("a", "three", b"", **limits) == KvWrite(True, 3, 22)
        assert store.kv_put("a", "four", b"", **limits) == KvWrite(False, 4, 26)
        assert theirs.kv_delete("a", "two")
        assert store.kv_put("a", "four", b"", **limits) == KvWrite(True, 3, 13)
        assert store.kv_put("a", "one", b"y" * 80, **limits) == KvWrite(True, 3, 92)
        assert store.kv_put("a", "one", b"y" * 90, **limits) == KvWrite(False, 3, 102)
        assert _usage(pg_url) == _held(pg_url) == {("a", ""): (3, 92)}
        assert store.kv_put("b", "old", b"z" * 50, **limits).stored
        assert store.kv_put("b", "mine", b"", location="/p", **limits) == KvWrite(True, 1, 4)
        assert store.claim_unlocated("b", "/p") == 1
        assert _usage(pg_url) == _held(pg_url)
        assert store.kv_put("b", "more", b"z" * 50, location="/p", **limits) == KvWrite(
            False, 3, 111
        )
        for key in ("one", "three", "four"):
            assert store.kv_delete("a", key)
        assert _usage(pg_url) == _held(pg_url) == {("b", "/p"): (2, 57)}
    assert store.check() == ()


# -- text PostgreSQL cannot hold ---------------------------------------------------------------


def test_nul_in_a_logged_failure_cannot_stop_the_log(store: PostgresStore) -> None:
    """Attack: a plugin puts NUL into its error message. PostgreSQL's text refuses NUL,
    so a store that passed it through would fail every log write about that plugin,
    and with it the breaker's accounting of its failures."""
    store.log_decision(Decision(1.0, "evil", "call", "main.run\x00", False, "boom\x00\x00 end"))
    store.put_quarantine(QuarantineRecord("evil", "last failure: \x00", 2.0))
    (logged,) = store.decisions("evil")
    assert (logged.target, logged.detail) == ("main.run\u2400", "boom\u2400\u2400 end")
    quarantined = store.get_quarantine("evil")
    assert quarantined is not None
    assert quarantined.reason == "last failure: \u2400"


def test_nul_in_a_key_is_a_clear_error(store: PostgresStore) -> None:
    with pytest.raises(StoreError, match=r"holds NUL, which PostgreSQL text cannot hold"):
        store.put_quarantine(QuarantineRecord("a\x00b", "x", 1.0))


# -- identity, versions, migration ------------------------------------------------------------


def test_a_fresh_database_is_migrated_to_the_current_version(
    store: PostgresStore, pg_url: str
) -> None:
    rows = {str(k): v for k, v in sql(pg_url, "SELECT key, value FROM caplet.meta")}
    assert rows == {"application": "caplet", "schema_version": str(SCHEMA_VERSION)}


def test_a_schema_of_another_program_is_refused_untouched(pg_url: str) -> None:
    sql(pg_url, "CREATE SCHEMA caplet")
    sql(pg_url, "CREATE TABLE caplet.approvals (x int)")
    with pytest.raises(StoreError) as info:
        PostgresStore(pg_url)
    message = str(info.value)
    assert "holds a schema 'caplet' that is not caplet's (1 objects and no caplet.meta)" in message
    assert "caplet never changes it" in message
    assert sql(pg_url, "SELECT count(*) FROM caplet.approvals") == [(0,)]
    assert sql(pg_url, "SELECT to_regclass('caplet.meta') IS NULL") == [(True,)]


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    sql(pg_url, "UPDATE caplet.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"written by a newer caplet \(schema version 99, this "):
        PostgresStore(pg_url)


def test_a_version_4_store_is_migrated_and_its_approvals_read_without_defaults(
    pg_url: str,
) -> None:
    """Schema 5 (red-team finding 8) on a store a caplet of schema 4 wrote."""
    with psycopg.connect(pg_url) as conn:
        for statement in MIGRATIONS[4]:
            conn.execute(statement.encode("utf-8"))
        conn.execute("INSERT INTO caplet.meta (key, value) VALUES ('schema_version', '4')")
        conn.execute(
            "INSERT INTO caplet.approvals (name, content_hash, capabilities, approved_at, "
            "risk_level, verdict, version, requires) VALUES ('old', %s, "
            "'[\"fs.read:${config.root}\"]', 1.0, 'LOW', 'approve', '1.0.0', '[]')",
            (HASH_A,),
        )
    with PostgresStore(pg_url) as store:
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
    assert sql(pg_url, "SELECT value FROM caplet.meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]
    assert SCHEMA_VERSION == 12


def test_a_version_5_store_reads_its_approvals_without_hooks(pg_url: str) -> None:
    """Schema 6 (red-team round 4): approvals record the events subscribed to."""
    with psycopg.connect(pg_url) as conn:
        for version in (4, 5):
            for statement in MIGRATIONS[version]:
                conn.execute(statement.encode("utf-8"))
        conn.execute("INSERT INTO caplet.meta (key, value) VALUES ('schema_version', '5')")
        conn.execute(
            "INSERT INTO caplet.approvals (name, content_hash, capabilities, approved_at, "
            "risk_level, verdict, version, requires, defaults) VALUES ('old', %s, '[]', 1.0, "
            "'LOW', 'approve', '1.0.0', '[]', '{}')",
            (HASH_A,),
        )
    with PostgresStore(pg_url) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.version, old.requires, old.defaults, old.hooks) == ("1.0.0", (), (), None)
        store.put_approval(replace(old, name="new", hooks=("content:afterSave",)))
        new = store.get_approval("new")
        assert new is not None
        assert new.hooks == ("content:afterSave",)
        store.put_approval(replace(new, hooks=("a", "b")))
        assert store.get_approval("new") == replace(new, hooks=("a", "b"))
        assert store.check() == ()


def test_a_version_6_store_reads_its_approvals_without_agent_text(pg_url: str) -> None:
    """Schema 7 (textpin): approvals record the text a plugin sends to the agent."""
    with psycopg.connect(pg_url) as conn:
        for version in (4, 5, 6):
            for statement in MIGRATIONS[version]:
                conn.execute(statement.encode("utf-8"))
        conn.execute("INSERT INTO caplet.meta (key, value) VALUES ('schema_version', '6')")
        conn.execute(
            "INSERT INTO caplet.approvals (name, content_hash, capabilities, approved_at, "
            "risk_level, verdict, version, requires, defaults, hooks) VALUES ('old', %s, '[]', "
            "1.0, 'LOW', 'approve', '1.0.0', '[]', '{}', '[]')",
            (HASH_A,),
        )
    with PostgresStore(pg_url) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.version, old.hooks, old.agent_text) == ("1.0.0", (), None)
        text = ('description: Ünïcode "quoted"', "hints.overview: two\nlines")
        store.put_approval(replace(old, name="new", agent_text=text))
        new = store.get_approval("new")
        assert new is not None
        assert new.agent_text == text
        store.put_approval(replace(new, agent_text=()))
        assert store.get_approval("new") == replace(new, agent_text=())
        assert store.check() == ()
    assert sql(pg_url, "SELECT value FROM caplet.meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]


def test_a_version_7_store_reads_its_approvals_without_a_location(pg_url: str) -> None:
    """Schema 8 (attack13d): approvals record where the approved plugin was."""
    with psycopg.connect(pg_url) as conn:
        for version in (4, 5, 6, 7):
            for statement in MIGRATIONS[version]:
                conn.execute(statement.encode("utf-8"))
        conn.execute("INSERT INTO caplet.meta (key, value) VALUES ('schema_version', '7')")
        conn.execute(
            "INSERT INTO caplet.approvals (name, content_hash, capabilities, approved_at, "
            "risk_level, verdict, version, requires, defaults, hooks, agent_text) VALUES "
            "('old', %s, '[]', 1.0, 'LOW', 'approve', '1.0.0', '[]', '{}', '[]', '[]')",
            (HASH_A,),
        )
    with PostgresStore(pg_url) as store:
        old = store.get_approval("old")
        assert old is not None
        assert (old.agent_text, old.location) == ((), None)
        store.put_approval(replace(old, name="new", location="distribution acme-notes"))
        new = store.get_approval("new")
        assert new is not None
        assert new.location == "distribution acme-notes"
        assert store.check() == ()
    assert sql(pg_url, "SELECT value FROM caplet.meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]


def test_a_version_8_store_gives_kv_and_quarantine_the_place_their_approval_records(
    pg_url: str,
) -> None:
    """Schema 9 (decide14): ctx.kv entries and quarantines belong to a plugin's name and
    place; older rows go to the place the approval of that name records, else stay
    unlocated (read by no plugin until one claims them; such a quarantine stops all)."""
    with psycopg.connect(pg_url) as conn:
        for version in (4, 5, 6, 7, 8):
            for statement in MIGRATIONS[version]:
                conn.execute(statement.encode("utf-8"))
        conn.execute("INSERT INTO caplet.meta (key, value) VALUES ('schema_version', '8')")
        conn.execute(
            "INSERT INTO caplet.approvals (name, content_hash, capabilities, approved_at, "
            "risk_level, verdict, location) VALUES "
            "('placed', %s, '[]', 1.0, 'LOW', 'approve', 'distribution acme-notes'), "
            "('unplaced', %s, '[]', 1.0, 'LOW', 'approve', NULL)",
            (HASH_A, HASH_B),
        )
        for name in ("placed", "unplaced"):
            conn.execute(
                "INSERT INTO caplet.kv (plugin, key, value, updated_at) "
                "VALUES (%s, 'token', %s, 1.0)",
                (name, name.encode()),
            )
            conn.execute(
                "INSERT INTO caplet.quarantine (name, reason, since) VALUES (%s, 'tripped', 2.0)",
                (name,),
            )
    with PostgresStore(pg_url) as store:
        placed = "distribution acme-notes"
        assert store.kv_get("placed", "token", location=placed) == b"placed"
        assert store.kv_get("placed", "token", location="/y/notes") is None
        assert store.kv_get("unplaced", "token") == b"unplaced"
        assert store.get_quarantine("placed", placed) == QuarantineRecord(
            "placed", "tripped", 2.0, placed
        )
        assert store.get_quarantine("placed", "/y/notes") is None
        assert store.get_quarantine("unplaced", "/y/notes") == QuarantineRecord(
            "unplaced", "tripped", 2.0
        )
        limits: KvLimits = {"max_keys": 9, "max_bytes": 99}
        assert store.kv_put("unplaced", "token", b"mine", location="/x/notes", **limits).stored
        assert store.kv_put("unplaced", "other", b"1", **limits).stored
        assert store.claim_unlocated("unplaced", "/x/notes") == 1, "never over its own value"
        assert store.kv_get("unplaced", "token", location="/x/notes") == b"mine"
        assert store.kv_keys("unplaced", location="/x/notes") == ["other", "token"]
        warnings = store.check()
        assert [p.kind for p in warnings] == [ProblemKind.UNCLAIMED] * 3
        # An installed plugin's place without its environment (attack15) is claimed too.
        assert (
            "1 ctx.kv entries of plugin 'placed' were stored at 'distribution acme-notes' "
            "before caplet kept an installed plugin's environment"
        ) in warnings[0].message
        assert store.delete_quarantine("unplaced", "/y/notes")
        assert store.get_quarantine("unplaced", "/y/notes") is None
        assert store.kv_delete("unplaced", "token"), "the unlocated one, never claimed"
        here = f"{placed} in /srv/app/.venv"
        assert store.claim_unlocated("placed", here, from_location=placed) == 1
        assert store.kv_get("placed", "token", location=here) == b"placed"
        # Schema 10 counted the rows the migration found, and the trigger every write since.
        assert _usage(pg_url) == _held(pg_url)
        assert store.check() == ()
    assert sql(pg_url, "SELECT value FROM caplet.meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]


def test_undecodable_agent_text_is_a_record_problem(store: PostgresStore, pg_url: str) -> None:
    store.put_approval(approval())
    sql(pg_url, "UPDATE caplet.approvals SET agent_text = '[1]'")
    (problem,) = store.check()
    assert problem.kind is ProblemKind.RECORD
    assert "agent_text is not a JSON array of strings" in problem.message
    with pytest.raises(StoreError, match="re-approve it"):
        store.get_approval("weather")


def test_undecodable_defaults_are_a_record_problem(store: PostgresStore, pg_url: str) -> None:
    store.put_approval(approval())
    sql(pg_url, "UPDATE caplet.approvals SET defaults = '[1]'")
    (problem,) = store.check()
    assert problem.kind is ProblemKind.RECORD
    assert "defaults is not a JSON object of config field names to defaults" in problem.message
    with pytest.raises(StoreError, match="re-approve it"):
        store.get_approval("weather")


@pytest.mark.parametrize("value", ["'NaN'", "'Infinity'", "1e300", "-5"])
def test_a_decision_time_caplet_never_wrote_is_a_record_problem(
    store: PostgresStore, pg_url: str, value: str
) -> None:
    # DOUBLE PRECISION holds NaN and infinities; `caplet log` showed such a time with
    # time.localtime and raised OverflowError or ValueError (exit 70)
    store.log_decision(Decision(at=1.0, plugin="weather", action="call", target="t", allowed=True))
    sql(pg_url, f"UPDATE caplet.decisions SET at = {value}")
    (problem,) = store.check()
    assert problem.kind is ProblemKind.RECORD
    assert "of table decisions is invalid (a column holds a value of the wrong type, or a " in (
        problem.message
    )
    with pytest.raises(StoreError, match="time caplet did not write"):
        store.decisions()
    with pytest.raises(StoreError, match=r"row 'min\(at\)' of table decisions is invalid"):
        store.decisions_span()


def test_nodes_opening_a_fresh_database_at_once_migrate_it_once(pg_url: str) -> None:
    """Six processes open the same empty database together; one creates the schema."""
    script = textwrap.dedent(
        f"""
        from caplet._trust._postgres import PostgresStore
        with PostgresStore({pg_url!r}) as store:
            store.log_decision(__import__("caplet._trust._store", fromlist=["x"]).Decision(
                1.0, "p", "open", "t", True))
        """
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, errors
    assert sql(pg_url, "SELECT count(*) FROM caplet.decisions") == [(6,)]


# -- doctor --------------------------------------------------------------------------------------


def test_check_of_a_healthy_store_finds_nothing(store: PostgresStore) -> None:
    store.put_approval(approval())
    store.put_audit(audit())
    store.put_quarantine(QuarantineRecord("weather", "why", 1.0, "/p/weather", "sha256-x"))
    store.kv_put("weather", "k", b"v", max_keys=1, max_bytes=9, location="/p/weather")
    assert store.check() == ()


def test_check_reports_each_hand_edited_record(store: PostgresStore, pg_url: str) -> None:
    store.put_approval(approval())
    store.put_audit(audit())
    sql(pg_url, "UPDATE caplet.approvals SET capabilities = 'not json'")
    sql(pg_url, "UPDATE caplet.audits SET payload = '{}'")
    problems = store.check()
    assert [p.kind for p in problems] == [ProblemKind.RECORD, ProblemKind.RECORD]
    assert "row 'weather' of table approvals is invalid (capabilities is not JSON)" in (
        problems[0].message
    )
    assert f"row '{HASH_A} by {MODEL}' of table audits is invalid" in problems[1].message
    assert problems[0].message.startswith(f"PostgreSQL store {store.shown}: ")
    with pytest.raises(StoreError, match="re-approve it"):
        store.get_approval("weather")


def test_check_reports_a_dropped_column(store: PostgresStore, pg_url: str) -> None:
    sql(pg_url, "ALTER TABLE caplet.kv DROP COLUMN updated_at")
    (problem,) = store.check()
    assert problem.kind is ProblemKind.SCHEMA
    assert f"lacks kv.updated_at of schema version {SCHEMA_VERSION}" in problem.message


# -- a server that goes away --------------------------------------------------------------------


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    url = f"postgresql://caplet@/caplet?host={tmp_path}"
    with pytest.raises(StoreError) as info:
        PostgresStore(url, wait_s=1.0)
    message = str(info.value)
    assert f"PostgreSQL store {url} cannot be reached while opening" in message
    assert "No such file or directory" in message
    assert "nothing was changed" in message
    assert f"pg_isready -d '{url}'" in message


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    with running_server() as server:
        yield server


def test_restart_between_operations_is_invisible(own_server: PgServer) -> None:
    url = own_server.new_database()
    with PostgresStore(url) as store:
        store.put_approval(approval())
        own_server.restart()
        # The pool's connections died with the server: the first use reconnects.
        assert store.get_approval("weather") == approval()
        store.log_decision(Decision(1.0, "weather", "call", "t", True))
        assert len(store.decisions()) == 1


def test_server_down_then_back_loses_nothing(own_server: PgServer) -> None:
    url = own_server.new_database()
    with PostgresStore(url, wait_s=1.0) as store:
        store.put_approval(approval())
        store.kv_put("weather", "k", b"v", max_keys=5, max_bytes=100)
        own_server.stop(mode="immediate")  # like a crash: no clean shutdown
        with pytest.raises(StoreError) as info:
            store.put_quarantine(QuarantineRecord("weather", "why", 1.0))
        message = str(info.value)
        assert f"PostgreSQL store {url} cannot be reached while quarantining 'weather'" in message
        assert "caplet reconnects by itself" in message
        with pytest.raises(StoreError, match="cannot be reached while reading the approval"):
            store.get_approval("weather")
        own_server.start()
        assert store.get_approval("weather") == approval()
        assert store.kv_get("weather", "k") == b"v"
        assert store.get_quarantine("weather") is None  # refused while down: never half-written
        store.put_quarantine(QuarantineRecord("weather", "why", 1.0))
        assert store.get_quarantine("weather") is not None


def test_closed_store_says_so(store: PostgresStore) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="was already closed when listing approvals"):
        store.list_approvals()


def test_a_lost_connection_is_logged(
    own_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = own_server.new_database()
    with PostgresStore(url) as store:
        own_server.restart()
        with caplog.at_level(logging.WARNING, logger="caplet.store"):
            assert store.list_quarantine() == []
    assert "connection lost while listing quarantined plugins" in caplog.text


def test_a_lock_held_too_long_by_another_node_is_a_clear_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import caplet._trust._pg_errors as pg_errors
    import caplet._trust._postgres as postgres

    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_S", 0.5)
    monkeypatch.setattr(pg_errors, "LOCK_TIMEOUT_S", 0.5)
    with PostgresStore(pg_url) as store, psycopg.connect(pg_url) as other:
        store.kv_put("p", "k", b"v", max_keys=5, max_bytes=100)
        # Another node is in the middle of writing the same kv entry.
        other.execute("UPDATE caplet.kv SET value = 'x' WHERE plugin = 'p' AND key = 'k'")
        with pytest.raises(StoreError) as info:
            store.kv_delete("p", "k")
        assert "stayed locked for more than 0.5 s while deleting a kv entry of 'p'" in str(
            info.value
        )
        other.rollback()
        assert store.kv_get("p", "k") == b"v"


def test_retention_deletes_allowed_rows_before_refusals(store: PostgresStore) -> None:
    assert_retention_keeps_refusals(store)


def test_a_version_11_store_tells_its_approvals_review_from_the_cached_audits(
    pg_url: str,
) -> None:
    """Schema 12 (steer33) on a store a caplet of schema 11 wrote: each approval's review
    is told from the audits cached of its content, as on SQLite (one model: that model;
    a static audit alone: static-only; several models or none: None)."""
    hashes = {name: "sha256-" + digit * 64 for name, digit in zip("mstn", "1234", strict=True)}
    cached = {"m": ("", "openai:m"), "s": ("",), "t": ("openai:m", "anthropic:c"), "n": ()}
    with psycopg.connect(pg_url) as conn:
        for version in range(4, 12):
            for statement in MIGRATIONS[version]:
                conn.execute(statement.encode("utf-8"))
        conn.execute("INSERT INTO caplet.meta (key, value) VALUES ('schema_version', '11')")
        for name, models in cached.items():
            conn.execute(
                "INSERT INTO caplet.approvals (name, content_hash, capabilities, approved_at, "
                "risk_level, verdict, version, requires, defaults, hooks, agent_text, location, "
                "programs) VALUES (%s, %s, '[]', 1.0, 'LOW', 'approve', '1.0.0', '[]', '{}', "
                "'[]', '[]', '/srv/plugins/x', '[]')",
                (name, hashes[name]),
            )
            for model in models:
                provider, _, model_name = model.partition(":")
                made = replace(
                    audit(hashes[name]),
                    plugin=name,
                    provider=provider or STATIC_ONLY,
                    model=model_name,
                )
                conn.execute(
                    "INSERT INTO caplet.audits (content_hash, model, plugin, created_at, "
                    "payload) VALUES (%s, %s, %s, 1.0, %s)",
                    (hashes[name], model, name, audit_to_json(made)),
                )
    with PostgresStore(pg_url) as store:
        reviews = {a.name: a.review for a in store.list_approvals()}
        assert reviews == {"m": "openai:m", "s": STATIC_ONLY, "t": None, "n": None}
        old = store.get_approval("s")
        assert old is not None
        store.put_approval(replace(old, name="new", review="anthropic:c"))
        new = store.get_approval("new")
        assert new is not None
        assert new.review == "anthropic:c"
        assert store.check() == ()
    assert sql(pg_url, "SELECT value FROM caplet.meta WHERE key = 'schema_version'") == [("12",)]
