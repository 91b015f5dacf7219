"""Which plugins may load: locked mode from the environment, the allowlist, autoload."""

from __future__ import annotations

import pytest

from caplet._host._loading import LoadingRules, env_flag


@pytest.mark.parametrize(
    ("env", "locked"),
    [
        ({}, False),
        ({"CI": "true"}, True),
        ({"CI": "1"}, True),
        ({"CI": "false"}, False),
        ({"CAPLET_LOCKED": "1"}, True),
        ({"CI": "true", "CAPLET_LOCKED": "0"}, False),
        ({"CAPLET_LOCKED": "yes"}, True),
    ],
)
def test_locked_mode_from_the_environment(env: dict[str, str], locked: bool) -> None:
    assert LoadingRules.from_environment(env).locked is locked


def test_an_explicit_choice_overrides_the_environment() -> None:
    assert LoadingRules.from_environment({"CI": "true"}, locked=False).locked is False
    assert LoadingRules.from_environment({}, locked=True).locked is True


def test_allowlist() -> None:
    unset = LoadingRules.from_environment({})
    assert unset.allowlist is None
    assert unset.allows("anything")
    rules = LoadingRules.from_environment({"CAPLET_LOAD_PLUGINS": " a, b ,"})
    assert rules.allowlist == frozenset({"a", "b"})
    assert rules.allows("a")
    assert not rules.allows("c")
    empty = LoadingRules.from_environment({"CAPLET_LOAD_PLUGINS": ""})
    assert empty.allowlist == frozenset()
    assert not empty.allows("a"), "set and empty loads none"


def test_autoload_switch() -> None:
    assert LoadingRules.from_environment({}).discovers_installed("x")
    off = LoadingRules.from_environment({"CAPLET_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert not off.autoload
    assert not off.discovers_installed("x")
    listed = LoadingRules.from_environment(
        {"CAPLET_DISABLE_PLUGIN_AUTOLOAD": "1", "CAPLET_LOAD_PLUGINS": "x"}
    )
    assert listed.discovers_installed("x")
    assert not listed.discovers_installed("y")


def test_env_flag() -> None:
    assert [env_flag(v) for v in ("1", "TRUE", "on", "0", "", None, "nope")] == [
        True,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
