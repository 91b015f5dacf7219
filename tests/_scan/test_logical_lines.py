"""The prefilter over logical lines (caplet._scan._logical_lines).

The attack is tune sample cn3-decoder-def after benchmarks/mutate_recall.py's
``continuations`` rewrite: a backslash continuation inside the lookup's call
hid it from the prefilter's one-line patterns (issue 16), while the whole-file
pass flagged it.
"""

from __future__ import annotations

import itertools

import pytest

from caplet._scan._logical_lines import joined, logical_text, with_logical_lines
from caplet._scan._prefilter import Need
from tests._scan.prefilterkit import text_both_ways

_CONTINUED = '''\
"""Colour helpers."""

def _j(\\
    tail, head):
    return head + tail

def _r(\\
    text):
    return text[::-1]
getattr(\\
    __builtins__, _j('ec', 'ex'))(_r(")'di'(metsys.so;so tropmi"))
'''


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_lookup_split_by_a_continuation_is_flagged_as_if_whole(
    newline: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _CONTINUED.replace("\n", newline)
    filtered, whole = text_both_ways(text, "cn3dd/__init__.py", monkeypatch)
    assert ("CPL-THR-003", 10) in filtered
    assert whole == filtered


def test_continuations_are_joined_with_the_lines_they_span() -> None:
    found = joined("a = 1\nb = \\\n  2 + \\\n  3\nc = 4\n")
    assert found is not None
    text, spans = found
    assert text.split("\n")[:3] == ["a = 1", "b =    2 +    3", "c = 4"]
    assert spans[:3] == [(1, 1), (2, 4), (5, 5)]
    assert joined("a = 1\nb = 2\n") is None


@pytest.mark.parametrize(
    ("physical", "logical", "expected"),
    [
        (Need.FULL, Need.NOTHING, Need.FULL),  # already whole: the joined text is not read
        (Need.NOTHING, Need.NOTHING, Need.NOTHING),
        (Need.NOTHING, frozenset({2}), Need.FULL),  # a hit only the joined text has
        (frozenset({2, 3, 4}), frozenset({2}), frozenset({2, 3, 4})),  # already in focus
        (frozenset({5}), frozenset({2}), Need.FULL),
        (frozenset({5}), Need.FULL, Need.FULL),
    ],
)
def test_the_answer_is_widened_only_by_what_the_joined_lines_add(
    physical: Need | frozenset[int],
    logical: Need | frozenset[int],
    expected: Need | frozenset[int],
) -> None:
    text = "a = 1\nb = \\\n  2 + \\\n  3\nc = 4\n"
    assert with_logical_lines(text, physical, lambda _: logical) == expected


def test_a_file_without_continuations_is_not_checked_again() -> None:
    def never(_: str) -> Need:
        raise AssertionError("checked again")

    assert with_logical_lines("a = 1\n", Need.NOTHING, never) is Need.NOTHING


def test_the_fast_join_is_the_line_by_line_join() -> None:
    # every text of up to seven pieces among letters, blanks, backslashes and line
    # ends (continuations at the end of the text, lone carriage returns, escaped
    # backslashes): the C-speed join must give what the line-by-line join gives
    pieces = ("a", " ", "\\", "\r", "\n")
    for size in range(8):
        for parts in itertools.product(pieces, repeat=size):
            text = "".join(parts)
            found = joined(text)
            assert logical_text(text) == (None if found is None else found[0]), repr(text)
