"""The per-plugin metrics as OpenTelemetry instruments (``opentelemetry-api``, optional).

``pip install caplet[otel]`` (or any install of ``opentelemetry-api``)
makes every host's meters visible to whatever OpenTelemetry SDK the
application configures (a ``MeterProvider`` with an exporter); without the
API installed this module does nothing, and without an SDK configured the
API's instruments are no-ops (a few tens of nanoseconds per call).

One set of instruments per process, on the meter ``caplet``: the latency
histogram is recorded on each call (what OpenTelemetry cannot observe
afterwards); everything else is observed when the SDK collects, from one
snapshot of every live host's meters taken at most once per
:data:`_SNAPSHOT_S` (so a collection costs one ``/proc`` pass, not one per
instrument). Several hosts in one process are summed per plugin.
docs/metrics.md lists the instruments and their attributes.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from caplet._host._metrics import HostMetrics, PluginStats
from caplet._version import __version__

__all__ = ["BREAKER_VALUES", "install", "uninstall"]

#: ``caplet.plugin.breaker.state``: the gauge's value per breaker state.
BREAKER_VALUES: Final = {"closed": 0, "half-open": 1, "open": 2}
_SNAPSHOT_S: Final = 0.5

_lock = threading.Lock()
_installed: dict[str, Any] = {}
_hosts: weakref.WeakKeyDictionary[HostMetrics, Callable[[], list[PluginStats]]] = (
    weakref.WeakKeyDictionary()
)
_cache: dict[str, Any] = {"at": -1.0, "stats": []}


def install(metrics: HostMetrics, snapshot: Callable[[], list[PluginStats]]) -> bool:
    """Report ``metrics`` through OpenTelemetry; False when the API is not installed.

    ``snapshot()`` returns the host's stats (with breaker states). The
    host's meters get the latency histogram's ``record``.
    """
    try:
        from opentelemetry import metrics as otel
    except ImportError:
        return False
    with _lock:
        if not _installed:
            _create(otel)
        _hosts[metrics] = snapshot
        histogram = _installed["histogram"]
    attributes: dict[str, dict[str, str]] = {}

    def record(plugin: str, seconds: float) -> None:
        labels = attributes.get(plugin)
        if labels is None:
            labels = attributes[plugin] = {"plugin": plugin}
        histogram.record(seconds, labels)

    metrics.record = record
    return True


def uninstall(metrics: HostMetrics) -> None:
    """Stop reporting ``metrics`` (its host closed)."""
    with _lock:
        _hosts.pop(metrics, None)
        _cache["at"] = -1.0
        _cache["stats"] = []


def _create(otel: Any) -> None:
    meter = otel.get_meter("caplet", __version__)
    _installed["histogram"] = meter.create_histogram(
        "caplet.plugin.call.duration",
        unit="s",
        description="Wall time of plugin calls that ran in a worker, as the caller saw it.",
    )
    observe = otel.Observation

    def counter(
        name: str,
        unit: str,
        description: str,
        values: Callable[[PluginStats], Iterable[tuple[float, dict[str, str]]]],
    ) -> None:
        meter.create_observable_counter(
            name, callbacks=[_callback(observe, values)], unit=unit, description=description
        )

    def gauge(
        name: str,
        unit: str,
        description: str,
        values: Callable[[PluginStats], Iterable[tuple[float, dict[str, str]]]],
    ) -> None:
        meter.create_observable_gauge(
            name, callbacks=[_callback(observe, values)], unit=unit, description=description
        )

    counter(
        "caplet.plugin.calls",
        "{call}",
        "Calls made to the plugin (failed ones included).",
        lambda s: [(s.calls, {"plugin": s.plugin})],
    )
    counter(
        "caplet.plugin.failures",
        "{call}",
        "Failed calls by kind (timeout, crash, error, refused, circuit_open, budget ...).",
        lambda s: [(n, {"plugin": s.plugin, "kind": k}) for k, n in s.failures.items()],
    )
    gauge(
        "caplet.plugin.breaker.state",
        "1",
        "The plugin's circuit breaker: 0 closed, 1 half-open, 2 open.",
        lambda s: [(BREAKER_VALUES.get(s.breaker, 2), {"plugin": s.plugin})],
    )
    counter(
        "caplet.plugin.cpu.time",
        "s",
        "CPU seconds of the plugin's workers (killed calls: their wall time).",
        lambda s: [(s.cpu_s, {"plugin": s.plugin})],
    )
    gauge(
        "caplet.plugin.memory.peak",
        "By",
        "Peak resident memory of the plugin's workers.",
        lambda s: [(s.peak_memory_bytes, {"plugin": s.plugin})],
    )
    counter(
        "caplet.broker.requests",
        "{request}",
        "Brokered HTTP requests (each redirect hop) by decision (allowed, denied).",
        lambda s: [(n, {"plugin": s.plugin, "decision": d}) for d, n in s.broker_requests.items()],
    )
    counter(
        "caplet.broker.bytes",
        "By",
        "Bytes of brokered HTTP requests (body sent and received) by decision.",
        lambda s: [(n, {"plugin": s.plugin, "decision": d}) for d, n in s.broker_bytes.items()],
    )
    gauge(
        "caplet.plugin.budget.used",
        "1",
        "Use of each budget in its current window (CPU seconds, requests, bytes).",
        lambda s: [(used, {"plugin": s.plugin, "budget": b}) for b, (used, _) in s.budget.items()],
    )


def _callback(
    observe: Any, values: Callable[[PluginStats], Iterable[tuple[float, dict[str, str]]]]
) -> Callable[[Any], Iterator[Any]]:
    def callback(options: Any) -> Iterator[Any]:
        totals: dict[tuple[tuple[str, str], ...], float] = {}
        for stats in _snapshot():
            for value, attributes in values(stats):
                key = tuple(sorted(attributes.items()))
                totals[key] = totals.get(key, 0) + value
        for key, value in totals.items():
            yield observe(value, dict(key))

    return callback


def _snapshot() -> list[PluginStats]:
    """Every live host's stats, at most :data:`_SNAPSHOT_S` old."""
    with _lock:
        now = time.monotonic()
        if now - _cache["at"] < _SNAPSHOT_S:
            return list(_cache["stats"])
        sources = list(_hosts.values())
    stats: list[PluginStats] = []
    for source in sources:
        stats.extend(source())
    with _lock:
        _cache["at"] = time.monotonic()
        _cache["stats"] = stats
    return stats
