"""The parts of ``ctx`` (log, kv, http, app, plugins), driven through a fake transport."""

from __future__ import annotations

import pytest

from caplet._errors import (
    ContextArgumentError,
    ContextError,
    ResponseError,
)
from caplet._sandbox._context import PluginContext
from caplet._sandbox._context_parts import Response
from caplet._sandbox._protocol import ContextOp
from tests._sandbox.contextkit import ALL, FakeTransport


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
