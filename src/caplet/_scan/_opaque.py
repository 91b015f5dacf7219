"""Dangerous modules used where the scan cannot tell what is called on them.

The rules read what a module is used for from the attribute taken off it
(``os.system``) or from a name they can evaluate (``getattr(os, "sys" +
"tem")``). A module handed on as a *value* hides that: ``getattr(os, n)``
with ``n`` a parameter (the host passes ``"system"`` later),
``functools.reduce(getattr, ["system"], os)``,
``operator.methodcaller("system", "id")(os)``, ``def g(): return os`` then
``g().system``, ``[os][0].system``, ``(lambda: os)().system``,
``types.SimpleNamespace(o=os).o.system``. Each passed the danger gate
(attacking issue 13's result). Following every such value through the
program is not possible in general, so in plugin mode the use itself is the
finding (CPL-DYN-006, danger; only an observation in package mode).

What stays allowed, because the rules see through it: an attribute taken off
the module, an alias (``m = os``, followed by the resolver), a comparison
(``m is os``), ``getattr``/``setattr``/``delattr``/``hasattr`` with a name the
scanner evaluates, and passing the module to ``hasattr``, ``isinstance``,
``issubclass``, ``id``, ``type``, ``repr``, ``dir`` or ``print``, which call
nothing on it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from caplet._scan._filescan import FileScan
from caplet._scan._reachable import REACHABLE_MODULES

__all__ = ["SENSITIVE_MODULES", "opaque_module_uses"]

#: Modules whose functions run programs or native code, reach the environment,
#: the import system, the interpreter's internals or the network, or load code:
#: those a module can hand on (:data:`REACHABLE_MODULES`) and the introspection ones.
SENSITIVE_MODULES = frozenset({*REACHABLE_MODULES.values(), "code", "gc", "inspect"})

#: Calls that take a module as an argument and call nothing on it.
_HARMLESS_CALLS = frozenset(
    {
        "builtins.hasattr",
        "builtins.isinstance",
        "builtins.issubclass",
        "builtins.id",
        "builtins.type",
        "builtins.repr",
        "builtins.dir",
        "builtins.print",
    }
)

#: Calls that are harmless when the attribute name is one the scanner evaluates.
_NAMED_LOOKUPS = frozenset({"builtins.getattr", "builtins.setattr", "builtins.delattr"})

Resolve = Callable[[ast.AST], tuple[str, ...]]
NameValue = Callable[[ast.AST], str | None]


def opaque_module_uses(
    scan: FileScan, nodes: Sequence[ast.AST], resolve: Resolve, name_value: NameValue
) -> None:
    """Emit CPL-DYN-006 where a sensitive module is used as a value (see the module doc)."""
    parents: dict[int, ast.AST] = {}
    candidates: list[ast.expr] = []
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
            candidates.append(node)
    for node in candidates:
        parent = parents.get(id(node))
        if parent is None or _transparent(node, parent, resolve, name_value):
            continue
        module = next((m for m in resolve(node) if m in SENSITIVE_MODULES), None)
        if module is None:
            continue
        scan.emit(
            "CPL-DYN-006",
            f"{module} ({_how(node, parent)})",
            getattr(node, "lineno", 1),
            getattr(node, "col_offset", None),
        )


def _transparent(node: ast.expr, parent: ast.AST, resolve: Resolve, name_value: NameValue) -> bool:
    """Whether the rules see what is done with ``node`` from where it is used."""
    if isinstance(parent, ast.Attribute):
        return parent.value is node  # os.system: the attribute is checked
    if isinstance(parent, ast.Assign | ast.AnnAssign):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return parent.value is node and all(isinstance(t, ast.Name) for t in targets)
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, ast.Call) and parent.func is not node:
        called = resolve(parent.func)
        if any(name in _HARMLESS_CALLS for name in called):
            return True
        if any(name in _NAMED_LOOKUPS for name in called):
            # getattr(os, "system") is resolved and checked; getattr(os, n) is not.
            return len(parent.args) >= 2 and name_value(parent.args[1]) is not None
        return False
    return isinstance(parent, ast.Expr)  # a bare `os` statement does nothing


def _how(node: ast.expr, parent: ast.AST) -> str:
    if isinstance(parent, ast.Call):
        if parent.func is not node and isinstance(parent.func, ast.Name):
            return f"passed to {parent.func.id}()"
        return "passed to a call"
    if isinstance(parent, ast.keyword):
        return "passed as a keyword argument"
    if isinstance(parent, ast.Return | ast.Yield | ast.YieldFrom | ast.Lambda):
        return "returned"
    if isinstance(parent, ast.List | ast.Tuple | ast.Set | ast.Dict):
        return "stored in a container"
    return "used as a value"
