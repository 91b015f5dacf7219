"""Annotations written as a name bound to text the source does not hold (scan27, left open).

``typing.get_type_hints`` (and pydantic, FastAPI, ``inspect.get_annotations(eval_str=True)``)
compiles and evaluates every annotation that is a string. scan27 reported annotations
*stored* from data (``Box.__annotations__ = {"x": text}``); the same text reaches them when
the class body or a signature names it::

    text = (HERE / "helpers.txt").read_text()

    class Box:
        x: text          # the annotation's value is the file's text: evaluated as Python

and, under ``from __future__ import annotations``, through one more step (the string
``"text"`` is evaluated to the file's text, which typing evaluates again). The same for a
module's own annotations and a function's parameters and return.

A name in an annotation is a type almost always: an import, a class, a type alias
(``JSON = dict[str, Any]``), a ``TypeVar``. So this rule wants evidence, not doubt: a name
counts only when some value the module binds it to is *data*: a call that reads or
builds text (``open(...).read()``, ``json.load``, ``os.getenv``, ``.decode()``), a
subscript of data (``os.environ["T"]``, ``cfg["x"]`` of a ``json.load``), text built at run
time (an f-string with a field, ``+``, ``%``). A parameter, a loop variable, a local of a
function or a name the file never binds is not evidence.
Function bodies' own annotations are never stored, so never evaluated, and are skipped.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Final

from caplet._marks import LongMarkRunError, parse
from caplet._scan._route_facts import Facts, named_in

__all__ = ["annotation_routes"]

#: Calls whose answer is data read or built at run time, by what they resolve to (a
#: prefix ends with a dot) ...
_DATA_CALLS: Final = (
    "builtins.open",
    "builtins.input",
    "builtins.str",
    "builtins.bytes",
    "builtins.chr",
    "builtins.format",
    "builtins.getattr",
    "os.getenv",
    "os.environ.",
    "os.read",
    "json.",
    "pickle.",
    "marshal.",
    "tomllib.",
    "yaml.",
    "base64.",
    "binascii.",
    "codecs.",
    "zlib.",
    "pkgutil.get_data",
    "importlib.resources.",
    "urllib.",
    "requests.",
    "httpx.",
    "socket.",
    "subprocess.",
    "sys.stdin.",
)
#: ... or by the method called (on a file, a path, a response, a text).
_DATA_METHODS: Final = frozenset(
    {
        "read",
        "read_text",
        "read_bytes",
        "readline",
        "readlines",
        "recv",
        "getvalue",
        "decode",
        "text",
        "json",
        "format",
        "join",
        "replace",
        "strip",
        "lower",
        "upper",
        "get",
        "pop",
    }
)
#: How many names and string annotations deep a value is followed.
_MAX_DEPTH: Final = 6
_HINT = (
    "typing.get_type_hints and pydantic evaluate an annotation that is text as Python; "
    "spell the type out"
)


def annotation_routes(facts: Facts, nodes: list[ast.AST]) -> Iterator[tuple[ast.expr, str]]:
    """Each annotation of the module, a class body or a signature among ``nodes`` (every
    node of the file) that names a value bound to data; with what a finding says."""
    for node in nodes:
        if isinstance(node, ast.Module | ast.ClassDef):
            annotations = [s.annotation for s in node.body if isinstance(s, ast.AnnAssign)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            annotations = [
                p.annotation
                for p in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg)
                if p is not None and p.annotation is not None
            ]
            if node.returns is not None:
                annotations.append(node.returns)
        else:
            continue
        for annotation in annotations:
            name = _data_name(annotation, facts, 0)
            if name is not None:
                yield (
                    annotation,
                    f"an annotation naming {name}, which holds text not written in the "
                    f"source ({_HINT})",
                )


def _data_name(node: ast.expr, facts: Facts, depth: int) -> str | None:
    """The first name in an annotation bound to data, or ``None``."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, str):
            return None
        # a string annotation is evaluated: the names in its text are looked up
        try:
            parsed = parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError, LongMarkRunError):
            return None
        return _data_name(parsed, facts, depth + 1)
    if isinstance(node, ast.Name):
        # the module's own bindings (a class body's are its scope's too): an annotation
        # is evaluated in the module's namespace, and a local ``t = ...`` of some
        # function is not the ``t`` of ``import typing as t``
        bound = facts.bindings.scoped.get(node.id, {}).get(0, ())
        return node.id if any(_data(v, facts, depth + 1) for v in bound[:16]) else None
    if isinstance(node, ast.Attribute):
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return _data_name(root, facts, depth + 1) if isinstance(root, ast.Name) else None
    if isinstance(node, ast.Subscript):
        if "typing.Annotated" in facts.resolve(node.value) or "typing_extensions.Annotated" in (
            facts.resolve(node.value)
        ):
            # Annotated's metadata are objects, never evaluated; its first part is the type
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
            return _data_name(first, facts, depth + 1)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in (node.value, *parts):
            found = _data_name(part, facts, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(node, ast.BinOp | ast.List | ast.Tuple):
        items = [node.left, node.right] if isinstance(node, ast.BinOp) else node.elts
        for item in items:
            found = _data_name(item, facts, depth + 1)
            if found is not None:
                return found
        return None
    if _data(node, facts, depth):
        return ast.unparse(node)[:60]
    return None


def _data(value: ast.expr, facts: Facts, depth: int) -> bool:
    """Whether a value a name in an annotation is bound to is text read or built at run
    time (evidence, not doubt: see the module's docstring)."""
    if depth > _MAX_DEPTH or facts.plain(value) or facts.closed(value):
        # written in the source: a string alias is looked at as its annotation text
        if isinstance(value, ast.Constant) and isinstance(value.value, str) and depth <= _MAX_DEPTH:
            return _data_name(value, facts, depth + 1) is not None
        return False
    if isinstance(value, ast.Name):
        return _data_name(value, facts, depth + 1) is not None
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in _DATA_METHODS:
            return True
        return named_in(facts.resolve(func), _DATA_CALLS)
    if isinstance(value, ast.Subscript):
        # a generic subscripted (``dict[str, Any]``, ``Alias[int]``) is a type; a mapping
        # or a sequence of data subscripted is data
        return _data(value.value, facts, depth + 1) or _generic_of_data(value, facts)
    if isinstance(value, ast.Attribute):
        root: ast.expr = value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and _data_name(root, facts, depth + 1) is not None
    if isinstance(value, ast.BinOp):
        if isinstance(value.op, ast.BitOr):
            return _data(value.left, facts, depth + 1) or _data(value.right, facts, depth + 1)
        return True  # text built by +, %, *
    return isinstance(value, ast.JoinedStr)


def _generic_of_data(value: ast.Subscript, facts: Facts) -> bool:
    """``os.environ["T"]``, ``sys.argv[1]``: a subscript of the standard library's data."""
    funcs = facts.resolve(value.value)
    return any(f in {"os.environ", "sys.argv", "os.environb"} for f in funcs)
