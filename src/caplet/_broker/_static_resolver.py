"""A fixed name-to-address table: tests, and intranet names pinned by the host application."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from caplet._broker._addresses import IPAddress
from caplet._errors import DnsError

__all__ = ["StaticResolver"]


class StaticResolver:
    """Answer from ``table`` only (host name -> addresses); an unknown name does not resolve.

    Names are matched lower-case without a trailing dot, as the broker
    normalises them. Addresses are checked by the broker like any other
    answer, so a table entry never bypasses the network policy.
    """

    def __init__(self, table: Mapping[str, Iterable[str | IPAddress]]) -> None:
        self._table: dict[str, tuple[IPAddress, ...]] = {
            name.lower().rstrip("."): tuple(
                dict.fromkeys(ipaddress.ip_address(address) for address in addresses)
            )
            for name, addresses in table.items()
        }

    def resolve(self, host: str, port: int, *, timeout_s: float) -> tuple[IPAddress, ...]:
        addresses = self._table.get(host.lower().rstrip("."))
        if addresses is None:
            raise DnsError(f"{host!r} does not resolve (no such host in the static table)")
        if not addresses:
            raise DnsError(f"{host!r} resolved to no address")
        return addresses
