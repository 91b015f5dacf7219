"""Threat sinks of lookups by computed names (CPL-THR-003): ``getattr``, namespaces indexed,
``.get``/``__getattribute__``, ``__import__`` and ``operator.attrgetter`` given a name built
from literals or decoded, when what it denotes is worth hiding.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._lookup_arguments import own_literals, spread_arguments
from caplet._scan._lookup_forms import partial_lookup
from caplet._scan._rules import API_RULES, DYNAMIC_IMPORTERS, MODULE_RULES
from caplet._scan._sink_carried import CarriedNames
from caplet._scan._sink_sliced import SlicedNames
from caplet._scan._sink_walked import WalkedNames
from caplet._scan._sources import (
    DECODERS,
    DNS_FUNCTIONS,
    EXECUTORS,
    PIP_MAINS,
    RECON_FUNCTIONS,
    RUNS_FILE,
    Source,
)
from caplet._scan._syntax import MAX_CANDIDATES

__all__ = ["LookupSinks"]


#: Builtins' namespaces: a lookup in one by a computed name hides what is called.
_BUILTIN_OWNERS = frozenset({"builtins", "builtins.__dict__"})


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


#: Calls and methods that look a name up in the namespace they are given.
_LOOKUP_CALLS = frozenset(
    {"__getattribute__", "get", "__getitem__", "pop", "setdefault", "getattr_static", "reduce"}
)


#: The calls that return a namespace of the running code.
_NAMESPACE_CALLS = frozenset({"builtins.globals", "builtins.locals", "builtins.vars"})


#: Modules whose names and functions are worth hiding besides those with rules of their
#: own: decoders, the host's identity, the registry, pip.
_HIDDEN_ROOTS = frozenset(
    {
        "os",
        "builtins",
        "sys",
        "marshal",
        "base64",
        "binascii",
        "zlib",
        "lzma",
        "bz2",
        "codecs",
        "pip",
        "platform",
        "getpass",
        "winreg",
        "_winreg",
        "urllib",
        "http",
    }
)


#: Modules the rule tables name only for harmless reasons (logging handlers, type objects).
_NOT_HIDDEN_ROOTS = frozenset({"logging", "gc", "inspect", "types", "distutils", "code"})


_SENSITIVE_ROOTS = (
    _HIDDEN_ROOTS
    | {m.split(".", 1)[0] for m in MODULE_RULES}
    | {a.split(".", 1)[0] for a in API_RULES}
) - _NOT_HIDDEN_ROOTS


def _worth_hiding(api: str) -> bool:
    """An API a computed lookup hides: one with a rule, or one the data flow watches
    (code runners, files run, decoders, the host's identity, name resolution, pip)."""
    return (
        api in API_RULES
        or api in EXECUTORS
        or api in RUNS_FILE
        or api in DECODERS
        or api in RECON_FUNCTIONS
        or api in DNS_FUNCTIONS
        or api in PIP_MAINS
    )


def _hides_name(name: str) -> bool:
    """True when ``name`` (a module or attribute built from pieces) is worth hiding: a
    module the rules watch (processes, network, native code, code loading, files) or
    one of :data:`_HIDDEN_ROOTS`, or anything in one."""
    return name in MODULE_RULES or name.split(".", 1)[0] in _SENSITIVE_ROOTS


class LookupSinks(SlicedNames, CarriedNames, WalkedNames):
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _pending: list[Callable[[], None]]
    #: Nodes made for a check (``operator.getitem(ns, k)`` read as ``ns[k]``), kept alive
    #: for the file: the data flow memoises by ``id``, which a freed node's would reuse.
    _synthetic: list[ast.AST]

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
        namespace = not _BUILTIN_OWNERS.isdisjoint(owners) or any(
            o.endswith(".__dict__") and o.removesuffix(".__dict__") in _BUILTIN_OWNERS
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
            if owner.endswith(".__dict__") or owner in _BUILTIN_OWNERS
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
            if owner.endswith(".__dict__") or owner in _BUILTIN_OWNERS
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
        if _BUILTIN_OWNERS.isdisjoint(flow.resolve(owner)):
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
        return not _BUILTIN_OWNERS.isdisjoint(owners) or (
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
        self.default_lookup(node, _worth_hiding)
        self.walked_lookup(node, _worth_hiding, _hides_name)
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
                if not flow.plain(arg) and own_literals(self._flow, arg) and flow.closed(arg):
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
            and not _BUILTIN_OWNERS.isdisjoint(flow.resolve(node.func.value))
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

    def _hidden_lookup(self, node: ast.expr, resolved: tuple[str, ...], how: str) -> None:
        """CPL-THR-003 when what a computed lookup denotes is an API worth hiding."""
        hidden = next(
            (r for r in resolved if _worth_hiding(r) or ("." not in r and _hides_name(r))),
            None,
        )
        if hidden is not None:
            self._scan.emit(
                "CPL-THR-003", f"{hidden} looked up by {how}", node.lineno, node.col_offset
            )

    def computed_import(self, node: ast.Call, name: str, module: str) -> None:
        """``__import__("o" + "s")``: a module name built from pieces."""
        arg = node.args[0]
        self._pending.append(lambda: self._sliced_lookup(node, arg))
        if not isinstance(arg, ast.Constant) and not self._flow.plain(arg) and _hides_name(module):
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

    def _decoded(self, node: ast.AST) -> bool:
        return any(s is Source.DECODED for s, _ in self._flow.labels(node))

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
        builtin_owner = not _BUILTIN_OWNERS.isdisjoint(owners) or (
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
                picked = self.picked(name, spaces, _worth_hiding) if watched else None
                how = "picked from a listing by a test"
                if picked is None and watched:
                    picked = self.table_entry(name, spaces, _worth_hiding)
                    how = "read from a table of computed names"
                if picked is not None:
                    self._scan.emit(
                        "CPL-THR-003",
                        f"getattr({shown}, {picked!r} {how})",
                        node.lineno,
                        node.col_offset,
                    )
                else:
                    self.carried_lookup(node, owner, name, _worth_hiding)
        elif (
            builtin_owner
            or (watched and not attr.isupper() and not flow.plain(name))
            or any(_worth_hiding(f"{o}.{attr}") for o in owners)
        ):
            self._scan.emit(
                "CPL-THR-003",
                f"getattr(..., {attr!r} built from pieces)",
                node.lineno,
                node.col_offset,
            )
