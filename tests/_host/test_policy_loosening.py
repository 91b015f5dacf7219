"""What loosens the policy, said in words; what tightens or changes no decision is not."""

from __future__ import annotations

import ipaddress

import pytest

from caplet._findings import RiskLevel
from caplet._host._policy import Isolation
from caplet._host._policy_loosening import loosening


@pytest.mark.parametrize(
    ("field", "value", "default", "expected"),
    [
        ("max_risk_level", RiskLevel.HIGH, RiskLevel.MEDIUM, "audited up to HIGH"),
        ("isolation", Isolation.BEST_EFFORT, Isolation.STRICT, "even when an isolation layer"),
        (
            "network.allowed_networks",
            (ipaddress.ip_network("127.0.0.0/8"),),
            (),
            "127.0.0.0/8 (loopback: services on this machine)",
        ),
        (
            "network.allowed_networks",
            (ipaddress.ip_network("169.254.0.0/16"),),
            (),
            "includes the cloud metadata address",
        ),
        ("network.allowed_networks", (ipaddress.ip_network("10.0.0.0/8"),), (), "a private"),
        ("allow_broad_paths", True, False, "granted / and home directories"),
        ("network.allow_wildcard_hosts", True, False, "every subdomain"),
        ("trusted_keys", ("RWQ",), (), "trusts 1 more publisher key(s)"),
        ("worker_uid", 1000, None, "workers run as host id 1000"),
        ("memory_mb", 4096, 512, "raises the default 512"),
        ("network.max_response_bytes", 10**9, 10 * 1024 * 1024, "raises the default"),
        ("cooldown_s", 1.0, 60.0, "lower than the default 60"),
        ("quarantine_window_s", 10.0, 3600.0, "lower than the default 3600"),
        ("failure_threshold", 100, 3, "raises the default 3"),
    ],
)
def test_what_loosens_is_said_in_words(
    field: str, value: object, default: object, expected: str
) -> None:
    assert expected in loosening(field, value, default)


@pytest.mark.parametrize(
    ("field", "value", "default"),
    [
        ("memory_mb", 128, 512),
        ("cooldown_s", 600.0, 60.0),
        ("require_signature", True, False),
        ("isolation", Isolation.STRICT, Isolation.STRICT),
        ("max_risk_level", RiskLevel.LOW, RiskLevel.MEDIUM),
        ("guest.pool_size", 10, 2),
        ("max_tier_directory", "community", "trusted"),
    ],
)
def test_what_tightens_or_changes_no_decision_is_not_a_loosening(
    field: str, value: object, default: object
) -> None:
    assert loosening(field, value, default) == ""
