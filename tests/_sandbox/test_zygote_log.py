"""A worker's stderr relayed into the host's log: the latest output, bounded."""

from __future__ import annotations

import os

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
