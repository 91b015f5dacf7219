"""The socket watchdog wakes a blocked read when the exchange's time is up."""

from __future__ import annotations

import socket

from caplet._watchdog import SocketWatchdog


def test_a_read_blocked_past_the_deadline_returns() -> None:
    left, right = socket.socketpair()
    with left, right:
        watchdog = SocketWatchdog(0.0)
        watchdog.attach(left)
        # Blocks until the timer thread shuts the socket down (the peer never writes).
        assert left.recv(1) == b""
        watchdog.cancel()
        assert watchdog.fired


def test_a_socket_attached_after_the_deadline_is_shut_at_once() -> None:
    first, first_peer = socket.socketpair()
    later, later_peer = socket.socketpair()
    with first, first_peer, later, later_peer:
        watchdog = SocketWatchdog(0.0)
        watchdog.attach(first)
        assert first.recv(1) == b""  # returns once the watchdog has fired
        watchdog.attach(later)
        assert later.recv(1) == b""
        watchdog.cancel()


def test_a_cancelled_watchdog_never_fires() -> None:
    left, right = socket.socketpair()
    with left, right:
        watchdog = SocketWatchdog(3600.0)
        watchdog.attach(left)
        watchdog.cancel()
        assert not watchdog.fired
        right.sendall(b"x")
        assert left.recv(1) == b"x"
