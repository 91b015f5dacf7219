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
"""

from __future__ import annotations

import re
from collections.abc import Callable

from caplet._scan._indicators import indicator_set
from caplet._scan._prefilter import Need

__all__ = ["glued", "with_glued_strings"]

Answer = Need | frozenset[int]

#: The spellings of one literal added to another on a line (``'a' + 'b'``, ``"a"+"b"``),
#: and of literals joined by an empty separator (``''.join(['Lo', 'gin Data'])``).
_GLUES = ("' + '", '" + "', "'+'", '"+"', "''.join(", '"".join(')

#: A ``+`` between two literals of the same quote, with its quotes (a prefix on the
#: second: ``'a' + r'b'``), or a comma between two literals (the pieces of a join: on
#: another line's tuple it only adds hits); spaces and tabs only, so lines stay put.
_GLUE = re.compile(r"""(['"])[ \t]*[+,][ \t]*[rbuRBU]?\1""")


#: Lines with a glue checked per file at most (the first ones). A file with more is
#: visited whole: its other lines were not checked, and padding 1,024 lines of
#: ``'a' + 'b'`` before ``'~/.ba' + 'shrc'`` hid the indicator the AST pass reads
#: (attack5).
MAX_GLUED_LINES = 1024


def glued(text: str) -> tuple[str, str, list[int]] | None:
    """The lines of ``text`` where one literal is added to another (or literals are
    joined), each with every such ``+`` (or comma) removed (quotes and prefixes go with
    it: ``'cront' + 'ab'`` becomes ``'crontab'``), joined by newlines; the same lines as
    written; and their line numbers (1-based). ``None`` when there is none. Lines are
    found by substring search, at C speed."""
    starts: set[int] = set()
    for glue in _GLUES:
        at = text.find(glue)
        while at >= 0 and len(starts) < MAX_GLUED_LINES:
            starts.add(text.rfind("\n", 0, at) + 1)
            end = text.find("\n", at)
            if end < 0:
                break
            at = text.find(glue, end)
    if not starts:
        return None
    lines: list[str] = []
    raw: list[str] = []
    numbers: list[int] = []
    number, previous = 1, 0
    for start in sorted(starts):
        number += text.count("\n", previous, start)
        previous = start
        end = text.find("\n", start)
        line = text[start : end if end >= 0 else len(text)]
        raw.append(line)
        lines.append(_GLUE.sub("", line))
        numbers.append(number)
    return "\n".join(lines), "\n".join(raw), numbers


def with_glued_strings(text: str, need: Answer, check: Callable[[str], Answer]) -> Answer:
    """``need`` (the prefilter's answer for ``text`` as written), widened to the whole
    file when ``check`` finds something in its glued lines that ``need`` does not cover
    (what the lines find as written, the file as written finds too), or when the glued
    lines hold an indicator the lines as written do not (one that is only a pattern's
    side, a download piped to a shell, whose other side may be anywhere in the file)."""
    if need is Need.FULL:
        return need
    found = glued(text)
    if found is None:
        return need
    lines, raw, numbers = found
    if len(numbers) >= MAX_GLUED_LINES:
        return Need.FULL  # the lines past the bound were never glued: the safe answer
    more = check(lines)
    if more is Need.NOTHING:
        indicators = indicator_set()
        return Need.FULL if indicators.kinds(lines) - indicators.kinds(raw) else need
    if isinstance(more, Need) or isinstance(need, Need):
        return Need.FULL
    return need if {numbers[n - 1] for n in more if n <= len(numbers)} <= need else Need.FULL
