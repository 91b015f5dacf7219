"""The literal-only expressions :mod:`caplet._scan._glued_forms` finds, evaluated: a
small evaluator of its own that knows the glues it reads and nothing else (no name, no
call but those below; bounded sizes: ``'%9999999s' % 'a'`` is refused, not built), and
the names a file renames ``operator``'s additions to. Split out of ``_glued_forms`` by
concern (recall12): that module finds the expressions and checks their lines again.
"""

from __future__ import annotations

import ast
import re
import string
from typing import Any, Final

import re2

from caplet._scan._values import OPERATOR_ADDS

__all__ = ["MAX_GLUED", "RefusedError", "literal_value", "renamed_adders", "renamed_back"]

#: ``operator``'s additions by name (:data:`~caplet._scan._values.OPERATOR_ADDS`).
_ADD_NAMES: Final = frozenset(a.removeprefix("operator.") for a in OPERATOR_ADDS)

#: A value longer than this is not built (a literal-only expression of a real file is
#: short; the indicators and names it may spell are shorter still).
MAX_GLUED = 4096
#: ``%`` directives evaluated: ``%s``, ``%(key)s`` and ``%%`` only (a width builds a long
#: value).
_PERCENT = re.compile(r"%(?!s|%|\([^()]*\)s)")
#: A field of ``format`` read: by position or by a keyword (no attribute, no index).
_FIELD = re.compile(r"(?:\d{0,6}|[A-Za-z_]\w*)\Z")
#: Reads a format string's fields.
_FORMATTER: Final = string.Formatter()


class RefusedError(Exception):
    """An expression :func:`literal_value` does not evaluate."""


def literal_value(node: ast.expr) -> str | bytes:
    """The value of a literal-only expression of the spellings this module reads."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for part in node.values:
            field = part
            if isinstance(part, ast.FormattedValue):
                if part.conversion != -1 or part.format_spec is not None:
                    raise RefusedError
                field = part.value
            value = literal_value(field)
            if not isinstance(value, str):
                raise RefusedError
            parts.append(value)
        return _bounded("".join(parts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _repeated(node.left, node.right)
    if isinstance(node, ast.BinOp):
        left = literal_value(node.left)
        if isinstance(node.op, ast.Add):
            return _bounded(_add(left, literal_value(node.right)))
        if isinstance(node.op, ast.Mod) and isinstance(left, str) and not _PERCENT.search(left):
            right = node.right
            args: tuple[str, ...] | dict[str, str]
            if isinstance(right, ast.Dict):
                args = _mapping(right)  # '%(a)s%(b)s' % {'a': 'ev', 'b': 'al'} (attack11)
            else:
                items = right.elts if isinstance(right, ast.Tuple) else [right]
                args = tuple(_text(item) for item in items)
            try:
                return _bounded(left % args)
            except (KeyError, TypeError, ValueError) as exc:  # '%(a)s' % {'b': ''}
                raise RefusedError from exc
        raise RefusedError
    if isinstance(node, ast.Call) and not node.keywords and _adder(node.func):
        if len(node.args) != 2:
            raise RefusedError
        return _bounded(_add(literal_value(node.args[0]), literal_value(node.args[1])))
    if isinstance(node, ast.Call) and _reduce(node):
        return _fold(node.args)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.keywords and node.func.attr != "format":
            raise RefusedError
        return _bounded(_method(node.func, node.args, node.keywords))
    raise RefusedError


def _repeated(left: ast.expr, right: ast.expr) -> str | bytes:
    """``'%s' * 2`` or ``2 * '%s'``, refused before it is built when longer than
    :data:`MAX_GLUED` (recall12: a template itself computed)."""
    if isinstance(left, ast.Constant) and type(left.value) is int:
        left, right = right, left
    if not (isinstance(right, ast.Constant) and type(right.value) is int):
        raise RefusedError
    value, count = literal_value(left), right.value
    if count < 0 or len(value) * count > MAX_GLUED:
        raise RefusedError
    return value * count


def _adder(func: ast.expr) -> bool:
    """Whether ``func`` is one of ``operator``'s additions as a file may call it: bare
    (``from operator import add``), of the module or a name it is bound to
    (``op.concat``), ``str.__add__`` (a renamed one is renamed back by
    :func:`_found`; recall12)."""
    if isinstance(func, ast.Name):
        return func.id in _ADD_NAMES
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.attr in _ADD_NAMES
    )


def _reduce(node: ast.Call) -> bool:
    """``functools.reduce(f, items[, first])`` (``reduce`` bare or an attribute)."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name == "reduce" and not node.keywords and len(node.args) in {2, 3}


def _fold(args: list[ast.expr]) -> str | bytes:
    """``reduce`` of an addition (:func:`_adder`, ``lambda a, b: a + b``, or ``b + a``)
    over a list of literals: the items added in turn, bounded at each step (recall12)."""
    func = args[0]
    order = "forward" if _adder(func) else _adds_parameters(func)
    if order is None or not isinstance(args[1], ast.List | ast.Tuple):
        raise RefusedError
    items = [literal_value(item) for item in args[1].elts]
    if len(args) == 3:
        items.insert(0, literal_value(args[2]))
    if not items:
        raise RefusedError  # reduce() of an empty sequence raises
    total = items[0]
    for item in items[1:]:
        total = _bounded(_add(total, item) if order == "forward" else _add(item, total))
    return total


def _adds_parameters(func: ast.expr) -> str | None:
    """``"forward"`` for ``lambda a, b: a + b``, ``"backward"`` for ``lambda a, b: b + a``
    (a reversed list folded so spells a name too), ``None`` for anything else."""
    if not isinstance(func, ast.Lambda):
        return None
    spec = func.args
    names = [a.arg for a in spec.args]
    body = func.body
    if not (
        len(names) == 2
        and not (spec.posonlyargs or spec.kwonlyargs or spec.vararg or spec.kwarg)
        and isinstance(body, ast.BinOp)
        and isinstance(body.op, ast.Add)
        and isinstance(body.left, ast.Name)
        and isinstance(body.right, ast.Name)
    ):
        return None
    added = [body.left.id, body.right.id]
    return "forward" if added == names else "backward" if added == names[::-1] else None


def _mapping(node: ast.Dict) -> dict[str, str]:
    """A dict of literals (no ``**``)."""
    if any(key is None for key in node.keys):
        raise RefusedError
    return {_text(k): _text(v) for k, v in zip(node.keys, node.values, strict=True) if k}


def _method(func: ast.Attribute, args: list[ast.expr], keywords: list[ast.keyword]) -> str | bytes:
    """A method of :func:`literal_value`'s: ``format`` (``format_map``), ``join`` (``str.join``
    too), ``__add__`` (``str.__add__``, ``operator.add``)."""
    if isinstance(func.value, ast.Name) and len(args) == 2:
        if func.value.id == "str" and func.attr == "join":
            return _joined(_text(args[0]), _texts(args[1]))
        if (func.value.id, func.attr) in {("str", "__add__"), ("operator", "add")}:
            return _add(literal_value(args[0]), literal_value(args[1]))
    if isinstance(func.value, ast.Name) and func.value.id in {"str", "operator"}:
        raise RefusedError
    owner = literal_value(func.value)
    if func.attr == "__add__" and len(args) == 1:
        return _add(owner, literal_value(args[0]))
    if not isinstance(owner, str):
        raise RefusedError
    if func.attr == "join" and len(args) == 1:
        return _joined(owner, _texts(args[0]))
    named: dict[str, str] = {}
    table = args[0] if len(args) == 1 else None
    if func.attr == "format_map" and isinstance(table, ast.Dict):
        func_attr, args, named = "format", [], _mapping(table)
    else:
        func_attr = func.attr
        for keyword in keywords:
            if keyword.arg is None:
                raise RefusedError
            named[keyword.arg] = _text(keyword.value)
    if func_attr == "format" and (args or named):
        values = [_text(arg) for arg in args]
        try:
            # plain fields only: a width, a conversion or an attribute is refused
            fields = list(_FORMATTER.parse(owner))
        except ValueError as exc:
            raise RefusedError from exc
        if any(
            spec or conversion or not _FIELD.match(name or "")
            for _, name, spec, conversion in fields
        ):
            raise RefusedError
        _formatted_length(fields, values, named)
        try:
            return owner.format(*values, **named)
        except (IndexError, KeyError, ValueError) as exc:
            raise RefusedError from exc
    raise RefusedError


def _joined(separator: str, items: list[str]) -> str:
    """``separator.join(items)``, refused before it is built when longer than
    :data:`MAX_GLUED`: a long separator between many short items is as long as their
    product (``'x' * 16000`` joining 4000 blanks is 64 MB from a 28 kB line; attack11)."""
    length = len(separator) * max(len(items) - 1, 0) + sum(len(item) for item in items)
    if length > MAX_GLUED:
        raise RefusedError
    return separator.join(items)


def _formatted_length(
    fields: list[tuple[str, str | None, str | None, str | None]],
    values: list[str],
    named: dict[str, str],
) -> None:
    """Refuses a ``format`` whose value would be longer than :data:`MAX_GLUED`, before
    it is built: a field may name one long argument many times (``'{0}{0}...'.format(
    long)``, as long as their product; attack11)."""
    length, auto = 0, 0
    for literal, name, _, _ in fields:
        length += len(literal)
        if name is None:
            continue
        if name in named:
            length += len(named[name])
        elif len(name) > 6:
            raise RefusedError  # (no argument list is that long)
        else:
            if name:
                index = int(name) if name.isdecimal() else len(values)
            else:
                index, auto = auto, auto + 1
            if index < len(values):
                length += len(values[index])
        if length > MAX_GLUED:
            raise RefusedError


def _texts(node: ast.expr) -> list[str]:
    """The literals of a list or tuple (reversed, or sliced ``[::-1]``)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "reversed"
        and len(node.args) == 1
        and not node.keywords
    ):
        return _texts(node.args[0])[::-1]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        piece = node.slice
        step = piece.step
        if (
            piece.lower is None
            and piece.upper is None
            and isinstance(step, ast.UnaryOp)
            and isinstance(step.op, ast.USub)
            and isinstance(step.operand, ast.Constant)
            and step.operand.value == 1
        ):
            return _texts(node.value)[::-1]
        raise RefusedError
    if isinstance(node, ast.List | ast.Tuple):
        return [_text(item) for item in node.elts]
    raise RefusedError


def _text(node: ast.expr) -> str:
    value = literal_value(node)
    if not isinstance(value, str):
        raise RefusedError
    return value


def _add(left: str | bytes, right: str | bytes) -> str | bytes:
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    if isinstance(left, bytes) and isinstance(right, bytes):
        return left + right
    raise RefusedError


def _bounded(value: str | bytes) -> str | bytes:
    if len(value) > MAX_GLUED:
        raise RefusedError
    return value


#: ``from operator import add as glue`` (in parentheses, over lines) and ``glue =
#: operator.add``: where a file renames one of operator's additions.
#: Searched by RE2, on the file's text as the prefilter decoded it: Python's ``re`` tried a
#: name before ``=`` at every position, a second of CPU on the stdlib's marked files.
_RENAMING: Any = re2.compile(
    r"(?m)\bfrom\s+operator\s+import\s*(?:\(([^)]*)\)|([^\n;#]*(?:\\\n[^\n;#]*)*))|"
    r"^[ \t]*([^\s=#;:()\[\]{},.'\"]+)[ \t]*=[ \t]*operator[ \t]*\.[ \t]*(\w+)[ \t]*(?:[#;\n]|$)"
)
#: Names a file renames operator's additions to, read at most (then none: the renamed
#: calls of a file that renames more are left to the whole-file pass's other triggers).
_MAX_RENAMED = 16


def renamed_adders(text: str) -> frozenset[str]:
    """The names ``text`` binds one of ``operator``'s additions to, other than its own
    (``from operator import add as glue``, ``glue = operator.add``; recall12)."""
    if "operator" not in text:
        return frozenset()
    found: set[str] = set()
    for match in _RENAMING.finditer(text):
        listed, line, bound, attr = match.groups()
        imported = (listed if listed is not None else line) or ""
        if bound is not None:
            if attr in _ADD_NAMES and bound not in _ADD_NAMES and bound.isidentifier():
                found.add(bound)
            continue
        for item in imported.replace("\\", " ").split(","):
            words = item.split()
            if (
                len(words) == 3
                and words[0] in _ADD_NAMES
                and words[1] == "as"
                and words[2].isidentifier()
            ):
                found.add(words[2])
        if len(found) > _MAX_RENAMED:
            break
    return frozenset(sorted(found)[:_MAX_RENAMED])


def renamed_back(expression: ast.expr, renamed: frozenset[str]) -> ast.expr:
    """``expression`` with a renamed addition, called or folded, named ``add`` again (its
    literals untouched: a literal spelling the new name is still that literal)."""
    for node in ast.walk(expression):
        if isinstance(node, ast.Call):
            callees = [node.func, *(node.args[:1] if _reduce(node) else [])]
            for callee in callees:
                if isinstance(callee, ast.Name) and callee.id in renamed:
                    callee.id = "add"
    return expression
