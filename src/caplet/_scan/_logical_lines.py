"""The prefilter's answer for the file's logical lines: backslash continuations joined.

The prefilter's patterns read one physical line at a time where a call's parts
must sit together (``getattr(`` and its arguments, a lookup and the pieces of
its name). A backslash continuation (``getattr(\\`` then ``__builtins__, n)``
on the next line) is the same statement to Python, so it must be the same to
the prefilter: a file that has one is also checked with the continuations
joined, and what that finds is mapped back to the physical lines it spans
(benchmarks/mutate_recall.py's ``continuations`` rewrite, issue 16): when that
finds more than the physical lines did, the whole file is visited.
Joining a backslash that ends a comment or sits inside a string only adds hits,
which costs a parse, never a finding.

Every file of a package is asked, so the common answers are found at C speed
(issue 16: the line-by-line join was an eighth of the prefilter's time on the
benign corpus): no backslash at all (three files in four), no backslash before
a line end, and the joined text itself made by two replacements; the line
spans are only worked out for an answer that needs them (a file visited around
its hits whose joined text has hits of its own).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from caplet._scan._prefilter import Need

__all__ = ["joined", "logical_text", "with_logical_lines"]

Answer = Need | frozenset[int]

#: A backslash continuation: a backslash ending a line (Python ends lines at \n or
#: \r\n here, as :func:`joined` splits them). Linear: no repetition to backtrack.
_CONTINUATION = re.compile(r"\\\r?\n")


def logical_text(text: str) -> str | None:
    """``joined(text)[0]`` without the spans, at C speed; ``None`` when there is no
    continuation. Each continuation (the backslash and the line end) becomes one
    space; a backslash on the last line, with no line end after it (and the carriage
    return after it), is dropped, as :func:`joined` drops it
    (tests/_scan/test_logical_lines.py holds the two to the same text)."""
    if "\\" not in text or _CONTINUATION.search(text) is None:
        return None
    logical = text.replace("\\\r\n", " ").replace("\\\n", " ")
    last = logical[logical.rfind("\n") + 1 :]
    if last.endswith("\\"):
        return logical[:-1]
    if last.endswith("\\\r"):
        return logical[:-2]
    return logical


def joined(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """``text`` with every backslash continuation joined, and for each of its lines the
    first and last physical line (1-based) it spans; ``None`` when there is none."""
    if "\\\n" not in text and "\\\r\n" not in text:
        return None
    logical: list[str] = []
    spans: list[tuple[int, int]] = []
    pending: list[str] = []
    start = 1
    for number, line in enumerate(text.split("\n"), start=1):
        body = line[:-1] if line.endswith("\r") else line
        if body.endswith("\\"):
            if not pending:
                start = number
            pending.append(body[:-1])
            continue
        if pending:
            logical.append(" ".join([*pending, line]))
            spans.append((start, number))
            pending = []
        else:
            logical.append(line)
            spans.append((number, number))
    if pending:  # a continuation on the last line: not valid Python, kept as it is
        logical.append(" ".join(pending))
        spans.append((start, start + len(pending) - 1))
    return "\n".join(logical), spans


def with_logical_lines(text: str, need: Answer, check: Callable[[str], Answer]) -> Answer:
    """``need`` (the prefilter's answer for ``text`` as written), widened by what
    ``check`` finds in its logical lines, mapped back to physical ones."""
    if need is Need.FULL:
        return need
    logical = logical_text(text)
    if logical is None:
        return need
    more = check(logical)
    if more is Need.NOTHING:
        return need
    if more is Need.FULL or need is Need.NOTHING:
        return Need.FULL
    found = joined(text)
    assert found is not None  # logical_text found a continuation
    spans = found[1]
    lines = frozenset(p for n in more for p in range(spans[n - 1][0], spans[n - 1][1] + 1))
    # focus lines the physical text already asks for are enough; a hit only the joined
    # text has may need bindings anywhere (the names its line binds are followed from
    # the physical lines), so the whole file is visited, as for NFKC-folded hits
    return need if lines <= need else Need.FULL
