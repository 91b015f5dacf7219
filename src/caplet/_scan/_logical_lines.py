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
"""

from __future__ import annotations

from collections.abc import Callable

from caplet._scan._prefilter import Need

__all__ = ["joined", "with_logical_lines"]

Answer = Need | frozenset[int]


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
    found = joined(text)
    if found is None:
        return need
    logical, spans = found
    more = check(logical)
    if more is Need.NOTHING:
        return need
    if more is Need.FULL or need is Need.NOTHING:
        return Need.FULL
    lines = frozenset(p for n in more for p in range(spans[n - 1][0], spans[n - 1][1] + 1))
    # focus lines the physical text already asks for are enough; a hit only the joined
    # text has may need bindings anywhere (the names its line binds are followed from
    # the physical lines), so the whole file is visited, as for NFKC-folded hits
    return need if lines <= need else Need.FULL
