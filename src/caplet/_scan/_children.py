"""Which fields of a syntax node hold nodes: the survey's child table (issue 16).

The survey (:mod:`caplet._scan._syntax`) lists every node of every parsed file,
the scanner's hottest loop. :func:`ast.iter_child_nodes` asks every field of
every node whether it holds a node or a list of them, and filters each list
item by item; the grammar already says. :func:`child_fields` gives, per node
class, only the fields that can hold nodes, each with how to take its children:
one node (or ``None``), a list of nodes, or (:data:`ANY`) checked item by item
as ``iter_child_nodes`` does: the lists that may hold ``None`` (a dict's ``**``
entries, keyword-only parameters without a default), and every field of a class
whose fields are not the ones written here (another Python's grammar), so a
grammar this table does not know is walked exactly, only slower. A name, a
constant and the other leaves have no child field at all.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ANY", "MANY", "ONE", "SKIPPED_FIELDS", "child_fields"]

#: Fields never worth a visit: expression contexts and operators are singletons
#: with no position, read directly by the rules that need them.
SKIPPED_FIELDS: Final = frozenset({"ctx", "op", "ops"})
#: How a field holds its children: one node or ``None``; a list of nodes; unknown.
ONE: Final = 0
MANY: Final = 1
ANY: Final = 2

#: Python 3.11's grammar (Parser/Python.asdl) for the classes the walk meets: each
#: class's fields in order, ``*`` a list of nodes, ``?`` checked item by item
#: (a list that may hold ``None``), ``=`` a name, number or constant (no child).
_GRAMMAR: Final[dict[str, tuple[str, ...]]] = {
    "Module": ("body*", "type_ignores*"),
    "Interactive": ("body*",),
    "Expression": ("body",),
    "FunctionDef": ("=name", "args", "body*", "decorator_list*", "returns", "=type_comment"),
    "AsyncFunctionDef": (
        "=name",
        "args",
        "body*",
        "decorator_list*",
        "returns",
        "=type_comment",
    ),
    "ClassDef": ("=name", "bases*", "keywords*", "body*", "decorator_list*"),
    "Return": ("value",),
    "Delete": ("targets*",),
    "Assign": ("targets*", "value", "=type_comment"),
    "AugAssign": ("target", "value"),
    "AnnAssign": ("target", "annotation", "value", "=simple"),
    "For": ("target", "iter", "body*", "orelse*", "=type_comment"),
    "AsyncFor": ("target", "iter", "body*", "orelse*", "=type_comment"),
    "While": ("test", "body*", "orelse*"),
    "If": ("test", "body*", "orelse*"),
    "With": ("items*", "body*", "=type_comment"),
    "AsyncWith": ("items*", "body*", "=type_comment"),
    "Match": ("subject", "cases*"),
    "Raise": ("exc", "cause"),
    "Try": ("body*", "handlers*", "orelse*", "finalbody*"),
    "TryStar": ("body*", "handlers*", "orelse*", "finalbody*"),
    "Assert": ("test", "msg"),
    "Import": ("names*",),
    "ImportFrom": ("=module", "names*", "=level"),
    "Global": ("=names",),
    "Nonlocal": ("=names",),
    "Expr": ("value",),
    "Pass": (),
    "Break": (),
    "Continue": (),
    "BoolOp": ("values*",),
    "NamedExpr": ("target", "value"),
    "BinOp": ("left", "right"),
    "UnaryOp": ("operand",),
    "Lambda": ("args", "body"),
    "IfExp": ("test", "body", "orelse"),
    "Dict": ("keys?", "values*"),
    "Set": ("elts*",),
    "ListComp": ("elt", "generators*"),
    "SetComp": ("elt", "generators*"),
    "DictComp": ("key", "value", "generators*"),
    "GeneratorExp": ("elt", "generators*"),
    "Await": ("value",),
    "Yield": ("value",),
    "YieldFrom": ("value",),
    "Compare": ("left", "comparators*"),
    "Call": ("func", "args*", "keywords*"),
    "FormattedValue": ("value", "=conversion", "format_spec"),
    "JoinedStr": ("values*",),
    "Constant": ("=value", "=kind"),
    "Attribute": ("value", "=attr"),
    "Subscript": ("value", "slice"),
    "Starred": ("value",),
    "Name": ("=id",),
    "List": ("elts*",),
    "Tuple": ("elts*",),
    "Slice": ("lower", "upper", "step"),
    "comprehension": ("target", "iter", "ifs*", "=is_async"),
    "ExceptHandler": ("type", "=name", "body*"),
    "arguments": (
        "posonlyargs*",
        "args*",
        "vararg",
        "kwonlyargs*",
        "kw_defaults?",
        "kwarg",
        "defaults*",
    ),
    "arg": ("=arg", "annotation", "=type_comment"),
    "keyword": ("=arg", "value"),
    "alias": ("=name", "=asname"),
    "withitem": ("context_expr", "optional_vars"),
    "match_case": ("pattern", "guard", "body*"),
    "MatchValue": ("value",),
    "MatchSingleton": ("=value",),
    "MatchSequence": ("patterns*",),
    "MatchMapping": ("keys*", "patterns*", "=rest"),
    "MatchClass": ("cls", "patterns*", "=kwd_attrs", "kwd_patterns*"),
    "MatchStar": ("=name",),
    "MatchAs": ("pattern", "=name"),
    "MatchOr": ("patterns*",),
    "TypeIgnore": ("=lineno", "=tag"),
}

_FIELDS: dict[type, tuple[tuple[str, int], ...]] = {}


def child_fields(kind: type) -> tuple[tuple[str, int], ...]:
    """The fields of node class ``kind`` that may hold child nodes, in order, each with
    :data:`ONE`, :data:`MANY` or :data:`ANY` (memoised)."""
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = _child_fields(kind)
    return found


def _child_fields(kind: type) -> tuple[tuple[str, int], ...]:
    fields = tuple(f for f in getattr(kind, "_fields", ()) if f not in SKIPPED_FIELDS)
    grammar = _GRAMMAR.get(kind.__name__)
    if (
        kind.__module__ != "ast"
        or grammar is None
        or tuple(g.lstrip("=*?").rstrip("*?") for g in grammar) != fields
    ):
        # not a class of the grammar above: every field checked as it is found
        return tuple((f, ANY) for f in fields)
    out: list[tuple[str, int]] = []
    for entry in grammar:
        if entry.startswith("="):
            continue
        if entry.endswith("*"):
            out.append((entry[:-1], MANY))
        elif entry.endswith("?"):
            out.append((entry[:-1], ANY))
        else:
            out.append((entry, ONE))
    return tuple(out)
