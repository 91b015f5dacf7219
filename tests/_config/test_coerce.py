"""Inline config parsing, coercion, validation and redaction."""

from __future__ import annotations

import math

import pytest

from caplet._config._coerce import (
    SECRET_MASK,
    coerce_inline,
    parse_inline,
    redact,
    unknown_keys,
    validate_default,
    validate_value,
)
from caplet._config._schema import ConfigField, ConfigType
from caplet._errors import ConfigError

STRING = ConfigField("root", ConfigType.STRING)
INTEGER = ConfigField("max_kb", ConfigType.INTEGER, minimum=1, maximum=10240)
NUMBER = ConfigField("ratio", ConfigType.NUMBER, default=0.5)
NUMBER_NO_DEFAULT = ConfigField("ratio", ConfigType.NUMBER)
BOOLEAN = ConfigField("verbose", ConfigType.BOOLEAN)
ARRAY = ConfigField("tags", ConfigType.ARRAY)
INT_ARRAY = ConfigField("ports", ConfigType.ARRAY, items=ConfigType.INTEGER, max_length=3)
SECRET = ConfigField("token", ConfigType.STRING, secret=True, max_length=4)


# -- parse_inline ---------------------------------------------------------------------


def test_parse_inline_splits_at_first_equals_and_trims() -> None:
    assert parse_inline([" root = /srv/a=b ", "max_kb=10"]) == [
        ("root", "/srv/a=b"),
        ("max_kb", "10"),
    ]


def test_parse_inline_ignores_entries_without_key_or_equals() -> None:
    assert parse_inline(["=value", "  =x", "novalue", "", "ok="]) == [("ok", "")]


def test_parse_inline_last_value_wins_at_first_position() -> None:
    assert parse_inline(["a=1", "b=2", "a=3"]) == [("a", "3"), ("b", "2")]


def test_unknown_keys_keeps_order_without_repeats() -> None:
    assert unknown_keys([STRING, INTEGER], ["zeta", "root", "alpha", "zeta"]) == ["zeta", "alpha"]


# -- coerce_inline --------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["true", "YES", " y ", "1", "True"])
def test_boolean_true_words(raw: str) -> None:
    assert coerce_inline("p", BOOLEAN, raw) is True


@pytest.mark.parametrize("raw", ["false", "No", "n", "0", " FALSE "])
def test_boolean_false_words(raw: str) -> None:
    assert coerce_inline("p", BOOLEAN, raw) is False


def test_boolean_refuses_other_words() -> None:
    with pytest.raises(ConfigError) as info:
        coerce_inline("fs-read", BOOLEAN, "ture")
    message = str(info.value)
    assert "plugin 'fs-read'" in message
    assert "config field 'verbose' must be a boolean" in message
    assert "got 'ture'" in message
    assert "true/yes/y/1 or false/no/n/0" in message


def test_integer_coerces() -> None:
    assert coerce_inline("p", INTEGER, " 42 ") == 42


@pytest.mark.parametrize("raw", ["4.5", "abc", "", "0x10"])
def test_integer_refuses_non_integers(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"config field 'max_kb' must be an integer.*max_kb=10"):
        coerce_inline("fs-read", INTEGER, raw)


def test_integer_bounds_are_enforced_after_coercion() -> None:
    with pytest.raises(ConfigError) as info:
        coerce_inline("fs-read", INTEGER, "20000")
    assert str(info.value) == (
        "plugin 'fs-read': config field 'max_kb' must be <= 10240, got 20000; "
        "pass a smaller value (max_kb=10240)"
    )


def test_minimum_is_enforced() -> None:
    with pytest.raises(ConfigError) as info:
        coerce_inline("fs-read", INTEGER, "0")
    assert "must be >= 1, got 0; pass a larger value (max_kb=1)" in str(info.value)


def test_number_coerces_to_float() -> None:
    value = coerce_inline("p", NUMBER, "2")
    assert value == 2.0
    assert isinstance(value, float)


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e999", "Infinity"])
def test_number_non_finite_falls_back_to_default(raw: str) -> None:
    assert coerce_inline("p", NUMBER, raw) == 0.5


def test_number_non_finite_without_default_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        coerce_inline("calc", NUMBER_NO_DEFAULT, "nan")
    message = str(info.value)
    assert "plugin 'calc'" in message
    assert "config field 'ratio' must be a finite number, got 'nan'" in message
    assert "ratio=1.5" in message


def test_number_unparsable_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"'ratio' must be a number, got 'lots'; pass a number"):
        coerce_inline("calc", NUMBER, "lots")


def test_string_is_kept_as_is() -> None:
    assert coerce_inline("p", STRING, " spaced ") == " spaced "


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a,b", ("a", "b")),
        ("[a, b]", ("a", "b")),
        (" [ a ,, b , ] ", ("a", "b")),
        ("[a", ("[a",)),
        ("a]", ("a]",)),
        ("", ()),
        ("[]", ()),
    ],
)
def test_array_of_strings(raw: str, expected: tuple[str, ...]) -> None:
    assert coerce_inline("p", ARRAY, raw) == expected


def test_array_items_are_coerced_by_item_type() -> None:
    assert coerce_inline("p", INT_ARRAY, "[80, 443]") == (80, 443)


def test_array_item_error_names_the_item() -> None:
    with pytest.raises(ConfigError) as info:
        coerce_inline("web", INT_ARRAY, "80,http")
    message = str(info.value)
    assert "plugin 'web': config field 'ports' must hold only integers" in message
    assert "'http' at item 2" in message


def test_array_non_finite_item_is_refused() -> None:
    field = ConfigField("weights", ConfigType.ARRAY, items=ConfigType.NUMBER)
    with pytest.raises(ConfigError, match=r"must hold only finite numbers, got 'nan' at item 1"):
        coerce_inline("p", field, "nan,1")


def test_array_max_length_counts_items() -> None:
    with pytest.raises(ConfigError, match=r"'ports' must have at most 3 items, got 4; pass fewer"):
        coerce_inline("web", INT_ARRAY, "1,2,3,4")


# -- validate_value -------------------------------------------------------------------


def test_validate_rejects_bool_for_integer_and_number() -> None:
    with pytest.raises(ConfigError, match=r"'max_kb' must be an integer, got True \(boolean\)"):
        validate_value("p", INTEGER, True)
    with pytest.raises(ConfigError, match=r"'ratio' must be a number, got False \(boolean\)"):
        validate_value("p", NUMBER, False)


def test_validate_rejects_strings_for_numbers() -> None:
    with pytest.raises(ConfigError, match=r"must be an integer, got '5' \(string\)"):
        validate_value("p", INTEGER, "5")


def test_validate_number_accepts_int_and_returns_float() -> None:
    value = validate_value("p", NUMBER, 3)
    assert value == 3.0
    assert isinstance(value, float)


@pytest.mark.parametrize("value", [math.nan, math.inf, 10**400])
def test_validate_number_refuses_non_finite(value: float) -> None:
    with pytest.raises(ConfigError, match="must be a finite number"):
        validate_value("p", NUMBER, value)


def test_validate_integer_refuses_float() -> None:
    with pytest.raises(ConfigError, match=r"must be an integer, got 5.0 \(number\)"):
        validate_value("p", INTEGER, 5.0)


def test_validate_array_from_list_becomes_tuple() -> None:
    assert validate_value("p", INT_ARRAY, [1, 2]) == (1, 2)
    assert validate_value("p", ARRAY, ("x",)) == ("x",)


def test_validate_array_refuses_scalar_and_wrong_items() -> None:
    with pytest.raises(ConfigError, match=r"'tags' must be an array, got 'a,b' \(string\)"):
        validate_value("p", ARRAY, "a,b")
    with pytest.raises(ConfigError, match=r"must hold only integers, got '1' \(string\) at item 2"):
        validate_value("p", INT_ARRAY, [1, "1"])


def test_validate_array_bounds_not_applied_to_items() -> None:
    field = ConfigField("xs", ConfigType.ARRAY, items=ConfigType.INTEGER, maximum=1)
    assert validate_value("p", field, [5, 6]) == (5, 6)


def test_validate_string_max_length() -> None:
    field = ConfigField("greeting", ConfigType.STRING, max_length=5)
    assert validate_value("p", field, "hello") == "hello"
    with pytest.raises(ConfigError) as info:
        validate_value("hello", field, "hello!")
    assert str(info.value) == (
        "plugin 'hello': config field 'greeting' must be at most 5 characters long, "
        "got 6 characters; pass a shorter value"
    )


def test_validate_boolean_strict() -> None:
    assert validate_value("p", BOOLEAN, True) is True
    with pytest.raises(ConfigError, match=r"must be a boolean, got 1 \(integer\)"):
        validate_value("p", BOOLEAN, 1)


def test_fractional_bounds_are_shown_as_written() -> None:
    field = ConfigField("ratio", ConfigType.NUMBER, maximum=0.75)
    with pytest.raises(
        ConfigError, match=r"must be <= 0.75, got 0.8; pass a smaller value \(ratio=0.75\)"
    ):
        validate_value("p", field, 0.8)


def test_secret_values_are_never_echoed_in_errors() -> None:
    with pytest.raises(ConfigError) as info:
        validate_value("mail", SECRET, "hunter2")
    assert "hunter2" not in str(info.value)
    assert "config field 'token'" in str(info.value)
    with pytest.raises(ConfigError) as info2:
        validate_value("mail", SECRET, 12345)
    assert "12345" not in str(info2.value)
    assert "must be a string, got an integer; pass text" in str(info2.value)
    secret_int = ConfigField("pin", ConfigType.INTEGER, secret=True, maximum=9)
    with pytest.raises(ConfigError) as info3:
        coerce_inline("mail", secret_int, "1234")
    assert "1234" not in str(info3.value)
    assert SECRET_MASK in str(info3.value)


# -- validate_default -----------------------------------------------------------------


def test_validate_default_accepts_valid_and_missing_defaults() -> None:
    validate_default(ConfigField("n", ConfigType.INTEGER, default=5, maximum=10))
    validate_default(ConfigField("n", ConfigType.INTEGER))


def test_validate_default_names_field_and_fix() -> None:
    with pytest.raises(ConfigError) as info:
        validate_default(ConfigField("max_kb", ConfigType.INTEGER, default=20000, maximum=10240))
    assert str(info.value) == (
        "config field 'max_kb': default must be <= 10240, got 20000; "
        "change the default in [config.max_kb] (or its bounds)"
    )


def test_validate_default_checks_type() -> None:
    with pytest.raises(ConfigError, match=r"config field 'flag': default must be a boolean"):
        validate_default(ConfigField("flag", ConfigType.BOOLEAN, default="yes"))


# -- redact ---------------------------------------------------------------------------


def test_redact_masks_secrets_and_keeps_unknown_keys() -> None:
    shown = redact([STRING, SECRET], {"root": "/srv", "token": "hunter2", "other": "x"})
    assert shown == {"root": "/srv", "token": SECRET_MASK, "other": "x"}
    assert SECRET_MASK == "******"


def test_redact_returns_a_copy() -> None:
    values = {"token": "hunter2"}
    shown = redact([SECRET], values)
    assert values == {"token": "hunter2"}
    assert shown is not values
