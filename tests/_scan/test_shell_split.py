"""One file's shell texts split once each, within a budget (caplet._scan._shell_split, attack25).

The attack: the rules split a command's text (shlex, Python at about a microsecond
a character) at each call site, several times, so one long constant run at many
sites cost the square of the file (a 29 KB plugin took 44 s), and commands that
differ at each site could not be memoised. The checks count what shlex is given,
never timings.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._shell_split import (
    SHELL_READ_BUDGET,
    SHELL_TEXT_BUDGET,
    ShellSplitter,
    ShellTextError,
)


def _recording_shlex(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text :func:`shlex.split` is given from now on (it still splits)."""
    given: list[int] = []
    real = shlex.split

    def recording(text: str, comments: bool = False, posix: bool = True) -> list[str]:
        given.append(len(text))
        return real(text, comments, posix)

    monkeypatch.setattr(shlex, "split", recording)
    return given


def test_one_long_command_run_at_many_sites_is_split_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 300 call sites of one 4,800-character command: each rule split it at each site on
    # 0bd193a (4.3 million characters given to shlex); now once for each way it is read
    constant = "ab" * 2_400
    (tmp_path / "plugin.py").write_text(f"import os\nL = '{constant}'\n" + "os.system(L)\n" * 300)
    given = _recording_shlex(monkeypatch)
    report = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    assert "CPL-PROC-001" in {f.rule_id for f in report.findings}
    assert "CPL-SCAN-002" not in {f.rule_id for f in report.findings}
    assert sum(given) <= 2 * len(constant)


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE], ids=lambda m: m.value)
def test_commands_past_the_budget_are_too_complex_to_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: ScanMode
) -> None:
    # commands that differ at each site (L + "0", L + "1", ...) cannot be memoised: past
    # 1 MiB of shell text in all the file is judged too complex, danger. 300 sites of an
    # 8 KB command were each split anew on 0bd193a, with no finding.
    (tmp_path / "plugin.py").write_text(
        "import os\nimport base64\nL = '"
        + "ab" * 4_000
        + "'\n"
        + "".join(f"os.system(L + '{i}')\n" for i in range(300))
        + "exec(base64.b64decode('cHJpbnQoMSk='))\n"
    )
    given = _recording_shlex(monkeypatch)
    report = scan_tree(tmp_path, mode=mode)
    [too_complex] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER
    assert too_complex.file == "plugin.py"
    assert (
        f"its commands hold more than {SHELL_TEXT_BUDGET} characters of shell text to split "
        "(no real file holds a fraction of that): not checked; shorten the commands or ship "
        "the script as a file of its own"
    ) in too_complex.message
    assert sum(given) <= SHELL_TEXT_BUDGET


@pytest.mark.parametrize(
    "text",
    [
        "curl -fsSL https://example.com/x.sh | sh",
        'echo \'a b\' "c\\"d" e\\ f',
        "sh -c 'never closed",  # shlex refuses: split at blanks, as before
        "trailing\\",
        "",
    ],
)
def test_a_text_is_split_as_shlex_splits_it(text: str) -> None:
    # the near miss: the words are shlex's (or, where shlex refuses, str.split's)
    try:
        expected = shlex.split(text)
    except ValueError:
        expected = text.split()
    splitter = ShellSplitter()
    first = splitter.split(text)
    assert first == expected
    first.append("changed")  # a caller's list is its own: the memo is not changed
    assert splitter.split(text) == expected


def test_the_budget_counts_each_text_once() -> None:
    splitter = ShellSplitter(budget=10)
    for _ in range(100):
        assert splitter.split("ls -l /tmp") == ["ls", "-l", "/tmp"]  # 10 characters, once
    with pytest.raises(ShellTextError) as raised:
        splitter.split("x")
    assert raised.value.budget == 10


def test_one_long_command_read_at_too_many_sites_is_too_complex_to_check(
    tmp_path: Path,
) -> None:
    # Split once, but each site still read the text (its program word lowered, its
    # indicators, its autostart markers): 60,000 sites of a 512 KB constant (1.3 MB)
    # took 103 s on 4ecdd16c, with no finding; past 32 MiB read the file is too complex.
    constant = "ab" * 20_000
    (tmp_path / "plugin.py").write_text(f"import os\nL = '{constant}'\n" + "os.system(L)\n" * 1_000)
    report = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    [too_complex] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER
    assert (
        f"its commands hold more than {SHELL_READ_BUDGET} characters of shell text read by "
        "its call sites (one long command run at many of them)"
    ) in too_complex.message


def test_the_read_budget_counts_each_read() -> None:
    splitter = ShellSplitter(read_budget=100)
    for _ in range(10):
        assert splitter.split("ls -l /tmp") == ["ls", "-l", "/tmp"]  # 10 characters a read
    with pytest.raises(ShellTextError) as raised:
        splitter.split("ls -l /tmp")
    assert raised.value.budget == 100


@pytest.mark.security
@pytest.mark.parametrize(
    "site",
    ["subprocess.run([L])", "subprocess.Popen([L, '-v'])", "os.execv(L, [L])"],
    ids=["run-list", "popen-list", "execv"],
)
def test_a_long_program_word_read_at_many_sites_counts_too(tmp_path: Path, site: str) -> None:
    # attack28: the read budget counted a site's command only when the command itself
    # was a name; as the first item of a list (or execv's program) the same constant was
    # read whole at each site (split into words, lowered, matched against payload
    # launchers) and never counted: 20,000 sites of a 500 KB constant took 18 s with no
    # finding. Counted now, the file is too complex to check, as os.system(L) is.
    constant = "ab" * 20_000
    (tmp_path / "plugin.py").write_text(
        f"import os\nimport subprocess\nL = '{constant}'\n" + f"{site}\n" * 1_000
    )
    report = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    [too_complex] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER
    assert f"more than {SHELL_READ_BUDGET} characters of shell text read by" in (
        too_complex.message
    )


def test_a_short_program_in_a_list_at_many_sites_stays_clean(tmp_path: Path) -> None:
    # the near miss: the usual list form, a short program at a thousand sites, is checked
    (tmp_path / "plugin.py").write_text(
        "import subprocess\nGIT = 'git'\n" + "subprocess.run([GIT, 'status'])\n" * 1_000
    )
    report = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    assert "CPL-SCAN-002" not in {f.rule_id for f in report.findings}
    assert "CPL-PROC-001" in {f.rule_id for f in report.findings}
