"""The path of one call: the warm path, the guarded slow path, and what a failure counts for.

The warm path takes no lock: one dict lookup and a few attribute reads
(the lifecycle generation, the breaker closed, the shared state fresh, no
budget) before the worker. Anything else takes the slow path: the budget
and the circuit breaker first, then the worker (started under the plugin's
lock if none runs), its deadline perhaps cut to the caller's. A failure
the plugin's call ended in counts for its breaker, and a breaker that
trips too often quarantines the plugin (docs/architecture.md, "Errors at
the boundaries" and "Threads").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from caplet._display import safe_line
from caplet._errors import (
    BudgetExceededError,
    CallCancelledError,
    CallTimeoutError,
    CapletError,
    InvalidOutputError,
    LifecycleError,
    PluginCallError,
    ProtocolError,
    SandboxError,
    WorkerBusyError,
    WorkerGoneError,
)
from caplet._host._breaker import CircuitBreaker, Trip
from caplet._host._failures import call_failure
from caplet._host._guards import PluginGuards
from caplet._host._manager import PluginManager
from caplet._host._observe import Observer
from caplet._host._policy import Policy
from caplet._host._records import Outcome, PluginInfo
from caplet._host._running import CallTarget, RunningWorker
from caplet._host._workers import Workers
from caplet._sandbox._context import Refused
from caplet._suggest import did_you_mean

__all__ = ["CallPath", "is_refusal"]

#: How much of a failure's message goes into a quarantine reason.
_REASON_CHARS = 300
#: How often a call is tried when its worker turns out to have ended before
#: the call was sent (WorkerGoneError: nothing ran); once more is enough,
#: since the retry finds the replacement or starts it.
_GONE_ATTEMPTS = 2


class CallPath:
    """A plugin's calls, from the host's ``call``, a hook, another plugin or guest code."""

    def __init__(
        self,
        manager: PluginManager,
        workers: Workers,
        guards: PluginGuards,
        observer: Observer,
        *,
        clock: Callable[[], float],
        cancel: threading.local,
        quarantine: Callable[[str, str], Outcome],
        follow_quarantine: Callable[[str], None],
    ) -> None:
        self.manager = manager
        self._workers = workers
        self._guards = guards
        self.observer = observer
        #: When the shared state is looked at again (``policy.state_refresh_s``).
        self._clock = clock
        #: Per thread: the event that cancels what this thread is doing for an
        #: asyncio caller (the host's ``cancellable`` and ``interrupt``).
        self._cancel = cancel
        #: The host's quarantine: a breaker that trips too often.
        self._quarantine = quarantine
        #: A quarantine recorded elsewhere, followed here.
        self._follow_quarantine = follow_quarantine

    @property
    def policy(self) -> Policy:
        return self.manager.policy

    def call(
        self,
        name: str,
        target: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        caller_input: bool = False,
    ) -> Any:
        """:meth:`PluginHost.call <caplet._host._host.PluginHost.call>`: the warm path
        (no lock, no check beyond what is stale), else :meth:`guarded_call`.

        ``caller_input``: an agent chose the arguments (:meth:`PluginHost.agent_call
        <caplet._host._host.PluginHost.agent_call>`); a failure may open the breaker
        but never counts toward quarantine, as for guest code's calls."""
        running = self._workers.running.get(name)
        parts = running.targets.get(target) if running is not None else None
        if (
            running is None
            or parts is None
            or running.generation != self.manager.generation
            or not running.breaker.closed
            or self._clock() >= running.refresh_at
            or running.meter.budget is not None
        ):
            # Slow path: the breaker's verdict, an explanation of what is
            # wrong, a fresh look at the shared state, or a fresh worker.
            return self.guarded_call(name, target, args, kwargs, caller_input=caller_input)
        # Whether the worker still runs is not asked first (a syscall on
        # every call): a worker that exited while idle refuses the frame
        # (WorkerGoneError, nothing ran) and the slow path starts a new one.
        schemas = parts[2]
        if schemas is not None:
            try:
                schemas.check_args(args, kwargs)
            except LifecycleError as exc:
                running.meter.failed(exc)  # the caller's arguments: "rejected", not counted
                raise
        started = time.perf_counter_ns()
        try:
            value = running.call(
                parts[0],
                parts[1],
                args,
                kwargs,
                timeout_s=running.timeout_s,
                cancel=getattr(self._cancel, "event", None),
            )
            if schemas is not None:
                schemas.check_result(value)
        except WorkerGoneError:
            return self.guarded_call(name, target, args, kwargs, caller_input=caller_input)
        except SandboxError as exc:
            self.failed(name, target, running.breaker, exc, running, nested=caller_input)
            running.meter.failed(exc, started)
            raise
        except Exception as exc:
            if isinstance(exc, CapletError):
                raise
            error = call_failure(name, target, exc, started=True)
            self.failed(name, target, running.breaker, error, running, nested=caller_input)
            running.meter.failed(error, started)
            raise error from exc
        if running.breaker.failures:
            running.breaker.record_success()
        running.meter.ok(started)
        return value

    def guarded_call(
        self,
        name: str,
        target: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        timeout_cap: float | None = None,
        caller_input: bool = False,
    ) -> Any:
        """A call that is not on the warm path: breaker first, then the worker.

        ``timeout_cap`` shortens the plugin's own deadline (a nested call
        from another plugin must end within what is left of the caller's).
        Such a call's input is its caller's, as ``caller_input`` says of an
        agent's call: a failure never counts toward quarantine (:meth:`failed`).
        """
        nested = caller_input or timeout_cap is not None
        meter = self.observer.meter(name)
        breaker = self._guards.breaker(name)
        try:
            meter.admit()  # BudgetExceededError: nothing runs; logged, never counted
            breaker.before_call()  # CircuitOpenError: nothing runs, nothing is counted
        except BudgetExceededError as exc:
            self.manager.log_decision(name, "budget", target, False, str(exc))
            meter.failed(exc)
            raise
        except SandboxError as exc:
            meter.failed(exc)
            raise
        running: RunningWorker | None = None
        attempts = _GONE_ATTEMPTS
        started = time.perf_counter_ns()
        # A nested call's time is its caller's, from now: a worker started for it, or
        # busy with other calls, uses it up too (attack31).
        deadline = None if timeout_cap is None else time.monotonic() + timeout_cap
        try:
            while True:
                running = None
                running, parts = self.prepare_call(
                    name, target, None if deadline is None else deadline - time.monotonic()
                )
                schemas = parts[2]
                if schemas is not None:
                    schemas.check_args(args, kwargs)
                timeout_s = running.timeout_s
                if timeout_cap is not None:
                    timeout_s = min(timeout_s, timeout_cap)
                try:
                    value = running.call(
                        parts[0],
                        parts[1],
                        args,
                        kwargs,
                        timeout_s=timeout_s,
                        cancel=getattr(self._cancel, "event", None),
                        # The caller's deadline bounds the wait for the worker too
                        # (attack31): past it the caller was killed for lateness
                        # and the call made after it was gone.
                        wait_s=None if deadline is None else deadline - time.monotonic(),
                    )
                    break
                except WorkerGoneError:
                    # Nothing ran: the worker this thread picked ended first
                    # (another thread's call crashed it, or a disable stopped
                    # it). The next turn finds the current state.
                    attempts -= 1
                    if not attempts:
                        raise
            if schemas is not None:
                schemas.check_result(value)
        except SandboxError as exc:
            if (
                isinstance(exc, CallTimeoutError)
                and timeout_cap is not None
                and running is not None
                and timeout_cap < running.timeout_s
            ):
                # The caller's deadline ran out, not the plugin's: guest code
                # or a calling plugin choosing how little time is left must not
                # count toward this plugin's breaker (it quarantined honest
                # plugins). The worker was killed mid-call all the same.
                self._cut_short(name, target, exc, running)
                breaker.cancel_probe()
                meter.failed(exc, started)
                raise
            if not self.failed(name, target, breaker, exc, running, nested=nested):
                breaker.cancel_probe()
            meter.failed(exc, started)
            raise
        except Exception as exc:
            if isinstance(exc, CapletError):
                breaker.cancel_probe()  # not the plugin's doing, as below
                meter.failed(exc)
                raise
            # Never a foreign exception out of a call (issue 13): a failure of
            # the host on this call counts like the failure it stands for.
            error = call_failure(name, target, exc, started=running is not None)
            self.failed(name, target, breaker, error, running, nested=nested)
            meter.failed(error, started)
            raise error from exc
        except BaseException:
            # Not the plugin's doing (not enabled, undeclared, bad arguments,
            # interrupted): no verdict, so a half-open breaker probes again.
            breaker.cancel_probe()
            raise
        finally:
            meter.after_call()  # a budgeted plugin's CPU, charged now
        breaker.record_success()
        meter.ok(started)
        return value

    def failed(
        self,
        name: str,
        target: str,
        breaker: CircuitBreaker,
        exc: SandboxError,
        running: RunningWorker | None,
        *,
        nested: bool = False,
    ) -> bool:
        """Account for a failed call; False when it was not the plugin's failure.

        ``nested``: the call came from guest code, an agent (``agent_call``) or
        another plugin, which chose its input; it may open this host's breaker
        but never trips it toward quarantine, which stops the plugin on every
        host until a person releases it: a decision that text an agent read
        (another plugin's result, a fetched page) must not be able to make
        (round 4 for guest code; attack18 for ``caplet mcp``'s tool calls).

        ``running`` is the worker the call went to (None: none was started).
        A dead one is stopped only if it is still the plugin's current worker,
        so a failure reported late never stops a replacement another thread
        has started meanwhile.

        An argument that cannot cross the boundary is refused by the host
        before anything is sent (a ProtocolError with the worker still
        running): that is the caller's mistake and does not count; nor does
        a ``caplet.plugin.Refused`` the plugin raised on purpose. Every
        other SandboxError does: timeout, crash, start failure, a malformed
        frame, isolation violations, the plugin's exception, invalid output.
        """
        worker_alive = running is not None and running.worker.alive
        if isinstance(exc, ProtocolError) and worker_alive:
            return False
        if isinstance(exc, WorkerBusyError):
            # Nothing was sent: the worker was busy with other calls for all the time
            # the nested call's caller had left (attack31). Not the plugin's failure.
            self.manager.log_decision(name, "call", target, False, str(exc))
            return False
        if isinstance(exc, CallCancelledError):
            # The caller's decision, not the plugin's failure (its worker, if it
            # was running the call, is dead and goes).
            self.manager.log_decision(name, "call", target, False, str(exc))
            if running is not None and not worker_alive:
                self._workers.stop(name, running)
            return False
        if isinstance(exc, PluginCallError) and worker_alive and is_refusal(exc):
            # caplet.plugin.Refused: the plugin refused bad input on purpose
            self.manager.log_decision(name, "call", target, False, f"refused: {exc}")
            return False
        if not worker_alive:
            self.manager.log_decision(name, "call", target, False, str(exc))
            if running is not None:
                self._workers.stop(name, running)
        elif isinstance(exc, InvalidOutputError):
            self.manager.log_decision(name, "output", target, False, str(exc))
        trip = breaker.record_failure(quarantinable=not nested)
        if trip is not None:
            self._tripped(name, target, trip, exc, nested=nested)
        return True

    def _cut_short(
        self, name: str, target: str, exc: CallTimeoutError, running: RunningWorker
    ) -> None:
        """Log a call the caller's own deadline ended, and retire its killed worker."""
        self.manager.log_decision(
            name,
            "call",
            target,
            False,
            f"cut short by the caller's deadline (not counted toward the breaker): {exc}",
        )
        if not running.worker.alive:
            self._workers.stop(name, running)

    def _tripped(
        self, name: str, target: str, trip: Trip, exc: SandboxError, *, nested: bool = False
    ) -> None:
        """Log a trip; quarantine the plugin once it trips too often."""
        detail = trip.describe()
        if nested:
            detail += (
                " (on a call whose input its caller chose, guest code, an agent or another "
                "plugin: not counted toward quarantine)"
            )
        self.manager.log_decision(name, "circuit", target, False, detail)
        if nested or not trip.quarantine:
            return
        # One line, escaped: the failure quotes the plugin's own exception
        # message, and the reason is logged by every host that follows the
        # quarantine (CWE-117, attack10).
        last = safe_line(str(exc))
        if len(last) > _REASON_CHARS:
            last = last[: _REASON_CHARS - 3] + "..."
        reason = (
            f"circuit breaker tripped {trip.trips} times within {trip.window_s:g}s "
            f"(last failure: {last})"
        )
        if self.manager.get_plugin(name) is not None:
            self._quarantine(name, reason)

    def prepare_call(
        self, name: str, target: str, wait_s: float | None = None
    ) -> tuple[RunningWorker, CallTarget]:
        """Validate a call and return the worker to send it to, starting one if needed.

        Holds the plugin's lock, so of several threads finding the worker
        dead exactly one starts the next; the others wait and use it.
        ``wait_s`` (a nested call: what its caller has left) bounds the wait for
        the lock, which an enable holds while it asks a person (attack31); past it,
        WorkerBusyError and nothing is sent.
        """
        retired: RunningWorker | None = None
        follow = False
        lock = self._guards.lock(name)
        if wait_s is None:
            lock.acquire()
        elif not lock.acquire(timeout=max(wait_s, 0.0)):
            raise WorkerBusyError(
                f"plugin '{name}': {target} was not sent: its caller had "
                f"{max(wait_s, 0.0) * 1000:.0f} ms left, and the plugin was being enabled, "
                "disabled or restarted for all of it; nothing ran (call again later)"
            )
        try:
            with _Held(lock):
                # Read before the checks: a lifecycle change after them bumps
                # it again, so the warm path re-validates instead of trusting
                # a check that is already stale.
                generation = self.manager.generation
                checked_at = self._clock()
                try:
                    info = self._workers.enabled_info(name)
                except LifecycleError:
                    retired = self._workers.detach(name)  # disabled behind our back (the manager)
                    info_now = self.manager.get_plugin(name)
                    # Quarantined by another process or node: disable here too.
                    follow = (
                        info_now is not None
                        and info_now.quarantine is not None
                        and self.manager.enabled_hash(name) is not None
                    )
                    raise
                module, _, function = target.partition(".")
                self.check_declared(info, module, function)
                running = self._workers.running.get(name)
                if running is None or not running.worker.alive:
                    retired = self._workers.detach(name)
                    running = self._workers.start(name)
                running.generation = generation
                running.refresh_at = checked_at + self.policy.state_refresh_s
                return running, running.targets[target]
        finally:
            self._workers.dispose(retired)
            if follow:
                self._follow_quarantine(name)

    @staticmethod
    def check_declared(info: PluginInfo, module: str, function: str) -> None:
        declared = [f"{m.name}.{f}" for m in info.manifest.modules for f in m.function_names]
        if f"{module}.{function}" not in declared:
            hint = did_you_mean(f"{module}.{function}", declared)
            raise LifecycleError(
                f"plugin {info.name!r} does not declare {module}.{function}{hint}; "
                f"declared functions: {', '.join(declared)}"
            )


#: What a size limit raises in a worker: the broker's response or request too large,
#: a result over the channel. A refusal of the input's size, not a failure of the
#: plugin, so never counted by the breaker (issue 15; README, "Limits").
_SIZE_REFUSALS = frozenset({"SizeLimitError"})


def is_refusal(exc: PluginCallError) -> bool:
    """True when the plugin raised ``caplet.plugin.Refused`` (or a subclass whose name
    ends in it, e.g. ``NotFoundRefused``: only the class name crosses the channel), or
    a size limit refused what it was asked to carry."""
    return exc.exc_type.endswith(Refused.__name__) or exc.exc_type in _SIZE_REFUSALS


class _Held:
    """A lock already acquired, released when the block ends (``with`` would acquire it)."""

    __slots__ = ("_lock",)

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()
