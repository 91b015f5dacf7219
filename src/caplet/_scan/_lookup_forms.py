"""The spellings of one operation: an attribute looked up by a name held in a value.

``getattr(X, k)``, ``X.__getattribute__(k)``, ``object.__getattribute__(X, k)`` (or
``type(X).__getattribute__(X, k)``),
``vars(X)[k]`` and ``X.__dict__[k]`` all denote the attribute ``k`` of ``X``; so does
``g(k)`` after ``g = functools.partial(getattr, X)`` (or ``g(X, k)`` after
``g = functools.partial(getattr)``).
Rules that recognise the operation ask this module instead of matching one
spelling, so a rewrite from one spelling to another changes nothing
(benchmarks/mutate_recall.py's ``getattr-*`` rewrites, issue 16).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

__all__ = ["attribute_lookup", "partial_lookup"]

Resolve = Callable[[ast.expr], tuple[str, ...]]
Bound = Callable[[str], Sequence[ast.expr]]


def attribute_lookup(node: ast.expr, resolve: Resolve) -> tuple[ast.expr, ast.expr] | None:
    """``(owner, key)`` when ``node`` looks up the attribute ``key`` of ``owner`` by
    name, in any of the spellings above; ``None`` otherwise. ``resolve`` names what
    an expression denotes (``builtins.getattr`` for a ``getattr`` however imported)."""
    if isinstance(node, ast.Call) and not node.keywords:
        args = node.args
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "__getattribute__":
            if len(args) == 1:
                return func.value, args[0]
            if len(args) == 2 and (
                "builtins.object" in resolve(func.value) or _type_of(func.value, resolve)
            ):
                # object.__getattribute__(X, k); type(X).__getattribute__(X, k) (blindcn)
                return args[0], args[1]
            return None
        if len(args) == 2 and not {"builtins.getattr", "inspect.getattr_static"}.isdisjoint(
            resolve(func)
        ):
            return args[0], args[1]
        return None
    if isinstance(node, ast.Subscript):
        space = node.value
        if isinstance(space, ast.Attribute) and space.attr == "__dict__":
            return space.value, node.slice
        if (
            isinstance(space, ast.Call)
            and len(space.args) == 1
            and not space.keywords
            and "builtins.vars" in resolve(space.func)
        ):
            return space.args[0], node.slice
    return None


def _type_of(node: ast.expr, resolve: Resolve) -> bool:
    """``type(Y)``: the class of a value, whose ``__getattribute__`` looks attributes up."""
    return (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and not node.keywords
        and "builtins.type" in resolve(node.func)
    )


def partial_lookup(
    node: ast.Call, resolve: Resolve, bound: Bound
) -> tuple[ast.expr, ast.expr] | None:
    """``(owner, key)`` when ``node`` calls ``functools.partial`` of ``getattr``, in place
    or through a name bound once to it: the arguments the partial holds come first, the
    call's after them."""
    func = node.func
    if node.keywords:
        return None
    if isinstance(func, ast.Call):
        made: ast.expr = func  # functools.partial(getattr, X)(k), called in place
    elif isinstance(func, ast.Name) and len(values := bound(func.id)) == 1:
        made = values[0]
    else:
        return None
    if (
        not isinstance(made, ast.Call)
        or made.keywords
        or not made.args
        or "functools.partial" not in resolve(made.func)
        or "builtins.getattr" not in resolve(made.args[0])
    ):
        return None
    args = [*made.args[1:], *node.args]
    if len(args) != 2 or any(isinstance(a, ast.Starred) for a in args):
        return None
    return args[0], args[1]
