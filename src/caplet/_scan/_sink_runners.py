"""Code run by a name other than exec: the sinks of :mod:`caplet._scan._code_runners` and
:mod:`caplet._scan._serialized_calls`, and a pickle decoded from a literal (a mixin of
:class:`caplet._scan._sinks.Sinks`).

A source runner's argument is exec's (timeit, the profilers, pdb, code's interpreters,
``PyRun_SimpleString``); an annotation reader evaluates the string annotations of the
function or class it is given; a YAML or jsonpickle document calls what its tags name,
checked as the Python that call is. blind16's samples reached each of them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import partial

from caplet._scan._code_runners import (
    ANNOTATION_READERS,
    DOCSTRING_RUNNERS,
    INTERPRETER_METHODS,
    PARSER_METHODS,
    SOURCE_RUNNERS,
    annotation_texts,
    docstring_stages,
    doctest_source,
    runner_source,
)
from caplet._scan._flow import Flow, Labels
from caplet._scan._serialized_calls import DOCUMENT_LOADERS, document_source

__all__ = ["RunnerSinks"]


class RunnerSinks:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _flow: Flow
    _pending: list[Callable[[], None]]

    #: The sinks' check of exec's argument, and the stage sinks' of source in a string.
    _run_code: Callable[[ast.Call, str, ast.expr], None]
    _by_source: Callable[[ast.Call, str, Labels], None]
    _decoded: Callable[[ast.AST], bool]
    _code_string: Callable[[ast.Call, str, str], None]

    def code_runners(self, node: ast.Call, funcs: tuple[str, ...], method: str) -> None:
        """A call that runs code it is given under another name than exec's."""
        flow = self._flow
        if method in INTERPRETER_METHODS or not SOURCE_RUNNERS.keys().isdisjoint(funcs):
            ran = runner_source(node, funcs, flow.resolve, flow.bindings.assigned)
            if ran is not None:  # exec under another name: its source is exec's
                self._pending.append(lambda: self._run_code(node, *ran))
        if method in PARSER_METHODS or not DOCSTRING_RUNNERS.isdisjoint(funcs):
            self._pending.append(lambda: self._doctests(node, funcs))
        if not node.args:
            return
        if not DOCUMENT_LOADERS.isdisjoint(funcs):
            self._pending.append(lambda: self._loaded_document(node, funcs))
        if not ANNOTATION_READERS.isdisjoint(funcs):
            api = next(f for f in funcs if f in ANNOTATION_READERS)
            bindings = flow.bindings
            for text in annotation_texts(node.args[0], bindings.functions, bindings.classes):
                self._pending.append(partial(self._code_string, node, f"{api}(...)", text))

    def _doctests(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """Docstrings a doctest runner runs: what they carry is exec's argument's (a
        decoded or downloaded stage), their examples' source checked as exec's."""
        flow = self._flow
        stores = [*flow.of_kind(ast.Assign), *flow.calls()]
        stages = docstring_stages(node, funcs, flow.resolve, flow.bindings.assigned, stores)
        api = next((f for f in funcs if f in DOCSTRING_RUNNERS), "doctest.DocTestParser")
        for stage in stages:
            self._by_source(node, f"{api}(...)", flow.labels(stage))
            value = flow.evaluate(stage)
            source = doctest_source(value) if isinstance(value, str) else None
            if source is not None:
                self._code_string(node, f"{api}(...)", source)

    def _unpickled(self, node: ast.Call, arg: ast.expr) -> None:
        """A pickle decoded from a literal of this file: loading it runs what it says
        (``pickle.loads(b64decode("..."))``); a pickle of run-time data is not a payload."""
        if isinstance(self._flow.evaluate(arg), bytes) and self._decoded(arg):
            api = min(self._flow.resolve(node.func), default="pickle.loads")
            self._by_source(node, f"{api}(...)", self._flow.labels(arg))

    def _loaded_document(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        # a YAML or jsonpickle document calls what its tags name: checked as that Python
        api = next(f for f in funcs if f in DOCUMENT_LOADERS)
        source = document_source(api, self._flow.evaluate(node.args[0]))
        if source is not None:
            self._code_string(node, f"{api}(...)", source)
