"""Numbers from outside (an agent's JSON, a caller's argument, an environment variable).

JSON and Python integers have no bound, and two of the standard library's
tools fail on large ones: :func:`math.isfinite` converts an int to a float
first and raises ``OverflowError`` past about 1.8e308, and ``repr`` of an int
of more than 4,300 digits raises ``ValueError`` (CPython's limit on
int-to-text conversion). A check that meant to refuse such a value raised
instead (attack14: ``timeout_s`` of ``10**400`` through ``caplet mcp``'s
``exec``, a ``timeout`` of ``host.exec``, ``CAPLET_LLM_MAX_PROMPT_CHARS``).
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["LATEST_INSTANT", "finite_number", "instant", "shown_number"]

#: An int with more bits than this is described by its length, not written out.
_SHOWN_BITS: Final = 128


def finite_number(value: object) -> bool:
    """True for an int (any size) or a finite float; never for a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


#: The last second of the year 9999 UTC: the latest moment ``datetime`` (and so the
#: log's and the approval screen's dates) can show. A stored time past it, negative, or
#: not finite was not written by caplet's clock, and showing it raised OverflowError
#: (``time.localtime(1e308)``: "timestamp out of range for platform time_t").
LATEST_INSTANT: Final = 253_402_300_799


def instant(value: object) -> float | None:
    """``value`` as a moment caplet recorded (seconds since the epoch, 0 through
    :data:`LATEST_INSTANT`), or ``None`` when it cannot be one: the one rule for every
    time read back from state."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # an int of any size compares exactly, and NaN compares false: no float() before
    if not 0 <= value <= LATEST_INSTANT:
        return None
    return float(value)


def shown_number(value: object) -> str:
    """``repr(value)`` for a message, an integer too long to read described by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _SHOWN_BITS:
        digits = math.floor(value.bit_length() * math.log10(2)) + 1
        return f"an integer of {digits} digits"
    return repr(value)
