"""AsyncPluginHost and async plugin code, on a real event loop and real workers (issue 15).

Runs with anyio's pytest plugin on asyncio. Nothing here measures time:
"the loop is not blocked" is shown by work the loop must do *while* a call
is waiting (the call cannot finish without it), and "the call was
stopped" by a worker that would otherwise spin until its deadline.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from caplet import (
    AppCall,
    AsyncPluginHost,
    CallCancelledError,
    ConsentRequest,
    PluginHost,
    SqliteStore,
)
from tests._host.ctxkit import plugin
from tests.conftest import PluginFactory

pytestmark = pytest.mark.anyio

#: Bounds a wait that only a bug could make long (never an assertion about time).
GUARD_S = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


PLAIN = "def create_functions(config):\n    return {'main': {'run': lambda: 1}}\n"

GATED = """
def create_functions(config):
    def wait(ctx):
        ctx.app("gate.enter", {})
        return ctx.app("gate.wait", {})

    def spin(ctx):
        ctx.app("gate.enter", {})
        while True:
            pass

    def echo(value):
        return value

    return {"main": {"wait": wait, "spin": spin, "echo": echo}}
"""

ASYNC = """
import asyncio

from caplet.plugin import context


async def create_functions(config):
    await asyncio.sleep(0)
    greeting = config.get("greeting", "hi")

    async def hello(ctx, name):
        await asyncio.sleep(0)
        ctx.log.info("hello " + name)
        ctx.kv.set("last", name)
        results = await asyncio.gather(*(twice(n) for n in range(3)))
        return {"greeting": greeting, "name": name, "last": ctx.kv.get("last"), "twice": results}


    async def twice(n):
        await asyncio.sleep(0)
        return 2 * n

    async def on_save(payload):
        return {"seen": payload["id"], "via": type(context()).__name__}

    return {"main": {"hello": hello, "on_save": on_save}}
"""


class Gate:
    """The application side of the gated plugin: says when a call entered, holds it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.entered = asyncio.Event()
        self.release = threading.Event()

    def enter(self, call: AppCall) -> None:
        self.loop.call_soon_threadsafe(self.entered.set)

    def wait(self, call: AppCall) -> str:
        assert self.release.wait(GUARD_S), "never released"
        return "released"


@pytest.fixture
async def gated(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> AsyncIterator[tuple[AsyncPluginHost, Gate]]:
    plugin(
        make_plugin,
        "gated",
        GATED,
        functions=("wait", "spin", "echo"),
        capabilities=("app:gate.enter", "app:gate.wait"),
        limits="timeout_ms = 60000",
    )
    gate = Gate(asyncio.get_running_loop())
    host = await AsyncPluginHost.open(plugins_dir, state_dir=state_dir, auditor=None)
    host.sync.register_capability("app:gate.enter", gate.enter)
    host.sync.register_capability("app:gate.wait", gate.wait)
    assert await host.enable("gated", consent=True)
    async with host:
        yield host, gate
    gate.release.set()


async def test_a_call_waits_without_blocking_the_loop(
    gated: tuple[AsyncPluginHost, Gate],
) -> None:
    host, gate = gated

    async def release_once_entered() -> None:
        # Runs on the loop while the call waits in its worker: with a blocked
        # loop it never would, and the call would wait for its release forever.
        await gate.entered.wait()
        gate.release.set()

    result, _ = await asyncio.wait_for(
        asyncio.gather(host.call("gated", "main.wait"), release_once_entered()), GUARD_S
    )
    assert result == "released"
    echo = host.functions("gated")["main"]["echo"]
    assert await echo(value={"a": [1]}) == {"a": [1]}


async def test_cancelling_a_running_call_stops_its_worker_and_is_not_a_failure(
    gated: tuple[AsyncPluginHost, Gate],
) -> None:
    host, gate = gated
    before = host.sync.worker_pid("gated")
    task = asyncio.create_task(host.call("gated", "main.spin"))
    await asyncio.wait_for(gate.entered.wait(), GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD_S)
    # The worker spinning in the call is stopped; the next call gets a fresh one.
    assert await asyncio.wait_for(host.call("gated", "main.echo", 7), GUARD_S) == 7
    assert host.sync.worker_pid("gated") not in (None, before)
    assert host.sync.breaker("gated").failures == 0
    cancelled = [
        d
        for d in host.sync.manager.store.decisions("gated", 50)
        if d.action == "call" and "was cancelled by its caller" in d.detail
    ]
    assert len(cancelled) == 1


async def test_cancelling_a_queued_call_leaves_the_running_one_alone(
    gated: tuple[AsyncPluginHost, Gate],
) -> None:
    """One worker serves one call at a time: the queued one is dropped unsent."""
    host, gate = gated
    running = asyncio.create_task(host.call("gated", "main.wait"))
    await asyncio.wait_for(gate.entered.wait(), GUARD_S)
    pid = host.sync.worker_pid("gated")
    queued = asyncio.create_task(host.call("gated", "main.echo", "never"))
    for _ in range(20):
        await asyncio.sleep(0)  # let the queued call reach the worker's queue
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(queued, GUARD_S)
    gate.release.set()
    assert await asyncio.wait_for(running, GUARD_S) == "released"
    assert host.sync.worker_pid("gated") == pid, "the running call's worker was not touched"
    assert host.sync.breaker("gated").failures == 0


async def test_a_cancelled_enable_leaves_the_plugin_disabled(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "plain", PLAIN)
    loop = asyncio.get_running_loop()
    asked = asyncio.Event()

    def consent(request: ConsentRequest) -> bool:
        # Called in the enable's thread, half-way through it: the moment to cancel.
        loop.call_soon_threadsafe(asked.set)
        return True

    host = await AsyncPluginHost.open(plugins_dir, state_dir=state_dir, auditor=None)
    task = asyncio.create_task(host.enable("plain", consent=consent))
    await asyncio.wait_for(asked.wait(), GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await host.close()  # waits for the enable's thread: it enables, then disables again
    assert host.sync.worker_pid("plain") is None
    with SqliteStore(state_dir) as store:
        actions = [d.action for d in store.decisions("plain", 10)]
    assert actions[0] == "disable", "the enable completed, then was undone"
    assert "enable" in actions


async def test_cancelling_exec_stops_the_snippet(
    gated: tuple[AsyncPluginHost, Gate],
) -> None:
    host, gate = gated
    code = "import host.main as m\nm.spin()\n"
    task = asyncio.create_task(host.exec(code, timeout=60))
    await asyncio.wait_for(gate.entered.wait(), GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD_S)
    result = await asyncio.wait_for(host.exec("1 + 1"), GUARD_S)
    assert result.value == 2


async def test_async_def_functions_hooks_and_create_functions_run_in_the_worker(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    """Issue 15: an async def function gave "returned a value of type coroutine"."""
    make_plugin(
        "aio",
        source=ASYNC,
        modules=(
            '[modules.main]\nfunctions = ["hello", "on_save"]\n'
            '[hooks."content:afterSave"]\nfunction = "main.on_save"\n'
            '[config.greeting]\ntype = "string"\ndefault = "hi"\n'
        ),
    )
    async with await AsyncPluginHost.open(plugins_dir, state_dir=state_dir, auditor=None) as host:
        host.sync.define_hook("content:afterSave")
        assert await host.enable("aio", ["greeting=hey"], consent=True)
        assert await host.call("aio", "main.hello", "ann") == {
            "greeting": "hey",
            "name": "ann",
            "last": "ann",
            "twice": [0, 2, 4],
        }
        results = await host.emit("content:afterSave", {"id": 3})
        assert [call.value for call in results] == [{"seen": 3, "via": "PluginContext"}]


def test_the_sync_host_runs_async_functions_too(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("aio", source=ASYNC, modules='[modules.main]\nfunctions = ["hello", "on_save"]\n')
    with PluginHost(plugins_dir, state_dir=state_dir, auditor=None) as host:
        assert host.enable("aio", consent=True)
        first = host.call("aio", "main.hello", "a")
        second = host.call("aio", "main.hello", "b")
    assert (first["twice"], second["last"]) == ([0, 2, 4], "b")


def test_a_call_cancelled_before_it_is_sent_runs_nothing(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    plugin(
        make_plugin,
        "plain",
        "def create_functions(config):\n    return {'main': {'run': lambda: 1}}\n",
    )
    with PluginHost(plugins_dir, state_dir=state_dir, auditor=None) as host:
        assert host.enable("plain", consent=True)
        pid = host.worker_pid("plain")
        event = threading.Event()
        event.set()
        with host.cancellable(event), pytest.raises(CallCancelledError, match="nothing ran"):
            host.call("plain", "main.run")
        assert host.worker_pid("plain") == pid
        assert host.call("plain", "main.run") == 1
        assert host.breaker("plain").failures == 0
