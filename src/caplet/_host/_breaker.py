"""The per-plugin circuit breaker: stop calling a plugin that keeps failing.

Pure bookkeeping, no I/O: the host tells it before each call and after each
outcome, and it answers "go", "refuse" (:class:`CircuitOpenError`) or "this
failure tripped me" (a :class:`Trip`). Time comes from an injectable clock
(``time.monotonic`` by default), so tests drive it deterministically.

The states (design.md section 5, seed 003):

* **closed** -- calls run; every failure of any kind (timeout, crash,
  invalid output, protocol error, isolation violation, plugin exception)
  adds one to a count of *consecutive* failures and a success resets it.
  ``failure_threshold`` consecutive failures open the breaker.
* **open** -- for ``cooldown_s`` seconds every call is refused at once,
  without running the plugin and without adding to the count.
* **half-open** -- after the cooldown exactly one call (the probe) is let
  through; its success closes the breaker, its failure opens it again for
  another cooldown. Calls arriving while the probe runs are refused.

Each opening is a *trip*. A plugin that trips ``quarantine_after`` times
within ``quarantine_window_s`` seconds is not worth probing any more: the
trip says ``quarantine=True`` and the host quarantines it (persisted, until
``caplet release``).

Calls from several threads: every transition holds the breaker's lock, so
``failure_threshold`` concurrent failures open it exactly once, and only
one thread becomes the probe. The probe is the *thread* that
:meth:`~CircuitBreaker.before_call` admitted after the cooldown; only its
outcome closes or re-opens a half-open breaker. A call admitted while the
breaker was still closed can end after it opened (a slow call on another
thread): its failure is counted but trips nothing, and its success closes
nothing, because the breaker's state is no longer about that call.
"""

from __future__ import annotations

import collections
import enum
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from caplet._errors import CircuitOpenError, HostError
from caplet._host._policy import Policy

__all__ = ["BreakerState", "CircuitBreaker", "Trip"]

Clock = Callable[[], float]


class BreakerState(enum.Enum):
    """Where a breaker is (see the module docstring)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True, slots=True)
class Trip:
    """What :meth:`CircuitBreaker.record_failure` returns when a failure opened the breaker.

    ``trips`` counts the openings within the quarantine window, this one
    included; ``quarantine`` is True once it reaches ``quarantine_after``.
    """

    plugin: str
    failures: int
    cooldown_s: float
    trips: int
    quarantine_after: int
    window_s: float
    probe_failed: bool

    @property
    def quarantine(self) -> bool:
        return self.trips >= self.quarantine_after

    def describe(self) -> str:
        """One line for the decision log and the quarantine reason."""
        cause = (
            "the half-open probe call failed"
            if self.probe_failed
            else f"{self.failures} consecutive failures"
        )
        return (
            f"circuit opened for {self.plugin} after {cause}; cooldown {self.cooldown_s:g}s; "
            f"trip {self.trips} of {self.quarantine_after} allowed within {self.window_s:g}s"
        )


class CircuitBreaker:
    """The breaker of one plugin.

    ``closed`` is a plain attribute, True exactly in the closed state, so the
    host's warm path pays one attribute read (no lock) to know it may call
    straight away; ``failures`` likewise, to know a success has nothing to
    reset. Every transition takes a lock, so two threads cannot both become
    the half-open probe.
    """

    __slots__ = (
        "_clock",
        "_lock",
        "_opened_at",
        "_probe_owner",
        "_state",
        "_trips",
        "closed",
        "cooldown_s",
        "failure_threshold",
        "failures",
        "plugin",
        "quarantine_after",
        "quarantine_window_s",
    )

    def __init__(
        self,
        plugin: str,
        *,
        failure_threshold: int = 3,
        cooldown_s: float = 60.0,
        quarantine_after: int = 3,
        quarantine_window_s: float = 3600.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if failure_threshold < 1 or quarantine_after < 1:
            raise HostError(
                f"circuit breaker of {plugin}: failure_threshold ({failure_threshold}) and "
                f"quarantine_after ({quarantine_after}) must be at least 1; fix the Policy"
            )
        if not cooldown_s >= 0 or not quarantine_window_s >= 0:
            raise HostError(
                f"circuit breaker of {plugin}: cooldown_s ({cooldown_s!r}) and "
                f"quarantine_window_s ({quarantine_window_s!r}) must be 0 or more seconds; "
                "fix the Policy"
            )
        self.plugin = plugin
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self.quarantine_after = quarantine_after
        self.quarantine_window_s = quarantine_window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self.closed = True
        #: Consecutive failures so far (refused calls never add to it). Read-only.
        self.failures = 0
        self._opened_at = 0.0
        #: The thread running the half-open probe call (None: no probe runs).
        self._probe_owner: int | None = None
        #: Clock readings of recent trips, oldest first (at most quarantine_after kept).
        self._trips: collections.deque[float] = collections.deque(maxlen=quarantine_after)

    @classmethod
    def from_policy(cls, plugin: str, policy: Policy, *, clock: Clock = time.monotonic) -> Self:
        """A breaker with the thresholds of ``policy``."""
        return cls(
            plugin,
            failure_threshold=policy.failure_threshold,
            cooldown_s=policy.cooldown_s,
            quarantine_after=policy.quarantine_after,
            quarantine_window_s=policy.quarantine_window_s,
            clock=clock,
        )

    # -- reading ---------------------------------------------------------------------

    @property
    def state(self) -> BreakerState:
        """The state as of now (an open breaker whose cooldown is over reads half-open)."""
        if self._state is BreakerState.OPEN and self.cooldown_remaining() == 0:
            return BreakerState.HALF_OPEN
        return self._state

    @property
    def probing(self) -> bool:
        """True while the half-open probe call is running."""
        return self._probe_owner is not None

    def cooldown_remaining(self) -> float:
        """Seconds until an open breaker lets a probe through (0 when not open)."""
        if self._state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._opened_at + self.cooldown_s - self._clock())

    # -- the call protocol -------------------------------------------------------------

    def before_call(self) -> None:
        """Allow a call, or raise :class:`CircuitOpenError` without counting anything.

        After the cooldown the first caller becomes the probe (the breaker
        goes half-open); it must end in :meth:`record_success`,
        :meth:`record_failure` or :meth:`cancel_probe`.
        """
        if self.closed:
            return
        with self._lock:
            self._admit()

    def _admit(self) -> None:
        if self._state is BreakerState.CLOSED:
            return
        if self._state is BreakerState.OPEN:
            remaining = self.cooldown_remaining()
            if remaining > 0:
                # Rounded up: "0s remaining" must never be said of a refusal.
                seconds = math.ceil(remaining)
                raise CircuitOpenError(
                    f"circuit open for {self.plugin} ({self.failures} failures, "
                    f"{seconds}s cooldown remaining)",
                    plugin=self.plugin,
                    failures=self.failures,
                    remaining_s=remaining,
                )
            self._state = BreakerState.HALF_OPEN
        if self._probe_owner is not None:
            raise CircuitOpenError(
                f"circuit half-open for {self.plugin} ({self.failures} failures, "
                "a probe call is running; retry when it has returned)",
                plugin=self.plugin,
                failures=self.failures,
            )
        self._probe_owner = threading.get_ident()

    def record_success(self) -> None:
        """A call succeeded: the count starts again and a probe closes the breaker.

        Must be called by the thread that made the call (see the module docstring).
        """
        with self._lock:
            if self._state is BreakerState.CLOSED:
                self.failures = 0
            elif self._is_probe():
                self.failures = 0
                self._state = BreakerState.CLOSED
                self.closed = True
                self._probe_owner = None
            # Otherwise a call admitted before the breaker opened: only the
            # probe may close it again.

    def record_failure(self, *, quarantinable: bool = True) -> Trip | None:
        """A call failed; returns the :class:`Trip` when this failure opened the breaker.

        Must be called by the thread that made the call (see the module docstring).
        ``quarantinable=False`` (a call made by guest code or another plugin, whose
        input the plugin did not choose): the failure counts and may open the
        breaker, but that opening is no trip toward quarantine, which is persisted
        for every host (red team, round 4: guest code quarantined an honest plugin by
        feeding it text it could not parse).
        """
        with self._lock:
            self.failures += 1
            if self._is_probe():
                self._probe_owner = None
                return self._open(probe_failed=True, quarantinable=quarantinable)
            if self._state is BreakerState.CLOSED and self.failures >= self.failure_threshold:
                return self._open(probe_failed=False, quarantinable=quarantinable)
            # Already open (or half-open with another thread's probe): a call
            # that started before the breaker opened ended badly. It is
            # counted, but the breaker does not trip twice.
            return None

    def cancel_probe(self) -> None:
        """The probe ended without a verdict on the plugin (the caller's mistake).

        The breaker stays half-open and the next call becomes the probe. From
        any thread but the probe's it does nothing: that call was no probe.
        """
        with self._lock:
            if self._is_probe():
                self._probe_owner = None

    def _is_probe(self) -> bool:
        """True when the calling thread runs the half-open probe (lock held)."""
        return self._state is BreakerState.HALF_OPEN and self._probe_owner == threading.get_ident()

    def reset(self) -> None:
        """Forget everything: closed, no failures, no trips (after a release)."""
        with self._lock:
            self._state = BreakerState.CLOSED
            self.closed = True
            self.failures = 0
            self._probe_owner = None
            self._trips.clear()

    def _open(self, *, probe_failed: bool, quarantinable: bool) -> Trip:
        now = self._clock()
        self._state = BreakerState.OPEN
        self.closed = False
        self._opened_at = now
        if quarantinable:
            self._trips.append(now)
        horizon = now - self.quarantine_window_s
        trips = sum(1 for at in self._trips if at >= horizon)
        return Trip(
            plugin=self.plugin,
            failures=self.failures,
            cooldown_s=self.cooldown_s,
            trips=trips,
            quarantine_after=self.quarantine_after,
            window_s=self.quarantine_window_s,
            probe_failed=probe_failed,
        )
