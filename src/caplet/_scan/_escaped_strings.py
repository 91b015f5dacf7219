"""The prefilter's answer for the file with its escapes read, as the parser reads them.

The prefilter matches the file's text as written, while the AST pass reads a literal's
value: an escape that spells a printable character (``\\x72``, ``\\162``, ``\\u0072``,
``\\N{LATIN SMALL LETTER R}``) or a backslash that ends a line inside a literal (the
parser drops both, ``'cu\\`` then ``rl ...'``) splits every pattern's text while the
rules still see the whole word. ``os.system('cu\\x72l -s https://... | s\\x68')`` was
clean in package mode and CPL-THR-015 with the whole file visited; ``'~/.ba\\x73hrc'``
written to, CPL-THR-009 (attack8). A run of eight ``\\x`` escapes is a solo pattern of
its own (a string spelled wholly in escapes); one or two inside a word were not. A form
feed is a blank to the tokenizer (``\fimport\fpip\fas q``) and none to the patterns'
``[ \t]``: it is read as a space.

So a file that has such an escape is checked again as :func:`escaped_view` reads it:
each escape of a printable ASCII character replaced by the character, and each line a
backslash continues after a character that is not a blank joined to the next with
nothing between, its line ends moved after the joined line so that every other line
keeps its number (what the parser reads inside a literal; outside one the join only
adds hits, which costs a parse, never a finding). The view is also glued
(:mod:`caplet._scan._glued_strings`: ``'cu\\x72' 'l ...'``) and its continuations
joined as code (:mod:`caplet._scan._logical_lines`). What that finds beyond the
prefilter's answer widens it: the view's focus lines are the file's (lines keep their
numbers), anything more is the whole file. An escape of a character outside printable
ASCII (``\\x00``, ``\\n``, ``\\u00e9``) spells no pattern's text and is left as it is,
so the stdlib's codec tables and the benign corpus's binary literals are not checked
twice (issue 16's speed).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from caplet._scan._glued_strings import around_hits, glued, read_again
from caplet._scan._prefilter import FOCUS_FROM, MAX_LARGE_FOCUS, Need, prefilter

__all__ = ["escaped_view", "with_escaped_strings"]

Answer = Need | frozenset[int]

#: An escape that may spell a printable ASCII character (``\\x20``-``\\x7f``, two- and
#: three-digit octal from ``\\40``, ``\\u0020``-``\\u007f``, ``\\U00000020``-, a named
#: character), or a backslash ending a line after a character that is not a blank (a
#: word split inside a literal). Found at C speed; most files have none.
_ESCAPE = re.compile(
    r"\\(?:x[2-7][0-9a-fA-F]|u00[2-7][0-9a-fA-F]|U000000[2-7][0-9a-fA-F]|"
    r"N\{[A-Za-z0-9 \-]{1,88}\}|0?[4-7][0-7]|1[0-7][0-7]|(?<=[^\s\\]\\)\r?\n)|\f"
)


def _character(match: re.Match[str]) -> str:
    """The printable ASCII character an escape spells, or the escape as written."""
    escape = match.group(0)
    if escape == "\f":
        return " "
    kind = escape[1]
    if kind == "N":
        try:
            value = unicodedata.lookup(escape[3:-1])
        except KeyError:
            return escape
    elif kind in "xuU":
        value = chr(int(escape[2:], 16))
    elif kind in "\r\n":
        return escape  # a continuation: joined by escaped_view (after a word character)
    else:
        value = chr(int(escape[1:], 8))
    return value if " " <= value <= "~" else escape


def escaped_view(text: str) -> str | None:
    """``text`` with every escape of a printable ASCII character read and every line a
    backslash continues after a character that is not a blank joined to the next (its
    line end moved after the joined line: each line keeps its number); ``None`` when it
    has neither."""
    escaped = _escaped_lines(text, context=0)
    if escaped is None:
        return None
    found, lines = escaped
    for decoded, number, span in found:
        lines[number - 1] = decoded
        for other in range(number + 1, number + span):
            lines[other - 1] = ""
    return "\n".join(lines)


#: Lines with an escape read per file at most; a file with more is visited whole.
MAX_ESCAPED_LINES = 1024


def _escaped_lines(
    text: str, *, context: int
) -> tuple[list[tuple[str, int, int]], list[str]] | None:
    """Each line of ``text`` that reads differently with its escapes read (and the lines
    a word split by a continuation spans joined), ``context`` lines before and after it
    too: its text so read, its number (1-based) and how many lines it spans; and the
    lines of ``text`` (split once, for the callers too). ``None``: no such line; past
    :data:`MAX_ESCAPED_LINES`, every line."""
    if "\\" not in text and "\f" not in text:
        return None
    numbers: list[int] = []
    line, counted = 1, 0
    for match in _ESCAPE.finditer(text):
        start = match.start()
        # a form feed is read as a blank (_character): a blank to the tokenizer, none to
        # ``[ \t]`` (attack8)
        if _character(match) == match.group(0) and not _joins(match):
            continue
        line += text.count("\n", counted, start)
        counted = start
        if not numbers or numbers[-1] != line:
            numbers.append(line)
            if len(numbers) > MAX_ESCAPED_LINES:
                break
    if not numbers:
        return None
    physical = text.split("\n")
    if len(numbers) > MAX_ESCAPED_LINES:
        numbers = list(range(1, len(physical) + 1))
    wanted = sorted(
        {n + d for n in numbers for d in range(-context, context + 1) if 0 < n + d <= len(physical)}
    )
    found: list[tuple[str, int, int]] = []
    index = 0
    while index < len(wanted):
        number = wanted[index]
        span = 1
        pieces = [physical[number - 1]]
        # a word split by a continuation: the next line joined, with nothing between
        while _split(pieces[-1]) and number + span <= len(physical):
            pieces[-1] = pieces[-1].removesuffix("\r")[:-1]
            pieces.append(physical[number + span - 1])
            span += 1
        written = "".join(pieces)
        found.append((_ESCAPE.sub(_character, written), number, span))
        while index < len(wanted) and wanted[index] < number + span:
            index += 1
    return found, physical


def _joins(match: re.Match[str]) -> bool:
    """Whether ``match`` is a continuation that splits a word (joined by the view)."""
    return match.group(0)[-1] == "\n"


def _split(line: str) -> bool:
    """Whether ``line`` ends in a backslash continuation after a character that is not a
    blank (nor another backslash)."""
    body = line.removesuffix("\r")
    return len(body) > 1 and body[-1] == "\\" and not body[-2].isspace() and body[-2] != "\\"


def with_escaped_strings(text: str, need: Answer, check: Callable[[str], Answer]) -> Answer:
    """``need`` (the prefilter's answer for ``text``, its logical lines and glued literals
    included), widened by what ``check`` finds in the lines that read differently with
    their escapes read (:func:`_escaped_lines`, a line around each too, glued as
    :mod:`caplet._scan._glued_strings` glues): a large file visited around its hits gets
    those lines added to the lines around every hit of its own, any other the whole
    file; a conjunction whose side only the escapes spell and whose other sides are
    elsewhere in the file is asked of the two together
    (:meth:`~caplet._scan._prefilter.Prefilter.completes`), as is an indicator only they
    spell."""
    if need is Need.FULL:
        return need
    escaped = _escaped_lines(text, context=1)
    if escaped is None:
        return need
    found, physical = escaped
    numbers = [number for _, number, _ in found]
    lines = "\n".join(decoded for decoded, _, _ in found)
    glue = glued(lines)
    if glue is not None:  # a literal glued to one spelled in escapes: 'cu\x72' 'l ...'
        lines += "\n" + glue[0]
        numbers += [numbers[first - 1] for first in glue[2]]
    more = check(lines)
    settled = read_again(text, need, lines, "\n".join(physical[n - 1] for n in numbers), more)
    if settled is not None:
        return settled
    if isinstance(need, Need) or len(text) <= FOCUS_FROM:
        return Need.FULL
    # what the lines found may need the whole file (a solo pattern), which a large file
    # visits around every hit of its own, not only its focused ones (the rc file's path
    # spelled in escapes, opened and written three lines below, beside a lookup by a
    # name built on its line: CPL-THR-009 hidden, tidy10), as with_glued_strings widens
    located = prefilter().located(text, MAX_LARGE_FOCUS)
    base = None if located is None else need | located
    return around_hits(text, base, lines, [(n, n) for n in numbers])
