"""A timer that shuts a socket down when a whole exchange's time is up.

httpx's timeouts bound each socket operation, not the whole exchange: a
server sending one byte just before each read timeout could hold a request
for as long as it likes. ``shutdown()`` from this timer thread makes a
``recv()`` blocked in the request's thread return at once, the standard way
to wake a socket operation in another thread (socket(7), shutdown(2)); the
caller then reports a timeout. Used by the HTTP broker (the plugins' network)
and the LLM auditor's client, which sit in different layers, so it lives in
the base layer.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

__all__ = ["SocketWatchdog"]


class SocketWatchdog:
    """Shuts the current socket down ``seconds`` after it is made; ``fired`` once it has."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, sock: socket.socket | None) -> None:
        """Watch ``sock`` from now on (shut at once when the time is already up)."""
        with self._lock:
            self._sock = sock
            if self.fired and sock is not None:
                _shutdown(sock)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` request extension: learn the socket when it connects."""
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = None if stream is None else stream.get_extra_info("socket")
            self.attach(sock if isinstance(sock, socket.socket) else None)

    def cancel(self) -> None:
        self._timer.cancel()
        self._timer.join()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed: nothing left to wake
        pass
