"""Network policy: what the administrator lets brokered HTTP reach, and how much of it.

``caplet._host._policy.Policy`` holds one of these as ``network``. The
defaults suit an application talking to public APIs: every special-purpose
address is refused, wildcard grants are off (design.md section 3: wildcard
hosts are refused unless policy allows them), and each plugin gets a modest
rate and data budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network

from caplet._broker._addresses import AddressClass, Classification

__all__ = ["NetworkPolicy"]


@dataclass(frozen=True, slots=True)
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
    ``bytes_per_hour`` is the data budget: request and response bodies.
    """

    allowed_networks: tuple[IPv4Network | IPv6Network, ...] = ()
    allow_wildcard_hosts: bool = False
    max_url_length: int = 4096
    max_request_bytes: int = 1024 * 1024
    max_response_bytes: int = 10 * 1024 * 1024
    default_timeout_s: float = 10.0
    max_timeout_s: float = 30.0
    max_redirects: int = 5
    requests_per_minute: int = 60
    requests_per_hour: int = 1000
    bytes_per_hour: int = 100 * 1024 * 1024

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
