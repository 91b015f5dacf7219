"""``caplet stats``: another process's metrics, for people and for programs."""

from __future__ import annotations

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
