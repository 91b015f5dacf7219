"""The prefilter's RE2 sets (:mod:`caplet._scan._prefilter`): groups of numbered patterns
answering as one, what a set that could not answer says, and the bytes a text is matched
as (``utf8``: the prefilter's, the glue search's and the indicators' alike).

Apart from the prefilter's decisions (which patterns a file holds mean what) because
this is only how they are matched; split out of ``_prefilter`` when it grew past 600
lines (prefast8, issue 16).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import accumulate, count
from typing import Any, Final

import re2

__all__ = ["BLIND", "MAX_MEM", "Sets", "newlines", "utf8"]

#: RE2's memory for each compiled set and for the one-alternation locator
#: (its default, 8 MiB, runs the DFA out of memory on large files).
MAX_MEM: Final = 64 << 20

#: What :meth:`Sets.Match` answers when a set could not answer at all.
#: ``RE2::Set::Match`` returns "no match" when its DFA fails (out of memory) and
#: google-re2's wrapper drops the error, so a failed set looks exactly like a
#: file with no threat token: fail open. Each set therefore holds a sentinel,
#: ``\A``, that matches every text; an answer without it is a failure, and a
#: failure means "the whole file" (prefast's report, issue 16).
BLIND: Final = -1


class Sets:
    """Groups of numbered patterns, each compiled as one RE2 set or more, answering as one.

    RE2 builds a set's DFA lazily, state by state, and a state holds a
    position in every pattern at once: one set of the solo patterns and one of
    the pairs build fewer states than one set of both (the product of their
    positions). On a first pass over new text, which every ``caplet scan``
    process makes, that halves the matching (issue 16); a warm DFA pays a
    second pass instead. A group asked to (``split``) is compiled as that many sets,
    its distinct patterns dealt out in turn: the pairs' 63 patterns as two sets of
    about 32 built 0.09 s fewer CPU seconds of states on a first pass over the stdlib
    (0.13 s instead of 0.22) for 0.012 s more once warm (speed16).
    """

    def __init__(self, groups: list[list[tuple[int, str]]], split: Sequence[int] = ()) -> None:
        #: Each compiled set, with the indices (the caller's numbering) its patterns
        #: answer for: a pattern two pairs share (a network module, a process call) is
        #: added once and answers for both, one DFA position instead of two.
        self.parts: list[tuple[list[list[int]], Any]] = []
        #: Each part's group (:meth:`each_answers` asks each group for a hit).
        self.groups: list[int] = []
        for number, group in enumerate(groups):
            owners: dict[str, list[int]] = {}
            for index, pattern in group:
                owners.setdefault(pattern, []).append(index)
            ways = split[number] if number < len(split) else 1
            patterns = list(owners)
            for way in range(ways):
                options = re2.Options()
                options.max_mem = MAX_MEM
                compiled: Any = re2.Set.SearchSet(options)
                # Pattern 0 of every set is the sentinel (see BLIND): it owns no index.
                compiled.Add(r"\A")
                dealt = patterns[way::ways]
                for pattern in dealt:
                    compiled.Add(pattern)
                compiled.Compile()
                self.parts.append(([[], *(owners[p] for p in dealt)], compiled))
                self.groups.append(number)

    def Match(self, data: bytes) -> list[int]:  # noqa: N802 -- the RE2 Set's own name
        """The caller's indices of every pattern found, or ``[BLIND]`` if a set failed."""
        found: list[int] = []
        for owners, compiled in self.parts:
            answer = compiled.Match(data) or ()
            if 0 not in answer:
                return [BLIND]
            for i in answer:
                found.extend(owners[i])
        return found

    def each_answers(self, data: bytes) -> bool:
        """Whether every compiled set answers ``data`` (its sentinel) and every group
        finds some pattern in it (the self-check's probe)."""
        hit: set[int] = set()
        for (_, compiled), group in zip(self.parts, self.groups, strict=True):
            answer = compiled.Match(data) or ()
            if 0 not in answer:
                return False
            if len(answer) > 1:
                hit.add(group)
        return hit == set(self.groups)


def utf8(text: str) -> bytes:
    """``text`` as the RE2 sets and patterns match it: UTF-8, lone surrogates (possible in
    an in-memory str) passed through (surrogatepass)."""
    return text.encode("utf-8", "surrogatepass")


def newlines(data: bytes) -> list[int]:
    """The offset of every newline of ``data`` in order, then ``len(data)``: offset ``at``
    is on line ``bisect_left(newlines(data), at) + 1``. Built at C speed (the lines'
    lengths summed, plus one newline before each); locating a large file's hits counted
    the newlines from the file's start again for each pattern (a fifth of the
    locating's CPU on the stdlib, speed16)."""
    return list(map(operator.add, accumulate(map(len, data.split(b"\n"))), count()))
