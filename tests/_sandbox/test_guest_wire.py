"""The guest snippet's request and reply maps: round trips, strict decoding, fuzzing."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caplet._errors import ProtocolError
from caplet._sandbox._guest_wire import (
    MAX_TRACEBACK_CHARS,
    GuestReply,
    GuestRequest,
    HostFunction,
    HostModule,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)

FUZZ = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

REQUEST = GuestRequest(
    code="1 + 1",
    modules=(
        HostModule(
            "fsread",
            "fs-read",
            "Read files.",
            (HostFunction("read_file", "Read a file."), HostFunction("list_dir")),
        ),
    ),
    unavailable={"fswrite": "plugin 'fs-write' is not enabled"},
    max_output_chars=1000,
    max_value_bytes=100,
)

REPLY = GuestReply(
    stdout="hi\n",
    stderr="",
    truncated=False,
    has_value=True,
    value=[1, {"a": b"x"}],
    value_repr="[1, {'a': b'x'}]",
    error=None,
    error_type=None,
)


def _decode(value: object) -> GuestReply:
    return decode_reply(value, max_output_chars=1000, max_value_bytes=100)


def test_the_request_round_trips_through_msgpack() -> None:
    wire = msgpack.unpackb(msgpack.packb(encode_request(REQUEST)), raw=False)
    assert decode_request(wire) == REQUEST


def test_the_reply_round_trips_through_msgpack() -> None:
    wire = msgpack.unpackb(msgpack.packb(encode_reply(REPLY)), raw=False)
    assert _decode(wire) == REPLY


def test_an_error_reply_round_trips() -> None:
    reply = GuestReply("", "", False, False, None, None, "Traceback ...\nKeyError: 1\n", "KeyError")
    assert _decode(encode_reply(reply)) == reply


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extra": 1}, "exactly the keys"),
        ({"stdout": 5}, "stdout must be a str"),
        ({"stdout": "x" * 1001}, "stdout is 1001 characters, over the cap of 1000"),
        ({"stderr": "x" * 1001}, "stderr is 1001 characters"),
        ({"repr": "x" * 1001}, "the value's repr is 1001 characters"),
        ({"value": b"x" * 200}, "encodes to 202 bytes, over the cap of 100"),
        ({"value": {1: 2}}, "a dict key of type int"),
        ({"has_value": False}, "has a value but has_value is false"),
        ({"value": None, "repr": None}, "repr must be given exactly when has_value is true"),
        ({"truncated": 1}, "truncated must be a bool"),
        ({"error": "boom"}, "error and error_type together"),
        ({"error": "x", "error_type": "E"}, "both an error and a value"),
        ({"error": "x" * (MAX_TRACEBACK_CHARS + 1), "error_type": "E"}, "the traceback is"),
        (
            {
                "has_value": False,
                "value": None,
                "repr": None,
                "error": "x",
                "error_type": "E" * 201,
            },
            "the error type is 201 characters",
        ),
    ],
)
def test_a_forged_reply_is_refused_naming_the_field(
    change: dict[str, object], message: str
) -> None:
    forged = {**encode_reply(REPLY), **change}
    with pytest.raises(ProtocolError, match=message):
        _decode(forged)


def test_a_reply_that_is_not_a_map_is_refused() -> None:
    with pytest.raises(ProtocolError, match="the guest reply must be a map, got list"):
        _decode([1, 2])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"code": 1}, "the guest code must be a str"),
        ({"modules": {}}, "the host modules must be an array"),
        ({"modules": [{"name": "x"}]}, "a host module must have exactly the keys"),
        ({"unavailable": []}, "unavailable must be a map"),
        ({"max_output_chars": 0}, "max_output_chars must be an int in 1..2\\*\\*31"),
        ({"max_value_bytes": True}, "max_value_bytes must be an int"),
    ],
)
def test_a_malformed_request_is_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_request({**encode_request(REQUEST), **change})


packable = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(-5, 5), children, max_size=4)
    ),
    max_leaves=12,
)

_REPLY_KEYS = ["stdout", "stderr", "truncated", "has_value", "value", "repr", "error", "error_type"]
reply_like = st.fixed_dictionaries(
    {},
    optional=dict.fromkeys(_REPLY_KEYS, packable),
) | st.fixed_dictionaries(dict.fromkeys(_REPLY_KEYS, packable))


@FUZZ
@given(packable | reply_like)
def test_no_reply_makes_the_decoder_raise_anything_but_protocol_error(value: object) -> None:
    try:
        assert isinstance(_decode(value), GuestReply)
    except ProtocolError:
        pass


@FUZZ
@given(packable | st.fixed_dictionaries(dict.fromkeys(encode_request(REQUEST), packable)))
def test_no_request_makes_the_decoder_raise_anything_but_protocol_error(value: object) -> None:
    try:
        assert isinstance(decode_request(value), GuestRequest)
    except ProtocolError:
        pass
