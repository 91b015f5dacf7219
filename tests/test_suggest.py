"""'Did you mean' suggestions: Levenshtein distance <= 3, ties to the first candidate."""

from __future__ import annotations

import pytest

from caplet._suggest import closest, did_you_mean, levenshtein


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [("", "", 0), ("abc", "abc", 0), ("", "abc", 3), ("kitten", "sitting", 3), ("flaw", "lawn", 2)],
)
def test_levenshtein(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


def test_closest_within_three_edits() -> None:
    assert closest("unaprove", ["approve", "unapprove", "enable"]) == "unapprove"
    assert closest("xyzzy", ["approve", "unapprove"]) is None


def test_ties_go_to_the_first_candidate() -> None:
    assert closest("cat", ["bat", "hat"]) == "bat"
    assert closest("cat", ["hat", "bat"]) == "hat"


def test_did_you_mean_text() -> None:
    assert did_you_mean("helo", ["hello"]) == " (did you mean 'hello'?)"
    assert did_you_mean("zzzzzz", ["hello"]) == ""
