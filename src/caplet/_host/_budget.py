"""Budgets: how much CPU time and brokered network one plugin may use per time window.

``Policy.budget`` holds one :class:`BudgetPolicy`: the budgets every plugin
gets (``cpu_s``, ``broker_requests``, ``broker_bytes`` per ``window_s``;
0 is no budget for that resource) and per-plugin overrides
(``[budget.plugins.NAME]`` in ``caplet.toml``). A plugin that has used up
a budget has its calls refused without running them
(:class:`~caplet.BudgetExceededError`, naming the plugin, the budget, its
use and bound, the window and when it reopens) until the window reopens;
the refusal is in the decision log (action ``budget``). Seed 004 (Wundr)
feeds each plugin's CPU, memory and network use into budgets the same way.

**Fixed windows, not sliding ones.** A window opens at a plugin's first
charged call and lasts ``window_s``; the next one opens at the first call
after it ends. "When it reopens" is then one time the operator and the
agent can be told, which a sliding window (its use trickling out one call
at a time) has not. The broker's own rate limits are sliding
(:mod:`caplet._broker._limits`): they bound bursts, the budget bounds a
total.

**What is charged.** CPU: the worker's CPU seconds, read from ``/proc``
after each call of a plugin that has a CPU budget (:mod:`._usage`; a call
that ended with its worker killed, a timeout, is charged its wall time,
which a spinning plugin fully uses). Broker: each request a plugin's
``ctx.http`` sent (every redirect hop is one) and its bytes, sent and
received, as the broker reports them. Use is checked before each call: a
call that starts within the budget runs to its end (its deadline bounds
it), so one call may overshoot by at most what one call can use; RLIMIT_CPU
and the broker's own limits are the hard bounds inside a call.

Budgets are per host process, like the broker's rate limits: a shared
counter would put a store write on every call.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, Field, Strict
from pydantic.dataclasses import dataclass

from caplet._errors import BudgetExceededError, PolicyError
from caplet._validated import MAX_BYTES, MODEL_CONFIG, Count, Duration, Seconds, validated

__all__ = ["BUDGETS", "BudgetLimits", "BudgetPolicy", "PluginBudget", "PluginBudgetOverride"]

#: The budgets, in the order messages and ``caplet stats`` list them.
BUDGETS: Final = ("cpu_s", "broker_requests", "broker_bytes")
_UNITS: Final = {"cpu_s": "CPU seconds", "broker_requests": "requests", "broker_bytes": "bytes"}

#: A byte count that may be 0 (no budget).
ByteCount = Annotated[int, Strict(), Field(ge=0, le=MAX_BYTES)]
#: A plugin name as the manifest allows it (kebab-case).
PluginName = Annotated[str, Strict(), Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]


@validated(PolicyError, "budget override")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class PluginBudgetOverride:
    """One plugin's own budgets (``[budget.plugins.NAME]``); unset fields keep the defaults."""

    plugin: PluginName
    window_s: Seconds | None = None
    cpu_s: Duration | None = None
    broker_requests: Count | None = None
    broker_bytes: ByteCount | None = None


def _overrides(value: object) -> object:
    """``{name: {field: value}}`` (a TOML table of tables) as a tuple of overrides."""
    if isinstance(value, Mapping):
        return tuple(
            {**entry, "plugin": name} if isinstance(entry, Mapping) else entry
            for name, entry in sorted(value.items(), key=lambda item: str(item[0]))
        )
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetLimits:
    """The budgets in force for one plugin (0: no budget for that resource)."""

    window_s: float
    cpu_s: float
    broker_requests: int
    broker_bytes: int

    @property
    def active(self) -> bool:
        return bool(self.cpu_s or self.broker_requests or self.broker_bytes)


@validated(PolicyError, "budget")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class BudgetPolicy:
    """Per-plugin budgets per time window (module docstring).

    ``cpu_s``: CPU seconds of a plugin's worker; ``broker_requests`` and
    ``broker_bytes``: its brokered HTTP requests and their bytes (sent and
    received); each per ``window_s`` seconds, and 0 for no budget.
    ``plugins``: per-plugin overrides, a table per plugin name.
    """

    window_s: Seconds = 3600.0
    cpu_s: Duration = 0.0
    broker_requests: Count = 0
    broker_bytes: ByteCount = 0
    plugins: Annotated[tuple[PluginBudgetOverride, ...], BeforeValidator(_overrides)] = field(
        default_factory=tuple
    )

    def limits(self, plugin: str) -> BudgetLimits:
        """The budgets of ``plugin``: its override's values, else the defaults."""
        own = next((o for o in self.plugins if o.plugin == plugin), None)

        def pick(name: str) -> Any:
            value = getattr(own, name) if own is not None else None
            return getattr(self, name) if value is None else value

        return BudgetLimits(
            pick("window_s"), pick("cpu_s"), pick("broker_requests"), pick("broker_bytes")
        )


class PluginBudget:
    """One plugin's use in the current window, and the refusal once a budget is spent.

    Thread-safe. ``clock`` is the host's (monotonic, injectable: tests step it);
    ``wall`` turns "reopens in N s" into a time of day for the message.
    """

    def __init__(
        self,
        plugin: str,
        limits: BudgetLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.plugin = plugin
        self.limits = limits
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._opened: float | None = None
        self._used: dict[str, float] = dict.fromkeys(BUDGETS, 0.0)
        #: The budget that ran out in this window (logged once per window).
        self._spent: str | None = None

    def admit(self) -> None:
        """Return when the plugin may be called now; raise :class:`BudgetExceededError`
        (nothing runs) while one of its budgets is spent in the current window."""
        with self._lock:
            now = self._clock()
            self._roll(now)
            spent = self._over()
            if spent is None:
                return
            assert self._opened is not None
            reopens_in = max(self._opened + self.limits.window_s - now, 0.0)
            used, limit = self._used[spent], self._limit(spent)
        raise BudgetExceededError(
            _message(self.plugin, spent, used, limit, self.limits.window_s, reopens_in, self._wall),
            plugin=self.plugin,
            budget=spent,
            used=used,
            limit=limit,
            window_s=self.limits.window_s,
            reopens_in_s=reopens_in,
        )

    def charge(self, budget: str, amount: float) -> str | None:
        """Add ``amount`` of ``budget`` (one of :data:`BUDGETS`) to the current window;
        the budget's name the first time this makes it spent in the window, else None."""
        if amount <= 0:
            return None
        with self._lock:
            self._roll(self._clock())
            self._used[budget] += amount
            if self._spent is None and self._over() == budget:
                self._spent = budget
                return budget
        return None

    def used(self) -> dict[str, float]:
        """The use of each budget in the current window (0 for a window that ended)."""
        with self._lock:
            self._roll(self._clock(), opening=False)
            return dict(self._used)

    def reopens_in(self) -> float | None:
        """Seconds until the current window ends (None: no window is open)."""
        with self._lock:
            if self._opened is None:
                return None
            return max(self._opened + self.limits.window_s - self._clock(), 0.0)

    def _roll(self, now: float, *, opening: bool = True) -> None:
        opened = self._opened
        if opened is not None and now < opened + self.limits.window_s:
            return
        self._used = dict.fromkeys(BUDGETS, 0.0)
        self._spent = None
        self._opened = now if opening else None

    def _limit(self, budget: str) -> float:
        return float(getattr(self.limits, budget))

    def _over(self) -> str | None:
        for budget in BUDGETS:
            limit = self._limit(budget)
            if limit and self._used[budget] >= limit:
                return budget
        return None


def describe(budget: str, amount: float) -> str:
    """``12.3 CPU seconds``, ``40 requests``."""
    unit = _UNITS[budget]
    shown = f"{amount:.1f}" if budget == "cpu_s" else f"{amount:.0f}"
    return f"{shown} {unit}"


def _message(  # noqa: PLR0917 - one message's parts
    plugin: str,
    budget: str,
    used: float,
    limit: float,
    window_s: float,
    reopens_in: float,
    wall: Callable[[], float],
) -> str:
    at = time.strftime("%H:%M:%S", time.localtime(wall() + reopens_in))
    return (
        f"plugin '{plugin}': its {budget} budget is spent: {describe(budget, used)} used of "
        f"{describe(budget, limit)} in the current {window_s:g} s window; calls are refused "
        f"until the window reopens in {reopens_in:.0f} s (at {at}); raise budget.{budget} "
        f"(or budget.plugins.{plugin}.{budget}) in the policy, or wait"
    )
