"""The scripts attrs may compile in a worker: its own method templates (attrs31).

Part of :mod:`caplet._sandbox._code_origin` (split out by concern). attrs (in every
runtime through jsonschema) writes each class's ``__init__``, ``__repr__``, ``__eq__``,
``__hash__`` (and a cached property's ``__getattr__``) as Python text and compiles it in
``attr/_make.py`` (``_compile_and_eval``). lib29 listed that frame unchecked, and three
routes ran a data file's text through it (lib29, attack30): an ``alias`` (or a name, or
``repr_ns``) of the data put into the text (``attr.ib(alias="b=__import__(...)")`` became
``__init__``'s default), ``attr._make._make_repr_script`` (any of the module's globals
that build the text) rebound, and the plugin calling ``_compile_and_eval`` itself.

Checked here is the text, not what made it: every name the plugin or its objects could
steer (attributes, aliases, ``repr_ns``, a ``Converter`` subclass's call text, a
rebound module global, a builder reached through a frame and its snippets edited)
reaches the compile only as this text. So the script must be attrs' text: each line one
of the templates attrs 22-26's generators write, whose every hole is an identifier (a
hash an integer, ``repr_ns`` a dotted name), matched by regular expressions compiled
here at import (``re``'s engine is C; the bound ``fullmatch`` is sealed). A call in a
template calls a name attrs makes from a prefix or suffix (``__attr_converter_x``,
``x_repr``, ``_x_key``), never a hole: the text calls no builtin of its own choosing. A
hole that is a parameter elsewhere could still be a free name in text put together from
attrs' lines in another order, and code that loads ``exec`` by name may compile
(``names_compiler``, the scanner's rule for the plugin's own code); so a script that
holds the word ``exec``, ``eval`` or ``compile`` (a field so named), or any character
outside ASCII (a name is read as its NFKC form: ``exec`` in fullwidth letters, U+FF45
U+FF58 U+FF45 U+FF43, is ``exec``), is compiled here and refused if any of its code
loads one as a global. The filename must be attrs' (``<attrs generated ...>``): a
function compiled with a file name of the standard library's would be keyed as it is.
Every function here is *sealed* (``_code_origin``'s docstring).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import CodeType
from typing import Any, Final

from caplet._sandbox._code_text import names_compiler

__all__ = ["attrs_script"]

#: One hole: an identifier (``str.isidentifier``'s letters; a character of ``\\w`` that is
#: no identifier's makes the compile fail, so nothing runs).
_I: Final = r"[^\W\d]\w*"
_DEFAULT: Final = rf"attr_dict\['{_I}'\]\.default"
_FACTORY: Final = rf"__attr_factory_{_I}\((?:self)?\)"
_PLAIN: Final = rf"(?:{_I}|{_DEFAULT}|{_FACTORY})"
#: ``Converter._fmt_converter_call``: the converter's global, then self and the field.
_CONVERTED: Final = rf"__attr_converter_{_I}\({_PLAIN}(?:, self)?(?:, attr_dict\['{_I}'\])?\)"
_VALUE: Final = rf"(?:{_PLAIN}|{_CONVERTED}|None)"
_PARAMETER: Final = rf"(?:{_I}(?:=(?:NOTHING|{_DEFAULT}))?|\*)"
_ACCESS: Final = rf'(?:self\.{_I}|getattr\(self, "{_I}", NOTHING\))'
_FRAGMENT: Final = rf"{_I}=(?:\{{{_ACCESS}!r\}}|\{{{_I}_repr\({_ACCESS}\)\}})"
_CLASS_NAME: Final = (
    r'(?:\{self\.__class__\.__qualname__\.rsplit\(">\.", 1\)\[-1\]\}'
    rf"|{_I}(?:\.{_I})*\.\{{self\.__class__\.__name__\}})"
)
#: The lines with holes, each as written by attrs' generators (``_attrs_to_init_script``,
#: ``_make_repr_script``, ``_make_eq_script``, ``_make_hash_script``), leading spaces off.
_TEMPLATES: Final = (
    rf"def (?:__init__|__attrs_init__)\(self, (?:{_PARAMETER}(?:, {_PARAMETER})*)?\):",
    rf"self\.__attrs_pre_init__\((?:{_I}(?:={_I})?(?:, {_I}(?:={_I})?)*)?\)",
    rf"self\.{_I} = {_VALUE}",
    rf"_setattr\('{_I}', {_VALUE}\)",
    rf"_inst_dict\['{_I}'\] = {_VALUE}",
    rf"if {_I} is not NOTHING:",
    rf"__attr_validator_{_I}\(self, __attr_{_I}, self\.{_I}\)",
    rf"BaseException\.__init__\(self, (?:self\.{_I}(?:,self\.{_I})*)?\)",
    rf"return f'{_CLASS_NAME}\((?:{_FRAGMENT}(?:, {_FRAGMENT})*)?\)'",
    rf"(?:self\.{_I} == other\.{_I}|_{_I}_key\(self\.{_I}\) == _{_I}_key\(other\.{_I}\))"
    r"(?: and)?",
    rf"(?:self\.{_I}|_{_I}_key\(self\.{_I}\)|-?[0-9]+),",
)
#: The lines without holes.
_FIXED: Final = frozenset(
    {
        "",
        ")",
        "))",
        ")))",
        "pass",
        "else:",
        "try:",
        "finally:",
        "raise",
        # __init__
        "_setattr = _cached_setattr_get(self)",
        "_inst_dict = self.__dict__",
        "if _config._run_validators is True:",
        "self.__attrs_post_init__()",
        # __repr__
        "def __repr__(self):",
        "already_repring = _compat.repr_context.already_repring",
        "except AttributeError:",
        "already_repring = {id(self),}",
        "_compat.repr_context.already_repring = already_repring",
        "if id(self) in already_repring:",
        "return '...'",
        "already_repring.add(id(self))",
        "already_repring.remove(id(self))",
        # __eq__
        "def __eq__(self, other):",
        "if other.__class__ is not self.__class__:",
        "return NotImplemented",
        "return  (",
        "return True",
        # __hash__
        "def __hash__(self):",
        "def __hash__(self, *, _cache_wrapper=__import__('attr._make')._make._CacheHashWrapper):",
        "return hash((",
        "if self._attrs_cached_hash is None:",
        "object.__setattr__(self, '_attrs_cached_hash', _cache_wrapper(hash((",
        "self._attrs_cached_hash = _cache_wrapper(hash((",
        "return self._attrs_cached_hash",
        # a cached property's __getattr__ (_make_cached_property_getattr)
        "def wrapper(_cls):",
        "__class__ = _cls",
        "def __getattr__(self, item, cached_properties=cached_properties, "
        "original_getattr=original_getattr, _cached_setattr_get=_cached_setattr_get):",
        "func = cached_properties.get(item)",
        "if func is not None:",
        "result = func(self)",
        "_setter = _cached_setattr_get(self)",
        "_setter(item, result)",
        "return result",
        "return original_getattr(self, item)",
        "return super().__getattribute__(item)",
        "if not hasattr(super(), '__getattr__'):",
        "return super().__getattr__(item)",
        "original_error = f\"'{self.__class__.__name__}' object has no attribute '{item}'\"",
        "raise AttributeError(original_error)",
        "return __getattr__",
        "__getattr__ = wrapper(_cls)",
    }
)
_LINE: Final = re.compile("|".join(f"(?:{template})" for template in _TEMPLATES)).fullmatch
#: attrs' file names for what it compiles (``_generate_unique_filename``; a name taken is
#: given a ``-N`` suffix, still inside the brackets).
_FILENAME: Final = "<attrs generated "
#: A script that holds one of these words is compiled to look for a compiler's load (the
#: substrings first: the regular expression alone cost 40 µs a script).
_COMPILERS: Final = ("exec", "eval", "compile")
_COMPILER_WORD: Final = re.compile(r"\b(?:exec|eval|compile)\b").search


def attrs_script(
    source: object,
    filename: object,
    _names_compiler: Callable[[CodeType], bool] = names_compiler,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _bytes: type[bytes] = bytes,
    _decode: Callable[[bytes], str] = bytes.decode,
    _code: type[CodeType] = CodeType,
    _startswith: Callable[[str, str], bool] = str.startswith,
    _split: Callable[[str, str], list[str]] = str.split,
    _lstrip: Callable[[str, str], str] = str.lstrip,
    _fixed: frozenset[str] = _FIXED,
    _line: Callable[[str], Any] = _LINE,
    _prefix: str = _FILENAME,
    _words: tuple[str, ...] = _COMPILERS,
    _ascii: Callable[[str], bool] = str.isascii,
    _find: Callable[[str, str], int] = str.find,
    _word: Callable[[str], Any] = _COMPILER_WORD,
    _compile: Callable[..., CodeType] = compile,
    _errors: tuple[type[Exception], ...] = (SyntaxError, ValueError),
    _undecodable: tuple[type[Exception], ...] = (UnicodeDecodeError,),
) -> bool:
    """Whether ``source`` (the audit event's: UTF-8 bytes, or a str), compiled as
    ``filename``, is a script attrs' generators write (module docstring)."""
    if _type(filename) is not _str or not _startswith(filename, _prefix):  # type: ignore[arg-type]
        return False
    text: Any = source
    if _type(source) is _bytes:
        # The audit event hands a str's text as UTF-8 bytes; no line of attrs' is a
        # comment, so no coding cookie makes the compile read other text.
        try:
            text = _decode(source)  # type: ignore[arg-type]
        except _undecodable:
            return False
    elif _type(source) is not _str:
        return False
    for line in _split(text, "\n"):
        bare = _lstrip(line, " ")
        if bare not in _fixed and _line(bare) is None:
            return False
    if _ascii(text):
        # A name is read as its NFKC form (PEP 3131: exec in fullwidth letters is exec),
        # so only an ASCII script is known by its words without compiling it.
        for word in _words:
            if _find(text, word) >= 0:
                break
        else:
            return True
        if _word(text) is None:
            return True
    try:
        code = _compile(text, "<attrs script>", "exec", 0, True)
    except _errors:
        return False  # the safe answer: attrs writes no script that fails to compile
    pending: list[object] = [code]
    while pending:
        item = pending.pop()
        if _type(item) is _code:
            inner: Any = item
            if _names_compiler(inner):
                return False
            pending.extend(inner.co_consts)
    return True
