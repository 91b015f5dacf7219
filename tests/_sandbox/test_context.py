"""The plugin side of ``ctx``, driven through a fake transport (no worker needed).

Its parts' requests: tests/_sandbox/test_context_parts.py.
"""

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
)
from caplet._sandbox._context import (
    _FAILURES,
    PluginContext,
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
)
from caplet._sandbox._worker import _Channel
from tests._sandbox.contextkit import ALL, FakeTransport


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
