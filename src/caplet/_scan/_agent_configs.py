"""AI agents' MCP configuration written to start a command that fetches and runs code.

An MCP client (Claude Desktop, Cursor, Windsurf, VS Code, Claude Code) starts every server
its configuration lists, with the ``command`` and ``args`` written there, each time the
agent starts: a server entry is persistence, like a shell's start-up file. blind17's
sample (b17-ot-mcp-config-inject; Invariant Labs, Koi Security and Socket 2025 on malicious
MCP servers) added to every such file it found a server that runs ``python -c`` with a
download piped into exec. The entry is a dict the code writes with ``json.dumps`` of the
file's merged content, so what is written is known only at run time: the check is the
write of such a file by code whose literals hold a command that downloads and runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["AGENT_CONFIG_TOKENS", "agent_config"]

#: The MCP clients' configuration files, by name (a path's last piece, or a whole path).
_AGENT_CONFIG: Final = re.compile(
    r"(?i)(?:^|[/\\])(?:claude_desktop_config\.json|mcp_config\.json|mcp\.json|\.claude\.json)$"
)


def agent_config(paths: Iterable[str]) -> str | None:
    """The first of ``paths`` (a written file's path, or the literals it is built from)
    that names an MCP client's configuration, or ``None``."""
    return next((p for p in paths if _AGENT_CONFIG.search(p)), None)


#: The files as code spells them, for the prefilter (a solo pattern).
AGENT_CONFIG_TOKENS: Final = (
    r"\b(?:claude_desktop_config|mcp_config)\.json\b|['\"/\\]mcp\.json\b|\.claude\.json\b"
)
