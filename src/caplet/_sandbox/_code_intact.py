"""The standard library's code generators are as they were imported (attack30).

Part of :mod:`caplet._sandbox._code_origin` (split out by concern). The hook lets a
few of the standard library's frames compile because the text they make is built from
fixed strings and checked names: dataclasses' methods (field names identifiers),
``namedtuple`` (it checks its names), gettext's ``c2py`` (its own tokenizer and
parser) and ``ast.parse`` (a tree, no code). What builds that text is the module's
globals and the builtins, each the plugin's to rebind: ``dataclasses._field_assign``
set to a function returning a line of its data put that line into ``__init__``,
``gettext._parse`` returned the text ``c2py`` compiled, and ``ast.PyCF_ONLY_AST = 0``
made ``ast.parse`` hand back a code object, run by ``types.FunctionType(code, {})()``
with no ``exec`` named anywhere (each ran ``ctypes`` from a data file on ca7ba83c).

So the hook holds such a frame to what was recorded when this module was imported
(before any plugin code): the frame's globals must be the module's own namespace,
every name it had still bound to the same object, each of its functions (and its
classes' functions) still running the same code with the same defaults, each dict, list
and set it holds holding the same objects (``gettext._c2py_ops["||"]`` set to a
payload: no name rebound), and every builtin still the same object. A name added
later (a cache, ``__warningregistry__``) is no matter; a name rebound, or removed, is.
Every function here is *sealed* (that module's docstring).
"""

from __future__ import annotations

import ast
import builtins
import collections
import dataclasses
import gettext
import types
from collections.abc import Callable, Sized
from typing import Any, Final

__all__ = ["RECORDS", "intact"]

#: One function as recorded: the object, its code, its defaults, its keyword defaults.
_Function = tuple[object, object, object, tuple[tuple[str, object], ...]]
#: One container as recorded: the object, its kind (0 dict, 1 list, 2 set), its contents.
_Container = tuple[object, int, tuple[object, ...]]
#: One namespace as recorded: the dict itself, each name and value, each function, each
#: attribute of each class it defines, and the contents of each container it holds.
Record = tuple[
    dict[str, Any],
    tuple[tuple[str, object], ...],
    tuple[_Function, ...],
    tuple[tuple[type, str, object], ...],
    tuple[_Container, ...],
]
#: Containers a module changes as it works (gettext's caches of translations and of
#: the folders bound to a domain): what they hold makes no text.
_CACHES: Final = frozenset({"_translations", "_localedirs"})


def _functions_of(
    namespace: dict[str, Any],
) -> tuple[tuple[_Function, ...], tuple[tuple[type, str, object], ...]]:
    """Every plain function of ``namespace`` and of the classes it defines, and those
    classes' attributes."""
    found: list[_Function] = []
    attributes: list[tuple[type, str, object]] = []
    pending = list(namespace.values())
    seen: set[int] = set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, staticmethod | classmethod):
            pending.append(value.__func__)
        elif isinstance(value, types.FunctionType):
            keywords = tuple((value.__kwdefaults__ or {}).items())
            found.append((value, value.__code__, value.__defaults__, keywords))
        elif isinstance(value, type) and value.__module__ == namespace.get("__name__"):
            attributes.extend((value, name, item) for name, item in vars(value).items())
            pending.extend(vars(value).values())
    return tuple(found), tuple(attributes)


def _containers_of(namespace: dict[str, Any]) -> tuple[_Container, ...]:
    """The dicts, lists and sets ``namespace`` holds, directly or in tuples (gettext's
    ``_c2py_ops`` is a dict of the text each operator becomes, ``_binary_ops`` a tuple
    of sets: their contents are the text ``c2py`` makes)."""
    found: list[_Container] = []
    pending = [value for name, value in namespace.items() if name not in _CACHES]
    while pending:
        value = pending.pop()
        if value is namespace.get("__builtins__"):
            continue  # the builtins: recorded as a namespace of their own
        if isinstance(value, dict):
            found.append((value, 0, tuple(value.items())))
        elif isinstance(value, list):
            found.append((value, 1, tuple(value)))
        elif isinstance(value, set):
            found.append((value, 2, tuple(value)))
        elif isinstance(value, tuple):
            pending.extend(value)
    return tuple(found)


def _record(namespace: dict[str, Any], *, classes: bool = True) -> Record:
    functions, attributes = _functions_of(namespace)
    if not classes:
        attributes = ()
    return (
        namespace,
        tuple(namespace.items()),
        functions,
        attributes,
        _containers_of(namespace),
    )


def _builtins_used(functions: tuple[_Function, ...]) -> Record:
    """The builtins ``functions`` name (their code's and nested code's names): only
    those make their text, and comparing all of them cost each dataclass a millisecond."""
    names: set[str] = set()
    pending: list[object] = [code for _function, code, _defaults, _keywords in functions]
    while pending:
        code = pending.pop()
        if isinstance(code, types.CodeType):
            names.update(code.co_names)
            pending.extend(code.co_consts)
    space = vars(builtins)
    used = tuple((name, space[name]) for name in sorted(names) if name in space)
    return (space, used, (), (), ())


def _module(file: str, namespace: dict[str, Any], *, classes: bool) -> tuple[str, Record, Record]:
    record = _record(namespace, classes=classes)
    return (file, record, _builtins_used(record[2]))


#: The generators' modules, keyed by the file name the hook's key gives their frames,
#: each with the builtins its functions name (``collections/__init__.py`` holds
#: ``namedtuple``). The dicts are compared, never trusted: they sit a tuple deep, as the
#: hook's defaults hold nothing mutable at their first level.
RECORDS: Final = (
    _module("dataclasses.py", vars(dataclasses), classes=True),
    # namedtuple's text is its checked names and fixed strings; collections' classes
    # (OrderedDict, Counter, ...) make none of it. ast.parse reads two flags and
    # compile; its hundreds of node classes make no text either.
    _module("collections/__init__.py", vars(collections), classes=False),
    _module("gettext.py", vars(gettext), classes=True),
    _module("ast.py", vars(ast), classes=False),
)


def intact(
    file: str,
    namespace: object,
    builtin: object,
    _records: tuple[tuple[str, Record, Record], ...] = RECORDS,
    _getattr: Callable[[object, str, object], object] = getattr,
    _vars: Callable[[object], Any] = vars,
    _len: Callable[[Sized], int] = len,
    _enumerate: type[enumerate[object]] = enumerate,
) -> bool:
    """Whether a generator of ``file`` runs with ``namespace`` (its frame's globals) and
    ``builtin`` (its builtins) as recorded at import."""
    for known, record, used in _records:
        if known != file:
            continue
        spaces: tuple[tuple[Any, Record], ...] = ((namespace, record), (builtin, used))
        for space, expected in spaces:
            if space is not expected[0]:
                return False
            for name, value in expected[1]:
                if space.get(name) is not value or name not in space:
                    return False
            for function, code, defaults, keywords in expected[2]:
                if (
                    _getattr(function, "__code__", None) is not code
                    or _getattr(function, "__defaults__", None) is not defaults
                ):
                    return False
                now: Any = _getattr(function, "__kwdefaults__", None) or {}
                if _len(now) != _len(keywords):
                    return False
                for name, value in keywords:
                    if now.get(name) is not value or name not in now:
                        return False
            for kind, name, value in expected[3]:
                inside = _vars(kind)
                if inside.get(name) is not value or name not in inside:
                    return False
            for container, shape, contents in expected[4]:
                held: Any = container
                if _len(held) != _len(contents):
                    return False
                for at, item in _enumerate(contents):
                    if shape == 0:
                        pair: Any = item
                        if held.get(pair[0]) is not pair[1] or pair[0] not in held:
                            return False
                    elif shape == 1:
                        if held[at] is not item:
                            return False
                    elif item not in held:
                        return False
        return True
    return False
