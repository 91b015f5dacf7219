"""The texts the code-origin guard lets a code generator compile (attack26, attack27).

Part of :mod:`caplet._sandbox._code_origin` (split out by concern): a type
annotation's text must be inert or a string constant of the plugin's own ``.py``
files; a dataclass's field names must be identifiers; a library's frame may compile
only when its own bytecode names ``exec``, ``eval`` or ``compile``. Every function
here is *sealed* (that module's docstring).
"""

from __future__ import annotations

import dataclasses
import keyword
import opcode
import os
import sys
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any, Final

from caplet._sandbox._code_files import READ_FLAGS, read_whole

__all__ = [
    "fields_named",
    "identifiers",
    "named_text",
    "names_compiler",
    "postponed_annotation",
    "sources",
    "strings",
    "type_text",
]

#: The opcodes an inert expression compiles to: loads, subscripts, operators, tuples,
#: lists and slices; no call, no function, no import.
_INERT_OPS: Final = frozenset(
    opcode.opmap[name]
    for name in (
        "CACHE",
        "NOP",
        "RESUME",
        "EXTENDED_ARG",
        "LOAD_NAME",
        "LOAD_CONST",
        "LOAD_ATTR",
        "BINARY_SUBSCR",
        "BINARY_OP",
        "UNARY_NEGATIVE",
        "BUILD_TUPLE",
        "BUILD_LIST",
        "BUILD_SLICE",
        "RETURN_VALUE",
        "RETURN_CONST",
    )
    if name in opcode.opmap
)
#: The builtins that compile text, as a frame outside the standard library must name them.
_COMPILERS: Final = frozenset({"exec", "eval", "compile"})
#: ``LOAD_GLOBAL``'s argument is the name's index shifted left by one (3.11+: the low
#: bit pushes a NULL).
_GLOBAL_SHIFT: Final = 1 if sys.version_info >= (3, 11) else 0
#: ``from __future__ import annotations``: each annotation compiles to a string constant.
_POSTPONED: Final = 0x1000000
#: A dataclass field's name, read from its slot (``Field.name`` set to a property, or a
#: subclass, could answer otherwise when the method's text is made).
_FIELD_NAME: Final = vars(dataclasses.Field)["name"]


def strings(
    code: CodeType,
    found: set[str],
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _code: type[CodeType] = CodeType,
    _nested: tuple[type, ...] = (tuple, frozenset),
) -> None:
    """Add every string constant of ``code``, its nested code and tuples, to ``found``."""
    pending: list[object] = [code]
    while pending:
        item = pending.pop()
        kind = _type(item)
        if kind is _str:
            found.add(item)  # type: ignore[arg-type]
        elif kind is _code:
            pending.extend(item.co_consts)  # type: ignore[attr-defined]
        elif kind in _nested:
            pending.extend(item)  # type: ignore[arg-type]


def sources(
    folder: str,
    _scandir: Callable[[str], Any] = os.scandir,
) -> Iterator[str]:
    """The ``.py`` files under ``folder`` (the snapshot: read-only, made by the host)."""
    pending = [folder]
    while pending:
        with _scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                    yield entry.path


def postponed_annotation(
    source: str,
    snapshot: tuple[str, ...],
    _sources: Callable[[str], Iterator[str]] = sources,
    _open: Callable[[str, int], int] = os.open,
    _read: Callable[[int], bytes] = read_whole,
    _nofollow: int = READ_FLAGS | os.O_NOFOLLOW,
    _compile: Callable[..., CodeType] = compile,
    _strings: Callable[[CodeType, set[str]], None] = strings,
    _set: type[set[str]] = set,
    _flags: int = _POSTPONED,
    _errors: tuple[type[Exception], ...] = (SyntaxError, ValueError, ImportError, OSError),
) -> bool:
    """Whether ``source`` is a string constant of a snapshot ``.py`` file compiled with
    its annotations postponed (each annotation is then one). Computed anew each time:
    a cache would be state the plugin could reach; only a file holding the text's
    first name is compiled."""
    first = source.lstrip("([ ").split("[", 1)[0].split(".", 1)[0].split("(", 1)[0]
    needle = first.strip().encode()
    for path in _sources(snapshot[0]) if snapshot else ():
        try:
            content = _read(_open(path, _nofollow))
            if needle not in content:
                continue
            code = _compile(content, path, "exec", _flags, True)
        except _errors:
            continue  # unreadable or not Python: no constant of it counts
        found: set[str] = _set()
        _strings(code, found)
        if source in found:
            return True
    return False


def type_text(
    source: object,
    snapshot: tuple[str, ...],
    _type: Callable[[object], type] = type,
    _bytes: type[bytes] = bytes,
    _compile: Callable[..., CodeType] = compile,
    _inert: frozenset[int] = _INERT_OPS,
    _postponed: Callable[[str, tuple[str, ...]], bool] = postponed_annotation,
    _errors: tuple[type[Exception], ...] = (SyntaxError, ValueError),
) -> bool:
    """Whether a generator may compile this annotation text (``_TYPE_TEXT``): the
    audit event hands the text as UTF-8 bytes."""
    if _type(source) is not _bytes:
        return False
    try:
        text = source.decode()  # type: ignore[attr-defined]
        code = _compile(text, "<annotation>", "eval")
    except _errors:
        return True  # the compile the hook guards fails the same way: nothing runs
    for op in code.co_code[::2]:
        if op not in _inert:
            break
    else:
        return True
    if text.startswith("(") and text.endswith(",)[0]"):  # typing's ``*Ts``
        text = text[1:-5]
    return _postponed(text, snapshot)


def fields_named(
    frame: FrameType,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _dict: type[dict[Any, Any]] = dict,
    _items: Callable[[dict[Any, Any]], Any] = dict.items,
    _identifier: Callable[[str], bool] = str.isidentifier,
    _keywords: frozenset[str] = frozenset(keyword.kwlist),
    _field: type = dataclasses.Field,
    _slot: Any = _FIELD_NAME,
    _vars: Callable[[object], Any] = vars,
) -> bool:
    """Whether the class dataclasses is making has identifiers for field names, read
    from its ``_process_class`` frame: each field an exact ``Field`` whose own slot
    holds its key, ``Field.name`` still that slot."""
    where = frame.f_code.co_filename
    at: FrameType | None = frame
    while at is not None and at.f_code.co_filename == where:
        if at.f_code.co_name == "_process_class":
            fields = at.f_locals.get("fields")
            if _type(fields) is not _dict or _vars(_field)["name"] is not _slot:
                return False
            for name, field in _items(fields):  # type: ignore[arg-type]
                if not (
                    _type(name) is _str
                    and _identifier(name)
                    and name not in _keywords
                    and _type(field) is _field
                    and _slot.__get__(field) is name
                ):
                    return False
            return True
        at = at.f_back
    return False


def identifiers(
    frame: FrameType,
    names: tuple[str, ...],
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _identifier: Callable[[str], bool] = str.isidentifier,
    _keywords: frozenset[str] = frozenset(keyword.kwlist),
) -> bool:
    """Whether each of ``frame``'s locals ``names`` is an exact ``str`` identifier (a
    library's generator that puts them into fixed text: lib29)."""
    values = frame.f_locals
    for name in names:
        value = values.get(name)
        if _type(value) is not _str:
            return False
        if not _identifier(value) or value in _keywords:  # type: ignore[arg-type]
            return False
    return True


def named_text(
    frame: FrameType,
    source: object,
    texts: tuple[str, ...],
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _bytes: type[bytes] = bytes,
    _format: Callable[..., str] = str.format,
    _errors: tuple[type[Exception], ...] = (UnicodeDecodeError,),
) -> bool:
    """Whether ``source`` is one of ``texts`` filled with ``frame``'s ``member`` and
    ``function_name`` (already checked identifiers): the text a library's generator
    makes, whatever its module's globals now answer (attack30: typing_inspection's
    ``dedent`` rebound to return the plugin's data)."""
    if _type(source) is _bytes:
        try:
            source = source.decode()  # type: ignore[attr-defined]
        except _errors:
            return False
    if _type(source) is not _str:
        return False
    values = frame.f_locals
    member = values.get("member")
    function_name = values.get("function_name")
    for text in texts:
        if _format(text, member=member, function_name=function_name) == source:
            return True
    return False


def names_compiler(
    code: CodeType,
    _names: frozenset[str] = _COMPILERS,
    _load_global: int = opcode.opmap["LOAD_GLOBAL"],
    _load_name: int = opcode.opmap["LOAD_NAME"],
    _extended: int = opcode.opmap["EXTENDED_ARG"],
    _global_shift: int = _GLOBAL_SHIFT,
    _range: Callable[[int, int, int], Any] = range,
    _len: Callable[[bytes], int] = len,
) -> bool:
    """Whether ``code`` loads ``exec``, ``eval`` or ``compile`` by name (a global or a
    builtin: what the scanner reads as CPL-DYN-001), not as an attribute (``ns.exec``)
    or a value it was handed."""
    raw = code.co_code
    names = code.co_names
    extended = 0
    for at in _range(0, _len(raw), 2):
        op = raw[at]
        arg = raw[at + 1] | extended
        if op == _extended:
            extended = arg << 8
            continue
        extended = 0
        if op == _load_global:
            if names[arg >> _global_shift] in _names:
                return True
        elif op == _load_name and names[arg] in _names:
            return True
    return False
