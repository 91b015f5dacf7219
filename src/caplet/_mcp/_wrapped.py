"""One of the MCP SDK's anyio streams wrapped: what every wrapper repeats.

Closing and ``async with`` go to the inner stream; a wrapper overrides what it
changes (``receive``/``send``). Shared by the in-flight bounds (:mod:`caplet._mcp._flow`)
and the reader that answers unreadable lines (:mod:`caplet._mcp._stdio`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

__all__ = ["WrappedStream"]


class WrappedStream:
    """An SDK stream, wrapped: closing and the ``async with`` of the inner one."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
