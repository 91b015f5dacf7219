"""Threat sinks of namespaces indexed or written (CPL-THR-003): builtins' or a module's
namespace (or a dict filled with, spread from or chained to one) indexed by a computed
name, a code runner fetched from ``globals()`` by a string, and builtins stored into a
namespace or into builtins under another name. Split out of
:mod:`caplet._scan._sink_lookups` by concern; its mixin's lookups by calls share
:meth:`NamespaceSinks._hidden_lookup`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._lookup_hidden import BUILTIN_OWNERS, hides_name, worth_hiding
from caplet._scan._sink_sliced import SlicedNames
from caplet._scan._sources import Source
from caplet._scan._syntax import MAX_CANDIDATES

__all__ = ["NamespaceSinks"]


#: Builtins that run code or look names up. Stored into a namespace under another name
#: (Hyperion's ``locals()['lIlI'] = globals``, ``lIlI()['O0o'] = __import__``), the code
#: calls them by names no reader connects to them.
_LOOKUP_BUILTINS = frozenset(
    {"exec", "eval", "compile", "__import__", "getattr", "globals", "locals", "vars", "dir"}
)


#: Builtins that run code: fetched from a module's own namespace by a string
#: (``globals()['\x65\x76\x61\x6c']`` after ``from builtins import *``, Hyperion's
#: last layer) rather than called by name.
_CODE_RUNNERS = frozenset({"exec", "eval", "compile", "__import__"})


#: The calls that return a namespace of the running code.
_NAMESPACE_CALLS = frozenset({"builtins.globals", "builtins.locals", "builtins.vars"})


class NamespaceSinks(SlicedNames):
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _pending: list[Callable[[], None]]

    def namespace_lookup(self, node: ast.Subscript) -> None:
        """``vars(__builtins__)[name]``, ``builtins.__dict__[name]`` with a computed name,
        and any lookup by a computed name that lands on an API worth hiding: a module's
        namespace (``sys.modules``, ``vars(os)``, a copy of one) or a dispatch table of
        builtins (``{"load": exec}``)."""
        value = node.value
        flow = self._flow
        if isinstance(node.slice, ast.Constant):
            self._runner_by_string(node)
            return
        owners = flow.resolve(value)
        filled: tuple[str, ...] = ()
        if isinstance(value, ast.Name) and value.id in flow.contributed:
            filled = self._filled_namespaces(value)
        if isinstance(value, ast.Name) and value.id in flow.bindings.assigned:
            filled = (*filled, *self._spread_namespaces(value))
        owners = (*owners, *filled)
        if not flow.may_look_up(value, owners):
            return  # a list, a local dict, a parameter: no lookup of anything that can hide
        namespace = not BUILTIN_OWNERS.isdisjoint(owners) or any(
            o.endswith(".__dict__") and o.removesuffix(".__dict__") in BUILTIN_OWNERS
            for o in owners
        )
        if flow.plain(node.slice):
            return  # module_name = "builtins" in one branch: a name written out, not hidden
        if (
            isinstance(node.ctx, ast.Load)
            and not isinstance(node.slice, ast.Slice)
            and (namespace or any(o.endswith(".__dict__") or o == "sys.modules" for o in owners))
        ):
            # vars(os)[t[3] + t[9]], sys.modules[...]: a module's namespace, not a list or
            # a dict of the file's own (data indexed by a number is everywhere)
            key = node.slice
            self._pending.append(lambda: self._sliced_lookup(node, key))
        name = flow.name_value(node.slice)
        if name is None and not namespace:
            # nothing below reports an unknown key outside builtins' namespace; its labels
            # were asked anyway while the data flow's answers depended on the order of its
            # questions (14% of the rules' CPU on the benign corpus, issue 16)
            return
        hidden = name is None and flow.closed(node.slice)
        if name is None and not self._decoded(node.slice) and not hidden:
            return
        shown = repr(name) if name is not None else ("<computed>" if hidden else "<decoded>")
        if namespace:
            self._scan.emit(
                "CPL-THR-003",
                f"builtins namespace[{shown} computed]",
                node.lineno,
                node.col_offset,
            )
        elif name is not None:
            denoted = flow.resolve(node)
            if filled:  # d.update(os.__dict__); d[name]: os's entry (recall10)
                denoted = (*denoted, *(f"{o.removesuffix('.__dict__')}.{name}" for o in filled))
            self._hidden_lookup(node, denoted, f"[{shown} computed]")

    def _filled_namespaces(self, container: ast.expr) -> tuple[str, ...]:
        """The namespaces a dict of the file is filled with after its binding (``d = {}``
        then ``d.update(vars(builtins))``, ``d.update(os.__dict__)``): looked up by a
        decoded key, it is the namespace's copy (recall10; the whole-file pass missed it)."""
        if not isinstance(container, ast.Name):
            return ()
        added = self._flow.contributed.get(container.id)
        if not added:
            return ()
        found = [
            owner
            for values in added.values()
            for value in values[:MAX_CANDIDATES]
            for owner in self._flow.resolve(value)
            if owner.endswith(".__dict__") or owner in BUILTIN_OWNERS
        ]
        return tuple(dict.fromkeys(found))[:MAX_CANDIDATES]

    def _spread_namespaces(self, container: ast.Name) -> tuple[str, ...]:
        """The namespaces a dict of the file is bound to a copy of by a spread or a chain
        (``d = {**vars(builtins)}``, ``d = collections.ChainMap(vars(builtins))``): looked
        up by a decoded key, the namespace's copy as :meth:`_filled_namespaces`' is
        (attack11: ``d.update(vars(builtins))`` was read, these two were not)."""
        flow = self._flow
        parts: list[ast.expr] = []
        for bound in flow.bindings.assigned.get(container.id, ())[:MAX_CANDIDATES]:
            if isinstance(bound, ast.Dict):
                parts += [v for k, v in zip(bound.keys, bound.values, strict=True) if k is None]
            elif (
                isinstance(bound, ast.Call)
                and bound.args
                and "collections.ChainMap" in flow.resolve(bound.func)
            ):
                parts += bound.args
        found = [
            owner
            for part in parts[:MAX_CANDIDATES]
            for owner in flow.resolve(part)
            if owner.endswith(".__dict__") or owner in BUILTIN_OWNERS
        ]
        return tuple(dict.fromkeys(found))[:MAX_CANDIDATES]

    def _runner_by_string(self, node: ast.Subscript) -> None:
        """``globals()['eval']``: a builtin that runs code fetched from the module's own
        namespace by a string, never called by its name (a program that wants ``eval``
        writes ``eval``)."""
        ns = node.value
        key = node.slice
        if (
            isinstance(node.ctx, ast.Load)
            and isinstance(ns, ast.Call)
            and not ns.args
            and isinstance(key, ast.Constant)
            and key.value in _CODE_RUNNERS
            and not _NAMESPACE_CALLS.isdisjoint(self._flow.resolve(ns.func))
        ):
            self._scan.emit(
                "CPL-THR-003",
                f"namespace[{key.value!r}] looked up by a string",
                node.lineno,
                node.col_offset,
            )

    def namespace_store(self, target: ast.Subscript, value: ast.expr) -> None:
        """``locals()['lIlI'] = globals``: a builtin that runs code or looks names up stored
        into a namespace (a call's result: ``globals()``, ``locals()``, an alias of them)
        under another name, to be called by that name."""
        if (
            isinstance(target.value, ast.Call)
            and not target.value.args
            and not target.value.keywords
            and isinstance(value, ast.Name)
            and value.id in _LOOKUP_BUILTINS
            and f"builtins.{value.id}" in self._flow.resolve(value)
        ):
            self._scan.emit(
                "CPL-THR-003",
                f"{value.id} stored into a namespace under another name",
                target.lineno,
                target.col_offset,
            )

    def builtins_store(self, node: ast.Call) -> None:
        """``setattr(__builtins__, "lIlI", exec)``: a builtin that runs code or looks names
        up re-published in builtins under another name, for every module to call by it;
        or, with a name the code computes, builtins written from a table that renames them
        (pyobfuscate.com's first line: ``(lambda t: [setattr(__builtins__, k, v) for k, v
        in t.items()])({"lIlI": exec, ...})``). Tests that swap ``input`` or ``open`` in
        builtins store the builtin's own name."""
        flow = self._flow
        owner, key, value = node.args
        if BUILTIN_OWNERS.isdisjoint(flow.resolve(owner)):
            return
        if isinstance(key, ast.Constant) or flow.name_value(key) is not None:
            # "lI" + "lI": a name the evaluator spells is as good as written out
            renamed = self._renamed_builtin(key, value)
        else:
            tables: list[ast.expr] = [
                *(v for vs in flow.bindings.assigned.values() for v in vs),
                *(
                    a
                    for slots in flow.passed_arguments().values()
                    for s in slots.values()
                    for a in s
                ),
            ]
            renamed = not flow.plain(key) and any(
                isinstance(t, ast.Dict)
                and any(
                    k is not None and self._renamed_builtin(k, v)
                    for k, v in zip(t.keys, t.values, strict=True)
                )
                for t in tables
            )
        if renamed:
            self._scan.emit(
                "CPL-THR-003",
                "a builtin re-published in builtins under another name",
                node.lineno,
                node.col_offset,
            )

    def _renamed_builtin(self, key: ast.expr, value: ast.expr) -> bool:
        """``"lIlI": exec``: a builtin that runs code or looks names up, under a name that
        is not its own."""
        # the key written out or computed from literals ({"lI" + "lI": exec}: the same table)
        name = key.value if isinstance(key, ast.Constant) else self._flow.name_value(key)
        return (
            isinstance(name, str)
            and isinstance(value, ast.Name)
            and value.id in _LOOKUP_BUILTINS
            and name != value.id
            and f"builtins.{value.id}" in self._flow.resolve(value)
        )

    def _hidden_lookup(self, node: ast.expr, resolved: tuple[str, ...], how: str) -> None:
        """CPL-THR-003 when what a computed lookup denotes is an API worth hiding."""
        hidden = next(
            (r for r in resolved if worth_hiding(r) or ("." not in r and hides_name(r))),
            None,
        )
        if hidden is not None:
            self._scan.emit(
                "CPL-THR-003", f"{hidden} looked up by {how}", node.lineno, node.col_offset
            )

    def _decoded(self, node: ast.AST) -> bool:
        return any(s is Source.DECODED for s, _ in self._flow.labels(node))
