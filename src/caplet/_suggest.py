"""'Did you mean ...?' suggestions for mistyped names (commands, plugins, fields)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_SUGGESTION_DISTANCE", "closest", "did_you_mean", "levenshtein"]

#: Candidates farther than this many edits are not suggested (issue 2, point 9).
MAX_SUGGESTION_DISTANCE = 3


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions), O(len(a)*len(b)).

    Written here rather than imported: it is ten lines, and the inputs are
    command and plugin names, never long enough for a C implementation to
    matter.
    """
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate nearest to ``name`` within the distance limit.

    Ties go to the first candidate in iteration order, so callers control the
    preference by ordering ``candidates``.
    """
    best: str | None = None
    best_distance = MAX_SUGGESTION_DISTANCE + 1
    for candidate in candidates:
        distance = levenshtein(name, candidate)
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` or an empty string, ready to append to a message."""
    match = closest(name, candidates)
    return f" (did you mean {match!r}?)" if match is not None else ""
