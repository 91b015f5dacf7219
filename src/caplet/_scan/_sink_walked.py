"""Names chosen out of a collection (CPL-THR-003): a namespace walked for a computed name
(the entry found by comparing each key with a name the code computes, never by a
lookup), a name a test picks out of a listing, a name read from a table of computed names.

``for k, v in vars(builtins).items(): if k == "cexe"[::-1]: v(code)``,
``next(v for k, v in vars(builtins).items() if k == ...)`` and
``for name, mod in sys.modules.items(): if name == ...: mod.system(cmd)`` call what
``getattr`` would have fetched, without a ``getattr`` (branch blindcn, issue 16, class 1:
probes written after the blind samples). The call's callee (or its receiver) is the
loop's value, the loop walks a namespace, and its key is compared with a name computed
from literals that denotes an API worth hiding; a walk that compares keys with names
written out (``if k == "print"``) hides nothing.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator

from caplet._scan._evaluate_loops import truth
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._values import Value

__all__ = ["WalkedNames"]

#: Loops per called name that are checked.
_MAX_LOOPS = 8

#: Names a test may keep out of a listing and still be a pick of one (``picked``).
_MAX_PICKED = 3

#: Entries of a table a lookup's name is read from that are evaluated (``table_entry``).
_MAX_TABLE = 64

#: Namespaces a walk may go through.
_NAMESPACES = frozenset({"builtins", "builtins.__dict__", "sys.modules"})

Loop = ast.For | ast.comprehension


class WalkedNames:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow

    def walked_lookup(
        self,
        node: ast.Call,
        worth_hiding: Callable[[str], bool],
        hides_module: Callable[[str], bool],
    ) -> None:
        """A call of a namespace walk's value picked by a computed key."""
        func = node.func
        callee = func.value if isinstance(func, ast.Attribute) else func
        if not isinstance(callee, ast.Name):
            return
        for loop, value_name in self._loops(callee.id):
            space = self._namespace(loop.iter)
            if space is None:
                continue
            target = loop.target
            if not (
                isinstance(target, ast.Tuple)
                and len(target.elts) == 2
                and all(isinstance(e, ast.Name) for e in target.elts)
            ):
                continue
            key, value = (e.id for e in target.elts if isinstance(e, ast.Name))
            if value != value_name:
                continue
            for name in self._compared(loop, key):
                hidden = (
                    hides_module(name)
                    if space == "sys.modules"
                    else worth_hiding(f"builtins.{name}")
                )
                if hidden:
                    self._scan.emit(
                        "CPL-THR-003",
                        f"{space.removesuffix('.__dict__')} walked for {name!r} "
                        "(a name computed from literals)",
                        node.lineno,
                        node.col_offset,
                    )
                    return
            kept = self._kept_keys(loop, key) if space != "sys.modules" else None
            hidden_key = next((k for k in kept or () if worth_hiding(f"builtins.{k}")), None)
            if hidden_key is not None:
                self._scan.emit(
                    "CPL-THR-003",
                    f"builtins walked for {hidden_key!r} (picked by a test on the names)",
                    node.lineno,
                    node.col_offset,
                )
                return

    def _kept_keys(self, loop: Loop, key: str) -> list[str] | None:
        """The builtins' names a comprehension's tests keep, evaluated on each name of this
        interpreter's builtins: ``[v for k, v in vars(builtins).items() if k[::-1] ==
        "lave"][0]`` keeps "eval" (blind32). A test that keeps many names (a sandbox
        copying the public builtins) or that the evaluator cannot compute keeps none."""
        if not isinstance(loop, ast.comprehension) or not loop.ifs:
            return None
        flow = self._flow
        kept: list[str] = []
        for name in sorted(vars(builtins)):
            given: dict[str, Value] = {key: name}

            def ev(node: ast.AST, given: dict[str, Value] = given) -> Value | None:
                return flow.evaluate_with(node, given)

            held = [truth(t, ev) for t in loop.ifs]
            if any(h is None for h in held):
                return None
            if all(held):
                kept.append(name)
                if len(kept) > _MAX_PICKED:
                    return None
        written = {c.value for t in loop.ifs for c in ast.walk(t) if isinstance(c, ast.Constant)}
        # if k == "exec": the name is written out for every reader, nothing is hidden
        return None if written.intersection(kept) else kept

    def _loops(self, name: str) -> Iterator[tuple[Loop, str]]:
        """The loops whose value ``name`` is: the loop's own target, or ``next(...)`` /
        ``[...][0]`` of a comprehension whose element is that target."""
        flow = self._flow
        count = 0
        if name in flow.bindings.iterated:
            if all(self._namespace(i) is None for i in flow.bindings.iterated[name]):
                return  # most loops walk no namespace: their nodes are never searched
            for kind in (ast.For, ast.comprehension):
                for loop in flow.of_kind(kind):
                    if isinstance(loop, ast.For | ast.comprehension) and any(
                        isinstance(n, ast.Name) and n.id == name for n in ast.walk(loop.target)
                    ):
                        count += 1
                        if count > _MAX_LOOPS:
                            return
                        yield loop, name
            return
        bound = flow.bindings.assigned.get(name, ())
        if len(bound) != 1:
            return
        picked = bound[0]
        comp: ast.expr | None = None
        if (
            isinstance(picked, ast.Call)
            and picked.args
            and "builtins.next" in flow.resolve(picked.func)
        ):
            comp = picked.args[0]
        elif isinstance(picked, ast.Subscript):
            comp = picked.value
        if isinstance(comp, ast.GeneratorExp | ast.ListComp) and isinstance(comp.elt, ast.Name):
            for loop in comp.generators[:_MAX_LOOPS]:
                yield loop, comp.elt.id

    def _namespace(self, iterable: ast.expr) -> str | None:
        """The namespace an iterable walks: ``X.items()`` (or ``list(...)`` of it) or
        ``inspect.getmembers(X)`` with ``X`` builtins' namespace or ``sys.modules``."""
        flow = self._flow
        if (
            isinstance(iterable, ast.Call)
            and len(iterable.args) == 1
            and not {"builtins.list", "builtins.sorted", "builtins.tuple"}.isdisjoint(
                flow.resolve(iterable.func)
            )
        ):
            iterable = iterable.args[0]
        if not isinstance(iterable, ast.Call):
            return None
        func = iterable.func
        if isinstance(func, ast.Attribute) and func.attr == "items" and not iterable.args:
            space: ast.expr = func.value
        elif len(iterable.args) == 1 and "inspect.getmembers" in flow.resolve(func):
            space = iterable.args[0]
        else:
            return None
        owners = flow.resolve(space)
        if isinstance(space, ast.Name) and space.id == "__builtins__":
            return "builtins"
        return next((o for o in owners if o in _NAMESPACES), None)

    def _compared(self, loop: Loop, key: str) -> Iterator[str]:
        """The computed names ``key`` is compared with: in the comprehension's tests, or
        anywhere in the file for a ``for`` statement (its ``if`` is in its body)."""
        flow = self._flow
        tests: list[ast.AST] = list(loop.ifs) if isinstance(loop, ast.comprehension) else []
        if isinstance(loop, ast.For):
            tests = [n for s in loop.body for n in ast.walk(s) if isinstance(n, ast.Compare)]
        for test in tests:
            for compare in ast.walk(test):
                if not isinstance(compare, ast.Compare) or len(compare.ops) != 1:
                    continue
                if not isinstance(compare.ops[0], ast.Eq):
                    continue
                left, right = compare.left, compare.comparators[0]
                other = right if isinstance(left, ast.Name) and left.id == key else None
                if other is None and isinstance(right, ast.Name) and right.id == key:
                    other = left
                if other is None or isinstance(other, ast.Constant) or flow.plain(other):
                    continue
                name = flow.name_value(other)
                if name is not None:
                    yield name

    def picked(
        self, name: ast.expr, spaces: tuple[str, ...], worth_hiding: Callable[[str], bool]
    ) -> str | None:
        """``next(getattr(builtins, n) for n in dir(builtins) if len(n) == 4 and
        n.endswith("ec"))``: a name chosen from a listing by a test the evaluator computes,
        never written out (branch blindcn, tune cn7-fastcsv-reader). A test that keeps a
        few names, one of them worth hiding, picks it; a walk over the whole listing (a
        sandbox copying builtins, ``not n.startswith("_")``) keeps many and is no pick."""
        flow = self._flow
        if not isinstance(name, ast.Name) or len(flow.bindings.iterated.get(name.id, ())) != 1:
            return None
        scope = flow.scope(name)
        for kind in (ast.GeneratorExp, ast.ListComp, ast.SetComp):
            for comp in flow.of_kind(kind):
                if id(comp) != scope or not isinstance(
                    comp, ast.GeneratorExp | ast.ListComp | ast.SetComp
                ):
                    continue
                for loop in comp.generators:
                    if not loop.ifs or not (
                        isinstance(loop.target, ast.Name) and loop.target.id == name.id
                    ):
                        continue
                    kept = flow.loop_values(loop, name.id)
                    if not kept or len(kept) > _MAX_PICKED:
                        return None
                    return next(
                        (
                            v
                            for v in kept
                            if isinstance(v, str) and any(worth_hiding(f"{o}.{v}") for o in spaces)
                        ),
                        None,
                    )
        return None

    def table_entry(
        self, name: ast.expr, spaces: tuple[str, ...], worth_hiding: Callable[[str], bool]
    ) -> str | None:
        """``getattr(builtins, ALIASES[alias])`` with ``ALIASES = {"run": "cexe"[::-1]}``: a
        table of the file whose entries spell, by computation, names worth hiding; the key
        may come from anywhere (another module of the package calls ``native("run")``;
        branch blindcn, tune cn7-mdtable-render). Entries written out are a dispatch table
        anyone reads, not hidden names."""
        if not isinstance(name, ast.Subscript) or isinstance(name.slice, ast.Slice):
            return None
        flow = self._flow
        table = flow.bound_once(name.value)
        if not isinstance(table, ast.Dict | ast.List | ast.Tuple):
            return None
        entries = table.values if isinstance(table, ast.Dict) else table.elts
        for entry in entries[:_MAX_TABLE]:
            if isinstance(entry, ast.Constant) or flow.plain(entry):
                continue
            value = flow.name_value(entry)
            if value is not None and any(worth_hiding(f"{o}.{value}") for o in spaces):
                return value
        return None
