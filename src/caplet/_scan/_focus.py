"""The statements a file's pass visits around the prefilter's hit lines (issue 16).

:func:`focus` finds the statements holding the lines, with the loops that fill what
they read; :func:`focus_bindings` the module's and classes' bindings a file too large
to survey whole is read with. Split out of :mod:`caplet._scan._syntax` by that concern
(the survey itself stays there).
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Sequence

from caplet._scan._syntax import BINDING_NODES, Bindings, bind

__all__ = ["focus", "focus_bindings"]


def focus(tree: ast.AST, lines: frozenset[int]) -> list[ast.AST]:
    """The statements of ``tree`` to visit when only ``lines`` can hold a threat.

    Imports are visited (their findings feed the chains); other statements
    only when their span holds one of ``lines``, descending one level into
    classes so one method with an ``exec`` does not cost the whole class.
    """
    roots: list[ast.AST] = []
    body = getattr(tree, "body", [])
    ordered = sorted(lines)
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            roots.append(stmt)
            continue
        if not _spans(stmt, ordered):
            continue
        if isinstance(stmt, ast.ClassDef):
            roots.extend(stmt.decorator_list)
            roots.extend(stmt.bases)
            for member in stmt.body:
                if _spans(member, ordered):
                    roots.append(member)
        else:
            roots.append(stmt)
    return _with_loops_filling(body, roots)


def focus_bindings(tree: ast.AST) -> Bindings:
    """Every module-level binding of ``tree`` (imports, assignments, definitions, loops)
    and its classes' own, so that names resolve in a survey of :func:`focus`'s
    statements alone (``Config.name`` may be used on a hit line elsewhere)."""
    bindings = Bindings({}, {}, set(), [])
    if isinstance(tree, ast.Module):
        bindings.docstring = ast.get_docstring(tree, clean=False)
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, BINDING_NODES):
            bind(stmt, bindings)
        if isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                if isinstance(member, BINDING_NODES):
                    bind(member, bindings)
    return bindings


#: Module-level statements that may fill a name in a loop (``for c in E: out += ...``).
_FILLING_STATEMENTS = (ast.For, ast.AsyncFor, ast.While)
#: Module-level code that may call a function defined on a hit line.
_MODULE_CODE = (*_FILLING_STATEMENTS, ast.Expr, ast.Assign)


def _with_loops_filling(body: list[ast.stmt], roots: list[ast.AST]) -> list[ast.AST]:
    """``roots`` and the module-level loops (and blocks) that fill a name they use.

    A decoder written as a loop (``for c in E: out += chr(ord(c) - 3)``,
    ``buf[i] ^= k``) has no threat token of its own; the sink that runs its
    output does, and what the loop adds to the name is data flow the sink needs.
    """
    if not roots:
        return roots
    # functions (and lambdas) defined on a hit line: their module-level calls pass
    # them what their sink runs (def load(b): exec(b); load(b64decode(...)))
    defined = {r.name for r in roots if isinstance(r, ast.FunctionDef | ast.AsyncFunctionDef)}
    defined |= {
        t.id
        for r in roots
        if isinstance(r, ast.Assign) and isinstance(r.value, ast.Lambda)
        for t in r.targets
        if isinstance(t, ast.Name)
    }
    chosen = {id(r) for r in roots}
    # functions of this module called by a module-level hit statement (exec(dec(E))):
    # what they return is what the sink runs
    called = {
        n.func.id
        for r in roots
        if isinstance(r, ast.Expr | ast.Assign)
        for n in ast.walk(r)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    if called:
        functions = [
            s
            for s in body
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
            and s.name in called
            and id(s) not in chosen
        ]
        if functions:
            roots.extend(functions)
            chosen.update(id(f) for f in functions)
            roots.sort(key=lambda r: (getattr(r, "lineno", 0), getattr(r, "col_offset", 0)))
    kinds = _MODULE_CODE if defined else _FILLING_STATEMENTS
    candidates = [s for s in body if isinstance(s, kinds) and id(s) not in chosen]
    if not candidates:
        return roots
    # what each candidate fills in place (out += ..., buf[i] ^= ...), or calls
    filling: list[tuple[ast.stmt, set[str]]] = []
    added = False
    for stmt in candidates:
        filled: set[str] = set()
        if isinstance(stmt, ast.Expr | ast.Assign):
            # a call statement (load(...), x = load(...)): its call is all that matters
            call = stmt.value
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id in defined
            ):
                roots.append(stmt)
                added = True
            continue
        for n in ast.walk(stmt):
            if (
                defined
                and isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in defined
            ):
                roots.append(stmt)
                added = True
                break
            if not isinstance(stmt, _FILLING_STATEMENTS):
                continue
            target: ast.expr | None = n.target if isinstance(n, ast.AugAssign) else None
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript):
                target = n.targets[0]
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in {"append", "extend", "insert", "write"}
            ):
                target = n.func.value  # out.append(b ^ 3)
            while isinstance(target, ast.Subscript | ast.Attribute):
                target = target.value
            if isinstance(target, ast.Name) and not target.id.startswith("__"):
                filled.add(target.id)
        else:
            if filled:
                filling.append((stmt, filled))
    if filling:
        # only now the names the roots use (a walk of every root: the costly part)
        wanted = set().union(*(f for _, f in filling))
        used = {
            n.id
            for r in roots
            if not isinstance(r, ast.Import | ast.ImportFrom)
            for n in ast.walk(r)
            if isinstance(n, ast.Name) and n.id in wanted
        }
        for filler, filled in filling:
            if filled & used:
                roots.append(filler)
                added = True
    if added:
        roots.sort(key=lambda r: (getattr(r, "lineno", 0), getattr(r, "col_offset", 0)))
    return roots


def _spans(stmt: ast.stmt, lines: Sequence[int]) -> bool:
    """Whether ``stmt`` (decorators included) holds one of ``lines`` (sorted)."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
    last = stmt.end_lineno or stmt.lineno
    index = bisect.bisect_left(lines, first)
    return index < len(lines) and lines[index] <= last


# -- constant values of nodes -------------------------------------------------------
