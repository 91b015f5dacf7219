"""The resolver seam: host name to addresses, checked by the broker before it connects.

The broker resolves once, checks every address, and connects to a checked
one by number, so a DNS answer that changes between the check and the
connection (DNS rebinding) cannot redirect it. Implementations:
:class:`~caplet._broker._system_resolver.SystemResolver` (the operating
system's resolver, the default) and
:class:`~caplet._broker._static_resolver.StaticResolver` (a fixed table: tests,
pinned intranet names).
"""

from __future__ import annotations

from typing import Protocol

from caplet._broker._addresses import IPAddress

__all__ = ["Resolver"]


class Resolver(Protocol):
    """Resolve a host name to the addresses a connection to it could use.

    ``resolve`` returns at least one address, without duplicates, in the
    order to try them, within ``timeout_s`` seconds. It raises
    :class:`~caplet._errors.DnsError` (with a message naming the host but no
    address) on an error, a timeout or an empty answer: the broker fails
    closed and never falls back to another lookup.
    """

    def resolve(self, host: str, port: int, *, timeout_s: float) -> tuple[IPAddress, ...]: ...
