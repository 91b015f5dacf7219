"""Strings the code computes, handed to the indicator rules beside its literals (issue 16).

The indicator rules (:mod:`caplet._scan._indicators`) read the file's string constants. A
dropper that spells ``Login Data``, ``stratum+tcp://`` or ``~/.bashrc`` as
``"Log" + "in Da" + "ta"``, ``"".join(map(chr, [...]))``, ``"...".replace("#", "")``,
``"..."[::-1]``, ``"%s%s" % (...)``, ``bytes.fromhex(...).decode()`` or
``codecs.decode(..., "rot13")`` has no literal that matches. The constant evaluator
(:mod:`caplet._scan._evaluate`, bounded, nothing of the scanned code runs) already knows
those values; this module picks the expressions that build text and asks it for them.

Only the outermost pieces of text matter, but every candidate is evaluated (memoised, so
an inner piece costs nothing more) and the evaluator's per-file budget bounds the whole.
It runs after the other rules of the file, so it never spends budget they need.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Sequence
from itertools import compress

from caplet._scan._flow import Flow

__all__ = ["MAX_CANDIDATES", "computed_strings"]

#: Text-building expressions evaluated per file at most (a file of thousands of string
#: concatenations is a data table; its literals are read anyway).
MAX_CANDIDATES = 2000

#: The shortest computed text worth matching (the literals' own threshold).
_MIN_LENGTH = 5

#: Methods whose result is text built from their receiver or arguments.
_TEXT_METHODS = frozenset(
    {
        "join",
        "format",
        "format_map",
        "decode",
        "replace",
        "translate",
        "lower",
        "upper",
        "swapcase",
        "strip",
        "fromhex",
        "b64decode",
        "b32decode",
        "b32hexdecode",
        "b16decode",
        "b85decode",
        "a85decode",
        "urlsafe_b64decode",
        "decodebytes",
        "unhexlify",
        "a2b_hex",
        "a2b_base64",
        "decompress",
        "encode",
        # "Lo".__add__("gin Data"): a + spelled as a call (recall10)
        "__add__",
    }
)

#: Builtins whose result is text built from their arguments.
_TEXT_BUILTINS = frozenset({"chr", "str", "bytes", "bytearray"})


#: The node types that may build text (the rest are skipped with one set lookup).
_KINDS = frozenset({ast.BinOp, ast.JoinedStr, ast.Subscript, ast.Call})


def _builds_text(node: ast.AST) -> bool:
    """An expression that may compute text out of literals (cheap syntactic test)."""
    kind = type(node)
    if kind is ast.BinOp:
        return isinstance(node.op, ast.Add | ast.Mod)  # type: ignore[attr-defined]
    if kind is ast.JoinedStr:
        return True
    if kind is ast.Subscript:
        return isinstance(node.slice, ast.Slice)  # type: ignore[attr-defined]
    if kind is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Attribute):
            return func.attr in _TEXT_METHODS
        return isinstance(func, ast.Name) and func.id in _TEXT_BUILTINS
    return False


def computed_strings(
    flow: Flow, nodes: Sequence[ast.AST], visited: Collection[int] | None
) -> tuple[list[tuple[str, int, int]], int | None]:
    """``(text, line, column)`` of every text-building expression whose value the
    evaluator computes (on the focus statements only, when the pass has a focus), and
    the line of the first one left unevaluated past :data:`MAX_CANDIDATES` (``None``
    when every one was): the caller says so, since padding a file with 2,000 harmless
    concatenations before a split indicator hid it silently (attack5)."""
    found: list[tuple[str, int, int]] = []
    taken = 0
    # only the nodes of the four classes that may build text (a tenth of a file's nodes),
    # picked at C speed; and of them, in a focused pass, those in the focus
    candidates = compress(nodes, map(_KINDS.__contains__, map(type, nodes)))
    if visited is not None:
        kept = list(candidates)
        candidates = compress(kept, map(visited.__contains__, map(id, kept)))
    for node in candidates:
        if not _builds_text(node):
            continue
        taken += 1
        if taken > MAX_CANDIDATES:
            return found, getattr(node, "lineno", 1)
        value = flow.evaluate(node)
        if isinstance(value, bytes):
            text = value.decode("latin-1")
        elif isinstance(value, str):
            text = value
        else:
            continue
        if len(text) >= _MIN_LENGTH:
            found.append((text, getattr(node, "lineno", 0), getattr(node, "col_offset", 0)))
    return found, None
