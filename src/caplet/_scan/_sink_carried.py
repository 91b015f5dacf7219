"""Names carried by identifiers (CPL-THR-003): a lookup whose name a function computes from
what the file hands it as identifiers rather than strings.

Three shapes, written blind to the rules (branch blindcn, issue 16, class 1):

- a decorator that swaps a function for the builtin its name spells backwards
  (``@native def cexe(...)`` with ``getattr(builtins, fn.__name__[::-1])``);
- a metaclass whose ``__getattr__`` imports the module its class is named after and
  returns the attribute named backwards (``class subprocess(metaclass=_Auto)``, then
  ``subprocess.llac_kcehc(...)``);
- a proxy whose ``__getattr__`` splits the attribute's name into a module and a function
  (``lazy.os__system(cmd)``).

The lookup's name (and, for an importer, its module) is evaluated once per identifier
the file gives the function; what it spells counts only when it differs from every
identifier given (``getattr(os, name)`` in a proxy used as ``proxy.system`` hides
nothing) and denotes an API worth hiding.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._rules import DYNAMIC_IMPORTERS
from caplet._scan._values import Value

__all__ = ["CarriedNames"]

#: Identifiers tried per function (decorated definitions, attribute names).
_MAX_GIVEN = 32

#: Methods that receive an attribute's name.
_ATTRIBUTE_HOOKS = frozenset({"__getattr__", "__getattribute__"})


class CarriedNames:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _decorator_names: frozenset[str] | None = None

    def carried_lookup(
        self,
        node: ast.Call,
        owner: ast.expr,
        name: ast.expr,
        worth_hiding: Callable[[str], bool],
    ) -> None:
        """``getattr(owner, name)`` inside a function the file hands identifiers to."""
        flow = self._flow
        scope = flow.scope(node)
        if not scope:
            return
        fn = flow.bindings.functions_by_id.get(scope)
        if fn is None or (fn.name not in _ATTRIBUTE_HOOKS and fn.name not in self._decorators()):
            return
        for given in self._given(fn):
            attr = flow.evaluate_with(name, given)
            if not isinstance(attr, str) or attr in given.values():
                continue
            for module in self._owner_modules(owner, given):
                api = f"{module}.{attr}"
                if worth_hiding(api):
                    self._scan.emit(
                        "CPL-THR-003",
                        f"getattr({module}, {attr!r} carried by an identifier)",
                        node.lineno,
                        node.col_offset,
                    )
                    return

    def default_lookup(self, node: ast.Call, worth_hiding: Callable[[str], bool]) -> None:
        """``(lambda g=getattr, m=__import__("builtins"), n="%c%c%c%c" % (...): (lambda s:
        g(m, n)(s)))()``: getattr, its namespace and the name carried by default arguments
        of the enclosing lambdas or functions (branch blindcn, tune cn7-geohash-lite)."""
        func = node.func
        if (
            not isinstance(func, ast.Name)
            or len(node.args) != 2
            or hasattr(builtins, func.id)
            or func.id in self._flow.bindings.assigned
            or func.id in self._flow.bindings.imports
            or func.id in self._flow.bindings.defined
        ):
            return
        defaults = self._enclosing_defaults(node)
        getter = defaults.get(func.id)
        if getter is None or "builtins.getattr" not in self._flow.resolve(getter):
            return
        flow = self._flow
        owner, name = (defaults.get(a.id, a) if isinstance(a, ast.Name) else a for a in node.args)
        attr = flow.name_value(name)
        if attr is None or isinstance(name, ast.Constant):
            return
        for module in self._owner_modules(owner, {}):
            if worth_hiding(f"{module}.{attr}"):
                self._scan.emit(
                    "CPL-THR-003",
                    f"getattr({module}, {attr!r} carried by default arguments)",
                    node.lineno,
                    node.col_offset,
                )
                return

    def _enclosing_defaults(self, node: ast.AST) -> dict[str, ast.expr]:
        """The defaults of the parameters of the functions and lambdas around ``node``,
        the innermost first."""
        flow = self._flow
        # (the chain's own bound, MAX_RESOLVE_DEPTH, is past this one)
        scopes = [scope for scope in flow.chain(flow.scope(node)) if scope][:_MAX_GIVEN]
        if not scopes:
            return {}
        wanted = set(scopes)
        found: dict[int, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef] = {
            id(f): f for f in flow.bindings.functions if id(f) in wanted
        }
        for lam in flow.of_kind(ast.Lambda):
            if id(lam) in wanted and isinstance(lam, ast.Lambda):
                found[id(lam)] = lam
        out: dict[str, ast.expr] = {}
        for scope_id in scopes:
            fn = found.get(scope_id)
            if fn is None:
                continue
            a = fn.args
            positional = [*a.posonlyargs, *a.args]
            pairs = zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)
            for param, default in pairs:
                out.setdefault(param.arg, default)
        return out

    def _owner_modules(self, owner: ast.expr, given: dict[str, Value]) -> list[str]:
        """The modules ``owner`` denotes: resolved, or an importer's computed argument."""
        flow = self._flow
        resolved = [r for r in flow.resolve(owner) if r in {"builtins", "builtins.__dict__"}]
        if resolved or (isinstance(owner, ast.Name) and owner.id == "__builtins__"):
            return ["builtins"]
        modules = [r for r in flow.resolve(owner) if flow.of_import(r.split(".", 1)[0])]
        if modules:
            return modules
        if (
            isinstance(owner, ast.Call)
            and owner.args
            and not DYNAMIC_IMPORTERS.isdisjoint(flow.resolve(owner.func))
        ):
            module = flow.evaluate_with(owner.args[0], given)
            if isinstance(module, str):
                return [module]
        return []

    def _given(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[dict[str, Value]]:
        """The identifiers the file hands ``fn``, one set of names at a time."""
        params = [p.arg for p in fn.args.args]
        if not params:
            return
        first = params[0]
        count = 0
        # @fn on a definition: its first parameter is the definition, its name text
        for defined in self._definitions():
            if any(isinstance(d, ast.Name) and d.id == fn.name for d in defined.decorator_list):
                count += 1
                if count > _MAX_GIVEN:
                    return
                yield {f"{first}.__name__": defined.name, f"{first}.__qualname__": defined.name}
        if fn.name not in _ATTRIBUTE_HOOKS or len(params) != 2:
            return
        owner = self._class_of(fn)
        if owner is None:
            return
        meta = any(isinstance(b, ast.Name) and b.id == "type" for b in owner.bases)
        item = params[1]
        for attr, cls in self._attributes(owner, meta):
            count += 1
            if count > _MAX_GIVEN:
                return
            given: dict[str, Value] = {item: attr}
            if cls is not None:
                given[f"{first}.__name__"] = cls
                given[f"{first}.__qualname__"] = cls
            yield given

    def _decorators(self) -> frozenset[str]:
        """The names used as decorators in the file (computed once per file)."""
        found = self._decorator_names
        if found is None:
            found = self._decorator_names = frozenset(
                d.id
                for f in self._definitions()
                for d in f.decorator_list
                if isinstance(d, ast.Name)
            )
        return found

    def _definitions(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
        flow = self._flow
        classes = [c for c in flow.of_kind(ast.ClassDef) if isinstance(c, ast.ClassDef)]
        return [*flow.bindings.functions, *classes]

    def _class_of(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.ClassDef | None:
        return next(
            (
                c
                for c in self._flow.of_kind(ast.ClassDef)
                if isinstance(c, ast.ClassDef) and any(s is fn for s in c.body)
            ),
            None,
        )

    def _attributes(self, owner: ast.ClassDef, meta: bool) -> Iterator[tuple[str, str | None]]:
        """``X.attr`` read on what ``owner`` makes: the classes it is the metaclass of (their
        name too), or its instances (``x = Owner()``, ``Owner().attr``); the names the
        class defines itself are not looked up through the hook."""
        flow = self._flow
        own = {
            t.id for s in owner.body for t in getattr(s, "targets", []) if isinstance(t, ast.Name)
        } | {
            s.name
            for s in owner.body
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        receivers: dict[str, str | None] = {}
        if meta:
            for c in flow.of_kind(ast.ClassDef):
                if isinstance(c, ast.ClassDef) and any(
                    k.arg == "metaclass"
                    and isinstance(k.value, ast.Name)
                    and k.value.id == owner.name
                    for k in c.keywords
                ):
                    receivers[c.name] = c.name
        else:
            for var, values in flow.bindings.assigned.items():
                if any(_makes(v, owner.name) for v in values):
                    receivers[var] = None
        for attribute in flow.of_kind(ast.Attribute):
            if not isinstance(attribute, ast.Attribute) or attribute.attr in own:
                continue
            if attribute.attr.startswith("__"):
                continue
            value = attribute.value
            if isinstance(value, ast.Name) and value.id in receivers:
                yield attribute.attr, receivers[value.id]
            elif not meta and _makes(value, owner.name):
                yield attribute.attr, None


def _makes(node: ast.AST, cls: str) -> bool:
    """``Cls(...)``: an instance of the class named ``cls``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == cls
