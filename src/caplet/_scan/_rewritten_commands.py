"""A program found on the user's ``PATH`` written over (blind18).

ReversingLabs' April 2025 report on bitcoinlibdbfix and bitcoinlib-dev: at install the
packages looked bitcoinlib's ``clw`` command up and replaced it with a script that sent the
wallet database before it ran the real one. A file whose path is what ``shutil.which``
returns is a command the user (or another program) runs by name; writing it replaces that
command, as a shell's start-up file written does: CPL-THR-009 (tune
b18-ot-console-script-overwrite). A command located to be run or read is not written, and a
package writing its own scripts names them itself, not through ``which``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Final

from caplet._scan._syntax import Bindings

__all__ = ["command_found_on_path"]

#: The calls that locate a program on ``PATH``.
_LOCATORS: Final = frozenset({"shutil.which", "distutils.spawn.find_executable"})
#: Calls whose result is the same file as their argument.
_SAME_FILE: Final = frozenset(
    {
        "pathlib.Path",
        "builtins.str",
        "os.fspath",
        "os.path.realpath",
        "os.path.abspath",
        "os.path.normpath",
    }
)
#: Nodes looked at in a path's expression and the values its names are bound to.
_BUDGET = 256


def _bound_in(name: str, scope: int, bindings: Bindings) -> Sequence[ast.expr]:
    """What ``name`` is bound to in ``scope``, or in the nearest scope around it that
    binds it: a ``path`` of one function is not the ``path`` of another (nodeenv's tests
    bind ``path = shutil.which(name)`` in one fixture, write to another ``path``)."""
    scoped = bindings.scoped.get(name, {})
    seen: set[int] = set()
    while scope not in scoped and scope in bindings.parents and scope not in seen:
        seen.add(scope)
        scope = bindings.parents[scope]
    return scoped.get(scope, ())


def command_found_on_path(
    path: ast.AST,
    scope: int,
    resolve: Callable[[ast.AST], tuple[str, ...]],
    bindings: Bindings,
) -> str | None:
    """``shutil.which('clw')`` (as text) when ``path`` is, or is bound to in ``scope``, a
    program found on ``PATH`` (through names, ``or`` and ``Path(...)``, bounded); else
    ``None``."""
    stack: list[ast.AST] = [path]
    seen: set[str] = set()
    budget = _BUDGET
    while stack and budget > 0:
        node = stack.pop()
        budget -= 1
        if isinstance(node, ast.Call) and _LOCATORS.intersection(resolve(node.func)):
            first = node.args[0] if node.args else None
            named = first.value if isinstance(first, ast.Constant) else "..."
            return f"shutil.which({named!r}), a command on PATH, rewritten"
        if isinstance(node, ast.Name):
            if node.id not in seen:
                seen.add(node.id)
                stack.extend(_bound_in(node.id, scope, bindings)[:4])
        elif isinstance(node, ast.Call) and _SAME_FILE.intersection(resolve(node.func)):
            stack.extend(node.args[:1])  # Path(which(x)), os.path.realpath(which(x))
        elif isinstance(node, ast.BoolOp):
            stack.extend(node.values)  # which(x) or fallback
        elif isinstance(node, ast.IfExp):
            stack.extend((node.body, node.orelse))
    return None
