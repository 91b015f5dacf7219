"""Tables and lines that never split a word, at any width (issue 15, point 4)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from rich.console import Console
from rich.text import Text

from caplet._cli._table import fitted_widths, print_line, print_table
from tests._cli.clikit import caplet, document
from tests.conftest import EXAMPLES, PluginFactory


def _console(width: int) -> tuple[Console, io.StringIO]:
    sink = io.StringIO()
    return Console(file=sink, width=width, color_system=None, legacy_windows=False), sink


def _assert_whole(words: str, shown: str) -> None:
    """Every word of ``words`` is one whole word of ``shown`` (none split over two lines)."""
    tokens = set(shown.split())
    for word in words.split():
        assert word in tokens, (word, shown)


_DESCRIPTION = "Runs shell commands (an example of a plugin caplet refuses to load)."


def test_a_table_when_every_columns_longest_word_fits() -> None:
    console, sink = _console(40)
    print_table(console, "Plugins", ("name", "description"), [("shell-out", _DESCRIPTION)])
    shown = sink.getvalue()
    lines = shown.splitlines()
    assert lines[0].rstrip() == "Plugins"
    assert lines[1].startswith("┏")
    assert "┃ name      ┃ description" in lines[2]
    # The long description wraps at spaces inside its column, every line within 40.
    assert len([line for line in lines if line.startswith("│")]) > 1
    assert max(len(line) for line in lines) <= 40
    _assert_whole(f"shell-out {_DESCRIPTION}", shown.replace("│", " "))


def test_the_list_layout_when_a_longest_word_does_not_fit() -> None:
    console, sink = _console(20)
    rows = [("shell-out", "discovered", "line one\nline two")]
    print_table(console, "Plugins (1)", ("name", "state", "notes"), rows)
    assert sink.getvalue() == (
        "Plugins (1)\n"
        "- shell-out\n"
        "    state: discovered\n"
        "    notes: line one\n"
        "           line two\n"
    )


def test_the_widest_column_gives_way_first_and_never_below_its_longest_word() -> None:
    rows = [("short", "one two three four five six")]
    # 2 columns take 7 characters of box and padding: 23 are left for 5 + 27.
    assert fitted_widths(("a", "b"), rows, 30) == [5, 18]
    # Down to the longest words (5 + 5) the table still fits; one character less does not.
    assert fitted_widths(("a", "b"), rows, 17) == [5, 5]
    assert fitted_widths(("a", "b"), rows, 16) is None


def test_a_line_wraps_at_spaces_unless_a_word_is_longer_than_the_console() -> None:
    console, sink = _console(20)
    print_line(console, Text("alpha beta gamma delta epsilon"))
    assert sink.getvalue() == "alpha beta gamma \ndelta epsilon\n"
    console, sink = _console(20)
    long_word = "/usr/local/bin/" + "x" * 30
    print_line(console, Text(f"run {long_word} now"))
    assert sink.getvalue() == f"run {long_word} now\n"


def test_caplet_list_never_splits_a_word_when_narrow(tmp_path: Path) -> None:
    """Issue 15: piped or narrow tables split words ("discove/red", "shell-o/ut")."""
    shutil.copytree(EXAMPLES, tmp_path / "plugins")
    state = ("--state-dir", str(tmp_path / "state"))
    plugins = document(caplet("list", *state, "--json", cwd=tmp_path))["plugins"]
    narrow = caplet("list", *state, cwd=tmp_path, env={"COLUMNS": "40"})
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert lines[0] == f"Plugins ({len(plugins)})"
    for plugin in plugins:
        assert f"- {plugin['name']}" in lines
        assert "    state: discovered" in lines
        assert f"    description: {plugin['description']}" in lines
        _assert_whole(" ".join(plugin["capabilities"]), narrow.stdout)
    wide = caplet("list", *state, cwd=tmp_path, env={"COLUMNS": "250"})
    assert wide.stdout.splitlines()[1].startswith("┏")
    for plugin in plugins:
        _assert_whole(f"{plugin['name']} {plugin['description']}", wide.stdout.replace("│", " "))


#: A finding whose quoted source line holds a word longer than 40 columns.
_LONG_WORD = """
import subprocess

def create_functions(config):
    def run(ctx):
        return subprocess.run(["/usr/local/bin/an_extraordinarily_long_program_name"])
    return {"main": {"run": run}}
"""


def test_caplet_scan_never_splits_a_word_when_narrow(
    tmp_path: Path, make_plugin: PluginFactory
) -> None:
    shutil.copytree(EXAMPLES / "shell-out", tmp_path / "plugins" / "shell-out")
    make_plugin("long-word", source=_LONG_WORD)
    state = ("--state-dir", str(tmp_path / "state"))
    for name in ("shell-out", "long-word"):
        findings = document(caplet("scan", name, *state, "--json", cwd=tmp_path))["findings"]
        assert findings, name
        narrow = caplet("scan", name, *state, cwd=tmp_path, env={"COLUMNS": "40"})
        assert narrow.returncode == 1, narrow.stderr
        for finding in findings:
            _assert_whole(f"{finding['rule_id']} {finding['message']}", narrow.stdout)
            if max(map(len, finding["excerpt"].split())) > 40:
                # A word longer than the line: the source line is written whole.
                assert f"            {finding['excerpt']}" in narrow.stdout.splitlines()
            else:
                _assert_whole(finding["excerpt"], narrow.stdout)
    rules = document(caplet("scan", "--rules", "--json", cwd=tmp_path))["rules"]
    listed = caplet("scan", "--rules", cwd=tmp_path, env={"COLUMNS": "40"})
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert not any(line.startswith("┏") for line in lines)
    for rule in rules:
        assert f"- {rule['id']}" in lines
        assert f"    family: {rule['family']}" in lines
        assert f"    why: {rule['rationale']}" in lines
