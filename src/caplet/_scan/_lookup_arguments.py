"""What a lookup's arguments are made of (CPL-THR-003, issue 16).

Two questions the lookup checks of :mod:`caplet._scan._sink_lookups` ask about
the arguments of a call: which arguments a literal list spread into it supplies
(``getattr(*[builtins, n])``), and whether a name is the file's own choice, built
from names the file binds itself rather than handed in by a caller (a computed
``import_module`` of a caller's module name is a plugin loader, not a hidden
import). Split out of ``_sink_lookups`` by concern: these read the data flow,
they report nothing.
"""

from __future__ import annotations

import ast

from caplet._scan._flow import Flow

__all__ = ["own_literals", "spread_arguments"]

#: Methods that put values into a container.
_FILLERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


def spread_arguments(flow: Flow, args: list[ast.expr]) -> list[ast.expr] | None:
    """The arguments of a call with a literal list or tuple spread into it (written in
    place, or bound once to a name): ``None`` when nothing is spread or it is unknown."""
    if not any(isinstance(a, ast.Starred) for a in args):
        return None
    out: list[ast.expr] = []
    for arg in args:
        if not isinstance(arg, ast.Starred):
            out.append(arg)
            continue
        value = flow.bound_once(arg.value)
        if not isinstance(value, ast.List | ast.Tuple) or any(
            isinstance(e, ast.Starred) for e in value.elts
        ):
            return None
        out.extend(value.elts)
    return out


def own_literals(flow: Flow, node: ast.expr) -> bool:
    """Whether ``node`` is computed from names this file binds itself, through no
    parameter and no attribute of an object (``self.module``): what it spells is the
    file's own choice, not a caller's (bounded: 64 nodes)."""
    parameters = flow.parameter_names()
    stack: list[ast.AST] = [node]
    seen: set[str] = set()
    budget = 64
    while stack:
        budget -= 1
        if budget < 0:
            return False
        item = stack.pop()
        if isinstance(item, ast.Attribute):
            return False
        if isinstance(item, ast.Name):
            if item.id in parameters:
                return False
            if item.id not in seen:
                seen.add(item.id)
                stack.extend(flow.bindings.assigned.get(item.id, ())[:4])
                stack.extend(flow.bindings.iterated.get(item.id, ())[:4])
                for values in flow.contributed.get(item.id, {}).values():
                    stack.extend(values[:4])
                # what a container is filled with: created.append(name) (pydantic's
                # tests import the modules a fixture's **kwargs name)
                stack.extend(
                    arg
                    for call in flow.calls()
                    if isinstance(call.func, ast.Attribute)
                    and call.func.attr in _FILLERS
                    and isinstance(call.func.value, ast.Name)
                    and call.func.value.id == item.id
                    for arg in call.args[:2]
                )
            continue
        stack.extend(ast.iter_child_nodes(item))
    return True
