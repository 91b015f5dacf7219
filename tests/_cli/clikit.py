"""Running ``caplet`` as a user does: a separate process, stdin not a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def caplet(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m caplet ARGS`` in ``cwd`` (stdin from /dev/null unless given)."""
    return subprocess.run(
        [sys.executable, "-m", "caplet", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "250", **(env or {})},
        cwd=cwd,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        check=False,
        timeout=timeout,
    )


def document(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON document a ``--json`` run printed on stdout."""
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed
