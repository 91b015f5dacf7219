"""This file's small helpers run statement by statement on constant arguments, for
:mod:`caplet._scan._evaluate` (its mixin :class:`StepEvaluation`).

A name packed as an integer is unpacked by a loop, not by one returned expression:
blind16's b16-cn-base36-name stores ``"system"`` as ``1751504350`` and turns it back into
text with ``while n: n, r = divmod(n, 36); s = D[r] + s``, a base conversion the one-return
helpers of :mod:`caplet._scan._evaluate_loops` cannot follow (recall17). Such a helper is
run here on the evaluator's values: assignments (tuple targets too), augmented
assignments, ``while`` and ``for`` loops (``break``/``continue``), ``if``, ``return``.
Every expression is the evaluator's (so only pure operations on values are performed,
nothing of the scanned code runs), every statement counts against the file's step budget
and against :data:`_MAX_STATEMENTS` of its own, and a helper holding anything else (a call
of the scanned code's own state, a ``global``, a ``try``, a nested ``def``) is not run.
"""

from __future__ import annotations

import ast
from typing import Final

from caplet._scan._evaluate_loops import bind_target, truth
from caplet._scan._syntax import Bindings
from caplet._scan._values import Value, binop

__all__ = ["StepEvaluation"]

#: Statements one call of a helper may run: a base-36 name of 12 letters takes 40.
_MAX_STATEMENTS: Final = 4096
#: The statements a helper may hold.
_SIMPLE = (ast.Assign, ast.AugAssign, ast.Return, ast.Pass, ast.Break, ast.Continue)


#: Steps all the helpers of one file may take (the file's own budget is 60,000).
_HELPER_BUDGET: Final = 60_000


class _HelperState:
    """The helpers' account for one file: the steps they took, those that never return."""

    def __init__(self) -> None:
        self.steps = 0
        self.endless: set[str] = set()


class _Stop(Exception):  # noqa: N818 (not an error: a value the runner cannot know)
    """The helper cannot be run on constants (a value not known, a statement too many)."""


class _Return(Exception):  # noqa: N818 (a control transfer, not an error)
    def __init__(self, value: Value) -> None:
        super().__init__()
        self.value = value


class _Break(Exception):  # noqa: N818
    pass


class _Continue(Exception):  # noqa: N818
    pass


class StepEvaluation:
    """The evaluator's statement runner (a mixin of
    :class:`caplet._scan._evaluate.Evaluator`: the state and the primitives are its own,
    declared here for the type checker)."""

    bindings: Bindings
    contributed: dict[str, dict[int, list[ast.expr]]]
    _loop: dict[str, Value]
    _steps: int
    _helpers: _HelperState

    def _evaluate(self, node: ast.AST, depth: int) -> Value | None:
        raise NotImplementedError

    def _iterable(self, node: ast.AST, depth: int) -> list[Value] | None:
        raise NotImplementedError

    def _step(self) -> None:
        raise NotImplementedError

    def _stepped_call(self, name: str, values: list[Value | None], depth: int) -> Value | None:
        """What this file's function ``name`` returns for positional ``values``, run
        statement by statement; ``None`` when it is not a small helper of constants.

        The steps a run takes are given back to the file's budget and counted against
        the helpers' own (:data:`_HELPER_BUDGET`): a helper that never returns, called
        again and again, must not spend the budget the lookups after it are read with.
        A helper that ran out of statements is not run again."""
        if name in self.contributed or name in self.bindings.assigned:
            return None
        try:
            state = self._helpers
        except AttributeError:
            state = self._helpers = _HelperState()
        if state.steps > _HELPER_BUDGET or name in state.endless:
            return None
        before = self._steps
        try:
            return self._run_helper(name, values, depth, state)
        finally:
            state.steps += self._steps - before
            self._steps = before

    def _run_helper(
        self, name: str, values: list[Value | None], depth: int, state: _HelperState
    ) -> Value | None:
        found = self.bindings.named(name)
        if len(found) != 1 or found[0].decorator_list or any(v is None for v in values):
            return None
        fn = found[0]
        a = fn.args
        if (
            a.posonlyargs
            or a.kwonlyargs
            or a.vararg
            or a.kwarg
            or a.defaults
            or len(a.args) != len(values)
        ):
            return None
        if not _runnable(fn.body):
            return None
        env: dict[str, Value] = {
            p.arg: v for p, v in zip(a.args, values, strict=True) if v is not None
        }
        local = {p.arg for p in a.args} | _stored(fn.body)
        outer = self._loop
        run = _Run(self, env, local, depth)
        try:
            run.block(fn.body)
        except _Return as returned:
            return returned.value
        except (_Stop, _Break, _Continue):
            if run.count > _MAX_STATEMENTS:
                state.endless.add(name)
            return None
        finally:
            self._loop = outer
        return None


class _Run:
    """One call's state: the local names' values and the statements run so far."""

    def __init__(
        self, ev: StepEvaluation, env: dict[str, Value], local: set[str], depth: int
    ) -> None:
        self.ev = ev
        self.env = env
        self.local = local
        self.depth = depth
        self.count = 0

    def value(self, node: ast.expr) -> Value:
        """``node``'s value with the locals bound; a local not yet bound stops the run
        (the function's other binding of it must not be read)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.local and sub.id not in self.env:
                raise _Stop
            if isinstance(sub, ast.Lambda | ast.NamedExpr):
                raise _Stop
        self.ev._loop = dict(self.env)
        result = self.ev._evaluate(node, self.depth)
        if result is None:
            raise _Stop
        return result

    def test(self, node: ast.expr) -> bool:
        known = truth(node, self.value_or_none)
        if known is None:
            raise _Stop
        return known

    def value_or_none(self, node: ast.AST) -> Value | None:
        try:
            return self.value(node) if isinstance(node, ast.expr) else None
        except _Stop:
            return None

    def block(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.count += 1
            if self.count > _MAX_STATEMENTS:
                raise _Stop
            self.ev._step()
            self.statement(statement)

    def statement(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Expr | ast.Pass):
            return  # a docstring (only constants are let in)
        if isinstance(s, ast.Return):
            raise _Return(self.value(s.value) if s.value is not None else _no_value())
        if isinstance(s, ast.Break):
            raise _Break
        if isinstance(s, ast.Continue):
            raise _Continue
        if isinstance(s, ast.Assign):
            result = self.value(s.value)
            for target in s.targets:
                bound = bind_target(target, result)
                if bound is None:
                    raise _Stop
                self.env.update(bound)
            return
        if isinstance(s, ast.AugAssign):
            assert isinstance(s.target, ast.Name)  # checked by _runnable
            if s.target.id not in self.env:
                raise _Stop
            combined = binop(s.op, self.env[s.target.id], self.value(s.value))
            if combined is None:
                raise _Stop
            self.env[s.target.id] = combined
            return
        if isinstance(s, ast.If):
            self.block(s.body if self.test(s.test) else s.orelse)
            return
        if isinstance(s, ast.While):
            self.loop_while(s)
            return
        assert isinstance(s, ast.For)
        self.loop_for(s)

    def loop_while(self, s: ast.While) -> None:
        while self.test(s.test):
            try:
                self.block(s.body)
            except _Break:
                return
            except _Continue:
                continue
        self.block(s.orelse)

    def loop_for(self, s: ast.For) -> None:
        items = self.value(s.iter)
        if isinstance(items, str | bytes):
            items = list(items)
        if not isinstance(items, list):
            raise _Stop
        for item in items:
            bound = bind_target(s.target, item)
            if bound is None:
                raise _Stop
            self.env.update(bound)
            try:
                self.block(s.body)
            except _Break:
                return
            except _Continue:
                continue
        self.block(s.orelse)


def _no_value() -> Value:
    raise _Stop


def _runnable(body: list[ast.stmt]) -> bool:
    """Whether every statement of ``body`` (nested blocks too) is one the runner knows,
    with names only as the targets of its assignments."""
    for s in body:
        if isinstance(s, ast.Expr):
            if not isinstance(s.value, ast.Constant):
                return False
        elif isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                return False
        elif isinstance(s, ast.Assign):
            if not all(_plain_target(t) for t in s.targets):
                return False
        elif isinstance(s, ast.For):
            if s.type_comment or not _plain_target(s.target):
                return False
            if not (_runnable(s.body) and _runnable(s.orelse)):
                return False
        elif isinstance(s, ast.While | ast.If):
            if not (_runnable(s.body) and _runnable(s.orelse)):
                return False
        elif not isinstance(s, _SIMPLE):
            return False
    return True


def _plain_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    return isinstance(target, ast.Tuple | ast.List) and all(
        isinstance(e, ast.Name) for e in target.elts
    )


def _stored(body: list[ast.stmt]) -> set[str]:
    """Every name the statements of ``body`` bind."""
    names: set[str] = set()
    for s in body:
        for node in ast.walk(s):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names
