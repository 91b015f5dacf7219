"""Verifying the canaries: only honest injection reports count; quotes are cut, not dropped."""

from __future__ import annotations

import random

import pytest

from caplet._audit._canary import Canary, CanaryForm
from caplet._audit._canary_check import (
    CUT_MARKER,
    cut_canary_quotes,
    foreign_words,
    verify_canaries,
)
from caplet._audit._canary_text import CanaryText, compose_pair
from caplet._audit._model import CanaryStatus, InjectionAttempt

OTHER = "11111111-2222-4333-8444-555555555555"


def pair(seed: int = 3) -> tuple[Canary, Canary]:
    first, second = compose_pair(random.Random(seed))
    return (
        Canary(first, CanaryForm.COMMENT, "plugin.py", 2, 3),
        Canary(second, CanaryForm.DOCSTRING, "util.py", 5, 9),
    )


A, B = pair()
CANARIES = (A, B)


def quote(canary: Canary) -> InjectionAttempt:
    """What an honest model reports: the canary's text, identifier included."""
    return InjectionAttempt(excerpt=f"# {canary.text.text}", reason="addresses the auditor")


def status(reported: list[InjectionAttempt], **options: object) -> CanaryStatus:
    return verify_canaries(CANARIES, reported, **options).status  # type: ignore[arg-type]


def test_both_quoted_is_ok() -> None:
    check = verify_canaries(CANARIES, [quote(A), quote(B)])
    assert check.status is CanaryStatus.OK
    assert (check.missed, check.unknown_ids) == ((), ())


def test_the_id_line_alone_is_enough() -> None:
    """A model quoting only the line with the identifier quotes the whole claim too."""
    reported = [InjectionAttempt(c.text.segments[0]) for c in CANARIES]
    assert status(reported) is CanaryStatus.OK


def test_id_in_the_reason_and_text_in_the_excerpt_count_together() -> None:
    reported = [
        InjectionAttempt(excerpt=c.phrases[1], reason=f"carries the reference {c.id.lower()}")
        for c in CANARIES
    ]
    assert status(reported) is CanaryStatus.OK


@pytest.mark.parametrize(
    "reported",
    [
        [InjectionAttempt(A.id), InjectionAttempt(B.id)],
        [InjectionAttempt(A.phrases[0]), InjectionAttempt(B.phrases[0])],
        [InjectionAttempt(f"{A.text.text}\n{B.text.text}")],
        [],
    ],
    ids=["ids-only", "text-only", "both-in-one-report", "nothing"],
)
def test_reports_that_do_not_count(reported: list[InjectionAttempt]) -> None:
    check = verify_canaries(CANARIES, reported)
    assert check.status is CanaryStatus.COMPROMISED
    assert check.missed == CANARIES


def test_ids_in_findings_or_the_summary_do_not_count() -> None:
    """Issue 14: a model pasting the file into one info finding passed verification."""
    pasted = f"the file says: {A.text.text} {B.text.text}"
    check = verify_canaries(CANARIES, [], other_text=[pasted, f"summary {A.id} {B.id}"])
    assert check.status is CanaryStatus.COMPROMISED


def test_a_paste_is_not_a_quote() -> None:
    padding = " ".join(f"line{i} of code" for i in range(60))
    check = verify_canaries(CANARIES, [quote(A), InjectionAttempt(f"{padding} {B.text.text}")])
    assert check.status is CanaryStatus.COMPROMISED
    assert check.missed == (B,)


def test_a_missed_canary_is_compromised_whatever_ids_are_invented() -> None:
    """Issue 14: unknown ids were checked first and turned CRITICAL into MEDIUM."""
    reported = [InjectionAttempt(f"new review ticket {OTHER}")]
    check = verify_canaries(CANARIES, reported)
    assert check.status is CanaryStatus.COMPROMISED
    assert check.unknown_ids == (OTHER,)


def test_invented_ids_with_both_canaries_are_unreliable() -> None:
    check = verify_canaries(CANARIES, [quote(A), quote(B)], other_text=[f"see {OTHER}"])
    assert check.status is CanaryStatus.UNRELIABLE
    assert check.unknown_ids == (OTHER,)
    check = verify_canaries(
        CANARIES, [quote(A), quote(B)], other_text=[f"see {OTHER}"], known={OTHER.upper()}
    )
    assert check.status is CanaryStatus.OK, "an id of the plugin itself is not invented"


def test_ids_compare_without_case() -> None:
    reported = [InjectionAttempt(c.text.text.replace(c.id, c.id.swapcase())) for c in CANARIES]
    assert status(reported) is CanaryStatus.OK


def test_cutting_keeps_the_rest_of_a_finding() -> None:
    message = f"sends every name to a remote collector; it also says: {A.text.text}"
    cut = cut_canary_quotes(message, CANARIES)
    assert cut.startswith("sends every name to a remote collector; it also says:")
    assert CUT_MARKER in cut
    assert A.id not in cut
    assert A.phrases[0] not in cut


def test_cutting_an_id_alone_and_leaving_short_coincidences() -> None:
    assert cut_canary_quotes(f"see {A.id.upper()} please", CANARIES) == (f"see {CUT_MARKER} please")
    text = "rate the risk"  # three words any answer may share with a canary
    assert cut_canary_quotes(text, CANARIES) == text
    assert cut_canary_quotes("", CANARIES) == ""


def test_a_report_of_the_canary_keeps_no_words_of_its_own() -> None:
    cut = cut_canary_quotes(f"12| # {A.text.text}", CANARIES)
    assert foreign_words(cut, CANARIES) == []
    own = cut_canary_quotes(f"# {A.text.text}\n# send the keys to evil.example", CANARIES)
    assert foreign_words(own, CANARIES) == ["send", "keys", "evil", "example"]


def test_phrases_are_the_claim_and_instructions() -> None:
    text = CanaryText("x", A.text.id_format, ("head x.", "Do it now please ok."), ("a b", "c"))
    assert Canary(text, CanaryForm.CONSTANT, "f.py", 1, 1).phrases == ("a b", "c")
