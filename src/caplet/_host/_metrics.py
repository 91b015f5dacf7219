"""Per-plugin metrics: calls, failures by kind, latency, CPU and memory, brokered traffic.

Each :class:`~caplet.PluginHost` keeps one :class:`HostMetrics`, and in it
one :class:`PluginMeter` per plugin (kept across worker restarts, like the
circuit breaker). A successful call only appends its duration to a
deque (thread-safe in CPython without a lock; about a tenth of a
microsecond, measured against metrics off in ``benchmarks/run.py``); the
durations are folded into the counters and the histogram, and handed to
OpenTelemetry, when someone reads the meter (the stats snapshot thread,
once a second) or when more than :data:`_PENDING` wait. Everything else
costlier happens when someone asks too: CPU seconds and peak memory are read from ``/proc``
when a snapshot is taken (:mod:`._usage`), except for a plugin with a CPU
budget, whose worker is sampled after every call (:mod:`._budget`).

The same numbers reach OpenTelemetry (:mod:`._otel`, when the API is
installed) and ``caplet stats`` (:mod:`._stats_file`: the host writes a
snapshot to the state directory, because ``caplet stats`` runs in another
process). docs/metrics.md lists every metric.

**Bounded labels.** Every label value is caplet's own word or a plugin's
name, never text a plugin controls at run time: failure kinds are
:class:`FailureKind` (an exception class name a plugin raised never becomes
one), broker decisions are ``allowed``/``denied``, functions are not a
label. A plugin's name is chosen by its author, so meters exist only for
plugins the host knows, and at most ``MetricsSettings.max_plugins`` of
them are reported under their names; the rest are reported together under
:data:`OTHER`. The cap is on *labels* only: every known plugin keeps a
meter of its own, because its budget and its workers' CPU are its own (red
team, issue 17: a plugin beyond the cap had no budget at all).
"""

from __future__ import annotations

import bisect
import enum
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from pydantic.dataclasses import dataclass as settings

from caplet._errors import (
    BudgetExceededError,
    CallCancelledError,
    CallTimeoutError,
    CircuitOpenError,
    HostError,
    InvalidOutputError,
    PluginCallError,
    PolicyError,
    ProtocolError,
    WorkerCrashedError,
    WorkerStartError,
)
from caplet._host._budget import BUDGETS, PluginBudget
from caplet._host._usage import WorkerUsage
from caplet._validated import MODEL_CONFIG, Flag, Positive, Seconds, validated

__all__ = [
    "LATENCY_BOUNDS_S",
    "OTHER",
    "FailureKind",
    "HostMetrics",
    "MetricsSettings",
    "PluginMeter",
    "PluginStats",
]

#: The meter of every plugin beyond ``max_plugins`` (not a valid plugin name).
OTHER: Final = "(other)"
#: Upper bounds of the latency histogram's buckets, in seconds (the last bucket is open).
LATENCY_BOUNDS_S: Final = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
_BOUNDS_NS: Final = tuple(round(b * 1e9) for b in LATENCY_BOUNDS_S)
#: Durations of successful calls waiting to be counted before a call folds them itself.
_PENDING: Final = 65_536


@validated(PolicyError, "metrics")
@settings(frozen=True, slots=True, config=MODEL_CONFIG)
class MetricsSettings:
    """``Policy.metrics``: per-plugin metrics (docs/metrics.md).

    ``enabled``: count calls, failures, latency and brokered traffic per
    plugin (CPU and memory are read only when asked for, and budgets work
    either way). ``publish_s``: how often a host that is calling plugins
    rewrites its snapshot for ``caplet stats`` (and once more when it
    closes). ``max_plugins``: plugins with metrics of their own; the rest
    share the ``(other)`` series, so no plugin name can grow the label set
    without bound.
    """

    enabled: Flag = True
    publish_s: Seconds = 1.0
    max_plugins: Positive = 256


class FailureKind(enum.Enum):
    """Why a call failed: the ``kind`` label of ``caplet.plugin.failures``."""

    #: The call's deadline passed; the worker was killed.
    TIMEOUT = "timeout"
    #: The worker died during the call.
    CRASH = "crash"
    #: No worker could be started for the call.
    START = "start"
    #: The plugin's function raised.
    ERROR = "error"
    #: The plugin refused the input on purpose (``caplet.plugin.Refused``, a size limit).
    REFUSED = "refused"
    #: The result failed the function's ``returns`` schema.
    INVALID_OUTPUT = "invalid_output"
    #: The worker broke the protocol (it was killed).
    PROTOCOL = "protocol"
    #: The circuit breaker was open: nothing ran.
    CIRCUIT_OPEN = "circuit_open"
    #: A budget was spent: nothing ran.
    BUDGET = "budget"
    #: The host refused the call: not enabled, quarantined, undeclared, bad arguments.
    REJECTED = "rejected"
    #: The caller cancelled it.
    CANCELLED = "cancelled"
    #: Anything else (a failure of the host on this call).
    HOST = "host"


#: Failures whose worker is gone afterwards: the call's wall time is charged as CPU.
_KILLED: Final = frozenset({FailureKind.TIMEOUT, FailureKind.CRASH, FailureKind.CANCELLED})


def classify(exc: BaseException, is_refusal: Callable[[PluginCallError], bool]) -> FailureKind:
    """The :class:`FailureKind` of a failed call's exception (caplet's classes only)."""
    if isinstance(exc, BudgetExceededError):
        return FailureKind.BUDGET
    if isinstance(exc, CircuitOpenError):
        return FailureKind.CIRCUIT_OPEN
    if isinstance(exc, CallCancelledError):
        return FailureKind.CANCELLED
    if isinstance(exc, CallTimeoutError):
        return FailureKind.TIMEOUT
    if isinstance(exc, WorkerStartError):
        return FailureKind.START
    if isinstance(exc, WorkerCrashedError):
        return FailureKind.CRASH
    if isinstance(exc, InvalidOutputError):
        return FailureKind.INVALID_OUTPUT
    if isinstance(exc, ProtocolError):
        return FailureKind.PROTOCOL
    if isinstance(exc, PluginCallError):
        return FailureKind.REFUSED if is_refusal(exc) else FailureKind.ERROR
    if isinstance(exc, HostError):
        return FailureKind.REJECTED
    return FailureKind.HOST


@dataclass(frozen=True, slots=True)
class PluginStats:
    """One plugin's metrics at one moment (docs/metrics.md names each).

    ``latency`` holds the count of calls per bucket of :data:`LATENCY_BOUNDS_S`
    (one more for the open last bucket); ``budget`` each budget's use in the
    current window and its bound (0: none), ``budget_reopens_in_s`` the time
    left in that window.
    """

    plugin: str
    calls: int
    failures: Mapping[str, int]
    breaker: str
    latency: tuple[int, ...]
    latency_sum_s: float
    cpu_s: float
    peak_memory_bytes: int
    workers_started: int
    broker_requests: Mapping[str, int]
    broker_bytes: Mapping[str, int]
    budget: Mapping[str, tuple[float, float]]
    budget_reopens_in_s: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "plugin": self.plugin,
            "calls": self.calls,
            "failures": dict(self.failures),
            "breaker": self.breaker,
            "latency": {
                "bounds_s": list(LATENCY_BOUNDS_S),
                "counts": list(self.latency),
                "sum_s": self.latency_sum_s,
            },
            "cpu_s": self.cpu_s,
            "peak_memory_bytes": self.peak_memory_bytes,
            "workers_started": self.workers_started,
            "broker_requests": dict(self.broker_requests),
            "broker_bytes": dict(self.broker_bytes),
            "budget": {
                name: {"used": used, "limit": limit} for name, (used, limit) in self.budget.items()
            },
            "budget_reopens_in_s": self.budget_reopens_in_s,
        }


class PluginMeter:
    """One plugin's counters, its workers' usage, and its budget (module docstring).

    The call path calls :meth:`ok` or :meth:`failed` with the
    ``time.perf_counter_ns()`` taken before the call (0: nothing ran, so no
    latency). ``budget`` is the plugin's :class:`PluginBudget`, or None when
    no budget applies (the warm path then needs nothing else).
    """

    __slots__ = (
        "_broker_bytes",
        "_broker_requests",
        "_buckets",
        "_calls",
        "_cpu_done",
        "_failures",
        "_is_refusal",
        "_latency_ns",
        "_lock",
        "_on_spent",
        "_peak",
        "_pending",
        "_workers",
        "_workers_started",
        "budget",
        "counting",
        "label",
        "name",
        "record",
    )

    def __init__(
        self,
        name: str,
        *,
        counting: bool,
        budget: PluginBudget | None,
        is_refusal: Callable[[PluginCallError], bool],
        on_spent: Callable[[str, str], None],
        label: str | None = None,
    ) -> None:
        self.name = name
        #: The name its numbers are reported under (:data:`OTHER` beyond the label cap).
        self.label = name if label is None else label
        self.counting = counting
        self.budget = budget
        #: Extra per-call latency sink (OpenTelemetry's histogram), or None.
        self.record: Callable[[str, float], None] | None = None
        self._is_refusal = is_refusal
        self._on_spent = on_spent
        self._lock = threading.Lock()
        self._calls = 0
        self._failures: dict[FailureKind, int] = {}
        self._buckets = [0] * (len(_BOUNDS_NS) + 1)
        self._latency_ns = 0
        #: Durations (ns) of successful calls not yet counted (appending needs no lock).
        self._pending: deque[int] = deque()
        #: CPU seconds of workers that are gone, plus estimates for killed calls.
        self._cpu_done = 0.0
        self._peak = 0
        self._workers_started = 0
        #: pid -> (its sampler, its last CPU reading, when that was read (perf_counter_ns)).
        self._workers: dict[int, tuple[WorkerUsage, float, int]] = {}
        self._broker_requests = {"allowed": 0, "denied": 0}
        self._broker_bytes = {"allowed": 0, "denied": 0}

    # -- the call path ----------------------------------------------------------------------

    def ok(self, started_ns: int) -> None:
        """A call that returned a value (counted when the meter is next read)."""
        if self.counting:
            pending = self._pending
            pending.append(time.perf_counter_ns() - started_ns)
            if len(pending) > _PENDING:
                self._fold()

    def _fold(self) -> None:
        """Count the pending successful calls (and hand their durations to OpenTelemetry)."""
        pending = self._pending
        record = self.record
        durations = []
        with self._lock:
            for _ in range(len(pending)):
                elapsed = pending.popleft()
                self._calls += 1
                self._buckets[bisect.bisect_left(_BOUNDS_NS, elapsed)] += 1
                self._latency_ns += elapsed
                if record is not None:
                    durations.append(elapsed)
        if record is not None:
            for elapsed in durations:
                record(self.label, elapsed / 1e9)

    def failed(self, exc: BaseException, started_ns: int = 0) -> FailureKind:
        """A call that ended in ``exc``; returns its kind. A call whose worker was killed
        has its wall time charged as CPU (the worker's own count is gone with it)."""
        kind = classify(exc, self._is_refusal)
        elapsed = time.perf_counter_ns() - started_ns if started_ns else 0
        if kind in _KILLED and elapsed:
            self._estimate(started_ns, elapsed)
        if not self.counting:
            return kind
        with self._lock:
            self._calls += 1
            self._failures[kind] = self._failures.get(kind, 0) + 1
            if elapsed:
                self._buckets[bisect.bisect_left(_BOUNDS_NS, elapsed)] += 1
                self._latency_ns += elapsed
        if elapsed and self.record is not None:
            self.record(self.label, elapsed / 1e9)
        return kind

    def admit(self) -> None:
        """Raise :class:`~caplet.BudgetExceededError` while a budget is spent."""
        if self.budget is not None:
            self.budget.admit()

    def after_call(self) -> None:
        """After a call of a budgeted plugin: sample its worker so its CPU is charged."""
        if self.budget is not None and self.budget.limits.cpu_s:
            self.sample()

    # -- workers ------------------------------------------------------------------------------

    def attach(self, pid: int) -> None:
        """A worker of this plugin started (its usage is followed until :meth:`retire`)."""
        usage = WorkerUsage(pid)
        with self._lock:
            self._workers_started += 1
            self._workers[pid] = (usage, 0.0, time.perf_counter_ns())
        self.sample()

    def retire(self, pid: int) -> None:
        """The worker ``pid`` is being stopped: take its last reading and forget it."""
        self.sample(only=pid)
        with self._lock:
            entry = self._workers.pop(pid, None)
            if entry is None:
                return
            usage, cpu, _ = entry
            self._cpu_done += cpu
        usage.close()

    def sample(self, only: int | None = None) -> None:
        """Read the live workers' usage now (all of them, or ``only`` that one)."""
        charged = 0.0
        with self._lock:
            for pid, (usage, last, _) in list(self._workers.items()):
                if only is not None and pid != only:
                    continue
                now = usage.sample()
                if now is None:
                    continue
                self._peak = max(self._peak, now.peak_bytes)
                if now.cpu_s > last:
                    charged += now.cpu_s - last
                    self._workers[pid] = (usage, now.cpu_s, time.perf_counter_ns())
        self._charge("cpu_s", charged)

    def _estimate(self, started_ns: int, elapsed_ns: int) -> None:
        """Charge a killed call's wall time since the later of its start and the last sample."""
        now = started_ns + elapsed_ns
        with self._lock:
            last_read = max((read for _, _, read in self._workers.values()), default=0)
            seconds = (now - max(started_ns, last_read)) / 1e9
            if seconds <= 0:
                return
            self._cpu_done += seconds
        self._charge("cpu_s", seconds)

    # -- the broker ---------------------------------------------------------------------------

    def broker(self, allowed: bool, sent: int, received: int) -> None:
        """One brokered request (a redirect hop is one) and its bytes."""
        decision = "allowed" if allowed else "denied"
        if self.counting:
            with self._lock:
                self._broker_requests[decision] += 1
                self._broker_bytes[decision] += sent + received
        if allowed:
            self._charge("broker_requests", 1)
            self._charge("broker_bytes", sent + received)

    def _charge(self, budget: str, amount: float) -> None:
        if self.budget is None or not amount:
            return
        spent = self.budget.charge(budget, amount)
        if spent is not None:
            self._on_spent(self.name, spent)

    # -- reading ------------------------------------------------------------------------------

    def stats(self, breaker: str) -> PluginStats:
        """A snapshot (the pending calls counted and the workers sampled first)."""
        self._fold()
        self.sample()
        budget = self.budget
        used = budget.used() if budget is not None else {}
        with self._lock:
            cpu = self._cpu_done + sum(cpu for _, cpu, _ in self._workers.values())
            return PluginStats(
                plugin=self.label,
                calls=self._calls,
                failures={
                    kind.value: count
                    for kind, count in sorted(
                        self._failures.items(), key=lambda item: item[0].value
                    )
                },
                breaker=breaker,
                latency=tuple(self._buckets),
                latency_sum_s=self._latency_ns / 1e9,
                cpu_s=cpu,
                peak_memory_bytes=self._peak,
                workers_started=self._workers_started,
                broker_requests=dict(self._broker_requests),
                broker_bytes=dict(self._broker_bytes),
                budget={
                    name: (used.get(name, 0.0), float(getattr(budget.limits, name)))
                    for name in BUDGETS
                }
                if budget is not None
                else {},
                budget_reopens_in_s=budget.reopens_in() if budget is not None else None,
            )

    def close(self) -> None:
        with self._lock:
            workers = [usage for usage, _, _ in self._workers.values()]
        for usage in workers:
            usage.close()


_BREAKER_ORDER: Final = ("closed", "half-open", "open")


def _summed(label: str, group: list[PluginStats]) -> PluginStats:
    """One row for the stats of several plugins reported under one label (:data:`OTHER`):
    counts summed, the peak the highest, the worst breaker state; no budget (each plugin's
    own is enforced all the same, and refusals are counted as failures)."""
    if len(group) == 1:
        return group[0]

    def total(key: str, rows: list[Mapping[str, int]]) -> int:
        return sum(row.get(key, 0) for row in rows)

    failures: dict[str, int] = {}
    for stats in group:
        for kind, count in stats.failures.items():
            failures[kind] = failures.get(kind, 0) + count
    return PluginStats(
        plugin=label,
        calls=sum(s.calls for s in group),
        failures=dict(sorted(failures.items())),
        breaker=max(
            (s.breaker for s in group),
            key=lambda b: _BREAKER_ORDER.index(b) if b in _BREAKER_ORDER else len(_BREAKER_ORDER),
        ),
        latency=tuple(sum(counts) for counts in zip(*(s.latency for s in group), strict=True)),
        latency_sum_s=sum(s.latency_sum_s for s in group),
        cpu_s=sum(s.cpu_s for s in group),
        peak_memory_bytes=max(s.peak_memory_bytes for s in group),
        workers_started=sum(s.workers_started for s in group),
        broker_requests={
            d: total(d, [s.broker_requests for s in group]) for d in ("allowed", "denied")
        },
        broker_bytes={d: total(d, [s.broker_bytes for s in group]) for d in ("allowed", "denied")},
        budget={},
        budget_reopens_in_s=None,
    )


class HostMetrics:
    """The meters of one host's plugins (module docstring).

    ``known(name)`` says whether a plugin of that name exists (a meter is
    made only for one); ``budget(name)`` builds its :class:`PluginBudget`
    (None: no budget applies); ``on_spent(plugin, budget)`` is told when a
    budget runs out (the host logs it).
    """

    def __init__(
        self,
        settings: MetricsSettings,
        *,
        known: Callable[[str], bool],
        budget: Callable[[str], PluginBudget | None],
        is_refusal: Callable[[PluginCallError], bool],
        on_spent: Callable[[str, str], None],
    ) -> None:
        self.settings = settings
        self._known = known
        self._budget = budget
        self._is_refusal = is_refusal
        self._on_spent = on_spent
        self._lock = threading.Lock()
        self._meters: dict[str, PluginMeter] = {}
        #: Set by the OpenTelemetry bridge: each new meter gets it as ``record``.
        self.record: Callable[[str, float], None] | None = None
        #: When the host started (wall clock), for ``caplet stats``.
        self.started_at = time.time()

    def meter(self, name: str) -> PluginMeter:
        """The meter of plugin ``name`` (made on first use): its own for a plugin the host
        knows (reported as :data:`OTHER` beyond the label cap), the shared :data:`OTHER`
        one for a name no plugin has."""
        meter = self._meters.get(name)
        if meter is not None:
            return meter
        known = self._known(name)
        with self._lock:
            key = name if known else OTHER
            meter = self._meters.get(key)
            if meter is None:
                labelled = sum(1 for m in self._meters.values() if m.label != OTHER)
                meter = self._meters[key] = PluginMeter(
                    key,
                    counting=self.settings.enabled,
                    budget=self._budget(name) if known else None,
                    is_refusal=self._is_refusal,
                    on_spent=self._on_spent,
                    label=key if known and labelled < self.settings.max_plugins else OTHER,
                )
                meter.record = self.record
            return meter

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._meters)

    def stats(self, breaker: Callable[[str], str]) -> list[PluginStats]:
        """A snapshot of every plugin's meter, by label (the plugins beyond the cap summed
        under :data:`OTHER`); ``breaker(name)`` gives a plugin's state."""
        with self._lock:
            meters = sorted(self._meters.items())
        by_label: dict[str, list[PluginStats]] = {}
        for name, meter in meters:
            by_label.setdefault(meter.label, []).append(meter.stats(breaker(name)))
        return [_summed(label, group) for label, group in sorted(by_label.items())]

    def close(self) -> None:
        with self._lock:
            meters = list(self._meters.values())
        for meter in meters:
            meter.close()
