"""NetworkPolicy: allowed networks (metadata needs an exact entry) and the timeout rule."""

from __future__ import annotations

import ipaddress

from caplet._broker._addresses import classify
from caplet._broker._policy import NetworkPolicy


def _policy(*networks: str) -> NetworkPolicy:
    return NetworkPolicy(allowed_networks=tuple(ipaddress.ip_network(n) for n in networks))


def test_default_policy_permits_public_only() -> None:
    policy = NetworkPolicy()
    assert policy.permits(classify(ipaddress.ip_address("8.8.8.8")))
    assert not policy.permits(classify(ipaddress.ip_address("127.0.0.1")))
    assert not policy.allow_wildcard_hosts


def test_allowed_network_permits_its_addresses_only() -> None:
    policy = _policy("10.0.0.0/8")
    assert policy.permits(classify(ipaddress.ip_address("10.2.3.4")))
    assert not policy.permits(classify(ipaddress.ip_address("192.168.0.1")))
    assert not policy.permits(classify(ipaddress.ip_address("fd00::1")))


def test_metadata_needs_an_exact_entry() -> None:
    metadata = classify(ipaddress.ip_address("100.100.100.200"))
    assert not _policy("100.64.0.0/10").permits(metadata)
    assert _policy("100.100.100.200/32").permits(metadata)
    assert not _policy("100.64.0.0/10").permits(
        classify(ipaddress.ip_address("::ffff:100.100.100.200"))
    )


def test_transparent_embedding_uses_the_ipv4_network() -> None:
    policy = _policy("127.0.0.0/8")
    assert policy.permits(classify(ipaddress.ip_address("::ffff:127.0.0.1")))
    assert policy.permits(classify(ipaddress.ip_address("64:ff9b::127.0.0.1")))
    # Teredo reaches the IPv4 host only through a relay: the IPv4 entry does not cover it.
    assert not policy.permits(classify(ipaddress.ip_address("2001:0:7f00:1::f7f7:f7f7")))


def test_timeout_is_capped() -> None:
    policy = NetworkPolicy(default_timeout_s=10.0, max_timeout_s=30.0)
    assert policy.timeout_s(None) == 10.0
    assert policy.timeout_s(5) == 5
    assert policy.timeout_s(300) == 30.0
    assert NetworkPolicy(default_timeout_s=60, max_timeout_s=30).timeout_s(None) == 30
