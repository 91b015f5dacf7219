"""Policy, ContextLimits and GuestLimits refuse bad values at construction (issue 15)."""

from __future__ import annotations

import dataclasses

import pytest

from caplet._errors import PolicyError
from caplet._findings import RiskLevel
from caplet._host._context_limits import ContextLimits
from caplet._host._guest_limits import GuestLimits
from caplet._host._policy import Isolation, Policy, TrustTier


def test_the_defaults_are_valid_and_unchanged() -> None:
    policy = Policy()
    assert policy.max_risk_level is RiskLevel.MEDIUM
    assert policy.isolation is Isolation.STRICT
    assert policy.memory_mb == 512
    assert policy.guest == GuestLimits()
    assert policy.context == ContextLimits()


def test_values_as_a_file_writes_them_are_accepted() -> None:
    """Enumerations by value (any case for a risk level), lists, nested tables."""
    policy = Policy(
        isolation="best-effort",  # type: ignore[arg-type]
        max_risk_level="high",  # type: ignore[arg-type]
        max_tier_directory="community",  # type: ignore[arg-type]
        trusted_keys=["RWQ..."],  # type: ignore[arg-type]
        cooldown_s=5,
        network={"allowed_networks": ["127.0.0.0/8"]},  # type: ignore[arg-type]
        guest={"pool_size": 0},  # type: ignore[arg-type]
    )
    assert policy.isolation is Isolation.BEST_EFFORT
    assert policy.max_risk_level is RiskLevel.HIGH
    assert policy.max_tier_directory is TrustTier.COMMUNITY
    assert policy.trusted_keys == ("RWQ...",)
    assert policy.cooldown_s == 5.0
    assert policy.guest.pool_size == 0
    assert str(policy.network.allowed_networks[0]) == "127.0.0.0/8"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"memory_mb": True},
            "memory_mb: True is not valid: expected a whole number (the default is 512)",
        ),
        ({"memory_mb": "512"}, "memory_mb: '512' is not valid: expected a whole number"),
        ({"memory_mb": 0}, "memory_mb: 0 is not valid: input should be greater than or equal to 1"),
        ({"cpu_s": 10**30}, "cpu_s: 1000000000000000000000000000000 is not valid"),
        (
            {"cpu_cores": 0},
            "cpu_cores: 0 is not valid: input should be greater than or equal to 0.01 (the "
            "default is 1)",
        ),
        ({"cpu_cores": True}, "cpu_cores: True is not valid"),
        ({"cpu_cores": float("inf")}, "cpu_cores: inf is not valid"),
        ({"guest": {"cpu_cores": 5000}}, "guest.cpu_cores: 5000 is not valid"),
        ({"cooldown_s": float("nan")}, "cooldown_s: nan is not valid: input should be a finite"),
        (
            {"cooldown_s": -1},
            "cooldown_s: -1 is not valid: input should be greater than or equal to 0",
        ),
        (
            {"isolation": "lenient"},
            "isolation: 'lenient' is not valid: input should be 'strict' or 'best-effort'",
        ),
        (
            {"max_risk_level": "extreme"},
            "max_risk_level: 'EXTREME' is not valid: input should be 'LOW', 'MEDIUM', 'HIGH' "
            "or 'CRITICAL' (the default is 'MEDIUM')",
        ),
        ({"worker_uid": 0}, "worker_uid: 0 is not valid: workers never run as root"),
        ({"worker_gid": 2**32}, "worker_gid: 4294967296 is not valid"),
        (
            {"allow_broad_paths": "yes"},
            "allow_broad_paths: 'yes' is not valid: expected true or false",
        ),
        ({"network": {"max_redirects": -1}}, "network.max_redirects: -1 is not valid"),
        (
            {"guest": {"timeout_ms": 1.5}},
            "guest.timeout_ms: 1.5 is not valid: expected a whole number",
        ),
        ({"context": {"kv_max_keys": None}}, "context.kv_max_keys: None is not valid"),
        ({"network": 5}, "network: 5 is not valid: expected a table"),
        ({"memroy_mb": 5}, "memroy_mb: unknown field (did you mean 'memory_mb'?)"),
        (
            {"guest": {"pool": 1}},
            "guest.pool: unknown field; fields: pool_size, timeout_ms, max_timeout_ms,",
        ),
        (
            {"default_timeout_ms": 70_000},
            "default_timeout_ms (70000) is above max_timeout_ms (60000); lower default_timeout_ms "
            "or raise max_timeout_ms",
        ),
        ({"guest": {"timeout_ms": 90_000}}, "timeout_ms (90000) is above max_timeout_ms (60000)"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field_the_value_and_the_default(
    given: dict[str, object], expected: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        Policy(**given)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("invalid policy: ")
    assert expected in message
    assert caught.value.problems


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(PolicyError) as caught:
        Policy(memory_mb=-1, cpu_s=True, network={"max_redirects": "5"})  # type: ignore[arg-type]
    assert [p.field for p in caught.value.problems] == [
        "memory_mb",
        "cpu_s",
        "network.max_redirects",
    ]


def test_replace_validates_too() -> None:
    """dataclasses.replace builds a new object through the same checks."""
    policy = Policy()
    assert dataclasses.replace(policy, memory_mb=64).memory_mb == 64
    with pytest.raises(PolicyError, match="memory_mb: -5 is not valid"):
        dataclasses.replace(policy, memory_mb=-5)


def test_the_objects_stay_frozen_and_hashable() -> None:
    policy = Policy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.memory_mb = 1  # type: ignore[misc]
    assert hash(policy) == hash(Policy())
    assert Policy(memory_mb=100) != policy


def test_limits_objects_validate_on_their_own() -> None:
    with pytest.raises(PolicyError, match=r"^invalid guest limits: pool_size: -1 is not valid"):
        GuestLimits(pool_size=-1)
    with pytest.raises(PolicyError, match=r"^invalid context limits: kv_max_bytes: 0 is not valid"):
        ContextLimits(kv_max_bytes=0)
