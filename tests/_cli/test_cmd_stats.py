"""``caplet stats``: another process's metrics, for people and for programs."""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli.clikit import caplet, document
from tests.conftest import PluginFactory


def test_stats_show_what_an_earlier_command_did(
    tmp_path: Path, plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    where = ("--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir))
    empty = caplet("stats", *where, cwd=tmp_path)
    assert empty.returncode == 0
    assert "no metrics in" in empty.stdout
    called = caplet("call", *where, "--enable", "p", "--yes", "main.run", "1", cwd=tmp_path)
    assert called.returncode == 0, called.stderr
    failed = caplet("call", *where, "--enable", "p", "--yes", "main.nope", cwd=tmp_path)
    assert failed.returncode != 0

    stats = document(caplet("stats", *where, "--json", cwd=tmp_path))
    assert stats["ok"] is True
    hosts = stats["hosts"]
    assert len(hosts) == 2
    assert all(not host["live"] for host in hosts)
    assert {host["command"] for host in hosts} == {"caplet call"}
    outcomes = [(p["calls"], p["failures"]) for h in hosts for p in h["plugins"]]
    assert sorted(outcomes, key=str) == [(1, {"rejected": 1}), (1, {})]
    row = next(p for h in hosts for p in h["plugins"] if not p["failures"])
    assert row["plugin"] == "p"
    assert sum(row["latency"]["counts"]) == 1
    assert row["cpu_s"] >= 0
    assert row["peak_memory_bytes"] > 0
    assert row["broker_requests"] == {"allowed": 0, "denied": 0}

    human = caplet("stats", *where, cwd=tmp_path)
    assert human.returncode == 0
    assert "caplet call (ended" in human.stdout
    assert "rejected 1" in human.stdout
    live = document(caplet("stats", *where, "--json", "--live", cwd=tmp_path))
    assert live["hosts"] == []
    other = document(caplet("stats", *where, "--json", "--plugin", "q", cwd=tmp_path))
    assert all(host["plugins"] == [] for host in other["hosts"])


def test_a_malformed_or_hostile_snapshot_is_shown_safely(tmp_path: Path, state_dir: Path) -> None:
    # A snapshot is caplet's own file, but `caplet stats` reads whatever is in the folder
    # (a newer caplet's, a damaged one): odd values must not end in a traceback, and no
    # text in it may drive the terminal.
    (state_dir / "stats").mkdir(parents=True)
    hostile = {
        "format": 1,
        "pid": 1,
        "start_ticks": None,
        "command": "caplet \x1b]0;owned\x07mcp",
        "started_at": 0,
        "updated_at": 0,
        "ended": True,
        "plugins": [
            "not a row",
            {
                "plugin": "p\x1b[2J",
                "calls": "\x1b[31mmany",
                "failures": {"\x1b[5merror": "\x1b[0m", "kind": 1},
                "breaker": "\x1b]8;;https://evil.test\x07open",
                "latency": {"counts": ["x", None]},
                "cpu_s": "fast",
                "peak_memory_bytes": [],
                "broker_requests": {"allowed": "\x1b[1m"},
                "broker_bytes": {"allowed": "lots"},
                "budget": {"cpu_s": {"used": "\x1b[7m", "limit": 1}, "x": "y"},
            },
        ],
    }
    (state_dir / "stats" / "host-1-0.json").write_text(json.dumps(hostile), encoding="utf-8")
    shown = caplet("stats", "--state-dir", str(state_dir), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    assert "\x1b" not in shown.stdout
    assert "\x07" not in shown.stdout
    assert "not a row" not in shown.stdout
    as_json = document(caplet("stats", "--state-dir", str(state_dir), "--json", cwd=tmp_path))
    assert as_json["ok"] is True
