"""What the MCP tests share: the ``caplet mcp`` command line of a test's workspace."""

from __future__ import annotations

import sys
from pathlib import Path


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
