"""A raw TCP (or TLS) server on 127.0.0.1 that answers with whatever bytes a test scripts.

``http.server`` cannot send a malformed response (it writes valid status
lines and headers), so the tests of what a hostile or broken upstream does
to the broker use this: every connection reads the request head (or, when
the client opens with a TLS record the server does not speak, the first
bytes of the handshake), writes the scripted bytes, and closes. Nothing is
ever held open, so a broken response ends in EOF at once and no test waits
for a deadline.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

#: The first byte of a TLS handshake record (RFC 8446 5.1, ContentType.handshake).
_TLS_HANDSHAKE = 0x16
#: A client that connects and then sends nothing must not pin the server's thread.
_READ_GUARD_S = 10.0


@dataclass
class RawServer:
    """The listening socket, the bytes every connection gets, and what it received."""

    listener: socket.socket
    context: ssl.SSLContext | None
    response: bytes = b""
    heads: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        port: int = self.listener.getsockname()[1]
        return port

    def answer(self, response: bytes) -> None:
        """Every later connection gets ``response``."""
        with self._lock:
            self.response = response
            self.heads.clear()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # the listener was shut down: the fixture is done
                return
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(_READ_GUARD_S)
        sock: socket.socket = conn
        with contextlib.suppress(OSError):
            if self.context is not None:
                sock = self.context.wrap_socket(conn, server_side=True)
            head = _read_head(sock)
            with self._lock:
                self.heads.append(head)
                response = self.response
            sock.sendall(response)
            # Half-close first so the client reads everything, then EOF.
            sock.shutdown(socket.SHUT_WR)
        if sock is not conn:
            sock.close()


def _read_head(sock: socket.socket) -> bytes:
    """The request head (through the blank line), or the first bytes of a foreign TLS hello."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if data[0] == _TLS_HANDSHAKE and not isinstance(sock, ssl.SSLSocket):
            break  # a TLS client on a plain server: answer its hello with the script
    return data


@contextlib.contextmanager
def raw_server(context: ssl.SSLContext | None = None) -> Iterator[RawServer]:
    """Run a :class:`RawServer` (TLS with ``context``) until the block ends."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = RawServer(listener, context)
    thread = threading.Thread(target=server._serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        # shutdown() wakes the blocked accept() (it fails with EINVAL on Linux).
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()
