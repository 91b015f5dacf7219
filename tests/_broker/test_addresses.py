"""Address classification: the special-purpose tables and the IPv4-in-IPv6 forms."""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caplet._broker._addresses import (
    AddressClass,
    Embedding,
    classify,
    connect_address,
    embedded_ipv4,
)
from caplet._broker._policy import NetworkPolicy

PROPERTY = settings(max_examples=500, deadline=None, database=None)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("8.8.8.8", AddressClass.PUBLIC),
        ("1.1.1.1", AddressClass.PUBLIC),
        ("0.0.0.0", AddressClass.UNSPECIFIED),
        ("0.1.2.3", AddressClass.UNSPECIFIED),
        ("10.1.2.3", AddressClass.PRIVATE),
        ("172.16.0.1", AddressClass.PRIVATE),
        ("172.31.255.255", AddressClass.PRIVATE),
        ("192.168.1.1", AddressClass.PRIVATE),
        ("100.64.0.1", AddressClass.SHARED),
        ("100.127.255.254", AddressClass.SHARED),
        ("127.0.0.1", AddressClass.LOOPBACK),
        ("127.255.0.9", AddressClass.LOOPBACK),
        ("169.254.1.1", AddressClass.LINK_LOCAL),
        ("169.254.169.254", AddressClass.METADATA),
        ("169.254.170.2", AddressClass.METADATA),
        ("100.100.100.200", AddressClass.METADATA),
        ("168.63.129.16", AddressClass.METADATA),
        ("192.0.0.192", AddressClass.METADATA),
        ("192.0.0.8", AddressClass.RESERVED),
        ("192.0.2.1", AddressClass.DOCUMENTATION),
        ("198.51.100.7", AddressClass.DOCUMENTATION),
        ("203.0.113.255", AddressClass.DOCUMENTATION),
        ("198.18.0.1", AddressClass.BENCHMARK),
        ("198.19.255.255", AddressClass.BENCHMARK),
        ("192.88.99.1", AddressClass.RESERVED),
        ("224.0.0.1", AddressClass.MULTICAST),
        ("239.255.255.250", AddressClass.MULTICAST),
        ("240.0.0.1", AddressClass.RESERVED),
        ("255.255.255.255", AddressClass.RESERVED),
        ("2001:4860:4860::8888", AddressClass.PUBLIC),
        ("::", AddressClass.UNSPECIFIED),
        ("::1", AddressClass.LOOPBACK),
        ("fe80::1", AddressClass.LINK_LOCAL),
        ("fe80::1%eth0", AddressClass.LINK_LOCAL),
        ("fc00::1", AddressClass.PRIVATE),
        ("fd12:3456::1", AddressClass.PRIVATE),
        ("fec0::1", AddressClass.PRIVATE),
        ("fd00:ec2::254", AddressClass.METADATA),
        ("ff02::1", AddressClass.MULTICAST),
        ("2001:db8::1", AddressClass.DOCUMENTATION),
        ("3fff::1", AddressClass.DOCUMENTATION),
        ("3fff:fff:ffff::1", AddressClass.DOCUMENTATION),
        ("100::1", AddressClass.RESERVED),
        ("2001:20::1", AddressClass.RESERVED),
        ("5f00::1", AddressClass.RESERVED),
        ("4000::1", AddressClass.RESERVED),  # outside 2000::/3, unallocated
        ("::ffff:0:7f00:1", AddressClass.RESERVED),  # SIIT, inside ::/8
    ],
)
def test_table(text: str, kind: AddressClass) -> None:
    verdict = classify(ipaddress.ip_address(text))
    assert verdict.kind is kind
    assert verdict.blocked is (kind is not AddressClass.PUBLIC)
    assert verdict.embedding is None


@pytest.mark.parametrize(
    ("text", "kind", "embedding", "embedded"),
    [
        ("::ffff:127.0.0.1", AddressClass.LOOPBACK, Embedding.MAPPED, "127.0.0.1"),
        ("::ffff:169.254.169.254", AddressClass.METADATA, Embedding.MAPPED, "169.254.169.254"),
        ("::ffff:8.8.8.8", AddressClass.PUBLIC, Embedding.MAPPED, "8.8.8.8"),
        ("::127.0.0.1", AddressClass.LOOPBACK, Embedding.COMPATIBLE, "127.0.0.1"),
        ("::8.8.8.8", AddressClass.RESERVED, Embedding.COMPATIBLE, "8.8.8.8"),
        ("64:ff9b::10.0.0.1", AddressClass.PRIVATE, Embedding.NAT64, "10.0.0.1"),
        ("64:ff9b::8.8.8.8", AddressClass.PUBLIC, Embedding.NAT64, "8.8.8.8"),
        ("64:ff9b:1::a9fe:a9fe", AddressClass.METADATA, Embedding.NAT64_LOCAL, "169.254.169.254"),
        ("64:ff9b:1::8.8.8.8", AddressClass.RESERVED, Embedding.NAT64_LOCAL, "8.8.8.8"),
        ("2002:7f00:1::1", AddressClass.LOOPBACK, Embedding.SIX_TO_FOUR, "127.0.0.1"),
        ("2002:808:808::1", AddressClass.PUBLIC, Embedding.SIX_TO_FOUR, "8.8.8.8"),
        # RFC 4380's example: server 65.54.227.120, client 192.0.2.45 (documentation).
        (
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            AddressClass.DOCUMENTATION,
            Embedding.TEREDO,
            "192.0.2.45",
        ),
        # A public client behind a loopback "server": the server is reported.
        ("2001:0:7f00:1:0:0:f7f7:f7f7", AddressClass.LOOPBACK, Embedding.TEREDO, "127.0.0.1"),
        ("2001:0:808:808:0:0:f7f7:f7f7", AddressClass.RESERVED, Embedding.TEREDO, "8.8.8.8"),
    ],
)
def test_embedded_ipv4(text: str, kind: AddressClass, embedding: Embedding, embedded: str) -> None:
    verdict = classify(IPv6Address(text))
    assert verdict.kind is kind
    assert verdict.embedding is embedding
    assert verdict.embedded == IPv4Address(embedded)


def test_describe_never_names_the_address() -> None:
    assert AddressClass.UNSPECIFIED.describe() == "an unspecified address"
    assert AddressClass.SHARED.describe() == "a shared (CGNAT) address"
    verdict = classify(IPv6Address("::ffff:127.0.0.1"))
    assert verdict.describe() == "a loopback address (IPv4 embedded in IPv6, IPv4-mapped form)"


def test_connect_address() -> None:
    assert connect_address(IPv6Address("::ffff:127.0.0.1")) == IPv4Address("127.0.0.1")
    assert connect_address(IPv6Address("fe80::1%eth0")) == IPv6Address("fe80::1")
    assert connect_address(IPv6Address("2001:db8::1")) == IPv6Address("2001:db8::1")
    assert connect_address(IPv4Address("8.8.8.8")) == IPv4Address("8.8.8.8")


def test_embedded_ipv4_of_plain_addresses() -> None:
    assert embedded_ipv4(IPv6Address("::1")) == (None, None)
    assert embedded_ipv4(IPv6Address("::")) == (None, None)
    assert embedded_ipv4(IPv6Address("2001:4860::1")) == (None, None)


# -- properties -------------------------------------------------------------------------------


@PROPERTY
@given(st.ip_addresses())
def test_every_non_global_address_is_blocked(address: IPv4Address | IPv6Address) -> None:
    verdict = classify(address)
    if not address.is_global:
        assert verdict.blocked, address
        assert not NetworkPolicy().permits(verdict), address


v4 = st.ip_addresses(v=4).map(lambda a: IPv4Address(int(a)))
low_bits = st.integers(min_value=0, max_value=2**80 - 1)


def _transparent_forms(address: IPv4Address, rest: int) -> list[IPv6Address]:
    value = int(address)
    return [
        IPv6Address((0xFFFF << 32) | value),  # ::ffff:a.b.c.d
        IPv6Address((0x0064FF9B << 96) | value),  # 64:ff9b::a.b.c.d
        IPv6Address((0x2002 << 112) | (value << 80) | rest),  # 2002:AABB:CCDD::/48
    ]


@PROPERTY
@given(v4, low_bits)
def test_transparent_forms_take_the_embedded_verdict(address: IPv4Address, rest: int) -> None:
    expected = classify(address).kind
    for form in _transparent_forms(address, rest):
        verdict = classify(form)
        assert verdict.kind is expected, form
        assert verdict.embedded == address
        policy = NetworkPolicy(allowed_networks=(ipaddress.ip_network(f"{address}/32"),))
        assert policy.permits(verdict) is policy.permits(classify(address))


@PROPERTY
@given(v4, v4, st.integers(min_value=0, max_value=2**32 - 1))
def test_opaque_forms_are_blocked_with_the_embedded_class(
    client: IPv4Address, server: IPv4Address, middle: int
) -> None:
    inner = classify(client).kind
    compatible = IPv6Address(int(client))
    local_nat64 = IPv6Address((0x0064FF9B0001 << 80) | (middle << 32) | int(client))
    teredo = IPv6Address(
        (0x20010000 << 96) | (int(server) << 64) | (middle << 32) | (~int(client) & 0xFFFFFFFF)
    )
    for form in (compatible, local_nat64, teredo):
        if form in (IPv6Address("::"), IPv6Address("::1")):
            continue
        verdict = classify(form)
        assert verdict.blocked, form
        if inner.blocked:
            assert verdict.kind is inner, form
        elif form is not teredo or not classify(server).blocked:
            assert verdict.kind is AddressClass.RESERVED, form
