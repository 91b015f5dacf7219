"""Protocol attacks: a worker that writes its own frames onto the channel.

Code that took over its worker is not bound by :mod:`caplet.plugin`; these
plugins reach past ``ctx`` to the channel's socket (``ctx._transport.sock``,
or fd 3) and send what an honest worker never would. The host must kill
that worker with a :class:`~caplet._errors.ProtocolError` and go on serving
(the bench checks that the next call gets a fresh worker).
"""

from __future__ import annotations

from caplet._errors import ProtocolError, WorkerCrashedError
from caplet._host._host import PluginHost
from caplet._selftest._checks import enable_refused, raised
from caplet._selftest._model import (
    Arena,
    Args,
    Attempt,
    Check,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
)

__all__ = ["CASES"]

#: Frames by kind; ``run(ctx, kind)`` sends one and waits to be killed.
FRAMES = """
import socket
import struct
import time

import msgpack
from caplet._sandbox._protocol import ContextOp
from caplet._sandbox._protocol_encode import encode_context_request


def _frame(message):
    payload = msgpack.packb(message)
    return struct.pack(">I", len(payload)) + payload


def run(ctx, kind):
    channel = ctx._transport
    call_id = channel._call_id
    if kind == "close":
        channel.sock.shutdown(socket.SHUT_RDWR)
        time.sleep(60)
    frames = {
        "garbage": struct.pack(">I", 1) + b"\\xc1",
        "oversized": struct.pack(">I", 64 * 1024 * 1024),
        "out-of-order": encode_context_request(
            1, call_id + 1000, ContextOp.LOG, {"level": "info", "message": "x"}
        ),
        "replayed": _frame([11, call_id - 1, "a reply to a call that already ended"]),
        "unknown-op": _frame([14, 1, call_id, "fs.read", {"path": "/etc/shadow"}]),
        "short": _frame([14, 1, call_id, "log"]),
        "extension-request": _frame(
            [14, 1, call_id, "log", {"level": msgpack.ExtType(1, b"x"), "message": "m"}]
        ),
        "extension-result": _frame([11, call_id, msgpack.ExtType(42, b"\\0" * 8)]),
        "timestamp-result": _frame([11, call_id, msgpack.Timestamp(0, 0)]),
        "host-kind": _frame([3, 1, None]),
        "trailing": (
            lambda body: struct.pack(">I", len(body)) + body
        )(msgpack.packb([11, call_id, "ok"]) + b"\\x00"),
    }
    channel.sock.sendall(frames[kind])
    channel.sock.recv(1)  # wait here until the host kills this worker
    return "not killed"
"""

STARTUP = """
from caplet._sandbox import _context
from caplet._sandbox._protocol import ContextOp
from caplet._sandbox._protocol_encode import encode_context_request


def run():
    return "never registered"


def create_functions(config):
    channel = _context._state.context._transport
    channel.sock.sendall(encode_context_request(1, 0, ContextOp.KV_KEYS, {"prefix": ""}))
    channel.sock.recv(1)
    return {"main": {"run": run, "ping": ping}}
"""


def _kind(kind: str) -> Args:
    def args(_arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (kind,)

    return args


def killed(says: str) -> Check:
    return raised(ProtocolError, says=says, worker_lives=False)


def channel_closed(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    breach_unless(attempt.followup == 1, f"the host could not call the plugin again: {attempt}")
    expect(
        isinstance(attempt.error, WorkerCrashedError | ProtocolError),
        f"expected the closed channel to end the call: {attempt.describe()}",
    )
    expect(not attempt.same_worker, "the worker should have been replaced")


def _case(
    name: str, attack: str, kind: str, check: Check, layer: Layer = Layer.PROTOCOL
) -> HostileCase:
    return HostileCase(name, Family.PROTOCOL, attack, layer, FRAMES, check, args=_kind(kind))


CASES: tuple[HostileCase, ...] = (
    _case(
        "frame-garbage",
        "send a frame that is not msgpack",
        "garbage",
        killed("malformed msgpack"),
    ),
    _case(
        "frame-oversized",
        "announce a 64 MiB frame on the channel",
        "oversized",
        killed("exceeds the limit"),
        Layer.FRAME_LIMIT,
    ),
    _case(
        "frame-out-of-order",
        "send a ctx request tagged with a call that is not running",
        "out-of-order",
        killed("a ctx request tagged with call"),
    ),
    _case(
        "frame-replayed",
        "replay a result frame of a call that already ended",
        "replayed",
        killed("while request"),
    ),
    _case(
        "frame-unknown-op",
        "ask the host for an operation ctx does not have (fs.read)",
        "unknown-op",
        killed("unknown ctx op 'fs.read'"),
    ),
    _case(
        "frame-short",
        "send a ctx request with an element missing",
        "short",
        killed("must have 5 elements"),
    ),
    _case(
        "msgpack-ext-request",
        "put a msgpack extension type in a ctx request",
        "extension-request",
        killed("extension types"),
    ),
    _case(
        "msgpack-ext-result",
        "return a msgpack extension type in a result frame",
        "extension-result",
        killed("extension types"),
    ),
    _case(
        "msgpack-timestamp",
        "return a msgpack timestamp (an extension type the decoder would build objects for)",
        "timestamp-result",
        killed("extension types"),
    ),
    _case(
        "frame-host-kind",
        "send a message kind only the host may send",
        "host-kind",
        killed("unknown message kind 3"),
    ),
    _case(
        "frame-trailing-bytes",
        "append bytes after a valid message inside one frame",
        "trailing",
        killed("malformed"),
    ),
    _case(
        "close-channel",
        "shut the channel down in the middle of a call, then hang",
        "close",
        channel_closed,
    ),
    HostileCase(
        "request-before-ready",
        Family.PROTOCOL,
        "send a ctx request from create_functions, before the worker is ready",
        Layer.PROTOCOL,
        STARTUP,
        enable_refused("broke the protocol while starting"),
    ),
)
