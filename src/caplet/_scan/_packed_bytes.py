"""Bytes built from a literal list of integers: text hidden as numbers.

``bytes([105, 109, 112, ...])``, ``bytearray(...)``, ``array('B', [...]).tobytes()``
and ``bytes(map(f, [...]))`` hold a program as its code points, as
``"".join(map(chr, [...]))`` does; what they make is decoded data, the same family
as base64 (recall16, tune b15-ds-array-tobytes-exec: ``exec(_A.tobytes())``).

The list itself must be written in the file. Written as it is, it counts only when
its integers spell text (printable ASCII and whitespace): a table of magic numbers
or a control sequence is binary data, not a hidden program. Transformed on the way
(a ``map`` or a comprehension over it, a shift or a XOR), it counts whatever the
integers are: the transformation is the decoder.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Mapping, Sequence

__all__ = ["MIN_INTEGERS", "packed_bytes"]

#: The calls that turn integers into bytes (their list argument's place).
_BUILDERS: Mapping[str, int] = {"builtins.bytes": 0, "builtins.bytearray": 0, "array.array": 1}

#: Fewer integers than this are a byte or two of a protocol, not a hidden text.
MIN_INTEGERS = 4

#: Printable ASCII and the whitespace a program holds.
_TEXT = frozenset(range(32, 127)) | {9, 10, 13}


def _integers(node: ast.AST, assigned: Mapping[str, Sequence[ast.expr]]) -> list[int] | None:
    """The integers of a literal list, tuple or set (or a name bound once to one)."""
    if isinstance(node, ast.Name):
        bound = assigned.get(node.id, ())
        node = bound[0] if len(bound) == 1 else node
    if not isinstance(node, ast.List | ast.Tuple | ast.Set) or len(node.elts) < MIN_INTEGERS:
        return None
    values: list[int] = []
    for element in node.elts:
        value = element.value if isinstance(element, ast.Constant) else None
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 0x110000:
            return None  # True is an int, but no code point written out
        values.append(value)
    return values


def _transformed(
    node: ast.AST,
    assigned: Mapping[str, Sequence[ast.expr]],
    resolve: Callable[[ast.AST], Collection[str]],
) -> bool:
    """``map(f, ints)`` or a comprehension over ``ints``: the integers decoded on the way."""
    if isinstance(node, ast.Call) and len(node.args) >= 2 and "builtins.map" in resolve(node.func):
        return any(_integers(a, assigned) is not None for a in node.args[1:])
    if isinstance(node, ast.GeneratorExp | ast.ListComp):
        return any(_integers(g.iter, assigned) is not None for g in node.generators)
    return False


def packed_bytes(
    node: ast.Call,
    funcs: Collection[str],
    assigned: Mapping[str, Sequence[ast.expr]],
    resolve: Callable[[ast.AST], Collection[str]],
) -> bool:
    """``node`` (resolving to ``funcs``) builds bytes out of a literal list of
    integers that spell text, or out of such a list transformed."""
    for name, place in _BUILDERS.items():
        if name not in funcs or len(node.args) <= place:
            continue
        argument = node.args[place]
        values = _integers(argument, assigned)
        if values is not None and all(v in _TEXT for v in values):
            return True
        if _transformed(argument, assigned, resolve):
            return True
    return False
