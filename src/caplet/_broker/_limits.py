"""Per-plugin request rate and data budget, over sliding windows on an injectable clock.

Sliding windows (a log of recent events, not fixed buckets) so a plugin
cannot double its rate by straddling a bucket boundary. The clock is a
parameter so tests step time instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from caplet._broker._policy import NetworkPolicy
from caplet._errors import RateLimitError

__all__ = ["Clock", "RateLimiter"]

Clock = Callable[[], float]

_MINUTE = 60.0
_HOUR = 3600.0


@dataclass(slots=True)
class _Usage:
    """One plugin's recent requests (times) and transfers (time, bytes)."""

    requests: deque[float] = field(default_factory=deque)
    transfers: deque[tuple[float, int]] = field(default_factory=deque)
    bytes_in_window: int = 0


class RateLimiter:
    """Admits requests and accounts bytes per plugin; thread-safe.

    :meth:`admit` is called before each request is sent (each redirect hop
    is one); :meth:`spend` after bytes went out or came in;
    :meth:`budget_left` bounds how much of a response may still be read.
    """

    def __init__(self, policy: NetworkPolicy, clock: Clock = time.monotonic) -> None:
        self._policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._usage: dict[str, _Usage] = {}

    def admit(self, plugin: str) -> None:
        """Record one request, or raise :class:`RateLimitError` if it would exceed a rate."""
        with self._lock:
            now = self._clock()
            usage = self._expire(plugin, now)
            minute = sum(1 for at in usage.requests if at > now - _MINUTE)
            for count, limit, window, setting in (
                (minute, self._policy.requests_per_minute, "minute", "requests_per_minute"),
                (len(usage.requests), self._policy.requests_per_hour, "hour", "requests_per_hour"),
            ):
                if count >= limit:
                    raise RateLimitError(
                        f"rate limited: plugin {plugin!r} made {count} requests in the last "
                        f"{window} (limit {limit} per {window}); retry later, or raise "
                        f"NetworkPolicy.{setting}",
                        plugin=plugin,
                    )
            if self._policy.bytes_per_hour - usage.bytes_in_window <= 0:
                raise RateLimitError(
                    f"data budget exhausted: plugin {plugin!r} transferred "
                    f"{usage.bytes_in_window} bytes in the last hour (budget "
                    f"{self._policy.bytes_per_hour}); retry later, or raise "
                    f"NetworkPolicy.bytes_per_hour",
                    plugin=plugin,
                    category="data budget exhausted",
                )
            usage.requests.append(now)

    def spend(self, plugin: str, nbytes: int) -> None:
        """Account ``nbytes`` of request or response body against the data budget."""
        if nbytes <= 0:
            return
        with self._lock:
            now = self._clock()
            usage = self._expire(plugin, now)
            usage.transfers.append((now, nbytes))
            usage.bytes_in_window += nbytes

    def budget_left(self, plugin: str) -> int:
        """Bytes the plugin may still transfer in the current window (0 or more)."""
        with self._lock:
            usage = self._expire(plugin, self._clock())
            return max(self._policy.bytes_per_hour - usage.bytes_in_window, 0)

    def _expire(self, plugin: str, now: float) -> _Usage:
        usage = self._usage.setdefault(plugin, _Usage())
        while usage.requests and usage.requests[0] <= now - _HOUR:
            usage.requests.popleft()
        while usage.transfers and usage.transfers[0][0] <= now - _HOUR:
            usage.bytes_in_window -= usage.transfers.popleft()[1]
        return usage
