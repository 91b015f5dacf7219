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
import builtins

from caplet._scan._closed import Closedness
from caplet._scan._evaluate_loops import BudgetError, LoopEvaluation
from caplet._scan._evaluate_loops import truth as _truth
from caplet._scan._evaluate_members import declared_member, is_iter_call, module_docstring
from caplet._scan._evaluate_methods import method_value as _method
from caplet._scan._evaluate_methods import template_value as _template
from caplet._scan._evaluate_steps import StepEvaluation
from caplet._scan._interpreter_texts import listing, module_text, type_of_literal
from caplet._scan._syntax import MAX_RESOLVE_DEPTH, Bindings, fold_str
from caplet._scan._values import MAX_VALUE as _MAX_VALUE
from caplet._scan._values import PRINTABLE_BUILTINS as _PRINTABLE_BUILTINS
from caplet._scan._values import Value, in_place_reorders
from caplet._scan._values import binop as _binop
from caplet._scan._values import call_pure as _call
from caplet._scan._values import chr_of as _chr
from caplet._scan._values import format_fields as _format
from caplet._scan._values import formatted as _formatted
from caplet._scan._values import has_parameters as _has_parameters
from caplet._scan._values import join_strings as _join
from caplet._scan._values import json_entry as _json_entry
from caplet._scan._values import literal_object as _literal_object
from caplet._scan._values import percent as _percent
from caplet._scan._values import percent_mapping as _percent_mapping
from caplet._scan._values import positional as _positional
from caplet._scan._values import reorder as _reorder
from caplet._scan._values import subscript as _subscript

__all__ = ["BudgetError", "Evaluator", "Value"]

#: Steps (label or value computations) per file; past it, answers are empty.
_BUDGET = 60_000
#: Characters (bytes, items) of the long values one file's evaluator may build and keep;
#: a value that would pass it is not known (``None``), like one over ``MAX_VALUE``. Each
#: value was bounded, their sum was not: the memo keeps every value and
#: _computed_strings asks for 2,000 expressions a file, so ``x = s.lower()`` 2,000 times
#: of a 4 MiB ``s`` held 8 GB (attack5). Short values (names, commands) are never
#: refused, so padding cannot starve the lookups that follow; the step budget bounds
#: them (60,000 x 256).
_MAX_BUILT = 8 * _MAX_VALUE
_SHORT = 256

#: Text attributes of the interpreter's objects a name may be spelled from.
_OBJECT_TEXTS = frozenset({"__doc__", "__name__", "__qualname__", "__module__"})
#: Methods called through their class (``bytes.decode(b"exec")``), evaluated like functions.
_CLASS_CALLS = frozenset({"builtins.bytes.decode", "builtins.bytearray.decode"})


class Evaluator(Closedness, LoopEvaluation, StepEvaluation):
    """Resolution plus constant evaluation (memoised, bounded)."""

    def __init__(self, bindings: Bindings) -> None:
        super().__init__(bindings)
        self._values: dict[int, Value | None] = {}
        self._evaluating: set[str] = set()
        self._steps = 0
        self._built = 0
        #: A comprehension's loop variable while its element is evaluated item by item
        #: (no value is memoised meanwhile: it depends on the item).
        self._loop: dict[str, Value] = {}
        #: Values a name receives after its binding, by scope (filled by the visitor).
        self.contributed: dict[str, dict[int, list[ast.expr]]] = {}
        self._parameters: frozenset[str] | None = None
        #: By name, the in-place reorders the file calls on it (on first need).
        self._in_place: dict[str, list[str]] | None = None

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
        if isinstance(value, str | bytes | list) and len(value) > _SHORT:
            if len(value) > _MAX_VALUE or self._built + len(value) > _MAX_BUILT:
                value = None
            else:
                self._built += len(value)
        if not self._loop:
            self._values[key] = value
        return value

    def _entry(self, node: ast.Subscript, depth: int) -> Value | None:
        """``TABLE["a"]`` of a dict literal bound once in this file: the entry's value."""
        table = node.value
        if isinstance(table, ast.Name):
            bound = self.bindings.assigned.get(table.id, ())
            table = bound[0] if len(bound) == 1 and table.id not in self.contributed else table
        if (
            isinstance(table, ast.Call)
            and len(table.args) == 1
            and not table.keywords
            and "json.loads" in self.resolve(table.func)
        ):
            # names kept in a JSON document, \u-escaped where Python sees escapes (blind31)
            document = self._evaluate(table.args[0], depth)
            return _json_entry(document, self._evaluate(node.slice, depth))
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
                literal = self._dict_literal(node.right)
                if literal is not None:
                    # "%(a)s%(b)s" % {"a": ..., "b": ...} (or a name bound once to one)
                    mapping = self._mapping(literal, depth)
                    return None if mapping is None else _percent_mapping(left, mapping)
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
        if isinstance(node, ast.FormattedValue) and node.conversion == -1:
            # f"{'cu':s}{x:>3}": a small spec applied to a string or an integer
            spec = "" if node.format_spec is None else ev(node.format_spec, depth)
            return _formatted(ev(node.value, depth), spec) if isinstance(spec, str) else None
        if isinstance(node, ast.Subscript):
            table = isinstance(node.value, ast.Dict | ast.Name)
            if table and not isinstance(node.slice, ast.Slice):
                entry = self._entry(node, depth)
                if entry is not None:
                    return entry
            return _subscript(ev(node.value, depth), node.slice, lambda n: ev(n, depth))
        if isinstance(node, ast.Call):
            return self._evaluate_call(node, depth)
        if isinstance(node, ast.IfExp):
            test = _truth(node.test, lambda n: ev(n, depth))
            return None if test is None else ev(node.body if test else node.orelse, depth)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth)
        return None

    def _attribute(self, node: ast.Attribute, depth: int) -> Value | None:
        """Text the interpreter itself holds: ``string.ascii_lowercase``, ``int.__doc__``,
        ``type(len).__name__`` (a name spelled from it is as constant as a literal)."""
        if self._loop and isinstance(node.value, ast.Name):
            given = self._loop.get(f"{node.value.id}.{node.attr}")
            if given is not None:
                return given  # fn.__name__ given by evaluate_with
        if node.attr in _OBJECT_TEXTS:
            target = node.value
            if (
                isinstance(target, ast.Call)
                and len(target.args) == 1
                and not target.keywords
                and "builtins.type" in self.resolve(target.func)
            ):
                inner = target.args[0]
                if (
                    node.attr in {"__name__", "__qualname__"}
                    and isinstance(inner, ast.Call)
                    and (own := self._own_name(inner.func)) is not None
                ):
                    return own  # type(sys_tem()).__name__ (blindcn)
                obj = self._builtin(inner)
                if obj is None:
                    value = self._evaluate(inner, depth)
                    obj = value if value is not None else _literal_object(inner)
                text = getattr(type(obj), node.attr, None) if obj is not None else None
            else:
                own = self._own_name(target) if node.attr in {"__name__", "__qualname__"} else None
                if own is not None:
                    # class o: class s: ...; o.s.__qualname__ is "o.s" (blindcn)
                    return own if node.attr == "__qualname__" else own.rpartition(".")[2]
                obj = self._builtin(target)
                text = getattr(obj, node.attr, None) if obj is not None else None
            return text if isinstance(text, str) else None
        declared = declared_member(node, self.bindings, self.resolve, self.evaluate)
        if declared is not None:
            return declared  # Op.system.name, Step._fields (blind18)
        for name in self.resolve(node):
            text = module_text(name)
            if text is not None:
                return text  # string.ascii_lowercase, calendar.day_name
        bound = self.class_attribute(node)
        if bound is not None and len(bound) == 1 and node.attr not in self.contributed:
            return self._evaluate(bound[0], depth)  # class Config: name = "ex" + "ec"
        return None

    def _own_name(self, node: ast.AST) -> str | None:
        """The dotted name of a class or function this file defines (``o`` or ``o.s``),
        never rebound by an assignment or an import: the text its ``__qualname__`` holds."""
        b = self.bindings
        if isinstance(node, ast.Name):
            name = node.id
            if name in b.defined and name not in b.assigned and name not in b.imports:
                return name
            return None
        if isinstance(node, ast.Attribute) and node.attr in b.defined:
            outer = self._own_name(node.value)
            return None if outer is None else f"{outer}.{node.attr}"
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
        if not values and name not in self._evaluating:
            return module_docstring(name, self.bindings) or self._unpacked(name, depth)
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
            return self._reordered(name, self._evaluate(values[0], depth))
        finally:
            self._evaluating.discard(name)

    def calls(self) -> list[ast.Call]:
        """The file's calls (the flow's survey; an evaluator alone knows none)."""
        return []

    def _reordered(self, name: str, value: Value | None) -> Value | None:
        """``value`` after the file's in-place ``name.reverse()``/``name.sort()`` calls, in
        its order (``b = bytearray(b"metsys"); b.reverse()``: blind31). Read as if each ran
        before any use: what a payload does; a use before them is not told apart."""
        if not isinstance(value, bytes | list):
            return value
        if self._in_place is None:
            self._in_place = in_place_reorders(self.calls())
        return _reorder(value, self._in_place.get(name, ()))

    def _unpacked(self, name: str, depth: int) -> Value | None:
        """``m, _, f = "os__system".partition("__")``: a name bound once, by unpacking a
        value the evaluator computes (branch blindcn, tune cn7-shellproxy-tools)."""
        unpacked = self.bindings.unpacked.get(name, ())
        if (
            len(unpacked) != 1
            or name in self.bindings.iterated
            or name in self.contributed
            or len(self.bindings.scoped.get(name, {})) > 1
        ):
            return None
        value, place, size = unpacked[0]
        self._evaluating.add(name)
        try:
            whole = self._evaluate(value, depth)
        finally:
            self._evaluating.discard(name)
        if isinstance(whole, str | bytes):
            whole = list(whole)
        return whole[place] if isinstance(whole, list) and len(whole) == size else None

    def bound_once(self, node: ast.expr) -> ast.expr:
        """What a name is bound to when it is bound once and nothing adds to it (a literal
        list, tuple or dict read as written: ``*args``, a table), else ``node`` itself
        (a literal written in place too); the caller asks for the kind it reads."""
        if isinstance(node, ast.Name) and node.id not in self.contributed:
            bound = self.bindings.assigned.get(node.id, ())
            if len(bound) == 1:
                return bound[0]
        return node

    def _dict_literal(self, node: ast.expr) -> ast.Dict | None:
        """A dict literal, written in place or bound once to a name nothing adds to."""
        node = self.bound_once(node)
        return node if isinstance(node, ast.Dict) else None

    def _mapping(self, node: ast.Dict, depth: int) -> dict[str, Value | None] | None:
        """A dict literal of string keys, its values evaluated (``None`` where unknown)."""
        out: dict[str, Value | None] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            name = None if key is None else self._evaluate(key, depth)
            if not isinstance(name, str):
                return None
            out[name] = self._evaluate(value, depth)
        return out

    def _keyword_call(self, node: ast.Call, depth: int) -> Value | None:
        """The keyword calls of pure text: ``"{a}{b}".format(a=..., b=...)``,
        ``x.decode(encoding="utf-8")``, ``codecs.decode(x, encoding="rot13")``,
        ``str(b, encoding="utf-8")`` (the keywords those take, nothing else)."""
        func = node.func
        if any(k.arg is None for k in node.keywords) or any(
            isinstance(a, ast.Starred) for a in node.args
        ):
            return None
        keys = self._keyword_names(node, depth)
        if keys is not None:
            return keys
        kwargs = {k.arg: self._evaluate(k.value, depth) for k in node.keywords if k.arg}
        args = [self._evaluate(a, depth) for a in node.args]
        if isinstance(func, ast.Attribute) and func.attr == "format":
            base = self._evaluate(func.value, depth)
            return _format(base, args, kwargs) if isinstance(base, str) else None
        filled = _template(node, args, kwargs, flow=self, depth=depth)
        if filled is not None:
            return filled
        if set(kwargs) - {"encoding", "errors"} or "encoding" not in kwargs:
            return None
        args.append(kwargs["encoding"])
        names = self.resolve(func)
        if isinstance(func, ast.Attribute) and func.attr in {"decode", "encode"} and not names:
            base = self._evaluate(func.value, depth)
            return _method(base, func.attr, args, flow=self, node=node, depth=depth)
        for name in names:
            if name in {"builtins.str", "codecs.decode", "codecs.encode"} or name in _CLASS_CALLS:
                result = _call(name, args)
                if result is not None:
                    return result
        if isinstance(func, ast.Attribute) and func.attr in {"decode", "encode"}:
            base = self._evaluate(func.value, depth)
            return _method(base, func.attr, args, flow=self, node=node, depth=depth)
        return None

    def _evaluate_call(self, node: ast.Call, depth: int) -> Value | None:
        if node.keywords:
            return self._keyword_call(node, depth)
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
            # itertools.compress(...), builtins.zip(...): a loop helper called through its
            # module (blind37)
            looped = self._loop_call(node, self.resolve(func), depth)
            if looped is not None:
                return looped
            if func.attr == "join" and len(args) == 2 and "builtins.str.join" in self.resolve(func):
                # str.join("", pieces): the method called through its class
                return _join(ev(args[0], depth), self._iterable(args[1], depth))
            if (
                func.attr == "__add__"
                and len(args) == 2
                and "builtins.str.__add__" in self.resolve(func)
            ):
                # str.__add__("ev", "al"): a + called through the class (attack11)
                left, right = ev(args[0], depth), ev(args[1], depth)
                return _method(left, "__add__", [right], flow=self, node=node, depth=depth)
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
            if method == "format_map" and len(args) == 1 and isinstance(base, str):
                # "{a}{b}".format_map({"a": "ev", "b": "al"}) (attack11)
                table = self._dict_literal(args[0])
                mapping = None if table is None else self._mapping(table, depth)
                return None if mapping is None else _format(base, [], mapping)
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
        if len(args) == 1 and not ({"builtins.str", "builtins.repr"}.isdisjoint(names)):
            kind = type_of_literal(args[0], self.resolve)
            if kind is not None:
                # str(type(None)): "<class 'NoneType'>" spells "y", "a", "T" (blind32)
                return str(kind) if "builtins.str" in names else repr(kind)
        if len(args) == 1 and "builtins.dir" in names and self._names_builtins(args[0]):
            # dir(builtins)[n]: a builtin picked by its place in this interpreter's list
            return sorted(vars(builtins))
        if len(args) == 1 and "builtins.dir" in names:
            # next(getattr(subprocess, n) for n in dir(subprocess) if n.startswith("Po")):
            # a process module's listing, as this interpreter has it (blind32)
            listed = listing(self.resolve(args[0]))
            if listed is not None:
                return listed
        looped = self._loop_call(node, names, depth)
        if looped is not None:
            return looped
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
        if isinstance(func, ast.Lambda) and (in_place := self._callable_body(func, len(args))):
            # (lambda *c: "".join(map(chr, c)))(101, 118, 97, 108): *args and defaults (blind13)
            return self._bind(in_place[0], [ev(a, depth) for a in args], in_place[1], depth)
        if isinstance(func, ast.Name) and func.id in self.bindings.defined:
            # def n(): return "ex" + "ec"; n(); or def d(s): return s[::-1]; d("cexe"):
            # one function, one return of a value, its parameters given literal values
            body = self._callable_body(func, len(args))
            if body is not None:
                return self._bind(body[0], values, body[1], depth)
            # while n: n, r = divmod(n, 36); s = D[r] + s: a small helper run (recall17)
            return self._stepped_call(func.id, values, depth)
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
                # _n = lambda *c: "".join(map(chr, c)): defaults and *args too (blind13)
                body = self._callable_body(func, len(args))
                if body is not None:
                    return self._bind(body[0], values, body[1], depth)
        if "builtins.reversed" in names and len(args) == 1:
            inner = values[0]
            return list(reversed(list(inner))) if isinstance(inner, str | list) else None
        return None

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
                return self._spread_values(node, depth)
            spread.extend(arg.value.elts)
        return self._evaluate_call(ast.Call(func=node.func, args=spread, keywords=[]), depth)

    def _iterable(self, node: ast.AST, depth: int) -> list[Value] | None:
        value = self._evaluate(is_iter_call(node, self.resolve) or node, depth)
        if isinstance(value, str):
            return list(value)
        if isinstance(value, bytes):
            return list(value)
        if isinstance(value, list):
            return value
        return None
