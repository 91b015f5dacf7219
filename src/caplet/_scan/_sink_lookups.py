"""Threat sinks of lookups by computed names (CPL-THR-003): ``getattr``,
``.get``/``__getattribute__``, ``__import__`` and ``operator.attrgetter`` given a name built
from literals or decoded, when what it denotes is worth hiding. Namespaces indexed or
written are :mod:`caplet._scan._sink_namespaces`' (a mixin this one extends), what is worth
hiding :mod:`caplet._scan._lookup_hidden`'.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._lookup_arguments import own_literals, spread_arguments
from caplet._scan._lookup_forms import partial_lookup
from caplet._scan._lookup_hidden import (
    BUILTIN_OWNERS,
    HIDDEN_RUNNER_NAMES,
    hides_name,
    worth_hiding,
)
from caplet._scan._rules import API_RULES, DYNAMIC_IMPORTERS, MODULE_RULES
from caplet._scan._sink_carried import CarriedNames
from caplet._scan._sink_namespaces import NamespaceSinks
from caplet._scan._sink_walked import WalkedNames

__all__ = ["LookupSinks"]


#: Calls and methods that look a name up in the namespace they are given.
_LOOKUP_CALLS = frozenset(
    {"__getattribute__", "get", "__getitem__", "pop", "setdefault", "getattr_static", "reduce"}
)


class LookupSinks(NamespaceSinks, CarriedNames, WalkedNames):
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _pending: list[Callable[[], None]]
    #: Nodes made for a check (``operator.getitem(ns, k)`` read as ``ns[k]``), kept alive
    #: for the file: the data flow memoises by ``id``, which a freed node's would reuse.
    _synthetic: list[ast.AST]

    def _mapped_getattr(self, node: ast.Call) -> None:
        """``map(getattr, [builtins], [n])``: getattr called on the lists' items in step."""
        if "builtins.getattr" not in self._flow.resolve(node.args[0]):
            return
        owners, names = node.args[1], node.args[2]
        if not (
            isinstance(owners, ast.List | ast.Tuple) and isinstance(names, ast.List | ast.Tuple)
        ):
            return
        for owner, name in zip(owners.elts, names.elts, strict=False):
            if not isinstance(owner, ast.Starred) and not isinstance(name, ast.Starred):
                self.computed_getattr(node, owner, name, None)

    def _mapped_lookup(self, node: ast.Call) -> None:
        """``map(ns.get, [n])``: a namespace's lookup called on each item of a literal list,
        as ``ns.get(n)`` (blind8)."""
        func, items = node.args
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in {"get", "__getitem__", "__getattribute__"}
            and isinstance(items, ast.List | ast.Tuple)
        ):
            return
        for item in items.elts[:4]:
            if isinstance(item, ast.Starred):
                continue
            call = ast.copy_location(ast.Call(func, [item], []), node)
            self._synthetic.append(call)  # alive while the file is checked: ids are memo keys
            self.computed_lookup(call, item)

    def _lambda_argument(self, name: ast.expr) -> str | None:
        """``(lambda n: getattr(os, n))("sys" + "tem")``: the parameter of a lambda called
        in place, given one computed value by that call (its own scope: a parameter of the
        same name elsewhere is another; branch blindcn)."""
        if not isinstance(name, ast.Name):
            return None
        flow = self._flow
        slots = flow.passed_arguments().get(flow.scope(name), {})
        given = slots.get(name.id, [])
        if len(given) != 1 or flow.plain(given[0]):
            return None
        return flow.name_value(given[0])

    def _builtins_namespace(self, node: ast.expr) -> bool:
        """``__builtins__``, ``builtins``, ``vars(builtins)``, ``builtins.__dict__``, or a
        ``.copy()`` of one."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "copy"
            and not node.args
        ):
            node = node.func.value
        owners = self._flow.resolve(node)
        return not BUILTIN_OWNERS.isdisjoint(owners) or (
            isinstance(node, ast.Name) and node.id == "__builtins__"
        )

    def lookup_call(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """A builtin looked up by a name computed from literals, by any of the lookups
        besides ``getattr`` and a subscript: ``object.__getattribute__(__builtins__, n)``,
        ``dict.get(vars(__builtins__), n)``, ``vars(__builtins__).copy().pop(n)``,
        ``functools.reduce(getattr, [n], __builtins__)``, ``inspect.getattr_static``,
        ``operator.attrgetter(n)(__builtins__)``."""
        if "builtins.getattr" in funcs:
            spread = spread_arguments(self._flow, node.args)
            if spread is not None and len(spread) in {2, 3}:
                # getattr(*(builtins, n)), getattr(*args) with args = [os, n] (blindcn)
                self.computed_getattr(node, spread[0], spread[1], None)
            return  # otherwise computed_getattr's
        self.default_lookup(node, worth_hiding)
        self.walked_lookup(node, worth_hiding, hides_name)
        if "builtins.map" in funcs and len(node.args) == 3:
            self._mapped_getattr(node)
        if "builtins.map" in funcs and len(node.args) == 2:
            self._mapped_lookup(node)
        if "importlib.util.find_spec" in funcs and node.args:
            # find_spec("o" + "s"): a module found by a name built from pieces (blind8)
            spec_name = self._flow.name_value(node.args[0])
            if spec_name is not None:
                self.computed_import(node, "importlib.util.find_spec", spec_name)
        if "operator.getitem" in funcs and len(node.args) == 2:
            # operator.getitem(vars(builtins), n) is vars(builtins)[n] (blindcn)
            key = ast.copy_location(ast.Subscript(node.args[0], node.args[1], ast.Load()), node)
            self._synthetic.append(key)  # alive while the file is checked: ids are memo keys
            self.namespace_lookup(key)
        func = node.func
        flow = self._flow
        looked = partial_lookup(node, flow.resolve, lambda n: flow.bindings.assigned.get(n, ()))
        if looked is not None:
            # g = functools.partial(getattr, os); g("sys" + "tem"): getattr by another name
            self.computed_getattr(node, looked[0], looked[1], None)
            return
        if not DYNAMIC_IMPORTERS.isdisjoint(funcs):
            # __import__(''.join(map(s.__getitem__, [...]))) with s = str(copyright): a
            # module named by letters out of a builtin's text the evaluator does not spell
            # (one it spells is computed_import's)
            arg = node.args[0]
            if not isinstance(arg, ast.Constant) and flow.name_value(arg) is None:
                self._pending.append(lambda: self._sliced_lookup(node, arg))
                if not flow.plain(arg) and self._decoded(arg):
                    # import_module(b32decode(mod).decode()) in a helper its callers hand
                    # encoded names: a loader's names are written out, not decoded (blind13)
                    shown = next(iter(funcs)).removeprefix("builtins.")
                    self._scan.emit(
                        "CPL-THR-003", f"{shown}(<decoded name>)", node.lineno, node.col_offset
                    )
                elif not flow.plain(arg) and own_literals(self._flow, arg) and flow.closed(arg):
                    # n = ""; for c in [111, 115]: n += chr(c); __import__(n): a module
                    # named by a computation the evaluator does not follow (blind8). Not
                    # through a parameter or an object's attribute: a loader handed names
                    # its callers or its options build from literals is every plugin
                    # loader (pyparsing, sympy, pycryptodomex's setup.py; branch blindcn)
                    shown = next(iter(funcs)).removeprefix("builtins.")
                    self._scan.emit(
                        "CPL-THR-003",
                        f"{shown}(<name computed from literals>)",
                        node.lineno,
                        node.col_offset,
                    )
            return
        names: list[ast.expr] = []
        if isinstance(func, ast.Call) and func.args:
            inner = flow.resolve(func.func)
            if {"operator.attrgetter", "operator.methodcaller"}.isdisjoint(inner):
                return
            names = [func.args[0]]
            spaces = node.args
        else:
            last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if last not in _LOOKUP_CALLS:
                return
            if isinstance(func, ast.Attribute) and last in {"pop", "setdefault"}:
                spaces = [func.value]
                names = node.args[:1]
            else:
                spaces = node.args
                names = [a for a in node.args if not self._builtins_namespace(a)]
        if not names or not any(self._builtins_namespace(s) for s in spaces):
            return
        for name in names:
            if (
                not isinstance(name, ast.Constant)
                and flow.name_value(name) is None
                and not flow.plain(name)
                and flow.closed(name)
            ):
                self._scan.emit(
                    "CPL-THR-003",
                    "builtins looked up by <name computed from literals>",
                    node.lineno,
                    node.col_offset,
                )
                return

    def computed_lookup(self, node: ast.Call, key: ast.expr) -> None:
        """``ns.get(name)``, ``os.__getattribute__(name)``, ``object.__getattribute__(os,
        name)`` with a computed name: a lookup like getattr's, by other means."""
        if isinstance(key, ast.Constant):
            return
        flow = self._flow
        name = flow.name_value(key)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else "lookup"
        if name is not None:
            self._hidden_lookup(node, flow.resolve(node), f".{method}({name!r} computed)")
        elif (
            isinstance(node.func, ast.Attribute)
            and not BUILTIN_OWNERS.isdisjoint(flow.resolve(node.func.value))
            and flow.closed(key)
        ):
            # __builtins__.__getattribute__(__name__.__class__.__doc__[3].__add__(...)):
            # a builtin fetched by a name spelled from the interpreter's own text
            self._scan.emit(
                "CPL-THR-003",
                f"builtins.{method}(<name computed from literals>)",
                node.lineno,
                node.col_offset,
            )

    def computed_import(self, node: ast.Call, name: str, module: str) -> None:
        """``__import__("o" + "s")``: a module name built from pieces."""
        arg = node.args[0]
        self._pending.append(lambda: self._sliced_lookup(node, arg))
        if not isinstance(arg, ast.Constant) and not self._flow.plain(arg) and hides_name(module):
            api = f"{name.removeprefix('builtins.')}({module!r} built from pieces)"
            self._scan.emit("CPL-THR-003", api, node.lineno, node.col_offset)

    def computed_getattr(
        self, node: ast.Call, owner: ast.expr, name: ast.expr, attr: str | None
    ) -> None:
        """``getattr(owner, name)`` where the name is computed to hide what is called."""
        self._computed_name(node, name, owner, attr)

    def _alternatives(self, name: ast.expr) -> list[ast.expr]:
        """The values a name takes besides what it reads: the default of
        ``os.getenv``/``environ.get``/``dict.get`` (``get(k, default)``), the last operand
        of ``x or default``, the items of a literal list a loop takes it from when they are
        not all written out (``("sp" + "awn", "sys" + "tem")``)."""
        if isinstance(name, ast.Name):
            return [
                item
                for iterable in self._flow.bindings.iterated.get(name.id, ())[:2]
                if isinstance(iterable, ast.List | ast.Tuple)
                and not any(isinstance(e, ast.Tuple | ast.List | ast.Dict) for e in iterable.elts)
                and not all(isinstance(e, ast.Constant) for e in iterable.elts)
                for item in iterable.elts[:8]
                if not isinstance(item, ast.Constant | ast.Starred)
            ]
        if isinstance(name, ast.BoolOp) and isinstance(name.op, ast.Or):
            return [name.values[-1]]
        if (
            isinstance(name, ast.Call)
            and isinstance(name.func, ast.Attribute | ast.Name)
            and (name.func.attr if isinstance(name.func, ast.Attribute) else name.func.id)
            in {"get", "getenv"}
            and len(name.args) == 2
        ):
            return [name.args[1]]
        return []

    def _computed_name(
        self, node: ast.Call, name: ast.expr, owner: ast.expr | None, attr: str | None = None
    ) -> None:
        """A lookup by a name computed from literals (or decoded): what it hides."""
        if isinstance(name, ast.Constant):
            return
        self._pending.append(lambda: self._sliced_lookup(node, name))
        flow = self._flow
        if attr is None:
            attr = flow.name_value(name)
        if attr is None:
            attr = self._lambda_argument(name)
        if attr is None and owner is not None:
            for alternative in self._alternatives(name):
                # getattr(os, os.environ.get("MODE", "sys" + "tem")): the default is the
                # name whenever the variable is unset; for n in ("sp" + "awn", "sys" +
                # "tem"): getattr(os, n): each item is the name in turn (blind8)
                self._computed_name(node, alternative, owner)
        if owner is None:  # operator.attrgetter(name)
            if attr is not None and (
                f"os.{attr}" in API_RULES
                or f"subprocess.{attr}" in API_RULES
                or f"builtins.{attr}" in API_RULES
            ):
                self._scan.emit(
                    "CPL-THR-003",
                    f"attrgetter({attr!r} built from pieces)",
                    node.lineno,
                    node.col_offset,
                )
            return
        owners = flow.resolve(owner)
        builtin_owner = not BUILTIN_OWNERS.isdisjoint(owners) or (
            isinstance(owner, ast.Name | ast.Attribute)
            and (owner.id if isinstance(owner, ast.Name) else owner.attr) == "__builtins__"
        )
        # getattr(builtins, name) with a variable is what pydoc, inspect and
        # subprocess do; a name computed from literals or decoded inline is
        # what droppers do.
        # getattr(requests, "teg"[::-1]): a network, process or native-code module
        # looked up by a name spelled so that no reader sees it (os.O_BINARY is not)
        watched = builtin_owner or any(o in MODULE_RULES and flow.of_import(o) for o in owners)
        if attr is None:
            shown = "builtins" if builtin_owner else next(iter(owners), "")
            if watched and self._decoded(name):
                self._scan.emit(
                    "CPL-THR-003", f"getattr({shown}, <decoded name>)", node.lineno, node.col_offset
                )
            elif watched and flow.closed(name):
                self._scan.emit(
                    "CPL-THR-003",
                    f"getattr({shown}, <name computed from literals>)",
                    node.lineno,
                    node.col_offset,
                )
            else:
                spaces = ("builtins",) if builtin_owner else owners
                # a pick out of a listing counts whatever the owner: the test keeps a name
                # worth hiding (``os.system``) only when one is kept (blind33: ``os`` is no
                # watched module, and ``[getattr(os, n) for n in dir(os) if ...][0]`` was clean)
                picked = self.picked(name, spaces, worth_hiding)
                how = "picked from a listing by a test"
                if picked is None and watched:
                    picked = self.table_entry(name, spaces, worth_hiding)
                    how = "read from a table of computed names"
                if picked is not None:
                    self._scan.emit(
                        "CPL-THR-003",
                        f"getattr({shown}, {picked!r} {how})",
                        node.lineno,
                        node.col_offset,
                    )
                else:
                    self.carried_lookup(node, owner, name, worth_hiding)
        elif (
            builtin_owner
            or (watched and not attr.isupper() and not flow.plain(name))
            or any(worth_hiding(f"{o}.{attr}") for o in owners)
            # getattr(<a module imported by a computed name>, "Po" + "pen"): an owner the
            # resolver cannot name, and a runner's name spelled in pieces (blind33)
            or (not owners and attr in HIDDEN_RUNNER_NAMES and not flow.plain(name))
        ):
            self._scan.emit(
                "CPL-THR-003",
                f"getattr(..., {attr!r} built from pieces)",
                node.lineno,
                node.col_offset,
            )
