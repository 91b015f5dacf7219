"""Threat sinks of lookups by computed names (CPL-THR-003): ``getattr``, namespaces indexed,
``.get``/``__getattribute__``, ``__import__`` and ``operator.attrgetter`` given a name built
from literals or decoded, when what it denotes is worth hiding.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._rules import API_RULES, DYNAMIC_IMPORTERS, MODULE_RULES
from caplet._scan._sources import (
    DECODERS,
    DNS_FUNCTIONS,
    EXECUTORS,
    PIP_MAINS,
    RECON_FUNCTIONS,
    RUNS_FILE,
    Source,
)
from caplet._scan._syntax import dotted as _dotted
from caplet._scan._values import PRINTABLE_BUILTINS

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


def _returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    """What a function returns or yields, its own nested definitions left out."""
    found: list[ast.expr] = []
    pending: list[ast.AST] = list(fn.body)
    while pending:
        item = pending.pop()
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(item, ast.Return | ast.Yield | ast.YieldFrom) and item.value is not None:
            found.append(item.value)
        pending.extend(ast.iter_child_nodes(item))
    return found


#: Calls that turn an object into its text.
_TEXT_OF = frozenset(
    {"builtins.str", "builtins.repr", "builtins.format", "builtins.ascii", "builtins.str.format"}
)


#: Builtin types whose ``__doc__`` a name may be spelled from.
_TYPES = frozenset({"int", "str", "bytes", "float", "list", "dict", "tuple", "type", "object"})


#: Builtins whose text a name may be sliced from.
_TEXT_NAMES = PRINTABLE_BUILTINS | _TYPES


#: Attributes that pick items out of a sequence, besides a subscript.
_PICKERS = frozenset({"__getitem__", "getitem", "itemgetter"})


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


class LookupSinks:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _pending: list[Callable[[], None]]
    #: Whether the file holds any builtin's text at all (found once, on first need):
    #: without one no name can be sliced out of one, and no walk is made.
    _builtin_texts: bool | None = None
    #: By node, whether what it reads reaches a builtin's text (memoised per file).
    _carries_text: dict[int, bool] | None = None
    #: By parameter name, what this file's ``C(...)`` calls hand ``C.__init__``.
    _constructed: dict[str, list[ast.expr]] | None = None

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
        hidden = name is None and namespace and flow.closed(node.slice)
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
            self._hidden_lookup(node, flow.resolve(node), f"[{shown} computed]")

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
        if isinstance(key, ast.Constant):
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
        return (
            isinstance(key, ast.Constant)
            and isinstance(value, ast.Name)
            and value.id in _LOOKUP_BUILTINS
            and key.value != value.id
            and f"builtins.{value.id}" in self._flow.resolve(value)
        )

    def computed_eval(self, node: ast.Call, text: ast.expr) -> None:
        """``eval(s[3] + t[17] + ...)`` with ``s = str(oct)``: a builtin reached by
        evaluating its name sliced out of a builtin's text (a value the evaluator computes
        is read as code instead)."""
        if not isinstance(text, ast.Constant):
            self._pending.append(lambda: self._sliced_lookup(node, text))

    def _sliced_lookup(self, node: ast.expr, name: ast.expr) -> None:
        """CPL-THR-003 when the name a lookup or import takes is sliced out of a builtin's
        text (checked once the whole file is seen: the text may reach the name through a
        class or a function visited after the lookup)."""
        if self._sliced_from_builtins(name):
            self._scan.emit(
                "CPL-THR-003",
                "a name sliced out of a builtin's text",
                node.lineno,
                node.col_offset,
            )

    def _sliced_from_builtins(self, node: ast.expr) -> bool:
        """Whether ``node`` (or what it reads, a few bindings deep) picks items out of a
        builtin object's text: ``str(oct)[13]``, ``repr(hex)[3]``, ``f"{copyright}"[7]``,
        ``int.__doc__[30]``, ``sys.copyright[5]``. Whatever the evaluator makes of it (the
        text differs between interpreters, so a name spelled on one is garbage on
        another), a name assembled that way is hidden by construction."""
        if self._builtin_texts is None:
            self._builtin_texts = any(self._builtin_text(n) for n in self._flow.nodes)
        if not self._builtin_texts:
            return False
        for item in self._reached(node, 256):
            if isinstance(item, ast.Attribute) and item.attr not in _PICKERS:
                continue  # an attribute read, not s.__getitem__
            if isinstance(item, ast.Subscript | ast.Attribute) and self._text_in(item.value):
                return True
        return False

    def _constructor_arguments(self) -> dict[str, list[ast.expr]]:
        """By parameter name, the arguments this file's ``C(...)`` calls pass to the
        ``__init__`` of its class ``C`` (``self`` left out)."""
        table = self._constructed
        if table is None:
            table = self._constructed = {}
            inits: dict[str, list[str]] = {}
            nodes = self._flow.nodes
            for n in nodes:
                if isinstance(n, ast.ClassDef):
                    for stmt in n.body:
                        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                            params = [a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args)]
                            inits[n.name] = params[1:]
            if inits:
                for n in nodes:
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                        for param, arg in zip(inits.get(n.func.id, ()), n.args, strict=False):
                            table.setdefault(param, []).append(arg)
        return table

    def _text_in(self, node: ast.expr) -> bool:
        """Whether ``node`` or what it reads reaches a builtin's text (memoised)."""
        memo = self._carries_text
        if memo is None:
            memo = self._carries_text = {}
        found = memo.get(id(node))
        if found is None:
            found = memo[id(node)] = any(self._builtin_text(t) for t in self._reached(node, 128))
        return found

    def _reached(self, node: ast.AST, budget: int) -> Iterator[ast.AST]:
        """``node``'s parts and what its names and attributes hold: what they are bound
        to, looped over, given later, passed as a parameter, the helper they name."""
        flow = self._flow
        b = flow.bindings
        stack: list[ast.AST] = [node]
        seen: set[str] = set()
        while stack and budget > 0:
            budget -= 1
            item = stack.pop()
            yield item
            if isinstance(item, ast.Name) and item.id not in seen:
                seen.add(item.id)
                name = item.id
                stack.extend(b.assigned.get(name, ())[:8])
                stack.extend(b.iterated.get(name, ())[:8])
                stack.extend(v for vs in flow.contributed.get(name, {}).values() for v in vs[:8])
                stack.extend(
                    a for slots in flow.passed_arguments().values() for a in slots.get(name, ())[:8]
                )
                stack.extend(self._constructor_arguments().get(name, ())[:8])
                stack.extend(r for f in b.functions if f.name == name for r in _returns(f))
            elif isinstance(item, ast.Attribute):
                dotted = _dotted(item) or f".{item.attr}"
                if dotted not in seen:
                    # self.text = str(oct); Helper(t).name(): what it holds, what it returns
                    seen.add(dotted)
                    stack.extend(
                        v for vs in flow.contributed.get(dotted, {}).values() for v in vs[:8]
                    )
                    stack.extend(r for f in b.functions if f.name == item.attr for r in _returns(f))
            stack.extend(ast.iter_child_nodes(item))

    def _builtin_text(self, item: ast.AST) -> bool:
        """``str(oct)``, ``repr(hex)``, ``format(copyright)``, ``f"{credits}"``,
        ``oct.__str__``, ``X.__doc__`` of a builtin, ``sys.copyright``."""
        resolve = self._flow.resolve
        if isinstance(item, ast.Call) and len(item.args) == 1 and not item.keywords:
            # the argument first: str(x) of anything but a builtin is common, and cheap to
            # tell apart before the callee is resolved
            return self._printable(item.args[0]) and not _TEXT_OF.isdisjoint(resolve(item.func))
        if isinstance(item, ast.FormattedValue):
            return self._printable(item.value)
        if isinstance(item, ast.BinOp) and isinstance(item.op, ast.Mod):
            return isinstance(item.left, ast.Constant) and self._printable(item.right)
        if isinstance(item, ast.Attribute):
            if item.attr in {"__str__", "__repr__", "__doc__"}:
                return self._printable(item.value)
            # sys.copyright only: sys.version is parsed by every version check
            return item.attr == "copyright" and "sys.copyright" in resolve(item)
        return False

    def _printable(self, node: ast.expr) -> bool:
        """A builtin the file never rebinds (``oct``, ``copyright``, ``int``...), named or
        reached through builtins (``builtins.oct``, ``vars(__builtins__)["oct"]``)."""
        if isinstance(node, ast.Name):
            key = node.id
            b = self._flow.bindings
            if (
                key in b.assigned
                or key in b.iterated
                or key in b.scoped
                or key in b.imports
                or key in b.defined
                or key in self._flow.parameter_names()
            ):
                return False  # def dump(self, format=None): f".{format}" is the parameter
        elif isinstance(node, ast.Attribute):
            key = node.attr
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value if isinstance(node.slice.value, str) else ""
        else:
            return False
        return key in _TEXT_NAMES and f"builtins.{key}" in self._flow.resolve(node)

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
            return  # computed_getattr's
        func = node.func
        flow = self._flow
        if not DYNAMIC_IMPORTERS.isdisjoint(funcs):
            # __import__(''.join(map(s.__getitem__, [...]))) with s = str(copyright): a
            # module named by letters out of a builtin's text the evaluator does not spell
            # (one it spells is computed_import's)
            arg = node.args[0]
            if not isinstance(arg, ast.Constant) and flow.name_value(arg) is None:
                self._pending.append(lambda: self._sliced_lookup(node, arg))
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
