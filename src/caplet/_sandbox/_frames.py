"""The socket side of the protocol: whole frames sent and read within a deadline
(length-prefixed, size-capped; :mod:`caplet._sandbox._protocol` has the format).
"""

from __future__ import annotations

import math
import select
import socket
import time

from caplet._errors import ProtocolError
from caplet._sandbox._protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    HEADER,
    HEADER_BYTES,
)

__all__ = ["FrameReader", "UnsentFrameError", "send_frame"]


# -- the socket side --------------------------------------------------------------


# MSG_NOSIGNAL (send(2)): a peer that has gone away is EPIPE, never SIGPIPE,
# even in a host application that restored SIGPIPE's default action.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


# poll(2) takes a C int of milliseconds; longer waits (or an infinite
# deadline) are cut to this and simply poll again.
_MAX_POLL_MS = 2**31 - 1


def _poll_ms(deadline: float) -> int:
    remaining_ms = (deadline - time.monotonic()) * 1000
    if remaining_ms <= 0:
        raise TimeoutError("deadline exceeded")
    return _MAX_POLL_MS if remaining_ms >= _MAX_POLL_MS else math.ceil(remaining_ms)


class UnsentFrameError(BrokenPipeError):
    """The peer was gone before any byte of the frame was sent (EPIPE or
    ECONNRESET on the first send): the peer cannot have acted on it."""


def send_frame(sock: socket.socket, frame: bytes, deadline: float | None) -> None:
    """Write a whole frame, normally with a single ``send``.

    On a non-blocking socket a full buffer waits in ``poll`` until
    ``deadline`` (``time.monotonic()`` seconds), then raises TimeoutError, so
    a peer that stops reading cannot hang the writer. ``deadline=None`` waits
    for ever. OSError (EPIPE, ECONNRESET) propagates: the peer is gone; when
    not a byte went out, as :class:`UnsentFrameError` (a BrokenPipeError).
    """
    try:
        sent = sock.send(frame, _SEND_FLAGS)
    except BlockingIOError:
        sent = 0
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise UnsentFrameError(exc.errno, exc.strerror) from exc
    if sent == len(frame):
        return
    view = memoryview(frame)
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    while sent < len(frame):
        if deadline is None:
            poller.poll()
        elif not poller.poll(_poll_ms(deadline)):
            continue  # the next _poll_ms raises once the deadline has passed
        try:
            sent += sock.send(view[sent:], _SEND_FLAGS)
        except BlockingIOError:
            continue


class FrameReader:
    """Reads whole frames from a stream socket through one reusable buffer.

    Small frames are parsed out of a preallocated ``bytearray`` filled with
    ``recv_into`` (several frames may arrive in one read); a frame larger than
    the buffer gets its own exact-size buffer so nothing past it is consumed.
    ``max_frame_bytes`` may be changed between reads (the worker learns it
    from INIT).
    """

    __slots__ = ("_buffer", "_end", "_poller", "_sock", "_start", "_view", "max_frame_bytes")

    def __init__(
        self,
        sock: socket.socket,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        buffer_bytes: int = 64 * 1024,
    ) -> None:
        self._sock = sock
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray(max(buffer_bytes, HEADER_BYTES))
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)

    def read_frame(self, deadline: float | None) -> bytes | None:
        """The next frame's payload, or None at end of stream.

        ``deadline`` is a ``time.monotonic()`` instant; past it, TimeoutError.
        A timeout in the middle of a frame leaves the stream position
        undefined, so callers give up on the peer (the host kills the
        worker). None waits for ever (the worker waiting for its next call).
        A declared length over ``max_frame_bytes`` raises ProtocolError
        before the payload is read. End of stream in the middle
        of a frame is also None: the peer is gone either way, and the caller
        learns why from the process, not from the stream.
        """
        while True:
            available = self._end - self._start
            if available >= HEADER_BYTES:
                (length,) = HEADER.unpack_from(self._buffer, self._start)
                if length > self.max_frame_bytes:
                    raise ProtocolError(
                        f"frame of {length} bytes exceeds the limit of {self.max_frame_bytes} bytes"
                    )
                total = HEADER_BYTES + length
                if available >= total:
                    begin = self._start + HEADER_BYTES
                    payload = self._view[begin : begin + length].tobytes()
                    self._start += total
                    if self._start == self._end:
                        self._start = self._end = 0
                    return payload
                if total > len(self._buffer):
                    return self._read_large(length, deadline)
                if self._start + total > len(self._buffer):
                    self._compact()
            elif self._start and len(self._buffer) - self._start < HEADER_BYTES:
                self._compact()
            target = self._view if self._end == 0 else self._view[self._end :]
            received = self._receive(target, deadline)
            if received == 0:
                return None
            self._end += received

    def _compact(self) -> None:
        available = self._end - self._start
        self._buffer[:available] = self._buffer[self._start : self._end]
        self._start = 0
        self._end = available

    def _read_large(self, length: int, deadline: float | None) -> bytes | None:
        payload = bytearray(length)
        view = memoryview(payload)
        have = self._end - self._start - HEADER_BYTES
        begin = self._start + HEADER_BYTES
        view[:have] = self._view[begin : self._end]
        self._start = self._end = 0
        while have < length:
            received = self._receive(view[have:], deadline)
            if received == 0:
                return None
            have += received
        return bytes(payload)

    def _receive(self, target: memoryview, deadline: float | None) -> int:
        while True:
            if deadline is not None and not self._poller.poll(_poll_ms(deadline)):
                continue  # the next _poll_ms raises once the deadline has passed
            try:
                return self._sock.recv_into(target)
            except BlockingIOError:
                if deadline is None:
                    self._poller.poll()
