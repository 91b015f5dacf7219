"""stdin read in bounded lines, for the MCP stdio transport.

The SDK's stdio server reads each message as one line of any length; a
client (or whatever writes to the server's stdin) sending a line of
gigabytes would make it hold all of it. This reader hands the SDK at most
``limit`` bytes per line: a longer line is read to its end and dropped, a
note goes to stderr, and the server goes on with the next line (the SDK
skips a line that is not a JSON-RPC message the same way).

The SDK skips a line it cannot read as a JSON-RPC message without a word:
JSON cut short, a string holding a lone surrogate (``"\\ud800"``, which
is no Unicode character), bytes that are not UTF-8. A client then waited
for an answer forever (attack20). :class:`AnsweringReader` answers each
such line with a JSON-RPC error, its id when the line's id can be read,
and the server goes on with the next line. Bytes that are not UTF-8 are no
longer replaced (``\\xff`` became U+FFFD in a tool's argument, which
the client never sent): the line is refused the same way.

A line over the limit is answered too (mend19: the client waited forever
for it as for the lines above): once, JSON-RPC's invalid request with a
null id. Its id is in the part not kept, and one picked out of the kept
prefix could be a nested key's, answering another request (attack21's
lesson). Whether it was a request at all cannot be known without keeping
it either, so an oversized notification or response is answered as well:
a null id resolves no request of the client's, so the cost is one error
the client logs, against a request that would never be answered. The line
itself is still read in chunks and thrown away, never held whole.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, Self

import anyio
import anyio.to_thread
from mcp import types
from mcp.shared.message import SessionMessage

from caplet._mcp._wrapped import WrappedStream

__all__ = ["AnsweringReader", "BoundedLines", "Oversized", "oversized_answer", "unreadable_answer"]

_CHUNK: Final = 64 * 1024

#: What the SDK is handed in place of a line over the limit: a line it cannot read, so
#: it makes an exception of it in its turn, which :class:`AnsweringReader` answers.
_IN_PLACE: Final = "\n"


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line over the limit, read to its end and not kept."""

    limit: int


class BoundedLines:
    """An async iterator of stdin's lines as text, each at most ``limit`` bytes."""

    def __init__(self, source: BinaryIO, limit: int) -> None:
        self._source = source
        self._limit = limit
        self.dropped = 0
        #: The lines handed to the SDK and not yet matched to what it made of them.
        self._handed: deque[str | Oversized] = deque()

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self._read, abandon_on_cancel=True)
            if line is None:
                raise StopAsyncIteration
            if line:
                self._handed.append(line)
                return line
            # Dropped: the SDK is handed a blank line in its place, so the item it makes
            # of it is matched to this record and answered (mend19).
            self._handed.append(Oversized(self._limit))
            return _IN_PLACE

    def take(self) -> str | Oversized:
        """The oldest line handed on: the SDK makes one message (or one exception) of
        each line, in order, so the item read next is made of this line."""
        return self._handed.popleft()

    def _read(self) -> str | None:
        """A line; None at the end of input; "" for a line that was dropped (a line read
        is never empty: it holds at least its newline)."""
        data = self._source.readline(self._limit + 1)
        if not data:
            return None
        if len(data) <= self._limit or data.endswith(b"\n"):
            # Not replaced: the SDK cannot read a lone surrogate, and the line is
            # answered as not UTF-8 (AnsweringReader) instead of passing a U+FFFD on.
            return data.decode("utf-8", "surrogateescape")
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


#: JSON-RPC 2.0's codes: the line is not JSON; it is JSON but not a valid message.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600


def oversized_answer(line: Oversized) -> types.JSONRPCError:
    """The one answer to a line over the limit: invalid request, a null id."""
    return _error(
        None,
        INVALID_REQUEST,
        f"caplet mcp: the message is over {line.limit} bytes (Policy.mcp.max_argument_bytes "
        "plus room for the envelope) and was not read; send smaller arguments or raise "
        "mcp.max_argument_bytes",
    )


def unreadable_answer(line: str) -> types.JSONRPCError | None:
    """The error answer to a line the SDK could not read; None for a notification or a
    response, which JSON-RPC never answers, and for a blank line.

    The id is the line's own when it is read as JSON (Python's reader takes a
    lone surrogate's escape), else null, as JSON-RPC 2.0 says.
    """
    if not line.strip():
        # A blank line carries no message to answer: clients and proxies send them as
        # keep-alives or between messages, and an error with a null id for each was
        # noise a client could only log (attack21 noticed it).
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: "[[[..." nested past the stack
        return _error(
            None,
            PARSE_ERROR,
            _not_utf8(line)
            or "caplet mcp: the line is not JSON; send one JSON-RPC 2.0 message a line, as UTF-8",
        )
    if isinstance(message, dict) and "method" in message and "id" not in message:
        return None  # a notification is never answered, even to say it was wrong
    if (
        isinstance(message, dict)
        and "method" not in message
        and message.keys()
        & {
            "result",
            "error",
        }
    ):
        # Nor a response: its id is one of the server's requests, and an error with it
        # resolved the client's own request of that id (attack21).
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        request_id = None
    elif isinstance(request_id, str) and _lone(request_id):
        request_id = None  # not an id that can be written back
    reason = _not_utf8(line) or (
        "caplet mcp: the message holds a lone surrogate escape (such as \\ud800), which is "
        "no Unicode character; send each character outside the BMP as its escaped pair"
        if _lone(json.dumps(message, ensure_ascii=False))
        else "caplet mcp: not a JSON-RPC 2.0 message: expected an object with "
        '"jsonrpc": "2.0" and a method (a request, with an int or string id) or a result'
    )
    return _error(request_id, INVALID_REQUEST, reason)


def _lone(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (escaped bytes that were not UTF-8 too)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _not_utf8(line: str) -> str:
    """The reason for a line that was not UTF-8 (its bytes decoded with surrogateescape)."""
    if not any("\udc80" <= char <= "\udcff" for char in line):
        return ""
    return "caplet mcp: the line is not UTF-8; send each message as UTF-8 JSON"


def _error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


class AnsweringReader(WrappedStream):
    """The SDK's read stream: a line it could not read is answered, not skipped.

    Each item the SDK's stdin reader makes is matched to its line
    (:meth:`BoundedLines.take`); an exception (the line was not a message) is
    answered with :func:`unreadable_answer` on the write stream and not
    passed on, so the dispatcher reads the next message.
    """

    def __init__(self, inner: Any, lines: BoundedLines, write: Any) -> None:
        super().__init__(inner)
        self._lines = lines
        self._write = write

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's context off the stream it iterates.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            line = self._lines.take()
            if not isinstance(item, Exception):
                return item
            answer = (
                oversized_answer(line) if isinstance(line, Oversized) else unreadable_answer(line)
            )
            if answer is not None:
                await self._write.send(SessionMessage(answer))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
