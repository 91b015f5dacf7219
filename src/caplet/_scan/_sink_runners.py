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
    FORWARD_REFS,
    INTERPRETER_METHODS,
    PARSER_METHODS,
    SOURCE_RUNNERS,
    annotation_texts,
    docstring_stages,
    doctest_source,
    runner_source,
    stored_annotations,
)
from caplet._scan._commands import Commands
from caplet._scan._config_factories import (
    CONFIG_LOADERS,
    DATA_LOADERS,
    FILE_LOADERS,
    LISTENERS,
    configured_calls,
    unverified,
)
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow, Labels, is_network
from caplet._scan._lookup_hidden import worth_hiding
from caplet._scan._rules import API_RULES, PROGRAM_ARGUMENTS
from caplet._scan._serialized_calls import DOCUMENT_LOADERS, document_source
from caplet._scan._sources import DECODERS, Source
from caplet._scan._syntax import argument
from caplet._scan._text_routes import TEMPLATE_CLASSES, TEMPLATE_METHODS, imports_jinja2

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
    #: Every call's sinks, and a built node kept alive while the file is checked.
    call: Callable[[ast.Call, tuple[str, ...]], None]
    keep: Callable[[ast.AST], None]
    process: Callable[[ast.Call, str, ast.expr], None]
    _scan: FileScan
    _runs: list[tuple[frozenset[str], ast.Call, str]]
    _commands: Commands

    def code_runners(self, node: ast.Call, funcs: tuple[str, ...], method: str) -> None:
        """A call that runs code it is given under another name than exec's."""
        flow = self._flow
        if method in INTERPRETER_METHODS or not SOURCE_RUNNERS.keys().isdisjoint(funcs):
            ran = runner_source(node, funcs, flow.resolve, flow.bindings.assigned)
            if ran is not None:  # exec under another name: its source is exec's
                self._pending.append(lambda: self._run_code(node, *ran))
        if node.args and (
            not TEMPLATE_CLASSES.isdisjoint(funcs)
            or (method in TEMPLATE_METHODS and imports_jinja2(flow))
        ):
            # a jinja2 template is Python (lib29): a decoded one is exec's stage (see
            # _template_stage); its text is no Python to read, so only where it came
            # from is asked
            template = next((f for f in funcs if f in TEMPLATE_CLASSES), f".{method}")
            self._pending.append(partial(self._template_stage, node, f"{template}(...)"))
        if not CONFIG_LOADERS.isdisjoint(funcs):
            self._configured(node, funcs)
        if node.args and not DATA_LOADERS.isdisjoint(funcs):
            self._config_data(node, funcs)
        if not LISTENERS.isdisjoint(funcs) and unverified(node):
            # any peer's configuration applied, and so its Python run (mend19)
            listener = next(f for f in funcs if f in LISTENERS)
            self._scan.emit(
                "CPL-THR-002",
                f"{listener}(...) without verify (a socket that applies any peer's logging "
                "configuration)",
                node.lineno,
                node.col_offset,
            )
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
            # what the file stores into its annotations (Box.__annotations__ = {"x": v}):
            # exec's argument, a decoded or downloaded stage run (attack26)
            for value in stored_annotations(node.args[0], flow.of_kind(ast.Assign)):
                self._pending.append(partial(self._run_code, node, api, value))
        if not FORWARD_REFS.isdisjoint(funcs):  # its text evaluated as an annotation's
            ref = next(f for f in funcs if f in FORWARD_REFS)
            self._pending.append(partial(self._run_code, node, ref, node.args[0]))

    def _template_stage(self, node: ast.Call, api: str) -> None:
        # Package mode, measured on the benign corpus: a template rendered by jinja2's
        # sandbox (fsspec's references) and a template downloaded into a docs build
        # (scikit-learn's doc/conf.py) are what packages write; a template hidden by a
        # decoder is the stage exec's rule looks for (lib29's routes, the nineteenth
        # session's benign run).
        given = node.args[0]
        if self._decoded(given) and not self._sandboxed(node.func):
            self._by_source(node, api, self._flow.labels(given))

    def _sandboxed(self, func: ast.expr) -> bool:
        """Whether a template method's receiver is made by ``jinja2.sandbox`` (directly, or
        a name bound only to such)."""
        receiver = func.value if isinstance(func, ast.Attribute) else func
        made = [receiver]
        if isinstance(receiver, ast.Name):
            made = list(self._flow.bindings.assigned.get(receiver.id, ()))[:4]
        return bool(made) and all(
            isinstance(m, ast.Call)
            and any(f.startswith("jinja2.sandbox.") for f in self._flow.resolve(m.func))
            for m in made
        )

    def _configured(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """The factories a configuration names, called by its loader: each checked as the
        call it makes; an API worth hiding named in a string is looked up by name."""
        flow = self._flow
        loader = next(f for f in funcs if f in CONFIG_LOADERS)
        for call, api, how in configured_calls(
            node, flow.name_value, flow.resolve, flow.bindings.assigned
        ):
            self.keep(call)
            self.call(call, (api,))
            spec = PROGRAM_ARGUMENTS.get(api) if API_RULES.get(api) == "CPL-PROC-001" else None
            command = argument(call, spec) if spec is not None else None
            if command is not None:  # a process started: its command checked as any
                self.process(call, api, command)
            network = is_network(api) or API_RULES.get(api, "").startswith("CPL-NET")
            if how == "string" and worth_hiding(api) and not network:
                # a logging handler that sends (SysLogHandler, HTTPHandler) is what
                # configurations name; its egress is checked as the call's
                self._scan.emit(
                    "CPL-THR-003",
                    f"{api} named by a factory key of what {loader} calls",
                    call.lineno,
                    call.col_offset,
                )

    def _config_data(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """A logging configuration downloaded or decoded (``dictConfig(requests.get(u).json())``):
        the callables it names are the sender's, called by the loader, as exec's code is
        (recall18). ``fileConfig``'s file is run as a script is: written from a download
        or a decoded string, or with Python in its ``class``/``args`` values
        (:func:`file_config_source`), then read (:meth:`_write_then_run`)."""
        loader = min(f for f in funcs if f in DATA_LOADERS)
        given = node.args[0]
        if not FILE_LOADERS.isdisjoint(funcs):
            self._runs.append((self._commands.keys(given), node, loader))
            return
        carried = {Source.DOWNLOADED, Source.REMOTE}

        def check() -> None:
            # decoded counts when a literal of the file is decoded: a level or a path
            # kept in base64 in an environment variable is the deployment's own
            kept = {*carried, Source.DECODED} if self._literal_decoded(given) else carried
            labels = frozenset(x for x in self._flow.labels(given) if x[0] in kept)
            if labels:
                self._by_source(node, f"{loader}(...)", labels)

        self._pending.append(check)

    def _literal_decoded(self, given: ast.expr) -> bool:
        """Whether ``given`` (or what a name in it is bound to, one hop) decodes a value
        the file holds (``b64decode(BLOB)``), not one read at run time."""
        flow = self._flow
        roots: list[ast.AST] = [given]
        for name in [n for n in ast.walk(given) if isinstance(n, ast.Name)][:8]:
            roots.extend(flow.bindings.assigned.get(name.id, ())[:2])
        return any(
            isinstance(n, ast.Call)
            and n.args
            and not DECODERS.isdisjoint(flow.resolve(n.func))
            and isinstance(flow.evaluate(n.args[0]), str | bytes)
            for root in roots
            for n in ast.walk(root)
        )

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
