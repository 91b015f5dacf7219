"""doctor --check-state and log, as a user runs them (issue 15)."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from tests._cli.clikit import caplet, document


def test_an_empty_database_is_damage_exit_3_and_stays_as_it_was(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert caplet("log", "--state-dir", str(state), cwd=tmp_path).returncode == 0
    db = state / "caplet.db"
    db.write_bytes(b"")
    for side in ("caplet.db-wal", "caplet.db-shm"):
        (state / side).unlink(missing_ok=True)
    checked = caplet("doctor", "--check-state", "--state-dir", str(state), "--json", cwd=tmp_path)
    assert checked.returncode == 3, checked.stderr
    report = document(checked)
    assert report["ok"] is False
    assert report["error"]["type"] == "StoreError"
    assert [p["kind"] for p in report["problems"]] == ["corrupt"]
    assert "is empty (0 bytes) and has no write-ahead log" in report["problems"][0]["message"]
    used = caplet("log", "--state-dir", str(state), "--json", cwd=tmp_path)
    assert used.returncode == 3
    assert document(used)["error"]["type"] == "StoreError"
    assert db.read_bytes() == b""


def test_log_filters_by_plugin_time_verdict_and_action(tmp_path: Path) -> None:
    from caplet._trust._sqlite import SqliteStore
    from caplet._trust._store import Decision

    state = tmp_path / "state"
    now = time.time()
    with SqliteStore(state) as store:
        for at, plugin, action, allowed in (
            (now - 40 * 86_400, "a", "http", False),
            (now - 3600, "a", "call", True),
            (now - 60, "b", "http", False),
        ):
            store.log_decision(
                Decision(at=at, plugin=plugin, action=action, target="t", allowed=allowed)
            )

    def shown(*options: str) -> list[tuple[str, str]]:
        result = caplet("log", "--state-dir", str(state), *options, "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return [(d["plugin"], d["action"]) for d in document(result)["decisions"]]

    assert shown("--decision", "denied") == [("b", "http"), ("a", "http")]
    assert shown("--plugin", "a") == [("a", "call"), ("a", "http")]
    assert shown("a", "--action", "http") == [("a", "http")]
    day = datetime.fromtimestamp(now - 10 * 86_400).date().isoformat()
    assert shown("--since", day) == [("b", "http"), ("a", "call")]
    assert shown("--since", "30m") == [("b", "http")]
    assert shown("--since", "2h", "--decision", "allowed") == [("a", "call")]
    assert len(shown("--since", "99999w")) == 3
    for bad in ("yesterday", "-5m", "2026-13-01"):
        refused = caplet("log", "--state-dir", str(state), "--since", bad, "--json", cwd=tmp_path)
        assert refused.returncode == 2
        assert document(refused)["error"]["message"].startswith(f"--since {bad!r}: expected")
    both = caplet("log", "a", "--plugin", "b", "--state-dir", str(state), cwd=tmp_path)
    assert both.returncode == 2


def test_a_logged_time_past_year_9999_is_damage_exit_3_not_an_internal_error(
    tmp_path: Path,
) -> None:
    # `caplet log` showed the row with time.localtime(1e308) and ended in an
    # OverflowError (exit 70); a log whose every time is text made retention's span
    # raise ValueError (exit 70 from every command that opens the store)
    import sqlite3

    from caplet._trust._sqlite import SqliteStore
    from caplet._trust._store import Decision

    state = tmp_path / "state"
    with SqliteStore(state) as store:
        store.log_decision(
            Decision(at=time.time(), plugin="a", action="call", target="t", allowed=True)
        )
    for value in ("1e308", "x'ff00fe'"):
        conn = sqlite3.connect(state / "caplet.db")
        conn.execute(f"UPDATE decisions SET at = {value}")
        conn.commit()
        conn.close()
        shown = caplet("log", "--state-dir", str(state), cwd=tmp_path)
        assert shown.returncode == 3, (value, shown.stderr)
        assert "internal error" not in shown.stderr
        assert "of table decisions is invalid" in " ".join(shown.stderr.split()), shown.stderr
        assert "delete that row with the sqlite3 shell" in " ".join(shown.stderr.split())
