"""Two bounds uvicorn's HTTP/1.1 server lacks, for ``caplet mcp --http``.

uvicorn keeps a connection that never sends a request for as long as the
client likes: its only timer is the keep-alive one, armed after a response
(``uvicorn/protocols/http/h11_impl.py``, ``on_response_complete``). Nor does
it bound how many connections it holds (``limit_concurrency`` answers 503 to
*requests* past the limit; the connections stay open). Any local process,
with no token, could open connections until the server ran out of file
descriptors, and then caplet could start no worker for the agent it serves.

:func:`guarded_h11` is uvicorn's own h11 protocol with both bounds: a
connection past ``max_connections`` is closed at once, and one that has not
sent a whole request head within ``head_timeout_s`` of connecting, or of the
answer to its previous request, is closed.
A subclass rather than a server of our own: uvicorn takes a protocol class
for exactly this (``uvicorn.Config(http=...)``), and everything else about
HTTP stays the library's.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEAD_TIMEOUT_S", "MAX_CONNECTIONS", "guarded_h11"]

#: Connections held at once (an agent needs one or two).
MAX_CONNECTIONS = 64
#: Seconds a new connection has to send its first request head.
HEAD_TIMEOUT_S = 10.0


def guarded_h11(
    max_connections: int = MAX_CONNECTIONS, head_timeout_s: float = HEAD_TIMEOUT_S
) -> type[H11Protocol]:
    """uvicorn's h11 protocol class, bounded as the module says."""

    class GuardedH11(H11Protocol):
        _head_deadline: asyncio.TimerHandle | None = None
        #: The request cycle current when the deadline was armed: a new one
        #: (``self.cycle`` replaced) means a whole request head arrived in time.
        _awaiting: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.close()
                return
            self._arm()

        def on_response_complete(self) -> None:
            # Every request head has the deadline, not only the first: bytes of
            # the next one cancel uvicorn's keep-alive timer, and a client that
            # sent one whole request and then a few bytes more held its slot for
            # as long as it liked (a red-team finding). Armed before the parent
            # serves a pipelined request, which then counts as in time.
            if not self.transport.is_closing():
                self._arm()
            super().on_response_complete()

        def _arm(self) -> None:
            if self._head_deadline is not None:
                self._head_deadline.cancel()
            self._awaiting = self.cycle
            self._head_deadline = self.loop.call_later(head_timeout_s, self._no_head)

        def _no_head(self) -> None:
            self._head_deadline = None
            if self.cycle is self._awaiting and not self.transport.is_closing():
                self.transport.close()  # no whole request head in time: a held slot

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_deadline is not None:
                self._head_deadline.cancel()
                self._head_deadline = None
            super().connection_lost(exc)

    return GuardedH11
