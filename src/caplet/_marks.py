"""Runs of combining marks, bounded before any normalisation or parse (attack23).

Unicode normalisation puts each run of combining marks in canonical order, and
CPython does it by an insertion sort (``unicodedata.c``, ``nfd_nfkd``): quadratic
in the run's length. Marks of two classes alternating in falling order (``a`` and
then ``"\\u0301\\u0316"`` repeated) are the worst case: 40,000 of them took 0.83 s
in :func:`caplet._reading.as_read`, and 2.48 s in :func:`ast.parse` when they
follow a letter of an identifier, since CPython's tokenizer normalises every
non-ASCII identifier (PEP 3131) by the same sort. A 240 KB plugin holding such a
comment took 15 s to scan; a file at the 2 MiB size limit about 70 times that.

No real source holds such a run. The longest in the 92,608 Python files of the
benign corpus (492 top PyPI packages) and CPython 3.11's standard library is 9
marks (jinja2's table of identifier characters). UAX #15 calls text with at most
30 non-starters in a row "stream-safe", and that bound is used here:

* :func:`stream_safe` is for text that is only read (the auditor's and the
  scanner's :func:`~caplet._reading.as_read`, the prefilter's NFKC folding):
  a combining grapheme joiner (U+034F, a starter drawn as nothing, which
  ``as_read`` drops) goes after every 30 marks of a longer run, as UAX #15's
  stream-safe format does, so the sort sees runs of 30 at most;
* :func:`parse` is for source that is parsed: it is not changed, since a joiner
  inside an identifier would make two spellings Python reads as one name look
  like two names to the scanner; a source with a longer run is refused with
  :class:`LongMarkRunError` before :func:`ast.parse` is called, and the file pass
  judges it too complex to check (CPL-SCAN-002).

A run is counted over ``\\p{M}``, every mark (the test checks, over every code
point of the running Python, that each character of a combining class above 0 is
one), and the two halfwidth katakana sound marks, the only other characters that
decompose to non-starters (U+FF9E, U+FF9F). That is more than UAX #15's
non-starters: spacing marks of class 0 count too, which only makes the bound
come earlier; the corpus's longest run above counts them as well. A mark that
decomposes to two or three non-starters (U+0344, U+0F73) keeps the sort's runs
within three times the bound. C-speed: one RE2 search over UTF-8, and only for
text that is not ASCII.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, Literal, overload

import re2

if TYPE_CHECKING:
    import ast

__all__ = ["MAX_MARKS", "LongMarkRunError", "longest_mark_run", "parse", "stream_safe"]

#: The longest run of marks text may hold: UAX #15's bound for stream-safe text.
MAX_MARKS: Final = 30
#: The combining grapheme joiner: a starter (class 0) that is drawn as nothing.
_JOINER: Final = "\u034f"
_MARK: Final = r"[\p{M}\x{FF9E}\x{FF9F}]"


@functools.cache
def _runs() -> Any:
    """Runs of four marks or more, over UTF-8 (surrogates passed): compiled at the first
    text that is not ASCII, in 1 ms. RE2 compiles a pattern of 31 marks in a row in
    13-15 ms, a tenth of the whole start-up of a ``caplet scan`` (issue 16's 150 ms), so
    a run's length is counted here instead, for the rare runs of four or more."""
    return re2.compile(f"{_MARK}{{4,}}".encode())


def _long_runs(data: bytes) -> Iterator[tuple[int, int, int]]:
    """Each run of more than :data:`MAX_MARKS` marks in UTF-8 ``data``: its start and end
    (byte offsets) and its length in characters."""
    for run in _runs().finditer(data):
        start, end = run.span()
        # every mark takes two bytes of UTF-8 or more: a shorter match is within the bound
        if end - start > 2 * MAX_MARKS:
            length = len(data[start:end].decode("utf-8", "surrogatepass"))
            if length > MAX_MARKS:
                yield start, end, length


class LongMarkRunError(ValueError):
    """A source holds a run of more than :data:`MAX_MARKS` combining marks: not parsed.

    A :class:`ValueError`, as :func:`ast.parse` raises for a NUL byte, so that
    every caller that treats a source it cannot parse as unreadable does so
    for this one too."""

    def __init__(self, line: int, length: int) -> None:
        super().__init__(
            f"line {line} holds a run of {length} combining marks (no real source holds more "
            f"than {MAX_MARKS}): Python normalises identifiers by a sort quadratic in such a "
            "run, so the source is not parsed; remove the run"
        )
        self.line = line
        self.length = length


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def longest_mark_run(text: str, encoded: bytes | None = None) -> tuple[int, int] | None:
    """The line (1-based) and length of the first run of more than :data:`MAX_MARKS`
    marks in ``text``, or ``None``. ``encoded``: ``text`` in UTF-8 (surrogates
    passed) when the caller has it."""
    if text.isascii():
        return None
    data = _utf8(text) if encoded is None else encoded
    for start, _, length in _long_runs(data):
        return data.count(b"\n", 0, start) + 1, length
    return None


def stream_safe(text: str, encoded: bytes | None = None) -> str:
    """``text`` with a combining grapheme joiner after every :data:`MAX_MARKS` marks of
    a longer run (UAX #15's stream-safe format); ``text`` itself when it holds none.
    ``encoded``: ``text`` in UTF-8 (surrogates passed) when the caller has it."""
    if text.isascii():
        return text
    data = _utf8(text) if encoded is None else encoded
    pieces: list[bytes] = []
    done = 0
    for start, end, _ in _long_runs(data):
        marks = data[start:end].decode("utf-8", "surrogatepass")
        chunks = (marks[i : i + MAX_MARKS] for i in range(0, len(marks), MAX_MARKS))
        pieces += (data[done:start], _JOINER.join(chunks).encode("utf-8", "surrogatepass"))
        done = end
    if not pieces:
        return text
    pieces.append(data[done:])
    return b"".join(pieces).decode("utf-8", "surrogatepass")


@overload
def parse(source: str, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...


@overload
def parse(source: str, filename: str = ..., *, mode: Literal["eval"]) -> ast.Expression: ...


def parse(
    source: str, filename: str = "<unknown>", mode: Literal["exec", "eval"] = "exec"
) -> ast.Module | ast.Expression:
    """:func:`ast.parse` of ``source``, refused (:class:`LongMarkRunError`) when it holds a
    run of more than :data:`MAX_MARKS` marks, which would make the parse quadratic.

    Every parse of a plugin's or a package's text goes through here (a test holds
    the scanner and the auditor to it)."""
    run = longest_mark_run(source)
    if run is not None:
        raise LongMarkRunError(*run)
    # imported here: the modules that parse load at the first file parsed, and a scan
    # the prefilter decides whole never pays for ast (issue 16's start-up)
    import ast

    if mode == "eval":
        return ast.parse(source, filename=filename, mode="eval")
    return ast.parse(source, filename=filename)
