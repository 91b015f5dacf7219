"""Classify an IP address: may the broker connect to it?

The tables follow the IANA IPv4 and IPv6 Special-Purpose Address Registries
(RFC 6890 and its updates), plus the well-known cloud metadata endpoints.
Anything ``ipaddress`` itself does not consider globally reachable is
blocked as well (the fallback), so a range missing here still fails closed.

IPv6 can carry an IPv4 address inside it, and a packet to such an address
may end up at that IPv4 host (a dual-stack socket for ``::ffff:a.b.c.d``, a
NAT64 gateway for ``64:ff9b::a.b.c.d``, a 6to4 relay for ``2002:AABB:CCDD::``,
a Teredo relay): ``::ffff:127.0.0.1`` must never pass as "IPv6, not
loopback". The embedded address is therefore classified too:

* mapped (RFC 4291 2.5.5.2), NAT64 well-known prefix (RFC 6052) and 6to4
  (RFC 3056) take the embedded address's verdict: they are how a public IPv4
  host is reached from an IPv6-only or dual-stack network;
* IPv4-compatible (``::/96``, deprecated by RFC 4291 2.5.5.1), local-use
  NAT64 (``64:ff9b:1::/48``, RFC 8215, not globally reachable) and Teredo
  (``2001::/32``, RFC 4380, inside the non-global ``2001::/23``) are always
  blocked, and report the embedded address's class when that is blocked too.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

__all__ = [
    "METADATA_ADDRESSES",
    "AddressClass",
    "Classification",
    "Embedding",
    "IPAddress",
    "classify",
    "connect_address",
    "embedded_ipv4",
]

IPAddress = IPv4Address | IPv6Address


class AddressClass(enum.Enum):
    """Why an address is (not) reachable; the value reads "a(n) <value> address"."""

    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link-local"
    SHARED = "shared (CGNAT)"
    MULTICAST = "multicast"
    RESERVED = "reserved"
    UNSPECIFIED = "unspecified"
    DOCUMENTATION = "documentation"
    BENCHMARK = "benchmarking"
    METADATA = "cloud metadata"

    @property
    def blocked(self) -> bool:
        return self is not AddressClass.PUBLIC

    def describe(self) -> str:
        """``"a loopback address"``, ``"an unspecified address"``."""
        article = "an" if self.value[0] in "aeiou" else "a"
        return f"{article} {self.value} address"


class Embedding(enum.Enum):
    """How an IPv6 address carries an IPv4 address."""

    MAPPED = "IPv4-mapped"
    COMPATIBLE = "IPv4-compatible"
    NAT64 = "NAT64"
    NAT64_LOCAL = "local-use NAT64"
    SIX_TO_FOUR = "6to4"
    TEREDO = "Teredo"

    @property
    def transparent(self) -> bool:
        """True when the address takes the embedded IPv4 address's verdict."""
        return self in (Embedding.MAPPED, Embedding.NAT64, Embedding.SIX_TO_FOUR)


@dataclass(frozen=True, slots=True)
class Classification:
    """The verdict on one address.

    ``embedded`` is the IPv4 address an IPv6 address carries (the Teredo
    client, or its server when only that one is blocked) and ``embedding``
    how; both are ``None`` for plain addresses.
    """

    address: IPAddress
    kind: AddressClass
    embedded: IPv4Address | None = None
    embedding: Embedding | None = None

    @property
    def blocked(self) -> bool:
        return self.kind.blocked

    def describe(self) -> str:
        """``"a loopback address (IPv4 embedded in IPv6, NAT64 form)"``; never the address."""
        text = self.kind.describe()
        if self.embedding is not None:
            text += f" (IPv4 embedded in IPv6, {self.embedding.value} form)"
        return text


#: Cloud metadata services: instance credentials live behind these. AWS, GCP,
#: Azure, OpenStack, DigitalOcean (169.254.169.254, fd00:ec2::254 on AWS
#: IPv6, fd20:ce::254 on GCP IPv6), AWS ECS task and EKS pod credentials
#: (169.254.170.2, 169.254.170.23, fd00:ec2::23), Alibaba (100.100.100.200),
#: Oracle (192.0.0.192), Azure WireServer (168.63.129.16, a public address).
#: They are blocked even when a policy allows their network; only an allowed
#: network of exactly that one address lets one through (NetworkPolicy).
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(text)
    for text in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "100.100.100.200",
        "192.0.0.192",
        "168.63.129.16",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "fd20:ce::254",
    )
)

# IANA IPv4 Special-Purpose Address Registry (RFC 6890 section 2.2.2 and updates),
# most specific first where ranges nest.
_IPV4_TABLE: tuple[tuple[IPv4Network, AddressClass], ...] = tuple(
    (IPv4Network(net), kind)
    for net, kind in (
        ("0.0.0.0/8", AddressClass.UNSPECIFIED),  # "this network" (RFC 791); Linux connects
        # 0.0.0.0 to the local host, so it is as dangerous as loopback.
        ("10.0.0.0/8", AddressClass.PRIVATE),  # RFC 1918
        ("100.64.0.0/10", AddressClass.SHARED),  # RFC 6598 carrier-grade NAT
        ("127.0.0.0/8", AddressClass.LOOPBACK),  # RFC 1122
        ("169.254.0.0/16", AddressClass.LINK_LOCAL),  # RFC 3927
        ("172.16.0.0/12", AddressClass.PRIVATE),  # RFC 1918
        ("192.0.0.0/24", AddressClass.RESERVED),  # RFC 6890 IETF protocol assignments
        ("192.0.2.0/24", AddressClass.DOCUMENTATION),  # RFC 5737 TEST-NET-1
        ("192.88.99.0/24", AddressClass.RESERVED),  # RFC 7526 deprecated 6to4 relay anycast
        ("192.168.0.0/16", AddressClass.PRIVATE),  # RFC 1918
        ("198.18.0.0/15", AddressClass.BENCHMARK),  # RFC 2544
        ("198.51.100.0/24", AddressClass.DOCUMENTATION),  # RFC 5737 TEST-NET-2
        ("203.0.113.0/24", AddressClass.DOCUMENTATION),  # RFC 5737 TEST-NET-3
        ("224.0.0.0/4", AddressClass.MULTICAST),  # RFC 5771
        ("240.0.0.0/4", AddressClass.RESERVED),  # RFC 1112; includes 255.255.255.255
    )
)

# IANA IPv6 Special-Purpose Address Registry (RFC 6890 section 2.2.3 and updates).
# The embedding prefixes (::ffff:0:0/96, ::/96, 64:ff9b::/96, 64:ff9b:1::/48,
# 2002::/16, 2001::/32) are handled before this table.
_IPV6_TABLE: tuple[tuple[IPv6Network, AddressClass], ...] = tuple(
    (IPv6Network(net), kind)
    for net, kind in (
        ("::/8", AddressClass.RESERVED),  # RFC 4291 reserved (SIIT ::ffff:0:0:0/96 ...)
        ("100::/64", AddressClass.RESERVED),  # RFC 6666 discard-only
        ("100:0:0:1::/64", AddressClass.RESERVED),  # RFC 9780 dummy prefix
        ("2001:db8::/32", AddressClass.DOCUMENTATION),  # RFC 3849
        ("2001::/23", AddressClass.RESERVED),  # RFC 2928 IETF protocol assignments
        ("3fff::/20", AddressClass.DOCUMENTATION),  # RFC 9637
        ("5f00::/16", AddressClass.RESERVED),  # RFC 9602 SRv6 SIDs
        ("fc00::/7", AddressClass.PRIVATE),  # RFC 4193 unique local
        ("fe80::/10", AddressClass.LINK_LOCAL),  # RFC 4291
        ("fec0::/10", AddressClass.PRIVATE),  # RFC 3879 deprecated site-local
        ("ff00::/8", AddressClass.MULTICAST),  # RFC 4291
    )
)

#: Global unicast (RFC 4291 2.4): everything outside it is unallocated or special.
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_COMPATIBLE = IPv6Network("::/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")
_UNSPECIFIED_V6 = IPv6Address("::")
_LOOPBACK_V6 = IPv6Address("::1")


def classify(address: IPAddress) -> Classification:
    """Classify ``address`` (an IPv6 zone id, ``%eth0``, is ignored)."""
    if isinstance(address, IPv4Address):
        return Classification(address, _classify_v4(address))
    if address.scope_id is not None:
        address = IPv6Address(int(address))
    embedded, embedding = embedded_ipv4(address)
    if embedded is None or embedding is None:
        return Classification(address, _classify_v6(address))
    inner = _classify_v4(embedded)
    if embedding.transparent:
        return Classification(address, inner, embedded, embedding)
    if embedding is Embedding.TEREDO and not inner.blocked:
        # Teredo carries two IPv4 addresses: the client (returned above) and
        # the relay server in bits 32-63; report whichever is blocked.
        server = IPv4Address((int(address) >> 64) & 0xFFFFFFFF)
        if _classify_v4(server).blocked:
            return Classification(address, _classify_v4(server), server, embedding)
    if inner.blocked:
        return Classification(address, inner, embedded, embedding)
    return Classification(address, AddressClass.RESERVED, embedded, embedding)


def embedded_ipv4(address: IPv6Address) -> tuple[IPv4Address | None, Embedding | None]:
    """The IPv4 address an IPv6 address carries and how, or ``(None, None)``."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, Embedding.MAPPED
    if address in _COMPATIBLE and address not in (_UNSPECIFIED_V6, _LOOPBACK_V6):
        return IPv4Address(int(address) & 0xFFFFFFFF), Embedding.COMPATIBLE
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF), Embedding.NAT64
    if address in _NAT64_LOCAL:
        # RFC 6052 lets the operator choose the prefix length inside the /48,
        # so where the IPv4 address sits is not knowable; the /96 position is
        # reported (the range is blocked whatever it holds).
        return IPv4Address(int(address) & 0xFFFFFFFF), Embedding.NAT64_LOCAL
    if address.sixtofour is not None:
        return address.sixtofour, Embedding.SIX_TO_FOUR
    if address.teredo is not None:
        return address.teredo[1], Embedding.TEREDO
    return None, None


def connect_address(address: IPAddress) -> IPAddress:
    """The address to hand to ``connect()``: the IPv4 address for an IPv4-mapped one.

    A mapped address reaches its IPv4 host only through a dual-stack socket;
    connecting to the IPv4 address itself works on every host and is what
    was classified.
    """
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.scope_id is not None:
            return IPv6Address(int(address))
    return address


def _classify_v4(address: IPv4Address) -> AddressClass:
    if address in METADATA_ADDRESSES:
        return AddressClass.METADATA
    for network, kind in _IPV4_TABLE:
        if address in network:
            return kind
    # Fail closed on anything the standard library knows to be special and
    # this table does not name.
    return AddressClass.PUBLIC if address.is_global else AddressClass.RESERVED


def _classify_v6(address: IPv6Address) -> AddressClass:
    if address in METADATA_ADDRESSES:
        return AddressClass.METADATA
    if address == _UNSPECIFIED_V6:
        return AddressClass.UNSPECIFIED
    if address == _LOOPBACK_V6:
        return AddressClass.LOOPBACK
    for network, kind in _IPV6_TABLE:
        if address in network:
            return kind
    if address not in _GLOBAL_UNICAST or not address.is_global:
        return AddressClass.RESERVED
    return AddressClass.PUBLIC
