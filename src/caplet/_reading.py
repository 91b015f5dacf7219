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
"""

from __future__ import annotations

import unicodedata
from typing import Final

import re2

from caplet._display import FORMAT

__all__ = ["as_read", "file_index", "reads_differently"]

#: Unicode's tag characters U+E0020-U+E007E: invisible, each the ASCII character 0xE0000 below.
_TAGS: Final = {code: code - 0xE0000 for code in range(0xE0020, 0xE007F)}
#: :data:`~caplet._display.FORMAT` over UTF-8, in RE2: a linear scan of a file's bytes
#: (Python's ``re`` took 44 ns a character over non-ASCII text, str.translate 180).
_FORMAT_UTF8: Final = re2.compile(FORMAT.pattern.encode())


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def as_read(text: str) -> str:
    """``text`` as a model reads it: tags as ASCII, NFKC, format characters dropped.

    Never adds or removes a line break (no character folds to one), so a
    text's lines read are its lines. ASCII text is returned as it is, and each
    step runs only where a C-speed check says it changes something.
    """
    if text.isascii():
        return text
    hidden = _FORMAT_UTF8.search(_utf8(text)) is not None  # tag characters are format too
    if hidden:
        text = text.translate(_TAGS)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return FORMAT.sub("", text) if hidden else text


def reads_differently(text: str, encoded: bytes | None = None) -> bool:
    """Whether :func:`as_read` changes ``text``, without building the text read.

    ``encoded``: ``text`` in UTF-8 (surrogates passed), when the caller has
    it already (the prefilter). C-speed: an ASCII check, one RE2 search, NFKC's
    quick check.
    """
    if text.isascii():
        return False
    if encoded is None:
        encoded = _utf8(text)
    return _FORMAT_UTF8.search(encoded) is not None or not unicodedata.is_normalized("NFKC", text)


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
