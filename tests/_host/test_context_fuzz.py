"""Property test: the host's ctx handlers raise only caplet's refusals, for any arguments.

What a worker sends is fuzzed at the frame level (tests/_sandbox/
test_protocol_fuzz.py); this goes one step further in (issue 13, point 6):
every CONTEXT_REQUEST the real decoder lets through, with any op and any
arguments (random maps, and maps with the right keys and values of any
type), is handed to the real handlers of a real host: a plugin's
:class:`PluginRequests` (``ctx.log``, ``ctx.kv`` on the SQLite store,
``ctx.http`` through the broker to a raw server on 127.0.0.1, ``ctx.app``
with a schema, ``ctx.plugins`` into another plugin's sandboxed worker) and a
guest's :class:`GuestRequests` (``guest.call`` into that worker, checked
against an ``args`` schema).

A handler may answer, or raise a :class:`ContextError` or
:class:`BrokerError`: what the channel sends back as CONTEXT_ERROR, with
the worker alive. Anything else would kill the worker and leave
``host.call`` or ``host.exec`` as a foreign exception; and the host's net
for its own bugs (category ``host error``) must not be what answered.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from caplet import AppCall, NetworkPolicy, PluginHost, Policy
from caplet._errors import BrokerError, ContextError, ProtocolError
from caplet._host._guest_requests import GuestRequests
from caplet._sandbox._protocol import (
    CONTEXT_REQUEST,
    ContextOp,
    ContextRequest,
)
from caplet._sandbox._protocol_decode import (
    decode_worker_message,
)
from caplet._sandbox._protocol_encode import encode_context_reply
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._broker.conftest import NAMES, CountingResolver
from tests._broker.rawkit import RawServer, raw_server
from tests._fuzz.budget import fuzz
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

ASKER = """
def create_functions(config):
    return {"main": {"run": lambda *args, **kwargs: None}}
"""
PROVIDER = """
def create_functions(config):
    def run(*args, **kwargs):
        return [len(args), sorted(kwargs)]
    return {"othermod": {"run": run, "free": run}}
"""
PROVIDER_MANIFEST = """
name = "other"
version = "1.0.0"
description = "Provides othermod."

[modules.othermod.functions.run]
args = { type = "array", maxItems = 2, prefixItems = [
    { type = "string", pattern = "^[a-z]{1,8}$" }, { type = "number", multipleOf = 0.5 },
] }

[modules.othermod.functions.free]
"""
APP_SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "pattern": "^[a-z]+@example\\.test$"},
        "n": {"type": "number", "multipleOf": 0.25, "maximum": 1e300},
    },
    "required": ["to"],
}
KEYS = (
    "key", "value", "prefix", "level", "message", "url", "method", "headers", "body",
    "timeout", "name", "args", "target", "module", "function", "kwargs",
)  # fmt: skip


@dataclass
class World:
    host: PluginHost
    server: RawServer
    base: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("ctx-fuzz")
    plugins_dir = root / "plugins"
    make_plugin = PluginFactory(plugins_dir)
    launcher = SandboxLauncher(strict=True)
    with raw_server() as server:
        base = f"http://api.example.test:{server.port}"
        server.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        plugin(
            make_plugin,
            "asker",
            ASKER,
            capabilities=(f"net.http:{base}/v1", "app:mail.send", "host.call:othermod"),
            requires=("other",),
        )
        provider = plugins_dir / "other"
        provider.mkdir(parents=True)
        (provider / "plugin.toml").write_text(PROVIDER_MANIFEST, encoding="utf-8")
        (provider / "plugin.py").write_text(PROVIDER, encoding="utf-8")
        network = NetworkPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),))
        host = make_host(
            plugins_dir,
            root / "state",
            launcher,
            policy=Policy(network=network),
            resolver=CountingResolver(NAMES),
        )
        host.register_capability("app:mail.send", lambda call: call.args, schema=APP_SCHEMA)
        host.register_capability("app:other", _echo)
        enable(host, "other", "asker")
        try:
            yield World(host, server, base)
        finally:
            host.close()
            launcher.close()


def _echo(call: AppCall) -> object:
    return call.args


# -- what a worker may send ------------------------------------------------------------------

WIRE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(max_size=20),
        st.binary(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            "k",
            "a/b",
            "\x00",
            "x" * 300,
            "debug",
            "info",
            "error",
            "GET",
            "POST",
            "TRACE",
            "mail.send",
            "other",
            "nope",
            "othermod.run",
            "othermod.free",
            "othermod",
            "run",
            "free",
            "main.run",
            "app:mail.send",
            "mail.send.x",
            "\u202e",
            "..",
            "%",
        ]
    ),
    st.text(max_size=30),
)


def _urls(base: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda path: f"{base}/v1{path}", st.sampled_from(["", "/", "/x", "/../x", "?q"])),
        st.sampled_from([f"{base}/v2", f"{base}:1/", "http:x", "file:///etc/passwd", ""]),
        TEXT,
    )


def _typed(op: ContextOp, base: str, sane: bool) -> st.SearchStrategy[dict[str, object]]:
    """Arguments of the right keys and, mostly, the right types for ``op``; ``sane`` ones
    would pass its checks (so what comes after the checks is reached too)."""

    def pick(good: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return good if sane else st.one_of(good, odd)

    args = st.lists(st.one_of(TEXT, st.floats(), st.integers(), WIRE), max_size=3)
    key = st.sampled_from(["k", "k2", "cache/a"])
    strategies: dict[ContextOp, st.SearchStrategy[dict[str, object]]] = {
        ContextOp.LOG: st.fixed_dictionaries(
            {
                "level": st.one_of(st.sampled_from(["debug", "info", "warning", "error"]), TEXT),
                "message": TEXT,
            }
        ),
        ContextOp.KV_GET: st.fixed_dictionaries({"key": pick(key, TEXT)}),
        ContextOp.KV_SET: st.fixed_dictionaries({"key": pick(key, TEXT), "value": WIRE}),
        ContextOp.KV_DELETE: st.fixed_dictionaries({"key": pick(key, TEXT)}),
        ContextOp.KV_KEYS: st.fixed_dictionaries({"prefix": pick(key, TEXT)}),
        ContextOp.HTTP_FETCH: st.fixed_dictionaries(
            {
                "url": pick(
                    st.builds(lambda p: f"{base}/v1{p}", st.sampled_from(["", "/x", "?q=1"])),
                    _urls(base),
                ),
                "method": pick(st.sampled_from(["GET", "POST", "HEAD", "get"]), TEXT),
                "headers": st.lists(st.lists(TEXT, min_size=2, max_size=2), max_size=3),
                "body": st.binary(max_size=20),
                "timeout": pick(
                    st.one_of(st.none(), st.floats(0.5, 5)),
                    st.one_of(st.floats(), st.integers(-5, 10**12)),
                ),
            }
        ),
        ContextOp.HTTP_BODY: st.fixed_dictionaries(
            {
                "handle": pick(st.integers(0, 3), st.one_of(st.integers(), TEXT, st.none())),
                "offset": pick(st.integers(0, 10), st.one_of(st.integers(), st.floats())),
            }
        ),
        ContextOp.APP: st.fixed_dictionaries(
            {
                "name": pick(st.sampled_from(["mail.send", "other"]), TEXT),
                "args": pick(
                    st.fixed_dictionaries(
                        {"to": st.just("a@example.test")},
                        optional={"n": st.one_of(st.floats(), st.integers(-(2**63), 2**64 - 1))},
                    ),
                    WIRE,
                ),
            }
        ),
        ContextOp.PLUGINS_CALL: st.fixed_dictionaries(
            {
                "target": pick(st.sampled_from(["othermod.run", "othermod.free"]), TEXT),
                "args": args,
            }
        ),
        ContextOp.GUEST_CALL: st.fixed_dictionaries(
            {
                "module": pick(st.just("othermod"), st.one_of(st.just("nope"), TEXT)),
                "function": pick(st.sampled_from(["run", "free"]), TEXT),
                "args": pick(
                    st.tuples(st.sampled_from(["abc", "x" * 9]), st.floats()).map(list), args
                ),
                "kwargs": st.dictionaries(TEXT, WIRE, max_size=2),
            }
        ),
    }
    return strategies[op]


@st.composite
def requests(
    draw: st.DrawFn, base: str, ops: tuple[ContextOp, ...] = tuple(ContextOp)
) -> tuple[ContextOp, dict[str, object]]:
    """An op and its arguments: sane, well typed, one value or key off, or any map at all."""
    op = draw(st.sampled_from(ops))
    shape = draw(st.sampled_from(["sane", "typed", "one off", "any"]))
    if shape == "any":
        keys = draw(st.lists(st.one_of(st.sampled_from(KEYS), st.text(max_size=5)), max_size=6))
        return op, {key: draw(WIRE) for key in keys}
    args = dict(draw(_typed(op, base, sane=shape == "sane")))
    if shape == "one off":
        key = draw(st.sampled_from([*sorted(args), "extra"]))
        if draw(st.booleans()) and key in args:
            del args[key]
        else:
            args[key] = draw(WIRE)
    return op, args


def _decoded(op: ContextOp, args: dict[str, object]) -> ContextRequest | None:
    """The request as the host's decoder delivers it, or None when it refuses the frame."""
    try:
        payload = msgpack.packb([CONTEXT_REQUEST, 7, 1, op.value, args])
    except (TypeError, ValueError, OverflowError):
        return None  # not encodable: no worker can send it
    try:
        message = decode_worker_message(payload)
    except ProtocolError:
        return None
    assert isinstance(message, ContextRequest)
    return message


def _served(handler: object, request: ContextRequest) -> str:
    assert callable(handler)
    outcome: object
    try:
        outcome = handler(request, time.monotonic() + 10)
    except (ContextError, BrokerError) as exc:
        outcome = exc
    if isinstance(outcome, ContextError | BrokerError):
        assert outcome.category != "host error", f"the host's net answered: {outcome}"
        assert str(outcome).startswith(outcome.category + ": "), str(outcome)
        return type(outcome).__name__
    value = outcome
    try:
        encode_context_reply(request.request_id, value)
    except ProtocolError:
        return "unsendable answer"  # the channel sends a ContextError for it
    return "answered"


@fuzz(150)
@given(data=st.data())
def test_a_plugins_handler_raises_only_refusals(world: World, data: st.DataObject) -> None:
    op, args = data.draw(requests(world.base))
    request = _decoded(op, args)
    if request is None:
        event("refused by the decoder")
        return
    info = world.host.manager.get_plugin("asker")
    assert info is not None
    event(f"{op.value}: {_served(world.host.context.handler(info), request)}")


@fuzz(100)
@given(data=st.data())
def test_a_guests_handler_raises_only_refusals(world: World, data: st.DataObject) -> None:
    # guest.call is the guest's one op: most examples are that, the rest are refused.
    op, args = data.draw(requests(world.base, (*([ContextOp.GUEST_CALL] * 8), *ContextOp)))
    request = _decoded(op, args)
    if request is None:
        event("refused by the decoder")
        return
    host = world.host
    handler = GuestRequests(
        host._guests.catalog,
        host._call_from_guest,
        host.manager.validators,
        host.manager.log_decision,
    )
    event(f"{op.value}: {_served(handler, request)}")


def test_the_plugin_and_its_provider_still_work(world: World, tmp_path: Path) -> None:
    """After the fuzzing, the provider's worker answers (nothing above broke it)."""
    assert world.host.call("other", "othermod.free", 1, 2) == [2, []]
    del tmp_path


@pytest.mark.parametrize("number", [float("inf"), float("-inf"), float("nan")])
def test_non_json_numbers_against_a_schema_are_refused_not_raised(
    world: World, number: float
) -> None:
    """jsonschema's multipleOf raises OverflowError for infinity and ValueError for NaN;
    both cross the channel as msgpack floats (found by the fuzzing above)."""
    info = world.host.manager.get_plugin("asker")
    assert info is not None
    app = _decoded(
        ContextOp.APP, {"name": "mail.send", "args": {"to": "a@example.test", "n": number}}
    )
    assert app is not None
    assert _served(world.host.context.handler(info), app) == "ContextArgumentError"
    host = world.host
    guest = GuestRequests(
        host._guests.catalog,
        host._call_from_guest,
        host.manager.validators,
        host.manager.log_decision,
    )
    call = _decoded(
        ContextOp.GUEST_CALL,
        {"module": "othermod", "function": "run", "args": ["abc", number], "kwargs": {}},
    )
    assert call is not None
    assert _served(guest, call) == "ContextArgumentError"
