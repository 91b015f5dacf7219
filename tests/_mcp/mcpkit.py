"""What the MCP tests share: the ``caplet mcp`` command line of a test's workspace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final


def mcp_command(workspace: Path, *extra: str) -> list[str]:
    """``python -m caplet mcp`` on the workspace's plugins and state, ``notes`` enabled."""
    return [
        sys.executable,
        "-m",
        "caplet",
        "mcp",
        "--plugins-dir",
        str(workspace / "plugins"),
        "--state-dir",
        str(workspace / "state"),
        "--enable",
        "notes",
        "--yes",
        *extra,
    ]


#: The ``initialize`` request a raw client (no SDK) sends first, id 0.
INITIALIZE: Final[dict[str, Any]] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
