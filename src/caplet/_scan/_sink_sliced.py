"""Names sliced out of a builtin's text (CPL-THR-003): ``str(oct)[13]``, ``int.__doc__[30]``,
``sys.copyright[5]`` and the like, as the name a lookup, an import or ``eval`` takes.

Split out of :mod:`caplet._scan._sink_lookups` (one concern: whether a value reaches a
builtin's text, through bindings, loops, parameters, constructors and returns).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._syntax import dotted as _dotted
from caplet._scan._values import PRINTABLE_BUILTINS

__all__ = ["SlicedNames"]


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


#: The node classes :meth:`SlicedNames._builtin_text` can be true of.
_TEXT_KINDS = frozenset({ast.Call, ast.FormattedValue, ast.BinOp, ast.Attribute})


#: The attributes :meth:`SlicedNames._builtin_text` can be true of.
_TEXT_ATTRIBUTES = frozenset({"__str__", "__repr__", "__doc__", "copyright"})


#: Attributes that pick items out of a sequence, besides a subscript.
_PICKERS = frozenset({"__getitem__", "getitem", "itemgetter"})


class SlicedNames:
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
            # the classes _builtin_text can answer for, in the survey's order (what it
            # resolves is memoised in that order): a call of it per node of the file was
            # 4% of a package scan's CPU on the benign corpus (issue 16)
            # (an attribute can answer only by one of _TEXT_ATTRIBUTES: the others, most
            # nodes of this walk, are passed over before the call, issue 16's speed)
            self._builtin_texts = any(
                self._builtin_text(n)
                for n in self._flow.nodes
                if type(n) in _TEXT_KINDS
                and (type(n) is not ast.Attribute or n.attr in _TEXT_ATTRIBUTES)
            )
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
            for n in self._flow.of_kind(ast.ClassDef):
                if isinstance(n, ast.ClassDef):
                    for stmt in n.body:
                        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                            params = [a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args)]
                            inits[n.name] = params[1:]
            if inits:
                for n in self._flow.calls():
                    if isinstance(n.func, ast.Name):
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
                stack.extend(r for f in b.named(name) for r in _returns(f))
            elif isinstance(item, ast.Attribute):
                dotted = _dotted(item) or f".{item.attr}"
                if dotted not in seen:
                    # self.text = str(oct); Helper(t).name(): what it holds, what it returns
                    seen.add(dotted)
                    stack.extend(
                        v for vs in flow.contributed.get(dotted, {}).values() for v in vs[:8]
                    )
                    stack.extend(r for f in b.named(item.attr) for r in _returns(f))
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
            if key not in _TEXT_NAMES:
                return False  # most names: the bindings are not looked at (issue 16's speed)
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
