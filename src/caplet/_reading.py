"""Text as a language model reads it: :func:`as_read`, one rule for scanner and auditor.

A model reads a plugin's text differently from a byte comparison: tag
characters (U+E0020-U+E007E) as the ASCII they encode, zero-width spaces,
joiners and soft hyphens (format characters, category Cf) not at all,
fullwidth letters and no-break spaces as their plain forms (NFKC). So
``"ign\\u200bore previous instructions"`` steers a model as the plain
sentence does, and a person reviewing it sees the plain sentence too.

Two places must read text this way and agree: the scanner's rule on text
addressed to an auditor (CPL-AUD-001, :mod:`caplet._scan._filescan`, with the
package prefilter's skip) and the auditor's search for the quote of an
injection it reports (:mod:`caplet._audit._injections`). Before attack20 only
the auditor did; the rule missed what the model then read.

A model also reads letters of other scripts that look Latin as the Latin
ones, and accented letters as their base letters: Cyrillic "\u043e" in
"ign\u043ere", "\u00ecgnore", a mark that composes with nothing. NFKC leaves
each alone, so after it :data:`caplet._lookalikes.LETTERS` are read as their
ASCII letters (Unicode TR39's confusables and the base letter of a
decomposition; that module says why a table of caplet's own) and every
nonspacing mark is dropped (mend19).
"""

from __future__ import annotations

import codecs
import functools
import re
import unicodedata
from typing import Final

import re2

from caplet._display import FORMAT
from caplet._lookalikes import LATIN, LETTERS, MARK_BOUNDS
from caplet._marks import longest_mark_run, stream_safe

__all__ = [
    "as_read",
    "data_text",
    "escapes_as_read",
    "file_index",
    "name_as_read",
    "reads_differently",
]

#: Unicode's tag characters U+E0020-U+E007E: invisible, each the ASCII character 0xE0000 below.
_TAGS: Final = {code: code - 0xE0000 for code in range(0xE0020, 0xE007F)}
#: Unicode's default-ignorable code points that are not format characters: variation
#: selectors (U+FE00-FE0F, U+E0100-E01EF, Mongolian U+180B-180F), the combining
#: grapheme joiner and Khmer's inherent vowels. Marks (Mn), drawn as nothing and read
#: past; "ign\ufe0fore previous instructions" was missed by the rule (attack21).
_IGNORED: Final = "\u034f\u17b4\u17b5\u180b-\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef"
#: The Hangul fillers (default-ignorable letters, Lo): a font draws a blank, so a model
#: reads a word break (NFKC folds U+3164 and U+FFA0 to U+1160).
_FILLERS: Final = {0x115F: " ", 0x1160: " ", 0x3164: " ", 0xFFA0: " "}
#: The white space that neither NFKC nor RE2's ``\s`` (``[\t\n\f\r ]``) reads as a
#: blank: the vertical tab, the information separators, NEL, the ogham space mark, the
#: line and paragraph separators. Python's ``str.split`` and a model read each as one;
#: "ignore\u2028previous\x0binstructions" was missed by the rule (attack21). Each reads
#: as a blank within its line (the rule's lines are split at ``\n`` and ``\r`` only).
_ASCII_BLANKS: Final = "\x0b\x1c\x1d\x1e\x1f"
_BLANKS: Final = {ord(c): " " for c in _ASCII_BLANKS + "\x85\u1680\u2028\u2029"}
_READ_AS_BLANK: Final = {**_FILLERS, **_BLANKS}
#: What :func:`as_read` drops after NFKC: a format character or another ignorable one.
_DROPPED: Final = re.compile(f"[{FORMAT.pattern[1:-1]}{_IGNORED}]")
#: Any character as_read drops or blanks, over UTF-8, in RE2: a linear scan of a
#: file's bytes (Python's ``re`` took 44 ns a character over non-ASCII text,
#: str.translate 180).
_HIDDEN_UTF8: Final = re2.compile(
    f"[{FORMAT.pattern[1:-1]}{_IGNORED}{''.join(map(chr, _READ_AS_BLANK))}]".encode()
)

#: The nonspacing marks, as a character class's ranges.
_MARKS: Final = "".join(
    f"{MARK_BOUNDS[i]}-{MARK_BOUNDS[i + 1]}" for i in range(0, len(MARK_BOUNDS), 2)
)


@functools.cache
def _fold_table() -> dict[int, int | None]:
    """Lookalike and accented letters as their ASCII letters, nonspacing marks as nothing:
    2,960 entries, built at the first text that needs them, not at import (0.4 ms of
    every ``caplet scan``'s start-up, issue 16)."""
    return {
        **str.maketrans(LETTERS, LATIN),
        **{
            code: None
            for i in range(0, len(MARK_BOUNDS), 2)
            for code in range(ord(MARK_BOUNDS[i]), ord(MARK_BOUNDS[i + 1]) + 1)
        },
    }


#: Any character the fold changes, over UTF-8: the prefilter's check (reads_differently).
_FOLDED_UTF8: Final = re2.compile(f"[{re.escape(LETTERS)}{_MARKS}]".encode())


def _fold(text: str) -> str:
    """``text`` with :func:`_fold_table` applied to its lines that are not ASCII: a text
    with one accented name in it is not translated whole (str.translate: 48 ns a
    character)."""
    if _FOLDED_UTF8.search(_utf8(text)) is None:
        return text
    fold = _fold_table()
    return "\n".join(line if line.isascii() else line.translate(fold) for line in text.split("\n"))


def _ascii_blank(text: str) -> bool:
    """Whether ASCII ``text`` holds a blank :data:`_BLANKS` reads (a few memchr scans)."""
    return any(char in text for char in _ASCII_BLANKS)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def as_read(text: str) -> str:
    """``text`` as a model reads it: tags as ASCII, NFKC, format characters and the other
    default-ignorable ones dropped (the Hangul fillers, and white space that is no
    blank to a regular expression, read as one).

    Never adds or removes a ``\n`` or ``\r`` (no character folds to one), so a
    text's lines read are its lines. ASCII text is returned as it is (its rare
    blanks aside), and each step runs only where a C-speed check says it
    changes something.
    """
    if text.isascii():
        return text.translate(_BLANKS) if _ascii_blank(text) else text
    encoded = _utf8(text)
    # runs of marks bounded first: NFKC sorts each run in quadratic time (attack23); the
    # joiners this puts in are default-ignorable, dropped below
    safe = stream_safe(text, encoded)
    if safe is not text:
        text, encoded = safe, _utf8(safe)
    hidden = _HIDDEN_UTF8.search(encoded) is not None  # tag characters are format too
    if hidden:
        text = text.translate(_TAGS)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    if hidden:
        text = _DROPPED.sub("", text.translate(_READ_AS_BLANK))
    return _fold(text)


def reads_differently(text: str, encoded: bytes | None = None) -> bool:
    """Whether :func:`as_read` changes ``text``, without building the text read.

    ``encoded``: ``text`` in UTF-8 (surrogates passed), when the caller has
    it already (the prefilter). C-speed: an ASCII check, one RE2 search, NFKC's
    quick check.
    """
    if text.isascii():
        return _ascii_blank(text)
    if encoded is None:
        encoded = _utf8(text)
    return (
        _HIDDEN_UTF8.search(encoded) is not None
        # before NFKC's check, which sorts a run of marks as NFKC does (attack23)
        or longest_mark_run(text, encoded) is not None
        or not unicodedata.is_normalized("NFKC", text)
        or _FOLDED_UTF8.search(encoded) is not None
    )


def file_index(text: str, read_index: int) -> int:
    """The index in ``text`` of the character :func:`as_read` put at ``read_index``.

    Each character is read on its own, so a sequence NFKC composes places
    the index a character late at most: for pointing at a match, not slicing.
    """
    seen = 0
    for index, char in enumerate(text):
        seen += len(as_read(char))
        if seen > read_index:
            return index
    return len(text)


#: Byte-order marks of the encodings that have them, longest first (UTF-32 LE's
#: begins with UTF-16 LE's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: At most one byte in this many may be a NUL or not UTF-8 for a file to be shown
#: as text with those bytes escaped; compressed and image data is about half such.
_TEXT_RATIO = 8


def data_text(data: bytes) -> str | None:
    """A data file as text, the way code reading it with an ordinary encoding sees it.

    One rule for the auditor's prompt (:mod:`caplet._audit._prompt`) and the
    scanner's search of a plugin's text files (:mod:`caplet._scan._prose`).
    Only UTF-8 was shown, and a file with a NUL or one byte that is not UTF-8
    was "binary, content not shown": a help text read as UTF-16 or Latin-1
    and returned to the agent, telling it to run a command, was never read
    by the model (attack18). So: a byte-order mark's encoding (bytes not of it
    escaped); UTF-16 without one, when that reads as printable, mostly ASCII
    text; else UTF-8 with the few bytes
    that are not (Latin-1, cp1252 letters, a NUL) shown as ``\\xNN``. Data
    that is mostly such bytes (an image, an archive) stays binary.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            # A byte that is not of the encoding hides nothing (code reads past it with
            # errors="ignore"): shown escaped, unless most of the file is such bytes.
            text = data.decode(codec, "backslashreplace")
            odd = len(data) - len(data.decode(codec, "ignore").encode(codec))
            return None if odd * _TEXT_RATIO > len(data) else text
    if b"\x00" in data:
        for codec in ("utf-16-le", "utf-16-be"):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                continue
            # Mostly ASCII: UTF-8 text with a NUL also decodes, to CJK.
            if all(c.isprintable() or c in "\n\r\t" for c in text) and 2 * sum(
                c.isascii() for c in text
            ) > len(text):
                return text
    try:
        text = data.decode("utf-8")
        odd = 0
    except UnicodeDecodeError:
        text = data.decode("utf-8", "backslashreplace")
        odd = len(data) - len(data.decode("utf-8", "ignore").encode("utf-8"))
    odd += data.count(0)
    if odd * _TEXT_RATIO > len(data):
        return None
    return text.replace("\x00", "\\x00")


#: What separates the words of a file name: a model reads each as a blank.
_NAME_SEPARATORS: Final = str.maketrans("_-./", "    ")


def name_as_read(path: str) -> str:
    """A plugin file's path as the auditor model reads it in its prompt's list of files:
    ``ignore_previous_instructions.txt`` as words (steer22: where the auditor looks for a
    quote the model reported)."""
    return path.translate(_NAME_SEPARATORS)


#: A TOML or JSON string's escape of one character, or of a blank (``\\t``, ``\\n``...).
_ESCAPE: Final = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})|\\[tnrf]")
#: What an escape is left as: a control, a surrogate (half of a JSON pair, or nothing).
_KEPT: Final = frozenset({"Cc", "Cs", "Zl", "Zp"})


def _decoded(match: re.Match[str]) -> str:
    if match.group(1) is None and match.group(2) is None:
        return " "  # \t, \n, \r, \f: a blank to the model (see below)
    code = int(match.group(1) or match.group(2), 16)
    if code > 0x10FFFF:
        return match.group()
    if chr(code).isspace():
        # A tab or a line break between words reads as a blank to the model, and
        # left escaped ("Ignore\\tprevious") it hid the sentence (attack21); a
        # blank, not a line break, so every later line keeps its number.
        return " "
    return match.group() if unicodedata.category(chr(code)) in _KEPT else chr(code)


def escapes_as_read(text: str) -> str:
    """``text`` with the ``\\uXXXX``/``\\UXXXXXXXX`` escapes of TOML and JSON strings read as
    the characters they stand for (a blank for white space, so lines keep their numbers):
    what a model reading a manifest or a JSON help text takes them for (attack20's rule
    for the scanner; steer22: the auditor's search for a reported quote too)."""
    return _ESCAPE.sub(_decoded, text) if "\\" in text else text
