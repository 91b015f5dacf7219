"""Text the file declares rather than computes, read by the evaluator (blind18): an enum
member's ``name``, a named tuple's ``_fields``, the module's own ``__doc__``, and ``iter``
of a value the evaluator knows.

Each is as constant as a literal: ``getattr(os, Op.system.name)`` is ``getattr(os,
"system")`` once ``class Op(enum.Enum): system = 1`` is read, ``[*Step._fields[:2]]`` after
``Step = namedtuple("Step", "pip install")`` is ``["pip", "install"]``, and a module's
``__doc__`` is its docstring, the text a name may be picked out of letter by letter (tune
b18-cn-enum-member-name, -namedtuple-fields-pip, -module-docstring-letters,
-kwargs-key-name). Only names the file defines once and never rebinds are read.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Final

from caplet._scan._syntax import Bindings
from caplet._scan._values import Value

__all__ = ["declared_member", "is_iter_call", "module_docstring"]

#: The bases that make a class an enumeration, whose members' ``name`` is their own.
_ENUM_BASES: Final = frozenset(
    {"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag"}
)
#: The factories of named tuples: ``namedtuple("T", "a b")``, ``NamedTuple("T", [...])``.
_TUPLE_FACTORIES: Final = frozenset({"collections.namedtuple", "typing.NamedTuple"})
#: A named tuple's fields at most (the standard library refuses none, a payload needs few).
_MAX_FIELDS = 64

Resolve = Callable[[ast.AST], tuple[str, ...]]
Evaluate = Callable[[ast.AST], "Value | None"]


def _own_class(name: str, bindings: Bindings) -> ast.ClassDef | None:
    """The one class of this file called ``name``, never rebound by an assignment or an
    import."""
    found = bindings.classes.get(name, [])
    if len(found) != 1 or name in bindings.assigned or name in bindings.imports:
        return None
    return found[0]


def _enum_member(node: ast.Attribute, bindings: Bindings, resolve: Resolve) -> str | None:
    """``Op.system.name``: the member's name when ``Op`` is an enumeration of this file
    that assigns ``system`` in its body."""
    member = node.value
    if node.attr != "name" or not isinstance(member, ast.Attribute):
        return None
    owner = member.value
    cls = _own_class(owner.id, bindings) if isinstance(owner, ast.Name) else None
    if cls is None or not any(_ENUM_BASES.intersection(resolve(b)) for b in cls.bases):
        return None
    return member.attr if member.attr in bindings.class_assigned.get(cls.name, ()) else None


def _tuple_fields(
    node: ast.Attribute, bindings: Bindings, resolve: Resolve, evaluate: Evaluate
) -> list[Value] | None:
    """``T._fields``: the field names of a named tuple bound once to ``T`` by a factory
    given them as a string or a list of strings, or of a ``typing.NamedTuple`` class of
    this file (its annotated names, in order)."""
    owner = node.value
    if node.attr != "_fields" or not isinstance(owner, ast.Name):
        return None
    bound = bindings.assigned.get(owner.id, [])
    if len(bound) == 1 and isinstance(bound[0], ast.Call) and len(bound[0].args) >= 2:
        call = bound[0]
        if not _TUPLE_FACTORIES.intersection(resolve(call.func)):
            return None
        spec = evaluate(call.args[1])
        names = spec.replace(",", " ").split() if isinstance(spec, str) else spec
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return list(names[:_MAX_FIELDS]) if len(names) <= _MAX_FIELDS else None
        return None
    cls = None if bound else _own_class(owner.id, bindings)
    if cls is None or not any("typing.NamedTuple" in resolve(b) for b in cls.bases):
        return None
    fields: list[Value] = [
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]
    return fields[:_MAX_FIELDS]


def declared_member(
    node: ast.Attribute, bindings: Bindings, resolve: Resolve, evaluate: Evaluate
) -> Value | None:
    """The value of ``node`` when it reads text a declaration of this file holds: an enum
    member's ``name``, a named tuple's ``_fields``; else ``None``."""
    if node.attr == "name":
        return _enum_member(node, bindings, resolve)
    if node.attr == "_fields":
        return _tuple_fields(node, bindings, resolve, evaluate)
    return None


def module_docstring(name: str, bindings: Bindings) -> str | None:
    """``__doc__`` read as a name: the module's docstring, as the interpreter keeps it
    (uncleaned), when the file never binds ``__doc__`` itself."""
    if name != "__doc__" or name in bindings.assigned or name in bindings.imports:
        return None
    return bindings.docstring


def is_iter_call(node: ast.AST, resolve: Resolve) -> ast.expr | None:
    """The argument of ``iter(x)`` (one argument, the builtin): iterated as ``x`` is."""
    if (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and not node.keywords
        and "builtins.iter" in resolve(node.func)
    ):
        return node.args[0]
    return None
