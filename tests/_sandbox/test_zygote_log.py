"""A worker's stderr relayed into the host's log: the latest output, bounded."""

from __future__ import annotations

import os

import pytest

from caplet._sandbox._zygote_log import LOG_BYTES, new_relay


def test_the_log_keeps_the_latest_output_and_never_grows_past_its_bound() -> None:
    log_fd = os.memfd_create("test-log", os.MFD_CLOEXEC)
    relay, write_fd = new_relay(log_fd)
    try:
        written = b""
        for n in range(40):  # 40 x 40 KiB through the pipe, each copied before the next
            chunk = (f"chunk {n:02d} ".encode() * 4000)[: 40 * 1024]
            os.write(write_fd, chunk)
            written += chunk
            assert relay.pump()
            assert os.fstat(log_fd).st_size <= LOG_BYTES
        os.write(write_fd, b"last words")
        os.close(write_fd)
        assert not relay.pump(drain=True)  # end of file: the writer is gone
        size = os.fstat(log_fd).st_size
        assert size <= LOG_BYTES
        kept = os.pread(log_fd, size, 0)
        assert (written + b"last words").endswith(kept)
        assert len(kept) > 2048  # more than the tail the host quotes
    finally:
        relay.close()


def test_short_output_is_kept_whole() -> None:
    log_fd = os.memfd_create("test-log", os.MFD_CLOEXEC)
    relay, write_fd = new_relay(log_fd)
    try:
        os.write(write_fd, b"Traceback ...\nValueError: bad\n")
        os.close(write_fd)
        assert not relay.pump(drain=True)
        assert os.pread(log_fd, 100, 0) == b"Traceback ...\nValueError: bad\n"
    finally:
        relay.close()


def test_the_drain_after_a_reap_ends_though_something_still_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Attack: a process the worker started outlives it (no pid namespace of its own
    # without the jail) and keeps its stderr: a drain "until empty" never ended, and
    # the zygote, which drains at every reap, served no other worker again. A real
    # writer (`yes`) only sometimes outruns the reader, so the pipe that never runs
    # dry is the read's answer here, whatever the speed of either side.
    log_fd = os.memfd_create("test-log", os.MFD_CLOEXEC)
    relay, write_fd = new_relay(log_fd)
    os.close(write_fd)
    reads: list[int] = []

    def never_dry(fd: int, size: int) -> bytes:
        assert fd == relay.read_fd
        reads.append(size)
        return b"y\n" * (size // 2)

    monkeypatch.setattr(os, "read", never_dry)  # the module reads through os.read
    try:
        assert relay.pump(drain=True)  # bounded: it returns though data keeps coming
        assert 16 <= len(reads) <= 64
        assert os.fstat(log_fd).st_size <= LOG_BYTES
    finally:
        monkeypatch.undo()
        relay.close()
