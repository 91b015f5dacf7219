"""The prefilter's answer widened by literals glued in spellings :mod:`_glued_strings` does
not read: ``'%s%s' % ('ev', 'al')`` read as ``'eval'``.

:mod:`caplet._scan._glued_strings` reads literals added with ``+`` or joined by
``''.join(``; the AST pass evaluates many more spellings of the same glue
(:mod:`caplet._scan._evaluate`, :mod:`caplet._scan._computed_strings`), so an indicator
or a name spelled by any of them was found with the whole file visited and not in
package mode (recall10, issue 16 point 1): a literal formatted with literal arguments
(``'%s%s' % ('~/.ba', 'shrc')``, ``'{}{}'.format('cront', 'ab')``), joined with a blank
before the parenthesis or the dot (``''.join (``, ``'' .join(``) or by
``str.join('', [...])``, a reversed list joined (``''.join(reversed([...]))``), a
parenthesised literal added to another (``('Lo') + 'gin Data'``), ``'c'.__add__('md')``,
an f-string whose field is a literal (``f'{"cront"}ab'``); recall12: a template itself
computed (``('%s' * 2) % ('ev', 'al')``), ``operator``'s additions called bare, of a
renamed module or under a name the file gives them (``from operator import add as
glue``), and ``functools.reduce`` of one (or of ``lambda a, b: a + b``) over literals.

Each such expression, made of literals only, is found by one RE2 pass over the file's
bytes (only in a file whose prefilter check saw one of
:data:`~caplet._scan._glue_patterns.GLUE_FORMS`: most files have none), parsed on
its own and evaluated by :func:`caplet._scan._glued_values.literal_value`, which knows
these operations and nothing else (no name, no call but the ones above, bounded sizes:
``'%9999999s' % 'a'`` is refused, not built). Its lines are then checked again with
the expression replaced by its value (quoted), as the glue pass checks its glued lines:
a hit they have and the file's answer lacks widens it (a large file's focus gets the
lines, any other file is visited whole); a side only they make completes a conjunction
elsewhere in the file; an indicator only they spell sends the whole file.

A name glued so, or by the plain glues on another line (``n = 'o' + 's'`` then
``__import__(n)``: ``n`` is written out nowhere, so no lookup pattern of the prefilter
pairs with it), that a module or an API could be called, in a file that looks something
up by a name not written out, sends the whole file too: the lookup rules decide
whether the name is worth hiding (CPL-THR-003).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any, Final

import re2

from caplet._marks import parse
from caplet._scan._glued_values import RefusedError, literal_value, renamed_adders, renamed_back
from caplet._scan._indicators import indicator_set
from caplet._scan._lookup_patterns import LOOKUP_ANY_NAME
from caplet._scan._prefilter import FOCUS_FROM, MAX_LARGE_FOCUS, Need, prefilter
from caplet._scan._rules import API_RULES, MODULE_RULES
from caplet._scan._sources import DECODERS, EXECUTORS, RUNS_FILE

__all__ = ["form_values", "with_glued_forms"]

Answer = Need | frozenset[int]

#: One literal, any prefix, on one line (escapes kept: :func:`ast.literal_eval` reads them).
_LIT = rb"""(?:[rRuUbBfF]{0,2}(?:'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"))"""
#: A literal, maybe in parentheses.
_PLIT = rb"(?:\(\s*" + _LIT + rb"\s*\)|" + _LIT + rb")"
#: A list or tuple of literals.
_SEQ = rb"[\[(]\s*" + _LIT + rb"(?:\s*,\s*" + _LIT + rb")*\s*,?\s*[\])]"
#: A dict of literals.
_MAP = (
    rb"\{\s*"
    + _LIT
    + rb"\s*:\s*"
    + _LIT
    + rb"(?:\s*,\s*"
    + _LIT
    + rb"\s*:\s*"
    + _LIT
    + rb")*\s*,?\s*\}"
)
#: An argument of ``format``: a literal, maybe by keyword.
_ARG = rb"(?:[A-Za-z_]\w*\s*=\s*)?" + _LIT
#: A slice that reverses.
_REVERSE = rb"(?:\s*\[\s*:\s*:\s*-\s*1\s*\])"
_ADDS = rb"(?:i?(?:add|concat)|__i?(?:add|concat)__)\b"
#: One of them called bare or as an attribute (``add``, ``operator.add``, ``op.concat``,
#: ``str.__add__``).
_ADDER = rb"\b(?:[A-Za-z_]\w*\s*\.\s*)?" + _ADDS
#: A lambda that adds its two parameters.
_LAMBDA_ADD = rb"lambda\s+\w+\s*,\s*\w+\s*:\s*\w+\s*\+\s*\w+"
#: A template itself computed: literals repeated or added in parentheses (``('%s' * 2)``).
_TEMPLATE = rb"\(\s*(?:\d+\s*\*\s*)?" + _PLIT + rb"(?:\s*(?:\+\s*" + _PLIT + rb"|\*\s*\d+))*\s*\)"


def _two_literals(callee: bytes) -> bytes:
    """``callee`` called with two literals."""
    return callee + rb"\s*\(\s*" + _PLIT + rb"\s*,\s*" + _PLIT + rb"\s*\)"


def _folded(adder: bytes) -> bytes:
    """``reduce`` of ``adder`` over a list of literals, maybe from a literal."""
    return (
        rb"\breduce\s*\(\s*" + adder + rb"\s*,\s*" + _SEQ + rb"(?:\s*,\s*" + _LIT + rb")?\s*,?\s*\)"
    )


#: The literal-only expressions :func:`~caplet._scan._glued_values.literal_value`
#: evaluates, as RE2 finds them in bytes.
_FORMS: Any = re2.compile(
    b"|".join(
        [
            # a literal (or a template itself computed, recall12) formatted with % and
            # literals
            rb"(?:"
            + _TEMPLATE
            + rb"|"
            + _LIT
            + rb")\s*%\s*(?:\(\s*"
            + _LIT
            + rb"(?:\s*,\s*"
            + _LIT
            + rb")*\s*,?\s*\)|"
            + _LIT
            + rb")",
            # ... with a dict of literals (attack11)
            rb"(?:" + _TEMPLATE + rb"|" + _LIT + rb")\s*%\s*" + _MAP,
            # ... with str.format and literals (by keyword too), format_map and a dict
            _LIT + rb"\s*\.\s*format\s*\(\s*" + _ARG + rb"(?:\s*,\s*" + _ARG + rb")*\s*,?\s*\)",
            _LIT + rb"\s*\.\s*format_map\s*\(\s*" + _MAP + rb"\s*\)",
            # str.__add__ and operator.add of two literals (attack11); operator's other
            # additions, bare or of a renamed module, and folded by reduce (recall12)
            _two_literals(_ADDER),
            _folded(rb"(?:" + _ADDER + rb"|" + _LAMBDA_ADD + rb")"),
            # literals joined: ''.join (...), '' .join(...), str.join('', ...), reversed
            rb"(?:"
            + _LIT
            + rb"\s*\.\s*join\s*\(\s*|\bstr\s*\.\s*join\s*\(\s*"
            + _LIT
            + rb"\s*,\s*)(?:reversed\s*\(\s*"
            + _SEQ
            + _REVERSE
            + rb"?\s*\)|"
            + _SEQ
            + _REVERSE
            + rb"?)\s*\)",
            # literals added, some in parentheses, or by __add__
            _PLIT + rb"(?:\s*\+\s*" + _PLIT + rb")+",
            _LIT + rb"(?:\s*\.\s*__add__\s*\(\s*" + _PLIT + rb"\s*\))+",
            # an f-string whose fields are literals
            rb"""\b[fF][rR]?(?:'[^'\n]*\{\s*[rbuRBU]?["][^'\n]*'|"[^"\n]*\{\s*[rbuRBU]?['][^"\n]*")""",
        ]
    )
)
#: Expressions evaluated per file at most (the first ones); a file with more is
#: visited whole, as the glue pass bounds its lines.
MAX_FORMS: Final = 1024
#: A value a module or an API could be named by.
_NAME = re.compile(r"[A-Za-z_][\w.]{1,64}\Z")
#: A lookup by a name not written out (:data:`LOOKUP_ANY_NAME`), asked of a file whose
#: forms glued a name.
_LOOKUP: Any = re2.compile(LOOKUP_ANY_NAME)


def form_values(text: str) -> tuple[str, str, list[int], list[str]] | None:
    """The lines of ``text`` holding a literal-only expression of the spellings this
    module reads, each expression replaced by its value quoted (the lines it spans
    joined by blanks), joined by newlines; the same lines as written; the first line
    (1-based) of each; and the values. ``None`` when there is none (or the file was
    not marked). Past :data:`MAX_FORMS` expressions the answer is ``None`` too and
    :func:`with_glued_forms` visits the file whole (it asks :func:`_found` itself)."""
    found = _found(text)
    if found is None or found is _TOO_MANY:
        return None
    return found


_TOO_MANY: Final[tuple[str, str, list[int], list[str]]] = ("", "", [], [])


def _found(text: str) -> tuple[str, str, list[int], list[str]] | None:
    """:func:`form_values`, with :data:`_TOO_MANY` past the bound."""
    marks = prefilter().form_marks(text)
    if marks is None:
        data = text.encode("utf-8", "surrogatepass")
    elif not marks[1]:
        return None
    else:
        data = marks[0]
    # each expression evaluated: (first line, last line, start, end, its value)
    places: list[tuple[int, int, int, int, str]] = []
    line, counted = 1, 0
    spans = [match.span() for match in _FORMS.finditer(data)]
    renamed = renamed_adders(text)
    if renamed:
        # glue('ev', 'al') after from operator import add as glue: the file's own names
        names = "|".join(re.escape(name) for name in sorted(renamed)).encode("utf-8")
        own: Any = re2.compile(_two_literals(rb"(?:" + names + rb")") + rb"|" + _folded(names))
        spans = sorted({*spans, *(match.span() for match in own.finditer(data))})
    for start, end in spans:
        if len(places) >= MAX_FORMS:
            return _TOO_MANY
        written = data[start:end].decode("utf-8", "surrogatepass")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "\d" warns (attack11), as _filepass parses
                expression = parse(f"({written}\n)", mode="eval").body
            value = literal_value(renamed_back(expression, renamed) if renamed else expression)
        except (RefusedError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        line += data.count(b"\n", counted, start)
        counted = start
        last = line + data.count(b"\n", start, end)
        shown = value if isinstance(value, str) else value.decode("latin-1")
        places.append((line, last, start, end, shown))
    if not places:
        return None
    lines: list[str] = []
    raw: list[str] = []
    firsts: list[int] = []
    values: list[str] = []
    index = 0
    while index < len(places):
        first, last = places[index][0], places[index][1]
        group = [places[index]]
        index += 1
        while index < len(places) and places[index][0] <= last:
            group.append(places[index])
            last = max(last, places[index][1])
            index += 1
        begin = data.rfind(b"\n", 0, group[0][2]) + 1
        stop = data.find(b"\n", max(p[3] for p in group) - 1)
        stop = len(data) if stop < 0 else stop
        pieces: list[bytes] = []
        at = begin
        for _, _, start, end, shown in group:
            if start < at:
                continue  # (overlapping matches: the first one read)
            pieces += [data[at:start], repr(shown).encode("utf-8", "surrogatepass")]
            at = end
            values.append(shown)
        pieces.append(data[at:stop])
        glued_line = b"".join(pieces).decode("utf-8", "surrogatepass")
        lines.append(glued_line.replace("\n", " "))
        raw.append(data[begin:stop].decode("utf-8", "surrogatepass").replace("\n", " "))
        firsts.append(first)
    return "\n".join(lines), "\n".join(raw), firsts, values


#: Module roots and attribute names a rule watches (the rule tables' modules and APIs, the
#: data flow's code runners, files run and decoders): what a glued name may hide.
_WATCHED_ROOTS: Final = frozenset(
    {m.split(".", 1)[0] for m in MODULE_RULES}
    | {a.split(".", 1)[0] for a in API_RULES if not a.startswith("builtins.")}
    | {"os", "sys", "builtins", "marshal", "base64", "codecs", "zlib", "pip", "platform"}
)
_WATCHED_NAMES: Final = frozenset(
    a.rsplit(".", 1)[-1] for a in (*API_RULES, *EXECUTORS, *RUNS_FILE, *DECODERS)
)


def _watched(value: str) -> bool:
    """Whether ``value`` may name a module or an API a rule watches, as written or
    reversed (``n[::-1]`` at the lookup)."""
    return any(
        v.split(".", 1)[0] in _WATCHED_ROOTS or v.rsplit(".", 1)[-1] in _WATCHED_NAMES
        for v in (value, value[::-1])
    )


def _glued_name(text: str, raw: str, values: list[str]) -> bool:
    """Whether a value names a module or an API a rule watches (``'os'``, ``'eval'``,
    ``'os.system'``) that the file does not write out as a literal, in a file that looks
    up a name not written out: what the glue builds may be what the lookup takes (an
    exception's class name glued beside ``getattr(obj, attr)`` is neither)."""
    named = [
        v
        for v in values
        if _NAME.match(v) and _watched(v) and f"'{v}'" not in raw and f'"{v}"' not in raw
    ]
    if not named:
        return False
    return _LOOKUP.search(text.encode("utf-8", "surrogatepass")) is not None


def with_glued_forms(text: str, need: Answer, check: Callable[[str], Answer]) -> Answer:
    """``need`` (the prefilter's answer for ``text``, its other views included), widened
    by what ``check`` finds in the lines whose literal-only expressions are read as
    their values (:func:`form_values`; plain glues too, in a file marked for another
    form or for an importer given a name not written out)."""
    if need is Need.FULL:
        return need
    found = _found(text)
    if found is _TOO_MANY:
        return Need.FULL
    if found is None:
        return need
    lines, raw, firsts, values = found
    if _glued_name(text, raw, values):
        return Need.FULL
    more = check(lines)
    check_all = prefilter()
    if check_all.completes(text, lines):
        return Need.FULL
    if more is Need.NOTHING:
        indicators = indicator_set()
        return Need.FULL if indicators.kinds(lines) - indicators.kinds(raw) else need
    if isinstance(need, Need) or len(text) <= FOCUS_FROM:
        return Need.FULL
    hits = check_all.located(lines, MAX_LARGE_FOCUS, aliases=False)
    if hits is None:
        return Need.FULL
    widened = need | {firsts[n - 1] for n in hits if n <= len(firsts)}
    return Need.FULL if len(widened) > MAX_LARGE_FOCUS else widened
