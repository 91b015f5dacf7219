"""One host's observability, wired: meters, budgets, OpenTelemetry, the stats file.

:class:`PluginHost` builds one :class:`Observer` and touches it at a few
points only (a call, a worker's start and stop, a brokered request, close),
so the call path's code stays where it was; the concepts live in their own
modules: :mod:`._metrics` (meters), :mod:`._budget` (budgets),
:mod:`._usage` (CPU and memory), :mod:`._otel` (OpenTelemetry) and
:mod:`._stats_file` (``caplet stats``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from caplet._broker._model import BrokerDecision
from caplet._errors import PluginCallError
from caplet._host._budget import PluginBudget, describe
from caplet._host._metrics import HostMetrics, PluginMeter, PluginStats
from caplet._host._otel import install, uninstall
from caplet._host._policy import Policy
from caplet._host._stats_file import StatsPublisher

__all__ = ["Observer"]


class _Manager(Protocol):
    """What the observer needs of the :class:`PluginManager`."""

    @property
    def policy(self) -> Policy: ...

    @property
    def state_dir(self) -> Any: ...

    def names(self) -> list[str]: ...

    def log_decision(
        self, plugin: str, action: str, target: str, allowed: bool, detail: str = ""
    ) -> None: ...


class Observer:
    """The meters of one host and where they are reported (module docstring).

    ``breaker(name)`` gives a plugin's breaker state (``closed``, ``open``,
    ``half-open``, or ``closed`` when it has none yet).
    """

    def __init__(
        self,
        manager: _Manager,
        *,
        clock: Callable[[], float],
        breaker: Callable[[str], str],
        is_refusal: Callable[[PluginCallError], bool],
    ) -> None:
        policy = manager.policy
        self._manager = manager
        self._clock = clock
        self._breaker = breaker
        self.metrics = HostMetrics(
            policy.metrics,
            known=lambda name: name in manager.names(),
            budget=self._budget,
            is_refusal=is_refusal,
            on_spent=self._spent,
        )
        self.otel = policy.metrics.enabled and install(self.metrics, self.stats)
        self._publisher = (
            StatsPublisher(
                manager.state_dir,
                lambda: [s.to_json() for s in self.stats()],
                interval_s=policy.metrics.publish_s,
                started_at=self.metrics.started_at,
            )
            if policy.metrics.enabled
            else None
        )

    def meter(self, name: str) -> PluginMeter:
        return self.metrics.meter(name)

    def stats(self) -> list[PluginStats]:
        """Every plugin's stats now (its workers sampled, its breaker's state)."""
        return self.metrics.stats(self._breaker)

    def started(self, name: str, pid: int) -> PluginMeter:
        """A worker of ``name`` started: follow its usage; the snapshots start too."""
        meter = self.metrics.meter(name)
        meter.attach(pid)
        if self._publisher is not None:
            self._publisher.start()
        return meter

    def stopping(self, name: str, pid: int) -> None:
        """The worker ``pid`` of ``name`` is about to be stopped: its last reading."""
        self.metrics.meter(name).retire(pid)

    def http(self, decision: BrokerDecision) -> None:
        """One brokered request, as the broker decided it."""
        self.metrics.meter(decision.plugin).broker(
            decision.allowed, decision.sent_bytes, decision.received_bytes
        )

    def publish(self) -> None:
        """Write the stats snapshot now (``caplet stats`` reads it)."""
        if self._publisher is not None:
            self._publisher.publish()

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.close()
        uninstall(self.metrics)
        self.metrics.close()

    def _budget(self, name: str) -> PluginBudget | None:
        limits = self._manager.policy.budget.limits(name)
        if not limits.active:
            return None
        return PluginBudget(name, limits, clock=self._clock, wall=time.time)

    def _spent(self, plugin: str, budget: str) -> None:
        meter = self.metrics.meter(plugin)
        limits = meter.budget.limits if meter.budget is not None else None
        bound = describe(budget, float(getattr(limits, budget))) if limits is not None else ""
        window = f" per {limits.window_s:g} s" if limits is not None else ""
        self._manager.log_decision(
            plugin,
            "budget",
            budget,
            False,
            f"budget spent: {bound}{window}; further calls are refused until the window reopens",
        )
