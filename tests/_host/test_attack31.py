"""attack31: a nested call's wait for a busy worker, bounded by its caller's deadline.

A worker serves one call at a time, so calls to one plugin queue on its call lock. A
nested call (``ctx.plugins.call`` of another plugin, guest code's ``host.*``) runs on
what is left of its caller's deadline, but on main (af1205e1) the *wait*
for the lock was not bounded by it: with the provider busy in another thread's call,
the caller plugin's ``timeout_ms = 1000`` call waited 3.5 s (as long as the provider's
other call ran, up to its own timeout; behind a queue, the sum of the queue), was then
killed for lateness and counted toward its breaker (a busy provider quarantining an
honest caller), and the provider's function ran *after* its caller was gone: a call
with side effects made for a caller that had already been told "timed out" (and would
retry). Real jailed workers on the strict launcher, the waits held by an application
handler (``app:test.gate``) the test releases: no sleeping, no timing assertion.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet import AppCall, CallTimeoutError, PluginHost, WorkerCrashedError
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

GUARD_S = 60.0

PROVIDER = """
def create_functions(config):
    def hold(ctx):
        ctx.app("test.gate", {})
        return "held"

    def mark(ctx):
        return ctx.app("test.mark", {})

    return {"store": {"hold": hold, "mark": mark}}
"""

#: The same provider, slow to start (its module's own code, before READY) and able to
#: end its worker, so the next call must start another.
SLOW_START = """
import os
import time

time.sleep(3)
""" + PROVIDER.replace(
    '    return {"store": {"hold": hold, "mark": mark}}',
    "    def crash():\n        os._exit(3)\n\n"
    '    return {"store": {"hold": hold, "mark": mark, "crash": crash}}',
)

CALLER = """
from caplet.plugin import ContextError

def create_functions(config):
    def run(ctx):
        ctx.app("test.started", {})
        try:
            return ["ok", ctx.plugins.call("store.mark")]
        except ContextError as exc:
            return [type(exc).__name__, exc.category, str(exc)]

    return {"front": {"run": run}}
"""


class Handlers:
    """The application's side: a gate that holds the provider's call until released,
    and a record of every time the provider's ``mark`` ran (its side effect)."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()
        self.started = threading.Event()
        self.marks = 0
        self._lock = threading.Lock()

    def gate(self, call: AppCall) -> object:
        self.held.set()
        assert self.release.wait(GUARD_S), "the test never released the gate"
        return None

    def mark(self, call: AppCall) -> object:
        with self._lock:
            self.marks += 1
            return self.marks

    def start(self, call: AppCall) -> object:
        self.started.set()
        return None


class Outcome:
    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


def in_thread(action: Any) -> tuple[threading.Thread, Outcome]:
    outcome = Outcome()

    def run() -> None:
        try:
            outcome.value = action()
        except BaseException as exc:
            outcome.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def join(thread: threading.Thread) -> None:
    thread.join(GUARD_S)
    assert not thread.is_alive(), "a calling thread hung"


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


def _host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    handlers: Handlers,
    caller_timeout_ms: int,
    provider: str = PROVIDER,
) -> PluginHost:
    plugin(
        make_plugin,
        "store-plugin",
        provider,
        module="store",
        functions=("hold", "mark", "crash") if provider is SLOW_START else ("hold", "mark"),
        capabilities=("app:test.gate", "app:test.mark"),
        limits="timeout_ms = 6000",
    )
    plugin(
        make_plugin,
        "front",
        CALLER,
        module="front",
        capabilities=("host.call:store", "app:test.started"),
        requires=("store-plugin",),
        limits=f"timeout_ms = {caller_timeout_ms}",
    )
    host = make_host(plugins_dir, state_dir, launcher)
    host.register_capability("app:test.gate", handlers.gate)
    host.register_capability("app:test.mark", handlers.mark)
    host.register_capability("app:test.started", handlers.start)
    enable(host, "store-plugin", "front")
    return host


@pytest.fixture
def short_host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    handlers: Handlers,
) -> Iterator[PluginHost]:
    with _host(plugins_dir, state_dir, launcher, make_plugin, handlers, 1000) as host:
        yield host
        handlers.release.set()


@pytest.fixture
def long_host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    handlers: Handlers,
) -> Iterator[PluginHost]:
    with _host(plugins_dir, state_dir, launcher, make_plugin, handlers, 30_000) as host:
        yield host
        handlers.release.set()


@pytest.fixture
def slow_start_host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    handlers: Handlers,
) -> Iterator[PluginHost]:
    with _host(plugins_dir, state_dir, launcher, make_plugin, handlers, 1000, SLOW_START) as host:
        yield host
        handlers.release.set()


@pytest.mark.security
def test_a_nested_call_never_waits_past_its_callers_deadline(
    short_host: PluginHost, handlers: Handlers
) -> None:
    host = short_host
    holder, held = in_thread(lambda: host.call("store-plugin", "store.hold"))
    assert handlers.held.wait(GUARD_S), "the provider's call never reached the gate"
    try:
        answer: Any = host.call("front", "front.run")
    except CallTimeoutError as exc:
        # The answer may reach the caller just as its own time is up: then it is the
        # caller's timeout, as for any nested call that used all the time it had.
        answer = exc
    marks_while_busy = handlers.marks
    handlers.release.set()
    join(holder)
    # The provider's own call was never disturbed (main: it timed out while the host
    # thread of the caller waited on its lock, and the test's release came too late).
    assert held.error is None, held.error
    assert held.value == "held"
    # Nothing ran for a caller that was already gone (main: 1, after its deadline).
    assert marks_while_busy == 0
    assert handlers.marks == 0
    if isinstance(answer, list):
        error, category, message = answer
        assert (error, category) == ("HostCallError", "host.call failed")
        assert "store.mark was not sent: its caller had" in message
    refusals = [
        d.detail
        for d in host.manager.store.decisions("store-plugin")
        if d.action == "call" and not d.allowed
    ]
    assert len(refusals) == 1
    busy = "and the worker was serving other calls (one at a time) for all of it"
    assert busy in refusals[0]
    assert "nothing ran" in refusals[0]
    # Not the provider's failure: its breaker counted nothing, and it serves at once.
    assert host.call("store-plugin", "store.mark") == 1


@pytest.mark.security
def test_near_miss_a_nested_call_that_waits_within_its_deadline_is_made(
    long_host: PluginHost, handlers: Handlers
) -> None:
    host = long_host
    holder, held = in_thread(lambda: host.call("store-plugin", "store.hold"))
    assert handlers.held.wait(GUARD_S), "the provider's call never reached the gate"
    caller, called = in_thread(lambda: host.call("front", "front.run"))
    assert handlers.started.wait(GUARD_S), "the caller never started"
    # A direct call queues behind the held one as ever (no bound but its own run).
    direct, directly = in_thread(lambda: host.call("store-plugin", "store.mark"))
    handlers.release.set()
    for thread in (holder, caller, direct):
        join(thread)
    assert held.error is None, held.error
    assert held.value == "held"
    assert called.error is None, called.error
    assert directly.error is None, directly.error
    assert sorted([called.value[1], directly.value]) == [1, 2]
    assert called.value[0] == "ok"
    assert handlers.marks == 2


@pytest.mark.security
def test_a_worker_started_for_a_nested_call_runs_nothing_past_the_callers_deadline(
    slow_start_host: PluginHost, handlers: Handlers
) -> None:
    """The provider's worker ended; the caller's nested call starts the next, whose
    module takes 3 s to load, three times the caller's whole deadline. main then made
    the call with a fresh second of its own: the provider's function ran after its
    caller had been killed for lateness."""
    host = slow_start_host
    with pytest.raises(WorkerCrashedError, match=r"store\.crash"):
        host.call("store-plugin", "store.crash")
    try:
        answer: Any = host.call("front", "front.run")
    except CallTimeoutError as exc:
        answer = exc
    assert handlers.marks == 0, "the provider's function ran after its caller was gone"
    assert isinstance(answer, CallTimeoutError | list)
    refusals = [
        d.detail
        for d in host.manager.store.decisions("store-plugin")
        if d.action == "call" and not d.allowed and "store.mark" in d.detail
    ]
    assert len(refusals) == 1
    assert "store.mark was not sent: its caller had 0 ms left" in refusals[0]
    # The worker started for it serves the next call.
    assert host.call("store-plugin", "store.mark") == 1


CROSS = """
from caplet.plugin import ContextError

def create_functions(config):
    def cross(ctx):
        try:
            return ["ok", ctx.app("test.relay", {})]
        except ContextError as exc:
            return [type(exc).__name__, str(exc)]

    def echo():
        return "echo"

    return {"main": {"cross": cross, "echo": echo}}
"""


@pytest.mark.security
def test_handlers_calling_each_others_plugin_crosswise_give_up_at_the_deadline(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    """An application handler that calls plugins, entered from two threads: east's
    handler calls west while west's calls east. Each held its plugin's call lock and
    waited for the other's (docs/architecture.md named it "not detected"): on main
    both threads, and every later call to either plugin, waited for ever, past both
    deadlines. Now each wait ends at its caller's deadline."""
    for name in ("east", "west"):
        plugin(
            make_plugin,
            name,
            CROSS,
            functions=("cross", "echo"),
            capabilities=("app:test.relay",),
            limits="timeout_ms = 2000",
        )
    arrived = {"east": threading.Event(), "west": threading.Event()}
    host = make_host(plugins_dir, state_dir, launcher)

    def relay(call: AppCall) -> object:
        other = "west" if call.plugin == "east" else "east"
        arrived[call.plugin].set()
        assert arrived[other].wait(GUARD_S), "the other handler never started"
        return host.call(other, "main.echo")

    host.register_capability("app:test.relay", relay)
    enable(host, "east", "west")
    threads = [in_thread(lambda name=name: host.call(name, "main.cross")) for name in arrived]
    for thread, _ in threads:
        thread.join(30.0)
    hung = [thread for thread, _ in threads if thread.is_alive()]
    if hung:
        # Closing would wait on the hung calls: leave the host to the process's end.
        pytest.fail("the two handlers' threads waited on each other's plugin for ever")
    try:
        for _, outcome in threads:
            if outcome.error is not None:
                assert isinstance(outcome.error, CallTimeoutError), outcome.error
            else:
                error, message = outcome.value
                assert error == "AppHandlerError", outcome.value
                assert "raised WorkerBusyError" in message
        assert host.call("east", "main.echo") == "echo"
        assert host.call("west", "main.echo") == "echo"
    finally:
        host.close()


@pytest.mark.security
def test_a_nested_call_does_not_wait_past_its_deadline_for_an_enable_asking_a_person(
    short_host: PluginHost, handlers: Handlers, plugins_dir: Path
) -> None:
    """An enable holds the plugin's lock while it asks a person (here about the
    provider's new content); a nested call to that plugin waited for the answer (main:
    as long as the person took, then the call ran after its caller had been killed)."""
    host = short_host
    source = plugins_dir / "store-plugin" / "plugin.py"
    source.write_text(source.read_text(encoding="utf-8") + "# 1.0.1\n", encoding="utf-8")
    asked = threading.Event()
    answer = threading.Event()

    def consent(request: object) -> bool:
        asked.set()
        return answer.wait(15.0)

    enabling, enabled = in_thread(lambda: host.enable("store-plugin", consent=consent))
    assert asked.wait(GUARD_S), "the enable never asked"
    try:
        host.call("front", "front.run")
    except CallTimeoutError:
        pass  # the answer reached the caller as its own time ran out
    marks_while_asked = handlers.marks
    answer.set()
    join(enabling)
    assert enabled.error is None, enabled.error
    assert marks_while_asked == 0
    assert handlers.marks == 0, "the provider's function ran after its caller was gone"
    refusals = [
        d.detail
        for d in host.manager.store.decisions("store-plugin")
        if d.action == "call" and not d.allowed
    ]
    assert any("the plugin was being enabled, disabled or restarted" in r for r in refusals)
    assert host.call("store-plugin", "store.mark") == 1
