"""``ctx.plugins``: one plugin calling another's module in its own sandbox (issue 6, point 4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import AppCall, PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

STORE = """
import os

def create_functions(config):
    def echo(*args):
        return [os.getpid(), list(args)]

    def boom(message):
        raise ValueError(message)

    def spin():
        while True:
            pass

    def bounce(ctx):
        try:
            return ctx.app("bounce", {})
        except Exception as exc:
            return [type(exc).__name__, str(exc)]

    return {"store": {"echo": echo, "boom": boom, "spin": spin, "bounce": bounce}}
"""
STORE_MODULES = """
[modules.store.functions.echo]
[modules.store.functions.spin]
[modules.store.functions.bounce]
[modules.store.functions.boom]
args = { type = "array", prefixItems = [{ type = "string" }], maxItems = 1 }
[limits]
timeout_ms = 300
"""

FRONT = """
import os
from caplet.plugin import ContextError

def create_functions(config):
    def run(ctx, target, *args):
        try:
            return ["ok", ctx.plugins.call(target, *args)]
        except ContextError as exc:
            return [type(exc).__name__, exc.category, str(exc)]

    def attribute(ctx):
        return [ctx.plugins.store.echo("via attribute"), hasattr(ctx.plugins, "other"),
                os.getpid()]

    def ping():
        return "pong"

    return {"front": {"run": run, "attribute": attribute, "ping": ping}}
"""


@pytest.fixture
def host(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> Iterator[PluginHost]:
    make_plugin(
        "store-plugin",
        source=STORE,
        modules=STORE_MODULES,
        extra='capabilities = ["app:bounce"]\n',
    )
    plugin(
        make_plugin,
        "front",
        FRONT,
        module="front",
        functions=("run", "attribute", "ping"),
        capabilities=("host.call:store",),
        requires=("store-plugin",),
    )
    with make_host(plugins_dir, state_dir, launcher) as h:
        yield h


def test_a_call_runs_in_the_other_plugins_sandbox(host: PluginHost) -> None:
    enable(host, "store-plugin", "front")
    status, (_, args) = host.call("front", "front.run", "store.echo", 1, "two", {"x": None})
    assert status == "ok"
    assert args == [1, "two", {"x": None}]
    store_pid, front_pid = host.worker_pid("store-plugin"), host.worker_pid("front")
    assert store_pid is not None
    assert front_pid is not None
    assert store_pid != front_pid
    (_, attribute_args), has_other, _ = host.call("front", "front.attribute")
    assert attribute_args == ["via attribute"]
    assert has_other is False
    logged = [
        (d.target, d.allowed)
        for d in host.manager.store.decisions("front")
        if d.action == "host.call"
    ]
    assert logged == [("store-plugin:store.echo", True)] * 2


def test_failures_of_the_target_come_back_categorised(host: PluginHost) -> None:
    enable(host, "store-plugin", "front")
    error, category, message = host.call("front", "front.run", "store.boom", "nope")
    assert (error, category) == ("HostCallError", "host.call failed")
    assert message == (
        "host.call failed: plugin 'front' calling store.boom of 'store-plugin': plugin "
        "'store-plugin': store.boom raised ValueError: nope"
    )
    error, _, message = host.call("front", "front.run", "store.boom", 5)
    assert error == "HostCallError"
    assert "do not match its declared args schema" in message
    error, _, message = host.call("front", "front.run", "store.missing")
    assert error == "HostCallError"
    assert "does not declare store.missing" in message
    # The target's own deadline (300 ms), not the caller's (5 s).
    error, _, message = host.call("front", "front.run", "store.spin")
    assert error == "HostCallError"
    assert "store.spin timed out after 300 ms" in message
    assert host.call("front", "front.run", "store.echo")[0] == "ok", "both recover"


def test_modules_that_were_not_granted_are_refused(host: PluginHost) -> None:
    enable(host, "store-plugin", "front")
    assert host.call("front", "front.run", "other.thing") == [
        "NotGrantedError",
        "not granted",
        "not granted: plugin 'front' was not granted host.call:other; declare it (and the "
        "plugin providing it in requires) and have it approved",
    ]
    error, _, message = host.call("front", "front.run", "nodot")
    assert error == "ContextArgumentError"
    assert "takes a target 'module.function'" in message


def test_a_cycle_is_refused_instead_of_deadlocking(host: PluginHost) -> None:
    # front -> store (ctx.plugins) -> the application's handler -> front again,
    # whose worker is busy waiting for store: refused, not a deadlock.
    def bounce(call: AppCall) -> object:
        return host.call("front", "front.ping")

    host.register_capability("app:bounce", bounce)
    enable(host, "store-plugin", "front")
    status, (error, message) = host.call("front", "front.run", "store.bounce")
    assert status == "ok"
    assert error == "CallCycleError"
    assert message.startswith(
        "call cycle: plugin 'front': front.ping was called while a call of this thread to the "
        "same worker is waiting on a ctx request"
    )
    assert host.call("front", "front.ping") == "pong", "nothing is stuck"
