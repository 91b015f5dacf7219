"""`caplet scan`: what looks like a path is a path (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cli.clikit import caplet, caplet_with_terminal_stderr, document


@pytest.mark.parametrize(
    "target", ["./plugins/foo", "/nonexistent", "plugins/foo", "dist/x.whl", "pkg.tar.gz", "~/x"]
)
def test_a_missing_path_is_no_such_file_not_no_such_plugin(tmp_path: Path, target: str) -> None:
    """It said "no plugin named ... in plugins"."""
    (tmp_path / "plugins").mkdir()
    result = caplet("scan", target, "--json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert document(result)["error"] == {
        "type": "UsageError",
        "message": f"cannot scan {target!r}: no such file or directory",
    }


def test_a_plain_name_is_still_a_plugin(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    result = caplet("scan", "helo", "--json", cwd=tmp_path)
    assert result.returncode == 2
    assert document(result)["error"]["type"] == "PluginNotFoundError"


def _tree(root: Path, files: int) -> Path:
    root.mkdir()
    for number in range(files):
        (root / f"m{number}.py").write_text(f"VALUE = {number}\n", encoding="utf-8")
    return root


def test_progress_goes_to_stderr_when_stderr_is_a_terminal_and_only_then(tmp_path: Path) -> None:
    """Issue 15 point 4: progress bars only when stdout was a terminal; now whenever stderr is
    one, whatever stdout is (a pipe, a --json document), and never into stdout."""
    from caplet._cli._cmd_scan import _PROGRESS_MIN_FILES

    (tmp_path / "plugins").mkdir()
    big = _tree(tmp_path / "big", _PROGRESS_MIN_FILES)
    small = _tree(tmp_path / "small", 2)
    for args in (("scan", str(big), "--json"), ("scan", str(big), str(small), "--json")):
        stdout, terminal, code = caplet_with_terminal_stderr(*args, cwd=tmp_path)
        assert code == 0, terminal
        assert "scanning" in terminal, args
        shown = json.loads(stdout)  # nothing but the document on stdout
        assert shown["ok"] is True
        piped = caplet(*args, cwd=tmp_path)
        assert piped.returncode == 0, piped.stderr
        assert piped.stderr == ""
        assert json.loads(piped.stdout)["ok"] is True
    # A text report too: the bar on the terminal, the report alone on stdout.
    stdout, terminal, code = caplet_with_terminal_stderr("scan", str(big), cwd=tmp_path)
    assert code == 0, terminal
    assert "scanning" in terminal
    assert "scanning" not in stdout
    assert stdout.startswith(f"Scan of {big} (package mode): {_PROGRESS_MIN_FILES} files")


def test_rich_s_terminal_variables_still_decide_for_a_piped_stderr(tmp_path: Path) -> None:
    """Whether stderr is a terminal is asked of rich only when it may be one (a tty, or
    one of rich's variables set): a --json scan piped into a log never imports rich
    (issue 16's start-up), and the variables rich honours still draw the bar."""
    from caplet._cli._cmd_scan import _PROGRESS_MIN_FILES

    (tmp_path / "plugins").mkdir()
    big = _tree(tmp_path / "big", _PROGRESS_MIN_FILES)
    forced = caplet("scan", str(big), "--json", cwd=tmp_path, env={"TTY_COMPATIBLE": "1"})
    assert forced.returncode == 0, forced.stderr
    assert "scanning" in forced.stderr
    assert json.loads(forced.stdout)["ok"] is True
    piped = caplet("scan", str(big), "--json", cwd=tmp_path, env={"TTY_COMPATIBLE": "0"})
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""


def test_a_small_scan_draws_no_bar_on_a_terminal(tmp_path: Path) -> None:
    """Fewer files than _PROGRESS_MIN_FILES end before a bar would help: none is drawn
    (before, an indeterminate bar was drawn at the start and erased at once)."""
    (tmp_path / "plugins").mkdir()
    small = _tree(tmp_path / "small", 3)
    stdout, terminal, code = caplet_with_terminal_stderr("scan", str(small), "--json", cwd=tmp_path)
    assert code == 0, terminal
    assert json.loads(stdout)["ok"] is True
    assert "scanning" not in terminal
    assert terminal.strip() == "", repr(terminal)


def test_a_dropper_padded_too_deep_fails_a_package_scan(tmp_path: Path) -> None:
    """Attack (scanfuzz): a 250-level expression made the file "too complex", a
    warning in package mode, and the dropper beside it passed with exit 0."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(
        "x = " + "-" * 250 + "1\n"
        'import base64\nexec(base64.b64decode("aW1wb3J0IG9zOyBvcy5zeXN0ZW0oJ2lkJyk="))\n'
    )
    result = caplet("scan", "--mode", "package", "--json", "pkg", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [finding] = [f for f in document(result)["findings"] if f["rule_id"] == "CPL-SCAN-002"]
    assert finding["severity"] == "danger"
    assert finding["file"] == "mod.py"
    assert "nesting deeper than 200 levels" in finding["message"]
    assert "review the file by hand" in finding["message"]
