"""Requests in flight per session: ``Policy.mcp.max_in_flight``.

The SDK's dispatcher starts a task for every request it reads and never
waits before reading the next one; an answer it cannot write waits in that
task. A client that sends requests and never reads its answers therefore
made the server hold every request, its plugin call and its answer (red
team, attack14: 2,000 calls of 60 KB took the server from 87 MB to 473 MB).

* stdio (:class:`GatedReader`, :class:`CountedWriter` around the SDK's
  stdio streams): a request counts from the moment it is read until its
  answer is handed to the stdout writer, or until it settles unanswered
  (cancelled: the dispatcher's ``on_request_unanswered`` hook, which the
  reader attaches to each request). While ``max_in_flight`` count, the
  reader reads nothing more, so what the client writes waits in its own
  pipe (backpressure) and the answers waiting to be written are at most
  the bound (plus the one the writer holds). A client that reads sees no
  change; its messages, ``notifications/cancelled`` included, are read
  in order, so one sent behind more than the bound waits for a place too.
* streamable HTTP (:class:`SessionBound`, a server middleware): requests
  are separate HTTP requests, and a client that hangs up leaves its
  request running, so holding them back would hold them in the server all
  the same. A request past the bound of its session (the validated
  ``Mcp-Session-Id``; requests of no session share one bound) is refused
  at once with an error naming the policy field. Answers there wait in the
  request's own connection, bounded by the connection limit. Sessions cost a
  client one ``initialize`` each (the SDK keeps up to 10,000), so a bound per
  session alone let one client hold sessions x bound requests: the requests of
  every session together are bounded too (``max_in_flight_total``), refused
  the same way past it.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final, Self

import anyio
from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from caplet._mcp._wrapped import WrappedStream

__all__ = ["BUSY", "CountedWriter", "GatedReader", "InFlight", "SessionBound"]

#: The JSON-RPC error code of a request refused over the bound (the server-error range).
BUSY: Final = -32000

RequestId = int | str
Item = SessionMessage | Exception


class InFlight:
    """The requests of one session read and not yet settled (answered or cancelled)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.count = 0
        self._by_id: dict[RequestId, int] = {}
        self._room = anyio.Event()
        self._said = False

    def opened(self, request_id: RequestId) -> None:
        self.count += 1
        self._by_id[request_id] = self._by_id.get(request_id, 0) + 1

    def settled(self, request_id: RequestId) -> None:
        """One request of this id settled; an id never opened (or settled already) is
        ignored, so an answer the transport did not count cannot free a place."""
        left = self._by_id.get(request_id, 0)
        if left <= 0:
            return
        if left == 1:
            del self._by_id[request_id]
        else:
            self._by_id[request_id] = left - 1
        self.count -= 1
        self._room.set()

    @property
    def full(self) -> bool:
        return self.count >= self.bound

    async def wait_for_room(self) -> None:
        while self.full:
            if not self._said:
                # Once per session: a client that pipelines past the bound on purpose
                # would otherwise fill the log, and once is enough to explain a slow client.
                self._said = True
                sys.stderr.write(
                    f"caplet mcp: reading paused: {self.count} requests unanswered "
                    f"(Policy.mcp.max_in_flight = {self.bound}); the client's next messages "
                    "wait in its pipe until it reads answers (said once)\n"
                )
                sys.stderr.flush()
            self._room = anyio.Event()
            await self._room.wait()


class _Wrapped(WrappedStream):
    """One of the SDK's streams, wrapped, with the session's in-flight count."""

    def __init__(self, inner: Any, flow: InFlight) -> None:
        super().__init__(inner)
        self._flow = flow


class GatedReader(_Wrapped):
    """The SDK's read stream, read only while the session has room (module docstring)."""

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's context off the stream it iterates.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        await self._flow.wait_for_room()
        item: Item = await self._inner.receive()
        if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
            request_id = item.message.id
            self._flow.opened(request_id)
            item = SessionMessage(
                item.message, _with_unanswered(item.metadata, request_id, self._flow)
            )
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _with_unanswered(metadata: Any, request_id: RequestId, flow: InFlight) -> ServerMessageMetadata:
    """The request's metadata with a hook that settles it when it ends unanswered (the
    dispatcher calls it for a cancelled request, never for one it answers)."""
    base = metadata if isinstance(metadata, ServerMessageMetadata) else ServerMessageMetadata()
    chained: Callable[[], Awaitable[None]] | None = base.on_request_unanswered

    async def unanswered() -> None:
        flow.settled(request_id)
        if chained is not None:
            await chained()

    return replace(base, on_request_unanswered=unanswered)


class CountedWriter(_Wrapped):
    """The SDK's write stream; an answer handed on settles its request."""

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        answers = (
            message.id if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) else None
        )
        try:
            await self._inner.send(item)
        finally:
            # Handed to the stdout writer (or the stream is gone): this answer no longer
            # waits in the server; the next one waits in its own request's place.
            if answers is not None:
                self._flow.settled(answers)


class SessionBound:
    """Server middleware for streamable HTTP: at most ``bound`` requests of one session
    and ``total`` of all sessions run at once; one more is refused at once (module
    docstring)."""

    def __init__(self, bound: int, total: int) -> None:
        self.bound = bound
        #: The requests of every session together (their ids are per session, so only
        #: the count is kept: see :meth:`__call__`).
        self.total = total
        self.count = 0
        self._flows: dict[str | None, InFlight] = {}

    def flow(self, ctx: ServerRequestContext[Any, Any]) -> InFlight:
        key = _session_of(ctx)
        flow = self._flows.get(key)
        if flow is None:
            flow = self._flows[key] = InFlight(self.bound)
        return flow

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        request_id = ctx.request_id
        if request_id is None:  # a notification: nothing waits on it
            return await call_next(ctx)
        key = _session_of(ctx)
        flow = self.flow(ctx)
        if flow.full:
            raise MCPError(
                BUSY,
                f"caplet mcp: {flow.count} requests of this session are in flight "
                f"(Policy.mcp.max_in_flight = {self.bound}); wait for an answer (or cancel a "
                "request) before sending more",
            )
        if self.count >= self.total:
            raise MCPError(
                BUSY,
                f"caplet mcp: {self.count} requests of all sessions are in flight "
                f"(Policy.mcp.max_in_flight_total = {self.total}); wait for an answer (or "
                "cancel a request) before sending more",
            )
        flow.opened(request_id)
        self.count += 1
        try:
            return await call_next(ctx)
        finally:
            self.count -= 1
            flow.settled(request_id)
            if flow.count == 0:
                self._flows.pop(key, None)


def _session_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The MCP session a request belongs to: its ``Mcp-Session-Id``, which the SDK's session
    manager checked before the request reached this session (a handshake-era request);
    ``None`` for requests of no session (``initialize``, the 2026 protocol, whose header
    nothing checks), which share one bound."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return None
    session = headers.get("mcp-session-id")
    return session if isinstance(session, str) else None
