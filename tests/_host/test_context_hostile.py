"""A hostile worker abusing the ctx channel: the host refuses, kills it, and carries on.

The plugins here bypass ``ctx`` and write frames on the worker's channel
themselves (``ctx._transport.sock``), as code that took over its worker
could. Protocol violations (malformed, oversized, unknown kinds or ops, a
request tagged with another call) kill the worker with a ProtocolError; well
formed requests the plugin was not granted, or with the wrong arguments, are
refused and the worker lives on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from caplet import Policy, ProtocolError
from caplet._host._host import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

HOSTILE = """
import struct
import msgpack
from caplet._sandbox._protocol import ContextOp
from caplet._sandbox._protocol_encode import encode_context_request

def _frame(message):
    payload = msgpack.packb(message)
    return struct.pack(">I", len(payload)) + payload

def create_functions(config):
    def send(ctx, kind):
        channel = ctx._transport
        call_id = channel._call_id
        frames = {
            "garbage": struct.pack(">I", 1) + b"\\xc1",
            "oversized": struct.pack(">I", 64 * 1024 * 1024),
            "stale": encode_context_request(
                1, call_id + 1000, ContextOp.LOG, {"level": "info", "message": "x"}
            ),
            "unknown-op": _frame([14, 1, call_id, "fs.read", {"path": "/etc/shadow"}]),
            "short": _frame([14, 1, call_id, "log"]),
            "extension": _frame(
                [14, 1, call_id, "log", {"level": msgpack.ExtType(1, b"x"), "message": "m"}]
            ),
            "host-kind": _frame([3, 1, None]),
        }
        channel.sock.sendall(frames[kind])
        channel.sock.recv(1)  # wait here until the host kills this worker
        return "not killed"

    def raw(ctx, op, args):
        try:
            return ["ok", ctx._transport.request(ContextOp(op), args)]
        except Exception as exc:
            return [type(exc).__name__, str(exc)]

    def fine(ctx):
        ctx.kv.set("alive", True)
        return ctx.kv.get("alive")

    return {"main": {"send": send, "raw": raw, "fine": fine}}
"""

STARTUP = """
from caplet._sandbox import _context
from caplet._sandbox._protocol import ContextOp
from caplet._sandbox._protocol_encode import encode_context_request

def create_functions(config):
    channel = _context._state.context._transport
    channel.sock.sendall(
        encode_context_request(1, 0, ContextOp.KV_KEYS, {"prefix": ""})
    )
    channel.sock.recv(1)
    return {"main": {"run": lambda: None}}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginHost]:
    root = tmp_path_factory.mktemp("hostile")
    plugins = root / "plugins"
    plugins.mkdir()
    make_plugin = PluginFactory(plugins)
    plugin(make_plugin, "hostile", HOSTILE, functions=("send", "raw", "fine"))
    plugin(make_plugin, "startup", STARTUP)
    launcher = SandboxLauncher(strict=True)
    # Every violation is a failure of the plugin; a high threshold keeps the
    # breaker closed so each case gets a fresh worker.
    policy = Policy(failure_threshold=100)
    try:
        with make_host(plugins, root / "state", launcher, policy=policy) as h:
            enable(h, "hostile")
            yield h
    finally:
        launcher.close()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("garbage", "malformed msgpack"),
        ("oversized", "frame of 67108864 bytes exceeds the limit of 1048576 bytes"),
        ("stale", "a ctx request tagged with call"),
        ("unknown-op", "unknown ctx op 'fs.read'"),
        ("short", "CONTEXT_REQUEST must have 5 elements, got 4"),
        ("extension", "msgpack extension types (timestamps included) are not allowed"),
        ("host-kind", "unknown message kind 3 from the worker"),
    ],
)
def test_protocol_violations_kill_the_worker(host: PluginHost, kind: str, reason: str) -> None:
    before = host.call("hostile", "main.fine")
    assert before is True
    pid = host.worker_pid("hostile")
    with pytest.raises(ProtocolError) as info:
        host.call("hostile", "main.send", kind)
    assert str(info.value).startswith("plugin 'hostile': main.send: the worker sent a malformed")
    assert reason in str(info.value)
    assert str(info.value).endswith("the worker was killed")
    assert host.worker_pid("hostile") is None
    assert host.call("hostile", "main.fine") is True, "the next call gets a fresh worker"
    assert host.worker_pid("hostile") not in (None, pid)


@pytest.mark.parametrize(
    ("op", "args", "expected"),
    [
        (
            "http.fetch",
            {
                "url": "https://x.example.test/",
                "method": "GET",
                "headers": [],
                "body": b"",
                "timeout": None,
            },
            ["NotGrantedError", "not granted: plugin 'hostile' has no net.http capability"],
        ),
        (
            "app",
            {"name": "email.send", "args": {}},
            ["NotGrantedError", "not granted: plugin 'hostile' was not granted app:email.send"],
        ),
        (
            "plugins.call",
            {"target": "store.get", "args": []},
            ["NotGrantedError", "not granted: plugin 'hostile' was not granted host.call:store"],
        ),
        (
            "kv.get",
            {"key": "k", "plugin": "other"},
            ["ContextArgumentError", "ctx.kv.get takes key, got key, plugin"],
        ),
        (
            "log",
            {"level": "shout", "message": "x"},
            ["ContextArgumentError", "ctx.log takes a level (debug, info, warning, error)"],
        ),
        (
            "kv.keys",
            {"prefix": 5},
            ["ContextArgumentError", "a ctx.kv prefix must be a str, got int"],
        ),
    ],
)
def test_requests_beyond_the_grants_are_refused(
    host: PluginHost, op: str, args: dict[str, object], expected: list[str]
) -> None:
    pid = host.call("hostile", "main.fine") and host.worker_pid("hostile")
    error, message = host.call("hostile", "main.raw", op, args)
    assert error == expected[0]
    assert expected[1] in message
    assert host.worker_pid("hostile") == pid, "a refusal does not kill the worker"


def test_refused_requests_are_in_the_decision_log(host: PluginHost) -> None:
    host.call(
        "hostile",
        "main.raw",
        "http.fetch",
        {
            "url": "https://x.example.test/",
            "method": "GET",
            "headers": [],
            "body": b"",
            "timeout": None,
        },
    )
    logged = [d for d in host.manager.store.decisions("hostile") if d.action == "http"]
    assert logged[0].target == "https://x.example.test/"
    assert not logged[0].allowed
    assert logged[0].detail == "not granted: no net.http capability"


def test_a_request_while_starting_fails_the_start(host: PluginHost) -> None:
    outcome = host.enable("startup", consent=True)
    assert not outcome
    assert "plugin 'startup': the worker broke the protocol while starting" in outcome.reason
    assert "sent a ctx request before it was ready; ctx exists only during calls" in (
        outcome.reason
    )
