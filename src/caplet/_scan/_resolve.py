"""What a name, attribute or call of one parsed file denotes: fully qualified names.

``sp.Popen`` -> ``subprocess.Popen``, ``getattr(os, "sys" + "tem")`` ->
``os.system``, ``vars(__builtins__)["exec"]`` -> ``builtins.exec``,
``requests.Session()`` -> an instance whose ``.post`` is
``requests.Session().post``. Names computed from literals are evaluated by
:mod:`caplet._scan._evaluate` (a subclass supplies :meth:`Resolver.name_value`).
Recursion is bounded; a cycle (``a = b; b = a``) resolves to nothing.
"""

from __future__ import annotations

import ast
import builtins

from caplet._scan._container_stores import StoredReads, Stores
from caplet._scan._lookup_forms import attribute_lookup
from caplet._scan._made_objects import C_LIBRARIES, C_PROGRAM_RUNNERS, MADE_OBJECTS
from caplet._scan._reachable import REACHABLE_MODULES
from caplet._scan._rules import API_RULES, DYNAMIC_IMPORTERS, NAME_RESOLVERS
from caplet._scan._sources import DECODERS, NETWORK_MODULES, NOT_EGRESS
from caplet._scan._syntax import MAX_CANDIDATES, MAX_RESOLVE_DEPTH, Bindings

__all__ = ["Resolver", "is_network"]

#: getattr, and inspect's getattr_static, which looks the attribute up without running
#: descriptors: the same builtin fetched by name (blind16: b16-cn-inspect-getattr-static).
_GETATTRS = frozenset({"builtins.getattr", "inspect.getattr_static"})


#: Resolutions in progress at once, whoever started them: far below the
#: interpreter's recursion limit (each one is about ten frames deep).
_MAX_NESTING = 40


#: What a value kept in a container or on an object and called from it is followed for
#: when the container is walked or the attribute read (recall11): builtins and the APIs
#: that run code or programs (the rules' process and dynamic-code APIs). Receivers stay
#: what they were: ``self.session = requests.Session()`` is no network object and
#: ``self.win = ctypes.windll.kernel32`` no library (polars' CPU check reads the same).
_HIDDEN_RULES = frozenset({"CPL-PROC-001", "CPL-DYN-001", "CPL-DYN-002", "CPL-DYN-003"})
_BUILTIN_NAMES = frozenset(vars(builtins))


def _hidden(name: str) -> bool:
    """Whether ``name`` is a builtin or an API that runs code or a program
    (``builtins.exec``, ``os.system``; not ``builtins.self.f``, what an unbound
    ``self`` resolves to)."""
    head, _, rest = name.partition(".")
    if head == "builtins":
        return not rest or rest.split(".", 1)[0] in _BUILTIN_NAMES
    return API_RULES.get(name) in _HIDDEN_RULES


#: The builtins that are functions (a lookup of one in ``globals()`` means the builtin).
_BUILTIN_CALLABLES = frozenset(
    n for n, v in vars(builtins).items() if callable(v) and not isinstance(v, type)
)


def is_network(name: str) -> bool:
    """True when ``name`` is a call into a network module that sends or receives."""
    known = _NETWORK.get(name)
    if known is None:
        # the same names come back for every call of every file, each asked several
        # times (tags, sinks, labels): the prefix test once per name (issue 16's speed)
        if len(_NETWORK) >= _MAX_NETWORK:
            _NETWORK.clear()
        known = _NETWORK[name] = name.startswith(NETWORK_MODULES) and name not in NOT_EGRESS
    return known


#: :func:`is_network` by name, and how many names it keeps (bounded memory).
_NETWORK: dict[str, bool] = {}
_MAX_NETWORK = 65_536


class Resolver(StoredReads):
    """Name resolution over one file's bindings (memoised)."""

    hidden = staticmethod(_hidden)

    def __init__(self, bindings: Bindings) -> None:
        self.bindings = bindings
        self._memo: dict[int, tuple[str, ...]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._resolving: set[str] = set()
        self._globals_names: dict[str, bool] = {}
        self._import_roots: frozenset[str] | None = None
        #: Nodes being resolved now (a cycle through the evaluator ends here).
        self._active: set[int] = set()
        #: Parameter defaults by parameter name (built once, on first need).
        self._defaults_by_name: dict[str, list[ast.expr]] | None = None
        #: What the file stores into its containers and objects (built on first need).
        self._stores: Stores | None = None
        #: :meth:`_stored_attribute` by the attribute as written (``o.f``).
        self._attribute_stores: dict[str, tuple[str, ...]] = {}
        #: :meth:`_stored` by the container's name and the key read.
        self._container_reads: dict[tuple[str, str | None], list[str]] = {}
        #: Each class's assignments by the name they bind (built on first need, per class):
        #: a scan of the body for each ``Op.mN`` read was quadratic (attack21: an enum of
        #: 4 000 members read 4 000 times took 8.5 s).
        self._class_bindings: dict[int, dict[str, list[ast.Assign | ast.AnnAssign]]] = {}

    def name_value(self, node: ast.AST) -> str | None:
        """A string a name is looked up by (see :class:`caplet._scan._evaluate.Evaluator`)."""
        raise NotImplementedError

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        """Fully qualified dotted names ``node`` may denote (empty when unknown)."""
        key = id(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if node.__class__ is ast.Name and depth <= MAX_RESOLVE_DEPTH:
            # a bare name already resolved: its answer, as _resolve would give it (nothing
            # is resolved on the way, so no cycle can pass here), without the two calls
            # and the bookkeeping (issue 16's speed)
            named = self._names.get(node.id)
            if named is not None and len(self._active) <= _MAX_NESTING:
                self._memo[key] = named
                return named
        if depth > MAX_RESOLVE_DEPTH or key in self._active or len(self._active) > _MAX_NESTING:
            # A value defined through itself (``s = {s["k"].get(0): s}``) came back
            # here through the evaluator, which starts its own depth at 0: without
            # this, RecursionError out of every scan (and enable) of such a file.
            return ()
        self._active.add(key)
        try:
            result = self._resolve(node, depth)
        finally:
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _resolve(self, node: ast.AST, depth: int) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return self.resolve_name(node.id, depth)
        if isinstance(node, ast.Attribute):
            if node.attr == "__self__" and any(
                b.startswith("builtins.") for b in self.resolve(node.value, depth + 1)
            ):
                return ("builtins",)  # print.__self__: a builtin function's module
            if node.attr == "__builtins__":
                return ("builtins",)  # sys.modules[__name__].__builtins__, os.__builtins__
            if node.attr == "f_builtins":
                # sys._getframe().f_builtins: only a frame has it, and it is builtins' dict
                return ("builtins.__dict__",)
            bases = self.resolve(node.value, depth + 1)
            names = [f"{base}.{node.attr}" for base in bases]
            if node.attr in C_PROGRAM_RUNNERS and not C_LIBRARIES.isdisjoint(bases):
                names.append(f"os.{node.attr}")  # libc's system() is os.system (blind14)
            reached = REACHABLE_MODULES.get(node.attr)
            if reached is not None and any(map(self._of_an_import, bases)):
                names.append(reached)  # shutil.os is os
            if isinstance(node.ctx, ast.Load):  # a store's target is what it stores
                names.extend(self._stored_attribute(node, depth))
                names.extend(self._class_attribute(node, depth))
            return tuple(dict.fromkeys(names))[:MAX_CANDIDATES]
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node, depth)
        if isinstance(node, ast.Call):
            return self._resolve_call(node, depth)
        if isinstance(node, ast.DictComp):
            return self._copied_namespace(node, depth)
        if isinstance(node, ast.IfExp | ast.BoolOp):
            # __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__:
            # either branch (the idiom that finds builtins' namespace in and out of __main__)
            branches = (node.body, node.orelse) if isinstance(node, ast.IfExp) else node.values
            found = [name for branch in branches for name in self.resolve(branch, depth + 1)]
            return tuple(dict.fromkeys(found))[:MAX_CANDIDATES]
        return ()

    def _class_attribute(self, node: ast.Attribute, depth: int) -> list[str]:
        """``L.run`` of a class of this file whose body binds ``run`` (``run = exec``,
        ``run = staticmethod(exec)``, the BlankOBF habit of keeping a builtin under a class's
        name: blind14): the code runners and hidden APIs the body binds it to."""
        if not isinstance(node.value, ast.Name):
            return []
        found: list[str] = []
        for cls in self.bindings.classes.get(node.value.id, ())[:MAX_CANDIDATES]:
            for stmt in self._bound_in_class(cls).get(node.attr, ()):
                value = stmt.value
                assert value is not None  # _bound_in_class keeps assignments of a value
                if (
                    isinstance(value, ast.Call)
                    and len(value.args) == 1
                    and self.resolve(value.func, depth + 1)
                    in {("builtins.staticmethod",), ("builtins.classmethod",)}
                ):
                    value = value.args[0]  # the function a descriptor wraps
                found.extend(r for r in self.resolve(value, depth + 1) if self.hidden(r))
        return found

    def _bound_in_class(self, cls: ast.ClassDef) -> dict[str, list[ast.Assign | ast.AnnAssign]]:
        """The assignments of a value in ``cls``'s body, by each name they bind, in order."""
        index = self._class_bindings.get(id(cls))
        if index is None:
            index = {}
            for stmt in cls.body:
                if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
                    continue
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for name in dict.fromkeys(t.id for t in targets if isinstance(t, ast.Name)):
                    index.setdefault(name, []).append(stmt)
            self._class_bindings[id(cls)] = index
        return index

    def passed_arguments(self) -> dict[int, dict[str, list[ast.expr]]]:
        """By function scope and parameter, the arguments this file's calls pass to it
        (the data flow's answer, :class:`caplet._scan._flow.Flow`; none here)."""
        return {}

    def of_import(self, name: str) -> bool:
        """Whether the resolved ``name`` starts at a module this file imports."""
        return self._of_an_import(name)

    def _of_an_import(self, name: str) -> bool:
        """Whether ``name`` starts at a module this file imports (not an object of it)."""
        roots = self._import_roots
        if roots is None:
            roots = self._import_roots = frozenset(
                value.split(".", 1)[0]
                for values in self.bindings.imports.values()
                for value in values  # "" for a relative import: the plugin's own modules
            )
        return name.split(".", 1)[0] in roots

    def _breakpoint_hooks(self, depth: int) -> list[str]:
        """What ``breakpoint(*args)`` calls in this file: the callable named by the
        ``PYTHONBREAKPOINT`` it stores into the environment, or the one it stores into
        ``sys.breakpointhook`` (``os.environ["PYTHONBREAKPOINT"] = "os.system"`` makes
        ``breakpoint(cmd)`` run a command: blind17, b17-ds-breakpoint-hook)."""
        stores = self.stores()
        hooks: list[str] = []
        for container in ("os.environ", "environ"):
            for key, value in stores.entries_of(container)[:MAX_CANDIDATES]:
                if key is not None and self.name_value(key) == "PYTHONBREAKPOINT":
                    named = self.name_value(value)
                    if named and named not in {"0", ""}:
                        hooks.append(named)
        for value in stores.attributes.get("sys.breakpointhook", ())[:MAX_CANDIDATES]:
            hooks.extend(self.resolve(value, depth + 1))
        return hooks

    def resolve_name(self, name: str, depth: int = 0) -> tuple[str, ...]:
        """What the bare name ``name`` may denote (imports, assignments, builtins)."""
        cached = self._names.get(name)
        if cached is not None:
            return cached
        if name in self._resolving:  # a = b; b = a
            return ()
        self._resolving.add(name)
        # Python 2's name of builtins, in the try/except imports droppers still carry
        found: list[str] = [
            "builtins" if m == "__builtin__" else m for m in self.bindings.imports.get(name, ())
        ]
        for value in self.bindings.assigned.get(name, ())[:MAX_CANDIDATES]:
            found.extend(self.resolve(value, depth + 1))
        for value, place, size in self.bindings.unpacked.get(name, ())[:MAX_CANDIDATES]:
            if size == 2 and place == 1:
                found.extend(self.picked_element(value, depth))  # _, f = d.popitem()
        for iterable in self.bindings.iterated.get(name, ())[:MAX_CANDIDATES]:
            if isinstance(iterable, ast.List | ast.Tuple):
                # for b in [__builtins__]: each element written in the loop's list
                for element in iterable.elts[:MAX_CANDIDATES]:
                    found.extend(self.resolve(element, depth + 1))
            else:
                # for f in handlers (or handlers.values()): what the file put in it
                found.extend(self._iterated_elements(iterable, depth))
        if not (
            found
            or name in self.bindings.assigned
            or name in self.bindings.iterated
            or name in self.bindings.defined
            or name in self.bindings.imports
        ):
            # a parameter handed builtins' namespace by this file's calls of its function
            # (def pick(b, n): return getattr(b, n); pick(__builtins__, ...)); nothing
            # else is followed: parameters of one name in other functions would mix
            passed = [a for slots in self.passed_arguments().values() for a in slots.get(name, ())]
            # lambda n, b=__builtins__: getattr(b, n): the namespace given as a default; a
            # default that runs code or decodes too (def f(s, _run=exec, _dec=b64decode):
            # BlankOBF's exec by another name, blind19 b19-ds-default-arg-exec-alias)
            given = [(a, False) for a in passed] + [(d, True) for d in self._defaults(name)]
            for arg, default in given[:MAX_CANDIDATES]:
                found.extend(
                    r
                    for r in self.resolve(arg, depth + 1)
                    if r in {"builtins", "builtins.__dict__"}
                    or (default and (r in DECODERS or API_RULES.get(r) in _HIDDEN_RULES))
                )
        if name == "__builtins__":
            found.append("builtins")
        elif name not in self.bindings.imports and name not in self.bindings.defined:
            # Unbound by import or def: it is the builtin (or a star import).
            found.append(f"builtins.{name}")
            found.extend(f"{m}.{name}" for m in self.bindings.star_modules)
            if name == "breakpoint":
                found.extend(self._breakpoint_hooks(depth))
        self._resolving.discard(name)
        result = tuple(dict.fromkeys(found))[:MAX_CANDIDATES]
        self._names[name] = result
        return result

    def _defaults(self, name: str) -> list[ast.expr]:
        """The defaults of every parameter called ``name`` of this file's functions and of
        the lambdas it binds to names."""
        table = self._defaults_by_name
        if table is None:
            table = self._defaults_by_name = {}
            functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = [
                *self.bindings.functions,
                *(
                    v
                    for vs in self.bindings.assigned.values()
                    for v in vs
                    if isinstance(v, ast.Lambda)
                ),
            ]
            for f in functions:
                a = f.args
                positional = [*a.posonlyargs, *a.args]
                pairs = [
                    *zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True),
                    *((p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d),
                ]
                for p, d in pairs:
                    table.setdefault(p.arg, []).append(d)
        return table.get(name, [])

    def _resolve_subscript(self, node: ast.Subscript, depth: int) -> tuple[str, ...]:
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            index = index.operand if isinstance(index.operand, ast.Constant) else index
            sign = -1
        else:
            sign = 1
        if isinstance(index, ast.Constant) and type(index.value) is int:
            # [print, exec][1]: an element of a list or tuple written in this file
            position = sign * index.value
            found: list[str] = []
            # a list changed after its literal (xs[0] = exec, xs.reverse()) is not read by
            # position: any element may be anywhere, what the file added included (recall11)
            changed = self._changed(node.value)
            for sequence in self._sequences(node.value):
                if changed:
                    elements = sequence.elts[:MAX_CANDIDATES]
                    found.extend(r for e in elements for r in self.resolve(e, depth + 1))
                elif -len(sequence.elts) <= position < len(sequence.elts):
                    found.extend(self.resolve(sequence.elts[position], depth + 1))
            found.extend(self._stored(node.value, None, depth))
            # d.popitem()[1], sorted(xs, key=repr)[0]: an element of a container (recall14)
            found.extend(self.picked_element(node.value, depth))
            return tuple(dict.fromkeys(found))[:MAX_CANDIDATES]
        key = self.name_value(node.slice)
        if key is None:
            # (vars(__builtins__), __builtins__)[type(__builtins__) is dict]: a pick between
            # builtins' namespaces written out (the idiom that works in and out of __main__)
            tables = self.tables(node.value)
            picks = [
                *(e for s in self._sequences(node.value) for e in s.elts),
                *(v for t in tables for v in t.values),
            ]
            found = [
                r
                for p in picks[:MAX_CANDIDATES]
                for r in self.resolve(p, depth + 1)
                if r in {"builtins", "builtins.__dict__"}
            ]
            # d[k] = exec; d[j](payload) with neither key known: any code sink it holds
            found.extend(self.any_element(node.value, depth))
            return tuple(dict.fromkeys(found))
        return self.lookup(node.value, key, depth)

    def lookup(self, container: ast.expr, key: str, depth: int = 0) -> tuple[str, ...]:
        """What ``container[key]`` (or ``container.get(key)``) denotes: an entry of a
        namespace (``vars(os)``, ``builtins.__dict__``, ``sys.modules``, a copy of one)
        or of a dispatch table written in this file (``{"load": exec}``)."""
        if self._globals_call(container, depth):
            if key == "__builtins__":
                return ("builtins",)  # globals()["__builtins__"]
            if key in self.bindings.imports:
                return self.resolve_name(key, depth + 1)  # globals()[rot13("bf")]: an import
            # globals()["ev" + "al"]: a builtin's name looked up where only a copy
            # of it could be; what the author means is the builtin
            return (f"builtins.{key}",) if key in _BUILTIN_CALLABLES else ()
        found: list[str] = []
        for base in self.resolve(container, depth + 1):
            if base == "sys.modules":
                found.append(key)
            elif base == "builtins":
                found.append(f"builtins.{key}")  # __builtins__["eval"] (a dict outside __main__)
            elif base.endswith(".__dict__"):
                # builtins.__dict__["eval"], vars(builtins)["eval"]: builtins.eval
                found.append(f"{base.removesuffix('.__dict__')}.{key}")
        for table in self.tables(container):
            for entry, value in zip(table.keys, table.values, strict=True):
                if entry is not None and self.name_value(entry) == key:
                    found.extend(self.resolve(value, depth + 1))
        found.extend(self._stored(container, key, depth))
        return tuple(dict.fromkeys(found))[:MAX_CANDIDATES]

    def may_look_up(self, container: ast.expr, owners: tuple[str, ...]) -> bool:
        """Whether :meth:`lookup` in ``container`` (which resolves to ``owners``) may
        denote anything for some key: a list, a local dict or a parameter cannot,
        and a caller skips evaluating the key of such a lookup (issue 16's speed)."""
        return bool(
            owners
            or self.tables(container)
            or self._globals_call(container, 0)
            or self._has_stores(container)
        )

    def _globals_call(self, container: ast.expr, depth: int) -> bool:
        """``globals()``, or a name bound to it (``g = globals()``): its
        ``"__builtins__"`` entry is the builtins module."""
        if isinstance(container, ast.Name):
            # memoised per name, a cycle (g = h; h = g) adding nothing: each name
            # is asked once, however many names are bound to each other
            known = self._globals_names.get(container.id)
            if known is not None or depth > MAX_RESOLVE_DEPTH:
                return bool(known)
            self._globals_names[container.id] = False
            bound = self.bindings.assigned.get(container.id, ())[:MAX_CANDIDATES]
            found = any(self._globals_call(value, depth + 1) for value in bound)
            self._globals_names[container.id] = found
            return found
        if isinstance(container, ast.Attribute) and container.attr in {"__globals__", "f_globals"}:
            return True  # a function's or a frame's globals: the module's namespace
        return (
            isinstance(container, ast.Call)
            and not container.args
            # at module level locals() and vars() are globals()
            and not {"builtins.globals", "builtins.locals", "builtins.vars"}.isdisjoint(
                self.resolve(container.func, depth + 1)
            )
        )

    def _sequences(self, container: ast.expr) -> list[ast.List | ast.Tuple]:
        """The list or tuple literals ``container`` is, or a name of it is bound to once."""
        if isinstance(container, ast.List | ast.Tuple):
            return [container]
        if isinstance(container, ast.Name):
            bound = self.bindings.assigned.get(container.id, ())
            if len(bound) == 1 and isinstance(bound[0], ast.List | ast.Tuple):
                return [bound[0]]
        return []

    def tables(self, container: ast.expr) -> list[ast.Dict]:
        """The dict literals ``container`` is, or a name of it is bound to."""
        if isinstance(container, ast.Dict):
            return [container]
        if isinstance(container, ast.Name):
            bound = self.bindings.assigned.get(container.id, ())[:MAX_CANDIDATES]
            return [v for v in bound if isinstance(v, ast.Dict)]
        return []

    def _copied_namespace(self, node: ast.DictComp, depth: int) -> tuple[str, ...]:
        """``{n: getattr(builtins, n) for n in dir(builtins)}`` (getattr in any spelling)
        and ``{k: v for k, v in vars(builtins).items()}`` are copies of builtins' namespace."""
        if len(node.generators) != 1 or not isinstance(node.key, ast.Name):
            return ()
        loop = node.generators[0]
        key = node.key.id
        value = node.value
        # the value may be any spelling of getattr (builtins.__getattribute__(n), vars(b)[n])
        looked = attribute_lookup(value, lambda e: self.resolve(e, depth + 1))
        if (
            isinstance(loop.target, ast.Name)
            and loop.target.id == key
            and looked is not None
            and isinstance(looked[1], ast.Name)
            and looked[1].id == key
        ):
            return tuple(f"{b}.__dict__" for b in self.resolve(looked[0], depth + 1))
        if (
            isinstance(loop.target, ast.Tuple)
            and [e.id for e in loop.target.elts if isinstance(e, ast.Name)]
            == [key, getattr(value, "id", None)]
            and isinstance(loop.iter, ast.Call)
            and isinstance(loop.iter.func, ast.Attribute)
            and loop.iter.func.attr == "items"
            and not loop.iter.args
        ):
            return self._namespaces(loop.iter.func.value, depth)
        return ()

    def _namespaces(self, node: ast.expr, depth: int) -> tuple[str, ...]:
        """The namespaces (``X.__dict__``) ``node`` may be."""
        return tuple(b for b in self.resolve(node, depth + 1) if b.endswith(".__dict__"))

    def _looked_up(
        self, node: ast.Call, funcs: tuple[str, ...], depth: int
    ) -> tuple[str, ...] | None:
        """A lookup that is not getattr: ``ns.get(key)``, ``X.__getattribute__(key)``,
        ``object.__getattribute__(X, key)``, and the copies ``dict(ns)``, ``ns.copy()``;
        ``None`` when ``node`` is none of them (``requests.get(url)`` is a request)."""
        args = node.args
        func = node.func
        found: tuple[str, ...] = ()
        if "builtins.dict" in funcs and len(args) == 1 and not node.keywords:
            found = self._namespaces(args[0], depth)
            inner = args[0]
            if (
                not found
                and isinstance(inner, ast.Call)
                and len(inner.args) == 1
                and "inspect.getmembers" in self.resolve(inner.func, depth + 1)
            ):
                # dict(inspect.getmembers(X)) is X's namespace, as vars(X) (blind8)
                found = tuple(f"{b}.__dict__" for b in self.resolve(inner.args[0], depth + 1))
        elif isinstance(func, ast.Attribute):
            method = func.attr
            if method == "copy" and not args:
                found = self._namespaces(func.value, depth)
            elif method in {"get", "__getitem__"} and args:
                key = self.name_value(args[0])
                if key is None:
                    found = tuple(dict.fromkeys(self.any_element(func.value, depth)))
                else:
                    found = self.lookup(func.value, key, depth)
            elif method == "__getattribute__" and 1 <= len(args) <= 2:
                key = self.name_value(args[-1])
                owner = args[0] if len(args) == 2 else func.value
                if key is not None:
                    found = tuple(f"{b}.{key}" for b in self.resolve(owner, depth + 1))
        return found or None

    def _resolve_call(self, node: ast.Call, depth: int) -> tuple[str, ...]:
        funcs = self.resolve(node.func, depth + 1)
        looked_up = self._looked_up(node, funcs, depth)
        if looked_up is not None:
            return looked_up
        taken = self.taken_out(node, funcs, depth)
        if taken:
            return tuple(dict.fromkeys(taken))[:MAX_CANDIDATES]
        if not funcs:
            return ()
        if node.args and not DYNAMIC_IMPORTERS.isdisjoint(funcs):
            # __import__("os") evaluates to the module os (for a dotted name
            # __import__ returns the top package, import_module the leaf).
            name = self.name_value(node.args[0])
            if name is None:
                return ()
            if "builtins.__import__" in funcs and "fromlist" not in {k.arg for k in node.keywords}:
                return tuple(dict.fromkeys((name, name.split(".", 1)[0])))
            return (name,)
        if not NAME_RESOLVERS.isdisjoint(funcs) and node.args:
            # pkgutil.resolve_name("os:system") is os.system, by a name in a string
            name = self.name_value(node.args[0])
            return () if name is None else (name.replace(":", "."),)
        if not _GETATTRS.isdisjoint(funcs) and len(node.args) >= 2:
            attr = self.name_value(node.args[1])
            if attr is None:
                return ()
            return tuple(f"{b}.{attr}" for b in self.resolve(node.args[0], depth + 1))
        if "builtins.eval" in funcs and len(node.args) == 1:
            # eval("ex" + "ec") is the builtin exec: a name evaluated to what it denotes
            name = self.name_value(node.args[0])
            if name is not None and name.isidentifier():
                return self.resolve_name(name, depth + 1)
            return ()
        if "builtins.vars" in funcs and len(node.args) == 1:
            # vars(builtins) is builtins' namespace: vars(b)[name] resolves through it
            return tuple(f"{b}.__dict__" for b in self.resolve(node.args[0], depth + 1))
        made = [MADE_OBJECTS[f] for f in funcs if f in MADE_OBJECTS]
        if made:
            return tuple(dict.fromkeys(made))  # an object whose methods the rules know
        if "ssl.SSLContext().wrap_socket" in funcs and not (
            node.args and any(is_network(r) for r in self.resolve(node.args[0], depth + 1))
        ):
            return ()  # a TLS socket wraps a socket (blind19); anything else is no connection
        # An object made by a network module (a session, a socket, a connection):
        # its methods are network calls too.
        return tuple(f"{f}()" for f in funcs if is_network(f))[:MAX_CANDIDATES]
