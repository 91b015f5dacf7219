"""Documents whose loading calls a function they name: YAML's python tags, jsonpickle.

``yaml.unsafe_load`` (or ``yaml.load`` with a loader that allows it) of
``!!python/object/apply:os.system ["curl ... | sh"]`` calls ``os.system`` with that
command; ``jsonpickle.decode`` of ``{"py/reduce": [{"py/function": "subprocess.getoutput"},
{"py/tuple": ["..."]}]}`` calls ``subprocess.getoutput``. Such a document kept in a
string literal is a second stage as a pickle blob is (blind16: b16-ls-yaml-apply,
-jsonpickle-reduce), but none of the code rules read it. Here the document's calls
are written back as the Python they stand for (``import os; os.system('...')``), so the
sinks check that source as they check a string given to exec.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Final

__all__ = ["DOCUMENT_LOADERS", "DOCUMENT_TOKENS", "document_source"]

#: Loaders that call what a document's tags name.
DOCUMENT_LOADERS: Final = frozenset(
    {
        *(f"yaml.{n}" for n in ("load", "load_all", "unsafe_load", "unsafe_load_all", "full_load")),
        "jsonpickle.decode",
        "jsonpickle.loads",
    }
)
#: The tags as a document spells them, for the prefilter (a solo pattern: rare in code).
DOCUMENT_TOKENS: Final = (
    r"!!python/(?:object/(?:apply|new)|name|module):|['\"]py/(?:reduce|function)['\"]"
)
#: A YAML python tag naming a callable, and its arguments: a flow sequence on the line,
#: or the block sequence's items on the lines below.
_YAML_CALL = re.compile(
    r"!!python/object/(?:apply|new):([A-Za-z_][\w.]*)[ \t]*(\[[^\n]*\])?((?:\n[ \t]*-[^\n]*)*)"
)
#: A document larger than this is not read (a stage is small).
_MAX_DOCUMENT = 64 * 1024
#: Calls written back from one document, at most.
_MAX_CALLS = 16


def _call(dotted: str, arguments: list[object]) -> str | None:
    if not all(part.isidentifier() for part in dotted.split(".")) or "." not in dotted:
        return None
    module = dotted.rsplit(".", 1)[0]
    return f"import {module}\n{dotted}({', '.join(map(repr, arguments))})\n"


def _yaml_calls(text: str) -> list[str]:
    calls: list[str] = []
    for match in _YAML_CALL.finditer(text):
        flow, block = match.group(2), match.group(3)
        arguments: list[object] = []
        if flow:
            try:
                value = ast.literal_eval(flow)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = None
            arguments = list(value) if isinstance(value, list) else []
        elif block:
            arguments = [
                line.split("-", 1)[1].strip().strip("'\"") for line in block.split("\n")[1:]
            ]
        call = _call(match.group(1), arguments)
        if call is not None:
            calls.append(call)
    return calls


def _reductions(value: object, calls: list[str]) -> None:
    """jsonpickle's ``py/reduce``: ``[{"py/function": f}, {"py/tuple": args}, ...]``."""
    stack = [value]
    while stack and len(calls) < _MAX_CALLS:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            reduce = item.get("py/reduce")
            if isinstance(reduce, list) and reduce and isinstance(reduce[0], dict):
                dotted = reduce[0].get("py/function") or reduce[0].get("py/type")
                packed = reduce[1] if len(reduce) > 1 else {}
                arguments = packed.get("py/tuple", []) if isinstance(packed, dict) else []
                if isinstance(dotted, str) and isinstance(arguments, list):
                    call = _call(dotted, arguments)
                    if call is not None:
                        calls.append(call)
            stack.extend(item.values())


def document_source(api: str, value: object) -> str | None:
    """The Python a document loaded by ``api`` runs through the callables it names, or
    None when it names none (plain data, or a value that is not a document's text)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str) or len(value) > _MAX_DOCUMENT:
        return None
    calls: list[str] = []
    if api.startswith("yaml."):
        calls = _yaml_calls(value)
    else:
        try:
            _reductions(json.loads(value), calls)
        except (ValueError, RecursionError):
            return None
    return "".join(calls[:_MAX_CALLS]) or None
