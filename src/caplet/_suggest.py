"""'Did you mean ...?' suggestions for mistyped names (commands, plugins, fields)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "MAX_SUGGESTED_LENGTH",
    "MAX_SUGGESTION_DISTANCE",
    "closest",
    "did_you_mean",
    "levenshtein",
]

#: Candidates farther than this many edits are not suggested (issue 2, point 9).
MAX_SUGGESTION_DISTANCE = 3
#: A name longer than this gets no suggestion: nobody mistypes a name that long, and the
#: distance costs the product of the two lengths, in the host's process. Guest code, a
#: plugin's ``ctx.plugins.call`` and a manifest's unknown key choose the name: a
#: 250,000-character one took 13 s of the host's CPU, the GIL held (red team round 32).
MAX_SUGGESTED_LENGTH = 256


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
    preference by ordering ``candidates``. None for a name longer than
    :data:`MAX_SUGGESTED_LENGTH`.
    """
    if len(name) > MAX_SUGGESTED_LENGTH:
        return None
    best: str | None = None
    best_distance = MAX_SUGGESTION_DISTANCE + 1
    for candidate in candidates:
        if abs(len(name) - len(candidate)) >= best_distance:
            # The distance is at least the difference in length: this one cannot
            # win, and is never measured (its length may be anything).
            continue
        distance = levenshtein(name, candidate)
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` or an empty string, ready to append to a message."""
    match = closest(name, candidates)
    return f" (did you mean {match!r}?)" if match is not None else ""
