"""Plugin text bound for an agent's context: visible characters only, and bounded.

A tool's description, a plugin's hints and a call's error message are
written by the plugin's author (or raised by its code) and reach the
model's context. caplet cannot stop a description from *saying* "ignore
your instructions" (docs/agents.md says so, and says the description is
labelled as the plugin's), but it makes sure that what the model reads is
what a person reviewing it sees: control, format and bidirectional
characters are removed (:func:`caplet._display.stripped_text`), and the
length is bounded so one plugin cannot fill the context.
"""

from __future__ import annotations

from typing import Final

from caplet._display import stripped_text

__all__ = ["agent_line", "agent_text"]

_ELLIPSIS: Final = " [...]"


def agent_text(text: str, limit: int) -> str:
    """``text`` without invisible characters, at most ``limit`` characters (cut marked)."""
    clean = stripped_text(text.replace("\r\n", "\n").replace("\r", "\n")).strip()
    if len(clean) <= limit:
        return clean
    return clean[: max(limit - len(_ELLIPSIS), 0)].rstrip() + _ELLIPSIS


def agent_line(text: str, limit: int) -> str:
    """:func:`agent_text` on one line (newlines and tabs become spaces)."""
    return agent_text(" ".join(text.split()), limit)
