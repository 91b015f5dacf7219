"""``Policy.mcp``: what ``caplet mcp`` offers an agent, and how much an agent may send.

The MCP server (:mod:`caplet._mcp`) turns each enabled plugin's declared
functions into tools. This table is the administrator's say over it, in
the policy file (``[mcp]``) as well as on the command line (``--allow``,
``--deny``, ``--exec`` add to it):

* ``allow`` / ``deny``: globs (``fnmatch``, case-sensitive) over tool names
  and over ``PLUGIN/MODULE.FUNCTION``; a tool is offered when it matches an
  ``allow`` glob and no ``deny`` glob. **One allow glob, one plugin**
  (decide14): a tool name is the plugin's module and function, which any
  other plugin may declare too (``fsread_*`` was matched by another
  plugin's module ``fsread_x``, ``fsread_read_file*`` by both digest names
  of a contested ``fsread.read_file``), so an allow glob that matches the
  tools of more than one plugin offers none of them, with a warning naming
  the glob, the plugins and the fix (``PLUGIN/*``); a glob of ``*`` alone
  (the default) offers every tool, as written. A ``deny`` glob is matched against
  the unqualified ``MODULE_FUNCTION`` too: a tool whose name gained a
  digest (a name two plugins want, a long one) is still hidden by the glob
  that hid it before (red team, issue 17: a second plugin declaring the
  same function must not un-hide the first one's). A tool that is not offered is
  invisible: not listed, and calling it is the same error as calling a
  tool that does not exist. Guest code
  run through the ``exec`` tool is held to the same rule for its
  ``host.<module>`` calls, or ``exec`` would be a way around ``deny``.
* ``exec``: offer the ``exec`` tool (guest code in a zero-capability
  sandbox whose only way out is the offered tools). Off by default: an
  agent running code is a decision, and it loosens the default.
* ``max_argument_bytes`` / ``max_argument_depth``: the arguments of one
  tool call, as JSON, are refused beyond these (an agent's arguments are
  model output, and a model can be talked into anything).
* ``max_description_chars``: a tool's description (the plugin's text,
  which reaches the agent's context) is cut to this length.
* ``max_in_flight``: requests of one session read and not yet answered.
  At the bound the stdio server reads no further (the client's own pipe
  fills), and the HTTP server refuses the session's next request: a
  client that never reads its answers cannot make the server hold more
  (attack14; :mod:`caplet._mcp._flow`).
* ``max_in_flight_total``: over HTTP, the requests of every session
  together (a client opens as many sessions as it likes); past it a
  request is refused like one past its session's bound.
"""

from __future__ import annotations

import fnmatch
from typing import Annotated

from pydantic import Field, Strict
from pydantic.dataclasses import dataclass

from caplet._errors import PolicyError
from caplet._validated import MODEL_CONFIG, Bytes, Flag, validated

__all__ = ["McpPolicy", "every_tool"]

#: A tool-name glob: printable ASCII, short.
Glob = Annotated[str, Strict(), Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")]


@validated(PolicyError, "mcp")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class McpPolicy:
    """What ``caplet mcp`` offers and accepts (module docstring)."""

    allow: tuple[Glob, ...] = ("*",)
    deny: tuple[Glob, ...] = ()
    exec: Flag = False
    max_argument_bytes: Bytes = 1024 * 1024
    max_argument_depth: Annotated[int, Strict(), Field(ge=1, le=64)] = 32
    max_description_chars: Annotated[int, Strict(), Field(ge=64, le=8192)] = 1024
    max_in_flight: Annotated[int, Strict(), Field(ge=1, le=1024)] = 32
    max_in_flight_total: Annotated[int, Strict(), Field(ge=1, le=65536)] = 256

    def offers(self, *names: str) -> bool:
        """True when one of ``names`` matches an ``allow`` glob and none a ``deny`` glob.

        A tool is known by two names: its tool name (``fsread_read_file``) and
        ``PLUGIN/MODULE.FUNCTION`` (``fs-read/fsread.read_file``), so a glob can
        name a plugin's every tool (``fs-write/*``) whatever its tools are called.
        """

        return _matches(names, self.allow) and not self.hides(*names)

    def hides(self, *names: str) -> bool:
        """True when one of ``names`` matches a ``deny`` glob."""
        return _matches(names, self.deny)

    def allowing(self, *names: str) -> tuple[str, ...]:
        """The ``allow`` globs one of ``names`` matches (empty when it is hidden by ``deny``)."""
        if self.hides(*names):
            return ()
        return tuple(g for g in self.allow if any(fnmatch.fnmatchcase(n, g) for n in names))


def every_tool(glob: str) -> bool:
    """True for a glob that says "every tool" as written (``*``, ``*/*``): it may span plugins."""
    return set(glob) <= {"*", "/"}


def _matches(names: tuple[str, ...], globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(n, g) for n in names for g in globs)
