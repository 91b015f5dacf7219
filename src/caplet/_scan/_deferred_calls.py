"""Calls the code asks another function to make: a callable handed over with its arguments.

``atexit.register(os.system, cmd)``, ``threading.Thread(target=subprocess.call,
args=(cmd,))``, ``pool.submit(exec, code)``, ``loop.call_later(5, os.system, cmd)``,
``map(os.system, [cmd])`` and ``functools.partial(subprocess.run, shell=True)(cmd)`` all
run ``os.system(cmd)`` and its kin, yet the source never calls the sink: the call is made
by the standard library. :func:`deferred_calls` spells each such hand-over as the call it
makes, so every rule that checks a call checks it too, whatever the hand-over (branch
blind13: attackers' payloads started at exit, in a thread, in an executor).

The synthetic calls are built from the hand-over's own nodes (copy-located at it); the
caller keeps them alive while the file is checked (the data flow memoises by ``id``) and
gives them the hand-over's scope.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["HANDOVERS", "HANDOVER_METHODS", "deferred_calls"]


@dataclass(frozen=True, slots=True)
class Handover:
    """Where a hand-over keeps the callable and the arguments it is called with."""

    #: The callable: a position, and/or a keyword.
    position: int | None
    keyword: str | None = None
    #: The positional arguments: spread after the callable (``f, *args``), or one tuple
    #: at this position or keyword (``args=(...)``).
    spread: bool = True
    args_position: int | None = None
    args_keyword: str | None = None
    #: The keyword arguments: the hand-over's own other keywords (``**kwargs``), or one
    #: dict literal under this keyword (``kwargs={...}``).
    kwargs_keyword: str | None = None
    kwargs_position: int | None = None
    #: The callable is mapped over the items of the iterables after it (``map``).
    mapped: bool = False


_SPREAD = Handover(0)
_THREAD = Handover(
    1,
    "target",
    spread=False,
    args_position=3,
    args_keyword="args",
    kwargs_keyword="kwargs",
    kwargs_position=4,
)

_SCHEDULED = Handover(
    2,
    "action",
    spread=False,
    args_position=3,
    args_keyword="argument",
    kwargs_keyword="kwargs",
    kwargs_position=4,
)

#: Functions of the standard library that call a callable they are handed, by name.
HANDOVERS: dict[str, Handover] = {
    "atexit.register": _SPREAD,
    "threading.Thread": _THREAD,
    "multiprocessing.Process": _THREAD,
    "multiprocessing.context.Process": _THREAD,
    "threading.Timer": Handover(
        1,
        "function",
        spread=False,
        args_position=2,
        args_keyword="args",
        kwargs_keyword="kwargs",
        kwargs_position=3,
    ),
    "_thread.start_new_thread": Handover(0, spread=False, args_position=1, kwargs_position=2),
    "_thread.start_new": Handover(0, spread=False, args_position=1, kwargs_position=2),
    "asyncio.to_thread": _SPREAD,
    "weakref.finalize": Handover(1),
    "builtins.map": Handover(0, mapped=True),
    # importlib's trampoline (``f(*args, **kwds)``, kept out of tracebacks) and the tracing
    # one: exec handed to them runs its arguments (blind32)
    "importlib._bootstrap._call_with_frames_removed": _SPREAD,
    "importlib._bootstrap_external._call_with_frames_removed": _SPREAD,
    "sys.call_tracing": Handover(0, spread=False, args_position=1),
}

#: Methods of objects the scanner cannot type (executors, event loops, pools, exit stacks,
#: schedulers) that call a callable they are handed: counted only when the callable is a
#: sink, which the caller decides.
HANDOVER_METHODS: dict[str, Handover] = {
    "submit": _SPREAD,
    "call_soon": _SPREAD,
    "call_soon_threadsafe": _SPREAD,
    "callback": _SPREAD,
    "run_in_executor": Handover(1),
    "call_later": Handover(1),
    "call_at": Handover(1),
    "apply_async": Handover(
        0,
        spread=False,
        args_position=1,
        args_keyword="args",
        kwargs_keyword="kwds",
        kwargs_position=2,
    ),
    "enter": _SCHEDULED,
    "enterabs": _SCHEDULED,
    # tkinter's timers: root.after(0, exec, code)
    "after": Handover(1),
    "after_idle": _SPREAD,
}

#: Items of a mapped iterable spelled out at most (``map(f, [a, b, c, ...])``).
_MAPPED_ITEMS = 4


def _keyword(node: ast.Call, name: str | None) -> ast.expr | None:
    return next((k.value for k in node.keywords if name is not None and k.arg == name), None)


def _argument(node: ast.Call, keyword: str | None, position: int | None) -> ast.expr | None:
    """An argument given by ``keyword``, else at ``position``; ``None`` when neither is."""
    found = _keyword(node, keyword)
    if found is None and position is not None and len(node.args) > position:
        found = node.args[position]
    return found


def _items(node: ast.expr | None) -> list[ast.expr] | None:
    """The items of a literal tuple or list (none when starred: their count is unknown)."""
    if node is None:
        return []
    if isinstance(node, ast.Tuple | ast.List) and not any(
        isinstance(e, ast.Starred) for e in node.elts
    ):
        return list(node.elts)
    return None


def _mapped(iterable: ast.expr) -> list[ast.expr]:
    """What a mapped callable is called on: a literal's items, a comprehension's element."""
    if isinstance(iterable, ast.List | ast.Tuple | ast.Set):
        return [e for e in iterable.elts if not isinstance(e, ast.Starred)][:_MAPPED_ITEMS]
    if isinstance(iterable, ast.GeneratorExp | ast.ListComp | ast.SetComp):
        return [iterable.elt]
    return []


def _calls(node: ast.Call, spec: Handover) -> list[ast.Call]:
    """The calls a hand-over ``node`` of shape ``spec`` makes."""
    func: ast.expr | None = None
    if spec.position is not None and len(node.args) > spec.position:
        func = node.args[spec.position]
    func = func if func is not None else _keyword(node, spec.keyword)
    if func is None or isinstance(func, ast.Starred):
        return []
    rest = node.args[spec.position + 1 :] if spec.position is not None else []
    if spec.mapped:
        columns = [_mapped(i) for i in rest if not isinstance(i, ast.Starred)]
        if not columns or not all(columns):
            return []
        return [_call(func, list(row), [], node) for row in zip(*columns, strict=False)]
    if spec.spread:
        args: list[ast.expr] | None = list(rest)
    else:
        args = _items(_argument(node, spec.args_keyword, spec.args_position))
    if args is None:
        return []
    keywords: list[ast.keyword]
    if not spec.spread:
        keywords = []
        packed_kwargs = _argument(node, spec.kwargs_keyword, spec.kwargs_position)
        if isinstance(packed_kwargs, ast.Dict):
            keywords = [
                ast.keyword(k.value, v)
                for k, v in zip(packed_kwargs.keys, packed_kwargs.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
    else:
        keywords = [k for k in node.keywords if k.arg != spec.keyword]
    return [_call(func, args, keywords, node)]


def _call(
    func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword], at: ast.Call
) -> ast.Call:
    return ast.copy_location(ast.Call(func, args, keywords), at)


def deferred_calls(
    node: ast.Call,
    funcs: Sequence[str],
    bound: Callable[[str], Sequence[ast.AST]],
    resolve: Callable[[ast.expr], Sequence[str]],
) -> list[ast.Call]:
    """The calls ``node`` hands to the standard library to make (see the module docstring).

    ``funcs`` are the names ``node``'s callee may denote, ``resolve`` gives them for any
    expression; ``bound`` gives what a plain name is bound to, so that
    ``g = functools.partial(os.system, cmd); g()`` is ``os.system(cmd)`` too. A method of
    :data:`HANDOVER_METHODS` is spelled whatever its receiver: the caller keeps the call
    only when its callee is a sink.
    """
    found: list[ast.Call] = []
    for name in funcs:
        spec = HANDOVERS.get(name)
        if spec is not None:
            found.extend(_calls(node, spec))
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in HANDOVER_METHODS and not found:
        found.extend(_calls(node, HANDOVER_METHODS[func.attr]))
    # a partial called: in place, or through a name bound to it once
    made: ast.AST = func
    if isinstance(func, ast.Name):
        values = bound(func.id)
        made = values[0] if len(values) == 1 else func
    if (
        isinstance(made, ast.Call)
        and made.args
        and not isinstance(made.args[0], ast.Starred)
        and "functools.partial" in resolve(made.func)
    ):
        held = [*made.args[1:], *node.args]
        found.append(_call(made.args[0], held, [*made.keywords, *node.keywords], node))
    return found
