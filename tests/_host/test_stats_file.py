"""Snapshots for ``caplet stats``: written by a host, read by another process."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from caplet import PluginHost
from caplet._host._stats_file import KEEP_ENDED, STATS_DIR, StatsPublisher, read_snapshots
from tests.conftest import PluginFactory


def _publisher(state_dir: Path, plugins: list[dict[str, Any]]) -> StatsPublisher:
    return StatsPublisher(state_dir, lambda: plugins, interval_s=3600.0, started_at=1.0)


def test_a_live_host_is_live_and_an_ended_one_keeps_its_last_numbers(state_dir: Path) -> None:
    rows = [{"plugin": "p", "calls": 1}]
    publisher = _publisher(state_dir, rows)
    publisher.publish()
    (live,) = read_snapshots(state_dir)
    assert live.live
    assert live.pid == os.getpid()
    assert live.plugins == rows
    rows.append({"plugin": "q", "calls": 2})
    publisher.close()
    (ended,) = read_snapshots(state_dir)
    assert not ended.live
    assert [p["plugin"] for p in ended.plugins] == ["p", "q"]


def test_a_reused_pid_is_not_mistaken_for_the_host(state_dir: Path) -> None:
    directory = state_dir / STATS_DIR
    directory.mkdir(parents=True)
    document = {
        "format": 1,
        "pid": os.getpid(),
        "start_ticks": 1,  # this process started later: another process had the pid
        "command": "caplet mcp",
        "started_at": 0.0,
        "updated_at": 0.0,
        "ended": False,
        "plugins": [],
    }
    (directory / "host-1-1.json").write_text(json.dumps(document))
    (snapshot,) = read_snapshots(state_dir)
    assert not snapshot.live


def test_foreign_files_are_skipped_and_ended_snapshots_pruned(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = state_dir / STATS_DIR
    directory.mkdir(parents=True)
    (directory / "host-bad-1.json").write_text("{not json")
    (directory / "host-other-1.json").write_text(json.dumps({"format": 99}))
    for index in range(KEEP_ENDED + 5):
        document = {
            "format": 1,
            "pid": 10_000_000 + index,
            "start_ticks": 1,
            "command": "x",
            "started_at": 0.0,
            "updated_at": 2_000_000_000.0 + index,
            "ended": True,
            "plugins": [],
        }
        (directory / f"host-{index}-1.json").write_text(json.dumps(document))
    with caplog.at_level(logging.WARNING, logger="caplet"):
        _publisher(state_dir, [{"plugin": "p"}]).publish()
    assert "skipping" in caplog.text
    snapshots = read_snapshots(state_dir)
    ended = [s for s in snapshots if not s.live]
    assert len(ended) == KEEP_ENDED, "the newest ended ones are kept"
    assert min(s.pid for s in ended) == 10_000_005
    assert sum(1 for s in snapshots if s.live) == 1


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("updated_at", "1" + "0" * 400),  # float() of it: OverflowError in `caplet stats`
        ("pid", "9" * 5000),  # past Python's 4,300 digits: a ValueError inside json
        ("updated_at", "NaN"),
        ("started_at", "-Infinity"),
    ],
)
def test_a_number_caplet_never_writes_skips_the_snapshot(
    state_dir: Path, caplog: pytest.LogCaptureFixture, field: str, text: str
) -> None:
    directory = state_dir / STATS_DIR
    directory.mkdir(parents=True)
    document = {
        "format": 1,
        "pid": 10_000_000,
        "start_ticks": 1,
        "command": "x",
        "started_at": 0.0,
        "updated_at": 2_000_000_000.0,
        "ended": True,
        "plugins": [{"plugin": "p", "calls": 1}],
    }
    (directory / "host-1-1.json").write_text(
        json.dumps(document).replace(
            f'"{field}": {json.dumps(document[field])}', f'"{field}": {text}'
        )
    )
    with caplog.at_level(logging.WARNING, logger="caplet"):
        assert read_snapshots(state_dir) == []
    assert "caplet stats: skipping" in caplog.text


def test_a_plugins_row_with_a_count_past_64_bits_skips_the_snapshot(state_dir: Path) -> None:
    # each row's numbers are read with float() by `caplet stats`: OverflowError, exit 70
    directory = state_dir / STATS_DIR
    directory.mkdir(parents=True)
    text = (
        '{"format": 1, "pid": 10000000, "start_ticks": 1, "command": "x", "started_at": 0.0, '
        '"updated_at": 1.0, "ended": true, "plugins": [{"plugin": "p", "calls": 1'
        + "0" * 30
        + "}]}"
    )
    (directory / "host-1-1.json").write_text(text)
    assert read_snapshots(state_dir) == []
    (directory / "host-1-1.json").write_text(text.replace("1" + "0" * 30, str(2**63 - 1)))
    (kept,) = read_snapshots(state_dir)
    assert kept.plugins == [{"plugin": "p", "calls": 2**63 - 1}]


def test_the_command_line_beyond_the_subcommand_is_never_written(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["/usr/bin/caplet", "call", "--enable", "x", "token=SECRET"])
    _publisher(state_dir, [{"plugin": "p"}]).publish()
    (snapshot,) = read_snapshots(state_dir)
    assert snapshot.command == "caplet call"
    assert "SECRET" not in next((state_dir / STATS_DIR).glob("host-*.json")).read_text()


def test_a_host_publishes_when_it_closes(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    with PluginHost(plugins_dir, state_dir=state_dir, auditor=None) as host:
        host.enable("p", consent=True)
        host.call("p", "main.run", 1)
        host.observer.publish()
        (running,) = read_snapshots(state_dir)
        assert running.live
    (closed,) = read_snapshots(state_dir)
    assert not closed.live
    assert closed.plugins[0]["plugin"] == "p"
    assert closed.plugins[0]["calls"] == 1
