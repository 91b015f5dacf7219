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

from caplet._scan._rules import DYNAMIC_IMPORTERS
from caplet._scan._sources import NETWORK_MODULES, NOT_EGRESS
from caplet._scan._syntax import MAX_CANDIDATES, MAX_RESOLVE_DEPTH, Bindings

__all__ = ["Resolver", "is_network"]


def is_network(name: str) -> bool:
    """True when ``name`` is a call into a network module that sends or receives."""
    return name.startswith(NETWORK_MODULES) and name not in NOT_EGRESS


class Resolver:
    """Name resolution over one file's bindings (memoised)."""

    def __init__(self, bindings: Bindings) -> None:
        self.bindings = bindings
        self._memo: dict[int, tuple[str, ...]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._resolving: set[str] = set()

    def name_value(self, node: ast.AST) -> str | None:
        """A string a name is looked up by (see :class:`caplet._scan._evaluate.Evaluator`)."""
        raise NotImplementedError

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        """Fully qualified dotted names ``node`` may denote (empty when unknown)."""
        key = id(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if depth > MAX_RESOLVE_DEPTH:
            return ()
        result = self._resolve(node, depth)
        self._memo[key] = result
        return result

    def _resolve(self, node: ast.AST, depth: int) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return self.resolve_name(node.id, depth)
        if isinstance(node, ast.Attribute):
            return tuple(f"{base}.{node.attr}" for base in self.resolve(node.value, depth + 1))
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node, depth)
        if isinstance(node, ast.Call):
            return self._resolve_call(node, depth)
        return ()

    def resolve_name(self, name: str, depth: int = 0) -> tuple[str, ...]:
        """What the bare name ``name`` may denote (imports, assignments, builtins)."""
        cached = self._names.get(name)
        if cached is not None:
            return cached
        if name in self._resolving:  # a = b; b = a
            return ()
        self._resolving.add(name)
        found: list[str] = list(self.bindings.imports.get(name, ()))
        for value in self.bindings.assigned.get(name, ())[:MAX_CANDIDATES]:
            found.extend(self.resolve(value, depth + 1))
        if name == "__builtins__":
            found.append("builtins")
        elif name not in self.bindings.imports and name not in self.bindings.defined:
            # Unbound by import or def: it is the builtin (or a star import).
            found.append(f"builtins.{name}")
            found.extend(f"{m}.{name}" for m in self.bindings.star_modules)
        self._resolving.discard(name)
        result = tuple(dict.fromkeys(found))[:MAX_CANDIDATES]
        self._names[name] = result
        return result

    def _resolve_subscript(self, node: ast.Subscript, depth: int) -> tuple[str, ...]:
        key = self.name_value(node.slice)
        if key is None:
            return ()
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            # builtins.__dict__["eval"] is builtins.eval
            return tuple(f"{b}.{key}" for b in self.resolve(value.value, depth + 1))
        if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            funcs = self.resolve(value.func, depth + 1)
            # vars(builtins)["eval"] likewise
            if "builtins.vars" in funcs:
                return tuple(f"{b}.{key}" for b in self.resolve(value.args[0], depth + 1))
            return ()
        if (
            isinstance(value, ast.Call)
            and not value.args
            and "builtins.globals" in self.resolve(value.func, depth + 1)
            and key == "__builtins__"
        ):
            return ("builtins",)  # globals()["__builtins__"]
        bases = self.resolve(value, depth + 1)
        if "sys.modules" in bases:
            return (key,)
        if "builtins" in bases:
            return (f"builtins.{key}",)  # __builtins__["eval"] (a dict outside __main__)
        return ()

    def _resolve_call(self, node: ast.Call, depth: int) -> tuple[str, ...]:
        funcs = self.resolve(node.func, depth + 1)
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
        if "builtins.getattr" in funcs and len(node.args) >= 2:
            attr = self.name_value(node.args[1])
            if attr is None:
                return ()
            return tuple(f"{b}.{attr}" for b in self.resolve(node.args[0], depth + 1))
        if "builtins.vars" in funcs and len(node.args) == 1:
            # vars(builtins) is builtins' namespace: vars(b)[name] resolves through it
            return tuple(f"{b}.__dict__" for b in self.resolve(node.args[0], depth + 1))
        # An object made by a network module (a session, a socket, a connection):
        # its methods are network calls too.
        return tuple(f"{f}()" for f in funcs if is_network(f))[:MAX_CANDIDATES]
