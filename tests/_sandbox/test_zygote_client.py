"""The host's side of the zygote, in process: the status pipe's format.

The zygote itself, its spares and its workers are exercised through real
launchers in tests/_sandbox/test_zygote_spare.py and test_seccomp_notify.py.
"""

from __future__ import annotations

import os
import sys
import time

import msgpack
import pytest

from caplet._sandbox._zygote_client import _decode_report, _read_report
from caplet._sandbox._zygote_request import STATUS


def _pipe_with(data: bytes) -> int:
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    return read_end


def _report(denials: object, oom_kills: object = 0, cpu_killed: object = False) -> bytes:
    packed: bytes = msgpack.packb(
        {"denials": denials, "oom_kills": oom_kills, "cpu_killed": cpu_killed}
    )
    return packed


@pytest.mark.parametrize(
    ("written", "status", "denials", "oom_kills"),
    [
        (STATUS.pack(-9) + _report({"socket": 2}), -9, {"socket": 2}, 0),
        (STATUS.pack(-9) + _report({}, 1), -9, {}, 1),
        (STATUS.pack(0), 0, {}, 0),  # no report after the status: none counted
        (STATUS.pack(3) + b"\xc1", 3, {}, 0),  # malformed: ignored, status kept
        (STATUS.pack(3) + msgpack.packb([1, 2]), 3, {}, 0),
        (STATUS.pack(3) + msgpack.packb({"socket": 2}), 3, {}, 0),  # no "denials" map
        (STATUS.pack(1) + _report({"ok": 1, "bad": "x", "neg": -1}, -2), 1, {"ok": 1}, 0),
        (STATUS.pack(1) + _report({}, "many"), 1, {}, 0),
        (b"\x01\x02", None, {}, 0),  # no complete status: the caller assumes SIGKILL
    ],
)
def test_status_report_decoding(
    written: bytes, status: int | None, denials: dict[str, int], oom_kills: int
) -> None:
    read_end = _pipe_with(written)
    try:
        assert _read_report(read_end, time.monotonic() + 30) == (
            status,
            (denials, oom_kills, False),
        )
    finally:
        os.close(read_end)


def test_status_is_native_endian_like_before() -> None:
    assert STATUS.pack(-9)[:4] == (-9).to_bytes(4, sys.byteorder, signed=True)
    assert _decode_report(_report({"socket": 1}, 2)) == ({"socket": 1}, 2, False)
    assert _decode_report(_report({}, 0, True)) == ({}, 0, True)
    assert _decode_report(_report({}, 0, 1)) == ({}, 0, False)  # only True says killed
    assert _decode_report(_report({"socket": 1})[:-1]) is None  # incomplete
