"""What ``PluginHost.exec`` returns: one snippet's output, value and error."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["GuestResult", "GuestStatus"]


class GuestStatus(enum.Enum):
    """How a snippet ended.

    ``OK``: it ran to the end. ``ERROR``: it raised (``error`` is its own
    traceback). ``TIMEOUT``: it ran past its deadline and its sandbox was
    killed. ``CRASHED``: its sandbox died or broke the protocol before it
    finished (``os._exit``, a signal, a forged reply) and was killed. In
    the last two the snippet's output is lost: it lived in the dead worker.
    """

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


@dataclass(frozen=True, slots=True)
class GuestResult:
    """The result of one guest snippet (``PluginHost.exec``).

    ``stdout`` and ``stderr`` are what it printed (the first
    ``Policy.guest.max_output_kb`` KiB of each; ``truncated`` says whether
    more was dropped). ``value_repr`` is the ``repr()`` of the value of its final
    expression, as the interactive interpreter would show it, and None when
    the snippet did not end with an expression or its value was None;
    ``value`` is that value itself when it can cross the boundary
    (JSON-like values, bytes; tuples arrive as lists) and is not too
    large, else None. ``error`` is the guest's traceback (frames of the
    guest's own code only) or why its sandbox was killed, and
    ``error_type`` the exception's name (``"ZeroDivisionError"``,
    ``"HostCallError"``; ``"TimeoutError"`` and ``"SandboxCrashed"`` for
    the last two statuses).
    """

    status: GuestStatus
    stdout: str = ""
    stderr: str = ""
    value: object = None
    value_repr: str | None = None
    error: str | None = None
    error_type: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the snippet ran to the end without raising."""
        return self.status is GuestStatus.OK

    def __bool__(self) -> bool:
        return self.ok
