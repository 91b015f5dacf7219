"""Plugin commands at the edges: a plugins directory that is not there (issue 15)."""

from __future__ import annotations

from pathlib import Path

from tests._cli.clikit import caplet, document


def test_a_missing_plugins_directory_is_a_usage_error_not_an_empty_list(tmp_path: Path) -> None:
    """`caplet list -p nonexist` exited 0 silently."""
    for command in (("list",), ("info", "x"), ("audit", "x")):
        result = caplet(*command, "-p", "nonexist", "--json", cwd=tmp_path)
        assert result.returncode == 2, (command, result.stderr)
        message = document(result)["error"]["message"]
        assert message.startswith("no plugins directory 'nonexist'; pass --plugins-dir"), message
    (tmp_path / "afile").write_text("x")
    result = caplet("list", "-p", "afile", cwd=tmp_path)
    assert result.returncode == 2
    assert "'afile' is not a directory" in result.stderr
    # The log is about the state, not the plugins: no plugins directory is needed.
    log = caplet("log", "-p", "nonexist", "--state-dir", str(tmp_path / "s"), cwd=tmp_path)
    assert log.returncode == 0, log.stderr
