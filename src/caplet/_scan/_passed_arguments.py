"""The arguments one file's calls pass to its own functions, by function and parameter.

``def load(blob): exec(blob)`` called as ``load(b64decode(...))`` runs decoded
data: the data flow (:meth:`caplet._scan._flow.Flow.passed_arguments`), the
resolver and the closed-expression checks read a parameter as what its
callers pass. Split out of ``_flow`` by concern when that module passed 600
lines (branch recall14); the answers are the same.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from caplet._scan._syntax import MAX_CANDIDATES, Bindings

__all__ = ["passed_arguments"]

#: A function of this file a call may reach: a ``def`` or a lambda bound to a name.
_Callee = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def passed_arguments(
    calls: Iterable[ast.Call], bindings: Bindings
) -> dict[int, dict[str, list[ast.expr]]]:
    """By function (its node's id) and parameter, the arguments ``calls`` pass to it (a
    function or a lambda bound to a name, called by that name; a lambda called in place)."""
    found: dict[int, dict[str, list[ast.expr]]] = {}
    targets: dict[str, list[_Callee]] = {}
    for defined in bindings.functions:
        targets.setdefault(defined.name, []).append(defined)
    for name, values in bindings.assigned.items():
        for value in values:
            if isinstance(value, ast.Lambda):
                targets.setdefault(name, []).append(value)
    # Kramer(7, name, stage) into def __init__(self, key, n, s): a class of this file
    # called is its constructor called, the new object its self (blind19)
    constructors: dict[str, list[_Callee]] = {}
    for name, classes in bindings.classes.items():
        for cls in classes[:MAX_CANDIDATES]:
            constructors.setdefault(name, []).extend(
                s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"
            )
    # One pass over the nodes (it was two: 4% of a package scan's CPU on the benign
    # corpus, issue 16); a callee's name is looked up before its receiver is checked:
    # most calls name no function of this file.
    for n in calls:
        func = n.func
        if isinstance(func, ast.Lambda):
            # (lambda x: exec(x))(blob): the lambda's parameters are the call's arguments
            slots = found.setdefault(id(func), {})
            for param, arg in zip(func.args.args, n.args, strict=False):
                if not isinstance(arg, ast.Starred):
                    slots.setdefault(param.arg, []).append(arg)
            continue
        method = isinstance(func, ast.Attribute)
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        candidates = targets.get(name)
        if isinstance(func, ast.Name) and constructors.get(name):
            candidates = constructors[name]
            method = True  # the constructor's first parameter is the new object
        if not candidates:
            continue
        if isinstance(func, ast.Attribute) and not _own_instance(func.value, bindings):
            continue  # out.write(data) is not this file's def write(self, s)
        for fn in candidates[:MAX_CANDIDATES]:
            params = [*fn.args.posonlyargs, *fn.args.args]
            if method:
                # obj.go(data) into def go(self, d): the receiver is self
                if not params or params[0].arg not in {"self", "cls"}:
                    continue
                params = params[1:]
            slots = found.setdefault(id(fn), {})
            for param, arg in zip(params, n.args, strict=False):
                if not isinstance(arg, ast.Starred):
                    slots.setdefault(param.arg, []).append(arg)
            if not n.keywords:
                continue
            names = {p.arg for p in (*params, *fn.args.kwonlyargs)}
            for keyword in n.keywords:
                if keyword.arg in names:
                    slots.setdefault(keyword.arg, []).append(keyword.value)
    return found


def _own_instance(receiver: ast.expr, bindings: Bindings) -> bool:
    """``self``, or an object made by a class of this file (``L()``, ``x = L()``)."""
    if isinstance(receiver, ast.Name):
        if receiver.id in {"self", "cls"}:
            return True
        bound = bindings.assigned.get(receiver.id, ())
        receiver = bound[0] if len(bound) == 1 else receiver
    return (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Name)
        and receiver.func.id in bindings.defined
        and receiver.func.id not in bindings.imports
    )
