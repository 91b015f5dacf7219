"""One fetch in flight: the hop being made, the answer received, the bytes read, the deadline.

:class:`_Hop` and :class:`_Answer` carry one checked request and its
response between the broker's steps; :class:`_Tally` counts the body bytes
a refused response still cost; :class:`_Deadline` and :class:`_Watchdog`
hold the fetch to its total time, the watchdog shutting the socket down
at the deadline. Apart because both the broker's checks and its wire
exchange pass them around, and they depend on neither.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

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
    """Body bytes one hop has read so far: a body refused half-way (too large, too slow)
    crossed the wire all the same, and the plugin's ``broker_bytes`` budget is charged
    what the decision reports (red team, issue 17)."""

    __slots__ = ("received",)

    def __init__(self) -> None:
        self.received = 0


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


class _Watchdog:
    """Shuts the current socket down when the fetch's time is up.

    httpx's timeouts bound each socket operation, not the whole exchange: a
    server sending one header byte just before each read timeout could hold
    the fetch for as long as it likes. ``shutdown()`` from this timer thread
    makes the blocked ``recv()`` return at once (the standard way to wake a
    socket operation in another thread); the broker then reports a timeout.
    """

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.fired and sock is not None:
                _shutdown(sock)

    def cancel(self) -> None:
        self._timer.cancel()
        self._timer.join()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed: nothing left to wake
        pass
