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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


class _Meter:
    """Counts every byte read from a hop's connection, and refuses past ``limit``.

    Attached to the streams httpcore's ``trace`` extension hands over when it
    connects (and when TLS starts: the plaintext is counted), so what is counted
    is everything the server sent: heads, bodies, chunk framing, and the
    interim ``1xx`` answers httpcore reads and drops before the final one,
    any number of them (red team round 19: 18 MB of ``103 Early Hints`` went
    through a 10 000-byte budget). Raising from inside the read stops the
    exchange at the limit rather than after it.
    """

    __slots__ = ("_over", "limit", "received")

    def __init__(self, limit: int, over: Callable[[], BaseException]) -> None:
        self.limit = limit
        self.received = 0
        self._over = over

    def attach(self, stream: Any) -> None:
        """Count what ``stream`` (an httpcore network stream) reads from now on."""
        read = stream.read

        def counted(max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = read(max_bytes, timeout)
            self.received += len(data)
            if self.received > self.limit:
                raise self._over()
            return data

        # An instance attribute shadows the method for this stream alone.
        stream.read = counted


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
