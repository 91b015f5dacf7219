"""Loops, tests and this file's helpers over constant values, for
:mod:`caplet._scan._evaluate` (its mixin :class:`LoopEvaluation`, split out of it).

A name is often built by a comprehension that unpacks pairs (``for a, b in zip(x, y)``,
``for i, c in enumerate(s)``), keeps some items (``if n.endswith("ec")``), or XORs text
against a repeated key (``zip(blob, itertools.cycle(key))``): the helpers here compute
those steps on values the evaluator already has, purely and bounded (branch blindcn,
issue 16: samples written without reading the rules used each of them).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from caplet._scan._syntax import Bindings
from caplet._scan._values import (
    MAX_LOOP,
    OPERATOR_ADDS,
    Value,
    binop,
    call_pure,
    format_fields,
    subscript,
)

__all__ = ["BudgetError", "LoopEvaluation", "bind_target", "truth", "zipped"]


class BudgetError(Exception):
    """Raised when a file's step budget is spent (caught at the public entry points)."""


#: Comparisons whose result depends on the two values only.
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], object]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}

#: Pure ``str``/``bytes`` predicates a filter may call on an item.
_PREDICATES = frozenset(
    {
        "startswith",
        "endswith",
        "isalpha",
        "isalnum",
        "isdigit",
        "islower",
        "isupper",
        "isidentifier",
        "isprintable",
        "isspace",
    }
)


def bind_target(target: ast.expr, item: Value) -> dict[str, Value] | None:
    """The names a loop target takes from one item: ``c`` or ``a, b`` (nested too)."""
    if isinstance(target, ast.Name):
        return {target.id: item}
    if isinstance(target, ast.Tuple | ast.List) and isinstance(item, list | str | bytes):
        parts = list(item)
        if len(parts) != len(target.elts) or any(isinstance(e, ast.Starred) for e in target.elts):
            return None
        out: dict[str, Value] = {}
        for elt, part in zip(target.elts, parts, strict=True):
            inner = bind_target(elt, part)
            if inner is None:
                return None
            out.update(inner)
        return out
    return None


def truth(node: ast.expr, ev: Callable[[ast.AST], Value | None]) -> bool | None:
    """Whether a test over constant values holds: comparisons, ``and``/``or``/``not``, the
    pure predicates of ``str`` and ``bytes``, a value's own truth; ``None`` when unknown."""
    if isinstance(node, ast.BoolOp):
        results = [truth(v, ev) for v in node.values]
        if any(r is None for r in results):
            return None
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = truth(node.operand, ev)
        return None if inner is None else not inner
    if isinstance(node, ast.Compare):
        left = ev(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = ev(right_node)
            compare = _COMPARE.get(type(op))
            if left is None or right is None or compare is None:
                return None
            try:
                if not compare(left, right):
                    return False
            except TypeError:
                return None
            left = right
        return True
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _PREDICATES
        and not node.keywords
    ):
        base = ev(node.func.value)
        args = [ev(a) for a in node.args]
        if not isinstance(base, str | bytes) or any(a is None for a in args):
            return None
        try:
            return bool(getattr(base, node.func.attr)(*args))
        except (TypeError, ValueError):
            return None
    value = ev(node)
    return None if value is None else bool(value)


def zipped(columns: list[list[Value] | None], cycled: list[bool]) -> list[Value] | None:
    """``zip(a, b, ...)`` of finite columns, a ``cycle``d column repeated to their length
    (``zip(blob, itertools.cycle(key))``: the XOR key); ``None`` when any is unknown."""
    if any(c is None for c in columns) or not columns:
        return None
    finite = [c for c, cyc in zip(columns, cycled, strict=True) if not cyc and c is not None]
    if not finite:
        return None  # cycles only: endless
    length = min(len(c) for c in finite)
    if length > MAX_LOOP:
        return None
    rows: list[Value] = []
    for i in range(length):
        row: list[Value] = []
        for column, cyc in zip(columns, cycled, strict=True):
            if column is None or (cyc and not column):
                return None
            row.append(column[i % len(column)] if cyc else column[i])
        rows.append(row)
    return rows


class LoopEvaluation:
    """The evaluator's loops, folds and calls of this file's one-return helpers (a mixin of
    :class:`caplet._scan._evaluate.Evaluator`: the state and the primitives are its own,
    declared here for the type checker)."""

    bindings: Bindings
    contributed: dict[str, dict[int, list[ast.expr]]]
    _loop: dict[str, Value]

    def _evaluate(self, node: ast.AST, depth: int) -> Value | None:
        raise NotImplementedError

    def _iterable(self, node: ast.AST, depth: int) -> list[Value] | None:
        raise NotImplementedError

    def _step(self) -> None:
        raise NotImplementedError

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        raise NotImplementedError

    def _comprehension(self, node: ast.ListComp | ast.GeneratorExp, depth: int) -> Value | None:
        """``[chr(c ^ 1) for c in [...]]``: one loop over literals, its target a name or a
        tuple (``for a, b in zip(x, y)``), its tests evaluated on each item (``if
        n.endswith("ec")``); the element evaluated for each item kept (bounded like every
        value). Nested in a function's body or another loop, it sees their names."""
        if len(node.generators) != 1:
            return None
        loop = node.generators[0]
        if loop.is_async:
            return None
        items = self._iterable(loop.iter, depth)
        if items is None or len(items) > MAX_LOOP:
            return None
        outer = self._loop
        out: list[Value] = []
        try:
            for item in items:
                names = bind_target(loop.target, item)
                if names is None:
                    return None
                self._loop = {**outer, **names}
                kept = [truth(t, lambda n: self._evaluate(n, depth)) for t in loop.ifs]
                if any(k is None for k in kept):
                    return None
                if not all(kept):
                    continue
                value = self._evaluate(node.elt, depth)
                if value is None:
                    return None
                out.append(value)
        finally:
            self._loop = outer
        return out

    def evaluate_with(self, node: ast.AST, names: dict[str, Value]) -> Value | None:
        """The value of ``node`` with some names (``item``) or attributes of names
        (``fn.__name__``) given: what a function computes from the identifiers the file
        hands it (a decorated function's name, an attribute's name)."""
        if self._loop:
            return None
        try:
            self._loop = dict(names)
            return self._evaluate(node, 0)
        except BudgetError:
            return None
        finally:
            self._loop = {}

    def loop_values(self, loop: ast.comprehension, name: str) -> list[Value] | None:
        """The values ``name`` takes in a loop over constant items, the items its tests
        drop left out: ``n for n in dir(builtins) if n.endswith("ec")`` takes "exec"."""
        if loop.is_async or self._loop:
            return None
        try:
            items = self._iterable(loop.iter, 0)
            if items is None or len(items) > MAX_LOOP:
                return None
            out: list[Value] = []
            try:
                for item in items:
                    names = bind_target(loop.target, item)
                    if names is None or name not in names:
                        return None
                    self._loop = names
                    kept = [truth(t, lambda n: self._evaluate(n, 0)) for t in loop.ifs]
                    if any(k is None for k in kept):
                        return None
                    if all(kept):
                        out.append(names[name])
            finally:
                self._loop = {}
        except BudgetError:
            return None
        return out

    def _keyword_names(self, node: ast.Call, depth: int) -> Value | None:
        """``def keys(**kw): return list(kw)`` called as ``keys(os=1, system=1)``: the
        names are the keywords themselves (branch blindcn, tune cn7-pandas-profilerx). A
        ``**kw`` is bound to the list of its keys, what iterating the mapping gives."""
        func = node.func
        if not isinstance(func, ast.Name) or func.id in self.contributed:
            return None
        found = self.bindings.named(func.id)
        if len(found) != 1 or found[0].decorator_list or func.id in self.bindings.assigned:
            return None
        a = found[0].args
        if a.kwarg is None or a.posonlyargs or a.kwonlyargs or a.vararg or a.defaults:
            return None
        returned = _one_return(found[0])
        if returned is None:
            return None
        if len(a.args) != len(node.args) or any(
            k.arg in {p.arg for p in a.args} for k in node.keywords
        ):
            return None
        values = [self._evaluate(arg, depth) for arg in node.args]
        keys: Value = [k.arg for k in node.keywords if k.arg is not None]
        params = [*(p.arg for p in a.args), a.kwarg.arg]
        return self._bind(params, [*values, keys], returned, depth)

    def _loop_call(self, node: ast.Call, names: tuple[str, ...], depth: int) -> Value | None:
        """``zip(a, b)`` (a column ``itertools.cycle``d too), ``enumerate(s)`` and
        ``next(it[, default])`` of values the evaluator computes."""
        args = node.args
        if "builtins.zip" in names and args:
            cycled = [
                isinstance(a, ast.Call)
                and len(a.args) == 1
                and "itertools.cycle" in self.resolve(a.func)
                for a in args
            ]
            columns = [
                self._iterable(a.args[0] if c and isinstance(a, ast.Call) else a, depth)
                for a, c in zip(args, cycled, strict=True)
            ]
            return zipped(columns, cycled)
        if "itertools.compress" in names and len(args) == 2:
            # "".join(compress("qeyxzeac", [0, 1, 0, 1, ...])): a name's letters picked
            # out of padding by a selector list (blind37)
            data, selectors = (self._iterable(a, depth) for a in args)
            if data is None or selectors is None:
                return None
            if not all(isinstance(s, int | str | bytes) for s in selectors):
                return None
            return [d for d, s in zip(data, selectors, strict=False) if s]
        if "builtins.enumerate" in names and len(args) == 1:
            items = self._iterable(args[0], depth)
            return None if items is None else [[i, v] for i, v in enumerate(items)]
        if "builtins.next" in names and len(args) in {1, 2}:
            items = self._iterable(args[0], depth)
            if items:
                return items[0]
            return self._evaluate(args[1], depth) if items == [] and len(args) == 2 else None
        return None

    def _callable_body(self, func: ast.expr, arity: int) -> tuple[ast.arguments, ast.expr] | None:
        """The parameters and the returned expression of what ``func`` names: a lambda
        (written in place, or bound once) or a function of this file defined once, with
        one ``return`` after a docstring, no decorator, and plain parameters that
        ``arity`` arguments fill (defaults and a ``*args`` too: ``def n(*ix): return
        "".join(L[i] for i in ix)``)."""
        fn: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef | None = None
        if isinstance(func, ast.Lambda):
            fn = func
        elif isinstance(func, ast.Name) and func.id not in self.contributed:
            bound = self.bindings.assigned.get(func.id, ())
            found = self.bindings.named(func.id)
            if len(bound) == 1 and isinstance(bound[0], ast.Lambda) and not found:
                fn = bound[0]
            elif not bound and len(found) == 1 and not found[0].decorator_list:
                fn = found[0]
        if fn is None:
            return None
        a = fn.args
        if (
            a.posonlyargs
            or a.kwonlyargs
            or a.kwarg
            or arity < len(a.args) - len(a.defaults)
            or (arity > len(a.args) and not a.vararg)
        ):
            return None
        if isinstance(fn, ast.Lambda):
            return a, fn.body
        returned = _one_return(fn)
        return None if returned is None else (a, returned)

    def _bind(
        self,
        params: list[str] | ast.arguments,
        values: list[Value | None],
        body: ast.expr,
        depth: int,
    ) -> Value | None:
        """A function's returned expression with its parameters bound to literal values
        (not memoised: the value depends on them). The body sees its parameters only, not
        the loop it is called from (a function's names are its own)."""
        known = [v for v in values if v is not None]
        if len(known) != len(values):
            return None
        if isinstance(params, ast.arguments):
            bound = self._arguments(params, known, depth)
            if bound is None:
                return None
        else:
            bound = dict(zip(params, known, strict=True))
        outer = self._loop
        try:
            self._loop = bound
            return self._evaluate(body, depth)
        finally:
            self._loop = outer

    def _arguments(
        self, spec: ast.arguments, values: list[Value], depth: int
    ) -> dict[str, Value] | None:
        """Positional values given to plain parameters: missing ones take their literal
        defaults (evaluated where the function is defined), extra ones go to ``*args``."""
        names = [p.arg for p in spec.args]
        bound: dict[str, Value] = dict(zip(names, values, strict=False))
        missing = names[len(values) :]
        defaults = spec.defaults[len(spec.defaults) - len(missing) :] if missing else []
        for name, default in zip(missing, defaults, strict=True):
            value = self._evaluate(default, depth)
            if value is None:
                return None
            bound[name] = value
        if spec.vararg is not None:
            bound[spec.vararg.arg] = list(values[len(names) :])
        return bound

    def _functional(self, node: ast.Call, names: tuple[str, ...], depth: int) -> Value | None:
        """``map(f, items)`` and ``functools.reduce(f, items[, first])`` with ``f`` a lambda
        or a one-return function of this file; ``operator.add``/``concat`` (``iadd``,
        ``__add__``, ...: :data:`OPERATOR_ADDS`) of two values;
        ``operator.itemgetter(i, ...)(s)``: pure folds over literals, evaluated step by step
        (each step counts against the budget)."""
        args = node.args
        ev = self._evaluate
        if "builtins.map" in names and len(args) == 2:
            body = self._callable_body(args[0], 1)
            items = self._iterable(args[1], depth) if body is not None else None
            if body is None or items is None or len(items) > MAX_LOOP:
                return None
            mapped = [self._bind(body[0], [item], body[1], depth) for item in items]
            return None if any(m is None for m in mapped) else [m for m in mapped if m is not None]
        if "functools.reduce" in names and len(args) in {2, 3}:
            items = self._iterable(args[1], depth)
            if items is None or len(items) > MAX_LOOP or (len(args) == 2 and not items):
                return None
            acc = ev(args[2], depth) if len(args) == 3 else items[0]
            rest = items if len(args) == 3 else items[1:]
            adds = not OPERATOR_ADDS.isdisjoint(self.resolve(args[0]))
            body = None if adds else self._callable_body(args[0], 2)
            if not adds and body is None:
                return None
            for item in rest:
                if acc is None:
                    return None
                self._step()
                acc = (
                    binop(ast.Add(), acc, item)
                    if body is None
                    else self._bind(body[0], [acc, item], body[1], depth)
                )
            return acc
        if not OPERATOR_ADDS.isdisjoint(names) and len(args) == 2:
            return binop(ast.Add(), ev(args[0], depth), ev(args[1], depth))
        getter = node.func
        if (
            isinstance(getter, ast.Call)
            and getter.args
            and not getter.keywords
            and len(args) == 1
            and "operator.itemgetter" in self.resolve(getter.func)
        ):
            value = ev(args[0], depth)
            picked = [subscript(value, i, lambda n: ev(n, depth)) for i in getter.args]
            if any(p is None for p in picked):
                return None
            return picked[0] if len(picked) == 1 else [p for p in picked if p is not None]
        return None

    def _spread_values(self, node: ast.Call, depth: int) -> Value | None:
        """``"{0}{1}{0}{2}".format(*codecs.decode("657863", "hex").decode())``: a computed
        value spread into ``str.format`` (branch blindcn, tune cn7-yamlschema-check)."""
        func = node.func
        modules = [n for n in self.resolve(func) if "." in n and not n.startswith("builtins.")]
        if not (isinstance(func, ast.Attribute) and func.attr == "format") and not modules:
            return None
        values: list[Value | None] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                items = self._iterable(arg.value, depth)
                if items is None or len(items) > MAX_LOOP:
                    return None
                values.extend(items)
            else:
                values.append(self._evaluate(arg, depth))
        for name in modules:
            # struct.pack(">3H", *codes): a module's pure function given a spread (blind17)
            result = call_pure(name, values)
            if result is not None:
                return result
        if not isinstance(func, ast.Attribute):
            return None
        base = self._evaluate(func.value, depth)
        return format_fields(base, values, {}) if isinstance(base, str) else None


def _one_return(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    """What ``fn`` returns when its body is one ``return`` of a value after its docstring
    (any constant written as a statement aside), else ``None``."""
    body = [
        s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return body[0].value
    return None
