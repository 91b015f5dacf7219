"""One fetch in flight: the hop being made, the answer received, the bytes read, the deadline.

:class:`_Hop` and :class:`_Answer` carry one checked request and its
response between the broker's steps; :class:`_Tally` counts the body bytes
a refused response still cost; :class:`_Deadline` holds the fetch
to its total time (with :class:`caplet._watchdog.SocketWatchdog` shutting
the socket down at the deadline). Apart because both the broker's checks and its wire
exchange pass them around, and they depend on neither.
"""

from __future__ import annotations

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
    """Bytes one hop has sent and read so far (heads and bodies): a body refused
    half-way (too large, too slow) crossed the wire all the same, and the plugin's
    ``broker_bytes`` budget is charged what the decision reports (red team, issue 17).
    A request refused before it was sent sent nothing."""

    __slots__ = ("received", "sent")

    def __init__(self) -> None:
        self.received = 0
        self.sent = 0


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
