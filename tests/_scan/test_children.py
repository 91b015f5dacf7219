"""The survey's child table: the same children as ``ast.iter_child_nodes``, faster (issue 16)."""

from __future__ import annotations

import ast
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

from caplet._scan._children import ANY, MANY, ONE, SKIPPED_FIELDS, child_fields
from caplet._scan._syntax import TooComplex, survey

STDLIB = Path(sysconfig.get_paths()["stdlib"])
#: What ast.walk yields that the survey never lists (and no rule visits).
_TOKENS = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)

#: Every corner of the grammar a field may hold something else than nodes in: a dict's
#: ``**`` entry (None among the keys), keyword-only parameters without a default (None
#: among the defaults), names of global/nonlocal (strings in a list), match patterns
#: with keyword attributes (strings in a list), a type comment, an f-string's format.
CORNERS = textwrap.dedent(
    """
    import os, sys as system
    from . import sibling
    from pkg.mod import *
    X: int = 1
    def f(a, /, b=2, *args, c, d=4, **kw) -> None:  # type: ignore
        global G
        x = 1  # type: int
        def g():
            nonlocal x
            x += 1
        return {**kw, "k": a, None: b}
    async def h():
        async with a as (b, c):
            async for i in b:
                await i
        yield from ()
    class C(Base, metaclass=M):
        @dec
        def m(self): return lambda q, *, r: (q, r)
    match command:
        case Point(x=0, y=yy) | [1, *rest] if yy:
            pass
        case {"k": v, **others}:
            pass
        case None | True:
            pass
        case str() as s:
            pass
    try:
        pass
    except* ValueError as e:
        raise RuntimeError from e
    finally:
        del x[1:2:3]
    print(f"{x!r:>{width}}", [y for y in z if y], {k: v for k, v in w}, {s for s in t})
    assert (n := 3), "msg"
    while not x: break
    """
)


def _children_by_table(node: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    for name, how in child_fields(type(node)):
        value: Any = getattr(node, name, None)
        if how == ONE:
            if value is not None:
                out.append(value)
        elif how == MANY:
            out.extend(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def _expected(node: ast.AST) -> list[ast.AST]:
    return [
        child
        for name, value in ast.iter_fields(node)
        if name not in SKIPPED_FIELDS
        for child in (value if isinstance(value, list) else [value])
        if isinstance(child, ast.AST)
    ]


@pytest.mark.parametrize(
    "source",
    [CORNERS, (STDLIB / "tarfile.py").read_text(encoding="utf-8")],
    ids=["grammar-corners", "tarfile"],
)
def test_the_table_gives_every_child_iter_child_nodes_gives(source: str) -> None:
    tree = ast.parse(source, type_comments=True)
    for node in ast.walk(tree):
        assert [id(c) for c in _children_by_table(node)] == [id(c) for c in _expected(node)]


def test_the_survey_lists_ast_walks_nodes_without_the_tokens() -> None:
    tree = ast.parse(CORNERS)
    surveyed = survey(tree, 100, 1_000_000)
    assert not isinstance(surveyed, TooComplex)
    walked = [n for n in ast.walk(tree) if not isinstance(n, _TOKENS)]
    assert sorted(map(id, surveyed.nodes)) == sorted(map(id, walked))
    assert len(surveyed.nodes) == len(walked)


def test_leaves_have_no_child_field_and_lists_with_none_are_checked() -> None:
    assert child_fields(ast.Name) == ()
    assert child_fields(ast.Constant) == ()
    assert child_fields(ast.Global) == ()
    assert child_fields(ast.Call) == (("func", ONE), ("args", MANY), ("keywords", MANY))
    assert ("keys", ANY) in child_fields(ast.Dict)
    assert ("kw_defaults", ANY) in child_fields(ast.arguments)


class _Foreign(ast.AST):
    """A node class the table does not know (another Python's grammar)."""

    _fields = ("name", "body", "value")
    name: str
    body: list[Any]
    value: ast.AST


class _Renamed(ast.AST):
    """A class named like a grammar class whose fields differ: not the grammar's."""

    _fields = ("func", "args", "extra")


_Renamed.__name__ = "Call"


def test_a_class_the_table_does_not_know_is_walked_field_by_field() -> None:
    assert child_fields(_Foreign) == (("name", ANY), ("body", ANY), ("value", ANY))
    assert child_fields(_Renamed) == (("func", ANY), ("args", ANY), ("extra", ANY))
    inner = ast.Name("x", ast.Load())
    node = _Foreign()
    node.name = "not a node"
    node.body = [inner, "text", None]
    node.value = ast.Constant(1)
    assert _children_by_table(node) == [inner, node.value]
