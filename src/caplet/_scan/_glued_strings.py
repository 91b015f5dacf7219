"""The prefilter's answer for the file with its literals glued: ``'cront' + 'ab'`` read whole.

The prefilter matches the file's text, so an indicator split into literals added together
or joined (``'~/.ba' + 'shrc'``, ``'stra' + 'tum+tcp://'``, ``''.join(['Lo', 'gin Data'])``)
matches none of its patterns, while the AST pass evaluates the sum and the indicator rules read it
(:mod:`caplet._scan._computed_strings`, issue 16). A file where one literal is added to
another (or literals are joined) has those lines checked again with each such ``+`` (or
comma between literals) removed, quotes and all; when
that finds more than the text as written, the whole file is visited. The lines are found
by substring search (C speed), and only they are matched again. Gluing a ``+`` inside a
string or a comment only adds hits, which costs a parse, never a finding. A second literal
with a prefix (``'a' + r'b'``) is glued only on a line that has another glue.

Literals written side by side are one literal to the parser (implicit concatenation:
``'~/.ba' 'shrc'``, ``('cu'`` then ``'rl ... | sh')`` on the next line, a comment or a
backslash between): the lines a junction spans are glued into one, the junction
(quotes, blanks, line ends, comments) removed (attack6: every indicator split so came
out clean in package mode). Junctions are found by one RE2 search over the file's bytes
(a file has none in two cases of three); a quote inside a string or a comment that looks
like one only adds a line to check.

The glued lines are checked on their own, so a conjunction whose side only the glue
makes and whose other sides are elsewhere in the file (a credential parameter, an
egress, and ``'http:' '//10.0.0.1'``: CPL-THR-026) holds in neither; the prefilter's
``completes`` asks the two together and then the whole file is visited (attack7).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import re2

from caplet._scan._glue_patterns import GLUES
from caplet._scan._indicators import indicator_set
from caplet._scan._prefilter import FOCUS_FROM, MAX_LARGE_FOCUS, Need, prefilter
from caplet._scan._prefilter_sets import utf8

__all__ = ["around_hits", "glued", "read_again", "with_glued_strings"]

Answer = Need | frozenset[int]

#: A ``+`` between two literals of the same quote, with its quotes (a prefix on the
#: second: ``'a' + r'b'``), or a comma between two literals (the pieces of a join: on
#: another line's tuple it only adds hits); spaces and tabs only, so lines stay put.
#: Also blanks of any kind or run, a continuation on either side, two prefix letters,
#: triple quotes and the other quote (attack9: a tab, a form feed or two blanks around
#: the ``+``, ``'a' +`` then ``'b'`` on the next line, triple-quoted pieces each hid an
#: indicator the whole-file pass read); another literal's quote glued only adds hits.
_QUOTE = r"""(?:'''|\"\"\"|'|")"""
_AROUND = r"""[ \t\f]*(?:\\\r?\n[ \t\f]*)?"""
_GLUE = re.compile(f"{_QUOTE}{_AROUND}[+,]{_AROUND}[rbuRBUfF]{{0,2}}{_QUOTE}")


#: :data:`_GLUE`'s ``+`` alone.
_PLUS = re.compile(f"{_QUOTE}{_AROUND}\\+{_AROUND}[rbuRBUfF]{{0,2}}{_QUOTE}")

#: Where literals may be written side by side, for RE2 over the bytes (no lookaround):
#: a quote, blanks, line ends, backslash continuations or comments, a prefix, a quote; or
#: two quotes with nothing between, each beside a literal's text (``'cu''rl'``, not
#: ``f('')``). It finds the lines to glue; a quote in a string or a comment that looks
#: like one only adds a line to check.
_JUNCTION_LINES: Any = re2.compile(
    rb"""(?:(?:['"](?:(?:[ \t\f]|\\\r?\n|\r?\n|#[^\n]*)+|"""
    # (or a + between them, in any spelling: attack9)
    rb"""(?:[ \t\f]|\\\r?\n|\r?\n|#[^\n]*)*\+(?:[ \t\f]|\\\r?\n|\r?\n|#[^\n]*)*)"""
    rb"""[rbuRBUfF]{0,2}['"]|"""
    rb"""[^\s=(\[{,'"](?:'''|\"\"\"|'|")[rbuRBUfF]{0,2}(?:'''|\"\"\"|'|")[^\r\n)\]},:.'"]|"""
    # a triple-quoted literal's end and the next one's start: no context needed (attack9)
    rb"""(?:'''|\"\"\")[rbuRBUfF]{0,2}(?:'''|\"\"\"|'|"))"""
    # a chain of them (the literals' text between) is one match: one span to walk
    rb"""[^\n'"]*)+"""
)
#: :data:`GLUES` as the UTF-8 they are searched in.
_GLUE_BYTES: Final = tuple(glue.encode() for glue in GLUES)
#: The junctions themselves, removed from those lines by :func:`glued` (lookarounds: a
#: chain of literals, ``'a''b''c'``, is glued whole).
_JUNCTION = re.compile(
    # (the lookahead first: re skips to the next quote at C speed)
    r"""(?=['"])(?:(?:'''|\"\"\"|'|")(?:(?:[ \t\f]++|\\\r?\n|\r?\n|#[^\n]*+)++|"""
    r"""(?:[ \t\f]++|\\\r?\n|\r?\n|#[^\n]*+)*+\+(?:[ \t\f]++|\\\r?\n|\r?\n|#[^\n]*+)*+)"""
    r"""[rbuRBUfF]{0,2}(?:'''|\"\"\"|'|")|"""
    r"""(?<=[^\s=(\[{,'"])(?:'''|\"\"\"|'|")[rbuRBUfF]{0,2}(?:'''|\"\"\"|'|")(?=[^\r\n)\]},:.'"])|"""
    r"""(?:'''|\"\"\")[rbuRBUfF]{0,2}(?:'''|\"\"\"|'|"))"""
)


#: Lines with a glue checked per file at most (the first ones). A file with more is
#: visited whole: its other lines were not checked, and padding 1,024 lines of
#: ``'a' + 'b'`` before ``'~/.ba' + 'shrc'`` hid the indicator the AST pass reads
#: (attack5).
MAX_GLUED_LINES = 1024


def glued(text: str) -> tuple[str, str, list[int]] | None:
    """The lines of ``text`` where literals are glued (:func:`_glue`), with the
    first line number of each."""
    found = _glue(text)
    if found is None:
        return None
    lines, raw, spans = found
    return lines, raw, [first for first, _ in spans]


def _glue(text: str) -> tuple[str, str, list[tuple[int, int]]] | None:
    """The lines of ``text`` where one literal is added to another (or literals are
    joined, or written side by side), each with every such ``+`` (or comma, or junction)
    removed (quotes and prefixes go with it: ``'cront' + 'ab'`` becomes ``'crontab'``),
    joined by newlines (the lines a junction spans glued into one); the same lines as
    written; and the first and last line (1-based) of each. ``None`` when there is none.

    Lines are found in the UTF-8 bytes: junctions by one RE2 pass, and the glues by
    substring search, at C speed, each only when the prefilter's last check of
    ``text`` found it there (:meth:`~caplet._scan._prefilter.Prefilter.glue_marks`, the
    bytes it matched reused), else every one."""
    marks = prefilter().glue_marks(text)
    if marks is None:
        data, glues = utf8(text), _GLUE_BYTES
    else:
        data, present = marks
        glues = tuple(glue.encode() for glue in present)
    starts: set[int] = set()
    for glue in glues:
        at = data.find(glue)
        while at >= 0 and len(starts) < MAX_GLUED_LINES:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            end = data.find(b"\n", at)
            if end < 0:
                break
            at = data.find(glue, end)
    # each place found: its first and last line, the offset of the first one's start and
    # an offset on the last one
    places = _junction_spans(data)
    if not starts and not places:
        return None
    number, previous = 1, 0
    for start in sorted(starts):
        number += data.count(b"\n", previous, start)
        previous = start
        places.append((number, number, start, start))
    # offsets are the text's own when it is ASCII (one byte a character), else the
    # lines are decoded from the bytes (cut at line ends, never inside a character)
    ascii = len(data) == len(text)
    lines: list[str] = []
    raw: list[str] = []
    merged = _merged(places)[:MAX_GLUED_LINES]
    for _, _, start, on_last in merged:
        # (a merged place's last lines are each another's: one pass over the text in all)
        end = data.find(b"\n", on_last)
        end = len(data) if end < 0 else end
        line = text[start:end] if ascii else data[start:end].decode("utf-8", "surrogatepass")
        # (a line without a backslash has no escape: removed at C speed)
        joined = _JUNCTION.sub(_unless_escapes if "\\" in line else "", line)
        whole = _GLUE.sub("", joined)
        # the commas kept too: removing them glues a literal to the next one of its
        # list ('Exo' 'dus', 'x' was 'Exodusx', an indicator lost), so both are read
        kept = _PLUS.sub("", joined) if whole != joined else whole
        glued_line = whole if kept in (whole, line) else f"{whole} {kept}"
        # one line each (a junction's comment is gone with it, any other line end too)
        raw.append(line.replace("\n", " "))
        lines.append(glued_line.replace("\n", " "))
    return "\n".join(lines), "\n".join(raw), [(first, last) for first, last, _, _ in merged]


#: An escape ending a literal's text (``'\\x00'``, ``'\\u00e9'``, ``'\\0'``, ``'\\n'``).
_ESCAPE_END = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|\S)\Z")


def _unless_escapes(junction: re.Match[str]) -> str:
    """Nothing (the junction glued), unless an escape ends the literal before it and
    starts the one after: a table of escapes side by side (the stdlib's encodings: one
    ``'\\x00'`` a line) glued would be a run of escapes, which sends a file to the AST
    pass, and is no indicator. A literal spelled in escapes is the escape pattern's."""
    text, start, end = junction.string, junction.start(), junction.end()
    if text.startswith("\\", end) and _ESCAPE_END.search(text, max(0, start - 12), start):
        return junction.group(0)
    return ""


def _junction_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """The first and last line (1-based) of each place in ``data`` (UTF-8) where literals
    may be written side by side (:data:`_JUNCTION_LINES`, one RE2 pass), the offset of
    its first line's start and of its last byte (each search between two places only:
    linear in ``data``, however long its lines)."""
    spans: list[tuple[int, int, int, int]] = []
    line, counted, line_start = 1, 0, 0
    for match in _JUNCTION_LINES.finditer(data):
        start, end = match.span()
        newlines = data.count(b"\n", counted, start)
        if newlines:
            line += newlines
            line_start = data.rfind(b"\n", counted, start) + 1
        counted = start
        spans.append((line, line + data.count(b"\n", start, end), line_start, end - 1))
    return spans


def _merged(spans: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """``spans`` sorted, those that share a line made one (with the offset of its first
    line's start and an offset on its last line)."""
    merged: list[tuple[int, int, int, int]] = []
    for first, last, start, end in sorted(spans):
        if merged and first <= merged[-1][1]:
            head = merged[-1]
            if last > head[1]:
                merged[-1] = (head[0], last, head[2], end)
        else:
            merged.append((first, last, start, end))
    return merged


def with_glued_strings(text: str, need: Answer, check: Callable[[str], Answer]) -> Answer:
    """``need`` (the prefilter's answer for ``text`` as written), widened to the whole
    file when ``check`` finds something in its glued lines that ``need`` does not cover
    (what the lines find as written, the file as written finds too), or when the glued
    lines hold an indicator the lines as written do not (one that is only a pattern's
    side, a download piped to a shell, whose other side may be anywhere in the file)."""
    if need is Need.FULL:
        return need
    found = _glue(text)
    if found is None:
        return need
    lines, raw, spans = found
    if len(spans) >= MAX_GLUED_LINES:
        return Need.FULL  # the lines past the bound were never glued: the safe answer
    more = check(lines)
    settled = read_again(text, need, lines, raw, more)
    if settled is not None:
        return settled
    if not isinstance(need, Need) and len(text) > FOCUS_FROM:
        # a large file visited around its hits, whose glued lines find more: the lines of
        # every hit of the file as written and every glued line (all the lines it spans)
        # with a hit of its own, or the whole file past the prefilter's bound. Whole, such
        # files were a fifth more of the stdlib's bytes visited: a long string of text
        # written in pieces side by side (pydoc's topics, a client's docstrings) glues
        # into hits of its own (attack6)
        return around_hits(text, prefilter().located(text, MAX_LARGE_FOCUS), lines, spans)
    if isinstance(more, Need) or isinstance(need, Need):
        return Need.FULL
    numbers = [first for first, _ in spans]
    return need if {numbers[n - 1] for n in more if n <= len(numbers)} <= need else Need.FULL


def read_again(text: str, need: Answer, lines: str, raw: str, more: Answer) -> Answer | None:
    """The answer for ``text`` when what the prefilter's check found in ``lines`` (lines
    of ``text`` read again, their literals glued or their escapes read; ``raw``: the same
    lines as written), ``more``, settles it: the whole file when a side only those lines make
    completes a conjunction with the others elsewhere in the file (attack7: the lines
    alone hold no conjunction, and the file as written none either) or when they found
    nothing but an indicator the lines as written lack (one side of a pattern, a download
    piped to a shell, or no pattern at all, the clipboard: no located line stands for it),
    ``need`` when they found nothing more. ``None``: they found more, which the caller
    places (:func:`around_hits` for a large file)."""
    if prefilter().completes(text, lines):
        return Need.FULL
    if more is Need.NOTHING:
        indicators = indicator_set()
        return Need.FULL if indicators.kinds(lines) - indicators.kinds(raw) else need
    return None


def around_hits(
    text: str, base: frozenset[int] | None, lines: str, spans: Sequence[tuple[int, int]]
) -> Answer:
    """``base`` (lines a large file is visited around; ``None``: past the bound) with
    every line of ``text`` a line of ``lines`` with a hit of its own stands for (line
    ``n`` of them for lines ``spans[n - 1]``, first and last, of the file), or the whole
    file past the prefilter's bound."""
    # which lines hit (what a lookup there binds: its uses are sink calls the focus pass
    # checks anyway, _visitor)
    hits = prefilter().located(lines, MAX_LARGE_FOCUS, aliases=False)
    if base is None or hits is None:
        return Need.FULL
    physical: list[str] | None = None
    added: set[int] = set()
    for n in hits:
        if n > len(spans):
            continue
        first, last = spans[n - 1]
        # a chain of literals is one expression: the statements holding its first and
        # last line hold it all, but for another statement beside it after a ';'
        added.update((first, last))
        if last > first + 1:
            physical = text.split("\n") if physical is None else physical
            added.update(i for i in range(first + 1, last) if ";" in physical[i - 1])
    widened = base | added
    return Need.FULL if len(widened) > MAX_LARGE_FOCUS else widened
