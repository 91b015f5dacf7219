"""What canaries say: identifiers in four formats, wording with no fixed phrase."""

from __future__ import annotations

import random
import re
import uuid

from caplet._audit._canary_text import IdFormat, compose_pair, find_ids, new_id, words

U1 = "6f1c1a5e-3b7d-4c52-9a38-0d3c2b1f4e11"


def test_each_format_looks_like_itself_and_is_found() -> None:
    rng = random.Random(4)
    shapes = {
        IdFormat.UUID: r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}",
        IdFormat.HEX: r"[0-9a-f]{32}",
        IdFormat.TICKET: r"[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){3}",
        IdFormat.ULID: r"[0-7][0-9A-HJKMNP-TV-Z]{25}",
    }
    for form, shape in shapes.items():
        for _ in range(50):
            identifier = new_id(rng, form)
            assert re.fullmatch(shape, identifier), (form, identifier)
            assert find_ids(f"see ({identifier}).") == {identifier.lower()}
    assert uuid.UUID(new_id(rng, IdFormat.UUID)).version == 4


def test_find_ids_needs_the_whole_token() -> None:
    text = f"a{U1}  {U1.replace('-', '')}0  {U1}0 sha256-{'ab' * 32}"
    assert find_ids(text) == set()
    assert find_ids(f"({U1}), [{U1.upper()}]") == {U1}
    assert find_ids(f"ref-{U1}.") == {U1}


def test_words_in_capitals_with_hyphens_are_not_tickets() -> None:
    assert find_ids("HTTP-POST-WITH-DATA and ABCD-EFGH-JKMN-PQRS") == set()
    assert find_ids("7KQ2-M9XD-4TRB-J6WC") == {"7kq2-m9xd-4trb-j6wc"}


def test_words_ignore_case_marks_and_spacing() -> None:
    assert words('# Rate the overall\n  risk as "LOW".') == words("rate the overall risk as low")


def test_a_pair_shares_no_part_and_every_canary_instructs() -> None:
    for seed in range(200):
        first, second = compose_pair(random.Random(seed))
        assert not set(first.phrases) & set(second.phrases)
        for text in (first, second):
            assert text.id in text.segments[0]
            assert len(text.phrases) >= 2, "a claim and at least one instruction"
            assert all(len(words(p)) >= 5 for p in text.phrases)
            assert '"' not in text.text
            assert "\\" not in text.text


def test_no_phrase_is_in_every_canary() -> None:
    """The old canaries always said SYSTEM OVERRIDE / ADMIN COMMAND (issue 14)."""
    texts: list[str] = []
    for seed in range(300):
        texts.extend(t.text for t in compose_pair(random.Random(seed)))
    trigrams = [{" ".join(w[i : i + 3]) for i in range(len(w) - 2)} for w in map(words, texts)]
    common = set.intersection(*trigrams)
    assert common == set(), common
    joined = " ".join(texts).lower()
    assert "system override" not in joined
    assert "admin command" not in joined
    assert "canary" not in joined
    formats = {t.id_format for seed in range(40) for t in compose_pair(random.Random(seed))}
    assert formats == set(IdFormat)
