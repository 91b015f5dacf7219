"""The protocol's encoder: what it refuses to frame, and how it says so."""

from __future__ import annotations

import msgpack
import pytest

from caplet._errors import ProtocolError
from caplet._sandbox._protocol import (
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    ContextFailure,
    ContextOp,
    Result,
    check_value,
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
from tests._sandbox.protocolkit import frame_payload, nested


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({1, 2}, "args[0] is a value of type set"),
        (2**64, "args[0] is an int outside the 64-bit range"),
        (-(2**63) - 1, "args[0] is an int outside the 64-bit range"),
        ({"a": {3: "x"}}, "args[0]['a'] is a dict key of type int"),
        ([1, [2, object()]], "args[0][1][1] is a value of type object"),
        (bytearray(b"x"), "args[0] is a value of type bytearray"),
        (msgpack.ExtType(1, b"x"), "args[0] is a value of type ExtType"),
        (msgpack.Timestamp(1, 0), "args[0] is a value of type Timestamp"),
        (nested(MAX_DEPTH + 5), "is containers nested deeper than 64 levels"),
    ],
)
def test_encode_call_refuses_values_that_cannot_cross(value: object, reason: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        encode_call(1, "demo", "run", [value], {})
    assert reason in str(caught.value)
    assert str(caught.value).endswith(
        "which cannot cross the boundary "
        "(JSON-like values, bytes, lists and dicts with string keys only)"
    )


def test_encode_call_refuses_bad_names_and_containers() -> None:
    with pytest.raises(ProtocolError, match="module name must be a str, got int"):
        encode_call(1, 5, "run", [], {})  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="function name is 70000 characters"):
        encode_call(1, "demo", "f" * 70_000, [], {})
    with pytest.raises(ProtocolError, match="args must be a list or tuple, got str"):
        encode_call(1, "demo", "run", "abc", {})
    with pytest.raises(ProtocolError, match="kwargs must be a mapping, got list"):
        encode_call(1, "demo", "run", [], [])  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="request id must be an int"):
        encode_call(True, "demo", "run", [], {})
    with pytest.raises(ProtocolError, match="request id must be an int"):
        encode_call(-1, "demo", "run", [], {})


def test_encode_result_names_the_origin_and_the_path() -> None:
    with pytest.raises(ProtocolError) as caught:
        encode_result(1, {"rows": [1, {2, 3}]}, origin="demo.run")
    assert str(caught.value) == (
        "demo.run returned a value of type set (at ['rows'][1]) that cannot cross the "
        "boundary (JSON-like values, bytes, lists and dicts with string keys only)"
    )


def test_subclasses_of_plain_types_cross_as_the_plain_type() -> None:
    class Name(str):
        pass

    class Table(dict[str, int]):
        pass

    frame = encode_result(1, [Name("x"), Table(a=1), (1, 2)])
    assert decode_worker_message(frame_payload(frame)) == Result(1, ["x", {"a": 1}, [1, 2]])


def test_context_encoders_refuse_what_cannot_cross() -> None:
    with pytest.raises(ProtocolError, match=r"arguments\['v'\] is a value of type set"):
        encode_context_request(1, 1, ContextOp.KV_SET, {"v": {1}})
    with pytest.raises(ProtocolError, match="op must be a ContextOp, got str"):
        encode_context_request(1, 1, "log", {})  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="the ctx reply is a value of type object"):
        encode_context_reply(1, object())
    with pytest.raises(ProtocolError, match=r"the result\[0\] is a value of type complex"):
        check_value([1j], "the result")
    # An error class the protocol does not know is sent as the base class,
    # and a handler's huge message is cut rather than refused.
    frame = encode_context_error(1, "SystemExit", "c", "m" * (MAX_TEXT_CHARS + 10))
    decoded = decode_host_message(frame_payload(frame))
    assert isinstance(decoded, ContextFailure)
    assert decoded.error == "ContextError"
    assert len(decoded.message) == MAX_TEXT_CHARS
