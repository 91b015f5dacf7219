"""The wire protocol: frames, message shapes, the decoder and the frame reader.

What the encoder refuses: tests/_sandbox/test_protocol_encode.py.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import msgpack
import pytest

from caplet._errors import ProtocolError
from caplet._sandbox._frames import (
    FrameReader,
    send_frame,
)
from caplet._sandbox._protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    Call,
    ContextFailure,
    ContextGrants,
    ContextOp,
    ContextReply,
    ContextRequest,
    Error,
    Fatal,
    Init,
    Ready,
    Result,
    Shutdown,
)
from caplet._sandbox._protocol_decode import (
    decode_host_message,
    decode_worker_message,
)
from caplet._sandbox._protocol_encode import (
    encode_call,
    encode_context_error,
    encode_context_reply,
    encode_context_request,
    encode_error,
    encode_fatal,
    encode_init,
    encode_ready,
    encode_result,
    encode_shutdown,
)
from tests._sandbox.protocolkit import frame_payload, nested


def _packed(message: object) -> bytes:
    packed: bytes = msgpack.packb(message)
    return packed


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        yield left, right


# -- round trips ------------------------------------------------------------------


def test_frame_is_a_big_endian_length_and_msgpack() -> None:
    frame = encode_shutdown(7)
    assert frame == b"\x00\x00\x00\x03" + _packed([2, 7])


def test_host_messages_round_trip() -> None:
    init = encode_init(
        0,
        plugin="demo",
        entry="plugin.py",
        snapshot="/snap",
        config={"root": "/data", "names": ("a", "b"), "n": 3, "on": True},
        modules={"demo": ("run", "stop")},
        max_frame_bytes=1024,
        env={"TOKEN": "secret"},
    )
    assert decode_host_message(frame_payload(init)) == Init(
        0,
        "demo",
        "plugin.py",
        "/snap",
        {"root": "/data", "names": ["a", "b"], "n": 3, "on": True},
        {"demo": ("run", "stop")},
        1024,
        {"TOKEN": "secret"},
    )
    call = encode_call(5, "demo", "run", (1, "x", None), {"k": [b"\x00", 2.5]})
    assert decode_host_message(frame_payload(call)) == Call(
        5, "demo", "run", [1, "x", None], {"k": [b"\x00", 2.5]}
    )
    assert decode_host_message(frame_payload(encode_shutdown(9))) == Shutdown(9)


def test_worker_messages_round_trip() -> None:
    ready = encode_ready(0, {"demo": ["run"]}, ["demo.secret", "extra"])
    assert decode_worker_message(frame_payload(ready)) == Ready(
        0, {"demo": ("run",)}, ("demo.secret", "extra")
    )
    value = {"a": [1, {"b": (True, None)}], "c": b"\xff", "big": 2**64 - 1, "neg": -(2**63)}
    assert decode_worker_message(frame_payload(encode_result(3, value))) == Result(
        3, {"a": [1, {"b": [True, None]}], "c": b"\xff", "big": 2**64 - 1, "neg": -(2**63)}
    )
    assert decode_worker_message(frame_payload(encode_error(4, "KeyError", "'x'"))) == Error(
        4, "KeyError", "'x'"
    )
    assert decode_worker_message(frame_payload(encode_fatal(0, "boom"))) == Fatal(0, "boom")


def test_containers_up_to_the_depth_limit_cross() -> None:
    value = nested(MAX_DEPTH)
    assert decode_worker_message(frame_payload(encode_result(1, value))) == Result(1, value)


# -- malformed input ---------------------------------------------------------------

WORKER_CASES = [
    (b"", "malformed msgpack"),
    (b"\xc1", "malformed msgpack"),
    (_packed([11, 1, 2]) + b"\xc0", "malformed msgpack (ExtraData"),
    (_packed({"kind": 11}), "must be an array [kind, request_id, ...], got a value of type dict"),
    (_packed([11]), "must be an array [kind, request_id, ...], got an array of 1"),
    (_packed([11, 1]), "RESULT must have 3 elements, got 2"),
    (_packed([11, 1, 2, 3]), "RESULT must have 3 elements, got 4"),
    (_packed([99, 1, 2]), "unknown message kind 99 from the worker"),
    (_packed([1, 1, "m", "f", [], {}]), "unknown message kind 1 from the worker"),
    (_packed([11.0, 1, 2]), "message kind must be an int, got float"),
    (_packed([True, 1, 2]), "message kind must be an int, got bool"),
    (_packed([11, -1, 2]), "request id must be an int in 0..2**63-1, got -1"),
    (_packed([11, True, 2]), "request id must be an int in 0..2**63-1, got a value of type bool"),
    (_packed([11, "1", 2]), "request id must be an int in 0..2**63-1, got a value of type str"),
    (_packed([11, 2**63, 2]), "request id must be an int in 0..2**63-1"),
    (_packed([11, 1, {b"k": 1}]), "RESULT value is a dict key of type bytes"),
    (_packed([11, 1, {1: 1}]), "int is not allowed for map key"),
    (_packed([11, 1, nested(100)]), "containers nested deeper than 64 levels"),
    (b"\x93\x0b\x01" + b"\x91" * 100_000 + b"\xc0", "malformed msgpack (StackError"),
    (_packed([11, 1, msgpack.ExtType(5, b"x")]), "extension types (timestamps included)"),
    (_packed([11, 1, msgpack.Timestamp(1, 0)]), "extension types (timestamps included)"),
    (b"\x93\x0b\x01\xdd\xff\xff\xff\xff", "malformed msgpack"),
    (b"\x93\x0b\x01\xa2\xff\xfe", "malformed msgpack (UnicodeDecodeError"),
    (_packed([12, 1, "ValueError"]), "ERROR must have 4 elements, got 3"),
    (_packed([12, 1, 5, "message"]), "ERROR exception type must be a str, got int"),
    (_packed([12, 1, "E", b"bytes"]), "ERROR message must be a str, got bytes"),
    (_packed([12, 1, "E", "m" * (MAX_TEXT_CHARS + 1)]), "ERROR message is 65537 characters"),
    (_packed([13, 0, None]), "FATAL message must be a str, got NoneType"),
    (_packed([10, 0, [], []]), "READY registered must be a map of str to arrays of str, got list"),
    (_packed([10, 0, {"m": "f"}, []]), "READY registered['m'] must be an array of str, got str"),
    (_packed([10, 0, {"m": [1]}, []]), "an element of READY registered['m'] must be a str"),
    (_packed([10, 0, {}, "x"]), "READY rejected must be an array of str, got str"),
]


@pytest.mark.parametrize(("payload", "message"), WORKER_CASES)
def test_malformed_worker_messages_raise_protocol_error(payload: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_worker_message(payload)
    assert message in str(caught.value)


GOOD_INIT = {
    "plugin": "demo",
    "entry": "plugin.py",
    "snapshot": "/snap",
    "config": {},
    "modules": {"demo": ["run"]},
    "max_frame_bytes": 1024,
    "env": {"TOKEN": "t"},
    "context": {"http": False, "apps": [], "modules": []},
}

HOST_CASES = [
    (_packed([1, 1, "m", "f", []]), "CALL must have 6 elements, got 5"),
    (_packed([1, 1, b"m", "f", [], {}]), "CALL module must be a str, got bytes"),
    (_packed([1, 1, "m", "f" * (MAX_TEXT_CHARS + 1), [], {}]), "CALL function is 65537"),
    (_packed([1, 1, "m", "f", {}, {}]), "CALL args must be an array, got dict"),
    (_packed([1, 1, "m", "f", [], []]), "CALL kwargs must be a map, got list"),
    (_packed([1, 1, "m", "f", [], {b"k": 1}]), "CALL kwargs is a dict key of type bytes"),
    (_packed([1, 1, "m", "f", [nested(70)], {}]), "CALL args[0]"),
    (_packed([2, 1, None]), "SHUTDOWN must have 2 elements, got 3"),
    (_packed([11, 1, None]), "unknown message kind 11 from the host"),
    (_packed([0, 0, []]), "INIT body must be a map, got list"),
    (_packed([0, 0, {**GOOD_INIT, "extra": 1}]), "unexpected: [\"'extra'\"]"),
    (_packed([0, 0, {k: v for k, v in GOOD_INIT.items() if k != "entry"}]), "missing: ['entry']"),
    (_packed([0, 0, {**GOOD_INIT, "max_frame_bytes": 0}]), "INIT max_frame_bytes must be an int"),
    (_packed([0, 0, {**GOOD_INIT, "max_frame_bytes": True}]), "INIT max_frame_bytes must be"),
    (_packed([0, 0, {**GOOD_INIT, "modules": {"demo": "run"}}]), "INIT modules['demo']"),
    (_packed([0, 0, {**GOOD_INIT, "config": {"k": {b"x": 1}}}]), "INIT config['k']"),
    (_packed([0, 0, {**GOOD_INIT, "plugin": None}]), "INIT plugin must be a str"),
    (_packed([0, 0, {**GOOD_INIT, "env": []}]), "INIT env must be a map"),
    (_packed([0, 0, {**GOOD_INIT, "env": {"A": 1}}]), "INIT env value must be a str"),
]


@pytest.mark.parametrize(("payload", "message"), HOST_CASES)
def test_malformed_host_messages_raise_protocol_error(payload: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_host_message(payload)
    assert message in str(caught.value)


def test_valid_init_decodes() -> None:
    message = decode_host_message(_packed([0, 0, GOOD_INIT]))
    assert isinstance(message, Init)
    assert message.modules == {"demo": ("run",)}
    assert message.max_frame_bytes == 1024
    assert message.env == {"TOKEN": "t"}


# -- the frame reader --------------------------------------------------------------


def test_reader_splits_frames_that_arrive_together(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    frames = [encode_shutdown(1), encode_result(2, "x" * 300), encode_error(3, "E", "m")]
    left.sendall(b"".join(frames))
    reader = FrameReader(right, buffer_bytes=64)
    deadline = time.monotonic() + 30
    assert [reader.read_frame(deadline) for _ in frames] == [frame_payload(f) for f in frames]


def test_reader_handles_any_mix_of_sizes_through_a_small_buffer(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    payloads = [frame_payload(encode_result(i, "y" * (i * 7 % 50))) for i in range(60)]
    for payload in payloads:
        left.sendall(struct.pack(">I", len(payload)) + payload)
    reader = FrameReader(right, buffer_bytes=40)
    deadline = time.monotonic() + 30
    assert [reader.read_frame(deadline) for _ in payloads] == payloads


def test_reader_refuses_an_oversized_frame_from_its_header(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    left.sendall(struct.pack(">I", DEFAULT_MAX_FRAME_BYTES + 1))  # no payload follows
    reader = FrameReader(right)
    with pytest.raises(ProtocolError) as caught:
        reader.read_frame(time.monotonic() + 30)
    assert str(caught.value) == "frame of 8388609 bytes exceeds the limit of 8388608 bytes"


def test_reader_limit_is_adjustable(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    left.sendall(encode_result(1, "z" * 100))
    reader = FrameReader(right)
    reader.max_frame_bytes = 50
    with pytest.raises(ProtocolError, match="exceeds the limit of 50 bytes"):
        reader.read_frame(time.monotonic() + 30)


def test_reader_times_out_on_an_incomplete_frame(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    frame = encode_result(1, "hello")
    left.sendall(frame[:6])
    right.setblocking(False)
    reader = FrameReader(right)
    with pytest.raises(TimeoutError):
        reader.read_frame(time.monotonic() - 1)


def test_reader_reports_end_of_stream(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    left.sendall(encode_shutdown(1) + encode_result(2, "cut")[:7])
    left.close()
    reader = FrameReader(right)
    deadline = time.monotonic() + 30
    assert reader.read_frame(deadline) == frame_payload(encode_shutdown(1))
    assert reader.read_frame(deadline) is None  # end of stream in the middle of a frame
    assert reader.read_frame(deadline) is None


def test_reader_reads_frames_larger_than_its_buffer(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    big = encode_result(1, b"\xab" * 100_000)
    small = encode_shutdown(2)
    left.sendall(big + small)
    reader = FrameReader(right, buffer_bytes=1024)
    deadline = time.monotonic() + 30
    assert reader.read_frame(deadline) == frame_payload(big)
    assert reader.read_frame(deadline) == frame_payload(small)


def test_send_frame_gives_up_at_the_deadline_when_the_peer_does_not_read(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, _right = pair
    left.setblocking(False)
    frame = encode_result(1, b"\x00" * (4 * 1024 * 1024))  # more than the socket buffer
    with pytest.raises(TimeoutError):
        send_frame(left, frame, time.monotonic() - 1)


def test_send_frame_completes_large_frames(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    left.setblocking(False)
    frame = encode_result(1, b"\x01" * (3 * 1024 * 1024))  # many socket buffers' worth
    received: list[bytes | None] = []

    def drain() -> None:
        received.append(FrameReader(right).read_frame(time.monotonic() + 60))

    reader = threading.Thread(target=drain)
    reader.start()
    send_frame(left, frame, time.monotonic() + 60)
    reader.join()
    assert received == [frame_payload(frame)]


# -- the ctx frames (issue 6) -------------------------------------------------------------


def test_context_frames_round_trip() -> None:
    grants = ContextGrants(http=True, apps=("email.send",), modules=("fsread",))
    init = encode_init(
        0,
        plugin="demo",
        entry="plugin.py",
        snapshot="/snap",
        config={},
        modules={"demo": ("run",)},
        context=grants,
    )
    decoded = decode_host_message(frame_payload(init))
    assert isinstance(decoded, Init)
    assert decoded.context == grants
    request = encode_context_request(5, 9, ContextOp.KV_SET, {"key": "k", "value": (1, b"x")})
    assert frame_payload(request) == _packed([14, 5, 9, "kv.set", {"key": "k", "value": [1, b"x"]}])
    assert decode_worker_message(frame_payload(request)) == ContextRequest(
        5, 9, ContextOp.KV_SET, {"key": "k", "value": [1, b"x"]}
    )
    reply = encode_context_reply(5, {"found": True, "value": None})
    assert decode_host_message(frame_payload(reply)) == ContextReply(
        5, {"found": True, "value": None}
    )
    error = encode_context_error(5, "NotGrantedError", "not granted", "not granted: no")
    assert decode_host_message(frame_payload(error)) == ContextFailure(
        5, "NotGrantedError", "not granted", "not granted: no"
    )


CONTEXT_CASES = [
    (_packed([14, 1, 1, "log"]), decode_worker_message, "CONTEXT_REQUEST must have 5 elements"),
    (_packed([14, 1, -1, "log", {}]), decode_worker_message, "call id must be an int in"),
    (_packed([14, 1, 1, 5, {}]), decode_worker_message, "CONTEXT_REQUEST op must be a str"),
    (_packed([14, 1, 1, "fs.read", {}]), decode_worker_message, "unknown ctx op 'fs.read'"),
    (_packed([14, 1, 1, "log", []]), decode_worker_message, "CONTEXT_REQUEST args must be a map"),
    (_packed([14, 1, 1, "log", {b"k": 1}]), decode_worker_message, "a dict key of type bytes"),
    (_packed([3, 1]), decode_host_message, "CONTEXT_REPLY must have 3 elements"),
    (_packed([3, 1, {b"k": 2}]), decode_host_message, "CONTEXT_REPLY value is a dict key"),
    (_packed([4, 1, "NotGrantedError", "c"]), decode_host_message, "must have 5 elements"),
    (_packed([4, 1, "SystemExit", "c", "m"]), decode_host_message, "unknown error 'SystemExit'"),
    (_packed([4, 1, "ContextError", 5, "m"]), decode_host_message, "CONTEXT_ERROR category"),
    (
        _packed([0, 0, {**GOOD_INIT, "context": {"http": 1, "apps": [], "modules": []}}]),
        decode_host_message,
        "INIT context http must be a bool",
    ),
    (
        _packed([0, 0, {**GOOD_INIT, "context": {"http": False}}]),
        decode_host_message,
        "INIT context keys must be ['apps', 'http', 'modules']",
    ),
    (
        _packed([0, 0, {**GOOD_INIT, "context": {"http": False, "apps": [1], "modules": []}}]),
        decode_host_message,
        "an element of INIT context apps must be a str",
    ),
    (_packed([14, 1, 1, "log", {}]), decode_host_message, "unknown message kind 14 from the host"),
    (_packed([3, 1, None]), decode_worker_message, "unknown message kind 3 from the worker"),
]


@pytest.mark.parametrize(("payload", "decode", "message"), CONTEXT_CASES)
def test_malformed_context_frames_raise_protocol_error(
    payload: bytes, decode: object, message: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(payload)  # type: ignore[operator]
    assert message in str(caught.value)
