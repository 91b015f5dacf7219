"""StaticResolver: a fixed table, normalised like the broker's host names."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

import pytest

from caplet._broker._static_resolver import StaticResolver
from caplet._errors import DnsError


def test_lookup_is_case_and_trailing_dot_insensitive() -> None:
    resolver = StaticResolver({"API.Example.": ["203.0.113.7", "2001:db8::1", "203.0.113.7"]})
    assert resolver.resolve("api.example", 443, timeout_s=1) == (
        IPv4Address("203.0.113.7"),
        IPv6Address("2001:db8::1"),
    )
    assert resolver.resolve("API.EXAMPLE.", 443, timeout_s=1)[0] == IPv4Address("203.0.113.7")


def test_unknown_and_empty_names_fail() -> None:
    resolver = StaticResolver({"empty.example": []})
    with pytest.raises(DnsError, match=r"'nope.example' does not resolve \(no such host"):
        resolver.resolve("nope.example", 443, timeout_s=1)
    with pytest.raises(DnsError, match=r"'empty\.example' resolved to no address"):
        resolver.resolve("empty.example", 443, timeout_s=1)
