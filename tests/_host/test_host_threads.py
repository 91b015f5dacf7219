"""One PluginHost called from many application threads (the soak test's finding).

Real sandboxed workers on one module-wide zygote. The interleavings are
forced, not hoped for: threads start together at a Barrier, a call is held
inside the plugin by an application capability whose handler waits on an
Event, and the test waits until the other callers are queued on that
worker's lock before it lets the held call go on.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from caplet import (
    AppCall,
    CircuitOpenError,
    LifecycleError,
    PluginCallError,
    PluginHost,
    WorkerCrashedError,
)
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._sandbox._subprocess import SubprocessWorker
from caplet._trust._sqlite import SqliteStore
from caplet._trust._store import Decision
from tests.conftest import DelegatingLauncher, PluginFactory

THREADS = 8
#: How long a test waits for a state its threads must reach (a guard against a
#: hang when the code under test is broken, never a timing assumption).
GUARD_S = 60.0

SOURCE = """
import os

def create_functions(config):
    def echo(x):
        return [config["tag"], x]

    def hold(ctx):
        ctx.app("test.gate", {})
        return "held"

    def hold_then_exit(ctx):
        ctx.app("test.gate", {})
        os._exit(9)

    def hold_then_fail(ctx):
        ctx.app("test.gate", {})
        raise ValueError("asked to fail")

    def fail():
        raise ValueError("asked to fail")

    return {"main": {
        "echo": echo, "hold": hold, "hold_then_exit": hold_then_exit,
        "hold_then_fail": hold_then_fail, "fail": fail,
    }}
"""
MANIFEST = """
capabilities = ["app:test.gate"]
[config.tag]
type = "string"
default = "first"
[modules.main]
functions = ["echo", "hold", "hold_then_exit", "hold_then_fail", "fail"]
"""


class QueueWatch:
    """A worker's call lock (a real Lock inside) that counts the threads waiting
    for it, so a test can wait until its callers have queued behind a held call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self.waiting = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        with self._cond:
            self.waiting += 1
            self._cond.notify_all()
        try:
            return self._lock.acquire(blocking, timeout)
        finally:
            with self._cond:
                self.waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def wait_for_waiters(self, count: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.waiting >= count, timeout=GUARD_S)


class Recorder(DelegatingLauncher):
    """The module's sandbox launcher, recording every worker start (and watching
    each worker's call lock)."""

    def __init__(self, inner: SandboxLauncher) -> None:
        super().__init__(inner)
        self.starts: list[str] = []
        self.watches: list[QueueWatch] = []
        self._cond = threading.Condition()

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        worker = self.inner.start(spec)
        watch = QueueWatch()
        # Swapped before the worker is handed to the host: no call has used it.
        worker._lock = watch  # type: ignore[assignment]
        with self._cond:
            self.starts.append(spec.plugin)
            self.watches.append(watch)
            self._cond.notify_all()
        return worker

    def wait_for_starts(self, count: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.starts) >= count, timeout=GUARD_S)


class Store(SqliteStore):
    """The real store, announcing each decision it logs, so a test can wait for one."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self._cond = threading.Condition()
        self.actions: list[tuple[str, str]] = []

    def log_decision(self, decision: Decision) -> None:
        super().log_decision(decision)
        with self._cond:
            self.actions.append((decision.plugin, decision.action))
            self._cond.notify_all()

    def wait_for(self, plugin: str, action: str) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: (plugin, action) in self.actions, timeout=GUARD_S)


class Gate:
    """The ``app:test.gate`` handler: holds the plugin's call until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, call: AppCall) -> object:
        self.entered.set()
        assert self.release.wait(GUARD_S), "the test never released the gate"
        return None


class Outcome:
    """What one thread's call returned or raised."""

    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


def in_thread(
    action: Callable[[], Any], start: threading.Barrier | None = None
) -> tuple[threading.Thread, Outcome]:
    """Start ``action`` in a thread (after ``start``, when given); its outcome is recorded."""
    outcome = Outcome()

    def run() -> None:
        if start is not None:
            start.wait()
        try:
            outcome.value = action()
        except BaseException as exc:
            outcome.error = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def join(thread: threading.Thread) -> None:
    thread.join(GUARD_S)
    assert not thread.is_alive(), "a calling thread hung"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxLauncher]:
    launcher = SandboxLauncher(strict=True)
    yield launcher
    launcher.close()


@pytest.fixture
def recorder(sandbox: SandboxLauncher) -> Recorder:
    return Recorder(sandbox)


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def store(state_dir: Path) -> Iterator[Store]:
    with Store(state_dir) as opened:
        yield opened


@pytest.fixture
def host(
    plugins_dir: Path,
    store: Store,
    recorder: Recorder,
    make_plugin: PluginFactory,
    gate: Gate,
) -> Iterator[PluginHost]:
    for name in ("alpha", "beta"):
        header = f'name = "{name}"\nversion = "1.0.0"\ndescription = "Plugin {name}."\n'
        make_plugin(name, source=SOURCE, manifest=header + MANIFEST)
    # Made (and its plugins enabled) in this thread; used from the others.
    with PluginHost(
        plugins_dir, store=store, launcher=recorder, discover=False, auditor=None
    ) as created:
        created.register_capability("app:test.gate", gate)
        created.discover()
        for name in ("alpha", "beta"):
            outcome = created.enable(name, [f"tag={name}"], consent=True)
            assert outcome, outcome.reason
        yield created
        gate.release.set()


def test_many_threads_call_one_plugin_and_several_plugins_and_all_get_their_results(
    host: PluginHost, recorder: Recorder
) -> None:
    start = threading.Barrier(THREADS)
    proxies = {name: host.functions(name)["main"]["echo"] for name in ("alpha", "beta")}

    def work(index: int) -> list[Any]:
        results = []
        for n in range(20):
            name = ("alpha", "beta")[(index + n) % 2]
            arg = index * 100 + n
            if n % 3:
                results.append((name, arg, host.call(name, "main.echo", arg)))
            else:
                results.append((name, arg, proxies[name](arg)))
        return results

    threads = [in_thread(functools.partial(work, i), start) for i in range(THREADS)]
    for thread, _ in threads:
        join(thread)
    for _, outcome in threads:
        assert outcome.error is None, outcome.error
        assert len(outcome.value) == 20
        for name, arg, value in outcome.value:
            assert value == [name, arg]
    assert recorder.starts == ["alpha", "beta"], "no worker was started twice"


def test_a_worker_killed_under_several_callers_is_restarted_exactly_once(
    host: PluginHost, recorder: Recorder, gate: Gate
) -> None:
    held, held_outcome = in_thread(lambda: host.call("alpha", "main.hold_then_exit"))
    assert gate.entered.wait(GUARD_S)  # the held call owns the worker's lock now
    start = threading.Barrier(THREADS - 1)
    callers = [
        in_thread(functools.partial(host.call, "alpha", "main.echo", i), start)
        for i in range(THREADS - 1)
    ]
    watch = recorder.watches[0]
    assert watch.wait_for_waiters(THREADS - 1), "the callers never queued on the worker"
    gate.release.set()  # the held call returns into the plugin, which exits
    join(held)
    for thread, _ in callers:
        join(thread)

    assert type(held_outcome.error) is WorkerCrashedError, held_outcome.error
    assert "died during main.hold_then_exit" in str(held_outcome.error)
    for index, (_, outcome) in enumerate(callers):
        # Queued behind the crash, nothing of theirs ran: retried on the new worker.
        assert outcome.error is None, outcome.error
        assert outcome.value == ["alpha", index]
    assert recorder.starts == ["alpha", "beta", "alpha"], "exactly one restart"
    assert host.breaker("alpha").closed, "one failure counted, not one per caller"
    crashes = [
        d for d in host.manager.store.decisions("alpha") if d.action == "call" and not d.allowed
    ]
    assert len(crashes) == 1
    assert host.call("beta", "main.echo", "still") == ["beta", "still"]


def test_concurrent_failures_trip_the_breaker_exactly_once(
    host: PluginHost, recorder: Recorder, gate: Gate
) -> None:
    held, held_outcome = in_thread(lambda: host.call("alpha", "main.hold_then_fail"))
    assert gate.entered.wait(GUARD_S)
    start = threading.Barrier(THREADS - 1)
    callers = [
        in_thread(lambda: host.call("alpha", "main.fail"), start) for _ in range(THREADS - 1)
    ]
    # Every caller is past the breaker (closed) and queued on the worker, so
    # all of them fail, and they fail together.
    assert recorder.watches[0].wait_for_waiters(THREADS - 1)
    gate.release.set()
    join(held)
    for thread, _ in callers:
        join(thread)

    outcomes = [held_outcome, *(outcome for _, outcome in callers)]
    assert all(isinstance(o.error, PluginCallError) for o in outcomes), outcomes
    breaker = host.breaker("alpha")
    assert not breaker.closed
    assert breaker.failures == THREADS, "every failure counted"
    circuit = [d for d in host.manager.store.decisions("alpha") if d.action == "circuit"]
    assert len(circuit) == 1, "tripped once"
    assert "after 3 consecutive failures" in circuit[0].detail
    with pytest.raises(CircuitOpenError):
        host.call("alpha", "main.echo", 1)
    assert recorder.starts == ["alpha", "beta"], "a plugin exception does not restart"


def test_reenabling_while_a_call_runs_starts_one_worker_and_waits_for_no_call(
    host: PluginHost, recorder: Recorder, gate: Gate
) -> None:
    held, held_outcome = in_thread(lambda: host.call("alpha", "main.hold"))
    assert gate.entered.wait(GUARD_S)
    old_pid = host.worker_pid("alpha")
    enabler, enabled = in_thread(lambda: host.enable("alpha", ["tag=second"], consent=True))
    # The new worker starts while the old one still runs the held call ...
    assert recorder.wait_for_starts(3), "the new worker waited for the old call"
    # ... and serves calls at once, from any thread (the enable thread is
    # still waiting to close the old worker behind the held call).
    caller, called = in_thread(lambda: host.call("alpha", "main.echo", 7))
    join(caller)
    assert called.error is None, called.error
    assert called.value == ["second", 7]
    assert enabler.is_alive()
    assert not held_outcome.value, "the held call is still running"
    gate.release.set()
    join(held)
    join(enabler)

    assert held_outcome.error is None, held_outcome.error
    assert held_outcome.value == "held", "the old worker finished its call"
    assert enabled.value, enabled.value
    assert recorder.starts == ["alpha", "beta", "alpha"], "one new worker, not two"
    assert host.worker_pid("alpha") not in (None, old_pid)
    assert not Path(f"/proc/{old_pid}").exists(), "the old worker was closed and reaped"


def test_a_disable_while_a_call_runs_refuses_new_calls_and_lets_the_call_finish(
    host: PluginHost, gate: Gate, store: Store
) -> None:
    held, held_outcome = in_thread(lambda: host.call("alpha", "main.hold"))
    assert gate.entered.wait(GUARD_S)
    disabler, disabled = in_thread(lambda: host.disable("alpha"))
    # The disable returns only once the held call is done, but the plugin is
    # disabled (and logged so) before that.
    assert store.wait_for("alpha", "disable")
    with pytest.raises(LifecycleError, match="is not enabled"):
        host.call("alpha", "main.echo", 1)
    assert disabler.is_alive(), "closing the old worker waits for the held call"
    gate.release.set()
    join(held)
    join(disabler)
    assert held_outcome.value == "held"
    assert disabled.value
    assert host.worker_pid("alpha") is None
    with pytest.raises(LifecycleError, match="is not enabled"):
        host.call("alpha", "main.echo", 1)


def test_a_call_after_close_is_refused(host: PluginHost) -> None:
    host.close()
    thread, outcome = in_thread(lambda: host.call("alpha", "main.echo", 1))
    join(thread)
    assert isinstance(outcome.error, LifecycleError)
    assert "the host is closed" in str(outcome.error)
