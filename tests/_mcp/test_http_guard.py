"""The bounds caplet adds to uvicorn's HTTP server (``caplet mcp --http``).

The attack first: a local process with no token opens connections and sends
nothing. uvicorn held each one forever and without limit; now the ones past
the limit are closed at once and a silent one is closed after the deadline.
A real uvicorn server on 127.0.0.1, real sockets; nothing sleeps: the test
waits for the server to close a socket (recv returns b"").
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from caplet._mcp._http_guard import guarded_h11


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def address() -> Iterator[tuple[str, int]]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    config = uvicorn.Config(
        _app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        http=guarded_h11(max_connections=3, head_timeout_s=0.5),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.01)  # the server's start, not a timing assumption
            assert thread.is_alive(), "the server ended before serving"
        yield listener.getsockname()
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


def _connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=30)


def _closed_by_server(client: socket.socket) -> bool:
    try:
        return client.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_silent_connection_is_closed_at_the_deadline(address: tuple[str, int]) -> None:
    with _connect(address) as silent:
        assert _closed_by_server(silent)


def test_connections_past_the_limit_are_closed_at_once(address: tuple[str, int]) -> None:
    held = [_connect(address) for _ in range(3)]
    try:
        # Each held connection is registered before the next is accepted: one
        # request answered on the last proves the server has seen all three.
        held[-1].sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200" in held[-1].recv(1024)
        with _connect(address) as extra:
            assert _closed_by_server(extra)
    finally:
        for client in held:
            client.close()


def test_a_request_in_time_is_served(address: tuple[str, int]) -> None:
    with _connect(address) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := client.recv(1024):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        assert b"\r\nok\r\n" in answer


def _served(client: socket.socket) -> None:
    """Send one whole request and read its whole (chunked) answer."""
    client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while not answer.endswith(b"0\r\n\r\n"):
        chunk = client.recv(1024)
        assert chunk, f"the server closed the connection: {answer!r}"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")


def test_a_kept_alive_connection_cannot_hold_its_slot_with_a_partial_request(
    address: tuple[str, int],
) -> None:
    """Red team: one whole request (a 401 needs no token), then the first bytes of
    the next one and nothing more. Any bytes cancel uvicorn's keep-alive timer, and
    the head deadline was only for the first request: the connection was held for
    as long as the client liked, and 64 of them locked the agent out."""
    with _connect(address) as client:
        _served(client)
        client.sendall(b"GET / HTTP/1.1\r\nHo")
        assert _closed_by_server(client)
