"""JSON given on the command line (``call`` arguments, ``emit --payload``), bounded (issue 15).

:func:`json.loads` has three ways to fail that are not a ``JSONDecodeError``:
an integer of more than 4300 digits (``ValueError``, CPython's limit on
str-to-int conversion), nesting deeper than the recursion limit
(``RecursionError``), and a text so large it exhausts memory. Each is
checked here first, with limits far above any argument a plugin can take
(the channel carries 64-bit integers, and a call's frame is 1 MiB by
default), so every bad input is one usage error naming the argument:

* at most :data:`MAX_JSON_BYTES` bytes of UTF-8;
* nesting at most :data:`MAX_JSON_DEPTH` arrays and objects deep, counted
  in one pass outside strings, before anything is parsed;
* integers of at most :data:`MAX_INTEGER_DIGITS` digits, floats finite;
  ``NaN`` and ``Infinity`` are not JSON (RFC 8259) and are refused.
"""

from __future__ import annotations

import json
import math
from typing import Final

__all__ = ["MAX_INTEGER_DIGITS", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "JsonInputError", "parse_json"]

MAX_JSON_BYTES: Final = 8 * 1024 * 1024
MAX_JSON_DEPTH: Final = 100
#: 20 digits hold every 64-bit integer; a few more let the channel say what is out of range.
MAX_INTEGER_DIGITS: Final = 40


class JsonInputError(ValueError):
    """The text is not JSON caplet will take; the message says why and what to do."""


def parse_json(text: str, what: str) -> object:
    """``text`` as a JSON value, or :class:`JsonInputError` naming ``what`` (``"argument 2"``)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_JSON_BYTES:
        raise JsonInputError(
            f"{what} is {size} bytes of JSON; the limit is {MAX_JSON_BYTES}; pass less data "
            "(a plugin's arguments cross a channel of 1 MiB by default)"
        )
    depth = _depth(text)
    if depth > MAX_JSON_DEPTH:
        raise JsonInputError(
            f"{what} nests arrays and objects {depth} deep; the limit is {MAX_JSON_DEPTH}"
        )
    try:
        value: object = json.loads(
            text,
            parse_int=lambda digits: _integer(digits, what),
            parse_float=lambda digits: _float(digits, what),
            parse_constant=lambda name: _constant(name, what),
        )
    except json.JSONDecodeError as exc:
        raise JsonInputError(
            f"{what} {_shown(text)} is not JSON ({exc.msg}); quote strings, e.g. '\"world\"'"
        ) from None
    return value


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def _depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings (linear, no recursion)."""
    deepest = depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _integer(digits: str, what: str) -> int:
    count = len(digits.lstrip("-"))
    if count > MAX_INTEGER_DIGITS:
        raise JsonInputError(
            f"{what} holds an integer of {count} digits; the limit is {MAX_INTEGER_DIGITS} "
            "(the channel carries 64-bit integers); pass it as a string"
        )
    return int(digits)


def _float(digits: str, what: str) -> float:
    value = float(digits)
    if not math.isfinite(value):
        raise JsonInputError(
            f"{what} holds the number {digits}, too large for a float; pass a string"
        )
    return value


def _constant(name: str, what: str) -> object:
    raise JsonInputError(
        f"{what} holds {name}, which is not JSON (RFC 8259); pass null or a string"
    )
