"""The plugin side of ``ctx``, driven through a fake transport (no worker needed)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from caplet import _errors
from caplet._errors import (
    BrokerError,
    ContextArgumentError,
    ContextError,
    ContextUnavailableError,
    ResponseError,
)
from caplet._sandbox._context import (
    _FAILURES,
    PluginContext,
    Response,
    raise_failure,
)
from caplet._sandbox._frames import (
    FrameReader,
)
from caplet._sandbox._plugin_load import wants_context
from caplet._sandbox._protocol import (
    CONTEXT_ERROR_NAMES,
    ContextGrants,
    ContextOp,
    WireValue,
)
from caplet._sandbox._worker import _Channel


class FakeTransport:
    """Records requests and answers from a script."""

    def __init__(self, *answers: WireValue) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[ContextOp, dict[str, WireValue]]] = []
        self.in_call = True

    def request(self, op: ContextOp, args: dict[str, WireValue]) -> WireValue:
        self.sent.append((op, args))
        return self.answers.pop(0) if self.answers else None


ALL = ContextGrants(http=True, apps=("email.send",), modules=("fsread",))


def test_optional_attributes_are_absent_not_stubbed() -> None:
    ctx = PluginContext("p", ContextGrants(), FakeTransport())
    assert [hasattr(ctx, n) for n in ("log", "kv", "http", "app", "plugins")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(AttributeError) as info:
        ctx.app  # noqa: B018
    assert str(info.value) == (
        "ctx.app is not available: plugin 'p' was not granted any app: capability; declare "
        "the application's capability, such as app:email.send"
    )
    with pytest.raises(AttributeError, match=r"ctx\.plugins is not available: plugin 'p' was not"):
        ctx.plugins  # noqa: B018
    with pytest.raises(AttributeError, match="'PluginContext' object has no attribute 'fs'"):
        ctx.fs  # noqa: B018
    assert repr(ctx) == "<PluginContext of 'p': log, kv>"
    full = PluginContext("p", ALL, FakeTransport())
    assert repr(full) == "<PluginContext of 'p': log, kv, http, app, plugins>"


def test_requests_have_the_documented_shapes() -> None:
    transport = FakeTransport(
        None,
        {"found": True, "value": [1]},
        {"found": False, "value": None},
        True,
        ["a", "b", 3],
        "sent",
        "called",
        "called",
    )
    ctx = PluginContext("p", ALL, transport)
    ctx.log.info(42)
    assert ctx.kv.get("k") == [1]
    assert ctx.kv.get("missing", "dflt") == "dflt"
    assert ctx.kv.delete("k") is True
    assert ctx.kv.keys("a") == ["a", "b"], "non-str keys from the host are dropped"
    assert ctx.app("app:email.send") == "sent"
    assert ctx.plugins.call("fsread.read", "notes.md") == "called"
    assert ctx.plugins.fsread.stat("x") == "called"
    assert transport.sent == [
        (ContextOp.LOG, {"level": "info", "message": "42"}),
        (ContextOp.KV_GET, {"key": "k"}),
        (ContextOp.KV_GET, {"key": "missing"}),
        (ContextOp.KV_DELETE, {"key": "k"}),
        (ContextOp.KV_KEYS, {"prefix": "a"}),
        (ContextOp.APP, {"name": "email.send", "args": {}}),
        (ContextOp.PLUGINS_CALL, {"target": "fsread.read", "args": ["notes.md"]}),
        (ContextOp.PLUGINS_CALL, {"target": "fsread.stat", "args": ["x"]}),
    ]
    with pytest.raises(AttributeError, match=r"ctx\.plugins has no module 'other'"):
        ctx.plugins.other  # noqa: B018


def test_http_requests_and_responses() -> None:
    answer = {
        "status": 201,
        "headers": [["Content-Type", "application/json; charset=utf-8"]],
        "body": b'{"a": 1}',
        "url": "https://api.example.test/x",
    }
    transport = FakeTransport(answer, answer, answer)
    ctx = PluginContext("p", ALL, transport)
    response = ctx.http.fetch(
        "https://api.example.test/x",
        method="PUT",
        headers={"X-A": "1"},
        body="é",
        timeout=2,
    )
    assert (response.status, response.ok, response.json()) == (201, True, {"a": 1})
    assert response.header("content-type") == "application/json; charset=utf-8"
    ctx.http.post("https://api.example.test/x", json={"b": [1]})
    ctx.http.get("https://api.example.test/x", headers=[("X-B", "2")])
    assert [args for _, args in transport.sent] == [
        {
            "url": "https://api.example.test/x",
            "method": "PUT",
            "headers": [["X-A", "1"]],
            "body": "é".encode(),
            "timeout": 2.0,
        },
        {
            "url": "https://api.example.test/x",
            "method": "POST",
            "headers": [["Content-Type", "application/json"]],
            "body": b'{"b": [1]}',
            "timeout": None,
        },
        {
            "url": "https://api.example.test/x",
            "method": "GET",
            "headers": [["X-B", "2"]],
            "body": b"",
            "timeout": None,
        },
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ctx: ctx.http.fetch(b"https://x"), "the URL of ctx.http.fetch must be a str"),
        (lambda ctx: ctx.http.fetch("u", headers={"a": 1}), "each header of ctx.http.fetch"),
        (lambda ctx: ctx.http.fetch("u", body=5), "the body of ctx.http.fetch must be bytes"),
        (lambda ctx: ctx.http.fetch("u", timeout=0), "timeout of ctx.http.fetch must be a pos"),
        (lambda ctx: ctx.http.fetch("u", timeout=True), "timeout of ctx.http.fetch must be"),
        (lambda ctx: ctx.http.post("u", b"x", json=1), "takes body or json, not both"),
        (lambda ctx: ctx.kv.get(1), "a ctx.kv key must be a str, got int"),
        (lambda ctx: ctx.kv.keys(None), "the ctx.kv.keys prefix must be a str"),
        (lambda ctx: ctx.app(None), "the name given to ctx.app must be a str"),
        (lambda ctx: ctx.plugins.call(1), "the target of ctx.plugins.call must be"),
    ],
)
def test_plugin_side_argument_checks(call: object, message: str) -> None:
    transport = FakeTransport()
    ctx = PluginContext("p", ALL, transport)
    with pytest.raises(ContextArgumentError, match=message) as info:
        call(ctx)  # type: ignore[operator]
    assert str(info.value).startswith("invalid arguments: plugin 'p': ")
    assert transport.sent == [], "nothing is sent"


def test_response_text_and_json() -> None:
    latin = Response(200, (("content-type", "text/plain; charset=latin-1"),), b"caf\xe9", "u")
    assert latin.text() == "café"
    bad = Response(500, (), b"\xff not json", "https://x/y")
    assert bad.text() == "\ufffd not json"
    assert not bad.ok
    with pytest.raises(ResponseError, match=r"invalid response: the body from https://x/y"):
        bad.json()
    odd = Response(200, (("content-type", "text/plain; charset=base64"),), b"abc", "u")
    assert odd.text() == "abc"
    assert repr(odd) == "<Response 200 from u (3 bytes)>"


def test_malformed_http_answers_are_refused() -> None:
    ctx = PluginContext("p", ALL, FakeTransport({"status": "200"}))
    with pytest.raises(ContextError, match=r"the host's answer to ctx\.http\.fetch has the wrong"):
        ctx.http.get("u")


def test_every_failure_name_raises_its_class() -> None:
    assert set(_FAILURES) == CONTEXT_ERROR_NAMES
    for name in sorted(CONTEXT_ERROR_NAMES):
        with pytest.raises(getattr(_errors, name)) as info:
            raise_failure(name, "some category", "the message", "p")
        assert type(info.value).__name__ == name
        assert info.value.category == "some category"
        assert str(info.value) == "the message"
        assert isinstance(info.value, BrokerError | ContextError)
    with pytest.raises(ContextError) as caught:
        raise_failure("SystemExit", "c", "m", "p")
    assert type(caught.value) is ContextError


# -- the ctx argument rule -----------------------------------------------------------------


class _Holder:
    def method(self, ctx: object, x: int) -> None:
        return None

    def other(self, x: int, ctx: object = None) -> None:
        return None


class _Callable:
    def __call__(self, ctx: object) -> None:
        return None


def _first(ctx: object) -> None:
    return None


def _second(x: object, ctx: object = None) -> None:
    return None


def _keyword(*, ctx: object) -> None:
    return None


def test_wants_context_reads_the_first_positional_parameter() -> None:
    assert wants_context(_first)
    assert wants_context(lambda ctx, y: None)
    assert wants_context(_Holder().method)
    assert not wants_context(_Holder().other)
    assert not wants_context(_second)
    assert not wants_context(_keyword)
    assert not wants_context(_Callable())
    assert not wants_context(print)


# -- the worker's channel ------------------------------------------------------------------


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        yield left, right


def test_the_channel_refuses_requests_outside_a_call(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    worker, host = pair
    channel = _Channel(worker, FrameReader(worker), "p")
    with pytest.raises(ContextUnavailableError) as info:
        channel.request(ContextOp.KV_KEYS, {"prefix": ""})
    assert str(info.value).startswith(
        "unavailable: plugin 'p' used ctx.kv.keys while no call was running"
    )
    host.setblocking(False)
    with pytest.raises(BlockingIOError):
        host.recv(1)  # nothing was sent


def test_the_channel_refuses_oversized_and_unsendable_requests(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    worker, _ = pair
    channel = _Channel(worker, FrameReader(worker, max_frame_bytes=100), "p")
    channel.begin(7)
    with pytest.raises(_errors.ContextLimitError, match="over the channel limit of 100 bytes"):
        channel.request(ContextOp.LOG, {"level": "info", "message": "x" * 200})
    with pytest.raises(ContextArgumentError, match=r"arguments\['value'\] is a value of type"):
        channel.request(ContextOp.KV_SET, {"key": "k", "value": object()})
