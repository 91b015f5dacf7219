"""Standard-library functions that run a string as Python source under another name.

exec, eval and compile are the data flow's code runners (``_sources.EXECUTORS``);
the standard library has more, each a documented way to run a statement given as
text: timeit's ``stmt``, the profilers' and the debugger's ``run``, the code
module's interpreters (``runsource``, ``runcode``, ``push``) and the C API's
``PyRun_SimpleString`` reached through ``ctypes.pythonapi``. blind16's samples
ran a decoded stage through each of them (b16-ds-timeit-stmt, -cprofile-run,
-code-runsource, -pyrun-simplestring); the sinks treat their source argument as
exec's first argument, so the same rules apply (decoded or downloaded data run,
Python source in a string that itself reaches a process or the network).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Final

__all__ = [
    "ANNOTATION_READERS",
    "CODE_RUNNER_TOKENS",
    "DOCSTRING_RUNNERS",
    "FORWARD_REFS",
    "INTERPRETER_METHODS",
    "PARSER_METHODS",
    "SOURCE_RUNNERS",
    "annotation_texts",
    "docstring_stages",
    "doctest_source",
    "runner_source",
    "stored_annotations",
]

#: Functions that run their argument as Python source: the keyword that names it when
#: it is not the first positional argument ("" when it has no keyword).
SOURCE_RUNNERS: Final[Mapping[str, str]] = {
    "timeit.timeit": "stmt",
    "timeit.repeat": "stmt",
    "timeit.Timer": "stmt",
    "cProfile.run": "statement",
    "cProfile.runctx": "statement",
    "profile.run": "statement",
    "profile.runctx": "statement",
    "pdb.run": "statement",
    "pdb.runeval": "expression",
    "pdb.runctx": "statement",
    "ctypes.pythonapi.PyRun_SimpleString": "",
    "ctypes.pythonapi.PyRun_SimpleStringFlags": "",
    "ctypes.pythonapi.PyRun_String": "",
}
#: The classes whose instances run a string they are given, and the methods that do: the
#: code module's interpreters; a tracer's, a debugger's and a profiler's ``run``/``runctx``
#: (``trace.Trace(count=0, trace=0).runctx(src, {}, {})``: blind17, b17-ds-trace-runctx).
_TRACERS: Final = frozenset({"run", "runctx"})
_DEBUGGERS: Final = frozenset({"run", "runctx", "runeval"})
_INTERPRETERS: Final[Mapping[str, frozenset[str]]] = {
    "code.InteractiveInterpreter": frozenset({"runsource", "runcode", "push"}),
    "code.InteractiveConsole": frozenset({"runsource", "runcode", "push"}),
    "trace.Trace": _TRACERS,
    "cProfile.Profile": _TRACERS,
    "profile.Profile": _TRACERS,
    "bdb.Bdb": _DEBUGGERS,
    "pdb.Pdb": _DEBUGGERS,
}
#: Their methods that compile and run the source they are given.
INTERPRETER_METHODS: Final = frozenset().union(*_INTERPRETERS.values())


#: doctest's runners of the ``>>>`` examples in docstrings: of the object they are given
#: (``run_docstring_examples(f, ...)``), or of every object of a module (``testmod``,
#: ``DocTestFinder``, ``DocTestSuite``). blind16's b16-ds-doctest-docstring set a
#: function's ``__doc__`` to a decoded stage's lines behind ``>>> `` and ran it (recall17).
DOCSTRING_RUNNERS: Final = frozenset(
    {
        "doctest.run_docstring_examples",
        "doctest.testmod",
        "doctest.DocTestFinder",
        "doctest.DocTestSuite",
    }
)
#: doctest's parser, and its methods that read examples out of the text they are given.
_PARSERS: Final = frozenset({"doctest.DocTestParser"})
PARSER_METHODS: Final = frozenset({"get_examples", "get_doctest", "parse"})
#: Docstring stores read for one runner, at most.
_MAX_STAGES = 16


def docstring_stages(
    node: ast.Call,
    funcs: tuple[str, ...],
    resolve: Callable[[ast.expr], tuple[str, ...]],
    assigned: Mapping[str, Sequence[ast.expr]],
    stores: Sequence[ast.AST],
) -> list[ast.expr]:
    """What a doctest runner runs as examples: the values this file stores into a
    ``__doc__`` (``f.__doc__ = v``, ``setattr(f, "__doc__", v)``; of the object given to
    ``run_docstring_examples``, of any object for a module's runners), or the text handed
    to a parser's method (``DocTestParser().get_examples(text)``). A docstring written as
    one is reviewed code, not a stage: only the ones assigned are read."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in PARSER_METHODS and node.args:
        receiver = func.value
        made = assigned.get(receiver.id, ()) if isinstance(receiver, ast.Name) else (receiver,)
        if any(isinstance(m, ast.Call) and _PARSERS & set(resolve(m.func)) for m in made):
            return [node.args[0]]
        return []
    if DOCSTRING_RUNNERS.isdisjoint(funcs):
        return []
    given = node.args[0] if node.args else None
    owner = (
        given.id
        if "doctest.run_docstring_examples" in funcs and isinstance(given, ast.Name)
        else None
    )
    found: list[ast.expr] = []
    for store in stores:
        if isinstance(store, ast.Assign):
            found += [
                store.value
                for t in store.targets
                if isinstance(t, ast.Attribute)
                and t.attr == "__doc__"
                and (owner is None or (isinstance(t.value, ast.Name) and t.value.id == owner))
            ]
        elif (
            isinstance(store, ast.Call)
            and len(store.args) == 3
            and "builtins.setattr" in resolve(store.func)
            and isinstance(store.args[1], ast.Constant)
            and store.args[1].value == "__doc__"
            and (
                owner is None or (isinstance(store.args[0], ast.Name) and store.args[0].id == owner)
            )
        ):
            found.append(store.args[2])
    return found[:_MAX_STAGES]


def doctest_source(text: str) -> str | None:
    """The Python source of the ``>>>`` examples in ``text``, as doctest reads them (its
    parser only splits text; nothing runs). doctest is imported here, where a file
    runs a docstring: it imports pdb, unittest and difflib, a scan's start-up need not."""
    import doctest

    try:
        examples = doctest.DocTestParser().get_examples(text)
    except ValueError:  # inconsistent indentation: doctest refuses it too
        return None
    return "".join(e.source for e in examples) or None


#: Functions that evaluate a function's or a class's string annotations as expressions
#: (``def f(x: "__import__('os').system(...)")``: blind16, b16-cn-type-hints-eval).
ANNOTATION_READERS: Final = frozenset(
    {
        "typing.get_type_hints",
        "typing_extensions.get_type_hints",
        "inspect.get_annotations",
        "annotationlib.get_annotations",
    }
)
#: Annotations read from one function or class, at most.
_MAX_ANNOTATIONS = 64
#: Forward references: their text is evaluated as an annotation's (by ``get_type_hints``,
#: pydantic, or their own ``_evaluate``), attack26.
FORWARD_REFS: Final = frozenset(
    {"typing.ForwardRef", "typing_extensions.ForwardRef", "annotationlib.ForwardRef"}
)
#: The attributes through which a class or function keeps its annotations.
ANNOTATION_ATTRIBUTES: Final = frozenset({"__annotations__", "__annotate__"})


def annotation_texts(
    target: ast.expr,
    functions: Sequence[ast.FunctionDef | ast.AsyncFunctionDef],
    classes: Mapping[str, Sequence[ast.ClassDef]],
) -> list[str]:
    """The string annotations of the function or class ``target`` names (defined in this
    file): what an annotation reader evaluates."""
    if not isinstance(target, ast.Name):
        return []
    owners: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = []
    owners += [f for f in functions if f.name == target.id][:4]
    owners += list(classes.get(target.id, ()))[:4]
    texts: list[str] = []
    for owner in owners:
        if isinstance(owner, ast.ClassDef):
            annotations = [s.annotation for s in owner.body if isinstance(s, ast.AnnAssign)]
        elif isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = owner.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            annotations = [a.annotation for a in every if a.annotation is not None]
            annotations += [owner.returns] if owner.returns is not None else []
        else:
            continue
        texts += [
            a.value for a in annotations if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
    return texts[:_MAX_ANNOTATIONS]


def stored_annotations(target: ast.expr, assigns: Sequence[ast.AST]) -> list[ast.expr]:
    """What this file stores into the annotations of the object ``target`` names
    (``Box.__annotations__ = {"x": v}``, ``Box.__annotations__["x"] = v``): the values an
    annotation reader given ``Box`` evaluates when they are text (attack26)."""
    if not isinstance(target, ast.Name):
        return []
    found: list[ast.expr] = []
    for assign in assigns:
        if not isinstance(assign, ast.Assign):
            continue
        for stored in assign.targets:
            whole = not isinstance(stored, ast.Subscript)
            attribute = stored.value if isinstance(stored, ast.Subscript) else stored
            if (
                isinstance(attribute, ast.Attribute)
                and attribute.attr in ANNOTATION_ATTRIBUTES
                and isinstance(attribute.value, ast.Name)
                and attribute.value.id == target.id
            ):
                value = assign.value
                if whole and isinstance(value, ast.Dict):
                    found += value.values
                else:
                    found.append(value)
    return found[:_MAX_ANNOTATIONS]


def _argument(node: ast.Call, keyword: str) -> ast.expr | None:
    if node.args:
        return node.args[0]
    return next((k.value for k in node.keywords if keyword and k.arg == keyword), None)


def runner_source(
    node: ast.Call,
    funcs: tuple[str, ...],
    resolve: Callable[[ast.expr], tuple[str, ...]],
    assigned: Mapping[str, Sequence[ast.expr]],
) -> tuple[str, ast.expr] | None:
    """(the runner, the source it runs) when ``node`` runs its argument as Python:
    a function of :data:`SOURCE_RUNNERS`, or an interpreter's method called on one
    constructed in place or bound to a name (``ii = InteractiveConsole(); ii.push(s)``)."""
    api = next((f for f in funcs if f in SOURCE_RUNNERS), None)
    if api is not None:
        arg = _argument(node, SOURCE_RUNNERS[api])
        return None if arg is None else (api, arg)
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in INTERPRETER_METHODS and node.args):
        return None
    receiver = func.value
    made: Sequence[ast.expr] = (receiver,)
    if isinstance(receiver, ast.Name):
        made = assigned.get(receiver.id, ())
    for value in made:
        if isinstance(value, ast.Call):
            owner = next(
                (f for f in resolve(value.func) if func.attr in _INTERPRETERS.get(f, ())), None
            )
            if owner is not None:
                return f"{owner}.{func.attr}", node.args[0]
    return None


#: The runners as code spells them, for the prefilter's sinks (paired there with a
#: decoder or a network read, as exec is): a runner's call, an interpreter's method.
CODE_RUNNER_TOKENS: Final = (
    r"\btimeit\s*\.\s*(?:timeit|repeat|Timer)\s*\(|\b(?:c?[Pp]rofile|pdb)\s*\.\s*run(?:ctx|eval)?\s*\(|"
    r"\bPyRun_\w+\s*\(|\bInteractive(?:Interpreter|Console)\b|\.\s*(?:runsource|runcode)\s*\(|"
    r"\b(?:trace\s*\.\s*Trace|[bp]db\s*\.\s*[BP]db|c?[Pp]rofile\s*\.\s*Profile)\s*\(|"
    r"\.\s*run(?:ctx|eval)\s*\(|"
    r"\bget_(?:type_hints|annotations)\b|\bForwardRef\s*\(|"
    r"\b(?:run_docstring_examples|testmod|DocTestFinder|DocTestSuite|DocTestParser)\b|"
    # a jinja2 template is Python (lib29): a decoded or downloaded one is exec's stage
    r"\b(?:Native)?Template\s*\(|\.\s*(?:from_string|compile_expression)\s*\("
)
