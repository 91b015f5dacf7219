"""What a prefilter hit line may bind, and the lines that use it (caplet._scan._aliases)."""

from __future__ import annotations

import pytest

from caplet._scan._aliases import MAX_BOUND, follow, note_binding


def _bound(line: bytes) -> set[bytes]:
    bound: set[bytes] = set()
    assert note_binding(line, 0, bound, set())
    return bound


@pytest.mark.parametrize(
    ("line", "names"),
    [
        (b"ns = vars(builtins)", {b"ns"}),
        (b"x = 1; ns = vars(builtins)", {b"x", b"ns"}),
        (b"x = ns = vars(builtins)", {b"x", b"ns"}),
        (b"(x, ns) = 1, vars(builtins)", {b"x", b"ns"}),
        (b"if (ns := vars(builtins)):", {b"ns"}),
        (b"import builtins as b", {b"b"}),
        (b"for k, v in vars(builtins).items():", {b"k", b"v"}),
        (b"a, *rest = getattr(os, name)", {b"a", b"rest"}),
    ],
)
def test_every_target_of_a_hit_line_is_bound(line: bytes, names: set[bytes]) -> None:
    # More is only a visit more (``for k in vars(builtins)`` also binds "builtins")
    assert names <= _bound(line)


def test_keywords_bind_nothing() -> None:
    assert _bound(b"x = None if y else eval") == {b"x"}


def test_past_the_bound_the_answer_is_no() -> None:
    line = b"; ".join(b"n%d = 1" % i for i in range(MAX_BOUND + 1))
    assert not note_binding(line, 0, set(), set())


def test_a_line_is_read_once() -> None:
    text = b"a = getattr(os, x); b = getattr(os, y)\n"
    bound: set[bytes] = set()
    seen: set[int] = set()
    assert note_binding(text, 4, bound, seen)
    bound.clear()
    assert note_binding(text, 25, bound, seen)
    assert bound == set()  # the same line: already read


def test_uses_are_followed_but_not_longer_names() -> None:
    text = b"ns = vars(builtins)\nnsx = 1\nx_ns = 2\n\ndef f(k):\n    return ns[k]\nns2 = ns\n"
    lines: set[int] = set()
    assert follow(text, {b"ns"}, lines, 100)
    assert lines == {1, 6, 7}


def test_past_the_limit_the_answer_is_no() -> None:
    text = b"ns = 1\n" + b"ns\n" * 10
    assert not follow(text, {b"ns"}, set(), 5)
