"""safe_text / safe_line: untrusted text with every terminal command made visible."""

from __future__ import annotations

import unicodedata

import pytest

from caplet._display import BLANK_GLYPHS, listed, one_line, safe_line, safe_text, stripped_text

#: What a hostile description or model summary would hold: CSI erase line and column 1,
#: OSC 52 (write the clipboard), OSC 0 (window title), CR, a C1 CSI, DEL, bidi override
#: and isolate, a zero-width space, a tag character, a lone surrogate, a line separator.
HOSTILE = (
    "a\x1b[2K\x1b[1Gb\x1b]52;c;aGk=\x07c\x1b]0;pwned\x07d\re\x9b31mf\x7fg"
    "\u202eh\u2066i\u200bj\U000e0041k\udc80l\u2028m"
)
HOSTILE_SHOWN = (
    "a\\x1b[2K\\x1b[1Gb\\x1b]52;c;aGk=\\x07c\\x1b]0;pwned\\x07d\\x0de\\x9b31mf\\x7fg"
    "\\u202eh\\u2066i\\u200bj\\U000e0041k\\udc80l\\u2028m"
)

#: The categories escaped: control, format, surrogate, line and paragraph separator.
ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def test_every_terminal_command_is_shown_as_its_escape() -> None:
    assert safe_text(HOSTILE) == HOSTILE_SHOWN
    assert safe_line(HOSTILE) == HOSTILE_SHOWN


def test_safe_text_keeps_newlines_and_tabs_and_safe_line_escapes_them() -> None:
    assert safe_text("a\tb\nc\x00") == "a\tb\nc\\x00"
    assert safe_line("a\tb\nc\x00") == "a\\x09b\\x0ac\\x00"


def test_plain_text_and_backslashes_pass_unchanged() -> None:
    text = "naïve café — 日本語 🙂 C:\\path\\x1b [green]ok[/]"
    assert safe_text(text) == text
    assert safe_line(text) == text


def test_escaping_twice_changes_nothing() -> None:
    assert safe_text(safe_text(HOSTILE)) == HOSTILE_SHOWN
    assert safe_line(safe_line("x\ny")) == "x\\x0ay"


def test_the_escaped_set_is_exactly_unicodes_controls_and_format_characters() -> None:
    """Checked against this Python's Unicode database: a newer Unicode's format
    character that the hand-written ranges miss fails here."""
    missed: list[str] = []
    extra: list[str] = []
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        escaped = safe_line(char) != char
        if category in ESCAPED_CATEGORIES and not escaped:
            missed.append(f"U+{code:04X}")
        # Unassigned code points (Cn) may be escaped: a later Unicode makes some format.
        elif escaped and category not in ESCAPED_CATEGORIES | {"Cn"} and char not in BLANK_GLYPHS:
            extra.append(f"U+{code:04X} {category}")
    assert missed == []
    assert extra == []


@pytest.mark.parametrize("glyph", list(BLANK_GLYPHS))
def test_a_glyph_that_looks_blank_but_is_no_space_is_escaped(glyph: str) -> None:
    """attack34's note: U+2800, U+3164, U+115F, U+FFA0 passed ``safe_line`` and padded a
    line of a plugin's text on the decision screens."""
    assert not glyph.isspace()
    assert safe_line(f"a{glyph}b") == f"a\\u{ord(glyph):04x}b"
    assert stripped_text(f"a{glyph}b") == "ab"


def test_stripped_text_deletes_the_same_ascii_controls_by_its_table() -> None:
    # attack14: ASCII text (most of a tool's results) takes a table instead of the regex;
    # every ASCII character must be kept or deleted exactly as the regex decides.
    every = "".join(chr(code) for code in range(128))
    assert stripped_text(every) == "\t\n" + "".join(chr(code) for code in range(0x20, 0x7F))
    assert stripped_text(every + "é\u202e") == stripped_text(every) + "é"


def test_one_line_joins_a_messages_lines() -> None:
    assert one_line("invalid manifest (2 problems):\nentry: a\nname: b") == (
        "invalid manifest (2 problems): entry: a; name: b"
    )
    assert one_line("first\nsecond\n") == "first; second"
    assert one_line("head:\n") == "head:"
    # Only newline separates: any other control is safe_line's to escape.
    assert one_line("a\x0bb\rc") == "a\x0bb\rc"
    assert safe_line(one_line("a\x0bb")) == "a\\x0bb"


@pytest.mark.parametrize(
    ("item", "shown"),
    [
        ("fs.read:/tmp/notes, nothing else", "'fs.read:/tmp/notes, nothing else'"),
        ("fs.read:/tmp/a\uff0c env.read:X", "'fs.read:/tmp/a\uff0c env.read:X'"),
        ("fs.read:/tmp/a\u2002b", "'fs.read:/tmp/a\\u2002b'"),  # a blank no one sees
        ("fs.read:/tmp/it's", '"fs.read:/tmp/it\'s"'),
    ],
)
def test_a_listed_item_that_could_read_as_two_is_quoted(item: str, shown: str) -> None:
    # attack29: one capability, a folder named "notes, nothing else", joined with the
    # others in "it will be granted: ..." read as a grant and a remark beside it.
    assert listed([item, "env.read:HOME"]) == f"{shown}, env.read:HOME"


def test_listed_plain_capabilities_read_as_ever() -> None:
    items = ["fs.read:/srv/data", "net.http:https://api.example.com/v1/*?a=1&b=2", "app:x.y"]
    assert listed(items) == ", ".join(items)
    assert listed(["fs.write:${config.root}", "env.read:HOME"]) == (
        "fs.write:${config.root}, env.read:HOME"
    )
    assert listed([]) == ""
