"""TOML that someone else wrote, parsed with bounded cost.

caplet parses TOML it does not control: a plugin's ``plugin.toml`` (the
author's), ``caplet.toml``/``pyproject.toml`` and ``caplet.lock`` (a project
checkout's). :mod:`tomllib` is correct but not linear on hostile input:

* a dotted key of *n* parts (``a.a.a...a = 1``) costs O(n²) time and memory,
  because the parser records every prefix of the key as a tuple of its own
  (``header + key[:i]`` for each *i*, in ``tomllib._parser.key_value_rule``):
  a 40 KB key took 1.5 GB and a 1 MiB one (the size caplet accepts) would
  take terabytes, so one plugin folder stopped ``caplet list`` and every
  host start on the machine (red-team round 3);
* nested arrays and inline tables recurse, and deep ones raise
  :class:`RecursionError`, which is no :class:`tomllib.TOMLDecodeError`;
* a decimal integer of more than 4,300 digits raises the :class:`ValueError`
  of CPython's limit on converting text to int (``sys.set_int_max_str_digits``),
  also no :class:`tomllib.TOMLDecodeError`, and a hexadecimal, octal or binary
  one (which the limit does not cover) parses to an int that raises it later,
  wherever it is shown: a manifest's ``limits.timeout_ms = 0xfff...`` reached
  pydantic's error message, and either one stopped ``caplet list`` for every
  plugin beside it (attack29).

So before :func:`tomllib.loads`, a linear pass counts the dots outside
strings and comments (every part of a dotted key after the first is one)
and refuses a line with more than :data:`MAX_DOTS_PER_LINE` or a document
with more than :data:`MAX_DOTS`; that bounds the parser's prefix tuples to
about ``MAX_DOTS * MAX_DOTS_PER_LINE`` entries. A float counts too (no
policy, manifest or lock file writes hundreds on one line). A
:class:`RecursionError` becomes the same :class:`TomlLimitError`, and so does
an integer outside TOML's own range: TOML 1.0 says integers are 64-bit and
one that cannot be kept losslessly "must" be an error, and no caplet file
holds a larger one. No TOML
parser in PyPI's well-kept set bounds key depth; this guard is the small
piece that is missing, not a parser of our own.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any, Final

__all__ = ["MAX_DOTS", "MAX_DOTS_PER_LINE", "TomlLimitError", "parse_toml"]

#: TOML 1.0's integers: "Arbitrary 64-bit signed integers (from -2^63 to 2^63-1)".
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**63 - 1

#: Dots outside strings on one line: a key of more parts than this is no policy's or manifest's.
MAX_DOTS_PER_LINE: Final = 64
#: Dots outside strings in the whole document.
MAX_DOTS: Final = 20_000

#: The tokens that matter: comments and strings (skipped whole), dots and newlines (counted).
#: Each alternative starts with a different character and none can match the empty string
#: ambiguously, so the scan is linear (re never backtracks into an earlier token).
_TOKENS: Final = re.compile(
    r"""
      \#[^\n]*                                  # a comment, to the end of the line
    | \"\"\"(?:[^\\"]|\\.|"(?!""))*(?:\"\"\"\"{0,2}|\Z)   # a multi-line basic string
    | '''(?:[^']|'(?!''))*(?:'''(?:'{0,2})|\Z)  # a multi-line literal string
    | "(?:[^"\\\n]|\\.)*(?:"|$)                 # a basic string (or a key)
    | '[^'\n]*(?:'|$)                           # a literal string (or a key)
    | \.                                        # a dot: one more key part (or a float)
    | \n                                        # the end of a line
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)


class TomlLimitError(ValueError):
    """The document is nested deeper, or holds a larger integer, than any caplet file
    does (see the module docstring).

    Its message says where and what to do; callers name the file in front of it.
    """


def parse_toml(text: str) -> dict[str, Any]:
    """:func:`tomllib.loads`, refusing first what would make it super-linear.

    Raises :class:`tomllib.TOMLDecodeError` for invalid TOML and
    :class:`TomlLimitError` for a document beyond the bounds.
    """
    _check_dots(text)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise TomlLimitError(
            "arrays or inline tables nested too deeply for any caplet file; flatten them"
        ) from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:
        # int() of a decimal past sys.get_int_max_str_digits() digits: tomllib lets
        # it through as it is, and its text names no line (attack29).
        raise TomlLimitError(_TOO_LARGE) from None
    _check_integers(data)
    return data


_TOO_LARGE: Final = (
    "an integer outside TOML's 64-bit range (-2**63 to 2**63-1), far larger than any "
    "caplet file holds; write a smaller number"
)


def _check_integers(data: dict[str, Any]) -> None:
    """Refuse an integer outside TOML's range (a hexadecimal, octal or binary one of
    any length parses). Iterative: the document's depth is the parser's, already
    bounded by its recursion."""
    pending: list[object] = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, int) and not _INT_MIN <= value <= _INT_MAX:
            raise TomlLimitError(_TOO_LARGE)


def _check_dots(text: str) -> None:
    line = 1
    on_line = 0
    total = 0
    for match in _TOKENS.finditer(text):
        found = match.group()
        if found == ".":
            on_line += 1
            total += 1
            if on_line > MAX_DOTS_PER_LINE:
                raise TomlLimitError(
                    f"line {line} has more than {MAX_DOTS_PER_LINE} dots outside strings (a "
                    "dotted key of that many parts makes the TOML parser take quadratic time "
                    "and memory); use shorter keys, and write long arrays over several lines"
                )
            if total > MAX_DOTS:
                raise TomlLimitError(
                    f"more than {MAX_DOTS} dots outside strings (dotted keys or floats), far "
                    "more than any caplet file has; this is not a caplet file"
                )
        elif found == "\n":
            line += 1
            on_line = 0
        else:
            # A string or comment may span lines: keep counting lines through it.
            line += found.count("\n")
            if "\n" in found:
                on_line = 0
