"""Whether an expression is closed over literals: computed from literals and the
interpreter's own objects only, whatever the operations, when its value is not known.

A name spelled by means the evaluator does not follow (:mod:`caplet._scan._evaluate`) is
still a constant the author hid; a name written out (a literal, a loop over literals, a
parameter passed literals) is not hidden at all.
"""

from __future__ import annotations

import ast

from caplet._scan._resolve import Resolver
from caplet._scan._syntax import dotted as _dotted
from caplet._scan._values import PURE_BUILTINS as _PURE_BUILTINS
from caplet._scan._values import Value
from caplet._scan._values import positional as _positional

__all__ = ["INTERPRETER_TEXTS", "Closedness"]


#: Modules whose functions compute from their arguments only (``closed`` follows them).
_PURE_MODULES = frozenset(
    {"string", "builtins", "operator", "functools", "base64", "binascii", "zlib"}
)


#: Nodes an expression computed from literals is made of (names are checked on their own).
_CLOSED_NODES = (
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.BinOp,
    ast.Call,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.List,
    ast.Tuple,
    ast.UnaryOp,
    ast.Slice,
    ast.keyword,
    ast.Compare,
    ast.BoolOp,
    ast.comprehension,
    ast.IfExp,
    ast.Set,
    ast.Dict,
    ast.Starred,
    ast.Yield,
    ast.YieldFrom,
)


def _interpreter_typed(node: ast.Attribute) -> bool:
    """``X.__class__`` where ``X`` is ``__name__`` or a literal, or dunders called or read
    on one (``__name__.__len__().__class__``): a type the interpreter fixes, whatever
    the value (the dunder-only obfuscator's way to reach ``str`` and ``int`` and spell
    names from their ``__doc__``). ``value.__class__`` of any other value is data."""
    if node.attr != "__class__":
        return False
    item: ast.expr = node.value
    while isinstance(item, ast.Call | ast.Attribute):
        if isinstance(item, ast.Call):
            item = item.func
        elif item.attr.startswith("__") and item.attr.endswith("__"):
            item = item.value
        else:
            return False
    return isinstance(item, ast.Constant) or (isinstance(item, ast.Name) and item.id == "__name__")


#: The interpreter's own texts and numbers in ``sys`` (the same for every program it runs).
INTERPRETER_TEXTS = frozenset(
    {
        "sys.copyright",
        "sys.version",
        "sys.hexversion",
        "sys.api_version",
        "sys.maxsize",
        "sys.maxunicode",
        "sys.byteorder",
    }
)


#: Decorators that leave what a function returns as it is (how it is bound or cached).
_TRANSPARENT_DECORATORS = frozenset(
    {"staticmethod", "classmethod", "property", "cache", "lru_cache", "cached_property"}
)


def _transparent(decorator: ast.expr) -> bool:
    """``@staticmethod``, ``@functools.lru_cache(None)``: the function's value unchanged."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    name = _dotted(decorator) or ""
    return name.rsplit(".", 1)[-1] in _TRANSPARENT_DECORATORS


#: Calls a loop takes its items through unchanged in kind (``enumerate([20, 21])`` walks
#: the same places as the list, paired with counts).
_LOOP_WRAPPERS = frozenset({"enumerate", "reversed", "sorted", "zip", "list", "tuple"})


#: Literal containers: a loop over rows of them (``for name, version in [("numpy",
#: "1.25"), ...]``) unpacks columns written out, it does not build names (blind8: urllib3's
#: and matplotlib's loops over (name, version) rows).
_CONTAINERS = (ast.Tuple, ast.List, ast.Set, ast.Dict)


def _loop_sources(iterable: ast.expr) -> list[ast.expr]:
    """What a loop over ``iterable`` really walks: the arguments of ``enumerate``, ``zip``
    and the like (written as the builtins' names), else the iterable itself."""
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id in _LOOP_WRAPPERS
        and iterable.args
        and not iterable.keywords
        and not any(isinstance(a, ast.Starred) for a in iterable.args)
    ):
        return [s for a in iterable.args for s in _loop_sources(a)]
    return [iterable]


class Closedness(Resolver):
    """Closedness over literals, for :class:`caplet._scan._evaluate.Evaluator` (its base:
    the evaluator's state and :meth:`evaluate` are declared here for the type checker)."""

    contributed: dict[str, dict[int, list[ast.expr]]]
    _parameters: frozenset[str] | None

    def evaluate(self, node: ast.AST) -> Value | None:
        """The value of ``node`` when it is computed from literals (the evaluator's)."""
        raise NotImplementedError

    def closed(self, node: ast.AST) -> bool:
        """Whether ``node`` is computed from literals and the interpreter's own objects only
        (no data read at run time, no parameter the outside world fills), whatever the
        operations: a name spelled by means the evaluator does not follow is still a
        constant the author hid.

        A name is closed when every value it is given is: its bindings, what is added to
        it later (``n += s[i]``), the iterable a loop takes it from; a parameter when this
        file calls its function, always with closed arguments and not only with plain
        literals; a function or lambda of this file when its body uses only its own
        parameters and locals besides closed names (its arguments are checked at the call).
        """
        if self._plain(node, 0):
            return False  # for n in ("unicode", "long"): getattr(builtins, n): literal names
        stack: list[ast.AST] = [node]
        seen: set[str] = set()
        local: set[str] = set()  # loop variables, parameters and locals of what is walked
        budget = 512
        while stack:
            budget -= 1
            if budget < 0:
                return False
            item = stack.pop()
            if isinstance(item, ast.Name):
                name = item.id
                if name in seen or name in local:
                    continue
                seen.add(name)
                values = self._given(name)
                if values is None:
                    return False
                stack.extend(values)
            elif isinstance(item, ast.ListComp | ast.GeneratorExp | ast.SetComp):
                # [n for n in dir(builtins) if n[::-1] == "cexe"][0]: closed when what it
                # walks is, its own loop variables standing for the items
                for loop in item.generators:
                    # for text, place in [(s, 3), ...]: a tuple of names is loop variables too
                    targets = (
                        loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
                    )
                    if loop.is_async or not all(isinstance(t, ast.Name) for t in targets):
                        return False
                    local.update(t.id for t in targets if isinstance(t, ast.Name))
                    stack.extend((loop.iter, *loop.ifs))
                stack.append(item.elt)
            elif isinstance(item, ast.Lambda):
                a = item.args
                if a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
                    return False
                local.update(_positional(item))
                stack.extend(a.defaults)  # lambda n, b=__builtins__: ...: closed defaults
                stack.append(item.body)
            elif isinstance(item, ast.FunctionDef):
                body = self._pure_body(item)
                if body is None:
                    return False
                local.update(body[0])
                stack.extend(body[1])
            elif isinstance(item, ast.Attribute) and _interpreter_typed(item):
                # __name__.__class__ is str whatever the module is called, and
                # __name__.__len__().__class__ int: the interpreter's own types
                continue
            elif isinstance(item, ast.NamedExpr):
                stack.append(item.value)  # (n := "ex" + "ec"): the value it names
            elif isinstance(item, ast.Attribute) and not INTERPRETER_TEXTS.isdisjoint(
                self.resolve(item)
            ):
                continue  # sys.copyright: the text str(copyright) prints, the interpreter's
            elif isinstance(item, ast.Attribute) and self._method(item) is not None:
                # Helper.name(), Helper().name(), self.name(): a method of this file
                stack.append(self._method(item) or item)
            elif isinstance(item, ast.Attribute) and _dotted(item) in self.contributed:
                # self.name = str(hex); ... self.name[20]: what the attribute is given
                stack.extend(v for vs in self.contributed[_dotted(item) or ""].values() for v in vs)
            elif isinstance(item, ast.Attribute) and self.class_attribute(item) is not None:
                # class Config: name = "ex" + "ec"; ... Config.name: what the class binds
                stack.extend(self.class_attribute(item) or ())
            elif isinstance(item, _CLOSED_NODES):
                stack.extend(ast.iter_child_nodes(item))
            elif not isinstance(
                item, ast.expr_context | ast.operator | ast.unaryop | ast.cmpop | ast.boolop
            ):
                return False
        return True

    def _method(self, node: ast.Attribute) -> ast.FunctionDef | None:
        """The one function of this file named ``node.attr`` when ``node`` reads it from a
        class of this file, an instance made by calling one (or a name bound once to one),
        ``self`` or ``cls``; ``None``
        otherwise (``requests.get`` is not this file's ``get``)."""
        owner = node.value
        b = self.bindings
        if isinstance(owner, ast.Name) and len(b.assigned.get(owner.id, ())) == 1:
            owner = b.assigned[owner.id][0]  # helper = Helper(); helper.name()
        if isinstance(owner, ast.Call) and not owner.args and not owner.keywords:
            owner = owner.func
        if not isinstance(owner, ast.Name) or not (
            owner.id in {"self", "cls"}
            or (owner.id in b.defined and owner.id not in b.assigned and owner.id not in b.imports)
        ):
            return None
        named = b.named(node.attr)
        if len(named) != 1 or not isinstance(named[0], ast.FunctionDef):
            return None
        return named[0]

    def class_attribute(self, node: ast.Attribute) -> list[ast.expr] | None:
        """What ``C.name`` is bound to when ``C`` is a class of this file (not a function,
        an import or an assigned name) and ``name`` is bound in the file; ``None`` otherwise
        (the values of every binding of ``name``: a class body is no scope of its own here)."""
        owner = node.value
        if not isinstance(owner, ast.Name):
            return None
        b = self.bindings
        if (
            owner.id not in b.defined
            or owner.id in b.assigned
            or owner.id in b.imports
            or bool(b.named(owner.id))
        ):
            return None
        values = b.assigned.get(node.attr)
        return list(values) if values else None

    def plain(self, node: ast.AST) -> bool:
        """Whether ``node`` is a name written out (see :meth:`_plain`), not computed."""
        return self._plain(node, 0)

    def _plain(self, node: ast.AST, depth: int) -> bool:
        """A string literal, or a name only ever given string literals (bound to one,
        looped over a list of them, a parameter passed them): a name written out, not
        computed."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        if depth > 4:
            return False
        if isinstance(node, ast.IfExp):
            return self._plain(node.body, depth + 1) and self._plain(node.orelse, depth + 1)
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            # CODES["b"] of a table of names written out: one of them
            tables = self._sequences(node.value) or self.tables(node.value)
            entries = [e for t in tables for e in (t.values if isinstance(t, ast.Dict) else t.elts)]
            return bool(entries) and all(self._plain(e, depth + 1) for e in entries)
        if not isinstance(node, ast.Name):
            return False
        b = self.bindings
        values: list[ast.AST] = [*b.assigned.get(node.id, ())]
        values += (v for vs in self.contributed.get(node.id, {}).values() for v in vs)
        for iterable in b.iterated.get(node.id, ()):
            if not isinstance(iterable, ast.List | ast.Tuple | ast.Set):
                return False
            values.extend(iterable.elts)
        if not values:
            values = [
                a for slots in self.passed_arguments().values() for a in slots.get(node.id, ())
            ]
        return bool(values) and all(self._plain(v, depth + 1) for v in values)

    def _given(self, name: str) -> list[ast.AST] | None:
        """What ``closed`` must check for the name ``name``: every value it is bound to or
        given, the function it names; ``[]`` for the interpreter's own names; ``None``
        when it holds something from outside (an import of anything but pure modules,
        ``__file__``, ``input``, a parameter of a function this file never calls)."""
        b = self.bindings
        for iterable in b.iterated.get(name, ()):
            # for i in [20, 21, 20]: n += s[i] picks characters by code or place; a loop
            # over names written out, or over a namespace, enumerates them (not hiding)
            if not all(self._places(i) or self._built_items(i) for i in _loop_sources(iterable)):
                return None
        values: list[ast.AST] = [
            *b.assigned.get(name, ()),
            *b.iterated.get(name, ()),
            *(v for vs in self.contributed.get(name, {}).values() for v in vs),
        ]
        for scoped in b.scoped.get(name, {}).values():
            values.extend(v for v in scoped if all(v is not w for w in values))
        functions = b.named(name)
        if name in b.imports:
            # string.digits is the interpreter's text; os.getenv(...) is not
            pure = _PURE_MODULES.issuperset(b.imports[name])
            text = INTERPRETER_TEXTS.issuperset(b.imports[name])  # from sys import copyright
            return [] if (pure or text) and not values else None
        if functions:
            return [*functions, *values] if len(functions) == 1 else None
        if name in b.defined:
            return None  # a class: its attributes are not followed
        passed: list[ast.AST] = [
            arg for slots in self.passed_arguments().values() for arg in slots.get(name, ())
        ]
        if name in self._parameter_names():
            # a parameter somewhere: closed only when this file fills it (the name may be
            # a local elsewhere too; both must be closed)
            return [*values, *passed] if self._filled(name, set()) else None
        if values:
            return values
        if name == "__builtins__" or name in _PURE_BUILTINS:
            return []
        return None  # __name__, __file__, a parameter, input(), open()

    def _built_items(self, iterable: ast.expr) -> bool:
        """A literal list or tuple of names not all written out (``("sp" + "awn", "sys" +
        "tem")``): its items are the loop variable's values, closed when each is (blind8)."""
        return (
            isinstance(iterable, ast.List | ast.Tuple | ast.Set)
            and not any(isinstance(e, _CONTAINERS) for e in iterable.elts)
            and not all(self._plain(e, 1) for e in iterable.elts)
        )

    def _places(self, iterable: ast.expr) -> bool:
        """Whether a loop over ``iterable`` walks characters or places (a text, a list of
        integers), not names written out or a namespace."""
        items = self.evaluate(iterable)
        return isinstance(items, str | bytes) or (
            isinstance(items, list) and all(isinstance(i, int) for i in items)
        )

    def _filled(self, name: str, seen: set[str]) -> bool:
        """Whether this file's calls give the parameter ``name`` something besides other
        parameters handing it on: ``def find(self, name): ...; self.find(name)`` and
        ``def build(self, suffix): return self.find(suffix)`` called by nobody fill
        nothing (a name resolver's parameter is the caller's data, not a hidden name)."""
        if name in seen:
            return False
        seen.add(name)
        parameters = self._parameter_names()
        passed = [a for slots in self.passed_arguments().values() for a in slots.get(name, ())]
        return any(
            not (isinstance(a, ast.Name) and a.id in parameters) or self._filled(a.id, seen)
            for a in passed
        )

    def parameter_names(self) -> frozenset[str]:
        """Every name a function or lambda of this file takes as a parameter."""
        return self._parameter_names()

    def _parameter_names(self) -> frozenset[str]:
        """Every name a function or lambda of this file takes as a parameter."""
        if self._parameters is None:
            functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = [
                *self.bindings.functions,
                *(
                    v
                    for vs in self.bindings.assigned.values()
                    for v in vs
                    if isinstance(v, ast.Lambda)
                ),
            ]
            self._parameters = frozenset(
                a.arg
                for f in functions
                for a in (*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs)
            ) | frozenset(
                a.arg for f in functions for a in (f.args.vararg, f.args.kwarg) if a is not None
            )
        return self._parameters

    def _pure_body(self, fn: ast.FunctionDef) -> tuple[set[str], list[ast.AST]] | None:
        """A function's own names (parameters, locals) and what ``closed`` must check of
        it: the values of its plain statements (assignments, loops, conditions,
        returns); ``None`` when it has anything else (a decorator, a ``global``, a
        ``yield``, a nested definition, a ``try``, a call of its own result...)."""
        a = fn.args
        if a.kwarg or not all(_transparent(d) for d in fn.decorator_list):
            return None
        # *args holds the call's own arguments, which closed() checks at the call
        own = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        if a.vararg is not None:
            own.add(a.vararg.arg)
        # def name(s=str(oct)): the defaults are values the parameters may hold
        checked: list[ast.AST] = [d for d in (*a.defaults, *a.kw_defaults) if d is not None]
        pending: list[ast.stmt] = list(fn.body)
        while pending:
            stmt = pending.pop()
            if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        own.add(target.id)
                    elif not (
                        isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    ):
                        return None
                    else:
                        checked.append(target.slice)
                if stmt.value is not None:
                    checked.append(stmt.value)
            elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name | ast.Tuple):
                own.update(n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name))
                checked.append(stmt.iter)
                pending.extend((*stmt.body, *stmt.orelse))
            elif isinstance(stmt, ast.If | ast.While):
                checked.append(stmt.test)
                pending.extend((*stmt.body, *stmt.orelse))
            elif isinstance(stmt, ast.Return | ast.Expr):
                if stmt.value is not None:
                    checked.append(stmt.value)
            elif isinstance(stmt, ast.Try):
                # try: return s[3] + s[7] except IndexError: ...: every branch is checked
                for handler in stmt.handlers:
                    if handler.name is not None:
                        own.add(handler.name)
                    pending.extend(handler.body)
                pending.extend((*stmt.body, *stmt.orelse, *stmt.finalbody))
            elif isinstance(stmt, ast.FunctionDef):
                # a helper defined inside the helper: its own names and values too
                inner = self._pure_body(stmt)
                if inner is None:
                    return None
                own.add(stmt.name)
                own.update(inner[0])
                checked.extend(inner[1])
            elif not isinstance(
                stmt, ast.Pass | ast.Break | ast.Continue | ast.Nonlocal | ast.Global
            ):
                # nonlocal n in a nested helper: n is the enclosing helper's own, checked;
                # global n: the module's n, whose other values are checked where read
                return None
        return own, checked
