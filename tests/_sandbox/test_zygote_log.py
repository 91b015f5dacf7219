"""A worker's stderr relayed into the host's log: the latest output, bounded."""

from __future__ import annotations

import os
import time

import pytest

from caplet._sandbox._zygote_log import LOG_BYTES, RATE_BYTES, RATE_WINDOW_S, new_relay


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


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_flooding_its_stderr_is_read_at_a_bounded_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # attack13: the zygote read a worker's stderr as fast as the worker wrote
    # it, outside every cgroup and CPU count (17.7 GB in 5 s, half a core of
    # the zygote for as long as the plugin wished). Past RATE_BYTES in a window
    # it stops reading until the window is over: the worker waits in write(2).
    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)  # the module reads time.monotonic
    log_fd = os.memfd_create("test-log", os.MFD_CLOEXEC)
    relay, write_fd = new_relay(log_fd)
    os.set_blocking(write_fd, False)
    chunk = b"x" * 65536
    try:
        read = 0
        while relay.resume_at is None:
            os.write(write_fd, chunk)
            assert relay.pump()
            read += len(chunk)
            assert read <= RATE_BYTES + len(chunk)
        assert relay.resume_at == clock.now + RATE_WINDOW_S
        os.write(write_fd, chunk)  # the pipe is empty: the worker could write this much
        assert relay.pump()
        with pytest.raises(BlockingIOError):  # not read: the pipe is full, the worker waits
            os.write(write_fd, chunk)
        clock.now += RATE_WINDOW_S
        assert relay.pump()  # a new window: read again
        assert relay.resume_at is None
        os.write(write_fd, chunk)
    finally:
        os.close(write_fd)
        relay.close()


def test_a_full_log_is_not_rewritten_for_every_chunk_but_ends_with_the_latest() -> None:
    # attack13: every chunk past a full log truncated and rewrote the memfd,
    # four times the CPU the worker spent writing it, in the zygote. The latest
    # output is held until the drain, which is when the host reads the log.
    log_fd = os.memfd_create("test-log", os.MFD_CLOEXEC)
    relay, write_fd = new_relay(log_fd)
    try:
        for n in range(4):
            os.write(write_fd, bytes([65 + n]) * (LOG_BYTES // 2))
            assert relay.pump()
        full = os.pread(log_fd, LOG_BYTES, 0)
        for n in range(4):
            os.write(write_fd, f"later {n} ".encode() * 1000)
            assert relay.pump()
            assert os.pread(log_fd, LOG_BYTES, 0) == full  # untouched until the drain
        os.write(write_fd, b"last words")
        os.close(write_fd)
        assert not relay.pump(drain=True)
        kept = os.pread(log_fd, LOG_BYTES, 0)
        assert kept.endswith(b"later 3 " * 1000 + b"last words")
        assert len(kept) == LOG_BYTES
    finally:
        relay.close()
