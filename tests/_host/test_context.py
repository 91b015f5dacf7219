"""The plugin context in the real sandbox: attributes, the ``ctx`` argument, kv and log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import ContextLimits, PluginCallError, PluginHost, Policy
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as h:
        yield h


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ATTRIBUTES = """
def create_functions(config):
    def run(ctx):
        present = {name: hasattr(ctx, name) for name in ("log", "kv", "http", "app", "plugins")}
        try:
            ctx.http
        except AttributeError as exc:
            missing = str(exc)
        else:
            missing = ""
        extra = {}
        if present["app"]:
            extra["apps"] = list(ctx.app.names)
        if present["plugins"]:
            extra["modules"] = list(ctx.plugins.modules)
            extra["has_other"] = hasattr(ctx.plugins, "other")
        return {"present": present, "missing": missing, **extra}
    return {"main": {"run": run}}
"""

HELPER = """
def create_functions(config):
    return {"helper": {"echo": lambda *args: list(args)}}
"""


def test_attributes_exist_only_for_granted_capabilities(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "bare", ATTRIBUTES)
    plugin(make_plugin, "helper-plugin", HELPER, module="helper", functions=("echo",))
    plugin(
        make_plugin,
        "full",
        ATTRIBUTES,
        capabilities=(
            "net.http:https://api.example.test",
            "app:email.send",
            "app:content.read",
            "host.call:helper",
        ),
        requires=("helper-plugin",),
    )
    enable(host, "bare", "helper-plugin", "full")
    bare = host.call("bare", "main.run")
    assert bare["present"] == {
        "log": True,
        "kv": True,
        "http": False,
        "app": False,
        "plugins": False,
    }
    assert bare["missing"] == (
        "ctx.http is not available: plugin 'bare' was not granted any net.http capability; "
        "declare one such as net.http:https://api.example.com"
    )
    full = host.call("full", "main.run")
    assert full == {
        "present": {"log": True, "kv": True, "http": True, "app": True, "plugins": True},
        "missing": "",
        "apps": ["content.read", "email.send"],
        "modules": ["helper"],
        "has_other": False,
    }


CTX_ARGUMENT = """
import functools
from caplet.plugin import context

class Greeter:
    def greet(self, ctx, name):
        return [ctx.plugin, name]

def create_functions(config):
    def first(ctx, x):
        return [type(ctx).__name__, x]

    def plain(x):
        return [x, context().plugin]

    def later(x, ctx=None):
        return [x, ctx]

    return {"main": {
        "first": first,
        "plain": plain,
        "later": later,
        "method": Greeter().greet,
        "partial": functools.partial(later, "bound"),
        "lam": lambda ctx: ctx.plugin,
    }}
"""

FIRST_SCHEMA = """
[modules.main.functions.first]
args = { type = "array", prefixItems = [{ type = "integer" }], minItems = 1, maxItems = 1 }
[modules.main.functions.plain]
[modules.main.functions.later]
[modules.main.functions.method]
[modules.main.functions.partial]
[modules.main.functions.lam]
"""


def test_ctx_is_the_first_argument_only_when_so_named(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("args", source=CTX_ARGUMENT, modules=FIRST_SCHEMA)
    enable(host, "args")
    # The args schema describes the caller's arguments only: ctx is not one.
    assert host.call("args", "main.first", 7) == ["PluginContext", 7]
    assert host.call("args", "main.plain", 1) == [1, "args"]
    assert host.call("args", "main.later", 2) == [2, None]
    assert host.call("args", "main.method", "Ann") == ["args", "Ann"]
    assert host.call("args", "main.partial") == ["bound", None]
    assert host.call("args", "main.lam") == "args"


OUTSIDE = """
import threading
from caplet.plugin import ContextUnavailableError, context

def _try(action):
    try:
        action()
    except ContextUnavailableError as exc:
        return str(exc)
    return "no error"

def create_functions(config):
    at_load = _try(context)
    kept = {}

    def run(ctx):
        kept["ctx"] = ctx
        return at_load

    def later():
        # The ctx kept from an earlier call works during this one.
        return [_try(lambda: kept["ctx"].kv.get("k"))]

    def in_thread(ctx):
        result = {}
        thread = threading.Thread(target=lambda: result.update(v=ctx.kv.keys()))
        thread.start()
        thread.join()
        return result["v"]

    return {"main": {"run": run, "later": later, "in_thread": in_thread}}
"""


def test_no_context_outside_a_call(host: PluginHost, make_plugin: PluginFactory) -> None:
    plugin(make_plugin, "outside", OUTSIDE, functions=("run", "later", "in_thread"))
    enable(host, "outside")
    at_load = host.call("outside", "main.run")
    assert at_load.startswith("unavailable: caplet.plugin.context() was called in a plugin's ")
    assert "while no plugin call was running" in at_load
    # A thread of the call may use ctx while the call runs.
    assert host.call("outside", "main.in_thread") == []
    assert host.call("outside", "main.run").startswith("unavailable")
    # Within a later call, the kept ctx works again (it is the worker's one context).
    assert host.call("outside", "main.later") == ["no error"]


def test_context_outside_a_worker_is_unavailable() -> None:
    from caplet.plugin import ContextUnavailableError, context

    with pytest.raises(ContextUnavailableError, match="outside a plugin's worker"):
        context()


KV = """
def create_functions(config):
    def put(ctx, key, value):
        ctx.kv.set(key, value)
        return ctx.kv.get(key)

    def get(ctx, key):
        return ctx.kv.get(key, "absent")

    def keys(ctx, prefix=""):
        return ctx.kv.keys(prefix)

    def delete(ctx, key):
        return ctx.kv.delete(key)

    def bad(ctx):
        ctx.kv.set("set", {1, 2})

    return {"main": {"put": put, "get": get, "keys": keys, "delete": delete, "bad": bad}}
"""
KV_FUNCTIONS = ("put", "get", "keys", "delete", "bad")


def test_kv_is_isolated_between_plugins_and_survives_restarts(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "left", KV, functions=KV_FUNCTIONS)
    plugin(make_plugin, "right", KV, functions=KV_FUNCTIONS)
    with make_host(plugins_dir, state_dir, launcher) as host:
        enable(host, "left", "right")
        value = {"n": [1, 2.5, None], "raw": b"\x00\xff", "ok": True}
        assert host.call("left", "main.put", "shared", value) == value
        assert host.call("right", "main.put", "shared", "right's") == "right's"
        assert host.call("left", "main.put", "a/1", 1) == 1
        assert host.call("left", "main.put", "a%_", None) is None
        assert host.call("left", "main.get", "shared") == value
        assert host.call("right", "main.get", "shared") == "right's"
        assert host.call("right", "main.get", "a/1") == "absent"
        assert host.call("left", "main.keys") == ["a%_", "a/1", "shared"]
        assert host.call("left", "main.keys", "a%") == ["a%_"]
        assert host.call("right", "main.keys") == ["shared"]
        assert host.call("right", "main.delete", "shared") is True
        assert host.call("right", "main.delete", "shared") is False
        assert host.call("left", "main.get", "shared") == value
    with make_host(plugins_dir, state_dir, launcher) as host:
        enable(host, "left")
        assert host.call("left", "main.get", "a/1") == 1, "kv is persistent"


def test_kv_limits(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    limits = ContextLimits(kv_max_value_bytes=100, kv_max_keys=2, kv_max_bytes=150)
    plugin(make_plugin, "small", KV, functions=KV_FUNCTIONS)
    with make_host(plugins_dir, state_dir, launcher, policy=Policy(context=limits)) as host:
        enable(host, "small")
        with pytest.raises(PluginCallError) as info:
            host.call("small", "main.put", "big", "x" * 200)
        assert info.value.exc_type == "ContextLimitError"
        assert (
            "limit exceeded: plugin 'small': ctx.kv.set('big'): the value encodes to 202 bytes, "
            "over the limit of 100 bytes per value; store less under one key"
        ) in str(info.value)
        host.call("small", "main.put", "one", "x" * 60)
        host.call("small", "main.put", "two", "y" * 60)
        with pytest.raises(PluginCallError, match="would make 3 keys") as info:
            host.call("small", "main.put", "three", 1)
        assert "over the plugin's limit of 2 keys and 150 bytes" in str(info.value)
        with pytest.raises(PluginCallError, match=r"would make 2 keys and 1\d\d bytes"):
            host.call("small", "main.put", "two", "z" * 90)
        assert host.call("small", "main.get", "two") == "y" * 60, "a refused write keeps the old"
        assert host.call("small", "main.put", "two", "z" * 40) == "z" * 40, "replacing fits"
        with pytest.raises(PluginCallError, match="must be non-empty, at most 256 characters"):
            host.call("small", "main.put", "", 1)
        with pytest.raises(PluginCallError, match="ContextArgumentError: invalid arguments"):
            host.call("small", "main.put", "k" * 257, 1)
        with pytest.raises(PluginCallError) as info:
            host.call("small", "main.bad")
        assert info.value.exc_type == "ContextArgumentError"
        assert "ctx.kv.set: arguments['value'] is a value of type set, which cannot cross" in str(
            info.value
        )
        assert host.worker_pid("small") is not None, "refusals never kill the worker"


LOG = """
def create_functions(config):
    def run(ctx, *messages):
        for message in messages:
            ctx.log.warning(message)
        ctx.log.debug("debug line")
        return len(messages)
    return {"main": {"run": run}}
"""


def test_log_is_prefixed_escaped_cut_and_rate_limited(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    limits = ContextLimits(log_lines_per_minute=3, log_max_chars=20)
    plugin(make_plugin, "noisy", LOG)
    caplog.set_level(logging.DEBUG, logger="caplet.plugins")
    with make_host(
        plugins_dir, state_dir, launcher, policy=Policy(context=limits), clock=clock
    ) as host:
        enable(host, "noisy")
        assert host.call("noisy", "main.run", "one\nFAKE host line", "two", "x" * 30) == 3
        lines = [
            (r.name, r.levelname, r.getMessage())
            for r in caplog.records
            if r.name.startswith("caplet.plugins")
        ]
        assert lines == [
            ("caplet.plugins.noisy", "WARNING", "[noisy] one\\nFAKE host line"),
            ("caplet.plugins.noisy", "WARNING", "[noisy] two"),
            ("caplet.plugins.noisy", "WARNING", "[noisy] " + "x" * 20 + "... (10 more characters)"),
        ], "the fourth line (debug) was over the rate limit"
        caplog.clear()
        host.call("noisy", "main.run", "dropped")
        assert [r for r in caplog.records if r.name.startswith("caplet.plugins")] == []
        clock.now += 61
        host.call("noisy", "main.run", "back")
        assert [r.getMessage() for r in caplog.records if r.name.startswith("caplet.plugins")] == [
            "[noisy] 3 log line(s) dropped: over the limit of 3 lines per minute",
            "[noisy] back",
            "[noisy] debug line",
        ]


FLOOD = """
def create_functions(config):
    def run(ctx, count):
        done = 0
        try:
            for _ in range(count):
                ctx.kv.keys()
                done += 1
        except Exception as exc:
            return [done, type(exc).__name__, str(exc)]
        return [done, "", ""]
    return {"main": {"run": run}}
"""


def test_a_flood_of_requests_in_one_call_is_refused(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "flood", FLOOD)
    policy = Policy(context=ContextLimits(max_requests_per_call=5))
    with make_host(plugins_dir, state_dir, launcher, policy=policy) as host:
        enable(host, "flood")
        done, error, message = host.call("flood", "main.run", 50)
        assert (done, error) == (5, "ContextLimitError")
        assert message == (
            "limit exceeded: plugin 'flood': ctx.kv.keys refused: more than 5 ctx requests in "
            "one call; do fewer requests per call"
        )
        assert host.call("flood", "main.run", 5) == [5, "", ""], "the count is per call"
