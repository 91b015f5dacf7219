"""Per-plugin metrics on a real host: calls, failures by kind, latency, CPU, memory,
brokered traffic, and a label set no plugin can grow."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet import (
    CallTimeoutError,
    LifecycleError,
    PluginCallError,
    PluginNotFoundError,
    Policy,
)
from caplet._broker._model import BrokerDecision
from caplet._host._budget import BudgetPolicy
from caplet._host._metrics import LATENCY_BOUNDS_S, OTHER, FailureKind, MetricsSettings
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

SOURCE = """
import os
from caplet.plugin import Refused

def create_functions(config):
    def ok(value):
        return value

    def boom(name):
        raise type(name, (Exception,), {})("boom")

    def refuse():
        raise Refused("not that")

    def spin():
        while True:
            pass

    def hog():
        global kept
        kept = bytearray(48 * 1024 * 1024)
        kept[::4096] = b"x" * len(kept[::4096])
        return len(kept)

    return {"main": {"ok": ok, "boom": boom, "refuse": refuse, "spin": spin, "hog": hog}}
"""
FUNCTIONS = ("ok", "boom", "refuse", "spin", "hog")


def test_calls_failures_latency_cpu_and_memory(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "p", SOURCE, functions=FUNCTIONS, limits="timeout_ms = 300")
    with make_host(plugins_dir, state_dir, launcher) as host:
        enable(host, "p")
        for value in range(3):
            assert host.call("p", "main.ok", value) == value
        with pytest.raises(PluginCallError):
            host.call("p", "main.boom", "ValueError")
        with pytest.raises(PluginCallError):
            host.call("p", "main.refuse")
        with pytest.raises(CallTimeoutError):
            host.call("p", "main.spin")
        with pytest.raises(LifecycleError):
            host.call("p", "main.undeclared")
        assert host.call("p", "main.hog") == 48 * 1024 * 1024
        (stats,) = host.observer.stats()
    assert stats.plugin == "p"
    assert stats.calls == 8
    assert stats.failures == {"error": 1, "refused": 1, "rejected": 1, "timeout": 1}
    assert stats.breaker == "closed"
    assert len(stats.latency) == len(LATENCY_BOUNDS_S) + 1
    assert sum(stats.latency) == 7, "every call that reached a worker (not the rejected one)"
    timeout_bucket = next(i for i, bound in enumerate(LATENCY_BOUNDS_S) if bound >= 0.3)
    assert sum(stats.latency[timeout_bucket:]) >= 1, "the timed-out call took its deadline"
    assert stats.latency_sum_s >= 0.3
    assert stats.cpu_s >= 0.3, "the killed call is charged its wall time"
    assert stats.peak_memory_bytes >= 48 * 1024 * 1024, "the second worker's peak"
    assert stats.workers_started == 2, "the timeout killed the first worker"


def test_no_plugin_text_becomes_a_label(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "p", SOURCE, functions=FUNCTIONS)
    plugin(make_plugin, "q", SOURCE, functions=FUNCTIONS)
    plugin(make_plugin, "r", SOURCE, functions=FUNCTIONS)
    with make_host(
        plugins_dir,
        state_dir,
        launcher,
        policy=Policy(metrics=MetricsSettings(max_plugins=2), failure_threshold=1000),
    ) as host:
        enable(host, "p", "q", "r")
        for index in range(30):
            # A new exception class name every time: the kind stays "error".
            with pytest.raises(PluginCallError):
                host.call("p", "main.boom", f"Weird{index}Error")
            # Undeclared functions and unknown plugins: names a caller makes up.
            with pytest.raises(LifecycleError):
                host.call("p", f"main.made_up_{index}")
            with pytest.raises(PluginNotFoundError):
                host.call(f"ghost-{index}", "main.ok", 1)
        host.call("q", "main.ok", 1)
        host.call("r", "main.ok", 1)
        host.observer.http(
            BrokerDecision(0.0, "p", "GET", "https://x.test/", True, "status 200", received_bytes=9)
        )
        stats = {s.plugin: s for s in host.observer.stats()}
    assert set(stats) == {"p", "q", OTHER}, "at most max_plugins series, the rest together"
    assert set(stats["p"].failures) == {"error", "rejected"}
    assert stats["p"].failures == {"error": 30, "rejected": 30}
    assert stats[OTHER].calls == 31, "r's call and the 30 ghosts"
    assert stats[OTHER].failures == {"rejected": 30}
    assert set(stats["p"].broker_requests) == {"allowed", "denied"}
    assert stats["p"].broker_bytes == {"allowed": 9, "denied": 0}
    assert {kind.value for kind in FailureKind} >= set(stats["p"].failures)


def test_metrics_off_count_nothing_and_write_nothing(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "p", SOURCE, functions=FUNCTIONS)
    with make_host(
        plugins_dir,
        state_dir,
        launcher,
        policy=Policy(
            metrics=MetricsSettings(enabled=False), budget=BudgetPolicy(broker_requests=1)
        ),
    ) as host:
        enable(host, "p")
        host.call("p", "main.ok", 1)
        host.observer.http(BrokerDecision(0.0, "p", "GET", "https://x.test/", True, "status 200"))
        (stats,) = host.observer.stats()
        assert stats.calls == 0
        assert stats.broker_requests == {"allowed": 0, "denied": 0}
        with pytest.raises(Exception, match="broker_requests budget is spent"):
            host.call("p", "main.ok", 1)
    assert not (state_dir / "stats").exists()


def test_pending_durations_are_bounded_and_all_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    from caplet._host import _metrics

    monkeypatch.setattr(_metrics, "_PENDING", 3)
    recorded: list[tuple[str, float]] = []
    meter = _metrics.PluginMeter(
        "p", counting=True, budget=None, is_refusal=lambda exc: False, on_spent=print
    )
    meter.record = lambda plugin, seconds: recorded.append((plugin, seconds))
    for _ in range(10):
        meter.ok(0)
        assert len(meter._pending) <= 4, "a call folds them once more than the bound wait"
    stats = meter.stats("closed")
    assert stats.calls == 10
    assert sum(stats.latency) == 10
    assert len(recorded) == 10, "every duration reaches OpenTelemetry, once"
    assert {plugin for plugin, _ in recorded} == {"p"}
