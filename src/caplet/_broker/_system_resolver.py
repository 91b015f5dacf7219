"""Resolve host names with the operating system's resolver, under a deadline."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from caplet._broker._addresses import IPAddress
from caplet._errors import DnsError

__all__ = ["GetAddrInfo", "SystemResolver"]

#: The shape of :func:`socket.getaddrinfo` as called here (host, port, family,
#: type, proto): replaceable so that a test can stand in for a slow or failing
#: DNS server without touching the network.
GetAddrInfo = Callable[[str, int, int, int, int], Sequence[tuple[Any, ...]]]


def _getaddrinfo(
    host: str, port: int, family: int, kind: int, proto: int
) -> Sequence[tuple[Any, ...]]:
    return socket.getaddrinfo(host, port, family, kind, proto)


class SystemResolver:
    """``socket.getaddrinfo`` (``/etc/hosts``, DNS, nsswitch) with a deadline.

    ``getaddrinfo`` cannot be cancelled and takes no timeout, so it runs in a
    daemon thread that the caller waits for at most ``timeout_s``; a lookup
    that outlives its deadline finishes in the background and its answer is
    discarded. Errors, timeouts and empty answers raise :class:`DnsError`.
    """

    def __init__(self, getaddrinfo: GetAddrInfo = _getaddrinfo) -> None:
        self._getaddrinfo = getaddrinfo

    def resolve(self, host: str, port: int, *, timeout_s: float) -> tuple[IPAddress, ...]:
        outcome: list[Sequence[tuple[Any, ...]] | BaseException] = []

        def lookup() -> None:
            try:
                outcome.append(
                    self._getaddrinfo(
                        host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, socket.IPPROTO_TCP
                    )
                )
            except Exception as exc:  # handed to the waiting thread below
                outcome.append(exc)

        thread = threading.Thread(target=lookup, name=f"caplet-dns-{host}", daemon=True)
        thread.start()
        thread.join(max(timeout_s, 0.0))
        if not outcome:
            raise DnsError(f"looking up {host!r} timed out after {timeout_s:g} s")
        result = outcome[0]
        if isinstance(result, socket.gaierror):
            raise DnsError(f"{host!r} does not resolve ({_reason(result)})") from result
        if isinstance(result, BaseException):
            raise DnsError(f"looking up {host!r} failed ({type(result).__name__})") from result
        addresses: dict[IPAddress, None] = {}
        for entry in result:
            try:
                sockaddr = entry[4]
                addresses[ipaddress.ip_address(sockaddr[0])] = None
            except (IndexError, TypeError, ValueError) as exc:
                # An entry that is not an IP socket address: refuse the whole
                # answer rather than guess what it means.
                raise DnsError(f"{host!r} resolved to an entry that is not an IP address") from exc
        if not addresses:
            raise DnsError(f"{host!r} resolved to no address")
        return tuple(addresses)


def _reason(error: socket.gaierror) -> str:
    """A short reason from a resolver error (``EAI_NONAME`` -> "no such host")."""
    if error.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
        return "no such host"
    if error.errno == socket.EAI_AGAIN:
        return "temporary failure; try again"
    return "resolver error"
