"""Constant evaluation: the value of an expression made of literals, decoders included.

Slices of ``str(oct)``, ``chr`` joins, reversals, ``bytes([...])``, and the
decoders a dropper uses (base64, hex, zlib with an output cap, rot13,
Fernet with a literal key; never marshal, whose loader is not safe against
crafted data) are computed here, so a hidden name or an encoded payload is
seen as what it is. Only pure operations on values are performed; nothing
of the scanned code runs. Every step counts against a per-file budget and
no value grows past 4 MiB.
"""

from __future__ import annotations

import ast
import base64
import binascii
import builtins
import codecs
import string
import zlib
from collections.abc import Callable, Sequence

from caplet._scan._resolve import Resolver
from caplet._scan._syntax import MAX_RESOLVE_DEPTH, Bindings, fold_str

__all__ = ["BudgetError", "Evaluator", "Value"]

#: Steps (label or value computations) per file; past it, answers are empty.
_BUDGET = 60_000
#: Largest value the evaluator builds (a decoded payload), in characters or bytes.
_MAX_VALUE = 4 << 20
#: Items a comprehension is evaluated over at most (a name is a few characters).
_MAX_LOOP = 4096
#: Builtins whose ``str()`` the evaluator may take: real objects of this interpreter.
_PRINTABLE_BUILTINS = frozenset(
    name
    for name, value in vars(builtins).items()
    if callable(value) and not name.startswith("_") and not isinstance(value, type(builtins))
) | {"copyright", "credits", "license"}

Value = str | bytes | int | list["Value"]
#: Text attributes of the interpreter's objects a name may be spelled from.
_OBJECT_TEXTS = frozenset({"__doc__", "__name__", "__qualname__", "__module__"})
#: ``string`` module constants (the same in every interpreter).
_STRING_CONSTANTS = frozenset(
    {
        "ascii_letters",
        "ascii_lowercase",
        "ascii_uppercase",
        "digits",
        "hexdigits",
        "octdigits",
        "punctuation",
        "printable",
        "whitespace",
    }
)


#: Builtins whose result depends on their arguments only (no input, no files, no state).
_PURE_BUILTINS = (
    frozenset(
        {
            "str",
            "repr",
            "chr",
            "ord",
            "bytes",
            "bytearray",
            "hex",
            "oct",
            "bin",
            "int",
            "len",
            "list",
            "tuple",
            "reversed",
            "sorted",
            "map",
            "type",
            "format",
            "dir",
            "vars",
            "slice",
            "range",
            "zip",
            "sum",
            "abs",
            "min",
            "max",
            "next",
            "filter",
            "enumerate",
            "iter",
            "all",
            "any",
        }
    )
    | _PRINTABLE_BUILTINS
) - {"input", "open", "getattr", "globals", "locals", "breakpoint", "eval", "exec", "compile"}


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
)


#: Methods called through their class (``bytes.decode(b"exec")``), evaluated like functions.
_CLASS_CALLS = frozenset({"builtins.bytes.decode", "builtins.bytearray.decode"})


def _has_parameters(fn: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = fn.args
    return bool(a.posonlyargs or a.args or a.kwonlyargs or a.vararg or a.kwarg)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _positional(fn: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args]


def _literal_object(node: ast.AST) -> object | None:
    """``True``, ``None``, ``1.5``, ``{}``, ``[]``: literals the evaluator has no value for."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict) and not node.keys:
        return {}
    if isinstance(node, ast.List | ast.Tuple | ast.Set) and not node.elts:
        return {ast.List: [], ast.Tuple: (), ast.Set: set()}[type(node)]
    return None


class BudgetError(Exception):
    """Raised when a file's step budget is spent (caught at the public entry points)."""


class Evaluator(Resolver):
    """Resolution plus constant evaluation (memoised, bounded)."""

    def __init__(self, bindings: Bindings) -> None:
        super().__init__(bindings)
        self._values: dict[int, Value | None] = {}
        self._evaluating: set[str] = set()
        self._steps = 0
        #: A comprehension's loop variable while its element is evaluated item by item
        #: (no value is memoised meanwhile: it depends on the item).
        self._loop: dict[str, Value] = {}
        #: Values a name receives after its binding, by scope (filled by the visitor).
        self.contributed: dict[str, dict[int, list[ast.expr]]] = {}
        self._parameters: frozenset[str] | None = None

    def name_value(self, node: ast.AST) -> str | None:
        """A string a name is looked up by: folded, or evaluated from literals."""
        folded = fold_str(node)
        if folded is not None:
            return folded
        value = self.evaluate(node)
        if isinstance(value, bytes):
            return value.decode("latin-1")
        return value if isinstance(value, str) else None

    def evaluate(self, node: ast.AST) -> Value | None:
        """The value of ``node`` when it is computed from literals only, else ``None``."""
        try:
            return self._evaluate(node, 0)
        except BudgetError:
            return None

    def _step(self) -> None:
        self._steps += 1
        if self._steps > _BUDGET:
            raise BudgetError

    def _evaluate(self, node: ast.AST, depth: int) -> Value | None:
        key = id(node)
        if key in self._values and not self._loop:
            return self._values[key]
        if depth > MAX_RESOLVE_DEPTH:
            return None
        self._step()
        value = self._compute(node, depth + 1)
        if isinstance(value, str | bytes | list) and len(value) > _MAX_VALUE:
            value = None
        if not self._loop:
            self._values[key] = value
        return value

    def _comprehension(self, node: ast.ListComp | ast.GeneratorExp, depth: int) -> Value | None:
        """``[chr(c ^ 1) for c in [...]]``: one loop over literals, a plain target, no
        condition; the element evaluated for each item (bounded like every value)."""
        if len(node.generators) != 1 or self._loop:
            return None
        loop = node.generators[0]
        if loop.ifs or loop.is_async or not isinstance(loop.target, ast.Name):
            return None
        items = self._iterable(loop.iter, depth)
        if items is None or len(items) > _MAX_LOOP:
            return None
        name = loop.target.id
        out: list[Value] = []
        try:
            for item in items:
                self._loop = {name: item}
                value = self._evaluate(node.elt, depth)
                if value is None:
                    return None
                out.append(value)
        finally:
            self._loop = {}
        return out

    def _entry(self, node: ast.Subscript, depth: int) -> Value | None:
        """``TABLE["a"]`` of a dict literal bound once in this file: the entry's value."""
        table = node.value
        if isinstance(table, ast.Name):
            bound = self.bindings.assigned.get(table.id, ())
            table = bound[0] if len(bound) == 1 and table.id not in self.contributed else table
        if not isinstance(table, ast.Dict):
            return None
        key = self._evaluate(node.slice, depth)
        if key is None:
            return None
        for entry, value in zip(table.keys, table.values, strict=True):
            if entry is not None and self._evaluate(entry, depth) == key:
                return self._evaluate(value, depth)
        return None

    def _compute(self, node: ast.AST, depth: int) -> Value | None:
        ev = self._evaluate
        if isinstance(node, ast.Constant):
            v = node.value
            return v if isinstance(v, str | bytes | int) and not isinstance(v, bool) else None
        if isinstance(node, ast.Name):
            if node.id in self._loop:
                return self._loop[node.id]
            return self._evaluate_name(node.id, depth)
        if isinstance(node, ast.ListComp | ast.GeneratorExp):
            return self._comprehension(node, depth)
        if isinstance(node, ast.List | ast.Tuple):
            items = [ev(e, depth) for e in node.elts]
            return None if any(i is None for i in items) else [i for i in items if i is not None]
        if isinstance(node, ast.BinOp):
            left = ev(node.left, depth)
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                # only a tuple written out is several arguments: a list is one
                right = ev(node.right, depth)
                if isinstance(node.right, ast.Tuple) and isinstance(right, list):
                    return _percent(left, right)
                return None if isinstance(right, list) else _percent(left, [right])
            return _binop(node.op, left, ev(node.right, depth))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Invert):
            operand = ev(node.operand, depth)
            if not isinstance(operand, int):
                return None
            return (
                -operand
                if isinstance(node.op, ast.USub)
                else (operand if isinstance(node.op, ast.UAdd) else ~operand)
            )
        if isinstance(node, ast.JoinedStr):
            parts = [ev(v, depth) for v in node.values]
            return (
                "".join(p for p in parts if isinstance(p, str))
                if all(isinstance(p, str) for p in parts)
                else None
            )
        if isinstance(node, ast.FormattedValue) and node.format_spec is None:
            inner = ev(node.value, depth)
            return str(inner) if isinstance(inner, str | int) else None
        if isinstance(node, ast.Subscript):
            table = isinstance(node.value, ast.Dict | ast.Name)
            if table and not isinstance(node.slice, ast.Slice):
                entry = self._entry(node, depth)
                if entry is not None:
                    return entry
            return _subscript(ev(node.value, depth), node.slice, lambda n: ev(n, depth))
        if isinstance(node, ast.Call):
            return self._evaluate_call(node, depth)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth)
        return None

    def _attribute(self, node: ast.Attribute, depth: int) -> Value | None:
        """Text the interpreter itself holds: ``string.ascii_lowercase``, ``int.__doc__``,
        ``type(len).__name__`` (a name spelled from it is as constant as a literal)."""
        if node.attr in _OBJECT_TEXTS:
            target = node.value
            if (
                isinstance(target, ast.Call)
                and len(target.args) == 1
                and not target.keywords
                and "builtins.type" in self.resolve(target.func)
            ):
                inner = target.args[0]
                obj = self._builtin(inner)
                if obj is None:
                    value = self._evaluate(inner, depth)
                    obj = value if value is not None else _literal_object(inner)
                text = getattr(type(obj), node.attr, None) if obj is not None else None
            else:
                obj = self._builtin(target)
                text = getattr(obj, node.attr, None) if obj is not None else None
            return text if isinstance(text, str) else None
        for name in self.resolve(node):
            module, _, attr = name.rpartition(".")
            if module == "string" and attr in _STRING_CONSTANTS:
                return str(getattr(string, attr))
        return None

    def _builtin(self, node: ast.AST) -> object | None:
        """The interpreter's own builtin a bare name denotes, when the file never rebinds it."""
        if not isinstance(node, ast.Name):
            return None
        name = node.id
        if (
            name not in _PRINTABLE_BUILTINS
            or name in self.bindings.assigned
            or name in self.bindings.imports
            or name in self.bindings.defined
            or name in self.bindings.scoped
        ):
            return None
        return getattr(builtins, name, None)

    def _evaluate_name(self, name: str, depth: int) -> Value | None:
        values = self.bindings.assigned.get(name, ())
        if (
            len(values) != 1
            or name in self._evaluating
            or name in self.bindings.iterated
            or name in self.contributed
            or len(self.bindings.scoped.get(name, {})) > 1
        ):
            return None
        self._evaluating.add(name)
        try:
            return self._evaluate(values[0], depth)
        finally:
            self._evaluating.discard(name)

    def _evaluate_call(self, node: ast.Call, depth: int) -> Value | None:
        if node.keywords:
            return None
        ev = self._evaluate
        func = node.func
        args = node.args
        if any(isinstance(a, ast.Starred) for a in args):
            # f(*["ex", "ec"]): a literal list spread into the arguments
            return self._spread_call(node, depth)
        folded = self._functional(node, self.resolve(func), depth)
        if folded is not None:
            return folded
        if isinstance(func, ast.Attribute):
            if func.attr == "join" and len(args) == 2 and "builtins.str.join" in self.resolve(func):
                # str.join("", pieces): the method called through its class
                return _join(ev(args[0], depth), self._iterable(args[1], depth))
            # a module's function first (base64.b64decode), else a method of a value
            for name in self.resolve(func):
                if ("." in name and not name.startswith("builtins.")) or name in _CLASS_CALLS:
                    result = _call(name, [ev(a, depth) for a in args])
                    if result is not None:
                        return result
            method = func.attr
            receiver = func.value
            if method == "join" and len(args) == 1:
                return _join(ev(receiver, depth), self._iterable(args[0], depth))
            if method == "fromhex" and len(args) == 1:
                text = ev(args[0], depth)
                try:
                    return bytes.fromhex(text) if isinstance(text, str) else None
                except ValueError:
                    return None
            base = ev(receiver, depth)
            if method == "translate" and len(args) == 1 and isinstance(base, str):
                return self._translate(base, args[0], depth)
            values = [ev(a, depth) for a in args]
            return _method(base, method, values, flow=self, node=node, depth=depth)
        names = self.resolve(func)
        if (
            len(args) == 1
            and isinstance(args[0], ast.Name)
            and not ({"builtins.str", "builtins.repr"}.isdisjoint(names))
        ):
            builtin = args[0].id
            if (
                builtin in _PRINTABLE_BUILTINS
                and builtin not in self.bindings.assigned
                and builtin not in self.bindings.imports
                and builtin not in self.bindings.defined
            ):
                return str(getattr(builtins, builtin, "")) or None
        if len(args) == 1 and not ({"builtins.str", "builtins.repr"}.isdisjoint(names)):
            literal = _literal_object(args[0])
            if literal is not None or (isinstance(args[0], ast.Constant) and args[0].value is None):
                return str(literal) if "builtins.str" in names else repr(literal)
        if len(args) == 1 and "builtins.dir" in names and self._names_builtins(args[0]):
            # dir(builtins)[n]: a builtin picked by its place in this interpreter's list
            return sorted(vars(builtins))
        values = [ev(a, depth) for a in args]
        for name in names:
            result = _call(name, values)
            if result is not None:
                return result
        if names and "builtins.map" in names and len(args) == 2:
            items = self._iterable(args[1], depth)
            fn = self.resolve(args[0])
            if items is not None and "builtins.chr" in fn:
                return [_chr(i) for i in items] if all(isinstance(i, int) for i in items) else None
            if items is not None and "builtins.str" in fn:
                return (
                    [str(i) for i in items]
                    if all(isinstance(i, str | int) for i in items)
                    else None
                )
        if isinstance(func, ast.Lambda) and not _has_parameters(func) and not args:
            return ev(func.body, depth)  # (lambda: "ex" + "ec")()
        if (
            isinstance(func, ast.Lambda)
            and len(func.args.args) == len(args)
            and not (func.args.posonlyargs or func.args.kwonlyargs)
            and not (func.args.vararg or func.args.kwarg)
        ):
            # (lambda s: s[::-1])(x)
            return self._bind(_positional(func), [ev(a, depth) for a in args], func.body, depth)
        if isinstance(func, ast.Name) and func.id in self.bindings.defined:
            # def n(): return "ex" + "ec"; n(); or def d(s): return s[::-1]; d("cexe"):
            # one function, one return of a value, its parameters given literal values
            body = self._callable_body(func, len(args))
            if body is not None:
                return (
                    ev(body[1], depth) if not args else self._bind(body[0], values, body[1], depth)
                )
        if isinstance(func, ast.Name):
            # n = lambda: "sys" + "tem"; n(); or L = lambda i: s[i]; L(3) + L(7):
            # a lambda bound once, its positional parameters given literal values
            bound = self.bindings.assigned.get(func.id, ())
            if (
                len(bound) == 1
                and isinstance(bound[0], ast.Lambda)
                and func.id not in self.contributed
            ):
                lam = bound[0].args
                if not (lam.posonlyargs or lam.kwonlyargs or lam.vararg or lam.kwarg) and len(
                    lam.args
                ) == len(args):
                    if not args:
                        return ev(bound[0].body, depth)
                    return self._bind(_positional(bound[0]), values, bound[0].body, depth)
        if "builtins.reversed" in names and len(args) == 1:
            inner = values[0]
            return list(reversed(list(inner))) if isinstance(inner, str | list) else None
        return None

    def _callable_body(self, func: ast.expr, arity: int) -> tuple[list[str], ast.expr] | None:
        """The parameters and the returned expression of what ``func`` names: a lambda
        (written in place, or bound once) or a function of this file defined once, with
        one ``return`` after a docstring, no decorator and ``arity`` plain parameters."""
        fn: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef | None = None
        if isinstance(func, ast.Lambda):
            fn = func
        elif isinstance(func, ast.Name) and func.id not in self.contributed:
            bound = self.bindings.assigned.get(func.id, ())
            found = [f for f in self.bindings.functions if f.name == func.id]
            if len(bound) == 1 and isinstance(bound[0], ast.Lambda) and not found:
                fn = bound[0]
            elif not bound and len(found) == 1 and not found[0].decorator_list:
                fn = found[0]
        if fn is None:
            return None
        a = fn.args
        if a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg or len(a.args) != arity:
            return None
        if isinstance(fn, ast.Lambda):
            return _positional(fn), fn.body
        body = [
            s
            for s in fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
            return _positional(fn), body[0].value
        return None

    def _bind(
        self, params: list[str], values: list[Value | None], body: ast.expr, depth: int
    ) -> Value | None:
        """A function's returned expression with its parameters bound to literal values
        (not memoised: the value depends on them)."""
        if self._loop or any(v is None for v in values):
            return None
        try:
            self._loop = {p: v for p, v in zip(params, values, strict=True) if v is not None}
            return self._evaluate(body, depth)
        finally:
            self._loop = {}

    def _functional(self, node: ast.Call, names: tuple[str, ...], depth: int) -> Value | None:
        """``map(f, items)`` and ``functools.reduce(f, items[, first])`` with ``f`` a lambda
        or a one-return function of this file; ``operator.add``/``concat`` of two values;
        ``operator.itemgetter(i, ...)(s)``: pure folds over literals, evaluated step by step
        (each step counts against the budget)."""
        args = node.args
        ev = self._evaluate
        if "builtins.map" in names and len(args) == 2 and not self._loop:
            body = self._callable_body(args[0], 1)
            items = self._iterable(args[1], depth) if body is not None else None
            if body is None or items is None or len(items) > _MAX_LOOP:
                return None
            mapped = [self._bind(body[0], [item], body[1], depth) for item in items]
            return None if any(m is None for m in mapped) else [m for m in mapped if m is not None]
        if "functools.reduce" in names and len(args) in {2, 3} and not self._loop:
            items = self._iterable(args[1], depth)
            if items is None or len(items) > _MAX_LOOP or (len(args) == 2 and not items):
                return None
            acc = ev(args[2], depth) if len(args) == 3 else items[0]
            rest = items if len(args) == 3 else items[1:]
            adds = not {"operator.add", "operator.concat"}.isdisjoint(self.resolve(args[0]))
            body = None if adds else self._callable_body(args[0], 2)
            if not adds and body is None:
                return None
            for item in rest:
                if acc is None:
                    return None
                self._step()
                acc = (
                    _binop(ast.Add(), acc, item)
                    if body is None
                    else self._bind(body[0], [acc, item], body[1], depth)
                )
            return acc
        if not {"operator.add", "operator.concat"}.isdisjoint(names) and len(args) == 2:
            return _binop(ast.Add(), ev(args[0], depth), ev(args[1], depth))
        getter = node.func
        if (
            isinstance(getter, ast.Call)
            and getter.args
            and not getter.keywords
            and len(args) == 1
            and "operator.itemgetter" in self.resolve(getter.func)
        ):
            value = ev(args[0], depth)
            picked = [_subscript(value, i, lambda n: ev(n, depth)) for i in getter.args]
            if any(p is None for p in picked):
                return None
            return picked[0] if len(picked) == 1 else [p for p in picked if p is not None]
        return None

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
                    if not isinstance(loop.target, ast.Name) or loop.is_async:
                        return False
                    local.add(loop.target.id)
                    stack.extend((loop.iter, *loop.ifs))
                stack.append(item.elt)
            elif isinstance(item, ast.Lambda):
                a = item.args
                if a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg or a.defaults:
                    return False
                local.update(_positional(item))
                stack.append(item.body)
            elif isinstance(item, ast.FunctionDef):
                body = self._pure_body(item)
                if body is None:
                    return False
                local.update(body[0])
                stack.extend(body[1])
            elif isinstance(item, ast.Attribute) and _dotted(item) in self.contributed:
                # self.name = str(hex); ... self.name[20]: what the attribute is given
                stack.extend(v for vs in self.contributed[_dotted(item) or ""].values() for v in vs)
            elif isinstance(item, _CLOSED_NODES):
                stack.extend(ast.iter_child_nodes(item))
            elif not isinstance(
                item, ast.expr_context | ast.operator | ast.unaryop | ast.cmpop | ast.boolop
            ):
                return False
        return True

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
            items = self.evaluate(iterable)
            if isinstance(items, str | bytes):
                continue
            if not isinstance(items, list) or not all(isinstance(i, int) for i in items):
                return None
        values: list[ast.AST] = [
            *b.assigned.get(name, ()),
            *b.iterated.get(name, ()),
            *(v for vs in self.contributed.get(name, {}).values() for v in vs),
        ]
        for scoped in b.scoped.get(name, {}).values():
            values.extend(v for v in scoped if all(v is not w for w in values))
        functions = [f for f in b.functions if f.name == name]
        if name in b.imports:
            # string.digits is the interpreter's text; os.getenv(...) is not
            return [] if _PURE_MODULES.issuperset(b.imports[name]) and not values else None
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
            return [*values, *passed] if passed else None
        if values:
            return values
        if name == "__builtins__" or name in _PURE_BUILTINS:
            return []
        return None  # __name__, __file__, a parameter, input(), open()

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
        if fn.decorator_list or a.vararg or a.kwarg or a.kw_defaults or a.defaults:
            return None
        own = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        checked: list[ast.AST] = []
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
            elif not isinstance(stmt, ast.Pass | ast.Break | ast.Continue):
                return None
        return own, checked

    def _translate(self, base: str, table: ast.AST, depth: int) -> Value | None:
        """``"ayak".translate(str.maketrans("ayk", "exc"))``: both tables written out."""
        if (
            isinstance(table, ast.Call)
            and isinstance(table.func, ast.Attribute)
            and table.func.attr == "maketrans"
            and 2 <= len(table.args) <= 3
            and not table.keywords
        ):
            pieces = [
                p for p in (self._evaluate(a, depth) for a in table.args) if isinstance(p, str)
            ]
            if len(pieces) == len(table.args) and len(pieces[0]) == len(pieces[1]):
                return base.translate(str.maketrans(*pieces))
        return None

    def _names_builtins(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            return "__builtins__" not in self.bindings.assigned
        return "builtins" in self.resolve(node)

    def _spread_call(self, node: ast.Call, depth: int) -> Value | None:
        """A call whose ``*args`` are literal lists: evaluated as if written out."""
        spread: list[ast.expr] = []
        for arg in node.args:
            if not isinstance(arg, ast.Starred):
                spread.append(arg)
                continue
            if not isinstance(arg.value, ast.List | ast.Tuple) or any(
                isinstance(e, ast.Starred) for e in arg.value.elts
            ):
                return None
            spread.extend(arg.value.elts)
        return self._evaluate_call(ast.Call(func=node.func, args=spread, keywords=[]), depth)

    def _iterable(self, node: ast.AST, depth: int) -> list[Value] | None:
        value = self._evaluate(node, depth)
        if isinstance(value, str):
            return list(value)
        if isinstance(value, bytes):
            return list(value)
        if isinstance(value, list):
            return value
        return None


def _join(sep: Value | None, items: list[Value] | None) -> Value | None:
    """``sep.join(items)`` of strings only."""
    if isinstance(sep, str) and items is not None and all(isinstance(i, str) for i in items):
        out = sep.join(i for i in items if isinstance(i, str))
        return out if len(out) <= _MAX_VALUE else None
    return None


def _chr(code: Value) -> str:
    return chr(code) if isinstance(code, int) and 0 <= code < 0x110000 else "\ufffd"


def _binop(op: ast.operator, left: Value | None, right: Value | None) -> Value | None:
    if left is None or right is None:
        return None
    if isinstance(op, ast.Add):
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, bytes) and isinstance(right, bytes):
            return left + right
        if isinstance(left, int) and isinstance(right, int):
            return left + right
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    if isinstance(op, ast.Mult):
        if (
            isinstance(left, str | bytes)
            and isinstance(right, int)
            and len(left) * right <= _MAX_VALUE
        ):
            return left * right
        return left * right if isinstance(left, int) and isinstance(right, int) else None
    if isinstance(op, ast.BitXor) and isinstance(left, int) and isinstance(right, int):
        return left ^ right
    if isinstance(op, ast.Sub) and isinstance(left, int) and isinstance(right, int):
        return left - right
    return None


def _subscript(
    value: Value | None, index: ast.AST, ev: Callable[[ast.AST], Value | None]
) -> Value | None:
    if not isinstance(value, str | bytes | list):
        return None
    if isinstance(index, ast.Slice):
        parts = (index.lower, index.upper, index.step)
        bounds = [None if p is None else ev(p) for p in parts]
        if any(
            p is not None and not isinstance(b, int) for p, b in zip(parts, bounds, strict=True)
        ):
            return None
        lower, upper, step = (b if isinstance(b, int) else None for b in bounds)
        if step == 0:
            return None
        return value[lower:upper:step]
    position = ev(index)
    if not isinstance(position, int) or not -len(value) <= position < len(value):
        return None
    item = value[position]
    return item if isinstance(item, str | int | list) else None


def _method(
    base: Value | None,
    method: str,
    args: list[Value | None],
    *,
    flow: Evaluator,
    node: ast.Call,
    depth: int,
) -> Value | None:
    if isinstance(base, bytes) and method == "decode":
        encoding = args[0] if args else "utf-8"
        if not isinstance(encoding, str):
            return None
        try:
            return codecs.decode(base, encoding) if encoding.lower() in _TEXT_CODECS else None
        except (ValueError, LookupError):
            return None
    if isinstance(base, str) and method == "encode":
        try:
            return base.encode("utf-8", "surrogatepass")
        except UnicodeError:
            return None
    if isinstance(base, str | bytes) and method in {"lower", "upper", "strip", "lstrip", "rstrip"}:
        return getattr(base, method)() if not args else None
    if isinstance(base, str) and method == "replace" and len(args) == 2:
        old, new = args
        if isinstance(old, str) and isinstance(new, str) and (old or not base):
            out = base.replace(old, new)
            return out if len(out) <= _MAX_VALUE else None
        return None
    if isinstance(base, int) and method == "to_bytes" and len(args) == 2:
        # (0x73797374656d).to_bytes(6, "big"): a name packed into an integer
        length, order = args
        if isinstance(length, int) and 0 <= length <= 4096 and order in {"big", "little"}:
            try:
                return base.to_bytes(length, "big" if order == "big" else "little")
            except OverflowError:
                return None
        return None
    if method == "__add__" and len(args) == 1:
        return _binop(ast.Add(), base, args[0])
    if isinstance(base, str) and method in {"split", "rsplit"} and len(args) <= 1:
        sep = args[0] if args else None
        if sep is None or (isinstance(sep, str) and sep):
            parts: list[Value] = list(base.split(sep) if method == "split" else base.rsplit(sep))
            return parts
        return None
    if isinstance(base, str) and method in {"swapcase", "title", "capitalize", "casefold"}:
        return getattr(base, method)() if not args else None
    if isinstance(base, str) and method == "format":
        return _format(base, args)
    if method == "decrypt" and isinstance(args[0] if args else None, bytes | str):
        return _fernet(flow, node, args[0], depth)
    return None


def _percent(template: str, items: Sequence[Value | None]) -> Value | None:
    """``"%s%s" % ("ev", "al")``: only ``%s``, ``%d``, ``%i``, ``%r``, ``%c`` and ``%%``, no flags,
    widths or mapping keys (anything else is left unevaluated)."""
    pieces: list[str] = []
    position = 0
    used = 0
    while (found := template.find("%", position)) >= 0:
        pieces.append(template[position:found])
        kind = template[found + 1 : found + 2]
        position = found + 2
        if kind == "%":
            pieces.append("%")
            continue
        if kind not in {"s", "d", "i", "r", "c"} or used >= len(items):
            return None
        item = items[used]
        used += 1
        if not isinstance(item, str | int) or (kind in {"d", "i"} and isinstance(item, str)):
            return None
        if kind == "c":
            # "%c%c" % (101, 120): a code point, or a string of one character
            if isinstance(item, str) and len(item) != 1:
                return None
            pieces.append(_chr(item) if isinstance(item, int) else item)
            continue
        pieces.append(repr(item) if kind == "r" else str(item))
    if used != len(items):
        return None
    pieces.append(template[position:])
    out = "".join(pieces)
    return out if len(out) <= _MAX_VALUE else None


def _format(template: str, args: Sequence[Value | None]) -> Value | None:
    """``"{}{}".format("ex", "ec")``: positional fields only, no conversion or format spec
    (an attribute or item of a field is never looked up)."""
    pieces: list[str] = []
    automatic = 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return None
    for literal, field, spec, conversion in fields:
        pieces.append(literal)
        if field is None:
            continue
        if spec or conversion is not None:
            return None
        if field == "":
            index = automatic
            automatic += 1
        elif field.isdigit():
            index = int(field)
        else:
            return None
        if index >= len(args):
            return None
        item = args[index]
        if not isinstance(item, str | int):
            return None
        pieces.append(str(item))
    out = "".join(pieces)
    return out if len(out) <= _MAX_VALUE else None


_TEXT_CODECS = frozenset({"utf-8", "utf8", "ascii", "latin-1", "latin1", "iso-8859-1", "cp1252"})


def _fernet(flow: Evaluator, node: ast.Call, token: Value | None, depth: int) -> Value | None:
    """``Fernet(key).decrypt(token)`` with both literal: the plaintext (no code runs)."""
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    if not isinstance(receiver, ast.Call) or len(receiver.args) != 1:
        if isinstance(receiver, ast.Name):
            bound = flow.bindings.assigned.get(receiver.id, ())
            receiver = bound[0] if len(bound) == 1 else None
        if not isinstance(receiver, ast.Call) or len(receiver.args) != 1:
            return None
    if not any(n.endswith("fernet.Fernet") for n in flow.resolve(receiver.func)):
        return None
    key = flow._evaluate(receiver.args[0], depth)
    if not isinstance(key, bytes | str) or not isinstance(token, bytes | str):
        return None
    try:
        from cryptography.fernet import Fernet, InvalidToken  # a dependency of caplet
    except ImportError:  # pragma: no cover - cryptography is a declared dependency
        return None
    try:
        return Fernet(key).decrypt(token)
    except (InvalidToken, ValueError, TypeError):
        return None


def _call(name: str, values: list[Value | None]) -> Value | None:
    """Pure builtins and decoders applied to evaluated arguments (never anything else)."""
    if not values:
        return "" if name == "builtins.str" else None  # str().join(pieces)
    if any(v is None for v in values):
        return None
    first = values[0]
    try:
        if name == "builtins.range" and all(isinstance(v, int) for v in values):
            bounds = [v for v in values if isinstance(v, int)]
            span = range(*bounds) if len(bounds) <= 3 else range(0)
            return list(span) if len(span) <= _MAX_LOOP else None
        if name in {"builtins.bytes.decode", "builtins.bytearray.decode"} and isinstance(
            first, bytes
        ):
            codec = values[1] if len(values) == 2 else "utf-8"
            if isinstance(codec, str) and codec.lower() in _TEXT_CODECS:
                return codecs.decode(first, codec)
            return None
        if name == "builtins.str.join" and len(values) == 2:
            items = values[1]
            return _join(first, list(items) if isinstance(items, str | list) else None)
        if name == "builtins.chr" and isinstance(first, int):
            return _chr(first)
        if name in {"builtins.hex", "builtins.oct", "builtins.bin"} and isinstance(first, int):
            return {"builtins.hex": hex, "builtins.oct": oct, "builtins.bin": bin}[name](first)
        if name == "builtins.ord" and isinstance(first, str) and len(first) == 1:
            return ord(first)
        if name == "builtins.str" and len(values) == 2 and isinstance(first, bytes):
            # str(b"exec", "utf-8"): bytes decoded
            codec = values[1]
            if isinstance(codec, str) and codec.lower() in _TEXT_CODECS:
                return codecs.decode(first, codec)
            return None
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, bytes):
            return first if len(values) == 1 else None
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, str):
            codec = values[1] if len(values) == 2 else None
            if isinstance(codec, str) and codec.lower() in _TEXT_CODECS:
                return first.encode(codec)
            return None
        if name in {"builtins.str", "builtins.repr"} and isinstance(first, str | int):
            return str(first) if name == "builtins.str" else repr(first)
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, list):
            codes = [i for i in first if isinstance(i, int) and 0 <= i < 256]
            return bytes(codes) if len(codes) == len(first) else None
        if name in {"builtins.list", "builtins.tuple"} and isinstance(first, str | list):
            return list(first)
        if name == "builtins.bytes.fromhex" and isinstance(first, str):
            return bytes.fromhex(first)
        data = first.encode("latin-1") if isinstance(first, str) else first
        if not isinstance(data, bytes):
            return None
        if name in {"base64.b64decode", "base64.decodebytes", "base64.standard_b64decode"}:
            return base64.b64decode(data + b"=" * (-len(data) % 4))
        if name == "base64.urlsafe_b64decode":
            return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
        if name == "base64.b32decode":
            return base64.b32decode(data + b"=" * (-len(data) % 8))
        if name == "base64.b16decode":
            return base64.b16decode(data, casefold=True)
        if name == "base64.b85decode":
            return base64.b85decode(data)
        if name == "base64.a85decode":
            return base64.a85decode(data)
        if name in {"binascii.unhexlify", "binascii.a2b_hex"}:
            return binascii.unhexlify(data)
        if name == "binascii.a2b_base64":
            return binascii.a2b_base64(data)
        if name in {"zlib.decompress", "gzip.decompress"}:
            inflater = zlib.decompressobj(47)  # zlib or gzip header, detected
            out = inflater.decompress(data, _MAX_VALUE)
            return out if not inflater.unconsumed_tail else None
        if name == "codecs.decode" and len(values) == 2 and isinstance(values[1], str):
            codec = values[1].lower()
            if codec in {"rot13", "rot_13"} and isinstance(first, str):
                return codecs.decode(first, "rot13")
            if codec in {"hex", "base64"}:
                return codecs.decode(data, codec)
    except (ValueError, TypeError, binascii.Error, zlib.error, OverflowError):
        return None
    return None
