"""One fetch in flight: the hop being made, the answer received, the bytes read, the deadline.

:class:`_Hop` and :class:`_Answer` carry one checked request and its
response between the broker's steps; :class:`_Tally` counts the bytes
a refused response still cost, which :class:`_Meter` counts on the
connection; :class:`_Deadline` holds the fetch
to its total time (with :class:`caplet._watchdog.SocketWatchdog` shutting
the socket down at the deadline). Apart because both the broker's checks and its wire
exchange pass them around, and they depend on neither.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from caplet._broker._urls import ParsedUrl

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class _Hop:
    """One request of a fetch, as checked."""

    method: str
    url: ParsedUrl
    headers: tuple[tuple[str, str], ...]
    body: bytes
    number: int


@dataclass(frozen=True, slots=True)
class _Answer:
    """A received response: a redirect (``location`` set, body unread) or the final one."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    location: str | None


class _Tally:
    """Bytes one hop has sent and read so far (heads and bodies): a body refused
    half-way (too large, too slow) crossed the wire all the same, and the plugin's
    ``broker_bytes`` budget is charged what the decision reports (red team, issue 17).
    A request refused before it was sent sent nothing."""

    __slots__ = ("received", "sent")

    def __init__(self) -> None:
        self.received = 0
        self.sent = 0


#: ``tcpi_bytes_received`` of Linux's ``struct tcp_info`` (since 4.1): every byte of
#: payload the connection has received, counted by the kernel.
_BYTES_RECEIVED: Final = struct.Struct("=Q")
_BYTES_RECEIVED_AT: Final = 128


def wire_received(sock: object) -> int | None:
    """What ``sock`` (a TCP socket) has received from its peer, by the kernel's count.

    None where the kernel does not say (not a TCP socket, a kernel before 4.1).
    """
    getsockopt = getattr(sock, "getsockopt", None)
    if getsockopt is None:
        return None
    try:
        info = getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    except OSError:
        return None
    if not isinstance(info, bytes) or len(info) < _BYTES_RECEIVED_AT + _BYTES_RECEIVED.size:
        return None
    received: int = _BYTES_RECEIVED.unpack_from(info, _BYTES_RECEIVED_AT)[0]
    return received


class _Meter:
    """Counts every byte read from a hop's connection, and refuses past ``limit``.

    Attached to the streams httpcore's ``trace`` extension hands over when it
    connects and when TLS starts, so what is counted is everything the server
    sent: heads, bodies, chunk framing, and the interim ``1xx`` answers
    httpcore reads and drops before the final one, any number of them (red
    team round 19: 18 MB of ``103 Early Hints`` went through a 10 000-byte
    budget). Raising from inside the read stops the exchange at the limit
    rather than after it.

    Over TLS the plaintext is not what crossed: the ssl module reads the
    handshake (a certificate message the server may pad to OpenSSL's 100 KiB
    limit) before the TLS stream exists, and every record's framing, padding
    (TLS 1.3: up to 16 KiB of it around one byte) and post-handshake messages
    inside its reads, none of it plaintext (attack22: a 60 KB handshake for a
    two-byte answer went through a 10 000-byte budget). So a TLS connection
    is charged the kernel's count of the bytes its socket received, read once
    the handshake is done and after every read.
    """

    __slots__ = ("_over", "_wire", "limit", "received")

    def __init__(self, limit: int, over: Callable[[], BaseException]) -> None:
        self.limit = limit
        self.received = 0
        self._over = over
        self._wire: object | None = None

    def attach(self, stream: Any, *, tls: bool = False) -> None:
        """Count what ``stream`` (an httpcore network stream) reads from now on.

        ``tls``: the stream is the TLS one, its handshake just done; from now on
        the socket's received bytes are the count (where the kernel gives them).
        """
        if tls:
            sock = stream.get_extra_info("socket")
            if wire_received(sock) is not None:
                self._wire = sock
                # Charged now, refused at the request's first write: an exception
                # raised from here (httpcore's trace) would leave the stream open.
                self._count(0, check=False)
                write = stream.write

                def checked(buffer: bytes, timeout: float | None = None) -> None:
                    self._count(0)
                    write(buffer, timeout)

                stream.write = checked
        read = stream.read

        def counted(max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = read(max_bytes, timeout)
            self._count(len(data))
            return data

        # An instance attribute shadows the method for this stream alone.
        stream.read = counted

    def _count(self, plaintext: int, *, check: bool = True) -> None:
        wire = None if self._wire is None else wire_received(self._wire)
        if wire is None:
            self.received += plaintext
        else:
            # The kernel's count holds the plaintext too (it is never less).
            self.received = max(self.received, wire)
        if check and self.received > self.limit:
            raise self._over()


class _Deadline:
    """The end of a fetch on the monotonic clock (real time: sockets wait on it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(self._end - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0
