"""stdin read in bounded lines, for the MCP stdio transport.

The SDK's stdio server reads each message as one line of any length; a
client (or whatever writes to the server's stdin) sending a line of
gigabytes would make it hold all of it. This reader hands the SDK at most
``limit`` bytes per line: a longer line is read to its end and dropped, a
note goes to stderr, and the server goes on with the next line (the SDK
skips a line that is not a JSON-RPC message the same way).
"""

from __future__ import annotations

import sys
from typing import BinaryIO, Final

import anyio.to_thread

__all__ = ["BoundedLines"]

_CHUNK: Final = 64 * 1024


class BoundedLines:
    """An async iterator of stdin's lines as text, each at most ``limit`` bytes."""

    def __init__(self, source: BinaryIO, limit: int) -> None:
        self._source = source
        self._limit = limit
        self.dropped = 0

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self._read, abandon_on_cancel=True)
            if line is None:
                raise StopAsyncIteration
            if line:
                return line

    def _read(self) -> str | None:
        """A line; None at the end of input; "" for a line that was dropped (a line read
        is never empty: it holds at least its newline)."""
        data = self._source.readline(self._limit + 1)
        if not data:
            return None
        if len(data) <= self._limit or data.endswith(b"\n"):
            return data.decode("utf-8", "replace")
        size = len(data)
        while not data.endswith(b"\n"):
            data = self._source.readline(_CHUNK)
            if not data:
                break
            size += len(data)
        self.dropped += 1
        sys.stderr.write(
            f"caplet mcp: dropped a message of {size} bytes (over {self._limit}, "
            "Policy.mcp.max_argument_bytes plus room for the envelope)\n"
        )
        sys.stderr.flush()
        return ""
