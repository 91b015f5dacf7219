"""One parsed file's syntax, collected once: limits, bindings and the nodes to visit.

:func:`survey` walks the tree iteratively, level by level (so that no
nesting can exhaust the Python stack and the depth is simply the level
count), measures depth and size (a pathological file becomes a finding,
never a ``RecursionError``), lists the nodes parents first and collects
what every name may refer to: imports, assignments (``with ... as`` too),
loop targets, definitions. The rules (:mod:`caplet._scan._visitor`) and
the data flow (:mod:`caplet._scan._flow`) read that collection; neither
walks the tree again.

Scopes are deliberately flattened: a name bound in one function and used
in another still resolves, which errs towards reporting.

The small helpers at the end read constant values out of nodes (a string
folded from pieces, a call's argument, the program of a process call).
"""

from __future__ import annotations

import ast
import urllib.parse
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from caplet._marks import stream_safe
from caplet._scan._children import MANY, ONE, child_fields
from caplet._scan._rules import ArgumentSpec
from caplet._scan._vendored import unvendored

__all__ = [
    "BINDING_NODES",
    "MAX_CANDIDATES",
    "MAX_RESOLVE_DEPTH",
    "Bindings",
    "Survey",
    "TooComplex",
    "argument",
    "bind",
    "dotted",
    "fold_str",
    "literal_prefix",
    "program",
    "shorten",
    "survey",
    "url_host",
]

#: Bounds on the resolver's own recursion (alias chains, attribute chains,
#: constant folding). Real code never comes near them; crafted code that
#: does simply stops resolving, it cannot exhaust the stack.
MAX_RESOLVE_DEPTH = 48
#: Distinct meanings kept per name. A name rebound to more modules than this
#: is itself absurd; its import statements are still checked one by one.
MAX_CANDIDATES = 64


@dataclass(slots=True)
class Bindings:
    """What each name of a file may refer to, collected before rules run.

    ``assigned`` maps a name to every value bound to it (``x = v``,
    ``with v as x``); ``iterated`` to every iterable a loop or a
    comprehension takes it from (``for k in os.environ``), which only the
    data flow reads (``k`` is not ``os.environ``, but it carries what the
    environment holds); ``functions`` lists every function definition.
    """

    imports: dict[str, list[str]]
    assigned: dict[str, list[ast.expr]]
    defined: set[str]
    star_modules: list[str]
    iterated: dict[str, list[ast.expr]] = field(default_factory=dict)
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=list)
    #: The same functions by name and by ``id``, in ``functions``' order: a rule asks
    #: for a name at each call site, and a scan of ``functions`` each was quadratic in
    #: a file of many functions calling one another (attack25).
    functions_named: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = field(
        default_factory=dict
    )
    functions_by_id: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    #: The same values by scope (``name -> scope -> values``), for the data flow:
    #: a loop variable ``k`` of one function is not the ``k`` of another.
    #: Scope 0 is the module; a function, lambda or comprehension is ``id(node)``.
    scoped: dict[str, dict[int, list[ast.expr]]] = field(default_factory=dict)
    #: Each scope's enclosing scope.
    parents: dict[int, int] = field(default_factory=dict)
    #: Names bound by unpacking a value that is not a literal tuple (``m, _, f =
    #: name.partition("__")``): the value, the name's place and the targets' count.
    unpacked: dict[str, list[tuple[ast.expr, int, int]]] = field(default_factory=dict)
    #: The classes this file defines, by name (``L.run`` after ``class L: run = exec``).
    classes: dict[str, list[ast.ClassDef]] = field(default_factory=dict)
    #: The names each class's body assigns (``m0 = 0`` of an enumeration), by the class's
    #: name (the last class of that name): one lookup for each ``Op.m0.name`` read, where
    #: a scan of the body each was quadratic (attack21).
    class_assigned: dict[str, frozenset[str]] = field(default_factory=dict)
    #: The module's docstring as the interpreter keeps it (``__doc__``), if it has one
    #: (blind18: a name picked letter by letter out of it).
    docstring: str | None = None

    def named(self, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions of this file named ``name``, in the order they are defined."""
        return self.functions_named.get(name, [])


@dataclass(frozen=True, slots=True)
class Survey:
    """The first pass's result: bindings, and every node parents first."""

    bindings: Bindings
    nodes: list[ast.AST]
    #: The scope of each node of ``nodes`` (same order): 0 or the ``id`` of a function.
    scopes: list[int]
    #: The ids of the ``marked`` statements of :func:`survey` and of every node below
    #: them (``None``: none were marked).
    visited: AbstractSet[int] | None = None


@dataclass(frozen=True, slots=True)
class TooComplex:
    """Why the first pass gave up, and where."""

    reason: str
    line: int


BINDING_NODES = (
    ast.Import,
    ast.ImportFrom,
    ast.Assign,
    ast.AnnAssign,
    ast.NamedExpr,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.withitem,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
)
#: Nodes whose children live in a scope of their own.
_SCOPES = frozenset(
    {
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.Lambda,
        ast.ListComp,
        ast.SetComp,
        ast.DictComp,
        ast.GeneratorExp,
    }
)
_BINDING_KINDS = frozenset(BINDING_NODES)
#: A node class's role in the survey, besides its children: it binds names, opens a scope.
_BINDS = 1
_OPENS_SCOPE = 2
#: By node class: its child fields (:func:`caplet._scan._children.child_fields`) and role.
_SPECS: dict[type, tuple[tuple[tuple[str, int], ...], int]] = {}


def _spec(kind: type) -> tuple[tuple[tuple[str, int], ...], int]:
    role = (_BINDS if kind in _BINDING_KINDS else 0) | (_OPENS_SCOPE if kind in _SCOPES else 0)
    return child_fields(kind), role


def survey(
    tree: ast.AST,
    max_depth: int,
    max_nodes: int,
    roots: Sequence[ast.AST] | None = None,
    bindings: Bindings | None = None,
    *,
    marked: Sequence[ast.AST] | None = None,
) -> Survey | TooComplex:
    """Measure depth and size, collect bindings and list the nodes, in one walk.

    Iterative and level by level (breadth first); the node list has every
    parent before its children, which the rule visitor relies on. The child
    loop is ``ast.iter_child_nodes`` inlined with per-class field lists:
    this walk is the scanner's hot path. ``roots`` walks those statements
    instead of ``tree`` (their ``bindings`` already collected); ``marked``
    (statements of ``tree``) has the ids of the nodes at and below them
    gathered on the way (:attr:`Survey.visited`: the focus of a large file).
    """
    # focus() has bound its root statements already: binding them again would give
    # every name assigned on a hit line two values, and the evaluator none
    prebound = bindings is not None
    if bindings is None:
        bindings = Bindings({}, {}, set(), [])
        if isinstance(tree, ast.Module):
            bindings.docstring = ast.get_docstring(tree, clean=False)
    nodes: list[ast.AST] = []
    scopes: list[int] = []
    level: list[ast.AST] = [tree] if roots is None else list(roots)
    level_scopes = [0] * len(level)
    parents = bindings.parents
    depth = 0
    specs = _SPECS
    # Marking on the way: a node below a marked one is marked when its parent's children
    # are listed (ids only: a second walk of the marked statements, node by node, cost
    # as much as the survey's own walk of them, issue 16)
    marks = None if marked is None else set(map(id, marked))
    while level:
        depth += 1
        if depth > max_depth:
            return TooComplex(f"nesting deeper than {max_depth} levels", _first_line(level))
        if len(nodes) + len(level) > max_nodes:
            return TooComplex(f"more than {max_nodes} syntax nodes", _first_line(level))
        nodes.extend(level)
        scopes.extend(level_scopes)
        below: list[ast.AST] = []
        below_scopes: list[int] = []
        append = below.append
        extend = below.extend
        bind_here = not (prebound and depth == 1)
        for node, scope in zip(level, level_scopes, strict=True):
            kind = type(node)
            spec = specs.get(kind)
            if spec is None:
                spec = specs[kind] = _spec(kind)
            fields, role = spec
            inner = scope
            if role:
                if role & _BINDS and bind_here:
                    bind(node, bindings, scope)
                if role & _OPENS_SCOPE:
                    parents[id(node)] = scope
                    inner = id(node)
            if not fields:
                continue  # a leaf: a name, a constant, an alias...
            before = len(below)
            for name, how in fields:
                value: Any = getattr(node, name, None)
                if how == ONE:
                    if value is not None:
                        append(value)
                elif how == MANY:
                    extend(value)
                elif isinstance(value, list):
                    extend([item for item in value if isinstance(item, ast.AST)])
                elif isinstance(value, ast.AST):
                    append(value)
            added = len(below) - before
            if added == 1:
                below_scopes.append(inner)
            elif added:
                below_scopes.extend([inner] * added)
            if marks is not None and added and id(node) in marks:
                marks.update(map(id, below[before:]))
        level = below
        level_scopes = below_scopes
    return Survey(bindings, nodes, scopes, marks)


def _first_line(level: list[ast.AST]) -> int:
    """A line number to point at: the first node of ``level`` that has one."""
    return next((n.lineno for n in level if isinstance(n, ast.stmt | ast.expr)), 0)


def bind(node: ast.AST, b: Bindings, scope: int = 0) -> None:
    """Record what ``node`` (one of :data:`BINDING_NODES`), in ``scope``, binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                b.imports.setdefault(alias.asname, []).append(unvendored(alias.name))
            else:
                top = alias.name.split(".", 1)[0]
                b.imports.setdefault(top, []).append(top)
    elif isinstance(node, ast.ImportFrom):
        # A relative import names a module of the plugin itself: the leading
        # dot keeps it from ever matching a rule table entry.
        module = ("." * node.level) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                if node.level == 0 and node.module:
                    b.star_modules.append(node.module)
                continue
            qualified = unvendored(f"{module}.{alias.name}")
            b.imports.setdefault(alias.asname or alias.name, []).append(qualified)
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            _bind_target(target, node.value, b, scope)
    elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
        _bind_target(node.target, node.value, b, scope)
    elif isinstance(node, ast.withitem):
        if node.optional_vars is not None:
            _bind_target(node.optional_vars, node.context_expr, b, scope)
    elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        for loop_name in _names(node.target):
            b.iterated.setdefault(loop_name, []).append(node.iter)
            b.scoped.setdefault(loop_name, {}).setdefault(scope, []).append(node.iter)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        b.defined.add(node.name)
        b.functions.append(node)
        b.functions_named.setdefault(node.name, []).append(node)
        b.functions_by_id[id(node)] = node
    elif isinstance(node, ast.ClassDef):
        b.defined.add(node.name)
        b.classes.setdefault(node.name, []).append(node)
        b.class_assigned[node.name] = frozenset(
            target.id
            for stmt in node.body
            if isinstance(stmt, ast.Assign)
            for target in stmt.targets
            if isinstance(target, ast.Name)
        )


def _names(target: ast.expr) -> list[str]:
    """The plain names a loop target binds (``k``, ``k, v``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [e.id for e in target.elts if isinstance(e, ast.Name)]
    return []


def _bind_target(target: ast.expr, value: ast.expr, b: Bindings, scope: int) -> None:
    if isinstance(target, ast.Name):
        b.assigned.setdefault(target.id, []).append(value)
        b.scoped.setdefault(target.id, {}).setdefault(scope, []).append(value)
    elif isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                if isinstance(t, ast.Name):
                    b.assigned.setdefault(t.id, []).append(v)
                    b.scoped.setdefault(t.id, {}).setdefault(scope, []).append(v)
        else:
            # a, b = f(): each name carries what the whole value carries (data flow only)
            for name in _names(target):
                b.scoped.setdefault(name, {}).setdefault(scope, []).append(value)
            if not any(isinstance(t, ast.Starred) for t in target.elts):
                for place, t in enumerate(target.elts):
                    if isinstance(t, ast.Name):
                        b.unpacked.setdefault(t.id, []).append((value, place, len(target.elts)))


def fold_str(node: ast.AST | None, depth: int = 0) -> str | None:
    """The value of a constant string expression, or ``None``.

    Folds what obfuscation uses to hide a name from a plain text search:
    ``"sys" + "tem"``, f-strings without fields, ``"".join(["sy", "stem"])``.
    Bytes are read as Latin-1 so ``os.environb[b"X"]`` folds to ``"X"``.
    (:mod:`caplet._scan._flow` evaluates more: slices, ``chr``, reversals.)
    """
    if node is None or depth > MAX_RESOLVE_DEPTH:
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = fold_str(node.left, depth + 1)
        right = fold_str(node.right, depth + 1) if left is not None else None
        return None if right is None or left is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [fold_str(v, depth + 1) for v in node.values]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        sep = fold_str(node.func.value, depth + 1)
        items = [fold_str(e, depth + 1) for e in node.args[0].elts]
        if sep is None or any(i is None for i in items):
            return None
        return sep.join(i or "" for i in items)
    return None


def argument(call: ast.Call, spec: ArgumentSpec) -> ast.expr | None:
    """The argument ``spec`` names in ``call`` (positional or keyword), if given."""
    if spec.index < len(call.args) and not any(
        isinstance(a, ast.Starred) for a in call.args[: spec.index + 1]
    ):
        return call.args[spec.index]
    if spec.keyword is not None:
        for kw in call.keywords:
            if kw.arg == spec.keyword:
                return kw.value
    return None


def program(arg: ast.expr | None) -> str | None:
    """The program a process call runs: a list's first item or a command's first word."""
    if isinstance(arg, ast.List | ast.Tuple):
        arg = arg.elts[0] if arg.elts else None
    text = fold_str(arg)
    if text is None:
        return None
    words = text.split()
    return words[0] if words else None


def url_host(url: str) -> str | None:
    """The host of an absolute http(s) URL literal, lower-case (``None`` if unclear)."""
    try:
        # urlsplit normalises a host that is not ASCII (NFKC) by a sort quadratic in a run
        # of marks, which escapes put in a literal of an ASCII source ("\\u0301" * n): a
        # 960 KB plugin took 29 s (attack25). A longer run gets a joiner every 30 marks; no
        # grant names such a host, so the answer stays an uncovered host.
        parsed = urllib.parse.urlsplit(stream_safe(url))
        host = parsed.hostname
    except ValueError:
        return None
    if not host or "{" in host or "%" in host:
        return None  # a template, not a host
    return host.rstrip(".")


def literal_prefix(node: ast.AST) -> str | None:
    """The literal start of a string expression: ``"https://x/" + data`` -> ``"https://x/"``."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return literal_prefix(node.left)
    if isinstance(node, ast.JoinedStr) and node.values:
        return literal_prefix(node.values[0])
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return literal_prefix(node.func.value)
    return None


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def shorten(text: str, limit: int = 60) -> str:
    """A literal, quoted and cut, for a message."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
