"""Standard-library routes that run text or a callable the source does not hold (attack26).

exec, eval and compile are what a reviewer looks for; the standard library runs code by
other routes, each documented, each given text or a callable at run time:

* ``typing.get_type_hints`` (and pydantic, ``inspect.get_annotations(eval_str=True)``)
  compiles and evaluates every string annotation: a class whose ``__annotations__`` the
  plugin fills from its data file (``Box.__annotations__ = {"x": text}``), or a
  ``typing.ForwardRef(text)``, runs that text;
* ``logging.config.fileConfig`` evaluates each handler's ``class``, ``args`` and
  ``kwargs`` in the INI it reads, so the code is in the data file whatever the path's
  spelling (a literal ``"logging.ini"`` the plugin ships is exactly the attack);
  ``logging.config.listen`` applies what a peer sends the same way; ``dictConfig`` calls
  what a ``"()"`` or ``"class"`` key names, so a configuration read at run time chooses
  the callables it calls;
* a zip put on ``sys.path`` is imported from by ``zipimport``: code in an archive no
  reviewer opened (``zipimport.zipimporter`` itself is a rule of the table);
* ``copy.copy``, ``copy.deepcopy`` and ``pickle`` call whatever ``__reduce__`` or
  ``__reduce_ex__`` returns first: one that returns a callable held in an attribute or a
  variable (``(self.func, self.args)``) calls ``marshal.loads`` or ``code.replace`` from a
  frame of the standard library.

* jinja2 compiles a template to Python and runs it, and a template is Python's attribute
  and call syntax (``{{ cycler.__init__.__globals__.__builtins__.__import__("ctypes") }}``
  reaches any module): ``jinja2.Template(text)``, ``env.from_string(text)``,
  ``env.compile_expression(text)``, and an environment's loader over files
  (``FileSystemLoader``, ``PackageLoader``, ``FunctionLoader``, a ``DictLoader`` of a
  mapping not written out) run text no reviewer reads as code (attack27, lib29). A
  sandboxed environment counts the same: its policy is class attributes the plugin can
  set, and its escapes have a history (CVE-2024-56326, CVE-2025-27516).

In plugin mode each is dynamic code as ``exec(open(...).read())`` is (CPL-DYN-001; a
module or callable chosen at run time, CPL-DYN-002): danger, nothing can declare it. What
the source writes out stays clean: a class's literal annotations, ``ForwardRef("int")``,
a configuration dict with literal factories, ``(self.__class__, args)``. In package mode
these are only observed capabilities (none is reported: single-API rules hit benign
packages); a decoded or downloaded annotation is exec's argument there
(:mod:`caplet._scan._sink_runners`), a ``fileConfig`` INI the package ships is read for
the Python it evaluates (:mod:`caplet._scan._data_code`).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Iterator
from typing import Final

from caplet._scan._code_runners import ANNOTATION_ATTRIBUTES as _ANNOTATION_ATTRIBUTES
from caplet._scan._code_runners import FORWARD_REFS as _FORWARD_REFS
from caplet._scan._code_runners import SOURCE_RUNNERS as _SOURCE_RUNNERS
from caplet._scan._path_routes import PATH_ADDERS, path_routes
from caplet._scan._route_facts import Facts
from caplet._scan._route_facts import written as _written

__all__ = [
    "ROUTE_CALLS",
    "ROUTE_METHODS",
    "TEMPLATE_CLASSES",
    "TEMPLATE_METHODS",
    "annotation_stores",
    "call_routes",
    "imports_jinja2",
    "reduce_routes",
]


#: ``fileConfig`` evaluates its file's Python; ``listen`` applies a peer's configuration.
_EVALUATING_LOADERS: Final = frozenset({"logging.config.fileConfig", "logging.config.listen"})
#: Loaders that call what a configuration's factory keys name.
_DICT_LOADERS: Final = frozenset({"logging.config.dictConfig", "logging.config.DictConfigurator"})
#: Keys whose value names the callable a dict loader calls.
_FACTORY_KEYS: Final = frozenset({"()", "class"})
#: Keys whose value is a section of factories (a dict or a list of them).
_SECTION_KEYS: Final = frozenset({"formatters", "filters", "handlers", "loggers", "root"})
#: A mapping's methods that store into it (``Box.__annotations__.update(...)``).
_STORING_METHODS: Final = frozenset({"update", "setdefault", "__setitem__"})
#: The standard library's runners of a statement given as text (timeit, the profilers'
#: and the debugger's ``run``, ``PyRun_SimpleString``): their text arguments, positional
#: and by keyword (timeit runs its ``setup`` too).
_RUNNERS: Final = frozenset(_SOURCE_RUNNERS)
_TIMEIT: Final = frozenset({"timeit.timeit", "timeit.repeat", "timeit.Timer"})
#: jinja2's template classes (their first argument, ``source``, is compiled to Python).
TEMPLATE_CLASSES: Final = frozenset(
    {"jinja2.Template", "jinja2.environment.Template", "jinja2.nativetypes.NativeTemplate"}
)
#: An environment's methods that compile the text they are given (``compile`` only on a
#: receiver known to be jinja2's: ``re.compile`` is no template).
TEMPLATE_METHODS: Final = frozenset({"from_string", "compile_expression"})
#: jinja2's loaders that hand the environment text read from files or a function.
_TEMPLATE_LOADERS: Final = frozenset(
    {
        f"jinja2{module}.{name}"
        for module in ("", ".loaders")
        for name in ("FileSystemLoader", "PackageLoader", "FunctionLoader", "DictLoader")
    }
)
#: The calls :func:`call_routes` may report, by what they resolve to ...
ROUTE_CALLS: Final = (
    _FORWARD_REFS
    | _EVALUATING_LOADERS
    | _DICT_LOADERS
    | _RUNNERS
    | TEMPLATE_CLASSES
    | _TEMPLATE_LOADERS
    | {"builtins.setattr", "builtins.type", "copyreg.pickle"}
)
#: ... or by the method called (on ``sys.path``, on an ``__annotations__``, on a jinja2
#: environment).
ROUTE_METHODS: Final = PATH_ADDERS | _STORING_METHODS | TEMPLATE_METHODS | {"compile"}
#: The builtins' names (``int``, ``getattr``): types and callables the source names.
_BUILTIN_NAMES: Final = frozenset(dir(builtins))
#: How deep a configuration or an annotation's value is followed through names.
_MAX_DEPTH = 6

#: The methods whose answer copy and pickle call, and what a finding says of them.
_REDUCERS: Final = frozenset({"__reduce__", "__reduce_ex__", "reducer_override"})
_CALLED = (
    "a callable chosen at run time that copy.copy, copy.deepcopy and pickle call (return "
    "the class itself, self.__class__, with its arguments)"
)
_ANNOTATIONS_HINT = "write the annotations in the class body"
_TEMPLATE_HINT = (
    "jinja2 compiles a template to Python, and a template reaches any module through its "
    "globals; fill text with string.Template or str.format (caplet's worker refuses "
    "jinja2's compile)"
)
_CONFIG_HINT = "write the logging configuration as a dict literal in the plugin's source"


def call_routes(node: ast.Call, funcs: tuple[str, ...], facts: Facts) -> Iterator[tuple[str, str]]:
    """The routes a call takes, as (rule id, what the finding says)."""
    if not _FORWARD_REFS.isdisjoint(funcs):
        given = _first(node, "arg")
        if given is not None and not _written(given, facts):
            yield (
                "CPL-DYN-001",
                (
                    f"{_one(funcs, _FORWARD_REFS)}(...) of text not written in the source "
                    "(typing evaluates a forward reference's text as Python; spell the type out)"
                ),
            )
    runner = _one(funcs, _RUNNERS)
    if runner and any(not _written(text, facts) for text in _runner_texts(node, runner)):
        # scan27, left open: exec's own rule, under the standard library's other names.
        yield (
            "CPL-DYN-001",
            (
                f"{runner}(...) of text not written in the source (it runs the text as "
                "Python, as exec does; write the statement in the source)"
            ),
        )
    yield from _template_routes(node, funcs, facts)
    loader = _one(funcs, _EVALUATING_LOADERS)
    if loader and not _stream_of_literal(_first(node, "fname"), facts):
        yield (
            "CPL-DYN-001",
            (
                f"{loader}(...) (it evaluates the class, args and kwargs of the configuration it "
                f"reads as Python, code in a data file no reviewer reads; {_CONFIG_HINT})"
            ),
        )
    loader = _one(funcs, _DICT_LOADERS)
    given = _first(node, "config")
    if loader and given is not None and not _written_config(given, facts, 0):
        yield (
            "CPL-DYN-002",
            (
                f"{loader}(...) of a configuration not written in the source (its '()' and "
                f"'class' keys name the callables it imports and calls; {_CONFIG_HINT})"
            ),
        )
    if "builtins.setattr" in funcs and len(node.args) == 3:
        name = facts.evaluate(node.args[1])
        if name in _ANNOTATION_ATTRIBUTES and not _written_annotations(node.args[2], facts):
            yield "CPL-DYN-001", _stored(str(name))
    if "builtins.type" in funcs and len(node.args) == 3 and isinstance(node.args[2], ast.Dict):
        table = node.args[2]
        for key, value in zip(table.keys, table.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value in _ANNOTATION_ATTRIBUTES
                and not _written_annotations(value, facts)
            ):
                yield "CPL-DYN-001", _stored(str(key.value))
    if "copyreg.pickle" in funcs:
        for api in _registered_reducer(node, facts):
            yield "CPL-DYN-001", api
    func = node.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _STORING_METHODS
        and isinstance(func.value, ast.Attribute)
        and func.value.attr in _ANNOTATION_ATTRIBUTES
        and not _stored_written(node, func.attr, facts)
    ):
        yield "CPL-DYN-001", _stored(func.value.attr)
    if isinstance(func, ast.Attribute) and func.attr in PATH_ADDERS:
        yield from path_routes(node, func, facts)


def _template_routes(
    node: ast.Call, funcs: tuple[str, ...], facts: Facts
) -> Iterator[tuple[str, str]]:
    """jinja2 over text not written in the source (attack27, lib29)."""
    template = _one(funcs, TEMPLATE_CLASSES)
    given = _first(node, "source")
    if template and given is not None and not _written(given, facts):
        yield "CPL-DYN-001", f"{template}(...) of text not written in the source ({_TEMPLATE_HINT})"
    loader = _one(funcs, _TEMPLATE_LOADERS)
    if loader and not (
        loader.endswith(".DictLoader")
        and (mapping := _first(node, "mapping")) is not None
        and _written_templates(mapping, facts)
    ):
        yield (
            "CPL-DYN-001",
            f"{loader}(...) (each template it loads is text no reviewer reads as code; "
            f"{_TEMPLATE_HINT})",
        )
    func = node.func
    if (
        isinstance(func, ast.Attribute)
        and (
            (func.attr in TEMPLATE_METHODS and imports_jinja2(facts))
            or (func.attr == "compile" and _jinja2_made(func.value, facts))
        )
        and (text := _first(node, "source")) is not None
        and not _written(text, facts)
    ):
        yield (
            "CPL-DYN-001",
            f"{ast.unparse(func)[:60]}(...) of text not written in the source ({_TEMPLATE_HINT})",
        )


def imports_jinja2(facts: Facts) -> bool:
    """Whether the file imports jinja2 (an environment's methods are then its)."""
    return any(
        name == "jinja2" or name.startswith("jinja2.")
        for names in facts.bindings.imports.values()
        for name in names
    )


def _jinja2_made(node: ast.expr, facts: Facts) -> bool:
    """Whether ``node`` is a jinja2 object made in place or a name bound only to one."""
    values: Iterable[ast.expr] = (node,)
    if isinstance(node, ast.Name):
        values = facts.bindings.assigned.get(node.id, ())
    return any(
        isinstance(value, ast.Call)
        and any(f.startswith("jinja2.") for f in facts.resolve(value.func))
        for value in values
    )


def _written_templates(node: ast.expr, facts: Facts) -> bool:
    """A ``DictLoader``'s mapping written in the source: a dict display of literal text."""
    if isinstance(node, ast.Name):
        bound = facts.bindings.assigned.get(node.id, ())
        return bool(bound) and all(_written_templates(v, facts) for v in bound)
    return isinstance(node, ast.Dict) and all(
        k is not None and _written(v, facts) for k, v in zip(node.keys, node.values, strict=True)
    )


def annotation_stores(target: ast.expr, value: ast.expr, facts: Facts) -> str | None:
    """What a finding says of ``X.__annotations__ = v`` or ``X.__annotations__[k] = v`` when
    ``v`` is not written in the source; ``None`` otherwise."""
    attribute = target.value if isinstance(target, ast.Subscript) else target
    if not isinstance(attribute, ast.Attribute) or attribute.attr not in _ANNOTATION_ATTRIBUTES:
        return None
    written = (
        _annotation(value, facts, 0)
        if isinstance(target, ast.Subscript)
        else _written_annotations(value, facts)
    )
    return None if written else _stored(attribute.attr)


def reduce_routes(owner: ast.ClassDef, facts: Facts) -> Iterator[tuple[ast.expr, str]]:
    """The callables a ``__reduce__``/``__reduce_ex__`` of the class (a method, or a lambda
    its body binds; a pickler's ``reducer_override``) returns that the source does not name
    (an attribute of the instance, a parameter, a variable): copy and pickle call them;
    with what a finding says."""
    for item in owner.body:
        reducer: ast.FunctionDef | ast.Lambda
        if isinstance(item, ast.FunctionDef) and item.name in _REDUCERS:
            reducer, name = item, item.name
        elif (
            isinstance(item, ast.Assign)
            and len(item.targets) == 1
            and isinstance(item.targets[0], ast.Name)
            and item.targets[0].id in _REDUCERS
            and isinstance(item.value, ast.Lambda)
        ):
            reducer, name = item.value, item.targets[0].id
        else:
            continue
        for first in _returned_callables(reducer, owner.name, facts):
            yield first, f"{owner.name}.{name} returning {ast.unparse(first)[:60]}, {_CALLED}"


def _returned_callables(
    reducer: ast.FunctionDef | ast.Lambda, owner: str, facts: Facts
) -> Iterator[ast.expr]:
    """The first items of the tuples ``reducer`` returns that are not callables the source
    names (:func:`_named_callable`)."""
    if isinstance(reducer, ast.Lambda):
        answers: list[ast.expr] = [reducer.body]
    else:
        answers = [
            n.value for n in ast.walk(reducer) if isinstance(n, ast.Return) and n.value is not None
        ]
    for answer in answers:
        returned = answer
        if isinstance(answer, ast.Name):
            bound = facts.bindings.assigned.get(answer.id, ())
            returned = bound[0] if len(bound) == 1 else answer
        if isinstance(returned, ast.Tuple) and len(returned.elts) >= 2:
            first = returned.elts[0]
            if not _named_callable(first, owner, facts):
                yield first


def _registered_reducer(node: ast.Call, facts: Facts) -> Iterator[str]:
    """``copyreg.pickle(Made, reducer)``: the reducer copy and pickle ask for a ``Made``,
    a lambda or a function of the file, checked as a ``__reduce__`` is."""
    if len(node.args) < 2:
        return
    owner = node.args[0].id if isinstance(node.args[0], ast.Name) else ""
    given = node.args[1]
    reducers: list[ast.FunctionDef | ast.Lambda] = []
    if isinstance(given, ast.Lambda):
        reducers.append(given)
    elif isinstance(given, ast.Name):
        reducers += [f for f in facts.bindings.named(given.id) if isinstance(f, ast.FunctionDef)]
    for reducer in reducers:
        for first in _returned_callables(reducer, owner, facts):
            yield f"copyreg.pickle(...)'s reducer returning {ast.unparse(first)[:60]}, {_CALLED}"


def _stored_written(node: ast.Call, method: str, facts: Facts) -> bool:
    """Whether what ``X.__annotations__.update(...)`` (or ``setdefault``/``__setitem__``)
    stores is written in the source."""
    values = [k.value for k in node.keywords]
    if method == "update":
        return all(_written_annotations(a, facts) for a in node.args) and all(
            _annotation(v, facts, 0) for v in values
        )
    return all(_annotation(v, facts, 0) for v in [*node.args[1:], *values])


def _stored(attribute: str) -> str:
    return (
        f"{attribute} filled from a value not written in the source (typing.get_type_hints "
        f"and pydantic evaluate string annotations as Python; {_ANNOTATIONS_HINT})"
    )


def _runner_texts(node: ast.Call, runner: str) -> list[ast.expr]:
    """The arguments a source runner runs as Python: its first (timeit: and second)
    positional, and the keywords that name them."""
    keywords = {"stmt", "setup"} if runner in _TIMEIT else {_SOURCE_RUNNERS[runner]} - {""}
    positional = node.args[:2] if runner in _TIMEIT else node.args[:1]
    return [
        *(a for a in positional if not isinstance(a, ast.Starred)),
        *(k.value for k in node.keywords if k.arg in keywords),
    ]


def _one(funcs: tuple[str, ...], among: frozenset[str]) -> str:
    return next((f for f in funcs if f in among), "")


def _first(node: ast.Call, keyword: str) -> ast.expr | None:
    if node.args:
        return node.args[0]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def _stream_of_literal(node: ast.expr | None, facts: Facts) -> bool:
    """``fileConfig(io.StringIO("..."))`` of text written in the source: the reviewer reads
    it (a path, even a literal one, names a file no one reads as code)."""
    return (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and "io.StringIO" in facts.resolve(node.func)
        and isinstance(facts.evaluate(node.args[0]), str)
    )


def _written_annotations(node: ast.expr, facts: Facts) -> bool:
    """Whether a whole annotations mapping is written in the source: a dict display whose
    values are annotations written out (:func:`_annotation`)."""
    if isinstance(node, ast.Dict):
        return all(
            _annotation(v, facts, 0) if k is not None else _annotations_read(v, facts)
            for k, v in zip(node.keys, node.values, strict=True)
        )
    return _annotations_read(node, facts) or _written(node, facts)


def _annotations_read(node: ast.expr, facts: Facts) -> bool:
    """``Base.__annotations__`` or ``getattr(f, "__annotations__", {})`` (a decorator's
    wrapper given its function's): another object's annotations, written where it is."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__annotations__"
    return (
        isinstance(node, ast.Call)
        and len(node.args) >= 2
        and "builtins.getattr" in facts.resolve(node.func)
        and facts.evaluate(node.args[1]) == "__annotations__"
    )


def _annotation(node: ast.expr, facts: Facts, depth: int) -> bool:
    """Whether one annotation is written in the source: a literal (its text is the
    source's), a type named by an import, a class or function of the file or a builtin, a
    subscript or union of those."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return _annotation(node.value, facts, depth + 1) and all(
            _annotation(p, facts, depth + 1) for p in parts
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _annotation(node.left, facts, depth + 1) and _annotation(
            node.right, facts, depth + 1
        )
    if isinstance(node, ast.List | ast.Tuple):
        return all(_annotation(e, facts, depth + 1) for e in node.elts)
    return _type_named(node, facts, depth) or _written(node, facts)


def _type_named(node: ast.expr, facts: Facts, depth: int) -> bool:
    """A name or dotted name the source binds to a type: an import, a class or function
    of the file, a builtin the file does not rebind, or a name bound only to such (never
    a parameter: its caller chooses what it holds)."""
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    b = facts.bindings
    name = root.id
    if name in facts.parameter_names() or name in b.iterated:
        return False
    if name in b.imports or name in b.classes or b.named(name):
        return True
    bound = b.assigned.get(name, ())
    if bound:
        return root is node and all(_annotation(v, facts, depth + 1) for v in bound)
    return name in _BUILTIN_NAMES and name not in b.defined


def _written_config(node: ast.expr, facts: Facts, depth: int) -> bool:
    """Whether a logging configuration is written in the source: a dict display (or a name
    bound only to ones) whose sections are dict displays and whose factory keys name a
    callable in a literal or a reference; other values (a level, a format, a stream) are
    data dictConfig only passes on."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(node, ast.Name):
        bound = facts.bindings.assigned.get(node.id, ())
        return bool(bound) and all(_written_config(v, facts, depth + 1) for v in bound)
    if isinstance(node, ast.List | ast.Tuple):
        return all(_written_config(e, facts, depth + 1) for e in node.elts)
    if not isinstance(node, ast.Dict):
        return isinstance(node, ast.Constant) or facts.closed(node)
    for key, value in zip(node.keys, node.values, strict=True):
        if not isinstance(key, ast.Constant) or key.value not in _FACTORY_KEYS:
            # a spread or a computed key holds a section too; a section, or a handler's
            # or logger's table, its factories; a level, a format, a stream are data
            # dictConfig only passes on
            nested = not isinstance(key, ast.Constant) or key.value in _SECTION_KEYS
            if (nested or isinstance(value, ast.Dict | ast.List | ast.Tuple)) and (
                not _written_config(value, facts, depth + 1)
            ):
                return False
        elif not (_written(value, facts) or _type_named(value, facts, depth)):
            return False
    return True


def _named_callable(node: ast.expr, owner: str, facts: Facts) -> bool:
    """Whether what a ``__reduce__`` returns first is a callable the source names: the
    class itself (``self.__class__``, ``type(self)``, its name), a method of the file, an
    import or a function or class of the file, a builtin."""
    if isinstance(node, ast.Attribute):
        if node.attr == "__class__" or (
            isinstance(node.value, ast.Attribute) and node.value.attr == "__class__"
        ):
            return True  # the class, or its method (self.__class__._unpickle)
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
            # self.rebuild: a method of the class, not a value the instance holds
            return any(
                isinstance(s, ast.FunctionDef) and s.name == node.attr
                for c in facts.bindings.classes.get(owner, ())
                for s in c.body
            )
        return _type_named(node, facts, 0)
    if isinstance(node, ast.Call):
        funcs = facts.resolve(node.func)
        if "functools.partial" in funcs and node.args:
            return _named_callable(node.args[0], owner, facts)  # partial(self.__class__, ...)
        return "builtins.type" in funcs and len(node.args) == 1
    if isinstance(node, ast.Name):
        if node.id in {"cls", owner}:
            return True
        return _type_named(node, facts, 0) and not facts.bindings.assigned.get(node.id)
    return False
