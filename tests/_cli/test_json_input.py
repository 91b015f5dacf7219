"""JSON on the command line is bounded: every bad input is one usage error (issue 15)."""

from __future__ import annotations

import pytest

from caplet._cli._json_input import (
    MAX_INTEGER_DIGITS,
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    JsonInputError,
    parse_json,
)


def _nested(depth: int) -> object:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('"world"', "world"),
        ("[1, 2.5, null, true]", [1, 2.5, None, True]),
        ('{"a": {"b": ["]]]]"]}}', {"a": {"b": ["]]]]"]}}),
        ("-" + "9" * MAX_INTEGER_DIGITS, -int("9" * MAX_INTEGER_DIGITS)),
        ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, _nested(MAX_JSON_DEPTH)),
        ('"[[[[" ', "[[[["),
        ('"\\"[[["', '"[[['),
    ],
)
def test_json_within_the_limits_parses(text: str, value: object) -> None:
    assert parse_json(text, "argument 1") == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Before: ValueError: Exceeds the limit (4300 digits) for integer string conversion
        ("1" * 5000, "argument 1 holds an integer of 5000 digits; the limit is 40"),
        ("[" + "-" + "1" * 41 + "]", "argument 1 holds an integer of 41 digits"),
        # Before: RecursionError: maximum recursion depth exceeded
        ("[" * 50_000, "argument 1 nests arrays and objects 50000 deep; the limit is 100"),
        ('{"a":' * 101 + "1" + "}" * 101, "argument 1 nests arrays and objects 101 deep"),
        ("NaN", "argument 1 holds NaN, which is not JSON (RFC 8259)"),
        ("[-Infinity]", "argument 1 holds -Infinity, which is not JSON"),
        ("1e999", "argument 1 holds the number 1e999, too large for a float"),
        ("world", "argument 1 'world' is not JSON (Expecting value); quote strings"),
        ('"' + "x" * MAX_JSON_BYTES + '"', f"bytes of JSON; the limit is {MAX_JSON_BYTES}"),
        ("", "argument 1 '' is not JSON"),
    ],
)
def test_json_beyond_the_limits_is_one_error_naming_the_argument(text: str, expected: str) -> None:
    with pytest.raises(JsonInputError) as caught:
        parse_json(text, "argument 1")
    assert expected in str(caught.value)
