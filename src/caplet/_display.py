"""Untrusted text made safe to show on a terminal: :func:`safe_text` and :func:`safe_line`.

Much of what caplet shows a reviewer is written by someone else: manifest
fields, finding messages and the source lines they quote, an auditor
model's summary and reasons (a model that has just read hostile code),
plugin exception messages and tracebacks, guest output, the stderr tail of
a worker. A terminal treats some characters as commands, so such text
could act during the very review meant to catch it:

* ESC starts ANSI and OSC sequences: erase a line, move the cursor and
  overwrite "DANGER" with "ok", set the window title, write the clipboard
  (OSC 52) or make a link say something else (OSC 8); C1 controls
  (U+0080-U+009F) are the 8-bit forms of the same introducers; CR returns
  to the start of the line to overprint it; DEL, BS and friends edit what
  is shown;
* bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069)
  reorder the characters shown after them (Trojan Source, CVE-2021-42574);
* zero-width and other format characters (category Cf: U+200B, U+FEFF,
  the tag characters U+E0000-U+E007F that can spell a whole invisible
  sentence) make two different names look the same, or hide text; line
  and paragraph separators (U+2028, U+2029) break lines where a reader
  sees none; lone surrogates (from undecodable file names) would make the
  terminal's encoder fail.

Every such character is replaced by its visible escape, as Python spells
it: ``\\x1b``, ``\\u202e``, ``\\U000e0041``. The escapes are printable ASCII,
so escaping twice changes nothing. A backslash is left as it is, so paths
and regular expressions stay readable: source that spells ``\\x1b`` shows
as those four characters, which can look like an escape but never act as
one.

The set is Unicode's categories Cc, Cf, Cs, Zl and Zp, written out as
ranges (Python's ``re`` has no ``\\p{Cf}``, and computing the set from
:mod:`unicodedata` at import would cost every command a scan of all code
points); tests/test_display.py checks the ranges against the running
Python's Unicode database, so a newer Unicode that adds a format character
fails the build rather than passes it unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "BLANK_GLYPHS",
    "DISTINCT_RECORD",
    "FORMAT",
    "listed",
    "one_line",
    "safe_line",
    "safe_text",
    "stripped_text",
]

#: A log record's attribute (``extra={DISTINCT_RECORD: True}``) saying the record is a
#: fact of its own, not a repeat of its message template: a terminal handler that
#: shows a template a few times and then counts it shows such records each time
#: (``_cli._safe.TerminalLogHandler``).
DISTINCT_RECORD: Final = "caplet_distinct"

#: Unicode 15.1's format characters (Cf): invisible, a model reads past them
#: (:mod:`caplet._reading` drops them), a terminal shows nothing.
_FORMAT_RANGES: Final = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
#: One format character (:data:`_FORMAT_RANGES`).
FORMAT: Final = re.compile(f"[{_FORMAT_RANGES}]")
#: Letters and symbols that render as nothing or as a blank but are no space, so no
#: rule for spaces sees them: the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and
#: the Khmer inherent vowels (U+17B4, U+17B5), all Default_Ignorable_Code_Point in
#: Unicode's DerivedCoreProperties, and the Braille blank (U+2800). Shown escaped, a
#: plugin's text cannot pad or indent a line with them (attack34's note).
BLANK_GLYPHS: Final = "\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0"
#: Unicode 15.1's Cc, Cf, Cs, Zl and Zp, minus newline and tab (a multi-line text keeps
#: them; :func:`safe_line` escapes them separately), and the blank glyphs.
_UNSAFE: Final = re.compile(
    f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{_FORMAT_RANGES}{BLANK_GLYPHS}]"
)
_UNSAFE_IN_LINE: Final = re.compile(f"{_UNSAFE.pattern[:-1]}\n\t]")
#: What :data:`_UNSAFE` matches in ASCII, as a table that deletes it.
_ASCII_CONTROLS: Final = dict.fromkeys([*range(0x09), *range(0x0B, 0x20), 0x7F])


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe_text(text: str) -> str:
    """``text`` with every character a terminal would act on, or not show, escaped.

    Newlines and tabs pass: for text that is legitimately multi-line (audit
    reasons, tracebacks, guest output). Where one field must stay one line
    (a name, a table cell, a line of a report), use :func:`safe_line`.
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


#: What could read as the end of one listed item: a comma, a blank, and anything not ASCII.
_SEPARATOR_LIKE: Final = re.compile(r"[,\s'\"]|[^\x00-\x7f]")


def safe_line(text: str) -> str:
    """:func:`safe_text` that also escapes newline and tab (``\\x0a``, ``\\x09``).

    A newline in a one-line field would let its author start a line of their
    own that reads like caplet's (``  risk: LOW`` under the real risk).
    """
    if _UNSAFE_IN_LINE.search(text) is None:
        return text
    return _UNSAFE_IN_LINE.sub(_escape, text)


def listed(items: Iterable[str]) -> str:
    """Texts someone else chose, joined by ``", "`` as one line: each that holds a comma,
    a blank or a character that is not ASCII (a lookalike of either: U+FF0C, U+2002) is
    quoted, so no item reads as two.

    ``fs.read:/tmp/notes, nothing else`` is one capability (a folder of that name), and
    joined with the rest it read as a grant and a remark beside it (attack29); quoted,
    ``'fs.read:/tmp/notes, nothing else'``, it is one item.
    """
    return ", ".join(
        safe_line(repr(item)) if _SEPARATOR_LIKE.search(item) else safe_line(item) for item in items
    )


def stripped_text(text: str) -> str:
    """``text`` without the characters :func:`safe_text` escapes (newline and tab kept).

    For text that goes to a language model rather than a terminal (``caplet
    mcp``'s tool descriptions and errors): an escape there is noise a model
    may read as meaning, and an invisible character is a way to hide
    instructions from the person reviewing the same text.
    """
    if text.isascii():
        # The same characters (the ASCII controls but newline and tab), deleted by a
        # table: a tool's result of a megabyte went through the regex in 40 ms (attack14).
        return text.translate(_ASCII_CONTROLS)
    return _UNSAFE.sub("", text)


def one_line(text: str) -> str:
    """A multi-line message of caplet's on one line: ``"head:\\nA\\nB"`` as
    ``"head: A; B"``.

    For a log line, where :func:`safe_line` would show each newline as
    ``\\x0a``: a manifest's list of problems read as one run-on escape. Only
    newline separates; every other control is left for :func:`safe_line`.
    """
    if "\n" not in text:
        return text
    head, *rest = (part.strip() for part in text.split("\n"))
    rest = [part for part in rest if part]
    if not rest:
        return head
    return f"{head} {'; '.join(rest)}" if head.endswith(":") else "; ".join([head, *rest])
