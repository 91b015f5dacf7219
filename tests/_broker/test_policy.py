"""NetworkPolicy: allowed networks (metadata needs an exact entry) and the timeout rule."""

from __future__ import annotations

import ipaddress

import pytest

from caplet._broker._addresses import classify
from caplet._broker._policy import NetworkPolicy
from caplet._errors import PolicyError


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


def test_networks_given_as_text_are_networks_not_a_type_error_twenty_frames_down() -> None:
    """Issue 15: NetworkPolicy(allowed_networks=["127.0.0.0/8"]) was accepted and the
    first fetch failed with "TypeError: 'in <string>' requires string as left operand"."""
    policy = NetworkPolicy(allowed_networks=["127.0.0.0/8", "::1/128"])  # type: ignore[arg-type]
    assert policy.allowed_networks == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    assert policy.permits(classify(ipaddress.ip_address("127.0.0.1")))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"allowed_networks": ["127.0.0.1/8"]},
            "allowed_networks[0]: '127.0.0.1/8' is not valid: 127.0.0.1/8 has host bits set; "
            'write the network in CIDR notation, such as "127.0.0.0/8" or "10.1.2.3/32" for one',
        ),
        (
            {"allowed_networks": [5]},
            "allowed_networks[0]: 5 is not valid: expected a network in CIDR notation",
        ),
        ({"allowed_networks": "10.0.0.0/8"}, "allowed_networks: '10.0.0.0/8' is not valid"),
        ({"allow_wildcard_hosts": 1}, "allow_wildcard_hosts: 1 is not valid: expected true or"),
        ({"max_redirects": -1}, "max_redirects: -1 is not valid: input should be greater than"),
        ({"max_response_bytes": "1"}, "max_response_bytes: '1' is not valid: expected a whole"),
        ({"default_timeout_s": float("nan")}, "default_timeout_s: nan is not valid"),
        ({"max_timeout_s": 0}, "max_timeout_s: 0 is not valid: input should be greater than 0"),
        ({"max_redirect": 2}, "max_redirect: unknown field (did you mean 'max_redirects'?)"),
    ],
)
def test_a_bad_value_is_refused_at_construction_naming_the_field(
    given: dict[str, object], expected: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        NetworkPolicy(**given)  # type: ignore[arg-type]
    assert str(caught.value).startswith("invalid network policy: ")
    assert expected in str(caught.value)
    assert caught.value.problems[0].field.split("[")[0] == next(iter(given))
