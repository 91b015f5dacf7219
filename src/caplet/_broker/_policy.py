"""Network policy: what the administrator lets brokered HTTP reach, and how much of it.

``caplet._host._policy.Policy`` holds one of these as ``network``. The
defaults suit an application talking to public APIs: every special-purpose
address is refused, wildcard grants are off (design.md section 3: wildcard
hosts are refused unless policy allows them), and each plugin gets a modest
rate and data budget.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Network, IPv6Network
from typing import Annotated

from pydantic import PlainValidator
from pydantic.dataclasses import dataclass

from caplet._broker._addresses import AddressClass, Classification
from caplet._errors import PolicyError
from caplet._validated import (
    MODEL_CONFIG,
    Bytes,
    Count,
    Flag,
    Positive,
    Seconds,
    validated,
)

__all__ = ["NetworkPolicy"]


def _network(value: object) -> IPv4Network | IPv6Network:
    """A network from an ``ipaddress`` network or its CIDR text (``"127.0.0.0/8"``)."""
    if isinstance(value, IPv4Network | IPv6Network):
        return value
    if not isinstance(value, str):
        # ValueError, not TypeError: pydantic reports only the former as a validation error.
        raise ValueError('expected a network in CIDR notation, such as "127.0.0.0/8"')  # noqa: TRY004
    try:
        return ipaddress.ip_network(value)
    except ValueError as exc:
        # "has host bits set": 127.0.0.1/8 is ambiguous (did it mean one address?).
        raise ValueError(
            f'{exc}; write the network in CIDR notation, such as "127.0.0.0/8" '
            'or "10.1.2.3/32" for one address'
        ) from None


Network = Annotated[IPv4Network | IPv6Network, PlainValidator(_network)]


@validated(PolicyError, "network policy")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class NetworkPolicy:
    """Limits and exceptions for brokered HTTP.

    ``allowed_networks``: private networks a deployment may reach (an
    intranet, ``127.0.0.0/8`` for tests). An address in one of them is
    allowed whatever its class, with one exception: a cloud metadata address
    (:data:`caplet._broker._addresses.METADATA_ADDRESSES`) passes only when
    a network of exactly that one address is listed, so allowing
    ``100.64.0.0/10`` for a carrier-grade NAT does not also hand out the
    instance credentials at ``100.100.100.200``.

    ``allow_wildcard_hosts``: honour ``net.http:https://*.example.com``
    grants; when false such a grant matches nothing.

    Sizes are bytes; ``max_request_bytes`` counts the body and the header
    lines. ``default_timeout_s`` applies when a request names no timeout and
    ``max_timeout_s`` caps the one it names; the time covers resolution,
    connection, TLS, every redirect hop and reading the whole body.
    ``requests_per_minute``/``requests_per_hour`` count every request sent
    (each redirect hop is one) per plugin over sliding windows;
    ``bytes_per_hour`` is the data budget: each request as sent (head and
    body) and everything read from the connection (heads, bodies, interim
    answers; over TLS the bytes the socket received, handshake included).

    Every value is checked at construction (strict types, bounds);
    ``allowed_networks`` takes networks or their CIDR text. A bad value
    raises :class:`~caplet.PolicyError` naming the field.
    """

    allowed_networks: tuple[Network, ...] = ()
    allow_wildcard_hosts: Flag = False
    max_url_length: Positive = 4096
    max_request_bytes: Bytes = 1024 * 1024
    max_response_bytes: Bytes = 10 * 1024 * 1024
    default_timeout_s: Seconds = 10.0
    max_timeout_s: Seconds = 30.0
    max_redirects: Count = 5
    requests_per_minute: Count = 60
    requests_per_hour: Count = 1000
    bytes_per_hour: Count = 100 * 1024 * 1024

    def permits(self, verdict: Classification) -> bool:
        """True when the broker may connect to the classified address."""
        if not verdict.blocked:
            return True
        candidates = [verdict.address]
        if verdict.embedded is not None and (
            verdict.embedding is not None and verdict.embedding.transparent
        ):
            # These forms reach the IPv4 host itself, so the IPv4 rules apply.
            candidates.append(verdict.embedded)
        if verdict.kind is AddressClass.METADATA:
            return any(
                network.num_addresses == 1 and address in network
                for network in self.allowed_networks
                for address in candidates
            )
        return any(
            address in network for network in self.allowed_networks for address in candidates
        )

    def timeout_s(self, requested: float | None) -> float:
        """The total time one fetch may take: the plugin's own, never above the policy's."""
        if requested is None:
            return min(self.default_timeout_s, self.max_timeout_s)
        return min(requested, self.max_timeout_s)
