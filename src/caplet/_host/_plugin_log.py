"""``ctx.log`` in the host: plugin log lines, prefixed, cut, escaped and rate-limited.

A plugin writes to the host application's log through the ``caplet.plugins``
logger, so every line is the host's to format, not the plugin's:

- each line starts with ``[<plugin>]``, so a reader always knows which
  plugin wrote it;
- control and other non-printable characters are escaped (``\\n`` becomes
  the two characters backslash and n): a plugin must not be able to end its
  line and forge one that looks like the host's (CWE-117, log injection);
- a line is cut to ``ContextLimits.log_max_chars``;
- each plugin may write ``ContextLimits.log_lines_per_minute`` lines per
  sliding minute; the rest are dropped and counted, and the next line that
  passes is preceded by one saying how many were dropped. Logging never
  fails the plugin: a log call that raised would turn a noisy plugin into a
  broken one.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from caplet._errors import ContextArgumentError

if TYPE_CHECKING:
    # Only a type here: the CLI imports LOGGER_NAME, and the limits' pydantic
    # model would cost every `caplet` start-up (issue 16).
    from caplet._host._context_limits import ContextLimits

__all__ = ["LOGGER_NAME", "PluginLog"]

#: The logger plugin lines go to (a child per plugin: ``caplet.plugins.<name>``).
LOGGER_NAME: Final = "caplet.plugins"

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_WINDOW_S: Final = 60.0


def _escape(text: str) -> str:
    """Every non-printable character as its Python escape (spaces stay)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


class PluginLog:
    """Writes ``ctx.log`` lines for every plugin of one host (rates kept per plugin).

    ``clock`` is monotonic seconds (injectable: tests never sleep).
    """

    def __init__(self, limits: ContextLimits, clock: Callable[[], float]) -> None:
        self._limits = limits
        self._clock = clock
        self._recent: dict[str, collections.deque[float]] = {}
        self._dropped: dict[str, int] = {}
        #: Guards the counts: a plugin can log from two workers at once (the
        #: old one finishing a call while enable starts the new one), and
        #: check-then-append without it could let both past the limit.
        self._lock = threading.Lock()

    def write(self, plugin: str, level: object, message: object) -> bool:
        """Log one line for ``plugin``; False when the rate limit dropped it."""
        number = _LEVELS.get(level) if isinstance(level, str) else None
        if number is None or not isinstance(message, str):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': ctx.log takes a level "
                f"({', '.join(_LEVELS)}) and a str message",
                plugin=plugin,
            )
        limit = self._limits.log_lines_per_minute
        with self._lock:
            now = self._clock()
            recent = self._recent.setdefault(plugin, collections.deque())
            while recent and recent[0] <= now - _WINDOW_S:
                recent.popleft()
            if len(recent) >= limit:
                self._dropped[plugin] = self._dropped.get(plugin, 0) + 1
                return False
            recent.append(now)
            dropped = self._dropped.pop(plugin, 0)
        logger = logging.getLogger(f"{LOGGER_NAME}.{plugin}")
        if dropped:
            logger.warning(
                "[%s] %d log line(s) dropped: over the limit of %d lines per minute",
                plugin,
                dropped,
                limit,
            )
        cap = self._limits.log_max_chars
        if len(message) > cap:
            message = f"{message[:cap]}... ({len(message) - cap} more characters)"
        logger.log(number, "[%s] %s", plugin, _escape(message))
        return True
