"""The names a prefilter hit line may bind, and the lines that use them.

A lookup's line binds what other lines use (``ns = vars(builtins)`` on one
line, ``ns[name](code)`` in a function further down): the prefilter's focus
(:mod:`caplet._scan._prefilter`) adds the lines using any name a hit line may
bind, so the AST pass visits the lookup where it is used. Plain text over
the UTF-8 bytes: a name in a comment or a string only costs a visit, and
past :data:`MAX_BOUND` names (each followed costs a pass over the file) the
prefilter visits the whole file instead.
"""

from __future__ import annotations

import keyword
import re
from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

__all__ = ["MAX_BOUND", "follow", "note_binding"]

#: What a hit line may bind, in UTF-8 bytes: the target list before each ``=`` (not
#: ``==``; ``:=`` included), the name after ``as``, the names after ``for``. Every
#: statement of the line counts, not only the first, and every target of a chain or a
#: list: ``x = 1; ns = vars(builtins)``, ``x = ns = ...``, ``(x, ns) = ...``,
#: ``(ns := ...)`` and a target padded far from its line's start would otherwise hide
#: the uses of ``ns`` from the AST pass. A keyword argument taken for a target only
#: costs a visit. Python's re, not RE2, on the few hit lines of a file, each read
#: once; each run starts where the last ended and never backtracks: linear in the line.
_BINDS = re.compile(
    rb"(?<![\w\x80-\xff \t,.()\[\]*:])([\w\x80-\xff \t,.()\[\]*:]++)=(?!=)"
    rb"|\bas[ \t]++([A-Za-z_\x80-\xff][\w\x80-\xff]*+)"
    rb"|\bfor\b([\w\x80-\xff \t,()\[\]*]++)"
)
#: The names of a target list, not an attribute's owner, a call or a subscript's owner.
_TARGET_NAME = re.compile(
    rb"(?<![\w\x80-\xff])([A-Za-z_\x80-\xff][\w\x80-\xff]*+)(?![ \t]*+[.(\[])"
)
#: Keywords match :data:`_BINDS` (``else:``, ``None)``) and bind nothing.
_KEYWORDS: Final = frozenset(k.encode() for k in keyword.kwlist)
#: More names bound on hit lines than this and the whole file is visited (each
#: name followed costs a pass over the file: a minified line binds thousands).
MAX_BOUND = 32


def note_binding(encoded: bytes, position: int, bound: set[bytes], seen: set[int]) -> bool:
    """Add the names the line holding ``position`` may bind (see :data:`_BINDS`);
    False past :data:`MAX_BOUND` names. ``seen`` holds the lines already read: a
    minified line with thousands of hits is read once, not once a hit."""
    start = encoded.rfind(b"\n", 0, position) + 1
    if start in seen:
        return True
    seen.add(start)
    end = encoded.find(b"\n", position)
    for match in _BINDS.finditer(encoded, start, len(encoded) if end < 0 else end):
        targets = match.group(1) or match.group(3)
        names = _TARGET_NAME.findall(targets) if targets else [match.group(2)]
        for name in names:
            if name not in _KEYWORDS:
                bound.add(name)
                if len(bound) > MAX_BOUND:
                    return False
    return True


def follow(
    encoded: bytes,
    bound: set[bytes],
    lines: set[int],
    limit: int,
    newlines: Sequence[int] | None = None,
) -> bool:
    """Add the lines using any name of ``bound``; False past ``limit`` lines.

    What a lookup's line binds is followed to its uses (``ns = vars(builtins)`` on
    one line, ``ns[name](code)`` in a function further down): a visit of the hit
    lines alone would not see the lookup. Plain text (``bytes.find``, at memory
    speed), so a use in a comment or a string only costs a visit. ``newlines``: the
    offsets of ``encoded``'s newlines (:func:`caplet._scan._prefilter_sets.newlines`),
    a use's line looked up there instead of counted.
    """
    for name in bound:
        start = encoded.find(name)
        counted, line = 0, 1  # newlines counted from the last use on: one pass a name
        while start >= 0:
            end = start + len(name)
            before = encoded[start - 1 : start] if start else b""
            after = encoded[end : end + 1]
            if not ((before and _identifier_byte(before)) or (after and _identifier_byte(after))):
                if newlines is None:
                    line += encoded.count(b"\n", counted, start)
                    counted = start
                else:
                    line = bisect_left(newlines, start) + 1
                lines.add(line)
                if len(lines) > limit:
                    return False
            start = encoded.find(name, end)
    return True


def _identifier_byte(byte: bytes) -> bool:
    """Whether a one-byte slice may be part of an identifier (ASCII word or UTF-8)."""
    return byte.isalnum() or byte == b"_" or byte[0] >= 0x80
