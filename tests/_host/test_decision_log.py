"""The decision log keeps its history: refusals at a bounded rate, retention (issue 15)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost, Policy
from caplet._host._decision_log import DecisionLog
from caplet._host._log_limits import LogLimits
from caplet._trust._sqlite import SqliteStore
from caplet._trust._store import Decision
from tests.conftest import PluginFactory


class Clock:
    """Wall-clock and monotonic time that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(state_dir: Path) -> Iterator[SqliteStore]:
    with SqliteStore(state_dir) as opened:
        yield opened


def rows(store: SqliteStore, plugin: str | None = None) -> list[Decision]:
    return list(reversed(store.decisions(plugin, 10_000)))


def test_refusals_over_the_rate_become_one_summary_row_per_action(store: SqliteStore) -> None:
    clock = Clock()
    log = DecisionLog(store, LogLimits(denials_per_minute=3), clock=clock, monotonic=clock)
    for n in range(10):
        log.record("p", "http", f"https://x/{n}", False, "not granted")
    log.record("p", "call", "m.f", True)  # allowed: always written
    for n in range(4):
        log.record("p", "seccomp", f"sys{n}", False)
    log.record("q", "http", "https://q", False)  # another plugin has its own budget
    assert [(d.plugin, d.action, d.target) for d in rows(store)] == [
        ("p", "http", "https://x/0"),
        ("p", "http", "https://x/1"),
        ("p", "http", "https://x/2"),
        ("p", "call", "m.f"),
        ("q", "http", "https://q"),
    ]
    clock.now += 61  # a new minute: the held count is written before the next refusal
    log.record("p", "http", "https://x/new", False)
    written = rows(store, "p")[-3:]
    summaries = {d.action: d for d in written if d.detail.endswith("(3 per plugin)")}
    assert summaries["http"].detail == (
        "7 more denials of http (the last: https://x/9: not granted) were not recorded one by "
        "one: over the policy's log.denials_per_minute (3 per plugin)"
    )
    assert summaries["seccomp"].detail.startswith("4 more denials of seccomp (the last: sys3)")
    assert not summaries["http"].allowed
    assert written[-1].target == "https://x/new"


def test_held_refusals_are_written_when_the_log_is_flushed(store: SqliteStore) -> None:
    clock = Clock()
    log = DecisionLog(store, LogLimits(denials_per_minute=0), clock=clock, monotonic=clock)
    for _ in range(5):
        log.record("p", "http", "https://x", False)
    assert rows(store) == []
    log.flush()
    (summary,) = rows(store)
    assert summary.detail.startswith("5 more denials of http")
    log.flush()
    assert len(rows(store)) == 1, "written once"


def test_retention_deletes_old_rows_and_the_oldest_beyond_the_maximum(store: SqliteStore) -> None:
    clock = Clock()
    log = DecisionLog(store, LogLimits(retention_days=1, max_rows=3), clock=clock, monotonic=clock)
    for n in range(3):
        log.record("p", "call", f"old{n}", True)
    clock.now += 2 * 86_400
    for n in range(5):
        log.record("p", "call", f"new{n}", True)
    assert log.prune() == 5
    assert [d.target for d in rows(store)] == ["new2", "new3", "new4"]
    assert log.prune() == 0, "nothing left to delete: no write"


PLUGIN = """
def create_functions(config):
    def hammer(ctx, count):
        refused = 0
        for n in range(count):
            try:
                ctx.http.get("https://elsewhere.example/" + str(n))
            except Exception:
                refused += 1
        return refused

    return {"main": {"hammer": hammer}}
"""


@pytest.mark.slow
def test_a_flood_of_refused_fetches_keeps_the_earlier_history(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    """The issue's case: thousands of refused fetches in one call wrote a row each."""
    make_plugin(
        "hammer",
        source=PLUGIN,
        extra='capabilities = ["net.http:https://api.example.com"]',
        modules='[modules.main]\nfunctions = ["hammer"]\n',
    )
    policy = Policy(log=LogLimits(denials_per_minute=20))
    with PluginHost(plugins_dir, state_dir=state_dir, policy=policy) as host:
        assert host.enable("hammer", consent=True)
        assert host.call("hammer", "main.hammer", 2000) == 2000
    with SqliteStore(state_dir) as opened:
        http = [d for d in opened.decisions("hammer", 10_000) if d.action == "http"]
        enable = [d for d in opened.decisions("hammer", 10_000) if d.action == "enable"]
    assert len(http) == 21, "twenty one by one, then one summary row"
    assert http[0].detail.startswith("1980 more denials of http (the last: ")
    assert enable, "the earlier history is still there"


def test_a_plugin_cannot_fill_the_disk_through_the_text_of_its_refusals(
    store: SqliteStore,
) -> None:
    """Red-team round 3: a row carried the plugin's text whole: a refused target or a
    ``caplet.plugin.Refused`` message is up to 64 Ki characters (the channel's text cap;
    a worker's own 4 KiB cut is the plugin's to undo, it runs in that process). At the
    policy's 60 refusals a minute and 100,000 rows kept that is 13 GB of state database
    from a plugin with no capability. A row keeps the start of each text and says how
    much was left out."""
    clock = Clock()
    log = DecisionLog(store, LogLimits(), clock=clock, monotonic=clock)
    huge = "https://x.example/" + "a" * 65_000
    for _ in range(5):
        log.record("filler", "call", huge, False, "refused: " + "b" * 65_000)
    log.record("filler", "enable", "filler", True, "c" * 65_000)
    written = rows(store, "filler")
    assert len(written) == 6
    for row in written:
        assert len(row.target) + len(row.detail) <= 8 * 1024, (len(row.target), len(row.detail))
    assert written[0].target.startswith("https://x.example/aaa")
    assert written[0].target.endswith(f"({65_018 - 1024 + 48} more characters not recorded)")
    assert written[0].detail.startswith("refused: bbb")


TINY = """
def create_functions(config):
    return {"tiny": {"echo": lambda value: value}}
"""
ERASER = """
def create_functions(config):
    def erase(ctx, count):
        try:
            ctx.plugins.call("secret.steal")
        except Exception:
            pass
        for i in range(count):
            ctx.plugins.call("tiny.echo", i)
        return count

    return {"main": {"erase": erase}}
"""


@pytest.mark.slow
def test_a_plugin_cannot_erase_its_earlier_refusals_with_allowed_calls(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    """One call may make ``context.max_requests_per_call`` (10,000) ctx requests, each
    allowed ``host.call`` one row; ``log.max_rows`` (100,000) rows are kept. So ten calls
    of a plugin granted ``host.call`` on any provider erase the evidence of what it was
    refused before (here with max_rows 200 and 300 calls, the same arithmetic)."""
    make_plugin("tiny", source=TINY, modules='[modules.tiny]\nfunctions = ["echo"]\n')
    make_plugin(
        "eraser",
        source=ERASER,
        extra='capabilities = ["host.call:tiny"]\nrequires = ["tiny"]\n',
        modules='[modules.main]\nfunctions = ["erase"]\n',
    )
    policy = Policy(log=LogLimits(max_rows=200))
    with PluginHost(plugins_dir, state_dir=state_dir, policy=policy) as host:
        assert host.enable("tiny", consent=True)
        assert host.enable("eraser", consent=True)
        assert host.call("eraser", "main.erase", 300) == 300
        refused = [d for d in host.manager.store.decisions("eraser", 10_000) if not d.allowed]
        assert any(d.action == "host.call" and "secret" in d.target for d in refused)
    # The next host applies retention when it opens the log.
    with PluginHost(plugins_dir, state_dir=state_dir, policy=policy) as host:
        kept = [d for d in host.manager.store.decisions("eraser", 10_000) if not d.allowed]
    assert any(d.action == "host.call" and "secret" in d.target for d in kept), (
        "the plugin's earlier refusal is gone from the log"
    )


def test_a_plugins_allowed_requests_are_rated_and_decisions_about_it_never_are(
    store: SqliteStore,
) -> None:
    clock = Clock()
    limits = LogLimits(allowed_per_minute=2)
    log = DecisionLog(store, limits, clock=clock, monotonic=clock)
    for n in range(5):
        log.record("p", "host.call", f"tiny.echo #{n}", True)
    for action in ("enable", "disable", "quarantine", "approve"):
        log.record("p", action, "p", True)  # about the plugin: always written
    log.record("p", "http", "https://refused", False)  # refusals have their own budget
    assert [(d.action, d.target) for d in rows(store)] == [
        ("host.call", "tiny.echo #0"),
        ("host.call", "tiny.echo #1"),
        ("enable", "p"),
        ("disable", "p"),
        ("quarantine", "p"),
        ("approve", "p"),
        ("http", "https://refused"),
    ]
    log.flush()
    summary = rows(store)[-1]
    assert summary.allowed
    assert summary.detail == (
        "3 more allowed host.call (the last: tiny.echo #4) were not recorded one by one: "
        "over the policy's log.allowed_per_minute (2 per plugin)"
    )
