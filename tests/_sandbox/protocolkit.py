"""Frame helpers the wire-protocol tests share (test_protocol, test_protocol_encode)."""

from __future__ import annotations

import struct


def frame_payload(frame: bytes) -> bytes:
    """The msgpack body of one frame, after checking its length header."""
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    return frame[4:]


def nested(depth: int) -> object:
    """``1`` inside ``depth`` lists."""
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value
