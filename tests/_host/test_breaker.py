"""The circuit breaker: its state machine on a fake clock, then wired into a real host.

The host tests run real plugins in real workers and drive the breakers'
clock by hand, so cooldowns pass without sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from caplet import (
    CircuitOpenError,
    HostError,
    LifecycleError,
    PluginCallError,
    PluginHost,
    PluginManager,
    PluginState,
    Policy,
    ProtocolError,
    SqliteStore,
    WorkerCrashedError,
)
from caplet._host._breaker import BreakerState, CircuitBreaker, Trip
from tests.conftest import PluginFactory


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def breaker(clock: FakeClock, **settings: float) -> CircuitBreaker:
    return CircuitBreaker("flaky", clock=clock, **settings)  # type: ignore[arg-type]


def state_of(b: CircuitBreaker) -> BreakerState:
    """Read afresh (a bare ``b.state`` stays narrowed for mypy across calls)."""
    return b.state


T = TypeVar("T")


def in_other_thread(action: Callable[[], T]) -> T:
    """Run ``action`` in a new thread, wait for it, and return (or raise) what it did."""
    outcome: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(action())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return outcome[0]


def fail_times(b: CircuitBreaker, times: int) -> list[Trip | None]:
    trips: list[Trip | None] = []
    for _ in range(times):
        b.before_call()
        trips.append(b.record_failure())
    return trips


# -- the state machine ---------------------------------------------------------------------


def test_three_consecutive_failures_open_it(clock: FakeClock) -> None:
    b = breaker(clock)
    assert b.closed
    assert b.state is BreakerState.CLOSED
    trips = fail_times(b, 3)
    assert trips[:2] == [None, None]
    trip = trips[2]
    assert trip is not None
    assert not b.closed
    assert b.state is BreakerState.OPEN
    assert b.failures == 3


def test_an_open_breaker_refuses_with_the_exact_message_and_counts_nothing(
    clock: FakeClock,
) -> None:
    b = breaker(clock)
    fail_times(b, 3)
    with pytest.raises(CircuitOpenError) as caught:
        b.before_call()
    assert str(caught.value) == "circuit open for flaky (3 failures, 60s cooldown remaining)"
    assert caught.value.plugin == "flaky"
    assert caught.value.failures == 3
    clock.advance(15.25)
    for _ in range(5):
        with pytest.raises(CircuitOpenError) as caught:
            b.before_call()
        assert str(caught.value) == "circuit open for flaky (3 failures, 45s cooldown remaining)"
    assert b.failures == 3, "refused calls never add to the count"
    assert b.cooldown_remaining() == pytest.approx(44.75)
    clock.advance(44.5)  # 0.25 s left: rounded up, never "0s"
    with pytest.raises(CircuitOpenError, match=r"\(3 failures, 1s cooldown remaining\)$"):
        b.before_call()


def test_after_the_cooldown_exactly_one_probe_runs(clock: FakeClock) -> None:
    b = breaker(clock)
    fail_times(b, 3)
    clock.advance(60)
    assert b.state is BreakerState.HALF_OPEN
    b.before_call()  # the probe
    assert b.probing
    with pytest.raises(CircuitOpenError, match="a probe call is running"):
        b.before_call()
    assert b.failures == 3
    b.record_success()
    assert b.closed
    assert state_of(b) is BreakerState.CLOSED
    assert b.failures == 0
    b.before_call()  # closed again: calls run


def test_a_failed_probe_opens_it_again_for_a_full_cooldown(clock: FakeClock) -> None:
    b = breaker(clock)
    fail_times(b, 3)
    clock.advance(61)
    b.before_call()
    trip = b.record_failure()
    assert trip is not None
    assert trip.probe_failed
    assert trip.trips == 2
    assert "the half-open probe call failed" in trip.describe()
    assert b.state is BreakerState.OPEN
    with pytest.raises(CircuitOpenError, match="60s cooldown remaining"):
        b.before_call()


def test_a_probe_without_a_verdict_lets_the_next_call_probe(clock: FakeClock) -> None:
    b = breaker(clock)
    fail_times(b, 3)
    clock.advance(60)
    b.before_call()
    b.cancel_probe()  # e.g. the caller passed arguments the schema refuses
    b.before_call()  # not refused: this one is the probe now
    assert b.probing


def test_a_success_resets_the_count(clock: FakeClock) -> None:
    b = breaker(clock)
    fail_times(b, 2)
    b.before_call()
    b.record_success()
    assert b.failures == 0
    assert fail_times(b, 2) == [None, None]
    assert b.closed, "2 + 2 failures with a success between are not 3 consecutive"


def test_thresholds_and_cooldown_are_configurable(clock: FakeClock) -> None:
    b = CircuitBreaker.from_policy("flaky", Policy(failure_threshold=1, cooldown_s=5), clock=clock)
    assert fail_times(b, 1)[0] is not None
    with pytest.raises(CircuitOpenError, match=r"^circuit open for flaky \(1 failures, 5s"):
        b.before_call()


def test_trips_within_the_window_ask_for_quarantine(clock: FakeClock) -> None:
    b = breaker(clock, quarantine_after=3, quarantine_window_s=3600)
    first = fail_times(b, 3)[2]
    assert first is not None
    assert first.trips == 1
    assert not first.quarantine
    clock.advance(60)
    second = fail_times(b, 1)[0]
    assert second is not None
    assert second.trips == 2
    assert not second.quarantine
    clock.advance(60)
    third = fail_times(b, 1)[0]
    assert third is not None
    assert third.trips == 3
    assert third.quarantine
    assert "trip 3 of 3 allowed within 3600s" in third.describe()


def test_trips_older_than_the_window_do_not_count(clock: FakeClock) -> None:
    b = breaker(clock, quarantine_after=2, quarantine_window_s=100)
    fail_times(b, 3)
    clock.advance(101)  # the first trip falls out of the window
    trip = fail_times(b, 1)[0]
    assert trip is not None
    assert trip.trips == 1
    assert not trip.quarantine


def test_only_the_probe_thread_decides_a_half_open_breaker(clock: FakeClock) -> None:
    """Calls admitted while the breaker was closed can end after it opened (slow
    calls on other threads): counted, but they neither trip it again nor close it."""
    b = breaker(clock)
    in_other_thread(b.before_call)  # a slow call, admitted while closed
    fail_times(b, 3)
    assert in_other_thread(b.record_success) is None  # the slow call succeeds late
    assert state_of(b) is BreakerState.OPEN, "only the probe closes an open breaker"
    clock.advance(60)
    b.before_call()  # this thread is the probe
    assert in_other_thread(b.record_failure) is None, "a late failure is not the probe's"
    assert b.failures == 4
    assert state_of(b) is BreakerState.HALF_OPEN
    in_other_thread(b.record_success)
    in_other_thread(b.cancel_probe)
    assert state_of(b) is BreakerState.HALF_OPEN
    assert b.probing
    with pytest.raises(CircuitOpenError, match="a probe call is running"):
        in_other_thread(b.before_call)
    b.record_success()  # the probe's verdict
    assert b.closed
    assert b.failures == 0


def test_reset_forgets_everything(clock: FakeClock) -> None:
    b = breaker(clock)
    fail_times(b, 3)
    b.reset()
    assert b.closed
    assert b.failures == 0
    b.before_call()


def test_nonsense_settings_are_refused(clock: FakeClock) -> None:
    with pytest.raises(HostError, match="failure_threshold"):
        breaker(clock, failure_threshold=0)
    with pytest.raises(HostError, match="cooldown_s"):
        breaker(clock, cooldown_s=-1)


# -- wired into the host ------------------------------------------------------------------------

FLAKY = """
import os

def create_functions(config):
    calls = []

    def work(ok):
        calls.append(ok)
        if not ok:
            raise RuntimeError("asked to fail")
        return len(calls)

    def count():
        return len(calls)

    def crash():
        os._exit(3)

    return {"main": {"work": work, "count": count, "crash": crash}}
"""
FLAKY_MODULES = '[modules.main]\nfunctions = ["work", "count", "crash"]\n'


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, clock: FakeClock) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False, clock=clock) as h:
        yield h


def enable_flaky(host: PluginHost, make_plugin: PluginFactory, name: str = "flaky") -> None:
    make_plugin(name, source=FLAKY, modules=FLAKY_MODULES)
    host.discover()
    assert host.enable(name, consent=True)


def test_host_opens_the_breaker_and_stops_calling_the_worker(
    host: PluginHost, make_plugin: PluginFactory, clock: FakeClock
) -> None:
    enable_flaky(host, make_plugin)
    pid = host.worker_pid("flaky")
    for _ in range(3):
        with pytest.raises(PluginCallError, match="asked to fail"):
            host.call("flaky", "main.work", False)
    for target, args in (("main.work", (True,)), ("main.count", ()), ("main.crash", ())):
        with pytest.raises(CircuitOpenError) as caught:
            host.call("flaky", target, *args)
        assert str(caught.value) == "circuit open for flaky (3 failures, 60s cooldown remaining)"
    assert host.breaker("flaky").failures == 3
    assert host.worker_pid("flaky") == pid, "the worker was neither called nor replaced"
    clock.advance(60)
    # The probe is the first call into the worker since the third failure:
    # the refused calls (one of them a crash) never reached it.
    assert host.call("flaky", "main.count") == 3
    assert host.breaker("flaky").closed
    assert host.call("flaky", "main.work", True) == 4
    circuit = [d for d in host.manager.store.decisions("flaky") if d.action == "circuit"]
    assert len(circuit) == 1
    assert not circuit[0].allowed
    assert circuit[0].target == "main.work"
    assert "after 3 consecutive failures" in circuit[0].detail


def test_a_success_on_the_warm_path_resets_the_count(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    enable_flaky(host, make_plugin)
    for ok in (False, False, True, False, False, True):
        try:
            host.call("flaky", "main.work", ok)
        except PluginCallError:
            pass
    assert host.breaker("flaky").closed
    assert host.breaker("flaky").failures == 0


def test_crashes_count_and_no_worker_is_started_while_open(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    enable_flaky(host, make_plugin)
    for _ in range(3):
        with pytest.raises(WorkerCrashedError):
            host.call("flaky", "main.crash")
    assert host.worker_pid("flaky") is None
    with pytest.raises(CircuitOpenError):
        host.call("flaky", "main.count")
    assert host.worker_pid("flaky") is None, "an open breaker starts no worker"


def test_caller_mistakes_do_not_count(host: PluginHost, make_plugin: PluginFactory) -> None:
    enable_flaky(host, make_plugin)
    for _ in range(4):
        with pytest.raises(LifecycleError, match="does not declare"):
            host.call("flaky", "main.nope")
        with pytest.raises(ProtocolError, match=r"cannot call main\.work"):
            host.call("flaky", "main.work", object())
    assert host.breaker("flaky").failures == 0
    assert host.call("flaky", "main.count") == 0


REFUSING = """
from caplet.plugin import Refused


class NotFoundRefused(Refused):
    pass


def create_functions(config):
    def read(name):
        if name == "subclass":
            raise NotFoundRefused(f"not found: {name}")
        raise Refused(f"access denied: {name}")

    return {"main": {"read": read}}
"""


def test_a_deliberate_refusal_reaches_the_caller_but_never_the_breaker(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("refuser", source=REFUSING, modules='[modules.main]\nfunctions = ["read"]\n')
    host.discover()
    assert host.enable("refuser", consent=True)
    for name in ("secret", "subclass") * 3:
        with pytest.raises(PluginCallError) as caught:
            host.call("refuser", "main.read", name)
        assert caught.value.exc_type in {"Refused", "NotFoundRefused"}
    assert host.breaker("refuser").closed
    assert host.breaker("refuser").failures == 0
    refused = [d for d in host.manager.store.decisions("refuser") if d.action == "call"]
    assert len(refused) == 6
    assert all(not d.allowed and d.detail.startswith("refused: ") for d in refused)


def test_a_failed_probe_reopens_and_a_mistaken_probe_does_not_use_it_up(
    host: PluginHost, make_plugin: PluginFactory, clock: FakeClock
) -> None:
    enable_flaky(host, make_plugin)
    for _ in range(3):
        with pytest.raises(PluginCallError):
            host.call("flaky", "main.work", False)
    clock.advance(60)
    with pytest.raises(LifecycleError):
        host.call("flaky", "main.nope")  # no verdict on the plugin
    with pytest.raises(PluginCallError):
        host.call("flaky", "main.work", False)  # the real probe fails
    with pytest.raises(CircuitOpenError, match=r"\(4 failures, 60s cooldown remaining\)"):
        host.call("flaky", "main.count")


def trip_three_times(host: PluginHost, clock: FakeClock, name: str = "flaky") -> None:
    for _ in range(3):
        with pytest.raises(PluginCallError):
            host.call(name, "main.work", False)
    for _ in range(2):
        clock.advance(60)
        with pytest.raises(PluginCallError):
            host.call(name, "main.work", False)


def test_repeated_trips_quarantine_the_plugin_persistently(
    host: PluginHost,
    make_plugin: PluginFactory,
    clock: FakeClock,
    plugins_dir: Path,
    state_dir: Path,
) -> None:
    enable_flaky(host, make_plugin)
    trip_three_times(host, clock)
    info = host.get_plugin("flaky")
    assert info is not None
    assert info.state is PluginState.QUARANTINED
    assert info.quarantine is not None
    assert "circuit breaker tripped 3 times within 3600s" in info.quarantine.reason
    assert "asked to fail" in info.quarantine.reason
    assert host.worker_pid("flaky") is None
    with pytest.raises(LifecycleError, match=r"is quarantined .*caplet release flaky"):
        host.call("flaky", "main.count")
    refused = host.enable("flaky", consent=True)
    assert not refused
    assert "quarantined" in refused.reason
    actions = [d.action for d in host.manager.store.decisions("flaky")]
    # Newest first: the refused enable, the quarantine, the disable it
    # caused, and the trip that caused both.
    assert actions[:4] == ["enable", "quarantine", "disable", "circuit"]
    assert actions.count("circuit") == 3
    # Persisted: another process (a new manager on the same store) sees it.
    with SqliteStore(state_dir) as store:
        other = PluginManager(plugins_dir, store=store)
        other.discover()
        again = other.get_plugin("flaky")
        assert again is not None
        assert again.state is PluginState.QUARANTINED
        assert not other.enable("flaky", consent=True)


def test_an_agents_calls_open_the_breaker_but_never_quarantine(
    host: PluginHost, make_plugin: PluginFactory, clock: FakeClock
) -> None:
    """attack18: an agent's tool call (`caplet mcp`, `PluginHost.agent_call`) is input
    its caller chose, as guest code's is: the same failures as
    test_repeated_trips_quarantine_the_plugin_persistently open this host's breaker
    three times and quarantine nothing. The application's own calls still do."""
    enable_flaky(host, make_plugin)
    for _ in range(3):
        with pytest.raises(PluginCallError):
            host.agent_call("flaky", "main.work", False)
    with pytest.raises(CircuitOpenError):
        host.agent_call("flaky", "main.work", True)
    for _ in range(2):
        clock.advance(60)
        with pytest.raises(PluginCallError):
            host.agent_call("flaky", "main.work", False)
    info = host.get_plugin("flaky")
    assert info is not None
    assert info.quarantine is None
    trips = [d for d in host.manager.store.decisions("flaky") if d.action == "circuit"]
    assert len(trips) == 3
    assert "not counted toward quarantine" in trips[0].detail
    clock.advance(60)
    host.agent_call("flaky", "main.work", True)  # the probe succeeds: closed again
    assert host.breaker("flaky").closed
    # The near miss: the application's own calls still quarantine.
    trip_three_times(host, clock)
    info = host.get_plugin("flaky")
    assert info is not None
    assert info.quarantine is not None


def test_a_hooks_failures_open_the_breaker_but_never_quarantine(
    host: PluginHost, make_plugin: PluginFactory, clock: FakeClock
) -> None:
    """An application's event payload may carry its user's or an agent's text, as an
    agent's call does: a payload the subscriber fails on, emitted as often as
    test_repeated_trips_quarantine_the_plugin_persistently calls, quarantined the plugin
    on every host on 4ecdd16c (security.md, steer22's leftovers). It now opens this
    host's breaker three times and quarantines nothing."""
    hooks = '[hooks."flaky:event"]\nfunction = "main.work"\n'
    make_plugin("flaky", source=FLAKY, modules=FLAKY_MODULES + hooks)
    host.discover()
    assert host.enable("flaky", consent=True)
    host.define_hook("flaky:event")
    for _ in range(3):
        (call,) = host.emit("flaky:event", False).calls
        assert "asked to fail" in (call.error or "")
    for _ in range(2):
        clock.advance(60)
        (call,) = host.emit("flaky:event", False).calls
        assert "asked to fail" in (call.error or "")
    info = host.get_plugin("flaky")
    assert info is not None
    assert info.quarantine is None
    trips = [d for d in host.manager.store.decisions("flaky") if d.action == "circuit"]
    assert len(trips) == 3
    assert "not counted toward quarantine" in trips[0].detail


def test_release_lets_the_plugin_start_afresh(
    host: PluginHost, make_plugin: PluginFactory, clock: FakeClock
) -> None:
    enable_flaky(host, make_plugin)
    trip_three_times(host, clock)
    assert host.release("flaky")
    assert not host.release("flaky"), "a second release has nothing to release"
    assert host.enable("flaky", consent=True)
    assert host.breaker("flaky").closed
    assert host.breaker("flaky").failures == 0
    assert host.call("flaky", "main.work", True) == 1


def test_quarantine_also_disables_and_stops_dependants(
    host: PluginHost, make_plugin: PluginFactory, clock: FakeClock
) -> None:
    make_plugin("flaky", source=FLAKY, modules=FLAKY_MODULES)
    make_plugin("child", extra='requires = ["flaky"]')
    host.discover()
    assert host.enable("flaky", consent=True)
    assert host.enable("child", consent=True)
    assert host.worker_pid("child") is not None
    trip_three_times(host, clock)
    child = host.get_plugin("child")
    assert child is not None
    assert child.state is PluginState.DISABLED
    assert host.worker_pid("child") is None
    with pytest.raises(LifecycleError, match="not enabled"):
        host.call("child", "main.run")
