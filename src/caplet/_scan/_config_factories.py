"""Callables a configuration names, called by the loader that reads it.

``logging.config.dictConfig`` imports and calls whatever a ``"()"`` key names (a
handler's, a formatter's or a filter's factory), and a handler's ``"class"``, with the
dict's other keys as its keywords: ``{"()": "subprocess.Popen", "args": "curl ... | sh",
"shell": True}`` runs a shell. blind16's b16-cn-logging-dictconfig-factory glued that name
from pieces and was clean (recall17). Each factory of a dict a loader is given (written
in place or bound to a name, nested sections too) is read here as the call it makes: a
call of the API it names with those keywords, so the sinks check it as they check any
call (a process's command, the network), and a name worth hiding found only in a string
is a lookup by name (CPL-THR-003, as ``pkgutil.resolve_name`` is). A formatter's or a
handler's factory of the package's own (``"()": "myapp.log.JsonFormatter"``) is a call of
nothing the rules watch.

recall18: the whole configuration may come from elsewhere: downloaded
(``dictConfig(requests.get(u).json())``), decoded from a literal, or an INI file the package
writes and hands to ``fileConfig``, which evaluates each handler's ``class`` and ``args`` as
Python. The sinks treat such a loader as exec of what it is given (:data:`DATA_LOADERS`,
:func:`file_config_source`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Final

__all__ = [
    "CONFIG_LOADERS",
    "DATA_LOADERS",
    "FACTORY_KEYS",
    "FACTORY_TOKENS",
    "FILE_LOADERS",
    "LISTENERS",
    "configured_calls",
    "dict_config_source",
    "file_config_source",
    "unverified",
]

#: Loaders that call what a dict's factory keys name.
CONFIG_LOADERS: Final = frozenset({"logging.config.dictConfig", "logging.config.DictConfigurator"})
#: recall18: loaders given a whole configuration at run time (a dict, or a file
#: ``fileConfig`` reads): one downloaded or decoded names the callables they call, and
#: ``fileConfig`` evaluates each handler's ``class`` and ``args`` as Python.
DATA_LOADERS: Final = CONFIG_LOADERS | {"logging.config.fileConfig"}
#: Those of them given a file's path.
FILE_LOADERS: Final = frozenset({"logging.config.fileConfig"})
#: mend19: a socket server that applies any configuration a peer sends (an INI, whose
#: ``class``/``args`` fileConfig evaluates, or JSON, whose factories dictConfig calls):
#: without a ``verify`` callable, a listener that runs what it is sent.
LISTENERS: Final = frozenset({"logging.config.listen"})
#: The keys of a fileConfig handler section whose values it evaluates.
_EVALUATED_KEYS: Final = ("class", "args", "kwargs")
#: The keys whose value names a callable the loader calls.
FACTORY_KEYS: Final = frozenset({"()", "class"})
#: Keys dictConfig takes for itself, never handed to the factory.
_OWN_KEYS: Final = frozenset({"()", "class", ".", "level", "formatter", "filters"})
#: The loaders as code spells them, and a factory key as a dict spells it (a pair of the
#: prefilter's).
FACTORY_TOKENS: Final = (r"\b(?:dictConfig|DictConfigurator)\b", r"""['"](?:\(\)|class)['"]\s*:""")
#: Dicts read under one configuration, at most.
_MAX_DICTS = 256


def configured_calls(
    node: ast.Call,
    name_value: Callable[[ast.AST], str | None],
    resolve: Callable[[ast.expr], tuple[str, ...]],
    assigned: Mapping[str, Sequence[ast.expr]],
) -> list[tuple[ast.Call, str, str]]:
    """The calls the configuration given to the loader ``node`` makes: (a call of the
    factory with the dict's other keys as keywords, the name it is called by, how the
    name was given: a string or a reference)."""
    if not node.args:
        return []
    given = node.args[0]
    roots: list[ast.expr] = [given]
    if isinstance(given, ast.Name):
        roots = list(assigned.get(given.id, ()))[:4]
    stack = [r for r in roots if isinstance(r, ast.Dict)]
    found: list[tuple[ast.Call, str, str]] = []
    seen = 0
    while stack and seen < _MAX_DICTS:
        table = stack.pop()
        seen += 1
        factory: ast.expr | None = None
        keywords: list[ast.keyword] = []
        for key, value in zip(table.keys, table.values, strict=True):
            text = key.value if isinstance(key, ast.Constant) else None
            if isinstance(value, ast.Dict):
                stack.append(value)
            elif isinstance(value, ast.Name):
                stack += [v for v in assigned.get(value.id, ())[:2] if isinstance(v, ast.Dict)]
            if text in FACTORY_KEYS:
                factory = value
            elif isinstance(text, str) and text.isidentifier() and text not in _OWN_KEYS:
                keywords.append(ast.keyword(arg=text, value=value))
        if factory is None:
            continue
        named = name_value(factory)
        if named is not None:
            api, how = named.removeprefix("ext://").replace(":", "."), "string"
        else:
            api, how = next(iter(resolve(factory)), ""), "reference"
        if api:
            call = ast.Call(func=factory, args=[], keywords=keywords)
            found.append((ast.copy_location(call, table), api, how))
    return found


def file_config_source(text: str) -> str | None:
    """The Python a ``fileConfig`` file makes the loader evaluate (each ``class``, ``args``
    and ``kwargs`` value, one line each), or ``None`` for text with none: an INI file
    written from a string and then handed to ``fileConfig`` (recall18)."""
    found: list[str] = []
    for line in text.splitlines()[:512]:
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() in _EVALUATED_KEYS and value.strip():
            found.append(value.strip())
    return "\n".join(found) if found else None


def dict_config_source(document: object) -> str | None:
    """The calls a ``dictConfig`` configuration read from a data file makes, as Python
    (``import os`` then ``os.system(command='...')`` for ``{"()": "os.system", "command":
    "..."}``), or ``None`` for a document with no factory: a package's own JSON handed to
    ``dictConfig`` names what it calls where no Python rule reads it (scan27, left open)."""
    lines: list[str] = []
    stack = [document]
    seen = 0
    while stack and seen < _MAX_DICTS:
        item = stack.pop()
        seen += 1
        if isinstance(item, list):
            stack.extend(reversed(item[:_MAX_DICTS]))
            continue
        if not isinstance(item, dict):
            continue
        stack.extend(v for v in item.values() if isinstance(v, dict | list))
        factory = item.get("()", item.get("class"))
        if not isinstance(factory, str):
            continue
        api = factory.removeprefix("ext://").replace(":", ".").strip()
        module, _, attribute = api.rpartition(".")
        if not (module and all(p.isidentifier() for p in api.split("."))):
            continue
        keywords = ", ".join(
            f"{k}={v!r}"
            for k, v in item.items()
            if isinstance(k, str) and k.isidentifier() and k not in _OWN_KEYS
        )
        lines.append(f"import {module}\n{module}.{attribute}({keywords})")
    return "\n".join(lines) if lines else None


def unverified(node: ast.Call) -> bool:
    """Whether a :data:`LISTENERS` call is given no ``verify`` (its second parameter): none,
    or ``None``. Arguments unpacked (``*a``, ``**kw``) may hold one: not judged."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return False
    given = node.args[1] if len(node.args) > 1 else None
    for keyword in node.keywords:
        if keyword.arg == "verify":
            given = keyword.value
    return given is None or (isinstance(given, ast.Constant) and given.value is None)
