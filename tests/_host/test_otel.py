"""The metrics through OpenTelemetry: the SDK's in-memory reader sees every instrument."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics as otel
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from caplet import CallTimeoutError
from caplet._host import _otel
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

SOURCE = """
def create_functions(config):
    def ok(value):
        return value

    def spin():
        while True:
            pass

    return {"main": {"ok": ok, "spin": spin}}
"""


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    """A private SDK provider: the process-wide one is never set by a test."""
    memory = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[memory])
    monkeypatch.setattr(otel, "get_meter", provider.get_meter)
    monkeypatch.setattr(_otel, "_installed", {})
    monkeypatch.setattr(_otel, "_hosts", weakref.WeakKeyDictionary())
    monkeypatch.setattr(_otel, "_cache", {"at": -1.0, "stats": []})
    yield memory
    provider.shutdown()


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "caplet"
            for metric in scope.metrics:
                found[metric.name] = list(metric.data.data_points)
    return found


def test_every_instrument_reports_per_plugin(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, reader: InMemoryMetricReader
) -> None:
    plugin(make_plugin, "p", SOURCE, functions=("ok", "spin"), limits="timeout_ms = 300")
    launcher = SandboxLauncher(strict=True)
    try:
        with make_host(plugins_dir, state_dir, launcher) as host:
            enable(host, "p")
            host.call("p", "main.ok", 1)
            host.call("p", "main.ok", 2)
            with pytest.raises(CallTimeoutError):
                host.call("p", "main.spin")
            points = _points(reader)
    finally:
        launcher.close()
    assert set(points) == {
        "caplet.plugin.call.duration",
        "caplet.plugin.calls",
        "caplet.plugin.failures",
        "caplet.plugin.breaker.state",
        "caplet.plugin.cpu.time",
        "caplet.plugin.memory.peak",
        "caplet.broker.requests",
        "caplet.broker.bytes",
    }, "no budget is set, so caplet.plugin.budget.used has nothing to report"
    (duration,) = points["caplet.plugin.call.duration"]
    assert dict(duration.attributes) == {"plugin": "p"}
    assert duration.count == 3
    assert duration.sum >= 0.3
    (calls,) = points["caplet.plugin.calls"]
    assert (dict(calls.attributes), calls.value) == ({"plugin": "p"}, 3)
    (failures,) = points["caplet.plugin.failures"]
    assert (dict(failures.attributes), failures.value) == ({"plugin": "p", "kind": "timeout"}, 1)
    (breaker,) = points["caplet.plugin.breaker.state"]
    assert breaker.value == 0
    (cpu,) = points["caplet.plugin.cpu.time"]
    assert cpu.value >= 0.3
    (memory,) = points["caplet.plugin.memory.peak"]
    assert memory.value > 0
    assert {p.attributes["decision"]: p.value for p in points["caplet.broker.requests"]} == {
        "allowed": 0,
        "denied": 0,
    }


def test_without_the_api_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    assert _otel.install(object(), list) is False  # type: ignore[arg-type]
