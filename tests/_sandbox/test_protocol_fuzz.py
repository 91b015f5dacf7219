"""Property tests: no input makes a decoder raise anything but ProtocolError."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caplet._errors import ProtocolError
from caplet._sandbox._protocol import (
    MAX_DEPTH,
    Call,
    ContextFailure,
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
    encode_result,
)

# database=None: nothing is written next to the repository.
FUZZ = settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)

#: Values that may cross the boundary.
wire_values = st.recursive(
    st.none()
    | st.booleans()
    | INT64
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

#: Anything msgpack can encode, including what must be refused.
packable = st.recursive(
    st.none()
    | st.booleans()
    | INT64
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4))
    | st.builds(msgpack.Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 999_999_999)),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=8) | st.binary(max_size=4) | st.integers(-5, 5), children, max_size=4
        )
    ),
    max_leaves=12,
)

kinds = st.sampled_from([0, 1, 2, 3, 4, 10, 11, 12, 13, 14]) | packable
#: Context ops, real and not, so CONTEXT_REQUEST's op check is fuzzed too.
ops = st.sampled_from([op.value for op in ContextOp]) | st.text(max_size=12) | packable
request_ids = st.integers(min_value=0, max_value=2**63 - 1) | packable

#: Arrays shaped like messages, so the shape checks (not only msgpack) are fuzzed.
message_like = st.builds(
    lambda kind, request_id, rest: [kind, request_id, *rest],
    kinds,
    request_ids,
    st.lists(packable, max_size=6),
)

#: CONTEXT_REQUEST-shaped arrays: [14, id, call_id, op, args].
request_like = st.builds(
    lambda request_id, call_id, op, args: [14, request_id, call_id, op, args],
    request_ids,
    request_ids,
    ops,
    st.dictionaries(st.text(max_size=8), packable, max_size=4) | packable,
)

WORKER_TYPES = (Ready, Result, Error, Fatal, ContextRequest)
HOST_TYPES = (Init, Call, Shutdown, ContextReply, ContextFailure)


def _decode_both(payload: bytes) -> None:
    try:
        assert isinstance(decode_worker_message(payload), WORKER_TYPES)
    except ProtocolError:
        pass
    try:
        assert isinstance(decode_host_message(payload), HOST_TYPES)
    except ProtocolError:
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_protocol_error(payload: bytes) -> None:
    _decode_both(payload)


@FUZZ
@given(packable)
def test_arbitrary_msgpack_raises_only_protocol_error(value: object) -> None:
    _decode_both(msgpack.packb(value))


@FUZZ
@given(message_like)
def test_message_shaped_arrays_raise_only_protocol_error(message: list[object]) -> None:
    _decode_both(msgpack.packb(message))


@FUZZ
@given(message_like, st.binary(min_size=1, max_size=8))
def test_trailing_bytes_are_refused(message: list[object], extra: bytes) -> None:
    payload = msgpack.packb(message) + extra
    with pytest.raises(ProtocolError):
        decode_worker_message(payload)
    with pytest.raises(ProtocolError):
        decode_host_message(payload)


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 300))
def test_mutated_valid_frames_raise_only_protocol_error(noise: bytes, cut: int) -> None:
    payload = encode_call(1, "demo", "run", [1, "x", {"a": [None]}], {"k": b"v"})[4:]
    _decode_both(payload[:cut] + noise)
    _decode_both(noise + payload[cut:])


def _normalised(value: object) -> object:
    if isinstance(value, tuple | list):
        return [_normalised(item) for item in value]
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    return value


@FUZZ
@given(wire_values)
def test_every_wire_value_round_trips(value: object) -> None:
    decoded = decode_worker_message(encode_result(1, value)[4:])
    assert isinstance(decoded, Result)
    assert decoded.value == _normalised(value)


@settings(max_examples=50, deadline=None, database=None)
@given(
    st.lists(wire_values, max_size=3),
    st.dictionaries(st.text(max_size=8), wire_values, max_size=3),
)
def test_every_call_round_trips(args: list[object], kwargs: dict[str, object]) -> None:
    decoded = decode_host_message(encode_call(7, "demo", "run", args, kwargs)[4:])
    assert isinstance(decoded, Call)
    assert (decoded.request_id, decoded.module, decoded.function) == (7, "demo", "run")
    assert decoded.args == _normalised(args)
    assert decoded.kwargs == _normalised(kwargs)


@FUZZ
@given(packable)
def test_what_the_encoder_accepts_the_decoder_accepts(value: object) -> None:
    try:
        frame = encode_result(1, value)
    except ProtocolError:
        return
    assert isinstance(decode_worker_message(frame[4:]), Result)


@FUZZ
@given(st.integers(MAX_DEPTH + 1, 400))
def test_deep_values_are_refused_both_ways(depth: int) -> None:
    value: object = None
    for _ in range(depth):
        value = [value]
    with pytest.raises(ProtocolError, match="nested deeper than 64 levels"):
        encode_result(1, value)
    with pytest.raises(ProtocolError, match="nested deeper than 64 levels"):
        decode_worker_message(msgpack.packb([11, 1, value]))


# -- the ctx frames (issue 6) -------------------------------------------------------------


@FUZZ
@given(request_like)
def test_context_request_shaped_arrays_raise_only_protocol_error(message: list[object]) -> None:
    _decode_both(msgpack.packb(message))


@FUZZ
@given(
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.sampled_from(list(ContextOp)),
    st.dictionaries(st.text(max_size=8), wire_values, max_size=4),
)
def test_every_context_request_round_trips(
    request_id: int, call_id: int, op: ContextOp, args: dict[str, object]
) -> None:
    decoded = decode_worker_message(encode_context_request(request_id, call_id, op, args)[4:])
    assert decoded == ContextRequest(request_id, call_id, op, _normalised(args))  # type: ignore[arg-type]


@FUZZ
@given(wire_values, st.text(max_size=30), st.text(max_size=30))
def test_every_context_answer_round_trips(value: object, category: str, message: str) -> None:
    reply = decode_host_message(encode_context_reply(3, value)[4:])
    assert reply == ContextReply(3, _normalised(value))
    failure = decode_host_message(encode_context_error(4, "NotGrantedError", category, message)[4:])
    assert failure == ContextFailure(4, "NotGrantedError", category, message)


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 300))
def test_mutated_context_requests_raise_only_protocol_error(noise: bytes, cut: int) -> None:
    frame = encode_context_request(1, 2, ContextOp.HTTP_FETCH, {"url": "https://x", "body": b"1"})
    payload = frame[4:]
    _decode_both(payload[:cut] + noise)
    _decode_both(noise + payload[cut:])
